//! `PermitGuard::update_lease` and `PermitExpirableSemaphore::update_lease` (Redisson's
//! `updateLeaseTime`): a permit's lease set again from now, longer or shorter. Redis's
//! timeout zset holds the truth (permit id → expiry); `lost()` follows the new end.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{LockClient, LockError, PermitGuard, PermitOptions};
use std::time::{Duration, Instant};
use support::permits::permit_left;
use support::RedisServer;

const FIRST: Duration = Duration::from_millis(1000);
const LONGER: Duration = Duration::from_secs(3);
/// The clock drift allowance of `LONGER`.
const DRIFT: Duration = Duration::from_millis(32);
const SLACK: Duration = Duration::from_millis(1000);

fn fixed(lease: Duration) -> PermitOptions {
    PermitOptions::new().lease(lease).wait(Duration::ZERO)
}

async fn semaphore_of(client: &LockClient, name: &str, permits: u32) {
    let semaphore = client.expirable_semaphore(name).unwrap();
    semaphore.try_set_permits(permits).await.unwrap();
}

async fn lost_at(guard: &PermitGuard, limit: Duration) -> Instant {
    tokio::time::timeout(limit, guard.lost())
        .await
        .expect("lost() did not fire in time");
    Instant::now()
}

/// A longer lease keeps the permit out past its first lease (nobody else gets it), and the
/// guard is lost at the new end; a shorter one ends it sooner and gives it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_lease_moves_the_permits_expiry_and_lost() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let rival = support::client(&server).await;
    semaphore_of(&client, "slots", 1).await;
    let slots = client.expirable_semaphore("slots").unwrap();
    let guard = slots.acquire_with(fixed(FIRST)).await.unwrap();
    tokio::time::sleep(FIRST / 4).await;
    let before = Instant::now();
    guard.update_lease(LONGER).await.unwrap();
    let after = Instant::now();
    let left = permit_left(&server, "slots", guard.permit_id())
        .await
        .unwrap();
    assert!(left > 2500 && left <= 3000, "the permit has {left} ms");
    let remaining = guard.remaining_lease();
    assert!(remaining > Duration::from_millis(2500), "{remaining:?}");
    assert!(remaining.as_millis() as i64 <= left + 5);
    tokio::time::sleep_until((before + FIRST + FIRST / 2).into()).await;
    assert!(!guard.is_lost(), "lost at the old end");
    let other = rival.expirable_semaphore("slots").unwrap();
    assert!(
        other.try_acquire(1).await.unwrap().is_none(),
        "the permit came back early"
    );
    let lost = lost_at(&guard, LONGER + SLACK).await;
    assert!(
        lost >= before + LONGER - DRIFT,
        "lost {:?} after",
        lost - before
    );
    assert!(lost <= after + LONGER + SLACK);
    support::eventually("the permit comes back", SLACK * 2, || {
        let other = other.clone();
        async move { other.try_acquire(1).await.unwrap().is_some() }
    })
    .await;

    // Shorter: the permit ends at the new end (taken once the rival's drop gave it back).
    let options = fixed(Duration::from_secs(30)).wait(SLACK);
    let guard = slots.acquire_with(options).await.unwrap();
    let short = Duration::from_millis(400);
    let before = Instant::now();
    guard.update_lease(short).await.unwrap();
    let left = permit_left(&server, "slots", guard.permit_id())
        .await
        .unwrap();
    assert!(left <= 400, "the permit has {left} ms");
    let lost = lost_at(&guard, SLACK * 2).await;
    assert!(lost >= before + short - Duration::from_millis(6));
    support::eventually("the permit comes back", SLACK * 2, || {
        let other = other.clone();
        async move { other.try_acquire(1).await.unwrap().is_some() }
    })
    .await;
}

/// Every permit of a guard is updated; a permit released by id elsewhere makes the update
/// fail as lost, and the guard's other permits go back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_permit_is_updated_and_a_missing_one_is_lost() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let other = support::client(&server).await;
    semaphore_of(&client, "batch", 3).await;
    let batch = client.expirable_semaphore("batch").unwrap();
    let guard = batch.acquire_with(fixed(FIRST).permits(3)).await.unwrap();
    guard.update_lease(LONGER).await.unwrap();
    for id in guard.permit_ids() {
        let left = permit_left(&server, "batch", id).await.unwrap();
        assert!(left > 2500, "{id}: {left} ms");
    }
    let elsewhere = other.expirable_semaphore("batch").unwrap();
    elsewhere.release(&guard.permit_ids()[1]).await.unwrap();
    let error = guard.update_lease(LONGER).await.unwrap_err();
    assert!(matches!(error, LockError::Lost { .. }), "{error}");
    assert!(guard.is_lost());
    assert_eq!(guard.remaining_lease(), Duration::ZERO);
    support::eventually("all three permits come back", SLACK * 2, || {
        let batch = batch.clone();
        async move { batch.available_permits().await.unwrap() == 3 }
    })
    .await;
}

