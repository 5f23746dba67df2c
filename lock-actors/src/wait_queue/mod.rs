//! The wait queue: one pure state machine for the local FIFO of waiters of one lock or
//! semaphore actor, the state of its head, its deadlines, and the effects the actor must
//! carry out (try for this waiter, subscribe, arm a timer, reply, give up).
//!
//! It knows no actix, no Redis and no clock: every call that needs the time takes `now`,
//! and every timer is an [`Effect`] the actor arms and reports back. The actor drives it
//! with one rule: after every call, carry out the effects it returned, in order, then call
//! [`WaitQueue::pump`] and carry out those. Only the head of the queue contends in Redis,
//! so one process never stampedes a lock; the rest wait their turn behind it.
//!
//! ```text
//!            pump (head may go)                    answer: busy
//!   Idle ───────────────────────► Trying ──────────────────────────► Sleeping
//!    ▲  ▲   pump (tried once, not             │   (or Idle at once when woken meanwhile,
//!    │  │    subscribed yet)                  │    or when a subscription is due)
//!    │  └──────────── Subscribing ◄───────────┘
//!    │   subscribed                                               │
//!    └────────────── slept / woken / head left ◄──────────────────┘
//! ```
//!
//! A polling queue ([`WaitQueue::polling`], the spin lock's) never subscribes: its head
//! sleeps after every busy answer (the pause the actor gives, its backoff) and tries again.

mod answers;
pub(crate) mod driver;
#[cfg(test)]
mod tests;
mod waiter;

pub(crate) use waiter::Waiter;

use crate::error::LockError;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Retry delay after a Redis error while waiting (the wait bound still applies).
pub(crate) const ERROR_RETRY: Duration = Duration::from_millis(100);
/// After a grant no replica confirmed (the default replica sync), the pause before the next
/// try, and how many such tries follow: Redisson's `retryInterval` and `retryAttempts`.
pub(crate) const UNSYNCED_RETRY: Duration = Duration::from_millis(1500);
pub(crate) const UNSYNCED_RETRIES: u8 = 3;
/// Waits longer than this are treated as this long (an `Instant` cannot reach further).
pub(crate) const LONGEST_WAIT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// What the actor's payload of a waiter tells the queue: whether its asker is still there.
pub(crate) trait Asker {
    /// The asker went away (its future was dropped): the waiter has nobody to answer.
    fn left(&self) -> bool;
}

/// What the head of the queue is doing: exactly one of these at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Head {
    /// Nothing under way: [`WaitQueue::pump`] may let the head go.
    Idle,
    /// Waiter `id`'s try is in Redis; `woken` when news came meanwhile (retry at once
    /// instead of sleeping on a busy answer).
    Trying { id: u64, woken: bool },
    /// Asking for wake-ups before the head's second try, so none between the tries is lost.
    Subscribing,
    /// Asleep until timer `token` fires or news comes.
    Sleeping { token: u64 },
}

/// Where the wake-up subscription stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Subscribed {
    /// Never asked for, or failed: free to ask again from `retry_after` on.
    No { retry_after: Option<Instant> },
    /// Wake-ups arrive.
    Yes,
}

impl Subscribed {
    fn due(self, now: Instant) -> bool {
        matches!(self, Subscribed::No { retry_after } if retry_after.is_none_or(|at| at <= now))
    }
}

/// How a try that failed is retried (the lock and the semaphore differ, by design).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// A waiter's first try that got no answer is tried once more at once, within `grace`
    /// (Redis that stays away is reported fast); any other failure of a first try fails it.
    UnansweredFirstTry { grace: Duration },
    /// Any transient failure is tried once more at once, within the waiter's own wait.
    TransientOnce,
}

/// What the actor says of the head before it may try (see [`WaitQueue::pump`]).
pub(crate) enum Gate {
    /// It may try now.
    Go,
    /// It must not wait at all: fail it with this error.
    Refuse(LockError),
    /// Not now: sleep `pause` (or until news), counting as tried; `error` is what it reports
    /// at its deadline if nothing better comes.
    Hold {
        pause: Duration,
        error: Option<LockError>,
    },
}

