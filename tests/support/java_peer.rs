//! The real Redisson as a test peer: `tests/redisson-peer` (a Maven project) built into one
//! runnable jar per Redisson version, and a [`JavaPeer`] process driven over its line
//! protocol (documented in `tests/redisson-peer/src/main/java/peer/Peer.java`).
//!
//! Each jar is built at most once per test binary (a `OnceLock`), and Maven runs only when
//! the jar is missing or older than the peer's sources; a file lock keeps test binaries that
//! run in parallel from building the same jar at once. When the jar cannot be built the
//! test fails with Maven's output: Java and Maven are requirements of the suite
//! (`scripts/test` installs them), never a reason to skip.
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::Notify;

#[path = "../redisson-peer/jar_freshness.rs"]
// Clippy counts one file included by two crates (bench and tests) as loaded twice.
#[allow(clippy::duplicate_mod)]
mod jar_freshness;
use jar_freshness::is_fresh;

/// How long a peer may take to start (JVM start, Redisson connecting, cluster discovery).
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Default bound for a reply that should come at once.
pub const PROMPT: Duration = Duration::from_secs(10);

/// The flags of every peer's JVM: a small, quick-starting one (the tests start many of them
/// on a busy machine).
const JVM_FLAGS: [&str; 4] = [
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xss512k",
    "-Xmx256m",
];

/// A released Redisson the suite runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redisson {
    /// The newest release on Maven Central (the pom's default `redisson.version`).
    Newest,
    /// The older 3.x line (the pom's profile `redisson-3.21`): before the unlock latch,
    /// classic pub/sub on clusters, the fair lock's wait time fixed per lock.
    Legacy,
}

impl Redisson {
    /// The Maven version, as the pom pins it.
    pub fn version(self) -> &'static str {
        match self {
            Redisson::Newest => "4.7.0",
            Redisson::Legacy => "3.21.3",
        }
    }

    fn profile(self) -> Option<&'static str> {
        match self {
            Redisson::Newest => None,
            Redisson::Legacy => Some("redisson-3.21"),
        }
    }

    /// The peer's runnable jar for this version, built if need be.
    pub fn jar(self) -> &'static Path {
        static NEWEST: OnceLock<PathBuf> = OnceLock::new();
        static LEGACY: OnceLock<PathBuf> = OnceLock::new();
        let cell = match self {
            Redisson::Newest => &NEWEST,
            Redisson::Legacy => &LEGACY,
        };
        cell.get_or_init(|| build_jar(self))
    }

    /// The JDK's class-data archive of the peer's classes as loaded up to its `ready` line,
    /// made once per jar: a JVM started from it maps those classes instead of loading them,
    /// about 0.4 s (and as much CPU) less per peer, of which the suite starts over a hundred.
    /// `None` when no archive could be made: the peers then start without one.
    async fn class_archive(self) -> Option<&'static Path> {
        static NEWEST: tokio::sync::OnceCell<Option<PathBuf>> = tokio::sync::OnceCell::const_new();
        static LEGACY: tokio::sync::OnceCell<Option<PathBuf>> = tokio::sync::OnceCell::const_new();
        let cell = match self {
            Redisson::Newest => &NEWEST,
            Redisson::Legacy => &LEGACY,
        };
        cell.get_or_init(|| make_class_archive(self.jar()))
            .await
            .as_deref()
    }
}

/// Whether `file` was written after `than` was.
fn newer(file: &Path, than: &Path) -> bool {
    let modified = |path: &Path| fs::metadata(path).and_then(|m| m.modified()).ok();
    matches!((modified(file), modified(than)), (Some(file), Some(than)) if file >= than)
}

/// Makes (or finds) the class-data archive next to `jar`: a peer started with
/// `-XX:ArchiveClassesAtExit` against a throw-away server writes it when it exits.
async fn make_class_archive(jar: &Path) -> Option<PathBuf> {
    let archive = jar.with_extension("jsa");
    if newer(&archive, jar) {
        return Some(archive);
    }
    // One test process makes it; the others wait (off the runtime's thread) and use it.
    let _lock = tokio::task::spawn_blocking(BuildLock::take).await.ok()?;
    if newer(&archive, jar) {
        return Some(archive);
    }
    let server = super::RedisServer::start();
    let partial = jar.with_extension(format!("jsa.{}", std::process::id()));
    let mut dump = Command::new("java")
        .arg(format!("-XX:ArchiveClassesAtExit={}", partial.display()))
        .args(JVM_FLAGS)
        .arg("-jar")
        .arg(jar)
        .args(["--single", server.url().trim_end_matches('/')])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .ok()?;
    // The peer reads it once its client is up, then exits, and the JVM writes the archive.
    let mut stdin = dump.stdin.take()?;
    let sent = stdin.write_all(b"exit\n").await;
    drop(stdin);
    let exited = tokio::time::timeout(START_TIMEOUT, dump.wait()).await;
    if sent.is_ok()
        && matches!(exited, Ok(Ok(status)) if status.success())
        && fs::rename(&partial, &archive).is_ok()
    {
        Some(archive)
    } else {
        let _ = fs::remove_file(&partial);
        None
    }
}

