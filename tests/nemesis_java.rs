//! The nemesis suite with Java in the mix: Redisson workers (`peer.NemesisWorker` of the
//! Redisson peer jar, `tests/redisson-peer`) run beside the Rust `lock_worker` processes, on
//! the same lock names, under the same faults, each in its own network namespace and
//! logging the same history; one checker judges them all
//! (`tests/support/history.rs`; harness `tests/support/nemesis.rs`, the Java side
//! `tests/support/nemesis_java.rs`).
//!
//! One Java worker runs each pinned Redisson (the newest release and the 3.21 line), so
//! every run covers both. Redisson cannot tell a holder that its lock is gone: a Java
//! worker never logs `lost`, and the checker judges its holds by Redis time only (held for
//! sure from the grant's return to the earlier of its release and the acquire's send time
//! plus its lease, the fixed lease or Redisson's `lockWatchdogTimeout`, which the harness
//! sets to the Rust workers' watchdog lease).
//!
//! The Java mix is the fenced lock (Redisson's `RFencedLock`, tokens from the counter the
//! Rust fenced lock draws from, writes to the same fenced store) on the Rust workers' lock
//! names.
//!
//! CI runs one round (about 25 s of faults); `NEMESIS_LONG=1` runs eight. Needs root and
//! `ip netns`, Java and Maven (the jars are built on first use).

mod support;

use std::thread;
use std::time::Duration;
use support::java_peer::Redisson;
use support::nemesis::{rounds, Launch, Run, LEASE};
use support::nemesis_java::{
    cross_handovers, grants_by_impl_and_kind, java_lost_events, redisson_worker,
};

/// The Java workers' mix: kinds on the Rust workers' lock names.
const JAVA_MIX: &str = "fenced";
/// The client namespaces: two Rust workers, then one Java worker per pinned Redisson.
const RUST_A: usize = 0;
const RUST_B: usize = 1;
const JAVA_NEWEST: usize = 2;
const JAVA_LEGACY: usize = 3;

/// Lets the workers run for `secs` seconds between faults (the history they write meanwhile
/// is what the checker judges). Every fault itself waits for conditions.
fn traffic(secs: u64) {
    thread::sleep(Duration::from_secs(secs));
}

#[test]
fn java_and_rust_workers_share_locks_under_partition_pause_and_kill() {
    let launches = vec![
        Launch::rust(),
        Launch::rust(),
        redisson_worker(Redisson::Newest, JAVA_MIX),
        redisson_worker(Redisson::Legacy, JAVA_MIX),
    ];
    let mut run = Run::with_launches("java", true, launches);
    let cut = 2 * LEASE + Duration::from_millis(500);
    for round in 0..rounds() {
        let (java, other_java) = if round % 2 == 0 {
            (JAVA_NEWEST, JAVA_LEGACY)
        } else {
            (JAVA_LEGACY, JAVA_NEWEST)
        };
        traffic(2);
        run.partition(java, cut);
        traffic(2);
        run.pause_worker(other_java, 2 * LEASE);
        traffic(2);
        run.kill_worker(java);
        traffic(2);
        run.partition(RUST_A, cut);
        traffic(2);
        run.kill_worker(RUST_B);
    }
    traffic(3);
    let handovers = run.handovers;
    let (report, events) = run.finish();

    let grants = grants_by_impl_and_kind(&events);
    let count = |imp: &str, kind: &str| {
        grants
            .get(&(imp.to_string(), kind.to_string()))
            .copied()
            .unwrap_or(0)
    };
    let rust: usize = grants
        .iter()
        .filter(|((imp, _), _)| imp == "rust")
        .map(|(_, n)| n)
        .sum();
    let crossings = cross_handovers(&events);
    println!(
        "nemesis[java]: grants={grants:?} rust={rust} java_rust_handovers={crossings} \
         frozen_holder_handovers={handovers}"
    );
    for version in [Redisson::Newest, Redisson::Legacy] {
        let imp = format!("redisson-{}", version.version());
        for kind in JAVA_MIX.split(',') {
            assert!(
                count(&imp, kind) >= 5,
                "too few {kind} grants to {imp} to judge: {grants:?}\n{report}"
            );
        }
    }
    assert!(
        rust >= 20,
        "too few Rust grants to judge: {grants:?}\n{report}"
    );
    assert!(
        crossings >= 1,
        "no lock passed between a Java and a Rust holder: {grants:?}\n{report}"
    );
    assert_eq!(
        java_lost_events(&events),
        0,
        "a Redisson worker logged `lost`"
    );
    assert!(
        handovers >= rounds(),
        "a lock held by a Java worker frozen for two leases did not pass on:\n{report}"
    );
    // Per round two partitions, one pause and two kills (a partition or pause that found no
    // holder is tried again, and each try is logged).
    assert!(report.faults >= 5 * rounds(), "{report}");
}
