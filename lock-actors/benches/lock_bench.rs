//! The speed benchmark: how close the lock actors come to what Redis itself allows,
//! and how they compare with `rslock`.
//!
//! Run it with `scripts/bench` (or `cargo bench -p actix-distributed-lock-actors --bench lock_bench`). It starts
//! its own `redis-server` on a free loopback port, runs every scenario, shows progress and a
//! human table on stderr, and prints one JSON object as the last line of stdout. Every ratio
//! is computed inside the same run, against numbers measured with plain `redis` (the ceiling)
//! or with `rslock`, because the machine is shared and noisy.
//!
//! Knobs (environment, for profiling and quick looks; the defaults are the benchmark):
//! - `LOCK_BENCH_ONLY=uncontended,single_task`: run only these scenarios; the others are null.
//! - `LOCK_BENCH_ROUND_MS=2000`: length of one throughput round.
//! - `LOCK_BENCH_SIDE=library` (or `reference`): in uncontended and single_task, measure only
//!   the library (or only the plain-redis reference), so a profile shows one side alone. The
//!   ratios of those rows are then meaningless.
//! - `--quick` (`scripts/bench --quick`): the uncontended, fast-lock and single-task rows with
//!   their A/A rows only, 5 rounds of 1 s, no Redisson, no bound: under two minutes, for a
//!   change to a hot path to run before it is merged.
//! - `LOCK_BENCH_TRACE=1`: record the library's own `tracing` events (`released`, `woken`,
//!   `acquired`) during the hand-offs and print where a hand-off's time goes. Costs a little
//!   on every event, so the numbers of that run are slightly worse.
//!
//! What is measured (with the targets set for each):
//! - the noise: each of the next three rows measures its reference twice, interleaved
//!   exactly as the library and the reference are, and prints that A/A ratio (its target
//!   band 0.97..1.03) beside the library's; every ratio is the median of its rounds' ratios,
//!   shown with its lowest and highest round. A difference inside the A/A spread is noise.
//! - uncontended: 64 tasks, each acquire + unlock on its own name; pairs/s over 7 rounds of
//!   2 s per side (median), each round cut in 12 slices per side in which the library, the ceiling and
//!   the ceiling again take turns. The ceiling: the library's own two scripts sent with
//!   plain `redis` on one multiplexed connection by 64 tasks. The bound: `redis-benchmark`
//!   (C, 64 clients, 16 pipelined) sending the same two scripts on random keys. A full run
//!   also times the ceiling with its connection driven from a thread of its own, as the
//!   library's is (a fourth side, no target): whether the thread crossing or the library's
//!   own work per pair is the gap.
//!   fast_lock: the fast lock kind against rslock's lock + unlock, the same way.
//! - single_task: p50 of one acquire against the p50 of one plain EVALSHA of the acquire
//!   script (and of a second one, the A/A), 7 rounds of 1000 samples each, taken in turn
//!   (median of the round p50s).
//! - handoff: 2000 times, a holder in one client unlocks while a waiter in another client is
//!   parked (subscribed, refused twice); from just before the unlock call to the waiter's
//!   acquire returning. The limit is the p50 of PUBLISH-to-delivery on another connection plus
//!   the p50 of one EVALSHA sent right after, each sample starting after the same idle time as
//!   a hand-off (threads parked, as they are while a waiter waits); the table also shows the
//!   limit measured back to back. rslock's p50 is over 80 hand-offs (its waiter polls).
//! - spin_handoff: 200 hand-offs of the spin lock (no pub/sub): as handoff, but the waiter
//!   polls at its backoff's cap (128 ms) and the unlock falls at a random point of its pause;
//!   beside the handoff row, and its p50 over handoff's.
//! - herd: 1000 waiters in one client on one name behind a holder in another client; commands
//!   sent from the holder's unlock to the last waiter's unlock, per hand-off (1000).
//! - replica: a primary with one replica, both clients with their defaults (so both wait for
//!   the replica after each lock): p50 of one acquire against Redisson's `lock()` in
//!   master/slave mode, 1000 samples a round each, in turn, round by round.
//! - watchdog: 10,000 locks held with a 3 s watchdog lease (renewals every second); renewal
//!   calls over 3 intervals after a first renewal (which also loads the script), and RSS
//!   growth per held lock at steady state (after the renewals, still held).
//! - web: an actix-web handler under `#[distributed_lock]` against the same handler bare,
//!   16 concurrent HTTP users on distinct orders, 5 rounds of 100 requests per user and
//!   route: the added p50 per request against the p50 of one bare acquire + unlock pair
//!   (16 concurrent tasks, measured between the HTTP rounds).
//! - connections_per_node: the herd client's connections in CLIENT LIST while the herd runs.
//! - cluster: the uncontended loop on a Redis Cluster of 3 primaries of our own
//!   against the same loop on the single node, rounds interleaved.
//! - inspect_list (needs `--features inspect`, which scripts/bench passes): the
//!   inspector's `list` over 100,000 locks of every kind plus 10,000 other keys, written in
//!   Redisson's layout in a database of their own; the median of 5 runs against 2 s.
//!
//! Counting Redis commands: `INFO commandstats` also counts the commands a Lua script runs
//! inside the server (`hexists`, `pexpire`, ...). The command counts reported here are the
//! commands clients sent: the delta of every command, less the commands called inside the
//! library's scripts (read from those scripts) and less this program's own inspection
//! commands. The human table also shows the raw delta.
//!
//! `--curves` (`scripts/bench --curves`) runs the cost curves instead: see
//! `lock_bench/curves/mod.rs`.
//!
//! When cargo runs this file as a test (`cargo test --all-targets`, nextest), it lists no
//! tests and does nothing: a benchmark is not a test.

