//! Locks on a Redis Cluster and on a Sentinel-managed primary: only the config changes.
//!
//! ```text
//! cargo run --example cluster -- cluster redis://127.0.0.1:7000/ redis://127.0.0.1:7001/
//! cargo run --example cluster -- sentinel mymaster redis://127.0.0.1:26379/
//! ```
//!
//! Takes 100 locks spread over every slot, contends on one of them from two clients, and
//! prints which pub/sub carried the wake-ups.

use actix_distributed_lock::{ClientConfig, LockClient};
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let config = match args.first().map(String::as_str) {
        Some("cluster") if args.len() > 1 => ClientConfig::cluster(args[1..].to_vec()),
        Some("sentinel") if args.len() > 2 => {
            ClientConfig::sentinel(args[2..].to_vec(), args[1].clone())
        }
        _ => {
            eprintln!("usage: cluster (cluster URL... | sentinel NAME SENTINEL_URL...)");
            std::process::exit(2);
        }
    };
    // Replica sync is on by default (the replicas each primary has, 1 s); a fixed count
    // would be: config.sync_replicas(1, Duration::from_millis(100))
    let config = config.default_wait(Duration::from_secs(10));
    let first = LockClient::connect(config.clone()).await?;
    let second = LockClient::connect(config).await?;

    // Names spread over the slots; each lock's keys share its slot, so no CROSSSLOT.
    let mut guards = Vec::new();
    for i in 0..100 {
        guards.push(first.lock(&format!("order:{i}"))?.acquire().await?);
    }
    println!("holding {} locks across the cluster", guards.len());
    for guard in guards {
        guard.unlock().await?;
    }

    // Contention: the second client waits and is woken by the first one's unlock.
    let held = first.lock("stock:sku-1")?.acquire().await?;
    let waiter = tokio::spawn({
        let second = second.clone();
        async move {
            let started = Instant::now();
            let guard = second.lock("stock:sku-1")?.acquire().await?;
            let waited = started.elapsed();
            guard.unlock().await?;
            Ok::<_, actix_distributed_lock::LockError>(waited)
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    held.unlock().await?;
    let waited = waiter.await??;
    println!("the second client waited {waited:?} and was woken by the unlock");
    first.close().await;
    second.close().await;
    Ok(())
}
