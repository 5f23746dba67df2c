//! `LockGuard::extend` and `remaining_lease`: setting a fixed-lease hold's lease again, for
//! every kind. The key's TTL is shared by every hold on it, so an extend moves it to the
//! longest lease any hold needs, never below; `lost()` follows the hold's new end, neither
//! before nor after it.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::messages::Release;
use actix_distributed_lock::{
    current, distributed_lock, AcquireOptions, Lock, LockClient, LockError, LockGuard, MultiLock,
};
use futures_util::future::join_all;
use redis::AsyncCommands;
use std::time::{Duration, Instant};
use support::kinds::{lock_of_kind, KINDS};
use support::RedisServer;

/// The lease holds are taken with.
const FIRST: Duration = Duration::from_millis(1000);
/// The lease an extend sets, well past the first.
const LONGER: Duration = Duration::from_secs(3);
/// The clock drift allowance of `LONGER` (1 % + 2 ms): `lost()` fires this much before.
const DRIFT: Duration = Duration::from_millis(32);
/// Slack for a loaded machine: a timer that fires this late still passes.
const SLACK: Duration = Duration::from_millis(1000);

/// The handle that excludes `kind`'s holder: a writer beside a reader, the same kind else.
fn rival_of(client: &LockClient, kind: &str, name: &str) -> Lock {
    lock_of_kind(client, if kind == "read" { "write" } else { kind }, name)
}

async fn pttl(server: &RedisServer, key: &str) -> i64 {
    server.conn().await.pttl(key).await.unwrap()
}

fn fixed(lease: Duration) -> AcquireOptions {
    AcquireOptions::new().lease(lease)
}

/// Waits for `guard.lost()` at most `limit`; the instant it fired.
async fn lost_at(guard: &LockGuard, limit: Duration) -> Instant {
    tokio::time::timeout(limit, guard.lost())
        .await
        .unwrap_or_else(|_| panic!("`{}`: lost() did not fire in {limit:?}", guard.name()));
    Instant::now()
}

/// Waits (a little) until `lock` can be taken, as another holder would.
async fn free_soon(lock: Lock) {
    support::eventually("another holder gets it", SLACK * 2, || {
        let lock = lock.clone();
        async move { lock.try_acquire().await.unwrap().is_some() }
    })
    .await;
}

