//! The `lock_holder` example run as a child process: the "other process" of the tests. It
//! prints `acquired <client-id> <owner-id>`, prints `lost` when its `lost()` fires, and
//! answers a stdin line `unlock` with `unlock <result>`.

use super::RedisServer;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::time::{error::Elapsed, timeout};

/// Bound for the child to start, connect and acquire a free lock.
pub const STARTUP: Duration = Duration::from_secs(30);
/// Bound for a reply the child should give at once.
pub const REPLY: Duration = Duration::from_secs(10);

/// A `lock_holder` child process holding a lock; SIGKILLed and reaped on drop (panics too).
pub struct Holder {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    /// `<client-id>:<owner-id>`: the holder's field in the lock's hash.
    pub field: String,
}

impl Holder {
    /// Starts the child with `args` after the URL and lock name and waits for its
    /// `acquired` line.
    pub async fn start(server: &RedisServer, name: &str, args: &[&str]) -> Holder {
        let mut child = Command::new(super::lock_holder_binary())
            .arg(server.url())
            .arg(name)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn lock_holder");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::unbounded_channel();
        // A plain thread: it ends when the child's stdout closes, whatever the runtime does.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut holder = Holder {
            stdin: child.stdin.take(),
            child,
            lines,
            field: String::new(),
        };
        let line = holder.expect_line(STARTUP, "the `acquired` line").await;
        let ids: Vec<&str> = line
            .strip_prefix("acquired ")
            .unwrap_or_else(|| panic!("expected `acquired <client> <owner>`, got `{line}`"))
            .split(' ')
            .collect();
        let [client, owner] = ids[..] else {
            panic!("expected `acquired <client> <owner>`, got `{line}`");
        };
        holder.field = format!("{client}:{owner}");
        holder
    }

    /// The next stdout line: `Ok(None)` when stdout closed, `Err` when none came in `limit`.
    pub async fn next_line(&mut self, limit: Duration) -> Result<Option<String>, Elapsed> {
        timeout(limit, self.lines.recv()).await
    }

    /// The next stdout line, which must come within `limit`.
    pub async fn expect_line(&mut self, limit: Duration, what: &str) -> String {
        match self.next_line(limit).await {
            Ok(Some(line)) => line,
            Ok(None) => panic!("lock_holder exited before printing {what}"),
            Err(_) => panic!("lock_holder printed no line within {limit:?}; expected {what}"),
        }
    }

    pub fn send(&mut self, command: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{command}").expect("write to lock_holder's stdin");
        stdin.flush().expect("flush lock_holder's stdin");
    }

    pub fn signal(&self, signal: libc::c_int) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) on our own child, which has not been reaped (`wait` takes `self`
        // mutably and only `kill_and_reap`/`Drop`/`exited` call it).
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "kill({pid}, {signal}) failed");
    }

    /// SIGKILL, then reap: when this returns the process is gone.
    pub fn kill_and_reap(&mut self) {
        self.signal(libc::SIGKILL);
        self.child.wait().expect("reap lock_holder");
    }

    /// Waits (at most `limit`) for the child to exit by itself; returns whether it did.
    pub async fn exited(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.child.try_wait().expect("try_wait").is_some() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SIGKILL ends a stopped process too.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
