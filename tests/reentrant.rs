//! The reentrant lock against real redis-server processes: exclusion, re-entry, wake-ups,
//! timeouts, leases, the watchdog, dead clients and a dead Redis.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{AcquireOptions, ClientConfig, LockClient, LockError, LockOwner};
use redis::AsyncCommands;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{client, client_with};
use support::{eventually, RedisServer};
use tokio::time::timeout;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_cycles_on_distinct_names_leave_no_key() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut ok = 0;
            for _ in 0..625 {
                let name = format!("cycle:{}", uuid::Uuid::new_v4());
                let lock = client.lock(&name).unwrap();
                let guard = lock
                    .try_acquire()
                    .await
                    .unwrap()
                    .expect("a fresh name is free");
                guard.unlock().await.unwrap();
                ok += 1;
            }
            ok
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    assert_eq!(total, 10_000);
    assert_eq!(server.keys().await, Vec::<String>::new());
    assert_eq!(client.watched_holds(), 0);
    let idle = client.clone();
    eventually("every lock actor stops", Duration::from_secs(10), || {
        let idle = idle.clone();
        async move { idle.active_locks() == 0 }
    })
    .await;
}

#[tokio::test]
async fn same_owner_reenters_and_frees_after_last_release() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("reentrant").unwrap();
    let me = LockOwner::new();
    let first = lock
        .acquire_with(AcquireOptions::new().owner(me))
        .await
        .unwrap();
    let second = lock
        .acquire_with(AcquireOptions::new().owner(me).wait(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(lock.hold_count(me).await.unwrap(), 2);

    // Another owner's unlock is refused and changes nothing.
    let stranger = actix_distributed_lock::messages::Release {
        owner: LockOwner::new(),
    };
    let refused = lock.actor().unwrap().send(stranger).await.unwrap();
    assert!(
        matches!(refused, Err(LockError::NotOwner { .. })),
        "{refused:?}"
    );
    assert_eq!(lock.hold_count(me).await.unwrap(), 2);

    let other = client_with(&server, |c| c).await;
    let theirs = other.lock("reentrant").unwrap();
    assert!(theirs.try_acquire().await.unwrap().is_none());
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "another local owner is refused too"
    );

    assert_eq!(
        second.unlock().await.unwrap(),
        actix_distributed_lock::Released::StillHeld { holds: 1 }
    );
    assert_eq!(lock.hold_count(me).await.unwrap(), 1);
    assert!(theirs.try_acquire().await.unwrap().is_none());

    assert_eq!(
        first.unlock().await.unwrap(),
        actix_distributed_lock::Released::Unlocked
    );
    let guard = theirs
        .try_acquire()
        .await
        .unwrap()
        .expect("free after both releases");
    guard.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_is_woken_by_the_unlock_long_before_the_lease() {
    let server = RedisServer::start();
    let holder_client = client(&server).await;
    let waiter_client = client(&server).await;
    let held = holder_client
        .lock("handoff")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let lease = holder_client.config().watchdog_timeout_value();

    let waiter_lock = waiter_client.lock("handoff").unwrap();
    let waiting = tokio::spawn(async move {
        let guard = waiter_lock.acquire_timeout(Duration::from_secs(20)).await;
        (Instant::now(), guard)
    });
    server
        .wait_until_parked("redisson_lock__channel:{handoff}", 1)
        .await;
    let released_at = Instant::now();
    held.unlock().await.unwrap();
    let (acquired_at, guard) = waiting.await.unwrap();
    let guard = guard.expect("the waiter acquires");
    let handoff = acquired_at - released_at;
    assert!(
        handoff < lease / 10,
        "hand-off took {handoff:?}, lease is {lease:?}"
    );
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_waiters_both_acquire_one_at_a_time() {
    let server = RedisServer::start();
    let clients = [
        client(&server).await,
        client(&server).await,
        client(&server).await,
    ];
    let held = clients[0].lock("pair").unwrap().acquire().await.unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let mut waiters = Vec::new();
    for client in &clients[1..] {
        let lock = client.lock("pair").unwrap();
        let (inside, max_inside) = (inside.clone(), max_inside.clone());
        waiters.push(tokio::spawn(async move {
            let guard = lock.acquire_timeout(Duration::from_secs(20)).await.unwrap();
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            max_inside.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await; // the hold being protected
            inside.fetch_sub(1, Ordering::SeqCst);
            guard.unlock().await.unwrap();
        }));
    }
    server
        .wait_until_parked("redisson_lock__channel:{pair}", 2)
        .await;
    held.unlock().await.unwrap();
    for waiter in waiters {
        timeout(Duration::from_secs(20), waiter)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(max_inside.load(Ordering::SeqCst), 1);
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test]
async fn wait_times_out_after_its_bound_and_the_holder_keeps_the_lock() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let waiter = client(&server).await;
    let me = LockOwner::new();
    let lock = holder.lock("busy").unwrap();
    let _held = lock
        .acquire_with(AcquireOptions::new().owner(me))
        .await
        .unwrap();

    let started = Instant::now();
    let error = waiter
        .lock("busy")
        .unwrap()
        .acquire_timeout(Duration::from_secs(1))
        .await
        .unwrap_err();
    let waited = started.elapsed();
    assert!(
        matches!(error, LockError::Timeout { ref name, .. } if name == "busy"),
        "{error}"
    );
    assert!(
        waited >= Duration::from_secs(1),
        "gave up early: {waited:?}"
    );
    assert!(waited < Duration::from_secs(2), "gave up late: {waited:?}");
    assert_eq!(lock.hold_count(me).await.unwrap(), 1);
    // A parked waiter does not poll: a first try, a second after subscribing, perhaps a
    // last one at the deadline.
    let tries = server.command_calls("pttl").await;
    assert!(tries <= 3, "the waiter polled Redis {tries} times in 1 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_waiters_queue_behind_one_contender_and_each_unlock_wakes_one() {
    const WAITERS: usize = 50;
    let server = RedisServer::start();
    let holder = client(&server).await;
    let local = client(&server).await;
    let held = holder.lock("queue").unwrap().acquire().await.unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let waiter = |lock: actix_distributed_lock::Lock, inside: Arc<AtomicUsize>| async move {
        let guard = lock.acquire_timeout(Duration::from_secs(30)).await.unwrap();
        assert_eq!(
            inside.fetch_add(1, Ordering::SeqCst),
            0,
            "two holders at once"
        );
        tokio::task::yield_now().await;
        inside.fetch_sub(1, Ordering::SeqCst);
        guard.unlock().await.unwrap();
    };
    // The first waiter parks (its first try goes straight to Redis while the actor is
    // idle; it subscribes and tries once more). The others find the actor busy with it.
    let mut tasks = vec![tokio::spawn(waiter(
        local.lock("queue").unwrap(),
        inside.clone(),
    ))];
    server
        .wait_until_parked("redisson_lock__channel:{queue}", 1)
        .await;
    for _ in 1..WAITERS {
        let lock = local.lock("queue").unwrap();
        tasks.push(tokio::spawn(waiter(lock, inside.clone())));
    }
    // Give every local waiter time to contend, if it were going to: only the head does.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        server.command_calls("pttl").await,
        2,
        "only the head of the queue tries"
    );
    held.unlock().await.unwrap();
    for task in tasks {
        timeout(Duration::from_secs(30), task)
            .await
            .unwrap()
            .unwrap();
    }
    // About one failed try per hand-off (the next head checks once, then sleeps until the
    // unlock); a herd would make every waiter try at every unlock (~WAITERS² / 2).
    let tries = server.command_calls("pttl").await as usize;
    assert!(
        tries <= 2 * WAITERS + 4,
        "{tries} failed tries for {WAITERS} hand-offs"
    );
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test]
async fn fixed_lease_expires_on_its_own_and_is_never_renewed() {
    let server = RedisServer::start();
    // A short watchdog would renew within the test if it wrongly watched this hold.
    let client = client_with(&server, |c| c.watchdog_timeout(Duration::from_millis(300))).await;
    let lock = client.lock("leased").unwrap();
    server.reset_stats().await;
    let started = Instant::now();
    let guard = lock
        .acquire_with(AcquireOptions::new().lease(Duration::from_secs(1)))
        .await
        .unwrap();
    assert_eq!(
        server.command_calls("pexpire").await,
        1,
        "only the acquire sets the lease"
    );
    assert_eq!(client.watched_holds(), 0);

    timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost() fires at the lease");
    let mut conn = server.conn().await;
    eventually("the key expires", Duration::from_secs(3), || {
        let mut conn = conn.clone();
        async move { !conn.exists::<_, bool>("leased").await.unwrap() }
    })
    .await;
    let lived = started.elapsed();
    assert!(
        lived >= Duration::from_millis(900),
        "expired early: {lived:?}"
    );
    assert!(lived < Duration::from_secs(3), "expired late: {lived:?}");
    assert_eq!(
        server.command_calls("pexpire").await,
        1,
        "no renewal was ever sent"
    );
    let _: () = conn.set("unrelated", 1).await.unwrap();
    assert!(matches!(
        guard.unlock().await,
        Err(LockError::NotOwner { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_a_thousand_contenders_exactly_one_acquires() {
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(client(&server).await);
    }
    let barrier = Arc::new(tokio::sync::Barrier::new(1000));
    let mut tasks = Vec::new();
    for i in 0..1000 {
        let lock = clients[i % 4].lock("contended").unwrap();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let options = AcquireOptions::new()
                .wait(Duration::from_millis(300))
                .lease(Duration::from_secs(60));
            lock.acquire_with(options).await
        }));
    }
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(guard) => winners.push(guard),
            Err(LockError::Timeout { .. }) => {}
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    assert_eq!(winners.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_tasks_increment_a_counter_exactly_with_no_overlap() {
    let server = RedisServer::start();
    let clients = [client(&server).await, client(&server).await];
    let conn = server.conn().await;
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..100 {
        let lock = clients[i % 2].lock("counter-lock").unwrap();
        let mut conn = conn.clone();
        let (inside, max_inside) = (inside.clone(), max_inside.clone());
        tasks.push(tokio::spawn(async move {
            let guard = lock.acquire_timeout(Duration::from_secs(60)).await.unwrap();
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            max_inside.fetch_max(now, Ordering::SeqCst);
            let value: Option<i64> = conn.get("counter").await.unwrap();
            tokio::task::yield_now().await;
            let _: () = conn.set("counter", value.unwrap_or(0) + 1).await.unwrap();
            inside.fetch_sub(1, Ordering::SeqCst);
            guard.unlock().await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut conn = conn;
    let value: i64 = conn.get("counter").await.unwrap();
    assert_eq!(value, 100);
    assert_eq!(max_inside.load(Ordering::SeqCst), 1);
    assert_eq!(server.keys().await, vec!["counter".to_string()]);
}

#[tokio::test]
async fn watchdog_keeps_the_lock_and_stops_renewing_at_unlock() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let client = client_with(&server, |c| c.watchdog_timeout(watchdog)).await;
    let lock = client.lock("watched").unwrap();
    let guard = lock.acquire().await.unwrap();
    assert_eq!(client.watched_holds(), 1);
    let mut conn = server.conn().await;
    let held_since = Instant::now();
    while held_since.elapsed() < Duration::from_secs(5) {
        // Holding for 5 s is the scenario; each look checks the lock is still ours.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let ttl: i64 = conn.pttl("watched").await.unwrap();
        assert!(ttl > 0, "lock expired while held (pttl {ttl})");
        assert!(!guard.is_lost());
    }
    assert!(
        server.command_calls("pexpire").await >= 10,
        "renewed every ~333 ms"
    );
    guard.unlock().await.unwrap();
    assert!(!conn.exists::<_, bool>("watched").await.unwrap());
    assert_eq!(client.watched_holds(), 0);
    let renewals = server.command_calls("pexpire").await;
    let scripts = server.command_calls("evalsha").await;
    // Three renew intervals would each have sent a renewal.
    tokio::time::sleep(watchdog).await;
    assert_eq!(
        server.command_calls("pexpire").await,
        renewals,
        "renewed after unlock"
    );
    assert_eq!(
        server.command_calls("evalsha").await,
        scripts,
        "a renewal script ran after unlock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_client_lets_its_lock_expire_within_the_watchdog_timeout() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let other = client(&server).await;
    for how in ["drop", "shutdown"] {
        let name = format!("abandoned-{how}");
        let doomed = client_with(&server, |c| c.watchdog_timeout(watchdog)).await;
        let guard = doomed.lock(&name).unwrap().acquire().await.unwrap();
        let lost = guard.lost();
        let gone_at = Instant::now();
        match how {
            "drop" => drop(doomed),
            _ => doomed.shutdown(),
        }
        timeout(Duration::from_secs(5), lost)
            .await
            .expect("the guard hears it is lost");
        let taken = other
            .lock(&name)
            .unwrap()
            .acquire_timeout(Duration::from_secs(10))
            .await
            .expect("another client takes the expired lock");
        let after = gone_at.elapsed();
        assert!(
            after < watchdog + Duration::from_secs(1),
            "{how}: took {after:?}"
        );
        drop(guard);
        taken.unlock().await.unwrap();
    }
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test]
async fn acquire_with_redis_stopped_is_unavailable_quickly() {
    let mut server = RedisServer::start();
    let client = client_with(&server, |c| {
        c.response_timeout(Duration::from_millis(500))
            .connect_timeout(Duration::from_millis(500))
    })
    .await;
    let lock = client.lock("no-redis").unwrap();
    server.stop();
    for _ in 0..3 {
        let started = Instant::now();
        let result = timeout(
            Duration::from_secs(10),
            lock.acquire_timeout(Duration::from_secs(8)),
        )
        .await
        .expect("acquire hangs with Redis stopped");
        let error = result.unwrap_err();
        assert!(error.is_unavailable(), "{error}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "took {:?}",
            started.elapsed()
        );
    }
    let started = Instant::now();
    let refused = LockClient::connect(
        ClientConfig::new(server.url()).connect_timeout(Duration::from_millis(500)),
    )
    .await
    .unwrap_err();
    assert!(refused.is_unavailable(), "{refused}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_per_node_stay_constant_with_many_locks_and_waiters() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let waiter = client(&server).await;
    // The subscription connection comes up in the background after `connect` returns.
    eventually(
        "two clients, each one command and one subscription connection",
        Duration::from_secs(10),
        || async { server.connections().await == 4 },
    )
    .await;
    let idle = server.connections().await;
    assert_eq!(idle, 4, "no more connections appear once both are up");
    let mut held = Vec::new();
    for i in 0..50 {
        held.push(
            holder
                .lock(&format!("busy:{i}"))
                .unwrap()
                .acquire()
                .await
                .unwrap(),
        );
    }
    let mut tasks = Vec::new();
    for i in 0..200 {
        let lock = waiter.lock(&format!("busy:{}", i % 50)).unwrap();
        tasks.push(tokio::spawn(async move {
            let guard = lock.acquire_timeout(Duration::from_secs(30)).await.unwrap();
            guard.unlock().await.unwrap();
        }));
    }
    // Every name's head waiter has subscribed and parked (two failed tries each).
    eventually("50 head waiters park", Duration::from_secs(10), || async {
        server.command_calls("pttl").await >= 100
    })
    .await;
    // `command_calls` above opens and drops a connection of its own each time; under load
    // the server may still list a dropped one for a moment. The clients' own count must
    // settle back to `idle`, and a connection per lock or waiter never would.
    eventually(
        "connections stay at two per client with locks and waiters",
        Duration::from_secs(5),
        || async { server.connections().await == idle },
    )
    .await;
    drop(held);
    for task in tasks {
        timeout(Duration::from_secs(30), task)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(server.connections().await, idle);
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_retry_and_subscriptions_return_after_redis_restarts() {
    let mut server = RedisServer::start();
    // Long enough that the waiter's lease timer (at least 4 s away) cannot be what wakes it.
    let watchdog = Duration::from_secs(6);
    let holder = client_with(&server, |c| c.watchdog_timeout(watchdog)).await;
    let waiter = client(&server).await;
    let held = holder.lock("restart").unwrap().acquire().await.unwrap();
    let lock = waiter.lock("restart").unwrap();
    let waiting = tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(25)).await });
    server
        .wait_until_parked("redisson_lock__channel:{restart}", 1)
        .await;

    server.restart(); // empty: the held lock is gone, and no unlock is ever published
    let restarted = Instant::now();
    let guard = timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the waiter hangs after a restart")
        .unwrap()
        .expect("the waiter acquires after the restart");
    let woke = restarted.elapsed();
    assert!(
        woke < Duration::from_secs(2),
        "woken after {woke:?}, not by the reconnect"
    );

    let mut conn = server.conn().await;
    let numsub: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg("redisson_lock__channel:{restart}")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(numsub[0].1, 1, "the subscription was restored");

    timeout(Duration::from_secs(5), held.lost())
        .await
        .expect("the old holder hears its lock is gone");
    assert!(matches!(
        held.unlock().await,
        Err(LockError::NotOwner { .. })
    ));
    guard.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_when_the_lock_vanishes_and_never_after_a_normal_release() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let other = client(&server).await;
    let client = client_with(&server, |c| c.watchdog_timeout(watchdog)).await;

    let guard = client.lock("released").unwrap().acquire().await.unwrap();
    let lost = guard.lost();
    guard.unlock().await.unwrap();
    assert!(
        timeout(Duration::from_millis(300), lost).await.is_err(),
        "lost() resolved after a normal release"
    );

    let guard = client.lock("vanishes").unwrap().acquire().await.unwrap();
    let lost = guard.lost();
    assert!(other
        .lock("vanishes")
        .unwrap()
        .force_unlock()
        .await
        .unwrap());
    timeout(watchdog * 2, lost)
        .await
        .expect("the watchdog's next renewal reports the loss");
    assert!(guard.is_lost());
    assert_eq!(
        client.watched_holds(),
        0,
        "renewal stopped for the lost hold"
    );
    assert!(matches!(
        guard.unlock().await,
        Err(LockError::NotOwner { .. })
    ));
}

#[actix_rt::test]
async fn works_inside_an_actix_system_on_its_own_thread() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("in-actix").unwrap();
    let guard = lock.acquire().await.unwrap();
    let ttl = lock
        .remaining_ttl()
        .await
        .unwrap()
        .expect("held locks have a ttl");
    assert!(ttl > Duration::ZERO && ttl <= client.config().watchdog_timeout_value());
    assert!(lock.is_locked().await.unwrap());
    guard.unlock().await.unwrap();
    assert_eq!(lock.remaining_ttl().await.unwrap(), None);
    assert!(!lock.is_locked().await.unwrap());
    drop(lock);
    drop(client);
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_guard_releases_in_the_background() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let waiter = client(&server).await;
    let guard = holder.lock("dropped").unwrap().acquire().await.unwrap();
    let lock = waiter.lock("dropped").unwrap();
    let waiting = tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(20)).await });
    server
        .wait_until_parked("redisson_lock__channel:{dropped}", 1)
        .await;
    let dropped_at = Instant::now();
    drop(guard);
    let taken = waiting
        .await
        .unwrap()
        .expect("the waiter takes the dropped lock");
    assert!(
        dropped_at.elapsed() < Duration::from_secs(3),
        "took {:?}",
        dropped_at.elapsed()
    );
    assert_eq!(holder.watched_holds(), 0);
    taken.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_acquire_leaves_nothing_behind() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let waiter = client(&server).await;
    let held = holder.lock("cancelled").unwrap().acquire().await.unwrap();
    let lock = waiter.lock("cancelled").unwrap();
    // Give up after 200 ms of a 20 s wait: the future is dropped mid-wait.
    let gave_up = timeout(
        Duration::from_millis(200),
        lock.acquire_timeout(Duration::from_secs(20)),
    )
    .await;
    assert!(gave_up.is_err());
    held.unlock().await.unwrap();
    // The withdrawn waiter never takes the lock: another owner gets it at once.
    let next = lock.try_acquire().await.unwrap().expect("nobody holds it");
    next.unlock().await.unwrap();
    drop(lock);
    assert_eq!(server.keys().await, Vec::<String>::new());
    let idle = waiter.clone();
    eventually("the lock actor stops", Duration::from_secs(10), || {
        let idle = idle.clone();
        async move { idle.active_locks() == 0 }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_that_expires_without_an_unlock_message_wakes_its_waiter_by_timer() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let waiter = client(&server).await;
    let lease = Duration::from_secs(1);
    let started = Instant::now();
    let _held = holder
        .lock("expiring")
        .unwrap()
        .acquire_with(AcquireOptions::new().lease(lease))
        .await
        .unwrap();
    let lock = waiter.lock("expiring").unwrap();
    let waiting = tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(20)).await });
    server
        .wait_until_parked("redisson_lock__channel:{expiring}", 1)
        .await;
    // The lease runs out in Redis: nothing is published, only the waiter's timer helps.
    let guard = timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiter hangs when no unlock message comes")
        .unwrap()
        .unwrap();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "acquired before the lease ended: {took:?}"
    );
    assert!(
        took < lease + Duration::from_millis(800),
        "woke late: {took:?}"
    );
    guard.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}
