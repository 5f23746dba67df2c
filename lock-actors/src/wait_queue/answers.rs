//! How the queue takes what Redis answered its head's try (granted, busy, failed), and
//! waiters that leave (timed out, gone).

use super::{
    Asker, Effect, Granted, Retry, WaitQueue, ERROR_RETRY, UNSYNCED_RETRIES, UNSYNCED_RETRY,
};
use crate::error::LockError;
use std::time::{Duration, Instant};

impl<T: Asker> WaitQueue<T> {
    /// Waiter `id`'s try took it: the waiter to hand it to, if it is still here.
    pub(crate) fn granted(&mut self, id: u64) -> Granted<T> {
        self.end_try();
        match self.position(id).and_then(|pos| self.waiters.remove(pos)) {
            Some(waiter) => Granted::To(waiter),
            None => Granted::Unclaimed,
        }
    }

    /// Waiter `id`'s try found it busy; `retry_in` is the longest it may sleep without news
    /// (the holder's remaining lease: a lost unlock message costs no more than that).
    #[must_use]
    pub(crate) fn busy(&mut self, id: u64, now: Instant, retry_in: Duration) -> Vec<Effect<T>> {
        let woken = self.end_try();
        if self.closed {
            return self.drain();
        }
        let mut effects = Vec::new();
        let Some(pos) = self.position(id) else {
            return effects;
        };
        if self.waiters[pos].data.left() {
            // Its asker left while the try was in Redis (the watch on that has fired
            // already): it goes now, not after sleeping out the holder's lease.
            effects.extend(self.waiters.remove(pos).map(Effect::Withdrawn));
            return effects;
        }
        let waiter = &mut self.waiters[pos];
        waiter.attempts += 1;
        waiter.last_error = None;
        let mut rearm = false;
        if waiter.retried && waiter.deadline != waiter.patience {
            // Redis answered: the caller's own wait applies again.
            waiter.deadline = waiter.patience;
            rearm = true;
        }
        if now >= waiter.deadline {
            effects.extend(self.waiters.remove(pos).map(Effect::TimedOut));
            return effects;
        }
        let until_deadline = waiter.deadline - now;
        if rearm {
            waiter.armed = false;
        }
        self.arm(id, &mut effects);
        if woken || self.subscription_due(now) {
            return effects; // the next pump retries at once (after subscribing, if need be)
        }
        self.sleep(retry_in.min(until_deadline), &mut effects);
        effects
    }

    /// Waiter `id`'s try failed with `error` (see [`Retry`] for what is tried again).
    #[must_use]
    pub(crate) fn failed(&mut self, id: u64, now: Instant, error: LockError) -> Vec<Effect<T>> {
        self.end_try();
        if self.closed {
            return self.drain();
        }
        let mut effects = Vec::new();
        let Some(pos) = self.position(id) else {
            return effects;
        };
        let waiter = &mut self.waiters[pos];
        if matches!(error, LockError::NotReplicated { .. })
            && waiter.unsynced < UNSYNCED_RETRIES
            && now < waiter.deadline
        {
            // Granted, but no replica confirmed it (and it was given back): as Redisson
            // does, try again after a pause, a few times, within the caller's wait.
            waiter.unsynced += 1;
            waiter.attempts += 1;
            waiter.last_error = Some(error);
            waiter.not_before(now + UNSYNCED_RETRY);
            let pause = UNSYNCED_RETRY.min(waiter.deadline - now);
            self.arm(id, &mut effects);
            self.sleep(pause, &mut effects);
            return effects;
        }
        let transient = error.is_transient();
        let fail_untried = match self.retry {
            Retry::UnansweredFirstTry { grace } => {
                if matches!(error, LockError::Unavailable { .. })
                    && waiter.attempts == 0
                    && !waiter.retried
                {
                    // Once more at once (the next pump), bounded by the grace.
                    waiter.retried = true;
                    waiter.deadline = now + grace;
                    waiter.last_error = Some(error);
                    waiter.armed = false;
                    self.arm(id, &mut effects);
                    return effects;
                }
                true
            }
            Retry::TransientOnce => {
                if transient && !waiter.retried {
                    waiter.retried = true;
                    waiter.last_error = Some(error);
                    return effects; // the next pump tries once more at once
                }
                false
            }
        };
        if (fail_untried && waiter.attempts == 0) || !transient || now >= waiter.deadline {
            if let Some(failed) = self.waiters.remove(pos) {
                effects.push(Effect::Fail(failed, error));
            }
            return effects;
        }
        waiter.attempts += 1;
        waiter.last_error = Some(error);
        let pause = ERROR_RETRY.min(waiter.deadline - now);
        self.arm(id, &mut effects);
        self.sleep(pause, &mut effects);
        effects
    }

    /// Waiter `id`'s deadline timer fired: it times out now, even when its try is in Redis
    /// (its caller asked to wait no longer). That try's answer then finds nobody: a grant
    /// is [`Granted::Unclaimed`] and given back, and no other waiter tries until it came.
    #[must_use]
    pub(crate) fn expire(&mut self, id: u64) -> Vec<Effect<T>> {
        if self.trying() && self.waiters.front().is_some_and(|head| head.id == id) {
            return self
                .waiters
                .pop_front()
                .map(Effect::TimedOut)
                .into_iter()
                .collect();
        }
        self.leave(id, Effect::TimedOut)
    }

    /// Waiter `id`'s asker went away (its future was dropped): it leaves the queue now, so
    /// it holds up nobody behind it; unless its try is in Redis (a grant is given back).
    #[must_use]
    pub(crate) fn gone(&mut self, id: u64) -> Vec<Effect<T>> {
        self.leave(id, Effect::Withdrawn)
    }

    /// Drops waiters whose askers went away (a cancelled acquire), so a newcomer never
    /// queues behind them. A head whose try is in Redis stays: its answer decides.
    #[must_use]
    pub(crate) fn withdraw_gone(&mut self) -> Vec<Effect<T>> {
        let keep_head = self.trying();
        let mut effects = Vec::new();
        let mut head_gone = false;
        let mut pos = 0;
        while pos < self.waiters.len() {
            if self.waiters[pos].data.left() && !(pos == 0 && keep_head) {
                head_gone |= pos == 0;
                effects.extend(self.waiters.remove(pos).map(Effect::Withdrawn));
            } else {
                pos += 1;
            }
        }
        if head_gone {
            // Its sleep was its own: whoever heads the queue now has not tried yet.
            self.wake_head(&mut effects);
        }
        effects
    }
}
