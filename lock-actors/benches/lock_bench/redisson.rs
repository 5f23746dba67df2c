//! Redisson in the benchmark: the real Redisson, newest release, measured in the
//! same run and on the same redis-server as the library's rows.
//!
//! The Java side is `tests/redisson-peer/src/main/java/peer/Bench.java`, run from the peer's
//! shaded jar (`java -cp redisson-peer.jar peer.Bench URL NAME [WATCHDOG-MS]`), one JSON reply
//! line per command line. Maven builds the jar when it is missing or older than the peer's
//! sources; without `java` or `mvn` the benchmark stops with a message saying so
//! (`scripts/bench` installs them).
//!
//! Configuration: Redisson's defaults (single server, default connection pools, default
//! codec, G1 and the JIT of the JVM as installed), locks taken without a lease (the watchdog
//! keeps them), as the library's are. The JVM is warmed up (its JIT) before any round counts.
//! - uncontended: 64 holders on their own names, both APIs each round: async (64
//!   `lockAsync(id)` / `unlockAsync(id)` chains in flight, each its own owner id) and sync
//!   (64 threads calling `lock()` / `unlock()`); the faster median is Redisson's figure.
//!   Rounds interleave with the library's.
//! - single_task: p50 of one `lock()` on one thread, 1000 samples per round, interleaved
//!   with the library's rounds.
//! - handoff: Java to Java between two JVMs, the library's shape: the holder holds, the
//!   waiter calls `lock()` and parks (subscribed, refused twice: two PTTL calls inside the
//!   lock script), 1 ms idle, then from just before the holder's `unlock()` to the waiter's
//!   `lock()` returning (`System.nanoTime()`, CLOCK_MONOTONIC, comparable across processes).
//! - connections: CLIENT LIST lines carrying the JVM's client name (Redisson sends CLIENT
//!   SETNAME on every connection), at idle after start and at the peak of the uncontended
//!   rounds.
//! - memory: a fresh JVM (Redisson's default 30 s watchdog) takes 10,000 locks (64 owner ids,
//!   64 in flight); VmRSS and used heap after two `System.gc()`, before and 2 s after: before
//!   the first renewal, so renewal buffers are not in the figure (unlike the library's, read
//!   after 3 renewals). Not the library's 3 s watchdog: with it, or through the first
//!   renewal at 10 s, Redisson 4.7.0 re-ran its chunked renew script without pause (about
//!   10 to 20 renewals of every lock per second) and lost holds on this loaded machine
//!   (side probes; possibly our use of `lockAsync(ownerId)` with ids that are no thread).

use super::{median, percentile, round1, round3, Inspector, Row};
use serde::Serialize;
use serde_json::Value;
use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::jar_freshness::is_fresh;

/// Hand-offs discarded first (JIT warm-up of both JVMs).
const HANDOFF_WARMUP: usize = 200;
/// Locks held in the memory measurement.
const HELD: usize = super::HELD;
/// How long the 10,000 locks stay held before the second reading (before the first renewal).
const SETTLE_MS: u64 = 2000;
/// How long a reply may take (a round lasts 2 s; the memory command about 15 s).
const REPLY_TIMEOUT: Duration = Duration::from_secs(120);

/// Everything measured of Redisson, filled in by the scenarios.
#[derive(Default)]
pub struct Redisson {
    main: Option<Jvm>,
    url: String,
    pub version: String,
    async_rounds: Vec<f64>,
    sync_rounds: Vec<f64>,
    single_rounds: Vec<f64>,
    connections_idle: usize,
    connections_peak: usize,
    pub uncontended: Option<f64>,
    api: &'static str,
    pub single_p50_us: Option<f64>,
    pub handoff: Option<(f64, f64)>,
    memory: Option<Memory>,
}

#[derive(Clone, Copy)]
struct Memory {
    held: usize,
    rss_per_lock: f64,
    heap_per_lock: f64,
}

/// The `redisson` object of the JSON line.
#[derive(Serialize)]
pub struct RedissonJson {
    version: String,
    uncontended_api: &'static str,
    async_pairs_per_s: Option<f64>,
    sync_pairs_per_s: Option<f64>,
    connections_per_process: usize,
    connections_idle: usize,
    rss_bytes_per_lock: Option<f64>,
    heap_bytes_per_lock: Option<f64>,
    held_at_memory_reading: Option<usize>,
}

