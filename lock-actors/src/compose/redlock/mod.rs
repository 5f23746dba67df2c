//! `RedLock`: one lock held on a majority of independent Redis nodes: the handle, its
//! nodes and its settings. Acquiring is in `acquire`, the hold in `guard`, keeping the
//! hold alive in `keeper`.

mod acquire;
mod guard;
mod keeper;

pub use guard::RedLockGuard;

use super::Member;
use crate::client::LockClient;
use crate::error::LockError;
use crate::handle::Lock;
use crate::lock::LockGuard;
use std::sync::Arc;
use std::time::Duration;

/// The shortest per-node timeout [`RedLock::default_node_timeout`] picks.
const MIN_NODE_TIMEOUT: Duration = Duration::from_millis(20);
/// The longest per-node timeout [`RedLock::default_node_timeout`] picks.
const MAX_NODE_TIMEOUT: Duration = Duration::from_millis(200);
/// The default mean delay between two attempts.
const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// One lock held on a majority of N independent Redis nodes: the Redlock algorithm
/// (Redisson's `RedissonRedLock`), over one [`LockClient`] per node.
///
/// # When a RedLock is worth it
///
/// (Every other kind, and what each is for: the README's
/// [table of kinds](https://github.com/actix-distributed-lock/actix-distributed-lock/blob/main/README.md#which-lock-should-i-use).)
/// Most services should use a single-node lock ([`LockClient::lock`]), with a fenced lock
/// ([`LockClient::fenced_lock`]) where the protected storage can check a token. A RedLock
/// costs N round trips per operation and N nodes to run, and it buys one thing: the lock
/// survives the crash of a minority of nodes, where a single node (or a primary with
/// asynchronous replicas) can lose it. It does **not** make a lock safe against a paused or
/// slow holder, and it cannot carry a fencing token (see below).
///
/// # The algorithm
///
/// - **One attempt** sends the acquire to every node at once (each a single try, no
///   waiting), each bounded by the per-node timeout ([`default_node_timeout`]: lease / 100,
///   clamped to 20..=200 ms; override with [`node_timeout`](RedLock::node_timeout)), so a
///   dead or frozen node costs milliseconds, not a TCP timeout.
/// - The attempt succeeds as soon as a **quorum** (N / 2 + 1) of nodes granted it with
///   positive **validity**: `validity = lease − elapsed − drift`, with
///   `drift = lease · 0.01 + 2 ms` ([`clock_drift`]), `elapsed` measured on the monotonic
///   clock from before the first request to the reply that completed the quorum. The
///   slowest nodes do not set the pace: a node that grants later, within its node timeout,
///   joins the hold (renewed and released with the rest, see
///   [`nodes_held`](RedLockGuard::nodes_held) and
///   [`nodes_pending`](RedLockGuard::nodes_pending)); a later grant is released at once.
/// - Otherwise every node that granted it is released at once, and the next attempt starts
///   after a random delay (uniform in ½..1½ × [`retry_delay`](RedLock::retry_delay),
///   100 ms by default, so competing clients fall out of step), until the wait is over.
/// - A request that outlives its node timeout is not abandoned: it runs to its end on the
///   node's actor thread, the node counts as silent (and is not asked again for this owner)
///   until it answers, and a grant that arrives late is released at once.
/// - The wait bounds the whole call up to one last attempt and its releases: at most
///   `wait + 2 × node timeout`.
/// - **Without a lease** (the watchdog mode) each member is a watchdog-leased hold on its
///   node, renewed by that node's renewal service with the node's other holds (every
///   renew interval of its client). A few times per interval (the shortest of the
///   clients') the RedLock reads its members: when fewer than a quorum are being renewed
///   (their node's renewals fail or wait longer than max(node timeout, interval / 4) for
///   an answer, or they were found gone) it reports the lock **lost** at once. The validity is the quorum-th latest confirmed
///   renewal's end (its send time + the lease), less the clock drift allowance.
/// - **With a fixed lease** nothing is renewed, and the lock is reported lost when its
///   validity runs out.
///
/// [`default_node_timeout`]: RedLock::default_node_timeout
/// [`clock_drift`]: RedLock::clock_drift
///
/// # What it guarantees, and what it does not
///
/// - **While a quorum of nodes keeps its data,** two owners never both hold the lock with
///   positive [`validity`](RedLockGuard::validity): any two quorums share a node, and a node
///   grants one owner at a time.
/// - **Persistence.** A node that restarts empty (no persistence, or an AOF/RDB that missed
///   the last writes) forgets the locks it granted. If that node was part of the only
///   quorum holding a lock, another owner can then win a quorum while the first still holds
///   it: two holders (`tests/redlock.rs` shows exactly that). Either run the nodes with
///   `appendfsync always`, or keep a restarted node out of service for at least the longest
///   lease in use (the **restart delay**): by the time it answers again, every lock it forgot
///   has expired on the other nodes too. This crate cannot enforce the delay; your
///   deployment must (start Redis late, or keep it out of the client's reach).
/// - **Clocks.** The validity runs on this process's monotonic clock; the leases run on
///   each node's clock. A node whose clock jumps forward (an operator setting the time,
///   not NTP slewing) expires keys early and breaks the guarantee; `drift` covers only rates
///   that differ by about 1 %. Run the nodes with slewing time sync.
/// - **Pauses.** A holder that is paused (GC, swap, SIGSTOP) past its validity does not know
///   it lost the lock, and writes it already sent can land after the next holder started.
///   No lock service can prevent that by itself. The cure is a **fencing token** that the
///   storage checks; a RedLock cannot produce one, because the nodes' counters are
///   independent and no majority of them is guaranteed to increase. Where you need fencing,
///   use one node and [`LockClient::fenced_lock`], and make that node durable.
/// - **Partitions and slow nodes** cost availability, never safety: without a quorum,
///   acquire fails with [`LockError::Unavailable`] (or [`LockError::Timeout`] when the nodes
///   answered but the lock stayed busy).
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::{LockClient, RedLock};
/// use std::time::Duration;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let mut nodes = Vec::new();
/// for url in ["redis://10.0.0.1:6379/", "redis://10.0.0.2:6379/", "redis://10.0.0.3:6379/"] {
///     nodes.push(LockClient::from_url(url).await?);
/// }
/// let lock = RedLock::new(&nodes, "payout:2026-11")?;
/// let guard = lock.acquire_timeout(Duration::from_secs(5)).await?;
/// println!("held on {} of 3 nodes, valid for {:?}", guard.nodes_held(), guard.validity());
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RedLock {
    members: Arc<[Member]>,
    name: Arc<str>,
    node_timeout: Option<Duration>,
    retry_delay: Duration,
}

