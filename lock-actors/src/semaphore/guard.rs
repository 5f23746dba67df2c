//! What a semaphore holder keeps: [`SemaphoreGuard`] (plain) and [`PermitGuard`]
//! (permit-expirable), and permit ids.

use crate::error::LockError;
use crate::keys::LockName;
use crate::lease::loss::LossSignal;
use crate::lease::status::StatusReceiver;
use crate::reply::Detached;
use crate::runtime::{Errand, Errands};
use crate::telemetry::HoldTimer;
use actix::Recipient;
use std::future::Future;
use std::time::Duration;

mod lease;

pub(crate) use lease::UpdateGrantLease;

/// One permit id: 16 random bytes, shown as 32 lowercase hex digits (Redisson's shape).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct PermitId {
    pub(crate) raw: Vec<u8>,
    pub(crate) hex: String,
}

impl PermitId {
    pub(crate) fn random() -> Self {
        let id = uuid::Uuid::new_v4();
        PermitId {
            raw: id.as_bytes().to_vec(),
            hex: id.simple().to_string(),
        }
    }

    /// Parses an id as a guard shows it; `None` when it is not whole bytes of hex.
    pub(crate) fn parse(hex: &str) -> Option<Self> {
        if hex.is_empty() || !hex.len().is_multiple_of(2) || !hex.is_ascii() {
            return None;
        }
        let raw = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
            .collect::<Option<Vec<u8>>>()?;
        Some(PermitId {
            raw,
            hex: hex.to_ascii_lowercase(),
        })
    }
}

/// Permits taken from a plain [`Semaphore`](crate::Semaphore); they go back when this is
/// released or dropped.
///
/// - [`release`](SemaphoreGuard::release) gives them back and reports how it went.
/// - Dropping it gives them back in the background (so `?`, early returns and panics do
///   too). A program that ends right after should [`close`](crate::LockClient::close) its
///   client, which waits for that: otherwise the permits may stay taken for good.
/// - [`forget`](SemaphoreGuard::forget) keeps them taken, to be released later by anyone
///   with [`Semaphore::release`](crate::Semaphore::release), as with Redisson.
///
/// Plain permits have no lease: if the process dies holding them they stay taken until an
/// operator sets the count again. Use a [`PermitGuard`] (permit-expirable semaphore) where
/// that matters.
///
/// # Example
///
/// ```no_run
/// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
/// let permits = client.semaphore("uploads")?.acquire(2).await?;
/// assert_eq!(permits.permits(), 2);
/// // ... two uploads at once ...
/// permits.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the permits gives them back at once; keep them for as long as the work needs them"]
pub struct SemaphoreGuard {
    /// Where the permits go back: the semaphore's actor (a recipient, so that this module
    /// does not name the actor, which builds the guard).
    actor: Recipient<Detached<ReturnPermits>>,
    /// The client's errands: a release in the background counts as one until Redis
    /// answers it.
    errands: Errands,
    name: LockName,
    permits: u32,
    released: bool,
    /// Records how long the permits were held when the guard goes (`metrics` feature).
    _timer: HoldTimer,
}

impl SemaphoreGuard {
    pub(crate) fn new(
        actor: Recipient<Detached<ReturnPermits>>,
        errands: Errands,
        name: LockName,
        permits: u32,
    ) -> Self {
        SemaphoreGuard {
            actor,
            errands,
            name,
            permits,
            released: false,
            _timer: HoldTimer::default(),
        }
    }

    /// Times the hold with `timer` (recorded when the guard goes).
    pub(crate) fn timed(mut self, timer: HoldTimer) -> Self {
        self._timer = timer;
        self
    }

    /// How many permits this holds.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// assert_eq!(client.semaphore("s")?.acquire(3).await?.permits(), 3);
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The semaphore's name as the caller gave it, without the client's namespace.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// assert_eq!(client.semaphore("s")?.acquire(1).await?.name(), "s");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.name.unmapped()
    }

    /// Gives the permits back and wakes waiters.
    ///
    /// Errors: [`LockError::Unavailable`] when Redis did not answer (the permits may or may
    /// not be back; plain permits have no lease to fall back on), [`LockError::WrongType`]
    /// when the key was overwritten with other data, [`LockError::Shutdown`].
    ///
    /// # Cancel safety
    ///
    /// The release is sent before the first `.await` completes; dropping the future after
    /// that only loses the report.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// client.semaphore("s")?.acquire(1).await?.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(mut self) -> Result<(), LockError> {
        self.released = true;
        // Carried out even if this future is dropped before the actor's turn.
        let (message, answer) = Detached::new(
            &self.actor,
            ReturnPermits {
                permits: self.permits,
                to_redis: true,
                errand: Some(self.errands.start()),
            },
        );
        self.actor.do_send(message);
        answer.await?
    }

    /// Keeps the permits taken and returns how many there are: nothing is sent to Redis now
    /// or on drop. Release them later with [`Semaphore::release`](crate::Semaphore::release).
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let semaphore = client.semaphore("s")?;
    /// let taken = semaphore.acquire(2).await?.forget();
    /// // ... later, maybe in another process ...
    /// semaphore.release(taken).await?;
    /// # Ok(()) }
    /// ```
    pub fn forget(mut self) -> u32 {
        self.released = true;
        // Only the actor's count of permits out through guards changes.
        self.actor.do_send(Detached::unanswered(
            &self.actor,
            ReturnPermits {
                permits: self.permits,
                to_redis: false,
                errand: None,
            },
        ));
        self.permits
    }
}

