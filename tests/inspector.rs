//! The `lock-inspect` command against real servers: every lock kind written by two Rust
//! clients (one of them another process) and by the real Redisson is listed with its kind,
//! holders, hold counts and TTL; a fair queue in order; force-unlock frees a lock, wakes its
//! waiter and tells its holder; keys that are not locks are neither listed nor touched;
//! `--json`, the error lines and exit codes, passwords; a cluster and Sentinel.
#![cfg(feature = "cli")]
// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{AcquireOptions, LockClient, LockOwner, PermitOptions};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};
use support::java_peer::{JavaPeer, PeerOptions, Redisson, Target};
use support::topology::{RedisCluster, SentinelSetup};
use support::{client, client_with, eventually, RedisServer};
use tokio::sync::mpsc;

const BINARY: &str = env!("CARGO_BIN_EXE_lock-inspect");
/// How long one run of the command may take (generous: CI is loaded).
const RUN_BOUND: Duration = Duration::from_secs(30);
/// How soon a waiter gets a force-unlocked lock, and its holder hears it lost it.
const WAKE_BOUND: Duration = Duration::from_secs(10);

/// What one run of the command left.
#[derive(Debug)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

impl Run {
    /// Asserts a success with nothing on stderr and returns stdout parsed as JSON.
    fn json(&self) -> Value {
        self.ok();
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }

    fn ok(&self) -> &str {
        assert_eq!(self.code, Some(0), "lock-inspect failed: {self:?}");
        assert_eq!(self.stderr, "", "a success printed on stderr: {self:?}");
        &self.stdout
    }

    /// Asserts a failure with exit `code`: nothing on stdout, one line on stderr; returns it.
    fn failed(&self, code: i32) -> &str {
        assert_eq!(self.code, Some(code), "exit code: {self:?}");
        assert_eq!(self.stdout, "", "a failure printed on stdout: {self:?}");
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "a failure is one line on stderr: {self:?}");
        assert!(lines[0].starts_with("lock-inspect: "), "{self:?}");
        lines[0]
    }
}

/// Runs `lock-inspect ARGS` with `stdin` (none: stdin is empty) and waits for it.
async fn inspect_with(args: &[&str], stdin: Option<&str>) -> Run {
    let started = Instant::now();
    let mut child = tokio::process::Command::new(BINARY)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start lock-inspect");
    let mut input = child.stdin.take().expect("piped stdin");
    if let Some(text) = stdin {
        tokio::io::AsyncWriteExt::write_all(&mut input, text.as_bytes())
            .await
            .expect("write to lock-inspect's stdin");
    }
    drop(input);
    let output = tokio::time::timeout(RUN_BOUND, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("lock-inspect {args:?} did not finish in {RUN_BOUND:?}"))
        .expect("wait for lock-inspect");
    Run {
        code: output.status.code(),
        stdout: String::from_utf8(output.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(output.stderr).expect("utf-8 stderr"),
        took: started.elapsed(),
    }
}

async fn inspect(args: &[&str]) -> Run {
    inspect_with(args, None).await
}

/// `list --json` (with `extra` arguments) as JSON values, in the order printed.
async fn list(url: &str, extra: &[&str]) -> Vec<Value> {
    let mut args = vec![url, "list", "--json"];
    args.extend_from_slice(extra);
    match inspect(&args).await.json() {
        Value::Array(locks) => locks,
        other => panic!("list --json printed no array: {other}"),
    }
}

fn names(locks: &[Value]) -> Vec<&str> {
    locks.iter().map(|l| l["name"].as_str().unwrap()).collect()
}

fn find<'a>(locks: &'a [Value], name: &str) -> &'a Value {
    locks
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("`{name}` is not listed: {locks:?}"))
}

/// The holders of `lock` as (client id, owner id, count, write), sorted.
fn holders(lock: &Value) -> Vec<(String, u64, u64, bool)> {
    let mut all: Vec<_> = lock["holders"]
        .as_array()
        .unwrap_or_else(|| panic!("no holders array: {lock}"))
        .iter()
        .map(|h| {
            (
                h["client_id"].as_str().unwrap_or_default().to_string(),
                h["owner"].as_u64().unwrap_or(u64::MAX),
                h["count"].as_u64().unwrap(),
                h["write"].as_bool().unwrap(),
            )
        })
        .collect();
    all.sort();
    all
}

/// Asserts `lock`'s TTL is within `(0, max]` ms.
fn assert_ttl(lock: &Value, min_ms: u64, max_ms: u64) {
    let ttl = lock["ttl_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("`{}` has no TTL: {lock}", lock["name"]));
    assert!(
        (min_ms..=max_ms).contains(&ttl),
        "`{}`: TTL {ttl} ms not within {min_ms}..={max_ms}",
        lock["name"]
    );
}

/// A `lock_holder` process holding one lock; SIGKILLed on drop.
struct HolderProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    client_id: String,
    owner: u64,
}

