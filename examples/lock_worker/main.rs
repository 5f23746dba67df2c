//! A worker process for the nemesis suite (`tests/nemesis.rs`): several tasks take fenced
//! locks over and over, write to a fenced store while they hold them, and log everything they
//! see as JSON lines, so a checker can judge the whole run afterwards.
//!
//! ```text
//! lock_worker <redis-url> <worker-id> <history-file> [--locks a,b] [--tasks N] [--lease-ms N]
//!             [--timeout-ms N] [--cluster h:p,h:p | --sentinel h:p,.. --service NAME]
//!             [--sync-replicas N:ms]
//! ```
//!
//! - Each task loops: pick a lock, read Redis `TIME`, acquire the fenced lock (waiting up to
//!   800 ms), read `TIME` again, hold it for a random while (mostly under 400 ms, a quarter
//!   of the time up to two leases, so the watchdog renews), write to the store a few times
//!   under the hold's fencing token (each write after a short stretch of "work" that
//!   follows a look at `is_lost()`; a failed write is retried every 200 ms until it goes
//!   through or `lost()` fires), then unlock. The watchdog lease is `--lease-ms`
//!   (default 1500); Redis commands time out after `--timeout-ms` (default 400).
//! - `--cluster`, `--sentinel`/`--service` and `--sync-replicas` choose the deployment and
//!   replica sync (see `target.rs`; on a cluster every lock name needs a hash tag).
//! - The store is the hash `nemesis:store:<lock>`: a Lua script accepts a write only when
//!   its token is at least the highest token the store has accepted, and returns Redis
//!   `TIME` taken inside the script.
//! - Every event is one JSON object per line in `<history-file>` (appended with one
//!   `write(2)` per line, so a SIGKILL loses at most the event in flight). Times are
//!   microseconds since the Unix epoch: `l_*` from this process' wall clock, `t_*` from
//!   Redis `TIME` (absent when Redis did not answer).
//! - A heartbeat logs every `stall`: a stretch in which the process was not scheduled.
//! - Reads stdin: `stop` (or end of input) makes the tasks finish their current hold,
//!   unlock and exit; the process then prints `stopped` and exits 0.
//!
//! Try it against a throwaway Redis:
//!
//! ```text
//! redis-server --port 23457 --save "" --daemonize yes
//! cargo run --example lock_worker -- redis://127.0.0.1:23457/ 1 /tmp/w1.jsonl --tasks 3
//! # type `stop` after a while, then: head /tmp/w1.jsonl
//! redis-cli -p 23457 shutdown nosave
//! ```

use actix_distributed_lock::{AcquireOptions, LockClient, LockError, LockOwner};
use rand::Rng;
use serde_json::{json, Value};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use target::{Probe, Stamp, Target};
use tokio::sync::watch;

mod target;

const USAGE: &str = "usage: lock_worker <redis-url> <worker-id> <history-file> [--locks a,b] \
                     [--tasks N] [--lease-ms N] [--timeout-ms N] [--cluster h:p,h:p | \
                     --sentinel h:p,h:p --service NAME] [--sync-replicas N:ms]";

type Failure = Box<dyn std::error::Error + Send + Sync>;

struct Args {
    url: String,
    worker: u64,
    history: String,
    locks: Vec<String>,
    tasks: usize,
    lease: Duration,
    timeout: Duration,
    /// One server, a cluster or Sentinel, and replica sync (`target.rs`).
    target: Target,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let url = args.next().ok_or("missing <redis-url>")?;
    let worker = args
        .next()
        .ok_or("missing <worker-id>")?
        .parse()
        .map_err(|_| "<worker-id> must be a number")?;
    let history = args.next().ok_or("missing <history-file>")?;
    let mut parsed = Args {
        url,
        worker,
        history,
        locks: vec!["nemesis-a".into(), "nemesis-b".into()],
        tasks: 3,
        lease: Duration::from_millis(1500),
        timeout: Duration::from_millis(400),
        target: Target::default(),
    };
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || -> Result<u64, String> {
            value
                .parse()
                .map_err(|_| format!("{flag}: `{value}` is not a number"))
        };
        match flag.as_str() {
            "--locks" => parsed.locks = value.split(',').map(str::to_string).collect(),
            "--tasks" => parsed.tasks = number()? as usize,
            "--lease-ms" => parsed.lease = Duration::from_millis(number()?),
            "--timeout-ms" => parsed.timeout = Duration::from_millis(number()?),
            _ if parsed.target.option(&flag, &value)? => {}
            _ => return Err(format!("unknown option `{flag}`")),
        }
    }
    parsed.target.check(&parsed.locks)?;
    Ok(parsed)
}

