//! Faults other lock libraries get wrong, against real redis-server processes: churn,
//! pauses, restarts, cut connections, cancellation storms, Redis away and back.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::messages::Acquire;
use actix_distributed_lock::{AcquireOptions, ClientConfig, LockError, LockOwner, Released};
use rand::Rng;
use redis::AsyncCommands;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::client_at;
use support::proxy::TcpProxy;
use support::{eventually, RedisServer};
use tokio::time::timeout;

fn fast_failing(config: ClientConfig) -> ClientConfig {
    config
        .response_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(500))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_holds_under_churn_of_ten_thousand_acquisitions() {
    const TOTAL: usize = 10_000;
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(client_at(&server.url(), |c| c).await);
    }
    let conn = server.conn().await;
    let started = Arc::new(AtomicUsize::new(0));
    let log = Arc::new(Mutex::new(Vec::with_capacity(TOTAL)));
    let mut tasks = Vec::new();
    for client in &clients {
        for _ in 0..8 {
            let lock = client.lock("churn").unwrap();
            let (started, log, mut conn) = (started.clone(), log.clone(), conn.clone());
            tasks.push(tokio::spawn(async move {
                while started.fetch_add(1, Ordering::SeqCst) < TOTAL {
                    // No per-acquire bound: the lock is not fair, and a busy client may win
                    // hand-over after hand-over while another client's waiters wait (under
                    // load, for the better part of a minute). The run as a whole is bounded.
                    let guard = lock
                        .acquire_timeout(Duration::from_secs(3_600))
                        .await
                        .unwrap();
                    let entered = Instant::now();
                    let value: Option<u64> = conn.get("counter").await.unwrap();
                    let hold = rand::rng().random_range(0..2_000u64);
                    if hold > 0 {
                        tokio::time::sleep(Duration::from_micros(hold)).await;
                    }
                    let _: () = conn.set("counter", value.unwrap_or(0) + 1).await.unwrap();
                    let left = Instant::now();
                    guard.unlock().await.unwrap();
                    log.lock().unwrap().push((entered, left));
                }
            }));
        }
    }
    let all = async {
        for task in tasks {
            task.await.unwrap();
        }
    };
    timeout(Duration::from_secs(600), all)
        .await
        .expect("10,000 acquisitions within ten minutes (about one unloaded)");
    let mut conn = conn;
    assert_eq!(conn.get::<_, u64>("counter").await.unwrap(), TOTAL as u64);
    let mut holds = log.lock().unwrap().clone();
    assert_eq!(holds.len(), TOTAL);
    holds.sort();
    let overlaps = holds.windows(2).filter(|w| w[0].1 > w[1].0).count();
    assert_eq!(overlaps, 0, "two holders at once");
    assert_eq!(server.keys().await, vec!["counter".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_redis_pause_keeps_the_lock_and_a_long_one_loses_it_for_good() {
    let mut server = RedisServer::start();
    let watchdog = Duration::from_secs(2);
    let client = client_at(&server.url(), |c| {
        fast_failing(c).watchdog_timeout(watchdog)
    })
    .await;

    // Half the watchdog timeout: renewals resume, nothing is lost.
    let kept = client
        .lock("paused:short")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    server.pause();
    tokio::time::sleep(watchdog / 2).await; // the pause is the scenario
    server.resume();
    assert!(!kept.is_lost(), "lost after a pause shorter than the lease");
    let lock = client.lock("paused:short").unwrap();
    assert_eq!(lock.hold_count(kept.owner()).await.unwrap(), 1);
    kept.unlock().await.unwrap();

    // One and a half: the holder is told, and never renews over the next owner.
    let doomed = client.lock("paused:long").unwrap().acquire().await.unwrap();
    let lost = doomed.lost();
    server.pause();
    // The last renewal Redis ran came before the pause, so the key expires in Redis at
    // most one lease from now: lost() comes by then, plus 50 ms of scheduling slack.
    timeout(watchdog + Duration::from_millis(50), lost)
        .await
        .expect("lost() fires by the key's expiry while Redis is still paused");
    tokio::time::sleep(watchdog * 3 / 2 - watchdog).await; // complete the 1.5x pause
    server.resume();
    let other = client_at(&server.url(), |c| c).await;
    let lease = Duration::from_secs(10);
    let next = other
        .lock("paused:long")
        .unwrap()
        .acquire_with(
            AcquireOptions::new()
                .lease(lease)
                .wait(Duration::from_secs(10)),
        )
        .await
        .expect("another owner takes the expired lock");
    let mut conn = server.conn().await;
    let mut last = i64::MAX;
    for _ in 0..4 {
        tokio::time::sleep(watchdog / 3).await; // one renew interval of the old holder
        let fields: Vec<String> = conn.hkeys("paused:long").await.unwrap();
        assert_eq!(
            fields,
            vec![format!("{}:{}", other.id(), next.owner().id())]
        );
        let ttl: i64 = conn.pttl("paused:long").await.unwrap();
        assert!(
            ttl > 0 && ttl <= lease.as_millis() as i64 && ttl < last,
            "re-extended: {ttl} ms"
        );
        last = ttl;
    }
    assert!(matches!(
        doomed.unlock().await,
        Err(LockError::NotOwner { .. })
    ));
    assert!(other
        .lock("paused:long")
        .unwrap()
        .is_locked()
        .await
        .unwrap());
    next.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_loses_held_locks_and_their_renewal_stops() {
    let mut server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let client = client_at(&server.url(), |c| {
        fast_failing(c).watchdog_timeout(watchdog)
    })
    .await;
    let guard = client.lock("restarted").unwrap().acquire().await.unwrap();
    let lost = guard.lost();
    server.restart();
    timeout(watchdog * 3, lost)
        .await
        .expect("the holder hears its lock is gone");
    assert!(matches!(
        guard.unlock().await,
        Err(LockError::NotOwner { .. })
    ));
    assert_eq!(client.watched_holds(), 0);
    server.reset_stats().await;
    tokio::time::sleep(watchdog).await; // three renew intervals
    assert_eq!(server.command_calls("pexpire").await, 0);
    assert_eq!(
        server.command_calls("evalsha").await,
        0,
        "a renewal ran after the loss"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_whose_connection_is_cut_either_succeeds_or_leaves_nothing() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.port()).await;
    // A 30 s lease: only the library's own clean-up can remove a stray hold within the test.
    let client = client_at(&proxy.url(), fast_failing).await;
    let mut outcomes = (0, 0);
    for i in 0..40 {
        let lock = client.lock(&format!("cut:acquire:{i}")).unwrap();
        let acquiring = tokio::spawn(async move { lock.acquire_timeout(Duration::ZERO).await });
        tokio::time::sleep(Duration::from_micros(rand::rng().random_range(0..1_500))).await;
        proxy.cut();
        match timeout(Duration::from_secs(10), acquiring)
            .await
            .expect("hangs")
            .unwrap()
        {
            Ok(guard) => {
                outcomes.0 += 1;
                let _ = guard.unlock().await;
            }
            Err(error) => {
                assert!(error.is_unavailable(), "{error}");
                outcomes.1 += 1;
            }
        }
    }
    eventually(
        "every stray hold is cleaned up, long before its 30 s lease",
        Duration::from_secs(10),
        || async { server.keys().await.is_empty() },
    )
    .await;
    eprintln!("acquires that succeeded / failed across a cut: {outcomes:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_resumes_after_cut_connections() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.port()).await;
    let watchdog = Duration::from_millis(1500);
    let client = client_at(&proxy.url(), |c| fast_failing(c).watchdog_timeout(watchdog)).await;
    let guard = client.lock("cut:renew").unwrap().acquire().await.unwrap();
    let mut conn = server.conn().await;
    let before = server.command_calls("pexpire").await;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(200)).await; // cut every 200 ms for 2 s
        proxy.cut();
    }
    eventually(
        "renewals go on after the cuts",
        Duration::from_secs(5),
        || async { server.command_calls("pexpire").await >= before + 2 },
    )
    .await;
    assert!(!guard.is_lost(), "lost across cuts shorter than the lease");
    let ttl: i64 = conn.pttl("cut:renew").await.unwrap();
    assert!(ttl > 0, "expired while held: {ttl}");
    guard.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_whose_connection_is_cut_does_not_leave_the_lock_to_its_lease() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.port()).await;
    let client = client_at(&proxy.url(), fast_failing).await; // 30 s watchdog lease
    let guard = client.lock("cut:unlock").unwrap().acquire().await.unwrap();
    proxy.blackhole(true);
    let unlocking = tokio::spawn(guard.unlock());
    tokio::time::sleep(Duration::from_millis(100)).await; // the unlock is held in the proxy
    proxy.cut();
    proxy.blackhole(false);
    let outcome = timeout(Duration::from_secs(10), unlocking)
        .await
        .expect("hangs")
        .unwrap();
    assert!(
        matches!(outcome, Ok(_) | Err(LockError::Unavailable { .. })),
        "{outcome:?}"
    );
    eventually(
        "the lock is released long before its 30 s lease",
        Duration::from_secs(10),
        || async { server.keys().await.is_empty() },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_cancelled_acquires_leave_no_key_renewal_or_waiter() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let client = client_at(&server.url(), |c| c.watchdog_timeout(watchdog)).await;
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut granted = 0;
            for i in 0..2_500 {
                let lock = client.lock(&format!("cancel:{}", i % 8)).unwrap();
                let limit = Duration::from_micros(rand::rng().random_range(0..5_000));
                if let Ok(Ok(guard)) =
                    timeout(limit, lock.acquire_timeout(Duration::from_millis(50))).await
                {
                    granted += 1;
                    drop(guard);
                }
            }
            granted
        }));
    }
    let mut granted = 0;
    for task in tasks {
        granted += task.await.unwrap();
    }
    tokio::time::sleep(watchdog * 3).await; // the settling time
    assert_eq!(
        server.keys().await,
        Vec::<String>::new(),
        "a lock key remains"
    );
    support::assert_nothing_renews_or_waits(&server, &client, watchdog).await;
    eprintln!("{granted} of 10000 acquires were granted before their future was dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_is_unavailable_while_redis_is_away_and_the_client_recovers() {
    let mut server = RedisServer::start();
    let client = client_at(&server.url(), fast_failing).await;
    let lock = client.lock("away").unwrap();
    server.stop();
    let started = Instant::now();
    let calls: Vec<(&str, LockError)> = vec![
        (
            "acquire",
            lock.acquire_timeout(Duration::from_secs(5))
                .await
                .unwrap_err(),
        ),
        ("try_acquire", lock.try_acquire().await.unwrap_err()),
        ("is_locked", lock.is_locked().await.unwrap_err()),
        ("remaining_ttl", lock.remaining_ttl().await.unwrap_err()),
        ("force_unlock", lock.force_unlock().await.unwrap_err()),
    ];
    for (call, error) in &calls {
        assert!(error.is_unavailable(), "{call}: {error}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    server.restart();
    let guard = timeout(Duration::from_secs(15), async {
        loop {
            match lock.acquire_timeout(Duration::from_secs(1)).await {
                Ok(guard) => return guard,
                Err(error) => assert!(error.is_unavailable(), "{error}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await; // poll while Redis returns
        }
    })
    .await
    .expect("the client recovers when Redis is back");
    guard.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_dropped_on_another_runtime_still_releases() {
    let server = RedisServer::start();
    let client = client_at(&server.url(), |c| c).await;
    let guard = client.lock("elsewhere").unwrap().acquire().await.unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async move { drop(guard) });
    })
    .join()
    .unwrap();
    eventually(
        "the dropped guard's lock is released",
        Duration::from_secs(5),
        || async { !client.lock("elsewhere").unwrap().is_locked().await.unwrap() },
    )
    .await;
}

#[tokio::test]
async fn a_client_used_after_shutdown_says_so() {
    let server = RedisServer::start();
    let client = client_at(&server.url(), |c| c).await;
    let lock = client.lock("after").unwrap();
    let guard = lock.acquire().await.unwrap();
    client.shutdown();
    assert_eq!(lock.acquire().await.unwrap_err(), LockError::Shutdown);
    assert_eq!(lock.is_locked().await.unwrap_err(), LockError::Shutdown);
    assert!(matches!(
        client.lock_actor("after"),
        Err(LockError::Shutdown)
    ));
    assert!(matches!(guard.unlock().await, Err(LockError::Shutdown)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_bound_holds_while_a_lost_unlock_is_still_being_settled() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.port()).await;
    let client = client_at(&proxy.url(), fast_failing).await; // 30 s watchdog lease
    let lock = client.lock("settling").unwrap();
    let owner = actix_distributed_lock::LockOwner::new();
    let guard = lock
        .acquire_with(AcquireOptions::new().owner(owner))
        .await
        .unwrap();
    // Redis goes away for good: the unlock's answer is lost and cannot be settled.
    proxy.refuse(true);
    assert!(guard.unlock().await.unwrap_err().is_unavailable());
    // The same owner asks again while the settlement is still pending: its own wait bound
    // applies, not the 30 s lease the settlement may take to give up.
    let started = Instant::now();
    let options = AcquireOptions::new()
        .owner(owner)
        .wait(Duration::from_secs(1));
    let outcome = timeout(Duration::from_secs(10), lock.acquire_with(options))
        .await
        .expect("the wait outlived its bound");
    let error = outcome.unwrap_err();
    assert!(error.is_unavailable() || error.is_timeout(), "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    proxy.refuse(false);
    eventually(
        "the lock is settled once Redis is back",
        Duration::from_secs(10),
        || async { server.keys().await.is_empty() },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_that_lands_after_its_caller_left_leaves_the_owners_next_hold_intact() {
    let mut server = RedisServer::start();
    let client = client_at(&server.url(), fast_failing).await;
    let owner = LockOwner::new();
    for i in 0..12 {
        let name = format!("late:{i}");
        let lock = client.lock(&name).unwrap();
        let options = AcquireOptions::new()
            .owner(owner)
            .wait(Duration::from_secs(5));
        // The first acquire is sent while Redis is paused and given up after 20 ms; its
        // grant lands once Redis is back. Half the rounds go through the actor's message
        // API, half through the handle (which tries the uncontended fast path first).
        server.pause();
        let gave_up = if i % 2 == 0 {
            let actor = client.lock_actor(&name).unwrap();
            let request = actor.send(Acquire {
                owner,
                lease: None,
                wait: Duration::from_secs(5),
            });
            timeout(Duration::from_millis(20), request).await.is_err()
        } else {
            timeout(Duration::from_millis(20), lock.acquire_with(options))
                .await
                .is_err()
        };
        assert!(gave_up);
        server.resume();
        // The owner's next hold is its own: unlocking it frees the lock at once.
        let guard = lock.acquire_with(options).await.unwrap();
        assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
        eventually("the key is gone", Duration::from_secs(5), || async {
            server.keys().await.is_empty()
        })
        .await;
        assert_eq!(client.watched_holds(), 0);
    }
}

/// Redis forgets our scripts (a restart of a persistent server, `SCRIPT FLUSH`): every
/// call that meets NOSCRIPT loads its script and runs once, on the direct path (acquire,
/// unlock) and in the watchdog's renewals alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_script_cache_is_loaded_again_by_the_next_call() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let client = client_at(&server.url(), |c| c.watchdog_timeout(watchdog)).await;
    let mut conn = server.conn().await;
    let flush = |mut conn: redis::aio::MultiplexedConnection| async move {
        let () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut conn)
            .await
            .unwrap();
    };
    for (kind, lock) in [
        ("reentrant", client.lock("flushed:reentrant").unwrap()),
        ("fast", client.fast_lock("flushed:fast").unwrap()),
    ] {
        flush(conn.clone()).await;
        let owner = LockOwner::new();
        let guard = lock
            .acquire_with(AcquireOptions::new().owner(owner))
            .await
            .unwrap_or_else(|e| panic!("{kind}: acquire after SCRIPT FLUSH: {e}"));
        assert_eq!(lock.hold_count(owner).await.unwrap(), 1, "{kind}");
        // Renewals meet an empty cache too; the lock outlives three of its leases.
        flush(conn.clone()).await;
        tokio::time::sleep(watchdog * 3).await;
        let exists: bool = conn.exists(lock.name()).await.unwrap();
        assert!(
            exists,
            "{kind}: the watchdog kept the lock after SCRIPT FLUSH"
        );
        flush(conn.clone()).await;
        assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked, "{kind}");
        let exists: bool = conn.exists(lock.name()).await.unwrap();
        assert!(
            !exists,
            "{kind}: the unlock after SCRIPT FLUSH deleted the key"
        );
    }
}

/// Panics on the clients' own actor threads, counted by a process-wide panic hook (the
/// default hook still prints them).
fn actor_thread_panics() -> &'static AtomicUsize {
    static PANICS: AtomicUsize = AtomicUsize::new(0);
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().name() == Some("distributed-lock-actors") {
                PANICS.fetch_add(1, Ordering::SeqCst);
            }
            default(info);
        }));
    });
    &PANICS
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutting_down_amid_busy_traffic_panics_no_actor_thread_and_leaves_no_connection() {
    // When a client stops, its actor thread drops the live actors, and actix polls their
    // futures one last time. A request first polled then used to start redis's response
    // timer outside any runtime: "no reactor running", a panic on the actor thread.
    let panics = actor_thread_panics();
    let server = RedisServer::start();
    for round in 0..100 {
        let client = client_at(&server.url(), |c| c).await;
        let stopping = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for task in 0..16 {
            // Four names, four tasks each: waiters queue in the lock actors, and every
            // unlock starts the next waiter's request on the actor thread.
            let lock = client.lock(&format!("busy:{}", task % 4)).unwrap();
            let stopping = stopping.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    match lock.acquire_timeout(Duration::from_secs(10)).await {
                        Ok(guard) => {
                            if guard.unlock().await.is_err() {
                                return;
                            }
                        }
                        Err(LockError::Shutdown) => return,
                        // A request cut off by the shutdown may fail otherwise; the next
                        // call says Shutdown.
                        Err(_) if stopping.load(Ordering::SeqCst) => {}
                        Err(other) => panic!("acquire failed before the shutdown: {other}"),
                    }
                }
            }));
        }
        // Stop at a different point of the traffic each round.
        tokio::time::sleep(Duration::from_micros(500 + 300 * (round % 20))).await;
        stopping.store(true, Ordering::SeqCst);
        client.shutdown();
        for task in tasks {
            timeout(Duration::from_secs(10), task)
                .await
                .expect("every caller returns after the shutdown")
                .unwrap();
        }
        // Once the client is gone, so is every connection it opened, even one a request
        // cut off by the shutdown had begun to reopen.
        drop(client);
        eventually(
            "the dropped client's connections are closed",
            Duration::from_secs(10),
            || async { server.connections().await == 0 },
        )
        .await;
        assert_eq!(panics.load(Ordering::SeqCst), 0, "round {round}");
    }
}