/// One kind: a hold extended before its first lease ran out outlives that lease (Redis
/// keeps the key, nobody else gets it, no loss is reported) and is lost at its new end.
async fn extend_one(server: &RedisServer, client: &LockClient, rival: &LockClient, kind: &str) {
    let name = format!("extend:{kind}");
    let guard = lock_of_kind(client, kind, &name)
        .acquire_with(fixed(FIRST))
        .await
        .unwrap();
    tokio::time::sleep(FIRST / 4).await;
    let before = Instant::now();
    guard.extend(LONGER).await.unwrap();
    let after = Instant::now();
    let left = pttl(server, guard.key()).await;
    assert!(
        left > (LONGER - FIRST / 2).as_millis() as i64 && left <= LONGER.as_millis() as i64,
        "{kind}: the key has {left} ms after an extend to {LONGER:?}"
    );
    // Read after the PTTL: what the guard counts on then is at most what the key had.
    let remaining = guard.remaining_lease();
    assert!(remaining > LONGER - FIRST / 2, "{kind}: {remaining:?} left");
    assert!(
        remaining.as_millis() as i64 <= left,
        "{kind}: the guard counts on more than the key has"
    );
    if kind == "read" {
        let field = format!("{}:{}", client.id(), guard.owner().id());
        let timeout_key = format!("{{{name}}}:{field}:rwlock_timeout:1");
        let left = pttl(server, &timeout_key).await;
        assert!(
            left > (LONGER - FIRST / 2).as_millis() as i64,
            "the reader's timeout key has {left} ms: Redisson's read unlock would cut the hash to it"
        );
    }
    // Past the first lease: still held, by nobody else.
    tokio::time::sleep_until((before + FIRST + FIRST / 2).into()).await;
    assert!(!guard.is_lost(), "{kind}: lost at the old end");
    let other = rival_of(rival, kind, &name).try_acquire().await.unwrap();
    assert!(
        other.is_none(),
        "{kind}: another holder got it after the old end"
    );
    let lost = lost_at(&guard, LONGER + SLACK).await;
    assert!(
        lost >= before + LONGER - DRIFT,
        "{kind}: lost {:?} after the extend was sent, before its new end",
        lost - before
    );
    assert!(
        lost <= after + LONGER + SLACK,
        "{kind}: lost {:?} after the extend, long after its new end",
        lost - after
    );
    // Free again soon after (the key's own end, or the owner-checked clear of the loss).
    free_soon(rival_of(rival, kind, &name)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_moves_the_key_and_lost_to_the_new_end_for_every_kind() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let rival = support::client(&server).await;
    let runs = KINDS.map(|kind| extend_one(&server, &client, &rival, kind));
    join_all(runs).await;
}

/// A hold whose lease ran out, or that someone force-released, cannot be extended back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_after_the_hold_is_gone_is_lost() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    for kind in KINDS {
        let lock = lock_of_kind(&client, kind, &format!("gone:{kind}"));
        let guard = lock
            .acquire_with(fixed(Duration::from_millis(200)))
            .await
            .unwrap();
        lost_at(&guard, SLACK).await;
        let error = guard.extend(LONGER).await.unwrap_err();
        assert!(matches!(error, LockError::Lost { .. }), "{kind}: {error}");

        // Gone in Redis while the guard still counts on it: Redis says so.
        let guard = lock.acquire_with(fixed(LONGER)).await.unwrap();
        let mut conn = server.conn().await;
        let _: () = conn.del(guard.key()).await.unwrap();
        let error = guard.extend(LONGER).await.unwrap_err();
        assert!(matches!(error, LockError::Lost { .. }), "{kind}: {error}");
        assert!(guard.is_lost(), "{kind}: the guard is told of the loss");
        assert!(!server.keys().await.contains(&guard.key().to_string()));
    }
}

/// Two re-entries of one owner with their own leases: cutting one back leaves the key to
/// the other's lease (and the owner's holds, which share its field, with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_extend_of_a_reentry_never_lowers_the_other_holds_ttl() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let rival = support::client(&server).await;
    let long = Duration::from_secs(5);
    let short = Duration::from_millis(300);
    for kind in ["reentrant", "fenced", "fair", "read", "write"] {
        let name = format!("reentries:{kind}");
        let lock = lock_of_kind(&client, kind, &name);
        let outer = lock.acquire_with(fixed(long)).await.unwrap();
        let owner = outer.owner();
        let inner = lock.acquire_with(fixed(long).owner(owner)).await.unwrap();
        inner.extend(short).await.unwrap();
        let left = pttl(&server, outer.key()).await;
        assert!(
            left > 4000,
            "{kind}: the key has {left} ms after the re-entry's cut"
        );
        tokio::time::sleep(short * 2).await;
        assert!(!outer.is_lost() && !inner.is_lost(), "{kind}: lost early");
        assert!(
            inner.remaining_lease() > Duration::from_secs(3),
            "{kind}: the field lives on"
        );
        let other = rival_of(&rival, kind, &name).try_acquire().await.unwrap();
        assert!(other.is_none(), "{kind}: another holder got it");
        // Now the outer one too: nothing needs the key any longer.
        outer.extend(short).await.unwrap();
        let left = pttl(&server, outer.key()).await;
        assert!(
            left <= short.as_millis() as i64,
            "{kind}: the key has {left} ms"
        );
        lost_at(&outer, SLACK).await;
        assert!(inner.is_lost());
        free_soon(rival_of(&rival, kind, &name)).await;
    }
}

