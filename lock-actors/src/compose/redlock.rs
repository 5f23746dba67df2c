//! `RedLock`: one lock held on a majority of independent Redis nodes.

use super::redlock_guard::{Grant, Keeping, RedLockGuard};
use super::{release_all, Member};
use crate::client::LockClient;
use crate::error::LockError;
use crate::lock::{AcquireOptions, Lock, LockGuard, LockOwner};
use futures_util::future::poll_fn;
use rand::Rng;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// The shortest per-node timeout [`RedLock::default_node_timeout`] picks.
const MIN_NODE_TIMEOUT: Duration = Duration::from_millis(20);
/// The longest per-node timeout [`RedLock::default_node_timeout`] picks.
const MAX_NODE_TIMEOUT: Duration = Duration::from_millis(200);
/// The default mean delay between two attempts.
const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// One lock held on a majority of N independent Redis nodes: the Redlock algorithm
/// (Redisson's `RedissonRedLock`), over one [`LockClient`] per node.
///
/// # Which lock should I use?
///
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
/// - **Without a lease** (the watchdog mode) each node is taken for the watchdog lease (the
///   shortest `watchdog_timeout` of the clients), and every renew interval (the shortest of
///   the clients') all nodes are renewed in parallel, each bounded by
///   max(node timeout, interval / 4). A round that renews fewer than a quorum reports the
///   lock **lost** at once; so does a quorum of members found gone in between. Each round
///   that renews a quorum restarts the validity.
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

    /// Takes the lock with the watchdog, waiting at most the shortest default wait of the
    /// clients.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind: requests in flight run to their end and
    /// any grant they bring is released at once; nodes already granted are released in the
    /// background.
    ///
    /// ```no_run
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = lock.acquire().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<RedLockGuard, LockError> {
        self.acquire_with(AcquireOptions::new()).await
    }

    /// Takes the lock with the watchdog, retrying for at most `wait`.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](RedLock::acquire).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// match lock.acquire_timeout(Duration::from_secs(1)).await {
    ///     Ok(guard) => { /* work while guard.validity() > 0 */ }
    ///     Err(e) if e.is_timeout() => { /* held elsewhere */ }
    ///     Err(e) if e.is_unavailable() => { /* no quorum of nodes answered */ }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<RedLockGuard, LockError> {
        self.acquire_with(AcquireOptions::new().wait(wait)).await
    }

    /// One attempt, no retry: `Ok(None)` when the nodes answered but the lock is held
    /// elsewhere; [`LockError::Unavailable`] when fewer than a quorum answered.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](RedLock::acquire).
    ///
    /// ```no_run
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// if let Some(guard) = lock.try_acquire().await? {
    ///     // we have it
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self) -> Result<Option<RedLockGuard>, LockError> {
        match self
            .acquire_with(AcquireOptions::new().wait(Duration::ZERO))
            .await
        {
            Ok(guard) => Ok(Some(guard)),
            Err(LockError::Timeout { .. }) => Ok(None),
            Err(other) => Err(other),
        }
    }

    /// Takes the lock as `options` say: the owner (the same owner re-enters on every
    /// node), how long to keep retrying, and a fixed lease (no renewal; the guard is lost
    /// when its validity runs out).
    ///
    /// Fails with [`LockError::InvalidConfig`] when the lease cannot leave any validity
    /// (not longer than the drift plus the node timeout), [`LockError::Timeout`] when the
    /// nodes answered but no attempt won a quorum in time, [`LockError::Unavailable`] when
    /// the last attempt heard from fewer than a quorum of nodes.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](RedLock::acquire).
    ///
    /// ```no_run
    /// # use actix_distributed_lock::AcquireOptions;
    /// # use std::time::Duration;
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let options = AcquireOptions::new().wait(Duration::from_secs(2)).lease(Duration::from_secs(10));
    /// let guard = lock.acquire_with(options).await?;
    /// assert!(guard.validity() <= Duration::from_secs(10));
    /// # Ok(()) }
    /// ```
    pub async fn acquire_with(&self, options: AcquireOptions) -> Result<RedLockGuard, LockError> {
        let (owner, wait, fixed_lease) = options.parts();
        let owner = owner.unwrap_or_default();
        let wait = wait.unwrap_or_else(|| self.default_wait());
        let lease = fixed_lease.unwrap_or_else(|| self.watchdog_lease());
        let node_timeout = self.node_timeout_for(lease);
        if node_timeout.is_zero() {
            return Err(LockError::invalid_config(format!(
                "the node timeout of RedLock `{}` must be above zero",
                self.name
            )));
        }
        if lease <= Self::clock_drift(lease) + node_timeout {
            return Err(LockError::invalid_config(format!(
                "a lease of {lease:?} leaves RedLock `{}` no validity after the clock drift \
                 ({:?}) and the node timeout ({node_timeout:?}); use a longer lease",
                self.name,
                Self::clock_drift(lease)
            )));
        }
        let started = Instant::now();
        let deadline = started + wait;
        let mut in_flight = InFlight::new(self.members.len());
        loop {
            let attempt = self.attempt(owner, lease, node_timeout, &mut in_flight);
            let failure = match attempt.await {
                Ok(Granted {
                    members,
                    started: acquired_at,
                    validity,
                    joining,
                }) => {
                    let keeping = match fixed_lease {
                        Some(_) => Keeping::Fixed,
                        None => Keeping::Renewed {
                            interval: self.renew_interval(),
                            timeout: node_timeout.max(self.renew_interval() / 4),
                        },
                    };
                    return RedLockGuard::start(Grant {
                        lock: self.clone(),
                        owner,
                        fixed_lease,
                        lease,
                        node_timeout,
                        members,
                        joining,
                        joining_until: acquired_at + node_timeout,
                        valid_until: acquired_at + validity,
                        keeping,
                    })
                    .await;
                }
                Err(failure) => failure,
            };
            if let Some(refusal) = failure.hopeless(self) {
                return Err(refusal);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(failure.into_error(self, started.elapsed(), node_timeout));
            }
            tokio::time::sleep(self.next_delay().min(left)).await;
        }
    }

    fn next_delay(&self) -> Duration {
        let mean = self.retry_delay.as_micros() as u64;
        let micros = rand::rng().random_range(mean / 2..=mean + mean / 2);
        Duration::from_micros(micros)
    }

    /// One attempt on every node at once. It succeeds as soon as a quorum has granted the
    /// lock with validity left: the slowest nodes do not set the pace. Their requests, still
    /// unanswered then, go to the guard, which adds a grant that comes within the node
    /// timeout to the hold (renewed and released with it) and releases a later one.
    ///
    /// A node's request is never abandoned while Redis may still run it: it runs on the
    /// node's actor thread, and one that outlives the node timeout stays in `in_flight`.
    /// Until it has answered, that node counts as silent and gets no second request for the
    /// same owner; a grant that arrives late is released before the node is asked again
    /// (or in the background, once the acquire is over).
    async fn attempt(
        &self,
        owner: LockOwner,
        lease: Duration,
        node_timeout: Duration,
        in_flight: &mut InFlight,
    ) -> Result<Granted, Failure> {
        let options = AcquireOptions::new()
            .owner(owner)
            .wait(Duration::ZERO)
            .lease(lease);
        in_flight.settle(&self.members, node_timeout).await;
        let started = Instant::now();
        let quorum = self.quorum();
        let drift = Self::clock_drift(lease);
        let mut waiting: Vec<Option<oneshot::Receiver<Answer>>> = Vec::new();
        let mut answers: Vec<Option<Result<Answer, ()>>> = Vec::new();
        for (index, member) in self.members.iter().enumerate() {
            let (slot, answer) = match in_flight.send(index, member, options) {
                Request::Sent(reply) => (Some(reply), None),
                Request::Refused(error) => (None, Some(Ok(Err(error)))),
                // Silent for this attempt, as if it had timed out.
                Request::StillInFlight => (None, Some(Err(()))),
            };
            waiting.push(slot);
            answers.push(answer);
        }
        let mut granted = 0;
        let expired = tokio::time::sleep_until((started + node_timeout).into());
        tokio::pin!(expired);
        let quorum_at = poll_fn(|cx| {
            for (index, slot) in waiting.iter_mut().enumerate() {
                let Some(reply) = slot else { continue };
                let Poll::Ready(answer) = Pin::new(reply).poll(cx) else {
                    continue;
                };
                *slot = None;
                let answer = answer.unwrap_or(Err(LockError::Shutdown));
                granted += usize::from(answer.is_ok());
                answers[index] = Some(Ok(answer));
            }
            let now = Instant::now();
            // Done at a quorum that leaves validity, or when nobody is left to answer.
            if granted >= quorum && now < started + lease - drift {
                return Poll::Ready(Some(now));
            }
            if waiting.iter().all(Option::is_none) || expired.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await;
        let elapsed = quorum_at.unwrap_or_else(Instant::now) - started;
        let mut members = Vec::new();
        let mut joining = Vec::new();
        let mut failure = Failure::default();
        for (index, (answer, reply)) in answers.into_iter().zip(waiting).enumerate() {
            match (answer, reply) {
                (Some(Ok(Ok(guard))), _) => members.push((index, guard)),
                (Some(Ok(Err(LockError::Timeout { .. } | LockError::AlreadyHeld { .. }))), _) => {
                    failure.busy += 1
                }
                (Some(Ok(Err(error))), _) => failure.silent.push((index, Some(error))),
                // Still in flight from an earlier attempt: silent. (No answer and no reply
                // to wait for cannot happen: a slot is emptied only when answered.)
                (Some(Err(())), _) | (None, None) => failure.silent.push((index, None)),
                (None, Some(reply)) => {
                    if quorum_at.is_some() {
                        joining.push((index, reply));
                    } else {
                        in_flight.keep(index, reply);
                        failure.silent.push((index, None));
                    }
                }
            }
        }
        let validity = lease
            .checked_sub(elapsed + drift)
            .filter(|validity| !validity.is_zero());
        match validity {
            Some(validity) if members.len() >= quorum => {
                tracing::debug!(lock = %self.name, nodes = members.len(),
                    joining = joining.len(), ?elapsed, ?validity, "RedLock acquired");
                Ok(Granted {
                    members,
                    started,
                    validity,
                    joining,
                })
            }
            _ => {
                failure.granted = members.len();
                tracing::debug!(lock = %self.name, granted = members.len(), busy = failure.busy,
                    silent = failure.silent.len(), ?elapsed, "RedLock attempt failed; releasing");
                let held = members
                    .into_iter()
                    .map(|(index, guard)| (self.members[index].node.clone(), guard))
                    .collect();
                release_all(held, node_timeout).await;
                Err(failure)
            }
        }
    }

    pub(crate) fn member(&self, index: usize) -> &Member {
        &self.members[index]
    }
}

/// A node's answer to one acquire request.
pub(crate) type Answer = Result<LockGuard, LockError>;

/// A successful attempt.
struct Granted {
    /// (member index, its hold), for every node that granted the lock in time.
    members: Vec<(usize, LockGuard)>,
    /// When the attempt started: its validity counts from here.
    started: Instant,
    validity: Duration,
    /// Requests not answered yet when the quorum was reached, by member index.
    joining: Vec<(usize, oneshot::Receiver<Answer>)>,
}

/// How sending a request to one node went.
enum Request {
    Sent(oneshot::Receiver<Answer>),
    /// The node cannot be asked (its client was shut down).
    Refused(LockError),
    /// The node has not answered an earlier request yet.
    StillInFlight,
}

/// The requests of one acquire call that outlived their node timeout, by member.
struct InFlight {
    pending: Vec<Option<oneshot::Receiver<Answer>>>,
}

impl InFlight {
    fn new(nodes: usize) -> Self {
        InFlight {
            pending: (0..nodes).map(|_| None).collect(),
        }
    }

    /// Collects the late answers that have come in; late grants are released (each report
    /// awaited at most `bound`) before their node is asked again.
    async fn settle(&mut self, members: &[Member], bound: Duration) {
        let mut late = Vec::new();
        for (index, slot) in self.pending.iter_mut().enumerate() {
            let Some(reply) = slot else { continue };
            match reply.try_recv() {
                Err(oneshot::error::TryRecvError::Empty) => {}
                Ok(Ok(guard)) => {
                    late.push((members[index].node.clone(), guard));
                    *slot = None;
                }
                Ok(Err(_)) | Err(oneshot::error::TryRecvError::Closed) => *slot = None,
            }
        }
        if !late.is_empty() {
            release_all(late, bound).await;
        }
    }

    /// Sends the acquire to member `index` on its node's actor thread, unless an earlier
    /// one is still unanswered. A reply nobody receives any more (this acquire is over) is
    /// a guard dropped on the spot, which releases it.
    fn send(&self, index: usize, member: &Member, options: AcquireOptions) -> Request {
        if self.pending[index].is_some() {
            return Request::StillInFlight;
        }
        let node = match member.lock.client().node() {
            Ok(node) => node,
            Err(error) => return Request::Refused(error),
        };
        let (reply, answer) = oneshot::channel();
        let lock = member.lock.clone();
        let accepted = node.arbiter.spawn(async move {
            let _ = reply.send(lock.acquire_with(options).await);
        });
        if accepted {
            Request::Sent(answer)
        } else {
            Request::Refused(LockError::Shutdown)
        }
    }

    fn keep(&mut self, index: usize, reply: oneshot::Receiver<Answer>) {
        self.pending[index] = Some(reply);
    }
}

/// What went wrong in one attempt.
#[derive(Default)]
struct Failure {
    granted: usize,
    busy: usize,
    /// Nodes that did not answer in time (`None`) or answered with an error.
    silent: Vec<(usize, Option<LockError>)>,
}

impl Failure {
    /// The first refusal no retry cures (a missing permission, a full memory, a replica, a
    /// wrong type), when so many nodes refused so that no quorum is left to win.
    fn hopeless(&self, lock: &RedLock) -> Option<LockError> {
        let refusals: Vec<&LockError> = self
            .silent
            .iter()
            .filter_map(|(_, error)| error.as_ref())
            .filter(|error| !error.is_transient())
            .collect();
        let first = refusals.first()?;
        (lock.nodes() - refusals.len() < lock.quorum()).then(|| (*first).clone())
    }

    fn into_error(self, lock: &RedLock, waited: Duration, node_timeout: Duration) -> LockError {
        let answered = self.granted + self.busy;
        if answered >= lock.quorum() {
            // The lock was busy, or the attempts took longer than the lease allows.
            return LockError::Timeout {
                name: lock.name.to_string(),
                waited,
            };
        }
        if let Some((_, Some(error))) = self
            .silent
            .iter()
            .find(|(_, e)| matches!(e, Some(LockError::WrongType { .. })))
        {
            return error.clone();
        }
        let nodes: Vec<String> = self
            .silent
            .iter()
            .map(|(index, _)| lock.member(*index).node.to_string())
            .collect();
        let last_error = self
            .silent
            .iter()
            .find_map(|(_, e)| e.as_ref())
            .map_or_else(
                || format!("no answer within {node_timeout:?}"),
                ToString::to_string,
            );
        LockError::Unavailable {
            node: nodes.join(", "),
            reason: format!(
                "RedLock `{}` needs {} of {} nodes, but only {answered} answered \
                 (within {node_timeout:?} each, for {waited:?}); {last_error}",
                lock.name,
                lock.quorum(),
                lock.nodes()
            ),
        }
    }
}
