//! One process's callers of one reentrant lock (all of one owner, so they re-enter),
//! with every request in flight as steps of its own: sent, run by Redis, answered. The
//! process decides through the library's own machines and rules, imported as they are: the
//! fast-path machine ([`FastPath`]) for who acts directly, and the in-flight rules
//! ([`Forces`], [`lost_holds`]) for what a force-unlock does to the acquires on their way
//! and what becomes of a lost hold's count while calls are out. The lock actor's turn is
//! restated (absorb the slot, settle doubts once the count is complete, send the head's
//! try), and so are the rules as they were before (each behind a switch of [`Rules`]), to
//! show the checker finds what they broke.
//!
//! Events: a caller's direct try (sent, run, answered, its hold placed), the actor's try for
//! the head of its queue (sent, run, answered), a force-unlock by this process (sent, run,
//! answered), a fixed-lease hold reaching its end by the client's reckoning while Redis
//! still has its key (the drift allowance), the owner-checked clearing of that hold (sent,
//! run; its unlock cuts the key's TTL short, and the key may then expire), and another
//! client taking and freeing the lock. Leases are otherwise long: no key expires unless a
//! script cut it short, which is the adversary's best case (the drift window stays open).
//!
//! Checked, on the model's clock: a guard not told of a loss counts on a hold Redis has;
//! never two holders while the earlier is not told; once every reply is settled (nothing in
//! flight, no doubt left) Redis counts exactly what the process counts.

use super::store::{Scripts, Store};
use crate::lock::fast_path::{AfterTry, FastPath, TryAnswer};
use crate::lock::flight::{lost_holds, Forces, LostHolds};
use stateright::{Model, Property};
use std::collections::VecDeque;

/// A lease no run of this model outlives.
const LEASE: u64 = 60_000;
/// The owner every caller of the process acquires for (they re-enter).
const OWNER: u8 = 1;
/// The other client's owner.
const RIVAL: u8 = 9;

/// A hold in the machine's slot: whose it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Taken {
    caller: usize,
}

/// A direct call in doubt, as the machine records it (the caller who made it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Doubt(usize);

/// The actor's address, as the machine keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Address;

type Machine = FastPath<Taken, Doubt, Address>;

/// Which rules the process follows: the library's ([`Rules::CURRENT`]), or with one of
/// them as it was before (restated), to show the checker finds what it broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Rules {
    /// A force-unlock of ours stales the acquires on its way ([`Forces`], and the fast
    /// path's [`FastPath::voided`]), tells the holders it is about to delete before it is
    /// sent, holds back every try while it is out, and counts the holds placed meanwhile.
    /// Before: none of that; the holders counted when its answer came were told.
    pub(crate) force_voids: bool,
    /// A lost hold's count is settled once nothing is in flight ([`lost_holds`], where
    /// the fast path's count counts as in flight while incomplete). Before: its clearing
    /// was skipped while the actor's own try was out, and sent otherwise.
    pub(crate) settle_in_flight: bool,
    /// The clearing is under way before the holder is told (so the fast path stays shut).
    /// Before: the holder was told, the fast path reopened, then the clearing was
    /// registered.
    pub(crate) clear_first: bool,
}

impl Rules {
    pub(crate) const CURRENT: Rules = Rules {
        force_voids: true,
        settle_in_flight: true,
        clear_first: true,
    };
}

/// Where one caller is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Ready,
    /// Its direct try is out (sent in `epoch`): `None` not run yet, `Some(taken)` run.
    Trying {
        ran: Option<bool>,
        epoch: u64,
    },
    /// Granted directly (the try sent in `epoch`); the hold is not placed in the slot yet.
    Granting {
        epoch: u64,
    },
    /// Waiting in the actor's queue (or its try is the actor's try in flight).
    Queued,
    /// Its guard is out; `told`: it heard the hold is lost.
    Holding {
        told: bool,
    },
}

/// The actor's try for the head of its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Try {
    caller: usize,
    ran: Option<bool>,
    epoch: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
