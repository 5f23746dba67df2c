//! The lock machine: everything one lock actor knows about its lock and every decision it
//! takes, with no I/O. It owns the holders, the calls whose answer was lost (to reconcile),
//! the clearings of lost holds, the force-unlocks, and the actor's tries and unlocks in
//! flight; the fast path's slot and doubts come in through [`Fast`]. Each event (a try sent
//! or answered, a force-unlock begun, answered or seen, a hold's end, a reconcile answered)
//! is a method; what the actor must carry out comes back as [`Step`]s and plans, in the
//! order they must happen. The actor does the I/O and the timers; the model check
//! (`model/in_flight`) drives this same machine with every request in flight as steps
//! of their own.
//!
//! The rules for requests in flight are those of [`super::flight`]: a force-unlock stales
//! the acquires on its way, and a lost hold's count is settled once nothing is in flight.

use super::fast_path::{FastPath, TryAnswer};
use super::flight::{lost_holds, Forces, LostHolds};
use std::collections::{BTreeMap, VecDeque};

/// The fast path, as the machine sees it: owned by the model, shared with callers behind a
/// mutex in the actor (`Direct`).
pub(crate) trait Fast {
    /// A hold taken directly, for the actor to count.
    type Taken;
    /// A direct call in doubt, for the actor to settle.
    type Doubt;
    /// The actor is in charge: the holds taken directly and the calls in doubt, in order.
    fn absorb(&mut self) -> (Vec<Self::Taken>, Vec<Self::Doubt>);
    /// A force-unlock is begun or seen: the direct acquires on their way bring no hold.
    fn voided(&mut self);
    /// No direct call is on its way and nothing waits to be absorbed.
    fn counts_complete(&self) -> bool;
}

impl<H, D, K: Clone> Fast for FastPath<H, D, K> {
    type Taken = H;
    type Doubt = D;

    fn absorb(&mut self) -> (Vec<H>, Vec<D>) {
        let (taken, doubts) = FastPath::absorb(self);
        (taken.collect(), doubts)
    }

    fn voided(&mut self) {
        FastPath::voided(self);
    }

    fn counts_complete(&self) -> bool {
        FastPath::counts_complete(self)
    }
}

/// What a holder is to the machine: the holds it counts, each by id.
pub(crate) trait Holds {
    fn holds(&self) -> usize;
    /// Takes hold `id` (`None`: the latest) out; `false` when there is no such hold.
    fn take_hold(&mut self, id: Option<u64>) -> bool;
}

/// A holder as the model keeps it: its holds' ids.
impl Holds for Vec<u64> {
    fn holds(&self) -> usize {
        self.len()
    }

    fn take_hold(&mut self, id: Option<u64>) -> bool {
        let at = match id {
            Some(id) => self.iter().position(|&held| held == id),
            None => self.len().checked_sub(1),
        };
        at.map(|at| self.remove(at)).is_some()
    }
}

/// What a lock's kind means to the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Shape {
    /// An owner may hold it more than once.
    pub(crate) reentrant: bool,
    /// Several owners may hold it at once (a read lock).
    pub(crate) shared: bool,
}

/// Which rules the machine follows: the library's ([`Rules::CURRENT`]), or one of them as
/// it was before, so the model check shows it finds what the old rule broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Rules {
    /// A force-unlock of ours stales the acquires on their way, tells the holders it is
    /// about to delete before it is sent, holds back every try while it is out, and counts
    /// the holds placed meanwhile. Before: none of that; the holders counted when its
    /// answer came were told.
    pub(crate) force_voids: bool,
    /// A lost hold's count is settled once nothing is in flight (an incomplete fast-path
    /// count counts as in flight). Before: its clearing was skipped while the actor's own
    /// try was out, and sent otherwise.
    pub(crate) settle_in_flight: bool,
    /// The clearing is under way before the holder is told (so the fast path stays shut).
    /// Before: the holder was told, then the clearing was registered.
    pub(crate) clear_first: bool,
    /// A grant Redis answers as the owner's first hold ends the holder counted here (Redis
    /// forgot its holds: a failover to a replica that never saw them). Before: the grant
    /// joined them, and they stayed untold.
    pub(crate) first_hold_ends: bool,
}

