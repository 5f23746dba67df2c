//! One process's callers of one lock, deciding through the library's own fast-path machine
//! ([`FastPath`], imported as it is): who tries directly, who asks the actor, which hold a
//! guard unlocks itself, and which calls in doubt the actor must settle. The model's Redis
//! runs the reentrant scripts' mirrors (`super::store`); another process takes and frees
//! the lock beside it, so tries find it busy.
//!
//! Every direct call may reach Redis or not, and its answer may come back, be lost (the
//! connection dropped: whatever it did is done) or be abandoned by its caller (a dropped
//! future: the call still runs, in order, before anything the process sends later). The
//! lock actor is restated as one atomic turn (absorb the slot and the doubts, settle each
//! doubt with `reconcile.lua`'s rule, release what guards gave back, grant its queue in
//! order, go idle when nothing is left); its own calls are answered (their losses are the
//! same doubts, settled the same way, and are checked by the suite's fault tests). Time does
//! not pass: leases are long, and this model is about counts, not clocks.
//!
//! The client may close at any point (`LockClient::close`: later acquires and queued
//! waiters fail, what is under way is finished, guards still out are released by their
//! callers).
//!
//! Checked: Redis always counts every hold a guard believes it has (no unlock too many), at
//! most one owner holds, the actor's address is kept while a guard is out or a doubt waits,
//! and a process whose callers are all done (closed or not) leaves no count behind.

use super::store::{Scripts, Store};
use crate::lock::fast_path::{AfterTry, AfterUnlock, FastPath, Mode, TryAnswer, UnlockAnswer};
use stateright::{Model, Property};
use std::collections::VecDeque;
use std::time::Instant;

/// A lease no run of this model outlives.
const LEASE: u64 = 60_000;
/// The other process's owner.
const PEER: u8 = 9;

/// A hold in the machine's slot: whose it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Taken {
    caller: usize,
}

/// A direct call in doubt, as the machine records it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Doubt {
    /// A try that may have taken the lock uncounted.
    Acquire { caller: usize },
    /// An unlock that may not have run; its caller awaits the settlement.
    Unlock { caller: usize },
}

impl Doubt {
    fn caller(&self) -> usize {
        match self {
            Doubt::Acquire { caller } | Doubt::Unlock { caller } => *caller,
        }
    }
}

/// The actor's address, as the machine keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Address;

type Machine = FastPath<Taken, Doubt, Address>;

/// Where one caller is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    /// About to acquire.
    Ready,
    /// Its direct try is out: `None` not run yet, `Some(taken)` run.
    Trying(Option<bool>),
    /// Its try was granted; its hold is not placed in the slot yet.
    Granting,
    /// Waiting in the actor's queue.
    Queued,
    /// Its guard is out.
    Holding,
    /// Its guard's direct unlock is out: run yet?
    Unlocking(bool),
    /// Waiting for the actor to release its hold or settle its unlock.
    Releasing,
    /// Finished (its last guard released, or it gave up).
    Done,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Caller {
    phase: Phase,
    /// Acquires still to make.
    rounds: u8,
}

/// The lock actor's own state: the holds it keeps, its queue, the releases guards sent it,
/// and the doubts it has to settle.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
struct Actor {
    holders: Vec<usize>,
    queue: VecDeque<usize>,
    releases: VecDeque<usize>,
    reconciles: VecDeque<Doubt>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct State {
    store: Store,
    machine: Machine,
    actor: Actor,
    callers: Vec<Caller>,
    /// The other process: holding, and acquires left.
    peer: (bool, u8),
    /// The client is closing: later acquires are refused, waiters fail.
    closed: bool,
    /// Something the actor could not do (a release of a hold it does not have).
    anomaly: Option<&'static str>,
    /// A doubt was settled by undoing a hold that ran uncounted.
    undone: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Caller `0` acquires: directly if the machine lets it, else through the actor.
    Acquire(usize),
    /// Its direct try runs in Redis.
    TryRuns(usize),
    /// Its direct try's answer comes back.
    TryAnswered(usize),
    /// Its granted hold is placed in the slot (the guard is made).
    Place(usize),
    /// Its direct try's answer is lost with the connection.
    TryUnanswered(usize),
    /// Its caller stops waiting for the try; `true`: the try runs anyway (before anything
    /// sent later), `false`: it never reaches Redis.
    TryDropped(usize, bool),
    /// Caller `0` stops waiting in the actor's queue (cancelled, or timed out).
    GiveUp(usize),
    /// Caller `0` drops its guard.
    Unlock(usize),
    /// The guard's direct unlock runs in Redis.
    UnlockRuns(usize),
    /// Its answer comes back.
    UnlockAnswered(usize),
    /// Its answer is lost with the connection.
    UnlockUnanswered(usize),
    /// The actor takes a turn.
    ActorTurn,
    /// The client closes (`LockClient::close`): acquires from now on, and waiters in the
    /// queue, fail with `Shutdown`; what is under way is finished.
    Close,
    /// The other process takes the lock (if free).
    PeerAcquire,
    /// The other process frees it.
    PeerUnlock,
}

/// How the actor settles a doubt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settle {
    /// The library's rules: once its count is complete (`FastPath::counts_complete`: no
    /// direct call in flight, nothing left to absorb), undo one hold for each doubt while
    /// Redis counts more than the process (`reconcile.lua`).
    Complete,
    /// As the actor did before (restated): at its first turn, whatever is in flight, and
    /// only when Redis counts exactly one hold more.
    AtOnce,
    /// Once the count is complete, but still only when Redis counts exactly one hold more
    /// (the reconcile script as it was).
    OneMore,
}

