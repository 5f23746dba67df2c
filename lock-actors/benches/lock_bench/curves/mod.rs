//! The cost curves (`scripts/bench --curves`): how throughput, latency, memory
//! and Redis load grow with the work, measured on one redis-server of our own.
//!
//! - `uncontended`: lock/unlock pairs/s against concurrent tasks (1 to 1,024) for our
//!   reentrant lock and fast lock, the plain-redis ceiling, rslock and Redisson.
//! - `handoff`: hand-off p50/p99 against the waiters on one lock (1 to 10,000), the
//!   waiters in 1 or in 4 processes (this program started again as `--curve-waiter`).
//! - `watchdog`: 1,000 to 200,000 watchdog locks held in one client: RSS per lock, renew
//!   script calls per interval, renewal round time, Redis CPU share of renewal.
//! - `redlock`: RedLock acquire p50 against nodes (1, 3, 5, 7), beside the plain-redis floor.
//! - `commands`: Redis commands sent per acquire/release pair in each of them (INFO
//!   commandstats deltas, less the commands run inside scripts).
//!
//! Each curve writes `<name>.csv` and `<name>.svg` (drawn here with plotters) into
//! `docs/curves/` as soon as it is measured, so a failure later keeps what came before.
//! Progress goes to stderr, one line per step, with the elapsed time.
//!
//! Knobs: `LOCK_BENCH_CURVES_QUICK=1` (small sizes, a minute or so, written to the temp
//! dir unless `LOCK_BENCH_CURVES_DIR` says where), `LOCK_BENCH_CURVES_ONLY=watchdog,redlock`
//! (a subset), `LOCK_BENCH_CURVES_DIR=path` (where the files go).

use super::*;

mod commands;
mod handoff;
mod plot;
mod redlock;
mod uncontended;
mod waiter;
mod watchdog;

pub(crate) use waiter::{waiter_main, WAITER_FLAG};

/// The sizes of one run: the full run (about 10 minutes here at most) or the quick one.
pub(crate) struct Sizes {
    pub(crate) quick: bool,
    /// Concurrent tasks of the uncontended curve.
    pub(crate) tasks: Vec<usize>,
    /// Rounds per line and point (the median counts), and their length.
    pub(crate) rounds: usize,
    pub(crate) round: Duration,
    /// Waiters on one lock in the hand-off curve.
    pub(crate) waiters: Vec<usize>,
    /// Hand-offs measured at least per point (small points repeat).
    pub(crate) min_handoffs: usize,
    /// Waiter processes of the second hand-off line.
    pub(crate) processes: usize,
    /// Locks held in the watchdog curve, growing in one client.
    pub(crate) held: Vec<usize>,
    /// Renew intervals measured per point.
    pub(crate) intervals: u32,
    /// RedLock node counts, samples per round and rounds.
    pub(crate) nodes: Vec<usize>,
    pub(crate) redlock_samples: usize,
    pub(crate) redlock_rounds: usize,
}

impl Sizes {
    fn full() -> Self {
        Sizes {
            quick: false,
            tasks: vec![1, 4, 16, 64, 256, 1024],
            rounds: 5,
            round: Duration::from_millis(1000),
            waiters: vec![1, 10, 100, 1000, 10_000],
            min_handoffs: 300,
            processes: 4,
            held: vec![1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000, 200_000],
            intervals: 5,
            nodes: vec![1, 3, 5, 7],
            redlock_samples: 300,
            redlock_rounds: 3,
        }
    }

    fn quick() -> Self {
        Sizes {
            quick: true,
            tasks: vec![1, 16, 256],
            rounds: 1,
            round: Duration::from_millis(300),
            waiters: vec![1, 10, 100, 1000],
            min_handoffs: 30,
            processes: 4,
            held: vec![1000, 5000, 20_000],
            intervals: 1,
            nodes: vec![1, 3, 5, 7],
            redlock_samples: 60,
            redlock_rounds: 1,
        }
    }
}

/// One progress line per step on stderr: elapsed time, steps done of all, what ran.
pub(crate) struct Progress {
    started: Instant,
    done: usize,
    total: usize,
}

impl Progress {
    pub(crate) fn step(&mut self, what: &str) {
        self.done += 1;
        self.line(what);
    }

    pub(crate) fn note(&self, what: &str) {
        self.line(what);
    }

