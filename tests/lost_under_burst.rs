//! `lost()` must fire at the end of the lease even while the same process is busy giving up
//! thousands of acquires of the same lock: the loss must not wait behind them.
//!
//! Found by the nemesis burst (`tests/nemesis_faults.rs`): a worker cut off from Redis
//! dropped 10,000 acquires, and a hold of one of those locks learnt of its loss 120–140 ms
//! after its key had expired (the checker allows 50 ms), with no stall of the process.

mod support;

use std::time::{Duration, Instant};
use support::proxy::TcpProxy;
use support::{client_at, RedisServer};
use tokio::time::timeout;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_on_time_while_thousands_of_acquires_of_its_lock_are_dropped() {
    lost_lateness_under_burst("busy").await;
}

/// The control: the same load on another lock's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_on_time_while_thousands_of_acquires_of_another_lock_are_dropped() {
    lost_lateness_under_burst("elsewhere").await;
}

/// The baseline: no load at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_fires_on_time_without_a_burst() {
    lost_lateness_under_burst("").await;
}

async fn lost_lateness_under_burst(burst_on: &str) {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.port()).await;
    let lease = Duration::from_millis(1500);
    let client = client_at(&proxy.url(), |c| {
        c.watchdog_timeout(lease)
            .response_timeout(Duration::from_millis(400))
            .connect_timeout(Duration::from_millis(400))
    })
    .await;
    let lock = client.fenced_lock("busy").unwrap();
    let sent = Instant::now();
    let guard = lock.acquire().await.unwrap();
    // Cut off right away: the hold is valid until at most `sent + lease`.
    proxy.blackhole(true);
    let lost = guard.lost();
    let watcher = tokio::spawn(async move {
        lost.await;
        Instant::now()
    });
    // A timer beside it: how late this process' own timers are under the same load.
    let timer = tokio::spawn(async move {
        let due = tokio::time::Instant::now() + lease;
        tokio::time::sleep_until(due).await;
        tokio::time::Instant::now() - due
    });
    let burst_lock = client
        .fenced_lock(if burst_on.is_empty() {
            "none"
        } else {
            burst_on
        })
        .unwrap();
    // Keep the process giving up acquires until past the lease.
    let mut rounds = 0;
    while burst_on.is_empty() && sent.elapsed() < lease + Duration::from_millis(300) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    while !burst_on.is_empty() && sent.elapsed() < lease + Duration::from_millis(300) {
        let mut burst = Vec::new();
        for _ in 0..2_000 {
            let lock = burst_lock.clone();
            burst.push(tokio::spawn(async move {
                let _ = timeout(
                    Duration::from_millis(50),
                    lock.acquire_timeout(Duration::from_secs(30)),
                )
                .await;
            }));
        }
        for task in burst {
            task.await.unwrap();
        }
        rounds += 1;
    }
    let fired = timeout(Duration::from_secs(5), watcher)
        .await
        .expect("lost() never fired")
        .unwrap();
    let late = fired.saturating_duration_since(sent + lease);
    let timer_late = timer.await.unwrap();
    eprintln!(
        "{rounds} rounds of 2,000 dropped acquires of `{burst_on}`; lost() {late:?} after the \
         lease's end; a plain timer {timer_late:?} late"
    );
    assert!(
        late < Duration::from_millis(50),
        "lost() fired {late:?} after the lease ended"
    );
    proxy.blackhole(false);
}