impl HolderProcess {
    /// Starts it (`args` after the URL and name) and waits for its `acquired` line.
    async fn start(url: &str, name: &str, args: &[&str]) -> HolderProcess {
        let mut child = Command::new(support::lock_holder_binary())
            .arg(url)
            .arg(name)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn lock_holder");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut process = HolderProcess {
            stdin: child.stdin.take(),
            child,
            lines,
            client_id: String::new(),
            owner: 0,
        };
        let line = process.line(RUN_BOUND).await;
        let ids: Vec<&str> = line
            .strip_prefix("acquired ")
            .unwrap_or_else(|| panic!("expected `acquired <client> <owner>`, got `{line}`"))
            .split(' ')
            .collect();
        process.client_id = ids[0].to_string();
        process.owner = ids[1].parse().expect("a numeric owner id");
        process
    }

    async fn line(&mut self, limit: Duration) -> String {
        tokio::time::timeout(limit, self.lines.recv())
            .await
            .unwrap_or_else(|_| panic!("lock_holder printed no line within {limit:?}"))
            .expect("lock_holder exited")
    }

    fn field(&self) -> String {
        format!("{}:{}", self.client_id, self.owner)
    }
}

impl Drop for HolderProcess {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `LLEN` of a fair lock's queue.
async fn queue_len(server: &RedisServer, name: &str) -> usize {
    let mut conn = server.conn().await;
    redis::cmd("LLEN")
        .arg(format!("redisson_lock_queue:{{{name}}}"))
        .query_async(&mut conn)
        .await
        .expect("LLEN")
}

async fn wait_for_queue(server: &RedisServer, name: &str, len: usize) {
    eventually(
        &format!("{len} waiter(s) queued on `{name}`"),
        RUN_BOUND,
        || async { queue_len(server, name).await >= len },
    )
    .await;
}

/// A client whose watchdog renews every second (a lost lock is noticed within one).
async fn quick_client(server: &RedisServer) -> LockClient {
    client_with(server, |c| c.watchdog_timeout(Duration::from_secs(3))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_from_two_rust_clients_is_listed_with_holders_counts_and_ttls() {
    let _ = support::lock_holder_binary();
    let server = RedisServer::start();
    let url = server.url();
    let a = client(&server).await;
    let other = HolderProcess::start(&url, "rust:other", &["--lease-ms", "60000"]).await;

    let o1 = LockOwner::new();
    let reentrant = a.lock("rust:reentrant").unwrap();
    let first = reentrant
        .acquire_with(AcquireOptions::new().owner(o1))
        .await
        .unwrap();
    let _second = first.reenter(Duration::from_secs(5)).await.unwrap();
    let fenced = a
        .fenced_lock("rust:fenced")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let token = fenced.fencing_token().expect("a fenced hold has a token");
    let fair_owner = LockOwner::new();
    let _fair = a
        .fair_lock("rust:fair")
        .unwrap()
        .acquire_with(AcquireOptions::new().owner(fair_owner))
        .await
        .unwrap();
    let fair_waiter = {
        let lock = a.fair_lock("rust:fair").unwrap();
        tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(60)).await })
    };
    wait_for_queue(&server, "rust:fair", 1).await;
    let (r1, r2, w1, f1) = (
        LockOwner::new(),
        LockOwner::new(),
        LockOwner::new(),
        LockOwner::new(),
    );
    let read = a.read_write_lock("rust:read").unwrap();
    let _read1 = read
        .read()
        .acquire_with(AcquireOptions::new().owner(r1))
        .await
        .unwrap();
    let _read2 = read
        .read()
        .acquire_with(AcquireOptions::new().owner(r2))
        .await
        .unwrap();
    let write = a.read_write_lock("rust:write").unwrap();
    let _write = write
        .write()
        .acquire_with(AcquireOptions::new().owner(w1))
        .await
        .unwrap();
    let _fast = a
        .fast_lock("rust:fast")
        .unwrap()
        .acquire_with(AcquireOptions::new().owner(f1))
        .await
        .unwrap();
    let sem = a.semaphore("rust:sem").unwrap();
    assert!(sem.try_set_permits(5).await.unwrap());
    let _permits = sem.acquire(2).await.unwrap();
    let psem = a.expirable_semaphore("rust:psem").unwrap();
    assert!(psem.try_set_permits(3).await.unwrap());
    let permit = psem
        .acquire_with(PermitOptions::new().lease(Duration::from_secs(60)))
        .await
        .unwrap();

    let locks = list(&url, &[]).await;
    assert_eq!(
        names(&locks),
        [
            "rust:fair",
            "rust:fast",
            "rust:fenced",
            "rust:other",
            "rust:psem",
            "rust:read",
            "rust:reentrant",
            "rust:sem",
            "rust:write"
        ],
        "every lock, sorted by name, and nothing else (no derived key)"
    );
    let id = a.id().to_string();
    let kind = |name: &str| find(&locks, name)["kind"].as_str().unwrap().to_string();

