//! The lock actor, its messages, the guard a holder keeps, owners, and the lease list of
//! watchdog-leased holds (renewed by the client's renewal service).

pub(crate) mod actor;
mod direct;
mod direct_messages;
pub(crate) mod fast_path;
pub(crate) mod flight;
mod guard;
pub(crate) mod kind;
pub(crate) mod lease_entry;
pub(crate) mod machine;
mod owner;
mod state;

#[cfg(feature = "inspect")]
pub(crate) use actor::ForceReleaseIf;
pub use actor::LockActor;
pub(crate) use actor::{LockRegistry, WatchedUntil};
pub(crate) use direct::{Direct, DirectCache, Tried};
pub(crate) use direct_messages::AcquireRequest;
pub use guard::LockGuard;
pub use kind::LockKind;
pub(crate) use kind::{actor_key, all_scripts};
pub use owner::LockOwner;
pub(crate) use state::read_state;

use crate::error::LockError;
use actix::Message;
use std::time::Duration;

/// Ask a [`LockActor`] for the lock: reentrant for `owner`, waiting at most `wait`.
///
/// `lease: None` takes the lock with the watchdog (renewed while held); `Some(d)` takes it
/// for exactly `d`, with no renewal. The reply is a [`LockGuard`]; dropping it releases.
///
/// # Cancel safety
///
/// Dropping the `send` future withdraws the request: a queued request leaves the queue, and a
/// grant that arrives after the drop is released at once.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::messages::Acquire;
/// use actix_distributed_lock::{LockClient, LockOwner};
/// use std::time::Duration;
///
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let actor = client.lock_actor("job:nightly")?;
/// let guard = actor
///     .send(Acquire { owner: LockOwner::new(), lease: None, wait: Duration::from_secs(1) })
///     .await??;
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquire {
    /// Who is taking the lock; the same owner may take it again (reentrancy).
    pub owner: LockOwner,
    /// `None`: watchdog lease, renewed while held. `Some(d)`: fixed lease `d`, never renewed.
    pub lease: Option<Duration>,
    /// How long to wait for a busy lock; `Duration::ZERO` tries once.
    pub wait: Duration,
}

impl Message for Acquire {
    type Result = Result<LockGuard, LockError>;
}

/// [`Acquire`], and draw a fencing token for the hold: [`LockGuard::fencing_token`] is
/// strictly greater than the token of every earlier hold of this lock name.
///
/// # Cancel safety
///
/// As [`Acquire`].
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::messages::AcquireFenced;
/// use actix_distributed_lock::{LockClient, LockOwner};
/// use std::time::Duration;
///
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let actor = client.lock_actor("ledger")?;
/// let guard = actor
///     .send(AcquireFenced { owner: LockOwner::new(), lease: None, wait: Duration::from_secs(1) })
///     .await??;
/// let token = guard.fencing_token().expect("fenced holds carry a token");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireFenced {
    /// Who is taking the lock; the same owner may take it again (reentrancy).
    pub owner: LockOwner,
    /// `None`: watchdog lease, renewed while held. `Some(d)`: fixed lease `d`, never renewed.
    pub lease: Option<Duration>,
    /// How long to wait for a busy lock; `Duration::ZERO` tries once.
    pub wait: Duration,
}

impl Message for AcquireFenced {
    type Result = Result<LockGuard, LockError>;
}

/// Release one hold of `owner` (the most recent one), as Redisson's `unlock()` does.
///
/// Replies [`Released`], or [`LockError::NotOwner`] when the owner holds nothing here.
/// A [`LockGuard`] whose hold was released this way does nothing more when dropped.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::messages::{Acquire, Release, Released};
/// use actix_distributed_lock::{LockClient, LockOwner};
/// use std::time::Duration;
///
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let actor = client.lock_actor("job:nightly")?;
/// let owner = LockOwner::new();
/// let guard = actor.send(Acquire { owner, lease: None, wait: Duration::ZERO }).await??;
/// assert_eq!(actor.send(Release { owner }).await??, Released::Unlocked);
/// drop(guard); // already released: nothing is sent
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    /// The owner whose newest hold is released.
    pub owner: LockOwner,
}

impl Message for Release {
    type Result = Result<Released, LockError>;
}

