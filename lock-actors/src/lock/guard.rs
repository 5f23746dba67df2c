use super::{LockOwner, Released};
use crate::error::LockError;
use crate::keys::LockName;
use crate::loss_watch::LossWatch;
use crate::runtime::Errand;
use crate::telemetry::HoldTimer;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Proof that one hold of a lock is yours; the hold ends when the guard is released or dropped.
///
/// - [`unlock`](LockGuard::unlock) releases and reports how it went.
/// - Dropping the guard releases in the background (so `?`, early returns and panics release
///   too); the outcome is logged with `tracing`. A program that ends right after should
///   [`close`](crate::LockClient::close) its client, which waits for such releases.
/// - [`lost`](LockGuard::lost) resolves if the lock is lost while you hold it (the watchdog
///   found it gone, its fixed lease ran out, or it was force-released); stop the protected
///   work then.
///
/// The guard keeps its lock's actor alive, not the client: when the client shuts down,
/// renewals stop and the lock expires at its lease.
///
/// # Example
///
/// ```no_run
/// # use actix_distributed_lock::LockClient;
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let guard = client.lock("invoice:17")?.acquire().await?;
/// tokio::select! {
///     _ = guard.lost() => eprintln!("lock lost; abandoning the invoice"),
///     _ = async { /* protected work */ } => {}
/// }
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock at once; keep it for as long as the work needs the lock"]
pub struct LockGuard {
    /// The lock's actor side (see [`GuardLink`]): one per actor, shared by its guards.
    link: Arc<dyn GuardLink>,
    name: LockName,
    owner: LockOwner,
    hold: u64,
    lease: Option<Duration>,
    status: StatusReceiver,
    released: bool,
    token: Option<u64>,
    /// Records how long the hold lasted when the guard goes (with the `metrics` feature).
    _timer: HoldTimer,
}

/// What a guard asks of its lock's actor side, without naming the actor (which builds the
/// guards): the lock's state shared with fast-path callers implements it, one per actor,
/// so a guard's link costs no allocation per hold.
///
/// Whoever makes a guard first counts it out with the link (the link keeps the actor's
/// address while any guard is out); every guard then calls exactly one of
/// [`release`](GuardLink::release) and [`unlock`](GuardLink::unlock), which count it back.
pub(crate) trait GuardLink: Send + Sync {
    /// Releases the hold in the background (its guard was dropped).
    fn release(&self, owner: LockOwner, hold: u64);
    /// Releases the hold and reports how it went: straight to Redis for a hold still on
    /// the fast path, else through the actor. The release is on its way on return.
    fn unlock(self: Arc<Self>, owner: LockOwner, hold: u64) -> Reply<Released>;
    /// Restarts `hold`'s fixed lease from now (see [`RestartLease`](super::RestartLease)).
    fn restart_lease(&self, owner: LockOwner, hold: u64, lease: Duration) -> Reply<bool>;
    /// Takes the lock again for `owner` (a nested hold), as an acquire of the actor would.
    fn reenter(
        &self,
        owner: LockOwner,
        lease: Option<Duration>,
        wait: Duration,
        fenced: bool,
    ) -> Reply<LockGuard>;
}

/// A reply a [`GuardLink`] is about to give.
pub(crate) type Reply<T> = Pin<Box<dyn Future<Output = Result<T, LockError>> + Send>>;

impl LockGuard {
    /// A guard for `hold`; the caller has counted it out with `link` (see [`GuardLink`]).
    pub(crate) fn new(
        link: Arc<dyn GuardLink>,
        name: LockName,
        owner: LockOwner,
        hold: u64,
        lease: Option<Duration>,
        status: StatusReceiver,
    ) -> Self {
        LockGuard {
            link,
            name,
            owner,
            hold,
            lease,
            status,
            released: false,
            token: None,
            _timer: HoldTimer::default(),
        }
    }

    /// Times the hold with `timer` (recorded when the guard goes).
    pub(crate) fn timed(mut self, timer: HoldTimer) -> Self {
        self._timer = timer;
        self
    }

    pub(crate) fn with_token(mut self, token: Option<u64>) -> Self {
        self.token = token;
        self
    }

    /// The fencing token of this hold, for a fenced acquisition (`None` otherwise).
    ///
    /// Tokens of one lock name strictly increase with every fenced acquisition. Send the
    /// token with every write to the protected storage and have the storage refuse a token
    /// lower than the highest it has seen: a holder that lost its lock during a pause is then
    /// refused, even if it does not know yet.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.fenced_lock("ledger")?.acquire().await?;
    /// let token = guard.fencing_token().expect("fenced");
    /// // storage.write_if_newer(token, ...)
    /// # Ok(()) }
    /// ```
    pub fn fencing_token(&self) -> Option<u64> {
        self.token
    }

