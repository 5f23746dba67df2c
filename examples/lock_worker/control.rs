//! The worker's stdin commands, read on a plain thread and carried out on the runtime:
//!
//! - `stop` (or end of input): the tasks finish their current hold, unlock and end; the
//!   process prints `stopped` and exits 0.
//! - `extras`: takes side holds a service would have at any moment (1 permit of the plain
//!   semaphore `<prefix>-sem`, 1 permit of the permit-expirable semaphore `<prefix>-xsem`, a
//!   read hold of the read-write lock `<prefix>-rw`) and starts waiters that cannot be
//!   granted while those are taken (a fair lock waiter on `<prefix>-fair`, which the test
//!   holds, 10 plain permits, 10 expirable permits, a write lock on `<prefix>-rw`); logs
//!   `extras` with the permit ids once the holds are granted. The prefix is `--extras`.
//! - `exit`: what a service's `main` does on its way out, in the middle of holds and waits:
//!   every hold still open gets its `release_start`, every task and side waiter is dropped
//!   (guards released in the background, waits given up), [`LockClient::close`] finishes
//!   those releases, and the process logs `exit`, prints `exited` and exits 0.
//! - `burst N`: starts `N` acquires at once, spread over the locks of the run and the side
//!   names (fenced, fair, plain and expirable permits, write), each dropped after 20 to 300
//!   ms (or ending in an error before that); logs `burst` with the counts. Meant to run
//!   while the worker is cut off from Redis.
//! - `stats`: logs `stats` with the client's live actors and this process' resident memory.

use crate::history::{now_us, History};
use crate::kinds::Task;
use actix_distributed_lock::{LockClient, PermitGuard, SemaphoreGuard};
use rand::Rng;
use serde_json::json;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::{AbortHandle, JoinHandle};

/// A hold a task has open, for [`Holds::exit`] to close in the history.
pub struct Open {
    pub hold: u64,
    pub kind: &'static str,
    pub lock: String,
    pub token: u64,
    pub watcher: AbortHandle,
}

#[derive(Default)]
struct State {
    open: BTreeMap<usize, Open>,
    waiting: usize,
    exiting: bool,
}

/// The holds and waits of the tasks, so that an exit can log what it drops.
pub struct Holds {
    state: Mutex<State>,
    history: Arc<History>,
}

impl Holds {
    pub fn new(history: Arc<History>) -> Holds {
        Holds {
            state: Mutex::new(State::default()),
            history,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A task starts (`true`) or ends (`false`) an acquire call.
    pub fn waiting(&self, now: bool) {
        let mut state = self.state();
        if now {
            state.waiting += 1;
        } else {
            state.waiting = state.waiting.saturating_sub(1);
        }
    }

    /// A task was granted a hold (its `grant` logged). `false`: the process is exiting and
    /// the hold's `release_start` is logged here; the task must not go on.
    pub fn granted(&self, task: usize, open: Open) -> bool {
        let mut state = self.state();
        if state.exiting {
            self.log_release_start(task, &open);
            return false;
        }
        state.open.insert(task, open);
        true
    }

    /// A task is about to log its `release_start`. `false`: the exit logged it already; the
    /// task must not go on.
    pub fn releasing(&self, task: usize) -> bool {
        let mut state = self.state();
        state.open.remove(&task);
        !state.exiting
    }

    fn log_release_start(&self, task: usize, open: &Open) {
        self.history.log(
            task,
            "release_start",
            json!({"hold": open.hold, "lock": open.lock, "kind": open.kind, "token": open.token,
                   "l": now_us(), "t": null, "was_lost": false, "exit": true}),
        );
    }

    /// Marks the process exiting and logs `release_start` for every open hold (before any
    /// guard is dropped, so each is a lower bound of its release). Returns (holds, waits).
    fn exit(&self) -> (usize, usize) {
        let mut state = self.state();
        state.exiting = true;
        for (&task, open) in &state.open {
            self.log_release_start(task, open);
            open.watcher.abort();
        }
        (state.open.len(), state.waiting)
    }
}

/// What the worker process needs to carry out the commands.
pub struct Control {
    pub client: LockClient,
    pub history: Arc<History>,
    pub holds: Arc<Holds>,
    pub tasks: Vec<JoinHandle<()>>,
    pub locks: Vec<String>,
    /// The prefix of the side names (`--extras`).
    pub extras: String,
    pub stop: watch::Sender<bool>,
}

/// How the command loop ended.
pub enum Ending {
    /// `stop`: the tasks ran out their holds.
    Stopped,
    /// `exit`: holds and waits dropped, the client closed.
    Exited,
}

/// Stdin lines on a plain thread (see `lock_holder`), forwarded to the runtime; end of
/// input is a `stop`.
fn read_stdin() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line.trim().to_string()).is_err() {
                return;
            }
        }
        let _ = tx.send("stop".into());
    });
    rx
}

