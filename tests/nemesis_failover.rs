//! The nemesis suite on replicated deployments: `lock_worker` processes (three, three tasks
//! each, fenced locks and a fenced store) against a Redis Cluster of 3 primaries with one
//! replica each, and against a Sentinel deployment, while the primaries fail over.
//! Harness: `tests/support/nemesis_topology.rs`; checker: `tests/support/history.rs`.
//!
//! What replication promises, and so what each scenario asserts:
//!
//! - A graceful `CLUSTER FAILOVER` stops writes on the primary, lets the replica catch up
//!   and only then hands the slots over: nothing is lost, so the lock it moves must show no
//!   two holders, no token drawn twice and no stale write accepted, with or without
//!   replica sync.
//! - A killed primary loses what it had not yet sent to its replica. With replica sync
//!   (`ClientConfig::sync_replicas(1, ..)`) every grant and every renewal the holder counts
//!   on was confirmed by the replica, which is the one promoted (one replica per primary):
//!   again no two holders. Without it a grant or a token draw can be lost with the
//!   primary, and the next holder may be granted over a holder that still believes it
//!   holds: the scenario then does not fail on those violations but counts them and prints
//!   them in its report line.
//! - Everything else is judged as in `tests/nemesis.rs` (a `lost()` later than the key's
//!   expiry, the clock, keys left over), and must hold everywhere.
//!
//! A lock of each primary (its name carries a hash tag that lands there) runs through the
//! whole scenario: one on the primary failed over gracefully, one on the primary killed, and
//! one on the third primary as the control. Each scenario's report line goes to stdout and to
//! `<target>/tmp/nemesis-report.log`.

mod support;

use serde_json::Value;
use std::thread;
use std::time::Duration;
use support::history::Report;
use support::nemesis::now_us;
use support::nemesis_topology::{report_line, FailoverRun, LockFigures};
use support::topology::{RedisCluster, SentinelSetup};

/// Grants the locks of each primary must see before its failover, and after it.
const MIN_GRANTS: usize = 3;
/// Locks on each primary (9 tasks on 6 locks: contended, and many grants).
const LOCKS_PER_PRIMARY: usize = 2;
/// How soon after a failover completed its lock must be granted again.
const REGRANT_BOUND: Duration = Duration::from_secs(10);

/// Lets the workers run for `secs` seconds: the history they write meanwhile is what the
/// checker judges.
fn traffic(secs: u64) {
    thread::sleep(Duration::from_secs(secs));
}

/// [`LOCKS_PER_PRIMARY`] lock names per primary, in the order of the cluster's primaries;
/// each name's hash tag lands on its primary's slots.
fn locks_per_primary(cluster: &RedisCluster) -> Vec<Vec<String>> {
    let primaries = cluster.primary_ports();
    let mut locks: Vec<Vec<String>> = vec![Vec::new(); primaries.len()];
    for i in 0..500 {
        if locks.iter().all(|l| l.len() == LOCKS_PER_PRIMARY) {
            break;
        }
        let name = format!("{{nzf{i}}}:lock");
        let owner = cluster.primary_for_key(&name);
        if let Some(at) = primaries.iter().position(|&p| p == owner) {
            if locks[at].len() < LOCKS_PER_PRIMARY {
                locks[at].push(name);
            }
        }
    }
    assert!(
        locks.iter().all(|l| l.len() == LOCKS_PER_PRIMARY),
        "no hash tags for every primary: {locks:?}"
    );
    locks
}

/// The fault of `kind` the run logged.
fn fault(faults: &[support::history::Fault], kind: &str) -> (u64, u64) {
    let f = faults
        .iter()
        .find(|f| f.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} fault logged"));
    (f.start, f.end)
}

fn ms(regrant: Option<f64>) -> String {
    regrant.map_or("none".into(), |ms| format!("{ms:.0}"))
}

/// Fails unless every violation of `report` is one that `allowed` lists for its lock.
fn assert_only(report: &Report, allowed: &[&LockFigures], figures: &[&LockFigures]) {
    let judged: usize = figures.iter().map(|f| f.two_holders()).sum();
    let allowed_count: usize = allowed.iter().map(|f| f.two_holders()).sum();
    let others: Vec<&String> = figures.iter().flat_map(|f| &f.other).collect();
    let unattributed = report.violations.len() - judged - others.len();
    assert!(
        others.is_empty() && unattributed == 0 && judged == allowed_count,
        "violations the library promises to avoid:\n{report}"
    );
}

fn assert_grants(f: &LockFigures, regrant: Option<f64>, report: &Report) {
    assert!(
        f.grants_before >= MIN_GRANTS && f.grants_after >= MIN_GRANTS,
        "too few grants around the failover ({f}):\n{report}"
    );
    assert!(
        regrant.is_some(),
        "{:?} were not granted within {REGRANT_BOUND:?} after its failover:\n{report}",
        f.locks
    );
}

