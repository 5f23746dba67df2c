//! The speed benchmark of issue 6: how close the lock actors come to what Redis itself allows,
//! and how they compare with `rslock`.
//!
//! Run it with `scripts/bench` (or `cargo bench -p lock-actors --bench lock_bench`). It starts
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
//! - `LOCK_BENCH_TRACE=1`: record the library's own `tracing` events (`released`, `woken`,
//!   `acquired`) during the hand-offs and print where a hand-off's time goes. Costs a little
//!   on every event, so the numbers of that run are slightly worse.
//!
//! What is measured (the targets are issue 6's):
//! - uncontended: 64 tasks, each acquire + unlock on its own name; pairs/s over 5 rounds of
//!   2 s (median), interleaved with the ceiling: the library's own two scripts sent with
//!   plain `redis` on one multiplexed connection by 64 tasks. fast_lock: the fast lock kind
//!   against rslock's lock + unlock, the same way.
//! - single_task: p50 of one acquire against the p50 of one plain EVALSHA of the acquire
//!   script, 5 rounds of 1000 interleaved samples (median of the round p50s).
//! - handoff: 2000 times, a holder in one client unlocks while a waiter in another client is
//!   parked (subscribed, refused twice); from just before the unlock call to the waiter's
//!   acquire returning. The limit is the p50 of PUBLISH-to-delivery on another connection plus
//!   the p50 of one EVALSHA sent right after, each sample starting after the same idle time as
//!   a hand-off (threads parked, as they are while a waiter waits); the table also shows the
//!   limit measured back to back. rslock's p50 is over 80 hand-offs (its waiter polls).
//! - herd: 1000 waiters in one client on one name behind a holder in another client; commands
//!   sent from the holder's unlock to the last waiter's unlock, per hand-off (1000).
//! - watchdog: 10,000 locks held with a 3 s watchdog lease (renewals every second); renewal
//!   calls over 3 intervals after a first renewal (which also loads the script), and RSS
//!   growth per held lock at steady state (after the renewals, still held).
//! - connections_per_node: the herd client's connections in CLIENT LIST while the herd runs.
//! - cluster (issue 8): the uncontended loop on a Redis Cluster of 3 primaries of our own
//!   against the same loop on the single node, rounds interleaved.
//!
//! Counting Redis commands: `INFO commandstats` also counts the commands a Lua script runs
//! inside the server (`hexists`, `pexpire`, ...). The command counts reported here are the
//! commands clients sent: the delta of every command, less the commands called inside the
//! library's scripts (read from those scripts) and less this program's own inspection
//! commands. The human table also shows the raw delta.
//!
//! When cargo runs this file as a test (`cargo test --all-targets`, nextest), it lists no
//! tests and does nothing: a benchmark is not a test.

use futures_util::future::join;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use lock_actors::{ClientConfig, LockClient, LockGuard, RedLock};
use redis::aio::MultiplexedConnection;
use redis::Script;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The library's own scripts: the ceiling sends exactly these.
const ACQUIRE_LUA: &str = include_str!("../src/reentrant/acquire.lua");
const UNLOCK_LUA: &str = concat!(
    // The line the library puts first on a single server (classic pub/sub).
    "local publish_command = 'publish'\n",
    include_str!("../src/reentrant/unlock.lua")
);

/// Concurrent tasks in the throughput scenarios.
const TASKS: usize = 64;
/// Throughput rounds; the reported number is the median.
const ROUNDS: usize = 5;
/// Samples per round in the single-task scenario.
const SINGLE_SAMPLES: usize = 1000;
/// Hand-offs measured for the library (and the plain-redis limit).
const HANDOFFS: usize = 2000;
/// How long nothing happens before a hand-off's unlock (the waiter parks first) and before
/// each sample of the limit.
const IDLE_BEFORE_UNLOCK: Duration = Duration::from_millis(1);
/// Hand-offs measured for rslock: each one lasts its retry delay (up to 200 ms), so fewer.
const RSLOCK_HANDOFFS: usize = 80;
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

