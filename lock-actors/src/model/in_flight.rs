//! One process's callers of one reentrant lock (all of one owner, so they re-enter),
//! with every request in flight as steps of its own: sent, run by Redis, answered. The
//! process decides through the library's own machines, imported as they are: the
//! fast-path machine ([`FastPath`]) for who acts directly, and the lock machine
//! ([`LockMachine`]) for everything the lock actor decides (when a try goes, what an answer
//! means, what a force-unlock does to the acquires on their way, what becomes of a lost
//! hold's count, when a doubt is settled). The model only carries out the [`Step`]s and
//! plans the machine answers, as the actor does with its I/O. The rules as they were
//! before are the machine's own, behind the switches of [`Rules`], to show the checker finds
//! what they broke.
//!
//! Events: a caller's direct try (sent, run, answered, its hold placed), the actor's turn
//! (absorb, settle a doubt, send the head's try), the actor's try (run, answered), a
//! reconcile (run, answered), a force-unlock by this process (sent, run, answered), a
//! fixed-lease hold reaching its end by the client's reckoning while Redis still has its
//! key (the drift allowance), the owner-checked clearing of that hold (run; its unlock cuts
//! the key's TTL short, and the key may then expire), and another client taking and freeing
//! the lock, and (in a check of its own) the server forgetting every hold without a word (a
//! failover to a replica that never saw them). Leases are otherwise long: no key expires
//! unless a script cut it short, which is the adversary's best case (the drift window stays
//! open).
//!
//! Checked, on the model's clock: a guard not told of a loss counts on a hold Redis has;
//! never two holders while the earlier is not told; once every reply is settled (nothing in
//! flight, no doubt left) Redis counts exactly what the process counts. After the server
//! forgot, until a grant of the owner's that ran after it is answered, a guard cannot know
//! (only the watchdog's next renewal, out of this model, would tell it): the three hold
//! again from that answer on.

use super::store::{Scripts, Store};
use crate::lock::fast_path::{AfterTry, FastPath, TryAnswer};
pub(crate) use crate::lock::machine::Rules;
use crate::lock::machine::{
    Gate, Let, LockMachine, LostPlan, NextReconcile, Shape, Step, Ticket, TryOutcome, UnlockReply,
};
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

type Fast = FastPath<Taken, Doubt, Address>;

/// The lock machine as the model runs it: the owner, its holder (the callers holding), and
/// a doubt's record (nothing to keep).
type Machine = LockMachine<u8, Vec<u64>, ()>;

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
    /// It let go: its guard counts on nothing from the release on (`true`: answered).
    Released(bool),
    /// Its caller dropped the acquire's future while the direct try was out: the try may
    /// still run (it was sent), and nobody hears its answer.
    Dropped,
}

/// The actor's try for the head of its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Try {
    caller: usize,
    ran: Option<bool>,
    ticket: Ticket,
    /// It ran as the owner's first hold in Redis (the script says so).
    first: bool,
    /// It ran after the server forgot.
    after_forget: bool,
}

/// A release's unlock, sent by the actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Unlock {
    caller: usize,
    /// The holds its owner keeps after it.
    remaining: u32,
    /// `None` not run yet; `Some(reply)` run (what the script answered).
    ran: Option<Option<i64>>,
}

/// What the actor has out (the machine keeps the rest).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Actor {
    machine: Machine,
    queue: VecDeque<usize>,
    trying: Option<Try>,
    /// A release's unlock is out (one at a time here).
    unlocking: Option<Unlock>,
    /// A grant given back (its waiter left) is out: whether it ran.
    giving_back: Option<bool>,
    /// A reconcile is out: the count it sets, and whether it ran.
    reconciling: Option<(u32, bool)>,
    /// Our force-unlock is out: `Some(None)` not run yet, `Some(Some(deleted))` run.
    force: Option<Option<bool>>,
    /// Clearing unlocks sent and not run yet.
    clears: u32,
    /// (Old rules only) lost holds whose clearing is not registered yet.
    unregistered: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct State {
    store: Store,
    fast: Fast,
    actor: Actor,
    callers: Vec<Phase>,
    /// The other client holds the lock; acquires it has left.
    rival: (bool, u8),
    /// A force-unlock was sent already (one per run).
    forced: bool,
    /// The owner's holds kept by the actor reached their end (once per run).
    ended: bool,
    /// The requests sent and not run yet, as the one connection carries them: Redis runs
    /// them in this order (each stands as the action that runs it).
    wire: VecDeque<Action>,
    /// Whether the server forgot every hold, and whether the process heard of it since.
    forgot: Forgot,
}

