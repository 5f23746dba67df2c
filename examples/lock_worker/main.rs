//! A worker process for the nemesis suite (`tests/nemesis.rs`): several tasks take locks of
//! the kinds in its mix over and over, write to a fenced store while they hold fenced locks,
//! and log everything they see as JSON lines, so a checker can judge the whole run afterwards.
//!
//! ```text
//! lock_worker <redis-url> <worker-id> <history-file> [--locks a,b] [--tasks N] [--lease-ms N]
//!             [--timeout-ms N] [--mix k1,k2] [--permits N] [--broken ignore-lost|skip-mode]
//!             [--cluster h:p,h:p | --sentinel h:p,.. --service NAME] [--sync-replicas N:ms]
//! ```
//!
//! - `--mix` (default `fenced`) lists the kinds a task picks from each round: `reentrant
//!   fast fenced fair read write semaphore expirable` (`expirable`: the permit-expirable
//!   semaphore). Each base name of `--locks` gives one lock per kind family: fenced locks
//!   use the base name, the others `<base>-re`, `-fast`, `-fair`, `-rw` (read and write
//!   share it), `-sem`, `-exp`. Semaphores have `--permits` permits (default 2; the first
//!   worker to start sets them); each hold takes one.
//! - Each round: read Redis `TIME`, log `wait`, acquire (waiting up to 800 ms; a watchdog
//!   lease, or half the time a fixed lease of 300 ms–2.5 s; plain permits have no lease),
//!   read `TIME` again, log `grant`, re-enter the reentrant kinds 0–3 levels deep (each
//!   level with its own lease), hold for a random while (mostly under 400 ms, a quarter of
//!   the time up to two leases), then release. Under a fenced lock the hold writes to the
//!   store a few times under its fencing token (each write after a short stretch of "work"
//!   that follows a look at `is_lost()`, under a fixed lease a quarter of the time a stall
//!   past the lease's end; a failed write is retried every 200 ms until it goes through or
//!   `lost()` fires). The watchdog lease is `--lease-ms` (default 1500);
//!   Redis commands time out after `--timeout-ms` (default 400).
//! - The store is the hash `nemesis:store:<lock>`: a Lua script accepts a write only when
//!   its token is at least the highest token the store has accepted, and returns Redis
//!   `TIME` taken inside the script.
//! - Every event is one JSON object per line in `<history-file>` (appended with one
//!   `write(2)` per line, so a SIGKILL loses at most the event in flight), in the schema
//!   `tests/support/history` reads. Times are microseconds since the Unix epoch: `l_*`
//!   from this process' wall clock, `t_*` from Redis `TIME` (null when Redis did not answer).
//! - A heartbeat logs every `stall`: a stretch in which the process was not scheduled.
//! - Reads stdin: `stop` (or end of input) makes the tasks finish their current hold,
//!   unlock and exit; the process then prints `stopped` and exits 0. `exit` drops every
//!   hold and wait and closes the client, as a service's `main` returning does; `extras`,
//!   `burst N` and `stats` are described in `control.rs`.
//! - `--broken` makes a wrong worker for the checker's negative controls: `ignore-lost`
//!   keeps holding and writing after `lost()` (and claims each write looked at
//!   `is_lost()`); `skip-mode` takes no lock for `read` rounds but logs them as read grants.
//!
//! Try it against a throwaway Redis:
//!
//! ```text
//! redis-server --port 23457 --save "" --daemonize yes
//! cargo run --example lock_worker -- redis://127.0.0.1:23457/ 1 /tmp/w1.jsonl --tasks 3 \
//!     --mix reentrant,fast,fenced,fair,read,write,semaphore,expirable
//! # type `stop` after a while, then: head /tmp/w1.jsonl
//! redis-cli -p 23457 shutdown nosave
//! ```

mod args;
mod control;
mod history;
mod kinds;
mod target;

use actix_distributed_lock::LockClient;
use args::{parse_args, Args, Kind, USAGE};
use history::{now_us, History};
use kinds::Task;
use serde_json::json;
use std::fs::OpenOptions;
use std::process::ExitCode;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

type Failure = Box<dyn std::error::Error + Send + Sync>;

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

/// Gives every semaphore of the mix its permits, unless a worker did before (`try_set`).
async fn set_permits(client: &LockClient, args: &Args) {
    for base in &args.locks {
        for kind in [Kind::Semaphore, Kind::Expirable] {
            if !args.mix.contains(&kind) {
                continue;
            }
            let name = kind.lock_name(base);
            let set = match kind {
                Kind::Semaphore => match client.semaphore(&name) {
                    Ok(s) => s.try_set_permits(args.permits).await,
                    Err(e) => Err(e),
                },
                _ => match client.expirable_semaphore(&name) {
                    Ok(s) => s.try_set_permits(args.permits).await,
                    Err(e) => Err(e),
                },
            };
            if let Err(e) = set {
                eprintln!("lock_worker: cannot set the permits of {name}: {e}");
            }
        }
    }
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
        // A dead fair waiter blocks its queue until its deadline: keep that short, yet
        // longer than any live wait (800 ms), so no live waiter is ever skipped as dead.
        .fair_wait_timeout(2 * args.lease)
        .connect_timeout(args.timeout)
        .response_timeout(args.timeout);
    let client = target::connect(config).await?;
    set_permits(&client, &args).await;
    let probe = Arc::new(args.target.probe(&args.url, args.timeout)?);
    history.log(
        0,
        "start",
        json!({"client": client.id(), "pid": std::process::id(), "l": now_us(), "impl": "rust",
               "mix": args.mix.iter().map(|k| k.name()).collect::<Vec<_>>()}),
    );
    let (stop_tx, stop_rx) = watch::channel(false);
    let stalls = tokio::spawn(watch_stalls(history.clone()));
    let holds = Arc::new(AtomicU64::new(0));
    let registry = Arc::new(control::Holds::new(history.clone()));
    let mut tasks = Vec::new();
    for id in 1..=args.tasks {
        tasks.push(Task {
            id,
            client: client.clone(),
            probe: probe.clone(),
            history: history.clone(),
            locks: args.locks.clone(),
            mix: args.mix.clone(),
            permits: args.permits,
            lease: args.lease,
            broken: args.broken,
            holds: holds.clone(),
            registry: registry.clone(),
            stop: stop_rx.clone(),
        });
    }
    let control = control::Control {
        client: client.clone(),
        history: history.clone(),
        holds: registry,
        tasks: control::spawn(tasks),
        locks: args.locks.clone(),
        extras: args.extras.clone(),
        stop: stop_tx,
    };
    let ending = control.serve().await?;
    stalls.abort();
    if let control::Ending::Exited = ending {
        println!("exited");
        return Ok(());
    }
    history.log(0, "stop", json!({"l": now_us()}));
    // Waits for the releases and fair-queue withdraws still on their way.
    client.close().await;
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
