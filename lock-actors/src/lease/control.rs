//! A hold's lease as seen from outside its guard: how long it surely lasts, and setting it
//! again. Each guard kind builds one from its own parts; code that acts on a hold it does
//! not own (`#[distributed_lock]`'s `current()`) keeps it.

use crate::error::LockError;
use futures_util::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;

type Extend = dyn Fn(Duration) -> BoxFuture<'static, Result<(), LockError>> + Send + Sync;

/// How long a hold surely lasts, and how to set its lease again: a cheap-to-clone view of
/// one guard's lease.
#[derive(Clone)]
pub(crate) struct LeaseControl {
    remaining: Arc<dyn Fn() -> Duration + Send + Sync>,
    extend: Arc<Extend>,
}

impl LeaseControl {
    /// A view that answers `remaining` and sets the lease with `extend` (whose future sends
    /// the update before it is first polled, and does not borrow the guard).
    pub(crate) fn new(
        remaining: impl Fn() -> Duration + Send + Sync + 'static,
        extend: impl Fn(Duration) -> BoxFuture<'static, Result<(), LockError>> + Send + Sync + 'static,
    ) -> Self {
        LeaseControl {
            remaining: Arc::new(remaining),
            extend: Arc::new(extend),
        }
    }

    /// A hold without a lease (plain semaphore permits): it never runs out, and there is
    /// nothing to set.
    pub(crate) fn unleased(what: String) -> Self {
        LeaseControl::new(
            || Duration::MAX,
            move |_| {
                let error = LockError::invalid_config(format!(
                    "{what} has no lease to set (plain semaphore permits never expire)"
                ));
                Box::pin(std::future::ready(Err(error)))
            },
        )
    }

    /// How long the hold surely lasts from now.
    pub(crate) fn remaining(&self) -> Duration {
        (self.remaining)()
    }

    /// Sets the hold's lease to `lease` from now.
    pub(crate) fn extend(&self, lease: Duration) -> BoxFuture<'static, Result<(), LockError>> {
        (self.extend)(lease)
    }
}

impl std::fmt::Debug for LeaseControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseControl")
            .field("remaining", &self.remaining())
            .finish()
    }
}
