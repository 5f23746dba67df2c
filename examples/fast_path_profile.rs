//! Profiling driver (not part of the library): N uncontended fast-lock acquire + unlock
//! pairs, one after another, on one client. Run it under `valgrind --tool=callgrind`.
use actix_distributed_lock::{ClientConfig, LockClient};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:7399/".into());
    let pairs: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(2000);
    let client = LockClient::connect(ClientConfig::new(url)).await?;
    let lock = client.fast_lock("profile")?;
    for _ in 0..pairs {
        lock.acquire().await?.unlock().await?;
    }
    client.shutdown();
    Ok(())
}
