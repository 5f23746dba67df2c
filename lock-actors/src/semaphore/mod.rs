//! Semaphores: Redisson's `RSemaphore` and `RPermitExpirableSemaphore` layouts, their handles,
//! guards and the actor that queues local waiters.
//!
//! # Which one should I use?
//!
//! - **[`Semaphore`]** (from [`LockClient::semaphore`]) — N anonymous permits, like
//!   `java.util.concurrent.Semaphore`. Permits belong to nobody: anyone may release them,
//!   and a process that dies holding permits never gives them back. Use it to bound
//!   concurrency where an operator can repair the count ([`Semaphore::set_permits`]).
//! - **[`PermitExpirableSemaphore`]** (from [`LockClient::expirable_semaphore`]) — every
//!   permit has an id and a lease, so a dead holder's permits come back on their own. Taken
//!   without a lease, a permit is renewed every lease/3 while its guard lives. Prefer it
//!   whenever holders can crash.
//!
//! # Layout in Redis (Redisson's; the scripts are ours)
//!
//! | kind | keys | notes |
//! |---|---|---|
//! | both | string `name`: available permits | `DECRBY` on acquire, `INCRBY` on release |
//! | both | channel `redisson_sc:{name}` (`redisson_sc:name` when the name has a `{`) | the new count is published on every release |
//! | permit-expirable | zset `{name}:timeout` (`name:timeout` when the name has a `{`): permit id → expiry, ms since the epoch | expired permits go back to the count on every acquire |
//!
//! Redisson writes permit ids as 16 random bytes (shown as 32 hex digits) and gives
//! lease-less permits the score 922337203685477 (they never expire). We write ids the same
//! way but never write a lease-less permit: ours always have a lease, renewed while held.
//! Redisson stamps expiries with each client's clock; our scripts read the Redis server's
//! clock (`TIME`), so our clients agree with each other whatever their clocks say.
//!
//! # What is not guaranteed
//!
//! Redis replication is asynchronous: if the primary fails over, the last acquires or
//! releases may be lost, so permits can be lost or handed out twice. A reply lost to a
//! broken connection leaves the outcome unknown: a permit-expirable acquire gives its ids
//! back, but a plain acquire that did run keeps its permits taken (there is no id to undo).

mod actor;
mod grant;
mod guard;
pub(crate) mod kind;
pub(crate) mod lease_entry;

pub(crate) use kind::Kind;

pub use actor::SemaphoreActor;
pub(crate) use actor::{SemaphoreRegistry, UpdatePermitLease};
#[cfg(test)]
pub(crate) use guard::PermitId;
pub use guard::{PermitGuard, SemaphoreGuard};

use crate::error::LockError;
use crate::keys::LockName;
use crate::node::publishing::PublishingScript;
use crate::script::ScriptCall;
use actix::Message;
use redis::Script;
use std::sync::LazyLock;
use std::time::Duration;

/// Builds a script from the shared helpers and one body (both `.lua` files here).
macro_rules! script {
    ($file:literal) => {
        LazyLock::new(|| PublishingScript::new(&[include_str!("common.lua"), include_str!($file)]))
    };
}

pub(crate) static ACQUIRE: LazyLock<PublishingScript> = script!("acquire.lua");
pub(crate) static ADD: LazyLock<PublishingScript> = script!("add.lua");
pub(crate) static TRY_SET: LazyLock<PublishingScript> = script!("try_set.lua");
pub(crate) static SET: LazyLock<PublishingScript> = script!("set.lua");
pub(crate) static AVAILABLE: LazyLock<PublishingScript> = script!("available.lua");
pub(crate) static EXPIRABLE_ACQUIRE: LazyLock<PublishingScript> = script!("expirable_acquire.lua");
pub(crate) static EXPIRABLE_RELEASE: LazyLock<PublishingScript> = script!("expirable_release.lua");
pub(crate) static EXPIRABLE_SETTLE: LazyLock<PublishingScript> = script!("expirable_settle.lua");
pub(crate) static RENEW: LazyLock<PublishingScript> = script!("renew.lua");
pub(crate) static SETTLE: LazyLock<PublishingScript> = script!("settle.lua");

/// The zset of permit id → expiry of permit-expirable semaphore `name` (the mapped name):
/// `{name}:timeout`, or `name:timeout` when the name has its own `{`.
pub(crate) fn timeouts_key(name: &str) -> String {
    if name.contains('{') {
        format!("{name}:timeout")
    } else {
        format!("{{{name}}}:timeout")
    }
}