impl std::fmt::Debug for SemaphoreGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemaphoreGuard")
            .field("name", &self.name)
            .field("permits", &self.permits)
            .finish()
    }
}

impl Drop for SemaphoreGuard {
    fn drop(&mut self) {
        if !self.released {
            self.actor.do_send(Detached::unanswered(
                &self.actor,
                ReturnPermits {
                    permits: self.permits,
                    to_redis: true,
                    errand: Some(self.errands.start()),
                },
            ));
        }
    }
}

/// Permits taken from a [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore), each
/// with an id and a lease; they go back when this is released or dropped, or on their own
/// when their lease runs out.
///
/// - Taken without a lease, the permits are renewed every lease/3 (the lease being the
///   client's watchdog timeout) while this guard lives; renewal stops the moment it is
///   released or dropped, or the client shuts down.
/// - Taken with a fixed lease, nothing renews them: they expire at the lease.
/// - [`lost`](PermitGuard::lost) resolves when the permits are known gone (a renewal found
///   them missing or expired, or the fixed lease ran out): stop the protected work then.
///
/// # Example
///
/// ```no_run
/// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
/// let guard = client.expirable_semaphore("render-slots")?.acquire(1).await?;
/// tokio::select! {
///     _ = guard.lost() => eprintln!("permit {} lost; abandoning the render", guard.permit_id()),
///     _ = async { /* protected work */ } => {}
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases its permits at once; keep it for as long as the work needs them"]
pub struct PermitGuard {
    /// Where the permits go back: the semaphore's actor.
    actor: Recipient<Detached<ReleaseGrant>>,
    /// Where their lease is set again: the same actor.
    lease_actor: Recipient<Detached<UpdateGrantLease>>,
    /// The client's errands, as [`SemaphoreGuard`]'s.
    errands: Errands,
    name: LockName,
    grant: u64,
    ids: Vec<String>,
    lease: Option<Duration>,
    /// The grant's status, with the deadline of its lease (the earliest of its permits'):
    /// `lost()` turns at it on this guard's own clock, not behind the semaphore actor.
    status: StatusReceiver,
    released: bool,
    /// Records how long the permits were held when the guard goes (`metrics` feature).
    _timer: HoldTimer,
}