/// `tests/redisson-peer/target/.build.lock`, held: one test process builds the jars and
/// their archives while the others wait. (flock(2): `File::lock` is newer than the crate's
/// MSRV.) Dropping it unlocks.
struct BuildLock(File);

impl BuildLock {
    fn take() -> BuildLock {
        let dir = peer_dir().join("target");
        fs::create_dir_all(&dir).expect("create tests/redisson-peer/target");
        let file = File::create(dir.join(".build.lock")).expect("create the build lock");
        // SAFETY: the descriptor belongs to `file`, which the returned value owns.
        let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(locked, 0, "lock tests/redisson-peer/target/.build.lock");
        BuildLock(file)
    }
}

fn peer_dir() -> PathBuf {
    super::repo_root().join("tests/redisson-peer")
}

fn build_jar(version: Redisson) -> PathBuf {
    let dir = peer_dir();
    let jar = dir
        .join("target")
        .join(version.version())
        .join("redisson-peer.jar");
    if is_fresh(&jar, &dir) {
        return jar;
    }
    // Several test binaries may get here at once: one builds, the others wait and reuse.
    let lock = BuildLock::take();
    if !is_fresh(&jar, &dir) {
        let mut mvn = std::process::Command::new("mvn");
        mvn.current_dir(&dir)
            .args(["-B", "-q", "-Dstyle.color=never", "package"]);
        if let Some(profile) = version.profile() {
            mvn.args(["-P", profile]);
        }
        let output = mvn.output().unwrap_or_else(|e| {
            panic!(
                "cannot run `mvn` to build the Redisson peer ({e}); install Java and Maven \
                 (scripts/test does: apt-get install default-jdk-headless maven)"
            )
        });
        assert!(
            output.status.success(),
            "building the Redisson {} peer failed (mvn package in {}):\n{}\n{}",
            version.version(),
            dir.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            jar.is_file(),
            "mvn succeeded but {} is missing",
            jar.display()
        );
    }
    drop(lock);
    jar
}

/// Where the peer connects.
pub enum Target<'a> {
    /// One server: its URL.
    Single(&'a str),
    /// A cluster: its nodes' URLs.
    Cluster(&'a [String]),
}

/// Settings of one peer process.
pub struct PeerOptions {
    /// Redisson's `lockWatchdogTimeout`.
    pub watchdog: Option<Duration>,
    /// The fair lock's wait time (`fairLockWaitTimeout` in 4.x, per lock in 3.x).
    pub fair_wait: Option<Duration>,
    /// A `NameMapper` mapping every name to `<namespace>:<name>` (the Java side of
    /// `ClientConfig::namespace`).
    pub namespace: Option<String>,
    /// Redisson's command timeout and its resends of a timed-out command (attempts,
    /// interval); one server only.
    pub timeout: Option<Duration>,
    pub retries: Option<(u32, Duration)>,
}

impl PeerOptions {
    pub fn new() -> Self {
        PeerOptions {
            watchdog: None,
            fair_wait: None,
            namespace: None,
            timeout: None,
            retries: None,
        }
    }
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
    pub fn retries(mut self, attempts: u32, interval: Duration) -> Self {
        self.retries = Some((attempts, interval));
        self
    }
    pub fn watchdog(mut self, lease: Duration) -> Self {
        self.watchdog = Some(lease);
        self
    }
    pub fn fair_wait(mut self, wait: Duration) -> Self {
        self.fair_wait = Some(wait);
        self
    }
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_string());
        self
    }
}

impl Default for PeerOptions {
    fn default() -> Self {
        PeerOptions::new()
    }
}

#[derive(Default)]
struct Inbox {
    /// Replies not yet taken, per slot.
    replies: HashMap<String, VecDeque<String>>,
    /// Every line the peer printed, for failure messages.
    transcript: Vec<String>,
    closed: bool,
}

/// One running Redisson peer (a JVM), SIGKILLed on drop.
pub struct JavaPeer {
    child: Child,
    stdin: Option<ChildStdin>,
    inbox: Arc<(Mutex<Inbox>, Notify)>,
    /// Redisson's client id (`RedissonClient.getId()`), the first half of its owner fields.
    pub id: String,
    pub version: Redisson,
}