impl Rules {
    pub(crate) const CURRENT: Rules = Rules {
        force_voids: true,
        settle_in_flight: true,
        clear_first: true,
        first_hold_ends: true,
    };
}

/// One thing the actor carries out, in the order given.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step<T, D, O> {
    /// Count a hold taken directly as its owner's (see [`LockMachine::holder_entry`]).
    Adopt(T),
    /// Settle a direct call in doubt (see [`LockMachine::doubt`]).
    Settle(D),
    /// Every holder lost the lock: take each out ([`LockMachine::remove`]) and tell it.
    LoseAll,
    /// This owner's holder lost the lock: take it out and tell it, without waking the
    /// queue (the lock is not free: a grant to the owner is being handed out).
    Lose(O),
}

/// The steps a machine call leaves to the actor, for a fast path `F` and owners `O`.
pub(crate) type Steps<F, O> = Vec<Step<<F as Fast>::Taken, <F as Fast>::Doubt, O>>;

/// Whether the head of the queue may try now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    Go,
    /// Its owner holds it already and the kind is not reentrant: it would wait for itself.
    AlreadyHeld,
    /// Another local owner holds it: Redis could only say busy; that owner's release (or
    /// loss) wakes the head.
    LocalHolder,
    /// A force-unlock of ours is on its way: a try sent now could run before it and be
    /// deleted. Its answer wakes the head.
    Forcing,
    /// Its owner's count is being settled with Redis (a reconcile, a clearing, or an unlock
    /// on its way).
    Settling,
}

/// What an answered try of the actor's means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TryOutcome {
    /// A hold to hand out.
    Grant,
    /// Granted, but a force-unlock came while it was on its way: the grant may be deleted
    /// already. Recorded as a doubt; the waiter tries again once it is settled.
    Stale,
    /// No answer: recorded as a doubt.
    Doubted,
    /// Anything else (busy, an error): the queue decides.
    Other,
}

/// What becomes of a lost holder's counts in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LostPlan {
    /// Nothing to take out (no holds, or nothing may be sent any more).
    Nothing,
    /// Send owner-checked unlocks for this many holds, then [`LockMachine::clear_done`].
    /// Registered already: the owner's tries wait for it.
    Clear(usize),
    /// Recorded as this many doubts, settled once nothing is in flight.
    Settle(usize),
    /// (Old rules only) send the unlocks; register them after the holder is told.
    ClearLater(usize),
}

/// What a release took out of the machine.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Let<H> {
    /// The owner holds no such hold here.
    NotOwner,
    /// Its last hold: the holder, taken out before the unlock is sent (renewal stops here),
    /// to be told it is released.
    Last(H),
    /// This many holds remain.
    Kept(u32),
}

/// How Redis answered an unlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnlockReply {
    /// Nothing of the owner's was there (someone else holds it, or nobody).
    NotHeld,
    /// A hold of the owner's is left.
    HoldsLeft,
    /// Freed for the owner.
    Freed,
    /// No answer: it may have run.
    Unanswered,
    /// An error reply: it did not run as meant.
    Failed,
}

/// What an unlock's answer means for its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnlockOutcome {
    NotOwner,
    StillHeld(u32),
    Released,
    /// Recorded as a doubt: the caller hears what Redis holds once it is settled.
    Settling,
    Failed,
}

/// What the actor does about the oldest doubt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NextReconcile<O, T = ()> {
    /// None is due, or one is under way, or a call of ours is out (its answer drives the
    /// actor again).
    Wait,
    /// A direct call is on its way: Redis's count is not known yet; look again shortly.
    Recheck,
    /// Set Redis's count of `owner`'s holds to `counted` (then
    /// [`LockMachine::reconcile_answered`]); `doubt` is what the caller read of the doubt's
    /// record.
    Send { owner: O, counted: usize, doubt: T },
}

/// One lock's state and rules (see the module docs). `O` names an owner, `H` is a holder
/// (its holds and whatever the actor keeps with them), `R` a doubt's record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct LockMachine<O: Ord, H, R> {
    rules: Rules,
    shape: Shape,
    holders: BTreeMap<O, H>,
    /// Holds Redis may count that we do not (a lost reply); settled before any new try of
    /// their owner.
    reconciles: VecDeque<(O, R)>,
    reconcile_out: bool,
    /// Owners whose lost holds are being taken out of Redis: their tries wait until then.
    clearing: BTreeMap<O, u32>,
    forces: Forces,
    /// The actor's tries sent and not answered yet.
    tries: u32,
    /// The actor's unlocks sent and not answered yet (releases, grants given back), by
    /// owner: the owner's tries wait for them (one whose answer is lost may still run, and
    /// take the count of a hold granted after it).
    unlocks: BTreeMap<O, u32>,
    /// Counts the actor's unlocks sent (releases, grants given back, clearings): a try
    /// answered after one of them was sent ran before it.
    unlocks_sent: u64,
}

