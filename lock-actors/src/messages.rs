//! The messages other actix actors send to the lock and semaphore actors, and their replies.
//!
//! Code that is not an actor does not need these: [`Lock`](crate::Lock),
//! [`Semaphore`](crate::Semaphore) and the other handles at the crate root send them for
//! you. An actor that wants to take a lock inside its own handlers asks the client for the
//! lock's actor ([`LockClient::lock_actor`](crate::LockClient::lock_actor),
//! [`Semaphore::actor`](crate::Semaphore::actor)) and sends:
//!
//! - to a [`LockActor`](crate::LockActor): [`Acquire`], [`AcquireFenced`], [`Release`]
//!   (replies [`Released`]), [`Renew`], [`ForceRelease`], [`GetState`] (replies
//!   [`LockState`]);
//! - to a [`SemaphoreActor`](crate::SemaphoreActor): [`AcquirePermits`],
//!   [`AcquireExpirablePermits`], [`ReleasePermits`], [`ReleasePermit`], [`TrySetPermits`],
//!   [`SetPermits`], [`AddPermits`], [`AvailablePermits`];
//! - to a [`LatchActor`](crate::LatchActor): [`TrySetCount`], [`CountDown`], [`GetCount`],
//!   [`DeleteLatch`], [`AwaitLatch`].
//!
//! # Example
//!
//! ```no_run
//! use actix_distributed_lock::messages::{Acquire, GetState};
//! use actix_distributed_lock::{LockClient, LockOwner};
//! use std::time::Duration;
//!
//! # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
//! let me = LockOwner::new();
//! let actor = client.lock_actor("report:daily")?;
//! let guard = actor
//!     .send(Acquire { owner: me, lease: None, wait: Duration::from_secs(5) })
//!     .await??;
//! let state = actor.send(GetState { owner: Some(me) }).await??;
//! assert_eq!(state.hold_count, 1);
//! guard.unlock().await?;
//! # Ok(()) }
//! ```

pub use crate::latch::{AwaitLatch, CountDown, DeleteLatch, GetCount, TrySetCount};
pub use crate::lock::{
    Acquire, AcquireFenced, ForceRelease, GetState, LockState, Release, Released, Renew,
};
pub use crate::semaphore::{
    AcquireExpirablePermits, AcquirePermits, AddPermits, AvailablePermits, ReleasePermit,
    ReleasePermits, SetPermits, TrySetPermits,
};
