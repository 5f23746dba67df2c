//! `Lock`: the handle users take every kind of lock through, its options, and state reads.

use crate::client::LockClient;
use crate::config::{positive_millis, SpinBackoff};
use crate::error::LockError;
use crate::keys::LockName;
use crate::lock::{
    read_state, AcquireRequest, DirectCache, ForceRelease, LockActor, LockGuard, LockKind,
    LockOwner, LockState, Tried,
};
use crate::telemetry;
use actix::Addr;
use std::time::Duration;

/// How long the one read that explains a timeout (is the holder an owner of this client?)
/// may add to a wait that ran out: past it the timeout is told with the plain message.
const EXPLAIN_WITHIN: Duration = Duration::from_millis(250);

mod by_owner;

/// How to take a lock: who, how long to wait, which lease.
///
/// The defaults are a fresh owner (so no re-entry), the client's default wait, and the
/// watchdog lease.
///
/// # Example
///
/// ```
/// use actix_distributed_lock::{AcquireOptions, LockOwner};
/// use std::time::Duration;
///
/// let me = LockOwner::new();
/// let options = AcquireOptions::new()
///     .owner(me)
///     .wait(Duration::from_secs(2))
///     .lease(Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AcquireOptions {
    owner: Option<LockOwner>,
    wait: Option<Duration>,
    lease: Option<Duration>,
}

impl AcquireOptions {
    /// The defaults: fresh owner, client's default wait, watchdog lease.
    ///
    /// ```
    /// # use actix_distributed_lock::AcquireOptions;
    /// assert_eq!(AcquireOptions::new(), AcquireOptions::default());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Acquire as `owner`; acquiring again with the same owner re-enters the lock.
    ///
    /// ```
    /// # use actix_distributed_lock::{AcquireOptions, LockOwner};
    /// let options = AcquireOptions::new().owner(LockOwner::new());
    /// ```
    pub fn owner(mut self, owner: LockOwner) -> Self {
        self.owner = Some(owner);
        self
    }

    /// Wait at most `wait` for a busy lock (`Duration::ZERO`: try once).
    ///
    /// ```
    /// # use actix_distributed_lock::AcquireOptions;
    /// # use std::time::Duration;
    /// let options = AcquireOptions::new().wait(Duration::from_millis(250));
    /// ```
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Hold for exactly `lease`, with no watchdog: the lock frees itself when it runs out.
    ///
    /// ```
    /// # use actix_distributed_lock::AcquireOptions;
    /// # use std::time::Duration;
    /// let options = AcquireOptions::new().lease(Duration::from_secs(5));
    /// ```
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// The owner, wait and fixed lease asked for (`None`: the default), for the composed
    /// locks (`compose`), which take their members with options of their own.
    pub(crate) fn parts(&self) -> (Option<LockOwner>, Option<Duration>, Option<Duration>) {
        (self.owner, self.wait, self.lease)
    }
}

/// A handle to one lock of one [`LockKind`]. By default (from [`LockClient::lock`]) a
/// reentrant lock (Redisson's `RLock`): one owner at a time, and that owner may take it
/// again; it is free after as many releases as acquisitions.
///
/// The other kinds come from [`LockClient::fast_lock`], [`LockClient::fenced_lock`],
/// [`LockClient::fair_lock`], [`LockClient::spin_lock`] and [`LockClient::read_write_lock`]; their differences are on [`LockKind`]. The handle is
/// cheap to clone and holds no lock itself; each acquire returns a [`LockGuard`].
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::{AcquireOptions, LockClient, LockOwner};
/// use std::time::Duration;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = LockClient::from_url("redis://127.0.0.1:6379/").await?;
/// let lock = client.lock("order:42")?;
///
/// // Wait up to 5 s; the watchdog keeps the lock while the guard lives.
/// let guard = lock.acquire_timeout(Duration::from_secs(5)).await?;
/// guard.unlock().await?;
///
/// // Re-entry: same owner, two holds, free after both are released.
/// let me = LockOwner::new();
/// let outer = lock.acquire_with(AcquireOptions::new().owner(me)).await?;
/// let inner = lock.acquire_with(AcquireOptions::new().owner(me)).await?;
/// assert_eq!(lock.hold_count(me).await?, 2);
/// inner.unlock().await?;
/// outer.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Lock {
    client: LockClient,
    kind: LockKind,
    name: LockName,
    fenced: bool,
    /// A spin lock's backoff (`None` for the other kinds).
    backoff: Option<SpinBackoff>,
    direct: DirectCache<LockActor>,
}

