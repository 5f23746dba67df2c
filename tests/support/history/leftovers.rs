//! After the run nothing may remain but the fenced stores, the token counters and the
//! semaphores' keys, and every permit must be accounted for.
//!
//! - A plain semaphore's count must be N less the permits of holders that never released
//!   (killed: Redisson's `RSemaphore` never gets those back); a release or an acquire call
//!   whose reply was lost leaves its permit in doubt, which widens the range by one each (a
//!   failed acquire may have made one call per response timeout of its wait). Its
//!   acquire receipts (`{name}:semaphore_acquire:*`) may remain: they live out their
//!   settlement window by design.
//! - A permit-expirable semaphore's count plus the permits still in its zset (a killed
//!   holder's, expired or not, are taken back by the next acquire) must be N. An acquire
//!   of its whose reply was lost leaves a settlement marker (`{name}:semaphore_acquire:*`)
//!   for its window, as a plain one may.
//!
//! The counts come from the monitor's last sample, taken after the key scan.

use super::{Report, Run};
use std::collections::BTreeMap;

/// Whether `key` may stay after a run whose semaphores are `semaphores`.
pub fn allowed(key: &str, semaphores: &[String]) -> bool {
    key.starts_with("nemesis:store:")
        || key.starts_with("redisson_lock_token:")
        || semaphores.iter().any(|name| {
            key == name
                || key == format!("{{{name}}}:timeout")
                || key.starts_with(&format!("{{{name}}}:semaphore_acquire:"))
        })
}

/// Whether `key` is a fair lock's queue or deadlines whose last sampled queue holds only
/// waiters that never came back: their process was killed while they waited, or it is a
/// Redisson worker (Redisson's own fair queue keeps the place of a waiter whose give-up
/// could not reach Redis, until its deadline has passed and somebody next calls on the
/// lock). A waiter of ours whose process closed its client must have left the queue,
/// whatever ended its wait: the library withdraws until Redis answers. Each dead waiter is
/// counted in [`Report::fair_orphans`].
fn dead_waiters_only(run: &Run, key: &str, r: &mut Report) -> bool {
    let Some(lock) = key
        .strip_prefix("redisson_lock_queue:{")
        .or_else(|| key.strip_prefix("redisson_lock_timeout:{"))
        .and_then(|rest| rest.strip_suffix('}'))
    else {
        return false;
    };
    let Some(queue) = run.samples.last().and_then(|s| s.queues.get(lock)) else {
        return false;
    };
    let dead = queue.iter().all(|field| {
        let waits: Vec<_> = run.waits.iter().filter(|w| w.field == *field).collect();
        let granted = run
            .holds
            .values()
            .any(|h| h.lock == lock && h.field == *field);
        let closed_here = waits
            .iter()
            .any(|w| run.closed.contains(&w.worker) && !run.redisson.contains(&w.worker));
        !waits.is_empty() && !granted && !closed_here
    });
    if dead && key.starts_with("redisson_lock_queue:") {
        r.fair_orphans += queue.len();
    }
    dead
}

pub(super) fn check(run: &Run, keys_left: &[String], r: &mut Report) {
    // Per semaphore: (kind, N, surely out, in doubt).
    let mut sems: BTreeMap<&str, (&str, u64, u64, u64)> = BTreeMap::new();
    for h in run.holds.values().filter(|h| h.semaphore()) {
        let entry =
            sems.entry(h.lock.as_str())
                .or_insert((h.kind.as_str(), h.permits.unwrap_or(0), 0, 0));
        match (&h.release_start, h.release_result.as_deref()) {
            (None, _) => entry.2 += 1,
            (Some(_), Some("ok")) => {}
            (Some(_), _) => entry.3 += 1,
        }
    }
    let in_doubt = |w: &&super::Wait| w.error.as_deref().is_some_and(|e| e != "timeout");
    for w in run.waits.iter().filter(in_doubt) {
        if let Some(entry) = sems.get_mut(w.lock.as_str()) {
            entry.3 += w.unanswered_calls();
        }
    }
    // A worker killed while it acquired: its acquire may have taken permits that no
    // history line shows (a wait with no grant or failure after it).
    for (lock, entry) in sems.iter_mut() {
        for worker in run
            .waits
            .iter()
            .map(|w| w.worker)
            .collect::<std::collections::BTreeSet<_>>()
        {
            if run.closed.contains(&worker) {
                continue;
            }
            let (failed, waits): (Vec<&super::Wait>, Vec<&super::Wait>) = run
                .waits
                .iter()
                .filter(|w| w.worker == worker && w.lock == *lock)
                .partition(|w| w.error.is_some());
            let (waits, failed) = (waits.len(), failed.len());
            let granted = run
                .holds
                .values()
                .filter(|h| h.worker == worker && h.lock == *lock)
                .count();
            entry.3 += waits.saturating_sub(failed + granted) as u64;
        }
    }
    // A semaphore that was only waited for (never granted in this run) has keys too.
    let waited = run
        .waits
        .iter()
        .filter(|w| matches!(w.kind.as_str(), "semaphore" | "expirable"))
        .map(|w| w.lock.clone());
    let names: Vec<String> = sems.keys().map(|n| n.to_string()).chain(waited).collect();
    for key in keys_left {
        if !allowed(key, &names) && !dead_waiters_only(run, key, r) {
            r.violations
                .push(format!("key `{key}` left in Redis after the run"));
        }
    }
    // Without a key scan (a checker test on a history alone) there is no end state.
    let Some(last) = run.samples.last().filter(|_| !keys_left.is_empty()) else {
        return;
    };
    for (name, (kind, n, out, doubt)) in sems {
        let Some(&count) = last.counts.get(name) else {
            r.violations
                .push(format!("{name}: the permit count is gone after the run"));
            continue;
        };
        r.counts_judged += 1;
        if kind == "expirable" {
            let held = last.ttls.get(name).map_or(0, |m| m.len()) as i64;
            if count + held != n as i64 {
                r.violations.push(format!(
                    "{name}: {count} permits available and {held} in its zset after the run, \
                     but it has {n}"
                ));
            }
        } else {
            let (low, high) = (n as i64 - out as i64 - doubt as i64, n as i64 - out as i64);
            if count < low || count > high {
                r.violations.push(format!(
                    "{name}: {count} permits available after the run; with {n} permits, {out} \
                     never released and {doubt} in doubt it must be in [{low}, {high}]"
                ));
            }
        }
    }
}
