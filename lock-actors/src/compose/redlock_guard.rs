//! `RedLockGuard`: one RedLock hold, its validity, and the keeper task that renews it on
//! every node and reports it lost once a quorum can no longer be held.

use super::redlock::{Answer, RedLock};
use super::release_all;
use crate::error::LockError;
use crate::lock::{AcquireOptions, LockGuard, LockOwner};
use futures_util::future::join_all;
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};

/// The shortest wait for each node's report in [`RedLockGuard::unlock`]: a release is not
/// in a race against a lease, and a report missed on a loaded machine would turn a good
/// release into an error.
const UNLOCK_REPORT_WAIT: Duration = Duration::from_millis(500);

/// How a hold is kept once granted.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Keeping {
    /// A fixed lease: nothing is renewed; lost when the validity runs out.
    Fixed,
    /// The watchdog mode: renew every node every `interval`, each bounded by `timeout`.
    Renewed {
        interval: Duration,
        timeout: Duration,
    },
}

/// A successful attempt, handed to [`RedLockGuard::start`].
pub(crate) struct Grant {
    pub(crate) lock: RedLock,
    pub(crate) owner: LockOwner,
    pub(crate) fixed_lease: Option<Duration>,
    /// The lease every node was taken for (the fixed one, or the watchdog lease).
    pub(crate) lease: Duration,
    pub(crate) node_timeout: Duration,
    /// (member index, its hold), for every node that granted the lock.
    pub(crate) members: Vec<(usize, LockGuard)>,
    /// Requests still unanswered when the quorum was reached, by member index.
    pub(crate) joining: Vec<(usize, oneshot::Receiver<Answer>)>,
    /// Until when a joining node's grant still counts; a later one is released.
    pub(crate) joining_until: Instant,
    pub(crate) valid_until: Instant,
    pub(crate) keeping: Keeping,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Held,
    Released,
    Lost,
}

/// What the guard and its keeper share.
#[derive(Debug, Clone, Copy)]
struct Standing {
    status: Status,
    valid_until: Instant,
}

/// Proof that a [`RedLock`] is yours on a quorum of nodes, for as long as
/// [`validity`](RedLockGuard::validity) is above zero.
///
/// - [`validity`](RedLockGuard::validity) is the time left in which no other owner can hold
///   the lock (given the guarantees on [`RedLock`]); finish or check in before it runs out.
///   In the watchdog mode every renewal round that reaches a quorum restarts it.
/// - [`lost`](RedLockGuard::lost) resolves when a quorum can no longer be held: a renewal
///   round renewed fewer than a quorum of nodes, members were found gone on too many
///   nodes, or a fixed lease's validity ran out.
/// - [`unlock`](RedLockGuard::unlock) releases on every node; dropping the guard releases
///   in the background.
///
/// The renewals run on the actor thread of the first client that granted the lock, so a
/// busy caller's runtime does not delay them; shutting that client down reports the lock
/// lost.
///
/// # Example
///
/// ```no_run
/// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
/// let guard = lock.acquire().await?;
/// tokio::select! {
///     _ = guard.lost() => eprintln!("no longer held on a majority; stop"),
///     _ = async { /* protected work */ } => {}
/// }
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock on every node at once; keep it for as long as the work needs the lock"]
pub struct RedLockGuard {
    lock: RedLock,
    owner: LockOwner,
    fixed_lease: Option<Duration>,
    node_timeout: Duration,
    members: Vec<(usize, LockGuard)>,
    /// Holds the keeper added after the acquire returned (nodes that answered after the
    /// quorum, within the node timeout).
    joined: Joined,
    /// How many of those late answers are still awaited; the keeper counts them down.
    pending: Arc<AtomicUsize>,
    standing: Arc<watch::Sender<Standing>>,
    /// Dropping it stops the keeper.
    stop: Option<oneshot::Sender<()>>,
}

/// Member holds added by the keeper, shared with the guard that releases them.
type Joined = Arc<Mutex<Vec<(usize, LockGuard)>>>;

