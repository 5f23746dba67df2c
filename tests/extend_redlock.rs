//! `RedLockGuard::extend`: a fixed-lease RedLock hold's lease set again on every node it
//! is held on; its validity (and `lost()`) follow the new end once a quorum confirmed it.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{AcquireOptions, LockClient, LockError, RedLock, RedLockGuard};
use redis::AsyncCommands;
use std::time::{Duration, Instant};
use support::RedisServer;

const FIRST: Duration = Duration::from_millis(1000);
const LONGER: Duration = Duration::from_secs(3);

/// Takes `lock` with a fixed `lease` until all three nodes granted it (a node that answers
/// after the node timeout on a loaded machine is left out of a hold: then it is taken
/// again), and the instant before the acquire that did.
async fn acquire_everywhere(lock: &RedLock, lease: Duration) -> (RedLockGuard, Instant) {
    for _ in 0..5 {
        let taken = Instant::now();
        let guard = lock
            .acquire_with(AcquireOptions::new().lease(lease))
            .await
            .unwrap();
        support::eventually("every node answered", Duration::from_secs(5), || async {
            guard.nodes_pending() == 0
        })
        .await;
        if guard.nodes_held() == 3 {
            return (guard, taken);
        }
        let _ = guard.unlock().await;
    }
    panic!("no acquire of five got all three nodes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_extends_on_a_quorum_and_is_lost_at_the_new_end() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let mut clients: Vec<LockClient> = Vec::new();
    for server in &servers {
        clients.push(support::client(server).await);
    }
    // Every node in the hold, even when one answers slowly on a loaded machine (the
    // default node timeout for a 1 s lease is 20 ms).
    let lock = RedLock::new(&clients, "payout")
        .unwrap()
        .node_timeout(Duration::from_millis(300));
    // Every node's grant is in (a grant that comes later keeps its first lease).
    let (guard, taken) = acquire_everywhere(&lock, FIRST).await;
    let before = Instant::now();
    guard.extend(LONGER).await.unwrap();
    let validity = guard.validity();
    assert!(
        validity > LONGER - FIRST / 2 && validity <= LONGER,
        "{validity:?}"
    );
    assert!(guard.remaining_lease() <= validity);
    for server in &servers {
        let left: i64 = server.conn().await.pttl("payout").await.unwrap();
        assert!(left > 2000, "a node has {left} ms");
    }
    tokio::time::sleep_until((taken + FIRST + FIRST / 2).into()).await;
    assert!(!guard.is_lost(), "lost at the old end");
    let others: Vec<LockClient> = {
        let mut others = Vec::new();
        for server in &servers {
            others.push(support::client(server).await);
        }
        others
    };
    let rival = RedLock::new(&others, "payout").unwrap();
    assert!(rival.try_acquire().await.unwrap().is_none());
    tokio::time::timeout(LONGER + Duration::from_secs(1), guard.lost())
        .await
        .expect("lost at the new end");
    let lost = Instant::now();
    assert!(lost >= before + LONGER - RedLock::clock_drift(LONGER));

    // Cut back: lost sooner; gone on a node first: the hold keeps its quorum.
    let (guard, _) = acquire_everywhere(&lock, Duration::from_secs(30)).await;
    let _: () = servers[0].conn().await.del("payout").await.unwrap();
    let short = Duration::from_millis(500);
    guard.extend(short).await.unwrap();
    assert!(guard.validity() <= short);
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("lost at the shorter end");

    // Gone on a majority: refused as lost, and the hold is lost.
    let (guard, _) = acquire_everywhere(&lock, Duration::from_secs(30)).await;
    for server in &servers[..2] {
        let _: () = server.conn().await.del("payout").await.unwrap();
    }
    let error = guard.extend(LONGER).await.unwrap_err();
    assert!(matches!(error, LockError::Lost { .. }), "{error}");
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .expect("lost");

    // Kept by the watchdog: nothing to extend.
    let watched = lock.acquire().await.unwrap();
    let error = watched.extend(LONGER).await.unwrap_err();
    assert!(matches!(error, LockError::InvalidConfig { .. }), "{error}");
    watched.unlock().await.unwrap();
}