    let lock = find(&locks, "rust:reentrant");
    assert_eq!(kind("rust:reentrant"), "reentrant");
    assert_eq!(holders(lock), [(id.clone(), o1.id(), 2, false)]);
    assert_eq!(lock["holders"][0]["field"], format!("{id}:{}", o1.id()));
    assert_ttl(lock, 1, 30_000);

    let lock = find(&locks, "rust:other");
    assert_eq!(kind("rust:other"), "reentrant");
    assert_eq!(
        holders(lock),
        [(other.client_id.clone(), other.owner, 1, false)]
    );
    assert_ne!(other.client_id, id, "two clients");
    assert_ttl(lock, 30_001, 60_000); // its own 60 s lease, not a watchdog's 30 s

    let lock = find(&locks, "rust:fenced");
    assert_eq!(kind("rust:fenced"), "fenced");
    assert_eq!(lock["fencing_token"].as_u64(), Some(token));
    assert_eq!(holders(lock).len(), 1);
    assert_ttl(lock, 1, 30_000);

    let lock = find(&locks, "rust:fair");
    assert_eq!(kind("rust:fair"), "fair");
    assert_eq!(holders(lock), [(id.clone(), fair_owner.id(), 1, false)]);
    assert_eq!(lock["waiters"].as_array().unwrap().len(), 1);

    let lock = find(&locks, "rust:read");
    assert_eq!(kind("rust:read"), "read_write");
    assert_eq!(lock["mode"], "read");
    let mut readers = vec![
        (id.clone(), r1.id(), 1, false),
        (id.clone(), r2.id(), 1, false),
    ];
    readers.sort();
    assert_eq!(holders(lock), readers);
    assert_ttl(lock, 1, 30_000);

    let lock = find(&locks, "rust:write");
    assert_eq!(kind("rust:write"), "read_write");
    assert_eq!(lock["mode"], "write");
    assert_eq!(holders(lock), [(id.clone(), w1.id(), 1, true)]);

    let lock = find(&locks, "rust:fast");
    assert_eq!(kind("rust:fast"), "fast");
    assert_eq!(holders(lock), [(id.clone(), f1.id(), 1, false)]);
    assert_ttl(lock, 1, 30_000);

    let lock = find(&locks, "rust:sem");
    assert_eq!(kind("rust:sem"), "semaphore");
    assert_eq!(lock["permits"].as_i64(), Some(3));

    let lock = find(&locks, "rust:psem");
    assert_eq!(kind("rust:psem"), "expirable_semaphore");
    assert_eq!(lock["permits"].as_i64(), Some(2));
    let permits = lock["holders"].as_array().unwrap();
    assert_eq!(permits.len(), 1, "{lock}");
    assert_eq!(permits[0]["field"], permit.permit_id());
    let lease = permits[0]["ttl_ms"].as_u64().expect("a permit's lease");
    assert!((1..=60_000).contains(&lease), "permit lease {lease} ms");

    // The filters.
    assert_eq!(
        names(&list(&url, &["--kind", "read_write"]).await),
        ["rust:read", "rust:write"]
    );
    assert_eq!(
        names(&list(&url, &["rust:f*"]).await),
        ["rust:fair", "rust:fast", "rust:fenced"]
    );
    // `show` reports what `list` does.
    let shown = inspect(&[&url, "show", "rust:reentrant", "--json"])
        .await
        .json();
    assert_eq!(holders(&shown), [(id.clone(), o1.id(), 2, false)]);
    assert_eq!(shown["kind"], "reentrant");

    // The text table: a header, one row per lock, a count.
    let table = inspect(&[&url, "list"]).await.ok().to_string();
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{table}");
    assert_eq!(lines.len(), 1 + 9 + 1, "{table}");
    assert_eq!(lines[10], "9 locks");
    let row = lines
        .iter()
        .find(|l| l.starts_with("rust:reentrant "))
        .unwrap();
    assert!(
        row.contains(" reentrant ") && row.contains(&format!("{id}:{} x2", o1.id())),
        "{row}"
    );
    let text = inspect(&[&url, "show", "rust:sem"]).await.ok().to_string();
    assert!(text.contains("permits:  3 available"), "{text}");

