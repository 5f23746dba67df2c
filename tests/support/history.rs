//! The nemesis suite's checker: reads the JSON-line histories that `examples/lock_worker/main.rs`
//! writes, the lock-key samples the test's monitor took, and the faults the test injected,
//! and judges the run.
//!
//! # Time
//!
//! Every time here is microseconds on the Redis server's clock (`TIME`). All processes of
//! a run (workers, redis-server, the test) share one kernel: network namespaces do not
//! virtualise `CLOCK_REALTIME`, so a worker's wall clock *is* the Redis clock. The checker
//! does not take that on trust: every `TIME` a worker read comes with the worker's wall
//! clock just before sending and just after the reply, and [`check`] fails unless
//! `l_send <= TIME <= l_recv` (with [`CLOCK_TOLERANCE_US`]) for every one of them. Given
//! that, a worker's wall-clock reading taken before (after) an operation is a lower
//! (upper) bound of the Redis time at which the operation ran, even while Redis was cut
//! off; that is what lets a partitioned worker's `lost()` be placed in Redis time.
//!
//! The grant itself is not timed inside the acquire script (that would change library
//! code): the worker reads its clock right before calling acquire (`l_call`) and right
//! after it returns (`l_after`), so the grant ran in Redis at some `g` with
//! `l_call <= g <= l_after`.
//!
//! # What is judged, and why it is sound
//!
//! - **Overlap.** A hold is valid from its grant `g` until `min(release, V)`, where `V` is
//!   the send time of its last confirmed renewal (or of the acquire) plus the lease: that
//!   is how long the holder may believe it holds. The checker gives each hold a span it
//!   surely covered: from `l_after` (an upper bound of `g`) to a *lower* bound of its end,
//!   `min(release_start, max(l_call + lease, check))`. The unlock is sent after
//!   `release_start`; the acquire was sent after `l_call`, so `V >= l_call + lease`; and
//!   `check`, the last time the worker saw `is_lost()` false before a write, is before `V`
//!   because `is_lost()` turns at `V` (a look right after a freeze or stall may precede the
//!   library's own timer, so `check` is not used for a worker that was frozen or stalled
//!   during the hold). Two holds of one lock whose spans intersect overlapped for certain:
//!   a violation. This cannot flag a correct run, and needs no token order; it catches a
//!   server that forgot a lock (a restart without persistence:
//!   `a_server_that_forgets_its_locks_is_caught`), a lock freed under its holder, or a
//!   holder told "valid" after its key expired. A token drawn twice is a violation too.
//! - **Fencing.** Every store write ran inside a script that read `TIME`; sorted by that
//!   time, no accepted write may carry a token below one accepted earlier.
//! - **lost() late.** For a hold that ended by `lost()`, the monitor's last sample that still
//!   showed the hold's field (at Redis time `T`, PTTL `p`) and the next sample (at `T'`)
//!   fix the key's expiry: when `T' - T` is shorter than the lease no renewal can have run
//!   in between unseen (it would have kept the field past `T'`), so the key expired at
//!   `T + p` (+1 ms for PTTL's rounding). `lost()` must fire no later than that plus
//!   [`LOST_SLACK_US`]. A longer gap is judged only when a server outage the test caused
//!   (pause, restart) starts inside it: a renewal can then only have run unseen before the
//!   outage's start `o`, so the expiry is at most `min(T', max(T + p, o + lease))`. Holds
//!   the monitor never saw, or saw with another gap, are counted as not judged. A worker
//!   that was frozen (the test's SIGSTOP) or not scheduled (its own heartbeat logged a
//!   `stall`: a 10 ms timer more than 25 ms late) between the expiry and the moment it
//!   learnt of the loss cannot have run its timer, so that hold is counted as excused,
//!   not passed. A hold whose unlock found it gone without
//!   `lost()` having fired is judged the same way at the time of the unlock.
//! - **Leftovers.** After the run no key may remain but the stores and the token counters.
#![allow(dead_code)]

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// Allowed disagreement between a worker's clock and Redis `TIME` (both are one clock).
pub const CLOCK_TOLERANCE_US: i64 = 1_000;
/// Scheduling slack for `lost()` after the key's expiry.
pub const LOST_SLACK_US: i64 = 50_000;

