//! Spin waiters: one process's waiters of a spin lock queue in the library's own wait queue
//! in its polling form ([`WaitQueue::polling`], driven as the lock actor drives it), and
//! pause between tries as the actor has them pause ([`poll_retry_in`], with the library's
//! backoff), while another process holds the lock and either unlocks it (publishing
//! nothing: the spin unlock) or dies (its key runs out). Nothing is subscribed and no
//! message comes: a waiter learns that the lock is free only by trying. A waiter may also
//! start after a busy try of its own elsewhere (the fast path's), and may leave (its caller
//! drops the future) at any time, even while its try is in Redis.
//!
//! Time is absolute, in steps of a second up to a budget, as in `wake_up`; the backoff is
//! scaled to it (1 s doubling to 2 s, no jitter, so its pauses fall on steps).
//!
//! Checked: the head never sleeps longer than the backoff's cap while the lock is free (no
//! wake-up can be lost: none is awaited), every waiter is eventually granted, times out or
//! leaves, at most one owner holds, and no waiter that timed out or left keeps a hold. A
//! negative control whose waiters sleep the holder's remaining lease instead (a pub/sub
//! waiter without its messages) breaks the first.

use super::clock::at;
use super::waits::{owner, Peer, Step, Waits};
use crate::config::{SpinBackoff, SpinDelays};
use crate::lock::actor::{busy_retry_in, poll_retry_in};
use crate::wait_queue::{Asker, Effect, Granted, Retry, WaitQueue};
use stateright::{Checker, Model, Property};
use std::time::Duration;

/// One step of the model's clock.
const STEP: i64 = 1_000;
/// The other process's lease: longer than the backoff's cap.
const PEER_LEASE: u64 = 5_000;
/// The lease the waiters take (they release before it runs out).
const LEASE: u64 = 10_000;
/// How long each waiter waits.
const WAIT: u64 = 6_000;
/// The clock stops here (every waiter's deadline falls before it).
const BUDGET: i64 = 7_000;
/// The backoff's cap.
const MAX_DELAY: i64 = 2_000;
/// The other process.
const PEER: Peer = Peer {
    owner: 9,
    lease: PEER_LEASE,
};

fn backoff() -> SpinBackoff {
    SpinBackoff::exponential()
        .initial_delay(Duration::from_millis(STEP as u64))
        .max_delay(Duration::from_millis(MAX_DELAY as u64))
        .jitter(Duration::ZERO)
}

/// What the queue keeps of one asker: which caller, whether it left, its backoff's pauses.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    caller: usize,
    left: bool,
    delays: SpinDelays,
}

impl Asker for Ask {
    fn left(&self) -> bool {
        self.left
    }
}

/// Where one caller is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    Idle,
    /// In the queue as waiter `0`.
    Waiting(u64),
    /// Left while waiter `0` is still queued (its try in Redis decides).
    Leaving(u64),
    Holding,
    Released,
    TimedOut,
    /// Its wait ran out while its try, waiter `0`'s, was in Redis (the actor gives back a
    /// grant that comes after).
    TimedOutTrying(u64),
    /// Left, and out of the queue (a grant that came meanwhile was given back).
    Left,
}

/// How a busy head pauses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pause {
    /// As the spin lock's actor: its backoff, or the holder's lease if sooner.
    Backoff,
    /// The holder's remaining lease alone: a pub/sub waiter without its messages (the
    /// negative control).
    Lease,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct State {
    /// The queue, the head's try and timers, the lock in Redis, the clock.
    waits: Waits<Ask>,
    callers: Vec<Phase>,
    /// A waiter was granted after the other process let go.
    polled_and_granted: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Caller `0` asks for the lock (at the start); `1`: after a busy try on the fast path.
    Acquire(usize, bool),
    /// A step of the try, the timers, the other process or the clock.
    Step(Step),
    /// Caller `0` drops its acquire's future.
    Leave(usize),
    Release(usize),
}

pub(crate) struct SpinModel {
    pub(crate) callers: usize,
    pub(crate) pause: Pause,
    pub(crate) only: Option<&'static str>,
}

