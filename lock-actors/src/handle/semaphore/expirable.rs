//! The permit-expirable semaphore's handle ([`PermitExpirableSemaphore`]) and how to take its
//! permits ([`PermitOptions`]).

use crate::client::LockClient;
use crate::error::LockError;
use crate::keys::LockName;
use crate::semaphore::{
    AcquireExpirablePermits, AddPermits, AvailablePermits, Kind, PermitGuard, ReleasePermit,
    SemaphoreActor, SetPermits, TrySetPermits,
};
use crate::telemetry;
use actix::Addr;
use std::time::Duration;

/// How to take permits of a [`PermitExpirableSemaphore`]: how many, how long to wait, which
/// lease.
///
/// The defaults are one permit, the client's default wait, and renewal (no fixed lease).
///
/// # Example
///
/// ```
/// use actix_distributed_lock::PermitOptions;
/// use std::time::Duration;
///
/// let options = PermitOptions::new()
///     .permits(2)
///     .wait(Duration::from_secs(1))
///     .lease(Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PermitOptions {
    permits: u32,
    wait: Option<Duration>,
    lease: Option<Duration>,
}

impl Default for PermitOptions {
    fn default() -> Self {
        PermitOptions {
            permits: 1,
            wait: None,
            lease: None,
        }
    }
}

impl PermitOptions {
    /// One permit, the client's default wait, renewed while held.
    ///
    /// ```
    /// # use actix_distributed_lock::PermitOptions;
    /// assert_eq!(PermitOptions::new(), PermitOptions::default());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Take `permits` permits at once (all or none); at least 1.
    ///
    /// ```
    /// # use actix_distributed_lock::PermitOptions;
    /// let options = PermitOptions::new().permits(3);
    /// ```
    pub fn permits(mut self, permits: u32) -> Self {
        self.permits = permits;
        self
    }

    /// Wait at most `wait` while too few permits are free (`Duration::ZERO`: try once).
    ///
    /// ```
    /// # use actix_distributed_lock::PermitOptions;
    /// # use std::time::Duration;
    /// let options = PermitOptions::new().wait(Duration::from_millis(250));
    /// ```
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Hold the permits for exactly `lease` (at least 1 ms), with no renewal: they come back
    /// on their own when it runs out.
    ///
    /// ```
    /// # use actix_distributed_lock::PermitOptions;
    /// # use std::time::Duration;
    /// let options = PermitOptions::new().lease(Duration::from_secs(10));
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }
}

/// A distributed semaphore whose permits have ids and leases (Redisson's
/// `RPermitExpirableSemaphore`): a dead holder's permits come back on their own.
///
/// Get one with [`LockClient::expirable_semaphore`]; set its permits once with
/// [`try_set_permits`](PermitExpirableSemaphore::try_set_permits). Each acquire returns a
/// [`PermitGuard`] carrying the permit ids. Taken without a lease, permits are renewed every
/// lease/3 (the lease being the client's watchdog timeout, 30 s by default) while the guard
/// lives, and [`PermitGuard::lost`] tells you if a renewal finds them gone. Redisson's own
/// lease-less permits never expire; ours always have a lease.
///
/// Expired permits go back to the count on the next acquire (or
/// [`available_permits`](PermitExpirableSemaphore::available_permits)); a waiter that found
/// too few sleeps at most until the next permit's expiry, so it picks up a dead holder's
/// permit within that permit's lease. Waiting is otherwise as for [`Semaphore`](crate::Semaphore).
///
/// Guarantees and limits: see [`LockClient::expirable_semaphore`].
///
/// # Redisson compatibility
///
/// Same data as Redisson's `RPermitExpirableSemaphore`: the string key `name` holds the
/// available permits, the zset `{name}:timeout` (`name:timeout` when the name already
/// contains a `{`) maps each permit id (16 raw bytes; shown as 32 hex digits) to its expiry
/// in ms since the epoch, and releases publish on `redisson_sc:{name}`. Both sides take back
/// expired permits on acquire. Differences: Redisson stamps expiries with the client's clock,
/// we use the Redis server's (`TIME`); Redisson's lease-less permits never expire (score
/// 922337203685477), ours are renewed instead.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::{LockClient, PermitOptions};
/// use std::time::Duration;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = LockClient::from_url("redis://127.0.0.1:6379/").await?;
/// let slots = client.expirable_semaphore("transcoders")?;
/// slots.try_set_permits(2).await?;
///
/// // Renewed while held; lost() fires if the permit disappears.
/// let guard = slots.acquire(1).await?;
/// guard.release().await?;
///
/// // A fixed lease: back on its own after 10 s even if this process dies.
/// let options = PermitOptions::new().lease(Duration::from_secs(10)).wait(Duration::ZERO);
/// let guard = slots.acquire_with(options).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    pub(super) client: LockClient,
    pub(super) name: LockName,
}