impl RedLockGuard {
    /// Starts the keeper for a granted attempt and returns the guard; releases everything
    /// and fails with [`LockError::Shutdown`] when no granting client can run the keeper.
    pub(crate) async fn start(grant: Grant) -> Result<RedLockGuard, LockError> {
        let Grant {
            lock,
            owner,
            fixed_lease,
            lease,
            node_timeout,
            members,
            joining,
            joining_until,
            valid_until,
            keeping,
        } = grant;
        let standing = Arc::new(watch::Sender::new(Standing {
            status: Status::Held,
            valid_until,
        }));
        let (stop, stopped) = oneshot::channel();
        let joined = Joined::default();
        let pending = Arc::new(AtomicUsize::new(joining.len()));
        let keeper = Keeper {
            lock: lock.clone(),
            owner,
            lease,
            keeping,
            alive: members.iter().map(|(index, _)| *index).collect(),
            standing: standing.clone(),
            joined: joined.clone(),
            pending: pending.clone(),
        };
        let joining = joining
            .into_iter()
            .map(|(index, reply)| {
                tokio::time::timeout_at(joining_until.into(), reply)
                    .map(move |answer| match answer {
                        Ok(Ok(Ok(guard))) => (index, Some(guard)),
                        _ => (index, None),
                    })
                    .boxed()
            })
            .collect();
        let losts = members
            .iter()
            .map(|(index, guard)| {
                let index = *index;
                guard.lost().map(move |()| index).boxed()
            })
            .collect();
        // On the actor thread of the first granting client that still runs.
        let node = members
            .iter()
            .find_map(|(index, _)| lock.member(*index).lock.client().node().ok().cloned());
        let spawned =
            node.is_some_and(|node| node.arbiter.spawn(keeper.run(losts, joining, stopped)));
        let guard = RedLockGuard {
            lock,
            owner,
            fixed_lease,
            node_timeout,
            members,
            joined,
            pending,
            standing,
            stop: Some(stop),
        };
        if !spawned {
            let _ = guard.unlock().await;
            return Err(LockError::Shutdown);
        }
        Ok(guard)
    }

    /// The lock's name.
    ///
    /// ```no_run
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = lock.acquire().await?;
    /// assert_eq!(guard.name(), lock.name());
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// The owner the lock is held for on every node; acquire again with it to re-enter.
    ///
    /// ```no_run
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = lock.acquire().await?;
    /// let me = guard.owner();
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> LockOwner {
        self.owner
    }

    /// On how many nodes the lock is held for this guard: at least the quorum. The acquire
    /// returns as soon as a quorum granted it; a node that answers later, within the node
    /// timeout, joins the hold (it is renewed and released with the others), so the count
    /// can grow for that long after the acquire.
    ///
    /// ```no_run
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = lock.acquire().await?;
    /// assert!(guard.nodes_held() >= lock.quorum());
    /// # Ok(()) }
    /// ```
    pub fn nodes_held(&self) -> usize {
        self.members.len() + lock_joined(&self.joined).len()
    }

    /// On how many nodes the acquire's answer is still awaited: the nodes that had not
    /// answered when the quorum was reached, for at most the node timeout. Once it is 0,
    /// [`nodes_held`](RedLockGuard::nodes_held) no longer grows. Always 0 once the hold has
    /// ended.
    ///
    /// ```no_run
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = lock.acquire().await?;
    /// assert!(guard.nodes_held() + guard.nodes_pending() <= lock.nodes());
    /// # Ok(()) }
    /// ```
    pub fn nodes_pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// The validity left: how much longer no other owner can hold the lock. Zero once the
    /// lock is lost or released.
    ///
    /// At acquisition it is `lease − elapsed − (lease · 0.01 + 2 ms)`, counted from before
    /// the attempt's first request; in the watchdog mode each renewal round that reaches a
    /// quorum restarts it from that round's start.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = lock.acquire().await?;
    /// if guard.validity() < Duration::from_secs(1) {
    ///     return Ok(()); // too little time left to finish safely
    /// }
    /// # Ok(()) }
    /// ```
    pub fn validity(&self) -> Duration {
        let standing = *self.standing.borrow();
        match standing.status {
            Status::Held => standing
                .valid_until
                .saturating_duration_since(Instant::now()),
            Status::Released | Status::Lost => Duration::ZERO,
        }
    }

    /// The instant the validity runs out (it moves forward with every renewal round).
    ///
    /// ```no_run
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = lock.acquire().await?;
    /// let deadline = guard.valid_until();
    /// # Ok(()) }
    /// ```
    pub fn valid_until(&self) -> Instant {
        self.standing.borrow().valid_until
    }

