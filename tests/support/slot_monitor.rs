//! The nemesis harness's monitor for replicated deployments
//! ([`nemesis_topology`](super::nemesis_topology)): it samples each lock on the node that
//! serves it, and follows the lock across failovers (a cluster's `MOVED`, or the primary the
//! Sentinels name).
#![allow(dead_code)]

use super::history::Sample;
use super::nemesis::MONITOR_SCRIPT;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Where the monitor finds the node serving a lock.
#[derive(Clone)]
pub enum Locator {
    /// Any node answers with the lock or a `MOVED` to its owner.
    Cluster(Vec<u16>),
    /// The Sentinels on these ports name the primary of `service`.
    Sentinel(Vec<u16>, String),
}

/// Samples each lock every 20 ms with [`MONITOR_SCRIPT`] on the node that serves it: one
/// [`Sample`] per lock and look (it holds that lock alone). A node that does not answer,
/// or redirects, is replaced by the one the cluster or the Sentinels name.
pub struct SlotMonitor {
    stop: Arc<AtomicBool>,
    pub samples: Arc<Mutex<Vec<Sample>>>,
    thread: Option<JoinHandle<()>>,
}

pub fn port_of(addr: &str) -> Option<u16> {
    addr.rsplit_once(':').and_then(|(_, p)| p.parse().ok())
}

pub fn connect(port: u16) -> Option<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
    let conn = client
        .get_connection_with_timeout(Duration::from_millis(200))
        .ok()?;
    conn.set_read_timeout(Some(Duration::from_millis(200)))
        .ok()?;
    conn.set_write_timeout(Some(Duration::from_millis(200)))
        .ok()?;
    Some(conn)
}

impl Locator {
    /// A node to ask about a lock whose node is unknown; `turn` rotates among the nodes.
    fn guess(&self, conns: &mut HashMap<u16, redis::Connection>, turn: usize) -> Option<u16> {
        match self {
            Locator::Cluster(ports) => Some(ports[turn % ports.len()]),
            Locator::Sentinel(sentinels, service) => {
                let sentinel = sentinels[turn % sentinels.len()];
                let mut conn = connect(sentinel)?;
                let (_, port): (String, String) = redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(service)
                    .query(&mut conn)
                    .ok()?;
                let port: u16 = port.parse().ok()?;
                // Only a primary's view counts (a replica may lag behind it).
                let conn = match conns.entry(port) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::hash_map::Entry::Vacant(e) => e.insert(connect(port)?),
                };
                let role: Vec<Value2> = redis::cmd("ROLE").query(conn).ok()?;
                matches!(role.first(), Some(Value2::Text(r)) if r == "master").then_some(port)
            }
        }
    }
}

/// The first element of a `ROLE` reply.
#[derive(Debug)]
enum Value2 {
    Text(String),
    Other,
}

impl redis::FromRedisValue for Value2 {
    fn from_redis_value(v: redis::Value) -> Result<Self, redis::ParsingError> {
        Ok(String::from_redis_value(v).map_or(Value2::Other, Value2::Text))
    }
}

impl SlotMonitor {
    pub fn start(locator: Locator, locks: Vec<String>) -> SlotMonitor {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let (stop2, samples2) = (stop.clone(), samples.clone());
        let thread = thread::spawn(move || {
            let script = redis::Script::new(MONITOR_SCRIPT);
            let mut conns: HashMap<u16, redis::Connection> = HashMap::new();
            let mut owner: Vec<Option<u16>> = vec![None; locks.len()];
            let mut turn = 0usize;
            while !stop2.load(Ordering::Relaxed) {
                for (i, lock) in locks.iter().enumerate() {
                    if owner[i].is_none() {
                        turn += 1;
                        owner[i] = locator.guess(&mut conns, turn);
                    }
                    let Some(port) = owner[i] else { continue };
                    let conn = match conns.entry(port) {
                        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                        std::collections::hash_map::Entry::Vacant(e) => match connect(port) {
                            Some(c) => e.insert(c),
                            None => {
                                owner[i] = None;
                                continue;
                            }
                        },
                    };
                    match script.key(lock).invoke::<Vec<String>>(conn) {
                        Ok(reply) => {
                            if let Some(sample) = parse_one(lock, &reply) {
                                samples2.lock().unwrap().push(sample);
                            }
                        }
                        Err(e) => {
                            owner[i] = e.redirect_node().and_then(|(addr, _)| port_of(addr));
                            if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
                                conns.remove(&port);
                            }
                        }
                    }
                }
                thread::sleep(Duration::from_millis(20));
            }
        });
        SlotMonitor {
            stop,
            samples,
            thread: Some(thread),
        }
    }

    pub fn finish(&mut self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        std::mem::take(&mut *self.samples.lock().unwrap())
    }
}

impl Drop for SlotMonitor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// `{TIME s, TIME us, PTTL, fields}` of [`MONITOR_SCRIPT`] for one key.
fn parse_one(lock: &str, reply: &[String]) -> Option<Sample> {
    let secs: u64 = reply.first()?.parse().ok()?;
    let micros: u64 = reply.get(1)?.parse().ok()?;
    let pttl: i64 = reply.get(2)?.parse().ok()?;
    let fields = reply
        .get(3)?
        .split(',')
        .filter(|f| !f.is_empty())
        .map(str::to_string)
        .collect();
    Some(Sample {
        t: secs * 1_000_000 + micros,
        locks: [(lock.to_string(), (pttl, fields))].into_iter().collect(),
        ..Sample::default()
    })
}
