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

use crate::config::clock_drift;
use std::time::{Duration, Instant};

/// Who may act on the lock (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    /// The call is recorded as a doubt and the actor is in charge: wake it; report the
    /// error.
    DoubtAndFail(K),
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
struct Slotted<H> {
    hold: u64,
    until: Option<Instant>,
    taken: H,
}

/// The holds in the slot: the first inline (a held lock costs no allocation for it), the
/// rare others beside it. `more` is empty whenever `first` is.
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
/// doubt, `K` the actor's address.
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
        }
    }

    #[cfg(test)]
    pub(crate) fn mode(&self) -> Mode {
        self.mode
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
                    (TryAnswer::Unanswered, Some(actor)) => AfterTry::DoubtAndQueue(actor),
                    (_, Some(actor)) => AfterTry::DoubtAndFail(actor),
                    // Never: kept while the call was in flight.
                    (_, None) => AfterTry::Fail,
                }
            }
        };
        self.settle();
        after
    }

    /// Puts a granted hold in the slot. It stays on the fast path (`Held`) when the caller's
    /// try was the only thing going on; otherwise the actor absorbs it at its next turn.
    /// `until`: for a fixed lease, until when it is surely held.
    pub(crate) fn place(&mut self, hold: u64, until: Option<Instant>, taken: H) {
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
mod tests {
    use super::*;

    type Machine = FastPath<&'static str, &'static str, u32>;

    fn idle() -> Machine {
        FastPath::new(false)
    }

    /// A direct try granted and its hold placed.
    fn take_directly(m: &mut Machine, hold: u64, until: Option<Instant>, taken: &'static str) {
        m.begin_try(7).unwrap();
        m.try_answered(TryAnswer::Granted, || "d");
        m.place(hold, until, taken);
    }

    /// A try still in flight after the actor took charge and went idle again: the next
    /// caller may try directly beside it.
    fn after_an_overlapping_try() -> Machine {
        let mut m = idle();
        m.begin_try(7).unwrap();
        assert_eq!(m.absorb().0.count(), 0);
        m.actor_idle();
        assert_eq!(m.mode(), Mode::Idle);
        m
    }

    #[test]
    fn an_uncontended_acquire_and_unlock_stay_on_the_fast_path_and_let_the_actor_go() {
        let mut m = idle();
        assert_eq!(m.begin_try(7), Ok(None));
        assert_eq!(m.mode(), Mode::Trying);
        assert_eq!(m.actor(), Some(&7), "kept while the call is in flight");
        assert_eq!(m.try_answered(TryAnswer::Granted, || "d"), AfterTry::Grant);
        m.place(1, None, "h1");
        assert_eq!(m.mode(), Mode::Held);
        assert_eq!(m.begin_unlock(1, Instant::now()), Some("h1"));
        m.count_back_quietly();
        assert_eq!(m.mode(), Mode::Unlocking);
        assert_eq!(m.actor(), Some(&7), "kept while the unlock is in flight");
        assert_eq!(
            m.unlock_answered(UnlockAnswer::Answered, || "d"),
            AfterUnlock::Done
        );
        assert_eq!(m.mode(), Mode::Idle);
        assert_eq!(
            m.actor(),
            None,
            "nobody needs the actor: its address is let go"
        );
    }

    #[test]
    fn a_second_caller_asks_the_actor_while_one_tries_or_holds() {
        let mut m = idle();
        assert_eq!(m.begin_try(7), Ok(None));
        assert_eq!(m.begin_try(7), Err(7));
        m.try_answered(TryAnswer::Granted, || "d");
        m.place(1, None, "h1");
        assert_eq!(
            m.begin_try(7),
            Err(7),
            "held directly: re-entry goes to the actor"
        );
    }

    #[test]
    fn a_busy_lock_puts_the_actor_in_charge_and_queues_the_caller() {
        let mut m = idle();
        m.begin_try(7).unwrap();
        assert_eq!(m.try_answered(TryAnswer::Busy, || "d"), AfterTry::Queue(7));
        assert_eq!(m.mode(), Mode::Actor);
        assert_eq!(m.begin_try(7), Err(7));
        assert_eq!(m.absorb().0.count(), 0);
        m.actor_idle();
        assert_eq!(m.mode(), Mode::Idle);
    }

    #[test]
    fn an_unanswered_try_is_a_doubt_for_the_actor() {
        let mut m = idle();
        m.begin_try(7).unwrap();
        assert_eq!(
            m.try_answered(TryAnswer::Unanswered, || "d"),
            AfterTry::DoubtAndQueue(7)
        );
        assert_eq!(m.mode(), Mode::Actor);
        let mut m = idle();
        m.begin_try(7).unwrap();
        assert_eq!(
            m.try_answered(TryAnswer::NotReplicated, || "d"),
            AfterTry::DoubtAndFail(7)
        );
        let mut m = idle();
        m.begin_try(7).unwrap();
        assert_eq!(m.try_answered(TryAnswer::Refused, || "d"), AfterTry::Fail);
        assert_eq!(
            m.mode(),
            Mode::Idle,
            "nothing was taken: callers may try again"
        );
        assert_eq!(m.actor(), None);
    }

    #[test]
    fn a_dropped_try_is_a_doubt_and_the_actor_takes_charge() {
        let mut m = idle();
        m.begin_try(7).unwrap();
        assert_eq!(m.call_dropped("d"), Some(7));
        assert_eq!(m.mode(), Mode::Actor);
        assert_eq!(
            m.actor(),
            Some(&7),
            "kept until the actor absorbed the doubt"
        );
        m.actor_idle();
        assert_eq!(
            m.mode(),
            Mode::Actor,
            "not idle before the doubt is absorbed"
        );
        let (holds, doubts) = m.absorb();
        assert_eq!((holds.count(), doubts), (0, vec!["d"]));
        assert_eq!(m.actor(), None, "nobody needs the actor any more");
        m.actor_idle();
        assert_eq!(m.mode(), Mode::Idle);
    }

    #[test]
    fn only_a_call_that_may_have_run_uncounted_is_recorded_as_a_doubt() {
        for (answer, doubted) in [
            (TryAnswer::Granted, false),
            (TryAnswer::Busy, false),
            (TryAnswer::Refused, false),
            (TryAnswer::Unanswered, true),
            (TryAnswer::NotReplicated, true),
        ] {
            let mut m = idle();
            m.begin_try(7).unwrap();
            let mut made = false;
            m.try_answered(answer, || {
                made = true;
                "d"
            });
            assert_eq!(made, doubted, "{answer:?}");
            assert_eq!(m.absorb().1.len(), usize::from(doubted), "{answer:?}");
        }
        for (answer, doubted) in [
            (UnlockAnswer::Answered, false),
            (UnlockAnswer::Unanswered, true),
            (UnlockAnswer::Failed, true),
        ] {
            let mut m = idle();
            take_directly(&mut m, 1, None, "h1");
            m.begin_unlock(1, Instant::now()).unwrap();
            m.count_back_quietly();
            m.unlock_answered(answer, || "d");
            assert_eq!(m.absorb().1.len(), usize::from(doubted), "{answer:?}");
        }
    }

    #[test]
    fn a_doubt_recorded_while_a_hold_is_held_directly_puts_both_in_the_actors_care() {
        // A try overlapping the direct hold is dropped: nobody may unlock directly until
        // the actor has settled the doubt beside the hold.
        let mut m = after_an_overlapping_try();
        take_directly(&mut m, 1, None, "h1");
        assert_eq!(m.mode(), Mode::Held);
        assert_eq!(m.call_dropped("d1"), Some(7));
        assert_eq!(m.mode(), Mode::Actor);
        assert_eq!(m.begin_unlock(1, Instant::now()), None);
        assert_eq!(m.begin_try(7), Err(7));
        let (holds, doubts) = m.absorb();
        assert_eq!(holds.collect::<Vec<_>>(), vec!["h1"]);
        assert_eq!(doubts, vec!["d1"]);
    }

    #[test]
    fn doubts_are_absorbed_in_the_order_recorded() {
        let mut m = idle();
        m.begin_try(7).unwrap();
        m.try_answered(TryAnswer::Unanswered, || "first");
        // The actor went idle before its turn: the doubt keeps it in charge.
        m.actor_idle();
        assert_eq!(m.begin_try(7), Err(7));
        let mut m2 = after_an_overlapping_try();
        m2.begin_try(7).unwrap();
        m2.call_dropped("first");
        m2.call_dropped("second");
        assert_eq!(m2.absorb().1, vec!["first", "second"]);
        assert_eq!(m.absorb().1, vec!["first"]);
    }

    #[test]
    fn a_grant_after_the_actor_took_charge_waits_in_the_slot_for_its_next_turn() {
        let mut m = idle();
        m.begin_try(7).unwrap();
        // Another caller asked the actor meanwhile; it took charge.
        assert_eq!(m.absorb().0.count(), 0);
        assert_eq!(m.try_answered(TryAnswer::Granted, || "d"), AfterTry::Grant);
        m.place(1, None, "h1");
        assert_eq!(m.mode(), Mode::Actor);
        assert_eq!(
            m.begin_unlock(1, Instant::now()),
            None,
            "the actor releases it, not the guard"
        );
        assert_eq!(m.absorb().0.collect::<Vec<_>>(), vec!["h1"]);
        // The guard is still out: the address stays.
        m.actor_idle();
        assert_eq!(m.mode(), Mode::Idle);
        assert_eq!(m.actor(), Some(&7));
        assert_eq!(m.count_back(), Some(7));
        assert_eq!(m.actor(), None);
    }

    #[test]
    fn a_grant_placed_between_the_actors_turns_stays_held_directly() {
        let mut m = idle();
        m.begin_try(7).unwrap();
        assert_eq!(m.absorb().0.count(), 0);
        m.try_answered(TryAnswer::Granted, || "d");
        m.place(1, None, "h1");
        // The actor goes idle without another turn: the one hold is held directly.
        m.actor_idle();
        assert_eq!(m.mode(), Mode::Held);
        assert_eq!(m.begin_unlock(1, Instant::now()), Some("h1"));
    }

    #[test]
    fn two_holds_in_the_slot_are_never_unlocked_directly() {
        // Two tries overlap (the actor took charge and went idle between them).
        let mut m = after_an_overlapping_try();
        assert_eq!(m.mode(), Mode::Idle);
        take_directly(&mut m, 1, None, "h1");
        assert_eq!(m.mode(), Mode::Held);
        m.try_answered(TryAnswer::Granted, || "d");
        m.place(2, None, "h2");
        assert_eq!(m.mode(), Mode::Actor);
        assert_eq!(m.begin_unlock(1, Instant::now()), None);
        m.actor_idle();
        assert_eq!(
            m.mode(),
            Mode::Actor,
            "still two: the actor must absorb them"
        );
        assert_eq!(m.absorb().0.collect::<Vec<_>>(), vec!["h1", "h2"]);
    }

    #[test]
    fn a_grant_placed_while_the_other_hold_is_unlocked_directly_is_held_after_it() {
        let mut m = after_an_overlapping_try();
        take_directly(&mut m, 1, None, "h1");
        assert_eq!(m.begin_unlock(1, Instant::now()), Some("h1"));
        m.try_answered(TryAnswer::Granted, || "d");
        m.place(2, None, "h2");
        assert_eq!(m.mode(), Mode::Unlocking);
        assert_eq!(
            m.unlock_answered(UnlockAnswer::Answered, || "d"),
            AfterUnlock::Done
        );
        assert_eq!(m.mode(), Mode::Held);
        assert_eq!(m.begin_unlock(2, Instant::now()), Some("h2"));
    }

    #[test]
    fn an_unanswered_unlock_is_settled_by_the_actor() {
        let mut m = idle();
        take_directly(&mut m, 1, None, "h1");
        m.begin_unlock(1, Instant::now()).unwrap();
        m.count_back_quietly();
        assert_eq!(
            m.unlock_answered(UnlockAnswer::Unanswered, || "d"),
            AfterUnlock::Settle(7)
        );
        assert_eq!(m.mode(), Mode::Actor);
        let mut m = idle();
        take_directly(&mut m, 1, None, "h1");
        m.begin_unlock(1, Instant::now()).unwrap();
        assert_eq!(
            m.unlock_answered(UnlockAnswer::Failed, || "d"),
            AfterUnlock::Doubt(7)
        );
    }

    #[test]
    fn a_dropped_unlock_is_a_doubt() {
        let mut m = idle();
        take_directly(&mut m, 1, None, "h1");
        m.begin_unlock(1, Instant::now()).unwrap();
        m.count_back_quietly();
        assert_eq!(m.call_dropped("d"), Some(7));
        assert_eq!(m.mode(), Mode::Actor);
        assert_eq!(m.absorb().1, vec!["d"]);
        assert_eq!(m.actor(), None);
    }

    #[test]
    fn a_per_owner_kind_never_acts_directly() {
        let mut m: Machine = FastPath::new(true);
        assert_eq!(m.begin_try(7), Err(7));
        assert_eq!(m.absorb().0.count(), 0);
        m.actor_idle();
        assert_eq!(m.mode(), Mode::Actor);
    }

    #[test]
    fn the_actor_is_kept_while_a_guard_is_out_and_given_back_with_the_last_one() {
        let mut m = idle();
        m.hand_out(|| 7);
        m.hand_out(|| unreachable!("kept already"));
        assert_eq!(m.count_back(), Some(7));
        assert_eq!(m.actor(), Some(&7));
        assert_eq!(m.count_back(), Some(7), "the last guard's message gets it");
        assert_eq!(m.actor(), None);
    }

    #[test]
    fn a_fixed_lease_past_its_surely_held_time_is_released_by_the_actor_not_directly() {
        // A fake clock: instants are offsets from one start.
        let start = Instant::now();
        let until = surely_held_until(start, Duration::from_millis(500));
        let mut m = idle();
        take_directly(&mut m, 1, Some(until), "h1");
        assert_eq!(m.mode(), Mode::Held);
        assert_eq!(
            m.begin_unlock(1, until),
            None,
            "at its end it is no longer surely held"
        );
        assert_eq!(
            m.mode(),
            Mode::Held,
            "left for the actor to report lost and clear"
        );
        assert_eq!(
            m.begin_unlock(1, until - Duration::from_millis(1)),
            Some("h1"),
            "still surely held a moment before"
        );
    }

    #[test]
    fn a_hold_is_surely_held_until_its_lease_less_the_drift_allowance() {
        // A fake clock: the send time is any instant; only offsets from it matter.
        let sent = Instant::now();
        let lease = Duration::from_secs(30);
        assert_eq!(
            surely_held_until(sent, lease),
            sent + Duration::from_millis(30_000 - 300 - 2)
        );
        let short = Duration::from_millis(100);
        assert_eq!(
            surely_held_until(sent + short, short),
            sent + Duration::from_millis(200 - 1 - 2)
        );
    }
}
