//! Who may act on one lock right now: the decisions of the uncontended fast path, as a
//! machine with no I/O (the caller and the lock actor carry out what it decides).
//!
//! One `FastPath` per lock actor, behind the mutex the actor and its callers share
//! (`super::direct`). It is the one place that knows whether the lock is idle, being tried
//! directly, held on the fast path, being unlocked directly, or in the actor's charge:
//!
//! - `Idle`: the actor has no holders, waiters or calls in flight; a caller may try.
//! - `Trying`: a caller's acquire is on its way to Redis; other callers ask the actor.
//! - `Held`: exactly one hold, taken directly, sits in the slot; its guard may unlock it
//!   directly.
//! - `Unlocking`: that guard took it out of the slot and sends the unlock itself.
//! - `Actor`: the actor is in charge. At every turn it *absorbs* the slot (counts the holds
//!   taken directly as its own) before it reads or changes its holders.
//!
//! A hold granted while the actor is in charge, or beside another one in the slot, stays in
//! the slot: the actor absorbs it at its next turn, and nobody unlocks it directly (two holds
//! of one key, each with its own lease, are kept by the actor, which knows the lease every
//! remaining hold needs). A direct call that may or may not have run (no answer, or its
//! caller left) is recorded the same way, as a *doubt* (`D`) the actor absorbs and settles
//! with Redis; recording one puts the actor in charge, and it stays in charge until it has
//! absorbed every doubt, so no caller acts directly on a count that is in question. So
//! nothing is handed from a caller to the actor by message: the slot is the hand-over,
//! under the same lock as the mode, and the caller only wakes the actor with an empty turn.
//!
//! The machine also counts the guards out and the direct calls in flight, and keeps the
//! actor's address (`K`) while either is non-zero or a hold or doubt waits for it: a guard's
//! release and a doubt must reach the actor even if every handle was dropped.

use super::flight::Forces;
use crate::config::clock_drift;
use std::time::{Duration, Instant};

/// Who may act on the lock (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Mode {
    Idle,
    Trying,
    Held,
    Unlocking,
    Actor,
}

/// How a direct acquire ended in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TryAnswer {
    /// Taken.
    Granted,
    /// Held by another owner.
    Busy,
    /// No answer: it may have run.
    Unanswered,
    /// Taken, but not on enough replicas: it is in Redis, uncounted.
    NotReplicated,
    /// Refused for good (a key of another type, say): nothing was taken.
    Refused,
}

/// What the caller does after its direct acquire was answered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AfterTry<K> {
    /// Make the guard (counted out already) and [`place`](FastPath::place) the hold.
    Grant,
    /// The actor is in charge now: ask it to queue the caller (the first try is done).
    Queue(K),
    /// The call is recorded as a doubt and the actor is in charge: wake it, then ask it to
    /// queue the caller with the error.
    DoubtAndQueue(K),
    /// Report the error; nothing to settle.
    Fail,
}

/// What the guard does after its direct unlock was answered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum AfterUnlock<K> {
    /// Released (or found lost): nothing more.
    Done,
    /// No answer: recorded as a doubt whose settlement the caller awaits; wake the actor
    /// (in charge now), which finds out what Redis holds.
    Settle(K),
    /// Refused in a way that leaves the count in doubt: recorded; wake the actor, which
    /// reconciles it.
    Doubt(K),
}

/// How a direct unlock ended in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnlockAnswer {
    /// Redis answered (released, or the hold was found gone).
    Answered,
    /// No answer: it may have run.
    Unanswered,
    /// An error reply: it did not run as meant.
    Failed,
}

/// A hold in the slot.
#[cfg_attr(test, derive(Debug, Clone, PartialEq, Eq, Hash))]
struct Slotted<H> {
    hold: u64,
    until: Option<Instant>,
    taken: H,
}

/// The holds in the slot: the first inline (a held lock costs no allocation for it), the
/// rare others beside it. `more` is empty whenever `first` is.
#[cfg_attr(test, derive(Debug, Clone, PartialEq, Eq, Hash))]
struct Slot<H> {
    first: Option<Slotted<H>>,
    more: Vec<Slotted<H>>,
}

impl<H> Slot<H> {
    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.len()
    }

    fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    fn push(&mut self, slotted: Slotted<H>) {
        if self.first.is_none() {
            self.first = Some(slotted);
        } else {
            self.more.push(slotted);
        }
    }

    /// The one hold, when there is exactly one.
    fn only(&self) -> Option<&Slotted<H>> {
        self.first.as_ref().filter(|_| self.more.is_empty())
    }

    /// Every hold, in the order placed; the slot is empty after.
    fn take_all(&mut self) -> impl Iterator<Item = H> {
        let first = self.first.take();
        let more = std::mem::take(&mut self.more);
        first.into_iter().chain(more).map(|slotted| slotted.taken)
    }
}

