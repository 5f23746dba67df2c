//! A hold's loss as seen from outside its guard: whether it happened, and a future that
//! resolves when it does. Each guard kind builds one from its own status; code that
//! reports on a hold it does not own (`#[distributed_lock]`'s `current()`) keeps it.

use futures_util::future::BoxFuture;
use std::sync::Arc;

/// Whether a hold is lost, and when: a cheap-to-clone view of one guard's status.
#[derive(Clone)]
pub(crate) struct LossSignal {
    is_lost: Arc<dyn Fn() -> bool + Send + Sync>,
    lost: Arc<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>,
}

impl LossSignal {
    /// A watch that answers `is_lost` and makes `lost` futures with the given functions.
    pub(crate) fn new(
        is_lost: impl Fn() -> bool + Send + Sync + 'static,
        lost: impl Fn() -> BoxFuture<'static, ()> + Send + Sync + 'static,
    ) -> Self {
        LossSignal {
            is_lost: Arc::new(is_lost),
            lost: Arc::new(lost),
        }
    }

    /// A hold that cannot be lost (plain semaphore permits: no lease, no renewal).
    pub(crate) fn never() -> Self {
        LossSignal::new(|| false, || Box::pin(std::future::pending()))
    }

    /// True once the hold is known to be lost.
    pub(crate) fn is_lost(&self) -> bool {
        (self.is_lost)()
    }

    /// Resolves when the hold is lost; never after a normal release.
    pub(crate) fn lost(&self) -> BoxFuture<'static, ()> {
        (self.lost)()
    }
}

impl std::fmt::Debug for LossSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LossSignal")
            .field("lost", &self.is_lost())
            .finish()
    }
}
