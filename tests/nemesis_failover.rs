//! The nemesis suite on replicated deployments: `lock_worker` processes (three, three tasks
//! each, fenced locks and a fenced store) against a Redis Cluster of 3 primaries with one
//! replica each, and against a Sentinel deployment, while the primaries fail over.
//! Harness: `tests/support/nemesis_topology.rs`; checker: `tests/support/history/`.
//!
//! What replication promises, and so what each scenario asserts:
//!
//! - A graceful `CLUSTER FAILOVER` stops writes on the primary, lets the replica catch up
//!   and only then hands the slots over: nothing is lost, so the lock it moves must show no
//!   two holders, no token drawn twice and no stale write accepted, with or without
//!   replica sync.
//! - A killed primary loses what it had not yet sent to its replica. With replica sync
//!   (the client's default: the replicas the primary has, 1 s) every grant and every
//!   renewal the holder counts on was confirmed by a replica, and the replica elected is the most up to date one:
//!   no two holders, no token drawn twice, and nothing granted while the replicas could
//!   not confirm. Without it (`ClientConfig::no_replica_sync`) a grant and its token draw can be lost with the primary: the
//!   scenario does not fail on those violations there, but counts and prints them. On
//!   loopback the replicas are a fraction of a millisecond behind, so a plain kill
//!   rarely catches a grant in flight; a third fault therefore cuts the replication
//!   streams (`iptables`) for [`LAG`] before killing the primary, and without sync the
//!   suite must see the lost grant (its token drawn twice).
//! - Everything else is judged as in `tests/nemesis.rs` (a `lost()` later than the key's
//!   expiry, the clock, keys left over), and must hold everywhere.
//!
//! Two locks per primary (their names carry hash tags that land there) run through the
//! whole scenario: the first primary is failed over gracefully, the second killed, the
//! third killed after its replicas fell behind; each fault is judged on its primary's locks.
//! A promoted replica has no replica of its own: the default replica sync then grants its
//! locks without a wait. Each scenario's report line goes to stdout and to
//! `<target>/tmp/nemesis-report.log`.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use serde_json::Value;
use std::thread;
use std::time::Duration;
use support::history::Report;
use support::nemesis::now_us;
use support::nemesis_topology::{grants_between, report_line, FailoverRun, LockFigures};
use support::topology::{RedisCluster, SentinelSetup};

/// Grants the locks of each primary must see before its failover, and after it.
const MIN_GRANTS: usize = 3;
/// How long the replicas of the primary killed last fall behind it before it is killed.
const LAG: Duration = Duration::from_millis(500);
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