    /// Resolves when the lock is lost while held (see the type's docs); never after a
    /// normal release. The future does not borrow the guard.
    ///
    /// ```no_run
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = lock.acquire().await?;
    /// let lost = guard.lost();
    /// tokio::spawn(async move { lost.await; eprintln!("RedLock lost") });
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut standing = self.standing.subscribe();
        async move {
            let ended = standing
                .wait_for(|s| s.status != Status::Held)
                .await
                .map(|s| s.status);
            if ended.unwrap_or(Status::Lost) == Status::Released {
                std::future::pending::<()>().await;
            }
        }
    }

    /// True once the lock is known to be lost, or its validity has run out.
    ///
    /// ```no_run
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = lock.acquire().await?;
    /// assert!(!guard.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        let standing = *self.standing.borrow();
        match standing.status {
            Status::Lost => true,
            Status::Released => false,
            Status::Held => standing.valid_until <= Instant::now(),
        }
    }

    /// Stops renewing and releases on every node at once, waiting for each node's report at
    /// most the per-node timeout or 500 ms, whichever is longer. `Ok` when a quorum of nodes confirmed the release; otherwise the
    /// first error ([`LockError::NotOwner`] when the lock had been lost). Nodes that did not
    /// confirm expire the hold at its lease.
    ///
    /// # Cancel safety
    ///
    /// Every release is sent before the first `.await` point completes; dropping the future
    /// after that only loses the report.
    ///
    /// ```no_run
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = lock.acquire().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn unlock(mut self) -> Result<(), LockError> {
        self.mark_released();
        // After `mark_released`, the keeper adds no more holds (see `Keeper::join`).
        let joined = std::mem::take(&mut *lock_joined(&self.joined));
        let members = std::mem::take(&mut self.members)
            .into_iter()
            .chain(joined)
            .map(|(index, guard)| (self.lock.member(index).node.clone(), guard))
            .collect();
        let bound = self.node_timeout.max(UNLOCK_REPORT_WAIT);
        let reports = release_all(members, bound).await;
        let confirmed = reports.iter().filter(|report| report.is_ok()).count();
        if confirmed >= self.lock.quorum() {
            return Ok(());
        }
        let first_error = reports.into_iter().find_map(Result::err);
        Err(first_error.unwrap_or_else(|| LockError::NotOwner {
            name: self.lock.name().to_string(),
        }))
    }

    /// Takes the lock again for the same owner (a nested hold on every node that grants
    /// it), with this guard's lease kind, retrying for at most `wait`.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let outer = lock.acquire().await?;
    /// let inner = outer.reenter(Duration::ZERO).await?;
    /// inner.unlock().await?; // still held by `outer`
    /// # Ok(()) }
    /// ```
    pub async fn reenter(&self, wait: Duration) -> Result<RedLockGuard, LockError> {
        let mut options = AcquireOptions::new().owner(self.owner).wait(wait);
        if let Some(lease) = self.fixed_lease {
            options = options.lease(lease);
        }
        self.lock.acquire_with(options).await
    }

    fn mark_released(&mut self) {
        self.standing.send_if_modified(|s| {
            let held = s.status == Status::Held;
            if held {
                s.status = Status::Released;
            }
            held
        });
        self.stop.take();
    }
}

impl Drop for RedLockGuard {
    fn drop(&mut self) {
        // The member guards drop next, each releasing its node in the background.
        self.mark_released();
    }
}

impl std::fmt::Debug for RedLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedLockGuard")
            .field("name", &self.lock.name())
            .field("owner", &self.owner)
            .field("nodes_held", &self.nodes_held())
            .field("nodes_pending", &self.nodes_pending())
            .field("validity", &self.validity())
            .finish()
    }
}

type LostMember = Pin<Box<dyn Future<Output = usize> + Send>>;
/// A node's late answer to the acquire: its index, and its hold if it granted in time.
type JoiningMember = Pin<Box<dyn Future<Output = (usize, Option<LockGuard>)> + Send>>;

fn lock_joined(joined: &Joined) -> std::sync::MutexGuard<'_, Vec<(usize, LockGuard)>> {
    joined
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Renews a RedLock hold on every node and decides when it is lost.
struct Keeper {
    lock: RedLock,
    owner: LockOwner,
    lease: Duration,
    keeping: Keeping,
    /// Members (by index) not known to be lost.
    alive: Vec<usize>,
    standing: Arc<watch::Sender<Standing>>,
    joined: Joined,
    /// Late answers still awaited (see [`RedLockGuard::nodes_pending`]).
    pending: Arc<AtomicUsize>,
}

