//! The waiter process of the hand-off curve: this benchmark program started again as
//! `lock_bench --curve-waiter <redis-url>`, one lock client per process.
//!
//! It reads commands from stdin, one per line, and answers on stdout:
//! - `wait <name> <n>`: starts `n` tasks that each acquire `<name>` (waiting up to 5 min),
//!   read CLOCK_MONOTONIC at once (`acq`), read it again just before unlocking (`rel`),
//!   unlock. Answers `queued` once every task has called acquire, then
//!   `done <acq>:<rel> <acq>:<rel> ...` (ns) when all have unlocked.
//! - `exit` (or the end of stdin): shuts the client down and exits.
//!
//! Started with PR_SET_PDEATHSIG, so it dies with the benchmark; stdin ends then too.

use super::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The first argument that makes this program a waiter process.
pub(crate) const WAITER_FLAG: &str = "--curve-waiter";

/// How long a waiter process may take to answer (10,000 hand-offs take a few seconds).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// The waiter process' `main`.
pub(crate) fn waiter_main(args: &[String]) {
    let url = args
        .get(1)
        .unwrap_or_else(|| panic!("usage: lock_bench {WAITER_FLAG} <redis-url>"));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(serve(url));
}

fn say(line: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    // The benchmark reads every line; a closed stdout means it is gone: nothing to do.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

async fn serve(url: &str) {
    let config = ClientConfig::new(url).default_wait(Duration::from_secs(300));
    let client = connect(config).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    say("ready");
    while let Some(line) = rx.recv().await {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["wait", name, n] => {
                let n: usize = n.parse().expect("wait <name> <n>");
                wait(&client, name, n).await;
            }
            ["exit"] => break,
            _ => say(&format!("error unknown command {line}")),
        }
    }
    client.shutdown();
}

/// Starts `n` waiters on `name`; answers `queued` when all have asked, and `done ...`
/// (from a task of its own) when all have had and released the lock.
async fn wait(client: &LockClient, name: &str, n: usize) {
    let asked = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let lock = client.lock(name).expect("valid name");
            let asked = asked.clone();
            tokio::spawn(async move {
                asked.fetch_add(1, Ordering::Relaxed);
                let guard = lock.acquire().await.expect("hand-off waiter acquire");
                let acq = mono_ns();
                let rel = mono_ns();
                guard.unlock().await.expect("hand-off waiter unlock");
                (acq, rel)
            })
        })
        .collect();
    while asked.load(Ordering::Relaxed) < n {
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
    say("queued");
    tokio::spawn(async move {
        let mut line = String::from("done");
        for task in tasks {
            let (acq, rel) = task.await.expect("hand-off waiter task");
            line.push_str(&format!(" {acq}:{rel}"));
        }
        say(&line);
    });
}

/// The benchmark's end of one waiter process.
pub(crate) struct WaiterProcess {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl WaiterProcess {
    pub(crate) async fn start(url: &str) -> WaiterProcess {
        let exe = std::env::current_exe().expect("this program's path");
        let mut command = Command::new(exe);
        command
            .arg(WAITER_FLAG)
            .arg(url)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true);
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = command.spawn().expect("start a hand-off waiter process");
        let stdin = child.stdin.take().expect("piped stdin");
        let lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let mut process = WaiterProcess {
            child,
            stdin,
            lines,
        };
        let ready = process.answer().await;
        assert_eq!(ready, "ready", "waiter process said {ready}");
        process
    }

    pub(crate) async fn send(&mut self, command: &str) {
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await
            .expect("write to a waiter process");
        self.stdin.flush().await.expect("flush to a waiter process");
    }

    pub(crate) async fn answer(&mut self) -> String {
        tokio::time::timeout(ANSWER_TIMEOUT, self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("a waiter process did not answer in {ANSWER_TIMEOUT:?}"))
            .expect("read from a waiter process")
            .expect("a waiter process exited")
    }

    /// The `(acq, rel)` pairs of a `done` answer.
    pub(crate) async fn done(&mut self) -> Vec<(u64, u64)> {
        let line = self.answer().await;
        let rest = line
            .strip_prefix("done")
            .unwrap_or_else(|| panic!("a waiter process said {line}"));
        rest.split_whitespace()
            .map(|pair| {
                let (a, r) = pair.split_once(':').expect("acq:rel");
                (a.parse().expect("acq ns"), r.parse().expect("rel ns"))
            })
            .collect()
    }

    /// Asks the process to exit; kills it if it does not within 10 s.
    pub(crate) async fn exit(mut self) {
        let _ = self.stdin.write_all(b"exit\n").await;
        let _ = self.stdin.flush().await;
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.start_kill();
            let _ = self.child.wait().await;
        }
    }
}
