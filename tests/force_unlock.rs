//! A force-unlock tells every holder of the lock in the forcing client, whichever actor
//! keeps the hold: a fair lock's holders live in per-owner actors, and a read-write lock's
//! read and write holds in the actors of their own side, not in the actor the force-unlock
//! goes through. A holder that is not told keeps working without the lock until its next
//! renewal or its lease's end; the holds here renew every 40 s (or never), so only the
//! force-unlock's notice can fire `lost()` within the bound.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{AcquireOptions, LockClient, LockGuard, LockOwner};
use std::time::Duration;
use support::{client_with, RedisServer};

/// A watchdog lease whose renewals (a third of it) come long after [`NOTICE_BOUND`].
const WATCHDOG: Duration = Duration::from_secs(120);
/// A fixed lease that outlasts the test.
const LEASE: Duration = Duration::from_secs(120);
/// How long a forced-out holder may take to hear of it (generous: a loaded machine).
const NOTICE_BOUND: Duration = Duration::from_secs(10);

async fn holders_client(server: &RedisServer) -> LockClient {
    client_with(server, |c| c.watchdog_timeout(WATCHDOG)).await
}

/// Fails unless `guard`'s `lost()` fires within [`NOTICE_BOUND`] and `is_lost()` agrees.
async fn hears_lost(guard: &LockGuard, holder: &str) {
    if tokio::time::timeout(NOTICE_BOUND, guard.lost())
        .await
        .is_err()
    {
        panic!("{holder}: lost() did not fire within {NOTICE_BOUND:?} of the force-unlock");
    }
    assert!(
        guard.is_lost(),
        "{holder}: lost() fired but is_lost() is false"
    );
}

#[tokio::test]
async fn a_fair_force_unlock_tells_every_local_holder() {
    let server = RedisServer::start();
    let client = holders_client(&server).await;
    let lock = client.fair_lock("forced:fair").unwrap();
    let me = LockOwner::new();
    let watched = lock
        .acquire_with(AcquireOptions::new().owner(me))
        .await
        .unwrap();
    let leased = lock
        .acquire_with(AcquireOptions::new().owner(me).lease(LEASE))
        .await
        .unwrap();

    assert!(lock.force_unlock().await.unwrap(), "the lock was held");
    hears_lost(&watched, "the fair watchdog hold").await;
    hears_lost(&leased, "the fair fixed-lease re-entry").await;
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test]
async fn a_force_unlock_through_either_side_tells_the_holders_of_both_sides() {
    let server = RedisServer::start();
    let client = holders_client(&server).await;

    // Readers, forced out through the write side.
    let rw = client.read_write_lock("forced:read").unwrap();
    let r1 = rw.read().acquire().await.unwrap();
    let r2 = rw
        .read()
        .acquire_with(AcquireOptions::new().lease(LEASE))
        .await
        .unwrap();
    assert!(rw.write().force_unlock().await.unwrap(), "read-locked");
    hears_lost(&r1, "a watchdog reader").await;
    hears_lost(&r2, "a fixed-lease reader").await;

    // A writer, forced out through the read side.
    let rw = client.read_write_lock("forced:write").unwrap();
    let w = rw.write().acquire().await.unwrap();
    assert!(rw.read().force_unlock().await.unwrap(), "write-locked");
    hears_lost(&w, "the writer").await;

    // A writer that also reads (the downgrade path): both of its holds go, whichever side
    // forces.
    let rw = client.read_write_lock("forced:both").unwrap();
    let me = LockOwner::new();
    let w = rw
        .write()
        .acquire_with(AcquireOptions::new().owner(me))
        .await
        .unwrap();
    let r = rw
        .read()
        .acquire_with(AcquireOptions::new().owner(me))
        .await
        .unwrap();
    assert!(rw.write().force_unlock().await.unwrap(), "write-locked");
    hears_lost(&w, "the writer of a downgrade").await;
    hears_lost(&r, "the reader of a downgrade").await;

    // Only the read holds' timeout keys may outlive the forced hash, at their lease.
    let left: Vec<String> = server
        .keys()
        .await
        .into_iter()
        .filter(|k| !k.contains(":rwlock_timeout:"))
        .collect();
    assert_eq!(left, Vec::<String>::new());
}

#[tokio::test]
async fn a_hold_taken_again_after_a_force_unlock_keeps_its_own_lease() {
    // The first hold's end was timed by the actor; the force-unlock ends it early. The same
    // owner's next hold has a lease of its own: the first one's end must not take it.
    let server = RedisServer::start();
    let client = holders_client(&server).await;
    let lock = client.fair_lock("forced:again").unwrap();
    let me = LockOwner::new();
    let short = Duration::from_secs(2);
    let first = lock
        .acquire_with(AcquireOptions::new().owner(me).lease(short))
        .await
        .unwrap();
    let first_ends = tokio::time::Instant::now() + short;
    assert!(lock.force_unlock().await.unwrap(), "the lock was held");
    hears_lost(&first, "the first hold").await;
    let again = lock
        .acquire_with(AcquireOptions::new().owner(me).lease(LEASE))
        .await
        .unwrap();
    // Time passing on purpose: past the first hold's end.
    tokio::time::sleep_until(first_ends + Duration::from_secs(1)).await;
    assert!(
        !again.is_lost(),
        "the new hold was ended at the first one's end"
    );
    assert!(
        server.keys().await.contains(&"forced:again".to_string()),
        "the new hold's key was taken out of Redis"
    );
    again.unlock().await.unwrap();
}