/// Resident memory of this process in KiB (`VmRSS` of /proc/self/status).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

impl Control {
    pub async fn serve(mut self) -> Result<Ending, crate::Failure> {
        let mut commands = read_stdin();
        let mut side = Side::default();
        while let Some(line) = commands.recv().await {
            let mut words = line.split_whitespace();
            match (words.next(), words.next()) {
                (Some("stop"), _) => {
                    let _ = self.stop.send(true);
                    for task in self.tasks.drain(..) {
                        task.await?;
                    }
                    side.end().await;
                    return Ok(Ending::Stopped);
                }
                (Some("exit"), _) => {
                    self.exit(side).await;
                    return Ok(Ending::Exited);
                }
                (Some("extras"), _) => side.start(&self).await,
                (Some("burst"), Some(n)) => match n.parse() {
                    Ok(n) => self.burst(n).await,
                    Err(_) => eprintln!("lock_worker: `burst {n}`: not a number"),
                },
                (Some("stats"), _) => self.history.log(
                    0,
                    "stats",
                    json!({"active_locks": self.client.active_locks(),
                           "active_semaphores": self.client.active_semaphores(),
                           "watched_holds": self.client.watched_holds(),
                           "rss_kib": rss_kib(), "l": now_us()}),
                ),
                _ => eprintln!("lock_worker: unknown command `{line}`"),
            }
        }
        Ok(Ending::Stopped)
    }

    async fn exit(&mut self, side: Side) {
        let l = now_us();
        let (holding, waiting) = self.holds.exit();
        let (side_holds, side_waits) = (side.guards.len(), side.waiters.len());
        for task in &self.tasks {
            task.abort();
        }
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
        side.end().await;
        let l_closing = now_us();
        self.client.close().await;
        self.history.log(
            0,
            "exit",
            json!({"l": l, "l_closing": l_closing, "l_closed": now_us(), "holding": holding,
                   "waiting": waiting, "side_holds": side_holds, "side_waits": side_waits}),
        );
    }

    async fn burst(&self, n: usize) {
        let l = now_us();
        let rss_before = rss_kib();
        let x = &self.extras;
        let mut started = Vec::with_capacity(n);
        for i in 0..n {
            let client = self.client.clone();
            let lock = self.locks[i % self.locks.len()].clone();
            let names = [format!("{x}-fair"), format!("{x}-sem"), format!("{x}-xsem")];
            let rw = format!("{x}-rw");
            let patience = Duration::from_millis(rand::rng().random_range(20..=300));
            started.push(tokio::spawn(async move {
                let wait = Duration::from_secs(30);
                // Each acquire is dropped when `patience` runs out (an error before that
                // ends it too): Ok(true) granted, Ok(false) ended in an error, Err dropped.
                macro_rules! drop_after {
                    ($acquire:expr) => {
                        tokio::time::timeout(patience, async { $acquire.await.is_ok() }).await
                    };
                }
                let outcome = match i % 5 {
                    0 => match client.fenced_lock(&lock) {
                        Ok(l) => drop_after!(l.acquire_timeout(wait)),
                        Err(_) => Ok(false),
                    },
                    1 => match client.fair_lock(&names[0]) {
                        Ok(l) => drop_after!(l.acquire_timeout(wait)),
                        Err(_) => Ok(false),
                    },
                    2 => match client.semaphore(&names[1]) {
                        Ok(s) => drop_after!(s.acquire_timeout(10, wait)),
                        Err(_) => Ok(false),
                    },
                    3 => match client.expirable_semaphore(&names[2]) {
                        Ok(s) => drop_after!(s.acquire_timeout(10, wait)),
                        Err(_) => Ok(false),
                    },
                    _ => match client.read_write_lock(&rw) {
                        Ok(l) => drop_after!(l.write().acquire_timeout(wait)),
                        Err(_) => Ok(false),
                    },
                };
                match outcome {
                    Err(_) => "cancelled",
                    Ok(true) => "granted",
                    Ok(false) => "failed",
                }
            }));
        }
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for task in started {
            *counts.entry(task.await.unwrap_or("panicked")).or_default() += 1;
        }
        self.history.log(
            0,
            "burst",
            json!({"l": l, "l_done": now_us(), "started": n, "counts": counts,
                   "rss_before_kib": rss_before, "rss_after_kib": rss_kib()}),
        );
    }
}

