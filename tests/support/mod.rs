//! Support code shared by the integration tests: the crate `support` (a dev-dependency of the
//! facade, compiled once and linked into every test binary).
//!
//! Every test gets its own throw-away `redis-server` process on a free loopback port, so
//! tests never touch a shared Redis (in particular not the one on port 6379) and can stop,
//! pause (SIGSTOP), resume and restart the server they talk to.
//!
//! Dependencies: std, tokio (via the redis async API), redis, libc, and the crate under
//! test for the checks that read a client's state.
#![allow(dead_code)]
mod cargo_env;
pub mod clients;
pub mod faults;
pub mod history;
pub mod holder;
pub mod impair;
pub mod java_peer;
pub mod kinds;
pub mod logs;
pub mod nemesis;
pub mod nemesis_java;
pub mod nemesis_topology;
pub mod netns;
pub mod permits;
pub mod proxy;
pub mod slot_monitor;
#[cfg(feature = "tls")]
pub mod tls;
pub mod topology;

#[allow(unused_imports)] // each test file uses some of them
pub use clients::{client, client_at, client_with, cluster_client, sentinel_client};

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long to wait for a freshly started server to answer PING.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long to wait for a killed server's port to become free again.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// How many free ports to try before giving up in [`RedisServer::start`].
const START_ATTEMPTS: usize = 5;
/// How many times [`RedisServer::restart`] retries binding the same port.
const RESTART_ATTEMPTS: usize = 5;

static DIR_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A private `redis-server` process on `127.0.0.1:<free port>`, killed on drop.
///
/// Persistence is off (`--save "" --appendonly no`), so every (re)start begins empty.
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    paused: bool,
    /// For a TLS-only server (`--port 0 --tls-port PORT`): its TLS arguments.
    tls_args: Option<Vec<String>>,
}

impl RedisServer {
    /// Starts a new server on a free loopback port and waits until it answers PING.
    ///
    /// Panics (with the server's log) if no server could be started.
    pub fn start() -> RedisServer {
        Self::start_with(None, |_| {})
    }

    /// Starts a TLS-only server (`--port 0 --tls-port PORT`) with `material`'s
    /// certificates; `auth_clients`: clients must present a certificate its CA signed.
    /// [`url`](Self::url) is then `rediss://`, and the helpers here talk TLS to it.
    #[cfg(feature = "tls")]
    pub fn start_tls(
        material: &std::sync::Arc<tls::TlsMaterial>,
        auth_clients: bool,
    ) -> RedisServer {
        // Each port tried is registered before its server starts: its start is seen
        // through TLS. One that failed is forgotten again in `start_with`.
        Self::start_with(Some(material.server_args(auth_clients)), |port| {
            tls::register(port, material)
        })
    }