use actix_distributed_lock_actors::{ClientConfig, LockClient, LockGuard, RedLock};
use futures_util::future::join;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use redis::Script;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The library's own scripts: the ceiling sends exactly these.
const ACQUIRE_LUA: &str = include_str!("../src/lock/kind/reentrant/acquire.lua");
const UNLOCK_LUA: &str = concat!(
    // The line the library puts first on a single server (classic pub/sub), then the
    // `publish` function the unlock script publishes with (as lock/kind.rs joins them).
    "local publish_command = 'publish'\n",
    include_str!("../src/node/publish.lua"),
    "\n",
    include_str!("../src/lock/kind/reentrant/unlock.lua")
);

/// Concurrent tasks in the throughput scenarios.
const TASKS: usize = 64;
/// Rounds of the other scenarios; the reported number is the median.
const ROUNDS: usize = 5;
/// Rounds of the rows with an A/A row (uncontended, fast_lock, single_task) in a full run,
/// and in a quick one: enough that the A/A row stays within its band.
const AA_ROUNDS: usize = 7;
const QUICK_ROUNDS: usize = 5;
/// Samples per round in the single-task scenario.
const SINGLE_SAMPLES: usize = 1000;
/// Hand-offs measured for the library (and the plain-redis limit).
const HANDOFFS: usize = 2000;
/// How long nothing happens before a hand-off's unlock (the waiter parks first) and before
/// each sample of the limit.
const IDLE_BEFORE_UNLOCK: Duration = Duration::from_millis(1);
/// Hand-offs measured for rslock: each one lasts its retry delay (up to 200 ms), so fewer.
const RSLOCK_HANDOFFS: usize = 80;
/// Hand-offs measured for the spin lock: each one lasts a few hundred ms, so fewer.
const SPIN_HANDOFFS: usize = 200;
/// Waiters in the herd.
const HERD: usize = 1000;
/// Locks held under the watchdog.
const HELD: usize = 10_000;
/// Watchdog lease in the watchdog scenario: renewals every second.
const WATCHDOG_TIMEOUT: Duration = Duration::from_secs(3);
/// Intervals the watchdog scenario counts renewals over.
const INTERVALS: u32 = 3;
/// Lease of the ceiling's and rslock's locks, in ms (the library's default watchdog lease).
const LEASE_MS: u64 = 30_000;
/// Nodes of the RedLock scenario (not measured until the kind exists).
const REDLOCK_NODES: usize = 5;
/// Its quorum.
const REDLOCK_QUORUM: usize = REDLOCK_NODES / 2 + 1;
/// CLIENT SETNAME of this program's inspection connection.
const INSPECTOR_NAME: &str = "lock-bench-inspector";

