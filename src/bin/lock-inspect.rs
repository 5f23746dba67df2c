//! `lock-inspect`: who holds which lock, who waits, live changes, and a forced release for
//! operators. A thin command over [`Inspector`]: arguments, output, confirmation.
//!
//! ```text
//! lock-inspect redis://127.0.0.1:6379/ list 'order:*'
//! lock-inspect redis://127.0.0.1:6379/ show order:42 --json
//! lock-inspect redis+cluster://10.0.0.1:7000,10.0.0.2:7000 watch order:42
//! lock-inspect redis+sentinel://10.0.0.1:26379/mymaster force-unlock order:42
//! ```
//!
//! Every failure is one line on stderr, `lock-inspect: <what went wrong>`, and a non-zero
//! exit: 1 the server or the lock refused, 2 bad arguments or URL, 3 no lock of that name,
//! 4 a force-unlock found the lock held by others than the holders shown (nothing released).

#[path = "lock_inspect/render.rs"]
mod render;
#[path = "lock_inspect/target.rs"]
mod target;

use actix_distributed_lock::inspect::{InspectedKind, Inspector, LockInfo};
use actix_distributed_lock::{redact_url, LockClient, LockError};
use clap::builder::PossibleValuesParser;
use clap::error::ErrorKind;
use clap::{Parser, Subcommand};
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

/// Inspect the distributed locks in a Redis deployment: every kind this crate and
/// Redisson write (reentrant, fenced, fair, read-write, fast, semaphores).
#[derive(Parser)]
#[command(name = "lock-inspect", version, after_help = target::URL_HELP)]
struct Cli {
    /// Where the locks are (the forms are listed below).
    url: String,
    #[command(subcommand)]
    command: Command,
    /// Print JSON (for `watch`: one object per line) instead of text.
    #[arg(long, global = true)]
    json: bool,
    /// Look at the locks of this namespace (as `ClientConfig::namespace` maps them).
    #[arg(long, global = true, value_name = "NS")]
    namespace: Option<String>,
    /// How long connecting, and each reply of the server, may take (`500ms`, `5s`).
    #[arg(long, global = true, default_value = "5s", value_parser = humantime::parse_duration)]
    timeout: Duration,
}

#[derive(Subcommand)]
enum Command {
    /// Every lock (whose name matches the glob PATTERN), sorted by name.
    List {
        /// A glob on lock names (`order:*`); all locks when left out.
        pattern: Option<String>,
        /// Only locks of this kind.
        #[arg(long, value_parser = PossibleValuesParser::new(InspectedKind::ALL.map(InspectedKind::as_str)))]
        kind: Option<String>,
    },
    /// One lock in detail: holders, waiters in queue order, fencing token, permits.
    Show {
        /// The lock's name.
        name: String,
    },
    /// Follow one lock live (grants, releases, waiters) until Ctrl-C.
    Watch {
        /// The lock's name.
        name: String,
    },
    /// Release a lock from the holders it shows (they are told they lost it), after
    /// confirmation: type the lock's name when asked, or pass --yes. If the lock changed
    /// hands since it was shown, nothing is released (exit 4).
    ForceUnlock {
        /// The lock's name.
        name: String,
        /// Do not ask for confirmation.
        #[arg(long, short)]
        yes: bool,
    },
}

/// A failure: its one-line message and the exit code.
struct Failure {
    message: String,
    code: u8,
}

impl Failure {
    fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            code,
        }
    }

    /// A library error, in the operator's words.
    fn lock(error: LockError) -> Self {
        match error {
            LockError::WrongType { name } => Failure::new(
                1,
                format!("`{name}` is not a lock: its key holds other data (left untouched)"),
            ),
            // A refusal (a semaphore has no holder to force out); at connect: the server
            // refused the user or password, or is no Redis.
            LockError::InvalidConfig { reason } => Failure::new(1, reason),
            LockError::HolderChanged { name } => Failure::new(
                4,
                format!(
                    "`{}` changed hands since it was shown; nothing was released \
                     (show it again, then force-unlock what you see)",
                    render::clean(&name)
                ),
            ),
            other => Failure::new(1, other.to_string()),
        }
    }
}