impl RedLock {
    /// A RedLock on the reentrant lock `name`, one member per client; each client must talk
    /// to a different node. Talks to nobody yet.
    ///
    /// Fails with [`LockError::InvalidConfig`] for no clients or two clients of one node,
    /// [`LockError::InvalidName`] for a bad name, [`LockError::Shutdown`] for a shut-down
    /// client. One node is one Redis server as the server reports it (its `run_id`, read
    /// when the client connected), so `redis://localhost:6379/` and
    /// `redis://127.0.0.1:6379/3` are one node, however differently they are spelled.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::{LockClient, RedLock};
    /// # fn demo(a: LockClient, b: LockClient, c: LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let lock = RedLock::new(&[a.clone(), b, c], "payout")?;
    /// assert_eq!((lock.nodes(), lock.quorum()), (3, 2));
    /// assert!(RedLock::new(&[a.clone(), a], "payout").is_err()); // one node twice
    /// # Ok(()) }
    /// ```
    pub fn new(clients: &[LockClient], name: &str) -> Result<RedLock, LockError> {
        let locks = clients
            .iter()
            .map(|client| client.lock(name))
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_locks(locks)
    }

    /// A RedLock over the given locks, one per node, of any kind (all fenced or not, as
    /// given; their tokens are not comparable across nodes).
    ///
    /// ```no_run
    /// # use actix_distributed_lock::{LockClient, RedLock};
    /// # fn demo(nodes: Vec<LockClient>) -> Result<(), actix_distributed_lock::LockError> {
    /// let locks = nodes.iter().map(|n| n.fast_lock("hot")).collect::<Result<Vec<_>, _>>()?;
    /// let lock = RedLock::from_locks(locks)?;
    /// # Ok(()) }
    /// ```
    pub fn from_locks(locks: impl IntoIterator<Item = Lock>) -> Result<RedLock, LockError> {
        let members = locks
            .into_iter()
            .map(Member::new)
            .collect::<Result<Vec<_>, _>>()?;
        if members.is_empty() {
            return Err(LockError::invalid_config(
                "a RedLock needs at least one node (use 3 or 5)",
            ));
        }
        for (i, member) in members.iter().enumerate() {
            if let Some(other) = members[..i].iter().find(|o| o.shares_server(member)) {
                return Err(LockError::invalid_config(format!(
                    "a RedLock needs independent nodes, but {} and {} are the same Redis \
                     server (run_id {}); give it one client per server",
                    other.node,
                    member.node,
                    member.server.run_ids().join(",")
                )));
            }
        }
        let mut names: Vec<&str> = members.iter().map(|m| m.lock.name()).collect();
        names.dedup();
        let name = names.join(", ").into();
        Ok(RedLock {
            members: members.into(),
            name,
            node_timeout: None,
            retry_delay: DEFAULT_RETRY_DELAY,
        })
    }