/// Redisson measured beside the library. In a folder of its own: a file directly
/// in benches/ would be a benchmark target of its own to cargo.
#[path = "lock_bench/redisson.rs"]
mod redisson;

/// Whether the Redisson peer's jar is newer than its sources (shared with the tests).
#[path = "../../tests/redisson-peer/jar_freshness.rs"]
// Clippy counts one file included by two crates (bench and tests) as loaded twice.
#[allow(clippy::duplicate_mod)]
mod jar_freshness;

// One file per scenario, in a folder of its own (a file directly in benches/ would be a
// benchmark target of its own to cargo).
#[path = "lock_bench/cluster.rs"]
mod cluster;
/// The cost curves (`scripts/bench --curves`), one file per curve.
#[path = "lock_bench/curves/mod.rs"]
mod curves;
#[path = "lock_bench/fast_lock.rs"]
mod fast_lock;
#[path = "lock_bench/handoff.rs"]
mod handoff;
#[path = "lock_bench/herd.rs"]
mod herd;
#[path = "lock_bench/inspect_list.rs"]
mod inspect_list;
#[path = "lock_bench/inspector.rs"]
mod inspector;
#[path = "lock_bench/redlock.rs"]
mod redlock;
#[path = "lock_bench/replica.rs"]
mod replica;
#[path = "lock_bench/server.rs"]
mod server;
#[path = "lock_bench/single.rs"]
mod single;
#[path = "lock_bench/spin_handoff.rs"]
mod spin_handoff;
#[path = "lock_bench/stats.rs"]
mod stats;
#[path = "lock_bench/uncontended.rs"]
mod uncontended;
#[path = "lock_bench/watchdog.rs"]
mod watchdog;
#[path = "lock_bench/web.rs"]
mod web;
use cluster::*;
use fast_lock::*;
use handoff::*;
use herd::*;
use inspect_list::*;
use inspector::*;
use redlock::*;
use replica::*;
use server::*;
use single::*;
use spin_handoff::*;
use stats::*;
use uncontended::*;
use watchdog::*;
use web::*;

// The tests' support code starts and stops the cluster (redis-server + redis-cli).
#[path = "../../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == curves::WAITER_FLAG) {
        return curves::waiter_main(&args); // a waiter process of the hand-off curve
    }
    if args.iter().any(|a| a == "--list") {
        return; // libtest/nextest listing: there are no tests here
    }
    if !args.iter().any(|a| a == "--bench") {
        eprintln!("lock_bench is a benchmark, not a test; run scripts/bench");
        return;
    }
    if args.iter().any(|a| a == "--curves") {
        return curves::main();
    }
    let knobs = Knobs::from_env(args.iter().any(|a| a == "--quick"));
    if knobs.trace {
        tracing::subscriber::set_global_default(Timeline).expect("no other tracing subscriber");
    }
    eprintln!("lock_bench: starting redis-server");
    // Killed on drop, so also when a scenario panics; and by the kernel if we are killed.
    let server = RedisProcess::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let report = runtime.block_on(run(&server.url(), &knobs));
    drop(runtime);
    drop(server);
    print_table(&report.rows);
    println!("{}", report.json);
}

