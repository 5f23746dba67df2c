//! Fencing: tokens increase in grant order, the store accepts no stale write, and no worker
//! claims a hold valid after its own `lost()` fired.

use super::{u, Report, Run, Write};
use serde_json::Value;
use std::collections::BTreeMap;

pub(super) fn record_write(
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

pub(super) fn check(run: &mut Run, r: &mut Report) {
    store(&mut run.writes, r);
    tokens_in_grant_order(run, r);
    no_check_after_lost(run, r);
}

/// Sorted by the store's own `TIME`, no accepted write may carry a token below one accepted
/// earlier, and the store's answer must match its highest token.
fn store(writes: &mut [Write], r: &mut Report) {
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

/// A grant that surely ran after another (its `l_call` after the other's `l_after`) must
/// carry the higher token.
fn tokens_in_grant_order(run: &Run, r: &mut Report) {
    let mut by_lock: BTreeMap<&str, Vec<(u64, u64, u64, u64)>> = BTreeMap::new();
    for h in run.holds.values().filter(|h| h.token > 0) {
        by_lock
            .entry(h.lock.as_str())
            .or_default()
            .push((h.l_call, h.l_after, h.token, h.worker));
    }
    for (lock, grants) in by_lock {
        let mut done: Vec<_> = grants.clone();
        done.sort_by_key(|g| g.1);
        let mut started = grants;
        started.sort_by_key(|g| g.0);
        // Walk the grants by l_call, keeping the highest token of those surely done before.
        let (mut i, mut best): (usize, Option<(u64, u64, u64)>) = (0, None);
        for &(l_call, _, token, worker) in &started {
            while i < done.len() && done[i].1 < l_call {
                if best.is_none_or(|(t, _, _)| done[i].2 > t) {
                    best = Some((done[i].2, done[i].3, done[i].1));
                }
                i += 1;
            }
            if let Some((before, by, at)) = best {
                r.tokens_judged += 1;
                if token <= before {
                    r.violations.push(format!(
                        "{lock}: token {token} (worker {worker}, asked at {l_call}) is not above \
                         token {before} (worker {by}) granted by {at}"
                    ));
                }
            }
        }
    }
}

/// A worker that looked at its hold (`l_check`) after `lost()` fired and went on: the
/// `lost()` it logged came first, so it knew.
fn no_check_after_lost(run: &Run, r: &mut Report) {
    for h in run.holds.values() {
        if let (Some(lost), Some(check)) = (h.lost, h.last_check) {
            if check > lost {
                r.violations.push(format!(
                    "{}: {} went on as holder at {check}, after its lost() at {lost}",
                    h.lock,
                    h.describe()
                ));
            }
        }
    }
}
