//! The nemesis harness for replicated deployments (`tests/nemesis_failover.rs`): a Redis
//! Cluster or a Sentinel deployment on loopback ports ([`topology`](super::topology)),
//! `lock_worker` processes beside it (the faults here are the servers', so no network
//! namespaces), a monitor that samples every lock on the node serving it and follows it
//! across failovers, and the failovers injected, as faults of the server (`worker: None`).
//! [`FailoverRun::judge`] stops the workers and hands everything to the checker
//! ([`history`](super::history)); [`LockFigures`] splits its findings per lock, so that a
//! scenario can say what each failover did to the lock it moved.
#![allow(dead_code)]

use super::history::{self, Fault, Report};
use super::nemesis::{now_us, stop_workers, Worker, LEASE, TASKS, TIMEOUT_MS};
use super::netns::Proc;
use super::slot_monitor::{connect, port_of, Locator, SlotMonitor};
use super::topology::{RedisCluster, SentinelSetup};
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Worker processes of a run.
pub const WORKERS: usize = 3;

/// The deployment under test; dropped last (after the processes that use it).
pub enum Deployment {
    Cluster(RedisCluster),
    Sentinel(SentinelSetup),
}

/// One scenario on a replicated deployment. Field order matters for drop: the workers
/// and the monitor go before the servers.
pub struct FailoverRun {
    pub name: String,
    pub locks: Vec<String>,
    pub workers: Vec<Worker>,
    monitor: SlotMonitor,
    pub faults: Vec<Fault>,
    /// Failovers that completed (the new primary named by every node or Sentinel).
    pub failovers: usize,
    /// When [`kill_lagging_primary`](Self::kill_lagging_primary) killed the primary.
    pub killed_at: Option<u64>,
    pub dir: PathBuf,
    pub sync: bool,
    pub deployment: Deployment,
}

impl FailoverRun {
    /// Starts [`WORKERS`] workers on `locks` (each with a hash tag) of `cluster`, with the
    /// client's default replica sync if `sync` (else `--sync-replicas off`), and waits until
    /// each was granted a lock.
    pub fn cluster(name: &str, cluster: RedisCluster, locks: &[String], sync: bool) -> Self {
        let nodes: Vec<String> = cluster
            .ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let target = vec!["--cluster".to_string(), nodes.join(",")];
        let locator = Locator::Cluster(cluster.ports());
        Self::start(
            name,
            Deployment::Cluster(cluster),
            locator,
            target,
            locks,
            sync,
        )
    }

    /// As [`cluster`](Self::cluster), on the primary that `setup`'s Sentinels name.
    pub fn sentinel(name: &str, setup: SentinelSetup, locks: &[String], sync: bool) -> Self {
        let sentinels: Vec<String> = setup
            .sentinel_ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let target = vec![
            "--sentinel".to_string(),
            sentinels.join(","),
            "--service".to_string(),
            setup.master_name().to_string(),
        ];
        let locator = Locator::Sentinel(setup.sentinel_ports(), setup.master_name().into());
        Self::start(
            name,
            Deployment::Sentinel(setup),
            locator,
            target,
            locks,
            sync,
        )
    }