/// An extend still on its way when another hold of the owner is unlocked: the unlock sets
/// the key's TTL for the holds left, and must leave the extended hold what its extend may
/// already have set (the extend runs first; its answer, with the longer PTTL, comes after
/// the unlock ran). Before, the unlock cut the key to the hold's old end while the guard
/// went on to count on the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_while_an_extend_is_on_its_way_leaves_the_key_the_extended_lease() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    for kind in ["reentrant", "fenced", "fair", "write"] {
        let name = format!("unlock-while-extending:{kind}");
        let lock = lock_of_kind(&client, kind, &name);
        let watched = lock.acquire().await.unwrap();
        let owner = watched.owner();
        let fixed_hold = lock.acquire_with(fixed(FIRST).owner(owner)).await.unwrap();
        // The extend is sent on its first poll, before the unlock's: both go through the
        // lock's actor, in that order.
        let (extended, unlocked) = tokio::join!(fixed_hold.extend(LONGER), watched.unlock());
        extended.unwrap();
        unlocked.unwrap();
        let believed = fixed_hold.remaining_lease();
        let left = pttl(&server, fixed_hold.key()).await;
        assert!(
            believed.as_millis() as i64 <= left,
            "{kind}: the guard counts on {believed:?} while the key has {left} ms"
        );
        fixed_hold.unlock().await.unwrap();
    }
}

/// A reader that cuts its lease back leaves the hash to the other reader's lease; once it
/// is gone, the other still holds it, with its own timeout key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_cutting_its_lease_leaves_the_other_reader_its_own() {
    let server = RedisServer::start();
    let (a, b, w) = (
        support::client(&server).await,
        support::client(&server).await,
        support::client(&server).await,
    );
    let long = Duration::from_secs(5);
    let short = Duration::from_millis(300);
    let read = |client: &LockClient| lock_of_kind(client, "read", "readers");
    let first = read(&a).acquire_with(fixed(long)).await.unwrap();
    let second = read(&b).acquire_with(fixed(long)).await.unwrap();
    first.extend(short).await.unwrap();
    let timeout_key = |client: &LockClient, guard: &LockGuard| {
        format!(
            "{{readers}}:{}:{}:rwlock_timeout:1",
            client.id(),
            guard.owner().id()
        )
    };
    assert!(pttl(&server, "readers").await > 4000);
    assert!(pttl(&server, &timeout_key(&b, &second)).await > 4000);
    assert!(pttl(&server, &timeout_key(&a, &first)).await <= short.as_millis() as i64);
    lost_at(&first, SLACK).await;
    // Its hold leaves the hash (the lost hold's owner-checked clear, or its timeout key).
    support::eventually("the first reader's field goes", SLACK * 2, || {
        let server = &server;
        let field = format!("{}:{}", a.id(), first.owner().id());
        async move {
            let held: bool = server.conn().await.hexists("readers", field).await.unwrap();
            !held
        }
    })
    .await;
    assert!(!second.is_lost());
    let left = pttl(&server, "readers").await;
    assert!(
        left > 3000,
        "the hash has {left} ms with the second reader in it"
    );
    assert!(second.remaining_lease().as_millis() as i64 <= left);
    let writer = lock_of_kind(&w, "write", "readers")
        .try_acquire()
        .await
        .unwrap();
    assert!(writer.is_none(), "a writer got in beside a reader");
}

/// Cutting back the only hold lets the lock go at the new end: `lost()` fires then and
/// another holder gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_extend_of_the_only_hold_ends_it_sooner() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let rival = support::client(&server).await;
    let short = Duration::from_millis(400);
    let guard = client
        .lock("cut")
        .unwrap()
        .acquire_with(fixed(Duration::from_secs(30)))
        .await
        .unwrap();
    let before = Instant::now();
    guard.extend(short).await.unwrap();
    assert!(pttl(&server, "cut").await <= short.as_millis() as i64);
    assert!(guard.remaining_lease() <= short);
    let lost = lost_at(&guard, SLACK * 2).await;
    assert!(lost >= before + short - Duration::from_millis(6));
    free_soon(rival.lock("cut").unwrap()).await;
}

