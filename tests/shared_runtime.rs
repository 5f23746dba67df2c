//! Clients in one process share one actor thread: stopping one client stops only
//! its own actors and closes only its own connections, and no thread is left behind.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{LockClient, LockError};
use std::collections::BTreeSet;
use std::time::Duration;
use support::{eventually, RedisServer};

/// The actor thread's name as the kernel keeps it (15 bytes of "distributed-lock-actors").
const ACTOR_THREAD_COMM: &str = "distributed-loc";

/// Watchdog lease of the test's clients: renewals every 2/3 s.
const LEASE: Duration = Duration::from_secs(2);

async fn client(server: &RedisServer) -> LockClient {
    support::client_with(server, |c| c.watchdog_timeout(LEASE)).await
}

/// Waits until the server lists exactly `want` (the probes aside).
async fn wait_for_connections(server: &RedisServer, what: &str, want: &BTreeSet<u64>) {
    eventually(what, Duration::from_secs(10), || async {
        server.connection_ids().await == *want
    })
    .await;
}

/// The two connections a freshly connected client opened: those listed beyond `known`.
async fn new_connections(server: &RedisServer, known: &BTreeSet<u64>) -> BTreeSet<u64> {
    eventually(
        "the client's two connections",
        Duration::from_secs(10),
        || async { server.connection_ids().await.difference(known).count() >= 2 },
    )
    .await;
    let fresh: BTreeSet<u64> = server
        .connection_ids()
        .await
        .difference(known)
        .copied()
        .collect();
    assert_eq!(fresh.len(), 2, "a client keeps two connections: {fresh:?}");
    fresh
}

/// (all threads of this process, the library's actor threads among them)
fn threads() -> (usize, usize) {
    let mut all = 0;
    let mut actors = 0;
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let comm = task
            .ok()
            .and_then(|t| std::fs::read_to_string(t.path().join("comm")).ok())
            .unwrap_or_default();
        all += 1;
        if comm.trim_end() == ACTOR_THREAD_COMM {
            actors += 1;
        }
    }
    (all, actors)
}

async fn pttl(server: &RedisServer, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut server.conn().await)
        .await
        .expect("PTTL")
}

/// Waits for a watchdog renewal of `key`: its PTTL, which only falls between renewals,
/// rises.
async fn wait_for_renewal(server: &RedisServer, key: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut last = pttl(server, key).await;
    loop {
        assert!(last > 0, "{key} is still held");
        assert!(
            tokio::time::Instant::now() < deadline,
            "no renewal of {key}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
        let now = pttl(server, key).await;
        if now > last {
            return;
        }
        last = now;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_one_client_leaves_the_other_running_on_the_shared_actor_thread() {
    let server = RedisServer::start();
    let before = server.connection_ids().await;

    let first = client(&server).await;
    let firsts = new_connections(&server, &before).await;
    let second = client(&server).await;
    let seconds = new_connections(&server, &(&before | &firsts)).await;
    assert_eq!(threads().1, 1, "both clients run on one actor thread");

    // Each holds a lock under the watchdog; the first also has a parked waiter.
    let first_guard = first.lock("first:held").unwrap().acquire().await.unwrap();
    let second_guard = second.lock("second:held").unwrap().acquire().await.unwrap();
    let first_lock = first.lock("first:waited").unwrap();
    let blocker = second
        .lock("first:waited")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let waiter = tokio::spawn(async move { first_lock.acquire().await.map(drop) });
    server
        .wait_until_parked("redisson_lock__channel:{first:waited}", 1)
        .await;

    // A clone of the first client outlives its shutdown.
    let first_clone = first.clone();
    first.shutdown();
    wait_for_connections(
        &server,
        "only the second client's connections are left",
        &seconds,
    )
    .await;
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("the first client's waiter returns")
            .unwrap(),
        Err(LockError::Shutdown)
    );
    assert_eq!(
        first_clone
            .lock("first:other")
            .unwrap()
            .acquire()
            .await
            .unwrap_err(),
        LockError::Shutdown
    );
    assert_eq!(first_clone.active_locks(), 0);

    // The second client still renews, takes and releases locks, and hands off.
    wait_for_renewal(&server, "second:held").await;
    let taken = second.lock("second:new").unwrap().acquire().await.unwrap();
    taken.unlock().await.unwrap();
    blocker.unlock().await.unwrap();
    let handed = second
        .fast_lock("second:fast")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    handed.unlock().await.unwrap();
    // The first client's lock is no longer renewed: it expires at its lease.
    eventually(
        "the stopped client's lock expires",
        Duration::from_secs(10),
        || async { pttl(&server, "first:held").await == -2 },
    )
    .await;
    assert!(pttl(&server, "second:held").await > 0);
    drop(first_guard);
    drop(first_clone);

    // More clients come and go: no thread is left behind, no connection either.
    let (threads_before, _) = threads();
    for _ in 0..10 {
        let passing = client(&server).await;
        passing
            .lock("passing")
            .unwrap()
            .acquire()
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
        drop(passing);
    }
    wait_for_connections(
        &server,
        "the passing clients' connections are closed",
        &seconds,
    )
    .await;
    let (threads_after, actor_threads) = threads();
    assert_eq!(actor_threads, 1, "still one actor thread");
    assert!(
        threads_after <= threads_before,
        "threads before {threads_before}, after {threads_after}"
    );
    wait_for_renewal(&server, "second:held").await;
    second_guard.unlock().await.unwrap();
}
