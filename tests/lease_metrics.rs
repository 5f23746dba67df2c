#![cfg(feature = "metrics")]
// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]
//! The lease updates counter (`distributed_lock_lease_updates_total{kind, outcome}`): every
//! `extend` of a lock guard and every permit lease update counts once, by how it ended.
//! One test in this binary: the recorder is global.

use actix_distributed_lock::{AcquireOptions, PermitOptions};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redis::AsyncCommands;
use std::collections::BTreeMap;
use std::time::Duration;
use support::RedisServer;

/// Counters by `name{label=value,...}` (labels sorted), added up over snapshots.
fn counters(snapshotter: &Snapshotter, totals: &mut BTreeMap<String, u64>) {
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        let mut labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        if let DebugValue::Counter(n) = value {
            *totals
                .entry(format!("{}{{{}}}", key.name(), labels.join(",")))
                .or_default() += n;
        }
    }
}

fn updates(kind: &str, outcome: &str) -> String {
    format!("distributed_lock_lease_updates_total{{kind={kind},outcome={outcome}}}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lease_update_counts_once_by_outcome() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this binary");
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let lease = Duration::from_secs(5);

    let lock = client.lock("counted").unwrap();
    let guard = lock
        .acquire_with(AcquireOptions::new().lease(lease))
        .await
        .unwrap();
    guard.extend(lease).await.unwrap();
    guard.extend(lease).await.unwrap();
    assert!(guard.extend(Duration::ZERO).await.is_err());
    let _: () = server.conn().await.del("counted").await.unwrap();
    assert!(guard.extend(lease).await.is_err());

    let slots = client.expirable_semaphore("counted-slots").unwrap();
    slots.try_set_permits(1).await.unwrap();
    let permit = slots
        .acquire_with(PermitOptions::new().lease(lease))
        .await
        .unwrap();
    permit.update_lease(lease).await.unwrap();
    assert!(slots.update_lease(permit.permit_id(), lease).await.unwrap());

    let mut totals = BTreeMap::new();
    counters(&snapshotter, &mut totals);
    let expected = [
        (updates("reentrant", "updated"), 2),
        (updates("reentrant", "error"), 1),
        (updates("reentrant", "lost"), 1),
        (updates("expirable_semaphore", "updated"), 2),
    ];
    for (id, count) in expected {
        assert_eq!(totals.get(&id).copied(), Some(count), "{id} in {totals:#?}");
    }
}