/// One sample of the lock keys, taken by the test's monitor in one script.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Redis `TIME` inside the sampling script.
    pub t: u64,
    /// Per lock name: (PTTL in ms, the hash's fields).
    pub locks: BTreeMap<String, (i64, Vec<String>)>,
}

/// A fault the test injected, with its wall-clock (= Redis clock) interval.
#[derive(Debug, Clone)]
pub struct Fault {
    /// e.g. `partition`, `pause-worker`, `pause-redis`, `kill-worker`, `restart-redis`.
    pub kind: String,
    /// The worker it hit (`None`: the server).
    pub worker: Option<u64>,
    pub start: u64,
    pub end: u64,
}

#[derive(Debug, Clone, Default)]
struct Hold {
    worker: u64,
    task: u64,
    lock: String,
    field: String,
    token: u64,
    l_call: u64,
    l_after: u64,
    /// The last time the worker saw `is_lost()` false before a write.
    last_check: Option<u64>,
    release_start: Option<u64>,
    release_result: Option<String>,
    was_lost_at_release: bool,
    lost: Option<u64>,
    /// A Redisson worker's hold: Redisson cannot tell a holder its lock is gone, so the
    /// hold is judged by Redis time only (never for a late `lost()`).
    redisson: bool,
    /// The hold's fixed lease (`lease_ms` of its grant); `None`: the watchdog lease.
    fixed_lease_us: Option<u64>,
}

#[derive(Debug, Clone)]
struct Write {
    worker: u64,
    lock: String,
    token: u64,
    accepted: bool,
    t: u64,
    max_before: u64,
}

/// What the checker found; [`Report::violations`] must be empty for a correct run.
#[derive(Debug, Default)]
pub struct Report {
    pub scenario: String,
    pub acquisitions: usize,
    pub releases: usize,
    pub lost: usize,
    /// Holds whose unlock found the lock gone before `lost()` had fired.
    pub gone_at_unlock: usize,
    /// Unlocks that did not reach Redis (the lock then runs out its lease).
    pub unlock_unavailable: usize,
    pub faults: usize,
    pub writes_accepted: usize,
    pub writes_refused: usize,
    pub writes_failed: usize,
    pub lost_judged: usize,
    pub lost_not_judged: usize,
    pub lost_excused: usize,
    /// Stalls the workers logged (their heartbeat fired more than 25 ms late).
    pub stalls: usize,
    /// Latest `lost()` relative to the key's expiry among judged holds, in ms (negative:
    /// before the expiry).
    pub lost_latest_vs_expiry_ms: Option<f64>,
    pub clock_stamps: usize,
    pub violations: Vec<String>,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "nemesis[{}]: acquisitions={} releases={} lost={} gone_at_unlock={} unlock_unavailable={} faults={} writes_accepted={} \
             refused_stale_writes={} writes_failed={} lost_judged={} lost_not_judged={} \
             lost_excused={} stalls={} lost_latest_vs_expiry_ms={} clock_stamps={} violations={}",
            self.scenario,
            self.acquisitions,
            self.releases,
            self.lost,
            self.gone_at_unlock,
            self.unlock_unavailable,
            self.faults,
            self.writes_accepted,
            self.writes_refused,
            self.writes_failed,
            self.lost_judged,
            self.lost_not_judged,
            self.lost_excused,
            self.stalls,
            self.lost_latest_vs_expiry_ms
                .map_or("-".to_string(), |ms| format!("{ms:.1}")),
            self.clock_stamps,
            self.violations.len()
        )?;
        for v in &self.violations {
            write!(f, "\n  VIOLATION: {v}")?;
        }
        Ok(())
    }
}

/// Reads one worker's history; a torn last line (SIGKILL mid-write) is skipped.
pub fn read_history(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("read history {}: {e}", path.display()));
    text.lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