impl Redisson {
    /// Builds the jar if need be, starts the main JVM and warms it up.
    pub async fn start(url: &str, inspector: &mut Inspector) -> Redisson {
        let jar = jar().unwrap_or_else(|e| panic!("Redisson peer: {e}"));
        eprintln!("[redisson] starting the JVM ({})", jar.display());
        let mut main = Jvm::start(&jar, url, "bench-redisson-main", None).await;
        let connections_idle = connections(inspector, &main.name).await;
        eprintln!(
            "[redisson] Redisson {} connected with {connections_idle} connections; warming up the JIT",
            main.version
        );
        let t0 = Instant::now();
        for (api, ms) in [
            ("async", 3000),
            ("sync", 3000),
            ("async", 2000),
            ("sync", 2000),
        ] {
            let pairs = main
                .number(
                    &format!("uncontended {api} {} {ms}", super::TASKS),
                    "pairs_per_s",
                )
                .await;
            eprintln!("[redisson] warm-up {api}: {pairs:.0} pairs/s");
        }
        main.number("single 5000", "p50_us").await;
        eprintln!(
            "[redisson] warmed up in {:.1} s",
            t0.elapsed().as_secs_f64()
        );
        Redisson {
            url: url.to_string(),
            version: main.version.clone(),
            connections_idle,
            main: Some(main),
            ..Redisson::default()
        }
    }

    fn main(&mut self) -> &mut Jvm {
        self.main.as_mut().expect("the Redisson JVM runs")
    }

    /// One uncontended round of each API, counting the JVM's connections meanwhile.
    pub async fn uncontended_round(&mut self, round: Duration, inspector: &mut Inspector) {
        let ms = round.as_millis();
        for api in ["async", "sync"] {
            let command = format!("uncontended {api} {} {ms}", super::TASKS);
            let main = self.main.as_mut().expect("the Redisson JVM runs");
            main.send(&command).await;
            let mut peak = 0;
            let reply = loop {
                tokio::select! {
                    reply = main.reply() => break reply,
                    () = tokio::time::sleep(Duration::from_millis(100)) => {
                        peak = peak.max(connections(inspector, &main.name).await);
                    }
                }
            };
            self.connections_peak = self.connections_peak.max(peak);
            let pairs = field(&reply, "pairs_per_s", &command);
            eprintln!("[uncontended] Redisson {api}: {pairs:.0} pairs/s");
            if api == "async" {
                self.async_rounds.push(pairs);
            } else {
                self.sync_rounds.push(pairs);
            }
        }
    }

    /// Redisson's rows beside the library's uncontended figure.
    pub fn uncontended_rows(&mut self, library: f64, rows: &mut Vec<Row>) {
        let a = median(&mut self.async_rounds.clone());
        let s = median(&mut self.sync_rounds.clone());
        let (best, api) = if a >= s { (a, "async") } else { (s, "sync") };
        self.uncontended = Some(best);
        self.api = api;
        let v = &self.version;
        rows.push(Row::new(
            "uncontended",
            &format!("pairs/s, Redisson {v} async, 64 in flight"),
            Some(a),
        ));
        rows.push(Row::new(
            "uncontended",
            &format!("pairs/s, Redisson {v} sync, 64 threads"),
            Some(s),
        ));
        let ratio = library / best;
        rows.push(
            Row::new(
                "uncontended",
                &format!("ratio_to_redisson (its {api})"),
                Some(ratio),
            )
            .target(">= 1.5", Some(ratio >= 1.5)),
        );
    }

    /// One round of single-holder acquires.
    pub async fn single_round(&mut self, samples: usize) -> f64 {
        let p50 = self
            .main()
            .number(&format!("single {samples}"), "p50_us")
            .await;
        self.single_rounds.push(p50);
        p50
    }

    pub fn single_rows(&mut self, library_us: f64, rows: &mut Vec<Row>) {
        let p50 = median(&mut self.single_rounds.clone());
        self.single_p50_us = Some(p50);
        rows.push(Row::new("single_task", "Redisson lock() p50 us", Some(p50)));
        let ratio = library_us / p50;
        rows.push(
            Row::new("single_task", "ratio_to_redisson", Some(ratio))
                .target("<= 0.8", Some(ratio <= 0.8)),
        );
    }

