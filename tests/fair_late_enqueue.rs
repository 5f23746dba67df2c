//! An acquire given up while the network holds its request: when the held bytes reach
//! Redis afterwards (a partition that heals, TCP delivering what it had buffered), the late
//! script must not leave anything taken.
//!
//! A plain semaphore settles it through the acquire's receipt. A fair lock does not yet:
//! the late enqueue stays in `redisson_lock_queue:{name}` until its queue timeout (see the
//! README's limits under real faults; `tests/nemesis_faults.rs` counts these entries).

mod support;

use std::time::Duration;
use support::proxy::TcpProxy;
use support::{client_at, RedisServer};
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