fn u(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

fn s(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Judges one run. `keys_left` is the server's key list after the run.
pub fn check(
    scenario: &str,
    events: &[Value],
    samples: &[Sample],
    faults: &[Fault],
    lease_us: u64,
    keys_left: &[String],
) -> Report {
    let mut report = Report {
        scenario: scenario.to_string(),
        faults: faults.len(),
        ..Report::default()
    };
    // Keyed by (lock, token, worker, task): one entry per hold even if a token repeats.
    let mut holds: Holds = BTreeMap::new();
    let mut writes = Vec::new();
    // Workers that run Redisson (`start` says `impl: redisson-<version>`).
    let redisson: std::collections::BTreeSet<u64> = events
        .iter()
        .filter(|e| e["ev"] == "start" && s(e, "impl").starts_with("redisson-"))
        .filter_map(|e| u(e, "worker"))
        .collect();
    // Stretches in which a worker was not scheduled: its own stalls and the test's SIGSTOPs.
    let mut stalls: Vec<Fault> = faults
        .iter()
        .filter(|f| f.kind == "pause-worker")
        .cloned()
        .collect();
    for e in events {
        check_stamps(e, &mut report);
        let ev = s(e, "ev");
        let (lock, token) = (s(e, "lock"), u(e, "token").unwrap_or(0));
        let worker = u(e, "worker").unwrap_or(0);
        let task = u(e, "task").unwrap_or(0);
        let key = (lock.clone(), token, worker, task);
        match ev.as_str() {
            "grant" => {
                report.acquisitions += 1;
                holds.insert(
                    key,
                    Hold {
                        worker,
                        task,
                        lock: lock.clone(),
                        field: s(e, "field"),
                        token,
                        l_call: u(e, "l_call").unwrap_or(0),
                        l_after: u(e, "l_after").unwrap_or(0),
                        redisson: redisson.contains(&worker),
                        fixed_lease_us: u(e, "lease_ms").map(|ms| ms * 1000),
                        ..Hold::default()
                    },
                );
            }
            "release_start" | "release" | "lost" => {
                let Some(hold) = holds.get_mut(&key) else {
                    report
                        .violations
                        .push(format!("{ev} of {lock} token {token} without its grant"));
                    continue;
                };
                match ev.as_str() {
                    "release_start" => {
                        hold.release_start = u(e, "l");
                        hold.was_lost_at_release =
                            e.get("was_lost").and_then(Value::as_bool).unwrap_or(false);
                    }
                    "release" => {
                        hold.release_result = Some(s(e, "result"));
                        match s(e, "result").as_str() {
                            "ok" => report.releases += 1,
                            "unavailable" => report.unlock_unavailable += 1,
                            _ => {}
                        }
                    }
                    _ => {
                        hold.lost = u(e, "l");
                        report.lost += 1;
                    }
                }
            }
            "stall" => stalls.push(Fault {
                kind: "stall".into(),
                worker: Some(worker),
                start: u(e, "l_from").unwrap_or(0),
                end: u(e, "l_to").unwrap_or(0),
            }),
            "write" | "write_failed" => {
                if let Some(hold) = holds.get_mut(&key) {
                    hold.last_check = hold.last_check.max(u(e, "l_check"));
                }
                record_write(e, &ev, worker, &lock, token, &mut writes, &mut report);
            }
            _ => {}
        }
    }
    report.stalls = stalls.iter().filter(|f| f.kind == "stall").count();
    finish_checks(
        holds, writes, samples, &stalls, faults, lease_us, keys_left, report,
    )
}

fn record_write(
    e: &Value,
    ev: &str,
    worker: u64,
    lock: &str,
    token: u64,
    writes: &mut Vec<Write>,
    report: &mut Report,
) {
    match ev {
        "write" => {
            let accepted = e.get("accepted").and_then(Value::as_bool).unwrap_or(false);
            if accepted {
                report.writes_accepted += 1;
            } else {
                report.writes_refused += 1;
            }
            writes.push(Write {
                worker,
                lock: lock.to_string(),
                token,
                accepted,
                t: u(e, "t").unwrap_or(0),
                max_before: u(e, "max_before").unwrap_or(0),
            });
        }
        _ => report.writes_failed += 1,
    }
}

#[allow(clippy::too_many_arguments)]
fn finish_checks(
    holds: Holds,
    mut writes: Vec<Write>,
    samples: &[Sample],
    stalls: &[Fault],
    faults: &[Fault],
    lease_us: u64,
    keys_left: &[String],
    mut report: Report,
) -> Report {
    check_overlaps(&holds, stalls, lease_us, &mut report);
    check_fencing(&mut writes, &mut report);
    check_lost(&holds, samples, stalls, faults, lease_us, &mut report);
    for key in keys_left {
        if !key.starts_with("nemesis:store:") && !key.starts_with("redisson_lock_token:") {
            report
                .violations
                .push(format!("key `{key}` left in Redis after the run"));
        }
    }
    report
}

/// Every Redis `TIME` must lie between the worker's clock readings around it.
fn check_stamps(e: &Value, report: &mut Report) {
    let Value::Object(map) = e else { return };
    for stamp in map.values() {
        let (Some(t), Some(l_send), Some(l_recv)) =
            (u(stamp, "t"), u(stamp, "l_send"), u(stamp, "l_recv"))
        else {
            continue;
        };
        report.clock_stamps += 1;
        let (t, l_send, l_recv) = (t as i64, l_send as i64, l_recv as i64);
        if t < l_send - CLOCK_TOLERANCE_US || t > l_recv + CLOCK_TOLERANCE_US {
            report.violations.push(format!(
                "clock: Redis TIME {t} outside the worker's [{l_send}, {l_recv}]: the \
                 worker's clock cannot stand in for Redis time"
            ));
        }
    }
}

type Holds = BTreeMap<(String, u64, u64, u64), Hold>;

fn check_overlaps(holds: &Holds, stalls: &[Fault], lease_us: u64, r: &mut Report) {
    // Per lock: each hold's surely-held span [l_after, end_lb] (see the module doc).
    let mut by_lock: BTreeMap<&str, Vec<(u64, u64, &Hold)>> = BTreeMap::new();
    for hold in holds.values() {
        // A look at is_lost() right after a stall may precede the library's own timer.
        let check = hold
            .last_check
            .filter(|&c| !stalled(stalls, hold.worker, hold.l_call, c));
        let lease = hold.fixed_lease_us.unwrap_or(lease_us);
        let valid_lb = (hold.l_call + lease).max(check.unwrap_or(0));
        let end_lb = hold.release_start.map_or(valid_lb, |rs| rs.min(valid_lb));
        by_lock
            .entry(hold.lock.as_str())
            .or_default()
            .push((hold.l_after, end_lb, hold));
    }
    for (lock, mut spans) in by_lock {
        let mut tokens: BTreeMap<u64, u64> = BTreeMap::new();
        for (_, _, hold) in &spans {
            if let Some(first) = tokens.insert(hold.token, hold.worker) {
                r.violations.push(format!(
                    "{lock}: token {} granted twice (workers {first} and {})",
                    hold.token, hold.worker
                ));
            }
        }
        // Sweep in grant order, keeping the span that reaches furthest.
        spans.sort_by_key(|&(start, _, _)| start);
        let mut furthest: Option<(u64, &Hold)> = None;
        for &(start, end, b) in &spans {
            if let Some((a_end, a)) = furthest {
                let both_until = a_end.min(end);
                if start < both_until {
                    r.violations.push(format!(
                        "{lock}: hold token {} (worker {}) was valid until at least {a_end} but \
                         token {} (worker {}) was granted by {start} ({:.1} ms of overlap)",
                        a.token,
                        a.worker,
                        b.token,
                        b.worker,
                        (both_until - start) as f64 / 1000.0
                    ));
                }
            }
            if furthest.is_none_or(|(a_end, _)| end > a_end) {
                furthest = Some((end, b));
            }
        }
    }
}

fn check_fencing(writes: &mut [Write], r: &mut Report) {
    writes.sort_by_key(|w| w.t);
    let mut highest: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for w in writes.iter() {
        if w.accepted && w.token < w.max_before {
            r.violations.push(format!(
                "{}: store accepted token {} while its highest was {}",
                w.lock, w.token, w.max_before
            ));
        }
        if !w.accepted && w.token >= w.max_before {
            r.violations.push(format!(
                "{}: store refused token {} though its highest was only {}",
                w.lock, w.token, w.max_before
            ));
        }
        let entry = highest.entry(w.lock.as_str()).or_insert((0, 0));
        if w.accepted {
            if w.token < entry.0 && entry.1 < w.t {
                r.violations.push(format!(
                    "{}: write under token {} (worker {}) accepted at {} after token {} was \
                     accepted at {}",
                    w.lock, w.token, w.worker, w.t, entry.0, entry.1
                ));
            }
            if w.token >= entry.0 {
                *entry = (w.token, w.t);
            }
        }
    }
}

fn check_lost(
    holds: &Holds,
    samples: &[Sample],
    stalls: &[Fault],
    faults: &[Fault],
    lease_us: u64,
    r: &mut Report,
) {
    for hold in holds.values().filter(|h| !h.redisson) {
        // When the holder learnt of the loss: lost(), or an unlock that found it gone.
        let learnt = match (hold.lost, &hold.release_result) {
            (Some(l), _) => l,
            (None, Some(result)) if result == "not_owner" && !hold.was_lost_at_release => {
                r.gone_at_unlock += 1;
                match hold.release_start {
                    Some(l) => l,
                    None => continue,
                }
            }
            _ => continue,
        };
        let Some(expiry) = expiry_of(hold, samples, faults, lease_us) else {
            r.lost_not_judged += 1;
            continue;
        };
        let late = learnt as i64 - expiry as i64;
        if late > LOST_SLACK_US {
            // A process that was frozen or not scheduled when its deadline came cannot keep
            // it; the stall itself is in the history (the test's SIGSTOP, or the worker's
            // own heartbeat).
            if stalled(stalls, hold.worker, expiry, learnt) {
                r.lost_excused += 1;
                continue;
            }
            r.violations.push(format!(
                "{}: token {} (worker {}) learnt of the loss {:.1} ms after the key expired \
                 ({}; slack {} ms)",
                hold.lock,
                hold.token,
                hold.worker,
                late as f64 / 1000.0,
                if hold.lost.is_some() {
                    "lost() fired late"
                } else {
                    "lost() had not fired when the unlock found the lock gone"
                },
                LOST_SLACK_US / 1000
            ));
        }
        r.lost_judged += 1;
        let ms = late as f64 / 1000.0;
        r.lost_latest_vs_expiry_ms = Some(r.lost_latest_vs_expiry_ms.map_or(ms, |m| m.max(ms)));
    }
}

/// Whether `worker` was frozen or not scheduled at some moment in `[from, to]`.
fn stalled(stalls: &[Fault], worker: u64, from: u64, to: u64) -> bool {
    stalls
        .iter()
        .any(|s| s.worker == Some(worker) && s.start <= to && s.end >= from)
}

/// The latest the key of `hold` can have expired, from the monitor's samples (see the
/// module doc), if the samples pin it down.
fn expiry_of(hold: &Hold, samples: &[Sample], faults: &[Fault], lease_us: u64) -> Option<u64> {
    let shows = |s: &Sample| {
        s.locks
            .get(&hold.lock)
            .is_some_and(|(_, fields)| fields.contains(&hold.field))
    };
    let last = samples.iter().rposition(shows)?;
    let next = samples.get(last + 1)?;
    let seen = &samples[last];
    let pttl = seen.locks.get(&hold.lock)?.0;
    if pttl < 0 {
        return None;
    }
    let scheduled = seen.t + pttl as u64 * 1000 + 1000;
    if next.t.saturating_sub(seen.t) < lease_us {
        return Some(scheduled);
    }
    // A long gap between samples: the server was out (paused, or down for a restart). A
    // renewal it ran unseen before going out, at the latest at the outage's start, would
    // move the expiry to at most that start + lease; one it ran after coming back would
    // have kept the field in the next sample. The field is gone at `next` in any case.
    let outage = faults
        .iter()
        .find(|f| f.worker.is_none() && f.start >= seen.t && f.start <= next.t)?;
    Some(next.t.min(scheduled.max(outage.start + lease_us + 1000)))
}