    /// The lock's name as the caller gave it, without the client's namespace (see
    /// [`Lock::name`](crate::Lock::name)).
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.lock("a")?.acquire().await?;
    /// assert_eq!(guard.name(), "a");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.name.unmapped()
    }

    /// The lock's Redis key, its name mapped into the client's namespace (see
    /// [`Lock::key`](crate::Lock::key)).
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.lock("a")?.acquire().await?;
    /// assert!(guard.key().ends_with("a"));
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        self.name.as_str()
    }

    /// The owner this hold belongs to; acquire again with it to re-enter.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.lock("a")?.acquire().await?;
    /// let owner = guard.owner();
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> LockOwner {
        self.owner
    }

    /// Releases this hold. Returns [`Released::Unlocked`] when it was the last one.
    ///
    /// Errors: [`LockError::NotOwner`] when the lock was lost or its lease ran out before
    /// the unlock (nothing is changed in Redis); [`LockError::Unavailable`] when Redis did not
    /// answer (the lock then expires at its lease; renewal has already stopped).
    ///
    /// # Cancel safety
    ///
    /// The release is sent before the first `.await` point completes; dropping the future
    /// after that only loses the report, not the release.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.lock("a")?.acquire().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn unlock(mut self) -> Result<Released, LockError> {
        self.released = true;
        self.link.clone().unlock(self.owner, self.hold).await
    }

    /// Takes the lock again for the same owner (a nested hold), with this guard's lease kind.
    ///
    /// Succeeds at once while this guard still holds the lock; if it was lost meanwhile this
    /// waits like any acquire, for at most `wait`.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let outer = client.lock("a")?.acquire().await?;
    /// let inner = outer.reenter(Duration::ZERO).await?;
    /// # Ok(()) }
    /// ```
    pub async fn reenter(&self, wait: Duration) -> Result<LockGuard, LockError> {
        let fenced = self.token.is_some();
        self.link
            .reenter(self.owner, self.lease, wait, fenced)
            .await
    }

    /// Restarts this hold's fixed lease from now (a MultiLock member once its set is
    /// complete); whether the owner still holds the lock.
    pub(crate) async fn restart_lease(&self, lease: Duration) -> Result<bool, LockError> {
        self.link.restart_lease(self.owner, self.hold, lease).await
    }

    /// Resolves when the lock is lost while this guard holds it. It also resolves when the
    /// client shuts down, since nothing keeps the lock alive after that. After a normal
    /// release it never resolves.
    ///
    /// The future does not borrow the guard: it can be moved into another task.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.lock("a")?.acquire().await?;
    /// let lost = guard.lost();
    /// tokio::spawn(async move { lost.await; eprintln!("lost it") });
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let status = self.status.clone();
        async move { status.ended_by_loss().await }
    }

    /// True once the lock is known to be lost (see [`lost`](LockGuard::lost)).
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.lock("a")?.acquire().await?;
    /// assert!(!guard.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.status.get() == HoldStatus::Lost
    }

    /// [`is_lost`](LockGuard::is_lost) and [`lost`](LockGuard::lost) without the guard, for
    /// code that reports on a hold it does not own (`#[distributed_lock]`'s `current()`).
    pub(crate) fn loss_watch(&self) -> LossWatch {
        let (now, later) = (self.status.clone(), self.status.clone());
        LossWatch::new(
            move || now.get() == HoldStatus::Lost,
            move || Box::pin(later.clone().ended_by_loss()),
        )
    }
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("name", &self.name)
            .field("owner", &self.owner)
            .field("hold", &self.hold)
            .field("lease", &self.lease)
            .finish()
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            self.link.release(self.owner, self.hold);
        }
    }
}

/// Release the hold a guard stands for (sent by the guard itself).
pub(crate) struct ReleaseHold {
    pub(crate) owner: LockOwner,
    pub(crate) hold: u64,
    /// Counts the release as under way from the moment the guard let go until Redis has
    /// answered it, so a client's close waits for it.
    pub(crate) errand: Errand,
}

impl actix::Message for ReleaseHold {
    type Result = Result<Released, LockError>;
}

/// Where a holder's holds stand, as its guards see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoldStatus {
    Held,
    Released,
    Lost,
}

impl HoldStatus {
    fn from_u8(value: u8) -> Self {
        match value {
            0 => HoldStatus::Held,
            1 => HoldStatus::Released,
            _ => HoldStatus::Lost,
        }
    }

    fn as_u8(self) -> u8 {
        match self {
            HoldStatus::Held => 0,
            HoldStatus::Released => 1,
            HoldStatus::Lost => 2,
        }
    }
}

/// A holder's status, shared by the actor (one sender) and its guards (receivers): a
/// byte and a `Notify`, far lighter than a watch channel (this is per held lock).
///
/// The cell also carries the hold's deadline: the instant its lease surely ends unless a
/// renewal confirms it first. A guard reads it on its own clock, so `is_lost()` and
/// `lost()` turn at the deadline even while the client's actors are too busy to say so
/// (a burst of thousands of waiters giving up at once).
struct StatusCell {
    value: AtomicU8,
    /// Microseconds since [`base`]; `u64::MAX`: no deadline (nothing times this hold).
    deadline: AtomicU64,
    changed: Notify,
}

