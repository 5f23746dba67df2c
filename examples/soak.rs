//! A long soak (not run in CI): many tasks across three clients take six locks with the
//! watchdog or with fixed leases, re-enter some of them, and increment a per-lock counter
//! non-atomically, while the Redis server is paused (SIGSTOP) at random for up to 600 ms.
//!
//! At the end it reports the acquisitions, the overlapping holds (must be 0), counters
//! that disagree with the completed holds (must be 0) and keys left behind (must be 0).
//!
//! `cargo run --release --example soak -- 600` (seconds; default 600).

use actix_distributed_lock::{AcquireOptions, ClientConfig, LockClient, LockOwner};
use rand::Rng;
use redis::AsyncCommands;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const LOCKS: usize = 6;

/// Per lock: when each completed hold entered and left.
type HoldLog = HashMap<usize, Vec<(Instant, Instant)>>;
const TASKS_PER_CLIENT: usize = 8;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: u64 = std::env::args().nth(1).map_or(Ok(600), |s| s.parse())?;
    let run_for = Duration::from_secs(seconds);
    let server = Arc::new(Mutex::new(support::RedisServer::start()));
    let url = server.lock().unwrap().url();
    let mut clients = Vec::new();
    for _ in 0..3 {
        let config = ClientConfig::new(&url)
            .watchdog_timeout(Duration::from_secs(3))
            .response_timeout(Duration::from_secs(2));
        clients.push(LockClient::connect(config).await?);
    }
    // Its own commands must outlast every pause: an answer lost to a timeout would leave
    // the counter's count unknown.
    let patient =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(30)));
    let conn = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection_with_config(&patient)
        .await?;
    let acquisitions = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(AtomicU64::new(0));
    let log: Arc<Mutex<HoldLog>> = Arc::default();
    let started = Instant::now();

    let mut tasks = Vec::new();
    for client in &clients {
        for _ in 0..TASKS_PER_CLIENT {
            let (client, mut conn) = (client.clone(), conn.clone());
            let (acquisitions, failures, log) =
                (acquisitions.clone(), failures.clone(), log.clone());
            tasks.push(tokio::spawn(async move {
                while started.elapsed() < run_for {
                    let which = rand::rng().random_range(0..LOCKS);
                    let lock = client.lock(&format!("soak:{which}")).expect("valid name");
                    let owner = LockOwner::new();
                    let mut options = AcquireOptions::new()
                        .owner(owner)
                        .wait(Duration::from_secs(5));
                    if rand::rng().random_bool(0.3) {
                        options =
                            options.lease(Duration::from_secs(rand::rng().random_range(2..5)));
                    }
                    let Ok(guard) = lock.acquire_with(options).await else {
                        failures.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let entered = Instant::now();
                    // Sometimes re-enter, as nested code of the same owner would.
                    let inner = if rand::rng().random_bool(0.2) {
                        guard.reenter(Duration::ZERO).await.ok()
                    } else {
                        None
                    };
                    let key = format!("soak:counter:{which}");
                    let Ok(value) = conn.get::<_, Option<u64>>(&key).await else {
                        continue;
                    };
                    let hold = rand::rng().random_range(0..3_000u64);
                    tokio::time::sleep(Duration::from_micros(hold)).await;
                    if guard.is_lost()
                        || conn
                            .set::<_, _, ()>(&key, value.unwrap_or(0) + 1)
                            .await
                            .is_err()
                    {
                        continue; // a holder that lost its lock stops writing
                    }
                    let left = Instant::now();
                    drop(inner);
                    let _ = guard.unlock().await;
                    acquisitions.fetch_add(1, Ordering::Relaxed);
                    log.lock()
                        .unwrap()
                        .entry(which)
                        .or_default()
                        .push((entered, left));
                }
            }));
        }
    }

    // Random pauses of the node, shorter than every lease.
    let pauser = {
        let server = server.clone();
        tokio::spawn(async move {
            let mut pauses = 0u64;
            while started.elapsed() < run_for {
                let (gap, pause) = {
                    let mut rng = rand::rng();
                    (rng.random_range(500..3_000), rng.random_range(50..600))
                };
                tokio::time::sleep(Duration::from_millis(gap)).await;
                let pause = Duration::from_millis(pause);
                server.lock().unwrap().pause();
                tokio::time::sleep(pause).await;
                server.lock().unwrap().resume();
                pauses += 1;
            }
            pauses
        })
    };
    let mut last_report = Instant::now();
    for task in tasks {
        while !task.is_finished() {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if last_report.elapsed() > Duration::from_secs(30) {
                eprintln!(
                    "[soak] {:>4.0}s: {} acquisitions",
                    started.elapsed().as_secs_f64(),
                    acquisitions.load(Ordering::Relaxed)
                );
                last_report = Instant::now();
            }
        }
        task.await?;
    }
    let pauses = pauser.await?;
    drop(clients);

    let mut overlaps = 0;
    let mut mismatched = 0;
    let mut conn = conn;
    let mut log = std::mem::take(&mut *log.lock().unwrap());
    for (which, holds) in log.iter_mut() {
        holds.sort();
        overlaps += holds.windows(2).filter(|w| w[0].1 > w[1].0).count();
        let counter: u64 = conn.get(format!("soak:counter:{which}")).await?;
        if counter != holds.len() as u64 {
            mismatched += 1;
            eprintln!(
                "soak:counter:{which} = {counter}, completed holds {}",
                holds.len()
            );
        }
    }
    tokio::time::sleep(Duration::from_secs(4)).await; // leases of abandoned holds run out
    let keys: Vec<String> = conn.keys("soak:[0-9]*").await?;
    println!(
        "{{\"seconds\":{seconds},\"acquisitions\":{},\"failed_acquires\":{},\"node_pauses\":{pauses},\"overlaps\":{overlaps},\"counter_mismatches\":{mismatched},\"leaked_keys\":{}}}",
        acquisitions.load(Ordering::Relaxed),
        failures.load(Ordering::Relaxed),
        keys.len()
    );
    if overlaps > 0 || mismatched > 0 || !keys.is_empty() {
        return Err(format!("soak found problems; leaked keys: {keys:?}").into());
    }
    Ok(())
}