/// The key of acquire `request`'s receipt on semaphore `name` (the mapped name),
/// hash-tagged as [`timeouts_key`]: it says whether a plain acquire took its permits, and
/// whether an acquire whose reply was lost was settled before it ran (then it takes
/// nothing).
pub(crate) fn receipt_key(name: &str, request: &str) -> String {
    if name.contains('{') {
        format!("{name}:semaphore_acquire:{request}")
    } else {
        format!("{{{name}}}:semaphore_acquire:{request}")
    }
}

/// The Redis keys and channel of one semaphore. The only place they are built.
///
/// Redisson (`RedissonObject.prefixName` / `suffixName`) wraps the name in braces, the
/// Cluster hash tag, unless it already contains a `{`: then the name's own tag is used.
#[derive(Debug, Clone)]
pub(crate) struct SemaphoreKeys {
    /// The string of available permits: the name itself.
    pub(crate) count: String,
    /// `redisson_sc:{name}`.
    pub(crate) channel: String,
    /// `{name}:timeout`, the zset of permit id → expiry (permit-expirable only).
    pub(crate) timeouts: Option<String>,
}

impl SemaphoreKeys {
    pub(crate) fn new(name: &LockName, kind: Kind) -> Self {
        let name = name.as_str();
        let tagged = name.contains('{');
        let channel = if tagged {
            format!("redisson_sc:{name}")
        } else {
            format!("redisson_sc:{{{name}}}")
        };
        let timeouts = kind.rules().timeouts_key(name);
        SemaphoreKeys {
            count: name.to_string(),
            channel,
            timeouts,
        }
    }

    /// KEYS of the scripts that take the count, the channel and (if any) the zset.
    pub(crate) fn invocation(&self, script: &'static Script) -> ScriptCall {
        let mut invocation = ScriptCall::with_key(script, self.count.as_str());
        invocation.key(self.channel.as_str());
        if let Some(timeouts) = &self.timeouts {
            invocation.key(timeouts.as_str());
        }
        invocation
    }
}

/// Ask a plain [`SemaphoreActor`] for `permits` permits, waiting at most `wait`.
///
/// The reply is a [`SemaphoreGuard`] guard that gives the permits back when dropped. Sent
/// to a permit-expirable semaphore's actor it fails with [`LockError::InvalidConfig`] (send
/// [`AcquireExpirablePermits`] there).
///
/// # Cancel safety
///
/// Dropping the `send` future withdraws the request: a queued request leaves the queue, and
/// permits granted after the drop are given back at once.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::{messages::AcquirePermits, LockClient};
/// use std::time::Duration;
///
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let actor = client.semaphore("uploads")?.actor()?;
/// let permits = actor.send(AcquirePermits { permits: 2, wait: Duration::from_secs(1) }).await??;
/// permits.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquirePermits {
    /// How many permits; at least 1.
    pub permits: u32,
    /// How long to wait while too few are available; `Duration::ZERO` tries once.
    pub wait: Duration,
}

impl Message for AcquirePermits {
    type Result = Result<SemaphoreGuard, LockError>;
}

/// Ask a permit-expirable [`SemaphoreActor`] for `permits` permits, waiting at most `wait`.
///
/// `lease: None` keeps the permits alive by renewal every lease/3, the lease being the
/// client's watchdog timeout; `Some(d)` gives them exactly `d`, never renewed. The reply is a
/// [`PermitGuard`] carrying the permit ids; dropping it releases them.
///
/// # Cancel safety
///
/// As [`AcquirePermits`].
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::{messages::AcquireExpirablePermits, LockClient};
/// use std::time::Duration;
///
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let actor = client.expirable_semaphore("gpu")?.actor()?;
/// let request = AcquireExpirablePermits {
///     permits: 1,
///     wait: Duration::from_secs(1),
///     lease: Some(Duration::from_secs(60)),
/// };
/// let guard = actor.send(request).await??;
/// println!("permit {}", guard.permit_id());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AcquireExpirablePermits {
    /// How many permits; at least 1.
    pub permits: u32,
    /// How long to wait while too few are available; `Duration::ZERO` tries once.
    pub wait: Duration,
    /// `None`: renewed while held. `Some(d)`: a fixed lease of `d` (at least 1 ms).
    pub lease: Option<Duration>,
}

impl Message for AcquireExpirablePermits {
    type Result = Result<PermitGuard, LockError>;
}

