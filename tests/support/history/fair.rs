//! Fair locks grant in queue order among waiters that stayed.
//!
//! The monitor samples each fair lock's queue `redisson_lock_queue:{name}` with each
//! waiter's deadline in `redisson_lock_timeout:{name}`. When a sample shows waiter A ahead of
//! waiter B and both waits ended in a grant (they stayed: no `acquire_failed`), B may be
//! granted first only if A lost its place as a dead waiter: its place's deadline had passed
//! when a call dropped it (it then joins again at the back).
//!
//! That happens to live waiters too. By Redisson's rule a deadline belongs to a place in
//! the queue, not to its waiter: a grant takes one allowance off every deadline and a
//! waiter that leaves takes one off everyone behind it, so a new head takes over the
//! deadline of the head it replaces, however recently it joined (only dropping a dead head
//! moves nobody's). A waiter that joined behind a dead one (cut off, its give-up on its
//! way) may head the queue with little of that left, and is dropped if it has not taken
//! the lock by then (a wake-up it missed, or one late on a connection that just came
//! back), as Redisson drops it.
//!
//! So a pair is judged on A's *stint*: the samples that show A in one place. A waiter's
//! deadline never rises while it keeps its place, so a sample that shows it with a later
//! deadline than the sample before shows it joined again in between. A violation needs
//! certainty:
//! - B's grant was surely done (`l_after`) before a sample that still shows A in the place
//!   it had ahead of B; or
//! - A lost that place and joined again (and was still queued after B's grant), while the
//!   last sample of the place showed A at the head with a deadline after the time by which
//!   it was surely out of it (the next sample, or B's grant). At the head nothing moves a
//!   deadline, so that is the deadline it was dropped with. A stint that ended with A
//!   behind others is not judged (each of them may have taken an allowance off it).
//!
//! Pairs whose A was hindered (frozen, stalled or cut off) meanwhile are not judged.

use super::{stalled, Hold, Report, Run, Sample, CLOCK_TOLERANCE_US};
use std::collections::{BTreeMap, BTreeSet, HashMap};

pub(super) fn check(run: &Run, r: &mut Report) {
    // The fair grants by (lock, field): each round has its own owner, so its own field.
    let granted: BTreeMap<(&str, &str), &Hold> = run
        .holds
        .values()
        .filter(|h| h.kind == "fair")
        .map(|h| ((h.lock.as_str(), h.field.as_str()), h))
        .collect();
    let failed: BTreeSet<(&str, &str)> = run
        .waits
        .iter()
        .filter(|w| w.error.is_some())
        .map(|w| (w.lock.as_str(), w.field.as_str()))
        .collect();
    let stayed = |lock: &str, field: &str| -> Option<&Hold> {
        if failed.contains(&(lock, field)) {
            return None;
        }
        granted.get(&(lock, field)).copied()
    };
    let stints = stints(run.samples);
    // Every ordered pair (A ahead of B) in each stint of A, looked at once.
    let mut seen: BTreeSet<(&str, &str, &str, u32)> = BTreeSet::new();
    for (i, sample) in run.samples.iter().enumerate() {
        for (lock, queue) in &sample.queues {
            for (ai, a_field) in queue.iter().enumerate() {
                let Some(a) = stayed(lock, a_field) else {
                    continue;
                };
                let stint = stints[&(i, lock.as_str(), a_field.as_str())];
                let in_stint = |k: usize| stints.get(&(k, lock.as_str(), a_field.as_str()));
                // The samples from here on in which A keeps this place, and those in which
                // it is queued without a break (in this place or, dropped, in a new one).
                let place = run.samples[i..]
                    .iter()
                    .enumerate()
                    .take_while(|(k, _)| in_stint(i + k) == Some(&stint))
                    .count();
                let queued = run.samples[i..]
                    .iter()
                    .take_while(|s| s.queues.get(lock).is_some_and(|q| q.contains(a_field)))
                    .count();
                let last = &run.samples[i + place - 1];
                let queued_until = run.samples[i + queued - 1].t;
                // The sample that shows A queued again after losing this place.
                let rejoined = (queued > place).then(|| &run.samples[i + place]);
                for b_field in &queue[ai + 1..] {
                    let Some(b) = stayed(lock, b_field) else {
                        continue;
                    };
                    if !seen.insert((lock, a_field, b_field, stint)) {
                        continue;
                    }
                    if stalled(
                        &run.hindered,
                        a.worker,
                        sample.t,
                        queued_until.max(b.l_after),
                    ) {
                        continue;
                    }
                    if b.l_after < last.t {
                        r.fair_judged += 1;
                        r.violations.push(format!(
                            "{lock}: {} was queued ahead of {} at {} and still in that place \
                             at {}, yet {} was granted by {}",
                            a.describe(),
                            b.describe(),
                            sample.t,
                            last.t,
                            b.describe(),
                            b.l_after
                        ));
                        continue;
                    }
                    let Some(rejoined) = rejoined.filter(|_| b.l_after < queued_until) else {
                        // B's grant may have come after A's.
                        r.fair_judged += 1;
                        continue;
                    };
                    // B was granted while A waited on, after A lost its place: fair only if
                    // that place's deadline had passed when A was dropped.
                    let head = last.queues.get(lock).and_then(|q| q.first()) == Some(a_field);
                    let Some(deadline) = last.deadline(lock, a_field).filter(|_| head) else {
                        continue; // not at the head: its deadline may have dropped since
                    };
                    r.fair_judged += 1;
                    let deadline_us = u64::try_from(deadline).unwrap_or(0) * 1_000;
                    let out_by = rejoined.t.min(b.l_after);
                    if deadline_us > out_by + CLOCK_TOLERANCE_US as u64 {
                        r.violations.push(format!(
                            "{lock}: {} was queued ahead of {} at {}, headed the queue at {} \
                             with its deadline at {deadline_us}, yet lost its place by {out_by} \
                             (queued again at {}), and {} was granted by {}",
                            a.describe(),
                            b.describe(),
                            sample.t,
                            last.t,
                            rejoined.t,
                            b.describe(),
                            b.l_after
                        ));
                    } else {
                        r.fair_expired += 1;
                    }
                }
            }
        }
    }
}

/// Numbers each fair waiter's stints in its queue: `(sample index, lock, field) → stint`.
/// A stint ends where a sample no longer shows the waiter queued, or shows it with a later
/// deadline than the sample before (it lost its place and joined again in between).
fn stints(samples: &[Sample]) -> HashMap<(usize, &str, &str), u32> {
    let mut stints = HashMap::new();
    // Per (lock, field): the last sample that showed it, its deadline there, its stint.
    let mut last: HashMap<(&str, &str), (usize, Option<i64>, u32)> = HashMap::new();
    for (i, sample) in samples.iter().enumerate() {
        for (lock, queue) in &sample.queues {
            for field in queue {
                let key = (lock.as_str(), field.as_str());
                let deadline = sample.deadline(lock, field);
                let stint = match last.get(&key) {
                    Some(&(seen, before, stint)) => {
                        let later = matches!((before, deadline), (Some(b), Some(d)) if d > b);
                        if seen + 1 == i && !later {
                            stint
                        } else {
                            stint + 1
                        }
                    }
                    None => 0,
                };
                last.insert(key, (i, deadline, stint));
                stints.insert((i, lock.as_str(), field.as_str()), stint);
            }
        }
    }
    stints
}
