//! An acquire given up while the network holds its request: when the held bytes reach
//! Redis afterwards (a partition that heals, TCP delivering what it had buffered), the late
//! script must not leave anything taken.
//!
//! A plain semaphore settles it through the acquire's receipt; a fair lock takes its owner
//! out of the queue again once Redis answers (the late enqueue runs first on the same
//! connection).

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use std::time::Duration;
use support::proxy::TcpProxy;
use support::{client_at, eventually, RedisServer};
use tokio::time::timeout;

/// A plain semaphore: a permit taken by an acquire that was given up while
/// the network held it must be given back (a plain permit has no lease: lost for good).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_acquire_dropped_while_its_request_is_held_takes_no_permit() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.port()).await;
    let admin = client_at(&server.url(), |c| c).await;
    admin
        .semaphore("late-sem")
        .unwrap()
        .set_permits(2)
        .await
        .unwrap();
    let client = behind(&proxy).await;
    let semaphore = client.semaphore("late-sem").unwrap();
    give_up_while_held(
        &proxy,
        semaphore.acquire_timeout(1, Duration::from_secs(30)),
    )
    .await;
    let admin_semaphore = admin.semaphore("late-sem").unwrap();
    let mut available = 0;
    let settled = timeout(Duration::from_secs(5), async {
        loop {
            available = admin_semaphore.available_permits().await.unwrap();
            if available == 2 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        settled.is_ok(),
        "{available} of 2 permits available 5 s after the heal"
    );
}

/// A fair lock: the late enqueue must not leave the owner in the queue, where it would hold
/// up every later waiter until its queue deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_acquire_dropped_while_its_request_is_held_leaves_no_queue_entry() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.port()).await;
    let holder = client_at(&server.url(), |c| c).await;
    let held = holder.fair_lock("late").unwrap().acquire().await.unwrap();
    let client = behind(&proxy).await;
    let lock = client.fair_lock("late").unwrap();
    give_up_while_held(&proxy, lock.acquire_timeout(Duration::from_secs(30))).await;
    let mut conn = server.conn().await;
    let mut queued: Vec<String> = Vec::new();
    let settled = timeout(Duration::from_secs(5), async {
        loop {
            queued = redis::cmd("LRANGE")
                .arg("redisson_lock_queue:{late}")
                .arg(0)
                .arg(-1)
                .query_async(&mut conn)
                .await
                .unwrap();
            if queued.is_empty() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        settled.is_ok(),
        "the dropped waiter is still queued 5 s after the heal: {queued:?}"
    );
    held.unlock().await.unwrap();
    eventually("every key is gone", Duration::from_secs(5), || async {
        server.keys().await.is_empty()
    })
    .await;
}

/// A client reaching Redis through `proxy`, with short response and connect timeouts.
async fn behind(proxy: &TcpProxy) -> actix_distributed_lock::LockClient {
    client_at(&proxy.url(), |c| {
        c.response_timeout(Duration::from_millis(400))
            .connect_timeout(Duration::from_millis(400))
    })
    .await
}

/// Sends `acquire` while `proxy` holds every byte back, gives it up 100 ms later, and lets
/// the partition last past the response timeout before it heals: the held request lands
/// after the client has given up.
async fn give_up_while_held<T: std::fmt::Debug>(
    proxy: &TcpProxy,
    acquire: impl std::future::Future<Output = T>,
) {
    proxy.blackhole(true);
    let given_up = timeout(Duration::from_millis(100), acquire).await;
    assert!(
        given_up.is_err(),
        "the acquire ended by itself: {given_up:?}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    proxy.blackhole(false);
}
