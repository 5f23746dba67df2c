//! The fair lock against real redis-server processes: grants in request order across
//! clients, dead and departed waiters never stick the queue, and the queue keys are gone
//! after every test. A dead waiter is a `lock_holder` process SIGKILLed in the queue.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{AcquireOptions, ClientConfig, LockError, LockOwner};
use redis::AsyncCommands;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{client, client_with};
use support::{eventually, RedisServer};
use tokio::time::timeout;

fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

fn timeout_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

/// The owner fields waiting in the Redis queue, oldest first.
async fn queue(server: &RedisServer, name: &str) -> Vec<String> {
    let mut conn = server.conn().await;
    conn.lrange(queue_key(name), 0, -1).await.unwrap()
}

async fn wait_for_queue_len(server: &RedisServer, name: &str, len: usize) {
    let what = format!("{len} waiters in the queue of {name}");
    eventually(&what, Duration::from_secs(10), || async {
        queue(server, name).await.len() == len
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_waiters_queued_apart_acquire_in_exactly_that_order() {
    let server = RedisServer::start();
    let clients = [client(&server).await, client(&server).await];
    let name = "fifo";
    let held = clients[0].fair_lock(name).unwrap().acquire().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..8 {
        // Alternate clients: the order must hold across processes, not just in one queue.
        let lock = clients[i % 2].fair_lock(name).unwrap();
        let order = order.clone();
        waiters.push(tokio::spawn(async move {
            let guard = lock.acquire_timeout(Duration::from_secs(30)).await.unwrap();
            order.lock().unwrap().push(i);
            guard.unlock().await.unwrap();
        }));
        // Queued 50 ms apart, and each surely in the Redis queue before the next asks.
        wait_for_queue_len(&server, name, i + 1).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fields = queue(&server, name).await;
    assert_eq!(fields.len(), 8);
    for (i, field) in fields.iter().enumerate() {
        assert!(
            field.starts_with(clients[i % 2].id()),
            "queue entry {i} is `uuid:owner` of its client: {field}"
        );
    }
    held.unlock().await.unwrap();
    for waiter in waiters {
        timeout(Duration::from_secs(30), waiter)
            .await
            .expect("every waiter acquires")
            .unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..8).collect::<Vec<_>>());
    assert_eq!(server.keys().await, Vec::<String>::new());
}

/// A fair-lock waiter in another process (the `lock_holder` example), SIGKILLed on drop.
struct WaiterProcess(Child);

impl WaiterProcess {
    fn start(server: &RedisServer, name: &str, patience: Duration) -> WaiterProcess {
        let child = Command::new(support::lock_holder_binary())
            .arg(server.url())
            .arg(name)
            .args(["--kind", "fair", "--fair-wait-ms"])
            .arg(patience.as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn lock_holder");
        WaiterProcess(child)
    }

    /// SIGKILL, then reap: the process is gone without a word to Redis.
    fn kill(&mut self) {
        self.0.kill().expect("SIGKILL lock_holder");
        self.0.wait().expect("reap lock_holder");
    }
}

impl Drop for WaiterProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_waiters_age_out_and_the_live_ones_keep_their_order() {
    // Built (if need be) before the clock starts: a build while the queue forms starves the
    // holder's renewals on a busy machine (CI once lost the 1 s lease of an earlier version
    // this way, and waiter 0 took the lock before the queue had formed).
    let _ = support::lock_holder_binary();
    let server = RedisServer::start();
    // Redisson's rule: a waiter's deadline is the one ahead of it (or the lock's lease) plus
    // the allowance, less one allowance per grant. The holder's lease is short (three
    // renewals in it), and the allowance long enough that no live waiter's deadline passes
    // while the queue forms (two process starts, on a loaded machine).
    let patience = Duration::from_secs(5);
    let lease = Duration::from_secs(3);
    let tune = move |c: ClientConfig| c.fair_wait_timeout(patience).watchdog_timeout(lease);
    let holder = client_with(&server, tune).await;
    let live = client_with(&server, tune).await;
    let name = "ageing";
    let held = holder.fair_lock(name).unwrap().acquire().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut live_waiters = Vec::new();
    let mut doomed = Vec::new();
    for i in 0..5 {
        if i % 2 == 1 {
            // Waiters 1 and 3 are other processes.
            doomed.push(WaiterProcess::start(&server, name, patience));
        } else {
            let lock = live.fair_lock(name).unwrap();
            let order = order.clone();
            live_waiters.push(tokio::spawn(async move {
                let guard = lock.acquire_timeout(Duration::from_secs(30)).await;
                if let Ok(guard) = guard {
                    order.lock().unwrap().push(i);
                    guard.unlock().await.unwrap();
                }
            }));
        }
        wait_for_queue_len(&server, name, i + 1).await;
    }
    // Waiters 1 and 3 die in the queue: SIGKILLed, they never leave it themselves.
    for process in &mut doomed {
        process.kill();
    }
    let fields = queue(&server, name).await;
    assert_eq!(fields.len(), 5, "the dead stay queued");
    for i in [0, 2, 4] {
        assert!(
            fields[i].starts_with(live.id()),
            "the queue formed in request order: {fields:?}"
        );
    }
    assert!(
        !held.is_lost(),
        "the holder kept the lock while the queue formed"
    );
    let released_at = Instant::now();
    held.unlock().await.unwrap();
    for waiter in live_waiters {
        timeout(Duration::from_secs(20), waiter)
            .await
            .expect("the live waiters are not stuck behind the dead")
            .unwrap();
    }
    let took = released_at.elapsed();
    assert_eq!(*order.lock().unwrap(), vec![0, 2, 4]);
    // Two dead waiters, each skipped once its deadline passes: dead waiter 3's deadline,
    // after the grants to 0 and 2, is the holder's lease plus two allowances from when the
    // queue formed; generous slack on top.
    assert!(
        took < lease + patience * 2 + Duration::from_secs(3),
        "took {took:?}"
    );
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_on_a_free_fair_lock_succeeds_at_once_and_a_failed_try_leaves_no_trace() {
    let server = RedisServer::start();
    let a = client(&server).await;
    let b = client(&server).await;
    let name = "try";
    let started = Instant::now();
    let guard = a
        .fair_lock(name)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .expect("free");
    assert!(started.elapsed() < Duration::from_secs(1));
    // A try on a held lock joins the queue for one call and leaves it at once (the keys
    // carry no expiry of their own: Redisson's waiters could not live with one).
    assert!(b
        .fair_lock(name)
        .unwrap()
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    let failed_at = Instant::now();
    wait_for_queue_len(&server, name, 0).await;
    assert!(failed_at.elapsed() < Duration::from_secs(1));
    guard.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_or_cancelled_waiter_leaves_the_queue_at_once() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let waiter = client(&server).await;
    let name = "leaving";
    let held = holder.fair_lock(name).unwrap().acquire().await.unwrap();

    // Timed out: the error is a timeout, and the queue is empty right after.
    let lock = waiter.fair_lock(name).unwrap();
    let err = lock
        .acquire_timeout(Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::Timeout { .. }), "{err}");
    wait_for_queue_len(&server, name, 0).await;

    // Cancelled: the future is dropped mid-wait; it leaves without waiting for a timer.
    let cancelled = timeout(
        Duration::from_millis(300),
        lock.acquire_timeout(Duration::from_secs(30)),
    )
    .await;
    assert!(cancelled.is_err());
    let dropped_at = Instant::now();
    wait_for_queue_len(&server, name, 0).await;
    assert!(
        dropped_at.elapsed() < Duration::from_secs(1),
        "left after {:?}",
        dropped_at.elapsed()
    );
    let mut conn = server.conn().await;
    let deadlines: i64 = conn.zcard(timeout_key(name)).await.unwrap();
    assert_eq!(deadlines, 0);

    // A waiter behind the one that left is not held up by it.
    let behind = waiter.fair_lock(name).unwrap();
    let next = tokio::spawn(async move { behind.acquire_timeout(Duration::from_secs(10)).await });
    wait_for_queue_len(&server, name, 1).await;
    let unlocked_at = Instant::now();
    held.unlock().await.unwrap();
    let guard = timeout(Duration::from_secs(10), next)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        unlocked_at.elapsed() < Duration::from_secs(1),
        "woken on its own channel, not by a timer"
    );
    guard.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_tasks_across_two_clients_all_acquire_and_never_overlap() {
    let server = RedisServer::start();
    let clients = [client(&server).await, client(&server).await];
    let name = "crowd";
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let acquired = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..200 {
        let lock = clients[i % 2].fair_lock(name).unwrap();
        let (inside, overlaps, acquired) = (inside.clone(), overlaps.clone(), acquired.clone());
        tasks.push(tokio::spawn(async move {
            let guard = lock.acquire_timeout(Duration::from_secs(60)).await.unwrap();
            if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                overlaps.fetch_add(1, Ordering::SeqCst);
            }
            tokio::task::yield_now().await;
            inside.fetch_sub(1, Ordering::SeqCst);
            acquired.fetch_add(1, Ordering::SeqCst);
            guard.unlock().await.unwrap();
        }));
    }
    for task in tasks {
        timeout(Duration::from_secs(90), task)
            .await
            .expect("no waiter hangs")
            .unwrap();
    }
    assert_eq!(acquired.load(Ordering::SeqCst), 200);
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentry_the_watchdog_and_the_owner_actor() {
    let server = RedisServer::start();
    let client = client_with(&server, |c| c.watchdog_timeout(Duration::from_millis(900))).await;
    let name = "fair:reentry";
    let lock = client.fair_lock(name).unwrap();
    let me = LockOwner::new();
    let outer = lock
        .acquire_with(AcquireOptions::new().owner(me))
        .await
        .unwrap();
    let inner = lock
        .acquire_with(AcquireOptions::new().owner(me))
        .await
        .unwrap();
    assert_eq!(lock.hold_count(me).await.unwrap(), 2);
    // Held well past the watchdog timeout: renewed, never lost.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!outer.is_lost());
    assert!(lock.is_locked().await.unwrap());
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());

    // The actor of another owner refuses to take it for `me`.
    let other = client.fair_lock_actor(name, LockOwner::new()).unwrap();
    let refused = other
        .send(actix_distributed_lock::messages::Acquire {
            owner: me,
            lease: None,
            wait: Duration::ZERO,
        })
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(refused, LockError::InvalidConfig { .. }),
        "{refused}"
    );
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_unlock_wakes_the_next_waiter_on_its_own_channel() {
    let server = RedisServer::start();
    // A long fair wait timeout: a waiter's own calls come every 10 s, so only the
    // force unlock's message can let it in within the bound below.
    let tune = |c: ClientConfig| c.fair_wait_timeout(Duration::from_secs(30));
    let holder = client_with(&server, tune).await;
    let waiter = client_with(&server, tune).await;
    let name = "forced";
    let _held = holder.fair_lock(name).unwrap().acquire().await.unwrap();
    let lock = waiter.fair_lock(name).unwrap();
    let next = tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(20)).await });
    wait_for_queue_len(&server, name, 1).await;
    server
        .wait_for_subscribers(
            &format!(
                "redisson_lock__channel:{{{name}}}:{}",
                queue(&server, name).await[0]
            ),
            1,
        )
        .await;
    let forced_at = Instant::now();
    assert!(waiter
        .fair_lock(name)
        .unwrap()
        .force_unlock()
        .await
        .unwrap());
    let guard = timeout(Duration::from_secs(20), next)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        forced_at.elapsed() < Duration::from_secs(2),
        "woken by the force unlock, not by its own next call: {:?}",
        forced_at.elapsed()
    );
    guard.unlock().await.unwrap();
    assert_eq!(server.keys().await, Vec::<String>::new());
}