/// Where every kind of [`Lock`] starts: the client hands out the handles.
impl LockClient {
    /// A handle to the reentrant lock `name`. Checks the name; talks to nobody yet.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let lock = client.lock("order:42")?;
    /// assert!(client.lock("").is_err());
    /// # Ok(()) }
    /// ```
    pub fn lock(&self, name: &str) -> Result<Lock, LockError> {
        Ok(Lock::new(
            self.clone(),
            LockKind::Reentrant,
            self.name(name)?,
            false,
        ))
    }

    /// A handle to lock `name` whose every acquisition draws a fencing token
    /// ([`LockGuard::fencing_token`](crate::LockGuard::fencing_token)): the same reentrant
    /// lock in Redis, plus the counter `redisson_lock_token:{name}`, which never expires.
    ///
    /// Use it when the protected storage can check a token: a holder that lost its lock while
    /// paused is refused by the storage even before it learns of the loss.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.fenced_lock("ledger")?.acquire().await?;
    /// assert!(guard.fencing_token().is_some());
    /// # Ok(()) }
    /// ```
    pub fn fenced_lock(&self, name: &str) -> Result<Lock, LockError> {
        Ok(Lock::new(
            self.clone(),
            LockKind::Reentrant,
            self.name(name)?,
            true,
        ))
    }

    /// A handle to the non-reentrant fast lock `name`: one string key, `SET NX PX` with the
    /// owner as value, released by a compare-and-delete that publishes on the same channel
    /// as the reentrant lock when a waiter marked that it waits (an uncontended release
    /// publishes nothing). Waiters, the watchdog and `lost()` work as for the reentrant
    /// lock; taking it again with the same owner is [`LockError::AlreadyHeld`], not a
    /// deadlock. Use it on hot uncontended paths: a free one is taken with one `SET`, and a
    /// release is one short script.
    ///
    /// What it does not do: re-entry, and interoperate with Redisson's `RLock` on the same
    /// name (Redisson has no such string lock; a Java `RLock` on the name sees the wrong
    /// key type). Like every single-node lock, a Redis failover can lose it.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::{AcquireOptions, LockError, LockOwner};
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let lock = client.fast_lock("counter:7")?;
    /// let me = LockOwner::new();
    /// let guard = lock.acquire_with(AcquireOptions::new().owner(me)).await?;
    /// let again = lock.acquire_with(AcquireOptions::new().owner(me)).await;
    /// assert!(matches!(again, Err(LockError::AlreadyHeld { .. })));
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn fast_lock(&self, name: &str) -> Result<Lock, LockError> {
        Ok(Lock::new(
            self.clone(),
            LockKind::Fast,
            self.name(name)?,
            false,
        ))
    }

    /// A handle to the fair lock `name` (Redisson's `RFairLock`): a reentrant lock granted
    /// in request order, across every process that uses it.
    ///
    /// Every waiter waits in the Redis queue `redisson_lock_queue:{name}`, with a deadline
    /// in `redisson_lock_timeout:{name}` set by Redisson's rule, so Java `RFairLock` waiters
    /// and ours share one queue in order: the deadline of the waiter ahead (or the lock's
    /// remaining lease) plus [`ClientConfig::fair_wait_timeout`](crate::ClientConfig::fair_wait_timeout) (5 min by default, as
    /// Redisson's), less that allowance again at every grant. An unlock wakes only the next
    /// waiter, on its own channel `redisson_lock__channel:{name}:uuid:owner`. A waiter that
    /// gives up (timeout, cancelled future) leaves the queue at once; one that dies is
    /// skipped once its deadline passes, so the queue cannot stick; both keys vanish when
    /// the queue is empty.
    ///
    /// What it does not guarantee: order between requests that reach Redis within the same
    /// instant from different processes (Redis decides), order after a waiter was skipped
    /// as dead (a paused process, or a live waiter whose turn came later than its deadline,
    /// joins again at the back), and anything across a
    /// Redis failover. Each waiting owner has an actor of its own
    /// ([`fair_lock_actor`](LockClient::fair_lock_actor)).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let turn = client.fair_lock("printer")?.acquire_timeout(Duration::from_secs(30)).await?;
    /// turn.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn fair_lock(&self, name: &str) -> Result<Lock, LockError> {
        Ok(Lock::new(
            self.clone(),
            LockKind::Fair,
            self.name(name)?,
            false,
        ))
    }
}

