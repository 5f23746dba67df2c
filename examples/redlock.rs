//! RedLock and MultiLock side by side, over three independent Redis nodes.
//!
//! - **RedLock** `payout:2026-11`: one lock held on a majority (2 of 3) of the nodes, so it
//!   survives one node dying. The guard says on how many nodes it is held and how much
//!   validity is left.
//! - **MultiLock** `order:42` + `stock:sku-1` + `invoice:42`: several different locks,
//!   spread over the nodes, taken all or none in one canonical order.
//!
//! The nodes come from the first argument or `REDLOCK_NODES` (comma-separated URLs),
//! default `redis://127.0.0.1:7001/,redis://127.0.0.1:7002/,redis://127.0.0.1:7003/`. Run
//! it against three throwaway servers:
//!
//! ```text
//! for p in 7001 7002 7003; do redis-server --port $p --save "" --daemonize yes; done
//! cargo run --example redlock
//! for p in 7001 7002 7003; do redis-cli -p $p shutdown nosave; done
//! ```
//!
//! Each client connects to its node at start, so all three must be up then. A RedLock
//! keeps working when one node dies later (`tests/redlock.rs` stops, pauses and restarts
//! nodes under it); a MultiLock whose member lives on a dead node fails, and holds nothing.

use actix_distributed_lock::{LockClient, LockError, MultiLock, RedLock};
use std::time::Duration;

const DEFAULT_NODES: &str =
    "redis://127.0.0.1:7001/,redis://127.0.0.1:7002/,redis://127.0.0.1:7003/";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let urls = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("REDLOCK_NODES").ok())
        .unwrap_or_else(|| DEFAULT_NODES.to_string());
    let mut nodes = Vec::new();
    for url in urls.split(',').map(str::trim).filter(|u| !u.is_empty()) {
        // One client per node: each runs that node's own NodeSupervisor.
        nodes.push(LockClient::from_url(url).await?);
    }
    if nodes.is_empty() {
        return Err("no Redis node given; see the comment at the top of this example".into());
    }

    // --- RedLock: one name, a majority of independent nodes. ---
    let payout = RedLock::new(&nodes, "payout:2026-11")?;
    println!(
        "RedLock over {} nodes needs {}; per-node timeout {:?} for a {:?} lease",
        payout.nodes(),
        payout.quorum(),
        payout.node_timeout_for(payout.watchdog_lease()),
        payout.watchdog_lease(),
    );
    match payout.acquire_timeout(Duration::from_secs(2)).await {
        Ok(guard) => {
            println!(
                "  held on {} nodes, valid for {:?}",
                guard.nodes_held(),
                guard.validity()
            );
            // Re-entry: the same owner takes it again on every node.
            let inner = guard.reenter(Duration::ZERO).await?;
            inner.unlock().await?;
            // ... pay out, checking guard.validity() before every irreversible step ...
            guard.unlock().await?;
            println!("  released on every node");
        }
        Err(LockError::Unavailable { reason, .. }) => println!("  no quorum: {reason}"),
        Err(other) => return Err(other.into()),
    }

    // --- MultiLock: several locks, wherever they live, all or none. ---
    let node = |i: usize| &nodes[i % nodes.len()];
    let order = MultiLock::new([
        node(0).lock("order:42")?,
        node(1).fair_lock("stock:sku-1")?,
        node(2).lock("invoice:42")?,
    ])?;
    let names: Vec<&str> = order.locks().map(|lock| lock.name()).collect();
    println!("MultiLock takes {names:?} in this order, whatever order they were given in");
    match order.acquire_timeout(Duration::from_secs(2)).await {
        Ok(guard) => {
            println!(
                "  all {} held; lost() fires if any is lost",
                guard.guards().len()
            );
            // ... reserve the stock, pay the order, write the invoice ...
            guard.unlock().await?;
            println!("  all released");
        }
        Err(error) => println!("  none held: {error}"),
    }
    for node in nodes {
        node.close().await;
    }
    Ok(())
}