/// The fast path's state of one lock. `H` is a hold taken directly, `D` a direct call in
/// doubt, `K` the actor's address. (Comparable and hashable in tests: the model check keeps
/// it in the states it explores.)
#[cfg_attr(test, derive(Debug, Clone, PartialEq, Eq, Hash))]
pub(crate) struct FastPath<H, D, K> {
    mode: Mode,
    /// Holds taken directly and not yet absorbed by the actor, each with its id and, for a
    /// fixed lease, until when it is surely held.
    slot: Slot<H>,
    /// Direct calls that may or may not have run, for the actor to settle, in the order
    /// recorded.
    doubts: Vec<D>,
    /// The actor's address while a caller acts directly, a guard is out or a call is in
    /// flight; cleared when none is, which breaks the cycle actor -> state -> actor.
    keepalive: Option<K>,
    /// Guards out.
    guards: usize,
    /// Direct calls in flight (acquires and unlocks): each may still have to tell the
    /// actor of a doubt, even after the actor took charge meanwhile.
    calls: usize,
    /// A per-owner kind (the fair lock): every waiter goes through the queue in Redis, so
    /// nothing is ever done directly.
    per_owner: bool,
    /// The force-unlocks of the key begun or seen (see [`voided`](Self::voided)): a direct
    /// acquire begun before the latest may have run before it, and its grant may be gone.
    forces: Forces,
}

impl<H, D, K: Clone> FastPath<H, D, K> {
    pub(crate) fn new(per_owner: bool) -> Self {
        FastPath {
            mode: if per_owner { Mode::Actor } else { Mode::Idle },
            slot: Slot {
                first: None,
                more: Vec::new(),
            },
            doubts: Vec::new(),
            keepalive: None,
            guards: 0,
            calls: 0,
            per_owner,
            forces: Forces::default(),
        }
    }

    /// The force epoch a direct acquire begins in: kept by its caller, who asks
    /// [`stale`](Self::stale) about it when the answer comes.
    pub(crate) fn epoch(&self) -> u64 {
        self.forces.epoch()
    }

    /// A force-unlock of the key is about to be sent, or was seen from another actor:
    /// every direct acquire on its way now may have run before it, so a grant it brings back
    /// may have been deleted (see [`stale`](Self::stale)). The actor takes charge.
    pub(crate) fn voided(&mut self) {
        self.forces.seen();
        self.mode = Mode::Actor;
    }

    /// Whether a direct acquire begun in `epoch` was on its way when a force-unlock came:
    /// its grant is not a hold to count (it may be deleted, or not: it is settled as a
    /// doubt, and its caller tries again).
    pub(crate) fn stale(&self, epoch: u64) -> bool {
        self.forces.stale(epoch)
    }

    #[cfg(test)]
    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    /// Calls in doubt waiting for the actor.
    #[cfg(test)]
    pub(crate) fn doubts(&self) -> usize {
        self.doubts.len()
    }

    /// Whether the actor's count of the holds is complete: no direct call is in flight
    /// (decided and not yet answered, given up or, for a grant, placed: its effect in Redis
    /// is unknown until then, and it may not even be sent yet), and every hold and doubt
    /// recorded has been absorbed. Only then may the actor compare its count with Redis's.
    pub(crate) fn counts_complete(&self) -> bool {
        self.calls == 0 && self.slot.is_empty() && self.doubts.is_empty()
    }

    /// The kept address of the actor, if any.
    pub(crate) fn actor(&self) -> Option<&K> {
        self.keepalive.as_ref()
    }

    fn needs_actor(&self) -> bool {
        !matches!(self.mode, Mode::Idle | Mode::Actor)
            || self.guards > 0
            || self.calls > 0
            || !self.slot.is_empty()
            || !self.doubts.is_empty()
    }

    /// Records a call in doubt: the actor takes charge, and keeps it until it absorbed it.
    fn record_doubt(&mut self, doubt: D) {
        self.doubts.push(doubt);
        self.mode = Mode::Actor;
    }

    /// Lets the actor's address go once nobody needs it any more.
    fn settle(&mut self) {
        if !self.needs_actor() {
            self.keepalive = None;
        }
    }

