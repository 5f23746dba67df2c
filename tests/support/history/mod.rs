//! The nemesis suite's checker: reads the JSON-line histories the workers write
//! (`examples/lock_worker`, or Redisson workers in the same schema), the lock-key samples the
//! test's monitor took, and the faults the test injected, and judges the run.
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
//! Every hold gets a span it *surely* covered ([`Hold::span`]): from `l_after` (an upper
//! bound of its grant) to a *lower* bound of its end. A hold is valid until
//! `min(release, V)`, where `V` is the send time of its last confirmed renewal (or of the
//! acquire) plus the lease, less the library's clock-drift allowance (1 % of the lease +
//! 2 ms: `is_lost()` turns there, and a hold lost unconfirmed is taken out of Redis then).
//! The unlock is sent after `release_start`; the acquire was sent after `l_call`, so
//! `V >= l_call + lease - drift` (the hold's fixed lease, or the watchdog lease;
//! a re-entry never cuts the key's TTL, so nested holds only lengthen it); and `check`, the
//! last time the worker saw `is_lost()` false before a write, is before `V` because
//! `is_lost()` turns at `V` (a look right after a freeze or stall may precede the library's
//! own timer, so `check` is not used for a worker that was frozen or stalled during the
//! hold). Plain semaphore permits have no lease: their span ends at `release_start`, and a
//! permit never released (its holder was killed) stays out for the rest of the run, as
//! Redisson's `RSemaphore` keeps it. Two spans that intersect existed at the same time for
//! certain. The rules:
//!
//! - **Exclusive** ([`spans`]): at most one holder at a time per lock for the reentrant,
//!   fast, fenced, fair and write kinds; a fencing token drawn twice is a violation too.
//! - **Read/write** ([`spans`]): no reader of a read-write lock overlaps one of its writers.
//! - **Permits** ([`spans`]): never more than N permits of a semaphore out at once.
//! - **Fencing** ([`fencing`]): tokens strictly increase per lock in grant order (a grant
//!   that surely came after another has the higher token), no stale write was accepted by
//!   the store (every write ran inside a script that read `TIME`), and no worker claimed a
//!   hold valid (`l_check`) after its own `lost()` had fired.
//! - **Fair order** ([`fair`]): grants in queue order among waiters that stayed; a waiter
//!   loses its place only once the place's deadline has passed (Redisson's rule).
//! - **lost() late** ([`lost`]): `lost()` no later than the key's expiry + [`LOST_SLACK_US`].
//! - **Leftovers** ([`leftovers`]): after the run nothing remains but the stores, the token
//!   counters and the semaphores' permit counts, whose values must account for every permit.
//!
//! None of these can flag a correct run (each compares lower bounds of how long something
//! surely lasted with upper bounds of when something else surely started); they catch a
//! server that forgot a lock (`a_server_that_forgets_its_locks_is_caught`), a lock freed
//! under its holder, a holder told "valid" after its key expired, and a worker that breaks
//! the rules on purpose (`--broken`).
#![allow(dead_code, unused_imports)]

mod fair;
mod fencing;
mod leftovers;
mod lost;
mod report;
mod spans;

pub use leftovers::allowed as allowed_leftover;
pub use report::{Minimums, Report, TABLE_HEADER};

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Allowed disagreement between a worker's clock and Redis `TIME` (both are one clock).
pub const CLOCK_TOLERANCE_US: i64 = 1_000;
/// Scheduling slack for `lost()` after the key's expiry.
pub const LOST_SLACK_US: i64 = 50_000;
/// The shortest fixed lease a worker takes: a key extension (renewal or re-entry) between
/// two samples closer than this would still show at the second one.
pub const MIN_FIXED_LEASE_US: u64 = 300_000;

/// The lock kinds, as the histories name them.
pub const KINDS: [&str; 8] = [
    "reentrant",
    "fast",
    "fenced",
    "fair",
    "read",
    "write",
    "semaphore",
    "expirable",
];

/// One sample of the lock keys, taken by the test's monitor in one script.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// Redis `TIME` inside the sampling script.
    pub t: u64,
    /// Per lock name: (PTTL of its key in ms, the holders Redis shows alive: hash fields but
    /// `mode`, the fast lock's value, a read-write lock's readers whose read-hold keys
    /// live, unexpired permit ids in hex).
    pub locks: BTreeMap<String, (i64, Vec<String>)>,
    /// Per lock name and holder: ms until that holder's own expiry (a reader's longest
    /// read-hold key; a permit's score minus now, negative once expired; otherwise the key's
    /// PTTL).
    pub ttls: BTreeMap<String, BTreeMap<String, i64>>,
    /// Fair lock queues (`redisson_lock_queue:{name}`), head first.
    pub queues: BTreeMap<String, Vec<String>>,
    /// Per fair lock and queued waiter: its deadline in `redisson_lock_timeout:{name}`, in
    /// ms on the Redis clock (absent when the sample did not read it).
    pub deadlines: BTreeMap<String, BTreeMap<String, i64>>,
    /// Semaphore permit counts (the string key `name`), where it exists.
    pub counts: BTreeMap<String, i64>,
}