/// Past the lease, the permit is gone: the update is refused as lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_after_the_lease_ran_out_is_lost() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    semaphore_of(&client, "late", 1).await;
    let late = client.expirable_semaphore("late").unwrap();
    let guard = late
        .acquire_with(fixed(Duration::from_millis(200)))
        .await
        .unwrap();
    lost_at(&guard, SLACK).await;
    let error = guard.update_lease(LONGER).await.unwrap_err();
    assert!(matches!(error, LockError::Lost { .. }), "{error}");
}

/// Bad input, and permits with no lease of their own to set: clear errors, nothing changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_updates_are_clear_errors() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    semaphore_of(&client, "bad", 2).await;
    let bad = client.expirable_semaphore("bad").unwrap();
    let guard = bad.acquire_with(fixed(LONGER)).await.unwrap();
    let before = permit_left(&server, "bad", guard.permit_id())
        .await
        .unwrap();
    for lease in [Duration::ZERO, Duration::MAX] {
        let error = guard.update_lease(lease).await.unwrap_err();
        assert!(
            matches!(error, LockError::InvalidConfig { .. }),
            "{lease:?}: {error}"
        );
        let error = bad
            .update_lease(guard.permit_id(), lease)
            .await
            .unwrap_err();
        assert!(
            matches!(error, LockError::InvalidConfig { .. }),
            "{lease:?}: {error}"
        );
    }
    assert!(
        permit_left(&server, "bad", guard.permit_id())
            .await
            .unwrap()
            <= before
    );
    assert!(!guard.is_lost());

    // Renewed by its guard: no lease to set, by guard or by id.
    let renewed = bad.acquire(1).await.unwrap();
    let error = renewed.update_lease(LONGER).await.unwrap_err();
    assert!(error.to_string().contains("without a lease"), "{error}");
    let error = bad
        .update_lease(renewed.permit_id(), LONGER)
        .await
        .unwrap_err();
    assert!(matches!(error, LockError::InvalidConfig { .. }), "{error}");
    assert!(renewed.remaining_lease() > Duration::ZERO);

    // Unknown ids are not out.
    for id in ["0123456789abcdef0123456789abcdef", "not hex"] {
        assert!(!bad.update_lease(id, LONGER).await.unwrap(), "{id}");
    }
}

/// By id, from another client: Redis's expiry moves; a local guard whose permit is cut
/// back ends sooner with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_by_id_reaches_any_holders_permit() {
    let server = RedisServer::start();
    let holder = support::client(&server).await;
    let other = support::client(&server).await;
    semaphore_of(&holder, "byid", 1).await;
    let guard = holder
        .expirable_semaphore("byid")
        .unwrap()
        .acquire_with(fixed(FIRST))
        .await
        .unwrap();
    let elsewhere = other.expirable_semaphore("byid").unwrap();
    assert!(elsewhere
        .update_lease(guard.permit_id(), LONGER)
        .await
        .unwrap());
    let left = permit_left(&server, "byid", guard.permit_id())
        .await
        .unwrap();
    assert!(left > 2500, "{left} ms");
    // The holder's own guard still counts on its own lease: never longer than Redis has.
    assert!(guard.remaining_lease() <= FIRST);

    // Cut back by id on the holder's own client: its guard ends with it.
    let mine = holder.expirable_semaphore("byid").unwrap();
    let short = Duration::from_millis(300);
    assert!(mine.update_lease(guard.permit_id(), short).await.unwrap());
    assert!(guard.remaining_lease() <= short);
    lost_at(&guard, SLACK).await;
}

/// `remaining_lease` counts down and never exceeds the permit's expiry in Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remaining_lease_counts_down_within_the_permits_expiry() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    semaphore_of(&client, "count", 1).await;
    let guard = client
        .expirable_semaphore("count")
        .unwrap()
        .acquire_with(fixed(Duration::from_secs(2)))
        .await
        .unwrap();
    let first = guard.remaining_lease();
    assert!(first > Duration::from_millis(1500) && first < Duration::from_secs(2));
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Read after the expiry it is held against.
    let left = permit_left(&server, "count", guard.permit_id())
        .await
        .unwrap();
    let second = guard.remaining_lease();
    assert!(
        second + Duration::from_millis(190) <= first,
        "{first:?} → {second:?}"
    );
    assert!(
        second.as_millis() as i64 <= left + 5,
        "{second:?} vs {left} ms"
    );
}
