//! The nemesis suite: real faults against real processes, judged afterwards by a checker
//! over every process' recorded history (`tests/support/history.rs`).
//!
//! Each scenario (harness: `tests/support/nemesis.rs`) builds its own network namespaces
//! (`tests/support/netns.rs`): Redis in one, three `lock_worker` processes (three tasks
//! each, fenced locks, a fenced store) in three others, each joined to the server by its own
//! veth pair. The nemesis then partitions,
//! freezes, kills or restarts, while a monitor in the test samples the lock keys every
//! 20 ms. After the run the workers are stopped, the keys are scanned, and the checker
//! fails the test on overlapping holds, a stale write accepted by the store, a `lost()`
//! later than the key's expiry + 50 ms, or anything left in Redis.
//!
//! The server runs with `appendonly yes, appendfsync always`, so a restart keeps the locks
//! and the token counters (a lock service on a server that forgets on restart cannot keep
//! mutual exclusion; the checker catches that: `a_server_that_forgets_its_locks_is_caught`).
//!
//! CI runs one round of each schedule (about 20 s of faults per scenario); set
//! `NEMESIS_LONG=1` for eight rounds. Needs root and `ip netns`; without them every scenario
//! fails saying what is missing. Each scenario's report line goes to stdout and to
//! `<target>/tmp/nemesis-report.log`.

mod support;

use serde_json::{json, Value};
use std::thread;
use std::time::Duration;
use support::history::{self, Sample};
use support::nemesis::{rounds, Run, CLIENTS, LEASE};

/// Grants to workers other than `worker` inside `[start, end]` (local clocks).
fn grants_by_others(run_dir_events: &[Value], worker: u64, start: u64, end: u64) -> usize {
    run_dir_events
        .iter()
        .filter(|e| e["ev"] == "grant" && e["worker"].as_u64() != Some(worker))
        .filter(|e| e["l_after"].as_u64().is_some_and(|t| t > start && t < end))
        .count()
}

/// Lets the workers run for `secs` seconds between faults (and after the last): the
/// history they write meanwhile is what the checker judges, so time passing is the
/// scenario here. Every fault itself waits for conditions (a holder hit, a grant seen).
fn traffic(secs: u64) {
    thread::sleep(Duration::from_secs(secs));
}

#[test]
fn partition_one_client_while_the_others_keep_access() {
    let mut run = Run::new("partition");
    let mut windows = Vec::new();
    for round in 0..rounds() {
        for slot in [round % CLIENTS, (round + 1) % CLIENTS] {
            traffic(2);
            let before = run.faults.len();
            run.partition(slot, 2 * LEASE + Duration::from_millis(500));
            let fault = &run.faults[before];
            windows.push((fault.worker.unwrap_or(0), fault.start, fault.end));
        }
    }
    traffic(2);
    let (report, events) = run.finish();
    assert!(
        report.lost + report.gone_at_unlock + report.unlock_unavailable >= 1,
        "no cut-off holder lost its lock:\n{report}"
    );
    for (worker, start, end) in windows {
        assert!(
            grants_by_others(&events, worker, start, end) > 0,
            "while worker {worker} was cut off, no other worker was granted a lock"
        );
    }
}

#[test]
fn pause_a_client_and_the_server() {
    let mut run = Run::new("pause");
    for round in 0..rounds() {
        traffic(2);
        run.pause_worker(round % CLIENTS, 2 * LEASE);
        traffic(2);
        run.pause_redis(LEASE * 4 / 5);
        traffic(2);
        run.pause_worker((round + 1) % CLIENTS, LEASE / 2);
    }
    traffic(2);
    let handovers = run.handovers;
    let (report, _) = run.finish();
    // The worker frozen for two leases held a lock; another worker took it meanwhile.
    assert!(
        handovers >= rounds(),
        "a lock held by a worker frozen for two leases did not pass on ({handovers} times):\n{report}"
    );
}

#[test]
fn kill_clients_holding_locks() {
    let mut run = Run::new("kill");
    for round in 0..rounds() {
        traffic(2);
        run.kill_worker(round % CLIENTS);
        traffic(3);
        run.kill_worker((round + 1) % CLIENTS);
    }
    traffic(3);
    let (report, _) = run.finish();
    assert!(report.faults >= 2 * rounds(), "{report}");
}

#[test]
fn restart_the_server() {
    let mut run = Run::new("restart");
    for _ in 0..rounds() {
        traffic(2);
        run.restart_redis(Duration::from_millis(300));
        traffic(3);
        run.restart_redis(LEASE);
    }
    traffic(3);
    let (report, _) = run.finish();
    assert_eq!(report.faults, 2 * rounds(), "{report}");
}

/// The negative control: the same restart on a server without persistence, which comes
/// back empty. Holders that were told "valid" overlap the next owners, tokens repeat and the
/// store takes old tokens again; the checker must say so.
#[test]
fn a_server_that_forgets_its_locks_is_caught() {
    let mut run = Run::with_persistence("forgetful", false);
    traffic(1);
    run.until_holding(0);
    run.restart_redis(Duration::from_millis(300));
    traffic(4);
    let (report, _) = run.judge();
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.contains("overlap") || v.contains("granted twice")),
        "the checker missed the forgotten locks:\n{report}"
    );
}

// ---- The checker itself, on made-up histories: each rule must catch what it is for. ----

fn grant(worker: u64, token: u64, l_call: u64, l_after: u64) -> Value {
    json!({"ev": "grant", "worker": worker, "task": 1, "lock": "nz-a", "token": token,
           "field": format!("c{worker}:{token}"), "l_call": l_call, "l_after": l_after})
}