/// Which scenarios to run and how long a throughput round lasts.
struct Knobs {
    only: Option<HashSet<String>>,
    round: Duration,
    /// Rounds of the rows with an A/A row.
    rounds: usize,
    /// `--quick`: the uncontended, fast-lock and single-task rows with their A/A rows only,
    /// shorter, without Redisson and without the `redis-benchmark` bound.
    quick: bool,
    side: Side,
    trace: bool,
}

/// Which side of a comparison to measure (only for profiling; the benchmark measures both).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Both,
    Library,
    Reference,
}

impl Knobs {
    fn from_env(quick: bool) -> Self {
        let only = std::env::var("LOCK_BENCH_ONLY").ok().map(|list| {
            list.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        });
        let only = match (quick, only) {
            (true, None) => Some(
                ["uncontended", "fast_lock", "single_task"]
                    .map(String::from)
                    .into(),
            ),
            (_, only) => only,
        };
        let round_ms = std::env::var("LOCK_BENCH_ROUND_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
            .unwrap_or(if quick { 1000 } else { 2000 });
        Knobs {
            only,
            round: Duration::from_millis(round_ms),
            rounds: if quick { QUICK_ROUNDS } else { AA_ROUNDS },
            quick,
            side: match std::env::var("LOCK_BENCH_SIDE").as_deref() {
                Ok("library") => Side::Library,
                Ok("reference") => Side::Reference,
                _ => Side::Both,
            },
            trace: std::env::var("LOCK_BENCH_TRACE").is_ok_and(|v| v == "1"),
        }
    }

    fn wants(&self, scenario: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|only| only.contains(scenario))
    }
}

struct Report {
    rows: Vec<Row>,
    /// One line of JSON with exactly the report's keys, in their order; `null` = not measured.
    json: String,
}

#[derive(Serialize)]
struct BenchJson {
    uncontended: UncontendedJson,
    fast_lock: FastLockJson,
    single_task: SingleTaskJson,
    handoff: HandoffJson,
    spin_handoff: SpinHandoffJson,
    herd: HerdJson,
    redlock: RedlockJson,
    replica: ReplicaJson,
    watchdog: WatchdogJson,
    web: WebJson,
    connections_per_node: Option<usize>,
    cluster: ClusterJson,
    redisson: Option<redisson::RedissonJson>,
    inspect_list: InspectListJson,
}

#[derive(Serialize)]
struct InspectListJson {
    locks: usize,
    other_keys: usize,
    median_ms: Option<f64>,
    listed: Option<usize>,
    target_ms: f64,
}

#[derive(Serialize)]
struct ClusterJson {
    primaries: usize,
    pairs_per_s: Option<f64>,
    single_node_pairs_per_s: Option<f64>,
    ratio: Option<f64>,
}

#[derive(Serialize)]
struct UncontendedJson {
    tasks: usize,
    pairs_per_s: Option<f64>,
    ceiling_pairs_per_s: Option<f64>,
    /// The median of the rounds' ratios.
    ratio_to_ceiling: Option<f64>,
    ratio_rounds: Option<SpreadJson>,
    /// The ceiling against itself.
    aa: Option<SpreadJson>,
    /// The ceiling driven from another thread against the ceiling (full runs only).
    apart: Option<SpreadJson>,
    bound_pairs_per_s: Option<f64>,
    ratio_to_bound: Option<f64>,
    redisson_pairs_per_s: Option<f64>,
    ratio_to_redisson: Option<f64>,
}

#[derive(Serialize)]
struct FastLockJson {
    pairs_per_s: Option<f64>,
    rslock_pairs_per_s: Option<f64>,
    /// The median of the rounds' ratios.
    ratio_to_rslock: Option<f64>,
    ratio_rounds: Option<SpreadJson>,
    /// rslock against itself.
    aa: Option<SpreadJson>,
}

#[derive(Serialize)]
struct SingleTaskJson {
    acquire_p50_us: Option<f64>,
    eval_rtt_p50_us: Option<f64>,
    /// The median of the rounds' ratios.
    ratio: Option<f64>,
    ratio_rounds: Option<SpreadJson>,
    /// The EVALSHA p50 against itself.
    aa: Option<SpreadJson>,
    redisson_acquire_p50_us: Option<f64>,
    ratio_to_redisson: Option<f64>,
}