/// The model: how many callers, whether they share one owner (re-entry) or each have
/// their own, how many acquires each makes.
pub(crate) struct FastPathModel {
    pub(crate) callers: usize,
    pub(crate) shared_owner: bool,
    pub(crate) rounds: u8,
    pub(crate) peer_rounds: u8,
    pub(crate) settle: Settle,
    /// The client may close at any point.
    pub(crate) close: bool,
    /// Checks only the property of this name (a shortest counterexample for it).
    pub(crate) only: Option<&'static str>,
}

impl FastPathModel {
    fn owner(&self, caller: usize) -> u8 {
        if self.shared_owner {
            1
        } else {
            caller as u8 + 1
        }
    }

    fn count(store: &Store, owner: u8) -> u32 {
        store.fields.get(&owner).copied().unwrap_or(0)
    }

    /// Where a caller goes once its hold is released (or its acquire given up).
    fn after(caller: &mut Caller) {
        caller.phase = if caller.rounds > 0 {
            Phase::Ready
        } else {
            Phase::Done
        };
    }

    fn has_work(state: &State) -> bool {
        let actor = &state.actor;
        !actor.queue.is_empty()
            || !actor.releases.is_empty()
            || !actor.reconciles.is_empty()
            || state.machine.doubts() > 0
            || state.machine.mode() == Mode::Actor
    }

    /// One turn of the actor, as `LockActor` takes it: absorb the slot and the doubts,
    /// settle the doubts, carry out releases, grant the queue in order, go idle when it
    /// keeps nothing and nobody waits.
    fn actor_turn(&self, state: &mut State) {
        let (taken, doubts) = state.machine.absorb();
        state.actor.holders.extend(taken.map(|taken| taken.caller));
        state.actor.reconciles.extend(doubts);
        // One reconcile per doubt (`reconcile.lua`, mirrored in the store).
        let settle = match self.settle {
            Settle::Complete | Settle::OneMore => state.machine.counts_complete(),
            Settle::AtOnce => true,
        };
        while let Some(doubt) = settle.then(|| state.actor.reconciles.pop_front()).flatten() {
            let caller = doubt.caller();
            let owner = self.owner(caller);
            let counted = state
                .actor
                .holders
                .iter()
                .filter(|&&c| self.owner(c) == owner)
                .count() as u32;
            match self.settle {
                Settle::Complete => {
                    if state.store.reconcile(0, owner, LEASE, counted) != -1 {
                        state.undone = true;
                    }
                }
                Settle::AtOnce | Settle::OneMore => {
                    if Self::count(&state.store, owner) == counted + 1 {
                        state.store.unlock(0, owner, LEASE);
                        state.undone = true;
                    }
                }
            }
            if let Doubt::Unlock { .. } = doubt {
                Self::after(&mut state.callers[caller]);
            }
        }
        while let Some(caller) = state.actor.releases.pop_front() {
            let Some(at) = state.actor.holders.iter().position(|&c| c == caller) else {
                state.anomaly = Some("released a hold the actor does not keep");
                continue;
            };
            state.actor.holders.remove(at);
            if state.store.unlock(0, self.owner(caller), LEASE).is_none() {
                state.anomaly = Some("Redis did not count a hold the actor kept");
            }
            Self::after(&mut state.callers[caller]);
        }
        while let Some(&caller) = state.actor.queue.front() {
            // Tries of an owner wait for its reconciles.
            let owner = self.owner(caller);
            if state
                .actor
                .reconciles
                .iter()
                .any(|doubt| self.owner(doubt.caller()) == owner)
            {
                break;
            }
            if state
                .store
                .acquire(Scripts::Current, 0, self.owner(caller), LEASE)
                .is_some()
            {
                break; // busy: it waits for the next turn
            }
            state.actor.queue.pop_front();
            state.actor.holders.push(caller);
            state.machine.hand_out(|| Address);
            state.callers[caller].phase = Phase::Holding;
        }
        if state.actor.queue.is_empty()
            && state.actor.holders.is_empty()
            && state.actor.reconciles.is_empty()
        {
            state.machine.actor_idle();
        }
    }