impl JavaPeer {
    /// Starts a peer and waits for its `ready` line.
    pub async fn start(version: Redisson, target: Target<'_>, options: PeerOptions) -> JavaPeer {
        let jar = version.jar();
        let mut command = Command::new("java");
        command.args(JVM_FLAGS);
        if let Some(archive) = version.class_archive().await {
            command.arg(format!("-XX:SharedArchiveFile={}", archive.display()));
        }
        command.arg("-jar").arg(jar);
        match target {
            Target::Single(url) => command.args(["--single", url.trim_end_matches('/')]),
            Target::Cluster(urls) => {
                let urls: Vec<&str> = urls.iter().map(|u| u.trim_end_matches('/')).collect();
                command.args(["--cluster", &urls.join(",")])
            }
        };
        if let Some(watchdog) = options.watchdog {
            command.args(["--watchdog-ms", &watchdog.as_millis().to_string()]);
        }
        if let Some(wait) = options.fair_wait {
            command.args(["--fair-wait-ms", &wait.as_millis().to_string()]);
        }
        if let Some(namespace) = &options.namespace {
            command.args(["--namespace", namespace]);
        }
        if let Some(timeout) = options.timeout {
            command.args(["--timeout-ms", &timeout.as_millis().to_string()]);
        }
        if let Some((attempts, interval)) = options.retries {
            command.args(["--retry-attempts", &attempts.to_string()]);
            command.args(["--retry-interval-ms", &interval.as_millis().to_string()]);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("start java (is a JDK installed?)");
        let stdout = child.stdout.take().expect("piped stdout");
        let inbox: Arc<(Mutex<Inbox>, Notify)> = Arc::default();
        let reader_inbox = inbox.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let (state, notify) = &*reader_inbox;
                let mut state = state.lock().unwrap();
                state.transcript.push(line.clone());
                let (slot, rest) = line.split_once(' ').unwrap_or((line.as_str(), ""));
                state
                    .replies
                    .entry(slot.to_string())
                    .or_default()
                    .push_back(rest.to_string());
                drop(state);
                notify.notify_waiters();
            }
            reader_inbox.0.lock().unwrap().closed = true;
            reader_inbox.1.notify_waiters();
        });
        let mut peer = JavaPeer {
            child,
            stdin: None,
            inbox,
            id: String::new(),
            version,
        };
        peer.stdin = peer.child.stdin.take();
        let ready = peer.reply_within("ready", START_TIMEOUT).await;
        let mut words = ready.split_whitespace();
        peer.id = words.next().expect("ready <id> <version>").to_string();
        assert_eq!(
            words.next(),
            Some(version.version()),
            "the peer jar runs another Redisson than expected"
        );
        peer
    }

    /// Sends one command line for `slot` without waiting for its reply.
    pub async fn send(&mut self, slot: &str, command: &str) {
        let stdin = self.stdin.as_mut().expect("the peer's stdin is open");
        stdin
            .write_all(format!("{slot} {command}\n").as_bytes())
            .await
            .expect("write to the peer");
        stdin.flush().await.expect("flush to the peer");
    }

    /// The next reply of `slot`, waiting up to `limit` (panics with the transcript after).
    pub async fn reply_within(&self, slot: &str, limit: Duration) -> String {
        self.try_reply_within(slot, limit).await.unwrap_or_else(|| {
            panic!(
                "no reply for slot `{slot}` within {limit:?}; the peer said:\n{}",
                self.transcript()
            )
        })
    }

    /// The next reply of `slot` if one comes within `limit`.
    pub async fn try_reply_within(&self, slot: &str, limit: Duration) -> Option<String> {
        let deadline = tokio::time::Instant::now() + limit;
        let (state, notify) = &*self.inbox;
        loop {
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = state.lock().unwrap();
                if let Some(reply) = state.replies.get_mut(slot).and_then(VecDeque::pop_front) {
                    return Some(reply);
                }
                if state.closed {
                    panic!(
                        "the peer exited while slot `{slot}` waited; it said:\n{}",
                        state.transcript.join("\n")
                    );
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }

    /// Whether `slot` has a reply waiting (without taking it).
    pub fn has_reply(&self, slot: &str) -> bool {
        let state = self.inbox.0.lock().unwrap();
        state.replies.get(slot).is_some_and(|q| !q.is_empty())
    }

    /// Sends a command and returns its reply (within [`PROMPT`]).
    pub async fn call(&mut self, slot: &str, command: &str) -> String {
        self.send(slot, command).await;
        self.reply_within(slot, PROMPT).await
    }

    /// Sends a command and asserts its reply.
    pub async fn expect(&mut self, slot: &str, command: &str, reply: &str) {
        let got = self.call(slot, command).await;
        assert_eq!(got, reply, "java `{slot} {command}`");
    }

    /// The owner field Redisson writes for `slot`'s thread (`<id>:<thread-id>`).
    pub async fn owner(&mut self, slot: &str) -> String {
        let reply = self.call(slot, "owner").await;
        reply
            .strip_prefix("owner ")
            .unwrap_or_else(|| panic!("owner reply: {reply}"))
            .to_string()
    }

    /// Everything the peer printed so far.
    pub fn transcript(&self) -> String {
        self.inbox.0.lock().unwrap().transcript.join("\n")
    }

    /// Kills the JVM with SIGKILL (no unlock, no more renewals) and waits for it to go.
    pub async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }

    /// Shuts the Redisson client down cleanly and waits for the process to exit.
    pub async fn exit(mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"exit\n").await;
            let _ = stdin.flush().await;
        }
        let deadline = Instant::now() + PROMPT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = self.child.start_kill();
    }
}
