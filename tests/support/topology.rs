//! Real Redis topologies for integration tests, each process on a free loopback port with
//! its own temp dir, all killed (SIGKILL) and cleaned up on drop:
//!
//! * [`RedisCluster`]: a Redis Cluster of N primaries with M replicas each, created with
//!   `redis-cli --cluster create`; nodes can be killed, failovers awaited and slots
//!   migrated by hand.
//! * [`SentinelSetup`]: one primary, one replica and three Sentinels watching them; the
//!   primary can be killed and the Sentinels' failover awaited.
//!
//! Everything here is blocking (std processes and sockets, the sync `redis` API, a fresh
//! short-lived connection per question), so it works before, outside or inside any async
//! runtime. Waits poll every 20 ms with generous limits and never sleep a fixed time; on
//! failure they panic with what was last seen and the tail of every process' log. The long
//! waits have `_async` twins that sleep with tokio between polls, for tests whose client has
//! to keep running on a current-thread runtime in the meantime.
//!
//! Persistence is off everywhere (`--save "" --appendonly no`), and diskless replication
//! starts at once (`--repl-diskless-sync-delay 0`; the default 5 s delay would hold up every
//! replica's first sync).
#![allow(dead_code)]

use std::collections::{BTreeSet, HashMap};
use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::{free_port, fresh_temp_dir, parse_command_calls, port_is_free, signal};

/// Default `cluster-node-timeout` of [`RedisCluster::start`].
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(1000);
/// Sentinels' `down-after-milliseconds`.
pub const SENTINEL_DOWN_AFTER: Duration = Duration::from_millis(1000);
/// Sentinels' `failover-timeout`.
pub const SENTINEL_FAILOVER_TIMEOUT: Duration = Duration::from_millis(3000);

/// How long a freshly spawned process may take to answer.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How many ports to try per process before giving up.
const START_ATTEMPTS: usize = 5;
/// How long a whole topology may take to become healthy after its processes are up.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `redis-cli --cluster create` may run.
const CLUSTER_CREATE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long views may take to agree (gossip after a migration, a question mid-change).
const AGREE_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between two polls.
const POLL: Duration = Duration::from_millis(20);
/// Connect timeout of the helper's own connections.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Read/write timeout of the helper's own connections.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// `MIGRATE` timeout in milliseconds and batch size.
const MIGRATE_TIMEOUT_MS: &str = "10000";
const MIGRATE_BATCH: usize = 100;
/// Number of hash slots in a Redis Cluster.
const SLOTS: u32 = 16384;
/// Lines of each log shown in a panic message.
const LOG_TAIL_LINES: usize = 40;

// ---------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------

/// One `redis-server` process (data node or Sentinel), SIGKILLed on drop.
struct Process {
    /// "node", "primary", "replica", "sentinel", for logs.
    role: &'static str,
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    /// Stopped with SIGSTOP.
    paused: bool,
}

impl Process {
    /// Spawns a process in `dir` on a port from `pick_port`, with the arguments from
    /// `args(port, dir)`, and waits until it answers on that port. Retries with new ports
    /// when the port was taken (by another test) in between; panics after
    /// [`START_ATTEMPTS`] failures.
    fn start(
        role: &'static str,
        dir: PathBuf,
        pick_port: fn() -> u16,
        args: &dyn Fn(u16, &Path) -> Vec<String>,
    ) -> Process {
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let mut last_error = String::new();
        for _ in 0..START_ATTEMPTS {
            let port = pick_port();
            match super::spawn_with_args(port, &dir, &args(port, &dir)) {
                Ok(child) => {
                    return Process {
                        role,
                        port,
                        dir,
                        child: Some(child),
                        paused: false,
                    }
                }
                Err(e) => last_error = e,
            }
        }
        panic!(
            "could not start a {role} redis-server after {START_ATTEMPTS} attempts: {last_error}"
        );
    }

    fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Running and not paused: it can answer.
    fn is_reachable(&self) -> bool {
        self.is_running() && !self.paused
    }

    /// SIGKILL, and reap. Does nothing if already killed.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            if self.paused {
                signal(&child, libc::SIGCONT);
                self.paused = false;
            }
            signal(&child, libc::SIGKILL);
            let _ = child.wait();
        }
    }

    /// SIGSTOP: connections stay open, nothing is answered.
    fn pause(&mut self) {
        let child = self
            .child
            .as_ref()
            .unwrap_or_else(|| panic!("pause: the {} on port {} is killed", self.role, self.port));
        assert!(!self.paused, "pause: port {} is already paused", self.port);
        signal(child, libc::SIGSTOP);
        self.paused = true;
    }

    /// SIGCONT after [`pause`](Self::pause).
    fn resume(&mut self) {
        let child = self
            .child
            .as_ref()
            .unwrap_or_else(|| panic!("resume: the {} on port {} is killed", self.role, self.port));
        assert!(self.paused, "resume: port {} is not paused", self.port);
        signal(child, libc::SIGCONT);
        self.paused = false;
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default()
    }

    fn log_tail(&self) -> String {
        let log = self.log();
        // Every start warns about vm.overcommit_memory; it only hides the useful lines.
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| !l.contains("WARNING Memory overcommit"))
            .collect();
        let from = lines.len().saturating_sub(LOG_TAIL_LINES);
        let state = match (self.is_running(), self.paused) {
            (false, _) => ", killed",
            (true, true) => ", paused",
            (true, false) => "",
        };
        format!(
            "----- {} 127.0.0.1:{}{state} (last {} lines of {}) -----\n{}\n",
            self.role,
            self.port,
            lines.len() - from,
            self.dir.join("redis.log").display(),
            lines[from..].join("\n")
        )
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        // A TLS process's port (a no-op for a plain one): a later server may take it.
        #[cfg(feature = "tls")]
        super::tls::unregister(self.port);
    }
}

/// A free port whose cluster bus port (port + 10000) is free and valid too.
fn free_cluster_port() -> u16 {
    for _ in 0..1000 {
        let port = free_port();
        if port <= u16::MAX - 10000 && port_is_free(port + 10000) {
            return port;
        }
    }
    panic!("found no free port p with p + 10000 free too (cluster bus port)");
}

fn data_node_args(port: u16, dir: &Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
        "--loglevel",
        "notice",
        "--repl-diskless-sync-delay",
        "0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push("--dir".into());
    args.push(dir.display().to_string());
    args
}

// ---------------------------------------------------------------------------------------
// Talking to the servers
// ---------------------------------------------------------------------------------------

/// A command from its words.
fn command(args: &[&str]) -> redis::Cmd {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd
}

/// Sends one command to `127.0.0.1:port` on a fresh sync connection.
fn query_cmd<T: redis::FromRedisValue>(
    port: u16,
    cmd: &redis::Cmd,
    what: &str,
) -> Result<T, String> {
    let client = super::helper_client(port);
    let mut conn = client
        .get_connection_with_timeout(CONNECT_TIMEOUT)
        .map_err(|e| format!("connect to port {port}: {e}"))?;
    let _ = conn.set_read_timeout(Some(IO_TIMEOUT));
    let _ = conn.set_write_timeout(Some(IO_TIMEOUT));
    cmd.query(&mut conn)
        .map_err(|e| format!("{what} on port {port}: {e}"))
}

