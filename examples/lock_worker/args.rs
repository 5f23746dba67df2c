//! The worker's command line: positional Redis URL, worker id and history file, then flags.

use crate::target::Target;
use std::time::Duration;

pub const USAGE: &str = "usage: lock_worker <redis-url> <worker-id> <history-file> [--locks a,b] \
                         [--tasks N] [--lease-ms N] [--timeout-ms N] [--mix k1,k2] [--permits N] [--extras PREFIX] \
                         [--broken ignore-lost|skip-mode] [--cluster h:p,h:p | --sentinel h:p,h:p --service NAME] \
                         [--sync-replicas N:ms|off]";

/// The lock kinds a worker can take, as the history names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Reentrant,
    Fast,
    Fenced,
    Fair,
    Read,
    Write,
    Semaphore,
    Expirable,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Reentrant,
        Kind::Fast,
        Kind::Fenced,
        Kind::Fair,
        Kind::Read,
        Kind::Write,
        Kind::Semaphore,
        Kind::Expirable,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Reentrant => "reentrant",
            Kind::Fast => "fast",
            Kind::Fenced => "fenced",
            Kind::Fair => "fair",
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Semaphore => "semaphore",
            Kind::Expirable => "expirable",
        }
    }

    fn parse(word: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == word)
    }

    /// The Redis name this kind uses for the base lock name `base`: fenced locks keep the
    /// base name, the others add their family (read and write share one read-write lock).
    /// `tests/support/nemesis.rs` (`lock_name`) builds the same names for its monitor.
    pub fn lock_name(self, base: &str) -> String {
        let family = match self {
            Kind::Fenced => return base.to_string(),
            Kind::Reentrant => "re",
            Kind::Fast => "fast",
            Kind::Fair => "fair",
            Kind::Read | Kind::Write => "rw",
            Kind::Semaphore => "sem",
            Kind::Expirable => "exp",
        };
        format!("{base}-{family}")
    }

    /// Whether the same owner may take it again inside a hold.
    pub fn reenters(self) -> bool {
        !matches!(self, Kind::Fast | Kind::Semaphore | Kind::Expirable)
    }
}

/// A deliberately wrong worker, for the checker's negative controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// Keeps working and writing after `lost()`, and claims each write checked the hold.
    IgnoreLost,
    /// A "reader" that takes no lock at all but logs its holds as read grants.
    SkipMode,
}

pub struct Args {
    pub url: String,
    pub worker: u64,
    pub history: String,
    pub locks: Vec<String>,
    pub tasks: usize,
    pub lease: Duration,
    pub timeout: Duration,
    pub mix: Vec<Kind>,
    pub permits: u32,
    pub broken: Option<Broken>,
    /// The prefix of the side names of the `extras` and `burst` commands (`control.rs`).
    pub extras: String,
    /// One server, a cluster or Sentinel, and replica sync (`target.rs`).
    pub target: Target,
}

pub fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
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
        mix: vec![Kind::Fenced],
        permits: 2,
        broken: None,
        extras: "nemesis-x".into(),
        target: Target::default(),
    };
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        parse_flag(&mut parsed, &flag, &value)?;
    }
    parsed.target.check(&parsed.locks)?;
    Ok(parsed)
}

/// One `--flag value` pair.
fn parse_flag(parsed: &mut Args, flag: &str, value: &str) -> Result<(), String> {
    let number = || -> Result<u64, String> {
        value
            .parse()
            .map_err(|_| format!("{flag}: `{value}` is not a number"))
    };
    match flag {
        "--locks" => parsed.locks = value.split(',').map(str::to_string).collect(),
        "--tasks" => parsed.tasks = number()? as usize,
        "--lease-ms" => parsed.lease = Duration::from_millis(number()?),
        "--timeout-ms" => parsed.timeout = Duration::from_millis(number()?),
        "--extras" => parsed.extras = value.to_string(),
        "--permits" => parsed.permits = number()?.max(1) as u32,
        "--mix" => {
            parsed.mix = value
                .split(',')
                .map(|w| Kind::parse(w.trim()).ok_or_else(|| format!("--mix: unknown kind `{w}`")))
                .collect::<Result<_, _>>()?;
            if parsed.mix.is_empty() {
                return Err("--mix: no kinds".into());
            }
        }
        "--broken" => {
            parsed.broken = Some(match value {
                "ignore-lost" => Broken::IgnoreLost,
                "skip-mode" => Broken::SkipMode,
                _ => return Err(format!("--broken: unknown mode `{value}`")),
            })
        }
        _ if parsed.target.option(flag, value)? => {}
        _ => return Err(format!("unknown option `{flag}`")),
    }
    Ok(())
}
