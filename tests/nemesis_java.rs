//! The nemesis suite with Java in the mix: Redisson workers (`peer.NemesisWorker` of the
//! Redisson peer jar, `tests/redisson-peer`) run beside the Rust `lock_worker` processes, on
//! the same lock names, under the same faults, each in its own network namespace and
//! logging the same history; one checker judges them all
//! (`tests/support/history/`; harness `tests/support/nemesis.rs`, the Java side
//! `tests/support/nemesis_java.rs`).
//!
//! One Java worker runs each pinned Redisson (the newest release and the 3.21 line), so
//! every run covers both. Redisson cannot tell a holder that its lock is gone: a Java
//! worker never logs `lost`, and the checker judges its holds by Redis time only (held for
//! sure from the grant's return to the earlier of its release and the acquire's send time
//! plus its lease, the fixed lease or Redisson's `lockWatchdogTimeout`, which the harness
//! sets to the Rust workers' watchdog lease).
//!
//! Every kind Redisson has is in the Java mix: `RLock` (re-entered, watchdog and fixed
//! leases), the fenced lock (`RFencedLock`: tokens from the counter the Rust fenced lock
//! draws from, writes to the same fenced store), the fair lock, both sides of the
//! read-write lock, `RSemaphore` and `RPermitExpirableSemaphore`, on the lock names the
//! Rust workers use for those kinds. Redisson has no fast lock: only Rust takes those.
//!
//! CI runs one round (about 25 s of faults); `NEMESIS_LONG=1` runs eight. Needs root and
//! `ip netns`, Java and Maven (the jars are built on first use).

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use std::thread;
use std::time::Duration;
use support::history::Minimums;
use support::java_peer::Redisson;
use support::nemesis::{rounds, Run, Setup, ALL_KINDS, CLIENTS, LEASE};
use support::nemesis_java::{
    cross_handovers, grants_by_impl_and_kind, java_lost_events, redisson_worker,
};

/// The kinds a Redisson worker takes: all but the fast lock.
const JAVA_MIX: &str = "reentrant,fenced,fair,read,write,semaphore,expirable";
/// The client namespaces: the Rust workers, then one Java worker per pinned Redisson.
const RUST_A: usize = 0;
const RUST_B: usize = 1;
const JAVA_NEWEST: usize = CLIENTS;
const JAVA_LEGACY: usize = CLIENTS + 1;

/// Lets the workers run for `secs` seconds between faults (the history they write meanwhile
/// is what the checker judges). Every fault itself waits for conditions.
fn traffic(secs: u64) {
    thread::sleep(Duration::from_secs(secs));
}