struct Actor {
    /// The callers whose holds the actor keeps.
    holders: Vec<usize>,
    queue: VecDeque<usize>,
    trying: Option<Try>,
    /// Doubts of the owner to settle with `reconcile.lua`, once the count is complete.
    reconciles: u32,
    forces: Forces,
    /// Our force-unlock is out: `Some(None)` not run yet, `Some(Some(deleted))` run.
    force: Option<Option<bool>>,
    /// Clearing unlocks sent and not run yet.
    clears: u32,
    /// (`Before` only) lost holds whose clearing is not registered yet.
    unregistered: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct State {
    store: Store,
    machine: Machine,
    actor: Actor,
    callers: Vec<Phase>,
    /// The other client holds the lock; acquires it has left.
    rival: (bool, u8),
    /// A force-unlock was sent already (one per run).
    forced: bool,
    /// The owner's holds kept by the actor reached their end (once per run).
    ended: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Caller `0` acquires: directly if the machine lets it, else through the actor.
    Acquire(usize),
    TryRuns(usize),
    TryAnswered(usize),
    Place(usize),
    /// The actor takes a turn: absorbs, settles what it can, sends the head's try.
    ActorTurn,
    ActorTryRuns,
    ActorTryAnswered,
    /// The actor sends a force-unlock of the key.
    ForceSent,
    ForceRuns,
    ForceAnswered,
    /// The owner's holds the actor keeps reach their end by the client's reckoning (a fixed
    /// lease; Redis still has the key for the drift allowance): the owner loses them all.
    HoldsEnd,
    /// (`Before` only) the clearing of a lost hold is registered and sent.
    ClearRegistered,
    ClearRuns,
    /// The key, its TTL cut short by a clearing unlock, expires.
    KeyExpires,
    RivalAcquire,
    RivalUnlock,
}

pub(crate) struct InFlightModel {
    pub(crate) callers: usize,
    pub(crate) rules: Rules,
    /// This process may force-unlock the key (once).
    pub(crate) force: bool,
    /// A hold may reach its end while its key is still in Redis.
    pub(crate) hold_ends: bool,
    pub(crate) rival_rounds: u8,
    /// Checks only the property of this name (a shortest counterexample for it).
    pub(crate) only: Option<&'static str>,
}

pub(crate) const UNTOLD: &str = "a guard not told of a loss counts on a hold Redis has";
pub(crate) const UNTOLD_AFTER_FORCE: &str =
    "once a force-unlock of ours is answered, a guard not told counts on a hold Redis has";
pub(crate) const TWO_HOLDERS: &str = "never two holders while the earlier is not told";
pub(crate) const SETTLED: &str =
    "once every reply is settled Redis counts exactly what the process counts";

fn count(store: &Store, owner: u8) -> u32 {
    store.fields.get(&owner).copied().unwrap_or(0)
}

impl InFlightModel {
    fn untold(state: &State) -> u32 {
        let holding = |phase: &&Phase| matches!(phase, Phase::Holding { told: false });
        state.callers.iter().filter(holding).count() as u32
    }

    /// Nothing in flight and nothing left to settle: Redis's count is final.
    fn settled(state: &State) -> bool {
        let actor = &state.actor;
        state
            .callers
            .iter()
            .all(|phase| !matches!(phase, Phase::Trying { .. } | Phase::Granting { .. }))
            && actor.trying.is_none()
            && actor.force.is_none()
            && actor.clears == 0
            && actor.unregistered == 0
            && actor.reconciles == 0
            && state.machine.counts_complete()
    }

    /// The actor's idle rule: nothing kept, queued, out or to settle.
    fn idle(actor: &Actor) -> bool {
        actor.holders.is_empty()
            && actor.queue.is_empty()
            && actor.trying.is_none()
            && actor.reconciles == 0
            && actor.force.is_none()
            && actor.clears == 0
            && actor.unregistered == 0
    }

    fn take_charge(state: &mut State) {
        let (taken, doubts) = state.machine.absorb();
        state.actor.holders.extend(taken.map(|taken| taken.caller));
        state.actor.reconciles += doubts.len() as u32;
    }

    /// One turn of the actor: absorb; settle one doubt once nothing can change Redis's
    /// count; send the head's try if nothing holds it back; go idle when nothing is left.
    fn actor_turn(&self, state: &mut State) {
        Self::take_charge(state);
        let actor = &mut state.actor;
        let quiet = actor.trying.is_none() && actor.force.is_none() && actor.clears == 0;
        if actor.reconciles > 0 && quiet && state.machine.counts_complete() {
            let counted = actor.holders.len() as u32;
            state.store.reconcile(0, OWNER, LEASE, counted);
            actor.reconciles -= 1;
        }
        let held_back = self.rules.force_voids && actor.forces.holds_tries();
        if actor.trying.is_none()
            && !held_back
            && actor.reconciles == 0
            && actor.clears == 0
            && actor.unregistered == 0
        {
            if let Some(caller) = actor.queue.pop_front() {
                actor.trying = Some(Try {
                    caller,
                    ran: None,
                    epoch: actor.forces.epoch(),
                });
            }
        }
        if Self::idle(&state.actor) {
            state.machine.actor_idle();
        }
    }

