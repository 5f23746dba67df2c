//! The runtime of `actix-distributed-lock`: Redisson-compatible distributed locks as actix
//! actors over Redis. Use it through the facade crate `actix-distributed-lock`, which
//! re-exports everything here and adds the `#[distributed_lock]` attribute.
//!
//! # Which lock should I use?
//!
//! The README's [table of kinds](https://github.com/actix-distributed-lock/actix-distributed-lock/blob/main/README.md#which-lock-should-i-use) is the one answer: what each
//! kind is for and the call that takes it.
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
#[macro_use]
mod kinds;
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
    ClientConfig, Deployment, ReplicaSync, ReplicaSyncMode, ShardedSubscriptionMode,
    MAX_NAMESPACE_LEN,
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
/// The `redis` crate this library is built on, re-exported so that an application names the
/// same version (its types appear in this crate's errors and settings).
///
/// ```
/// use actix_distributed_lock_actors::redis;
/// let client = redis::Client::open("redis://127.0.0.1:6379/").unwrap();
/// assert_eq!(client.get_connection_info().addr().to_string(), "127.0.0.1:6379");
/// ```
pub use redis;
#[doc(hidden)]
pub use reply::Deferred;
pub use rwlock::ReadWriteLock;
pub use semaphore::{PermitGuard, SemaphoreActor, SemaphoreGuard};