/// A graceful `CLUSTER FAILOVER` of one primary, then a killed primary (its replica
/// promoted), under load; replica sync on or off.
fn cluster_failovers(sync: bool) {
    let name = if sync {
        "cluster-failover-sync"
    } else {
        "cluster-failover"
    };
    let cluster = RedisCluster::start(3, 1);
    let groups = locks_per_primary(&cluster);
    let (moved, killed, control) = (&groups[0], &groups[1], &groups[2]);
    let locks: Vec<String> = groups.concat();
    let mut run = FailoverRun::cluster(name, cluster, &locks, sync);
    traffic(3);
    let graceful_end = run.graceful_failover(&moved[0]);
    let graceful_regrant = run.first_grant_after(moved, graceful_end, REGRANT_BOUND);
    traffic(3);
    if sync {
        // The promoted replica has no replica of its own: give the primary about to be
        // killed a second one, so that its slots stay grantable with replica sync.
        run.add_replica_for(&killed[0]);
    }
    let kill_end = run.kill_primary(&killed[0]);
    let kill_regrant = run.first_grant_after(killed, kill_end, REGRANT_BOUND);
    traffic(3);
    let (failovers, faults) = (run.failovers, run.faults.clone());
    let (report, events, samples) = run.judge();
    let (g, k) = (
        fault(&faults, "cluster-failover"),
        fault(&faults, "kill-primary"),
    );
    let moved_f = LockFigures::of(moved, &events, &report, g.0, g.1);
    let killed_f = LockFigures::of(killed, &events, &report, k.0, k.1);
    let control_f = LockFigures::of(control, &events, &report, g.0, k.1);
    let sync_word = if sync { "on" } else { "off" };
    report_line(&format!(
        "nemesis[{name}]: sync_replicas={sync_word} failovers={failovers} \
         acquisitions={} lost={} lost_judged={} writes_accepted={} refused_stale_writes={} \
         samples={samples}\n  graceful CLUSTER FAILOVER, {moved_f} regrant_ms={}\n  \
         killed primary, {killed_f} regrant_ms={}\n  control, {control_f}",
        report.acquisitions,
        report.lost,
        report.lost_judged,
        report.writes_accepted,
        report.writes_refused,
        ms(graceful_regrant),
        ms(kill_regrant),
    ));
    println!("{report}");
    assert_eq!(failovers, 2, "{report}");
    assert_grants(&moved_f, graceful_regrant, &report);
    assert_grants(&killed_f, kill_regrant, &report);
    assert!(
        control_f.grants_before >= MIN_GRANTS && control_f.grants_after >= MIN_GRANTS,
        "{control_f}"
    );
    // Two holders are possible only on the killed primary's lock, and only without sync.
    let allowed: Vec<&LockFigures> = if sync { vec![] } else { vec![&killed_f] };
    assert_only(&report, &allowed, &[&moved_f, &killed_f, &control_f]);
}

#[test]
fn cluster_failovers_with_replica_sync() {
    cluster_failovers(true);
}

#[test]
fn cluster_failovers_without_replica_sync() {
    cluster_failovers(false);
}

/// The Sentinels' primary killed under load: the Sentinels promote the replica, and the
/// workers follow it. Without replica sync (a promoted replica has no replica of its own
/// left, so replica-synced acquisition would refuse every lock after the failover), two
/// holders are possible, and counted.
#[test]
fn sentinel_failover_of_a_killed_primary() {
    let setup = SentinelSetup::start();
    let locks = vec![
        "nzs-a".to_string(),
        "nzs-b".to_string(),
        "nzs-c".to_string(),
    ];
    let mut run = FailoverRun::sentinel("sentinel-failover", setup, &locks, false);
    traffic(3);
    let start = now_us();
    let end = run.kill_sentinel_primary(&locks[0]);
    let regrant = run.first_grant_after(&locks, end, REGRANT_BOUND);
    traffic(3);
    let failovers = run.failovers;
    let (report, events, samples): (Report, Vec<Value>, usize) = run.judge();
    let figures = LockFigures::of(&locks, &events, &report, start, end);
    report_line(&format!(
        "nemesis[sentinel-failover]: sync_replicas=off failovers={failovers} acquisitions={} \
         lost={} lost_judged={} writes_accepted={} refused_stale_writes={} samples={samples} \
         failover_ms={:.0}\n  {figures} regrant_ms={}",
        report.acquisitions,
        report.lost,
        report.lost_judged,
        report.writes_accepted,
        report.writes_refused,
        (end - start) as f64 / 1000.0,
        ms(regrant)
    ));
    println!("{report}");
    assert_eq!(failovers, 1, "{report}");
    assert_grants(&figures, regrant, &report);
    assert_only(&report, &[&figures], &[&figures]);
}
