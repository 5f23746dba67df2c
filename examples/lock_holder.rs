//! A process that takes one lock and holds it until told to let go: the "other process" of
//! the fault tests (`tests/faults_process.rs` kills it, or freezes it with SIGSTOP), and a
//! handy way to hold a lock by hand while you watch what your service does.
//!
//! ```text
//! lock_holder <redis-url> <lock-name> [--watchdog-ms N] [--lease-ms N] [--kind KIND]
//!             [--fair-wait-ms N] [--count N --counter KEY] [--pubsub auto|classic]
//!             [--client-id ID] [--owner-id N]
//! ```
//!
//! - Takes `<lock-name>` with the watchdog (lease `--watchdog-ms`, default 30 000, renewed
//!   every third of it), or with a fixed lease of `--lease-ms` and no watchdog.
//! - `--kind` picks the lock: `reentrant` (the default), `fast`, `fair`, `fenced`, `read` or
//!   `write` (the two sides of the read-write lock `<lock-name>`). A busy lock is waited for
//!   (the client's default wait); a fair lock's waiter queues in Redis meanwhile, with
//!   `--fair-wait-ms` (the client's `fair_wait_timeout`) as its allowance: a waiter killed
//!   in the queue is skipped once its deadline passes.
//! - `--count N --counter KEY` runs a counter loop instead: N times take the lock, read the
//!   integer at the plain key KEY, write it back plus one, unlock; then print `counted N`
//!   and exit. The read and the write are two commands, so only the lock keeps the count
//!   exact (the interop tests run it beside Redisson doing the same).
//! - `<redis-url>` may be several URLs separated by commas: the nodes of a Redis Cluster;
//!   `--pubsub classic` keeps it on classic pub/sub (for Java services on Redisson < 3.23,
//!   which do not use sharded pub/sub), `auto` (the default) uses sharded pub/sub on Redis 7+.
//! - `--client-id ID` writes `ID` before its owner instead of a uuid of its own
//!   (`ClientConfig::client_id`), and `--owner-id N` holds as `LockOwner::from_id(N)`: a
//!   process whose client has the same id can then check or release the hold knowing `N`.
//! - Prints one line `acquired <client-id> <owner-id>`: in Redis a reentrant lock is the hash
//!   `<lock-name>` with the field `<client-id>:<owner-id>` (a reader's field is the same, a
//!   writer's ends in `:write`; a fast lock is a string with that value).
//! - Prints `lost` as soon as the lock is lost while held (the watchdog found it gone, or the
//!   fixed lease ran out).
//! - Reads commands from stdin, one per line. `unlock` releases the lock, prints
//!   `unlock <result>` (for example `unlock Ok(Unlocked)` or `unlock Err(NotOwner { .. })`)
//!   and exits. When stdin closes it exits at once *without* unlocking, like a crashed
//!   holder: the lock then expires at its lease.
//!
//! Try it against a throwaway Redis:
//!
//! ```text
//! redis-server --port 23456 --save "" --daemonize yes
//! cargo run --example lock_holder -- redis://127.0.0.1:23456/ report:daily --watchdog-ms 3000
//! # in another shell: redis-cli -p 23456 hgetall report:daily; redis-cli -p 23456 pttl report:daily
//! # then type `unlock` (or press Ctrl-D to walk away and let the lease run out)
//! redis-cli -p 23456 shutdown nosave
//! ```

use actix_distributed_lock::{
    AcquireOptions, ClientConfig, Lock, LockClient, LockError, LockOwner, ShardedSubscriptionMode,
};
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::Duration;
use tokio::sync::mpsc;