impl Drop for Keeper {
    fn drop(&mut self) {
        // However the keeper ends, the late answers it was waiting for are dropped with it
        // (a grant among them releases itself): none is awaited any more.
        self.pending.store(0, Ordering::Release);
    }
}

impl Keeper {
    async fn run(
        mut self,
        losts: Vec<LostMember>,
        joining: FuturesUnordered<JoiningMember>,
        mut stopped: oneshot::Receiver<()>,
    ) {
        // Whatever ends this task (the client's actor thread stopping included) ends the hold;
        // dropping `joining` then makes a grant still to come release itself.
        let _lost_on_exit = LostOnExit(self.standing.clone());
        let mut losts: FuturesUnordered<LostMember> = losts.into_iter().collect();
        let mut joining = joining;
        let quorum = self.lock.quorum();
        let mut next = match self.keeping {
            Keeping::Fixed => self.standing.borrow().valid_until,
            Keeping::Renewed { interval, .. } => Instant::now() + interval,
        };
        loop {
            tokio::select! {
                biased;
                _ = &mut stopped => return,
                Some(index) = losts.next() => {
                    self.alive.retain(|alive| *alive != index);
                    if self.alive.len() < quorum {
                        return self.lose("members were found gone on too many nodes");
                    }
                }
                Some((index, answer)) = joining.next() => {
                    if let Some(lost) = answer.and_then(|guard| self.join(index, guard)) {
                        losts.push(lost);
                    }
                    // After the join, so that a count of 0 means `nodes_held` is final.
                    self.pending.fetch_sub(1, Ordering::Release);
                }
                () = tokio::time::sleep_until(next.into()) => match self.keeping {
                    Keeping::Fixed => return self.lose("its validity ran out"),
                    Keeping::Renewed { interval, timeout } => {
                        let round = Instant::now();
                        // The validity ends on time even while a round waits for a node.
                        let valid_until = self.standing.borrow().valid_until;
                        let renewing = self.renew_all(timeout);
                        let Ok(renewed) =
                            tokio::time::timeout_at(valid_until.into(), renewing).await
                        else {
                            return self.lose("its validity ran out during a renewal round");
                        };
                        if renewed < quorum {
                            return self.lose("a renewal round reached fewer than a quorum of nodes");
                        }
                        let valid_until = round + self.lease - RedLock::clock_drift(self.lease);
                        self.standing.send_if_modified(|s| {
                            let held = s.status == Status::Held;
                            if held {
                                s.valid_until = valid_until;
                            }
                            held
                        });
                        next = round + interval;
                    }
                },
            }
        }
    }

    /// Adds a node that granted after the quorum to the hold, unless the hold has ended
    /// (then dropping its guard releases it). Returns the watch for the node's loss.
    fn join(&mut self, index: usize, guard: LockGuard) -> Option<LostMember> {
        let mut joined = lock_joined(&self.joined);
        // Checked under the lock the unlock takes after marking the hold released: a
        // hold is either added before the unlock collects them, or released here.
        if self.standing.borrow().status != Status::Held {
            return None;
        }
        let lost = guard.lost().map(move |()| index).boxed();
        joined.push((index, guard));
        self.alive.push(index);
        Some(lost)
    }

    /// Renews every live member at once; returns how many nodes confirmed.
    async fn renew_all(&self, timeout: Duration) -> usize {
        let renewals = self.alive.iter().map(|&index| {
            let member = self.lock.member(index);
            tokio::time::timeout(timeout, member.lock.renew(self.owner, self.lease))
        });
        join_all(renewals)
            .await
            .into_iter()
            .filter(|renewal| matches!(renewal, Ok(Ok(true))))
            .count()
    }

    fn lose(&self, why: &str) {
        let changed = self.standing.send_if_modified(|s| {
            let held = s.status == Status::Held;
            if held {
                s.status = Status::Lost;
            }
            held
        });
        if changed {
            tracing::warn!(
                lock = self.lock.name(),
                owner = self.owner.id(),
                why,
                nodes_alive = self.alive.len(),
                quorum = self.lock.quorum(),
                "RedLock lost"
            );
        }
    }
}

/// Marks a hold that is still `Held` as lost when the keeper ends.
struct LostOnExit(Arc<watch::Sender<Standing>>);

impl Drop for LostOnExit {
    fn drop(&mut self) {
        self.0.send_if_modified(|s| {
            let held = s.status == Status::Held;
            if held {
                s.status = Status::Lost;
            }
            held
        });
    }
}