fn release(worker: u64, token: u64, l: u64) -> Vec<Value> {
    vec![
        json!({"ev": "release_start", "worker": worker, "task": 1, "lock": "nz-a", "token": token, "l": l}),
        json!({"ev": "release", "worker": worker, "task": 1, "lock": "nz-a", "token": token, "l": l + 500, "result": "ok"}),
    ]
}

const MS: u64 = 1000;
const T0: u64 = 1_800_000_000_000_000;

#[test]
fn checker_passes_a_clean_history() {
    let mut events = vec![grant(1, 1, T0, T0 + MS)];
    events.extend(release(1, 1, T0 + 100 * MS));
    events.push(grant(2, 2, T0 + 50 * MS, T0 + 101 * MS));
    events.extend(release(2, 2, T0 + 200 * MS));
    let report = history::check("unit", &events, &[], &[], 1_500 * MS, &[]);
    assert!(report.violations.is_empty(), "{report}");
    assert_eq!(report.acquisitions, 2);
}

#[test]
fn checker_catches_a_forgetful_server() {
    // Worker 1 holds without releasing; worker 2 is granted 300 ms later, well inside the
    // 1.5 s lease: what a restart without persistence does.
    let events = vec![
        grant(1, 1, T0, T0 + MS),
        grant(2, 2, T0 + 300 * MS, T0 + 301 * MS),
    ];
    let report = history::check("unit", &events, &[], &[], 1_500 * MS, &[]);
    assert_eq!(report.violations.len(), 1, "{report}");
    assert!(report.violations[0].contains("overlap"), "{report}");
}

#[test]
fn checker_catches_a_stale_write() {
    let write = |worker: u64, token: u64, accepted: bool, t: u64, max: u64| {
        json!({"ev": "write", "worker": worker, "task": 1, "lock": "nz-a", "token": token,
               "accepted": accepted, "t": t, "max_before": max})
    };
    let events = vec![
        write(2, 5, true, T0, 4),
        write(1, 4, false, T0 + MS, 5),
        // The store said its highest was 3: a store that forgot token 5.
        write(1, 4, true, T0 + 2 * MS, 3),
    ];
    let report = history::check("unit", &events, &[], &[], 1_500 * MS, &[]);
    assert_eq!(report.writes_refused, 1);
    assert_eq!(report.violations.len(), 1, "{report}");
    assert!(report.violations[0].contains("after token 5"), "{report}");
}

/// Monitor samples: worker 1's hold of token 1 (field `c1:1`) seen at T0 + 10 ms with
/// 1490 ms to live, gone 20 ms later: its key expired at T0 + 1501 ms (PTTL rounding).
fn expiring_at_t0_plus_1501_ms() -> Vec<Sample> {
    let sample = |t: u64, fields: &[&str], pttl: i64| Sample {
        t,
        locks: [(
            "nz-a".to_string(),
            (pttl, fields.iter().map(|f| f.to_string()).collect()),
        )]
        .into_iter()
        .collect(),
    };
    vec![
        sample(T0 + 10 * MS, &["c1:1"], 1_490),
        sample(T0 + 30 * MS, &[], -2),
    ]
}

#[test]
fn checker_catches_a_late_lost_and_leftovers() {
    let samples = expiring_at_t0_plus_1501_ms();
    let mut events = vec![grant(1, 1, T0, T0 + MS)];
    events.push(
        json!({"ev": "lost", "worker": 1, "task": 1, "lock": "nz-a", "token": 1,
                       "l": T0 + 10 * MS + 1_490 * MS + 200 * MS}),
    );
    let keys = vec!["nz-a".to_string(), "redisson_lock_token:{nz-a}".to_string()];
    let report = history::check("unit", &events, &samples, &[], 1_500 * MS, &keys);
    assert_eq!(report.violations.len(), 2, "{report}");
    assert!(
        report.violations[0].contains("lost() fired late"),
        "{report}"
    );
    assert!(report.violations[1].contains("left in Redis"), "{report}");
    assert_eq!(report.lost_judged, 1);
}

#[test]
fn checker_excuses_a_late_lost_only_inside_a_stall() {
    let samples = expiring_at_t0_plus_1501_ms();
    let expiry = T0 + 1_501 * MS;
    let lost = json!({"ev": "lost", "worker": 1, "task": 1, "lock": "nz-a", "token": 1,
                      "l": expiry + 200 * MS});
    let stall = |from: u64, to: u64| json!({"ev": "stall", "worker": 1, "task": 0, "l_from": from, "l_to": to, "late_ms": 150});
    // A stall of this worker between the expiry and the lost(): excused.
    let events = vec![
        grant(1, 1, T0, T0 + MS),
        lost.clone(),
        stall(expiry + 20 * MS, expiry + 180 * MS),
    ];
    let report = history::check("unit", &events, &samples, &[], 1_500 * MS, &[]);
    assert!(report.violations.is_empty(), "{report}");
    assert_eq!((report.lost_excused, report.stalls), (1, 1));
    // A stall elsewhere in time excuses nothing.
    let events = vec![
        grant(1, 1, T0, T0 + MS),
        lost,
        stall(T0 + 100 * MS, T0 + 250 * MS),
    ];
    let report = history::check("unit", &events, &samples, &[], 1_500 * MS, &[]);
    assert_eq!(report.violations.len(), 1, "{report}");
}

#[test]
fn checker_rejects_a_worker_clock_that_is_not_the_server_clock() {
    let mut event = grant(1, 1, T0, T0 + MS);
    event["t_after"] = json!({"t": T0 + 9 * MS, "l_send": T0 + MS, "l_recv": T0 + 2 * MS});
    let report = history::check("unit", &[event], &[], &[], 1_500 * MS, &[]);
    assert_eq!(report.violations.len(), 1, "{report}");
    assert!(report.violations[0].contains("clock"), "{report}");
}
