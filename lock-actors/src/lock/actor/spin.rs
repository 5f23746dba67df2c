//! How the lock actor takes a spin lock with its handle's backoff: the request that
//! carries it. (A plain [`Acquire`] sent to a spin lock's actor waits by Redisson's
//! default backoff.)

use super::LockActor;
use crate::config::SpinBackoff;
use crate::error::LockError;
use crate::lock::{Acquire, LockGuard};
use crate::reply::Deferred;
use actix::prelude::*;

/// [`Acquire`], waiting by `backoff` between tries (a spin lock's handle sends it).
#[derive(Clone, Copy)]
pub(crate) struct AcquireSpinning {
    pub(crate) acquire: Acquire,
    pub(crate) backoff: SpinBackoff,
}

impl Message for AcquireSpinning {
    type Result = Result<LockGuard, LockError>;
}

impl Handler<AcquireSpinning> for LockActor {
    type Result = Deferred<Result<LockGuard, LockError>>;

    fn handle(&mut self, msg: AcquireSpinning, ctx: &mut Context<Self>) -> Self::Result {
        self.enqueue(msg.acquire, false, Some(msg.backoff), ctx)
    }
}
