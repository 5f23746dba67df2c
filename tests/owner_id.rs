//! Owners known by id: `LockOwner::from_id`, `ClientConfig::client_id`, `Lock::unlock_as`
//! and `Lock::is_held_by`. Whoever has the id is the owner: another task, or another process
//! whose client has the same id, may check or release the hold; owners made by `new()`
//! stay apart from chosen ids and from another process's.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{AcquireOptions, LockError, LockOwner, Released};
use redis::AsyncCommands;
use std::time::Duration;
use support::holder::{Holder, REPLY};
use support::RedisServer;

/// Ids `LockOwner::new()` never draws: callers pick theirs below this.
const CHOSEN_BELOW: u64 = 1 << 52;

#[test]
fn new_owners_never_meet_chosen_ids() {
    let owners: Vec<LockOwner> = (0..1000).map(|_| LockOwner::new()).collect();
    for owner in &owners {
        assert!(owner.id() >= CHOSEN_BELOW && owner.id() < CHOSEN_BELOW * 2);
        assert_eq!(LockOwner::from_id(owner.id()), *owner);
    }
    let distinct: std::collections::HashSet<u64> = owners.iter().map(LockOwner::id).collect();
    assert_eq!(distinct.len(), owners.len());
    assert_ne!(LockOwner::from_id(1), LockOwner::new());
}

/// A hold taken in one task is checked and released by another that knows only its id;
/// the guard hears that its hold ended and sends nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_task_knowing_the_id_checks_and_releases_the_hold() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let lock = client.lock("job:42").unwrap();
    let job = LockOwner::from_id(42);
    let guard = lock
        .acquire_with(AcquireOptions::new().owner(job))
        .await
        .unwrap();
    let field = format!("{}:42", client.id());
    let held: bool = server.conn().await.hexists("job:42", &field).await.unwrap();
    assert!(held, "the owner's field is `<client-id>:42`");

    let elsewhere = lock.clone();
    let released = tokio::spawn(async move {
        assert!(elsewhere.is_held_by(LockOwner::from_id(42)).await.unwrap());
        assert!(!elsewhere.is_held_by(LockOwner::from_id(43)).await.unwrap());
        elsewhere.unlock_as(LockOwner::from_id(42)).await
    })
    .await
    .unwrap();
    assert_eq!(released.unwrap(), Released::Unlocked);
    assert!(!lock.is_locked().await.unwrap());
    assert!(!guard.is_lost(), "released, not lost");
    assert_eq!(guard.remaining_lease(), Duration::ZERO);
    let error = guard.unlock().await.unwrap_err();
    assert!(matches!(error, LockError::NotOwner { .. }), "{error}");

    // Nobody holds it now: releasing again changes nothing.
    let error = lock.unlock_as(job).await.unwrap_err();
    assert!(matches!(error, LockError::NotOwner { .. }), "{error}");
}

/// A chosen id and a `new()` owner are two owners: one waits for the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chosen_id_does_not_share_a_new_owners_hold() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let lock = client.lock("apart").unwrap();
    let guard = lock.acquire().await.unwrap();
    for id in [1, 2, 3, guard.owner().id() % CHOSEN_BELOW] {
        let options = AcquireOptions::new()
            .owner(LockOwner::from_id(id))
            .wait(Duration::ZERO);
        let error = lock.acquire_with(options).await.unwrap_err();
        assert!(
            error.is_timeout(),
            "owner {id} got in beside a new() owner: {error}"
        );
    }
    guard.unlock().await.unwrap();
}

