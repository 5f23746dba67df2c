//! Fair locks grant in queue order among waiters that stayed.
//!
//! The monitor samples each fair lock's queue `redisson_lock_queue:{name}`. When a sample
//! shows waiter A ahead of waiter B and both waits ended in a grant (they stayed: no
//! `acquire_failed`), A must be granted first. A violation needs certainty: B's grant was
//! surely done (`l_after`) before a later sample that still shows A queued, with A queued in
//! every sample in between, so A never left the queue (it leaves only when granted, when it
//! gives up, or when its deadline passes and it is dropped as dead, after which it would
//! join again behind B). The workers' fair deadlines are longer than any wait of a live
//! process, so a waiter is dropped as dead only while its process is frozen, stalled or cut
//! off: pairs whose A was hindered in that stretch are not judged.

use super::{stalled, Hold, Report, Run};
use std::collections::BTreeMap;

pub(super) fn check(run: &Run, r: &mut Report) {
    // The fair grants by (lock, field): each round has its own owner, so its own field.
    let granted: BTreeMap<(&str, &str), &Hold> = run
        .holds
        .values()
        .filter(|h| h.kind == "fair")
        .map(|h| ((h.lock.as_str(), h.field.as_str()), h))
        .collect();
    let failed: std::collections::BTreeSet<(&str, &str)> = run
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
    // Every ordered pair (A ahead of B) seen in some sample, judged once.
    let mut judged: std::collections::BTreeSet<(String, String, String)> = Default::default();
    for (i, sample) in run.samples.iter().enumerate() {
        for (lock, queue) in &sample.queues {
            for (ai, a_field) in queue.iter().enumerate() {
                let Some(a) = stayed(lock, a_field) else {
                    continue;
                };
                for b_field in &queue[ai + 1..] {
                    let Some(b) = stayed(lock, b_field) else {
                        continue;
                    };
                    let pair = (lock.clone(), a_field.clone(), b_field.clone());
                    if judged.contains(&pair) {
                        continue;
                    }
                    // The samples from here on in which A is still queued without a break.
                    let a_queued_until = run.samples[i..]
                        .iter()
                        .take_while(|s| s.queues.get(lock).is_some_and(|q| q.contains(a_field)))
                        .last()
                        .map_or(sample.t, |s| s.t);
                    if stalled(
                        &run.hindered,
                        a.worker,
                        sample.t,
                        a_queued_until.max(b.l_after),
                    ) {
                        continue;
                    }
                    judged.insert(pair);
                    r.fair_judged += 1;
                    if b.l_after < a_queued_until {
                        r.violations.push(format!(
                            "{lock}: {} was queued ahead of {} at {} and still queued at {}, \
                             yet {} was granted by {}",
                            a.describe(),
                            b.describe(),
                            sample.t,
                            a_queued_until,
                            b.describe(),
                            b.l_after
                        ));
                    }
                }
            }
        }
    }
}