/// Microseconds since the Unix epoch on this process' wall clock.
fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// The history file: one JSON object per line, each written with a single `write(2)`.
struct History {
    file: Mutex<File>,
    worker: u64,
}

impl History {
    fn log(&self, task: usize, event: &str, mut fields: Value) {
        if let Value::Object(map) = &mut fields {
            map.insert("ev".into(), json!(event));
            map.insert("worker".into(), json!(self.worker));
            map.insert("task".into(), json!(task));
        }
        let mut line = fields.to_string();
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        // A history that cannot be written makes the run worthless: say so loudly.
        if let Err(e) = file.write_all(line.as_bytes()) {
            eprintln!("lock_worker: cannot write history: {e}");
        }
    }
}

/// How an acquire failed, in one word for the history.
fn error_kind(error: &LockError) -> &'static str {
    match error {
        LockError::Timeout { .. } => "timeout",
        LockError::Unavailable { .. } => "unavailable",
        LockError::NotOwner { .. } => "not_owner",
        LockError::Lost { .. } => "lost",
        LockError::Shutdown => "shutdown",
        LockError::NotReplicated { .. } => "not_replicated",
        _ => "other",
    }
}

struct Task {
    id: usize,
    client: LockClient,
    probe: Arc<Probe>,
    history: Arc<History>,
    locks: Vec<String>,
    lease: Duration,
    stop: watch::Receiver<bool>,
}

impl Task {
    async fn run(mut self) {
        while !*self.stop.borrow() {
            self.one_round().await;
        }
    }

    async fn pause(&mut self, max_ms: u64) {
        let ms = rand::rng().random_range(0..=max_ms);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(ms)) => {}
            _ = self.stop.changed() => {}
        }
    }

    async fn one_round(&mut self) {
        let (id, history) = (self.id, self.history.clone());
        let lock = self.locks[rand::rng().random_range(0..self.locks.len())].clone();
        let owner = LockOwner::new();
        let field = format!("{}:{}", self.client.id(), owner.id());
        let l_before = now_us();
        let t_before = self.probe.time(&lock).await;
        let handle = match self.client.fenced_lock(&lock) {
            Ok(handle) => handle,
            Err(e) => {
                history.log(id, "error", json!({"what": e.to_string()}));
                return self.pause(200).await;
            }
        };
        let wait = Duration::from_millis(rand::rng().random_range(0..800));
        let l_call = now_us();
        let acquired = handle
            .acquire_with(AcquireOptions::new().owner(owner).wait(wait))
            .await;
        let l_after = now_us();
        let guard = match acquired {
            Ok(guard) => guard,
            Err(e) => {
                history.log(
                    id,
                    "acquire_failed",
                    json!({"lock": lock, "kind": error_kind(&e), "l_call": l_call, "l_after": l_after}),
                );
                return self.pause(150).await;
            }
        };
        let t_after = self.probe.time(&lock).await;
        let token = guard.fencing_token().unwrap_or(0);
        history.log(
            id,
            "grant",
            json!({
                "lock": lock, "field": field, "token": token,
                "l_before": l_before, "t_before": Stamp::json(t_before),
                "l_call": l_call, "l_after": l_after, "t_after": Stamp::json(t_after),
            }),
        );

        // Record lost() the moment it fires, not when this task next looks.
        let lost_log = history.clone();
        let (lost_lock, lost_probe) = (lock.clone(), self.probe.clone());
        let lost = guard.lost();
        let watcher = tokio::spawn(async move {
            lost.await;
            let l = now_us();
            lost_log.log(
                id,
                "lost",
                json!({"lock": lost_lock, "token": token, "l": l}),
            );
            let stamp = lost_probe.time(&lost_lock).await;
            lost_log.log(
                id,
                "lost_time",
                json!({"lock": lost_lock, "token": token, "t": Stamp::json(stamp)}),
            );
        });

        // Mostly short holds (many grants), some longer than the lease (renewals run).
        let lease_ms = self.lease.as_millis() as u64;
        let hold_ms = if rand::rng().random_bool(0.75) {
            rand::rng().random_range(20..=400)
        } else {
            rand::rng().random_range(400..=2 * lease_ms.max(400))
        };
        let writes = rand::rng().random_range(1..=3u64);
        let by = format!("{}/{}", self.history.worker, id);
        // A write that fails (Redis out of reach) is retried every 200 ms, as an application
        // would, until it goes through or lost() says to stop (at most three leases).
        let mut pending = writes;
        let retry_until = tokio::time::Instant::now() + 3 * self.lease;
        let mut pause = Duration::from_millis(hold_ms / writes);
        while pending > 0 {
            let lost = guard.lost();
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = lost => break,
            }
            // The library says the hold is valid at `l_check` (is_lost() turns at its
            // valid_until): the checker uses that as a lower bound of the hold's end.
            let l_check = now_us();
            if guard.is_lost() {
                break;
            }
            // The work between the check and the write: a pause here (SIGSTOP, a long GC)
            // sends the write after the lock is gone, which only the fencing token stops.
            let work = rand::rng().random_range(10..=120);
            tokio::time::sleep(Duration::from_millis(work)).await;
            let l_send = now_us();
            let outcome = self.probe.write(&lock, token, &by).await;
            let l_recv = now_us();
            match outcome {
                Ok((accepted, t, max)) => {
                    history.log(
                        id,
                        "write",
                        json!({"lock": lock, "token": token, "accepted": accepted, "t": t,
                               "max_before": max, "l_check": l_check, "l_send": l_send,
                               "l_recv": l_recv}),
                    );
                    pending -= 1;
                    pause = Duration::from_millis(hold_ms / writes);
                }
                Err(e) => {
                    history.log(
                        id,
                        "write_failed",
                        json!({"lock": lock, "token": token, "error": e, "l_check": l_check,
                               "l_send": l_send}),
                    );
                    if tokio::time::Instant::now() > retry_until {
                        break;
                    }
                    pause = Duration::from_millis(200);
                }
            }
        }

        let was_lost = guard.is_lost();
        let l_release = now_us();
        let t_release = if was_lost {
            None
        } else {
            self.probe.time(&lock).await
        };
        history.log(
            id,
            "release_start",
            json!({"lock": lock, "token": token, "l": l_release, "t": Stamp::json(t_release), "was_lost": was_lost}),
        );
        let result = guard.unlock().await;
        let l_done = now_us();
        let t_done = self.probe.time(&lock).await;
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e) => error_kind(e),
        };
        history.log(
            id,
            "release",
            json!({"lock": lock, "token": token, "result": outcome, "l": l_done, "t": Stamp::json(t_done)}),
        );
        // After a release lost() never fires; a lost hold's watcher has logged already or
        // is reading TIME (give that a moment: it is the best Redis time of the loss).
        if was_lost {
            let _ = tokio::time::timeout(Duration::from_secs(1), watcher).await;
        } else {
            watcher.abort();
        }
        self.pause(100).await;
    }
}

