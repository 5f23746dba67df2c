//! The nemesis suite's checker: reads the JSON-line histories that `examples/lock_worker.rs`
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
//!   is how long the holder may believe it holds. Fencing tokens order the grants of one
//!   lock, so only neighbours need comparing. For neighbours `a`, `b` (by token) the checker
//!   uses a *lower* bound of `a`'s end, `min(release_start_a, l_call_a + lease)` (the unlock
//!   is sent after `release_start`, and the acquire was sent after `l_call`, so
//!   `V_a >= l_call_a + lease`), and an *upper* bound of `b`'s grant, `l_after_b`. If the
//!   first exceeds the second, the two holds overlapped for certain: a violation. (It
//!   cannot flag a correct run; it catches a server that forgot a lock, e.g. a restart
//!   without persistence, or a lock freed under its holder.)
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
//!   frozen by SIGSTOP cannot run its timer, so its late `lost()` is counted as excused
//!   when the freeze overlaps the window. A hold whose unlock found it gone without
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
    release_start: Option<u64>,
    release_result: Option<String>,
    was_lost_at_release: bool,
    lost: Option<u64>,
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
             lost_excused={} lost_latest_vs_expiry_ms={} clock_stamps={} violations={}",
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
    let mut holds: BTreeMap<(String, u64, u64, u64), Hold> = BTreeMap::new();
    let mut writes = Vec::new();
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
            "write" => {
                let accepted = e.get("accepted").and_then(Value::as_bool).unwrap_or(false);
                if accepted {
                    report.writes_accepted += 1;
                } else {
                    report.writes_refused += 1;
                }
                writes.push(Write {
                    worker,
                    lock,
                    token,
                    accepted,
                    t: u(e, "t").unwrap_or(0),
                    max_before: u(e, "max_before").unwrap_or(0),
                });
            }
            "write_failed" => report.writes_failed += 1,
            _ => {}
        }
    }
    check_overlaps(&holds, lease_us, &mut report);
    check_fencing(&mut writes, &mut report);
    check_lost(&holds, samples, faults, lease_us, &mut report);
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

fn check_overlaps(holds: &Holds, lease_us: u64, r: &mut Report) {
    // The map is ordered by (lock, token): each lock's holds in grant order.
    let mut by_lock: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for hold in holds.values() {
        by_lock.entry(hold.lock.as_str()).or_default().push(hold);
    }
    for (lock, list) in by_lock {
        for pair in list.windows(2) {
            if pair[0].token == pair[1].token {
                r.violations.push(format!(
                    "{lock}: token {} granted twice (workers {} and {})",
                    pair[0].token, pair[0].worker, pair[1].worker
                ));
            }
            let (a, b) = (pair[0], pair[1]);
            let valid_lb = a.l_call + lease_us;
            let end_lb = a.release_start.map_or(valid_lb, |rs| rs.min(valid_lb));
            if end_lb > b.l_after {
                r.violations.push(format!(
                    "{lock}: hold token {} (worker {}) was valid until at least {end_lb} but \
                     token {} (worker {}) was granted by {} ({:.1} ms of overlap)",
                    a.token,
                    a.worker,
                    b.token,
                    b.worker,
                    b.l_after,
                    (end_lb - b.l_after) as f64 / 1000.0
                ));
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

fn check_lost(holds: &Holds, samples: &[Sample], faults: &[Fault], lease_us: u64, r: &mut Report) {
    for hold in holds.values() {
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
            let frozen = faults.iter().any(|f| {
                f.kind == "pause-worker"
                    && f.worker == Some(hold.worker)
                    && f.start < learnt
                    && f.end + LOST_SLACK_US as u64 > expiry.saturating_sub(lease_us)
            });
            if frozen {
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
