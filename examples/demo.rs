//! Many tasks, one lock, one counter: the counter is read and written back non-atomically,
//! so it ends exact only if the lock lets one task in at a time.
//!
//! Run with `scripts/demo` (it starts a throwaway Redis), or
//! `cargo run --example demo -- redis://127.0.0.1:6379/`.

use actix_distributed_lock::{ClientConfig, LockClient};
use redis::AsyncCommands;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TASKS: usize = 50;
const ROUNDS: usize = 20;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".to_string());
    let client = LockClient::connect(ClientConfig::new(&url)).await?;
    let mut redis = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let counter = format!("demo:counter:{}", client.id());
    redis.set::<_, _, ()>(&counter, 0).await?;

    println!("{TASKS} tasks x {ROUNDS} rounds contend for lock `demo:counter`;");
    println!("each holder reads the counter, yields, and writes it back plus one.");
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let lock = client.lock("demo:counter")?;
        let mut redis = redis.clone();
        let counter = counter.clone();
        let (inside, max_inside) = (inside.clone(), max_inside.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..ROUNDS {
                let guard = lock.acquire_timeout(Duration::from_secs(30)).await?;
                let now_inside = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max_inside.fetch_max(now_inside, Ordering::SeqCst);
                let value: i64 = redis.get(&counter).await?;
                tokio::task::yield_now().await;
                redis.set::<_, _, ()>(&counter, value + 1).await?;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.unlock().await?;
            }
            Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
        }));
    }
    for task in tasks {
        task.await?.map_err(|e| e.to_string())?;
    }
    let elapsed = started.elapsed();
    let value: i64 = redis.get(&counter).await?;
    let left: bool = redis.exists("demo:counter").await?;
    redis.del::<_, ()>(&counter).await?;
    let expected = (TASKS * ROUNDS) as i64;
    println!(
        "counter = {value} (expected {expected}); most holders at once = {}",
        max_inside.load(Ordering::SeqCst)
    );
    println!(
        "{} lock hand-offs in {elapsed:.2?} ({:.0}/s); lock key left behind: {left}",
        expected,
        expected as f64 / elapsed.as_secs_f64()
    );
    if value != expected || max_inside.load(Ordering::SeqCst) != 1 || left {
        return Err("mutual exclusion was violated".into());
    }
    println!("ok: one holder at a time, nothing lost, nothing left behind");
    client.close().await;
    Ok(())
}
