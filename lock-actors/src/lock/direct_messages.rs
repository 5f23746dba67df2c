//! What the fast path (`lock/direct.rs`) and a lock's actor share: a hold taken directly
//! and a call in doubt (each waits in the fast path's machine until the actor absorbs it),
//! the empty message that wakes the actor for them, and the one acquire request, which
//! also queues a caller whose direct try found the lock busy or got no answer. Below both, so
//! neither names the other's module for them.

use super::{LockGuard, LockOwner, Released};
use crate::config::SpinBackoff;
use crate::error::LockError;
use crate::lease::status::StatusSender;
use crate::runtime::Errand;
use actix::Message;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A hold taken on the fast path, not (yet) known to the actor.
pub(crate) struct DirectHold {
    pub(crate) owner: LockOwner,
    pub(crate) hold: u64,
    pub(crate) status: StatusSender,
    /// The watchdog entry of a watchdog-leased hold; `None` for a fixed lease.
    pub(crate) watch_id: Option<u64>,
    /// A fixed lease, and when the acquire that took it was sent.
    pub(crate) lease: Option<Duration>,
    pub(crate) sent: Instant,
}

/// The one request by which a lock's handles, guards and the fast path ask its actor for
/// the lock (the public `Acquire` and `AcquireFenced` messages come down to it).
#[derive(Clone)]
pub(crate) struct AcquireRequest {
    pub(crate) owner: LockOwner,
    pub(crate) lease: Option<Duration>,
    pub(crate) wait: Duration,
    /// Draw a fencing token with the hold.
    pub(crate) fenced: bool,
    /// A spin lock's backoff (`None`: Redisson's default, or a kind that subscribes).
    pub(crate) backoff: Option<SpinBackoff>,
    /// A fast-path try came first: `Some(None)` found the lock held by another owner (the
    /// waiter's first try is done: it subscribes, then tries again); `Some(Some(error))`
    /// got no answer (the try is being settled: the waiter gets one more try within a
    /// response timeout, as after a first try of its own).
    pub(crate) after_direct: Option<Option<LockError>>,
}

impl AcquireRequest {
    /// A plain request: no backoff of its own, no fast-path try before it.
    pub(crate) fn new(
        owner: LockOwner,
        lease: Option<Duration>,
        wait: Duration,
        fenced: bool,
    ) -> Self {
        AcquireRequest {
            owner,
            lease,
            wait,
            fenced,
            backoff: None,
            after_direct: None,
        }
    }
}

impl Message for AcquireRequest {
    type Result = Result<LockGuard, LockError>;
}

/// A fast-path call about `owner` that may or may not have run (no answer, or its caller
/// left): recorded in the fast path's machine for the actor to settle `owner`'s count with
/// Redis.
pub(crate) struct Doubted {
    pub(crate) owner: LockOwner,
    /// What the call would have set (how long a stray hold could last).
    pub(crate) lease: Duration,
    /// Counts the settlement as under way until Redis has answered it, so a client's close
    /// waits for it.
    pub(crate) errand: Errand,
    /// An unlock that got no answer: its caller awaits what Redis turns out to hold, or the
    /// error if Redis stays silent for a response timeout.
    pub(crate) settle: Option<(LockError, oneshot::Sender<Result<Released, LockError>>)>,
}

/// Wakes the actor for a turn: something waits for it in the fast path's machine (a doubt
/// to settle). Carries nothing: the machine holds what is to be done.
pub(crate) struct Turn;

impl Message for Turn {
    type Result = ();
}