    fn start(
        name: &str,
        deployment: Deployment,
        locator: Locator,
        mut target: Vec<String>,
        locks: &[String],
        sync: bool,
    ) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "adl-nemesis-{}-{name}-{:x}",
            std::process::id(),
            now_us()
        ));
        std::fs::create_dir_all(&dir).expect("nemesis temp dir");
        if !sync {
            // Replica sync is on by default: a run without it opts out.
            target.extend(["--sync-replicas".to_string(), "off".to_string()]);
        }
        let monitor = SlotMonitor::start(locator, locks.to_vec());
        let mut run = FailoverRun {
            name: name.to_string(),
            locks: locks.to_vec(),
            workers: Vec::new(),
            monitor,
            faults: Vec::new(),
            failovers: 0,
            killed_at: None,
            dir,
            sync,
            deployment,
        };
        let binary = super::lock_worker_binary();
        for id in 1..=WORKERS as u64 {
            let history = run.dir.join(format!("worker-{id}.jsonl"));
            let stderr = std::fs::File::create(run.dir.join(format!("worker-{id}.err")))
                .expect("worker stderr");
            let mut child = Command::new(binary)
                // The data nodes' URL: only its credentials and database count here.
                .arg("redis://127.0.0.1/")
                .arg(id.to_string())
                .arg(&history)
                .args(["--locks", &locks.join(",")])
                .args(["--tasks", &TASKS.to_string()])
                .args(["--lease-ms", &LEASE.as_millis().to_string()])
                .args(["--timeout-ms", &TIMEOUT_MS.to_string()])
                .args(&target)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(stderr)
                .spawn()
                .expect("spawn lock_worker");
            let stdin = child.stdin.take();
            run.workers.push(Worker {
                id,
                proc: Proc {
                    child,
                    name: format!("worker {id}"),
                },
                stdin,
                history,
            });
        }
        for w in 0..WORKERS {
            let err = run.dir.join(format!("worker-{}.err", w + 1));
            let deadline = Instant::now() + Duration::from_secs(30);
            while super::nemesis::grants(&run.workers[w].history) == 0 {
                let exited = run.workers[w].proc.child.try_wait().ok().flatten();
                assert!(
                    exited.is_none(),
                    "[{name}] worker {} exited ({exited:?}): {}",
                    w + 1,
                    std::fs::read_to_string(&err).unwrap_or_default()
                );
                assert!(
                    Instant::now() < deadline,
                    "[{name}] timed out waiting for worker {} to be granted a lock",
                    w + 1
                );
                thread::sleep(Duration::from_millis(10));
            }
        }
        run
    }

    pub fn cluster_mut(&mut self) -> &mut RedisCluster {
        match &mut self.deployment {
            Deployment::Cluster(c) => c,
            Deployment::Sentinel(_) => panic!("{}: not a cluster run", self.name),
        }
    }

    pub fn sentinel_mut(&mut self) -> &mut SentinelSetup {
        match &mut self.deployment {
            Deployment::Sentinel(s) => s,
            Deployment::Cluster(_) => panic!("{}: not a Sentinel run", self.name),
        }
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

    fn log_fault(&mut self, kind: &str, start: u64) -> u64 {
        let end = now_us();
        self.faults.push(Fault {
            kind: kind.into(),
            worker: None,
            start,
            end,
        });
        self.failovers += 1;
        end
    }

    /// Waits until the monitor shows `lock` held (so that the failover hits a holder), at
    /// most 5 s.
    fn until_held(&self, lock: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let held = self
                .monitor
                .samples
                .lock()
                .unwrap()
                .iter()
                .rev()
                .find_map(|s| s.locks.get(lock).map(|(_, fields)| !fields.is_empty()));
            if held == Some(true) {
                return;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// `CLUSTER FAILOVER` on the replica of the primary serving `lock`, once the lock is
    /// held; returns when every node names the replica as the slot's owner (the fault's end).
    pub fn graceful_failover(&mut self, lock: &str) -> u64 {
        self.until_held(lock);
        let cluster = self.cluster_mut();
        let replica = cluster.replica_of(cluster.primary_for_key(lock));
        let start = now_us();
        cluster.failover_to(replica, Duration::from_secs(15));
        self.log_fault("cluster-failover", start)
    }

    /// Gives the primary serving `lock` one more replica (a promoted replica has none: the
    /// default replica sync then grants unconfirmed, and `sync_replicas` refuses).
    pub fn add_replica_for(&mut self, lock: &str) {
        let cluster = self.cluster_mut();
        let primary = cluster.primary_for_key(lock);
        cluster.add_replica(primary);
    }

    /// SIGKILL of the primary serving `lock`, once the lock is held; returns when its
    /// replica serves the slots, as every live node agrees (the fault's end).
    pub fn kill_primary(&mut self, lock: &str) -> u64 {
        self.until_held(lock);
        let cluster = self.cluster_mut();
        let primary = cluster.primary_for_key(lock);
        let start = now_us();
        cluster.kill_node(primary);
        cluster.wait_for_failover(primary, Duration::from_secs(20));
        self.log_fault("kill-primary", start)
    }

    /// SIGKILL of the primary serving `locks[0]` after its replicas fell behind: the
    /// primary's replication streams are dropped (`iptables` on loopback, the primary's
    /// port to each replica's connection) from the fault's start; the primary is killed
    /// once one of `locks` was granted after that (or after `cut` with replica sync on,
    /// which refuses grants the replica does not confirm), and the rules are removed once
    /// the failover completed. What the primary did in between is lost with it. Returns
    /// when the failover completed.
    pub fn kill_lagging_primary(&mut self, locks: &[String], cut: Duration) -> u64 {
        self.until_held(&locks[0]);
        let primary = self.cluster_mut().primary_for_key(&locks[0]);
        let rules = ReplicationCut::new(primary);
        // The fault starts once the rules drop the streams: a grant asked before that
        // may still reach the replicas, and would count as lagged without being lost.
        let start = now_us();
        let began = Instant::now();
        while began.elapsed() < cut
            || (!self.sync && self.grants_between(locks, start, u64::MAX) == 0)
        {
            assert!(
                began.elapsed() < Duration::from_secs(10),
                "[{}] no grant of {locks:?} while the replicas lagged",
                self.name
            );
            thread::sleep(Duration::from_millis(10));
        }
        self.killed_at = Some(now_us());
        let cluster = self.cluster_mut();
        cluster.kill_node(primary);
        // The kernel still sends what the dead process had written to its sockets: the
        // streams stay cut until the replica took over, as when the machine itself dies.
        cluster.wait_for_failover(primary, Duration::from_secs(20));
        drop(rules);
        self.log_fault("kill-lagging-primary", start)
    }

    /// Waits (at most `bound`) until every lock granted (asked after `from`, given before
    /// `to`) has drawn a token as high again after `after`, by a grant or a re-entry: a
    /// counter that went back on a failover has then handed that token out twice. False
    /// past the bound.
    pub fn tokens_drawn_again(
        &self,
        locks: &[String],
        from: u64,
        to: u64,
        after: u64,
        bound: Duration,
    ) -> bool {
        let deadline = Instant::now() + bound;
        loop {
            let events = self.events();
            let token = |e: &Value| e["token"].as_u64().unwrap_or(0);
            let all_again = granted_between(&events, locks, from, to).all(|lagged| {
                events.iter().any(|e| {
                    e["lock"] == lagged["lock"]
                        && (e["ev"] == "grant" || e["ev"] == "reenter")
                        && e["l_after"]
                            .as_u64()
                            .or(e["l"].as_u64())
                            .is_some_and(|t| t > after)
                        && token(e) >= token(lagged)
                })
            });
            if all_again {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Grants of `locks` asked for after `from` and given before `to` (local clocks).
    pub fn grants_between(&self, locks: &[String], from: u64, to: u64) -> usize {
        grants_between(&self.events(), locks, from, to)
    }

    /// SIGKILL of the Sentinels' primary once `lock` is held; returns when every Sentinel
    /// names the replica and it answers `role:master`.
    pub fn kill_sentinel_primary(&mut self, lock: &str) -> u64 {
        self.until_held(lock);
        let setup = self.sentinel_mut();
        let start = now_us();
        let old = setup.kill_primary();
        setup.wait_for_failover(old, Duration::from_secs(20));
        self.log_fault("kill-primary", start)
    }

    /// Waits (at most `bound`) for a grant of one of `locks` after `after`; returns how
    /// long after `after` it came, in ms, or `None` if none came within `bound`.
    pub fn first_grant_after(&self, locks: &[String], after: u64, bound: Duration) -> Option<f64> {
        self.grant_after(locks, after, 1, bound)
    }

    /// Waits (at most `bound`) until `locks` have been granted `n` times after `after`
    /// (µs); the ms from `after` to the `n`th of those grants, or `None` past the bound.
    pub fn grant_after(
        &self,
        locks: &[String],
        after: u64,
        n: usize,
        bound: Duration,
    ) -> Option<f64> {
        let deadline = Instant::now() + bound;
        loop {
            let mut grants: Vec<u64> = self
                .events()
                .iter()
                .filter(|e| e["ev"] == "grant")
                .filter(|e| locks.iter().any(|l| e["lock"] == l.as_str()))
                .filter_map(|e| e["l_after"].as_u64())
                .filter(|&t| t > after)
                .collect();
            grants.sort_unstable();
            if let Some(&t) = grants.get(n.saturating_sub(1)) {
                return Some((t - after) as f64 / 1000.0);
            }
            if Instant::now() > deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn events(&self) -> Vec<Value> {
        self.workers
            .iter()
            .flat_map(|w| history::read_history(&w.history))
            .collect()
    }

    /// Every key left on the deployment's primaries once the lock keys are gone, or after
    /// two leases and 3 s (a lock whose unlock found no primary runs out its lease).
    fn keys_left(&self) -> Vec<String> {
        let deadline = Instant::now() + 2 * LEASE + Duration::from_secs(3);
        loop {
            let keys = match &self.deployment {
                Deployment::Cluster(cluster) => cluster.keys_on_all(),
                Deployment::Sentinel(setup) => {
                    let client = redis::Client::open(setup.primary_url()).expect("url");
                    super::nemesis::scan_all(&client)
                }
            };
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

    /// Stops the workers, waits for the lock keys to go and judges the run: the report
    /// (workers that did not stop cleanly are violations too), every event and the number
    /// of samples the monitor took.
    pub fn judge(mut self) -> (Report, Vec<Value>, usize) {
        let problems = stop_workers(&mut self.workers);
        let keys_left = self.keys_left();
        let samples = self.monitor.finish();
        let events = self.events();
        let mut report = history::check(
            &self.name,
            &events,
            &samples,
            &self.faults,
            LEASE.as_micros() as u64,
            &keys_left,
        );
        report.violations.extend(problems);
        let keep = !report.violations.is_empty() || std::env::var_os("NEMESIS_KEEP").is_some();
        if keep {
            println!("[{}] histories kept in {}", self.name, self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        (report, events, samples.len())
    }
}

/// Grants of `locks` in `events` asked for after `from` and given before `to`.
pub fn grants_between(events: &[Value], locks: &[String], from: u64, to: u64) -> usize {
    granted_between(events, locks, from, to).count()
}

/// The grant events of [`grants_between`].
fn granted_between<'a>(
    events: &'a [Value],
    locks: &'a [String],
    from: u64,
    to: u64,
) -> impl Iterator<Item = &'a Value> {
    events
        .iter()
        .filter(|e| e["ev"] == "grant" && locks.iter().any(|l| e["lock"] == l.as_str()))
        .filter(move |e| e["l_call"].as_u64().is_some_and(|t| t > from))
        .filter(move |e| e["l_after"].as_u64().is_some_and(|t| t < to))
}

/// What the run did to a group of locks (the locks of one primary), from the events and
/// the checker's violations (each violation names its lock first: `<lock>: ...`).
#[derive(Debug, Default)]
pub struct LockFigures {
    pub locks: Vec<String>,
    pub grants_before: usize,
    pub grants_after: usize,
    /// Two holders at once (the checker's overlap rule).
    pub overlaps: usize,
    /// Fencing tokens handed out twice.
    pub tokens_twice: usize,
    /// Grants whose token is not above one granted before them (the checker's token
    /// order rule: a grant the new primary never saw hands its token out again).
    pub tokens_backwards: usize,
    /// Store writes accepted under a token lower than one accepted before.
    pub stale_accepted: usize,
    /// Tokens drawn more than once, by grants and re-entries alike (a re-entry that found
    /// its lost hold's key gone takes the lock again, and draws a token the promoted
    /// replica never saw handed out).
    pub tokens_redrawn: usize,
    /// Every other violation about these locks.
    pub other: Vec<String>,
}

impl LockFigures {
    /// Figures of `locks` around a fault `[start, end]`: grants before its start and
    /// after its end.
    pub fn of(locks: &[String], events: &[Value], report: &Report, start: u64, end: u64) -> Self {
        let mut figures = LockFigures {
            locks: locks.to_vec(),
            ..Self::default()
        };
        let ours = |lock: &str| locks.iter().any(|l| l == lock);
        let mut drawn = std::collections::BTreeSet::new();
        for e in events
            .iter()
            .filter(|e| e["lock"].as_str().is_some_and(ours))
        {
            let token = e["token"].as_u64().filter(|&t| t > 0);
            if let (Some(token), true) = (token, e["ev"] == "grant" || e["ev"] == "reenter") {
                if !drawn.insert((e["lock"].to_string(), token)) {
                    figures.tokens_redrawn += 1;
                }
            }
            if e["ev"] == "grant" {
                match e["l_after"].as_u64() {
                    Some(t) if t < start => figures.grants_before += 1,
                    Some(t) if t > end => figures.grants_after += 1,
                    _ => {}
                }
            }
        }
        let about_ours = |v: &&String| v.split_once(": ").is_some_and(|(lock, _)| ours(lock));
        for v in report.violations.iter().filter(about_ours) {
            if v.contains("overlap") {
                figures.overlaps += 1;
            } else if v.contains("granted twice") {
                figures.tokens_twice += 1;
            } else if v.contains("is not above token") {
                figures.tokens_backwards += 1;
            } else if v.contains("accepted at") || v.contains("store accepted token") {
                figures.stale_accepted += 1;
            } else {
                figures.other.push(v.clone());
            }
        }
        figures
    }

    /// Violations of the rules a failover may break without replica sync.
    pub fn two_holders(&self) -> usize {
        self.overlaps + self.tokens_twice + self.tokens_backwards + self.stale_accepted
    }
}

impl std::fmt::Display for LockFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: grants_before={} grants_after={} overlaps={} tokens_twice={} \
             tokens_backwards={} stale_writes_accepted={} tokens_redrawn={}",
            self.locks.join(","),
            self.grants_before,
            self.grants_after,
            self.overlaps,
            self.tokens_twice,
            self.tokens_backwards,
            self.stale_accepted,
            self.tokens_redrawn
        )
    }
}

/// Appends `line` to the suite's report log (`<target>/tmp/nemesis-report.log`) and prints it.
pub fn report_line(line: &str) {
    println!("{line}");
    let log = option_env!("CARGO_TARGET_TMPDIR")
        .map_or_else(std::env::temp_dir, PathBuf::from)
        .join("nemesis-report.log");
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
    {
        let _ = writeln!(file, "{line}");
    }
}

/// Drops everything the primary on a port sends to its replicas (the replication
/// streams, found in `CLIENT LIST TYPE replica`) with `iptables` rules on loopback, until
/// dropped.
struct ReplicationCut {
    rules: Vec<Vec<String>>,
}

impl ReplicationCut {
    fn new(primary: u16) -> ReplicationCut {
        let mut conn = connect(primary).expect("connect to the primary to cut");
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg("replica")
            .query(&mut conn)
            .expect("CLIENT LIST TYPE replica");
        let ports: Vec<u16> = list
            .lines()
            .filter_map(|line| line.split(' ').find_map(|f| f.strip_prefix("addr=")))
            .filter_map(port_of)
            .collect();
        assert!(
            !ports.is_empty(),
            "primary {primary} has no replica: {list}"
        );
        let mut cut = ReplicationCut { rules: Vec::new() };
        for port in ports {
            let rule: Vec<String> = [
                "OUTPUT",
                "-o",
                "lo",
                "-p",
                "tcp",
                "--sport",
                &primary.to_string(),
                "--dport",
                &port.to_string(),
                "-j",
                "DROP",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            iptables("-I", &rule);
            cut.rules.push(rule);
        }
        cut
    }
}

fn iptables(op: &str, rule: &[String]) {
    let status = Command::new("iptables")
        .arg(op)
        .args(rule)
        .status()
        .expect("run iptables (root only)");
    assert!(status.success(), "iptables {op} {rule:?} failed: {status}");
}

impl Drop for ReplicationCut {
    fn drop(&mut self) {
        for rule in &self.rules {
            let _ = Command::new("iptables").arg("-D").args(rule).status();
        }
    }
}