/// What the actor keeps of its try while it is out, to hand back with its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Ticket {
    /// The force-unlocks begun or seen when it was sent.
    forces: u64,
    /// The actor's unlocks sent before it.
    unlocks: u64,
}

impl<O: Ord + Copy, H: Holds, R> LockMachine<O, H, R> {
    pub(crate) fn new(shape: Shape) -> Self {
        LockMachine {
            rules: Rules::CURRENT,
            shape,
            holders: BTreeMap::new(),
            reconciles: VecDeque::new(),
            reconcile_out: false,
            clearing: BTreeMap::new(),
            forces: Forces::default(),
            tries: 0,
            unlocks: BTreeMap::new(),
            unlocks_sent: 0,
        }
    }

    /// The same machine following `rules` (the model's negative controls).
    #[cfg(test)]
    pub(crate) fn with_rules(mut self, rules: Rules) -> Self {
        self.rules = rules;
        self
    }

    // --- Holders ---

    pub(crate) fn holder(&self, owner: &O) -> Option<&H> {
        self.holders.get(owner)
    }

    pub(crate) fn holder_mut(&mut self, owner: &O) -> Option<&mut H> {
        self.holders.get_mut(owner)
    }

    pub(crate) fn holders(&self) -> impl Iterator<Item = (&O, &H)> {
        self.holders.iter()
    }

    /// How many holds `owner` has here.
    pub(crate) fn holds_of(&self, owner: &O) -> usize {
        self.holders.get(owner).map_or(0, Holds::holds)
    }

    /// `owner`'s holder, made by `new` if it has none (a grant, or a hold adopted).
    pub(crate) fn holder_entry(&mut self, owner: O, new: impl FnOnce() -> H) -> &mut H {
        self.holders.entry(owner).or_insert_with(new)
    }

    /// `owner` holds nothing here any more (released or lost): its holder, to tell.
    pub(crate) fn remove(&mut self, owner: &O) -> Option<H> {
        self.holders.remove(owner)
    }

    pub(crate) fn owners(&self) -> Vec<O> {
        self.holders.keys().copied().collect()
    }

    /// Every holder, at the end (the actor stopped).
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (O, H)> {
        std::mem::take(&mut self.holders).into_iter()
    }

    // --- Taking charge, and the actor's tries ---

    /// The actor is in charge: what the fast path took and doubted becomes its to count
    /// and settle (the holds first: a doubt compares Redis's count with ours).
    pub(crate) fn take_charge<F: Fast>(&mut self, fast: &mut F) -> Steps<F, O> {
        let (taken, doubts) = fast.absorb();
        let mut steps = Vec::with_capacity(taken.len() + doubts.len());
        steps.extend(taken.into_iter().map(Step::Adopt));
        steps.extend(doubts.into_iter().map(Step::Settle));
        steps
    }

    /// Whether the head of the queue, asking for `owner`, may try now.
    pub(crate) fn gate(&self, owner: &O) -> Gate {
        let holds = self.holders.contains_key(owner);
        if !self.shape.reentrant && holds {
            return Gate::AlreadyHeld;
        }
        if !self.shape.shared && !self.holders.is_empty() && !holds {
            return Gate::LocalHolder;
        }
        if self.rules.force_voids && self.forces.holds_tries() {
            return Gate::Forcing;
        }
        if self.reconciles.iter().any(|(o, _)| o == owner)
            || self.clearing.contains_key(owner)
            || self.unlocks.contains_key(owner)
        {
            return Gate::Settling;
        }
        Gate::Go
    }

    /// The actor sends a try: the ticket to hand to [`try_answered`](Self::try_answered).
    pub(crate) fn try_sent(&mut self) -> Ticket {
        self.tries += 1;
        Ticket {
            forces: self.forces.epoch(),
            unlocks: self.unlocks_sent,
        }
    }