const USAGE: &str = "usage: lock_holder <redis-url>[,<url>...] <lock-name> [--watchdog-ms N] \
                     [--lease-ms N] [--kind reentrant|fast|fair|fenced|read|write] \
                     [--fair-wait-ms N] [--count N --counter KEY] [--pubsub auto|classic] \
                     [--client-id ID] [--owner-id N]";

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// What the command line asks for.
struct Args {
    url: String,
    /// `Some((n, key))`: run the counter loop.
    count: Option<(u64, String)>,
    pubsub: ShardedSubscriptionMode,
    name: String,
    watchdog: Duration,
    /// `Some`: a fixed lease, no watchdog.
    lease: Option<Duration>,
    kind: Kind,
    /// `Some`: the fair lock's queue allowance (`fair_wait_timeout`).
    fair_wait: Option<Duration>,
    /// `Some`: the client id written before the owner (`ClientConfig::client_id`).
    client_id: Option<String>,
    /// `Some`: hold as `LockOwner::from_id` of it.
    owner_id: Option<u64>,
}

/// Which lock to take (`--kind`).
#[derive(Clone, Copy)]
enum Kind {
    Reentrant,
    Fast,
    Fair,
    Fenced,
    Read,
    Write,
}

impl Kind {
    fn parse(value: &str) -> Result<Kind, String> {
        match value {
            "reentrant" => Ok(Kind::Reentrant),
            "fast" => Ok(Kind::Fast),
            "fair" => Ok(Kind::Fair),
            "fenced" => Ok(Kind::Fenced),
            "read" => Ok(Kind::Read),
            "write" => Ok(Kind::Write),
            _ => Err(format!(
                "--kind: `{value}` is not one of reentrant, fast, fair, fenced, read, write"
            )),
        }
    }

    fn lock(self, client: &LockClient, name: &str) -> Result<Lock, LockError> {
        match self {
            Kind::Reentrant => client.lock(name),
            Kind::Fast => client.fast_lock(name),
            Kind::Fair => client.fair_lock(name),
            Kind::Fenced => client.fenced_lock(name),
            Kind::Read => Ok(client.read_write_lock(name)?.read().clone()),
            Kind::Write => Ok(client.read_write_lock(name)?.write().clone()),
        }
    }
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let url = args.next().ok_or("missing <redis-url>")?;
    let name = args.next().ok_or("missing <lock-name>")?;
    let mut watchdog = ClientConfig::new(url.as_str()).watchdog_timeout_value();
    let mut lease = None;
    let mut kind = Kind::Reentrant;
    let mut fair_wait = None;
    let mut count = None;
    let mut counter = None;
    let mut pubsub = ShardedSubscriptionMode::Auto;
    let mut client_id = None;
    let mut owner_id = None;
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let ms = || -> Result<Duration, String> {
            let ms: u64 = value
                .parse()
                .map_err(|_| format!("{flag}: `{value}` is not a number of milliseconds"))?;
            Ok(Duration::from_millis(ms))
        };
        match flag.as_str() {
            "--watchdog-ms" => watchdog = ms()?,
            "--lease-ms" => lease = Some(ms()?),
            "--kind" => kind = Kind::parse(&value)?,
            "--fair-wait-ms" => fair_wait = Some(ms()?),
            "--count" => {
                count = Some(
                    value
                        .parse::<u64>()
                        .map_err(|_| format!("--count: `{value}` is not a number"))?,
                )
            }
            "--counter" => counter = Some(value),
            "--pubsub" => {
                pubsub = match value.as_str() {
                    "auto" => ShardedSubscriptionMode::Auto,
                    "classic" => ShardedSubscriptionMode::Off,
                    _ => return Err(format!("--pubsub: `{value}` is not auto or classic")),
                }
            }
            "--client-id" => client_id = Some(value),
            "--owner-id" => {
                owner_id = Some(
                    value
                        .parse::<u64>()
                        .map_err(|_| format!("--owner-id: `{value}` is not a number"))?,
                )
            }
            _ => return Err(format!("unknown option `{flag}`")),
        }
    }
    let count = match (count, counter) {
        (Some(n), Some(key)) => Some((n, key)),
        (None, None) => None,
        _ => return Err("--count and --counter go together".into()),
    };
    Ok(Args {
        url,
        count,
        pubsub,
        name,
        watchdog,
        lease,
        kind,
        fair_wait,
        client_id,
        owner_id,
    })
}