/// `remaining_lease` counts down, and never above the key's PTTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remaining_lease_counts_down_within_the_keys_pttl() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    for kind in KINDS {
        let guard = lock_of_kind(&client, kind, &format!("countdown:{kind}"))
            .acquire_with(fixed(Duration::from_secs(2)))
            .await
            .unwrap();
        // Each remaining lease is read after the PTTL it is held against.
        let left = pttl(&server, guard.key()).await;
        let first = guard.remaining_lease();
        assert!(first > Duration::from_millis(1500) && first < Duration::from_secs(2));
        assert!(
            first.as_millis() as i64 <= left,
            "{kind}: {first:?} vs {left} ms"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let left = pttl(&server, guard.key()).await;
        let second = guard.remaining_lease();
        assert!(
            second + Duration::from_millis(190) <= first,
            "{kind}: {first:?} → {second:?}"
        );
        assert!(
            second.as_millis() as i64 <= left,
            "{kind}: {second:?} vs {left} ms"
        );
        guard.unlock().await.unwrap();
    }
}

/// Bad input and holds with nothing to extend: clear errors, and the hold untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_extends_are_clear_errors_and_change_nothing() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let lock = client.lock("bad").unwrap();
    let guard = lock
        .acquire_with(fixed(Duration::from_secs(5)))
        .await
        .unwrap();
    let before = pttl(&server, "bad").await;
    for lease in [Duration::ZERO, Duration::from_micros(999), Duration::MAX] {
        let error = guard.extend(lease).await.unwrap_err();
        assert!(
            matches!(error, LockError::InvalidConfig { .. }),
            "{lease:?}: {error}"
        );
        assert!(error.to_string().contains("lease of lock `bad`"), "{error}");
    }
    assert!(pttl(&server, "bad").await <= before);
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();

    // The watchdog keeps it: nothing to extend.
    let watched = lock.acquire().await.unwrap();
    let error = watched.extend(LONGER).await.unwrap_err();
    assert!(matches!(error, LockError::InvalidConfig { .. }), "{error}");
    assert!(error.to_string().contains("watchdog"), "{error}");
    assert!(watched.remaining_lease() > Duration::ZERO);

    // Released through the actor: not the owner any more.
    let owner = watched.owner();
    lock.actor()
        .unwrap()
        .send(Release { owner })
        .await
        .unwrap()
        .unwrap();
    let error = watched.extend(LONGER).await.unwrap_err();
    assert!(matches!(error, LockError::NotOwner { .. }), "{error}");
    assert_eq!(watched.remaining_lease(), Duration::ZERO);
}

/// A MultiLock taken with a fixed lease extends every member; a member gone fails it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multilock_extends_every_member() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let multi = MultiLock::new([client.lock("m:a").unwrap(), client.lock("m:b").unwrap()]).unwrap();
    let guard = multi.acquire_with(fixed(FIRST)).await.unwrap();
    guard.extend(LONGER).await.unwrap();
    for key in ["m:a", "m:b"] {
        assert!(
            pttl(&server, key).await > (LONGER - FIRST / 2).as_millis() as i64,
            "{key}"
        );
    }
    assert!(guard.remaining_lease() > LONGER - FIRST / 2);
    let _: () = server.conn().await.del("m:b").await.unwrap();
    match guard.extend(LONGER).await {
        Err(LockError::Lost { name }) => assert_eq!(name, "m:b"),
        other => panic!("expected m:b lost, got {other:?}"),
    }
    assert!(guard.is_lost());
}

#[distributed_lock("report:<day>", client = client, lease = "1s")]
async fn long_report(client: &LockClient, day: u32) -> Result<(Duration, Duration), LockError> {
    let hold = current().expect("inside the body");
    let first = hold.remaining_lease();
    hold.extend(LONGER).await?;
    tokio::time::sleep(FIRST + FIRST / 2).await;
    if hold.is_lost() {
        return Err(LockError::Lost {
            name: hold.name().to_string(),
        });
    }
    Ok((first, hold.remaining_lease()))
}

/// An annotated body with a fixed lease extends its own hold through `current()`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_annotated_body_extends_its_hold() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let (first, later) = long_report(&client, 7).await.unwrap();
    assert!(first <= FIRST, "{first:?}");
    assert!(
        later > Duration::ZERO && later < LONGER - FIRST,
        "{later:?}"
    );
    // Released at the end of the call.
    assert!(!client.lock("report:7").unwrap().is_locked().await.unwrap());
}