    /// Starts a server on a free port (`tls_args`: TLS only, with these arguments), calling
    /// `before_spawn(port)` first for each port tried.
    fn start_with(tls_args: Option<Vec<String>>, before_spawn: impl Fn(u16)) -> RedisServer {
        let dir = fresh_temp_dir();
        let mut last_error = String::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            before_spawn(port);
            match spawn_and_wait(port, &dir, tls_args.as_deref()) {
                Ok(child) => {
                    return RedisServer {
                        port,
                        dir,
                        child: Some(child),
                        paused: false,
                        tls_args,
                    }
                }
                // Most likely someone grabbed the port between our probe and redis' bind.
                Err(e) => {
                    #[cfg(feature = "tls")]
                    tls::unregister(port);
                    last_error = e;
                }
            }
        }
        let _ = fs::remove_dir_all(&dir);
        panic!("could not start redis-server after {START_ATTEMPTS} attempts: {last_error}");
    }

    /// The loopback port the server listens on (stable across [`restart`](Self::restart)).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT/` (`rediss://` for a TLS server).
    pub fn url(&self) -> String {
        let scheme = if self.tls_args.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}/", self.port)
    }

    /// A `redis::Client` for this server (with the test CA and client certificate for a
    /// TLS server).
    pub fn client(&self) -> redis::Client {
        helper_client(self.port)
    }

    /// A fresh multiplexed async connection to this server.
    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        // The tests' own reads get a generous reply bound: on a loaded machine redis-rs's
        // default (half a second) fails a read, not the library under test.
        let config = redis::AsyncConnectionConfig::new()
            .set_response_timeout(Some(Duration::from_secs(10)))
            .set_connection_timeout(Some(Duration::from_secs(10)));
        self.client()
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap_or_else(|e| panic!("connect to test redis on port {}: {e}", self.port))
    }

    /// Makes this server a replica of `primary` and waits until the primary counts it
    /// online (the first full sync starts at once rather than after the default 5 s).
    pub async fn replicate(&self, primary: &RedisServer) {
        let mut conn = primary.conn().await;
        let () = redis::cmd("CONFIG")
            .arg(&["SET", "repl-diskless-sync-delay", "0"])
            .query_async(&mut conn)
            .await
            .unwrap();
        let mut conn = self.conn().await;
        let () = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(primary.port())
            .query_async(&mut conn)
            .await
            .unwrap();
        let port = self.port;
        eventually(
            "the replica is in sync",
            Duration::from_secs(20),
            || async {
                let mut conn = primary.conn().await;
                let info: String = redis::cmd("INFO")
                    .arg("replication")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                info.lines().any(|line| {
                    line.starts_with("slave")
                        && line.contains(&format!("port={port},"))
                        && line.contains("state=online")
                })
            },
        )
        .await;
    }

    /// Process id of the running server, if any.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether a server process is currently running (possibly paused).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Whether the server is currently paused with SIGSTOP.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Kills the server with SIGKILL, waits for the process to be gone and for its port
    /// to be free again. Does nothing if it is not running.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if self.paused {
            signal(&child, libc::SIGCONT);
            self.paused = false;
        }
        signal(&child, libc::SIGKILL);
        let _ = child.wait();
        let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
        while !port_is_free(self.port) {
            assert!(
                Instant::now() < deadline,
                "port {} still busy {SHUTDOWN_TIMEOUT:?} after killing redis-server",
                self.port
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the server (if running) and starts a new, empty one on the SAME port, then
    /// waits until it answers PING.
    pub fn restart(&mut self) {
        self.stop();
        let mut last_error = String::new();
        for attempt in 0..RESTART_ATTEMPTS {
            if attempt > 0 {
                thread::sleep(Duration::from_millis(200));
            }
            match spawn_and_wait(self.port, &self.dir, self.tls_args.as_deref()) {
                Ok(child) => {
                    self.child = Some(child);
                    self.paused = false;
                    return;
                }
                Err(e) => last_error = e,
            }
        }
        panic!(
            "could not restart redis-server on port {} after {RESTART_ATTEMPTS} attempts: {last_error}",
            self.port
        );
    }

    /// Freezes the server with SIGSTOP: connections stay open but nothing is answered.
    pub fn pause(&mut self) {
        let child = self
            .child
            .as_ref()
            .expect("pause(): redis-server is not running");
        signal(child, libc::SIGSTOP);
        self.paused = true;
    }

    /// Lets a paused server continue with SIGCONT.
    pub fn resume(&mut self) {
        let child = self
            .child
            .as_ref()
            .expect("resume(): redis-server is not running");
        signal(child, libc::SIGCONT);
        self.paused = false;
    }

    /// Number of calls of `cmd` since start or the last [`reset_stats`](Self::reset_stats),
    /// from `INFO commandstats` (`cmdstat_<cmd>:calls=N,...`); 0 if never called.
    ///
    /// `cmd` is matched case-insensitively; subcommands use Redis' `|` form, e.g.
    /// `"client|kill"`. Note that this helper's own connection and `INFO` call show up
    /// in the statistics too (`hello`/`client|setinfo`/`info`).
    pub async fn command_calls(&self, cmd: &str) -> u64 {
        let mut conn = self.conn().await;
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut conn)
            .await
            .expect("INFO commandstats");
        parse_command_calls(&info, cmd)
    }

    /// Lua script calls the server has run (`EVALSHA` and `EVAL`): every try, unlock and
    /// renewal of a lock is one.
    pub async fn script_calls(&self) -> u64 {
        self.command_calls("evalsha").await + self.command_calls("eval").await
    }

    /// Connected clients as Redis counts them, leaving out the probes' own connections (a
    /// probe connection dropped a moment ago may still be listed: each is named `probe`).
    pub async fn connections(&self) -> i64 {
        self.connection_ids().await.len() as i64
    }

    /// The ids (`CLIENT LIST`'s `id=`) of the connected clients, the probes' own left out as
    /// in [`connections`](Self::connections).
    pub async fn connection_ids(&self) -> std::collections::BTreeSet<u64> {
        let mut conn = self.conn().await;
        let () = redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg("probe")
            .query_async(&mut conn)
            .await
            .expect("CLIENT SETNAME");
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut conn)
            .await
            .expect("CLIENT LIST");
        list.lines()
            .filter(|line| !line.contains(" name=probe "))
            .filter_map(|line| line.strip_prefix("id=")?.split(' ').next()?.parse().ok())
            .collect()
    }

    /// All keys currently in the server (`KEYS *`), sorted.
    pub async fn keys(&self) -> Vec<String> {
        let mut conn = self.conn().await;
        let mut keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut conn)
            .await
            .expect("KEYS *");
        keys.sort();
        keys
    }

    /// Resets the command statistics (`CONFIG RESETSTAT`).
    pub async fn reset_stats(&self) {
        let mut conn = self.conn().await;
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut conn)
            .await
            .expect("CONFIG RESETSTAT");
    }

    /// The server's log (stdout/stderr of the current or last process).
    pub fn log(&self) -> String {
        fs::read_to_string(log_path(&self.dir)).unwrap_or_default()
    }

    /// Subscribers of `channel` (`PUBSUB NUMSUB`).
    pub async fn subscribers(&self, channel: &str) -> i64 {
        let mut conn = self.conn().await;
        let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query_async(&mut conn)
            .await
            .expect("PUBSUB NUMSUB");
        counts.first().map_or(0, |(_, n)| *n)
    }

    /// Waits (at most 10 s, then panics) until `channel` has at least `n` subscribers.
    pub async fn wait_for_subscribers(&self, channel: &str, n: i64) {
        eventually(
            "subscribers on the unlock channel",
            Duration::from_secs(10),
            || async { self.subscribers(channel).await >= n },
        )
        .await;
    }

    /// Waits (at most 10 s, then panics) until `waiters` waiters are parked: each has
    /// subscribed to `channel` and made its second try. Every refused try runs PTTL inside
    /// the acquire script, so this counts PTTL calls: only use it where nothing else sends
    /// PTTL. A parked waiter moves only on a wake-up or on its lease timer.
    pub async fn wait_until_parked(&self, channel: &str, waiters: i64) {
        eventually(
            "waiters parked on the unlock channel",
            Duration::from_secs(10),
            || async {
                self.subscribers(channel).await >= waiters
                    && self.command_calls("pttl").await as i64 >= 2 * waiters
            },
        )
        .await;
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if self.paused {
                signal(&child, libc::SIGCONT);
            }
            signal(&child, libc::SIGKILL);
            let _ = child.wait();
        }
        #[cfg(feature = "tls")]
        if self.tls_args.is_some() {
            tls::unregister(self.port);
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A `redis::Client` for the support's own questions to the server on `port`: TLS with the
/// test certificates where that server serves TLS only.
pub fn helper_client(port: u16) -> redis::Client {
    #[cfg(feature = "tls")]
    if let Some(client) = tls::client_for(port) {
        return client;
    }
    redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("valid redis url")
}

/// Whether the log at `path` says the server is ready (how a TLS-only server's start is
/// seen: the plain `INFO` probe cannot reach it). A Sentinel says its id instead.
fn log_says_ready(path: &Path) -> bool {
    fs::read_to_string(path).is_ok_and(|log| {
        log.contains("Ready to accept connections") || log.contains("Sentinel ID is")
    })
}

/// Whether the server on `port` serves TLS only.
pub fn is_tls_port(port: u16) -> bool {
    #[cfg(feature = "tls")]
    if tls::material_for(port).is_some() {
        return true;
    }
    let _ = port;
    false
}

/// Extracts `calls=N` of `cmdstat_<cmd>` from `INFO commandstats` output (0 if absent).
pub fn parse_command_calls(info: &str, cmd: &str) -> u64 {
    let wanted = format!("cmdstat_{}:", cmd.to_ascii_lowercase());
    info.lines()
        .map(str::trim)
        .find_map(|line| line.strip_prefix(wanted.as_str()))
        .and_then(|fields| {
            fields
                .split(',')
                .find_map(|field| field.strip_prefix("calls="))
                .and_then(|n| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

fn signal(child: &Child, sig: libc::c_int) {
    let pid = child.id() as libc::pid_t;
    // SAFETY: plain kill(2) on a pid we own and have not reaped yet.
    unsafe {
        libc::kill(pid, sig);
    }
}

fn fresh_temp_dir() -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = DIR_COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "adl-test-redis-{}-{n}-{nanos:x}",
        std::process::id()
    ));
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

fn log_path(dir: &Path) -> PathBuf {
    dir.join("redis.log")
}

/// Asks the OS for a free loopback port (bind to port 0, read it, release it).
fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr").port()
}

/// True if nothing listens on the port and it can be bound again.
fn port_is_free(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// Starts `redis-server` on `port` and waits until it answers PING.
/// On failure the process is killed and the error (with the log) returned.
///
/// With `tls_args`, the server serves TLS only (`--port 0 --tls-port PORT`), and logs at
/// `notice`, where it says when it is ready.
fn spawn_and_wait(port: u16, dir: &Path, tls_args: Option<&[String]>) -> Result<Child, String> {
    let (port_flag, loglevel) = match tls_args {
        Some(_) => ("--tls-port", "notice"),
        None => ("--port", "warning"),
    };
    let mut args: Vec<String> = [port_flag, &port.to_string(), "--bind", "127.0.0.1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if let Some(tls_args) = tls_args {
        args.extend(["--port".to_string(), "0".to_string()]);
        args.extend(tls_args.iter().cloned());
    }
    for (flag, value) in [
        ("--save", ""),
        ("--appendonly", "no"),
        ("--daemonize", "no"),
        ("--loglevel", loglevel),
    ] {
        args.extend([flag.to_string(), value.to_string()]);
    }
    args.extend(["--dir".to_string(), dir.to_string_lossy().into_owned()]);
    spawn_with_args(port, dir, &args)
}

/// The server the tests run against: `LOCK_TEST_SERVER=valkey` picks Valkey
/// (`valkey-server`, `valkey-cli`); unset or `redis`, Redis. Anything else is refused, so a
/// typo does not quietly test Redis.
pub fn test_server() -> TestServer {
    match std::env::var("LOCK_TEST_SERVER").as_deref() {
        Err(_) | Ok("") | Ok("redis") => TestServer::Redis,
        Ok("valkey") => TestServer::Valkey,
        Ok(other) => panic!("LOCK_TEST_SERVER={other:?}: expected `redis` or `valkey`"),
    }
}

/// A server the suites run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestServer {
    Redis,
    Valkey,
}

impl TestServer {
    /// Its server program (data nodes and, with `--sentinel`, Sentinels).
    pub fn server_binary(self) -> &'static str {
        match self {
            TestServer::Redis => "redis-server",
            TestServer::Valkey => "valkey-server",
        }
    }

    /// Its command-line client.
    pub fn cli_binary(self) -> &'static str {
        match self {
            TestServer::Redis => "redis-cli",
            TestServer::Valkey => "valkey-cli",
        }
    }

    /// The `server_name` its `INFO server` reports (Redis 7 reports none).
    pub fn info_name(self) -> Option<&'static str> {
        match self {
            TestServer::Redis => None,
            TestServer::Valkey => Some("valkey"),
        }
    }
}