impl Sample {
    /// The ms to live of `holder` of `lock` in this sample, if it is shown alive.
    fn alive(&self, lock: &str, holder: &str) -> Option<i64> {
        let (_, holders) = self.locks.get(lock)?;
        if !holders.iter().any(|h| h == holder) {
            return None;
        }
        let ttl = self.ttls.get(lock).and_then(|t| t.get(holder).copied());
        Some(ttl.unwrap_or(self.locks[lock].0))
    }

    /// The queue deadline of fair waiter `field` of `lock` in this sample (ms, Redis clock).
    fn deadline(&self, lock: &str, field: &str) -> Option<i64> {
        self.deadlines.get(lock)?.get(field).copied()
    }
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

/// One hold as the histories tell it.
#[derive(Debug, Clone, Default)]
pub struct Hold {
    worker: u64,
    task: u64,
    hold: u64,
    kind: String,
    lock: String,
    field: String,
    token: u64,
    /// The fixed lease (`None`: watchdog).
    lease_us: Option<u64>,
    /// The longest lease of the hold and its re-entries (watchdog ones count the watchdog's).
    max_lease_us: u64,
    /// N, for a semaphore.
    permits: Option<u64>,
    l_call: u64,
    l_after: u64,
    /// The last time the worker saw `is_lost()` false before a write.
    last_check: Option<u64>,
    release_start: Option<u64>,
    release_result: Option<String>,
    was_lost_at_release: bool,
    lost: Option<u64>,
    /// A Redisson worker's hold: Redisson cannot tell a holder its lock is gone, so the
    /// hold is judged by Redis time only (its span), never for a late `lost()`.
    redisson: bool,
}

impl Hold {
    fn exclusive(&self) -> bool {
        matches!(
            self.kind.as_str(),
            "reentrant" | "fast" | "fenced" | "fair" | "write"
        )
    }

    fn semaphore(&self) -> bool {
        matches!(self.kind.as_str(), "semaphore" | "expirable")
    }

    /// Whether the hold has a lease that runs out (all but plain permits).
    fn leased(&self) -> bool {
        self.kind != "semaphore"
    }

    /// The span the hold surely covered (see the module doc); `u64::MAX`: to the run's end.
    fn span(&self, stalls: &[Fault], watchdog_us: u64) -> (u64, u64) {
        if !self.leased() {
            return (self.l_after, self.release_start.unwrap_or(u64::MAX));
        }
        // A look at is_lost() right after a stall may precede the library's own timer.
        let check = self
            .last_check
            .filter(|&c| !stalled(stalls, self.worker, self.l_call, c));
        let lease = self.lease_us.unwrap_or(watchdog_us);
        // The library turns is_lost() (and takes the key out) a clock-drift allowance
        // before the lease's end: 1 % of the lease + 2 ms.
        let drift = lease / 100 + 2_000;
        let valid_lb = (self.l_call + lease - drift).max(check.unwrap_or(0));
        let end = self.release_start.map_or(valid_lb, |rs| rs.min(valid_lb));
        (self.l_after, end)
    }

