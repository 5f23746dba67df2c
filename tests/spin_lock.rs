//! The spin lock (`LockClient::spin_lock`, Redisson's `RSpinLock`) against a real
//! redis-server: the reentrant lock's hash without pub/sub. Exclusion, hand-over by polling,
//! the backoff's pace, bounded and cancelled waits that leave nothing, re-entry, the
//! watchdog, fixed leases and `lost()`, bad backoffs, and that nothing ever subscribes or
//! publishes. (Cluster and Sentinel: `spin_lock_topologies.rs`; Redisson:
//! `redisson_java_spin.rs`.)

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{
    AcquireOptions, LockClient, LockError, LockKind, LockOwner, Released, SpinBackoff,
};
use redis::AsyncCommands;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{client, client_with, eventually, RedisServer};

/// How soon a polling waiter must notice an unlock: the default backoff's cap is 128 ms, so
/// this leaves a loaded machine plenty.
const HAND_OVER_BOUND: Duration = Duration::from_secs(2);
const PROMPT: Duration = Duration::from_secs(10);

/// The field our client writes for `owner`.
fn field(client: &LockClient, owner: LockOwner) -> String {
    format!("{}:{}", client.id(), owner.id())
}

/// Nothing on the server ever subscribed or published (the probes' own commands aside).
async fn assert_no_pub_sub(server: &RedisServer) {
    for command in [
        "subscribe",
        "ssubscribe",
        "psubscribe",
        "publish",
        "spublish",
    ] {
        assert_eq!(
            server.command_calls(command).await,
            0,
            "{command} was called"
        );
    }
}

/// Every connection's subscription counts, from `CLIENT LIST`: all must be 0.
async fn subscriptions_per_connection(server: &RedisServer) -> Vec<String> {
    let mut conn = server.conn().await;
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut conn)
        .await
        .unwrap();
    list.lines()
        .flat_map(|line| line.split(' '))
        .filter(|word| {
            ["sub=", "psub=", "ssub="]
                .iter()
                .any(|p| word.starts_with(p))
        })
        .filter(|word| !word.ends_with("=0"))
        .map(str::to_string)
        .collect()
}

async fn hash(server: &RedisServer, key: &str) -> HashMap<String, u32> {
    server.conn().await.hgetall(key).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_polls_without_ever_subscribing_and_takes_the_lock_once_it_is_unlocked() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let waiter = client(&server).await;
    let name = "spin:hand-over";
    let lock = holder.spin_lock(name).unwrap();
    assert_eq!(lock.kind(), LockKind::Spin);
    let guard = lock.acquire().await.unwrap();
    let theirs = waiter.spin_lock(name).unwrap();
    let me = LockOwner::new();
    let task = tokio::spawn(async move {
        let options = AcquireOptions::new().owner(me).wait(PROMPT);
        let guard = theirs.acquire_with(options).await;
        (guard, Instant::now())
    });
    // Several backoff rounds go by: the waiter tries again and again, subscribing to nothing.
    eventually("the waiter tried a few times", PROMPT, || async {
        server.script_calls().await >= 8
    })
    .await;
    assert!(!task.is_finished(), "the waiter got a held lock");
    let channel = format!("redisson_lock__channel:{{{name}}}");
    assert_eq!(server.subscribers(&channel).await, 0);
    assert_eq!(
        subscriptions_per_connection(&server).await,
        Vec::<String>::new()
    );

    let unlocked_at = Instant::now();
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    let (taken, granted_at) = tokio::time::timeout(PROMPT, task).await.unwrap().unwrap();
    let taken = taken.expect("the waiter takes the lock once it is free");
    let took = granted_at - unlocked_at;
    assert!(took < HAND_OVER_BOUND, "handed over after {took:?}");
    assert_eq!(
        hash(&server, name).await,
        HashMap::from([(field(&waiter, me), 1)])
    );
    assert_eq!(taken.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(server.keys().await, Vec::<String>::new());
    assert_no_pub_sub(&server).await;
    assert_eq!(
        subscriptions_per_connection(&server).await,
        Vec::<String>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_two_clients_never_hold_it_at_once_and_every_increment_counts() {
    let server = RedisServer::start();
    let clients = [client(&server).await, client(&server).await];
    let inside = Arc::new(AtomicUsize::new(0));
    let (tasks, rounds) = (4, 15);
    let mut handles = Vec::new();
    for i in 0..tasks {
        let lock = clients[i % 2].spin_lock("spin:counter").unwrap();
        let inside = inside.clone();
        let mut conn = server.conn().await;
        handles.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let guard = lock.acquire_timeout(Duration::from_secs(30)).await.unwrap();
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders at once"
                );
                // Read, yield, write: only mutual exclusion keeps the count exact.
                let n: u64 = conn
                    .get::<_, Option<u64>>("counter")
                    .await
                    .unwrap()
                    .unwrap_or(0);
                tokio::task::yield_now().await;
                let () = conn.set("counter", n + 1).await.unwrap();
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await.unwrap();
            }
        }));
    }
    for handle in handles {
        tokio::time::timeout(Duration::from_secs(120), handle)
            .await
            .expect("every task finishes")
            .unwrap();
    }
    let count: u64 = server.conn().await.get("counter").await.unwrap();
    assert_eq!(count, (tasks * rounds) as u64);
    assert_eq!(server.keys().await, vec!["counter".to_string()]);
    assert_no_pub_sub(&server).await;
}

