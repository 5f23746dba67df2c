//! A small loopback TCP proxy for fault-injection tests.
//!
//! [`TcpProxy`] sits between a client and a server (normally a test `redis-server`) on
//! `127.0.0.1` and forwards bytes both ways until told to misbehave:
//!
//! * [`cut`](TcpProxy::cut) closes every live connection (a network blip; new
//!   connections are accepted again right away);
//! * [`blackhole`](TcpProxy::blackhole) stalls every connection without closing it, and
//!   lets the held-back bytes through when it is turned off;
//! * [`hold_replies`](TcpProxy::hold_replies) stalls only the server-to-client direction:
//!   requests still reach the server, their replies wait (a reply lost in flight, once
//!   followed by a [`cut`](TcpProxy::cut));
//! * [`refuse`](TcpProxy::refuse) closes live connections and closes new ones as soon as
//!   they are accepted (a dead host).
//!
//! Built on tokio tasks only: one accept task started with `tokio::spawn` (so it works
//! under `#[tokio::test]` of any flavor and under `#[actix_rt::test]`), which owns one
//! task per connection. State changes reach every task through a `tokio::sync::watch`
//! channel. Dropping the proxy stops all of them.
#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// Size of the per-direction copy buffer.
const BUF_SIZE: usize = 16 * 1024;

/// What the proxy is currently told to do; shared with every task through `watch`.
#[derive(Clone, Copy, Debug, Default)]
struct Mode {
    /// Bumped by every [`TcpProxy::cut`]; a connection dies when it differs from the
    /// value it was accepted under.
    cut_gen: u64,
    blackhole: bool,
    /// Stall only the server-to-client direction.
    hold_replies: bool,
    refuse: bool,
}

/// Counters shared by the proxy handle and its tasks.
#[derive(Debug, Default)]
struct Stats {
    live: AtomicUsize,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
}

/// The connection must be closed (cut, refuse, or the proxy was dropped).
struct Closed;

/// A loopback TCP proxy in front of `127.0.0.1:<upstream_port>`; see the module docs.
///
/// Dropping it stops the listener and closes every proxied connection: the accept task
/// is aborted (which aborts the connection tasks it owns) and the state channel closes,
/// so every task ends at its next poll and no task outlives the proxy.
pub struct TcpProxy {
    port: u16,
    upstream_port: u16,
    mode: watch::Sender<Mode>,
    stats: Arc<Stats>,
    accept_task: JoinHandle<()>,
}

impl TcpProxy {
    /// Listens on a free `127.0.0.1` port and forwards every accepted connection to
    /// `127.0.0.1:upstream_port`. Must be called inside a tokio runtime (a
    /// `#[tokio::test]` or `#[actix_rt::test]`).
    ///
    /// The port is picked below the kernel's ephemeral range when it can be (see
    /// [`bind_listener`]), else the OS picks one (`127.0.0.1:0`).
    pub async fn start(upstream_port: u16) -> TcpProxy {
        let listener = bind_listener().await;
        let port = listener.local_addr().expect("proxy: local_addr").port();
        let (mode, mode_rx) = watch::channel(Mode::default());
        let stats = Arc::new(Stats::default());
        let accept_task = tokio::spawn(accept_loop(
            listener,
            upstream_port,
            mode_rx,
            Arc::clone(&stats),
        ));
        TcpProxy {
            port,
            upstream_port,
            mode,
            stats,
            accept_task,
        }
    }

    /// The loopback port the proxy listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port connections are forwarded to.
    pub fn upstream_port(&self) -> u16 {
        self.upstream_port
    }

    /// `redis://127.0.0.1:PORT/` for the proxy's port.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Closes every live connection, both directions, and discards whatever it held back.
    ///
    /// No byte is forwarded on those connections once this returns; the sockets are
    /// closed as soon as their tasks run, so
    /// [`connections`](Self::connections) drops to 0 shortly after, not at once.
    /// New connections are accepted and forwarded as usual afterwards.
    pub fn cut(&self) {
        self.mode.send_modify(|m| m.cut_gen += 1);
    }

    /// While on, every connection, live or new, stays open but nothing is forwarded in
    /// either direction.
    ///
    /// Bytes are held back, not dropped: the proxy stops reading, so they wait in the
    /// kernel's socket buffers (plus at most one copy buffer already read and not yet
    /// written). Turning it off lets everything through in order, like a stalled network
    /// that recovers. New connections are accepted (and connected upstream) but nothing
    /// flows until it is off. While on, the proxy does not notice a peer closing either.
    pub fn blackhole(&self, on: bool) {
        self.mode.send_modify(|m| m.blackhole = on);
    }