#[derive(Serialize)]
struct HandoffJson {
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    limit_us: Option<f64>,
    ratio_to_limit: Option<f64>,
    rslock_p50_us: Option<f64>,
    redisson_p50_us: Option<f64>,
    redisson_p99_us: Option<f64>,
    ratio_to_redisson: Option<f64>,
    p99_ratio_to_redisson: Option<f64>,
}

#[derive(Serialize)]
struct SpinHandoffJson {
    handoffs: usize,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    ratio_to_handoff: Option<f64>,
}

#[derive(Serialize)]
struct HerdJson {
    waiters: usize,
    commands_per_handoff: Option<f64>,
    total_s: Option<f64>,
}

#[derive(Serialize)]
struct RedlockJson {
    nodes: usize,
    p50_us: Option<f64>,
    single_p50_us: Option<f64>,
    ratio: Option<f64>,
    one_node_paused_p50_us: Option<f64>,
    ratio_to_floor: Option<f64>,
}

#[derive(Serialize)]
struct WebJson {
    bare_p50_us: Option<f64>,
    locked_p50_us: Option<f64>,
    added_p50_us: Option<f64>,
    pair_p50_us: Option<f64>,
    ratio_to_pair: Option<f64>,
}

#[derive(Serialize)]
struct WatchdogJson {
    held: usize,
    renew_calls_per_interval: Option<f64>,
    rss_bytes_per_lock: Option<f64>,
    redisson_rss_bytes_per_lock: Option<f64>,
}

/// One line of the human table.
struct Row {
    scenario: &'static str,
    metric: String,
    value: Option<f64>,
    target: String,
    met: Option<bool>,
}

impl Row {
    fn new(scenario: &'static str, metric: &str, value: Option<f64>) -> Self {
        Row {
            scenario,
            metric: metric.to_string(),
            value,
            target: String::new(),
            met: None,
        }
    }

    fn target(mut self, target: &str, met: Option<bool>) -> Self {
        self.target = target.to_string();
        self.met = met;
        self
    }
}