/// Prints one line and flushes it: the reader is a program waiting for exactly this line.
fn say(line: &str) {
    let mut stdout = std::io::stdout().lock();
    // A reader that went away cannot be told anything more; nothing else to do about it.
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// Stdin lines, read on a plain thread: tokio's stdin reads on a blocking thread that the
/// runtime would wait for at shutdown, so an `unlock` reply could hang until the next line.
fn stdin_lines() -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
        // Dropping `tx` tells main that stdin closed.
    });
    rx
}

/// The counter loop of `--count N --counter KEY`.
async fn count(args: &Args, lock: &Lock, options: &AcquireOptions) -> Result<(), Failure> {
    let Some((n, key)) = &args.count else {
        return Ok(());
    };
    let urls: Vec<&str> = args.url.split(',').collect();
    if urls.len() > 1 {
        let cluster = redis::cluster::ClusterClient::new(urls)?;
        count_on(
            cluster.get_async_connection().await?,
            lock,
            options,
            *n,
            key,
        )
        .await
    } else {
        let client = redis::Client::open(args.url.as_str())?;
        count_on(
            client.get_multiplexed_async_connection().await?,
            lock,
            options,
            *n,
            key,
        )
        .await
    }
}

async fn count_on(
    mut conn: impl redis::aio::ConnectionLike,
    lock: &Lock,
    options: &AcquireOptions,
    n: u64,
    key: &str,
) -> Result<(), Failure> {
    for _ in 0..n {
        let guard = lock.acquire_with(*options).await?;
        let value: Option<u64> = redis::cmd("GET").arg(key).query_async(&mut conn).await?;
        let () = redis::cmd("SET")
            .arg(key)
            .arg(value.unwrap_or(0) + 1)
            .query_async(&mut conn)
            .await?;
        guard.unlock().await?;
    }
    say(&format!("counted {n}"));
    Ok(())
}

async fn run(args: Args) -> Result<(), Failure> {
    let urls: Vec<&str> = args.url.split(',').collect();
    let config = if urls.len() > 1 {
        ClientConfig::cluster(urls)
    } else {
        ClientConfig::new(args.url.as_str())
    };
    let mut config = config
        .watchdog_timeout(args.watchdog)
        .sharded_subscription(args.pubsub);
    if let Some(fair_wait) = args.fair_wait {
        config = config.fair_wait_timeout(fair_wait);
    }
    if let Some(id) = &args.client_id {
        config = config.client_id(id.as_str());
    }
    let client = LockClient::connect(config).await?;
    let mut options = AcquireOptions::new();
    if let Some(id) = args.owner_id {
        options = options.owner(LockOwner::from_id(id));
    }
    if let Some(lease) = args.lease {
        options = options.lease(lease);
    }
    if args.count.is_some() {
        // A generous bound per acquire: the loop shares the lock with other processes.
        options = options.wait(Duration::from_secs(120));
        let lock = args.kind.lock(&client, &args.name)?;
        return count(&args, &lock, &options).await;
    }
    let guard = args
        .kind
        .lock(&client, &args.name)?
        .acquire_with(options)
        .await?;
    say(&format!("acquired {} {}", client.id(), guard.owner().id()));

    let lost = guard.lost();
    tokio::pin!(lost);
    let mut reported_lost = false;
    let mut commands = stdin_lines();
    loop {
        tokio::select! {
            () = &mut lost, if !reported_lost => {
                reported_lost = true;
                say("lost");
            }
            command = commands.recv() => match command.as_deref().map(str::trim) {
                Some("unlock") => {
                    let result = guard.unlock().await;
                    say(&format!("unlock {result:?}"));
                    return Ok(());
                }
                Some("") => {}
                Some(other) => eprintln!("lock_holder: unknown command `{other}` (try `unlock`)"),
                None => {
                    // Stdin closed: leave without unlocking, as a crashed holder would. Exiting
                    // here skips the guard's drop, which would release the lock.
                    std::process::exit(0);
                }
            },
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(problem) => {
            eprintln!("lock_holder: {problem}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("lock_holder: {error}");
            ExitCode::FAILURE
        }
    }
}