    /// Bounds every request to one node by `timeout` instead of
    /// [`default_node_timeout`](RedLock::default_node_timeout) of the lease.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(lock: actix_distributed_lock::RedLock) {
    /// let lock = lock.node_timeout(Duration::from_millis(50));
    /// # }
    /// ```
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = Some(timeout);
        self
    }

    /// The mean delay between two attempts; each delay is drawn uniformly from
    /// `mean / 2 ..= mean * 3 / 2`. Default 100 ms.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(lock: actix_distributed_lock::RedLock) {
    /// let lock = lock.retry_delay(Duration::from_millis(20));
    /// # }
    /// ```
    pub fn retry_delay(mut self, mean: Duration) -> Self {
        self.retry_delay = mean;
        self
    }

    /// The lock's name (the distinct names of its members, comma-separated, if they differ).
    ///
    /// ```no_run
    /// # use actix_distributed_lock::{LockClient, RedLock};
    /// # fn demo(nodes: &[LockClient]) -> Result<(), actix_distributed_lock::LockError> {
    /// assert_eq!(RedLock::new(nodes, "payout")?.name(), "payout");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many nodes the lock spans.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::{LockClient, RedLock};
    /// # fn demo(a: LockClient, b: LockClient, c: LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// assert_eq!(RedLock::new(&[a, b, c], "x")?.nodes(), 3);
    /// # Ok(()) }
    /// ```
    pub fn nodes(&self) -> usize {
        self.members.len()
    }

    /// How many nodes must grant the lock: a strict majority, `nodes / 2 + 1`.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::{LockClient, RedLock};
    /// # fn demo(five: &[LockClient]) -> Result<(), actix_distributed_lock::LockError> {
    /// assert_eq!(RedLock::new(five, "x")?.quorum(), 3);
    /// # Ok(()) }
    /// ```
    pub fn quorum(&self) -> usize {
        self.members.len() / 2 + 1
    }

    /// The margin taken off every validity for clock drift between the nodes and this
    /// process: `lease · 0.01 + 2 ms`.
    ///
    /// ```
    /// # use actix_distributed_lock::RedLock;
    /// # use std::time::Duration;
    /// assert_eq!(RedLock::clock_drift(Duration::from_secs(10)), Duration::from_millis(102));
    /// ```
    pub fn clock_drift(lease: Duration) -> Duration {
        crate::config::clock_drift(lease)
    }

    /// The per-node timeout for `lease` when none is set: `lease / 100`, clamped to
    /// 20..=200 ms. At most 1 % of any lease of 2 s or more, so even a full timeout leaves
    /// about 98 % of the lease as validity; at least 20 ms, so a busy but healthy node on a
    /// loaded machine still answers in time.
    ///
    /// ```
    /// # use actix_distributed_lock::RedLock;
    /// # use std::time::Duration;
    /// assert_eq!(RedLock::default_node_timeout(Duration::from_secs(30)), Duration::from_millis(200));
    /// assert_eq!(RedLock::default_node_timeout(Duration::from_secs(5)), Duration::from_millis(50));
    /// assert_eq!(RedLock::default_node_timeout(Duration::from_millis(500)), Duration::from_millis(20));
    /// ```
    pub fn default_node_timeout(lease: Duration) -> Duration {
        (lease / 100).clamp(MIN_NODE_TIMEOUT, MAX_NODE_TIMEOUT)
    }

    /// The per-node timeout in force for `lease`.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn demo(lock: actix_distributed_lock::RedLock) {
    /// let lock = lock.node_timeout(Duration::from_millis(30));
    /// assert_eq!(lock.node_timeout_for(Duration::from_secs(30)), Duration::from_millis(30));
    /// # }
    /// ```
    pub fn node_timeout_for(&self, lease: Duration) -> Duration {
        self.node_timeout
            .unwrap_or_else(|| Self::default_node_timeout(lease))
    }

    /// The lease each node is taken for in the watchdog mode: the shortest watchdog timeout
    /// of the clients.
    ///
    /// ```no_run
    /// # fn demo(lock: actix_distributed_lock::RedLock) {
    /// println!("renewed leases of {:?}", lock.watchdog_lease());
    /// # }
    /// ```
    pub fn watchdog_lease(&self) -> Duration {
        self.configs()
            .map(|c| c.watchdog_timeout)
            .min()
            .unwrap_or_default()
    }

    fn renew_interval(&self) -> Duration {
        self.configs()
            .map(|c| c.renew_interval())
            .min()
            .unwrap_or_default()
    }

    fn default_wait(&self) -> Duration {
        self.configs()
            .map(|c| c.default_wait)
            .min()
            .unwrap_or_default()
    }

    fn configs(&self) -> impl Iterator<Item = &crate::config::ClientConfig> {
        self.members.iter().map(|m| m.lock.client().config())
    }

    pub(crate) fn member(&self, index: usize) -> &Member {
        &self.members[index]
    }
}

/// A node's answer to one acquire request.
pub(crate) type Answer = Result<LockGuard, LockError>;