async fn run(url: &str, knobs: &Knobs) -> Report {
    let started = Instant::now();
    let mut inspector = Inspector::connect(url).await;
    let inner = script_inner_commands();
    let mut rows = Vec::new();

    // First, so the RSS growth is not hidden by memory that earlier scenarios freed.
    let watchdog = if knobs.wants("watchdog") {
        Some(watchdog(url, &mut inspector, &inner, &mut rows).await)
    } else {
        None
    };
    let mut redisson = if knobs.wants("redisson") {
        Some(redisson::Redisson::start(url, &mut inspector).await)
    } else {
        None
    };
    let uncontended = if knobs.wants("uncontended") {
        Some(uncontended(url, knobs, &mut inspector, redisson.as_mut(), &mut rows).await)
    } else {
        None
    };
    let fast = if knobs.wants("fast_lock") {
        Some(fast_lock(url, knobs, &mut rows).await)
    } else {
        None
    };
    let single = if knobs.wants("single_task") {
        Some(single_task(url, knobs, redisson.as_mut(), &mut rows).await)
    } else {
        None
    };
    let handoff = if knobs.wants("handoff") {
        Some(
            handoff(
                url,
                &mut inspector,
                knobs.trace,
                redisson.as_mut(),
                &mut rows,
            )
            .await,
        )
    } else {
        None
    };
    let spin = if knobs.wants("spin_handoff") {
        let pubsub_p50 = handoff.map(|h| h.p50_us);
        Some(spin_handoff(url, pubsub_p50, &mut rows).await)
    } else {
        None
    };
    let herd = if knobs.wants("herd") {
        Some(herd(url, &mut inspector, &inner, &mut rows).await)
    } else {
        None
    };
    let redlock = if knobs.wants("redlock") {
        Some(redlock(&mut rows).await)
    } else {
        None
    };
    let replica = if knobs.wants("replica") {
        Some(replica(knobs, redisson.is_some(), &mut rows).await)
    } else {
        None
    };
    let web = if knobs.wants("web") {
        Some(web_row(url, &mut rows).await)
    } else {
        None
    };
    let cluster = if knobs.wants("cluster") {
        Some(cluster(url, knobs.round, &mut rows).await)
    } else {
        None
    };
    // Last: its 100,000 locks (in a database of their own) are gone before it returns.
    let inspect = if knobs.wants("inspect_list") {
        inspect_list(url, &mut rows).await
    } else {
        None
    };
    if let Some(r) = redisson.as_mut() {
        let rss = watchdog.map(|w| w.rss_per_lock);
        r.memory(rss, herd.map(|h| h.connections), &mut rows).await;
        r.shutdown().await;
    }
    eprintln!(
        "lock_bench: done in {:.0} s",
        started.elapsed().as_secs_f64()
    );

    let json = BenchJson {
        uncontended: UncontendedJson {
            tasks: TASKS,
            pairs_per_s: uncontended.map(|u| u.pairs.round()),
            ceiling_pairs_per_s: uncontended.map(|u| u.ceiling.round()),
            ratio_to_ceiling: uncontended.map(|u| round3(u.ratio.median)),
            ratio_rounds: uncontended.map(|u| u.ratio.json()),
            aa: uncontended.map(|u| u.aa.json()),
            apart: uncontended.and_then(|u| u.apart).map(|a| a.json()),
            bound_pairs_per_s: uncontended.and_then(|u| u.bound).map(f64::round),
            ratio_to_bound: uncontended.and_then(|u| u.bound.map(|b| round3(u.pairs / b))),
            redisson_pairs_per_s: redisson
                .as_ref()
                .and_then(|r| r.uncontended)
                .map(f64::round),
            ratio_to_redisson: redisson::ratio(
                uncontended.map(|u| u.pairs),
                redisson.as_ref().and_then(|r| r.uncontended),
            ),
        },
        fast_lock: FastLockJson {
            pairs_per_s: fast.as_ref().map(|f| f.pairs.round()),
            rslock_pairs_per_s: fast.as_ref().map(|f| f.rslock.round()),
            ratio_to_rslock: fast.as_ref().map(|f| round3(f.ratio.median)),
            ratio_rounds: fast.as_ref().map(|f| f.ratio.json()),
            aa: fast.as_ref().map(|f| f.aa.json()),
        },
        single_task: SingleTaskJson {
            acquire_p50_us: single.map(|s| round1(s.acquire_us)),
            eval_rtt_p50_us: single.map(|s| round1(s.rtt_us)),
            ratio: single.map(|s| round3(s.ratio.median)),
            ratio_rounds: single.map(|s| s.ratio.json()),
            aa: single.map(|s| s.aa.json()),
            redisson_acquire_p50_us: redisson::us(redisson.as_ref().and_then(|r| r.single_p50_us)),
            ratio_to_redisson: redisson::ratio(
                single.map(|s| s.acquire_us),
                redisson.as_ref().and_then(|r| r.single_p50_us),
            ),
        },
        handoff: HandoffJson {
            p50_us: handoff.map(|h| round1(h.p50_us)),
            p99_us: handoff.map(|h| round1(h.p99_us)),
            limit_us: handoff.map(|h| round1(h.limit_us)),
            ratio_to_limit: handoff.map(|h| round3(h.p50_us / h.limit_us)),
            rslock_p50_us: handoff.map(|h| round1(h.rslock_p50_us)),
            redisson_p50_us: redisson::us(redisson.as_ref().and_then(|r| r.handoff).map(|h| h.0)),
            redisson_p99_us: redisson::us(redisson.as_ref().and_then(|r| r.handoff).map(|h| h.1)),
            ratio_to_redisson: redisson::ratio(
                handoff.map(|h| h.p50_us),
                redisson.as_ref().and_then(|r| r.handoff).map(|h| h.0),
            ),
            p99_ratio_to_redisson: redisson::ratio(
                handoff.map(|h| h.p99_us),
                redisson.as_ref().and_then(|r| r.handoff).map(|h| h.1),
            ),
        },
        spin_handoff: SpinHandoffJson {
            handoffs: SPIN_HANDOFFS,
            p50_us: spin.map(|s| round1(s.p50_us)),
            p99_us: spin.map(|s| round1(s.p99_us)),
            ratio_to_handoff: spin.zip(handoff).map(|(s, h)| round3(s.p50_us / h.p50_us)),
        },
        herd: HerdJson {
            waiters: HERD,
            commands_per_handoff: herd.map(|h| round3(h.commands_per_handoff)),
            total_s: herd.map(|h| round3(h.total_s)),
        },
        redlock: RedlockJson {
            nodes: REDLOCK_NODES,
            p50_us: redlock.as_ref().map(|r| round1(r.p50_us)),
            single_p50_us: redlock.as_ref().map(|r| round1(r.single_p50_us)),
            ratio: redlock.as_ref().map(|r| round3(r.p50_us / r.single_p50_us)),
            one_node_paused_p50_us: redlock.as_ref().map(|r| round1(r.paused_p50_us)),
            ratio_to_floor: redlock
                .as_ref()
                .map(|r| round3(r.p50_us / r.quorum_floor_us)),
        },
        replica: ReplicaJson::of(replica),
        watchdog: WatchdogJson {
            held: HELD,
            renew_calls_per_interval: watchdog.map(|w| round3(w.calls_per_interval)),
            rss_bytes_per_lock: watchdog.map(|w| w.rss_per_lock.round()),
            redisson_rss_bytes_per_lock: redisson.as_ref().and_then(|r| r.rss_per_lock()),
        },
        web: WebJson {
            bare_p50_us: web.map(|w| round1(w.bare_us)),
            locked_p50_us: web.map(|w| round1(w.locked_us)),
            added_p50_us: web.map(|w| round1(w.added_us())),
            pair_p50_us: web.map(|w| round1(w.pair_us)),
            ratio_to_pair: web.map(|w| round3(w.ratio.median)),
        },
        connections_per_node: herd.map(|h| h.connections),
        cluster: ClusterJson {
            primaries: CLUSTER_PRIMARIES,
            pairs_per_s: cluster.map(|c| c.pairs.round()),
            single_node_pairs_per_s: cluster.map(|c| c.single.round()),
            ratio: cluster.map(|c| round3(c.pairs / c.single)),
        },
        redisson: redisson.as_ref().map(redisson::Redisson::json),
        inspect_list: InspectListJson {
            locks: INSPECT_LOCKS,
            other_keys: INSPECT_OTHER_KEYS,
            median_ms: inspect.map(|i| round1(i.median_ms)),
            listed: inspect.map(|i| i.listed),
            target_ms: INSPECT_TARGET_MS,
        },
    };
    let json = serde_json::to_string(&json).expect("the report serializes");
    Report { rows, json }
}

fn print_table(rows: &[Row]) {
    eprintln!();
    eprintln!(
        "{:<13} {:<44} {:>14}  {:<20} met",
        "scenario", "metric", "value", "target"
    );
    eprintln!("{}", "-".repeat(100));
    for row in rows {
        let value = match row.value {
            None => "null".to_string(),
            Some(v) if v >= 1000.0 => format!("{v:.0}"),
            Some(v) => format!("{v:.3}"),
        };
        let met = match row.met {
            None if row.target.is_empty() => "",
            None => "n/a",
            Some(true) => "yes",
            Some(false) => "NO",
        };
        eprintln!(
            "{:<13} {:<44} {:>14}  {:<20} {}",
            row.scenario, row.metric, value, row.target, met
        );
    }
    eprintln!();
}