impl SpinModel {
    /// Carries out the queue's effects in order, as `wait_queue::driver::apply` does.
    fn apply(&self, state: &mut State, effects: Vec<Effect<Ask>>) {
        for effect in effects {
            match state.waits.carry_out(effect) {
                Some(Effect::Subscribe) => unreachable!("a polling queue never subscribes"),
                Some(Effect::TimedOut(w) | Effect::Fail(w, _)) => {
                    let trying = state.waits.trying.is_some_and(|(id, _)| id == w.id);
                    state.callers[w.data.caller] = if trying {
                        Phase::TimedOutTrying(w.id)
                    } else {
                        Phase::TimedOut
                    };
                }
                Some(Effect::Withdrawn(w)) => state.callers[w.data.caller] = Phase::Left,
                _ => {}
            }
        }
    }

    /// Lets the head go if it may, with the lock actor's gate.
    fn pump(&self, state: &mut State) {
        let local = state.callers.iter().position(|p| *p == Phase::Holding);
        let effects = state.waits.pump(local, |ask| ask.caller, LEASE);
        self.apply(state, effects);
    }

    fn waiting(state: &State) -> bool {
        state
            .callers
            .iter()
            .any(|p| matches!(p, Phase::Waiting(_) | Phase::Leaving(_)))
    }
}