impl std::fmt::Debug for Lock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("kind", &self.kind)
            .field("name", &self.name)
            .field("fenced", &self.fenced)
            .finish()
    }
}

impl Lock {
    pub(crate) fn new(client: LockClient, kind: LockKind, name: LockName, fenced: bool) -> Self {
        Lock {
            client,
            kind,
            name,
            fenced,
            backoff: None,
            direct: DirectCache::default(),
        }
    }

    /// This handle, its waiters backing off by `backoff` (a spin lock's).
    pub(super) fn backing_off(mut self, backoff: SpinBackoff) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// The backoff a spin lock's waiters space their tries by; `None` for the other kinds.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::SpinBackoff;
    /// # fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// assert_eq!(client.spin_lock("a")?.spin_backoff(), Some(SpinBackoff::default()));
    /// assert_eq!(client.lock("a")?.spin_backoff(), None);
    /// # Ok(()) }
    /// ```
    pub fn spin_backoff(&self) -> Option<SpinBackoff> {
        self.backoff
    }

    /// The kind of this lock.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::LockKind;
    /// # fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// assert_eq!(client.lock("a")?.kind(), LockKind::Reentrant);
    /// # Ok(()) }
    /// ```
    pub fn kind(&self) -> LockKind {
        self.kind
    }

    /// The kind its acquires count as in metrics and spans (fenced, for a fenced lock).
    pub(crate) fn label(&self) -> crate::kinds::Kind {
        self.kind.label(self.fenced)
    }

    /// Whether acquisitions through this handle draw fencing tokens
    /// ([`LockClient::fenced_lock`]).
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// assert!(client.fenced_lock("ledger")?.is_fenced());
    /// assert!(!client.lock("ledger")?.is_fenced());
    /// # Ok(()) }
    /// ```
    pub fn is_fenced(&self) -> bool {
        self.fenced
    }