/// Starts `redis-server <args>` (output to `dir/redis.log`) and waits until the process
/// answers on `port`. On failure the process is killed and the error (with the log)
/// returned.
pub fn spawn_with_args(port: u16, dir: &Path, args: &[String]) -> Result<Child, String> {
    let log_path = log_path(dir);
    let log = File::create(&log_path).map_err(|e| format!("create log file: {e}"))?;
    let log_err = log
        .try_clone()
        .map_err(|e| format!("clone log file: {e}"))?;
    let server = test_server().server_binary();
    let mut child = Command::new(server)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|e| format!("spawn {server} (is it installed? scripts/test installs it): {e}"))?;
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "redis-server on port {port} exited with {status}; log:\n{}",
                fs::read_to_string(&log_path).unwrap_or_default()
            ));
        }
        if is_tls_port(port) {
            // Our own process's log: no other server can answer for it.
            if log_says_ready(&log_path) {
                return Ok(child);
            }
        } else {
            match server_pid(port) {
                Some(pid) if pid == child.id() => return Ok(child),
                Some(other) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "port {port} is served by another redis-server (pid {other})"
                    ));
                }
                None => {}
            }
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "redis-server on port {port} did not answer within {STARTUP_TIMEOUT:?}; log:\n{}",
                fs::read_to_string(&log_path).unwrap_or_default()
            ));
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// The pid of the redis-server answering on `port` (from `INFO server`), if one answers.
/// Comparing it with our child's pid tells our server from another test's on the same port.
fn server_pid(port: u16) -> Option<u32> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    stream
        .set_write_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    stream.write_all(b"INFO server\r\n").ok()?;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    while reply.len() < 64 * 1024 {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        reply.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&reply);
        if let Some(start) = text.find("process_id:") {
            let rest = &text[start + "process_id:".len()..];
            // Only a complete line: a chunk may end in the middle of the number.
            if let Some(end) = rest.find("\r\n") {
                return rest[..end].trim().parse().ok();
            }
        }
    }
    None
}

