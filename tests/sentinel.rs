//! A Sentinel-managed primary (issue #8) against real processes: 1 primary, 1 replica and
//! 3 sentinels. A failover while a lock is held and another client waits for it: the
//! waiter acquires on the new primary and does not hang.

mod support;

use actix_distributed_lock::{Deployment, LockClient};
use std::time::Duration;
use support::eventually;
use support::sentinel_client;
use support::topology::SentinelSetup;

/// Until a call through `locks` reaches a primary again (each failed call makes the client
/// ask the sentinels anew).
async fn until_reachable(locks: &LockClient) {
    eventually(
        "the client reaches the new primary",
        Duration::from_secs(20),
        || async { locks.lock("probe").unwrap().is_locked().await.is_ok() },
    )
    .await;
}

#[actix_rt::test]
async fn a_waiter_acquires_on_the_new_primary_after_a_failover() {
    let mut setup = SentinelSetup::start();
    let holder = sentinel_client(&setup, |c| {
        c.sync_replicas(1, Duration::from_secs(1))
            .watchdog_timeout(Duration::from_secs(9))
    })
    .await;
    assert!(matches!(
        holder.config().deployment(),
        Deployment::Sentinel { .. }
    ));
    let other = sentinel_client(&setup, |c| c).await;
    let guard = holder
        .lock("job:nightly")
        .unwrap()
        .acquire()
        .await
        .expect("acquire");
    let waiter = tokio::spawn(async move {
        let guard = other
            .lock("job:nightly")
            .unwrap()
            .acquire_timeout(Duration::from_secs(60))
            .await?;
        guard.unlock().await.map(|_| ())
    });
    // The waiter is parked once it listens on the lock's unlock channel.
    let primary = setup.primary_port();
    eventually(
        "the waiter subscribed",
        Duration::from_secs(10),
        || async move {
            let mut conn = redis::Client::open(format!("redis://127.0.0.1:{primary}/"))
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            let (_, n): (String, i64) = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg("redisson_lock__channel:{job:nightly}")
                .query_async(&mut conn)
                .await
                .unwrap();
            n >= 1
        },
    )
    .await;

    let old = setup.kill_primary();
    let new = setup
        .wait_for_failover_async(old, Duration::from_secs(40))
        .await;
    assert_ne!(old, new);

    // The replica confirmed the lock before acquire returned, so the new primary has it.
    let field = format!("{}:{}", holder.id(), guard.owner().id());
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{new}/"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let count: Option<u32> = redis::cmd("HGET")
        .arg("job:nightly")
        .arg(&field)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        count,
        Some(1),
        "the promoted replica does not have the lock"
    );

    until_reachable(&holder).await;
    assert!(!guard.is_lost());
    guard.unlock().await.expect("unlock on the new primary");
    tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("the waiter hung after the failover")
        .unwrap()
        .expect("the waiter acquired on the new primary");
    let left: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[actix_rt::test]
async fn a_client_follows_the_primary_and_refuses_unreplicated_grants() {
    let mut setup = SentinelSetup::start();
    let locks = sentinel_client(&setup, |c| c.sync_replicas(1, Duration::from_millis(300))).await;
    let guard = locks
        .lock("a")
        .unwrap()
        .acquire()
        .await
        .expect("replicated acquire");
    guard.unlock().await.unwrap();

    let old = setup.kill_primary();
    setup
        .wait_for_failover_async(old, Duration::from_secs(40))
        .await;
    until_reachable(&locks).await;
    // The new primary has no replica left (the old primary is dead): grants are refused
    // and given back.
    let result = locks.lock("b").unwrap().acquire().await;
    assert!(
        matches!(
            result,
            Err(actix_distributed_lock::LockError::NotReplicated { confirmed: 0, .. })
        ),
        "{result:?}"
    );
    eventually(
        "the refused grant is given back",
        Duration::from_secs(5),
        || async { !locks.lock("b").unwrap().is_locked().await.unwrap_or(true) },
    )
    .await;
}
