//! The nemesis suite's harness (`tests/nemesis.rs`): one scenario's lab (namespaces from
//! [`netns`](super::netns)), its redis-server, its `lock_worker` processes, a monitor that
//! samples the lock keys every 20 ms from the root namespace, and the log of the faults
//! injected; [`Run::finish`] stops everything and hands the histories to the checker
//! ([`history`](super::history)).
#![allow(dead_code)]

use super::history::{self, Fault, Report, Sample};
use super::netns::{Lab, Proc};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const LEASE: Duration = Duration::from_millis(1500);
pub const TIMEOUT_MS: u64 = 400;
pub const LOCKS: [&str; 2] = ["nz-a", "nz-b"];
pub const CLIENTS: usize = 3;
pub const TASKS: usize = 3;
pub const REDIS_PORT: u16 = 6379;
/// How long after a cut or a freeze the monitor must still see the worker's field for the
/// fault to count as hitting a holder: an unlock sent just before it has run by then.
pub const SETTLE_US: u64 = 250_000;

pub fn rounds() -> usize {
    if std::env::var("NEMESIS_LONG").is_ok_and(|v| v == "1") {
        8
    } else {
        1
    }
}

pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// What the monitor reads for each lock key: `ARGV[i]` is the family of `KEYS[i]`.
pub const MONITOR_SCRIPT: &str = r"
-- KEYS: lock names; ARGV: their families (hash fast fair rw sem exp).
-- Returns {TIME s, TIME us, then per key: PTTL, holders as `holder=ms to live` joined by ',',
-- the fair queue as `waiter=deadline` (its score in the deadlines zset, '' if none) joined
-- by ',', the permit count or ''}.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {t[1], t[2]}
local function hex(raw)
    return (string.gsub(raw, '.', function(c) return string.format('%02x', string.byte(c)) end))
