//! Watchdog renewal on a Redis Cluster when one primary stops answering: the other
//! primaries' locks are renewed as if nothing happened, and the stalled primary's holders
//! are told their locks are lost by the end of the last confirmed lease.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::LockGuard;
use std::time::{Duration, Instant};
use support::topology::RedisCluster;

#[actix_rt::test]
async fn a_paused_primary_stalls_only_its_own_renewals() {
    // A long node timeout: the pause must not fail the node over or take the cluster down.
    let mut cluster = RedisCluster::start_with(3, 0, Duration::from_secs(60));
    let lease = Duration::from_secs(2); // renewed every 667 ms
    let client = support::cluster_client(&cluster, |config| {
        config
            .watchdog_timeout(lease)
            .response_timeout(Duration::from_millis(800))
            .default_wait(Duration::from_secs(10))
    })
    .await;
    let names: Vec<String> = (0..90).map(|i| format!("stall:{i}")).collect();
    let mut guards: Vec<(String, LockGuard)> = Vec::new();
    for name in &names {
        let guard = client.lock(name).unwrap().acquire().await.unwrap();
        guards.push((name.clone(), guard));
    }
    let paused = cluster.primary_ports()[0];
    let (stalled, healthy): (Vec<_>, Vec<_>) = guards
        .into_iter()
        .partition(|(name, _)| cluster.primary_for_key(name) == paused);
    assert!(
        !stalled.is_empty() && healthy.len() >= 30,
        "names spread over primaries"
    );

    let losts: Vec<_> = stalled.iter().map(|(_, g)| g.lost()).collect();
    cluster.pause_node(paused);
    let paused_at = Instant::now();
    // Every stalled hold is reported by the end of its lease (counted from the pause, a
    // bound the last confirmed renewal can only make earlier), plus scheduling slack.
    let told = futures_util::future::join_all(losts);
    tokio::time::timeout(lease + Duration::from_millis(300), told)
        .await
        .expect("every lock on the paused primary is reported lost within its lease");
    // Two and a half leases of stall in all: the healthy locks would have expired twice.
    tokio::time::sleep((lease * 5 / 2).saturating_sub(paused_at.elapsed())).await;
    let lost: Vec<&String> = healthy
        .iter()
        .filter(|(_, g)| g.is_lost())
        .map(|(name, _)| name)
        .collect();
    assert!(lost.is_empty(), "locks on healthy primaries lost: {lost:?}");
    cluster.resume_node(paused);
    for (name, guard) in healthy {
        guard
            .unlock()
            .await
            .unwrap_or_else(|e| panic!("{name} is still held, so unlock works: {e}"));
    }
    drop(stalled);
    // The stalled holds were never renewed past their lease: they expire in Redis too.
    let deadline = Instant::now() + lease * 2;
    while !cluster.keys_on_all().is_empty() {
        assert!(
            Instant::now() < deadline,
            "left behind: {:?}",
            cluster.keys_on_all()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
