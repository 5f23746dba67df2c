//! A short-lived program that does one thing with a lock or a semaphore, closes its client
//! and returns from `main`: the shape of a cron job or a CLI. `tests/exit_clean.rs` runs it
//! as a process and checks that it left nothing behind in Redis.
//!
//! ```text
//! exit_after <redis-url> <name> drop <kind>         # acquire, drop the guard
//! exit_after <redis-url> <name> abandon-unlock <kind> <polls>
//!                                                   # acquire, start `unlock()`, poll it
//!                                                   # <polls> times, drop it unfinished
//!                                                   # (`finished` if it was done by then)
//! exit_after <redis-url> <name> drop-permits        # take 1 permit of a plain semaphore, drop
//! exit_after <redis-url> <name> drop-expirable      # take 1 permit-expirable permit, drop
//! exit_after <redis-url> <name> timeout-fair <ms>   # wait <ms> for a busy fair lock, time out
//! exit_after <redis-url> <name> cancel-fair <ms>    # wait for a busy fair lock, give up
//!                                                   # after <ms> (the acquire future dropped)
//! ```
//!
//! `<kind>` is one of `reentrant`, `fenced`, `fast`, `fair`, `read`, `write`. It prints
//! `client <client-id>` once connected (a fair waiter's queue entry is
//! `<client-id>:<owner-id>`), then one line on how the step went (`dropped`, `abandoned`,
//! `timed out`, `gave up`), then `closed` once [`LockClient::close`] has returned, and exits 0. Any error
//! is printed to stderr and the exit code is 1.
//!
//! The point is the last two lines of `run`: a guard dropped (or a wait given up) just
//! before the program returns is released (withdrawn) in the background, and only
//! `client.close().await` waits for that. Without it, the lock stays taken for its whole
//! lease, a plain semaphore's permit is lost for good, and a fair waiter's place in the
//! queue holds up everybody behind it for `fair_wait_timeout` (5 minutes by default).
//!
//! ```text
//! redis-server --port 23456 --save "" --daemonize yes
//! cargo run --example exit_after -- redis://127.0.0.1:23456/ report:daily drop reentrant
//! redis-cli -p 23456 exists report:daily   # 0: released before the program ended
//! redis-cli -p 23456 shutdown nosave
//! ```

use actix_distributed_lock::{Lock, LockClient, LockError};
use std::future::Future;
use std::io::Write;
use std::process::ExitCode;
use std::task::Poll;
use std::time::Duration;

const USAGE: &str = "usage: exit_after <redis-url> <name> \
                     (drop <kind> | abandon-unlock <kind> <polls> | drop-permits | \
                     drop-expirable | timeout-fair <ms> | cancel-fair <ms>)";

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// Prints one line and flushes it: the reader may be a test waiting for exactly this line.
fn say(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

fn millis(arg: Option<&String>) -> Result<Duration, Failure> {
    let ms: u64 = arg.ok_or("missing <ms>")?.parse()?;
    Ok(Duration::from_millis(ms))
}

/// The lock of kind `kind` named `name`.
fn lock_of(client: &LockClient, name: &str, kind: Option<&String>) -> Result<Lock, Failure> {
    Ok(match kind.map(String::as_str) {
        Some("reentrant") => client.lock(name)?,
        Some("fenced") => client.fenced_lock(name)?,
        Some("fast") => client.fast_lock(name)?,
        Some("fair") => client.fair_lock(name)?,
        Some("read") => client.read_write_lock(name)?.read().clone(),
        Some("write") => client.read_write_lock(name)?.write().clone(),
        _ => return Err(USAGE.into()),
    })
}

/// The one step the command line asks for.
async fn step(client: &LockClient, name: &str, args: &[String]) -> Result<(), Failure> {
    match args.first().map(String::as_str) {
        Some("drop") => {
            drop(lock_of(client, name, args.get(1))?.acquire().await?);
            say("dropped");
        }
        Some("abandon-unlock") => {
            let guard = lock_of(client, name, args.get(1))?.acquire().await?;
            let polls: usize = args.get(2).ok_or("missing <polls>")?.parse()?;
            let mut unlocking = std::pin::pin!(guard.unlock());
            for _ in 0..polls {
                let poll = std::future::poll_fn(|cx| Poll::Ready(unlocking.as_mut().poll(cx)));
                if let Poll::Ready(result) = poll.await {
                    // Possible when this thread was descheduled for the whole round trip.
                    result?;
                    say("finished");
                    return Ok(());
                }
            }
            say("abandoned"); // the unlock future is dropped here, unfinished
        }
        Some("drop-permits") => {
            drop(client.semaphore(name)?.acquire(1).await?);
            say("dropped");
        }
        Some("drop-expirable") => {
            drop(client.expirable_semaphore(name)?.acquire(1).await?);
            say("dropped");
        }
        Some("timeout-fair") => {
            let wait = millis(args.get(1))?;
            match client.fair_lock(name)?.acquire_timeout(wait).await {
                Err(LockError::Timeout { .. }) => say("timed out"),
                Ok(_) => return Err("the fair lock was free; the test holds it first".into()),
                Err(error) => return Err(error.into()),
            }
        }
        Some("cancel-fair") => {
            let patience = millis(args.get(1))?;
            let lock = client.fair_lock(name)?;
            let waiting = lock.acquire_timeout(Duration::from_secs(600));
            match tokio::time::timeout(patience, waiting).await {
                Err(_) => say("gave up"), // the acquire future is dropped here
                Ok(Ok(_)) => return Err("the fair lock was free; the test holds it first".into()),
                Ok(Err(error)) => return Err(error.into()),
            }
        }
        _ => return Err(USAGE.into()),
    }
    Ok(())
}

async fn run(args: Vec<String>) -> Result<(), Failure> {
    let [url, name, step_args @ ..] = &args[..] else {
        return Err(USAGE.into());
    };
    let client = LockClient::from_url(url).await?;
    say(&format!("client {}", client.id()));
    step(&client, name, step_args).await?;
    client.close().await;
    say("closed");
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("exit_after: {error}");
            ExitCode::FAILURE
        }
    }
}
