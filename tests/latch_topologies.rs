//! The count-down latch on a Redis Cluster and behind Sentinel, against real processes:
//! latches spread over every primary, waiters opened through sharded (or, when asked,
//! classic) pub/sub, names whose braces would split key and channel refused, and a waiter
//! that outlives a Sentinel failover.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{LockClient, LockError, ShardedSubscriptionMode};
use std::collections::HashSet;
use std::time::{Duration, Instant};
use support::topology::{RedisCluster, SentinelSetup};
use support::{cluster_client, eventually, sentinel_client};
use tokio::task::JoinHandle;

/// How soon a message wakes a waiter, with room for a loaded machine (below the 5 s
/// fallback, so only the message can make it).
const WAKE_BOUND: Duration = Duration::from_secs(3);
const PROMPT: Duration = Duration::from_secs(20);

fn channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// A waiter opened, soon enough after `since` that only a message made it.
async fn assert_opened_promptly(waiting: JoinHandle<(bool, Instant)>, since: Instant) {
    let (opened, at) = tokio::time::timeout(PROMPT, waiting)
        .await
        .unwrap()
        .unwrap();
    assert!(opened, "not opened");
    assert!(at - since < WAKE_BOUND, "opened after {:?}", at - since);
}

/// A bounded wait on latch `name` in a task: whether it opened, and when.
fn waiter(client: &LockClient, name: &str) -> JoinHandle<(bool, Instant)> {
    let latch = client.count_down_latch(name).unwrap();
    tokio::spawn(async move {
        let opened = latch.wait_timeout(Duration::from_secs(60)).await.unwrap();
        (opened, Instant::now())
    })
}

#[actix_rt::test]
async fn latches_on_every_primary_open_through_sharded_pubsub() {
    let cluster = RedisCluster::start(3, 0);
    let a = cluster_client(&cluster, |c| c).await;
    let b = cluster_client(&cluster, |c| c).await;
    let names: Vec<String> = (0..12).map(|i| format!("batch:{i}")).collect();
    let owners: HashSet<u16> = names.iter().map(|n| cluster.primary_for_key(n)).collect();
    assert_eq!(owners.len(), 3, "the names landed on {owners:?}");
    for name in &names {
        let latch = b.count_down_latch(name).unwrap();
        assert!(latch.try_set_count(2).await.unwrap());
        assert_eq!(latch.count_down().await.unwrap(), 1);
    }
    let waiters: Vec<_> = names.iter().map(|name| waiter(&a, name)).collect();
    for name in &names {
        let channel = channel(name);
        eventually("the waiter subscribed on its shard", PROMPT, || {
            std::future::ready(cluster.sharded_subscribers(&channel) == 1)
        })
        .await;
    }
    let counted_at = Instant::now();
    for name in &names {
        assert_eq!(
            b.count_down_latch(name)
                .unwrap()
                .count_down()
                .await
                .unwrap(),
            0
        );
    }
    for waiter in waiters {
        assert_opened_promptly(waiter, counted_at).await;
    }
    assert!(
        cluster.command_calls_total("spublish") >= 24,
        "sets and zeros"
    );
    assert_eq!(cluster.command_calls_total("publish"), 0);
    assert_eq!(cluster.command_calls_total("subscribe"), 0);
    for name in &names {
        let channel = channel(name);
        eventually("every subscription is dropped", PROMPT, || {
            std::future::ready(cluster.sharded_subscribers(&channel) == 0)
        })
        .await;
    }
    assert_eq!(cluster.keys_on_all(), Vec::<String>::new());
}

#[actix_rt::test]
async fn a_latch_name_with_braces_is_refused_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let client = cluster_client(&cluster, |c| c).await;
    for bad in ["{batch}:7", "batch:{7}", "x{}y", "a}b"] {
        let refused = client.count_down_latch(bad);
        assert!(
            matches!(&refused, Err(LockError::InvalidName { reason }) if reason.contains("brace")),
            "{bad} accepted: {refused:?}"
        );
    }
    // Without braces the key and the channel share the name's slot.
    let latch = client.count_down_latch("batch:7").unwrap();
    assert_eq!(
        cluster.slot_for_key("batch:7"),
        cluster.slot_for_key(&channel("batch:7"))
    );
    assert!(latch.try_set_count(1).await.unwrap());
    assert_eq!(latch.count_down().await.unwrap(), 0);
}