    fn keep(&mut self, actor: K) -> Option<K> {
        if self.keepalive.is_none() {
            self.keepalive = Some(actor);
            None
        } else {
            Some(actor)
        }
    }

    /// The mode once nobody acts directly: held if exactly one hold waits in the slot.
    fn at_rest(&self) -> Mode {
        match self.slot.len() {
            0 => Mode::Idle,
            1 => Mode::Held,
            _ => Mode::Actor,
        }
    }

    /// A caller wants the lock. `Ok`: try directly (the call counts in flight; the address
    /// comes back if one was kept already). `Err`: ask the actor (address given back).
    pub(crate) fn begin_try(&mut self, actor: K) -> Result<Option<K>, K> {
        if self.mode != Mode::Idle {
            return Err(actor);
        }
        self.mode = Mode::Trying;
        self.calls += 1;
        Ok(self.keep(actor))
    }

    /// The direct acquire was answered. A grant's guard counts as out from here. `doubt`
    /// makes the record of a call that may have taken the lock uncounted (no answer, or
    /// taken without enough replicas).
    pub(crate) fn try_answered(
        &mut self,
        answer: TryAnswer,
        doubt: impl FnOnce() -> D,
    ) -> AfterTry<K> {
        self.calls = self.calls.saturating_sub(1);
        let after = match answer {
            TryAnswer::Granted => {
                // Still in flight until its hold is placed: a count taken in between would
                // miss a hold Redis has.
                self.calls += 1;
                self.guards += 1;
                AfterTry::Grant
            }
            TryAnswer::Refused => {
                if self.mode == Mode::Trying {
                    self.mode = self.at_rest();
                }
                AfterTry::Fail
            }
            TryAnswer::Busy | TryAnswer::Unanswered | TryAnswer::NotReplicated => {
                if self.mode == Mode::Trying {
                    self.mode = Mode::Actor;
                }
                if answer != TryAnswer::Busy {
                    self.record_doubt(doubt());
                }
                match (answer, self.keepalive.clone()) {
                    (TryAnswer::Busy, Some(actor)) => AfterTry::Queue(actor),
                    // No answer, or a grant no replica confirmed: the actor settles the
                    // doubt (gives an uncounted hold back) and tries again.
                    (_, Some(actor)) => AfterTry::DoubtAndQueue(actor),
                    // Never: kept while the call was in flight.
                    (_, None) => AfterTry::Fail,
                }
            }
        };
        self.settle();
        after
    }

    /// [`try_answered`](Self::try_answered) for a try begun in `epoch`: a grant is stale
    /// when a force-unlock came since (its hold may be deleted already), so it is not
    /// counted but settled as a call in doubt, and the caller tries again. Returns the
    /// answer as counted.
    pub(crate) fn try_answered_since(
        &mut self,
        epoch: u64,
        answer: TryAnswer,
        doubt: impl FnOnce() -> D,
    ) -> (TryAnswer, AfterTry<K>) {
        let answer = match answer {
            TryAnswer::Granted if self.stale(epoch) => TryAnswer::Unanswered,
            answer => answer,
        };
        (answer, self.try_answered(answer, doubt))
    }

    /// Puts a granted hold in the slot (the grant's call ends here). It stays on the fast path (`Held`) when the caller's
    /// try was the only thing going on; otherwise the actor absorbs it at its next turn.
    /// `until`: for a fixed lease, until when it is surely held.
    pub(crate) fn place(&mut self, hold: u64, until: Option<Instant>, taken: H) {
        self.calls = self.calls.saturating_sub(1);
        self.slot.push(Slotted { hold, until, taken });
        self.mode = match self.mode {
            // The only hold, and nobody else acts: it stays on the fast path.
            Mode::Idle | Mode::Trying => self.at_rest(),
            // Beside another hold: the actor keeps both.
            Mode::Held => Mode::Actor,
            // `Unlocking` ends in `at_rest`; `Actor` absorbs it at its next turn.
            other => other,
        };
    }

    /// [`place`](Self::place), unless a force-unlock came since the try began in `epoch`
    /// (between its answer and now): then the hold may be deleted already, so it is not
    /// placed. The grant's call ends as one in doubt (`doubt`), the guard counted out for
    /// it is counted back, and the hold comes back for the caller to undo what it set up
    /// and ask the actor (in charge now) to queue it.
    pub(crate) fn place_fresh(
        &mut self,
        hold: u64,
        until: Option<Instant>,
        taken: H,
        epoch: u64,
        doubt: impl FnOnce() -> D,
    ) -> Result<(), H> {
        if self.stale(epoch) {
            self.calls = self.calls.saturating_sub(1);
            self.guards = self.guards.saturating_sub(1);
            self.record_doubt(doubt());
            return Err(taken);
        }
        self.place(hold, until, taken);
        Ok(())
    }

