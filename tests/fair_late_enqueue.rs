//! A fair lock acquire given up while the network holds its request: when the held bytes
//! reach Redis afterwards (a partition that heals, TCP delivering what it had buffered),
//! the late enqueue must not leave the waiter in the lock's queue.
//!
//! Found by the nemesis burst (`tests/nemesis_faults.rs`): entries of dropped fair acquires
//! stayed in `redisson_lock_queue:{name}` after the partition healed, each holding up every
//! waiter behind it until `fair_wait_timeout`.

mod support;

use std::time::Duration;
use support::proxy::TcpProxy;
use support::{client_at, eventually, RedisServer};
use tokio::time::timeout;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_acquire_dropped_while_its_request_is_held_leaves_no_queue_entry() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.port()).await;
    let holder = client_at(&server.url(), |c| c).await;
    let held = holder.fair_lock("late").unwrap().acquire().await.unwrap();
    let client = client_at(&proxy.url(), |c| {
        c.response_timeout(Duration::from_millis(400))
            .connect_timeout(Duration::from_millis(400))
    })
    .await;
    let lock = client.fair_lock("late").unwrap();
    proxy.blackhole(true);
    let given_up = timeout(
        Duration::from_millis(100),
        lock.acquire_timeout(Duration::from_secs(30)),
    )
    .await;
    assert!(
        given_up.is_err(),
        "the acquire ended by itself: {given_up:?}"
    );
    // The partition lasts past the response timeout, then heals: the held request lands.
    tokio::time::sleep(Duration::from_secs(1)).await;
    proxy.blackhole(false);
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

/// The same for a plain semaphore: a permit taken by an acquire that was given up while
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
    let client = client_at(&proxy.url(), |c| {
        c.response_timeout(Duration::from_millis(400))
            .connect_timeout(Duration::from_millis(400))
    })
    .await;
    let semaphore = client.semaphore("late-sem").unwrap();
    proxy.blackhole(true);
    let given_up = timeout(
        Duration::from_millis(100),
        semaphore.acquire_timeout(1, Duration::from_secs(30)),
    )
    .await;
    assert!(
        given_up.is_err(),
        "the acquire ended by itself: {given_up:?}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    proxy.blackhole(false);
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