/// The origin of the deadlines kept as microseconds.
fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

const NO_DEADLINE: u64 = u64::MAX;

impl StatusCell {
    fn set_deadline(&self, deadline: Option<Instant>) {
        let micros = deadline.map_or(NO_DEADLINE, |d| {
            d.saturating_duration_since(base()).as_micros() as u64
        });
        self.deadline.store(micros, Ordering::SeqCst);
        // A `lost()` future sleeping on the old deadline picks the new one up.
        self.changed.notify_waiters();
    }

    fn deadline(&self) -> Option<Instant> {
        match self.deadline.load(Ordering::SeqCst) {
            NO_DEADLINE => None,
            micros => Some(base() + Duration::from_micros(micros)),
        }
    }

    /// `Held` becomes `Lost` (waking `lost()` futures); any other status stays.
    fn lose(&self) {
        let held = HoldStatus::Held.as_u8();
        let lost = HoldStatus::Lost.as_u8();
        if self
            .value
            .compare_exchange(held, lost, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            self.changed.notify_waiters();
        }
    }

    /// The status, with a `Held` whose deadline has passed turned `Lost` for good.
    fn get(&self) -> HoldStatus {
        let status = HoldStatus::from_u8(self.value.load(Ordering::SeqCst));
        if status == HoldStatus::Held && self.deadline().is_some_and(|d| Instant::now() >= d) {
            self.lose();
            return HoldStatus::from_u8(self.value.load(Ordering::SeqCst));
        }
        status
    }
}

/// The actor's end: sets the status. Dropping it while still `Held` (the actor is gone,
/// nothing renews any more) counts as a loss.
pub(crate) struct StatusSender(Arc<StatusCell>);

/// A guard's end: reads the status and waits for it to end.
#[derive(Clone)]
pub(crate) struct StatusReceiver(Arc<StatusCell>);

impl StatusSender {
    /// A new status, `Held`, and one receiver of it.
    pub(crate) fn held() -> (Self, StatusReceiver) {
        let cell = Arc::new(StatusCell {
            value: AtomicU8::new(HoldStatus::Held.as_u8()),
            deadline: AtomicU64::new(NO_DEADLINE),
            changed: Notify::new(),
        });
        (StatusSender(cell.clone()), StatusReceiver(cell))
    }

    pub(crate) fn subscribe(&self) -> StatusReceiver {
        StatusReceiver(self.0.clone())
    }

    /// The watchdog's handle: it moves the deadline at each confirmed renewal and turns
    /// `Held` into `Lost` the moment it finds the hold gone, so the guards hear of it at
    /// once, not behind the lock actor's mailbox.
    pub(crate) fn loser(&self) -> StatusLoser {
        StatusLoser(self.0.clone())
    }

    /// Until when the hold surely lasts (`None`: nothing times it here); past it the
    /// guards see `Lost` on their own.
    pub(crate) fn set_deadline(&self, deadline: Option<Instant>) {
        self.0.set_deadline(deadline);
    }

    pub(crate) fn send_replace(&self, status: HoldStatus) {
        self.0.value.store(status.as_u8(), Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

/// Marks a hold lost unless it has been released already (see [`StatusSender::loser`]).
pub(crate) struct StatusLoser(Arc<StatusCell>);

impl StatusLoser {
    /// `Held` becomes `Lost` and waiting `lost()` futures wake; any other status stays.
    pub(crate) fn lose(&self) {
        self.0.lose();
    }

    /// A renewal confirmed the hold until `deadline`.
    pub(crate) fn set_deadline(&self, deadline: Instant) {
        self.0.set_deadline(Some(deadline));
    }
}

impl Drop for StatusSender {
    fn drop(&mut self) {
        let held = HoldStatus::Held.as_u8();
        let lost = HoldStatus::Lost.as_u8();
        let _ = self
            .0
            .value
            .compare_exchange(held, lost, Ordering::SeqCst, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

impl StatusReceiver {
    fn get(&self) -> HoldStatus {
        self.0.get()
    }

    /// Returns once the status is `Lost` (or the deadline has passed while `Held`); never
    /// if it is `Released`.
    async fn ended_by_loss(self) {
        loop {
            let changed = self.0.changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so a change right after it is not missed.
            changed.as_mut().enable();
            match self.get() {
                HoldStatus::Lost => return,
                HoldStatus::Released => std::future::pending::<()>().await,
                HoldStatus::Held => match self.0.deadline() {
                    Some(deadline) => {
                        tokio::select! {
                            () = changed => {}
                            () = tokio::time::sleep_until(deadline.into()) => {}
                        }
                    }
                    None => changed.await,
                },
            }
        }
    }
}
