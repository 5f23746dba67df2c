//! `RedLockGuard`: one RedLock hold and its validity, as the keeper (see `keeper`)
//! reports it; releasing it on every node.

use super::keeper::{lock_joined, Joined, Keeper, Keeping, Standing, Status};
use super::{Answer, RedLock};
use crate::compose::release_all;
use crate::error::LockError;
use crate::lock::{LockGuard, LockOwner};

use futures_util::FutureExt;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};

mod extend;

/// The shortest wait for each node's report in [`RedLockGuard::unlock`]: a release is not
/// in a race against a lease, and a report missed on a loaded machine would turn a good
/// release into an error.
const UNLOCK_REPORT_WAIT: Duration = Duration::from_millis(500);

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

/// Proof that a [`RedLock`] is yours on a quorum of nodes, for as long as
/// [`validity`](RedLockGuard::validity) is above zero.
///
/// - [`validity`](RedLockGuard::validity) is the time left in which no other owner can hold
///   the lock (given the guarantees on [`RedLock`]); finish or check in before it runs out.
///   In the watchdog mode it moves on as the members' nodes confirm their renewals.
/// - [`lost`](RedLockGuard::lost) resolves when a quorum can no longer be held: fewer than
///   a quorum of members are being renewed, members were found gone on too many nodes, or
///   the validity ran out.
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
    pub(super) lock: RedLock,
    owner: LockOwner,
    pub(super) fixed_lease: Option<Duration>,
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
            .find_map(|(index, _)| lock.member(*index).lock.client().node().ok());
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
    /// the attempt's first request; in the watchdog mode it then runs to the quorum-th
    /// latest end of the members' confirmed renewals (send time + lease), less the drift.
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
