//! The handles users take semaphores through: [`Semaphore`] and [`PermitExpirableSemaphore`].

use crate::client::LockClient;
use crate::error::LockError;
use crate::keys::LockName;
use crate::semaphore::{
    AcquirePermits, AddPermits, AvailablePermits, Kind, ReleasePermits, SemaphoreActor,
    SemaphoreGuard, SetPermits, TrySetPermits,
};
use crate::telemetry;
use actix::Addr;
use std::time::Duration;

mod expirable;
mod permit_lease;

pub use expirable::{PermitExpirableSemaphore, PermitOptions};

/// A distributed semaphore (Redisson's `RSemaphore`): N anonymous permits shared by every
/// process that uses the name.
///
/// Get one with [`LockClient::semaphore`]; set its permits once with
/// [`try_set_permits`](Semaphore::try_set_permits) (a semaphore never set has no permits).
/// The handle is cheap to clone and holds no permits itself; each acquire returns a
/// [`SemaphoreGuard`] guard.
///
/// Waiting: the local waiters of one semaphore queue in FIFO order in its actor and only
/// the head asks Redis; every release publishes on `redisson_sc:{name}` and wakes it, with a
/// timed retry in case a message is lost. A large request at the head of the queue holds
/// back smaller ones behind it in this process (as a fair `java.util.concurrent.Semaphore`
/// does); other processes are not held back. Redisson's waiters and ours share the channel,
/// so Java and Rust services wake each other.
///
/// Guarantees and limits: see [`LockClient::semaphore`]. Permits of a process that dies
/// holding them are never returned; use [`PermitExpirableSemaphore`] when that matters.
///
/// # Redisson compatibility
///
/// Same data as Redisson's `RSemaphore`: the string key `name` holds the available permits
/// (acquire decrements it only if enough are there; release increments it and publishes the
/// new count on `redisson_sc:{name}`, or `redisson_sc:name` when the name already contains a
/// `{`). Java and Rust services can share one semaphore. Redisson waiters count the message
/// as permits released; ours take it as a wake-up and ask Redis.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::LockClient;
/// use std::time::Duration;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = LockClient::from_url("redis://127.0.0.1:6379/").await?;
/// let pool = client.semaphore("smtp-connections")?;
/// pool.try_set_permits(3).await?; // only the first process to start sets it
///
/// let permits = pool.acquire_timeout(1, Duration::from_secs(5)).await?;
/// // ... send mail over one of the three connections ...
/// permits.release().await?;
///
/// if let Some(two) = pool.try_acquire(2).await? {
///     drop(two); // given back in the background
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    client: LockClient,
    name: LockName,
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name)
            .finish()
    }
}

impl Semaphore {
    pub(crate) fn new(client: LockClient, name: LockName) -> Self {
        Semaphore { client, name }
    }

