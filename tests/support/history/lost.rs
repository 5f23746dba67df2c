//! `lost()` no later than the expiry of what Redis showed for the hold, + [`LOST_SLACK_US`].
//!
//! For a hold that ended by `lost()`, the monitor's last sample that still showed the
//! hold's holder alive (at Redis time `T`, ms to live `p`: the hash's PTTL for a hash field
//! or the fast lock's value, the reader's longest read-hold key, the permit's score) and the
//! next sample (at `T'`) fix its expiry: when `T' - T` is shorter than the shortest lease
//! any extension could set ([`MIN_FIXED_LEASE_US`] or the watchdog's), no renewal or
//! re-entry can have run in between unseen (it would have kept the holder alive past `T'`),
//! so it expired at `T + p` (+1 ms for PTTL's rounding). A longer gap is judged only when a
//! server outage the test caused (pause, restart) starts inside it: an extension can then
//! only have run unseen before the outage's start `o`, so the expiry is at most
//! `min(T', max(T + p, o + the hold's longest lease))`. Holds the monitor never saw, or saw
//! with another gap, are counted as not judged. A worker that was frozen or not scheduled
//! between the expiry and the moment it learnt of the loss cannot have run its timer, so
//! that hold is counted as excused, not passed. A hold whose unlock found it gone without
//! `lost()` having fired is judged the same way at the time of the unlock. Redisson
//! workers' holds are not judged here: Redisson cannot tell a holder its lock is gone.

use super::{stalled, Hold, Report, Run, Sample, LOST_SLACK_US, MIN_FIXED_LEASE_US};

pub(super) fn check(run: &Run, r: &mut Report) {
    for hold in run.holds.values().filter(|h| h.leased() && !h.redisson) {
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
        let Some(expiry) = expiry_of(hold, run) else {
            r.lost_not_judged += 1;
            continue;
        };
        let late = learnt as i64 - expiry as i64;
        if late > LOST_SLACK_US {
            // A process that was frozen or not scheduled when its deadline came cannot keep
            // it; the stall itself is in the history (the test's SIGSTOP, or the worker's
            // own heartbeat).
            if stalled(&run.stalls, hold.worker, expiry, learnt) {
                r.lost_excused += 1;
                continue;
            }
            r.violations.push(format!(
                "{}: {} learnt of the loss {:.1} ms after its {} expired ({}; slack {} ms)",
                hold.lock,
                hold.describe(),
                late as f64 / 1000.0,
                if hold.semaphore() { "permit" } else { "key" },
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

/// The latest the holder of `hold` can have expired, from the monitor's samples (see the
/// module doc), if the samples pin it down.
fn expiry_of(hold: &Hold, run: &Run) -> Option<u64> {
    let samples: &[Sample] = run.samples;
    if hold.field.is_empty() {
        return None;
    }
    let last = samples
        .iter()
        .rposition(|s| s.alive(&hold.lock, &hold.field).is_some())?;
    // The next look at this lock (a monitor that samples each lock on its own node takes
    // one sample per lock; the single-server monitor samples all locks at once).
    let next = samples[last + 1..]
        .iter()
        .find(|s| s.locks.contains_key(&hold.lock))?;
    let seen = &samples[last];
    let ttl = seen.alive(&hold.lock, &hold.field)?;
    if ttl < 0 {
        return None;
    }
    let scheduled = seen.t + ttl as u64 * 1000 + 1000;
    if next.t.saturating_sub(seen.t) < MIN_FIXED_LEASE_US.min(run.watchdog_us) {
        return Some(scheduled);
    }
    // A long gap between samples: the server was out (paused, or down for a restart). An
    // extension it ran unseen before going out, at the latest at the outage's start, would
    // move the expiry to at most that start + the hold's longest lease; one it ran after
    // coming back would have kept the holder in the next sample. It is gone at `next`.
    let outage = run
        .faults
        .iter()
        .find(|f| f.worker.is_none() && f.start >= seen.t && f.start <= next.t)?;
    Some(
        next.t
            .min(scheduled.max(outage.start + hold.max_lease_us + 1000)),
    )
}
