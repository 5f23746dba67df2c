//! The non-reentrant fast lock (`LockClient::fast_lock`) against real redis-server
//! processes: its string key, `AlreadyHeld` on re-entry, pub/sub hand-off, the watchdog and
//! `lost()`, refused unlocks, non-lock data, exclusion under load, and no fencing.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::messages::{Acquire, AcquireFenced, GetState, Release};
use actix_distributed_lock::{
    AcquireOptions, LockClient, LockError, LockGuard, LockKind, LockOwner, Released,
};
use redis::AsyncCommands;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{client, client_with};
use support::{eventually, RedisServer};
use tokio::time::timeout;

/// What the fast lock writes as its key's value for `owner` of `client`.
fn value_of(client: &LockClient, owner: LockOwner) -> String {
    format!("{}:{}", client.id(), owner.id())
}

async fn key_type(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query_async(conn).await.unwrap()
}

#[tokio::test]
async fn acquire_writes_one_string_key_with_the_owner_and_the_watchdog_lease() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.fast_lock("fast:basic").unwrap();
    assert_eq!(lock.kind(), LockKind::Fast);
    let me = LockOwner::new();
    let lease = client.config().watchdog_timeout_value();

    let guard = lock
        .acquire_with(AcquireOptions::new().owner(me))
        .await
        .unwrap();
    assert_eq!(guard.owner(), me);
    assert_eq!(guard.name(), "fast:basic");
    assert_eq!(guard.fencing_token(), None);

    let mut conn = server.conn().await;
    assert_eq!(server.keys().await, vec!["fast:basic".to_string()]);
    assert_eq!(key_type(&mut conn, "fast:basic").await, "string");
    let value: String = conn.get("fast:basic").await.unwrap();
    assert_eq!(value, value_of(&client, me));
    let pttl: i64 = conn.pttl("fast:basic").await.unwrap();
    let lease_ms = lease.as_millis() as i64;
    assert!(
        pttl > lease_ms - 2_000 && pttl <= lease_ms,
        "pttl {pttl} ms, watchdog lease {lease_ms} ms"
    );

    assert!(lock.is_locked().await.unwrap());
    assert_eq!(lock.hold_count(me).await.unwrap(), 1);
    assert_eq!(lock.hold_count(LockOwner::new()).await.unwrap(), 0);
    let ttl = lock.remaining_ttl().await.unwrap().expect("held: a ttl");
    assert!(ttl > Duration::ZERO && ttl <= lease, "{ttl:?}");
    assert_eq!(client.watched_holds(), 1);

    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(server.keys().await, Vec::<String>::new());
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.remaining_ttl().await.unwrap(), None);
    assert_eq!(client.watched_holds(), 0);

    // Free again: the next acquire (another owner) succeeds at once.
    let again = lock
        .try_acquire()
        .await
        .unwrap()
        .expect("free after unlock");
    assert_eq!(again.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reacquiring_with_the_same_owner_is_already_held_at_once_and_changes_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.fast_lock("fast:again").unwrap();
    let me = LockOwner::new();
    let guard = lock
        .acquire_with(AcquireOptions::new().owner(me))
        .await
        .unwrap();
    let mut conn = server.conn().await;
    let pttl_before: i64 = conn.pttl("fast:again").await.unwrap();

    // A long wait: "at once" means it is refused, not that it waited for itself.
    let started = Instant::now();
    let again = lock
        .acquire_with(
            AcquireOptions::new()
                .owner(me)
                .wait(Duration::from_secs(20)),
        )
        .await;
    let took = started.elapsed();
    assert!(
        matches!(again, Err(LockError::AlreadyHeld { ref name }) if name == "fast:again"),
        "{again:?}"
    );
    assert!(took < Duration::from_secs(1), "refused after {took:?}");
    // Through the guard too (a nested hold of a non-reentrant lock).
    let nested = guard.reenter(Duration::from_secs(20)).await;
    assert!(
        matches!(nested, Err(LockError::AlreadyHeld { .. })),
        "{nested:?}"
    );

    // The first hold is untouched: same value, lease not reset, still one hold.
    let value: String = conn.get("fast:again").await.unwrap();
    assert_eq!(value, value_of(&client, me));
    let pttl_after: i64 = conn.pttl("fast:again").await.unwrap();
    assert!(
        pttl_after > 0 && pttl_after <= pttl_before,
        "pttl {pttl_before} -> {pttl_after}"
    );
    assert_eq!(lock.hold_count(me).await.unwrap(), 1);
    assert!(!guard.is_lost());

    // One unlock frees it: there never was a second hold.
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(server.keys().await, Vec::<String>::new());
    let refused = lock.actor().unwrap().send(Release { owner: me }).await;
    assert!(
        matches!(refused, Ok(Err(LockError::NotOwner { .. }))),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_owner_waits_and_is_woken_by_the_unlock_long_before_the_lease() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let waiter = client(&server).await;
    let lease = holder.config().watchdog_timeout_value();
    let held = holder
        .fast_lock("fast:handoff")
        .unwrap()
        .acquire()
        .await
        .unwrap();

    // Another owner in the same process waits behind the local holder.
    let local = holder.fast_lock("fast:handoff").unwrap();
    let local_waiting = tokio::spawn(async move {
        let guard = local.acquire_timeout(Duration::from_secs(20)).await;
        (Instant::now(), guard)
    });

    server.reset_stats().await;
    let remote = waiter.fast_lock("fast:handoff").unwrap();
    let remote_waiting = tokio::spawn(async move {
        let guard = remote.acquire_timeout(Duration::from_secs(20)).await;
        (Instant::now(), guard)
    });
    server
        .wait_until_parked("redisson_lock__channel:{fast:handoff}", 1)
        .await;
    assert!(!local_waiting.is_finished() && !remote_waiting.is_finished());

    let conn = server.conn().await;
    let released_at = Instant::now();
    held.unlock().await.unwrap();

    // Both other owners get it, one after the other, each well before any lease.
    let (first, second) = tokio::join!(
        async {
            let (at, guard) = local_waiting.await.unwrap();
            let guard = guard.expect("the local waiter acquires");
            let value: String = conn.clone().get("fast:handoff").await.unwrap();
            assert_eq!(value, value_of(&holder, guard.owner()));
            let took = at - released_at;
            guard.unlock().await.unwrap();
            took
        },
        async {
            let (at, guard) = remote_waiting.await.unwrap();
            let guard = guard.expect("the remote waiter acquires");
            let value: String = conn.clone().get("fast:handoff").await.unwrap();
            assert_eq!(value, value_of(&waiter, guard.owner()));
            let took = at - released_at;
            guard.unlock().await.unwrap();
            took
        }
    );
    let slowest = first.max(second);
    assert!(
        slowest < lease / 10,
        "hand-offs took {first:?} and {second:?}, the lease is {lease:?}"
    );
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_keeps_it_past_the_lease_and_lost_fires_when_the_key_is_deleted() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let client = client_with(&server, |c| c.watchdog_timeout(watchdog)).await;
    let other = client_with(&server, |c| c.watchdog_timeout(watchdog)).await;
    let lock = client.fast_lock("fast:watched").unwrap();
    let me = LockOwner::new();
    let guard = lock
        .acquire_with(AcquireOptions::new().owner(me))
        .await
        .unwrap();
    let lost = guard.lost();
    let mut conn = server.conn().await;
    let held_since = Instant::now();
    while held_since.elapsed() < watchdog * 3 {
        // Holding for three leases is the scenario; each look checks it is still ours.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (value, pttl): (Option<String>, i64) = redis::pipe()
            .get("fast:watched")
            .pttl("fast:watched")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(
            value,
            Some(value_of(&client, me)),
            "lost the key while held"
        );
        assert!(
            pttl > 0 && pttl <= watchdog.as_millis() as i64,
            "pttl {pttl}"
        );
        assert!(!guard.is_lost());
    }
    assert!(
        other
            .fast_lock("fast:watched")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "still held after three leases"
    );

    let _: () = conn.del("fast:watched").await.unwrap();
    let deleted_at = Instant::now();
    timeout(watchdog * 2, lost)
        .await
        .expect("the next renewal reports the loss");
    assert!(guard.is_lost());
    assert!(deleted_at.elapsed() < watchdog);
    assert_eq!(
        client.watched_holds(),
        0,
        "renewal stopped for the lost hold"
    );
    assert_eq!(
        server.keys().await,
        Vec::<String>::new(),
        "a failed renewal writes nothing"
    );
    assert!(matches!(
        guard.unlock().await,
        Err(LockError::NotOwner { .. })
    ));
    let next = lock
        .acquire_with(AcquireOptions::new().owner(me).wait(Duration::ZERO))
        .await
        .expect("the lost owner may take it again");
    next.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_by_a_non_owner_is_refused_and_leaves_the_holder_alone() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let stranger = client(&server).await;
    let me = LockOwner::new();
    let lock = holder.fast_lock("fast:mine").unwrap();
    let guard = lock
        .acquire_with(AcquireOptions::new().owner(me))
        .await
        .unwrap();
    let mut conn = server.conn().await;

    // Another owner, in the holder's process and in another process.
    for actor in [
        lock.actor().unwrap(),
        stranger.lock_actor_of(LockKind::Fast, "fast:mine").unwrap(),
    ] {
        let refused = actor
            .send(Release {
                owner: LockOwner::new(),
            })
            .await
            .unwrap();
        assert!(
            matches!(refused, Err(LockError::NotOwner { ref name }) if name == "fast:mine"),
            "{refused:?}"
        );
    }
    // The same owner id from another client is another owner (its uuid differs).
    let refused = stranger
        .lock_actor_of(LockKind::Fast, "fast:mine")
        .unwrap()
        .send(Release { owner: me })
        .await
        .unwrap();
    assert!(
        matches!(refused, Err(LockError::NotOwner { .. })),
        "{refused:?}"
    );
    let value: String = conn.get("fast:mine").await.unwrap();
    assert_eq!(value, value_of(&holder, me));
    assert_eq!(lock.hold_count(me).await.unwrap(), 1);
    assert!(!guard.is_lost());
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(server.keys().await, Vec::<String>::new());

    // A holder whose key now names someone else (its lease ran out and another took it):
    // the compare-and-delete refuses and leaves the other's key as it is.
    let leased = lock
        .acquire_with(AcquireOptions::new().lease(Duration::from_secs(30)))
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("fast:mine")
        .arg("someone-else:1")
        .arg("KEEPTTL")
        .query_async(&mut conn)
        .await
        .unwrap();
    let refused = leased.unlock().await;
    assert!(
        matches!(refused, Err(LockError::NotOwner { .. })),
        "{refused:?}"
    );
    let value: String = conn.get("fast:mine").await.unwrap();
    assert_eq!(value, "someone-else:1");
    let pttl: i64 = conn.pttl("fast:mine").await.unwrap();
    assert!(
        pttl > 0,
        "the other holder's lease was touched: pttl {pttl}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_holding_other_data_is_wrong_type_and_untouched() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut conn = server.conn().await;
    let _: () = conn.hset("fast:hash", "field", "value").await.unwrap();
    let _: () = conn.rpush("fast:list", &["a", "b"]).await.unwrap();

    for name in ["fast:hash", "fast:list"] {
        let lock = client.fast_lock(name).unwrap();
        // A long wait: non-lock data is refused at once, not waited for.
        let started = Instant::now();
        let error = lock
            .acquire_timeout(Duration::from_secs(20))
            .await
            .unwrap_err();
        assert!(
            matches!(error, LockError::WrongType { name: ref n } if n == name),
            "{name}: {error:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(2), "{name}");
        let tried = lock.try_acquire().await;
        assert!(
            matches!(tried, Err(LockError::WrongType { .. })),
            "{name}: {tried:?}"
        );
        let state = lock.is_locked().await;
        assert!(
            matches!(state, Err(LockError::WrongType { .. })),
            "{name}: {state:?}"
        );
        let forced = lock.force_unlock().await;
        assert!(
            matches!(forced, Err(LockError::WrongType { .. })),
            "{name}: {forced:?}"
        );
    }
    let hash: std::collections::HashMap<String, String> = conn.hgetall("fast:hash").await.unwrap();
    assert_eq!(
        hash,
        std::collections::HashMap::from([("field".to_string(), "value".to_string())])
    );
    let list: Vec<String> = conn.lrange("fast:list", 0, -1).await.unwrap();
    assert_eq!(list, vec!["a".to_string(), "b".to_string()]);
    for key in ["fast:hash", "fast:list"] {
        let pttl: i64 = conn.pttl(key).await.unwrap();
        assert_eq!(pttl, -1, "{key} was given an expiry");
    }
    assert_eq!(
        server.keys().await,
        vec!["fast:hash".to_string(), "fast:list".to_string()]
    );
    assert_eq!(client.watched_holds(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_clients_of_eight_tasks_increment_a_counter_exactly_with_no_overlap() {
    const TASKS_PER_CLIENT: usize = 8;
    const ROUNDS: usize = 40;
    let server = RedisServer::start();
    let clients = [client(&server).await, client(&server).await];
    let conn = server.conn().await;
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for client in &clients {
        for _ in 0..TASKS_PER_CLIENT {
            let lock = client.fast_lock("fast:counter-lock").unwrap();
            let mut conn = conn.clone();
            let (inside, overlaps) = (inside.clone(), overlaps.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let guard = lock.acquire_timeout(Duration::from_secs(60)).await.unwrap();
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    // Read, let others run, write back: only exclusion keeps this exact.
                    let value: Option<i64> = conn.get("fast:counter").await.unwrap();
                    tokio::task::yield_now().await;
                    let _: () = conn
                        .set("fast:counter", value.unwrap_or(0) + 1)
                        .await
                        .unwrap();
                    inside.fetch_sub(1, Ordering::SeqCst);
                    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
                }
            }));
        }
    }
    for task in tasks {
        timeout(Duration::from_secs(120), task)
            .await
            .expect("a task hangs")
            .unwrap();
    }
    let mut conn = conn;
    let value: i64 = conn.get("fast:counter").await.unwrap();
    assert_eq!(value, (2 * TASKS_PER_CLIENT * ROUNDS) as i64);
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");
    assert_eq!(server.keys().await, vec!["fast:counter".to_string()]);
    for client in &clients {
        assert_eq!(client.watched_holds(), 0);
        let idle = client.clone();
        eventually("every lock actor stops", Duration::from_secs(10), || {
            let idle = idle.clone();
            async move { idle.active_locks() == 0 }
        })
        .await;
    }
}

#[tokio::test]
async fn fenced_acquisition_through_the_fast_lock_is_invalid_config() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let actor = client.lock_actor_of(LockKind::Fast, "fast:fenced").unwrap();
    let owner = LockOwner::new();
    for lease in [None, Some(Duration::from_secs(5))] {
        let refused = actor
            .send(AcquireFenced {
                owner,
                lease,
                wait: Duration::from_secs(1),
            })
            .await
            .unwrap();
        match refused {
            Err(LockError::InvalidConfig { reason }) => {
                assert!(reason.contains("fast:fenced"), "{reason}")
            }
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }
    assert_eq!(
        server.keys().await,
        Vec::<String>::new(),
        "neither the lock nor a token counter was written"
    );
    // The refusal did not leave the owner half-registered: it can take the lock normally.
    let guard = client
        .fast_lock("fast:fenced")
        .unwrap()
        .acquire_with(AcquireOptions::new().owner(owner).wait(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(guard.fencing_token(), None);
    guard.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}

/// Known bug (as reported): a second acquire by the same owner that was already queued
/// when the first was granted waits for itself until its deadline (then `Timeout`) instead
/// of failing with `AlreadyHeld` at once: `LockActor::enqueue` checks `AlreadyHeld` only on
/// arrival, and `pump` then lets the head try Redis because its owner "holds" (the re-entry
/// path), where the fast lock's `SET NX` refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_second_acquire_by_the_holding_owner_is_already_held_at_once() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let local = client(&server).await;
    let held = holder
        .fast_lock("fast:queued")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let actor = local.lock_actor_of(LockKind::Fast, "fast:queued").unwrap();
    let me = LockOwner::new();
    let acquire = Acquire {
        owner: me,
        lease: None,
        wait: Duration::from_secs(3),
    };
    server.reset_stats().await;
    let first = tokio::spawn(actor.send(acquire));
    server
        .wait_until_parked("redisson_lock__channel:{fast:queued}", 1)
        .await;
    // `send` puts the message in the mailbox now; the state read behind it is answered only
    // after the second acquire has been queued.
    let second = tokio::spawn(actor.send(acquire));
    actor.send(GetState { owner: None }).await.unwrap().unwrap();

    held.unlock().await.unwrap();
    let first = timeout(Duration::from_secs(2), first)
        .await
        .expect("the first acquire is woken")
        .unwrap()
        .unwrap()
        .expect("the first acquire gets the lock");
    let started = Instant::now();
    let second = second.await.unwrap().unwrap();
    let took = started.elapsed();
    assert!(
        matches!(second, Err(LockError::AlreadyHeld { .. })),
        "expected AlreadyHeld while the same owner holds it, got {second:?} after {took:?}"
    );
    assert!(took < Duration::from_secs(1), "refused after {took:?}");
    first.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}

/// A free fast lock is taken with one plain `SET NX PX`, as rslock does, and no Lua; a busy
/// one still gets its answer (the holder's PTTL) from the acquire script.
#[tokio::test]
async fn a_free_fast_lock_is_taken_with_one_set_and_no_script() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let lock = holder.fast_lock("fast:plain").unwrap();
    server.reset_stats().await;
    let guard = lock.acquire().await.unwrap();
    assert_eq!(
        server.command_calls("set").await,
        1,
        "one SET took the lock"
    );
    assert_eq!(server.command_calls("evalsha").await, 0, "no script ran");
    // Another client: this one's actor knows the lock is held without asking Redis.
    let other = client(&server).await;
    let busy = other
        .fast_lock("fast:plain")
        .unwrap()
        .try_acquire()
        .await
        .unwrap();
    assert!(
        busy.is_none(),
        "another owner does not get a held fast lock"
    );
    assert_eq!(
        server.command_calls("pttl").await,
        1,
        "the busy try read the holder's lease in the acquire script"
    );
    guard.unlock().await.unwrap();
    let mut conn = server.conn().await;
    let exists: bool = conn.exists("fast:plain").await.unwrap();
    assert!(!exists, "the unlock deleted the key");
}

/// An acquire's future is moved whole into the caller's task (and copied on each move): the
/// fast path keeps it small by boxing the Redis calls and the actor's paths. It was 7.4 KB,
/// most of it futures the uncontended path never reaches.
#[tokio::test]
async fn an_acquire_future_stays_small() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let fast = client.fast_lock("fast:size").unwrap();
    let reentrant = client.lock("fast:size:reentrant").unwrap();
    let sizes = [
        std::mem::size_of_val(&fast.acquire()),
        std::mem::size_of_val(&fast.acquire_with(AcquireOptions::new())),
        std::mem::size_of_val(&reentrant.acquire()),
    ];
    for size in sizes {
        assert!(size <= 2048, "an acquire future of {size} bytes: {sizes:?}");
    }
}

/// Unlocks `held`; the guard `waiting` gets, which must come well before the `lease` ends.
async fn release_to_the_waiter(
    held: LockGuard,
    waiting: tokio::task::JoinHandle<Result<LockGuard, LockError>>,
    lease: Duration,
) -> LockGuard {
    let released = Instant::now();
    held.unlock().await.unwrap();
    let theirs = waiting.await.unwrap().expect("the waiter acquires");
    assert!(
        released.elapsed() < lease / 10,
        "woken by the unlock, not by the lease's end: {:?}",
        released.elapsed()
    );
    theirs
}

/// An unlock wakes waiters with a publish only when one of them said it waits (its busy try
/// left a mark beside the key): an uncontended pair publishes nothing, which is most of what
/// Redis spends on it beyond the key itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_publishes_only_when_someone_waits() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let lock = holder.fast_lock("fast:quiet").unwrap();
    lock.acquire().await.unwrap().unlock().await.unwrap();
    server.reset_stats().await;
    for _ in 0..10 {
        lock.acquire().await.unwrap().unlock().await.unwrap();
    }
    assert_eq!(
        server.command_calls("publish").await,
        0,
        "nobody waited: nothing published"
    );

    // A waiter of another client is woken by the unlock, with one publish.
    let lease = holder.config().watchdog_timeout_value();
    let held = lock.acquire().await.unwrap();
    let waiter = client(&server).await;
    let theirs = waiter.fast_lock("fast:quiet").unwrap();
    let waiting = tokio::spawn(async move { theirs.acquire_timeout(lease).await });
    server
        .wait_until_parked("redisson_lock__channel:{fast:quiet}", 1)
        .await;
    server.reset_stats().await;
    let theirs = release_to_the_waiter(held, waiting, lease).await;
    assert_eq!(server.command_calls("publish").await, 1, "one wake-up");
    theirs.unlock().await.unwrap();
    assert_eq!(
        server.keys().await,
        Vec::<String>::new(),
        "nothing left: the mark went with the unlock that woke"
    );
}

/// A waiter in the holder's own process marks nothing (it never asks Redis while a local
/// owner holds): the holder's release wakes it in the process, with no publish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_of_the_same_client_is_woken_by_the_release_without_a_publish() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let lease = holder.config().watchdog_timeout_value();
    let lock = holder.fast_lock("fast:local").unwrap();
    let held = lock.acquire().await.unwrap();
    let actor = lock.actor().unwrap();
    let acquire = Acquire {
        owner: LockOwner::new(),
        lease: None,
        wait: lease,
    };
    // `send` puts the message in the mailbox now; the state read behind it is answered only
    // after the waiter has been queued.
    let request = actor.send(acquire);
    let waiting = tokio::spawn(async move { request.await.unwrap() });
    actor.send(GetState { owner: None }).await.unwrap().unwrap();
    assert!(!waiting.is_finished(), "the lock is held: the waiter waits");
    server.reset_stats().await;
    let theirs = release_to_the_waiter(held, waiting, lease).await;
    assert_eq!(
        server.command_calls("publish").await,
        0,
        "nothing published"
    );
    theirs.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}
