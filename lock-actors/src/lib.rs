//! The runtime of `actix-distributed-lock`: Redisson-compatible distributed locks as actix
//! actors over Redis. Use it through the facade crate `actix-distributed-lock`, which
//! re-exports everything here and adds the `#[distributed_lock]` attribute.
//!
//! # Which lock should I use?
//!
//! - **[`Lock`]** from [`LockClient::lock`]: the reentrant lock, the default. One holder at a time;
//!   the same [`LockOwner`] may take it again. Held locks are kept alive by the watchdog and
//!   expire on their own if the process dies. Same keys and channel as Redisson's `RLock`,
//!   so Java services can lock the same resource.
//! - Take it with a **fixed lease** ([`AcquireOptions::lease`]) when the work has a known
//!   upper bound and you would rather the lock free itself than be renewed.
//! - **A fenced lock** ([`LockClient::fenced_lock`]) when the protected storage can check a
//!   number: every hold carries a strictly increasing [`LockGuard::fencing_token`].
//! - **A fair lock** ([`LockClient::fair_lock`]) when waiters must be served in request
//!   order across processes.
//! - **A read-write lock** ([`LockClient::read_write_lock`]) when many may read at once but
//!   writes must be alone.
//! - **A semaphore** ([`LockClient::semaphore`]) when up to N holders may work at once;
//!   the **permit-expirable** one ([`LockClient::expirable_semaphore`]) when a dead
//!   holder's permits must come back on their own.
//! - **A fast lock** ([`LockClient::fast_lock`]) on hot, uncontended paths that never
//!   re-enter: one string key, the cheapest scripts.
//! - **A spin lock** ([`LockClient::spin_lock`]) where pub/sub is unavailable or costly:
//!   the reentrant lock without channels, its waiters polling with a backoff
//!   ([`SpinBackoff`]), as Redisson's `RSpinLock`.
//! - **A count-down latch** ([`LockClient::count_down_latch`]) when work must wait until N
//!   other steps, anywhere, are done: it holds nothing, it only opens.
//! - Every kind has the watchdog, `lost()`, bounded waits and the same errors; see
//!   [`LockKind`] for what each stores in Redis.
//! - **A [`MultiLock`]** when one piece of work needs several locks at once (an order and a
//!   stock item, perhaps on different nodes): all or none, in a canonical order, so
//!   overlapping sets never deadlock.
//! - **A [`RedLock`]** only when the lock must survive the crash of a Redis node and you run
//!   3 or 5 independent nodes for it: it is held on a majority. Read its guarantees first; a
//!   single-node fenced lock is usually the better choice.
//!
//! # The pieces
//!
//! - [`LockClient`]: the handle you keep; one per process, cheap to clone.
//! - [`LockActor`] and [`SemaphoreActor`]: one per lock (or semaphore) name in use; their
//!   messages, in [`messages`], are the API for other actors.
//! - [`LockGuard`]: one hold; releases on drop; [`LockGuard::lost`] tells you if the lock
//!   was lost while you held it.
//! - [`NodeSupervisor`]: owns the subscription connection of the node and reconnects it.
//!
//! # Example
//!
//! ```no_run
//! use actix_distributed_lock::LockClient;
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let client = LockClient::from_url("redis://127.0.0.1:6379/").await?;
//!     let guard = client.lock("order:42")?.acquire().await?;
//!     // ... pay the order exactly once ...
//!     guard.unlock().await?;
//!     Ok(())
//! }
//! ```

// docs.rs (`--cfg docsrs`, nightly) shows which feature each gated item needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod client;
mod compose;
mod config;
mod denied;
mod error;
mod handle;
#[cfg(feature = "inspect")]
#[cfg_attr(docsrs, doc(cfg(feature = "inspect")))]
pub mod inspect;
mod keys;
mod latch;
mod lease;
mod lock;
#[doc(hidden)]
pub mod macro_support;
pub mod messages;
/// The model checks (test-only): a home of their own beside the runtime they check.
#[cfg(test)]
mod model;
mod node;
mod queue_driver;
mod redact;
mod registry;
mod reply;
mod runtime;
mod rwlock;
mod script;
mod semaphore;
mod telemetry;
mod wait_queue;
#[cfg(feature = "web")]
#[cfg_attr(docsrs, doc(cfg(feature = "web")))]
pub mod web;

pub use client::LockClient;
pub use compose::{MultiLock, MultiLockGuard, RedLock, RedLockGuard};
pub use config::SpinBackoff;
pub use config::{
    ClientConfig, Deployment, ReplicaSync, ShardedSubscriptionMode, MAX_NAMESPACE_LEN,
};
pub use error::{LockError, ServerReply};
pub use handle::{
    AcquireOptions, CountDownLatch, Lock, PermitExpirableSemaphore, PermitOptions, Semaphore,
};
pub use keys::LockName;
pub use latch::LatchActor;
pub use lock::{LockActor, LockGuard, LockKind, LockOwner, Released};
pub use macro_support::{current, default_client, fencing_token, set_default_client, CurrentLock};
pub use node::NodeSupervisor;
pub use redact::redact_url;
#[doc(hidden)]
pub use reply::Deferred;
pub use rwlock::ReadWriteLock;
pub use semaphore::{PermitGuard, SemaphoreActor, SemaphoreGuard};