/// Tries during a `wait` that times out, with the lock held throughout.
async fn tries_while_waiting(server: &RedisServer, backoff: SpinBackoff, wait: Duration) -> u64 {
    let holder = client(server).await;
    let waiter = client(server).await;
    let name = "spin:pace";
    let guard = holder.spin_lock(name).unwrap().acquire().await.unwrap();
    server.reset_stats().await;
    let before = server.script_calls().await; // the probe's own INFO is no script call
    let started = Instant::now();
    let lock = waiter.spin_lock_with(name, backoff).unwrap();
    let outcome = lock.acquire_timeout(wait).await;
    let waited = started.elapsed();
    assert!(
        matches!(outcome, Err(LockError::Timeout { .. })),
        "{outcome:?}"
    );
    assert!(waited >= wait, "gave up after {waited:?}");
    let tries = server.script_calls().await - before;
    eprintln!("{backoff:?} over {wait:?}: {tries} tries");
    guard.unlock().await.unwrap();
    tries
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backoff_sets_the_pace_of_the_tries() {
    let server = RedisServer::start();
    // Constant 100 ms over 1 s: the first try and about ten more (fewer when timers fire
    // late on a loaded machine; never a hot spin).
    let constant = SpinBackoff::constant(Duration::from_millis(100));
    let tries = tries_while_waiting(&server, constant, Duration::from_secs(1)).await;
    assert!(
        (3..=13).contains(&tries),
        "{tries} tries at 100 ms over 1 s"
    );
    // Redisson's default: 1, 2, 4 ... 128 ms (7 tries in the first 127 ms), then every
    // 128 ms: about 19 over 1.5 s.
    let default = SpinBackoff::default();
    let tries = tries_while_waiting(&server, default, Duration::from_millis(1500)).await;
    assert!(
        (8..=24).contains(&tries),
        "{tries} tries by the default over 1.5 s"
    );
    // A slower one: 400 ms apart after 50, 100, 200 ms: 6 or 7 over 1.5 s.
    let slow = SpinBackoff::exponential()
        .initial_delay(Duration::from_millis(50))
        .max_delay(Duration::from_millis(400))
        .jitter(Duration::ZERO);
    let tries = tries_while_waiting(&server, slow, Duration::from_millis(1500)).await;
    assert!(
        (3..=8).contains(&tries),
        "{tries} tries by the slow backoff over 1.5 s"
    );
    assert_eq!(server.keys().await, Vec::<String>::new());
    assert_no_pub_sub(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_times_out_or_is_cancelled_leaves_nothing_behind() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let waiter = client(&server).await;
    let name = "spin:give-up";
    let me = LockOwner::new();
    let guard = holder
        .spin_lock(name)
        .unwrap()
        .acquire_with(AcquireOptions::new().owner(me))
        .await
        .unwrap();
    let lock = waiter.spin_lock(name).unwrap();

    let timed_out = lock.acquire_timeout(Duration::from_millis(300)).await;
    assert!(
        matches!(&timed_out, Err(LockError::Timeout { name: n, waited, .. }) if n == name && *waited >= Duration::from_millis(300)),
        "{timed_out:?}"
    );
    // Cancelled mid-wait: the future is dropped between two tries.
    let cancelled = tokio::time::timeout(Duration::from_millis(300), lock.acquire_timeout(PROMPT));
    assert!(cancelled.await.is_err(), "still waiting when dropped");
    drop(lock); // a handle keeps its actor
    eventually("the waiter's actor is gone", PROMPT, || async {
        waiter.active_locks() == 0
    })
    .await;
    assert_eq!(server.keys().await, vec![name.to_string()]);
    assert_eq!(
        hash(&server, name).await,
        HashMap::from([(field(&holder, me), 1)])
    );

    // Once the holder lets go, nobody takes it behind anyone's back.
    guard.unlock().await.unwrap();
    let calls = server.script_calls().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(server.keys().await, Vec::<String>::new());
    assert_eq!(
        server.script_calls().await,
        calls,
        "a given-up waiter still tries"
    );
    assert_eq!(waiter.watched_holds(), 0);
    assert_no_pub_sub(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn its_owner_re_enters_and_frees_it_after_as_many_unlocks_while_others_wait() {
    let server = RedisServer::start();
    let locks = client(&server).await;
    let lock = locks.spin_lock("spin:re-entry").unwrap();
    let me = LockOwner::new();
    let outer = lock
        .acquire_with(AcquireOptions::new().owner(me))
        .await
        .unwrap();
    let inner = outer.reenter(Duration::ZERO).await.unwrap();
    assert_eq!(lock.hold_count(me).await.unwrap(), 2);
    assert_eq!(
        hash(&server, "spin:re-entry").await,
        HashMap::from([(field(&locks, me), 2)])
    );
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "another owner is excluded"
    );
    // The reentrant lock on the same name is the same hash: excluded too, both ways.
    assert!(locks
        .lock("spin:re-entry")
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        inner.unlock().await.unwrap(),
        Released::StillHeld { holds: 1 }
    );
    assert_eq!(outer.unlock().await.unwrap(), Released::Unlocked);
    let plain = locks
        .lock("spin:re-entry")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    assert!(lock.try_acquire().await.unwrap().is_none());
    plain.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_it_and_a_fixed_lease_runs_out_and_is_reported_lost() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(1500);
    let locks = client_with(&server, |c| c.watchdog_timeout(lease)).await;
    let other = client(&server).await;
    let name = "spin:lease";
    let kept = locks.spin_lock(name).unwrap().acquire().await.unwrap();
    tokio::time::sleep(3 * lease).await;
    assert!(!kept.is_lost(), "the watchdog kept it");
    let pttl: i64 = server.conn().await.pttl(name).await.unwrap();
    assert!(pttl > 0 && pttl <= lease.as_millis() as i64, "pttl {pttl}");
    assert!(other
        .spin_lock(name)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    kept.unlock().await.unwrap();

    // A fixed lease of 400 ms, never renewed: it runs out, `lost()` says so, and a waiter
    // polling meanwhile takes the lock as the key expires.
    let fixed = AcquireOptions::new().lease(Duration::from_millis(400));
    let asked_at = Instant::now(); // the key's TTL starts after this
    let held = locks
        .spin_lock(name)
        .unwrap()
        .acquire_with(fixed)
        .await
        .unwrap();
    let waiter = other.spin_lock(name).unwrap();
    let next = tokio::spawn(async move {
        let guard = waiter.acquire_timeout(PROMPT).await;
        (guard, asked_at.elapsed())
    });
    tokio::time::timeout(PROMPT, held.lost())
        .await
        .expect("lost() fires");
    assert!(held.is_lost());
    // It fires at its own deadline, within the lease (the exact timing against Redis is
    // lost_timing.rs's, the same for every kind): the bound only allows a loaded machine
    // to run this task late.
    let lost_after = asked_at.elapsed();
    assert!(
        lost_after < Duration::from_millis(1400),
        "lost() after {lost_after:?}"
    );
    let (next, granted_after) = tokio::time::timeout(PROMPT, next).await.unwrap().unwrap();
    let next = next.unwrap();
    // Redis let it go no sooner than the lease after the acquire was sent (1 ms for its
    // clock's rounding).
    assert!(
        granted_after >= Duration::from_millis(399),
        "taken after {granted_after:?}"
    );
    assert!(matches!(
        held.unlock().await,
        Err(LockError::NotOwner { .. } | LockError::Lost { .. })
    ));
    next.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
    assert_no_pub_sub(&server).await;
}

#[tokio::test]
async fn a_bad_backoff_is_refused_with_the_setting_named() {
    let server = RedisServer::start();
    let locks = client(&server).await;
    let ms = Duration::from_millis;
    let cases = [
        (
            SpinBackoff::exponential().initial_delay(Duration::ZERO),
            "initial backoff delay must be positive",
        ),
        (
            SpinBackoff::exponential().max_delay(Duration::ZERO),
            "maximum backoff delay must be positive",
        ),
        (SpinBackoff::constant(Duration::ZERO), "must be positive"),
        (
            SpinBackoff::exponential()
                .initial_delay(ms(500))
                .max_delay(ms(100)),
            "must not exceed",
        ),
        (SpinBackoff::exponential().multiplier(0.0), "multiplier"),
        (SpinBackoff::exponential().multiplier(-2.0), "multiplier"),
        (
            SpinBackoff::exponential().multiplier(f64::NAN),
            "multiplier",
        ),
    ];
    for (backoff, says) in cases {
        match locks.spin_lock_with("spin:bad", backoff) {
            Err(LockError::InvalidConfig { reason }) => {
                assert!(reason.contains(says), "{backoff:?}: {reason}")
            }
            other => panic!("{backoff:?} was not refused: {other:?}"),
        }
    }
    assert!(matches!(
        locks.spin_lock(""),
        Err(LockError::InvalidName { .. })
    ));
    assert_eq!(server.keys().await, Vec::<String>::new());
}

/// A spin lock is the reentrant lock's hash in Redis (Redisson's `RSpinLock` too): the
/// inspector lists and shows it as that, with its holder.
#[cfg(feature = "inspector")]
#[tokio::test]
async fn the_inspector_shows_a_spin_lock_as_the_reentrant_hash_it_is() {
    use actix_distributed_lock::inspect::InspectedKind;
    let server = RedisServer::start();
    let locks = client(&server).await;
    let guard = locks
        .spin_lock("spin:shown")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let inspector = locks.inspector();
    let shown = inspector.show("spin:shown").await.unwrap().expect("shown");
    assert_eq!(shown.kind, InspectedKind::Reentrant);
    let holders: Vec<_> = shown
        .holders
        .iter()
        .map(|h| (h.field.clone(), h.count))
        .collect();
    assert_eq!(holders, [(field(&locks, guard.owner()), 1)]);
    assert!(shown.ttl_ms.is_some_and(|ttl| ttl > 0));
    let listed = inspector.list(Some("spin:*")).await.unwrap();
    let listed: Vec<_> = listed
        .iter()
        .map(|l| (l.name.as_str(), l.kind, &l.holders))
        .collect();
    assert_eq!(
        listed,
        [("spin:shown", InspectedKind::Reentrant, &shown.holders)]
    );
    guard.unlock().await.unwrap();
    assert_eq!(inspector.show("spin:shown").await.unwrap(), None);
}

/// Where pub/sub is unavailable: a Redis user with no channel at all and none of the
/// pub/sub commands (`reset` leaves it none) still takes, waits for, renews and hands over
/// spin locks under its prefix. Its keys: the lock's name alone (no channel key either).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_any_pub_sub_rights_uses_spin_locks_fully() {
    let server = RedisServer::start();
    let commands = "evalsha script|load exists hexists hincrby hget pexpire pttl del type";
    let mut setuser = redis::cmd("ACL");
    setuser
        .arg("SETUSER")
        .arg("spinner")
        .arg("reset")
        .arg("on")
        .arg(">pw");
    setuser.arg("~spin:*");
    for command in commands.split_whitespace() {
        setuser.arg(format!("+{command}"));
    }
    let () = setuser.query_async(&mut server.conn().await).await.unwrap();
    let url = format!("redis://spinner:pw@127.0.0.1:{}/", server.port());
    let lease = Duration::from_millis(1500);
    let connect = || {
        let config = actix_distributed_lock::ClientConfig::new(url.clone()).watchdog_timeout(lease);
        support::clients::connect(config, "the user without pub/sub")
    };
    let (holder, waiter) = (connect().await, connect().await);
    let name = "spin:acl";
    let guard = holder.spin_lock(name).unwrap().acquire().await.unwrap();
    let next = {
        let lock = waiter.spin_lock(name).unwrap();
        tokio::spawn(async move { lock.acquire_timeout(PROMPT).await })
    };
    tokio::time::sleep(2 * lease).await; // renewals keep it; the waiter polls meanwhile
    assert!(!guard.is_lost() && !next.is_finished());
    let lock = holder.spin_lock(name).unwrap();
    assert!(lock.is_locked().await.unwrap());
    assert_eq!(lock.hold_count(guard.owner()).await.unwrap(), 1);
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    let taken = tokio::time::timeout(PROMPT, next)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(taken.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(server.keys().await, Vec::<String>::new());
    let refused = holder.spin_lock("other:acl").unwrap().try_acquire().await;
    assert!(
        matches!(refused, Err(LockError::Denied { .. })),
        "{refused:?}"
    );
}
