//! Network namespaces for the nemesis suite: one namespace for the Redis server, one per
//! client, each client joined to the server's namespace by its own veth pair, plus one veth
//! from the test's own (root) namespace to the server for the monitor and the final checks.
//!
//! ```text
//!   root ns (the test) ──veth── server ns (redis-server) ──veth── client ns 1 (worker)
//!                                                        ──veth── client ns 2 (worker)
//!                                                        ──veth── client ns 3 (worker)
//! ```
//!
//! Addresses: the client links are `192.168.77.(4i+1)` (server side) and `.(4i+2)` (client
//! side), `/30`, visible only inside those namespaces; the root link is a `/30` in
//! `10.213.0.0/16` chosen per run. No namespace has a default route, so nothing can leave.
//! A partition is `iptables -j DROP` on everything in and out of one client's namespace:
//! packets vanish silently, as on a real cut link.
//!
//! Names carry the test's pid (`nz<pid hex>n<counter>…`), so parallel test processes never
//! collide, and namespaces left by a test process that died are removed on the next start.
//! Everything is torn down on drop, including after a panic.
#![allow(dead_code)]

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

static COUNTER: AtomicU64 = AtomicU64::new(0);
/// Serialises the choice of the root-side subnet among this process' labs.
static ROOT_SUBNET: Mutex<()> = Mutex::new(());

/// Runs a command; `Err` carries its stderr.
pub fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `{program}`: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

fn must(program: &str, args: &[&str]) -> String {
    run(program, args).unwrap_or_else(|e| panic!("nemesis lab: {e}"))
}

/// Fails (never skips) with a message naming what is missing when namespaces cannot be made.
pub fn require_netns() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let mut missing = Vec::new();
    if euid != 0 {
        missing.push(format!(
            "root (running as uid {euid}; network namespaces need CAP_SYS_ADMIN)"
        ));
    }
    for (tool, package) in [("ip", "iproute2"), ("iptables", "iptables")] {
        if run(tool, &["-V"]).is_err() && run(tool, &["--version"]).is_err() {
            missing.push(format!("`{tool}` (Debian package {package})"));
        }
    }
    if missing.is_empty() {
        let probe = format!(
            "nz{:x}nprobe{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        match run("ip", &["netns", "add", &probe]) {
            Ok(_) => {
                let _ = run("ip", &["netns", "del", &probe]);
            }
            Err(e) => missing.push(format!("a working `ip netns add` ({e})")),
        }
    }
    assert!(
        missing.is_empty(),
        "the nemesis suite cannot run: missing {}. scripts/test installs iproute2 and \
         iptables; run it as root (CI does)",
        missing.join(", ")
    );
}

/// Removes namespaces left by test processes that no longer exist.
fn remove_stale() {
    let Ok(list) = run("ip", &["netns", "list"]) else {
        return;
    };
    for name in list.lines().filter_map(|l| l.split_whitespace().next()) {
        let Some(rest) = name.strip_prefix("nz") else {
            continue;
        };
        let Some(pid) = rest
            .split('n')
            .next()
            .and_then(|hex| u32::from_str_radix(hex, 16).ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            kill_all_in(name);
            let _ = run("ip", &["netns", "del", name]);
        }
    }
}