impl std::fmt::Debug for PermitExpirableSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermitExpirableSemaphore")
            .field("name", &self.name)
            .finish()
    }
}

impl PermitExpirableSemaphore {
    pub(crate) fn new(client: LockClient, name: LockName) -> Self {
        PermitExpirableSemaphore { client, name }
    }

    /// The semaphore's name as the caller gave it, without the client's namespace (the key
    /// of its permit count is the name mapped into the namespace).
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// assert_eq!(client.expirable_semaphore("s")?.name(), "s");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.name.unmapped()
    }

    /// Takes `permits` permits (all or none), renewed while held, waiting at most the
    /// client's default wait. The same shape as [`Semaphore::acquire`](crate::Semaphore::acquire).
    ///
    /// Errors as [`Semaphore::acquire`](crate::Semaphore::acquire).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind: a queued request is withdrawn, and permits
    /// granted after the drop are released at once.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.expirable_semaphore("s")?.acquire(1).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self, permits: u32) -> Result<PermitGuard, LockError> {
        self.acquire_with(PermitOptions::new().permits(permits))
            .await
    }

    /// Takes `permits` permits, renewed while held, waiting at most `wait`. The same shape
    /// as [`Semaphore::acquire_timeout`](crate::Semaphore::acquire_timeout).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](PermitExpirableSemaphore::acquire).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let slots = client.expirable_semaphore("s")?;
    /// let guard = slots.acquire_timeout(1, Duration::from_secs(1)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(
        &self,
        permits: u32,
        wait: Duration,
    ) -> Result<PermitGuard, LockError> {
        self.acquire_with(PermitOptions::new().permits(permits).wait(wait))
            .await
    }

    /// Tries once, without waiting: `Ok(None)` when fewer than `permits` are free. The same
    /// shape as [`Semaphore::try_acquire`](crate::Semaphore::try_acquire).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](PermitExpirableSemaphore::acquire).
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// if let Some(guard) = client.expirable_semaphore("s")?.try_acquire(1).await? {
    ///     // got one
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self, permits: u32) -> Result<Option<PermitGuard>, LockError> {
        let options = PermitOptions::new().permits(permits).wait(Duration::ZERO);
        match self.acquire_with(options).await {
            Ok(guard) => Ok(Some(guard)),
            Err(LockError::Timeout { .. }) => Ok(None),
            Err(other) => Err(other),
        }
    }

    /// Takes permits as `options` say (how many, wait, fixed lease).
    ///
    /// Errors as [`Semaphore::acquire`](crate::Semaphore::acquire); [`LockError::InvalidConfig`] also for a zero lease.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](PermitExpirableSemaphore::acquire).
    ///
    /// ```no_run
    /// # use actix_distributed_lock::PermitOptions;
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let options = PermitOptions::new().permits(2).lease(Duration::from_secs(30));
    /// let guard = client.expirable_semaphore("s")?.acquire_with(options).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_with(&self, options: PermitOptions) -> Result<PermitGuard, LockError> {
        let request = AcquireExpirablePermits {
            permits: options.permits,
            wait: options.wait.unwrap_or(self.client.config().default_wait),
            lease: options.lease,
        };
        let asking = async {
            self.client
                .ask::<SemaphoreActor, _>((Kind::Expirable, self.name.clone()), request)
                .await?
        };
        telemetry::acquire(Kind::Expirable, &self.name, self.client.config(), asking).await
    }

    /// Releases the permit `permit_id`, whoever holds it (Redisson's `release(permitId)`).
    ///
    /// Fails with [`LockError::NotOwner`] when that permit is not out (never was, already
    /// released, or expired). A local guard holding it stops renewing it.
    ///
    /// # Cancel safety
    ///
    /// The request goes to the actor on the first poll; dropping the future after that
    /// loses only the answer, not the change.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient, id: String) -> Result<(), actix_distributed_lock::LockError> {
    /// client.expirable_semaphore("s")?.release(&id).await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(&self, permit_id: &str) -> Result<(), LockError> {
        let request = ReleasePermit {
            permit_id: permit_id.to_string(),
        };
        self.client
            .ask_detached::<SemaphoreActor, _>((Kind::Expirable, self.name.clone()), request)
            .await?
    }

    /// Sets the permits to `permits` only if they were never set; returns whether it did.
    /// Atomic: of many processes starting at once, exactly one sets them.
    ///
    /// # Cancel safety
    ///
    /// The request goes to the actor on the first poll; dropping the future after that
    /// loses only the answer, not the change.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let first = client.expirable_semaphore("s")?.try_set_permits(5).await?;
    /// # Ok(()) }
    /// ```
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool, LockError> {
        self.client
            .ask_detached::<SemaphoreActor, _>(
                (Kind::Expirable, self.name.clone()),
                TrySetPermits { permits },
            )
            .await?
    }

    /// Sets the total permits to `permits` atomically: the available ones become `permits`
    /// minus those held now. Returns the available permits after (negative while more are
    /// held than the new total).
    ///
    /// # Cancel safety
    ///
    /// The request goes to the actor on the first poll; dropping the future after that
    /// loses only the answer, not the change.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let available = client.expirable_semaphore("s")?.set_permits(5).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_permits(&self, permits: u32) -> Result<i64, LockError> {
        self.client
            .ask_detached::<SemaphoreActor, _>(
                (Kind::Expirable, self.name.clone()),
                SetPermits { permits },
            )
            .await?
    }

    /// Adds `delta` permits atomically (negative takes them away). Returns the available
    /// permits after.
    ///
    /// # Cancel safety
    ///
    /// The request goes to the actor on the first poll; dropping the future after that
    /// loses only the answer, not the change.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// client.expirable_semaphore("s")?.add_permits(2).await?;
    /// # Ok(()) }
    /// ```
    pub async fn add_permits(&self, delta: i64) -> Result<i64, LockError> {
        self.client
            .ask_detached::<SemaphoreActor, _>(
                (Kind::Expirable, self.name.clone()),
                AddPermits { delta },
            )
            .await?
    }

    /// The permits available now, after taking back expired ones (so this writes, as in
    /// Redisson). Only a snapshot.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future loses only the answer.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// println!("{} free", client.expirable_semaphore("s")?.available_permits().await?);
    /// # Ok(()) }
    /// ```
    pub async fn available_permits(&self) -> Result<i64, LockError> {
        self.client
            .ask::<SemaphoreActor, _>((Kind::Expirable, self.name.clone()), AvailablePermits)
            .await?
    }

    /// The address of this semaphore's actor, for driving it with messages from other actors.
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let actor = client.expirable_semaphore("s")?.actor()?;
    /// # Ok(()) }
    /// ```
    pub fn actor(&self) -> Result<Addr<SemaphoreActor>, LockError> {
        Ok(self
            .client
            .actors()?
            .find::<SemaphoreActor>(&(Kind::Expirable, self.name.clone())))
    }
}