    /// The caller's direct call was dropped before its answer: it may have run. Records
    /// `doubt`; the actor takes charge. Returns the actor to wake.
    pub(crate) fn call_dropped(&mut self, doubt: D) -> Option<K> {
        self.calls = self.calls.saturating_sub(1);
        self.record_doubt(doubt);
        self.keepalive.clone()
    }

    /// For a guard: takes its hold out of the slot to unlock it directly, if it is the one
    /// hold there, nobody else acts, and (a fixed lease) it is surely held at `now`. The
    /// unlock counts in flight from here. Otherwise the actor releases it: a fixed lease
    /// that ran out is reported lost and cleared there, never unlocked as if still held.
    pub(crate) fn begin_unlock(&mut self, hold: u64, now: Instant) -> Option<H> {
        let only = self.slot.only()?;
        let surely_held = only.until.is_none_or(|until| now < until);
        if self.mode == Mode::Held && only.hold == hold && surely_held {
            self.mode = Mode::Unlocking;
            self.calls += 1;
            self.slot.first.take().map(|slotted| slotted.taken)
        } else {
            None
        }
    }

    /// The direct unlock was answered (or not). `doubt` makes the record of one that leaves
    /// the count in question.
    pub(crate) fn unlock_answered(
        &mut self,
        answer: UnlockAnswer,
        doubt: impl FnOnce() -> D,
    ) -> AfterUnlock<K> {
        self.calls = self.calls.saturating_sub(1);
        if self.mode == Mode::Unlocking {
            self.mode = match answer {
                UnlockAnswer::Answered => self.at_rest(),
                _ => Mode::Actor,
            };
        }
        if answer != UnlockAnswer::Answered {
            self.record_doubt(doubt());
        }
        // The address is kept while the call is in flight (so `None` never happens here).
        let actor = || self.keepalive.clone();
        let after = match answer {
            UnlockAnswer::Answered => AfterUnlock::Done,
            UnlockAnswer::Unanswered => actor().map_or(AfterUnlock::Done, AfterUnlock::Settle),
            UnlockAnswer::Failed => actor().map_or(AfterUnlock::Done, AfterUnlock::Doubt),
        };
        self.settle();
        after
    }

    /// Counts a guard out; `actor` is asked only when no address is kept yet.
    pub(crate) fn hand_out(&mut self, actor: impl FnOnce() -> K) {
        self.guards += 1;
        if self.keepalive.is_none() {
            self.keepalive = Some(actor());
        }
    }

    /// Counts a guard back; returns the actor's address for its last message (the kept one
    /// itself when nobody needs it any more).
    pub(crate) fn count_back(&mut self) -> Option<K> {
        self.guards = self.guards.saturating_sub(1);
        if self.needs_actor() {
            self.keepalive.clone()
        } else {
            self.keepalive.take()
        }
    }

    /// Counts a guard back whose last message needs no address (a direct unlock).
    pub(crate) fn count_back_quietly(&mut self) {
        self.guards = self.guards.saturating_sub(1);
        self.settle();
    }

    /// For the actor, at every turn: it is in charge; takes the holds taken directly and
    /// the calls in doubt, each in the order recorded.
    pub(crate) fn absorb(&mut self) -> (impl Iterator<Item = H>, Vec<D>) {
        self.mode = Mode::Actor;
        let taken = self.slot.take_all();
        let doubts = std::mem::take(&mut self.doubts);
        self.settle();
        (taken, doubts)
    }

    /// For the actor, once it is idle: callers may act directly again, unless a doubt was
    /// recorded since its last turn (it absorbs it at the turn it was woken for). A direct
    /// call in flight is left alone; a hold placed since the actor's last turn stays held
    /// directly.
    pub(crate) fn actor_idle(&mut self) {
        if self.mode == Mode::Actor && !self.per_owner && self.doubts.is_empty() {
            self.mode = self.at_rest();
        }
        self.settle();
    }
}

/// Until when a hold taken at `sent` for `lease` is surely held, as its guard times it: the
/// lease less the clock-drift allowance (Redis's clock may run ahead of ours).
pub(crate) fn surely_held_until(sent: Instant, lease: Duration) -> Instant {
    sent + lease - clock_drift(lease)
}

#[cfg(test)]
mod tests;