/// Sends the command made of `args` to `127.0.0.1:port` on a fresh sync connection.
fn query<T: redis::FromRedisValue>(port: u16, args: &[&str]) -> Result<T, String> {
    query_cmd(port, &command(args), &args.join(" "))
}

/// `field:value` lines of an `INFO` or `CLUSTER INFO` reply.
fn info_fields(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|line| line.trim().split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn info_field(port: u16, args: &[&str], field: &str) -> Result<String, String> {
    let text: String = query(port, args)?;
    info_fields(&text)
        .remove(field)
        .ok_or_else(|| format!("no {field} in {} of port {port}", args.join(" ")))
}

/// `role` from `INFO replication` ("master" or "slave").
fn role(port: u16) -> Result<String, String> {
    info_field(port, &["INFO", "replication"], "role")
}

/// Polls `step` every [`POLL`] until it returns `Ok`, for at most `limit`; returns the
/// last error after that.
fn poll<T>(limit: Duration, mut step: impl FnMut() -> Result<T, String>) -> Result<T, String> {
    let deadline = Instant::now() + limit;
    loop {
        match step() {
            Ok(value) => return Ok(value),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => thread::sleep(POLL),
        }
    }
}

/// [`poll`] sleeping with tokio between tries (each try itself is short and blocking).
async fn poll_async<T>(
    limit: Duration,
    mut step: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + limit;
    loop {
        match step() {
            Ok(value) => return Ok(value),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Redis Cluster
// ---------------------------------------------------------------------------------------

/// One line of `CLUSTER NODES`.
#[derive(Clone, Debug)]
struct NodeLine {
    id: String,
    port: u16,
    flags: Vec<String>,
    /// Id of the primary, for a replica.
    primary_id: Option<String>,
    /// Owned slot ranges, inclusive (importing/migrating entries left out).
    slots: Vec<(u16, u16)>,
}

impl NodeLine {
    fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
    fn is_primary(&self) -> bool {
        self.has_flag("master")
    }
    fn is_replica(&self) -> bool {
        self.has_flag("slave")
    }
    fn is_myself(&self) -> bool {
        self.has_flag("myself")
    }
    /// Flagged failing, not yet known, or without address.
    fn is_unhealthy(&self) -> bool {
        ["fail", "fail?", "handshake", "noaddr"]
            .iter()
            .any(|f| self.has_flag(f))
    }
    fn owns(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
    }
}

/// Parses `CLUSTER NODES`:
/// `<id> <ip:port@cport[,hostname]> <flags> <primary> <ping> <pong> <epoch> <link> <slot>...`
fn parse_cluster_nodes(text: &str) -> Result<Vec<NodeLine>, String> {
    let mut nodes = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() < 8 {
            return Err(format!("short CLUSTER NODES line: {line:?}"));
        }
        let addr = fields[1].split(['@', ',']).next().unwrap_or_default();
        let port = addr
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .ok_or_else(|| format!("bad address in CLUSTER NODES line: {line:?}"))?;
        let mut slots = Vec::new();
        for range in &fields[8..] {
            if range.starts_with('[') {
                continue; // [slot->-id] / [slot-<-id]: migration in progress
            }
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            match (a.parse(), b.parse()) {
                (Ok(a), Ok(b)) => slots.push((a, b)),
                _ => return Err(format!("bad slot range {range:?} in line: {line:?}")),
            }
        }
        nodes.push(NodeLine {
            id: fields[0].to_string(),
            port,
            flags: fields[2].split(',').map(str::to_string).collect(),
            primary_id: (fields[3] != "-").then(|| fields[3].to_string()),
            slots,
        });
    }
    Ok(nodes)
}

/// The cluster as seen by the node on `port` (`CLUSTER NODES`).
fn cluster_view(port: u16) -> Result<Vec<NodeLine>, String> {
    let text: String = query(port, &["CLUSTER", "NODES"])?;
    parse_cluster_nodes(&text).map_err(|e| format!("port {port}: {e}"))
}

/// A Redis Cluster of real `redis-server` processes on free loopback ports.
///
/// Nodes run with `--cluster-enabled yes`, their own `nodes.conf` and temp dir, and
/// `--cluster-node-timeout` (1 s unless given to [`start_with`](Self::start_with)). The
/// cluster is created with `redis-cli --cluster create ... --cluster-replicas N`; the
/// constructor returns once every node says `cluster_state:ok`, knows every node in its
/// role, and every replica's link to its primary is up. Every process is killed and every
/// temp dir removed on drop.
///
/// All methods are blocking; the ones that describe the cluster (`primary_*`,
/// `primary_for_key`, `keys_on_all`, ...) ask the live nodes afresh on every call.
pub struct RedisCluster {
    root: PathBuf,
    /// The nodes in start order: the primaries at creation first, then the replicas.
    nodes: Vec<Process>,
    primaries: usize,
    replicas_per_primary: usize,
    node_timeout: Duration,
    /// Node ids by port (they never change: nodes are never restarted).
    ids: HashMap<u16, String>,
    /// Slots each killed node owned when it was killed (empty for a replica).
    killed_slots: HashMap<u16, Vec<(u16, u16)>>,
    /// `redis-cli`'s TLS arguments for a TLS cluster (empty for a plain one).
    cli_tls_args: Vec<String>,
}

impl RedisCluster {
    /// Starts a cluster of `primaries` primaries with `replicas_per_primary` replicas each
    /// and a 1 s node timeout; see [`start_with`](Self::start_with).
    pub fn start(primaries: usize, replicas_per_primary: usize) -> RedisCluster {
        Self::start_with(primaries, replicas_per_primary, DEFAULT_NODE_TIMEOUT)
    }

    /// Starts a cluster with the given `cluster-node-timeout` (how long a node may be
    /// unreachable before it is failed over) and waits until it is healthy (at most 30 s
    /// after `redis-cli` is done, then panics with the nodes' logs).
    ///
    /// Redis Cluster needs at least 3 primaries (`redis-cli --cluster create` refuses fewer).
    pub fn start_with(
        primaries: usize,
        replicas_per_primary: usize,
        node_timeout: Duration,
    ) -> RedisCluster {
        Self::start_nodes(primaries, replicas_per_primary, node_timeout, None)
    }

    /// Starts a cluster whose nodes serve TLS only (`--port 0 --tls-port P`, with
    /// `--tls-cluster yes` and `--tls-replication yes`: the cluster bus and replication go
    /// over TLS too) with `material`'s certificates, clients not asked for one. Its
    /// [`urls`](Self::urls) are `rediss://`, and the helpers here talk TLS to it.
    #[cfg(feature = "tls")]
    pub fn start_tls(
        primaries: usize,
        replicas_per_primary: usize,
        material: &std::sync::Arc<super::tls::TlsMaterial>,
    ) -> RedisCluster {
        Self::start_nodes(
            primaries,
            replicas_per_primary,
            DEFAULT_NODE_TIMEOUT,
            Some(material),
        )
    }

    fn start_nodes(
        primaries: usize,
        replicas_per_primary: usize,
        node_timeout: Duration,
        #[cfg(feature = "tls")] tls: Option<&std::sync::Arc<super::tls::TlsMaterial>>,
        #[cfg(not(feature = "tls"))] tls: Option<std::convert::Infallible>,
    ) -> RedisCluster {
        assert!(
            primaries >= 3,
            "a Redis Cluster needs at least 3 primaries, not {primaries}"
        );
        let total = primaries * (1 + replicas_per_primary);
        let timeout_ms = node_timeout.as_millis().max(1).to_string();
        let mut cluster = RedisCluster {
            root: fresh_temp_dir(),
            nodes: Vec::with_capacity(total),
            primaries,
            replicas_per_primary,
            node_timeout,
            ids: HashMap::new(),
            killed_slots: HashMap::new(),
            cli_tls_args: Vec::new(),
        };
        #[cfg(feature = "tls")]
        if let Some(material) = tls {
            cluster.cli_tls_args = material.cli_args();
        }
        let args = |port: u16, dir: &Path| {
            let mut args = data_node_args(port, dir);
            #[cfg(feature = "tls")]
            if let Some(material) = tls {
                // Registered before the process starts: its start is seen through TLS.
                super::tls::register(port, material);
                tls_node_args(&mut args, port, material, true);
            }
            #[cfg(not(feature = "tls"))]
            let _ = tls;
            args.extend([
                "--cluster-enabled".to_string(),
                "yes".to_string(),
                "--cluster-config-file".to_string(),
                dir.join("nodes.conf").display().to_string(),
                "--cluster-node-timeout".to_string(),
                timeout_ms.clone(),
            ]);
            args
        };
        for i in 0..total {
            let dir = cluster.root.join(format!("node-{i}"));
            cluster
                .nodes
                .push(Process::start("node", dir, free_cluster_port, &args));
        }
        cluster.create();
        cluster.wait_until_healthy();
        cluster
    }

    /// `redis-cli --cluster create 127.0.0.1:p1 ... --cluster-replicas N --cluster-yes`,
    /// killed after [`CLUSTER_CREATE_TIMEOUT`].
    fn create(&mut self) {
        let out_path = self.root.join("redis-cli-create.log");
        let out = File::create(&out_path).expect("create redis-cli log file");
        let out_err = out.try_clone().expect("clone redis-cli log file");
        let mut cli = Command::new(super::test_server().cli_binary());
        cli.args(&self.cli_tls_args);
        cli.args(["--cluster", "create"]);
        for node in &self.nodes {
            cli.arg(format!("127.0.0.1:{}", node.port));
        }
        cli.args(["--cluster-replicas", &self.replicas_per_primary.to_string()])
            .arg("--cluster-yes")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(out_err);
        let mut child = cli
            .spawn()
            .unwrap_or_else(|e| panic!("spawn redis-cli (is it installed?): {e}"));
        let deadline = Instant::now() + CLUSTER_CREATE_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for redis-cli") {
                break Some(status);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            thread::sleep(POLL);
        };
        if status.is_some_and(|s| s.success()) {
            return;
        }
        let output = fs::read_to_string(&out_path).unwrap_or_default();
        let what = match status {
            Some(status) => format!("exited with {status}"),
            None => format!("did not finish within {CLUSTER_CREATE_TIMEOUT:?}"),
        };
        self.fail(&format!(
            "redis-cli --cluster create {what}; its output:\n{output}"
        ));
    }

    /// Waits until the new cluster is healthy, then records node ids and puts the
    /// primaries first in `nodes`.
    fn wait_until_healthy(&mut self) {
        let view = poll(CONVERGE_TIMEOUT, || self.healthy_view()).unwrap_or_else(|e| {
            self.fail(&format!(
                "cluster not healthy within {CONVERGE_TIMEOUT:?}: {e}"
            ))
        });
        for line in &view {
            self.ids.insert(line.port, line.id.clone());
        }
        let is_primary = |port: u16| view.iter().any(|l| l.port == port && l.is_primary());
        self.nodes.sort_by_key(|node| !is_primary(node.port));
    }

    /// Ok(one node's view) if every node is `cluster_state:ok` with all slots, sees all
    /// nodes in the expected roles and healthy, and every replica's link is up.
    fn healthy_view(&self) -> Result<Vec<NodeLine>, String> {
        let total = self.nodes.len();
        let mut first_view = None;
        for node in &self.nodes {
            let port = node.port;
            let info: String = query(port, &["CLUSTER", "INFO"])?;
            let info = info_fields(&info);
            let field = |name: &str| info.get(name).map(String::as_str).unwrap_or("?");
            if field("cluster_state") != "ok"
                || field("cluster_slots_ok") != SLOTS.to_string()
                || field("cluster_known_nodes") != total.to_string()
            {
                return Err(format!(
                    "port {port}: cluster_state:{} cluster_slots_ok:{} cluster_known_nodes:{}",
                    field("cluster_state"),
                    field("cluster_slots_ok"),
                    field("cluster_known_nodes")
                ));
            }
            let view = cluster_view(port)?;
            if let Some(bad) = view.iter().find(|l| l.is_unhealthy()) {
                return Err(format!("port {port} sees {}: {:?}", bad.port, bad.flags));
            }
            let primaries: Vec<&NodeLine> = view.iter().filter(|l| l.is_primary()).collect();
            if primaries.len() != self.primaries || primaries.iter().any(|p| p.slots.is_empty()) {
                return Err(format!(
                    "port {port} sees primaries {:?}, expected {} with slots",
                    primaries
                        .iter()
                        .map(|p| (p.port, p.slots.clone()))
                        .collect::<Vec<_>>(),
                    self.primaries
                ));
            }
            for primary in &primaries {
                let replicas = view
                    .iter()
                    .filter(|l| l.is_replica() && l.primary_id.as_ref() == Some(&primary.id))
                    .count();
                if replicas != self.replicas_per_primary {
                    return Err(format!(
                        "port {port} sees {replicas} replicas of {}, expected {}",
                        primary.port, self.replicas_per_primary
                    ));
                }
            }
            let me = view
                .iter()
                .find(|l| l.is_myself())
                .ok_or_else(|| format!("port {port}: no myself line in CLUSTER NODES"))?;
            if me.is_replica() {
                let link = info_field(port, &["INFO", "replication"], "master_link_status")?;
                if link != "up" {
                    return Err(format!("replica {port}: master_link_status:{link}"));
                }
            }
            first_view.get_or_insert(view);
        }
        first_view.ok_or_else(|| "no nodes".to_string())
    }

    /// `redis://127.0.0.1:PORT/` of every node started, in start order: the primaries at
    /// creation first, then the replicas. Killed nodes are included.
    pub fn urls(&self) -> Vec<String> {
        self.ports().into_iter().map(node_url).collect()
    }

    /// Ports of every node started, in the order of [`urls`](Self::urls).
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// `redis://127.0.0.1:PORT/` of the live nodes that are primaries now.
    pub fn primary_urls(&self) -> Vec<String> {
        self.primary_ports().into_iter().map(node_url).collect()
    }

    /// Ports of the live nodes that are primaries now (with slots, asked afresh), in the
    /// order of [`ports`](Self::ports).
    pub fn primary_ports(&self) -> Vec<u16> {
        let view = self.any_view();
        let live: BTreeSet<u16> = self.live_ports().into_iter().collect();
        self.ports()
            .into_iter()
            .filter(|port| {
                live.contains(port)
                    && view
                        .iter()
                        .any(|l| l.port == *port && l.is_primary() && !l.slots.is_empty())
            })
            .collect()
    }

    /// Ports of the nodes neither killed nor paused (the ones the helpers ask).
    pub fn live_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|n| n.is_reachable())
            .map(|n| n.port)
            .collect()
    }

    /// A cluster client seeded with every live node.
    pub fn client(&self) -> redis::cluster::ClusterClient {
        redis::cluster::ClusterClient::new(self.live_ports().into_iter().map(node_url))
            .expect("valid cluster urls")
    }

    /// The `cluster-node-timeout` the nodes run with.
    pub fn node_timeout(&self) -> Duration {
        self.node_timeout
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`).
    pub fn slot_for_key(&self, key: &str) -> u16 {
        let port = self.some_live_port();
        query::<u16>(port, &["CLUSTER", "KEYSLOT", key])
            .unwrap_or_else(|e| self.fail(&format!("CLUSTER KEYSLOT {key:?}: {e}")))
    }

    /// Port of the node serving `key`'s slot, as every live node agrees (asked afresh; if
    /// the views differ, e.g. right after a migration, waits up to 10 s for them to agree).
    pub fn primary_for_key(&self, key: &str) -> u16 {
        self.owner_of_slot(self.slot_for_key(key))
    }

    /// Port of the node serving `slot`, as every live node agrees (see
    /// [`primary_for_key`](Self::primary_for_key)).
    pub fn owner_of_slot(&self, slot: u16) -> u16 {
        poll(AGREE_TIMEOUT, || self.agreed_owner(slot)).unwrap_or_else(|e| {
            self.fail(&format!(
                "live nodes do not agree on the owner of slot {slot}: {e}"
            ))
        })
    }

    /// The owner of `slot` if every live node names the same one.
    fn agreed_owner(&self, slot: u16) -> Result<u16, String> {
        let mut owners = Vec::new();
        for port in self.live_ports() {
            let owner = cluster_view(port)?
                .into_iter()
                .find(|l| l.is_primary() && l.owns(slot))
                .map(|l| l.port);
            owners.push((port, owner));
        }
        match owners.first() {
            Some(&(_, Some(owner))) if owners.iter().all(|&(_, o)| o == Some(owner)) => Ok(owner),
            _ => Err(format!("(asked node, owner) pairs: {owners:?}")),
        }
    }

    /// Ports of the (not killed) replicas of the primary on `primary_port`, asked afresh,
    /// in the order of [`ports`](Self::ports).
    pub fn replicas_of(&self, primary_port: u16) -> Vec<u16> {
        let primary_id = self.id_of(primary_port);
        let view = self.any_view();
        self.nodes
            .iter()
            .filter(|n| n.is_running())
            .map(|n| n.port)
            .filter(|port| {
                view.iter().any(|l| {
                    l.port == *port
                        && l.is_replica()
                        && l.primary_id.as_deref() == Some(primary_id.as_str())
                })
            })
            .collect()
    }

    /// The port of a replica of the primary on `primary_port` (the first of
    /// [`replicas_of`](Self::replicas_of)); panics if it has none.
    pub fn replica_of(&self, primary_port: u16) -> u16 {
        *self
            .replicas_of(primary_port)
            .first()
            .unwrap_or_else(|| self.fail(&format!("{primary_port} has no replica")))
    }

    /// Freezes the node on `port` with SIGSTOP: its connections stay open but nothing is
    /// answered (and after the node timeout the others flag it failing). The helpers leave
    /// paused nodes out until [`resume_node`](Self::resume_node).
    pub fn pause_node(&mut self, port: u16) {
        self.node_mut(port).pause();
    }

    /// Lets a node paused with [`pause_node`](Self::pause_node) continue (SIGCONT).
    pub fn resume_node(&mut self, port: u16) {
        self.node_mut(port).resume();
    }

    fn node_mut(&mut self, port: u16) -> &mut Process {
        self.nodes
            .iter_mut()
            .find(|n| n.port == port)
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }

    /// Kills the node on `port` (also a paused one) with SIGKILL and reaps it. Remembers
    /// the slots it owned for [`wait_for_failover`](Self::wait_for_failover). Its log
    /// stays readable.
    pub fn kill_node(&mut self, port: u16) {
        let node = self
            .nodes
            .iter()
            .find(|n| n.port == port)
            .unwrap_or_else(|| panic!("kill_node: no node on port {port}"));
        assert!(
            node.is_running(),
            "kill_node: node {port} is already killed"
        );
        // Its own view if it can answer, else the others'.
        let view = if node.is_reachable() {
            cluster_view(port).unwrap_or_else(|e| self.fail(&format!("kill_node: {e}")))
        } else {
            self.any_view()
        };
        let slots = view
            .into_iter()
            .find(|l| l.port == port)
            .filter(NodeLine::is_primary)
            .map(|l| l.slots)
            .unwrap_or_default();
        self.node_mut(port).kill();
        self.killed_slots.insert(port, slots);
    }

    /// Waits (at most `timeout`, then panics with the logs) until the slots the killed
    /// primary on `dead_port` owned are served by one other live node that says it is a
    /// primary and `cluster_state:ok`, and every live node agrees on that and on
    /// `cluster_state:ok`. Returns the new owner's port.
    ///
    /// Blocks the thread; see [`wait_for_failover_async`](Self::wait_for_failover_async).
    pub fn wait_for_failover(&self, dead_port: u16, timeout: Duration) -> u16 {
        let slots = self.slots_of_killed(dead_port);
        poll(timeout, || self.failover_done(dead_port, &slots)).unwrap_or_else(|e| {
            self.fail(&format!(
                "no failover of {dead_port} within {timeout:?}; last seen: {e}"
            ))
        })
    }

    /// [`wait_for_failover`](Self::wait_for_failover) sleeping with tokio between polls,
    /// so other tasks on the same (current-thread) runtime keep running.
    pub async fn wait_for_failover_async(&self, dead_port: u16, timeout: Duration) -> u16 {
        let slots = self.slots_of_killed(dead_port);
        poll_async(timeout, || self.failover_done(dead_port, &slots))
            .await
            .unwrap_or_else(|e| {
                self.fail(&format!(
                    "no failover of {dead_port} within {timeout:?}; last seen: {e}"
                ))
            })
    }

    /// A graceful failover: `CLUSTER FAILOVER` on the replica on `replica_port`, which
    /// makes its primary stop writes, catches up with it and takes its slots over; the old
    /// primary becomes its replica. Waits (at most `timeout`, then panics with the logs)
    /// until every live node says `cluster_state:ok` and names the replica as the owner of
    /// those slots, and the replica answers `role:master`. Returns the old primary's port.
    pub fn failover_to(&self, replica_port: u16, timeout: Duration) -> u16 {
        let view = self.any_view();
        let primary = view
            .iter()
            .find(|l| l.port == replica_port && l.is_replica())
            .and_then(|r| r.primary_id.clone())
            .and_then(|id| view.iter().find(|l| l.id == id))
            .unwrap_or_else(|| self.fail(&format!("failover_to: {replica_port} is no replica")));
        let (old_port, slots) = (primary.port, primary.slots.clone());
        let () = query(replica_port, &["CLUSTER", "FAILOVER"])
            .unwrap_or_else(|e| self.fail(&format!("CLUSTER FAILOVER on {replica_port}: {e}")));
        poll(timeout, || match self.failover_done(old_port, &slots)? {
            owner if owner == replica_port => Ok(()),
            owner => Err(format!("the slots went to {owner}, not {replica_port}")),
        })
        .unwrap_or_else(|e| {
            self.fail(&format!(
                "no failover of {old_port} to {replica_port} within {timeout:?}; last seen: {e}"
            ))
        });
        old_port
    }

    /// Starts one more node (plain, no TLS), joins it to the cluster (`CLUSTER MEET`) and
    /// makes it a replica of the primary on `primary_port` (`CLUSTER REPLICATE`). Returns
    /// its port once its link to the primary is up and every live node sees it as that
    /// primary's replica (at most 30 s, then panics with the logs).
    pub fn add_replica(&mut self, primary_port: u16) -> u16 {
        let primary_id = self.id_of(primary_port);
        let timeout_ms = self.node_timeout.as_millis().max(1).to_string();
        let args = |port: u16, dir: &Path| {
            let mut args = data_node_args(port, dir);
            args.extend([
                "--cluster-enabled".to_string(),
                "yes".to_string(),
                "--cluster-config-file".to_string(),
                dir.join("nodes.conf").display().to_string(),
                "--cluster-node-timeout".to_string(),
                timeout_ms.clone(),
            ]);
            args
        };
        let dir = self.root.join(format!("node-{}", self.nodes.len()));
        let node = Process::start("node", dir, free_cluster_port, &args);
        let port = node.port;
        self.nodes.push(node);
        let id: String = query(port, &["CLUSTER", "MYID"])
            .unwrap_or_else(|e| self.fail(&format!("CLUSTER MYID on {port}: {e}")));
        self.ids.insert(port, id.clone());
        let () = query(
            port,
            &["CLUSTER", "MEET", "127.0.0.1", &primary_port.to_string()],
        )
        .unwrap_or_else(|e| self.fail(&format!("CLUSTER MEET from {port}: {e}")));
        // REPLICATE needs the primary known to the new node.
        poll(CONVERGE_TIMEOUT, || {
            let view = cluster_view(port)?;
            match view.iter().find(|l| l.id == primary_id) {
                Some(l) if l.is_primary() && !l.is_unhealthy() => Ok(()),
                other => Err(format!("{port} sees the primary as {other:?}")),
            }
        })
        .unwrap_or_else(|e| self.fail(&format!("new node {port} never met the cluster: {e}")));
        let () = query(port, &["CLUSTER", "REPLICATE", &primary_id])
            .unwrap_or_else(|e| self.fail(&format!("CLUSTER REPLICATE on {port}: {e}")));
        poll(CONVERGE_TIMEOUT, || {
            let link = info_field(port, &["INFO", "replication"], "master_link_status")?;
            if link != "up" {
                return Err(format!("replica {port}: master_link_status:{link}"));
            }
            for other in self.live_ports() {
                let view = cluster_view(other)?;
                let seen = view.iter().any(|l| {
                    l.id == id
                        && l.is_replica()
                        && !l.is_unhealthy()
                        && l.primary_id.as_deref() == Some(primary_id.as_str())
                });
                if !seen {
                    return Err(format!("{other} does not see {port} as a replica yet"));
                }
            }
            Ok(())
        })
        .unwrap_or_else(|e| self.fail(&format!("new replica {port} not in place: {e}")));
        port
    }

    fn slots_of_killed(&self, dead_port: u16) -> Vec<(u16, u16)> {
        let slots = self.killed_slots.get(&dead_port).unwrap_or_else(|| {
            panic!("wait_for_failover: node {dead_port} was not killed with kill_node")
        });
        assert!(
            !slots.is_empty(),
            "wait_for_failover: node {dead_port} owned no slots when it was killed (a replica?)"
        );
        slots.clone()
    }

    fn failover_done(&self, dead_port: u16, slots: &[(u16, u16)]) -> Result<u16, String> {
        let mut new_owner = None;
        for port in self.live_ports() {
            let state = info_field(port, &["CLUSTER", "INFO"], "cluster_state")?;
            if state != "ok" {
                return Err(format!("port {port}: cluster_state:{state}"));
            }
            let view = cluster_view(port)?;
            for &(first, last) in slots {
                let owners: BTreeSet<Option<u16>> = [first, last]
                    .iter()
                    .map(|&s| {
                        view.iter()
                            .find(|l| l.is_primary() && l.owns(s))
                            .map(|l| l.port)
                    })
                    .collect();
                let owner = match owners.iter().collect::<Vec<_>>().as_slice() {
                    [&Some(owner)] if owner != dead_port => owner,
                    _ => {
                        return Err(format!(
                            "port {port} sees slots {first}-{last} served by {owners:?}"
                        ))
                    }
                };
                match new_owner {
                    None => new_owner = Some(owner),
                    Some(o) if o == owner => {}
                    Some(o) => {
                        return Err(format!(
                            "new owners disagree: {o} and {owner} (port {port})"
                        ))
                    }
                }
            }
        }
        let owner = new_owner.ok_or_else(|| "no live node".to_string())?;
        let role = role(owner)?;
        if role != "master" {
            return Err(format!("new owner {owner} says role:{role}"));
        }
        Ok(owner)
    }

    /// Moves `slot` with all its keys to the primary on `to_port`, the way the Redis docs
    /// describe resharding: `CLUSTER SETSLOT slot IMPORTING <source>` on the target,
    /// `CLUSTER SETSLOT slot MIGRATING <target>` on the source, `MIGRATE ... KEYS` in
    /// batches of 100 until `CLUSTER GETKEYSINSLOT` is empty, then `CLUSTER SETSLOT slot
    /// NODE <target>` on the target, the source and every other primary. Returns once every
    /// live node sees `to_port` as the owner. Does nothing if it already owns the slot.
    pub fn migrate_slot(&self, slot: u16, to_port: u16) {
        let from_port = self.owner_of_slot(slot);
        if from_port == to_port {
            return;
        }
        if let Err(e) = self.try_migrate_slot(slot, from_port, to_port) {
            self.fail(&format!(
                "migrating slot {slot} from {from_port} to {to_port}: {e}"
            ));
        }
        poll(AGREE_TIMEOUT, || match self.agreed_owner(slot) {
            Ok(owner) if owner == to_port => Ok(()),
            Ok(owner) => Err(format!("owner is still {owner}")),
            Err(e) => Err(e),
        })
        .unwrap_or_else(|e| {
            self.fail(&format!(
                "slot {slot} migrated to {to_port}, but the nodes do not agree: {e}"
            ))
        });
    }

    fn try_migrate_slot(&self, slot: u16, from_port: u16, to_port: u16) -> Result<(), String> {
        let slot_s = slot.to_string();
        let from_id = self.id_of(from_port);
        let to_id = self.id_of(to_port);
        let to_role = role(to_port)?;
        if to_role != "master" {
            return Err(format!(
                "target {to_port} is not a primary (role:{to_role})"
            ));
        }
        let () = query(
            to_port,
            &["CLUSTER", "SETSLOT", &slot_s, "IMPORTING", &from_id],
        )?;
        let () = query(
            from_port,
            &["CLUSTER", "SETSLOT", &slot_s, "MIGRATING", &to_id],
        )?;
        let to_port_s = to_port.to_string();
        loop {
            let batch = MIGRATE_BATCH.to_string();
            let keys: Vec<Vec<u8>> =
                query(from_port, &["CLUSTER", "GETKEYSINSLOT", &slot_s, &batch])?;
            if keys.is_empty() {
                break;
            }
            let mut migrate = command(&[
                "MIGRATE",
                "127.0.0.1",
                &to_port_s,
                "",
                "0",
                MIGRATE_TIMEOUT_MS,
                "KEYS",
            ]);
            for key in &keys {
                migrate.arg(key.as_slice());
            }
            let _: String = query_cmd(from_port, &migrate, "MIGRATE ... KEYS")?;
        }
        // Target first (it stops importing), then the source (it stops migrating), then
        // everyone else, so no node redirects a client back to the source.
        let () = query(to_port, &["CLUSTER", "SETSLOT", &slot_s, "NODE", &to_id])?;
        let () = query(from_port, &["CLUSTER", "SETSLOT", &slot_s, "NODE", &to_id])?;
        for port in self.primary_ports() {
            if port != to_port && port != from_port {
                let () = query(port, &["CLUSTER", "SETSLOT", &slot_s, "NODE", &to_id])?;
            }
        }
        Ok(())
    }

    /// Every key on every live primary (`KEYS *`), sorted; a key on two primaries shows
    /// up twice.
    pub fn keys_on_all(&self) -> Vec<String> {
        let mut keys = Vec::new();
        for port in self.primary_ports() {
            let mut on_node: Vec<String> =
                query(port, &["KEYS", "*"]).unwrap_or_else(|e| self.fail(&format!("KEYS *: {e}")));
            keys.append(&mut on_node);
        }
        keys.sort();
        keys
    }

    /// Calls of `cmd` (as in [`RedisServer::command_calls`](super::RedisServer::command_calls),
    /// e.g. `"evalsha"`, `"client|kill"`) summed over the live primaries' `INFO
    /// commandstats`.
    ///
    /// Replicas are left out on purpose: they count every write their primary replicates
    /// to them, so summing them in would count writes twice. A replica promoted by a
    /// failover brings those replicated counts along; compare before/after values taken
    /// on the same topology. Killed nodes' counts are gone.
    pub fn command_calls_total(&self, cmd: &str) -> u64 {
        self.primary_ports()
            .into_iter()
            .map(|port| self.command_calls_on(port, cmd))
            .sum()
    }

    /// Calls of `cmd` on the node on `port` alone.
    pub fn command_calls_on(&self, port: u16, cmd: &str) -> u64 {
        let info: String = query(port, &["INFO", "commandstats"])
            .unwrap_or_else(|e| self.fail(&format!("INFO commandstats: {e}")));
        parse_command_calls(&info, cmd)
    }

    /// `CONFIG RESETSTAT` on every live node.
    pub fn reset_stats(&self) {
        for port in self.live_ports() {
            let () = query(port, &["CONFIG", "RESETSTAT"])
                .unwrap_or_else(|e| self.fail(&format!("CONFIG RESETSTAT: {e}")));
        }
    }

    /// Shard-channel subscribers of `channel` (`PUBSUB SHARDNUMSUB`) summed over the live
    /// nodes.
    pub fn sharded_subscribers(&self, channel: &str) -> i64 {
        self.live_ports()
            .into_iter()
            .map(|port| {
                let counts: Vec<(String, i64)> = query(port, &["PUBSUB", "SHARDNUMSUB", channel])
                    .unwrap_or_else(|e| self.fail(&format!("PUBSUB SHARDNUMSUB: {e}")));
                counts.first().map_or(0, |(_, n)| *n)
            })
            .sum()
    }

    /// Subscribers of `channel` on the live nodes, sharded (`PUBSUB SHARDNUMSUB`) and
    /// classic (`PUBSUB NUMSUB`, counted on the node that took each) alike.
    pub fn subscribers_anywhere(&self, channel: &str) -> i64 {
        let classic: i64 = self
            .live_ports()
            .into_iter()
            .map(|port| {
                let counts: Vec<(String, i64)> = query(port, &["PUBSUB", "NUMSUB", channel])
                    .unwrap_or_else(|e| self.fail(&format!("PUBSUB NUMSUB: {e}")));
                counts.first().map_or(0, |(_, n)| *n)
            })
            .sum();
        self.sharded_subscribers(channel) + classic
    }

    /// The log of the node on `port`.
    pub fn node_log(&self, port: u16) -> String {
        self.nodes
            .iter()
            .find(|n| n.port == port)
            .map(Process::log)
            .unwrap_or_else(|| panic!("node_log: no node on port {port}"))
    }

    /// The last lines of every node's log (and of `redis-cli`'s output), for messages.
    pub fn logs(&self) -> String {
        let mut text: String = self.nodes.iter().map(Process::log_tail).collect();
        if let Ok(cli) = fs::read_to_string(self.root.join("redis-cli-create.log")) {
            text.push_str("----- redis-cli --cluster create -----\n");
            text.push_str(&strip_ansi(&cli));
        }
        text
    }

    fn id_of(&self, port: u16) -> String {
        self.ids
            .get(&port)
            .cloned()
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }

    fn some_live_port(&self) -> u16 {
        *self
            .live_ports()
            .first()
            .unwrap_or_else(|| panic!("every cluster node is killed"))
    }

    /// The cluster as seen by the first live node that answers.
    fn any_view(&self) -> Vec<NodeLine> {
        let mut errors = Vec::new();
        for port in self.live_ports() {
            match cluster_view(port) {
                Ok(view) => return view,
                Err(e) => errors.push(e),
            }
        }
        self.fail(&format!("no live node answers CLUSTER NODES: {errors:?}"))
    }

    fn fail(&self, message: &str) -> ! {
        panic!("RedisCluster: {message}\n{}", self.logs())
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        self.nodes.clear(); // SIGKILLs every node
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// `text` without ANSI colour sequences (`ESC [ ... m`), which redis-cli writes even to
/// a file.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `redis://127.0.0.1:PORT/`, or `rediss://` for a TLS node.
fn node_url(port: u16) -> String {
    let scheme = if super::is_tls_port(port) {
        "rediss"
    } else {
        "redis"
    };
    format!("{scheme}://127.0.0.1:{port}/")
}

/// Turns a data node's arguments into a TLS-only node's: `--port 0 --tls-port PORT`, the
/// certificates, and TLS for replication and (`cluster`) the cluster bus.
#[cfg(feature = "tls")]
fn tls_node_args(
    args: &mut Vec<String>,
    port: u16,
    material: &super::tls::TlsMaterial,
    cluster: bool,
) {
    let at = args
        .iter()
        .position(|a| a == "--port")
        .expect("data node args have --port");
    args[at + 1] = "0".to_string();
    args.extend(["--tls-port".to_string(), port.to_string()]);
    args.extend(material.server_args(false));
    args.extend(["--tls-replication".to_string(), "yes".to_string()]);
    if cluster {
        args.extend(["--tls-cluster".to_string(), "yes".to_string()]);
    }
}

// ---------------------------------------------------------------------------------------
// Sentinel
// ---------------------------------------------------------------------------------------

/// The name the Sentinels monitor the primary under.
const MASTER_NAME: &str = "adl-test-primary";
const SENTINELS: usize = 3;
const QUORUM: usize = 2;

/// One primary, one replica (`--replicaof`) and three Sentinels (`redis-server <conf>
/// --sentinel`, quorum 2, `down-after-milliseconds` 1000, `failover-timeout` 3000), each on
/// a free loopback port with its own temp dir.
///
/// [`start`](Self::start) returns once every Sentinel knows the primary, the replica and
/// the two other Sentinels, and the replica's link is up. Every process is killed and
/// every temp dir removed on drop. All methods are blocking.
pub struct SentinelSetup {
    root: PathBuf,
    /// The primary and the replica at start, in that order.
    data: Vec<Process>,
    sentinels: Vec<Process>,
}

/// `SENTINEL REPLICAS/SENTINELS` entry: field → value.
type SentinelEntry = HashMap<String, String>;

fn entry_port(entry: &SentinelEntry) -> Option<u16> {
    entry.get("port").and_then(|p| p.parse().ok())
}

/// An entry the Sentinel currently considers reachable.
fn entry_healthy(entry: &SentinelEntry) -> bool {
    let flags = entry.get("flags").map(String::as_str).unwrap_or("");
    !flags
        .split(',')
        .any(|f| matches!(f, "s_down" | "o_down" | "disconnected"))
}

impl SentinelSetup {
    /// Starts the primary, the replica and the Sentinels and waits until they know each
    /// other (at most 30 s, then panics with every log).
    pub fn start() -> SentinelSetup {
        Self::start_processes(None)
    }

    /// Starts the setup with every process serving TLS only (`port 0`, `tls-port P`),
    /// `material`'s certificates, clients not asked for one; replication and the Sentinels'
    /// connections to the data nodes go over TLS too (`tls-replication yes`). Its URLs are
    /// `rediss://`, and the helpers here talk TLS to it.
    #[cfg(feature = "tls")]
    pub fn start_tls(material: &std::sync::Arc<super::tls::TlsMaterial>) -> SentinelSetup {
        Self::start_processes(Some(material))
    }

    fn start_processes(
        #[cfg(feature = "tls")] tls: Option<&std::sync::Arc<super::tls::TlsMaterial>>,
        #[cfg(not(feature = "tls"))] tls: Option<std::convert::Infallible>,
    ) -> SentinelSetup {
        let mut setup = SentinelSetup {
            root: fresh_temp_dir(),
            data: Vec::with_capacity(2),
            sentinels: Vec::with_capacity(SENTINELS),
        };
        // A data node's arguments; for TLS, its port registered before it starts (its start
        // is seen through TLS).
        let node_args = |port: u16, dir: &Path| {
            #[allow(unused_mut)]
            let mut args = data_node_args(port, dir);
            #[cfg(feature = "tls")]
            if let Some(material) = tls {
                super::tls::register(port, material);
                tls_node_args(&mut args, port, material, false);
            }
            #[cfg(not(feature = "tls"))]
            let _ = tls;
            args
        };
        setup.data.push(Process::start(
            "primary",
            setup.root.join("primary"),
            free_port,
            &node_args,
        ));
        let primary = setup.data[0].port;
        let replica_args = |port: u16, dir: &Path| {
            let mut args = node_args(port, dir);
            args.extend(["--replicaof".to_string(), "127.0.0.1".to_string()]);
            args.push(primary.to_string());
            args
        };
        setup.data.push(Process::start(
            "replica",
            setup.root.join("replica"),
            free_port,
            &replica_args,
        ));
        let replica = setup.data[1].port;
        // Sentinels find replicas in the primary's INFO, which they ask for at once and then
        // every 10 s: start them when the replica is already there, to be found at once.
        poll(CONVERGE_TIMEOUT, || setup.replica_link_up(primary, replica))
            .unwrap_or_else(|e| setup.fail(&format!("replica never synced: {e}")));
        for i in 0..SENTINELS {
            let args = |port: u16, dir: &Path| {
                let conf = dir.join("sentinel.conf");
                #[allow(unused_mut)]
                let mut port_lines = format!("port {port}\n");
                #[cfg(feature = "tls")]
                if let Some(material) = tls {
                    super::tls::register(port, material);
                    port_lines = format!("port 0\ntls-port {port}\ntls-replication yes\n");
                    for pair in material.server_args(false).chunks(2) {
                        let key = pair[0].trim_start_matches("--");
                        port_lines.push_str(&format!("{key} {}\n", pair[1]));
                    }
                }
                let text = format!(
                    "{port_lines}\
                     bind 127.0.0.1\n\
                     daemonize no\n\
                     dir {dir}\n\
                     sentinel monitor {MASTER_NAME} 127.0.0.1 {primary} {QUORUM}\n\
                     sentinel down-after-milliseconds {MASTER_NAME} {down}\n\
                     sentinel failover-timeout {MASTER_NAME} {failover}\n\
                     sentinel parallel-syncs {MASTER_NAME} 1\n",
                    dir = dir.display(),
                    down = SENTINEL_DOWN_AFTER.as_millis(),
                    failover = SENTINEL_FAILOVER_TIMEOUT.as_millis(),
                );
                fs::write(&conf, text).unwrap_or_else(|e| panic!("write {}: {e}", conf.display()));
                vec![conf.display().to_string(), "--sentinel".to_string()]
            };
            let dir = setup.root.join(format!("sentinel-{i}"));
            setup
                .sentinels
                .push(Process::start("sentinel", dir, free_port, &args));
        }
        poll(CONVERGE_TIMEOUT, || setup.sentinels_ready(primary, replica)).unwrap_or_else(|e| {
            setup.fail(&format!(
                "sentinels did not find each other within {CONVERGE_TIMEOUT:?}: {e}"
            ))
        });
        setup
    }

    fn replica_link_up(&self, primary: u16, replica: u16) -> Result<(), String> {
        let link = info_field(replica, &["INFO", "replication"], "master_link_status")?;
        if link != "up" {
            return Err(format!("replica {replica}: master_link_status:{link}"));
        }
        let slave0 = info_field(primary, &["INFO", "replication"], "slave0")?;
        if !slave0.contains("state=online") {
            return Err(format!("primary {primary}: slave0:{slave0}"));
        }
        Ok(())
    }

    fn sentinels_ready(&self, primary: u16, replica: u16) -> Result<(), String> {
        for sentinel in &self.sentinels {
            let port = sentinel.port;
            let addr = self.master_addr(port)?;
            if addr != primary {
                return Err(format!("sentinel {port} names primary {addr}"));
            }
            let replicas: Vec<SentinelEntry> = query(port, &["SENTINEL", "REPLICAS", MASTER_NAME])?;
            if !replicas
                .iter()
                .any(|r| entry_port(r) == Some(replica) && entry_healthy(r))
            {
                return Err(format!("sentinel {port} knows replicas {replicas:?}"));
            }
            let others: Vec<SentinelEntry> = query(port, &["SENTINEL", "SENTINELS", MASTER_NAME])?;
            let healthy = others.iter().filter(|s| entry_healthy(s)).count();
            if healthy != SENTINELS - 1 {
                return Err(format!("sentinel {port} knows sentinels {others:?}"));
            }
        }
        Ok(())
    }

    /// The primary's port according to the Sentinel on `sentinel`.
    fn master_addr(&self, sentinel: u16) -> Result<u16, String> {
        let addr: Option<(String, String)> = query(
            sentinel,
            &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME],
        )?;
        let (_, port) = addr.ok_or_else(|| format!("sentinel {sentinel} knows no primary"))?;
        port.parse()
            .map_err(|e| format!("sentinel {sentinel}: bad port {port:?}: {e}"))
    }

    /// The name the Sentinels monitor the primary under (for `SentinelClient` & co.).
    pub fn master_name(&self) -> &str {
        MASTER_NAME
    }

    /// `redis://127.0.0.1:PORT/` of the three Sentinels.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinel_ports().into_iter().map(node_url).collect()
    }

    /// Ports of the three Sentinels.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|s| s.port).collect()
    }

    /// The current primary's port, asked of the Sentinels (`SENTINEL
    /// GET-MASTER-ADDR-BY-NAME`, first one that answers).
    pub fn primary_port(&self) -> u16 {
        let mut errors = Vec::new();
        for port in self.sentinel_ports() {
            match self.master_addr(port) {
                Ok(primary) => return primary,
                Err(e) => errors.push(e),
            }
        }
        self.fail(&format!("no sentinel names the primary: {errors:?}"))
    }

    /// `redis://127.0.0.1:PORT/` of the current primary.
    pub fn primary_url(&self) -> String {
        node_url(self.primary_port())
    }

    /// The port of a replica the Sentinels consider reachable (`SENTINEL REPLICAS`).
    /// Panics if there is none, e.g. after a failover whose old primary stays killed.
    pub fn replica_port(&self) -> u16 {
        let sentinel = self.sentinels[0].port;
        let replicas: Vec<SentinelEntry> = query(sentinel, &["SENTINEL", "REPLICAS", MASTER_NAME])
            .unwrap_or_else(|e| self.fail(&format!("SENTINEL REPLICAS: {e}")));
        replicas
            .iter()
            .filter(|r| entry_healthy(r))
            .find_map(entry_port)
            .unwrap_or_else(|| self.fail(&format!("no reachable replica: {replicas:?}")))
    }

    /// Ports of the primary and the replica as started (killed ones included).
    pub fn data_ports(&self) -> Vec<u16> {
        self.data.iter().map(|d| d.port).collect()
    }

    /// Freezes the current primary (as the Sentinels name it) with SIGSTOP: its connections
    /// stay open, nothing is answered; returns its port. Resume it before the Sentinels'
    /// `down-after-milliseconds` (1 s) to keep it the primary.
    pub fn pause_primary(&mut self) -> u16 {
        let primary = self.primary_port();
        self.data_node(primary).pause();
        primary
    }

    /// Lets the node on `port`, paused with [`pause_primary`](Self::pause_primary),
    /// continue (SIGCONT).
    pub fn resume(&mut self, port: u16) {
        self.data_node(port).resume();
    }

    fn data_node(&mut self, port: u16) -> &mut Process {
        self.data
            .iter_mut()
            .find(|d| d.port == port)
            .unwrap_or_else(|| panic!("no data node of ours on port {port}"))
    }

    /// SIGKILLs the current primary (as the Sentinels name it); returns its port.
    pub fn kill_primary(&mut self) -> u16 {
        let primary = self.primary_port();
        let node = self
            .data
            .iter_mut()
            .find(|d| d.port == primary)
            .unwrap_or_else(|| panic!("the sentinels' primary {primary} is none of ours"));
        assert!(node.is_running(), "primary {primary} is already killed");
        node.kill();
        primary
    }

    /// Waits (at most `timeout`, then panics with every log) until every Sentinel names
    /// the same primary other than `old_port`, and that node answers `role:master`.
    /// Returns its port.
    ///
    /// Blocks the thread; see [`wait_for_failover_async`](Self::wait_for_failover_async).
    pub fn wait_for_failover(&self, old_port: u16, timeout: Duration) -> u16 {
        poll(timeout, || self.failover_done(old_port)).unwrap_or_else(|e| {
            self.fail(&format!(
                "no failover away from {old_port} within {timeout:?}; last seen: {e}"
            ))
        })
    }

    /// [`wait_for_failover`](Self::wait_for_failover) sleeping with tokio between polls.
    pub async fn wait_for_failover_async(&self, old_port: u16, timeout: Duration) -> u16 {
        poll_async(timeout, || self.failover_done(old_port))
            .await
            .unwrap_or_else(|e| {
                self.fail(&format!(
                    "no failover away from {old_port} within {timeout:?}; last seen: {e}"
                ))
            })
    }

    fn failover_done(&self, old_port: u16) -> Result<u16, String> {
        let mut named = Vec::new();
        for sentinel in self.sentinels.iter().filter(|s| s.is_running()) {
            named.push(self.master_addr(sentinel.port)?);
        }
        match named.as_slice() {
            [first, rest @ ..] if *first != old_port && rest.iter().all(|p| p == first) => {
                let role = role(*first)?;
                if role == "master" {
                    Ok(*first)
                } else {
                    Err(format!("new primary {first} says role:{role}"))
                }
            }
            _ => Err(format!("sentinels name primaries {named:?}")),
        }
    }

    /// The last lines of every process' log, for messages.
    pub fn logs(&self) -> String {
        self.data
            .iter()
            .chain(&self.sentinels)
            .map(Process::log_tail)
            .collect()
    }

    fn fail(&self, message: &str) -> ! {
        panic!("SentinelSetup: {message}\n{}", self.logs())
    }
}