/// The server forgetting every hold without a word (once per run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Forgot {
    Never,
    /// It forgot; no grant of the owner's that ran since is answered yet.
    Unheard,
    /// A grant of the owner's that ran after it was answered (Redis said: a first hold).
    Heard,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Caller `0` acquires: directly if the machine lets it, else through the actor.
    Acquire(usize),
    TryRuns(usize),
    TryAnswered(usize),
    /// Caller `0`'s direct try took the lock, and no replica confirmed it.
    TryUnconfirmed(usize),
    Place(usize),
    /// Caller `0` drops its acquire's future while its direct try is out.
    Cancel(usize),
    /// Caller `0`, queued at the actor (its try maybe out), gives up waiting.
    Leave(usize),
    GiveBackRuns,
    GiveBackAnswered,
    /// Caller `0` lets go of the hold the actor keeps for it: the actor sends the unlock.
    Release(usize),
    UnlockRuns,
    UnlockAnswered,
    /// The unlock's answer is lost (it ran or not): the caller hears once it is settled.
    UnlockUnanswered,
    /// The actor takes a turn: absorbs, sends a reconcile or the head's try if it may.
    ActorTurn,
    ActorTryRuns,
    ActorTryAnswered,
    ReconcileRuns,
    ReconcileAnswered,
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
    /// The server forgets every hold (a failover to a replica that never saw them).
    Forget,
}

impl Action {
    /// Whether this is Redis running a request sent earlier.
    fn runs(&self) -> bool {
        matches!(
            self,
            Action::TryRuns(_)
                | Action::UnlockRuns
                | Action::ActorTryRuns
                | Action::ReconcileRuns
                | Action::ForceRuns
                | Action::ClearRuns
                | Action::GiveBackRuns
        )
    }
}