/// The side holds and waiters of `extras`.
#[derive(Default)]
struct Side {
    guards: Vec<Guard>,
    waiters: Vec<JoinHandle<()>>,
}

#[allow(dead_code)] // held only to be dropped
enum Guard {
    Permits(SemaphoreGuard),
    Expirable(PermitGuard),
    Read(actix_distributed_lock::LockGuard),
}

impl Side {
    async fn start(&mut self, control: &Control) {
        let (client, x) = (&control.client, &control.extras);
        let wait = Duration::from_secs(5);
        let mut ids = Vec::new();
        let mut errors = Vec::new();
        match async {
            client
                .semaphore(&format!("{x}-sem"))?
                .acquire_timeout(1, wait)
                .await
        }
        .await
        {
            Ok(g) => self.guards.push(Guard::Permits(g)),
            Err(e) => errors.push(format!("sem: {e}")),
        }
        match async {
            client
                .expirable_semaphore(&format!("{x}-xsem"))?
                .acquire_timeout(1, wait)
                .await
        }
        .await
        {
            Ok(g) => {
                ids.push(g.permit_id().to_string());
                self.guards.push(Guard::Expirable(g));
            }
            Err(e) => errors.push(format!("xsem: {e}")),
        }
        match async {
            client
                .read_write_lock(&format!("{x}-rw"))?
                .read()
                .acquire_timeout(wait)
                .await
        }
        .await
        {
            Ok(g) => self.guards.push(Guard::Read(g)),
            Err(e) => errors.push(format!("rw: {e}")),
        }
        let long = Duration::from_secs(600);
        for what in ["fair", "sem", "xsem", "write"] {
            let client = client.clone();
            let x = x.clone();
            self.waiters.push(tokio::spawn(async move {
                let _ = match what {
                    "fair" => match client.fair_lock(&format!("{x}-fair")) {
                        Ok(l) => l.acquire_timeout(long).await.map(drop),
                        Err(e) => Err(e),
                    },
                    "sem" => match client.semaphore(&format!("{x}-sem")) {
                        Ok(s) => s.acquire_timeout(10, long).await.map(drop),
                        Err(e) => Err(e),
                    },
                    "xsem" => match client.expirable_semaphore(&format!("{x}-xsem")) {
                        Ok(s) => s.acquire_timeout(10, long).await.map(drop),
                        Err(e) => Err(e),
                    },
                    _ => match client.read_write_lock(&format!("{x}-rw")) {
                        Ok(l) => l.write().acquire_timeout(long).await.map(drop),
                        Err(e) => Err(e),
                    },
                };
                // Granted or failed: stay, so that the exit drops something it started.
                std::future::pending::<()>().await;
            }));
        }
        control.history.log(
            0,
            "extras",
            json!({"l": now_us(), "holds": self.guards.len(), "waiters": self.waiters.len(),
                   "permit_ids": ids, "errors": errors}),
        );
    }

    /// Drops the waiters (their acquires given up) and the guards (released in the
    /// background).
    async fn end(self) {
        for waiter in &self.waiters {
            waiter.abort();
        }
        for waiter in self.waiters {
            let _ = waiter.await;
        }
        drop(self.guards);
    }
}

/// Blocks the task for good: an exit logged its hold's end and will drop it.
pub async fn parked() {
    std::future::pending::<()>().await
}

/// The tasks of the run, spawned.
pub fn spawn(tasks: Vec<Task>) -> Vec<JoinHandle<()>> {
    tasks.into_iter().map(|t| tokio::spawn(t.run())).collect()
}