/// Waits until `cond` holds, checking every 5 ms; panics naming `what` after `limit`.
pub async fn eventually<F, Fut>(what: &str, limit: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + limit;
    while !cond().await {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The `lock_holder` example binary, built (once per test process) if need be.
pub fn lock_holder_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| example_binary("lock_holder"))
}

/// The `lock_worker` example binary (the nemesis suite's worker), built if need be.
pub fn lock_worker_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| example_binary("lock_worker"))
}

/// The `exit_after` example binary (a short program that closes its client and exits),
/// built if need be.
pub fn exit_after_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| example_binary("exit_after"))
}

/// The facade's features that this test binary was built with, as `--features` names them,
/// and whether that is every one of them.
// The benchmark (package lock-actors, which has no `inspector` or `cli`) shares this file.
#[allow(unexpected_cfgs)]
fn facade_features() -> (Vec<&'static str>, bool) {
    let all = [
        ("actix-distributed-lock/web", cfg!(feature = "web")),
        ("actix-distributed-lock/tls", cfg!(feature = "tls")),
        ("actix-distributed-lock/metrics", cfg!(feature = "metrics")),
        (
            "actix-distributed-lock/inspector",
            cfg!(feature = "inspector"),
        ),
        ("actix-distributed-lock/cli", cfg!(feature = "cli")),
    ];
    let on: Vec<_> = all
        .iter()
        .filter_map(|&(name, on)| on.then_some(name))
        .collect();
    let every = on.len() == all.len();
    (on, every)
}