    /// While on, bytes from the server to its clients are held back (as
    /// [`blackhole`](Self::blackhole) holds them) while bytes from clients still reach the
    /// server: every request runs, no reply arrives. Followed by [`cut`](Self::cut), the
    /// held replies are discarded: a reply lost after its request ran.
    pub fn hold_replies(&self, on: bool) {
        self.mode.send_modify(|m| m.hold_replies = on);
    }

    /// While on, new connections are accepted and closed at once, and live ones are cut.
    pub fn refuse(&self, on: bool) {
        self.mode.send_modify(|m| m.refuse = on);
    }

    /// Number of live proxied connections: accepted, connected upstream and not closed yet.
    pub fn connections(&self) -> usize {
        self.stats.live.load(Ordering::SeqCst)
    }

    /// Bytes forwarded from clients to the upstream server.
    ///
    /// Both counters only grow. A chunk is counted when the proxy starts writing it on
    /// (never while blackholed), before the peer can see it: once a peer has received
    /// a byte, it is counted. A chunk whose connection is closed while its write is
    /// stalled stays counted.
    pub fn bytes_up(&self) -> u64 {
        self.stats.bytes_up.load(Ordering::SeqCst)
    }

    /// Bytes forwarded from the upstream server to clients.
    pub fn bytes_down(&self) -> u64 {
        self.stats.bytes_down.load(Ordering::SeqCst)
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        // Aborting the accept task drops its JoinSet, which aborts every connection task;
        // the `watch::Sender` dropped right after closes the channel, which also makes
        // every task return at its next poll.
        self.accept_task.abort();
    }
}

/// Lowest port [`bind_listener`] picks from.
const LOW_PORT: u16 = 10_000;
/// How many random ports [`bind_listener`] tries before letting the OS pick.
const BIND_ATTEMPTS: usize = 50;

/// Binds the proxy's listener on `127.0.0.1`, on a random free port between
/// [`LOW_PORT`] and the start of the kernel's ephemeral range, falling back to port 0.
///
/// Why not simply port 0: the support code's `free_port()` (used by
/// `RedisServer::start`) probes a port by binding port 0 and releasing it, and only then
/// starts `redis-server` on it. A proxy of a concurrently running test (nextest runs
/// tests as parallel processes) that binds port 0 in that window can get the same port;
/// `redis-server` then fails to bind, and the other test's PING check reaches this
/// proxy instead, so two tests end up sharing one proxy and one server. Ports below the
/// ephemeral range are never handed out by port-0 binds, so that cannot happen.
async fn bind_listener() -> TcpListener {
    if let Some(high) = ephemeral_range_start().filter(|&h| h > LOW_PORT + 1_000) {
        let span = u64::from(high - LOW_PORT);
        for attempt in 0..BIND_ATTEMPTS {
            let port = LOW_PORT + (random_u64(attempt) % span) as u16;
            if let Ok(listener) = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).await {
                return listener;
            }
        }
    }
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("proxy: bind 127.0.0.1:0")
}

/// First port of the kernel's ephemeral (port-0 / outgoing) range, if known.
fn ephemeral_range_start() -> Option<u16> {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A random number from std only (randomly keyed SipHash of the time and a counter).
fn random_u64(salt: usize) -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_usize(salt);
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

async fn accept_loop(
    listener: TcpListener,
    upstream_port: u16,
    mut mode: watch::Receiver<Mode>,
    stats: Arc<Stats>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            changed = mode.changed() => {
                if changed.is_err() {
                    // The proxy was dropped.
                    break;
                }
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    let now = *mode.borrow();
                    if now.refuse {
                        drop(client);
                        continue;
                    }
                    conns.spawn(serve(
                        client,
                        upstream_port,
                        mode.clone(),
                        now.cut_gen,
                        Arc::clone(&stats),
                    ));
                }
                // E.g. out of file descriptors: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
        }
    }
    // Dropping `conns` aborts every connection task.
}

/// Decrements the live-connection count when the connection ends, however it ends.
struct LiveGuard(Arc<Stats>);

