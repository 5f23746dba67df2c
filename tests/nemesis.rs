//! The nemesis suite: real faults against real processes, judged afterwards by a checker
//! over every process' recorded history (`tests/support/history.rs`).
//!
//! Each scenario builds its own network namespaces (`tests/support/netns.rs`): Redis in one,
//! three `lock_worker` processes (three tasks each, fenced locks, a fenced store) in three
//! others, each joined to the server by its own veth pair. The nemesis then partitions,
//! freezes, kills or restarts, while a monitor in the test samples the lock keys every
//! 20 ms. After the run the workers are stopped, the keys are scanned, and the checker
//! fails the test on overlapping holds, a stale write accepted by the store, a `lost()`
//! later than the key's expiry + 50 ms, or anything left in Redis.
//!
//! The server runs with `appendonly yes, appendfsync always`, so a restart keeps the locks
//! and the token counters (a lock service on a server that forgets on restart cannot keep
//! mutual exclusion; the checker catches that, see `checker_catches_a_forgetful_server`).
//!
//! CI runs one round of each schedule (about 20 s of faults per scenario); set
//! `NEMESIS_LONG=1` for eight rounds. Needs root and `ip netns`; without them every scenario
//! fails saying what is missing. Each scenario's report line goes to stdout and to
//! `<target>/tmp/nemesis-report.log`.

mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use support::history::{self, Fault, Report, Sample};
use support::netns::{Lab, Proc};

const LEASE: Duration = Duration::from_millis(1500);
const TIMEOUT_MS: u64 = 400;
const LOCKS: [&str; 2] = ["nz-a", "nz-b"];
const CLIENTS: usize = 3;
const TASKS: usize = 3;
const REDIS_PORT: u16 = 6379;
/// How long after a cut or a freeze the monitor must still see the worker's field for the
/// fault to count as hitting a holder: an unlock sent just before it has run by then.
const SETTLE_US: u64 = 250_000;