/// The repository's root (the folder with the workspace's `Cargo.lock`), wherever the
/// support code is compiled from (its own crate, or a module of the benchmark or an example).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").is_file())
        .expect("the repository's Cargo.lock above the package")
        .to_path_buf()
}

/// Builds example `name` and returns its path.
///
/// Integration tests get no `CARGO_BIN_EXE_*` for examples; the example sits in the same
/// profile directory as this test's `deps/`. Cargo is asked to build it even when a binary is
/// there (a no-op when it is up to date), so a stale binary never stands in for the source.
fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lives in <target>/<profile>/deps/");
    let binary = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let mut build = Command::new(env!("CARGO"));
    cargo_env::without_test_env(&mut build);
    build
        .current_dir(repo_root())
        // `--workspace`: the features the whole-workspace test run resolved, so only the
        // example itself compiles (built for the facade alone, cargo would rebuild a dozen
        // dependencies with other features: minutes of both cores on a loaded machine).
        .args(["build", "--workspace", "--example", name]);
    // The facade features this test was built with (the support crate turns them all on, as
    // `scripts/test` does): other features would rebuild the crate and its dependencies.
    let (features, every) = facade_features();
    if every {
        build.arg("--all-features");
    } else {
        build.args(["--no-default-features", "--features", &features.join(",")]);
    }
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => {}
        Some(profile) => {
            build.args(["--profile", profile]);
        }
    }
    if let Some(target_dir) = profile_dir.parent() {
        build.arg("--target-dir").arg(target_dir);
    }
    let output = build
        .output()
        .unwrap_or_else(|e| panic!("run cargo build --example {name}: {e}"));
    assert!(
        output.status.success(),
        "cargo build --example {name} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        binary.is_file(),
        "cargo built the example but {} is missing",
        binary.display()
    );
    binary
}

/// After a storm of cancelled acquires on `client`: nothing is renewed any more (no watch
/// entry, and PEXPIRE stays flat for `watchdog`, three renew intervals) and no waiter or
/// lock actor is left.
pub async fn assert_nothing_renews_or_waits(
    server: &RedisServer,
    client: &actix_distributed_lock::LockClient,
    watchdog: Duration,
) {
    assert_eq!(client.watched_holds(), 0, "a renewal is still scheduled");
    let renewals = server.command_calls("pexpire").await;
    tokio::time::sleep(watchdog).await; // three renew intervals, to see none happen
    assert_eq!(
        server.command_calls("pexpire").await,
        renewals,
        "renewals still run"
    );
    eventually(
        "no waiter or lock actor is left",
        Duration::from_secs(5),
        || async { client.active_locks() == 0 },
    )
    .await;
}