/// Extend `owner`'s hold to at least `lease` from now, as one renewal of the watchdog would.
///
/// Replies `true` when renewed, `false` when the owner no longer holds the lock in Redis.
/// Useful for holds taken with a fixed lease that need more time (a guard's own
/// [`LockGuard::extend`] sets one hold's lease, shorter or longer). It only ever extends:
/// the lock's key keeps whatever it has left beyond `lease` (its TTL is shared by every
/// hold on it, and may belong to a longer one), and each hold keeps its own end if that is
/// later.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::messages::{Acquire, Renew};
/// use actix_distributed_lock::{LockClient, LockOwner};
/// use std::time::Duration;
///
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let actor = client.lock_actor("report")?;
/// let owner = LockOwner::new();
/// let lease = Some(Duration::from_secs(5));
/// let _guard = actor.send(Acquire { owner, lease, wait: Duration::ZERO }).await??;
/// assert!(actor.send(Renew { owner, lease: Duration::from_secs(5) }).await??);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renew {
    /// The holder to renew.
    pub owner: LockOwner,
    /// The least the hold has left afterwards, from now.
    pub lease: Duration,
}

impl Message for Renew {
    type Result = Result<bool, LockError>;
}

/// Set the fixed lease of one hold again from now: that hold ends `lease` from now, and the
/// key keeps the longest lease the owner's holds then have left (never shorter than another
/// holder's). Replies [`LockError::Lost`] when the owner no longer holds the lock, and
/// [`LockError::InvalidConfig`] for a hold the watchdog keeps (see
/// [`LockGuard::extend`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ExtendHold {
    pub(crate) owner: LockOwner,
    pub(crate) hold: u64,
    pub(crate) lease: Duration,
}

impl Message for ExtendHold {
    type Result = Result<(), LockError>;
}

/// Release one hold of `owner` whether or not this process counts it (an owner known by
/// id; see [`Lock::unlock_as`](crate::Lock::unlock_as)).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReleaseAs {
    pub(crate) owner: LockOwner,
}

impl Message for ReleaseAs {
    type Result = Result<Released, LockError>;
}

/// Delete the lock whoever holds it and wake a waiter. Replies whether a lock was there.
///
/// Every holder of the key in this client is told it is lost, whichever actor keeps the
/// hold (a fair lock's per-owner actors, the other side of a read-write lock).
///
/// # Example
///
/// ```no_run
/// # use actix_distributed_lock::{messages::ForceRelease, LockClient};
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let was_locked = client.lock_actor("stuck:lock")?.send(ForceRelease).await??;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForceRelease;

impl Message for ForceRelease {
    type Result = Result<bool, LockError>;
}

/// Read the lock's state in Redis: held or not, remaining lease, `owner`'s hold count.
///
/// # Example
///
/// ```no_run
/// # use actix_distributed_lock::{messages::GetState, LockClient, LockOwner};
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let state = client.lock_actor("order:7")?.send(GetState { owner: Some(LockOwner::new()) }).await??;
/// println!("locked: {}, ttl: {:?}, mine: {}", state.locked, state.ttl, state.hold_count);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetState {
    /// Whose hold count to read; `None` reads 0.
    pub owner: Option<LockOwner>,
}

impl Message for GetState {
    type Result = Result<LockState, LockError>;
}

/// What [`GetState`] reads from Redis.
///
/// ```
/// # use actix_distributed_lock::messages::LockState;
/// let free = LockState { locked: false, ttl: None, hold_count: 0 };
/// assert!(!free.locked);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockState {
    /// Somebody (anybody) holds the lock.
    pub locked: bool,
    /// The remaining lease; `None` when free (or, never for our locks, without expiry).
    pub ttl: Option<Duration>,
    /// How many holds the asked owner has (0 when not asked).
    pub hold_count: u32,
}

/// The outcome of a successful release.
///
/// ```
/// # use actix_distributed_lock::Released;
/// assert_ne!(Released::Unlocked, Released::StillHeld { holds: 1 });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// That was the last hold: the lock is free and a waiter was woken.
    Unlocked,
    /// The owner re-entered the lock and still holds it `holds` times.
    StillHeld {
        /// Holds the owner still has.
        holds: u32,
    },
}
