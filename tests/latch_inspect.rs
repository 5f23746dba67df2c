//! The lock inspector and count-down latches, against real redis-server processes: a latch
//! someone waits on is listed and shown as a latch with its count (one nobody waits on
//! has a semaphore's shape and is shown as one), a watch follows its count down to its
//! opening, and a force-unlock is refused (nobody holds a latch). On one server and on a
//! cluster.
#![cfg(feature = "inspector")]
// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::inspect::{Change, InspectedKind, LockWatch, WatchEvent};
use actix_distributed_lock::{LockClient, LockError};
use std::time::Duration;
use support::topology::RedisCluster;
use support::{client, cluster_client, eventually, RedisServer};

const PROMPT: Duration = Duration::from_secs(10);

/// A waiter of latch `name` in a task (it waits until the test ends or the latch opens).
fn waiter(client: &LockClient, name: &str) -> tokio::task::JoinHandle<bool> {
    let latch = client.count_down_latch(name).unwrap();
    tokio::spawn(async move { latch.wait_timeout(Duration::from_secs(60)).await.unwrap() })
}

/// Until `client`'s inspector lists `name` as a latch (its waiter has subscribed).
async fn until_listed_as_latch(client: &LockClient, name: &str) {
    let inspector = client.inspector();
    eventually("the latch is listed as one", PROMPT, || async {
        let locks = inspector.list(None).await.unwrap();
        locks
            .iter()
            .any(|l| l.name == name && l.kind == InspectedKind::Latch)
    })
    .await;
}

async fn next_event(watch: &mut LockWatch) -> WatchEvent {
    tokio::time::timeout(PROMPT, watch.next())
        .await
        .expect("a watch event")
        .expect("the watch goes on")
        .expect("no error")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_awaited_latch_is_listed_shown_and_watched_with_its_count() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let other = support::client(&server).await;
    let name = "inspect:latch";
    let latch = client.count_down_latch(name).unwrap();
    assert!(latch.try_set_count(3).await.unwrap());
    let inspector = client.inspector();

    // Nobody waits: the shape of a semaphore, and shown as one.
    let shown = inspector.show(name).await.unwrap().expect("a key");
    assert_eq!(shown.kind, InspectedKind::Semaphore);
    assert_eq!((shown.permits, shown.count), (Some(3), None));

    let waiting = waiter(&other, name);
    until_listed_as_latch(&client, name).await;
    let listed = inspector.list(Some("inspect:*")).await.unwrap();
    assert_eq!(listed.len(), 1);
    let lock = &listed[0];
    assert_eq!(lock.kind, InspectedKind::Latch);
    assert_eq!(lock.kind.as_str(), "latch");
    assert_eq!((lock.count, lock.permits), (Some(3), None));
    assert!(lock.holders.is_empty() && lock.waiters.is_empty());
    assert_eq!(lock.ttl_ms, None);
    assert_eq!(inspector.show(name).await.unwrap().as_ref(), Some(lock));

    // Nobody holds a latch: nothing to force out.
    let refused = inspector.force_unlock(name).await;
    assert!(
        matches!(&refused, Err(LockError::InvalidConfig { reason }) if reason.contains("count-down latch")),
        "{refused:?}"
    );
    assert_eq!(latch.count().await.unwrap(), 3, "untouched");

    let mut watch = inspector.watch(name).unwrap();
    let first = next_event(&mut watch).await;
    assert_eq!(first.lock.as_ref().and_then(|l| l.count), Some(3));
    assert!(
        first.changes.contains(&Change::Counted { count: 3 }),
        "{first:?}"
    );
    assert_eq!(latch.count_down().await.unwrap(), 2);
    let counted = next_event(&mut watch).await;
    assert_eq!(counted.changes, [Change::Counted { count: 2 }]);
    latch.count_down().await.unwrap();
    assert!(next_event(&mut watch)
        .await
        .changes
        .contains(&Change::Counted { count: 1 }));
    assert_eq!(latch.count_down().await.unwrap(), 0);
    // The count reached zero: its message, and no latch any more.
    let opened = next_event(&mut watch).await;
    assert_eq!(opened.lock, None, "{opened:?}");
    let channel = "redisson_countdownlatch__channel__{inspect:latch}".to_string();
    assert!(
        opened.changes.contains(&Change::Message { channel }),
        "{opened:?}"
    );
    assert!(tokio::time::timeout(PROMPT, waiting)
        .await
        .unwrap()
        .unwrap());
    assert_eq!(inspector.show(name).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_an_awaited_latch_is_listed_and_shown_as_one() {
    let cluster = RedisCluster::start(3, 0);
    let client = cluster_client(&cluster, |c| c).await;
    let other = cluster_client(&cluster, |c| c).await;
    let names = ["inspect:a", "inspect:b", "inspect:c", "inspect:d"];
    let mut waiters = Vec::new();
    for name in names {
        let latch = client.count_down_latch(name).unwrap();
        assert!(latch.try_set_count(2).await.unwrap());
        waiters.push(waiter(&other, name));
    }
    for name in names {
        until_listed_as_latch(&client, name).await;
        let shown = client.inspector().show(name).await.unwrap().expect("a key");
        assert_eq!((shown.kind, shown.count), (InspectedKind::Latch, Some(2)));
    }
    for name in names {
        let latch = client.count_down_latch(name).unwrap();
        latch.count_down().await.unwrap();
        latch.count_down().await.unwrap();
    }
    for waiter in waiters {
        assert!(tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap());
    }
}