/// Two clients with one configured id share owners: the second releases a hold of the
/// first (a re-entered one: the hold left keeps the key's TTL as it was), yet their `new()`
/// owners stay apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_sharing_an_id_share_owners_by_id_only() {
    let server = RedisServer::start();
    let shared = |config: actix_distributed_lock::ClientConfig| config.client_id("billing-workers");
    let first = support::client_with(&server, shared).await;
    let second = support::client_with(&server, shared).await;
    assert_eq!(first.id(), "billing-workers");
    let lease = Duration::from_secs(10);
    let lock = first.lock("invoice:9").unwrap();
    let owner = LockOwner::from_id(9);
    let outer = lock
        .acquire_with(AcquireOptions::new().owner(owner).lease(lease))
        .await
        .unwrap();
    let inner = lock
        .acquire_with(AcquireOptions::new().owner(owner).lease(lease))
        .await
        .unwrap();
    // The second client's own owners are others.
    let theirs = second.lock("invoice:9").unwrap();
    assert!(theirs.try_acquire().await.unwrap().is_none());
    assert!(theirs.is_held_by(owner).await.unwrap());
    assert_eq!(theirs.hold_count(owner).await.unwrap(), 2);

    let before: i64 = server.conn().await.pttl("invoice:9").await.unwrap();
    let released = theirs.unlock_as(owner).await.unwrap();
    assert_eq!(released, Released::StillHeld { holds: 1 });
    let after: i64 = server.conn().await.pttl("invoice:9").await.unwrap();
    assert!(
        after <= before && after > before - 500,
        "the key went from {before} ms to {after} ms: a foreign release must leave it as it was"
    );
    assert_eq!(theirs.unlock_as(owner).await.unwrap(), Released::Unlocked);
    assert!(!theirs.is_locked().await.unwrap());
    // The first client learns at its own release: nothing of its owner is left.
    let error = inner.unlock().await.unwrap_err();
    assert!(matches!(error, LockError::NotOwner { .. }), "{error}");
    drop(outer);
}

/// Across two OS processes: a child holds as owner 42 under a shared client id; this
/// process checks and releases that hold knowing the id, and the child hears at its next
/// renewal that its lock is gone. Its `new()` owners are apart from ours.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_with_the_same_client_id_releases_the_hold() {
    let server = RedisServer::start();
    let mut holder = Holder::start(
        &server,
        "report:daily",
        &[
            "--client-id",
            "reports",
            "--owner-id",
            "42",
            "--watchdog-ms",
            "1500",
        ],
    )
    .await;
    assert_eq!(holder.field, "reports:42");
    let client = support::client_with(&server, |c| c.client_id("reports")).await;
    let lock = client.lock("report:daily").unwrap();
    assert!(lock.is_held_by(LockOwner::from_id(42)).await.unwrap());
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "a new() owner got in"
    );
    assert_eq!(
        lock.unlock_as(LockOwner::from_id(42)).await.unwrap(),
        Released::Unlocked
    );
    let line = holder.expect_line(REPLY, "`lost`").await;
    assert_eq!(line, "lost", "the holder hears of it at its next renewal");
    assert!(lock.try_acquire().await.unwrap().is_some());

    // A holder under the shared id but with an owner of its own (`new()`): ours differ.
    let mut other = Holder::start(&server, "report:weekly", &["--client-id", "reports"]).await;
    let (_, id) = other.field.rsplit_once(':').unwrap();
    let id: u64 = id.parse().unwrap();
    assert!(id >= CHOSEN_BELOW);
    let weekly = client.lock("report:weekly").unwrap();
    assert!(
        weekly.try_acquire().await.unwrap().is_none(),
        "two processes' new() owners met"
    );
    assert!(weekly.is_held_by(LockOwner::from_id(id)).await.unwrap());
    other.send("unlock");
    let line = other.expect_line(REPLY, "`unlock`").await;
    assert_eq!(line, "unlock Ok(Unlocked)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_client_id_is_refused_before_connecting() {
    for bad in ["", "a:b", "{tag}", "two words"] {
        let config =
            actix_distributed_lock::ClientConfig::new("redis://127.0.0.1:1/").client_id(bad);
        let error = actix_distributed_lock::LockClient::connect(config)
            .await
            .unwrap_err();
        assert!(
            matches!(error, LockError::InvalidConfig { .. }),
            "{bad:?}: {error}"
        );
        assert!(error.to_string().contains("client id"), "{error}");
    }
}
