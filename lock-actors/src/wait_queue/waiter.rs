//! One waiter of the queue: the queue's bookkeeping (id, deadlines, tries, last error)
//! around what the actor keeps for it.

use super::LONGEST_WAIT;
use crate::error::LockError;
use std::time::{Duration, Instant};

/// One local waiter: the queue's bookkeeping around the actor's own `data` (who asks, for
/// what, where the answer goes, its timers).
#[cfg_attr(test, derive(Debug, Clone))]
pub(crate) struct Waiter<T> {
    pub(crate) id: u64,
    pub(crate) started: Instant,
    /// When it gives up (a retry after an unanswered try may bring it closer).
    pub(crate) deadline: Instant,
    /// The deadline the caller asked for.
    pub(crate) patience: Instant,
    /// Tries that got an answer (or that stand for one: a fast-path try, a held-back head).
    pub(crate) attempts: u32,
    /// A try that got no answer was tried once more at once.
    pub(crate) retried: bool,
    /// What it reports at its deadline instead of a plain timeout.
    pub(crate) last_error: Option<LockError>,
    /// Its deadline timer is armed (only once it has to wait: an uncontended acquire never
    /// needs one).
    pub(super) armed: bool,
    /// A pause before its next try, taken when it heads the queue: a polling waiter whose
    /// try elsewhere (the fast path's) found the lock busy.
    pub(crate) rest: Option<Duration>,
    pub(crate) data: T,
}

impl<T> Waiter<T> {
    /// A fresh waiter that waits at most `wait` from `now`.
    pub(crate) fn new(id: u64, now: Instant, wait: Duration, data: T) -> Self {
        let deadline = now + wait.min(LONGEST_WAIT);
        Waiter {
            id,
            started: now,
            deadline,
            patience: deadline,
            attempts: 0,
            retried: false,
            last_error: None,
            armed: false,
            rest: None,
            data,
        }
    }
}

impl<T> Waiter<T> {
    /// What a waiter whose wait ran out is answered: the transient error its last try got
    /// (Redis was away), else a timeout on `name`; and how long it waited.
    pub(crate) fn timeout_error(&mut self, name: &str) -> (LockError, Duration) {
        let waited = self.started.elapsed();
        let error = match self.last_error.take() {
            Some(transient) if transient.is_transient() => transient,
            _ => LockError::timeout(name, waited),
        };
        (error, waited)
    }
}