/// Logs every stretch in which this process was not scheduled: a 10 ms timer that fires
/// more than 25 ms late is a `stall` (CPU starvation, or SIGSTOP), with its wall-clock span.
/// The checker does not hold a process to a deadline that fell inside its own stall.
async fn watch_stalls(history: Arc<History>) {
    const TICK: Duration = Duration::from_millis(10);
    loop {
        let (started, l_from) = (tokio::time::Instant::now(), now_us());
        tokio::time::sleep(TICK).await;
        let late = started.elapsed().saturating_sub(TICK);
        if late > Duration::from_millis(25) {
            let late_ms = late.as_millis() as u64;
            history.log(
                0,
                "stall",
                json!({"l_from": l_from, "l_to": now_us(), "late_ms": late_ms}),
            );
        }
    }
}

/// Stdin lines on a plain thread (see `lock_holder`): `stop` or end of input stops the run.
fn watch_stdin(stop: watch::Sender<bool>) {
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            match line {
                Ok(line) if line.trim() == "stop" => break,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        let _ = stop.send(true);
    });
}

async fn run(args: Args) -> Result<(), Failure> {
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.history)?;
    let history = Arc::new(History {
        file: Mutex::new(file),
        worker: args.worker,
    });
    let config = args
        .target
        .client_config(&args.url)
        .watchdog_timeout(args.lease)
        .connect_timeout(args.timeout)
        .response_timeout(args.timeout);
    let client = target::connect(config).await?;
    let probe = Arc::new(args.target.probe(&args.url, args.timeout)?);
    history.log(
        0,
        "start",
        json!({"client": client.id(), "pid": std::process::id(), "l": now_us()}),
    );
    let (stop_tx, stop_rx) = watch::channel(false);
    watch_stdin(stop_tx);
    let stalls = tokio::spawn(watch_stalls(history.clone()));
    let mut tasks = Vec::new();
    for id in 1..=args.tasks {
        let task = Task {
            id,
            client: client.clone(),
            probe: probe.clone(),
            history: history.clone(),
            locks: args.locks.clone(),
            lease: args.lease,
            stop: stop_rx.clone(),
        };
        tasks.push(tokio::spawn(task.run()));
    }
    for task in tasks {
        task.await?;
    }
    stalls.abort();
    history.log(0, "stop", json!({"l": now_us()}));
    client.shutdown();
    println!("stopped");
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(problem) => {
            eprintln!("lock_worker: {problem}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("lock_worker: {error}");
            ExitCode::FAILURE
        }
    }
}
