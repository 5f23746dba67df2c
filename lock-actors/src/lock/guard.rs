use super::{LockOwner, Released};
use crate::error::LockError;
use crate::keys::LockName;
use crate::lease::loss::LossSignal;
use crate::lease::status::StatusReceiver;
use crate::runtime::Errand;
use crate::telemetry::HoldTimer;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

mod lease;

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
    /// Sets `hold`'s fixed lease again from now (see [`ExtendHold`](super::ExtendHold)).
    fn extend(&self, owner: LockOwner, hold: u64, lease: Duration) -> Reply<()>;
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
    /// waits like any acquire, for at most `wait`. If Redis had forgotten this guard's hold
    /// without a word (a failover to a replica that never saw it), the re-entry takes the
    /// lock anew and this guard hears [`lost`](LockGuard::lost) as the re-entry returns.
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
        self.status.is_lost()
    }

    /// [`is_lost`](LockGuard::is_lost) and [`lost`](LockGuard::lost) without the guard, for
    /// code that reports on a hold it does not own (`#[distributed_lock]`'s `current()`).
    pub(crate) fn loss_signal(&self) -> LossSignal {
        let (now, later) = (self.status.clone(), self.status.clone());
        LossSignal::new(
            move || now.is_lost(),
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