/// One thing the actor must do, in the order given.
pub(crate) enum Effect<T> {
    /// Send waiter `id`'s acquire try to Redis; answer with [`WaitQueue::granted`],
    /// [`WaitQueue::busy`] or [`WaitQueue::failed`].
    Try { id: u64 },
    /// Subscribe to the wake-up channel; answer with [`WaitQueue::subscribed`].
    Subscribe,
    /// Arm the head's timer (replacing any): after `pause`, call [`WaitQueue::slept`].
    Sleep { token: u64, pause: Duration },
    /// Cancel the head's timer.
    CancelSleep,
    /// Arm waiter `id`'s deadline timer for `at`, replacing any it has: when it fires, call
    /// [`WaitQueue::expire`].
    ArmDeadline { id: u64, at: Instant },
    /// Its wait is over: answer with its `last_error`, or a timeout.
    TimedOut(Waiter<T>),
    /// Answer it with this error.
    Fail(Waiter<T>, LockError),
    /// Its asker left: drop it (and its timers) without an answer.
    Withdrawn(Waiter<T>),
}

/// The answer to a try that took the lock (or the permits).
pub(crate) enum Granted<T> {
    /// Hand it to this waiter.
    To(Waiter<T>),
    /// Its waiter left meanwhile: give it back.
    Unclaimed,
}

/// The local FIFO of one actor's waiters and the state of its head. (Debug and Clone in
/// tests: the model check keeps it in the states it explores.)
#[cfg_attr(test, derive(Debug, Clone))]
pub(crate) struct WaitQueue<T> {
    waiters: VecDeque<Waiter<T>>,
    head: Head,
    subscription: Subscribed,
    /// Ever asked for a subscription (the actor unsubscribes when it stops).
    ever_subscribed: bool,
    retry: Retry,
    next_id: u64,
    next_token: u64,
    /// The actor's client is closing (see [`close`](Self::close)): nobody waits any more.
    closed: bool,
    /// Its waiters poll and never subscribe (see [`polling`](Self::polling)).
    polls: bool,
}

impl<T: Asker> WaitQueue<T> {
    /// An empty queue whose failed tries are retried by `retry`.
    pub(crate) fn new(retry: Retry) -> Self {
        WaitQueue {
            waiters: VecDeque::new(),
            head: Head::Idle,
            subscription: Subscribed::No { retry_after: None },
            ever_subscribed: false,
            retry,
            next_id: 1,
            next_token: 1,
            closed: false,
            polls: false,
        }
    }

    /// An empty queue whose waiters poll: a busy head sleeps the pause [`busy`](Self::busy)
    /// is given and tries again, and no subscription is ever asked for.
    pub(crate) fn polling(retry: Retry) -> Self {
        WaitQueue {
            polls: true,
            ..Self::new(retry)
        }
    }