    /// The owner's holder is lost: every hold the actor keeps for it, its guards told.
    fn lose_all(state: &mut State) {
        for caller in std::mem::take(&mut state.actor.holders) {
            state.callers[caller] = Phase::Holding { told: true };
        }
    }
}

impl Model for InFlightModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            store: Store::default(),
            machine: FastPath::new(false),
            actor: Actor::default(),
            callers: vec![Phase::Ready; self.callers],
            rival: (false, self.rival_rounds),
            forced: false,
            ended: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (c, phase) in state.callers.iter().enumerate() {
            match phase {
                Phase::Ready => actions.push(Action::Acquire(c)),
                Phase::Trying { ran: None, .. } => actions.push(Action::TryRuns(c)),
                Phase::Trying { ran: Some(_), .. } => actions.push(Action::TryAnswered(c)),
                Phase::Granting { .. } => actions.push(Action::Place(c)),
                _ => {}
            }
        }
        if self.hold_ends && !state.ended && !state.actor.holders.is_empty() {
            actions.push(Action::HoldsEnd);
        }
        actions.push(Action::ActorTurn);
        match state.actor.trying {
            Some(Try { ran: None, .. }) => actions.push(Action::ActorTryRuns),
            Some(Try { ran: Some(_), .. }) => actions.push(Action::ActorTryAnswered),
            None => {}
        }
        match state.actor.force {
            None if self.force && !state.forced => actions.push(Action::ForceSent),
            Some(None) => actions.push(Action::ForceRuns),
            Some(Some(_)) => actions.push(Action::ForceAnswered),
            None => {}
        }
        if state.actor.unregistered > 0 {
            actions.push(Action::ClearRegistered);
        }
        if state.actor.clears > 0 {
            actions.push(Action::ClearRuns);
        }
        if state.store.expires_at.is_some_and(|at| at < LEASE as i64) {
            actions.push(Action::KeyExpires);
        }
        match state.rival {
            (false, rounds) if rounds > 0 => actions.push(Action::RivalAcquire),
            (true, _) => actions.push(Action::RivalUnlock),
            _ => {}
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Acquire(c) => {
                state.callers[c] = match state.machine.begin_try(Address) {
                    Ok(_) => Phase::Trying {
                        ran: None,
                        epoch: state.machine.epoch(),
                    },
                    Err(_) => {
                        state.actor.queue.push_back(c);
                        Phase::Queued
                    }
                };
            }
            Action::TryRuns(c) => {
                let Phase::Trying { epoch, .. } = state.callers[c] else {
                    return None;
                };
                let taken = state
                    .store
                    .acquire(Scripts::Current, 0, OWNER, LEASE)
                    .is_none();
                state.callers[c] = Phase::Trying {
                    ran: Some(taken),
                    epoch,
                };
            }
            Action::TryAnswered(c) => {
                let Phase::Trying {
                    ran: Some(taken),
                    epoch,
                } = state.callers[c]
                else {
                    return None;
                };
                let mut answer = if taken {
                    TryAnswer::Granted
                } else {
                    TryAnswer::Busy
                };
                // As `Direct::try_acquire` decides, under the machine's lock.
                if self.rules.force_voids
                    && answer == TryAnswer::Granted
                    && state.machine.stale(epoch)
                {
                    answer = TryAnswer::Unanswered;
                }
                state.callers[c] = match state.machine.try_answered(answer, || Doubt(c)) {
                    AfterTry::Grant => Phase::Granting { epoch },
                    AfterTry::Queue(_) | AfterTry::DoubtAndQueue(_) => {
                        state.actor.queue.push_back(c);
                        Phase::Queued
                    }
                    AfterTry::DoubtAndFail(_) | AfterTry::Fail => return None,
                };
            }
            Action::Place(c) => {
                let Phase::Granting { epoch } = state.callers[c] else {
                    return None;
                };
                let taken = Taken { caller: c };
                state.callers[c] = match self.rules.force_voids {
                    // As `Direct::grant` places it.
                    true => {
                        let placed =
                            state
                                .machine
                                .place_fresh(c as u64, None, taken, epoch, || Doubt(c));
                        match placed {
                            Ok(()) => Phase::Holding { told: false },
                            Err(_) => {
                                state.actor.queue.push_back(c);
                                Phase::Queued
                            }
                        }
                    }
                    false => {
                        state.machine.place(c as u64, None, taken);
                        Phase::Holding { told: false }
                    }
                };
            }
            Action::ActorTurn => self.actor_turn(&mut state),
            Action::ActorTryRuns => {
                let mut tried = state.actor.trying?;
                let taken = state
                    .store
                    .acquire(Scripts::Current, 0, OWNER, LEASE)
                    .is_none();
                tried.ran = Some(taken);
                state.actor.trying = Some(tried);
            }
            Action::ActorTryAnswered => {
                let Try { caller, ran, epoch } = state.actor.trying.take()?;
                let stale = self.rules.force_voids && state.actor.forces.stale(epoch);
                match ran {
                    Some(true) if stale => {
                        // Settled as a lost reply; the waiter tries again after it.
                        state.actor.reconciles += 1;
                        state.actor.queue.push_front(caller);
                    }
                    Some(true) => {
                        state.actor.holders.push(caller);
                        state.machine.hand_out(|| Address);
                        state.callers[caller] = Phase::Holding { told: false };
                    }
                    _ => state.actor.queue.push_front(caller),
                }
            }
            Action::ForceSent => {
                if self.rules.force_voids {
                    state.actor.forces.begin();
                    state.machine.voided();
                }
                Self::take_charge(&mut state);
                if self.rules.force_voids {
                    // The holds it is about to delete: told before it is sent.
                    Self::lose_all(&mut state);
                }
                state.actor.force = Some(None);
                state.forced = true;
            }
            Action::ForceRuns => {
                let deleted = !state.store.fields.is_empty();
                // The other client's hold goes too: taking it away is what a force-unlock is
                // for (that client hears of it at its next renewal, out of this model).
                state.rival.0 = false;
                state.store.fields.clear();
                state.store.expires_at = None;
                state.actor.force = Some(Some(deleted));
            }
            Action::ForceAnswered => {
                let Some(Some(deleted)) = state.actor.force.take() else {
                    return None;
                };
                if self.rules.force_voids {
                    // A hold placed meanwhile ran before the force: counted, so told below.
                    state.actor.forces.answered();
                    Self::take_charge(&mut state);
                }
                if deleted {
                    Self::lose_all(&mut state);
                }
            }
            Action::HoldsEnd => {
                // As the expiry timer's `lose_and_clear` (no absorb first: a hold still in
                // the slot is not among them).
                state.ended = true;
                let holds = state.actor.holders.len() as u32;
                let in_flight = if self.rules.settle_in_flight {
                    state.actor.trying.is_some() || !state.machine.counts_complete()
                } else {
                    state.actor.trying.is_some()
                };
                let settle = match (self.rules.settle_in_flight, lost_holds(in_flight)) {
                    (true, LostHolds::Settle) => Some(true),
                    (false, LostHolds::Settle) => None, // skipped: left in Redis
                    (_, LostHolds::Clear) => Some(false),
                };
                if self.rules.clear_first {
                    match settle {
                        Some(true) => state.actor.reconciles += holds,
                        Some(false) => state.actor.clears += holds,
                        None => {}
                    }
                    Self::lose_all(&mut state);
                } else {
                    Self::lose_all(&mut state);
                    if Self::idle(&state.actor) {
                        // The holder is told and the actor has nothing left: the fast path
                        // reopens before the clearing below is registered.
                        state.machine.actor_idle();
                    }
                    match settle {
                        Some(true) => state.actor.reconciles += holds,
                        Some(false) => state.actor.unregistered += holds,
                        None => {}
                    }
                }
            }
            Action::ClearRegistered => {
                state.actor.unregistered -= 1;
                state.actor.clears += 1;
            }
            Action::ClearRuns => {
                // Owner-checked, and its TTL is the shortest there is: the hold is lost.
                state.store.unlock(0, OWNER, 1);
                state.actor.clears -= 1;
            }
            Action::KeyExpires => state.store.expire(i64::MAX),
            Action::RivalAcquire => {
                state.rival.1 -= 1;
                state.rival.0 = state.store.peer_acquire(RIVAL, LEASE);
                if !state.rival.0 {
                    return None;
                }
            }
            Action::RivalUnlock => {
                state.store.unlock(0, RIVAL, LEASE);
                state.rival.0 = false;
            }
        }
        (state != *last).then_some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(UNTOLD, |_: &InFlightModel, state: &State| {
                InFlightModel::untold(state) <= count(&state.store, OWNER)
            }),
            Property::always(UNTOLD_AFTER_FORCE, |_: &InFlightModel, state: &State| {
                state.actor.force.is_some()
                    || InFlightModel::untold(state) <= count(&state.store, OWNER)
            }),
            Property::always(TWO_HOLDERS, |_: &InFlightModel, state: &State| {
                !(state.rival.0 && InFlightModel::untold(state) > 0)
            }),
            Property::always(SETTLED, |_: &InFlightModel, state: &State| {
                !InFlightModel::settled(state)
                    || count(&state.store, OWNER) == InFlightModel::untold(state)
            }),
        ];
        if let Some(only) = self.only {
            properties.retain(|property| property.name == only);
        }
        properties
    }
}

#[cfg(test)]
mod checks;