impl Model for SpinModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let retry = Retry::UnansweredFirstTry {
            grace: Duration::from_millis(STEP as u64),
        };
        vec![State {
            waits: Waits::new(WaitQueue::polling(retry), PEER),
            callers: vec![Phase::Idle; self.callers],
            polled_and_granted: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (c, phase) in state.callers.iter().enumerate() {
            match phase {
                Phase::Idle if state.waits.now == 0 => {
                    actions.push(Action::Acquire(c, false));
                    if !state.waits.store.fields.is_empty() {
                        actions.push(Action::Acquire(c, true));
                    }
                }
                Phase::Waiting(_) => actions.push(Action::Leave(c)),
                Phase::Holding => actions.push(Action::Release(c)),
                _ => {}
            }
        }
        let mut steps = Vec::new();
        state.waits.steps(PEER, BUDGET, &mut steps);
        actions.extend(steps.into_iter().map(Action::Step));
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        let now = at(state.waits.now);
        match action {
            Action::Acquire(c, after_busy) => {
                let ask = Ask {
                    caller: c,
                    left: false,
                    delays: backoff().delays(),
                };
                let wait = Duration::from_millis(WAIT);
                let mut waiter = state.waits.queue.0.waiter(now, wait, ask);
                if after_busy {
                    // Restated from the actor's `after_direct`: tried once, rests first.
                    waiter.attempts = 1;
                    waiter.rest = Some(waiter.data.delays.next());
                }
                state.callers[c] = Phase::Waiting(waiter.id);
                let effects = state.waits.queue.0.enqueue(waiter, false);
                self.apply(&mut state, effects);
                self.pump(&mut state);
            }
            Action::Step(Step::TryRuns) => {
                let (id, _) = state.waits.trying?;
                let c = state
                    .callers
                    .iter()
                    .position(|p| matches!(p, Phase::Waiting(w) | Phase::Leaving(w) | Phase::TimedOutTrying(w) if *w == id))?;
                state.waits.try_runs(owner(c), LEASE)?;
            }
            Action::Step(Step::TryAnswered) => {
                let (id, answer) = state.waits.answered()?;
                match answer {
                    None => {
                        let granted = state.waits.queue.0.granted(id);
                        if let Granted::Unclaimed = granted {
                            // Its waiter timed out meanwhile: the actor gives the hold back.
                            let c = state
                                .callers
                                .iter()
                                .position(|p| *p == Phase::TimedOutTrying(id))?;
                            let now = state.waits.now;
                            state.waits.store.unlock(now, owner(c), LEASE);
                            state.callers[c] = Phase::TimedOut;
                        }
                        if let Granted::To(waiter) = granted {
                            state.waits.deadlines.remove(&waiter.id);
                            let c = waiter.data.caller;
                            if waiter.data.left {
                                // Its asker left: the undelivered guard's drop unlocks.
                                let now = state.waits.now;
                                state.waits.store.unlock(now, owner(c), LEASE);
                                state.callers[c] = Phase::Left;
                            } else {
                                state.callers[c] = Phase::Holding;
                                state.polled_and_granted |= !state.waits.peer;
                            }
                        }
                    }
                    Some(pttl) => {
                        // A waiter that timed out meanwhile is gone: the answer finds nobody.
                        let retry_in = match state.waits.queue.0.get_mut(id) {
                            Some(waiter) => match self.pause {
                                Pause::Backoff => poll_retry_in(pttl, &mut waiter.data.delays),
                                Pause::Lease => busy_retry_in(pttl, None),
                            },
                            None => Duration::ZERO,
                        };
                        for phase in &mut state.callers {
                            if *phase == Phase::TimedOutTrying(id) {
                                *phase = Phase::TimedOut;
                            }
                        }
                        let effects = state.waits.queue.0.busy(id, now, retry_in);
                        self.apply(&mut state, effects);
                    }
                }
                self.pump(&mut state);
            }
            Action::Step(Step::Slept) => {
                state.waits.slept()?;
                self.pump(&mut state);
            }
            Action::Step(Step::Expire(id)) => {
                let effects = state.waits.expire(id);
                self.apply(&mut state, effects);
                self.pump(&mut state);
            }
            Action::Leave(c) => {
                let Phase::Waiting(id) = state.callers[c] else {
                    return None;
                };
                state.waits.queue.0.get_mut(id)?.data.left = true;
                state.callers[c] = Phase::Leaving(id);
                let effects = state.waits.queue.0.gone(id);
                self.apply(&mut state, effects);
                self.pump(&mut state);
            }
            Action::Release(c) => {
                state.callers[c] = Phase::Released;
                let now = state.waits.now;
                state.waits.store.unlock(now, owner(c), LEASE);
                // A local holder let go: the actor wakes its head at once.
                let effects = state.waits.queue.0.wake();
                self.apply(&mut state, effects);
                self.pump(&mut state);
            }
            Action::Step(Step::PeerUnlock) => {
                state.waits.peer_unlocks(PEER); // publishes nothing
            }
            Action::Step(Step::Tick) => state.waits.tick(STEP, PEER),
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(NO_LONG_SLEEP, |_: &SpinModel, state: &State| {
                let (waits, now) = (&state.waits, state.waits.now);
                let free = waits.store.fields.is_empty();
                let long = waits
                    .timer
                    .is_some_and(|(_, fires)| fires - now > MAX_DELAY);
                !(SpinModel::waiting(state) && free && long)
            }),
            Property::always("at most one owner holds", |_: &SpinModel, state: &State| {
                state.waits.store.fields.len() <= 1
            }),
            Property::always(
                "no waiter that timed out or left keeps a hold",
                |_: &SpinModel, state: &State| {
                    let waits = &state.waits;
                    waits.store.fields.keys().all(|&o| {
                        let in_redis = |id| waits.trying.is_some_and(|(t, _)| t == id);
                        o == PEER.owner
                            || match state.callers[usize::from(o - 1)] {
                                Phase::Holding => true,
                                Phase::Waiting(id)
                                | Phase::Leaving(id)
                                | Phase::TimedOutTrying(id) => in_redis(id),
                                _ => false,
                            }
                    })
                },
            ),
            Property::eventually(
                "every waiter is granted, times out or leaves",
                // (A caller that did not ask at the start never does.)
                |_: &SpinModel, state: &State| state.waits.now > 0 && !SpinModel::waiting(state),
            ),
            Property::sometimes(
                "a polling waiter is granted after the other process let go",
                |_: &SpinModel, state: &State| state.polled_and_granted,
            ),
            Property::sometimes("a waiter times out", |_: &SpinModel, state: &State| {
                state.callers.contains(&Phase::TimedOut)
            }),
            Property::sometimes("a waiter leaves", |_: &SpinModel, state: &State| {
                state.callers.contains(&Phase::Left)
            }),
        ];
        if let Some(only) = self.only {
            properties.retain(|property| property.name == only);
        }
        properties
    }
}

const NO_LONG_SLEEP: &str = "the head never sleeps past the backoff's cap on a free lock";

#[test]
fn polling_waiters_find_a_freed_lock_within_the_cap_and_are_granted_or_time_out() {
    let model = SpinModel {
        callers: if super::deep() { 3 } else { 2 },
        pause: Pause::Backoff,
        only: None,
    };
    super::explore(model, "spin").assert_properties();
}

#[test]
fn waiters_that_sleep_the_holders_lease_miss_a_freed_lock() {
    let model = SpinModel {
        callers: 1,
        pause: Pause::Lease,
        only: Some(NO_LONG_SLEEP),
    };
    let trace = super::explore(model, "spin, sleeping the lease")
        .assert_any_discovery(NO_LONG_SLEEP)
        .into_actions();
    eprintln!("  broken by {trace:?}");
    assert!(trace.contains(&Action::Step(Step::PeerUnlock)), "{trace:?}");
}
