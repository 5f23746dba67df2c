//! The fault cases of tests/faults.rs, extended to the fair, read-write and fast locks:
//! cancellation storms, Redis restarted empty under waiters and holders, cut connections.
//! Whatever happens, no key outlives its purpose (fair queues and per-read-hold timeout
//! keys included) and no waiter hangs.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{ClientConfig, Lock, LockClient, LockError};
use rand::Rng;
use std::time::Duration;
use support::client_at;
use support::proxy::TcpProxy;
use support::{eventually, RedisServer};
use tokio::time::timeout;

fn fast_failing(config: ClientConfig) -> ClientConfig {
    config
        .response_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(500))
}

/// Every kind under test, by name, on `client`.
fn locks_of_every_kind(client: &LockClient, name: &str) -> Vec<(&'static str, Lock)> {
    let rw = client.read_write_lock(&format!("{name}:rw")).unwrap();
    vec![
        ("fair", client.fair_lock(&format!("{name}:fair")).unwrap()),
        ("fast", client.fast_lock(&format!("{name}:fast")).unwrap()),
        ("read", rw.read().clone()),
        ("write", rw.write().clone()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_acquires_of_every_kind_leave_no_key_renewal_or_waiter() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let client = client_at(&server.url(), |c| c.watchdog_timeout(watchdog)).await;
    let mut tasks = Vec::new();
    for t in 0..4 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let mut granted = 0;
            for i in 0..600 {
                let locks = locks_of_every_kind(&client, &format!("cancel:{}", i % 4));
                let (_, lock) = &locks[(i + t) % locks.len()];
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
    // No key at all: no lock, no fair queue or deadline set, no read-hold timeout key.
    eventually("every key is gone", watchdog * 3, || async {
        server.keys().await.is_empty()
    })
    .await;
    support::assert_nothing_renews_or_waits(&server, &client, watchdog).await;
    eprintln!("{granted} of 2400 acquires were granted before their future was dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_every_kind_acquire_after_redis_restarts_empty() {
    let mut server = RedisServer::start();
    let tune = |c: ClientConfig| {
        fast_failing(c)
            .fair_wait_timeout(Duration::from_secs(1))
            .watchdog_timeout(Duration::from_millis(1500))
    };
    let holder = client_at(&server.url(), tune).await;
    let waiter = client_at(&server.url(), tune).await;
    let mut held = Vec::new();
    let mut waiting = Vec::new();
    for (kind, lock) in locks_of_every_kind(&holder, "restart") {
        // A writer holds the read side's name and a reader the write side's, so every
        // waiter below really waits.
        let blocker = if kind == "read" {
            holder
                .read_write_lock("restart:rw")
                .unwrap()
                .write()
                .clone()
        } else {
            lock.clone()
        };
        if kind != "write" {
            held.push(blocker.acquire().await.unwrap());
        }
    }
    for (kind, lock) in locks_of_every_kind(&waiter, "restart") {
        for _ in 0..2 {
            let lock = lock.clone();
            waiting.push((
                kind,
                tokio::spawn(async move {
                    let guard = lock.acquire_timeout(Duration::from_secs(30)).await?;
                    guard.unlock().await.map(|_| ())
                }),
            ));
        }
    }
    // Everyone is waiting: both fair waiters queued, the others parked on their channel.
    eventually(
        "the fair waiters queue",
        Duration::from_secs(10),
        || async {
            let mut conn = server.conn().await;
            let queued: i64 = redis::cmd("LLEN")
                .arg("redisson_lock_queue:{restart:fair}")
                .query_async(&mut conn)
                .await
                .unwrap();
            queued == 2
        },
    )
    .await;
    server
        .wait_for_subscribers("redisson_rwlock:{restart:rw}", 1)
        .await;
    server.restart();
    for (kind, task) in waiting {
        let outcome = timeout(Duration::from_secs(20), task)
            .await
            .unwrap_or_else(|_| panic!("a {kind} waiter hangs after the restart"))
            .unwrap();
        outcome.unwrap_or_else(|e| panic!("a {kind} waiter failed: {e}"));
    }
    // The old holds died with Redis: their guards learn it, their unlocks say so.
    for guard in held {
        let lost = guard.lost();
        timeout(Duration::from_secs(10), lost)
            .await
            .expect("the holder hears its lock is gone");
        assert!(matches!(
            guard.unlock().await,
            Err(LockError::NotOwner { .. })
        ));
    }
    eventually("every key is gone", Duration::from_secs(5), || async {
        server.keys().await.is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_of_any_kind_whose_connection_is_cut_succeeds_or_leaves_nothing() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.port()).await;
    let client = client_at(&proxy.url(), fast_failing).await;
    let other = client_at(&server.url(), |c| c).await;
    let mut outcomes = (0, 0);
    for i in 0..40 {
        let locks = locks_of_every_kind(&client, &format!("cut:{i}"));
        let (kind, lock) = locks[i % locks.len()].clone();
        // Half the time the lock is busy, so a fair waiter joins the queue before the cut.
        let busy = if i % 2 == 0 {
            let blocker = locks_of_every_kind(&other, &format!("cut:{i}"));
            let blocker = if kind == "read" {
                &blocker[3].1
            } else {
                &blocker[i % 4].1
            };
            Some(blocker.acquire().await.unwrap())
        } else {
            None
        };
        let wait = if busy.is_some() {
            Duration::from_millis(200)
        } else {
            Duration::ZERO
        };
        let acquiring = tokio::spawn(async move { lock.acquire_timeout(wait).await });
        tokio::time::sleep(Duration::from_micros(rand::rng().random_range(0..1_500))).await;
        proxy.cut();
        let outcome = timeout(Duration::from_secs(10), acquiring)
            .await
            .unwrap_or_else(|_| panic!("a {kind} acquire hangs across a cut"))
            .unwrap();
        match outcome {
            Ok(guard) => {
                outcomes.0 += 1;
                let _ = guard.unlock().await;
            }
            Err(error) => {
                assert!(
                    error.is_unavailable() || error.is_timeout(),
                    "{kind}: {error}"
                );
                outcomes.1 += 1;
            }
        }
        if let Some(guard) = busy {
            guard.unlock().await.unwrap();
        }
    }
    eventually(
        "every stray hold and queue entry is cleaned up, long before any lease",
        Duration::from_secs(10),
        || async { server.keys().await.is_empty() },
    )
    .await;
    eprintln!("acquires that succeeded / failed across a cut: {outcomes:?}");
}