    /// The caller's guards in the process, per owner: holds it believes it has.
    fn believed(&self, state: &State, owner: u8) -> u32 {
        state
            .callers
            .iter()
            .enumerate()
            .filter(|(c, caller)| caller.phase == Phase::Holding && self.owner(*c) == owner)
            .count() as u32
    }

    fn at_rest(state: &State) -> bool {
        state.callers.iter().all(|c| c.phase == Phase::Done)
            && state.machine.doubts() == 0
            && state.actor == Actor::default()
            && !state.peer.0
    }
}

impl Model for FastPathModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            store: Store::default(),
            machine: FastPath::new(false),
            actor: Actor::default(),
            callers: vec![
                Caller {
                    phase: Phase::Ready,
                    rounds: self.rounds,
                };
                self.callers
            ],
            peer: (false, self.peer_rounds),
            closed: false,
            anomaly: None,
            undone: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (c, caller) in state.callers.iter().enumerate() {
            match caller.phase {
                Phase::Ready if caller.rounds > 0 => actions.push(Action::Acquire(c)),
                Phase::Trying(ran) => {
                    if ran.is_none() {
                        actions.push(Action::TryRuns(c));
                        actions.push(Action::TryDropped(c, true));
                        actions.push(Action::TryDropped(c, false));
                    } else {
                        actions.push(Action::TryAnswered(c));
                        actions.push(Action::TryDropped(c, false));
                    }
                    actions.push(Action::TryUnanswered(c));
                }
                Phase::Granting => actions.push(Action::Place(c)),
                Phase::Queued => actions.push(Action::GiveUp(c)),
                Phase::Holding => actions.push(Action::Unlock(c)),
                Phase::Unlocking(ran) => {
                    if ran {
                        actions.push(Action::UnlockAnswered(c));
                    } else {
                        actions.push(Action::UnlockRuns(c));
                    }
                    actions.push(Action::UnlockUnanswered(c));
                }
                _ => {}
            }
        }
        if Self::has_work(state) {
            actions.push(Action::ActorTurn);
        }
        if self.close && !state.closed {
            actions.push(Action::Close);
        }
        match state.peer {
            (false, rounds) if rounds > 0 => actions.push(Action::PeerAcquire),
            (true, _) => actions.push(Action::PeerUnlock),
            _ => {}
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        let now = Instant::now();
        match action {
            Action::Acquire(c) if state.closed => {
                state.callers[c].rounds = 0;
                state.callers[c].phase = Phase::Done; // refused: Shutdown
            }
            Action::Acquire(c) => {
                state.callers[c].rounds -= 1;
                state.callers[c].phase = match state.machine.begin_try(Address) {
                    Ok(_) => Phase::Trying(None),
                    Err(_) => {
                        state.actor.queue.push_back(c);
                        Phase::Queued
                    }
                };
            }
            Action::TryRuns(c) => {
                let taken = state
                    .store
                    .acquire(Scripts::Current, 0, self.owner(c), LEASE)
                    .is_none();
                state.callers[c].phase = Phase::Trying(Some(taken));
            }
            Action::TryAnswered(c) => {
                let Phase::Trying(Some(taken)) = state.callers[c].phase else {
                    return None;
                };
                let answer = if taken {
                    TryAnswer::Granted
                } else {
                    TryAnswer::Busy
                };
                match state
                    .machine
                    .try_answered(answer, || Doubt::Acquire { caller: c })
                {
                    AfterTry::Grant => state.callers[c].phase = Phase::Granting,
                    AfterTry::Queue(_) => {
                        state.actor.queue.push_back(c);
                        state.callers[c].phase = Phase::Queued;
                    }
                    other => {
                        state.anomaly = Some("an answered try was not granted or queued");
                        let _ = other;
                    }
                }
            }
            Action::Place(c) => {
                state.machine.place(c as u64, None, Taken { caller: c });
                state.callers[c].phase = Phase::Holding;
            }
            Action::TryUnanswered(c) => {
                match state
                    .machine
                    .try_answered(TryAnswer::Unanswered, || Doubt::Acquire { caller: c })
                {
                    AfterTry::DoubtAndQueue(_) => {
                        state.actor.queue.push_back(c);
                        state.callers[c].phase = Phase::Queued;
                    }
                    _ => state.anomaly = Some("an unanswered try was not doubted and queued"),
                }
            }
            Action::TryDropped(c, runs) => {
                if runs {
                    state
                        .store
                        .acquire(Scripts::Current, 0, self.owner(c), LEASE);
                }
                state.machine.call_dropped(Doubt::Acquire { caller: c });
                Self::after(&mut state.callers[c]);
            }
            Action::GiveUp(c) => {
                state.actor.queue.retain(|&queued| queued != c);
                Self::after(&mut state.callers[c]);
            }
            Action::Unlock(c) => match state.machine.begin_unlock(c as u64, now) {
                Some(_) => {
                    state.machine.count_back_quietly();
                    state.callers[c].phase = Phase::Unlocking(false);
                }
                None => {
                    state.machine.count_back();
                    state.actor.releases.push_back(c);
                    state.callers[c].phase = Phase::Releasing;
                }
            },
            Action::UnlockRuns(c) => {
                state.store.unlock(0, self.owner(c), LEASE);
                state.callers[c].phase = Phase::Unlocking(true);
            }
            Action::UnlockAnswered(c) => {
                state
                    .machine
                    .unlock_answered(UnlockAnswer::Answered, || Doubt::Unlock { caller: c });
                Self::after(&mut state.callers[c]);
            }
            Action::UnlockUnanswered(c) => {
                match state
                    .machine
                    .unlock_answered(UnlockAnswer::Unanswered, || Doubt::Unlock { caller: c })
                {
                    AfterUnlock::Settle(_) => state.callers[c].phase = Phase::Releasing,
                    _ => state.anomaly = Some("an unanswered unlock was not settled"),
                }
            }
            Action::ActorTurn => self.actor_turn(&mut state),
            Action::Close => {
                state.closed = true;
                for caller in std::mem::take(&mut state.actor.queue) {
                    state.callers[caller].rounds = 0;
                    state.callers[caller].phase = Phase::Done;
                }
            }
            Action::PeerAcquire => {
                state.peer.1 -= 1;
                state.peer.0 = state.store.peer_acquire(PEER, LEASE);
                if !state.peer.0 {
                    return None;
                }
            }
            Action::PeerUnlock => {
                state.store.unlock(0, PEER, LEASE);
                state.peer.0 = false;
            }
        }
        (state != *last).then_some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(
                "Redis counts every hold a guard believes it has",
                |model: &FastPathModel, state: &State| {
                    (0..model.callers).all(|c| {
                        let owner = model.owner(c);
                        model.believed(state, owner) <= Self::count(&state.store, owner)
                    })
                },
            ),
            Property::always(
                "at most one owner holds",
                |model: &FastPathModel, state: &State| {
                    let mut owners: Vec<u8> = (0..model.callers)
                        .filter(|&c| state.callers[c].phase == Phase::Holding)
                        .map(|c| model.owner(c))
                        .collect();
                    if state.peer.0 {
                        owners.push(PEER);
                    }
                    owners.sort();
                    owners.dedup();
                    owners.len() <= 1
                },
            ),
            Property::always(
                "the actor's address is kept while a guard is out or a doubt waits",
                |_: &FastPathModel, state: &State| {
                    let needed = state.machine.doubts() > 0
                        || state.callers.iter().any(|c| c.phase == Phase::Holding);
                    !needed || state.machine.actor().is_some()
                },
            ),
            Property::always(
                "the actor is never asked for a hold it does not keep",
                |_: &FastPathModel, state: &State| state.anomaly.is_none(),
            ),
            Property::always(
                "a process at rest leaves no count behind",
                |model: &FastPathModel, state: &State| {
                    !FastPathModel::at_rest(state)
                        || (0..model.callers)
                            .all(|c| Self::count(&state.store, model.owner(c)) == 0)
                },
            ),
            Property::eventually(
                "every caller finishes",
                |_: &FastPathModel, state: &State| {
                    state.callers.iter().all(|c| c.phase == Phase::Done)
                },
            ),
            Property::sometimes(
                "a doubt is settled by undoing a hold that ran uncounted",
                |_: &FastPathModel, state: &State| state.undone,
            ),
        ];
        if self.shared_owner {
            properties.push(Property::sometimes(
                "two guards of the process are out at once",
                |_: &FastPathModel, state: &State| {
                    state
                        .callers
                        .iter()
                        .filter(|c| c.phase == Phase::Holding)
                        .count()
                        == 2
                },
            ));
        }
        if let Some(only) = self.only {
            properties.retain(|property| property.name == only);
        }
        properties
    }
}

mod checks;