    /// The actor's try (sent with `ticket`) for `owner` was answered: a grant sent before a
    /// force-unlock, or no answer, becomes a doubt (`doubt` makes its record).
    pub(crate) fn try_answered(
        &mut self,
        owner: O,
        ticket: Ticket,
        answer: TryAnswer,
        doubt: impl FnOnce() -> R,
    ) -> TryOutcome {
        self.tries = self.tries.saturating_sub(1);
        match answer {
            TryAnswer::Granted if self.rules.force_voids && self.forces.stale(ticket.forces) => {
                self.reconciles.push_back((owner, doubt()));
                TryOutcome::Stale
            }
            TryAnswer::Granted => TryOutcome::Grant,
            TryAnswer::Unanswered => {
                self.reconciles.push_back((owner, doubt()));
                TryOutcome::Doubted
            }
            _ => TryOutcome::Other,
        }
    }

    /// The actor's try for `owner`, answered [`TryOutcome::Grant`], was the owner's first
    /// hold in Redis: Redis forgot every hold the owner had (a failover to a replica that
    /// never saw them). The holds counted here are lost, those taken directly included
    /// (counted first), and so is every direct grant still on its way (it ran before this
    /// try, on the one connection: forgotten too, settled as a doubt). Carried out before
    /// the grant makes the new hold, so a re-entry's unlock never frees a key a guard still
    /// counts on. An unlock sent after the try (`ticket`) ran after it, and may have taken
    /// the new hold out: the grant is then [`TryOutcome::Stale`] (`doubt` makes its record)
    /// and the waiter tries again once it is settled.
    pub(crate) fn first_hold<F: Fast>(
        &mut self,
        owner: O,
        ticket: Ticket,
        fast: &mut F,
        doubt: impl FnOnce() -> R,
    ) -> (Steps<F, O>, TryOutcome) {
        if !self.rules.first_hold_ends {
            return (Vec::new(), TryOutcome::Grant);
        }
        let mut steps = self.force_seen(fast);
        let outcome = match self.unlocks_sent != ticket.unlocks {
            true => {
                self.reconciles.push_back((owner, doubt()));
                TryOutcome::Stale
            }
            false => TryOutcome::Grant,
        };
        steps.push(Step::Lose(owner));
        (steps, outcome)
    }

    /// Whether a call on the lock may still change what Redis counts: a try of ours, a
    /// reconcile (it sets the count it was sent with), or a direct call (or a hold or doubt
    /// not absorbed yet).
    pub(crate) fn in_flight(&self, fast: &impl Fast) -> bool {
        match self.rules.settle_in_flight {
            true => {
                self.tries > 0
                    || !self.unlocks.is_empty()
                    || self.reconcile_out
                    || !fast.counts_complete()
            }
            false => self.tries > 0,
        }
    }

    // --- Releases ---

    /// `owner` lets go of hold `hold` (`None`: its latest). The unlock to send counts in
    /// flight until [`unlock_answered`](Self::unlock_answered).
    pub(crate) fn release(&mut self, owner: O, hold: Option<u64>) -> Let<H> {
        let Some(holder) = self.holders.get_mut(&owner) else {
            return Let::NotOwner;
        };
        if !holder.take_hold(hold) {
            return Let::NotOwner;
        }
        *self.unlocks.entry(owner).or_default() += 1;
        self.unlocks_sent += 1;
        match holder.holds() {
            0 => Let::Last(self.holders.remove(&owner).expect("held above")),
            remaining => Let::Kept(remaining as u32),
        }
    }

    /// An unlock of `owner` not from a release is sent (a grant given back: its waiter
    /// left, or it was not replicated enough).
    pub(crate) fn give_back_sent(&mut self, owner: O) {
        *self.unlocks.entry(owner).or_default() += 1;
        self.unlocks_sent += 1;
    }

    /// A grant given back was answered (or failed).
    pub(crate) fn give_back_answered(&mut self, owner: &O) {
        self.unlock_done(owner);
    }

    fn unlock_done(&mut self, owner: &O) {
        if let Some(count) = self.unlocks.get_mut(owner) {
            *count -= 1;
            if *count == 0 {
                self.unlocks.remove(owner);
            }
        }
    }