    fair_waiter.abort();
    drop(other);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_holders_are_listed_with_java_thread_ids_newest() {
    redisson_holders_are_listed(Redisson::Newest).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_holders_are_listed_with_java_thread_ids_legacy() {
    redisson_holders_are_listed(Redisson::Legacy).await;
}

/// Every kind held (and a fair lock waited for) by Redisson `version`.
async fn redisson_holders_are_listed(version: Redisson) {
    let server = RedisServer::start();
    let url = server.url();
    let mut peer = JavaPeer::start(version, Target::Single(&url), PeerOptions::new()).await;
    peer.expect("a", "lock lock j:lock", "locked").await;
    peer.expect("a", "lock lock j:lock", "locked").await; // re-entered
    let reply = peer.call("b", "lock fenced j:fenced").await;
    let token: u64 = reply
        .strip_prefix("locked ")
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("java fenced lock: {reply}"));
    peer.expect("c", "lock read j:rw", "locked").await;
    peer.expect("d", "lock read j:rw", "locked").await;
    peer.expect("e", "lock write j:w", "locked").await;
    peer.expect("f", "lock fair j:fair", "locked").await;
    let g_owner = peer.owner("g").await; // asked first: the slot then blocks in `lock`
    peer.send("g", "lock fair j:fair").await; // waits
    wait_for_queue(&server, "j:fair", 1).await;
    peer.expect("s", "sem_try_set j:sem 4", "set true").await;
    peer.expect("s", "sem_acquire j:sem 1", "acquired").await;
    peer.expect("p", "psem_try_set j:psem 2", "set true").await;
    let reply = peer.call("p", "psem_acquire j:psem 60000").await;
    let permit = reply
        .strip_prefix("permit ")
        .unwrap_or_else(|| panic!("java psem_acquire: {reply}"))
        .to_string();
    let thread = |owner: String| -> (String, u64) {
        let (client, thread) = owner.rsplit_once(':').unwrap();
        (client.to_string(), thread.parse().unwrap())
    };
    let (a, b, c, d, e, f, g) = (
        thread(peer.owner("a").await),
        thread(peer.owner("b").await),
        thread(peer.owner("c").await),
        thread(peer.owner("d").await),
        thread(peer.owner("e").await),
        thread(peer.owner("f").await),
        thread(g_owner),
    );
    assert_eq!(a.0, peer.id);

    let locks = list(&url, &[]).await;
    assert_eq!(
        names(&locks),
        ["j:fair", "j:fenced", "j:lock", "j:psem", "j:rw", "j:sem", "j:w"]
    );
    let lock = find(&locks, "j:lock");
    assert_eq!(lock["kind"], "reentrant");
    assert_eq!(holders(lock), [(a.0.clone(), a.1, 2, false)]);
    assert_ttl(lock, 1, 30_000);
    let lock = find(&locks, "j:fenced");
    assert_eq!(lock["kind"], "fenced");
    assert_eq!(lock["fencing_token"].as_u64(), Some(token));
    assert_eq!(holders(lock), [(b.0.clone(), b.1, 1, false)]);
    let lock = find(&locks, "j:rw");
    assert_eq!(
        (lock["kind"].as_str(), lock["mode"].as_str()),
        (Some("read_write"), Some("read"))
    );
    let mut readers = vec![(c.0.clone(), c.1, 1, false), (d.0.clone(), d.1, 1, false)];
    readers.sort();
    assert_eq!(holders(lock), readers);
    let lock = find(&locks, "j:w");
    assert_eq!(
        (lock["kind"].as_str(), lock["mode"].as_str()),
        (Some("read_write"), Some("write"))
    );
    assert_eq!(holders(lock), [(e.0.clone(), e.1, 1, true)]);
    let lock = find(&locks, "j:fair");
    assert_eq!(lock["kind"], "fair");
    assert_eq!(holders(lock), [(f.0.clone(), f.1, 1, false)]);
    let waiters = lock["waiters"].as_array().unwrap();
    assert_eq!(waiters.len(), 1);
    assert_eq!(waiters[0]["field"], format!("{}:{}", g.0, g.1));
    assert_eq!(waiters[0]["owner"].as_u64(), Some(g.1));
    let lock = find(&locks, "j:sem");
    assert_eq!(lock["kind"], "semaphore");
    assert_eq!(lock["permits"].as_i64(), Some(3));
    let lock = find(&locks, "j:psem");
    assert_eq!(lock["kind"], "expirable_semaphore");
    assert_eq!(lock["permits"].as_i64(), Some(1));
    assert_eq!(lock["holders"][0]["field"], permit);
    peer.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_queue_of_rust_java_and_process_waiters_is_shown_in_order() {
    let _ = support::lock_holder_binary();
    let server = RedisServer::start();
    let url = server.url();
    let holder = client(&server).await;
    let waiting = client(&server).await;
    let mut peer =
        JavaPeer::start(Redisson::Newest, Target::Single(&url), PeerOptions::new()).await;
    let name = "printer";
    let _held = holder.fair_lock(name).unwrap().acquire().await.unwrap();

    let w1 = LockOwner::new();
    let first = {
        let lock = waiting.fair_lock(name).unwrap();
        tokio::spawn(async move {
            lock.acquire_with(
                AcquireOptions::new()
                    .owner(w1)
                    .wait(Duration::from_secs(60)),
            )
            .await
        })
    };
    wait_for_queue(&server, name, 1).await;
    let java = peer.owner("g").await;
    peer.send("g", &format!("lock fair {name}")).await;
    wait_for_queue(&server, name, 2).await;
    // The third waiter is another process (its field is known once it is queued).
    let mut third = Command::new(support::lock_holder_binary())
        .args([&url, name, "--kind", "fair"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn lock_holder");
    wait_for_queue(&server, name, 3).await;
    let mut conn = server.conn().await;
    let queue: Vec<String> = redis::cmd("LRANGE")
        .arg(format!("redisson_lock_queue:{{{name}}}"))
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .unwrap();

    let lock = inspect(&[&url, "show", name, "--json"]).await.json();
    assert_eq!(lock["kind"], "fair");
    let waiters = lock["waiters"].as_array().unwrap();
    let fields: Vec<&str> = waiters
        .iter()
        .map(|w| w["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [&format!("{}:{}", waiting.id(), w1.id()), &java, &queue[2]],
        "the queue, in order"
    );
    assert_eq!(fields[..], queue[..]);
    let positions: Vec<u64> = waiters
        .iter()
        .map(|w| w["position"].as_u64().unwrap())
        .collect();
    assert_eq!(positions, [1, 2, 3]);
    let deadlines: Vec<i64> = waiters
        .iter()
        .map(|w| w["deadline_ms"].as_i64().expect("a deadline"))
        .collect();
    assert!(
        deadlines.windows(2).all(|d| d[0] < d[1]) && deadlines[0] > 0,
        "deadlines grow along the queue: {deadlines:?}"
    );
    // The text view lists them in the same order.
    let text = inspect(&[&url, "show", name]).await.ok().to_string();
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("`{needle}` missing from:\n{text}"))
    };
    assert!(at(&format!("1. {}", fields[0])) < at(&format!("2. {}", fields[1])));
    assert!(at(&format!("2. {}", fields[1])) < at(&format!("3. {}", fields[2])));

    first.abort();
    let _ = third.kill();
    let _ = third.wait();
    peer.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_frees_the_lock_wakes_the_waiter_and_tells_the_holder() {
    let _ = support::lock_holder_binary();
    let server = RedisServer::start();
    let url = server.url();
    let holder = quick_client(&server).await;
    let waiter = client(&server).await;
    let guard = holder.lock("stuck").unwrap().acquire().await.unwrap();
    let lost = guard.lost();
    let waiting = {
        let lock = waiter.lock("stuck").unwrap();
        tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(60)).await })
    };
    server
        .wait_until_parked("redisson_lock__channel:{stuck}", 1)
        .await;

    let run = inspect(&[&url, "force-unlock", "stuck", "--yes"]).await;
    let out = run.ok();
    assert!(out.contains("force-unlocked stuck (reentrant)"), "{out}");
    assert!(out.contains("removed key stuck\n"), "{out}");
    assert!(
        out.contains(&format!("was held by {}:", holder.id())),
        "{out}"
    );
    let granted = tokio::time::timeout(WAKE_BOUND, waiting)
        .await
        .expect("the waiter got the lock in time")
        .unwrap()
        .expect("the waiter got the lock");
    tokio::time::timeout(WAKE_BOUND, lost)
        .await
        .expect("the holder heard it lost the lock");
    assert!(guard.is_lost());
    granted.unlock().await.unwrap();

    // Another process's hold, with --json: it hears it lost its lock.
    let mut other = HolderProcess::start(&url, "elsewhere", &["--watchdog-ms", "3000"]).await;
    let done = inspect(&[&url, "force-unlock", "elsewhere", "--yes", "--json"])
        .await
        .json();
    assert_eq!(done["removed_keys"], serde_json::json!(["elsewhere"]));
    assert_eq!(done["before"]["holders"][0]["field"], other.field());
    assert_eq!(
        done["published"],
        serde_json::json!(["redisson_lock__channel:{elsewhere}", "0"])
    );
    assert_eq!(other.line(WAKE_BOUND).await, "lost");
    inspect(&[&url, "show", "elsewhere"]).await.failed(3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_asks_first_and_refuses_semaphores() {
    let server = RedisServer::start();
    let url = server.url();
    let a = client(&server).await;
    let _guard = a.lock("careful").unwrap().acquire().await.unwrap();
    let held = || async {
        let mut conn = server.conn().await;
        redis::cmd("EXISTS")
            .arg("careful")
            .query_async::<i64>(&mut conn)
            .await
            .unwrap()
            == 1
    };
    for answer in [None, Some("no\n"), Some("carefu\n"), Some("y\n")] {
        let run = inspect_with(&[&url, "force-unlock", "careful"], answer).await;
        assert_eq!(run.code, Some(1), "{answer:?}: {run:?}");
        assert_eq!(run.stdout, "");
        assert!(run.stderr.contains("Type the lock's name"), "{run:?}");
        let last = run.stderr.lines().last().unwrap();
        assert!(last.starts_with("lock-inspect: not confirmed"), "{last}");
        assert!(held().await, "an unconfirmed force-unlock changed nothing");
    }
    let run = inspect_with(&[&url, "force-unlock", "careful"], Some("careful\n")).await;
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(run.stdout.contains("removed key careful"), "{run:?}");
    assert!(!held().await);

    let sem = a.semaphore("pool").unwrap();
    assert!(sem.try_set_permits(4).await.unwrap());
    let _permit = sem.acquire(1).await.unwrap();
    let psem = a.expirable_semaphore("leases").unwrap();
    assert!(psem.try_set_permits(2).await.unwrap());
    let _lease = psem.acquire(1).await.unwrap();
    for name in ["pool", "leases"] {
        let run = inspect(&[&url, "force-unlock", name]).await;
        let line = run.failed(1);
        assert!(line.contains(name), "{line}");
        let run = inspect(&[&url, "force-unlock", name, "--yes"]).await;
        run.failed(1);
    }
    assert_eq!(sem.available_permits().await.unwrap(), 3);
    assert_eq!(psem.available_permits().await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_refuses_a_lock_that_changed_hands_while_the_operator_confirmed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = RedisServer::start();
    let url = server.url();
    let holders = client(&server).await;
    let first = holders.lock("handover").unwrap().acquire().await.unwrap();

    // The command shows A and asks; before the operator answers, A leaves and B takes it.
    let mut child = tokio::process::Command::new(BINARY)
        .args([&url, "force-unlock", "handover"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start lock-inspect");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let mut asked = String::new();
    let prompt = async {
        let mut chunk = [0u8; 1024];
        while !asked.contains("Type the lock's name") {
            let n = stderr
                .read(&mut chunk)
                .await
                .expect("read lock-inspect's stderr");
            assert!(n > 0, "lock-inspect ended before it asked: {asked}");
            asked.push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
    };
    tokio::time::timeout(RUN_BOUND, prompt)
        .await
        .expect("lock-inspect asked for confirmation");
    let shown = format!("{}:{}", holders.id(), first.owner().id());
    assert!(
        asked.contains(&shown),
        "the question names the holder: {asked}"
    );
    first.unlock().await.unwrap();
    let second = holders.lock("handover").unwrap().acquire().await.unwrap();

    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin.write_all(b"handover\n").await.unwrap();
    drop(stdin);
    let output = tokio::time::timeout(RUN_BOUND, child.wait_with_output())
        .await
        .expect("lock-inspect finished")
        .unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).await.unwrap();
    let last = rest.lines().last().unwrap_or_default().to_string();
    assert_eq!(output.status.code(), Some(4), "{asked}{rest}");
    assert!(output.stdout.is_empty(), "{output:?}");
    assert!(
        last.starts_with("lock-inspect: `handover` changed hands since it was shown"),
        "{last}"
    );
    assert!(last.contains("nothing was released"), "{last}");
    assert!(!second.is_lost());
    assert_eq!(
        holders
            .lock("handover")
            .unwrap()
            .hold_count(second.owner())
            .await
            .unwrap(),
        1,
        "the new holder was forced out"
    );
    second.unlock().await.unwrap();
}

/// Each key's DUMP and PTTL.
async fn snapshot(server: &RedisServer, keys: &[&str]) -> Vec<(Option<Vec<u8>>, i64)> {
    let mut conn = server.conn().await;
    let mut out = Vec::new();
    for key in keys {
        let dump: Option<Vec<u8>> = redis::cmd("DUMP")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let ttl: i64 = redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        out.push((dump, ttl));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_that_are_not_locks_are_neither_listed_nor_touched() {
    let server = RedisServer::start();
    let url = server.url();
    let a = client(&server).await;
    let _guard = a.lock("real").unwrap().acquire().await.unwrap();
    let mut conn = server.conn().await;
    let uuid_like = "0c5f3d2e-8a1b-4c6d-9e0f-112233445566:17";
    redis::pipe()
        .cmd("SET")
        .arg("plain:string")
        .arg("hello")
        .cmd("SET")
        .arg("plain:owner-like")
        .arg("not a lock value")
        .arg("PX")
        .arg(600_000)
        .cmd("HSET")
        .arg("plain:hash")
        .arg("a")
        .arg("b")
        .cmd("HSET")
        .arg("plain:almost")
        .arg(uuid_like)
        .arg("not-a-count")
        .cmd("HSET")
        .arg("plain:mode")
        .arg("mode")
        .arg("sideways")
        .cmd("RPUSH")
        .arg("plain:list")
        .arg("x")
        .arg("y")
        .cmd("SADD")
        .arg("plain:set")
        .arg("x")
        .cmd("ZADD")
        .arg("plain:zset")
        .arg(1)
        .arg("x")
        .cmd("XADD")
        .arg("plain:stream")
        .arg("*")
        .arg("f")
        .arg("v")
        .query_async::<()>(&mut conn)
        .await
        .unwrap();
    let keys = [
        "plain:string",
        "plain:owner-like",
        "plain:hash",
        "plain:almost",
        "plain:mode",
        "plain:list",
        "plain:set",
        "plain:zset",
        "plain:stream",
    ];
    let before = snapshot(&server, &keys).await;

    assert_eq!(names(&list(&url, &[]).await), ["real"]);
    assert_eq!(names(&list(&url, &["plain:*"]).await), Vec::<&str>::new());
    assert_eq!(
        inspect(&[&url, "list", "plain:*"]).await.ok(),
        "no locks found\n"
    );
    for key in keys {
        let line = inspect(&[&url, "show", key]).await.failed(1).to_string();
        assert!(line.contains("is not a lock"), "{key}: {line}");
        inspect(&[&url, "force-unlock", key, "--yes"])
            .await
            .failed(1);
    }

    let after = snapshot(&server, &keys).await;
    for ((key, (dump_before, ttl_before)), (dump_after, ttl_after)) in
        keys.iter().zip(&before).zip(&after)
    {
        assert_eq!(dump_before, dump_after, "`{key}` changed");
        if *ttl_before < 0 {
            assert_eq!(ttl_before, ttl_after, "`{key}` got a TTL");
        } else {
            assert!(
                ttl_after <= ttl_before && *ttl_after > 0,
                "`{key}`'s TTL was touched"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_one_line_with_an_exit_code_and_never_a_password() {
    let mut server = RedisServer::start();
    let port = server.port();
    let secret = "hunter2-s3cret";
    let mut conn = server.conn().await;
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg(secret)
        .query_async::<()>(&mut conn)
        .await
        .unwrap();
    let url = format!("redis://:{secret}@127.0.0.1:{port}/");
    let mut holder = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    redis::cmd("HSET")
        .arg("held")
        .arg("c0ffee00-0000-4000-8000-000000000000:1")
        .arg(1)
        .query_async::<()>(&mut holder)
        .await
        .unwrap();
    redis::cmd("SET")
        .arg("text")
        .arg("hello")
        .query_async::<()>(&mut holder)
        .await
        .unwrap();

    let mut outputs = Vec::new();
    let run = inspect(&[&url, "list", "--json"]).await;
    assert_eq!(
        names(&[run.json()][0].as_array().unwrap().clone()),
        ["held"]
    );
    outputs.push(run);
    // A bad URL, and unknown arguments: usage errors.
    for args in [
        vec!["http://:hunter2-s3cret@h/", "list"],
        vec!["redis+sentinel://:hunter2-s3cret@h:26379", "list"],
        vec![url.as_str(), "frobnicate"],
        vec![url.as_str(), "list", "--timeout", "soon"],
    ] {
        let run = inspect(&args).await;
        run.failed(2);
        outputs.push(run);
    }
    // A name that is not a lock, and no lock of that name.
    for command in ["show", "watch"] {
        let run = inspect(&[&url, command, "text"]).await;
        assert!(run.failed(1).contains("`text` is not a lock"), "{run:?}");
        outputs.push(run);
    }
    for command in ["show", "force-unlock"] {
        let run = inspect(
            &[&url, command, "nothing-here", "--yes"][..if command == "show" { 3 } else { 4 }],
        )
        .await;
        assert_eq!(run.failed(3), "lock-inspect: no lock named `nothing-here`");
        outputs.push(run);
    }
    // A wrong password.
    let wrong = format!("redis://:wrong-{secret}@127.0.0.1:{port}/");
    let run = inspect(&[&wrong, "list"]).await;
    run.failed(1);
    outputs.push(run);
    // A closed port: a quick error.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let run = inspect(&[&format!("redis://:{secret}@127.0.0.1:{closed}/"), "list"]).await;
    run.failed(1);
    assert!(run.took < Duration::from_secs(10), "{:?}", run.took);
    outputs.push(run);
    // A server that does not answer: an error within the timeout, never a hang.
    server.pause();
    let run = inspect(&[&url, "list", "--timeout", "500ms"]).await;
    run.failed(1);
    assert!(run.took < Duration::from_secs(10), "{:?}", run.took);
    outputs.push(run);
    server.resume();

    for run in &outputs {
        assert!(
            !run.stdout.contains(secret) && !run.stderr.contains(secret),
            "a password was printed: {run:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_is_read_as_the_client_maps_it() {
    let server = RedisServer::start();
    let url = server.url();
    let billing = client_with(&server, |c| c.namespace("billing")).await;
    let _guard = billing.lock("order:1").unwrap().acquire().await.unwrap();
    let locks = list(&url, &["--namespace", "billing"]).await;
    assert_eq!(names(&locks), ["order:1"]);
    assert_eq!(locks[0]["key"], "billing:order:1");
    assert_eq!(names(&list(&url, &[]).await), ["billing:order:1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prints_grants_and_releases_until_interrupted() {
    let server = RedisServer::start();
    let url = server.url();
    let a = client(&server).await;
    let (watch, mut lines) = start_watch(&[&url, "watch", "live", "--json"]);
    let first = next_event(&mut lines).await;
    assert_eq!(first["lock"], Value::Null, "no lock at first: {first}");
    let owner = LockOwner::new();
    let guard = a
        .lock("live")
        .unwrap()
        .acquire_with(AcquireOptions::new().owner(owner))
        .await
        .unwrap();
    let field = format!("{}:{}", a.id(), owner.id());
    let granted = loop {
        let event = next_event(&mut lines).await;
        let changes = event["changes"].as_array().unwrap().clone();
        if let Some(c) = changes.iter().find(|c| c["event"] == "granted") {
            break (c.clone(), event);
        }
    };
    assert_eq!(granted.0["holder"]["field"], field);
    assert_eq!(granted.1["lock"]["holders"][0]["field"], field);
    guard.unlock().await.unwrap();
    loop {
        let event = next_event(&mut lines).await;
        let changes = event["changes"].as_array().unwrap();
        if let Some(c) = changes.iter().find(|c| c["event"] == "released") {
            assert_eq!(c["holder"]["field"], field);
            break;
        }
    }
    interrupt_cleanly(watch).await;
}

#[test]
fn list_reads_every_primary_of_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let a = support::cluster_client(&cluster, |c| c).await;
        // One lock on each primary.
        let mut names = Vec::new();
        let mut primaries = BTreeSet::new();
        for i in 0.. {
            let name = format!("c:{i}");
            if primaries.insert(cluster.primary_for_key(&name)) {
                names.push(name);
            }
            if primaries.len() == cluster.primary_ports().len() {
                break;
            }
        }
        let mut guards = Vec::new();
        for name in &names {
            guards.push(a.lock(name).unwrap().acquire().await.unwrap());
        }
        let hosts: Vec<String> = cluster
            .primary_ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let url = format!("redis+cluster://{}", hosts[..2].join(","));
        let locks = list(&url, &[]).await;
        let mut expected = names.clone();
        expected.sort();
        assert_eq!(names_of(&locks), expected);
        for lock in &locks {
            assert_eq!(lock["holders"][0]["client_id"], a.id());
        }
    });
}

type WatchLines = tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>;

/// Starts `lock-inspect ARGS` (a `watch`), and its output line by line.
fn start_watch(args: &[&str]) -> (tokio::process::Child, WatchLines) {
    let mut watch = tokio::process::Command::new(BINARY)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start lock-inspect watch");
    let stdout = watch.stdout.take().expect("piped stdout");
    let lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    (watch, lines)
}

/// Ctrl-C ends a `watch` cleanly: exit 0.
async fn interrupt_cleanly(mut watch: tokio::process::Child) {
    let pid = watch.id().expect("running") as libc::pid_t;
    // SAFETY: kill(2) on our own child, not yet reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let status = tokio::time::timeout(RUN_BOUND, watch.wait())
        .await
        .expect("watch ended on SIGINT")
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

/// The next line of `watch --json`, parsed.
async fn next_event(lines: &mut WatchLines) -> Value {
    let line = tokio::time::timeout(RUN_BOUND, lines.next_line())
        .await
        .expect("a watch line in time")
        .unwrap()
        .expect("the watch is still running");
    serde_json::from_str::<Value>(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

fn names_of(locks: &[Value]) -> Vec<String> {
    names(locks).into_iter().map(str::to_string).collect()
}

#[test]
fn list_reads_the_primary_that_sentinel_names() {
    let setup = SentinelSetup::start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let a = support::sentinel_client(&setup, |c| c).await;
        let _guard = a.lock("s:1").unwrap().acquire().await.unwrap();
        let hosts: Vec<String> = setup
            .sentinel_ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let url = format!(
            "redis+sentinel://{}/{}",
            hosts.join(","),
            setup.master_name()
        );
        let locks = list(&url, &[]).await;
        assert_eq!(names(&locks), ["s:1"]);
        assert_eq!(locks[0]["holders"][0]["client_id"], a.id());
    });
}

/// A mistyped command or option gets clap's suggestion, on the one line of the failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mistyped_command_or_option_is_told_what_was_meant() {
    // Nothing is connected to: the arguments are refused first.
    let url = "redis://127.0.0.1:1/";
    let run = inspect(&[url, "lsit"]).await;
    assert_eq!(
        run.failed(2),
        "lock-inspect: unrecognized subcommand 'lsit'; did you mean 'list'? (see --help)"
    );
    let run = inspect(&[url, "list", "--jsn"]).await;
    let line = run.failed(2);
    assert!(
        line.starts_with("lock-inspect: unexpected argument '--jsn' found")
            && line.ends_with("; did you mean '--json'? (see --help)"),
        "{line}"
    );
}

/// `watch` opens with the lock as it is: a hold taken before it began is `held`, not
/// `granted` (which is for the grants it sees happen).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_opens_with_held_for_a_lock_taken_before_it() {
    let server = RedisServer::start();
    let url = server.url();
    let a = client(&server).await;
    let owner = LockOwner::new();
    let guard = a
        .lock("before")
        .unwrap()
        .acquire_with(AcquireOptions::new().owner(owner))
        .await
        .unwrap();
    let field = format!("{}:{}", a.id(), owner.id());
    let (watch, mut lines) = start_watch(&[&url, "watch", "before"]);
    let first = tokio::time::timeout(RUN_BOUND, lines.next_line())
        .await
        .expect("a first line")
        .unwrap()
        .expect("a line");
    let (_, rest) = first.split_once("  ").expect("a time stamp first");
    assert_eq!(rest, format!("before  held      {field}"), "{first}");
    guard.unlock().await.unwrap();
    interrupt_cleanly(watch).await;
    a.close().await;
}
