//! What the fast path (`lock/direct.rs`) and a lock's actor share: a hold taken directly
//! (it waits in the fast path's slot until the actor absorbs it), and the messages by which
//! the actor queues a caller whose direct try found the lock busy or got no answer, or
//! settles a call whose reply was lost. Below both, so neither names the other's module
//! for them.

use super::{LockGuard, LockOwner, Released};
use crate::error::LockError;
use crate::hold_status::StatusSender;
use crate::runtime::Errand;
use actix::Message;
use std::time::{Duration, Instant};

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

/// Take the lock after a fast-path try: it found the lock held by another owner (the
/// waiter's first try is done: it subscribes, then tries again), or it got no answer (the
/// try is being settled: the waiter gets one more try within a response timeout, as after
/// a first try of its own).
pub(crate) struct AfterDirect {
    pub(crate) owner: LockOwner,
    pub(crate) lease: Option<Duration>,
    pub(crate) wait: Duration,
    pub(crate) fenced: bool,
    /// `None`: it was busy. `Some`: Redis did not answer.
    pub(crate) error: Option<LockError>,
}

impl Message for AfterDirect {
    type Result = Result<LockGuard, LockError>;
}

/// A fast-path call about `owner` got no answer (or its caller left): it may or may not
/// have run; settle `owner`'s count with Redis.
pub(crate) struct Doubt {
    pub(crate) owner: LockOwner,
    pub(crate) lease: Duration,
    /// Counts the settlement as under way until Redis has answered it, so a client's
    /// close waits for it.
    pub(crate) errand: Errand,
}

impl Message for Doubt {
    type Result = ();
}

/// A fast-path unlock got no answer: report what Redis turns out to hold once it answers,
/// or `error` if it stays silent for a response timeout.
pub(crate) struct SettleUnlock {
    pub(crate) owner: LockOwner,
    pub(crate) lease: Duration,
    pub(crate) error: LockError,
}

impl Message for SettleUnlock {
    type Result = Result<Released, LockError>;
}