    fn describe(&self) -> String {
        if self.token > 0 {
            format!(
                "{} token {} (worker {})",
                self.kind, self.token, self.worker
            )
        } else {
            format!("{} hold {} (worker {})", self.kind, self.hold, self.worker)
        }
    }
}

#[derive(Debug, Clone)]
pub struct Write {
    worker: u64,
    lock: String,
    token: u64,
    accepted: bool,
    t: u64,
    max_before: u64,
}

/// A `wait` or `acquire_failed`: which holder field waited, and whether it gave up.
#[derive(Debug, Clone, Default)]
pub struct Wait {
    worker: u64,
    lock: String,
    field: String,
    /// The kind waited for (`fenced` when the event does not say).
    kind: String,
    l: u64,
    /// When an `acquire_failed` returned (0 for a `wait`).
    l_after: u64,
    /// Set on `acquire_failed`: the error word (`timeout`, `unavailable`, …).
    error: Option<String>,
}

impl Wait {
    /// How many of this failed acquire's calls to Redis may have gone unanswered: the
    /// library tries again within the wait after a call that got no answer, and each such
    /// call may have run (for a plain semaphore: taken permits that only its settlement
    /// gives back). At most one per response timeout of the wait, plus the first.
    pub fn unanswered_calls(&self) -> u64 {
        let waited = self.l_after.saturating_sub(self.l);
        1 + waited / (super::nemesis::TIMEOUT_MS * 1000)
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

/// Identifies a hold across its events: (worker, task, hold number, lock). Events of the
/// first schema carry no hold number: their token stands in.
type HoldKey = (u64, u64, u64, String);
pub type Holds = BTreeMap<HoldKey, Hold>;

/// Everything the rules read, gathered from the events in one pass.
pub struct Run<'a> {
    holds: Holds,
    writes: Vec<Write>,
    waits: Vec<Wait>,
    /// Stretches in which a worker was not scheduled: its own stalls and the test's SIGSTOPs.
    stalls: Vec<Fault>,
    /// Stretches in which a worker could not act on Redis: stalls, freezes and cuts.
    hindered: Vec<Fault>,
    samples: &'a [Sample],
    faults: &'a [Fault],
    watchdog_us: u64,
    /// Workers whose `start` says `impl: redisson-<version>`.
    redisson: std::collections::BTreeSet<u64>,
    /// Workers that closed their client themselves (`stop` or `exit`), not killed.
    closed: std::collections::BTreeSet<u64>,
}

/// Judges one run. `keys_left` is the server's key list after the run; the last sample
/// should be taken after that list (the permit counts are read from it).
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
    let mut run = Run {
        holds: BTreeMap::new(),
        writes: Vec::new(),
        waits: Vec::new(),
        stalls: faults
            .iter()
            .filter(|f| f.kind == "pause-worker")
            .cloned()
            .collect(),
        hindered: Vec::new(),
        samples,
        faults,
        watchdog_us: lease_us,
        redisson: events
            .iter()
            .filter(|e| e["ev"] == "start" && s(e, "impl").starts_with("redisson-"))
            .filter_map(|e| u(e, "worker"))
            .collect(),
        closed: events
            .iter()
            .filter(|e| e["ev"] == "stop" || e["ev"] == "exit")
            .filter_map(|e| u(e, "worker"))
            .collect(),
    };
    for e in events {
        check_stamps(e, &mut report);
        read_event(e, &mut run, &mut report);
    }
    report.stalls = run.stalls.iter().filter(|f| f.kind == "stall").count();
    run.hindered = run.stalls.clone();
    run.hindered
        .extend(faults.iter().filter(|f| f.worker.is_some()).cloned());
    spans::check(&run, &mut report);
    fencing::check(&mut run, &mut report);
    lost::check(&run, &mut report);
    fair::check(&run, &mut report);
    leftovers::check(&run, keys_left, &mut report);
    report
}

fn read_event(e: &Value, run: &mut Run, report: &mut Report) {
    let ev = s(e, "ev");
    let (lock, token) = (s(e, "lock"), u(e, "token").unwrap_or(0));
    let worker = u(e, "worker").unwrap_or(0);
    let task = u(e, "task").unwrap_or(0);
    let key = (worker, task, u(e, "hold").unwrap_or(token), lock.clone());
    let kind = match s(e, "kind") {
        k if k.is_empty() => "fenced".to_string(),
        k => k,
    };
    match ev.as_str() {
        "grant" => {
            report.acquisitions += 1;
            *report.grants.entry(kind.clone()).or_default() += 1;
            let lease_us = u(e, "lease_ms").map(|ms| ms * 1000);
            run.holds.insert(
                key,
                Hold {
                    worker,
                    task,
                    hold: u(e, "hold").unwrap_or(token),
                    kind,
                    lock,
                    field: s(e, "field"),
                    token,
                    lease_us,
                    max_lease_us: lease_us.unwrap_or(run.watchdog_us),
                    permits: u(e, "permits"),
                    l_call: u(e, "l_call").unwrap_or(0),
                    l_after: u(e, "l_after").unwrap_or(0),
                    redisson: run.redisson.contains(&worker),
                    ..Hold::default()
                },
            );
        }
        "wait" | "acquire_failed" => run.waits.push(Wait {
            worker,
            lock,
            field: s(e, "field"),
            kind: e
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("fenced")
                .to_string(),
            l: u(e, "l").or(u(e, "l_call")).unwrap_or(0),
            l_after: u(e, "l_after").unwrap_or(0),
            error: (ev == "acquire_failed").then(|| s(e, "error")),
        }),
        "reenter" | "reexit" | "release_start" | "release" | "lost" => {
            let Some(hold) = run.holds.get_mut(&key) else {
                report
                    .violations
                    .push(format!("{ev} of {lock} token {token} without its grant"));
                return;
            };
            match ev.as_str() {
                "reenter" => {
                    report.reentries += 1;
                    let lease = u(e, "lease_ms").map_or(run.watchdog_us, |ms| ms * 1000);
                    hold.max_lease_us = hold.max_lease_us.max(lease);
                }
                "reexit" => {}
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
        "stall" => run.stalls.push(Fault {
            kind: "stall".into(),
            worker: Some(worker),
            start: u(e, "l_from").unwrap_or(0),
            end: u(e, "l_to").unwrap_or(0),
        }),
        "write" | "write_failed" => {
            if let Some(hold) = run.holds.get_mut(&key) {
                hold.last_check = hold.last_check.max(u(e, "l_check"));
            }
            fencing::record_write(e, &ev, worker, &lock, token, &mut run.writes, report);
        }
        _ => {}
    }
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

/// Whether `worker` was frozen or not scheduled (or, for `hindered`, cut off) at some
/// moment in `[from, to]`.
fn stalled(stalls: &[Fault], worker: u64, from: u64, to: u64) -> bool {
    stalls
        .iter()
        .any(|s| s.worker == Some(worker) && s.start <= to && s.end >= from)
}
