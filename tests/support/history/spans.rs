//! The rules on surely-held spans ([`Hold::span`]): one exclusive holder at a time, no
//! reader beside a writer, never more than N permits out.

use super::{Hold, Report, Run};
use std::collections::BTreeMap;

type Span<'a> = (u64, u64, &'a Hold);

pub(super) fn check(run: &Run, r: &mut Report) {
    let mut exclusive: BTreeMap<&str, Vec<Span>> = BTreeMap::new();
    let mut readers: BTreeMap<&str, Vec<Span>> = BTreeMap::new();
    let mut permits: BTreeMap<&str, Vec<Span>> = BTreeMap::new();
    for hold in run.holds.values() {
        let (start, end) = hold.span(&run.stalls, run.watchdog_us);
        let by_lock = if hold.exclusive() {
            &mut exclusive
        } else if hold.kind == "read" {
            &mut readers
        } else if hold.semaphore() {
            &mut permits
        } else {
            continue;
        };
        by_lock
            .entry(hold.lock.as_str())
            .or_default()
            .push((start, end, hold));
    }
    for (lock, spans) in &mut exclusive {
        one_at_a_time(lock, spans, r);
    }
    for (lock, readers) in &readers {
        let writers = exclusive.get(lock).map_or(&[][..], Vec::as_slice);
        no_reader_beside_a_writer(lock, readers, writers, r);
    }
    for (name, spans) in &permits {
        at_most_n_out(name, spans, r);
    }
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn one_at_a_time(lock: &str, spans: &mut [Span], r: &mut Report) {
    let mut tokens: BTreeMap<u64, u64> = BTreeMap::new();
    for (_, _, hold) in spans.iter().filter(|(_, _, h)| h.token > 0) {
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
    for &(start, end, b) in spans.iter() {
        if let Some((a_end, a)) = furthest {
            r.exclusive_judged += 1;
            let both_until = a_end.min(end);
            if start < both_until {
                r.violations.push(format!(
                    "{lock}: {} was valid until at least {a_end} but {} was granted by \
                     {start} ({:.1} ms of overlap)",
                    a.describe(),
                    b.describe(),
                    ms(both_until - start)
                ));
            }
        }
        if furthest.is_none_or(|(a_end, _)| end > a_end) {
            furthest = Some((end, b));
        }
    }
}

fn no_reader_beside_a_writer(lock: &str, readers: &[Span], writers: &[Span], r: &mut Report) {
    for &(r_start, r_end, reader) in readers {
        if writers.is_empty() {
            continue;
        }
        r.rw_judged += 1;
        for &(w_start, w_end, writer) in writers {
            let (from, to) = (r_start.max(w_start), r_end.min(w_end));
            if from < to {
                r.violations.push(format!(
                    "{lock}: reader {} and writer {} both held it from {from} ({:.1} ms of \
                     overlap)",
                    reader.describe(),
                    writer.describe(),
                    ms(to - from)
                ));
            }
        }
    }
}

fn at_most_n_out(name: &str, spans: &[Span], r: &mut Report) {
    let Some(n) = spans.iter().filter_map(|(_, _, h)| h.permits).max() else {
        return;
    };
    // +1 at each span's start, -1 at its end; ends first at equal times (half-open spans).
    let mut steps: Vec<(u64, i64)> = Vec::new();
    for &(start, end, _) in spans {
        if start < end {
            steps.push((start, 1));
            steps.push((end, -1));
        }
    }
    steps.sort();
    let (mut out, mut most, mut reported) = (0i64, 0i64, false);
    for (t, step) in steps {
        out += step;
        most = most.max(out);
        if out > n as i64 && !reported {
            reported = true;
            r.violations.push(format!(
                "{name}: {out} permits out at {t} though it has only {n}"
            ));
        }
    }
    let kind = spans[0].2.kind.clone();
    let entry = r.max_permits_out.entry(kind).or_default();
    *entry = (*entry).max(most as usize);
}