    /// Java-to-Java hand-offs: the main JVM holds, a second JVM waits.
    pub async fn handoff(
        &mut self,
        inspector: &mut Inspector,
        library: (f64, f64),
        rows: &mut Vec<Row>,
    ) {
        let count = super::HANDOFFS;
        eprintln!("[handoff] Redisson: {HANDOFF_WARMUP} + {count} hand-offs between two JVMs");
        let jar = jar().unwrap_or_else(|e| panic!("Redisson peer: {e}"));
        let mut waiter = Jvm::start(&jar, &self.url, "bench-redisson-waiter", None).await;
        waiter.number("single 5000", "p50_us").await;
        let holder = self.main.as_mut().expect("the Redisson JVM runs");
        let mut samples = Vec::with_capacity(count);
        for i in 0..HANDOFF_WARMUP + count {
            let name = format!("bench:redisson:handoff:{i}");
            holder.expect(&format!("hold {name}"), "held").await;
            let pttl_before = inspector.calls("pttl").await;
            waiter.expect(&format!("wait {name}"), "waiting").await;
            let deadline = Instant::now() + Duration::from_secs(10);
            while inspector.calls("pttl").await < pttl_before + 2 {
                assert!(Instant::now() < deadline, "Redisson's waiter never parked");
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            tokio::time::sleep(super::IDLE_BEFORE_UNLOCK).await;
            let t0 = holder.number(&format!("release {name}"), "t0_ns").await;
            let reply = waiter.reply().await;
            let t1 = field(&reply, "t1_ns", "wait");
            if i >= HANDOFF_WARMUP {
                samples.push((t1 - t0) / 1e3);
            }
        }
        waiter.exit().await;
        let p50 = percentile(&mut samples, 50.0);
        let p99 = percentile(&mut samples, 99.0);
        eprintln!("[handoff] Redisson p50 {p50:.1} us, p99 {p99:.1} us");
        self.handoff = Some((p50, p99));
        rows.push(Row::new(
            "handoff",
            "Redisson p50 us (JVM to JVM)",
            Some(p50),
        ));
        rows.push(Row::new("handoff", "Redisson p99 us", Some(p99)));
        let (r50, r99) = (library.0 / p50, library.1 / p99);
        rows.push(
            Row::new("handoff", "ratio_to_redisson (p50)", Some(r50))
                .target("<= 0.8", Some(r50 <= 0.8)),
        );
        rows.push(
            Row::new("handoff", "ratio_to_redisson, p99", Some(r99))
                .target("<= 0.8", Some(r99 <= 0.8)),
        );
    }

    /// Memory per held watchdog lock in a fresh JVM, and the connection rows.
    pub async fn memory(
        &mut self,
        library_rss: Option<f64>,
        library_connections: Option<usize>,
        rows: &mut Vec<Row>,
    ) {
        eprintln!(
            "[redisson] memory: a fresh JVM holds {HELD} locks (default watchdog), read {SETTLE_MS} ms later"
        );
        let jar = jar().unwrap_or_else(|e| panic!("Redisson peer: {e}"));
        let mut jvm = Jvm::start(&jar, &self.url, "bench-redisson-memory", None).await;
        // Loads and compiles the lock path, so the baseline has its classes.
        jvm.number("single 2000", "p50_us").await;
        let command = format!("memory {HELD} {SETTLE_MS}");
        jvm.send(&command).await;
        let reply = jvm.reply().await;
        jvm.exit().await;
        let get = |key: &str| field(&reply, key, &command);
        let held = get("held") as usize;
        if held != HELD || get("unlock_failed") > 0.0 {
            eprintln!("[redisson] WARNING: not every hold was kept: {reply}");
        }
        let rss = (get("rss_after_kb") - get("rss_before_kb")) * 1024.0 / HELD as f64;
        let heap = (get("heap_after") - get("heap_before")) / HELD as f64;
        eprintln!(
            "[redisson] VmRSS {} -> {} kB, used heap {:.1} -> {:.1} MB: {rss:.0} RSS bytes, {heap:.0} heap bytes per held lock",
            get("rss_before_kb"),
            get("rss_after_kb"),
            get("heap_before") / 1e6,
            get("heap_after") / 1e6
        );
        self.memory = Some(Memory {
            held,
            rss_per_lock: rss,
            heap_per_lock: heap,
        });
        rows.push(
            Row::new(
                "redisson",
                "connections per process, peak (ours: 2)",
                Some(self.connections_peak as f64),
            )
            .target(
                &format!(
                    "ours {}",
                    library_connections.map_or("null".into(), |c| c.to_string())
                ),
                None,
            ),
        );
        rows.push(Row::new(
            "redisson",
            "connections per process, idle",
            Some(self.connections_idle as f64),
        ));
        rows.push(
            Row::new(
                "redisson",
                "RSS bytes per held watchdog lock (JVM)",
                Some(rss),
            )
            .target(
                &format!(
                    "ours {}",
                    library_rss.map_or("null".into(), |r| format!("{r:.0}"))
                ),
                None,
            ),
        );
        rows.push(Row::new(
            "redisson",
            "used heap bytes per held lock (after GC)",
            Some(heap),
        ));
    }

    /// RSS growth per held watchdog lock, rounded, once measured.
    pub fn rss_per_lock(&self) -> Option<f64> {
        self.memory.map(|m| m.rss_per_lock.round())
    }

    pub fn json(&self) -> RedissonJson {
        RedissonJson {
            version: self.version.clone(),
            uncontended_api: self.api,
            async_pairs_per_s: (!self.async_rounds.is_empty())
                .then(|| median(&mut self.async_rounds.clone()).round()),
            sync_pairs_per_s: (!self.sync_rounds.is_empty())
                .then(|| median(&mut self.sync_rounds.clone()).round()),
            connections_per_process: self.connections_peak,
            connections_idle: self.connections_idle,
            rss_bytes_per_lock: self.memory.map(|m| m.rss_per_lock.round()),
            heap_bytes_per_lock: self.memory.map(|m| m.heap_per_lock.round()),
            held_at_memory_reading: self.memory.map(|m| m.held),
        }
    }

    pub async fn shutdown(&mut self) {
        if let Some(main) = self.main.take() {
            main.exit().await;
        }
    }
}

/// `ours / theirs` rounded, when both exist.
pub fn ratio(ours: Option<f64>, theirs: Option<f64>) -> Option<f64> {
    Some(round3(ours? / theirs?))
}

/// `x` rounded to 0.1, when it exists.
pub fn us(x: Option<f64>) -> Option<f64> {
    x.map(round1)
}

/// Connections in CLIENT LIST carrying `name`.
async fn connections(inspector: &mut Inspector, name: &str) -> usize {
    inspector.clients_named(name).await
}

impl Inspector {
    /// Connected clients named `name` (CLIENT SETNAME).
    async fn clients_named(&mut self, name: &str) -> usize {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut self.conn)
            .await
            .expect("CLIENT LIST");
        self.count("client|list");
        let named = format!(" name={name} ");
        list.lines().filter(|line| line.contains(&named)).count()
    }
}