#[actix_rt::test]
async fn with_sharded_subscription_off_a_cluster_latch_uses_classic_pubsub() {
    let cluster = RedisCluster::start(3, 0);
    let off = |c: actix_distributed_lock::ClientConfig| {
        c.sharded_subscription(ShardedSubscriptionMode::Off)
    };
    let a = cluster_client(&cluster, off).await;
    let b = cluster_client(&cluster, off).await;
    let latch = b.count_down_latch("classic").unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    let waiting = waiter(&a, "classic");
    eventually("the waiter subscribed (classic)", PROMPT, || {
        let classic = cluster.subscribers_anywhere(&channel("classic"));
        std::future::ready(classic == 1 && cluster.sharded_subscribers(&channel("classic")) == 0)
    })
    .await;
    let counted_at = Instant::now();
    assert_eq!(latch.count_down().await.unwrap(), 0);
    assert_opened_promptly(waiting, counted_at).await;
    assert!(cluster.command_calls_total("publish") >= 2);
    assert_eq!(cluster.command_calls_total("spublish"), 0);
}

/// Subscribers of `channel` on the data node at `port`.
async fn subscribers_on(port: u16, channel: &str) -> i64 {
    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}/")) else {
        return 0;
    };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
        return 0;
    };
    let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(&mut conn)
        .await
        .unwrap_or_default();
    counts.first().map_or(0, |(_, n)| *n)
}

#[actix_rt::test]
async fn behind_sentinel_a_waiter_is_opened_before_and_after_a_failover() {
    let mut setup = SentinelSetup::start();
    let a = sentinel_client(&setup, |c| c).await;
    let b = sentinel_client(&setup, |c| c.sync_replicas(1, Duration::from_secs(2))).await;
    let name = "deploy:canaries";

    // On the primary the sentinels name.
    let latch = b.count_down_latch(name).unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    let waiting = waiter(&a, name);
    let primary = setup.primary_port();
    eventually(
        "the waiter subscribed on the primary",
        PROMPT,
        || async move { subscribers_on(primary, &channel(name)).await == 1 },
    )
    .await;
    let counted_at = Instant::now();
    assert_eq!(latch.count_down().await.unwrap(), 0);
    assert_opened_promptly(waiting, counted_at).await;

    // A waiter that outlives a failover: its client follows the new primary, subscribes
    // there again, and the count-down on the new primary opens it.
    assert!(latch.try_set_count(1).await.unwrap());
    // The replica has the count before the primary goes (a replica-synced acquire of a
    // lock on the same connection waits for every write before it).
    let sync = b.lock("sync").unwrap().acquire().await.expect("replicated");
    sync.unlock().await.unwrap();
    let waiting = waiter(&a, name);
    eventually(
        "the waiter subscribed on the primary",
        PROMPT,
        || async move { subscribers_on(primary, &channel(name)).await == 1 },
    )
    .await;
    let old = setup.kill_primary();
    let new = setup
        .wait_for_failover_async(old, Duration::from_secs(40))
        .await;
    assert_ne!(old, new);
    eventually(
        "the waiter subscribed on the new primary",
        PROMPT,
        || async move { subscribers_on(new, &channel(name)).await == 1 },
    )
    .await;
    eventually("the count-down reaches the new primary", PROMPT, || async {
        latch.count_down().await.is_ok_and(|left| left == 0)
    })
    .await;
    let (opened, _) = tokio::time::timeout(PROMPT, waiting)
        .await
        .unwrap()
        .unwrap();
    assert!(opened, "the waiter was not opened after the failover");
}