    /// The semaphore's name as the caller gave it, without the client's namespace (the key
    /// of its permit count is the name mapped into the namespace).
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// assert_eq!(client.semaphore("s")?.name(), "s");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.name.unmapped()
    }

    /// Takes `permits` permits, waiting at most the client's default wait.
    ///
    /// Errors: [`LockError::Timeout`] when too few were available for the whole wait,
    /// [`LockError::InvalidConfig`] for `permits == 0`, [`LockError::WrongType`] when the key
    /// holds something other than a permit count, [`LockError::Unavailable`],
    /// [`LockError::Shutdown`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind: a queued request is withdrawn, and permits
    /// granted after the drop are given back at once.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let permits = client.semaphore("s")?.acquire(2).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self, permits: u32) -> Result<SemaphoreGuard, LockError> {
        let wait = self.client.config().default_wait;
        self.acquire_timeout(permits, wait).await
    }

    /// Takes `permits` permits, waiting at most `wait`.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Semaphore::acquire).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// match client.semaphore("s")?.acquire_timeout(1, Duration::from_millis(200)).await {
    ///     Ok(permits) => { /* work */ }
    ///     Err(e) if e.is_timeout() => { /* busy */ }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(
        &self,
        permits: u32,
        wait: Duration,
    ) -> Result<SemaphoreGuard, LockError> {
        let request = AcquirePermits { permits, wait };
        let asking = async {
            self.client
                .ask::<SemaphoreActor, _>((Kind::Plain, self.name.clone()), request)
                .await?
        };
        telemetry::acquire(Kind::Plain, &self.name, self.client.config(), asking).await
    }

    /// Tries once, without waiting: `Ok(None)` when fewer than `permits` are available.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Semaphore::acquire).
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// if let Some(permits) = client.semaphore("s")?.try_acquire(1).await? {
    ///     // got one
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self, permits: u32) -> Result<Option<SemaphoreGuard>, LockError> {
        match self.acquire_timeout(permits, Duration::ZERO).await {
            Ok(permits) => Ok(Some(permits)),
            Err(LockError::Timeout { .. }) => Ok(None),
            Err(other) => Err(other),
        }
    }

    /// Gives `permits` permits to the semaphore (Redisson's `release(n)`): anyone may, e.g.
    /// for permits kept with [`SemaphoreGuard::forget`]. Wakes waiters.
    ///
    /// Nothing checks that they were taken: releasing more than was taken raises the count.
    ///
    /// # Cancel safety
    ///
    /// The request goes to the actor on the first poll; dropping the future after that
    /// loses only the answer, not the change.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// client.semaphore("s")?.release(1).await?;
    /// # Ok(()) }
    /// ```
    pub async fn release(&self, permits: u32) -> Result<(), LockError> {
        self.client
            .ask_detached::<SemaphoreActor, _>(
                (Kind::Plain, self.name.clone()),
                ReleasePermits { permits },
            )
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
    /// let first = client.semaphore("s")?.try_set_permits(5).await?;
    /// # Ok(()) }
    /// ```
    pub async fn try_set_permits(&self, permits: u32) -> Result<bool, LockError> {
        self.client
            .ask_detached::<SemaphoreActor, _>(
                (Kind::Plain, self.name.clone()),
                TrySetPermits { permits },
            )
            .await?
    }

    /// Sets the available permits to `permits` whatever they were, atomically (permits out
    /// now are forgotten and come back on top when released). Returns the new count.
    ///
    /// # Cancel safety
    ///
    /// The request goes to the actor on the first poll; dropping the future after that
    /// loses only the answer, not the change.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// assert_eq!(client.semaphore("s")?.set_permits(5).await?, 5);
    /// # Ok(()) }
    /// ```
    pub async fn set_permits(&self, permits: u32) -> Result<i64, LockError> {
        self.client
            .ask_detached::<SemaphoreActor, _>(
                (Kind::Plain, self.name.clone()),
                SetPermits { permits },
            )
            .await?
    }

    /// Adds `delta` permits atomically (negative takes them away; the count may go below
    /// zero). Returns the available permits after.
    ///
    /// # Cancel safety
    ///
    /// The request goes to the actor on the first poll; dropping the future after that
    /// loses only the answer, not the change.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let now = client.semaphore("s")?.add_permits(-1).await?;
    /// # Ok(()) }
    /// ```
    pub async fn add_permits(&self, delta: i64) -> Result<i64, LockError> {
        self.client
            .ask_detached::<SemaphoreActor, _>(
                (Kind::Plain, self.name.clone()),
                AddPermits { delta },
            )
            .await?
    }

    /// The permits available now (0 when never set). Only a snapshot: others may take or
    /// release permits right after.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future loses only the answer.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// println!("{} free", client.semaphore("s")?.available_permits().await?);
    /// # Ok(()) }
    /// ```
    pub async fn available_permits(&self) -> Result<i64, LockError> {
        self.client
            .ask::<SemaphoreActor, _>((Kind::Plain, self.name.clone()), AvailablePermits)
            .await?
    }

    /// The address of this semaphore's actor, for driving it with messages from other actors.
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let actor = client.semaphore("s")?.actor()?;
    /// # Ok(()) }
    /// ```
    pub fn actor(&self) -> Result<Addr<SemaphoreActor>, LockError> {
        Ok(self
            .client
            .actors()?
            .find::<SemaphoreActor>(&(Kind::Plain, self.name.clone())))
    }
}

/// Where semaphores start: the client hands out the handles.
impl LockClient {
    /// A handle to the semaphore `name` (Redisson's `RSemaphore`). Checks the name; talks to
    /// nobody yet. Set its permits once with [`Semaphore::try_set_permits`].
    ///
    /// Guarantees: at most the set number of permits are out at once while Redis keeps its
    /// data. Not guaranteed: permits of a holder that dies are never returned (use
    /// [`expirable_semaphore`](LockClient::expirable_semaphore) for that); a Redis failover
    /// can lose or duplicate permits.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let pool = client.semaphore("db-connections")?;
    /// pool.try_set_permits(10).await?;
    /// let permits = pool.acquire(1).await?;
    /// // ... use one connection ...
    /// permits.release().await?;
    /// assert!(client.semaphore("").is_err());
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: &str) -> Result<Semaphore, LockError> {
        let name = self.mapped_name(name)?;
        Ok(Semaphore::new(self.clone(), name))
    }

    /// A handle to the permit-expirable semaphore `name` (Redisson's
    /// `RPermitExpirableSemaphore`): each permit has an id and a lease, so a dead holder's
    /// permits come back on their own. Checks the name; talks to nobody yet.
    ///
    /// Guarantees: at most the set number of permits are out at once while Redis keeps its
    /// data and holders' leases hold; a permit whose holder stopped renewing returns within
    /// its lease (on the next acquire). Not guaranteed: a holder paused longer than its lease
    /// keeps working after its permit went to someone else (watch
    /// [`PermitGuard::lost`](crate::PermitGuard::lost)); a Redis failover can lose or duplicate permits.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let workers = client.expirable_semaphore("render-slots")?;
    /// workers.try_set_permits(4).await?;
    /// let permit = workers.acquire(1).await?; // renewed while `permit` lives
    /// println!("holding permit {}", permit.permit_id());
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn expirable_semaphore(&self, name: &str) -> Result<PermitExpirableSemaphore, LockError> {
        let name = self.mapped_name(name)?;
        Ok(PermitExpirableSemaphore::new(self.clone(), name))
    }

    /// How many semaphore actors this client runs now (one per semaphore name and kind in
    /// use; an idle one stops on its own).
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) {
    /// println!("{} semaphores in use", client.active_semaphores());
    /// # }
    /// ```
    pub fn active_semaphores(&self) -> usize {
        self.actors().map_or(0, |actors| actors.semaphore_actors())
    }
}