impl LiveGuard {
    fn new(stats: Arc<Stats>) -> LiveGuard {
        stats.live.fetch_add(1, Ordering::SeqCst);
        LiveGuard(stats)
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Proxies one accepted connection until it ends, is cut, or the proxy goes away.
async fn serve(
    mut client: TcpStream,
    upstream_port: u16,
    mut mode: watch::Receiver<Mode>,
    cut_gen: u64,
    stats: Arc<Stats>,
) {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, upstream_port));
    let connect = TcpStream::connect(addr);
    tokio::pin!(connect);
    let mut upstream = loop {
        if state(&mut mode, (cut_gen, Direction::Up)).is_err() {
            return;
        }
        tokio::select! {
            biased;
            changed = mode.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            connected = &mut connect => match connected {
                Ok(stream) => break stream,
                // Upstream down: close the client side, like a failed connect.
                Err(_) => return,
            },
        }
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let live = LiveGuard::new(Arc::clone(&stats));
    {
        let (client_read, client_write) = client.split();
        let (upstream_read, upstream_write) = upstream.split();
        let up = pump(
            client_read,
            upstream_write,
            mode.clone(),
            (cut_gen, Direction::Up),
            &stats.bytes_up,
        );
        let down = pump(
            upstream_read,
            client_write,
            mode.clone(),
            (cut_gen, Direction::Down),
            &stats.bytes_down,
        );
        tokio::pin!(up, down);
        let (mut up_done, mut down_done) = (false, false);
        while !(up_done && down_done) {
            tokio::select! {
                r = &mut up, if !up_done => match r {
                    Ok(()) => up_done = true,
                    Err(Closed) => break,
                },
                r = &mut down, if !down_done => match r {
                    Ok(()) => down_done = true,
                    Err(Closed) => break,
                },
            }
        }
    }
    // Close both sides before the connection stops counting as live.
    drop(upstream);
    drop(client);
    drop(live);
}

/// Which way a pump copies.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// Client to server.
    Up,
    /// Server to client.
    Down,
}

/// A connection accepted under a cut generation, and one of its directions.
type Lane = (u64, Direction);

/// The current mode for one direction of a connection accepted under a cut generation:
/// `Err` if it must close, `Ok(true)` if bytes may flow, `Ok(false)` while held back.
/// Marks the value as seen.
fn state(mode: &mut watch::Receiver<Mode>, (cut_gen, direction): Lane) -> Result<bool, Closed> {
    let now = *mode.borrow_and_update();
    if now.refuse || now.cut_gen != cut_gen {
        Err(Closed)
    } else {
        let held = now.hold_replies && direction == Direction::Down;
        Ok(!(now.blackhole || held))
    }
}

/// Waits until bytes may flow; `Err` if the connection must close meanwhile.
async fn wait_flowing(mode: &mut watch::Receiver<Mode>, lane: Lane) -> Result<(), Closed> {
    loop {
        if state(mode, lane)? {
            return Ok(());
        }
        mode.changed().await.map_err(|_| Closed)?;
    }
}

/// Copies one direction. `Ok(())` on EOF (after passing the half-close on), `Err` when
/// the connection must close (I/O error, cut, refuse, proxy dropped).
///
/// The mode is re-checked before every read and every write, so once `cut`, `refuse`
/// or `blackhole(true)` has returned, no further byte is forwarded.
async fn pump(
    mut from: ReadHalf<'_>,
    mut to: WriteHalf<'_>,
    mut mode: watch::Receiver<Mode>,
    lane: Lane,
    counter: &AtomicU64,
) -> Result<(), Closed> {
    let mut buf = vec![0u8; BUF_SIZE];
    loop {
        wait_flowing(&mut mode, lane).await?;
        let n = tokio::select! {
            biased;
            changed = mode.changed() => {
                changed.map_err(|_| Closed)?;
                continue;
            }
            read = from.read(&mut buf) => read.map_err(|_| Closed)?,
        };
        if n == 0 {
            let _ = to.shutdown().await;
            return Ok(());
        }
        let mut written = 0;
        let mut counted = false;
        while written < n {
            wait_flowing(&mut mode, lane).await?;
            if !counted {
                // Counted before the write starts, so a peer never sees a byte that the
                // counters do not include yet.
                counter.fetch_add(n as u64, Ordering::SeqCst);
                counted = true;
            }
            tokio::select! {
                biased;
                changed = mode.changed() => changed.map_err(|_| Closed)?,
                w = to.write(&buf[written..n]) => match w {
                    Ok(0) | Err(_) => return Err(Closed),
                    Ok(w) => written += w,
                },
            }
        }
    }
}