    /// The lock's name as the caller gave it, without the client's namespace (Redisson's
    /// `getName()`); errors name the lock the same way.
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// assert_eq!(client.lock("a")?.name(), "a");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.name.unmapped()
    }

    /// The lock's Redis key: its name mapped into the client's
    /// [`namespace`](crate::ClientConfig::namespace) (`billing:a`), or the name itself
    /// without one (Redisson's `getRawName()`).
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// // A client configured with `.namespace("billing")`:
    /// assert_eq!(client.lock("a")?.key(), "billing:a");
    /// # Ok(()) }
    /// ```
    pub fn key(&self) -> &str {
        self.name.as_str()
    }

    /// Takes the lock with the watchdog, waiting at most the client's default wait.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind: a queued request is withdrawn, and a hold
    /// granted after the drop is released at once.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.lock("a")?.acquire().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<LockGuard, LockError> {
        self.acquire_with(AcquireOptions::new()).await
    }

    /// Takes the lock with the watchdog, waiting at most `wait`.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Lock::acquire).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// match client.lock("a")?.acquire_timeout(Duration::from_secs(1)).await {
    ///     Ok(guard) => { /* work */ }
    ///     Err(e) if e.is_timeout() => { /* busy */ }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<LockGuard, LockError> {
        self.acquire_with(AcquireOptions::new().wait(wait)).await
    }

    /// Tries once, without waiting: `Ok(None)` when someone else holds the lock.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Lock::acquire).
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// if let Some(guard) = client.lock("a")?.try_acquire().await? {
    ///     // we have it
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self) -> Result<Option<LockGuard>, LockError> {
        let options = AcquireOptions::new().wait(Duration::ZERO);
        let config = self.client.config();
        // Without `acquire_with`'s look at who holds it: a busy lock is `None` here.
        match telemetry::acquire(self.label(), &self.name, config, self.acquire_once(options)).await
        {
            Ok(guard) => Ok(Some(guard)),
            Err(LockError::Timeout { .. }) => Ok(None),
            Err(other) => Err(other),
        }
    }

    /// Takes the lock as `options` say (owner, wait, fixed lease).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](Lock::acquire).
    ///
    /// ```no_run
    /// # use actix_distributed_lock::AcquireOptions;
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let options = AcquireOptions::new().lease(Duration::from_secs(10));
    /// let guard = client.lock("a")?.acquire_with(options).await?; // frees itself after 10 s
    /// # Ok(()) }
    /// ```
    pub async fn acquire_with(&self, options: AcquireOptions) -> Result<LockGuard, LockError> {
        let config = self.client.config();
        let acquired =
            telemetry::acquire(self.label(), &self.name, config, self.acquire_once(options)).await;
        match acquired {
            Err(LockError::Timeout { name, waited, .. }) => Err(LockError::Timeout {
                by_this_client: self.held_by_this_client().await,
                name,
                waited,
            }),
            other => other,
        }
    }

    /// Whether an owner of this client holds the lock now: a wait that ran out then was
    /// most likely a second acquire by the same task, which the timeout's message explains.
    /// One read, on the slow path only, bounded by [`EXPLAIN_WITHIN`] so that it never holds
    /// the caller long past its wait; false when it cannot be told.
    async fn held_by_this_client(&self) -> bool {
        let Ok(node) = self.client.node() else {
            return false;
        };
        let prefix = format!("{}:", self.client.id());
        let mut pipe = redis::pipe();
        if self.kind.key_type() == "hash" {
            pipe.cmd("HKEYS").arg(self.name.as_str());
        } else {
            pipe.cmd("GET").arg(self.name.as_str());
        }
        let reply: Result<(redis::Value,), LockError> = node
            .commands
            .clone()
            .within(EXPLAIN_WITHIN)
            .query(pipe, self.name.clone())
            .await;
        let ours = |value: &redis::Value| matches!(value, redis::Value::BulkString(bytes) if bytes.starts_with(prefix.as_bytes()));
        match reply {
            Ok((redis::Value::Array(fields),)) => fields.iter().any(ours),
            Ok((value,)) => ours(&value),
            Err(_) => false,
        }
    }

    /// One acquire as [`acquire_with`](Lock::acquire_with) describes, not yet recorded.
    async fn acquire_once(&self, options: AcquireOptions) -> Result<LockGuard, LockError> {
        // The fast path below skips the client's registries, where a closing client refuses.
        self.client.check_open()?;
        let (owner, lease) = (options.owner.unwrap_or_default(), options.lease);
        let wait = options.wait.unwrap_or(self.client.config().default_wait);
        if let Some(lease) = lease {
            // Checked here too: the fast path sends the lease to Redis before any actor.
            positive_millis(&format!("the lease of lock `{}`", self.name), lease)?;
        }
        {
            // The uncontended fast path: straight to Redis when the actor is idle.
            let (actor, direct) = match self.direct.get() {
                Some(kept) => kept,
                None => {
                    let actors = self.client.actors()?;
                    let (actor, direct) =
                        actors.lock_actor_direct(self.kind, &self.name, Some(owner));
                    let actor = std::sync::Arc::new(actor);
                    self.direct.keep(self.kind, &actor, &direct);
                    (actor, direct)
                }
            };
            match direct.try_acquire(actor, owner, self.fenced, lease).await {
                Tried::Acquired(guard) => Ok(guard),
                Tried::Error(error) => Err(error),
                // The actor's paths, boxed: the fast path's future stays small, so moving it
                // (into the caller's task, under the telemetry) copies little.
                waited => Box::pin(self.through_actor(waited, owner, lease, wait)).await,
            }
        }
    }

    /// An acquire the fast path could not finish (`tried`): the actor queues or takes it.
    async fn through_actor(
        &self,
        tried: Tried<LockActor>,
        owner: LockOwner,
        lease: Option<Duration>,
        wait: Duration,
    ) -> Result<LockGuard, LockError> {
        let request = |after_direct| AcquireRequest {
            owner,
            lease,
            wait,
            fenced: self.fenced,
            backoff: self.backoff,
            after_direct,
        };
        let (request, actor) = match tried {
            Tried::Acquired(guard) => return Ok(guard),
            Tried::Error(error) => return Err(error),
            Tried::Busy(actor) => (request(Some(None)), actor),
            Tried::Failed(error, actor) => (request(Some(Some(error))), actor),
            Tried::AskActor => {
                let key = (self.kind, self.name.clone(), Some(owner));
                return self.client.ask::<LockActor, _>(key, request(None)).await?;
            }
        };
        actor.send(request).await.map_err(|_| LockError::Shutdown)?
    }

    /// Whether anybody holds the lock now.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let busy = client.lock("a")?.is_locked().await?;
    /// # Ok(()) }
    /// ```
    pub async fn is_locked(&self) -> Result<bool, LockError> {
        Ok(self.state(None).await?.locked)
    }

    /// The remaining lease of the current hold, or `None` when the lock is free.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let ttl = client.lock("a")?.remaining_ttl().await?;
    /// # Ok(()) }
    /// ```
    pub async fn remaining_ttl(&self) -> Result<Option<Duration>, LockError> {
        Ok(self.state(None).await?.ttl)
    }

    /// How many holds `owner` has on the lock (0 when none).
    ///
    /// ```no_run
    /// # use actix_distributed_lock::LockOwner;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// assert_eq!(client.lock("a")?.hold_count(LockOwner::new()).await?, 0);
    /// # Ok(()) }
    /// ```
    pub async fn hold_count(&self, owner: LockOwner) -> Result<u32, LockError> {
        Ok(self.state(Some(owner)).await?.hold_count)
    }

    /// Deletes the lock whoever holds it, and wakes a waiter. Returns whether it was held.
    /// Every holder of the key in this client is told its lock is lost at once, whichever
    /// handle took it (a fair lock's owners, the other side of a read-write lock); holders
    /// in other processes learn it at their next renewal. Use it to clear a lock left by a
    /// crashed holder that has no lease (which this crate never writes).
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let was_held = client.lock("a")?.force_unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn force_unlock(&self) -> Result<bool, LockError> {
        self.client
            .ask_detached::<LockActor, _>((self.kind, self.name.clone(), None), ForceRelease)
            .await?
    }

    /// Deletes the lock only if exactly `holders` hold it (their fields as the inspector
    /// shows them), checked and done in one script; local holders are told as by
    /// [`force_unlock`](Lock::force_unlock). `None` when other holders hold it (nothing
    /// was done), else whether a lock was deleted.
    #[cfg(feature = "inspect")]
    pub(crate) async fn force_unlock_if(
        &self,
        holders: Vec<String>,
    ) -> Result<Option<bool>, LockError> {
        let request = crate::lock::ForceReleaseIf { holders };
        self.client
            .ask_detached::<LockActor, _>((self.kind, self.name.clone(), None), request)
            .await?
    }

    /// The address of this lock's actor, for driving it with messages.
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let actor = client.lock("a")?.actor()?;
    /// # Ok(()) }
    /// ```
    pub fn actor(&self) -> Result<Addr<LockActor>, LockError> {
        Ok(self
            .client
            .actors()?
            .lock_actor(self.kind, &self.name, None))
    }

    /// The client this lock talks through (the composed locks order and group members by
    /// its node).
    pub(crate) fn client(&self) -> &LockClient {
        &self.client
    }

    async fn state(&self, owner: Option<LockOwner>) -> Result<LockState, LockError> {
        let node = self.client.node()?;
        let field = owner.map(|owner| self.kind.field(node.owner_field(owner.id())));
        read_state(node.commands.clone(), self.kind, self.name.clone(), field).await
    }
}
