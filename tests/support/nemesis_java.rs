//! Redisson workers in the nemesis harness: the `peer.NemesisWorker` main class of the
//! Redisson peer jar (`tests/redisson-peer`), started in a client namespace like a Rust
//! `lock_worker` (a [`Launch`]), and the counts a mixed run is asserted on: grants per
//! implementation and kind, and hand-overs between a Java and a Rust holder of one lock.
#![allow(dead_code)]

use super::java_peer::Redisson;
use super::nemesis::Launch;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

/// How long a Redisson fair-lock waiter that vanished keeps its place in the queue
/// (Redisson's default is 5 minutes, which would stall every fair waiter behind a killed
/// one for the rest of the run).
pub const FAIR_WAIT: Duration = Duration::from_millis(5000);

/// A Redisson worker of `version`. It takes the Rust worker's arguments (`--mix` of the
/// kinds Redisson has: `reentrant fenced fair read write semaphore expirable`, on the
/// same lock names) and its watchdog lease is the Rust workers' (`--lease-ms`), as
/// Redisson's `lockWatchdogTimeout`.
pub fn redisson_worker(version: Redisson) -> Launch {
    let jar = version.jar();
    Launch {
        program: PathBuf::from("java"),
        before: vec![
            // A small, quick-starting JVM, as the interop peers run.
            "-XX:+UseSerialGC".into(),
            "-XX:TieredStopAtLevel=1".into(),
            "-Xss512k".into(),
            "-Xmx256m".into(),
            "-cp".into(),
            jar.to_str().expect("utf-8 jar path").into(),
            "peer.NemesisWorker".into(),
            "--fair-wait-ms".into(),
            FAIR_WAIT.as_millis().to_string(),
        ],
    }
}

/// `impl` of each worker (from its `start` event): `rust` or `redisson-<version>`.
pub fn impls(events: &[Value]) -> BTreeMap<u64, String> {
    events
        .iter()
        .filter(|e| e["ev"] == "start")
        .filter_map(|e| {
            let worker = e["worker"].as_u64()?;
            let imp = e["impl"].as_str().unwrap_or("rust").to_string();
            Some((worker, imp))
        })
        .collect()
}

/// Grants per (`impl`, kind). Events without `kind` are `fenced` (the schema's rule).
pub fn grants_by_impl_and_kind(events: &[Value]) -> BTreeMap<(String, String), usize> {
    let impls = impls(events);
    let mut counts = BTreeMap::new();
    for e in events.iter().filter(|e| e["ev"] == "grant") {
        let Some(worker) = e["worker"].as_u64() else {
            continue;
        };
        let imp = impls.get(&worker).cloned().unwrap_or_else(|| "rust".into());
        let kind = e["kind"].as_str().unwrap_or("fenced").to_string();
        *counts.entry((imp, kind)).or_insert(0) += 1;
    }
    counts
}

/// The kinds of which one holder excludes every other.
const EXCLUSIVE: [&str; 5] = ["reentrant", "fast", "fenced", "fair", "write"];

/// Hand-overs between implementations: on each lock, the exclusive grants in grant order
/// (`l_after`), counting each grant that follows one of the other implementation (Java
/// after Rust, or Rust after Java).
pub fn cross_handovers(events: &[Value]) -> usize {
    let impls = impls(events);
    let java: BTreeSet<u64> = impls
        .iter()
        .filter(|(_, imp)| imp.starts_with("redisson-"))
        .map(|(w, _)| *w)
        .collect();
    let mut by_lock: BTreeMap<&str, Vec<(u64, bool)>> = BTreeMap::new();
    for e in events.iter().filter(|e| e["ev"] == "grant") {
        let kind = e["kind"].as_str().unwrap_or("fenced");
        if !EXCLUSIVE.contains(&kind) {
            continue;
        }
        let (Some(lock), Some(worker), Some(at)) = (
            e["lock"].as_str(),
            e["worker"].as_u64(),
            e["l_after"].as_u64(),
        ) else {
            continue;
        };
        by_lock
            .entry(lock)
            .or_default()
            .push((at, java.contains(&worker)));
    }
    by_lock
        .into_values()
        .map(|mut grants| {
            grants.sort_unstable();
            grants.windows(2).filter(|w| w[0].1 != w[1].1).count()
        })
        .sum()
}

/// Events of a kind no Java worker may log: Redisson cannot tell a holder its lock is gone.
pub fn java_lost_events(events: &[Value]) -> usize {
    let impls = impls(events);
    events
        .iter()
        .filter(|e| e["ev"] == "lost")
        .filter(|e| {
            e["worker"]
                .as_u64()
                .and_then(|w| impls.get(&w))
                .is_some_and(|imp| imp.starts_with("redisson-"))
        })
        .count()
}