fn field(reply: &Value, key: &str, command: &str) -> f64 {
    reply
        .get(key)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("Redisson peer: `{command}` answered {reply}"))
}

/// One `peer.Bench` JVM.
pub(crate) struct Jvm {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    name: String,
    pub(crate) version: String,
}

impl Jvm {
    pub(crate) async fn start(jar: &Path, url: &str, name: &str, watchdog_ms: Option<u64>) -> Jvm {
        let mut command = Command::new("java");
        command
            .arg("-cp")
            .arg(jar)
            .arg("peer.Bench")
            .arg(url.trim_end_matches('/'))
            .arg(name);
        if let Some(ms) = watchdog_ms {
            command.arg(ms.to_string());
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start `java` ({e}); scripts/bench installs a JDK"));
        let stdin = child.stdin.take().expect("piped stdin");
        let lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let mut jvm = Jvm {
            child,
            stdin,
            lines,
            name: name.to_string(),
            version: String::new(),
        };
        let ready = jvm.reply().await;
        jvm.version = ready
            .get("version")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("Redisson peer started with {ready}"))
            .to_string();
        jvm
    }

    async fn send(&mut self, command: &str) {
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await
            .expect("write to the Redisson peer");
        self.stdin
            .flush()
            .await
            .expect("flush to the Redisson peer");
    }