    /// The unlock of a release that left `remaining` holds was answered. `lose`: the holds
    /// that remain are gone in Redis (it found nothing of ours, or freed the key), so the
    /// holder must be told; `doubt` makes the record of an unlock that got no answer.
    pub(crate) fn unlock_answered(
        &mut self,
        owner: O,
        remaining: u32,
        reply: UnlockReply,
        doubt: impl FnOnce() -> R,
    ) -> (UnlockOutcome, bool) {
        self.unlock_done(&owner);
        match reply {
            UnlockReply::NotHeld => (UnlockOutcome::NotOwner, remaining > 0),
            UnlockReply::HoldsLeft if remaining > 0 => (UnlockOutcome::StillHeld(remaining), false),
            // Freed, or freed for this owner (a read lock others still hold, or a newer
            // hold of ours that Redis counted first).
            UnlockReply::HoldsLeft | UnlockReply::Freed => (UnlockOutcome::Released, remaining > 0),
            UnlockReply::Unanswered => {
                self.reconciles.push_back((owner, doubt()));
                (UnlockOutcome::Settling, false)
            }
            UnlockReply::Failed => (UnlockOutcome::Failed, false),
        }
    }

    // --- Losses ---

    /// `owner` lost the lock while Redis may still count its holds (a fixed lease that ends
    /// a drift allowance before its key, a renewal unconfirmed within its lease). Decides
    /// how they are taken out of Redis and registers that (before the holder goes, so no
    /// caller acts directly on the key meanwhile), then takes the holder out, to be told.
    /// `can_send`: calls may still be sent (the client is not stopped); `doubt` makes a
    /// doubt's record.
    pub(crate) fn lose_and_clear<F: Fast>(
        &mut self,
        owner: O,
        fast: &F,
        can_send: bool,
        mut doubt: impl FnMut() -> R,
    ) -> (Option<H>, LostPlan) {
        let holds = self.holds_of(&owner);
        let plan = if holds == 0 || !can_send {
            LostPlan::Nothing
        } else {
            match (lost_holds(self.in_flight(fast)), self.rules) {
                (
                    LostHolds::Settle,
                    Rules {
                        settle_in_flight, ..
                    },
                ) if !settle_in_flight => {
                    LostPlan::Nothing // the old rule: skipped, left in Redis
                }
                (LostHolds::Settle, _) => {
                    for _ in 0..holds {
                        self.reconciles.push_back((owner, doubt()));
                    }
                    LostPlan::Settle(holds)
                }
                (LostHolds::Clear, Rules { clear_first, .. }) if !clear_first => {
                    LostPlan::ClearLater(holds)
                }
                (LostHolds::Clear, _) => {
                    *self.clearing.entry(owner).or_default() += 1;
                    self.unlocks_sent += 1;
                    LostPlan::Clear(holds)
                }
            }
        };
        (self.holders.remove(&owner), plan)
    }

    /// (Old rules only) a clearing decided earlier is registered now.
    #[cfg(test)]
    pub(crate) fn clear_registered(&mut self, owner: O) {
        *self.clearing.entry(owner).or_default() += 1;
        self.unlocks_sent += 1;
    }

    /// A clearing of `owner`'s lost holds has run (or failed).
    pub(crate) fn clear_done(&mut self, owner: &O) {
        if let Some(count) = self.clearing.get_mut(owner) {
            *count -= 1;
            if *count == 0 {
                self.clearing.remove(owner);
            }
        }
    }

    // --- Force-unlocks ---

    /// A force-unlock of the key is about to be sent from here (`unconditional`: whoever
    /// holds it; else only if the holders are those an operator saw). Every acquire on its
    /// way is stale and none is sent until it is answered; the direct ones are voided
    /// before the holds taken directly are counted (a direct grant answered in between is
    /// either counted now or found stale); an unconditional one's holders are told before
    /// it is sent (a rival could take the lock before its answer comes).
    pub(crate) fn force_begun<F: Fast>(
        &mut self,
        fast: &mut F,
        unconditional: bool,
    ) -> Steps<F, O> {
        if !self.rules.force_voids {
            return self.take_charge(fast);
        }
        self.forces.begin();
        fast.voided();
        let mut steps = self.take_charge(fast);
        if unconditional {
            steps.push(Step::LoseAll);
        }
        steps
    }

