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
    /// Grants it was given that the replicas did not confirm (each given back, then tried
    /// again after a pause).
    pub(crate) unsynced: u8,
    /// No try before this many ms after `started` (0: none), whatever news come (an unlock
    /// message wakes a sleeping head): the pause after a grant the replicas did not confirm.
    /// Milliseconds in a `u32`, not an `Instant`: a waiter is moved on every grant.
    not_before_ms: u32,
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
            unsynced: 0,
            not_before_ms: 0,
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

    /// No try before `at` (see `not_before_ms`).
    pub(crate) fn not_before(&mut self, at: Instant) {
        let ms = at.saturating_duration_since(self.started).as_millis();
        self.not_before_ms = u32::try_from(ms).unwrap_or(u32::MAX).max(1);
    }

    /// When its next try may be made, if it must wait for one (see `not_before_ms`).
    pub(crate) fn next_try_at(&self) -> Option<Instant> {
        (self.not_before_ms > 0)
            .then(|| self.started + Duration::from_millis(u64::from(self.not_before_ms)))
    }
}