impl PermitGuard {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        actor: Recipient<Detached<ReleaseGrant>>,
        lease_actor: Recipient<Detached<UpdateGrantLease>>,
        errands: Errands,
        name: LockName,
        grant: u64,
        ids: Vec<String>,
        lease: Option<Duration>,
        status: StatusReceiver,
    ) -> Self {
        PermitGuard {
            actor,
            lease_actor,
            errands,
            name,
            grant,
            ids,
            lease,
            status,
            released: false,
            _timer: HoldTimer::default(),
        }
    }

    /// Times the hold with `timer` (recorded when the guard goes).
    pub(crate) fn timed(mut self, timer: HoldTimer) -> Self {
        self._timer = timer;
        self
    }

    /// The id of the (first) permit: 32 hex digits, as Redisson shows permit ids. Another
    /// process may release it by id with
    /// [`PermitExpirableSemaphore::release`](crate::PermitExpirableSemaphore::release).
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.expirable_semaphore("s")?.acquire(1).await?;
    /// assert_eq!(guard.permit_id().len(), 32);
    /// # Ok(()) }
    /// ```
    pub fn permit_id(&self) -> &str {
        self.ids.first().map_or("", String::as_str)
    }

    /// The ids of every permit this guard holds (one per permit acquired).
    ///
    /// ```no_run
    /// # use actix_distributed_lock::PermitOptions;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.expirable_semaphore("s")?.acquire_with(PermitOptions::new().permits(3)).await?;
    /// assert_eq!(guard.permit_ids().len(), 3);
    /// # Ok(()) }
    /// ```
    pub fn permit_ids(&self) -> &[String] {
        &self.ids
    }

    /// How many permits this guard holds (as [`SemaphoreGuard::permits`]).
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// assert_eq!(client.expirable_semaphore("s")?.acquire(2).await?.permits(), 2);
    /// # Ok(()) }
    /// ```
    pub fn permits(&self) -> u32 {
        u32::try_from(self.ids.len()).unwrap_or(u32::MAX)
    }

    /// The semaphore's name as the caller gave it, without the client's namespace.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// assert_eq!(client.expirable_semaphore("s")?.acquire(1).await?.name(), "s");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.name.unmapped()
    }

    /// The fixed lease the permits were taken with; `None` when they are renewed.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// assert_eq!(client.expirable_semaphore("s")?.acquire(1).await?.lease(), None);
    /// # Ok(()) }
    /// ```
    pub fn lease(&self) -> Option<Duration> {
        self.lease
    }

    /// Releases the permits and wakes waiters.
    ///
    /// Errors: [`LockError::NotOwner`] when some permit was no longer out (its lease ran out,
    /// or someone released it by id); any permit still recorded goes back regardless.
    /// [`LockError::Unavailable`] when Redis did not answer (renewal has already stopped, so
    /// the permits return at their lease at the latest).
    ///
    /// # Cancel safety
    ///
    /// The release is sent before the first `.await` completes; dropping the future after
    /// that only loses the report.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// client.expirable_semaphore("s")?.acquire(1).await?.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(mut self) -> Result<(), LockError> {
        self.released = true;
        // Carried out even if this future is dropped before the actor's turn.
        let (message, answer) = Detached::new(
            &self.actor,
            ReleaseGrant {
                grant: self.grant,
                ids: std::mem::take(&mut self.ids),
                errand: self.errands.start(),
            },
        );
        self.actor.do_send(message);
        answer.await?
    }

    /// Resolves when the permits are lost while this guard holds them: a renewal found one
    /// gone or expired, the fixed lease ran out, or the client shut down (nothing renews them
    /// after that). After a normal release it never resolves.
    ///
    /// The future does not borrow the guard: it can be moved into another task.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.expirable_semaphore("s")?.acquire(1).await?;
    /// let lost = guard.lost();
    /// tokio::spawn(async move { lost.await; eprintln!("permit lost") });
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let status = self.status.clone();
        async move { status.ended_by_loss().await }
    }

    /// True once the permits are known lost (see [`lost`](PermitGuard::lost)).
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.expirable_semaphore("s")?.acquire(1).await?;
    /// assert!(!guard.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.status.is_lost()
    }

    /// [`is_lost`](PermitGuard::is_lost) and [`lost`](PermitGuard::lost) without the
    /// guard, for code that reports on a hold it does not own.
    pub(crate) fn loss_signal(&self) -> LossSignal {
        let (now, later) = (self.status.clone(), self.status.clone());
        LossSignal::new(
            move || now.is_lost(),
            move || Box::pin(later.clone().ended_by_loss()),
        )
    }
}

impl std::fmt::Debug for PermitGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermitGuard")
            .field("name", &self.name)
            .field("ids", &self.ids)
            .field("lease", &self.lease)
            .finish()
    }
}

impl Drop for PermitGuard {
    fn drop(&mut self) {
        if !self.released {
            self.actor.do_send(Detached::unanswered(
                &self.actor,
                ReleaseGrant {
                    grant: self.grant,
                    ids: std::mem::take(&mut self.ids),
                    errand: self.errands.start(),
                },
            ));
        }
    }
}

/// Plain permits a guard stood for are no longer out through it: give them back to Redis
/// (`to_redis`), or only stop counting them (forgotten). Sent by the guard itself.
///
/// The actor counts permits out through guards and stays alive while any are, so this
/// message, sent as the last guard drops its address, is always handled.
pub(crate) struct ReturnPermits {
    pub(crate) permits: u32,
    pub(crate) to_redis: bool,
    /// Counts the return as under way until the actor has taken it over (see
    /// `SemaphoreActor::background`), so a client's close waits for it.
    pub(crate) errand: Option<Errand>,
}

impl actix::Message for ReturnPermits {
    type Result = Result<(), LockError>;
}

/// Release the permits a guard stands for (sent by the guard itself).
pub(crate) struct ReleaseGrant {
    pub(crate) grant: u64,
    pub(crate) ids: Vec<String>,
    /// Counts the release as under way until the actor has taken it over, as
    /// [`ReturnPermits::errand`].
    pub(crate) errand: Errand,
}

impl actix::Message for ReleaseGrant {
    type Result = Result<(), LockError>;
}