/// Where the output goes; a closed pipe (`| head`) ends the command quietly.
fn emit(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Failure::new(0, "")),
        Err(e) => Err(Failure::new(1, format!("cannot write the output: {e}"))),
        Ok(()) => Ok(()),
    }
}

/// Prints one JSON document (`serde_json::to_string` of a report) on a line of its own.
fn json(encoded: serde_json::Result<String>) -> Result<(), Failure> {
    let mut text =
        encoded.map_err(|e| Failure::new(1, format!("cannot encode the output as JSON: {e}")))?;
    text.push('\n');
    emit(&text)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help, --version, and the help shown when nothing at all was given.
        Err(error)
            if !error.use_stderr()
                || error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            error.exit()
        }
        Err(error) => {
            // Clap's message up to its first blank line (then come usage and tips), as one line.
            let text = error.render().to_string();
            let message: Vec<&str> = text
                .lines()
                .take_while(|line| !line.trim().is_empty())
                .map(str::trim)
                .collect();
            let message = message.join(" ");
            let message = message.strip_prefix("error: ").unwrap_or(&message);
            let hint = did_you_mean(&error);
            return fail(
                &Failure::new(2, format!("{message}{hint} (see --help)")),
                &[],
            );
        }
    };
    let target = match target::parse(&cli.url) {
        Ok(target) => target,
        Err(message) => return fail(&Failure::new(2, message), &[]),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&Failure::new(1, format!("cannot start: {e}")), &[]),
    };
    let secrets = target.secrets.clone();
    match runtime.block_on(run(cli, target)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => fail(&failure, &secrets),
    }
}

/// Clap's suggestion for a mistyped command or option (`lsit`: `list`), as `; did you mean
/// 'list'?`; empty when it has none.
fn did_you_mean(error: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    let suggested = [ContextKind::SuggestedSubcommand, ContextKind::SuggestedArg]
        .into_iter()
        .find_map(|kind| match error.get(kind) {
            Some(ContextValue::String(one)) => Some(vec![one.clone()]),
            Some(ContextValue::Strings(some)) if !some.is_empty() => Some(some.clone()),
            _ => None,
        });
    match suggested {
        Some(names) => format!("; did you mean '{}'?", names.join("' or '")),
        None => String::new(),
    }
}

/// Prints `failure` as one line on stderr (passwords blanked) and returns its exit code.
fn fail(failure: &Failure, secrets: &[String]) -> ExitCode {
    if failure.code == 0 {
        return ExitCode::SUCCESS; // the reader went away: nothing to say
    }
    let mut line = failure.message.replace(['\n', '\r'], " ");
    for secret in secrets {
        line = line.replace(secret.as_str(), "***");
    }
    eprintln!("lock-inspect: {line}");
    ExitCode::from(failure.code)
}

async fn run(cli: Cli, target: target::Target) -> Result<(), Failure> {
    let mut config = target
        .config
        .connect_timeout(cli.timeout)
        .response_timeout(cli.timeout);
    if let Some(namespace) = &cli.namespace {
        config = config.namespace(namespace.clone());
    }
    // What the arguments themselves get wrong is exit 2; a refusal while connecting (a
    // user or password the server refuses, a port where no Redis answers) is the server
    // saying no: exit 1.
    config.validate().map_err(|error| match error {
        LockError::InvalidConfig { reason } => Failure::new(2, reason),
        other => Failure::lock(other),
    })?;
    // The client bounds its connect by the timeout; this bound is the backstop.
    let client = tokio::time::timeout(cli.timeout * 2, LockClient::connect(config))
        .await
        .map_err(|_| {
            Failure::new(
                1,
                format!(
                    "no answer from {} within {:?}",
                    redact_url(&cli.url),
                    cli.timeout * 2
                ),
            )
        })?
        .map_err(Failure::lock)?;
    let result = command(&cli, &client.inspector()).await;
    client.shutdown();
    result
}