/// A graceful `CLUSTER FAILOVER` of one primary, a killed primary (its replica promoted),
/// and a primary killed after its replicas fell behind, under load; replica sync on or off.
fn cluster_failovers(sync: bool) {
    let name = if sync {
        "cluster-failover-sync"
    } else {
        "cluster-failover"
    };
    let cluster = RedisCluster::start(3, 1);
    let groups = locks_per_primary(&cluster);
    let (moved, killed, lagging) = (&groups[0], &groups[1], &groups[2]);
    let locks: Vec<String> = groups.concat();
    let mut run = FailoverRun::cluster(name, cluster, &locks, sync);
    traffic(4);
    let graceful_end = run.graceful_failover(&moved[0]);
    let graceful_regrant = run.first_grant_after(moved, graceful_end, REGRANT_BOUND);
    traffic(3);
    let kill_end = run.kill_primary(&killed[0]);
    // The promoted replica has no replica of its own: under the default replica sync its
    // slots are granted without a wait until it has one (as Redisson does).
    let kill_regrant = run.first_grant_after(killed, kill_end, REGRANT_BOUND);
    traffic(2);
    let lag_end = run.kill_lagging_primary(lagging, LAG);
    let lag_regrant = run.first_grant_after(lagging, lag_end, REGRANT_BOUND);
    traffic(3);
    // Traffic enough after each failover to judge it, however slow a loaded machine is.
    for (locks, end) in [
        (moved, graceful_end),
        (killed, kill_end),
        (lagging, lag_end),
    ] {
        run.grant_after(locks, end, MIN_GRANTS, REGRANT_BOUND);
    }
    // Without replica sync, traffic until the tokens the lagging primary handed out before
    // it died are handed out again (the trace the check below must find).
    let killed_at = run.killed_at.expect("the lagging primary was killed");
    let (lag_start, _) = fault(&run.faults, "kill-lagging-primary");
    let drawn_again =
        sync || run.tokens_drawn_again(lagging, lag_start, killed_at, lag_end, REGRANT_BOUND);
    let (failovers, faults) = (run.failovers, run.faults.clone());
    let (report, events, samples) = run.judge();
    let (g, k, l) = (
        fault(&faults, "cluster-failover"),
        fault(&faults, "kill-primary"),
        fault(&faults, "kill-lagging-primary"),
    );
    let moved_f = LockFigures::of(moved, &events, &report, g.0, g.1);
    let killed_f = LockFigures::of(killed, &events, &report, k.0, k.1);
    let lagging_f = LockFigures::of(lagging, &events, &report, l.0, l.1);
    // Grants made while the replicas lagged, before the primary died with them.
    let lagged_grants = grants_between(&events, lagging, l.0, killed_at);
    let sync_word = if sync { "default" } else { "off" };
    report_line(&format!(
        "nemesis[{name}]: sync_replicas={sync_word} failovers={failovers} \
         acquisitions={} lost={} lost_judged={} writes_accepted={} refused_stale_writes={} \
         samples={samples}\n  graceful CLUSTER FAILOVER, {moved_f} regrant_ms={}\n  \
         killed primary, {killed_f} regrant_ms={}\n  \
         killed primary, replicas {LAG:?} behind, {lagging_f} \
         granted_while_lagging={lagged_grants} regrant_ms={}",
        report.acquisitions,
        report.lost,
        report.lost_judged,
        report.writes_accepted,
        report.writes_refused,
        ms(graceful_regrant),
        ms(kill_regrant),
        ms(lag_regrant),
    ));
    println!("{report}");
    assert_eq!(failovers, 3, "{report}");
    assert_grants(&moved_f, graceful_regrant, &report);
    assert_grants(&killed_f, kill_regrant, &report);
    assert_grants(&lagging_f, lag_regrant, &report);
    if sync {
        // Replica sync granted nothing the lagging replicas could not confirm ...
        assert_eq!(lagged_grants, 0, "{lagging_f}\n{report}");
        // ... nor a re-entry (it waits for the replicas as a grant does).
        assert_eq!(lagging_f.tokens_redrawn, 0, "{lagging_f}\n{report}");
        // ... and nothing else broke anywhere.
        assert_only(&report, &[], &[&moved_f, &killed_f, &lagging_f]);
    } else {
        // A grant made while the replicas lagged is lost with the primary: its token is
        // drawn again on the promoted replica (by another holder, or by its own holder's
        // re-entry, which finds the key gone and takes the lock anew). The suite must see
        // that.
        assert!(lagged_grants >= 1, "{lagging_f}\n{report}");
        assert!(
            drawn_again,
            "the tokens granted while the replicas lagged were not drawn again within \
             {REGRANT_BOUND:?} after the failover:\n{lagging_f}\n{report}"
        );
        assert!(
            lagging_f.two_holders() + lagging_f.tokens_redrawn >= 1,
            "the lock granted on a primary killed while its replicas lagged left no trace:\n\
             {lagging_f}\n{report}"
        );
        // Two holders are possible on the killed primaries' locks only.
        assert_only(
            &report,
            &[&killed_f, &lagging_f],
            &[&moved_f, &killed_f, &lagging_f],
        );
    }
}

#[test]
fn cluster_failovers_with_replica_sync() {
    cluster_failovers(true);
}

#[test]
fn cluster_failovers_without_replica_sync() {
    cluster_failovers(false);
}

/// The Sentinels' primary killed under load, with the default settings: the Sentinels
/// promote the replica, and the workers follow it. Two holders are possible (the replica
/// promoted may not be the one that confirmed a grant), and counted.
#[test]
fn sentinel_failover_of_a_killed_primary() {
    let setup = SentinelSetup::start();
    let locks = vec![
        "nzs-a".to_string(),
        "nzs-b".to_string(),
        "nzs-c".to_string(),
    ];
    let mut run = FailoverRun::sentinel("sentinel-failover", setup, &locks, true);
    traffic(3);
    let start = now_us();
    let end = run.kill_sentinel_primary(&locks[0]);
    let regrant = run.first_grant_after(&locks, end, REGRANT_BOUND);
    traffic(3);
    run.grant_after(&locks, end, MIN_GRANTS, REGRANT_BOUND);
    let failovers = run.failovers;
    let (report, events, samples): (Report, Vec<Value>, usize) = run.judge();
    let figures = LockFigures::of(&locks, &events, &report, start, end);
    report_line(&format!(
        "nemesis[sentinel-failover]: sync_replicas=default failovers={failovers} acquisitions={} \
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
