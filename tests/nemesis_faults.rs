//! More nemesis faults (harness: `tests/support/nemesis.rs`, `tests/support/faults.rs`,
//! `tests/support/impair.rs`), each judged by the history checker like `tests/nemesis.rs`
//! and by direct looks at Redis:
//!
//! - a worker that exits normally (closes its client and returns from `main`) in the middle
//!   of holds and waits must leave nothing behind, and its locks pass on at once;
//! - a slow and lossy link (delay, jitter, loss) on one worker's veth for a while;
//! - a burst of 10,000 acquires started and cancelled while the worker is cut off.
//!
//! Side names (`nemesis-x-*`): a fair lock the test holds (so the worker's fair waiters
//! queue), a plain and a permit-expirable semaphore with 3 permits, a read-write lock.
//! Each scenario prints one report line and asserts minimum counts of what it judged.

mod support;

use serde_json::Value;
use std::thread;
use std::time::Duration;
use support::faults::{self, side, SIDE_PERMITS};
use support::history::read_history;
use support::impair::{self, Spec};
use support::nemesis::{now_us, rounds, Run, LEASE, LOCKS};

fn traffic(secs: u64) {
    thread::sleep(Duration::from_secs(secs));
}

/// The side names as the scenarios start them: a fair lock and (optionally) a write lock
/// held by the test, both semaphores at [`SIDE_PERMITS`].
fn set_up_side(run: &Run, hold_rw: bool) {
    let mut conn = run.admin();
    faults::clear_side(&mut conn);
    let mut pipe = redis::pipe();
    pipe.cmd("HSET").arg(side("fair")).arg("nemesis-test:1").arg(1);
    pipe.cmd("PEXPIRE").arg(side("fair")).arg(600_000);
    pipe.cmd("SET").arg(side("sem")).arg(SIDE_PERMITS);
    pipe.cmd("SET").arg(side("xsem")).arg(SIDE_PERMITS);
    if hold_rw {
        pipe.cmd("HSET")
            .arg(side("rw"))
            .arg("mode")
            .arg("write")
            .arg("nemesis-test:1:write")
            .arg(1);
        pipe.cmd("PEXPIRE").arg(side("rw")).arg(600_000);
    }
    let _: () = pipe.query(&mut conn).expect("set up the side names");
}

/// Grants to workers other than `worker` of `lock` after `after` (local clocks): the
/// earliest `l_after`.
fn next_grant_by_others(events: &[Value], worker: u64, lock: &str, after: u64) -> Option<u64> {
    events
        .iter()
        .filter(|e| e["ev"] == "grant" && e["worker"].as_u64() != Some(worker))
        .filter(|e| e["lock"] == lock)
        .filter_map(|e| e["l_after"].as_u64())
        .filter(|&t| t > after)
        .min()
}

#[test]
fn a_client_that_exits_mid_hold_and_mid_wait_leaves_nothing() {
    let mut run = Run::new("exit");
    let exits = 3 * rounds();
    let mut done = Vec::new();
    let mut locks_handed_on = Vec::new();
    for i in 0..exits {
        let slot = i % 3;
        traffic(2);
        set_up_side(&run, false);
        let client = support::nemesis::client_id(&run.worker(slot).history).expect("client");
        let bare = client.trim_end_matches(':').to_string();
        // Side holds and waits, seen in Redis before the exit.
        let asked = now_us();
        run.send(slot, "extras");
        let extras = run.wait_event(slot, "extras", asked);
        assert_eq!(extras["holds"], 3, "side holds not all granted: {extras}");
        let mut conn = run.admin();
        run.wait_for("the worker's fair waiter in the side lock's queue", || {
            let queue: Vec<String> = redis::cmd("LRANGE")
                .arg(format!("redisson_lock_queue:{{{}}}", side("fair")))
                .arg(0)
                .arg(-1)
                .query(&mut conn)
                .unwrap_or_default();
            queue.iter().any(|q| q.starts_with(&client))
        });
        let sem: i64 = redis::cmd("GET").arg(side("sem")).query(&mut conn).unwrap();
        assert_eq!(sem, SIDE_PERMITS - 1, "the side permit is not taken");
        let before = faults::client_leftovers(&mut conn, &client);
        assert!(
            before.iter().any(|l| l.contains(&side("rw"))),
            "the side read hold is not in Redis: {before:?}"
        );
        // And a hold of one of the run's locks.
        run.until_holding(slot);
        let exited = run.exit_worker(slot);
        assert!(
            exited.leftovers.is_empty(),
            "worker {} (client {bare}) left after its exit: {:#?}",
            exited.worker,
            exited.leftovers
        );
        let history = read_history(&run.workers.iter().find(|w| w.id == exited.worker).unwrap().history);
        let held: Vec<String> = history
            .iter()
            .filter(|e| e["ev"] == "release_start" && e["exit"] == true)
            .filter_map(|e| e["lock"].as_str().map(str::to_string))
            .collect();
        locks_handed_on.push((exited.worker, exited.sent_at, held));
        done.push(exited);
    }
    // Every lock the exits dropped goes to another worker well before a lease would end.
    traffic(2);
    let mut events = Vec::new();
    for w in &run.workers {
        events.extend(read_history(&w.history));
    }
    let mut handover_ms = Vec::new();
    for (worker, sent, held) in &locks_handed_on {
        for lock in held {
            let next = next_grant_by_others(&events, *worker, lock, *sent)
                .unwrap_or_else(|| panic!("{lock} never went to another worker after worker {worker} exited"));
            handover_ms.push((next - sent) / 1000);
        }
    }
    let mut conn = run.admin();
    faults::clear_side(&mut conn);
    let (report, _) = run.finish();
    let holding: u64 = done.iter().map(|d| d.event["holding"].as_u64().unwrap_or(0)).sum();
    let waiting: u64 = done.iter().map(|d| d.event["waiting"].as_u64().unwrap_or(0)).sum();
    let side_waits: u64 = done.iter().map(|d| d.event["side_waits"].as_u64().unwrap_or(0)).sum();
    let exit_ms: Vec<u128> = done.iter().map(|d| d.took.as_millis()).collect();
    let worst = handover_ms.iter().copied().max().unwrap_or(0);
    println!(
        "nemesis-faults[exit]: exits={} clean_right_after={} holds_dropped={holding} \
         waits_dropped={waiting} side_waits_dropped={side_waits} locks_handed_on={} \
         worst_handover_ms={worst} exit_ms={exit_ms:?} acquisitions={} violations={}",
        done.len(),
        done.iter().filter(|d| d.leftovers.is_empty()).count(),
        handover_ms.len(),
        report.acquisitions,
        report.violations.len()
    );
    assert_eq!(done.len(), exits);
    assert!(holding >= exits as u64, "the exits dropped too few holds: {holding}");
    assert!(side_waits >= 4 * exits as u64);
    assert!(!handover_ms.is_empty(), "no exit dropped a hold of the run's locks");
    assert!(
        worst < (LEASE.as_millis() / 2) as u64,
        "a lock dropped by an exit went on only after {worst} ms (lease {LEASE:?})"
    );
}