async fn command(cli: &Cli, inspector: &Inspector) -> Result<(), Failure> {
    match &cli.command {
        Command::List { pattern, kind } => {
            let mut locks = inspector
                .list(pattern.as_deref())
                .await
                .map_err(Failure::lock)?;
            if let Some(kind) = kind {
                locks.retain(|lock| lock.kind.as_str() == kind);
            }
            if cli.json {
                json(serde_json::to_string(&locks))
            } else {
                emit(&render::table(&locks))
            }
        }
        Command::Show { name } => {
            let lock = found(name, inspector.show(name).await)?;
            if cli.json {
                json(serde_json::to_string(&lock))
            } else {
                emit(&render::detail_view(&lock))
            }
        }
        Command::Watch { name } => watch(cli.json, inspector, name).await,
        Command::ForceUnlock { name, yes } => {
            let lock = found(name, inspector.show(name).await)?;
            let semaphore = matches!(
                lock.kind,
                InspectedKind::Semaphore | InspectedKind::ExpirableSemaphore | InspectedKind::Latch
            );
            // A semaphore is refused by the inspector: no question for a refusal.
            if !yes && !semaphore {
                confirm(&lock)?;
            }
            // Only the holders shown (and confirmed) are forced out, checked in Redis.
            let shown: Vec<String> = lock.holders.iter().map(|h| h.field.clone()).collect();
            let done = found(name, inspector.force_unlock_if(name, &shown).await)?;
            if cli.json {
                json(serde_json::to_string(&done))
            } else {
                emit(&render::forced(&done))
            }
        }
    }
}

/// The lock, or the "no lock" failure (exit 3).
fn found<T>(name: &str, result: Result<Option<T>, LockError>) -> Result<T, Failure> {
    result
        .map_err(Failure::lock)?
        .ok_or_else(|| Failure::new(3, format!("no lock named `{}`", render::clean(name))))
}

/// Asks on stderr, reads one line of stdin: the lock's name goes on, anything else (an
/// empty stdin too) leaves the lock as it is.
fn confirm(lock: &LockInfo) -> Result<(), Failure> {
    eprint!("{}", render::confirmation(lock));
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let read = std::io::stdin().lock().read_line(&mut answer);
    if !std::io::stdin().is_terminal() {
        eprintln!(); // what was read is not echoed: end the question's line
    }
    let answer = answer.trim_end_matches(['\n', '\r']);
    if read.is_ok() && answer == lock.name {
        return Ok(());
    }
    let hint = if std::io::stdin().is_terminal() {
        ""
    } else {
        " (stdin is not a terminal: pipe the lock's name in, or pass --yes)"
    };
    Err(Failure::new(
        1,
        format!(
            "not confirmed; `{}` was left as it is{hint}",
            render::clean(&lock.name)
        ),
    ))
}

/// Prints the lock's changes until Ctrl-C (or the client goes away).
async fn watch(as_json: bool, inspector: &Inspector, name: &str) -> Result<(), Failure> {
    // A key that holds something else is refused before the watch starts.
    inspector.show(name).await.map_err(Failure::lock)?;
    let mut watch = inspector.watch(name).map_err(Failure::lock)?;
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    let mut first = true;
    loop {
        let event = tokio::select! {
            _ = &mut stop => return Ok(()),
            event = watch.next() => event,
        };
        match event {
            None => return Ok(()),
            Some(Ok(event)) => {
                if as_json {
                    json(serde_json::to_string(&event))?;
                } else {
                    emit(&render::watch_lines(name, &event, first))?;
                }
                first = false;
            }
            // Reported, and the watch goes on trying (the server may come back).
            Some(Err(error)) => eprintln!("lock-inspect: {error}"),
        }
    }
}