fn rounds() -> usize {
    if std::env::var("NEMESIS_LONG").is_ok_and(|v| v == "1") {
        8
    } else {
        1
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

const MONITOR_SCRIPT: &str = r"
-- KEYS: lock names. Returns {TIME s, TIME us, then per key: PTTL, its hash fields joined by ','}
local t = redis.call('time')
local out = {t[1], t[2]}
for _, k in ipairs(KEYS) do
    local fields = ''
    if redis.call('type', k).ok == 'hash' then
        fields = table.concat(redis.call('hkeys', k), ',')
    end
    out[#out + 1] = tostring(redis.call('pttl', k))
    out[#out + 1] = fields
end
return out
";

/// Samples the lock keys every 20 ms from the root namespace (never partitioned).
struct Monitor {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<Sample>>>,
    thread: Option<JoinHandle<()>>,
}

impl Monitor {
    fn start(url: String) -> Monitor {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (stop2, samples2) = (stop.clone(), samples.clone());
        let thread = thread::spawn(move || {
            let script = redis::Script::new(MONITOR_SCRIPT);
            let client = redis::Client::open(url).expect("monitor url");
            let mut conn: Option<redis::Connection> = None;
            while !stop2.load(Ordering::Relaxed) {
                if conn.is_none() {
                    conn = client
                        .get_connection_with_timeout(Duration::from_millis(200))
                        .ok();
                    if let Some(c) = &conn {
                        let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
                        let _ = c.set_write_timeout(Some(Duration::from_millis(200)));
                    }
                }
                if let Some(c) = conn.as_mut() {
                    let mut invocation = script.prepare_invoke();
                    for lock in LOCKS {
                        invocation.key(lock);
                    }
                    match invocation.invoke::<Vec<String>>(c) {
                        Ok(reply) => {
                            if let Some(sample) = parse_sample(&reply) {
                                samples2.lock().unwrap().push(sample);
                            }
                        }
                        Err(_) => conn = None,
                    }
                }
                thread::sleep(Duration::from_millis(20));
            }
        });
        Monitor {
            stop,
            samples,
            thread: Some(thread),
        }
    }

    fn latest(&self) -> Option<Sample> {
        self.samples.lock().unwrap().last().cloned()
    }

    fn finish(&mut self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        std::mem::take(&mut *self.samples.lock().unwrap())
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn parse_sample(reply: &[String]) -> Option<Sample> {
    let secs: u64 = reply.first()?.parse().ok()?;
    let micros: u64 = reply.get(1)?.parse().ok()?;
    let mut locks = std::collections::BTreeMap::new();
    for (i, lock) in LOCKS.iter().enumerate() {
        let pttl: i64 = reply.get(2 + 2 * i)?.parse().ok()?;
        let fields = reply.get(3 + 2 * i)?;
        let fields = fields
            .split(',')
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .collect();
        locks.insert(lock.to_string(), (pttl, fields));
    }
    Some(Sample {
        t: secs * 1_000_000 + micros,
        locks,
    })
}

struct Worker {
    id: u64,
    proc: Proc,
    stdin: Option<ChildStdin>,
    history: PathBuf,
}

/// One scenario: the lab, the server, the workers, the monitor and the fault log.
/// Field order matters for drop: processes go before the namespaces they live in.
struct Run {
    name: String,
    workers: Vec<Worker>,
    /// Index into `workers` of the live worker of each client namespace.
    slot: Vec<usize>,
    redis: Option<Proc>,
    monitor: Monitor,
    faults: Vec<Fault>,
    dir: PathBuf,
    /// `appendonly yes, appendfsync always` (else the server forgets everything on restart).
    persistent: bool,
    lab: Lab,
}

impl Run {
    fn new(name: &str) -> Run {
        Run::with_persistence(name, true)
    }

    fn with_persistence(name: &str, persistent: bool) -> Run {
        let lab = Lab::new(CLIENTS);
        let dir = std::env::temp_dir().join(format!(
            "adl-nemesis-{}-{name}-{:x}",
            std::process::id(),
            now_us()
        ));
        std::fs::create_dir_all(&dir).expect("nemesis temp dir");
        let binary = support::lock_worker_binary();
        let monitor = Monitor::start(format!("redis://{}:{REDIS_PORT}/", lab.server_admin));
        let mut run = Run {
            name: name.to_string(),
            workers: Vec::new(),
            slot: Vec::new(),
            redis: None,
            monitor,
            faults: Vec::new(),
            dir,
            persistent,
            lab,
        };
        run.start_redis();
        for i in 0..CLIENTS {
            let index = run.spawn_worker(binary, i);
            run.slot.push(index);
        }
        for i in 0..CLIENTS {
            run.wait_for(&format!("worker in slot {i} to be granted a lock"), || {
                grants(&run.workers[run.slot[i]].history) > 0
            });
        }
        run
    }

    fn admin_url(&self) -> String {
        format!("redis://{}:{REDIS_PORT}/", self.lab.server_admin)
    }

    fn start_redis(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("redis.log"))
            .expect("redis log");
        let mut command = self.lab.in_server("redis-server");
        command
            .args(["--port", &REDIS_PORT.to_string(), "--bind"])
            .args(self.lab.server_addrs())
            .args(["--protected-mode", "no", "--save", ""])
            .args(if self.persistent {
                ["--appendonly", "yes", "--appendfsync", "always"]
            } else {
                ["--appendonly", "no", "--appendfsync", "no"]
            })
            .args(["--daemonize", "no", "--loglevel", "warning", "--dir"])
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        let child = command
            .spawn()
            .expect("spawn redis-server in its namespace");
        self.redis = Some(Proc {
            child,
            name: "redis-server".into(),
        });
        let client = redis::Client::open(self.admin_url()).expect("url");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ping = client
                .get_connection_with_timeout(Duration::from_millis(200))
                .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
            if ping.is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer in its namespace: {ping:?}; log:\n{}",
                std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn spawn_worker(&mut self, binary: &Path, slot: usize) -> usize {
        let id = self.workers.len() as u64 + 1;
        let history = self.dir.join(format!("worker-{id}.jsonl"));
        let stderr = std::fs::File::create(self.dir.join(format!("worker-{id}.err")))
            .expect("worker stderr");
        let mut child = self
            .lab
            .in_client(slot, binary.to_str().expect("utf-8 path"))
            .arg(format!(
                "redis://{}:{REDIS_PORT}/",
                self.lab.server_addr_for(slot)
            ))
            .arg(id.to_string())
            .arg(&history)
            .args(["--locks", &LOCKS.join(",")])
            .args(["--tasks", &TASKS.to_string()])
            .args(["--lease-ms", &LEASE.as_millis().to_string()])
            .args(["--timeout-ms", &TIMEOUT_MS.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn lock_worker in its namespace");
        let stdin = child.stdin.take();
        self.workers.push(Worker {
            id,
            proc: Proc {
                child,
                name: format!("worker {id}"),
            },
            stdin,
            history,
        });
        self.workers.len() - 1
    }

    fn wait_for(&self, what: &str, mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cond() {
            assert!(
                Instant::now() < deadline,
                "[{}] timed out waiting for {what}",
                self.name
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn worker(&self, slot: usize) -> &Worker {
        &self.workers[self.slot[slot]]
    }

    /// Waits (up to 5 s, then goes ahead) until the worker in `slot` holds a lock, so that
    /// the next fault hits a holder.
    fn until_holding(&self, slot: usize) {
        let Some(client) = client_id(&self.worker(slot).history) else {
            return;
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let holding = self.monitor.latest().is_some_and(|s| {
                s.locks
                    .values()
                    .any(|(_, fields)| fields.iter().any(|f| f.starts_with(&client)))
            });
            if holding {
                return;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn log_fault(&mut self, kind: &str, worker: Option<u64>, start: u64) {
        self.faults.push(Fault {
            kind: kind.into(),
            worker,
            start,
            end: now_us(),
        });
    }

    /// Whether the monitor's first sample taken after `after` (wall clock = Redis clock)
    /// shows the worker in `slot` holding a lock.
    fn holds_at(&self, slot: usize, after: u64) -> bool {
        let Some(client) = client_id(&self.worker(slot).history) else {
            return false;
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            let samples = self.monitor.samples.lock().unwrap();
            if let Some(sample) = samples.iter().rev().take_while(|s| s.t > after).last() {
                return sample
                    .locks
                    .values()
                    .any(|(_, fields)| fields.iter().any(|f| f.starts_with(&client)));
            }
            drop(samples);
            thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// Cuts the worker in `slot` off for `length`. The cut is made when the worker holds a
    /// lock; when the monitor shows it let go just before (its field gone within
    /// [`SETTLE_US`]), the cut is undone and tried again (up to 5 times; each try is a
    /// logged fault).
    fn partition(&mut self, slot: usize, length: Duration) {
        for _ in 0..5 {
            self.until_holding(slot);
            let (start, began) = (now_us(), Instant::now());
            self.lab.partition(slot);
            let bit = self.holds_at(slot, start + SETTLE_US);
            if bit {
                thread::sleep(length.saturating_sub(began.elapsed()));
            }
            self.lab.heal(slot);
            let id = self.worker(slot).id;
            self.log_fault("partition", Some(id), start);
            if bit {
                return;
            }
        }
    }

    /// Freezes the worker in `slot` with SIGSTOP for `length`, retried like
    /// [`partition`](Self::partition) until it freezes a holder.
    fn pause_worker(&mut self, slot: usize, length: Duration) {
        for _ in 0..5 {
            self.until_holding(slot);
            let (start, began) = (now_us(), Instant::now());
            self.worker(slot).proc.signal(libc::SIGSTOP);
            let bit = self.holds_at(slot, start + SETTLE_US);
            if bit {
                thread::sleep(length.saturating_sub(began.elapsed()));
            }
            self.worker(slot).proc.signal(libc::SIGCONT);
            let id = self.worker(slot).id;
            self.log_fault("pause-worker", Some(id), start);
            if bit {
                return;
            }
        }
    }

    fn pause_redis(&mut self, length: Duration) {
        let start = now_us();
        let redis = self.redis.as_ref().expect("redis running");
        redis.signal(libc::SIGSTOP);
        thread::sleep(length);
        redis.signal(libc::SIGCONT);
        self.log_fault("pause-redis", None, start);
    }

    fn kill_worker(&mut self, slot: usize) {
        self.until_holding(slot);
        let start = now_us();
        let index = self.slot[slot];
        self.workers[index].proc.kill();
        let id = self.workers[index].id;
        self.log_fault("kill-worker", Some(id), start);
        let replacement = self.spawn_worker(support::lock_worker_binary(), slot);
        self.slot[slot] = replacement;
    }

    fn restart_redis(&mut self, down: Duration) {
        let start = now_us();
        if let Some(mut redis) = self.redis.take() {
            redis.kill();
        }
        thread::sleep(down);
        self.start_redis();
        self.log_fault("restart-redis", None, start);
    }

    /// Stops the workers, waits for the lock keys to go, judges the run, and fails the
    /// test on any violation or when the service did not come back after a fault.
    fn finish(self) -> (Report, Vec<Value>) {
        // The service came back after every fault: wait until someone is granted a lock
        // after the last one ended (faults run one after another).
        if let Some(last_end) = self.faults.iter().map(|f| f.end).max() {
            self.wait_for("a lock granted after the last fault", || {
                self.workers.iter().any(|w| {
                    history::read_history(&w.history).iter().any(|e| {
                        e["ev"] == "grant" && e["l_after"].as_u64().is_some_and(|t| t > last_end)
                    })
                })
            });
        }
        let (report, events) = self.judge();
        assert_clean(&report);
        (report, events)
    }

    /// Stops the workers, waits for the lock keys to go, and judges the run: the report
    /// and every worker's events.
    fn judge(mut self) -> (Report, Vec<Value>) {
        let mut problems = Vec::new();
        for &index in &self.slot {
            if let Some(mut stdin) = self.workers[index].stdin.take() {
                let _ = stdin.write_all(b"stop\n");
            }
        }
        for &index in &self.slot.clone() {
            let worker = &mut self.workers[index];
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                match worker.proc.child.try_wait() {
                    Ok(Some(status)) => {
                        if !status.success() {
                            problems.push(format!("worker {} exited with {status}", worker.id));
                        }
                        break;
                    }
                    _ if Instant::now() > deadline => {
                        problems.push(format!("worker {} did not stop within 20 s", worker.id));
                        worker.proc.kill();
                        break;
                    }
                    _ => thread::sleep(Duration::from_millis(20)),
                }
            }
            if let Some(stdout) = worker.proc.child.stdout.take() {
                let said: Vec<String> = BufReader::new(stdout)
                    .lines()
                    .map_while(Result::ok)
                    .collect();
                if !said.iter().any(|l| l == "stopped") {
                    problems.push(format!("worker {} did not say `stopped`", worker.id));
                }
            }
        }
        let keys_left = self.wait_for_keys_to_go();
        let samples = self.monitor.finish();
        let mut events: Vec<Value> = Vec::new();
        for worker in &self.workers {
            events.extend(history::read_history(&worker.history));
        }
        let mut report = history::check(
            &self.name,
            &events,
            &samples,
            &self.faults,
            LEASE.as_micros() as u64,
            &keys_left,
        );
        report.violations.extend(problems);
        let line = format!("{report} samples={}", samples.len());
        println!("{line}");
        let log = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nemesis-report.log");
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = writeln!(file, "{line}");
        }
        let keep = !report.violations.is_empty() && self.persistent;
        if !keep && std::env::var_os("NEMESIS_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            println!("histories kept in {}", self.dir.display());
        }
        (report, events)
    }

    /// Every key after the run (SCAN), once the lock keys are gone or after two leases and
    /// 3 s (a killed holder's lock lives out its lease).
    fn wait_for_keys_to_go(&self) -> Vec<String> {
        let client = redis::Client::open(self.admin_url()).expect("url");
        let deadline = Instant::now() + 2 * LEASE + Duration::from_secs(3);
        loop {
            let keys = scan_all(&client);
            let lock_keys = keys
                .iter()
                .filter(|k| {
                    !k.starts_with("nemesis:store:") && !k.starts_with("redisson_lock_token:")
                })
                .count();
            if lock_keys == 0 || Instant::now() > deadline {
                return keys;
            }
            thread::sleep(Duration::from_millis(50));
        }
    }
}

fn scan_all(client: &redis::Client) -> Vec<String> {
    let mut conn = client
        .get_connection_with_timeout(Duration::from_secs(2))
        .expect("connect to the lab's redis for SCAN");
    let mut cursor = 0u64;
    let mut keys = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query(&mut conn)
            .expect("SCAN");
        keys.extend(batch);
        if next == 0 {
            return keys;
        }
        cursor = next;
    }
}

fn grants(history: &Path) -> usize {
    std::fs::read_to_string(history)
        .map(|t| t.matches("\"ev\":\"grant\"").count())
        .unwrap_or(0)
}

fn client_id(history: &Path) -> Option<String> {
    history::read_history(history)
        .iter()
        .find(|e| e["ev"] == "start")
        .and_then(|e| e["client"].as_str().map(|c| format!("{c}:")))
}

/// Grants to workers other than `worker` inside `[start, end]` (local clocks).
fn grants_by_others(run_dir_events: &[Value], worker: u64, start: u64, end: u64) -> usize {
    run_dir_events
        .iter()
        .filter(|e| e["ev"] == "grant" && e["worker"].as_u64() != Some(worker))
        .filter(|e| e["l_after"].as_u64().is_some_and(|t| t > start && t < end))
        .count()
}

fn assert_clean(report: &Report) {
    assert!(
        report.violations.is_empty(),
        "the checker found violations:\n{report}"
    );
    assert!(
        report.acquisitions >= 10,
        "too few acquisitions to judge:\n{report}"
    );
}

#[test]
fn partition_one_client_while_the_others_keep_access() {
    let mut run = Run::new("partition");
    let mut windows = Vec::new();
    for round in 0..rounds() {
        for slot in [round % CLIENTS, (round + 1) % CLIENTS] {
            thread::sleep(Duration::from_secs(2));
            let before = run.faults.len();
            run.partition(slot, 2 * LEASE + Duration::from_millis(500));
            let fault = &run.faults[before];
            windows.push((fault.worker.unwrap_or(0), fault.start, fault.end));
        }
    }
    thread::sleep(Duration::from_secs(2));
    let (report, events) = run.finish();
    assert!(
        report.lost + report.gone_at_unlock + report.unlock_unavailable >= 1,
        "no cut-off holder lost its lock:\n{report}"
    );
    for (worker, start, end) in windows {
        assert!(
            grants_by_others(&events, worker, start, end) > 0,
            "while worker {worker} was cut off, no other worker was granted a lock"
        );
    }
}

#[test]
fn pause_a_client_and_the_server() {
    let mut run = Run::new("pause");
    for round in 0..rounds() {
        thread::sleep(Duration::from_secs(2));
        run.pause_worker(round % CLIENTS, 2 * LEASE);
        thread::sleep(Duration::from_secs(2));
        run.pause_redis(LEASE * 4 / 5);
        thread::sleep(Duration::from_secs(2));
        run.pause_worker((round + 1) % CLIENTS, LEASE / 2);
    }
    thread::sleep(Duration::from_secs(2));
    let (report, _) = run.finish();
    assert!(
        report.lost + report.gone_at_unlock >= 1,
        "no frozen holder lost its lock:\n{report}"
    );
}

#[test]
fn kill_clients_holding_locks() {
    let mut run = Run::new("kill");
    for round in 0..rounds() {
        thread::sleep(Duration::from_secs(2));
        run.kill_worker(round % CLIENTS);
        thread::sleep(Duration::from_secs(3));
        run.kill_worker((round + 1) % CLIENTS);
    }
    thread::sleep(Duration::from_secs(3));
    let (report, _) = run.finish();
    assert!(report.faults >= 2 * rounds(), "{report}");
}

#[test]
fn restart_the_server() {
    let mut run = Run::new("restart");
    for _ in 0..rounds() {
        thread::sleep(Duration::from_secs(2));
        run.restart_redis(Duration::from_millis(300));
        thread::sleep(Duration::from_secs(3));
        run.restart_redis(LEASE);
    }
    thread::sleep(Duration::from_secs(3));
    let (report, _) = run.finish();
    assert_eq!(report.faults, 2 * rounds(), "{report}");
}

/// The negative control: the same restart on a server without persistence, which comes
/// back empty. Holders that were told "valid" overlap the next owners, tokens repeat and the
/// store takes old tokens again; the checker must say so.
#[test]
fn a_server_that_forgets_its_locks_is_caught() {
    let mut run = Run::with_persistence("forgetful", false);
    thread::sleep(Duration::from_secs(1));
    run.until_holding(0);
    run.restart_redis(Duration::from_millis(300));
    thread::sleep(Duration::from_secs(4));
    let (report, _) = run.judge();
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.contains("overlap") || v.contains("granted twice")),
        "the checker missed the forgotten locks:\n{report}"
    );
}

// ---- The checker itself, on made-up histories: each rule must catch what it is for. ----

fn grant(worker: u64, token: u64, l_call: u64, l_after: u64) -> Value {
    json!({"ev": "grant", "worker": worker, "task": 1, "lock": "nz-a", "token": token,
           "field": format!("c{worker}:{token}"), "l_call": l_call, "l_after": l_after})
}

fn release(worker: u64, token: u64, l: u64) -> Vec<Value> {
    vec![
        json!({"ev": "release_start", "worker": worker, "task": 1, "lock": "nz-a", "token": token, "l": l}),
        json!({"ev": "release", "worker": worker, "task": 1, "lock": "nz-a", "token": token, "l": l + 500, "result": "ok"}),
    ]
}

const MS: u64 = 1000;
const T0: u64 = 1_800_000_000_000_000;

#[test]
fn checker_passes_a_clean_history() {
    let mut events = vec![grant(1, 1, T0, T0 + MS)];
    events.extend(release(1, 1, T0 + 100 * MS));
    events.push(grant(2, 2, T0 + 50 * MS, T0 + 101 * MS));
    events.extend(release(2, 2, T0 + 200 * MS));
    let report = history::check("unit", &events, &[], &[], 1_500 * MS, &[]);
    assert!(report.violations.is_empty(), "{report}");
    assert_eq!(report.acquisitions, 2);
}

#[test]
fn checker_catches_a_forgetful_server() {
    // Worker 1 holds without releasing; worker 2 is granted 300 ms later, well inside the
    // 1.5 s lease: what a restart without persistence does.
    let events = vec![
        grant(1, 1, T0, T0 + MS),
        grant(2, 2, T0 + 300 * MS, T0 + 301 * MS),
    ];
    let report = history::check("unit", &events, &[], &[], 1_500 * MS, &[]);
    assert_eq!(report.violations.len(), 1, "{report}");
    assert!(report.violations[0].contains("overlap"), "{report}");
}

#[test]
fn checker_catches_a_stale_write() {
    let write = |worker: u64, token: u64, accepted: bool, t: u64, max: u64| {
        json!({"ev": "write", "worker": worker, "task": 1, "lock": "nz-a", "token": token,
               "accepted": accepted, "t": t, "max_before": max})
    };
    let events = vec![
        write(2, 5, true, T0, 4),
        write(1, 4, false, T0 + MS, 5),
        // The store said its highest was 3: a store that forgot token 5.
        write(1, 4, true, T0 + 2 * MS, 3),
    ];
    let report = history::check("unit", &events, &[], &[], 1_500 * MS, &[]);
    assert_eq!(report.writes_refused, 1);
    assert_eq!(report.violations.len(), 1, "{report}");
    assert!(report.violations[0].contains("after token 5"), "{report}");
}

/// Monitor samples: worker 1's hold of token 1 (field `c1:1`) seen at T0 + 10 ms with
/// 1490 ms to live, gone 20 ms later: its key expired at T0 + 1501 ms (PTTL rounding).
fn expiring_at_t0_plus_1501_ms() -> Vec<Sample> {
    let sample = |t: u64, fields: &[&str], pttl: i64| Sample {
        t,
        locks: [(
            "nz-a".to_string(),
            (pttl, fields.iter().map(|f| f.to_string()).collect()),
        )]
        .into_iter()
        .collect(),
    };
    vec![
        sample(T0 + 10 * MS, &["c1:1"], 1_490),
        sample(T0 + 30 * MS, &[], -2),
    ]
}

#[test]
fn checker_catches_a_late_lost_and_leftovers() {
    let samples = expiring_at_t0_plus_1501_ms();
    let mut events = vec![grant(1, 1, T0, T0 + MS)];
    events.push(
        json!({"ev": "lost", "worker": 1, "task": 1, "lock": "nz-a", "token": 1,
                       "l": T0 + 10 * MS + 1_490 * MS + 200 * MS}),
    );
    let keys = vec!["nz-a".to_string(), "redisson_lock_token:{nz-a}".to_string()];
    let report = history::check("unit", &events, &samples, &[], 1_500 * MS, &keys);
    assert_eq!(report.violations.len(), 2, "{report}");
    assert!(
        report.violations[0].contains("lost() fired late"),
        "{report}"
    );
    assert!(report.violations[1].contains("left in Redis"), "{report}");
    assert_eq!(report.lost_judged, 1);
}

#[test]
fn checker_excuses_a_late_lost_only_inside_a_stall() {
    let samples = expiring_at_t0_plus_1501_ms();
    let expiry = T0 + 1_501 * MS;
    let lost = json!({"ev": "lost", "worker": 1, "task": 1, "lock": "nz-a", "token": 1,
                      "l": expiry + 200 * MS});
    let stall = |from: u64, to: u64| json!({"ev": "stall", "worker": 1, "task": 0, "l_from": from, "l_to": to, "late_ms": 150});
    // A stall of this worker between the expiry and the lost(): excused.
    let events = vec![
        grant(1, 1, T0, T0 + MS),
        lost.clone(),
        stall(expiry + 20 * MS, expiry + 180 * MS),
    ];
    let report = history::check("unit", &events, &samples, &[], 1_500 * MS, &[]);
    assert!(report.violations.is_empty(), "{report}");
    assert_eq!((report.lost_excused, report.stalls), (1, 1));
    // A stall elsewhere in time excuses nothing.
    let events = vec![
        grant(1, 1, T0, T0 + MS),
        lost,
        stall(T0 + 100 * MS, T0 + 250 * MS),
    ];
    let report = history::check("unit", &events, &samples, &[], 1_500 * MS, &[]);
    assert_eq!(report.violations.len(), 1, "{report}");
}

#[test]
fn checker_rejects_a_worker_clock_that_is_not_the_server_clock() {
    let mut event = grant(1, 1, T0, T0 + MS);
    event["t_after"] = json!({"t": T0 + 9 * MS, "l_send": T0 + MS, "l_recv": T0 + 2 * MS});
    let report = history::check("unit", &[event], &[], &[], 1_500 * MS, &[]);
    assert_eq!(report.violations.len(), 1, "{report}");
    assert!(report.violations[0].contains("clock"), "{report}");
}