end
for i, k in ipairs(KEYS) do
    local family = ARGV[i]
    local pttl = redis.call('pttl', k)
    local kind = redis.call('type', k).ok
    local holders, queue, count = {}, '', ''
    if family == 'sem' or family == 'exp' then
        if kind == 'string' then count = redis.call('get', k) end
        if family == 'exp' then
            local z = redis.call('zrange', '{' .. k .. '}:timeout', 0, -1, 'WITHSCORES')
            for j = 1, #z, 2 do
                holders[#holders + 1] = hex(z[j]) .. '=' .. tostring(math.floor(tonumber(z[j + 1]) - now))
            end
        end
    elseif kind == 'string' then
        holders[1] = redis.call('get', k) .. '=' .. pttl
    elseif kind == 'hash' then
        local h = redis.call('hgetall', k)
        for j = 1, #h, 2 do
            local f = h[j]
            if f ~= 'mode' then
                local ttl = pttl
                if family == 'rw' and not string.find(f, ':write$') then
                    ttl = -2
                    for n = 1, tonumber(h[j + 1]) do
                        local p = redis.call('pttl', '{' .. k .. '}:' .. f .. ':rwlock_timeout:' .. n)
                        if p > ttl then ttl = p end
                    end
                end
                holders[#holders + 1] = f .. '=' .. ttl
            end
        end
    end
    if family == 'fair' then
        local waiters = redis.call('lrange', 'redisson_lock_queue:{' .. k .. '}', 0, -1)
        for j, w in ipairs(waiters) do
            local deadline = redis.call('zscore', 'redisson_lock_timeout:{' .. k .. '}', w)
            waiters[j] = w .. '=' .. (deadline or '')
        end
        queue = table.concat(waiters, ',')
    end
    out[#out + 1] = tostring(pttl)
    out[#out + 1] = table.concat(holders, ',')
    out[#out + 1] = queue
    out[#out + 1] = count
end
return out
";

/// The Redis name of base lock `base` for `kind` (as `lock_worker`'s `Kind::lock_name`):
/// fenced locks use the base name, the others add their family.
pub fn lock_name(base: &str, kind: &str) -> String {
    match family(kind) {
        "fenced" => base.to_string(),
        family => format!("{base}-{family}"),
    }
}

/// The family of a kind: kinds of one family share a name (read and write: `rw`).
pub fn family(kind: &str) -> &'static str {
    match kind {
        "fenced" => "fenced",
        "reentrant" => "re",
        "fast" => "fast",
        "fair" => "fair",
        "read" | "write" => "rw",
        "semaphore" => "sem",
        "expirable" => "exp",
        other => panic!("unknown lock kind `{other}`"),
    }
}

/// The monitor's family argument for a lock family.
fn monitor_family(family: &str) -> &'static str {
    match family {
        "fenced" | "re" => "hash",
        "fast" => "fast",
        "fair" => "fair",
        "rw" => "rw",
        "sem" => "sem",
        _ => "exp",
    }
}

/// Every (lock name, monitor family) the `mixes` use on the base names `bases`.
pub fn monitored(mixes: &[String], bases: &[String]) -> Vec<(String, &'static str)> {
    let mut keys: Vec<(String, &'static str)> = Vec::new();
    for mix in mixes {
        for kind in mix.split(',') {
            for base in bases {
                let key = (lock_name(base, kind), monitor_family(family(kind)));
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
        }
    }
    keys
}

/// Samples the lock keys every 20 ms from the root namespace (never partitioned).
pub struct Monitor {
    pub stop: Arc<AtomicBool>,
    pub samples: Arc<Mutex<Vec<Sample>>>,
    pub thread: Option<JoinHandle<()>>,
}

impl Monitor {
    /// Samples `keys` (lock name, family as [`MONITOR_SCRIPT`] takes it).
    pub fn start(url: String, keys: Vec<(String, &'static str)>) -> Monitor {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (stop2, samples2) = (stop.clone(), samples.clone());
        let thread = thread::spawn(move || {
            let script = redis::Script::new(MONITOR_SCRIPT);
            let client = redis::Client::open(url).expect("monitor url");
            let mut conn: Option<redis::Connection> = None;
            let names: Vec<String> = keys.iter().map(|(name, _)| name.clone()).collect();
            // One sample; false when Redis did not answer (the connection is dropped).
            let sample = |conn: &mut Option<redis::Connection>| -> bool {
                if conn.is_none() {
                    *conn = client
                        .get_connection_with_timeout(Duration::from_millis(200))
                        .ok();
                    if let Some(c) = &*conn {
                        let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
                        let _ = c.set_write_timeout(Some(Duration::from_millis(200)));
                    }
                }
                let Some(c) = conn.as_mut() else {
                    return false;
                };
                let mut invocation = script.prepare_invoke();
                for (name, family) in &keys {
                    invocation.key(name).arg(*family);
                }
                match invocation.invoke::<Vec<String>>(c) {
                    Ok(reply) => {
                        if let Some(sample) = parse_sample(&reply, &names) {
                            samples2.lock().unwrap().push(sample);
                        }
                        true
                    }
                    Err(_) => {
                        *conn = None;
                        false
                    }
                }
            };
            while !stop2.load(Ordering::Relaxed) {
                sample(&mut conn);
                thread::sleep(Duration::from_millis(20));
            }
            // The end state, read once everything has stopped: the checker judges the
            // permit counts left by the last sample, and a periodic one may predate the
            // last release (or time out under load).
            let deadline = Instant::now() + Duration::from_secs(10);
            while !sample(&mut conn) && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(50));
            }
        });
        Monitor {
            stop,
            samples,
            thread: Some(thread),
        }
    }

    pub fn latest(&self) -> Option<Sample> {
        self.samples.lock().unwrap().last().cloned()
    }

    pub fn finish(&mut self) -> Vec<Sample> {
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

/// One reply of [`MONITOR_SCRIPT`] for the lock `names` it was given.
pub fn parse_sample(reply: &[String], names: &[String]) -> Option<Sample> {
    let secs: u64 = reply.first()?.parse().ok()?;
    let micros: u64 = reply.get(1)?.parse().ok()?;
    let list = |s: &String| -> Vec<String> {
        s.split(',')
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .collect()
    };
    let mut sample = Sample {
        t: secs * 1_000_000 + micros,
        ..Sample::default()
    };
    for (i, lock) in names.iter().enumerate() {
        let pttl: i64 = reply.get(2 + 4 * i)?.parse().ok()?;
        let mut alive = Vec::new();
        let mut ttls = BTreeMap::new();
        for entry in list(reply.get(3 + 4 * i)?) {
            let (holder, ttl) = entry.rsplit_once('=')?;
            let ttl: i64 = ttl.parse().ok()?;
            if ttl > 0 || ttl == -1 {
                alive.push(holder.to_string());
            }
            ttls.insert(holder.to_string(), ttl);
        }
        sample.locks.insert(lock.clone(), (pttl, alive));
        sample.ttls.insert(lock.clone(), ttls);
        let mut queue = Vec::new();
        let mut deadlines = BTreeMap::new();
        for entry in list(reply.get(4 + 4 * i)?) {
            let (waiter, deadline) = entry.rsplit_once('=').unwrap_or((&entry, ""));
            if let Ok(deadline) = deadline.parse::<f64>() {
                deadlines.insert(waiter.to_string(), deadline as i64);
            }
            queue.push(waiter.to_string());
        }
        if !queue.is_empty() {
            sample.queues.insert(lock.clone(), queue);
            sample.deadlines.insert(lock.clone(), deadlines);
        }
        if let Ok(count) = reply.get(5 + 4 * i)?.parse() {
            sample.counts.insert(lock.clone(), count);
        }
    }
    Some(sample)
}

pub struct Worker {
    pub id: u64,
    pub proc: Proc,
    pub stdin: Option<ChildStdin>,
    pub history: PathBuf,
}

/// One scenario: the lab, the server, the workers, the monitor and the fault log.
/// Field order matters for drop: processes go before the namespaces they live in.
pub struct Run {
    pub name: String,
    pub workers: Vec<Worker>,
    /// Index into `workers` of the live worker of each client namespace.
    pub slot: Vec<usize>,
    pub redis: Option<Proc>,
    pub monitor: Monitor,
    pub faults: Vec<Fault>,
    /// Locks that a frozen worker held and that another worker took while it was frozen.
    pub handovers: usize,
    pub dir: PathBuf,
    /// `appendonly yes, appendfsync always` (else the server forgets everything on restart).
    pub persistent: bool,
    pub setup: Setup,
    /// The locks a fault waits for its worker to hold ([`until_holding`](Run::until_holding),
    /// [`held_at`](Run::held_at)); `None`: any lock.
    pub targets: Option<Vec<String>>,
    pub lab: Lab,
}

/// The workers of a run: each slot's mix of lock kinds, the semaphores' permits, and a
/// deliberately broken worker for negative controls.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Per slot, the `--mix` of its workers (comma list of kinds).
    pub mixes: Vec<String>,
    pub permits: u32,
    /// Per slot, `--broken` for its workers.
    pub broken: Vec<Option<String>>,
    /// The base lock names (`--locks`): each kind family has one lock per base name.
    pub locks: Vec<String>,
    /// Per slot, how its workers start (`None`: the Rust `lock_worker`).
    pub launches: Vec<Option<Launch>>,
}

/// A worker process other than the Rust `lock_worker`: `program`, then `before`, then the
/// arguments every worker takes (`<redis-url> <worker-id> <history-file> --locks ..
/// --tasks .. --lease-ms .. --timeout-ms .. --mix .. --permits ..`).
#[derive(Debug, Clone)]
pub struct Launch {
    pub program: PathBuf,
    pub before: Vec<String>,
}

/// Every lock kind, as `--mix` takes it.
pub const ALL_KINDS: &str = "reentrant,fast,fenced,fair,read,write,semaphore,expirable";

impl Default for Setup {
    /// Fenced locks only, in every slot.
    fn default() -> Self {
        Setup {
            mixes: vec!["fenced".to_string(); CLIENTS],
            permits: 2,
            broken: vec![None; CLIENTS],
            locks: LOCKS.iter().map(|l| l.to_string()).collect(),
            launches: vec![None; CLIENTS],
        }
    }
}

impl Setup {
    /// Every slot takes every kind, fair locks three times as often as the others (a fair
    /// queue needs two waiters at once for its order to be judged).
    pub fn all_kinds() -> Self {
        Setup::all_kinds_and("fair,fair")
    }

    /// Every slot takes every kind, and `extra` (a comma list) once more each.
    pub fn all_kinds_and(extra: &str) -> Self {
        let weighted = format!("{ALL_KINDS},{extra}");
        Setup::default().mixes(&[weighted.as_str(); CLIENTS])
    }

    /// One lock per kind family on each of `locks` (the default: [`LOCKS`]).
    pub fn locks(mut self, locks: &[&str]) -> Self {
        self.locks = locks.iter().map(|l| l.to_string()).collect();
        self
    }

    pub fn mixes(mut self, mixes: &[&str]) -> Self {
        self.mixes = mixes.iter().map(|m| m.to_string()).collect();
        self
    }

    pub fn permits(mut self, permits: u32) -> Self {
        self.permits = permits;
        self
    }

    /// One more slot (client namespace), whose workers start as `launch` says.
    pub fn extra_slot(mut self, launch: Launch, mix: &str) -> Self {
        self.broken.resize(self.mixes.len(), None);
        self.launches.resize(self.mixes.len(), None);
        self.mixes.push(mix.to_string());
        self.broken.push(None);
        self.launches.push(Some(launch));
        self
    }

    /// Makes the workers in `slot` broken (`ignore-lost`, `skip-mode`).
    pub fn broken(mut self, slot: usize, mode: &str) -> Self {
        self.broken[slot] = Some(mode.to_string());
        self
    }

    /// The kinds any slot takes.
    pub fn kinds(&self) -> Vec<&str> {
        let mut kinds: Vec<&str> = Vec::new();
        for kind in self.mixes.iter().flat_map(|m| m.split(',')) {
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        kinds
    }

    /// The semaphores' names (their count keys stay after the run).
    pub fn semaphores(&self) -> Vec<String> {
        monitored(&self.mixes, &self.locks)
            .into_iter()
            .filter(|(_, family)| matches!(*family, "sem" | "exp"))
            .map(|(name, _)| name)
            .collect()
    }
}

impl Run {
    pub fn new(name: &str) -> Run {
        Run::with_persistence(name, true)
    }

    pub fn with_persistence(name: &str, persistent: bool) -> Run {
        Run::start(name, persistent, Setup::default())
    }

    /// A run of `setup`'s workers on a persistent server.
    pub fn with(name: &str, setup: Setup) -> Run {
        Run::start(name, true, setup)
    }

    pub fn start(name: &str, persistent: bool, setup: Setup) -> Run {
        let slots = setup.mixes.len();
        let lab = Lab::new(slots);
        let dir = std::env::temp_dir().join(format!(
            "adl-nemesis-{}-{name}-{:x}",
            std::process::id(),
            now_us()
        ));
        std::fs::create_dir_all(&dir).expect("nemesis temp dir");
        let binary = super::lock_worker_binary();
        let monitor = Monitor::start(
            format!("redis://{}:{REDIS_PORT}/", lab.server_admin),
            monitored(&setup.mixes, &setup.locks),
        );
        let mut run = Run {
            name: name.to_string(),
            workers: Vec::new(),
            slot: Vec::new(),
            redis: None,
            monitor,
            faults: Vec::new(),
            handovers: 0,
            dir,
            persistent,
            setup,
            targets: None,
            lab,
        };
        run.start_redis();
        for i in 0..slots {
            let index = run.spawn_worker(binary, i);
            run.slot.push(index);
        }
        for i in 0..slots {
            run.wait_for(&format!("worker in slot {i} to be granted a lock"), || {
                grants(&run.workers[run.slot[i]].history) > 0
            });
        }
        run
    }

    pub fn admin_url(&self) -> String {
        format!("redis://{}:{REDIS_PORT}/", self.lab.server_admin)
    }

    pub fn start_redis(&mut self) {
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

    pub fn spawn_worker(&mut self, binary: &Path, slot: usize) -> usize {
        let id = self.workers.len() as u64 + 1;
        let history = self.dir.join(format!("worker-{id}.jsonl"));
        let stderr = std::fs::File::create(self.dir.join(format!("worker-{id}.err")))
            .expect("worker stderr");
        let (program, before) = match &self.setup.launches[slot] {
            Some(launch) => (launch.program.as_path(), launch.before.as_slice()),
            None => (binary, &[][..]),
        };
        let mut child = self
            .lab
            .in_client(slot, program.to_str().expect("utf-8 path"))
            .args(before)
            .arg(format!(
                "redis://{}:{REDIS_PORT}/",
                self.lab.server_addr_for(slot)
            ))
            .arg(id.to_string())
            .arg(&history)
            .args(["--locks", &self.setup.locks.join(",")])
            .args(["--tasks", &TASKS.to_string()])
            .args(["--lease-ms", &LEASE.as_millis().to_string()])
            .args(["--timeout-ms", &TIMEOUT_MS.to_string()])
            .args(["--mix", &self.setup.mixes[slot]])
            .args(["--permits", &self.setup.permits.to_string()])
            .args(
                self.setup.broken[slot]
                    .iter()
                    .flat_map(|mode| ["--broken", mode.as_str()]),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn a worker in its namespace");
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

    pub fn wait_for(&self, what: &str, mut cond: impl FnMut() -> bool) {
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

    pub fn worker(&self, slot: usize) -> &Worker {
        &self.workers[self.slot[slot]]
    }

    /// Waits (up to 5 s, then goes ahead) until the worker in `slot` holds a lock, so that
    /// the next fault hits a holder.
    pub fn until_holding(&self, slot: usize) {
        let Some(client) = client_id(&self.worker(slot).history) else {
            return;
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let holding = self.monitor.latest().is_some_and(|s| {
                s.locks.iter().any(|(lock, (_, fields))| {
                    self.targeted(lock) && fields.iter().any(|f| f.starts_with(&client))
                })
            });
            if holding {
                return;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn targeted(&self, lock: &str) -> bool {
        self.targets
            .as_ref()
            .is_none_or(|targets| targets.iter().any(|t| t == lock))
    }

    pub fn log_fault(&mut self, kind: &str, worker: Option<u64>, start: u64) {
        self.faults.push(Fault {
            kind: kind.into(),
            worker,
            start,
            end: now_us(),
        });
    }

    /// The locks the worker in `slot` holds in the monitor's first sample taken after
    /// `after` (wall clock = Redis clock).
    pub fn held_at(&self, slot: usize, after: u64) -> Vec<String> {
        let Some(client) = client_id(&self.worker(slot).history) else {
            return Vec::new();
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            let samples = self.monitor.samples.lock().unwrap();
            if let Some(sample) = samples.iter().rev().take_while(|s| s.t > after).last() {
                return sample
                    .locks
                    .iter()
                    .filter(|(lock, (_, fields))| {
                        self.targeted(lock) && fields.iter().any(|f| f.starts_with(&client))
                    })
                    .map(|(lock, _)| lock.clone())
                    .collect();
            }
            drop(samples);
            thread::sleep(Duration::from_millis(5));
        }
        Vec::new()
    }

    pub fn holds_at(&self, slot: usize, after: u64) -> bool {
        !self.held_at(slot, after).is_empty()
    }

    /// Whether a sample after `after` shows one of `locks` held by a worker other than the
    /// one in `slot`: the lock passed on.
    pub fn passed_on(&self, slot: usize, locks: &[String], after: u64) -> bool {
        let Some(client) = client_id(&self.worker(slot).history) else {
            return false;
        };
        let samples = self.monitor.samples.lock().unwrap();
        samples.iter().filter(|s| s.t > after).any(|s| {
            locks.iter().any(|lock| {
                s.locks.get(lock).is_some_and(|(_, fields)| {
                    !fields.is_empty() && fields.iter().all(|f| !f.starts_with(&client))
                })
            })
        })
    }

    /// Cuts the worker in `slot` off for `length`. The cut is made when the worker holds a
    /// lock; when the monitor shows it let go just before (its field gone within
    /// [`SETTLE_US`]), the cut is undone and tried again (up to 5 times; each try is a
    /// logged fault).
    pub fn partition(&mut self, slot: usize, length: Duration) {
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
    /// Freezes the worker in `slot` for `length` while it holds something, until a lock it
    /// held passed on to another worker meanwhile (counted in `handovers`): at most five
    /// freezes, since what it holds (a plain permit, a lock nobody else wanted then) is up
    /// to its random choices.
    pub fn pause_worker(&mut self, slot: usize, length: Duration) {
        for _ in 0..5 {
            self.until_holding(slot);
            let (start, began) = (now_us(), Instant::now());
            self.worker(slot).proc.signal(libc::SIGSTOP);
            let held = self.held_at(slot, start + SETTLE_US);
            let mut passed_on = false;
            if !held.is_empty() {
                thread::sleep(length.saturating_sub(began.elapsed()));
                passed_on = self.passed_on(slot, &held, start);
            }
            self.worker(slot).proc.signal(libc::SIGCONT);
            let id = self.worker(slot).id;
            self.log_fault("pause-worker", Some(id), start);
            if passed_on {
                self.handovers += 1;
                return;
            }
        }
    }

    pub fn pause_redis(&mut self, length: Duration) {
        let start = now_us();
        let redis = self.redis.as_ref().expect("redis running");
        redis.signal(libc::SIGSTOP);
        thread::sleep(length);
        redis.signal(libc::SIGCONT);
        self.log_fault("pause-redis", None, start);
    }

    pub fn kill_worker(&mut self, slot: usize) {
        self.until_holding(slot);
        let start = now_us();
        let index = self.slot[slot];
        self.workers[index].proc.kill();
        let id = self.workers[index].id;
        self.log_fault("kill-worker", Some(id), start);
        let replacement = self.spawn_worker(super::lock_worker_binary(), slot);
        self.slot[slot] = replacement;
    }

    pub fn restart_redis(&mut self, down: Duration) {
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
    pub fn finish(self) -> (Report, Vec<Value>) {
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
    pub fn judge(mut self) -> (Report, Vec<Value>) {
        let slots = self.slot.clone();
        let live = self
            .workers
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| slots.contains(i))
            .map(|(_, w)| w);
        let problems = stop_workers(live);
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
        report.publish(&format!(" samples={}", samples.len()));
        let keep = !report.violations.is_empty() && self.persistent;
        if !keep && std::env::var_os("NEMESIS_KEEP").is_none() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            // What the checker read besides the histories, for whoever looks into a failure.
            let lines = |items: Vec<String>| items.join("\n") + "\n";
            let sampled = samples.iter().map(|s| format!("{s:?}")).collect();
            let _ = std::fs::write(self.dir.join("samples.txt"), lines(sampled));
            let faults = self.faults.iter().map(|f| format!("{f:?}")).collect();
            let _ = std::fs::write(self.dir.join("faults.txt"), lines(faults));
            println!("histories kept in {}", self.dir.display());
        }
        (report, events)
    }

    /// Every key after the run (SCAN), once the lock keys are gone or after two leases and
    /// 3 s (a killed holder's lock lives out its lease).
    pub fn wait_for_keys_to_go(&self) -> Vec<String> {
        let client = redis::Client::open(self.admin_url()).expect("url");
        let semaphores = self.setup.semaphores();
        let deadline = Instant::now() + 2 * LEASE + Duration::from_secs(3);
        loop {
            let keys = scan_all(&client);
            let lock_keys = keys
                .iter()
                // A dead waiter's fair queue stays until somebody calls: not worth waiting for.
                .filter(|k| !history::allowed_leftover(k, &semaphores))
                .filter(|k| !k.starts_with("redisson_lock_queue:"))
                .filter(|k| !k.starts_with("redisson_lock_timeout:"))
                .count();
            if lock_keys == 0 || Instant::now() > deadline {
                return keys;
            }
            thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Tells `workers` to stop, waits up to 20 s for each to exit, and says what went wrong: a
/// failed exit, a worker that had to be killed, or one that did not say `stopped`.
pub fn stop_workers<'a>(workers: impl IntoIterator<Item = &'a mut Worker>) -> Vec<String> {
    let mut workers: Vec<&mut Worker> = workers.into_iter().collect();
    let mut problems = Vec::new();
    for worker in workers.iter_mut() {
        if let Some(mut stdin) = worker.stdin.take() {
            let _ = stdin.write_all(b"stop\n");
        }
    }
    for worker in workers {
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
    problems
}

pub fn scan_all(client: &redis::Client) -> Vec<String> {
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

pub fn grants(history: &Path) -> usize {
    std::fs::read_to_string(history)
        .map(|t| t.matches("\"ev\":\"grant\"").count())
        .unwrap_or(0)
}

pub fn client_id(history: &Path) -> Option<String> {
    history::read_history(history)
        .iter()
        .find(|e| e["ev"] == "start")
        .and_then(|e| e["client"].as_str().map(|c| format!("{c}:")))
}

pub fn assert_clean(report: &Report) {
    assert!(
        report.violations.is_empty(),
        "the checker found violations:\n{report}"
    );
    assert!(
        report.acquisitions >= 10,
        "too few acquisitions to judge:\n{report}"
    );
}