    fn line(&self, what: &str) {
        let s = self.started.elapsed().as_secs();
        eprintln!(
            "[curves {:02}:{:02} {:>3}/{}] {what}",
            s / 60,
            s % 60,
            self.done,
            self.total
        );
    }
}

/// Where the files go, and the curves asked for.
struct Output {
    dir: std::path::PathBuf,
    only: Option<HashSet<String>>,
}

impl Output {
    fn wants(&self, curve: &str) -> bool {
        self.only.as_ref().is_none_or(|only| only.contains(curve))
    }

    /// Writes `<name>.csv`: a header line, then one line per row.
    pub(crate) fn csv(&self, name: &str, header: &str, rows: &[String]) {
        let mut text = format!("{header}\n");
        for row in rows {
            text.push_str(row);
            text.push('\n');
        }
        let path = self.dir.join(format!("{name}.csv"));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    pub(crate) fn svg(&self, name: &str) -> std::path::PathBuf {
        self.dir.join(format!("{name}.svg"))
    }
}

/// `scripts/bench --curves`: every curve, then the total time.
pub(crate) fn main() {
    let started = Instant::now();
    let quick = std::env::var("LOCK_BENCH_CURVES_QUICK").is_ok_and(|v| v == "1");
    let sizes = if quick { Sizes::quick() } else { Sizes::full() };
    let dir = match std::env::var("LOCK_BENCH_CURVES_DIR") {
        Ok(dir) => std::path::PathBuf::from(dir),
        Err(_) if quick => std::env::temp_dir().join("lock-bench-curves-quick"),
        Err(_) => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/curves"),
    };
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    let out = Output {
        dir,
        only: std::env::var("LOCK_BENCH_CURVES_ONLY").ok().map(|list| {
            list.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        }),
    };
    // The watchdog curve reads the renewal rounds' spans (their duration).
    tracing::subscriber::set_global_default(watchdog::RenewalRounds)
        .expect("no other tracing subscriber");
    let mut progress = Progress {
        started,
        done: 0,
        total: steps(&sizes, &out),
    };
    progress.note(&format!(
        "{} run; files go to {}",
        if quick { "quick" } else { "full" },
        out.dir.display()
    ));
    // Killed on drop, so also when a curve panics; and by the kernel if we are killed.
    let server = RedisProcess::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run(&server.url(), &sizes, &out, &mut progress));
    drop(runtime);
    drop(server);
    eprintln!(
        "lock_bench --curves: done in {:.0} s ({}); CSV and SVG files in {}",
        started.elapsed().as_secs_f64(),
        if quick { "quick sizes" } else { "full sizes" },
        out.dir.display()
    );
}

/// Steps the progress line counts: one per measured point.
fn steps(sizes: &Sizes, out: &Output) -> usize {
    let mut total = 1; // the commands plot
    if out.wants("watchdog") {
        total += sizes.held.len();
    }
    if out.wants("uncontended") {
        total += sizes.tasks.len() * sizes.rounds;
    }
    if out.wants("handoff") {
        total += sizes.waiters.len() * 2 + 1;
    }
    if out.wants("redlock") {
        total += sizes.nodes.len();
    }
    total
}

async fn run(url: &str, sizes: &Sizes, out: &Output, progress: &mut Progress) {
    let mut inspector = Inspector::connect(url).await;
    let mut all = commands::Commands::default();
    // First, so the RSS growth is not hidden by memory that later curves freed.
    if out.wants("watchdog") {
        let points = watchdog::curve(url, sizes, &mut inspector, progress).await;
        watchdog::write(&points, out);
        all.watchdog = Some(points);
    }
    if out.wants("uncontended") {
        let curve = uncontended::curve(url, sizes, &mut inspector, progress).await;
        uncontended::write(&curve, out);
        all.uncontended = Some(curve);
    }
    if out.wants("handoff") {
        let curve = handoff::curve(url, sizes, &mut inspector, progress).await;
        handoff::write(&curve, out);
        all.handoff = Some(curve);
    }
    if out.wants("redlock") {
        let points = redlock::curve(sizes, progress).await;
        redlock::write(&points, out);
        all.redlock = Some(points);
    }
    commands::write(&all, out);
    progress.step("commands per acquire/release pair: commands.csv, commands.svg");
}

/// CLOCK_MONOTONIC in ns: one clock for every process of this machine (the hand-off
/// curve compares times taken in different processes).
pub(crate) fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