impl Drop for SentinelSetup {
    fn drop(&mut self) {
        self.sentinels.clear();
        self.data.clear();
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// Subscribes a raw connection to shard channel `channel` on the node on `port`
/// (`SSUBSCRIBE`, the node must serve the channel's slot) and returns it; the subscription
/// lasts until the stream is dropped. For tests of [`RedisCluster::sharded_subscribers`]
/// and of code that must not miss a subscriber.
pub fn raw_ssubscribe(port: u16, channel: &str) -> TcpStream {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
        .unwrap_or_else(|e| panic!("connect to {port}: {e}"));
    stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .expect("set_read_timeout");
    let request = format!(
        "*2\r\n$10\r\nSSUBSCRIBE\r\n${}\r\n{channel}\r\n",
        channel.len()
    );
    stream
        .write_all(request.as_bytes())
        .unwrap_or_else(|e| panic!("send SSUBSCRIBE to {port}: {e}"));
    // Reply: *3 $10 ssubscribe $<n> <channel> :1 — read until the count's line ends.
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while !(reply.ends_with(b"\r\n") && reply.iter().filter(|&&b| b == b'\n').count() >= 6) {
        match stream.read(&mut byte) {
            Ok(1) => reply.push(byte[0]),
            other => panic!(
                "SSUBSCRIBE {channel} on {port}: {other:?} after {:?}",
                String::from_utf8_lossy(&reply)
            ),
        }
        if reply.starts_with(b"-") && reply.ends_with(b"\r\n") {
            panic!(
                "SSUBSCRIBE {channel} on {port}: {}",
                String::from_utf8_lossy(&reply).trim()
            );
        }
    }
    stream
}