    async fn reply(&mut self) -> Value {
        let line = tokio::time::timeout(REPLY_TIMEOUT, self.lines.next_line())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the Redisson peer {} did not answer within {REPLY_TIMEOUT:?}",
                    self.name
                )
            })
            .expect("read from the Redisson peer")
            .unwrap_or_else(|| panic!("the Redisson peer {} exited", self.name));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("Redisson peer said `{line}`: {e}"))
    }

    pub(crate) async fn number(&mut self, command: &str, key: &str) -> f64 {
        self.send(command).await;
        let reply = self.reply().await;
        field(&reply, key, command)
    }

    async fn expect(&mut self, command: &str, key: &str) {
        self.send(command).await;
        let reply = self.reply().await;
        assert!(
            reply.get(key).is_some(),
            "Redisson peer: `{command}` answered {reply}"
        );
    }

    pub(crate) async fn exit(mut self) {
        let _ = self.stdin.write_all(b"exit\n").await;
        let _ = self.stdin.flush().await;
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.start_kill();
        }
    }
}

// ---------------------------------------------------------------------------------------
// The jar: tests/redisson-peer/target/<newest version>/redisson-peer.jar, built by Maven.

fn peer_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/redisson-peer")
}

/// The newest Redisson the peer is built against: the pom's default `redisson.version`.
fn newest_version(dir: &Path) -> Result<String, String> {
    let pom = fs::read_to_string(dir.join("pom.xml"))
        .map_err(|e| format!("read {}/pom.xml: {e}", dir.display()))?;
    // The first element (the pom's comment names it too, as a placeholder, never closed).
    pom.split("<redisson.version>")
        .skip(1)
        .find_map(|rest| rest.split_once("</redisson.version>"))
        .filter(|(version, _)| !version.contains('<'))
        .map(|(version, _)| version.trim().to_string())
        .ok_or_else(|| "no <redisson.version> element in the pom".to_string())
}

fn runs(program: &str, arg: &str) -> bool {
    std::process::Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The peer's jar for the newest Redisson, built with Maven when missing or stale.
pub(crate) fn jar() -> Result<PathBuf, String> {
    if !runs("java", "-version") {
        return Err("`java` is not on PATH; install a JDK 17+ (scripts/bench does: apt-get install default-jdk-headless maven)".into());
    }
    let dir = peer_dir()
        .canonicalize()
        .map_err(|e| format!("tests/redisson-peer: {e}"))?;
    let jar = dir
        .join("target")
        .join(newest_version(&dir)?)
        .join("redisson-peer.jar");
    if is_fresh(&jar, &dir) {
        return Ok(jar);
    }
    if !runs("mvn", "-v") {
        return Err(format!(
            "{} is missing or stale and `mvn` is not on PATH; install Maven (scripts/bench does: apt-get install default-jdk-headless maven)",
            jar.display()
        ));
    }
    fs::create_dir_all(dir.join("target"))
        .map_err(|e| format!("create the peer's target dir: {e}"))?;
    // The test suite may build the same jar at the same time: the same lock file as theirs.
    let lock_file = File::create(dir.join("target/.build.lock"))
        .map_err(|e| format!("create the build lock: {e}"))?;
    // SAFETY: the descriptor belongs to `lock_file`, which lives until the end of this fn.
    if unsafe { libc::flock(lock_file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err("cannot lock tests/redisson-peer/target/.build.lock".into());
    }
    if !is_fresh(&jar, &dir) {
        eprintln!(
            "[redisson] building the peer jar with Maven (the first time downloads Redisson)"
        );
        let output = std::process::Command::new("mvn")
            .current_dir(&dir)
            .args(["-B", "-q", "-Dstyle.color=never", "package"])
            .output()
            .map_err(|e| format!("run mvn: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "mvn package in {} failed:\n{}\n{}",
                dir.display(),
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        if !jar.is_file() {
            return Err(format!("mvn succeeded but {} is missing", jar.display()));
        }
    }
    Ok(jar)
}