    /// Our force-unlock was answered (`deleted`: it deleted a lock). A hold taken directly
    /// meanwhile ran before it (one connection, in order): counted, then told with the rest.
    pub(crate) fn force_answered<F: Fast>(&mut self, fast: &mut F, deleted: bool) -> Steps<F, O> {
        let mut steps = Vec::new();
        if self.rules.force_voids {
            self.forces.answered();
            steps = self.take_charge(fast);
        }
        if deleted {
            steps.push(Step::LoseAll);
        }
        steps
    }

    /// Another actor of the client force-unlocked the key: the acquires on their way here
    /// (ours or direct) may have run before it. Then the actor reads each holder's count
    /// from Redis and asks [`forced_lost`](Self::forced_lost).
    pub(crate) fn force_seen<F: Fast>(&mut self, fast: &mut F) -> Steps<F, O> {
        self.forces.seen();
        fast.voided();
        self.take_charge(fast)
    }

    /// Whether `owner`, who counted `counted` holds when the force was seen, lost them:
    /// Redis counts fewer (`in_redis`; `None` when it could not answer: a holder that
    /// works on without its lock is the worse mistake). A hold taken after the force is
    /// counted in Redis and stays.
    pub(crate) fn forced_lost(&self, owner: &O, counted: usize, in_redis: Option<usize>) -> bool {
        in_redis.unwrap_or(0) < counted.min(self.holds_of(owner))
    }

    // --- Doubts ---

    /// A call about `owner`'s hold got no answer: it may or may not have run. Redis's count
    /// is compared with ours once it can be (see [`next_reconcile`](Self::next_reconcile)).
    pub(crate) fn doubt(&mut self, owner: O, record: R) {
        self.reconciles.push_back((owner, record));
    }

    /// Drops the oldest doubts that `expired` says need no settling any more (their lease
    /// ran out in Redis anyway).
    pub(crate) fn prune_doubts(&mut self, expired: impl Fn(&R) -> bool) {
        while self.reconciles.front().is_some_and(|(_, r)| expired(r)) {
            self.reconciles.pop_front();
        }
    }

    /// The oldest doubt: whose, and its record (what the tests look at; the actor reads the
    /// record through [`next_reconcile`](Self::next_reconcile)).
    #[cfg(test)]
    pub(crate) fn oldest_doubt(&self) -> Option<(&O, &R)> {
        self.reconciles.front().map(|(o, r)| (o, r))
    }

    /// What to do about the oldest doubt. It is settled one at a time, once nothing of ours
    /// is out (a try, a force-unlock, a clearing: their answers drive the actor again) and
    /// the fast path's count is complete; Redis's count of its owner is then set to ours.
    pub(crate) fn next_reconcile<T>(
        &mut self,
        fast: &impl Fast,
        read: impl FnOnce(&R) -> T,
    ) -> NextReconcile<O, T> {
        let Some((owner, _)) = self.reconciles.front() else {
            return NextReconcile::Wait;
        };
        let owner = *owner;
        if self.reconcile_out
            || self.tries > 0
            || !self.unlocks.is_empty()
            || self.forces.holds_tries()
            || !self.clearing.is_empty()
        {
            return NextReconcile::Wait;
        }
        if !fast.counts_complete() {
            return NextReconcile::Recheck;
        }
        self.reconcile_out = true;
        let doubt = read(&self.reconciles.front().expect("looked at above").1);
        NextReconcile::Send {
            owner,
            counted: self.holds_of(&owner),
            doubt,
        }
    }

    /// The reconcile sent was answered (`settled`) or failed: on success its record.
    pub(crate) fn reconcile_answered(&mut self, settled: bool) -> Option<R> {
        self.reconcile_out = false;
        match settled {
            true => self.reconciles.pop_front().map(|(_, r)| r),
            false => None,
        }
    }

    /// Doubts left to settle.
    #[cfg(test)]
    pub(crate) fn doubts(&self) -> usize {
        self.reconciles.len()
    }

    /// The machine has something to keep: a holder, a doubt, a clearing or a force-unlock
    /// of ours out (the actor stays alive and callers stay off the fast path).
    pub(crate) fn busy(&self) -> bool {
        !self.holders.is_empty()
            || !self.reconciles.is_empty()
            || !self.clearing.is_empty()
            || self.forces.holds_tries()
    }
}

#[cfg(test)]
mod tests;
