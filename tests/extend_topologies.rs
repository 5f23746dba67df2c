//! Leases set again and owners by id on a Redis Cluster (every key of a call in the lock's
//! slot: a reader's timeout keys, a semaphore's zset) and behind Sentinel.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{
    AcquireOptions, LockClient, LockGuard, LockOwner, PermitOptions, Released,
};
use futures_util::future::join_all;
use std::time::{Duration, Instant};
use support::kinds::lock_of_kind;
use support::topology::{RedisCluster, SentinelSetup};
use support::{cluster_client, sentinel_client};

const FIRST: Duration = Duration::from_millis(1000);
const LONGER: Duration = Duration::from_secs(3);

/// `PTTL` of `key` wherever a connection `conn` sends it.
fn pttl(conn: &mut impl redis::ConnectionLike, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(conn).expect("PTTL")
}

/// Takes `name` as `kind` with the first lease, extends it, and checks it outlives that
/// lease with nobody else in; returns the guard.
async fn extend_and_hold(
    client: &LockClient,
    rival: &LockClient,
    kind: &'static str,
    name: String,
) -> LockGuard {
    let taken = Instant::now();
    let guard = lock_of_kind(client, kind, &name)
        .acquire_with(AcquireOptions::new().lease(FIRST))
        .await
        .unwrap();
    guard.extend(LONGER).await.unwrap();
    tokio::time::sleep_until((taken + FIRST + FIRST / 2).into()).await;
    assert!(!guard.is_lost(), "{kind} {name}: lost at the old end");
    let rival_kind = if kind == "read" { "write" } else { kind };
    let other = lock_of_kind(rival, rival_kind, &name)
        .try_acquire()
        .await
        .unwrap();
    assert!(other.is_none(), "{kind} {name}: another holder got in");
    guard
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extends_permit_updates_and_releases_by_id_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let client = cluster_client(&cluster, |c| c.client_id("cluster-workers")).await;
    let rival = cluster_client(&cluster, |c| c).await;
    let kinds = ["reentrant", "fenced", "fast", "fair", "read", "write"];
    // Plain names (spread over the slots) and names with a hash tag of their own.
    let runs = kinds.iter().flat_map(|kind| {
        [format!("ext:{kind}"), format!("ext:{{{kind}}}:tagged")]
            .map(|name| extend_and_hold(&client, &rival, kind, name))
    });
    let guards = join_all(runs).await;
    let mut conn = cluster
        .client()
        .get_connection()
        .expect("cluster connection");
    for guard in &guards {
        let left = pttl(&mut conn, guard.key());
        assert!(left > 1000, "{}: {left} ms", guard.key());
        assert!(guard.remaining_lease().as_millis() as i64 <= left);
    }
    for guard in guards {
        guard.unlock().await.unwrap();
    }

    // A permit's lease, on its semaphore's slot.
    let slots = client.expirable_semaphore("render-slots").unwrap();
    assert!(slots.try_set_permits(1).await.unwrap());
    let options = PermitOptions::new().lease(FIRST).wait(Duration::ZERO);
    let taken = Instant::now();
    let permit = slots.acquire_with(options).await.unwrap();
    permit.update_lease(LONGER).await.unwrap();
    let elsewhere = rival.expirable_semaphore("render-slots").unwrap();
    tokio::time::sleep_until((taken + FIRST + FIRST / 2).into()).await;
    assert!(!permit.is_lost());
    assert!(elsewhere.try_acquire(1).await.unwrap().is_none());
    assert!(elsewhere
        .update_lease(permit.permit_id(), LONGER)
        .await
        .unwrap());
    permit.release().await.unwrap();

    // A re-entered reader released by id from a client that does not count it: the
    // foreign unlock's keys (timeout keys, the tag) are all in the lock's slot.
    let other = cluster_client(&cluster, |c| c.client_id("cluster-workers")).await;
    let owner = LockOwner::from_id(7);
    let read = lock_of_kind(&client, "read", "doc:{7}");
    let _outer = read
        .acquire_with(AcquireOptions::new().owner(owner))
        .await
        .unwrap();
    let _inner = read
        .acquire_with(AcquireOptions::new().owner(owner))
        .await
        .unwrap();
    let theirs = lock_of_kind(&other, "read", "doc:{7}");
    assert_eq!(theirs.hold_count(owner).await.unwrap(), 2);
    assert_eq!(
        theirs.unlock_as(owner).await.unwrap(),
        Released::StillHeld { holds: 1 }
    );
    assert_eq!(theirs.unlock_as(owner).await.unwrap(), Released::Unlocked);
    assert!(!theirs.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extends_permit_updates_and_releases_by_id_behind_sentinel() {
    let setup = SentinelSetup::start();
    let client = sentinel_client(&setup, |c| c.client_id("sentinel-workers")).await;
    let rival = sentinel_client(&setup, |c| c).await;
    let runs = ["reentrant", "fast", "read", "write"]
        .map(|kind| extend_and_hold(&client, &rival, kind, format!("sext:{kind}")));
    let guards = join_all(runs).await;
    let mut conn = redis::Client::open(setup.primary_url())
        .unwrap()
        .get_connection()
        .unwrap();
    for guard in &guards {
        let left = pttl(&mut conn, guard.key());
        assert!(left > 1000, "{}: {left} ms", guard.key());
    }
    for guard in guards {
        guard.unlock().await.unwrap();
    }

    let slots = client.expirable_semaphore("slots").unwrap();
    assert!(slots.try_set_permits(1).await.unwrap());
    let options = PermitOptions::new().lease(FIRST).wait(Duration::ZERO);
    let permit = slots.acquire_with(options).await.unwrap();
    permit.update_lease(LONGER).await.unwrap();
    assert!(permit.remaining_lease() > LONGER - FIRST);
    permit.release().await.unwrap();

    let other = sentinel_client(&setup, |c| c.client_id("sentinel-workers")).await;
    let job = LockOwner::from_id(42);
    let _guard = client
        .lock("job")
        .unwrap()
        .acquire_with(AcquireOptions::new().owner(job))
        .await
        .unwrap();
    let theirs = other.lock("job").unwrap();
    assert!(theirs.is_held_by(job).await.unwrap());
    assert_eq!(theirs.unlock_as(job).await.unwrap(), Released::Unlocked);
}