/// SIGKILLs every process inside namespace `ns`.
fn kill_all_in(ns: &str) {
    if let Ok(pids) = run("ip", &["netns", "pids", ns]) {
        for pid in pids.lines().filter_map(|p| p.trim().parse::<i32>().ok()) {
            // SAFETY: kill(2) with a pid listed in our own namespace.
            unsafe {
                libc::kill(pid, libc::SIGCONT);
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// The namespaces and links of one test run (see the module doc).
pub struct Lab {
    tag: String,
    serial: u64,
    server_ns: String,
    client_ns: Vec<String>,
    /// The server's address on the root link (for the test's own connections).
    pub server_admin: String,
    partitioned: Vec<bool>,
}

impl Lab {
    /// Builds a server namespace and `clients` client namespaces. Panics (with the failing
    /// command) when it cannot.
    pub fn new(clients: usize) -> Lab {
        require_netns();
        remove_stale();
        let serial = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tag = format!("nz{:x}n{serial}", std::process::id());
        let mut lab = Lab {
            serial,
            server_ns: format!("{tag}s"),
            client_ns: (1..=clients).map(|i| format!("{tag}c{i}")).collect(),
            tag: tag.clone(),
            server_admin: String::new(),
            partitioned: vec![false; clients],
        };
        // From here on, Drop cleans up whatever was made.
        must("ip", &["netns", "add", &lab.server_ns]);
        must("ip", &["-n", &lab.server_ns, "link", "set", "lo", "up"]);
        for i in 0..clients {
            let ns = lab.client_ns[i].clone();
            must("ip", &["netns", "add", &ns]);
            must("ip", &["-n", &ns, "link", "set", "lo", "up"]);
            let (server_if, client_if) = (format!("{tag}r{i}"), format!("{tag}c{i}"));
            must(
                "ip",
                &[
                    "-n",
                    &lab.server_ns,
                    "link",
                    "add",
                    &server_if,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &client_if,
                    "netns",
                    &ns,
                ],
            );
            let (server_addr, client_addr) = (Self::link_addr(i, 1), Self::link_addr(i, 2));
            must(
                "ip",
                &[
                    "-n",
                    &lab.server_ns,
                    "addr",
                    "add",
                    &format!("{server_addr}/30"),
                    "dev",
                    &server_if,
                ],
            );
            must(
                "ip",
                &["-n", &lab.server_ns, "link", "set", &server_if, "up"],
            );
            must(
                "ip",
                &[
                    "-n",
                    &ns,
                    "addr",
                    "add",
                    &format!("{client_addr}/30"),
                    "dev",
                    &client_if,
                ],
            );
            must("ip", &["-n", &ns, "link", "set", &client_if, "up"]);
        }
        lab.link_root();
        lab
    }

    /// `192.168.77.(4i+host)`: the `/30` of client link `i`.
    fn link_addr(i: usize, host: usize) -> String {
        format!("192.168.77.{}", 4 * i + host)
    }

    /// The veth from the root namespace to the server, on a `/30` no other lab uses.
    fn link_root(&mut self) {
        let _serial = ROOT_SUBNET.lock().unwrap_or_else(|p| p.into_inner());
        let (root_if, server_if) = (format!("{}h", self.tag), format!("{}hs", self.tag));
        must(
            "ip",
            &[
                "link",
                "add",
                &root_if,
                "type",
                "veth",
                "peer",
                "name",
                &server_if,
                "netns",
                &self.server_ns,
            ],
        );
        let taken = must("ip", &["-o", "-4", "addr", "show"]);
        let start = (std::process::id() as usize * 8 + self.serial as usize) % 16_384;
        let index = (0..16_384)
            .map(|k| (start + k) % 16_384)
            .find(|index| {
                let base = index * 4;
                let prefix = format!("10.213.{}.{}/", base / 256, base % 256 + 2);
                !taken.contains(&prefix)
            })
            .expect("a free /30 in 10.213.0.0/16");
        let base = index * 4;
        let server = format!("10.213.{}.{}", base / 256, base % 256 + 1);
        let root = format!("10.213.{}.{}", base / 256, base % 256 + 2);
        must(
            "ip",
            &["addr", "add", &format!("{root}/30"), "dev", &root_if],
        );
        must("ip", &["link", "set", &root_if, "up"]);
        must(
            "ip",
            &[
                "-n",
                &self.server_ns,
                "addr",
                "add",
                &format!("{server}/30"),
                "dev",
                &server_if,
            ],
        );
        must(
            "ip",
            &["-n", &self.server_ns, "link", "set", &server_if, "up"],
        );
        self.server_admin = server;
    }

    /// Every address of the server namespace (for `redis-server --bind`).
    pub fn server_addrs(&self) -> Vec<String> {
        let mut addrs = vec![self.server_admin.clone()];
        addrs.extend((0..self.client_ns.len()).map(|i| Self::link_addr(i, 1)));
        addrs
    }

    /// The server address client `i` (0-based) reaches it at.
    pub fn server_addr_for(&self, i: usize) -> String {
        Self::link_addr(i, 1)
    }

    /// A command that runs `program` inside the server namespace.
    pub fn in_server(&self, program: &str) -> Command {
        Self::in_ns(&self.server_ns, program)
    }

    /// A command that runs `program` inside client `i`'s namespace.
    pub fn in_client(&self, i: usize, program: &str) -> Command {
        Self::in_ns(&self.client_ns[i], program)
    }

    fn in_ns(ns: &str, program: &str) -> Command {
        // `ip netns exec` execs the program: the child's pid is the program's own.
        let mut command = Command::new("ip");
        command.args(["netns", "exec", ns, program]);
        command
    }

    /// Client `i`'s namespace.
    pub fn client_ns(&self, i: usize) -> &str {
        &self.client_ns[i]
    }

    /// The server's namespace.
    pub fn server_ns(&self) -> &str {
        &self.server_ns
    }

    /// Client `i`'s link: (its interface in the server namespace, its interface in its own).
    pub fn client_link(&self, i: usize) -> (String, String) {
        (format!("{}r{i}", self.tag), format!("{}c{i}", self.tag))
    }

    /// Cuts client `i` off: every packet in or out of its namespace is dropped.
    pub fn partition(&mut self, i: usize) {
        self.drop_rules(i, "-I");
        self.partitioned[i] = true;
    }

    /// Undoes [`partition`](Self::partition).
    pub fn heal(&mut self, i: usize) {
        self.drop_rules(i, "-D");
        self.partitioned[i] = false;
    }

    /// Inserts (`-I`) or deletes (`-D`) the DROP rules of client `i`'s namespace.
    fn drop_rules(&self, i: usize, op: &str) {
        for chain in ["INPUT", "OUTPUT"] {
            let ns = &self.client_ns[i];
            must(
                "ip",
                &["netns", "exec", ns, "iptables", op, chain, "-j", "DROP"],
            );
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in self.client_ns.iter().chain([&self.server_ns]) {
            kill_all_in(ns);
            // Deleting a namespace destroys its veths, and with them their peers.
            let _ = run("ip", &["netns", "del", ns]);
        }
    }
}

/// A child process (a worker or the server) that is SIGKILLed on drop.
pub struct Proc {
    pub child: Child,
    pub name: String,
}

impl Proc {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on our own child, not reaped yet (we reap only in kill/drop).
        unsafe {
            libc::kill(self.pid(), sig);
        }
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        self.signal(libc::SIGCONT);
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.kill();
        }
    }
}
