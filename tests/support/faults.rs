//! Faults of `tests/nemesis_faults.rs` on top of the nemesis harness ([`Run`]): commands
//! to a worker's stdin (`extras`, `exit`, `burst N`, `stats`: see
//! `examples/lock_worker/control.rs`), the side names those commands use, and direct looks
//! at Redis for anything a client left behind.
#![allow(dead_code)]

use super::history::read_history;
use super::nemesis::{now_us, Run};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::thread;
use std::time::{Duration, Instant};

/// The worker's side names (its default `--extras` prefix).
pub const SIDE: &str = "nemesis-x";
pub const SIDE_PERMITS: i64 = 3;

pub fn side(suffix: &str) -> String {
    format!("{SIDE}-{suffix}")
}

/// A worker that exited on `exit`, as judged right after.
#[derive(Debug)]
pub struct Exited {
    pub worker: u64,
    pub client: String,
    /// From the `exit` command sent to the process reaped.
    pub took: Duration,
    /// The `exit` event: holds and waits it dropped.
    pub event: Value,
    /// Redis content of the client left right after the exit (must be empty).
    pub leftovers: Vec<String>,
    pub sent_at: u64,
}

impl Run {
    /// Writes one command line to the stdin of the worker in `slot`.
    pub fn send(&mut self, slot: usize, command: &str) {
        let index = self.slot[slot];
        let stdin = self.workers[index]
            .stdin
            .as_mut()
            .expect("worker stdin open");
        stdin
            .write_all(format!("{command}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .expect("write to worker stdin");
    }

    /// Waits (30 s at most) for the worker in `slot` to log an `ev` event after `after`.
    pub fn wait_event(&self, slot: usize, ev: &str, after: u64) -> Value {
        let path = self.worker(slot).history.clone();
        let mut found = None;
        self.wait_for(&format!("`{ev}` from the worker in slot {slot}"), || {
            found = read_history(&path)
                .into_iter()
                .find(|e| e["ev"] == ev && e["l"].as_u64().is_some_and(|l| l >= after));
            found.is_some()
        });
        found.expect("found")
    }

    pub fn admin(&self) -> redis::Connection {
        let client = redis::Client::open(self.admin_url()).expect("url");
        let conn = client
            .get_connection_with_timeout(Duration::from_secs(2))
            .expect("admin connection");
        conn.set_read_timeout(Some(Duration::from_secs(2))).ok();
        conn
    }

    /// Sends `exit` to the worker in `slot`, waits for it to exit 0, looks at Redis at once
    /// for anything of its client, and starts a replacement in the slot.
    pub fn exit_worker(&mut self, slot: usize) -> Exited {
        let index = self.slot[slot];
        let worker = self.workers[index].id;
        let client = super::nemesis::client_id(&self.workers[index].history)
            .expect("the worker logged its start");
        let sent_at = now_us();
        let began = Instant::now();
        self.send(slot, "exit");
        let status = loop {
            if let Some(status) = self.workers[index].proc.child.try_wait().expect("wait") {
                break status;
            }
            assert!(
                began.elapsed() < Duration::from_secs(10),
                "worker {worker} did not exit within 10 s of `exit`"
            );
            thread::sleep(Duration::from_millis(2));
        };
        let took = began.elapsed();
        let leftovers = client_leftovers(&mut self.admin(), &client);
        assert!(status.success(), "worker {worker} exited with {status}");
        let stdout = self.workers[index]
            .proc
            .child
            .stdout
            .take()
            .expect("stdout");
        let said: Vec<String> = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect();
        assert!(
            said.iter().any(|l| l == "exited"),
            "worker {worker} did not say `exited`: {said:?}"
        );
        self.workers[index].stdin = None;
        let event = read_history(&self.workers[index].history)
            .into_iter()
            .find(|e| e["ev"] == "exit")
            .expect("the worker logged `exit`");
        self.log_fault("exit-worker", Some(worker), sent_at);
        let replacement = self.spawn_worker(super::lock_worker_binary(), slot);
        self.slot[slot] = replacement;
        Exited {
            worker,
            client,
            took,
            event,
            leftovers,
            sent_at,
        }
    }
}

/// Every key, hash field, list entry and sorted-set member that names `client` (a prefix
/// `<client id>:`), plus the side semaphores' counts when they are not back at
/// [`SIDE_PERMITS`].
pub fn client_leftovers(conn: &mut redis::Connection, client: &str) -> Vec<String> {
    let bare = client.trim_end_matches(':');
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(conn).expect("KEYS");
    let mut left = Vec::new();
    for key in keys {
        if key.contains(bare) {
            left.push(format!("key {key}"));
            continue;
        }
        let kind: String = redis::cmd("TYPE").arg(&key).query(conn).expect("TYPE");
        let members: Vec<String> = match kind.as_str() {
            "hash" => redis::cmd("HKEYS").arg(&key).query(conn),
            "list" => redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).query(conn),
            "zset" => redis::cmd("ZRANGE").arg(&key).arg(0).arg(-1).query(conn),
            "set" => redis::cmd("SMEMBERS").arg(&key).query(conn),
            _ => Ok(Vec::new()),
        }
        .unwrap_or_default();
        for member in members.iter().filter(|m| m.contains(bare)) {
            left.push(format!("{key} ({kind}) has {member}"));
        }
    }
    left.extend(side_permits_taken(conn));
    left
}

/// The side semaphores whose count is not [`SIDE_PERMITS`], and expirable permits still out.
pub fn side_permits_taken(conn: &mut redis::Connection) -> Vec<String> {
    let mut left = Vec::new();
    for name in [side("sem"), side("xsem")] {
        let count: Option<i64> = redis::cmd("GET").arg(&name).query(conn).unwrap_or(None);
        if count != Some(SIDE_PERMITS) {
            left.push(format!("{name} = {count:?}, not {SIDE_PERMITS}"));
        }
    }
    let out: Vec<String> = redis::cmd("ZRANGE")
        .arg(format!("{{{}}}:timeout", side("xsem")))
        .arg(0)
        .arg(-1)
        .query(conn)
        .unwrap_or_default();
    if !out.is_empty() {
        left.push(format!("{} permits still out: {out:?}", side("xsem")));
    }
    left
}

/// Subscribers of every channel of the side names (`PUBSUB NUMSUB` of `PUBSUB CHANNELS`).
pub fn side_subscribers(conn: &mut redis::Connection) -> Vec<(String, i64)> {
    channel_subscribers(conn, &format!("*{SIDE}*"))
}

/// Subscribers of every channel matching `pattern`.
pub fn channel_subscribers(conn: &mut redis::Connection, pattern: &str) -> Vec<(String, i64)> {
    let channels: Vec<String> = redis::cmd("PUBSUB")
        .arg("CHANNELS")
        .arg(pattern)
        .query(conn)
        .expect("PUBSUB CHANNELS");
    if channels.is_empty() {
        return Vec::new();
    }
    redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(&channels)
        .query(conn)
        .expect("PUBSUB NUMSUB")
}

/// `VmRSS` of a process in KiB.
pub fn rss_kib(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Deletes every side key (before the run's final key check).
pub fn clear_side(conn: &mut redis::Connection) {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("*{SIDE}*"))
        .query(conn)
        .expect("KEYS");
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL").arg(&keys).query(conn).expect("DEL");
    }
}