pub(crate) struct InFlightModel {
    pub(crate) callers: usize,
    pub(crate) rules: Rules,
    /// This process may force-unlock the key (once).
    pub(crate) force: bool,
    /// A hold may reach its end while its key is still in Redis.
    pub(crate) hold_ends: bool,
    pub(crate) rival_rounds: u8,
    /// A caller may let go of a hold the actor keeps (its unlock sent, run, answered, or its
    /// answer lost).
    pub(crate) releases: bool,
    /// A caller may drop its acquire's future while its direct try is out.
    pub(crate) cancels: bool,
    /// A direct try that took the lock may be answered "not confirmed by the replicas"
    /// (replica sync): the hold is in Redis, uncounted, and the caller is queued.
    pub(crate) unconfirmed: bool,
    /// The server may forget every hold once (the keys gone, nobody told).
    pub(crate) forgets: bool,
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

impl Model for InFlightModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            store: Store::default(),
            fast: FastPath::new(false),
            actor: Actor {
                machine: LockMachine::new(Shape {
                    reentrant: true,
                    shared: false,
                })
                .with_rules(self.rules),
                queue: VecDeque::new(),
                trying: None,
                unlocking: None,
                giving_back: None,
                reconciling: None,
                force: None,
                clears: 0,
                unregistered: 0,
            },
            callers: vec![Phase::Ready; self.callers],
            rival: (false, self.rival_rounds),
            forced: false,
            ended: false,
            wire: VecDeque::new(),
            forgot: Forgot::Never,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (c, phase) in state.callers.iter().enumerate() {
            match phase {
                Phase::Ready => actions.push(Action::Acquire(c)),
                Phase::Trying { ran: None, .. } => {
                    actions.push(Action::TryRuns(c));
                    if self.cancels {
                        actions.push(Action::Cancel(c));
                    }
                }
                Phase::Trying {
                    ran: Some(taken), ..
                } => {
                    actions.push(Action::TryAnswered(c));
                    if self.unconfirmed && *taken {
                        actions.push(Action::TryUnconfirmed(c));
                    }
                }
                Phase::Dropped if state.wire.contains(&Action::TryRuns(c)) => {
                    actions.push(Action::TryRuns(c))
                }
                Phase::Queued if self.cancels => actions.push(Action::Leave(c)),
                Phase::Granting { .. } => actions.push(Action::Place(c)),
                Phase::Holding { told: false }
                    if self.releases
                        && state.actor.unlocking.is_none()
                        && state
                            .actor
                            .machine
                            .holder(&OWNER)
                            .is_some_and(|held| held.contains(&(c as u64))) =>
                {
                    actions.push(Action::Release(c))
                }
                _ => {}
            }
        }
        match state.actor.giving_back {
            Some(false) => actions.push(Action::GiveBackRuns),
            Some(true) => actions.push(Action::GiveBackAnswered),
            None => {}
        }
        match state.actor.unlocking {
            Some(Unlock { ran: None, .. }) => actions.push(Action::UnlockRuns),
            Some(Unlock { ran: Some(_), .. }) => actions.push(Action::UnlockAnswered),
            None => {}
        }
        if state.actor.unlocking.is_some() {
            actions.push(Action::UnlockUnanswered);
        }
        if self.hold_ends && !state.ended && state.actor.machine.holds_of(&OWNER) > 0 {
            actions.push(Action::HoldsEnd);
        }
        actions.push(Action::ActorTurn);
        match state.actor.trying {
            Some(Try { ran: None, .. }) => actions.push(Action::ActorTryRuns),
            Some(Try { ran: Some(_), .. }) => actions.push(Action::ActorTryAnswered),
            None => {}
        }
        match state.actor.reconciling {
            Some((_, false)) => actions.push(Action::ReconcileRuns),
            Some((_, true)) => actions.push(Action::ReconcileAnswered),
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
        if self.forgets && state.forgot == Forgot::Never {
            actions.push(Action::Forget);
        }
        match state.rival {
            (false, rounds) if rounds > 0 => actions.push(Action::RivalAcquire),
            (true, _) => actions.push(Action::RivalUnlock),
            _ => {}
        }
        // Redis runs what the connection carries in the order sent.
        actions.retain(|action| !action.runs() || state.wire.front() == Some(action));
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        if action.runs() {
            // Offered only at the front (see `actions`).
            state.wire.pop_front();
        }
        match action {
            Action::Acquire(c) => {
                state.callers[c] = match state.fast.begin_try(Address) {
                    Ok(_) => {
                        state.wire.push_back(Action::TryRuns(c));
                        Phase::Trying {
                            ran: None,
                            epoch: state.fast.epoch(),
                        }
                    }
                    Err(_) => {
                        state.actor.queue.push_back(c);
                        Phase::Queued
                    }
                };
            }
            Action::TryRuns(c) if state.callers[c] == Phase::Dropped => {
                state.store.acquire(Scripts::Current, 0, OWNER, LEASE);
            }
            Action::Cancel(c) => {
                // As the dropped call's `Pending`: a doubt, the actor in charge.
                state.fast.call_dropped(Doubt(c));
                state.callers[c] = Phase::Dropped;
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
            Action::TryAnswered(c) | Action::TryUnconfirmed(c) => {
                let Phase::Trying {
                    ran: Some(taken),
                    epoch,
                } = state.callers[c]
                else {
                    return None;
                };
                let answer = match (taken, action) {
                    (true, Action::TryUnconfirmed(_)) => TryAnswer::NotReplicated,
                    (true, _) => TryAnswer::Granted,
                    (false, _) => TryAnswer::Busy,
                };
                // As `Direct::try_acquire` asks, under the fast path's lock.
                let after = match self.rules.force_voids {
                    true => state.fast.try_answered_since(epoch, answer, || Doubt(c)).1,
                    false => state.fast.try_answered(answer, || Doubt(c)),
                };
                state.callers[c] = match after {
                    AfterTry::Grant => Phase::Granting { epoch },
                    AfterTry::Queue(_) | AfterTry::DoubtAndQueue(_) => {
                        state.actor.queue.push_back(c);
                        Phase::Queued
                    }
                    AfterTry::Fail => return None,
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
                        let placed = state
                            .fast
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
                        state.fast.place(c as u64, None, taken);
                        Phase::Holding { told: false }
                    }
                };
            }
            Action::ActorTurn => Self::actor_turn(&mut state),
            Action::ActorTryRuns => {
                let mut tried = state.actor.trying?;
                // The script's first hold: the key was free.
                let free = state.store.free_at(0);
                let taken = state
                    .store
                    .acquire(Scripts::Current, 0, OWNER, LEASE)
                    .is_none();
                tried.ran = Some(taken);
                tried.first = taken && free;
                tried.after_forget = state.forgot != Forgot::Never;
                state.actor.trying = Some(tried);
            }
            Action::ActorTryAnswered => Self::actor_try_answered(&mut state)?,
            Action::Leave(c) => {
                // The waiter's asker is gone: out of the queue, or (its try out) its answer
                // finds nobody.
                state.actor.queue.retain(|&queued| queued != c);
                state.callers[c] = Phase::Dropped;
            }
            Action::GiveBackRuns => {
                state.store.unlock(0, OWNER, LEASE);
                state.actor.giving_back = Some(true);
            }
            Action::GiveBackAnswered => {
                state.actor.giving_back.take()?;
                state.actor.machine.give_back_answered(&OWNER);
            }
            Action::Release(c) => {
                // As the actor's `release`.
                let remaining = match state.actor.machine.release(OWNER, Some(c as u64)) {
                    Let::NotOwner => return None,
                    Let::Last(_) => 0,
                    Let::Kept(remaining) => remaining,
                };
                state.actor.unlocking = Some(Unlock {
                    caller: c,
                    remaining,
                    ran: None,
                });
                state.callers[c] = Phase::Released(false);
                state.wire.push_back(Action::UnlockRuns);
            }
            Action::UnlockRuns => {
                let mut unlock = state.actor.unlocking?;
                unlock.ran = Some(state.store.unlock(0, OWNER, LEASE));
                state.actor.unlocking = Some(unlock);
            }
            Action::UnlockAnswered | Action::UnlockUnanswered => {
                let Unlock {
                    caller,
                    remaining,
                    ran,
                } = state.actor.unlocking.take()?;
                let reply = match (action, ran) {
                    (Action::UnlockAnswered, Some(None)) => UnlockReply::NotHeld,
                    (Action::UnlockAnswered, Some(Some(0))) => UnlockReply::HoldsLeft,
                    (Action::UnlockAnswered, Some(Some(_))) => UnlockReply::Freed,
                    (Action::UnlockAnswered, None) => return None,
                    _ => UnlockReply::Unanswered,
                };
                if ran.is_none() {
                    // Lost on its way with its connection: it never runs.
                    state.wire.retain(|sent| *sent != Action::UnlockRuns);
                }
                let (_, lose) = state
                    .actor
                    .machine
                    .unlock_answered(OWNER, remaining, reply, || ());
                if lose {
                    for held in state.actor.machine.remove(&OWNER).unwrap_or_default() {
                        state.callers[held as usize] = Phase::Holding { told: true };
                    }
                }
                state.callers[caller] = Phase::Released(true);
            }
            Action::ReconcileRuns => {
                let (counted, _) = state.actor.reconciling?;
                state.store.reconcile(0, OWNER, LEASE, counted);
                state.actor.reconciling = Some((counted, true));
            }
            Action::ReconcileAnswered => {
                state.actor.reconciling.take()?;
                state.actor.machine.reconcile_answered(true);
            }
            Action::ForceSent => {
                let steps = state.actor.machine.force_begun(&mut state.fast, true);
                Self::carry_out(&mut state, steps);
                state.actor.force = Some(None);
                state.forced = true;
                state.wire.push_back(Action::ForceRuns);
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
                let steps = state.actor.machine.force_answered(&mut state.fast, deleted);
                Self::carry_out(&mut state, steps);
            }
            Action::HoldsEnd => {
                // As the expiry timer's `lose_and_clear` (no absorb first: a hold still in
                // the slot is not among them).
                state.ended = true;
                let (holder, plan) =
                    state
                        .actor
                        .machine
                        .lose_and_clear(OWNER, &state.fast, true, || ());
                for caller in holder.unwrap_or_default() {
                    state.callers[caller as usize] = Phase::Holding { told: true };
                }
                match plan {
                    LostPlan::Clear(holds) => {
                        // Sent one after another: the next once the last has run.
                        state.actor.clears += holds as u32;
                        state.wire.push_back(Action::ClearRuns);
                    }
                    LostPlan::ClearLater(holds) => {
                        if Self::idle(&state.actor) {
                            // The holder is told and the actor has nothing left: the fast
                            // path reopens before the clearing is registered.
                            state.fast.actor_idle();
                        }
                        state.actor.unregistered += holds as u32;
                    }
                    LostPlan::Settle(_) | LostPlan::Nothing => {}
                }
            }
            Action::ClearRegistered => {
                state.actor.machine.clear_registered(OWNER);
                state.actor.clears += std::mem::take(&mut state.actor.unregistered);
                state.wire.push_back(Action::ClearRuns);
            }
            Action::ClearRuns => {
                // Owner-checked, and its TTL is the shortest there is: the hold is lost.
                state.store.unlock(0, OWNER, 1);
                state.actor.clears -= 1;
                match state.actor.clears {
                    0 => state.actor.machine.clear_done(&OWNER),
                    _ => state.wire.push_back(Action::ClearRuns),
                }
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
            Action::Forget => {
                state.store.fields.clear();
                state.store.expires_at = None;
                state.rival.0 = false;
                state.forgot = Forgot::Unheard;
            }
        }
        (state != *last).then_some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        // The window between the server forgetting and the process hearing of it is the
        // failover's own: nothing holds in it.
        fn unheard(state: &State) -> bool {
            state.forgot == Forgot::Unheard
        }
        let mut properties = vec![
            Property::always(UNTOLD, |_: &InFlightModel, state: &State| {
                unheard(state) || InFlightModel::untold(state) <= count(&state.store, OWNER)
            }),
            Property::always(UNTOLD_AFTER_FORCE, |_: &InFlightModel, state: &State| {
                unheard(state)
                    || state.actor.force.is_some()
                    || InFlightModel::untold(state) <= count(&state.store, OWNER)
            }),
            Property::always(TWO_HOLDERS, |_: &InFlightModel, state: &State| {
                unheard(state) || !(state.rival.0 && InFlightModel::untold(state) > 0)
            }),
            Property::always(SETTLED, |_: &InFlightModel, state: &State| {
                unheard(state)
                    || !InFlightModel::settled(state)
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
mod turn;