/// Redisson measured beside the library (issue 15). In a folder of its own: a file directly
/// in benches/ would be a benchmark target of its own to cargo.
#[path = "lock_bench/redisson.rs"]
mod redisson;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        return; // libtest/nextest listing: there are no tests here
    }
    if !args.iter().any(|a| a == "--bench") {
        eprintln!("lock_bench is a benchmark, not a test; run scripts/bench");
        return;
    }
    let knobs = Knobs::from_env();
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
    fn from_env() -> Self {
        let only = std::env::var("LOCK_BENCH_ONLY").ok().map(|list| {
            list.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        });
        let round_ms = std::env::var("LOCK_BENCH_ROUND_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
            .unwrap_or(2000);
        Knobs {
            only,
            round: Duration::from_millis(round_ms),
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
    /// One line of JSON with exactly the keys of issue 6, in its order; `null` = not measured.
    json: String,
}

#[derive(Serialize)]
struct BenchJson {
    uncontended: UncontendedJson,
    fast_lock: FastLockJson,
    single_task: SingleTaskJson,
    handoff: HandoffJson,
    herd: HerdJson,
    redlock: RedlockJson,
    watchdog: WatchdogJson,
    connections_per_node: Option<usize>,
    cluster: ClusterJson,
    redisson: Option<redisson::RedissonJson>,
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
    ratio_to_ceiling: Option<f64>,
    redisson_pairs_per_s: Option<f64>,
    ratio_to_redisson: Option<f64>,
}

#[derive(Serialize)]
struct FastLockJson {
    pairs_per_s: Option<f64>,
    rslock_pairs_per_s: Option<f64>,
    ratio_to_rslock: Option<f64>,
    min_round_ratio: Option<f64>,
}

#[derive(Serialize)]
struct SingleTaskJson {
    acquire_p50_us: Option<f64>,
    eval_rtt_p50_us: Option<f64>,
    ratio: Option<f64>,
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
        Some(fast_lock(url, knobs.round, &mut rows).await)
    } else {
        None
    };
    let single = if knobs.wants("single_task") {
        Some(single_task(url, knobs.side, redisson.as_mut(), &mut rows).await)
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
    let cluster = if knobs.wants("cluster") {
        Some(cluster(url, knobs.round, &mut rows).await)
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
            ratio_to_ceiling: uncontended.map(|u| round3(u.pairs / u.ceiling)),
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
            ratio_to_rslock: fast.as_ref().map(|f| round3(f.pairs / f.rslock)),
            min_round_ratio: fast.as_ref().map(|f| round3(f.min_round_ratio)),
        },
        single_task: SingleTaskJson {
            acquire_p50_us: single.map(|s| round1(s.acquire_us)),
            eval_rtt_p50_us: single.map(|s| round1(s.rtt_us)),
            ratio: single.map(|s| round3(s.acquire_us / s.rtt_us)),
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
        watchdog: WatchdogJson {
            held: HELD,
            renew_calls_per_interval: watchdog.map(|w| round3(w.calls_per_interval)),
            rss_bytes_per_lock: watchdog.map(|w| w.rss_per_lock.round()),
            redisson_rss_bytes_per_lock: redisson.as_ref().and_then(|r| r.rss_per_lock()),
        },
        connections_per_node: herd.map(|h| h.connections),
        cluster: ClusterJson {
            primaries: CLUSTER_PRIMARIES,
            pairs_per_s: cluster.map(|c| c.pairs.round()),
            single_node_pairs_per_s: cluster.map(|c| c.single.round()),
            ratio: cluster.map(|c| round3(c.pairs / c.single)),
        },
        redisson: redisson.as_ref().map(redisson::Redisson::json),
    };
    let json = serde_json::to_string(&json).expect("the report serializes");
    Report { rows, json }
}

// ---------------------------------------------------------------------------------------
// uncontended: 64 tasks, acquire + unlock on their own names, against the same two scripts
// sent with plain redis on one multiplexed connection.

#[derive(Clone, Copy)]
struct Uncontended {
    pairs: f64,
    ceiling: f64,
}

async fn uncontended(
    url: &str,
    knobs: &Knobs,
    inspector: &mut Inspector,
    mut redisson: Option<&mut redisson::Redisson>,
    rows: &mut Vec<Row>,
) -> Uncontended {
    let round = knobs.round;
    eprintln!("[uncontended] {TASKS} tasks, {ROUNDS} rounds of {round:?} each, library and ceiling interleaved");
    let client = connect(ClientConfig::new(url)).await;
    let conn = plain_connection(url).await;
    let scripts = Arc::new((Script::new(ACQUIRE_LUA), Script::new(UNLOCK_LUA)));
    let mut library = Vec::new();
    let mut ceiling = Vec::new();
    for r in 0..ROUNDS {
        // Alternate which goes first, so a drift of the machine hits both alike.
        let (c, l) = if knobs.side == Side::Library {
            (f64::NAN, library_round(&client, round).await)
        } else if knobs.side == Side::Reference {
            (
                ceiling_round(conn.clone(), scripts.clone(), round).await,
                f64::NAN,
            )
        } else if r % 2 == 0 {
            let c = ceiling_round(conn.clone(), scripts.clone(), round).await;
            (c, library_round(&client, round).await)
        } else {
            let l = library_round(&client, round).await;
            (ceiling_round(conn.clone(), scripts.clone(), round).await, l)
        };
        eprintln!(
            "[uncontended] round {}: library {:.0} pairs/s, ceiling {:.0} pairs/s ({:.2})",
            r + 1,
            l,
            c,
            l / c
        );
        library.push(l);
        ceiling.push(c);
        if let Some(java) = redisson.as_deref_mut() {
            java.uncontended_round(round, inspector).await;
        }
    }
    client.shutdown();
    let result = Uncontended {
        pairs: median(&mut library),
        ceiling: median(&mut ceiling),
    };
    let ratio = result.pairs / result.ceiling;
    rows.push(Row::new(
        "uncontended",
        "pairs/s, library",
        Some(result.pairs),
    ));
    rows.push(Row::new(
        "uncontended",
        "pairs/s, ceiling (plain redis)",
        Some(result.ceiling),
    ));
    rows.push(
        Row::new("uncontended", "ratio_to_ceiling", Some(ratio))
            .target(">= 0.90", Some(ratio >= 0.90)),
    );
    if let Some(r) = redisson {
        r.uncontended_rows(result.pairs, rows);
    }
    result
}

/// Runs `TASKS` copies of `body` until stopped and returns the pairs per second they made
/// during `round` (after a short warm-up).
async fn throughput_round<F, Fut>(round: Duration, mut body: F) -> f64
where
    F: FnMut(usize, Arc<AtomicBool>, Arc<AtomicU64>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| tokio::spawn(body(i, stop.clone(), count.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = count.load(Ordering::Relaxed);
    let t0 = Instant::now();
    tokio::time::sleep(round).await;
    let done = count.load(Ordering::Relaxed) - before;
    let elapsed = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("a benchmark task panicked");
    }
    done as f64 / elapsed.as_secs_f64()
}

async fn library_round(client: &LockClient, round: Duration) -> f64 {
    throughput_round(round, |i, stop, count| {
        let lock = client
            .lock(&format!("bench:uncontended:{i}"))
            .expect("valid name");
        async move {
            while !stop.load(Ordering::Relaxed) {
                let guard = lock.acquire().await.expect("uncontended acquire");
                guard.unlock().await.expect("uncontended unlock");
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await
}

async fn ceiling_round(
    conn: MultiplexedConnection,
    scripts: Arc<(Script, Script)>,
    round: Duration,
) -> f64 {
    let owner = uuid::Uuid::new_v4();
    throughput_round(round, |i, stop, count| {
        let mut conn = conn.clone();
        let scripts = scripts.clone();
        let name = format!("bench:ceiling:{i}");
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let field = format!("{owner}:{i}");
        async move {
            while !stop.load(Ordering::Relaxed) {
                let taken: Option<i64> = scripts
                    .0
                    .key(&name)
                    .arg(LEASE_MS)
                    .arg(&field)
                    .invoke_async(&mut conn)
                    .await
                    .expect("ceiling acquire");
                assert_eq!(taken, None, "ceiling lock {name} was busy");
                let freed: Option<i64> = scripts
                    .1
                    .key(&name)
                    .key(&channel)
                    .arg("0")
                    .arg(LEASE_MS)
                    .arg(&field)
                    .invoke_async(&mut conn)
                    .await
                    .expect("ceiling unlock");
                assert_eq!(freed, Some(1), "ceiling unlock of {name}");
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await
}

// ---------------------------------------------------------------------------------------
// fast_lock: our non-reentrant fast lock against rslock's lock + unlock, same loop, same
// task count, rounds alternating which side goes first.

struct FastLock {
    pairs: f64,
    rslock: f64,
    /// The lowest library / rslock ratio of one round.
    min_round_ratio: f64,
}

async fn fast_lock(url: &str, round: Duration, rows: &mut Vec<Row>) -> FastLock {
    eprintln!("[fast_lock] {TASKS} tasks, {ROUNDS} rounds of {round:?} per side");
    let client = LockClient::connect(ClientConfig::new(url))
        .await
        .expect("connect the benchmark client");
    let manager = rslock::LockManager::new(vec![url.to_string()]);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        let (l, o) = if r % 2 == 0 {
            let o = rslock_round(&manager, round).await;
            (fast_lock_round(&client, round).await, o)
        } else {
            let l = fast_lock_round(&client, round).await;
            (l, rslock_round(&manager, round).await)
        };
        eprintln!(
            "[fast_lock] round {}: library {l:.0} pairs/s, rslock {o:.0} pairs/s ({:.2})",
            r + 1,
            l / o
        );
        ours.push(l);
        theirs.push(o);
    }
    client.shutdown();
    let min_round_ratio = ours
        .iter()
        .zip(&theirs)
        .map(|(l, o)| l / o)
        .fold(f64::INFINITY, f64::min);
    let result = FastLock {
        pairs: median(&mut ours),
        rslock: median(&mut theirs),
        min_round_ratio,
    };
    let ratio = result.pairs / result.rslock;
    rows.push(Row::new(
        "fast_lock",
        "pairs/s, library",
        Some(result.pairs),
    ));
    rows.push(Row::new(
        "fast_lock",
        "pairs/s, rslock",
        Some(result.rslock),
    ));
    rows.push(
        Row::new("fast_lock", "ratio_to_rslock", Some(ratio)).target(">= 1.0", Some(ratio >= 1.0)),
    );
    rows.push(
        Row::new("fast_lock", "min_round_ratio", Some(min_round_ratio))
            .target(">= 1.05", Some(min_round_ratio >= 1.05)),
    );
    result
}

async fn fast_lock_round(client: &LockClient, round: Duration) -> f64 {
    throughput_round(round, |i, stop, count| {
        let lock = client
            .fast_lock(&format!("bench:fast:{i}"))
            .expect("valid name");
        async move {
            while !stop.load(Ordering::Relaxed) {
                let guard = lock.acquire().await.expect("uncontended fast acquire");
                guard.unlock().await.expect("uncontended fast unlock");
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await
}

async fn rslock_round(manager: &rslock::LockManager, round: Duration) -> f64 {
    throughput_round(round, |i, stop, count| {
        let manager = manager.clone();
        let name = format!("bench:rslock:{i}");
        async move {
            while !stop.load(Ordering::Relaxed) {
                let lock = manager
                    .lock(name.as_bytes(), Duration::from_millis(LEASE_MS))
                    .await
                    .expect("rslock lock");
                manager.unlock(&lock).await;
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await
}

// ---------------------------------------------------------------------------------------
// single_task: one task's acquire against one plain EVALSHA round trip.

#[derive(Clone, Copy)]
struct Single {
    acquire_us: f64,
    rtt_us: f64,
}

async fn single_task(
    url: &str,
    side: Side,
    mut redisson: Option<&mut redisson::Redisson>,
    rows: &mut Vec<Row>,
) -> Single {
    eprintln!("[single_task] {ROUNDS} rounds of {SINGLE_SAMPLES} acquires and {SINGLE_SAMPLES} EVALSHA round trips");
    let client = connect(ClientConfig::new(url)).await;
    let lock = client.lock("bench:single").expect("valid name");
    let mut conn = plain_connection(url).await;
    let plain = PlainLock::new("bench:single:plain");
    // Warm-up: actor started, scripts cached by Redis, connections hot.
    for _ in 0..200 {
        lock.acquire()
            .await
            .expect("acquire")
            .unlock()
            .await
            .expect("unlock");
        plain.acquire_timed(&mut conn).await;
        plain.unlock(&mut conn).await;
    }
    let mut acquire_p50s = Vec::new();
    let mut rtt_p50s = Vec::new();
    for r in 0..ROUNDS {
        let mut acquire = Vec::with_capacity(SINGLE_SAMPLES);
        let mut rtt = Vec::with_capacity(SINGLE_SAMPLES);
        for _ in 0..SINGLE_SAMPLES {
            if side == Side::Reference {
                acquire.push(f64::NAN);
            } else {
                let t0 = Instant::now();
                let guard = lock.acquire().await.expect("acquire");
                acquire.push(micros(t0.elapsed()));
                guard.unlock().await.expect("unlock");
            }
            if side == Side::Library {
                rtt.push(f64::NAN);
            } else {
                rtt.push(plain.acquire_timed(&mut conn).await);
                plain.unlock(&mut conn).await;
            }
        }
        let a = percentile(&mut acquire, 50.0);
        let e = percentile(&mut rtt, 50.0);
        eprintln!(
            "[single_task] round {}: acquire p50 {a:.1} us, EVALSHA p50 {e:.1} us ({:.2})",
            r + 1,
            a / e
        );
        acquire_p50s.push(a);
        rtt_p50s.push(e);
        if let Some(java) = redisson.as_deref_mut() {
            let j = java.single_round(SINGLE_SAMPLES).await;
            eprintln!(
                "[single_task] round {}: Redisson lock() p50 {j:.1} us",
                r + 1
            );
        }
    }
    client.shutdown();
    let result = Single {
        acquire_us: median(&mut acquire_p50s),
        rtt_us: median(&mut rtt_p50s),
    };
    let ratio = result.acquire_us / result.rtt_us;
    rows.push(Row::new(
        "single_task",
        "acquire p50 us",
        Some(result.acquire_us),
    ));
    rows.push(Row::new(
        "single_task",
        "EVALSHA rtt p50 us",
        Some(result.rtt_us),
    ));
    rows.push(Row::new("single_task", "ratio", Some(ratio)).target("<= 1.3", Some(ratio <= 1.3)));
    if let Some(r) = redisson {
        r.single_rows(result.acquire_us, rows);
    }
    result
}

/// The library's acquire and unlock scripts on one name, sent with plain redis.
struct PlainLock {
    acquire: Script,
    unlock: Script,
    name: String,
    channel: String,
    field: String,
}

impl PlainLock {
    fn new(name: &str) -> Self {
        PlainLock {
            acquire: Script::new(ACQUIRE_LUA),
            unlock: Script::new(UNLOCK_LUA),
            name: name.to_string(),
            channel: format!("redisson_lock__channel:{{{name}}}"),
            field: format!("{}:1", uuid::Uuid::new_v4()),
        }
    }

    /// One EVALSHA of the acquire script; returns its round trip in µs.
    async fn acquire_timed(&self, conn: &mut MultiplexedConnection) -> f64 {
        let t0 = Instant::now();
        let taken: Option<i64> = self
            .acquire
            .key(&self.name)
            .arg(LEASE_MS)
            .arg(&self.field)
            .invoke_async(conn)
            .await
            .expect("plain acquire");
        let us = micros(t0.elapsed());
        assert_eq!(taken, None, "plain lock {} was busy", self.name);
        us
    }

    async fn unlock(&self, conn: &mut MultiplexedConnection) {
        let _: Option<i64> = self
            .unlock
            .key(&self.name)
            .key(&self.channel)
            .arg("0")
            .arg(LEASE_MS)
            .arg(&self.field)
            .invoke_async(conn)
            .await
            .expect("plain unlock");
    }
}

// ---------------------------------------------------------------------------------------
// handoff: from the holder's unlock call to a waiter in another client returning from acquire.

#[derive(Clone, Copy)]
struct Handoff {
    p50_us: f64,
    p99_us: f64,
    limit_us: f64,
    rslock_p50_us: f64,
}

async fn handoff(
    url: &str,
    inspector: &mut Inspector,
    trace: bool,
    redisson: Option<&mut redisson::Redisson>,
    rows: &mut Vec<Row>,
) -> Handoff {
    eprintln!("[handoff] {HANDOFFS} hand-offs between two clients");
    let holder = connect(ClientConfig::new(url)).await;
    let waiter = connect(ClientConfig::new(url)).await;
    let mut samples = Vec::with_capacity(HANDOFFS);
    let mut stages = Stages::default();
    for i in 0..HANDOFFS {
        let name = format!("bench:handoff:{i}");
        let guard = holder
            .lock(&name)
            .expect("valid name")
            .acquire()
            .await
            .expect("holder acquire");
        let pttl_before = inspector.calls("pttl").await;
        let lock = waiter.lock(&name).expect("valid name");
        let waiting = tokio::spawn(async move {
            let guard = lock
                .acquire_timeout(Duration::from_secs(10))
                .await
                .expect("waiter acquire");
            let acquired = Instant::now();
            guard.unlock().await.expect("waiter unlock");
            acquired
        });
        // Parked: subscribed and refused twice (each refusal runs PTTL in the script).
        let deadline = Instant::now() + Duration::from_secs(10);
        while inspector.calls("pttl").await < pttl_before + 2 {
            assert!(Instant::now() < deadline, "handoff waiter never parked");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        tokio::time::sleep(IDLE_BEFORE_UNLOCK).await;
        let t0 = Instant::now();
        guard.unlock().await.expect("holder unlock");
        let acquired = waiting.await.expect("waiter task");
        samples.push(micros(acquired.duration_since(t0)));
        if trace {
            stages.add(&name, t0, acquired);
        }
        if (i + 1) % 500 == 0 {
            eprintln!(
                "[handoff] {} done, p50 so far {:.1} us",
                i + 1,
                percentile(&mut samples.clone(), 50.0)
            );
        }
    }
    holder.shutdown();
    waiter.shutdown();
    if trace {
        stages.print();
    }
    let p50 = percentile(&mut samples, 50.0);
    let p99 = percentile(&mut samples, 99.0);

    eprintln!(
        "[handoff] limit: {HANDOFFS} PUBLISH-to-delivery times and EVALSHA round trips, \
         from idle and back to back"
    );
    let (publish_us, rtt_us) = handoff_limit(url, IDLE_BEFORE_UNLOCK).await;
    let limit = publish_us + rtt_us;
    let (hot_publish_us, hot_rtt_us) = handoff_limit(url, Duration::ZERO).await;
    let hot_limit = hot_publish_us + hot_rtt_us;
    eprintln!(
        "[handoff] limit from idle = {publish_us:.1} us delivery + {rtt_us:.1} us EVALSHA \
         = {limit:.1} us; back to back = {hot_publish_us:.1} + {hot_rtt_us:.1} = {hot_limit:.1} us"
    );

    eprintln!("[handoff] rslock: {RSLOCK_HANDOFFS} hand-offs (its waiter polls with random 0-200 ms delays)");
    let rslock_p50 = rslock_handoff(url).await;

    let ratio = p50 / limit;
    let to_rslock = p50 / rslock_p50;
    rows.push(
        Row::new("handoff", "p50 us", Some(p50))
            .target("<= rslock p50 / 20", Some(to_rslock <= 1.0 / 20.0)),
    );
    rows.push(Row::new("handoff", "p99 us", Some(p99)));
    rows.push(Row::new(
        "handoff",
        "limit us (delivery + EVALSHA, from idle)",
        Some(limit),
    ));
    rows.push(Row::new(
        "handoff",
        "limit us, back to back (not used)",
        Some(hot_limit),
    ));
    rows.push(
        Row::new("handoff", "ratio_to_limit", Some(ratio)).target("<= 1.5", Some(ratio <= 1.5)),
    );
    rows.push(Row::new("handoff", "rslock p50 us", Some(rslock_p50)));
    if let Some(r) = redisson {
        r.handoff(inspector, (p50, p99), rows).await;
    }
    Handoff {
        p50_us: p50,
        p99_us: p99,
        limit_us: limit,
        rslock_p50_us: rslock_p50,
    }
}

/// Where hand-offs spend their time, from the library's own events (`LOCK_BENCH_TRACE=1`).
#[derive(Default)]
struct Stages {
    /// unlock call → the holder's actor has the unlock reply (`released`)
    released: Vec<f64>,
    /// unlock call → the waiter's actor has the unlock message (`woken`)
    woken: Vec<f64>,
    /// `woken` → the waiter's actor has the acquire reply (`acquired`)
    attempt: Vec<f64>,
    /// `acquired` → the waiting task runs again
    reply: Vec<f64>,
}

impl Stages {
    fn add(&mut self, name: &str, t0: Instant, resumed: Instant) {
        let events = TIMELINE.with_events(|events| events.remove(name));
        let Some(events) = events else { return };
        let times = |what: &str| -> Vec<Instant> {
            events
                .iter()
                .filter(|(_, message)| message == what)
                .map(|(at, _)| *at)
                .collect()
        };
        // The holder's release comes first (the waiter releases too, later); the waiter's
        // grant comes last (the holder's own grant came first).
        let released = times("released").first().copied();
        let woken = times("woken").first().copied();
        let acquired = times("acquired").last().copied();
        if let (Some(released), Some(woken), Some(acquired)) = (released, woken, acquired) {
            let since =
                |later: Instant, earlier: Instant| micros(later.saturating_duration_since(earlier));
            self.released.push(since(released, t0));
            self.woken.push(since(woken, t0));
            self.attempt.push(since(acquired, woken));
            self.reply.push(since(resumed, acquired));
        }
    }

    fn print(&mut self) {
        if self.woken.is_empty() {
            eprintln!("[handoff] trace: no events recorded");
            return;
        }
        eprintln!(
            "[handoff] trace over {} hand-offs (p50s): unlock call -> holder has unlock reply {:.1} us; \
             unlock call -> waiter actor woken {:.1} us; woken -> acquire reply in waiter actor {:.1} us; \
             -> waiting task resumed {:.1} us",
            self.woken.len(),
            percentile(&mut self.released, 50.0),
            percentile(&mut self.woken, 50.0),
            percentile(&mut self.attempt, 50.0),
            percentile(&mut self.reply, 50.0),
        );
    }
}

/// The events of the library the hand-off trace needs, by lock name.
static TIMELINE: TimelineEvents = TimelineEvents(std::sync::Mutex::new(None));

/// Event times and messages, by lock name.
type EventsByLock = HashMap<String, Vec<(Instant, String)>>;

struct TimelineEvents(std::sync::Mutex<Option<EventsByLock>>);

impl TimelineEvents {
    fn with_events<T>(&self, f: impl FnOnce(&mut EventsByLock) -> T) -> T {
        let mut events = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(events.get_or_insert_with(HashMap::new))
    }
}

/// A minimal `tracing` subscriber that timestamps the lock events of the hand-off trace.
struct Timeline;

#[derive(Default)]
struct EventFields {
    message: String,
    lock: String,
}

impl tracing::field::Visit for EventFields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "lock" => self.lock = format!("{value:?}"),
            _ => {}
        }
    }
}

impl tracing::Subscriber for Timeline {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata.target().starts_with("lock_actors") && metadata.is_event()
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let at = Instant::now();
        let mut fields = EventFields::default();
        event.record(&mut fields);
        if matches!(fields.message.as_str(), "released" | "woken" | "acquired") {
            TIMELINE.with_events(|events| {
                events
                    .entry(fields.lock)
                    .or_default()
                    .push((at, fields.message));
            });
        }
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

/// The p50 of PUBLISH-to-delivery on another connection and of one EVALSHA round trip sent
/// right after the delivery, as a woken waiter sends it. With `idle` > 0 every sample starts
/// after that long without traffic, as the library's hand-offs do (the waiter had to park
/// first), so both sides pay the same wake-ups of parked threads.
async fn handoff_limit(url: &str, idle: Duration) -> (f64, f64) {
    let client = redis::Client::open(url).expect("valid url");
    let channel = "redisson_lock__channel:{bench:limit}";
    let pubsub = client.get_async_pubsub().await.expect("pub/sub connection");
    let (mut sink, mut stream) = pubsub.split();
    sink.subscribe(channel).await.expect("SUBSCRIBE");
    let mut conn = plain_connection(url).await;
    // Its own name: its unlock publishes, and not on the channel measured above.
    let plain = PlainLock::new("bench:limit:rtt");
    let mut delivery = Vec::with_capacity(HANDOFFS);
    let mut rtt = Vec::with_capacity(HANDOFFS);
    for i in 0..HANDOFFS + 100 {
        let mut publisher = conn.clone();
        if !idle.is_zero() {
            tokio::time::sleep(idle).await;
        }
        let t0 = Instant::now();
        let publish = async move {
            let _: i64 = redis::cmd("PUBLISH")
                .arg(channel)
                .arg("0")
                .query_async(&mut publisher)
                .await
                .expect("PUBLISH");
        };
        let receive = async {
            stream.next().await.expect("pub/sub message");
            Instant::now()
        };
        let ((), arrived) = join(publish, receive).await;
        let e = plain.acquire_timed(&mut conn).await;
        plain.unlock(&mut conn).await;
        if i >= 100 {
            delivery.push(micros(arrived.duration_since(t0)));
            rtt.push(e);
        }
    }
    (percentile(&mut delivery, 50.0), percentile(&mut rtt, 50.0))
}

async fn rslock_handoff(url: &str) -> f64 {
    let holder = rslock::LockManager::new(vec![url.to_string()]);
    let waiter = rslock::LockManager::new(vec![url.to_string()]);
    let lease = Duration::from_millis(LEASE_MS);
    let mut samples = Vec::with_capacity(RSLOCK_HANDOFFS);
    for i in 0..RSLOCK_HANDOFFS {
        let name = format!("bench:rslock:handoff:{i}");
        let lock = holder
            .lock(name.as_bytes(), lease)
            .await
            .expect("rslock lock");
        let waiting = {
            let waiter = waiter.clone();
            let name = name.clone();
            tokio::spawn(async move {
                let guard = waiter
                    .acquire(name.as_bytes(), lease)
                    .await
                    .expect("rslock acquire");
                let acquired = Instant::now();
                guard.release().await;
                acquired
            })
        };
        // Unlock at a random point of the waiter's retry cycle.
        let pause = 20 + rand::random::<u64>() % 200;
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let t0 = Instant::now();
        holder.unlock(&lock).await;
        let acquired = waiting.await.expect("rslock waiter task");
        samples.push(micros(acquired.duration_since(t0)));
    }
    let p50 = percentile(&mut samples, 50.0);
    eprintln!("[handoff] rslock p50 {p50:.0} us");
    p50
}

// ---------------------------------------------------------------------------------------
// herd: 1000 waiters of one client on one name, released one after another. Also where the
// connections of one client to the node are counted.

#[derive(Clone, Copy)]
struct Herd {
    commands_per_handoff: f64,
    total_s: f64,
    connections: usize,
}

async fn herd(
    url: &str,
    inspector: &mut Inspector,
    inner: &HashSet<String>,
    rows: &mut Vec<Row>,
) -> Herd {
    eprintln!("[herd] {HERD} waiters in one client on one name");
    let holder = connect(ClientConfig::new(url)).await;
    let name = "bench:herd";
    let guard = holder
        .lock(name)
        .expect("valid name")
        .acquire()
        .await
        .expect("herd holder acquire");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let others = inspector.clients().await;
    let client = connect(ClientConfig::new(url).default_wait(Duration::from_secs(120))).await;
    let pttl_before = inspector.calls("pttl").await;
    let done = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..HERD)
        .map(|_| {
            let lock = client.lock(name).expect("valid name");
            let done = done.clone();
            tokio::spawn(async move {
                let guard = lock.acquire().await.expect("herd acquire");
                guard.unlock().await.expect("herd unlock");
                done.fetch_add(1, Ordering::Relaxed);
                Instant::now()
            })
        })
        .collect();
    // Queued: the head is parked (two refusals), and every task has had time to ask.
    let deadline = Instant::now() + Duration::from_secs(10);
    while inspector.calls("pttl").await < pttl_before + 2 {
        assert!(Instant::now() < deadline, "herd head never parked");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut connections = inspector.clients().await.saturating_sub(others);
    let pttl_parked = inspector.calls("pttl").await;

    let before = inspector.snapshot().await;
    let t0 = Instant::now();
    guard.unlock().await.expect("herd holder unlock");
    while done.load(Ordering::Relaxed) < HERD {
        connections = connections.max(inspector.clients().await.saturating_sub(others));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut last = t0;
    for task in tasks {
        last = last.max(task.await.expect("herd task"));
    }
    let total_s = last.duration_since(t0).as_secs_f64();
    let after = inspector.snapshot().await;
    let (sent, raw) = after.sent_since(&before, inner);
    client.shutdown();
    holder.shutdown();

    let per_handoff = sent as f64 / HERD as f64;
    eprintln!(
        "[herd] {sent} commands sent for {HERD} hand-offs ({raw} counting those run inside scripts), \
         {total_s:.3} s; {} refusals while queued; {connections} connections",
        pttl_parked - pttl_before
    );
    eprintln!("[herd] by command: {}", after.breakdown_since(&before));
    rows.push(
        Row::new("herd", "commands sent per hand-off", Some(per_handoff))
            .target("<= 3", Some(per_handoff <= 3.0)),
    );
    rows.push(Row::new(
        "herd",
        "commands per hand-off incl. inside scripts",
        Some(raw as f64 / HERD as f64),
    ));
    rows.push(Row::new("herd", "total s", Some(total_s)));
    rows.push(
        Row::new(
            "connections",
            "per node, one client",
            Some(connections as f64),
        )
        .target("2", Some(connections == 2)),
    );
    Herd {
        commands_per_handoff: per_handoff,
        total_s,
        connections,
    }
}

// ---------------------------------------------------------------------------------------
// watchdog: 10,000 locks held; renewal calls per interval and memory per held lock.

#[derive(Clone, Copy)]
struct Watchdog {
    calls_per_interval: f64,
    rss_per_lock: f64,
}

async fn watchdog(
    url: &str,
    inspector: &mut Inspector,
    inner: &HashSet<String>,
    rows: &mut Vec<Row>,
) -> Watchdog {
    eprintln!(
        "[watchdog] {HELD} locks held with a {WATCHDOG_TIMEOUT:?} watchdog lease, for {INTERVALS} intervals"
    );
    let config = ClientConfig::new(url).watchdog_timeout(WATCHDOG_TIMEOUT);
    let interval = config.renew_interval();
    let client = connect(config).await;
    let rss_before = rss_bytes();
    let started = Instant::now();
    // Kept as the tasks made them: no second copy of 10,000 guards in RSS.
    let mut guards: Vec<Vec<LockGuard>> = Vec::with_capacity(TASKS);
    let per_task = HELD.div_ceil(TASKS);
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut guards = Vec::with_capacity(per_task);
                for i in (t * per_task)..((t + 1) * per_task).min(HELD) {
                    let lock = client
                        .lock(&format!("bench:watchdog:{i}"))
                        .expect("valid name");
                    guards.push(lock.acquire().await.expect("watchdog acquire"));
                }
                guards
            })
        })
        .collect();
    for task in tasks {
        guards.push(task.await.expect("watchdog task"));
    }
    let held = guards.iter().map(Vec::len).sum::<usize>();
    let rss_acquired = rss_bytes();
    eprintln!(
        "[watchdog] {held} holds in {:.2} s; RSS {} -> {} kB; {} watched",
        started.elapsed().as_secs_f64(),
        rss_before / 1024,
        rss_acquired / 1024,
        client.watched_holds()
    );

    // One renewal first: it loads the renew script (every batch of the first tick finds
    // NOSCRIPT and sends the script again), which is a one-off, not the steady cost.
    let warm = inspector.snapshot().await;
    tokio::time::sleep(interval + interval / 2).await;
    let before = inspector.snapshot().await;
    eprintln!(
        "[watchdog] first renewal: {}",
        before.breakdown_since(&warm)
    );
    tokio::time::sleep(interval * INTERVALS).await;
    let after = inspector.snapshot().await;
    let (sent, raw) = after.sent_since(&before, inner);
    let calls_per_interval = sent as f64 / f64::from(INTERVALS);
    let lost = guards.iter().flatten().filter(|g| g.is_lost()).count();
    eprintln!(
        "[watchdog] {sent} calls in {INTERVALS} intervals of {interval:?} ({raw} counting those run inside scripts); {lost} holds lost"
    );
    eprintln!("[watchdog] by command: {}", after.breakdown_since(&before));
    // Steady state: still held, after renewals (their buffers count, as they recur).
    let rss_after = rss_bytes();
    let rss_per_lock = rss_after.saturating_sub(rss_before) as f64 / HELD as f64;
    eprintln!(
        "[watchdog] RSS after the renewals {} kB: {rss_per_lock:.0} bytes per held lock \
         ({:.0} right after acquiring)",
        rss_after / 1024,
        rss_acquired.saturating_sub(rss_before) as f64 / HELD as f64
    );
    let releases = futures_util::stream::iter(guards.into_iter().flatten())
        .map(|guard| async move { guard.unlock().await })
        .buffer_unordered(TASKS)
        .collect::<Vec<_>>()
        .await;
    let failed = releases.iter().filter(|r| r.is_err()).count();
    assert_eq!(failed, 0, "watchdog holds that failed to unlock");
    client.shutdown();

    let calls_target = (HELD / 100 + 1) as f64;
    rows.push(
        Row::new(
            "watchdog",
            "renew calls per interval",
            Some(calls_per_interval),
        )
        .target("<= 101", Some(calls_per_interval <= calls_target)),
    );
    rows.push(
        Row::new("watchdog", "RSS bytes per held lock", Some(rss_per_lock))
            .target("<= 2048", Some(rss_per_lock <= 2048.0)),
    );
    Watchdog {
        calls_per_interval,
        rss_per_lock,
    }
}

// ---------------------------------------------------------------------------------------
// Inspection of the server: command statistics and connected clients.

/// This program's own connection to the server, named so it can leave itself out of counts.
struct Inspector {
    conn: MultiplexedConnection,
    /// Commands this connection sent, by commandstats name.
    sent: HashMap<String, u64>,
}

/// `INFO commandstats` at one moment, and what the inspector had sent before asking.
struct Snapshot {
    calls: HashMap<String, u64>,
    sent: HashMap<String, u64>,
}

impl Snapshot {
    /// Commands clients sent between `earlier` and this snapshot (the inspector's own left
    /// out), and the raw delta including the commands run inside scripts.
    fn sent_since(&self, earlier: &Snapshot, inner: &HashSet<String>) -> (u64, u64) {
        let mut sent = 0;
        let mut raw = 0;
        for (name, calls) in &self.calls {
            let delta = calls.saturating_sub(*earlier.calls.get(name).unwrap_or(&0));
            let own = self.sent.get(name).unwrap_or(&0) - earlier.sent.get(name).unwrap_or(&0);
            let delta = delta.saturating_sub(own);
            raw += delta;
            if !inner.contains(name) {
                sent += delta;
            }
        }
        (sent, raw)
    }
}

impl Snapshot {
    /// `name=delta` for every command that moved (inspector's own left out), largest first.
    fn breakdown_since(&self, earlier: &Snapshot) -> String {
        let mut moved: Vec<(String, u64)> = self
            .calls
            .iter()
            .map(|(name, calls)| {
                let delta = calls.saturating_sub(*earlier.calls.get(name).unwrap_or(&0));
                let own = self.sent.get(name).unwrap_or(&0) - earlier.sent.get(name).unwrap_or(&0);
                (name.clone(), delta.saturating_sub(own))
            })
            .filter(|(_, delta)| *delta > 0)
            .collect();
        moved.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        moved
            .iter()
            .map(|(name, delta)| format!("{name}={delta}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl Inspector {
    async fn connect(url: &str) -> Self {
        let mut conn = plain_connection(url).await;
        let () = redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(INSPECTOR_NAME)
            .query_async(&mut conn)
            .await
            .expect("CLIENT SETNAME");
        Inspector {
            conn,
            sent: HashMap::new(),
        }
    }

    fn count(&mut self, name: &str) {
        *self.sent.entry(name.to_string()).or_default() += 1;
    }

    async fn snapshot(&mut self) -> Snapshot {
        let sent = self.sent.clone();
        let calls = self.commandstats().await;
        Snapshot { calls, sent }
    }

    async fn commandstats(&mut self) -> HashMap<String, u64> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut self.conn)
            .await
            .expect("INFO commandstats");
        self.count("info");
        parse_commandstats(&info)
    }

    /// Calls of one command so far.
    async fn calls(&mut self, name: &str) -> u64 {
        *self.commandstats().await.get(name).unwrap_or(&0)
    }

    /// Connected clients, this one left out.
    async fn clients(&mut self) -> usize {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut self.conn)
            .await
            .expect("CLIENT LIST");
        self.count("client|list");
        let own = format!(" name={INSPECTOR_NAME} ");
        list.lines()
            .filter(|line| !line.trim().is_empty() && !line.contains(&own))
            .count()
    }
}

/// `cmdstat_<name>:calls=N,...` lines into name → N.
fn parse_commandstats(info: &str) -> HashMap<String, u64> {
    info.lines()
        .filter_map(|line| {
            let (name, fields) = line.trim().strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = fields
                .split(',')
                .find_map(|f| f.strip_prefix("calls="))?
                .parse()
                .ok()?;
            Some((name.to_ascii_lowercase(), calls))
        })
        .collect()
}

/// The commands the library's scripts run inside Redis (`redis.call('x'` / `redis.pcall`).
fn script_inner_commands() -> HashSet<String> {
    let mut names = HashSet::new();
    for script in [ACQUIRE_LUA, UNLOCK_LUA] {
        for call in ["redis.call(", "redis.pcall("] {
            for rest in script.split(call).skip(1) {
                let rest = rest.trim_start();
                let Some(quote) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') else {
                    continue;
                };
                if let Some(name) = rest[1..].split(quote).next() {
                    names.insert(name.to_ascii_lowercase());
                }
            }
        }
    }
    // The watchdog's renew script runs these too; both are already in the acquire script.
    // The unlock publishes through `publish_command`, which is `publish` here.
    names.extend(["hexists", "pexpire", "publish"].map(String::from));
    names
}

// ---------------------------------------------------------------------------------------
// cluster: the uncontended loop on 3 primaries of our own against the single node.

// The tests' support code starts and stops the cluster (redis-server + redis-cli).
#[path = "../../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

const CLUSTER_PRIMARIES: usize = 3;

#[derive(Clone, Copy)]
struct ClusterRun {
    pairs: f64,
    single: f64,
}

async fn cluster(url: &str, round: Duration, rows: &mut Vec<Row>) -> ClusterRun {
    eprintln!("[cluster] starting a cluster of {CLUSTER_PRIMARIES} primaries");
    let nodes = tokio::task::block_in_place(|| {
        support::topology::RedisCluster::start(CLUSTER_PRIMARIES, 0)
    });
    let single = connect(ClientConfig::new(url)).await;
    let clustered = connect(ClientConfig::cluster(nodes.primary_urls())).await;
    let (mut on_cluster, mut on_single) = (Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        let (c, s) = if r % 2 == 0 {
            let c = library_round(&clustered, round).await;
            (c, library_round(&single, round).await)
        } else {
            let s = library_round(&single, round).await;
            (library_round(&clustered, round).await, s)
        };
        eprintln!(
            "[cluster] round {}: {CLUSTER_PRIMARIES} primaries {c:.0} pairs/s, one node {s:.0} pairs/s ({:.2})",
            r + 1,
            c / s
        );
        on_cluster.push(c);
        on_single.push(s);
    }
    single.shutdown();
    clustered.shutdown();
    let run = ClusterRun {
        pairs: median(&mut on_cluster),
        single: median(&mut on_single),
    };
    rows.push(Row::new("cluster", "pairs/s, 3 primaries", Some(run.pairs)));
    rows.push(Row::new("cluster", "pairs/s, one node", Some(run.single)));
    rows.push(Row::new("cluster", "ratio", Some(run.pairs / run.single)));
    run
}

// ---------------------------------------------------------------------------------------
// redlock: 5 nodes of our own; RedLock acquire p50 against a single-node acquire p50 on the
// first node (interleaved rounds), then with one node SIGSTOPped.

const REDLOCK_SAMPLES: usize = 300;
const REDLOCK_PAUSED_SAMPLES: usize = 100;

struct Redlock {
    p50_us: f64,
    single_p50_us: f64,
    paused_p50_us: f64,
    /// The plain-redis floor: p50 until 3 of the 5 nodes answered the acquire script.
    quorum_floor_us: f64,
}

/// The floor of a fan-out on this machine: the acquire script sent with plain redis to all
/// nodes at once (one multiplexed connection each, on the caller's runtime), against one
/// node. No client can do a parallel acquire for less.
struct PlainFanOut {
    conns: Vec<MultiplexedConnection>,
    locks: Vec<PlainLock>,
}

impl PlainFanOut {
    async fn connect(nodes: &[RedisProcess]) -> Self {
        let mut conns = Vec::new();
        for node in nodes {
            conns.push(plain_connection(&node.url()).await);
        }
        let locks = nodes
            .iter()
            .map(|_| PlainLock::new("bench:redlock:plain"))
            .collect();
        PlainFanOut { conns, locks }
    }

    /// One acquire on the first `nodes` nodes at once, then their unlocks; returns the
    /// acquire's time in µs until `enough` nodes had answered (the rest are awaited before
    /// the unlocks, untimed).
    async fn acquire_timed(&mut self, nodes: usize, enough: usize) -> f64 {
        let t0 = Instant::now();
        let mut answers: FuturesUnordered<_> = self
            .conns
            .iter_mut()
            .zip(&self.locks)
            .take(nodes)
            .map(|(conn, lock)| lock.acquire_timed(conn))
            .collect();
        for _ in 0..enough {
            answers.next().await;
        }
        let us = micros(t0.elapsed());
        while answers.next().await.is_some() {}
        drop(answers);
        let unlocks: FuturesUnordered<_> = self
            .conns
            .iter_mut()
            .zip(&self.locks)
            .take(nodes)
            .map(|(conn, lock)| lock.unlock(conn))
            .collect();
        unlocks.collect::<Vec<()>>().await;
        us
    }
}

async fn redlock(rows: &mut Vec<Row>) -> Redlock {
    eprintln!("[redlock] starting {REDLOCK_NODES} redis-servers");
    let nodes: Vec<RedisProcess> = (0..REDLOCK_NODES).map(|_| RedisProcess::start()).collect();
    let mut clients = Vec::new();
    for node in &nodes {
        clients.push(connect(ClientConfig::new(node.url())).await);
    }
    let red = RedLock::new(&clients, "bench:redlock").expect("a RedLock over five nodes");
    let single = clients[0].lock("bench:redlock:single").expect("valid name");
    let mut plain = PlainFanOut::connect(&nodes).await;
    // Warm-up: actors started, scripts cached, connections hot.
    for _ in 0..50 {
        plain.acquire_timed(REDLOCK_NODES, REDLOCK_NODES).await;
        plain.acquire_timed(1, 1).await;
        red.acquire()
            .await
            .expect("redlock acquire")
            .unlock()
            .await
            .expect("redlock unlock");
        single
            .acquire()
            .await
            .expect("acquire")
            .unlock()
            .await
            .expect("unlock");
    }
    eprintln!("[redlock] {ROUNDS} rounds of {REDLOCK_SAMPLES} RedLock and single-node acquires");
    let (mut red_p50s, mut single_p50s) = (Vec::new(), Vec::new());
    let (mut fan_p50s, mut quorum_p50s, mut one_p50s) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        let (mut red_us, mut single_us) = (Vec::new(), Vec::new());
        let (mut fan_us, mut quorum_us, mut one_us) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..REDLOCK_SAMPLES {
            fan_us.push(plain.acquire_timed(REDLOCK_NODES, REDLOCK_NODES).await);
            quorum_us.push(plain.acquire_timed(REDLOCK_NODES, REDLOCK_QUORUM).await);
            one_us.push(plain.acquire_timed(1, 1).await);
            let t0 = Instant::now();
            let guard = red.acquire().await.expect("redlock acquire");
            red_us.push(micros(t0.elapsed()));
            guard.unlock().await.expect("redlock unlock");
            let t0 = Instant::now();
            let guard = single.acquire().await.expect("acquire");
            single_us.push(micros(t0.elapsed()));
            guard.unlock().await.expect("unlock");
        }
        let (a, b) = (
            percentile(&mut red_us, 50.0),
            percentile(&mut single_us, 50.0),
        );
        let (f, q, o) = (
            percentile(&mut fan_us, 50.0),
            percentile(&mut quorum_us, 50.0),
            percentile(&mut one_us, 50.0),
        );
        eprintln!(
            "[redlock] round {}: RedLock p50 {a:.1} us, single node p50 {b:.1} us ({:.2}); \
             plain redis to {REDLOCK_NODES} nodes at once: all answered {f:.1} us, \
             {REDLOCK_QUORUM} answered {q:.1} us; one node {o:.1} us",
            r + 1,
            a / b,
        );
        red_p50s.push(a);
        single_p50s.push(b);
        fan_p50s.push(f);
        quorum_p50s.push(q);
        one_p50s.push(o);
    }
    let node_timeout = red.node_timeout_for(red.watchdog_lease());
    eprintln!("[redlock] one node SIGSTOPped: {REDLOCK_PAUSED_SAMPLES} acquires (node timeout {node_timeout:?})");
    let paused = nodes[REDLOCK_NODES - 1].child.id() as libc::pid_t;
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(paused, libc::SIGSTOP) };
    let mut paused_us = Vec::new();
    for _ in 0..REDLOCK_PAUSED_SAMPLES {
        let t0 = Instant::now();
        let guard = red
            .acquire()
            .await
            .expect("redlock acquire with one node paused");
        paused_us.push(micros(t0.elapsed()));
        guard.unlock().await.expect("redlock unlock");
    }
    // SAFETY: as above.
    unsafe { libc::kill(paused, libc::SIGCONT) };
    for client in &clients {
        client.shutdown();
    }
    let result = Redlock {
        p50_us: median(&mut red_p50s),
        single_p50_us: median(&mut single_p50s),
        paused_p50_us: percentile(&mut paused_us, 50.0),
        quorum_floor_us: median(&mut quorum_p50s.clone()),
    };
    let ratio = result.p50_us / result.single_p50_us;
    let paused_limit = micros(node_timeout * 2);
    rows.push(Row::new("redlock", "p50 us, 5 nodes", Some(result.p50_us)));
    rows.push(Row::new(
        "redlock",
        "p50 us, single node",
        Some(result.single_p50_us),
    ));
    rows.push(Row::new("redlock", "ratio", Some(ratio)).target("<= 1.5", Some(ratio <= 1.5)));
    // The machine's floor, measured in the same rounds (in the JSON only as the ratio to
    // the quorum's time): the acquire script sent with plain redis to all five nodes at
    // once, timed to the last answer and to the quorum's (the third), against one node.
    let (fan, quorum, one) = (
        median(&mut fan_p50s),
        median(&mut quorum_p50s),
        median(&mut one_p50s),
    );
    rows.push(Row::new(
        "redlock",
        "plain redis p50 us, one node",
        Some(one),
    ));
    rows.push(Row::new(
        "redlock",
        "plain redis p50 us, 5 nodes, all answered",
        Some(fan),
    ));
    rows.push(Row::new(
        "redlock",
        "plain redis p50 us, 5 nodes, 3 answered",
        Some(quorum),
    ));
    rows.push(Row::new(
        "redlock",
        "plain redis ratio, all answered / one node",
        Some(fan / one),
    ));
    rows.push(Row::new(
        "redlock",
        "plain redis ratio, 3 answered / one node",
        Some(quorum / one),
    ));
    let to_floor = result.p50_us / quorum;
    rows.push(
        Row::new(
            "redlock",
            "ratio_to_floor (RedLock p50 / plain 3-answered p50)",
            Some(to_floor),
        )
        .target("<= 1.15", Some(to_floor <= 1.15)),
    );
    rows.push(
        Row::new(
            "redlock",
            "p50 us, one node paused",
            Some(result.paused_p50_us),
        )
        .target(
            "< 2x node timeout",
            Some(result.paused_p50_us < paused_limit),
        ),
    );
    result
}

// ---------------------------------------------------------------------------------------
// The redis-server this program runs.

/// A `redis-server` on a free loopback port, without persistence, killed on drop (so also
/// when a scenario panics) and by the kernel when this process dies (PR_SET_PDEATHSIG).
struct RedisProcess {
    port: u16,
    dir: std::path::PathBuf,
    child: std::process::Child,
}

impl RedisProcess {
    fn start() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "lock-bench-redis-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir for redis-server");
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = free_port();
            match Self::spawn(port, &dir) {
                Ok(child) => return RedisProcess { port, dir, child },
                Err(e) => last_error = e,
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        panic!("could not start redis-server: {last_error}");
    }

    fn spawn(port: u16, dir: &std::path::Path) -> Result<std::process::Child, String> {
        use std::os::unix::process::CommandExt;
        let log = std::fs::File::create(dir.join("redis.log")).map_err(|e| e.to_string())?;
        let log_err = log.try_clone().map_err(|e| e.to_string())?;
        let mut command = std::process::Command::new("redis-server");
        command
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--loglevel", "warning"])
            .arg("--dir")
            .arg(dir)
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(log_err);
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = command
            .spawn()
            .map_err(|e| format!("spawn redis-server (scripts/bench installs it): {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
                return Err(format!("redis-server exited with {status}: {log}"));
            }
            if ping(port) {
                return Ok(child);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("redis-server on port {port} did not answer PING"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut reply = [0u8; 7];
    stream.write_all(b"PING\r\n").is_ok()
        && stream.read_exact(&mut reply).is_ok()
        && reply.starts_with(b"+PONG")
}

// ---------------------------------------------------------------------------------------
// Small helpers.

async fn connect(config: ClientConfig) -> LockClient {
    LockClient::connect(config)
        .await
        .expect("lock client connects")
}

async fn plain_connection(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .expect("valid url")
        .get_multiplexed_async_connection()
        .await
        .expect("plain redis connection")
}

/// Resident set size of this process, from /proc/self/statm.
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages in /proc/self/statm");
    // SAFETY: sysconf only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Nearest-rank percentile; sorts `samples`.
fn percentile(samples: &mut [f64], p: f64) -> f64 {
    assert!(!samples.is_empty(), "no samples");
    samples.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

fn median(values: &mut [f64]) -> f64 {
    assert!(!values.is_empty(), "no rounds");
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
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
