//! What the checker found, how it is printed (one line per run, one table row per scenario),
//! and [`Minimums`]: what a scenario must have judged for its run to count.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write as _;
use std::path::PathBuf;

/// What the checker found; [`Report::violations`] must be empty for a correct run. The
/// `*_judged` counts say how often a rule had something to judge (see [`Minimums`]).
#[derive(Debug, Default)]
pub struct Report {
    pub scenario: String,
    pub acquisitions: usize,
    /// Grants per kind (`reentrant`, `fast`, … as the histories name them).
    pub grants: BTreeMap<String, usize>,
    /// Nested acquisitions by the owner of a hold.
    pub reentries: usize,
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
    /// Pairs of holds of one exclusive lock compared for overlap (consecutive in grant order).
    pub exclusive_judged: usize,
    /// Readers compared with the writers of their read-write lock.
    pub rw_judged: usize,
    /// Grants whose token was compared with a grant that surely came before.
    pub tokens_judged: usize,
    /// The most permits out at once on any semaphore, per kind (`semaphore`, `expirable`).
    pub max_permits_out: BTreeMap<String, usize>,
    /// Pairs of fair waiters seen queued one behind the other that both stayed.
    pub fair_judged: usize,
    /// Of those, pairs whose first waiter lost its place when its deadline had passed (it
    /// joined again behind the second, which was granted first).
    pub fair_expired: usize,
    pub lost_judged: usize,
    pub lost_not_judged: usize,
    pub lost_excused: usize,
    /// Fair queue entries left after the run by waiters that never came back (killed, or
    /// gave up while Redis was out of reach); each blocks its lock until its deadline.
    pub fair_orphans: usize,
    /// Permit counts (and expirable permit sets) checked after the run.
    pub counts_judged: usize,
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
            "nemesis[{}]: acquisitions={} ({}) reentries={} releases={} lost={} \
             gone_at_unlock={} unlock_unavailable={} faults={} writes_accepted={} \
             refused_stale_writes={} writes_failed={} exclusive_judged={} rw_judged={} \
             tokens_judged={} max_permits_out={:?} fair_judged={} fair_expired={} \
             lost_judged={} lost_not_judged={} lost_excused={} counts_judged={} \
             fair_orphans={} stalls={} lost_latest_vs_expiry_ms={} clock_stamps={} \
             violations={}",
            self.scenario,
            self.acquisitions,
            self.kinds(),
            self.reentries,
            self.releases,
            self.lost,
            self.gone_at_unlock,
            self.unlock_unavailable,
            self.faults,
            self.writes_accepted,
            self.writes_refused,
            self.writes_failed,
            self.exclusive_judged,
            self.rw_judged,
            self.tokens_judged,
            self.max_permits_out,
            self.fair_judged,
            self.fair_expired,
            self.lost_judged,
            self.lost_not_judged,
            self.lost_excused,
            self.counts_judged,
            self.fair_orphans,
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

impl Report {
    /// Grants per kind, `kind=n` joined by spaces.
    pub fn kinds(&self) -> String {
        self.grants
            .iter()
            .map(|(kind, n)| format!("{kind}={n}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// One Markdown table row: scenario | acquisitions per kind | faults | rules judged |
    /// violations (see [`TABLE_HEADER`]).
    pub fn row(&self) -> String {
        format!(
            "| {} | {} ({}) | {} | exclusive {}, read/write {}, tokens {}, permits max {:?}, \
             fair {}, lost() {} (+{} excused), stale writes refused {}, counts {} | {} |",
            self.scenario,
            self.acquisitions,
            self.kinds(),
            self.faults,
            self.exclusive_judged,
            self.rw_judged,
            self.tokens_judged,
            self.max_permits_out,
            self.fair_judged,
            self.lost_judged,
            self.lost_excused,
            self.writes_refused,
            self.counts_judged,
            self.violations.len()
        )
    }

    /// Prints `extra`-suffixed report line and the table row to stdout and appends both to
    /// `<target>/tmp/nemesis-report.log`.
    pub fn publish(&self, extra: &str) {
        let line = format!("{self}{extra}");
        let row = self.row();
        println!("{line}\n{row}");
        // (Examples that share the support code get no CARGO_TARGET_TMPDIR.)
        let log = option_env!("CARGO_TARGET_TMPDIR")
            .map_or_else(std::env::temp_dir, PathBuf::from)
            .join("nemesis-report.log");
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = writeln!(file, "{line}\n{row}");
        }
    }
}

/// The header of [`Report::row`]'s table.
pub const TABLE_HEADER: &str =
    "| scenario | acquisitions (per kind) | faults | rules judged | violations |\n|---|---|---|---|---|";

/// What a scenario claims to judge, as minimum counts; [`Minimums::assert`] fails the test
/// on every shortfall at once, so a run that judged nothing cannot pass.
///
/// ```ignore
/// Minimums::new()
///     .grants(&["fenced", "read", "write"], 5) // at least 5 grants of each
///     .lost_judged(1)                          // a cut-off holder's lost() was timed
///     .stale_writes_refused(1)
///     .assert(&report);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Minimums {
    grants: Vec<(String, usize)>,
    counts: Vec<(&'static str, usize)>,
}

impl Minimums {
    pub fn new() -> Self {
        Self::default()
    }

    /// At least `n` grants of each of `kinds`.
    pub fn grants(mut self, kinds: &[&str], n: usize) -> Self {
        self.grants.extend(kinds.iter().map(|k| (k.to_string(), n)));
        self
    }

    fn at_least(mut self, what: &'static str, n: usize) -> Self {
        self.counts.push((what, n));
        self
    }

    /// `lost()` (or an unlock that found the hold gone) timed against the key's expiry.
    pub fn lost_judged(self, n: usize) -> Self {
        self.at_least("lost_judged", n)
    }

    /// Writes the fenced store refused for a stale token.
    pub fn stale_writes_refused(self, n: usize) -> Self {
        self.at_least("stale_writes_refused", n)
    }

    /// Consecutive holds of exclusive locks compared.
    pub fn exclusive_judged(self, n: usize) -> Self {
        self.at_least("exclusive_judged", n)
    }

    /// Readers compared with writers.
    pub fn rw_judged(self, n: usize) -> Self {
        self.at_least("rw_judged", n)
    }

    /// Fencing tokens compared in grant order.
    pub fn tokens_judged(self, n: usize) -> Self {
        self.at_least("tokens_judged", n)
    }

    /// Fair waiter pairs judged for order.
    pub fn fair_judged(self, n: usize) -> Self {
        self.at_least("fair_judged", n)
    }

    /// Semaphores whose permits were all out at once at least once (`n` permits).
    pub fn permits_out(self, n: usize) -> Self {
        self.at_least("max_permits_out", n)
    }

    /// Re-entries.
    pub fn reentries(self, n: usize) -> Self {
        self.at_least("reentries", n)
    }

    /// Faults injected.
    pub fn faults(self, n: usize) -> Self {
        self.at_least("faults", n)
    }

    fn value(report: &Report, what: &str) -> usize {
        match what {
            "lost_judged" => report.lost_judged,
            "stale_writes_refused" => report.writes_refused,
            "exclusive_judged" => report.exclusive_judged,
            "rw_judged" => report.rw_judged,
            "tokens_judged" => report.tokens_judged,
            "fair_judged" => report.fair_judged,
            "max_permits_out" => report.max_permits_out.values().copied().max().unwrap_or(0),
            "reentries" => report.reentries,
            "faults" => report.faults,
            _ => unreachable!("unknown minimum {what}"),
        }
    }

    /// Panics listing every count below its minimum.
    pub fn assert(&self, report: &Report) {
        let mut short = Vec::new();
        for (kind, n) in &self.grants {
            let got = report.grants.get(kind).copied().unwrap_or(0);
            if got < *n {
                short.push(format!("{kind} grants {got} < {n}"));
            }
        }
        for (what, n) in &self.counts {
            let got = Self::value(report, what);
            if got < *n {
                short.push(format!("{what} {got} < {n}"));
            }
        }
        assert!(
            short.is_empty(),
            "[{}] the run judged too little: {}\n{report}",
            report.scenario,
            short.join(", ")
        );
    }
}