/// Give `permits` permits to a plain semaphore (Redisson's `release(n)`): anyone may, the
/// permits belong to nobody. Publishes the new count, which wakes waiters.
///
/// Sent to a permit-expirable semaphore's actor it fails with [`LockError::InvalidConfig`]
/// (release those by id with [`ReleasePermit`]).
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::{messages::ReleasePermits, LockClient};
///
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let actor = client.semaphore("uploads")?.actor()?;
/// actor.send(ReleasePermits { permits: 1 }).await??;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleasePermits {
    /// How many permits; at least 1.
    pub permits: u32,
}

impl Message for ReleasePermits {
    type Result = Result<(), LockError>;
}

/// Release one permit of a permit-expirable semaphore by its id (Redisson's
/// `release(permitId)`), whoever took it.
///
/// Fails with [`LockError::NotOwner`] when no such permit is out (never was, already
/// released, or expired — an expired one still present goes back to the count, but its
/// holder is told it had run out). A local guard holding this permit stops renewing it.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::{messages::ReleasePermit, LockClient};
///
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let actor = client.expirable_semaphore("gpu")?.actor()?;
/// let id = "0123456789abcdef0123456789abcdef".to_string(); // from a guard, maybe elsewhere
/// match actor.send(ReleasePermit { permit_id: id }).await? {
///     Ok(()) => {}
///     Err(e) => eprintln!("{e}"),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleasePermit {
    /// The permit's id, as [`PermitGuard::permit_id`] shows it (32 hex digits).
    pub permit_id: String,
}

impl Message for ReleasePermit {
    type Result = Result<(), LockError>;
}

/// Set the permits only if they were never set (Redisson's `trySetPermits`). Replies
/// whether they were set; either way it is one atomic step, so of many processes starting
/// at once exactly one sets them.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::{messages::TrySetPermits, LockClient};
///
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let actor = client.semaphore("uploads")?.actor()?;
/// let first = actor.send(TrySetPermits { permits: 8 }).await??;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrySetPermits {
    /// The permits to set (at least 1).
    pub permits: u32,
}

impl Message for TrySetPermits {
    type Result = Result<bool, LockError>;
}

/// Set the permits whatever they were (Redisson's `setPermits`), atomically. Replies the
/// available permits after.
///
/// For a plain semaphore this sets the available permits (permits out now are forgotten,
/// and come back on top when released). For a permit-expirable one it sets the total: the
/// available permits become `permits` minus the permits held now.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::{messages::SetPermits, LockClient};
///
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let actor = client.expirable_semaphore("gpu")?.actor()?;
/// let available = actor.send(SetPermits { permits: 4 }).await??;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetPermits {
    /// The permits (may be 0: nobody gets one until more are added).
    pub permits: u32,
}

impl Message for SetPermits {
    type Result = Result<i64, LockError>;
}

/// Add `delta` permits, atomically (Redisson's `addPermits`; negative takes permits away and
/// may leave the count below zero until releases make up for it). Replies the available
/// permits after.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::{messages::AddPermits, LockClient};
///
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let actor = client.semaphore("uploads")?.actor()?;
/// let available = actor.send(AddPermits { delta: 2 }).await??;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddPermits {
    /// Permits to add; between `-u32::MAX` and `u32::MAX`.
    pub delta: i64,
}

impl Message for AddPermits {
    type Result = Result<i64, LockError>;
}

/// Read the available permits (0 when never set). For a permit-expirable semaphore this
/// first takes back expired permits, as Redisson does, so it writes.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::{messages::AvailablePermits, LockClient};
///
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let free = client.semaphore("uploads")?.actor()?.send(AvailablePermits).await??;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AvailablePermits;

impl Message for AvailablePermits {
    type Result = Result<i64, LockError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_redissons_brace_rule() {
        let plain = LockName::new("pool", 64).unwrap();
        let keys = SemaphoreKeys::new(&plain, Kind::Expirable);
        assert_eq!(keys.count, "pool");
        assert_eq!(keys.channel, "redisson_sc:{pool}");
        assert_eq!(keys.timeouts.as_deref(), Some("{pool}:timeout"));

        let tagged = LockName::new("{tenant}:pool", 64).unwrap();
        let keys = SemaphoreKeys::new(&tagged, Kind::Expirable);
        assert_eq!(keys.channel, "redisson_sc:{tenant}:pool");
        assert_eq!(keys.timeouts.as_deref(), Some("{tenant}:pool:timeout"));

        assert!(SemaphoreKeys::new(&plain, Kind::Plain).timeouts.is_none());
    }
}