    /// A fresh waiter with an id of this queue (not queued yet: see [`enqueue`](Self::enqueue)).
    pub(crate) fn waiter(&mut self, now: Instant, wait: Duration, data: T) -> Waiter<T> {
        let id = self.next_id;
        self.next_id += 1;
        Waiter::new(id, now, wait, data)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// Nothing is under way for the head: a pump may let it go.
    pub(crate) fn idle(&self) -> bool {
        self.head == Head::Idle
    }

    /// A try is in Redis.
    pub(crate) fn trying(&self) -> bool {
        matches!(self.head, Head::Trying { .. })
    }

    /// A subscription was ever asked for (the actor must unsubscribe when it stops).
    pub(crate) fn ever_subscribed(&self) -> bool {
        self.ever_subscribed
    }

    pub(crate) fn get(&self, id: u64) -> Option<&Waiter<T>> {
        self.waiters.iter().find(|w| w.id == id)
    }

    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut Waiter<T>> {
        self.waiters.iter_mut().find(|w| w.id == id)
    }

    /// Queues `waiter`: at the back, or at the front when `ahead` (a re-entry never queues
    /// behind other owners: that would deadlock). Waiters whose askers left go first.
    #[must_use]
    pub(crate) fn enqueue(&mut self, waiter: Waiter<T>, ahead: bool) -> Vec<Effect<T>> {
        if self.closed {
            return vec![Self::end(waiter)];
        }
        let mut effects = self.withdraw_gone();
        if ahead {
            self.waiters.push_front(waiter);
            self.wake_head(&mut effects);
            return effects;
        }
        let tries_now = self.waiters.is_empty()
            && !matches!(self.head, Head::Trying { .. } | Head::Sleeping { .. })
            && waiter.attempts == 0
            && waiter.last_error.is_none();
        let id = waiter.id;
        self.waiters.push_back(waiter);
        if !tries_now {
            self.arm(id, &mut effects);
        }
        effects
    }

    /// Lets the head contend, unless it already is, is subscribing or asleep. Drops heads
    /// whose askers left and times out heads past their deadline; `gate` decides about the
    /// head that remains.
    #[must_use]
    pub(crate) fn pump(
        &mut self,
        now: Instant,
        mut gate: impl FnMut(&Waiter<T>) -> Gate,
    ) -> Vec<Effect<T>> {
        let mut effects = Vec::new();
        if self.head != Head::Idle {
            return effects;
        }
        if self.closed {
            return self.drain();
        }
        let id = loop {
            let Some(head) = self.waiters.front() else {
                // An idle actor keeps no queue buffer (it is most of a held lock's footprint).
                if self.waiters.capacity() > 0 {
                    self.waiters = VecDeque::new();
                }
                return effects;
            };
            if head.data.left() {
                effects.extend(self.waiters.pop_front().map(Effect::Withdrawn));
                continue;
            }
            if head.attempts > 0 && head.deadline <= now {
                effects.extend(self.waiters.pop_front().map(Effect::TimedOut));
                continue;
            }
            match gate(head) {
                Gate::Go => break head.id,
                Gate::Refuse(error) => {
                    if let Some(refused) = self.waiters.pop_front() {
                        effects.push(Effect::Fail(refused, error));
                    }
                }
                Gate::Hold { pause, error } => {
                    let id = head.id;
                    if let Some(head) = self.waiters.front_mut() {
                        head.attempts = head.attempts.max(1);
                        if head.last_error.is_none() {
                            head.last_error = error;
                        }
                    }
                    self.arm(id, &mut effects);
                    self.sleep(pause, &mut effects);
                    return effects;
                }
            }
        };
        if let Some(head) = self.waiters.front() {
            if let Some(at) = head.next_try_at().filter(|&at| at > now) {
                let pause = at.min(head.deadline).saturating_duration_since(now);
                self.arm(id, &mut effects);
                self.sleep(pause, &mut effects);
                return effects;
            }
        }
        if let Some(head) = self.waiters.front_mut() {
            if let Some(pause) = head.rest.take() {
                let pause = pause.min(head.deadline.saturating_duration_since(now));
                self.arm(id, &mut effects);
                self.sleep(pause, &mut effects);
                return effects;
            }
        }
        let tried = self.waiters.front().is_some_and(|head| head.attempts > 0);
        if tried && self.subscription_due(now) {
            self.head = Head::Subscribing;
            self.ever_subscribed = true;
            effects.push(Effect::Subscribe);
        } else {
            self.head = Head::Trying { id, woken: false };
            effects.push(Effect::Try { id });
        }
        effects
    }

    /// News that may free the lock (an unlock was published, a reconnect asks everyone to
    /// retry): a sleeping head wakes, and a head whose try is in Redis tries again at once
    /// if that try finds it busy.
    #[must_use]
    pub(crate) fn news(&mut self) -> Vec<Effect<T>> {
        if let Head::Trying { woken, .. } = &mut self.head {
            *woken = true;
        }
        let mut effects = Vec::new();
        self.wake_head(&mut effects);
        effects
    }

    /// The lock may be free now (a local holder let go, or the head changed): a sleeping
    /// head wakes (a try in Redis is not told).
    #[must_use]
    pub(crate) fn wake(&mut self) -> Vec<Effect<T>> {
        let mut effects = Vec::new();
        self.wake_head(&mut effects);
        effects
    }

    /// The head's timer `token` fired.
    pub(crate) fn slept(&mut self, token: u64) {
        if self.head == (Head::Sleeping { token }) {
            self.head = Head::Idle;
        }
    }

    /// The subscription request ended in `state`.
    pub(crate) fn subscribed(&mut self, state: Subscribed) {
        self.subscription = state;
        if self.head == Head::Subscribing {
            self.head = Head::Idle;
        }
    }

    /// The subscription request ended: in `state`, or refused for good (an ACL user
    /// without the channel). Then the head, which tried once and found the lock busy,
    /// fails with the refusal instead of waiting for a wake-up that cannot come (polling at
    /// the lease would make it wait out its whole wait); the next head tries, and asks
    /// again if it must wait.
    #[must_use]
    pub(crate) fn subscription_ended(
        &mut self,
        state: Result<Subscribed, LockError>,
    ) -> Vec<Effect<T>> {
        let refused = match state {
            Ok(state) => {
                self.subscribed(state);
                return Vec::new();
            }
            Err(error) => error,
        };
        let mut effects = Vec::new();
        let head_asked = self.head == Head::Subscribing;
        self.subscribed(Subscribed::No { retry_after: None });
        if head_asked {
            effects.extend(
                self.waiters
                    .pop_front()
                    .map(|head| Effect::Fail(head, refused)),
            );
        }
        effects
    }

    /// The actor's client is closing: every waiter fails with [`LockError::Shutdown`] now
    /// (one whose asker left is dropped without an answer), but a head whose try is in
    /// Redis, which its answer decides (a grant is handed over; busy or failed, it fails
    /// too). Every waiter queued later fails at once.
    #[must_use]
    pub(crate) fn close(&mut self) -> Vec<Effect<T>> {
        self.closed = true;
        let mut effects = self.drain();
        self.wake_head(&mut effects);
        effects
    }

    /// Ends every waiter of a closed queue but one whose try is in Redis.
    fn drain(&mut self) -> Vec<Effect<T>> {
        let trying = match self.head {
            Head::Trying { id, .. } => Some(id),
            _ => None,
        };
        let mut effects = Vec::new();
        for waiter in std::mem::take(&mut self.waiters) {
            if Some(waiter.id) == trying {
                self.waiters.push_back(waiter);
            } else {
                effects.push(Self::end(waiter));
            }
        }
        effects
    }

    /// How a waiter of a closed queue ends.
    fn end(waiter: Waiter<T>) -> Effect<T> {
        if waiter.data.left() {
            Effect::Withdrawn(waiter)
        } else {
            Effect::Fail(waiter, LockError::Shutdown)
        }
    }

    fn leave(&mut self, id: u64, effect: fn(Waiter<T>) -> Effect<T>) -> Vec<Effect<T>> {
        let mut effects = Vec::new();
        let Some(pos) = self.position(id) else {
            return effects;
        };
        if pos == 0 && self.trying() {
            return effects; // its try's answer decides
        }
        effects.extend(self.waiters.remove(pos).map(effect));
        if pos == 0 {
            // The next waiter has not been asleep on its own timer.
            self.wake_head(&mut effects);
        }
        effects
    }

    /// A subscription is to be asked for before the head's next try.
    fn subscription_due(&self, now: Instant) -> bool {
        !self.polls && self.subscription.due(now)
    }

    fn position(&self, id: u64) -> Option<usize> {
        self.waiters.iter().position(|w| w.id == id)
    }

    /// Ends the try in Redis; whether news came meanwhile.
    fn end_try(&mut self) -> bool {
        match self.head {
            Head::Trying { woken, .. } => {
                self.head = Head::Idle;
                woken
            }
            _ => false,
        }
    }

    fn wake_head(&mut self, effects: &mut Vec<Effect<T>>) {
        if let Head::Sleeping { .. } = self.head {
            self.head = Head::Idle;
            effects.push(Effect::CancelSleep);
        }
    }

    fn sleep(&mut self, pause: Duration, effects: &mut Vec<Effect<T>>) {
        let token = self.next_token;
        self.next_token += 1;
        self.head = Head::Sleeping { token };
        effects.push(Effect::Sleep { token, pause });
    }

    /// Arms waiter `id`'s deadline timer, unless it has one.
    fn arm(&mut self, id: u64, effects: &mut Vec<Effect<T>>) {
        if let Some(waiter) = self.get_mut(id) {
            if !waiter.armed {
                waiter.armed = true;
                effects.push(Effect::ArmDeadline {
                    id,
                    at: waiter.deadline,
                });
            }
        }
    }
}