#[test]
fn java_and_rust_workers_share_locks_under_partition_pause_and_kill() {
    let setup = Setup::default()
        .mixes(&[ALL_KINDS; CLIENTS])
        .extra_slot(redisson_worker(Redisson::Newest), JAVA_MIX)
        .extra_slot(redisson_worker(Redisson::Legacy), JAVA_MIX);
    let mut run = Run::with("java", setup);
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
    let crossings = cross_handovers(&events);
    println!(
        "nemesis[java]: grants per impl and kind {grants:?}; java/rust hand-overs {crossings}; \
         frozen holders passed on {handovers}"
    );
    let count = |imp: &str, kind: &str| {
        grants
            .get(&(imp.to_string(), kind.to_string()))
            .copied()
            .unwrap_or(0)
    };
    // Each kind Redisson has, taken by the Java workers; each pinned version taking its
    // share (a Java worker is killed mid-run and starts cold again, so per version the
    // counts are small: the bound is on its total).
    let mut short = Vec::new();
    let versions =
        [Redisson::Newest, Redisson::Legacy].map(|v| format!("redisson-{}", v.version()));
    for kind in JAVA_MIX.split(',') {
        let java: usize = versions.iter().map(|imp| count(imp, kind)).sum();
        if java < 2 {
            short.push(format!("java {kind}: {java}"));
        }
    }
    for imp in &versions {
        let all: usize = JAVA_MIX.split(',').map(|kind| count(imp, kind)).sum();
        if all < 10 {
            short.push(format!("{imp}: {all} grants in all"));
        }
    }
    for kind in ALL_KINDS.split(',') {
        if count("rust", kind) < 1 {
            short.push(format!("rust {kind}"));
        }
    }
    assert!(
        short.is_empty(),
        "too few grants to judge ({}): {grants:?}\n{report}",
        short.join(", ")
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
    // Per round two partitions, one pause and two kills (a partition or pause that found no
    // holder is tried again, and each try is logged).
    Minimums::new()
        .exclusive_judged(20)
        .rw_judged(1)
        .tokens_judged(3)
        .permits_out(1)
        .reentries(3)
        .faults(5 * rounds())
        .assert(&report);
    assert!(
        handovers >= 1,
        "no lock held by a worker frozen for two leases passed on:\n{report}"
    );
}

// ---- The checker on made-up Java holds: judged by Redis time only, with their own lease. ----

mod checker {
    use serde_json::{json, Value};
    use support::history;

    const MS: u64 = 1000;
    const T0: u64 = 1_800_000_000_000_000;
    const WATCHDOG_US: u64 = 1_500 * MS;

    fn start(worker: u64, imp: &str) -> Value {
        json!({"ev": "start", "worker": worker, "task": 0, "client": format!("c{worker}"),
               "pid": 1, "l": T0, "impl": imp})
    }

    /// A fenced grant on `nz-a` (token = hold) sent at `l_call`, returned 1 ms later.
    fn grant(worker: u64, hold: u64, l_call: u64, lease_ms: Option<u64>) -> Value {
        json!({"ev": "grant", "worker": worker, "task": 1, "hold": hold, "lock": "nz-a",
               "kind": "fenced", "field": format!("c{worker}:1"), "token": hold,
               "lease_ms": lease_ms, "l_call": l_call, "l_after": l_call + MS})
    }

    fn release(worker: u64, hold: u64, l: u64, result: &str) -> Vec<Value> {
        vec![
            json!({"ev": "release_start", "worker": worker, "task": 1, "hold": hold,
                   "lock": "nz-a", "token": hold, "l": l, "was_lost": false}),
            json!({"ev": "release", "worker": worker, "task": 1, "hold": hold, "lock": "nz-a",
                   "token": hold, "l": l + MS, "result": result}),
        ]
    }

    /// A Java hold with a 1 s fixed lease, found gone at its unlock after 2 s; a Rust
    /// worker granted the lock 1.2 s in: after the fixed lease, inside the watchdog lease.
    fn java_hold_outlived_by_its_fixed_lease(rust_grant_at: u64) -> Vec<Value> {
        let mut events = vec![start(1, "redisson-4.7.0"), grant(1, 1, T0, Some(1_000))];
        events.extend(release(1, 1, T0 + 2_000 * MS, "not_owner"));
        events.push(start(2, "rust"));
        events.push(grant(2, 2, rust_grant_at, None));
        events.extend(release(2, 2, rust_grant_at + 100 * MS, "ok"));
        events
    }

    #[test]
    fn a_java_hold_lasts_its_fixed_lease_and_is_never_judged_for_lost() {
        let events = java_hold_outlived_by_its_fixed_lease(T0 + 1_200 * MS);
        let report = history::check("unit", &events, &[], &[], WATCHDOG_US, &[]);
        assert!(report.violations.is_empty(), "{report}");
        assert_eq!(
            (report.acquisitions, report.lost_judged),
            (2, 0),
            "{report}"
        );
        assert_eq!(report.gone_at_unlock, 0, "{report}");
    }

    #[test]
    fn a_grant_inside_a_java_holds_fixed_lease_is_an_overlap() {
        let events = java_hold_outlived_by_its_fixed_lease(T0 + 900 * MS);
        let report = history::check("unit", &events, &[], &[], WATCHDOG_US, &[]);
        assert_eq!(report.violations.len(), 1, "{report}");
        assert!(report.violations[0].contains("overlap"), "{report}");
    }
}
