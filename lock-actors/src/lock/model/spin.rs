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
use super::store::{Scripts, Store};
use super::wake_up::Queue;
use crate::config::{SpinBackoff, SpinDelays};
use crate::lock::actor::{busy_retry_in, poll_retry_in};
use crate::wait_queue::{Asker, Effect, Gate, Granted, Retry, WaitQueue};
use stateright::{Checker, Model, Property};
use std::collections::BTreeMap;
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
/// The other process's owner.
const PEER: u8 = 9;

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
    now: i64,
    store: Store,
    queue: Queue<Ask>,
    callers: Vec<Phase>,
    /// The head's try in Redis: its waiter, and its answer once it ran.
    trying: Option<(u64, Option<Option<i64>>)>,
    /// The head's sleep timer: its token and when it fires.
    timer: Option<(u64, i64)>,
    /// Deadline timers, by waiter.
    deadlines: BTreeMap<u64, i64>,
    /// The other process holds the lock (it starts holding it).
    peer: bool,
    /// A waiter was granted after the other process let go.
    polled_and_granted: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Caller `0` asks for the lock (at the start); `1`: after a busy try on the fast path.
    Acquire(usize, bool),
    TryRuns,
    TryAnswered,
    Slept,
    Expire(u64),
    /// Caller `0` drops its acquire's future.
    Leave(usize),
    Release(usize),
    PeerUnlock,
    Tick,
}

pub(crate) struct SpinModel {
    pub(crate) callers: usize,
    pub(crate) pause: Pause,
    pub(crate) only: Option<&'static str>,
}

fn owner(caller: usize) -> u8 {
    caller as u8 + 1
}

impl SpinModel {
    /// Carries out the queue's effects in order, as `queue_driver::apply` does.
    fn apply(&self, state: &mut State, effects: Vec<Effect<Ask>>) {
        for effect in effects {
            match effect {
                Effect::Try { id } => state.trying = Some((id, None)),
                Effect::Subscribe => unreachable!("a polling queue never subscribes"),
                Effect::Sleep { token, pause } => {
                    state.timer = Some((token, state.now + pause.as_millis() as i64));
                }
                Effect::CancelSleep => state.timer = None,
                Effect::ArmDeadline { id, at: deadline } => {
                    let ms = deadline.duration_since(at(0)).as_millis() as i64;
                    state.deadlines.insert(id, ms);
                }
                Effect::TimedOut(waiter) | Effect::Fail(waiter, _) => {
                    state.deadlines.remove(&waiter.id);
                    state.callers[waiter.data.caller] = Phase::TimedOut;
                }
                Effect::Withdrawn(waiter) => {
                    state.deadlines.remove(&waiter.id);
                    state.callers[waiter.data.caller] = Phase::Left;
                }
            }
        }
    }

    /// Lets the head go if it may, with the lock actor's gate: a head whose lock another
    /// local owner holds sleeps (at most that hold's lease) until that owner lets go.
    fn pump(&self, state: &mut State) {
        let local = state.callers.iter().position(|p| *p == Phase::Holding);
        let effects = state.queue.0.pump(at(state.now), |head| match local {
            Some(holder) if holder != head.data.caller => Gate::Hold {
                pause: Duration::from_millis(LEASE),
                error: None,
            },
            _ => Gate::Go,
        });
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
        let mut store = Store::default();
        store.acquire(Scripts::Current, 0, PEER, PEER_LEASE);
        let retry = Retry::UnansweredFirstTry {
            grace: Duration::from_millis(STEP as u64),
        };
        vec![State {
            now: 0,
            store,
            queue: Queue(WaitQueue::polling(retry)),
            callers: vec![Phase::Idle; self.callers],
            trying: None,
            timer: None,
            deadlines: BTreeMap::new(),
            peer: true,
            polled_and_granted: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (c, phase) in state.callers.iter().enumerate() {
            match phase {
                Phase::Idle if state.now == 0 => {
                    actions.push(Action::Acquire(c, false));
                    if !state.store.fields.is_empty() {
                        actions.push(Action::Acquire(c, true));
                    }
                }
                Phase::Waiting(_) => actions.push(Action::Leave(c)),
                Phase::Holding => actions.push(Action::Release(c)),
                _ => {}
            }
        }
        match state.trying {
            Some((_, None)) => actions.push(Action::TryRuns),
            Some((_, Some(_))) => actions.push(Action::TryAnswered),
            None => {}
        }
        if state.timer.is_some_and(|(_, fires)| fires <= state.now) {
            actions.push(Action::Slept);
        }
        for (&id, &fires) in &state.deadlines {
            if fires <= state.now {
                actions.push(Action::Expire(id));
            }
        }
        if state.peer && state.store.fields.contains_key(&PEER) {
            actions.push(Action::PeerUnlock);
        }
        if state.now < BUDGET {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        let now = at(state.now);
        match action {
            Action::Acquire(c, after_busy) => {
                let ask = Ask {
                    caller: c,
                    left: false,
                    delays: backoff().delays(),
                };
                let wait = Duration::from_millis(WAIT);
                let mut waiter = state.queue.0.waiter(now, wait, ask);
                if after_busy {
                    // Restated from the actor's `AfterDirect`: tried once, rests first.
                    waiter.attempts = 1;
                    waiter.rest = Some(waiter.data.delays.next());
                }
                state.callers[c] = Phase::Waiting(waiter.id);
                let effects = state.queue.0.enqueue(waiter, false);
                self.apply(&mut state, effects);
                self.pump(&mut state);
            }
            Action::TryRuns => {
                let (id, _) = state.trying?;
                let c = state
                    .callers
                    .iter()
                    .position(|p| matches!(p, Phase::Waiting(w) | Phase::Leaving(w) if *w == id))?;
                let answer = state
                    .store
                    .acquire(Scripts::Current, state.now, owner(c), LEASE);
                state.trying = Some((id, Some(answer)));
            }
            Action::TryAnswered => {
                let (id, Some(answer)) = state.trying.take()? else {
                    return None;
                };
                match answer {
                    None => {
                        if let Granted::To(waiter) = state.queue.0.granted(id) {
                            state.deadlines.remove(&waiter.id);
                            let c = waiter.data.caller;
                            if waiter.data.left {
                                // Its asker left: the undelivered guard's drop unlocks.
                                state.store.unlock(state.now, owner(c), LEASE);
                                state.callers[c] = Phase::Left;
                            } else {
                                state.callers[c] = Phase::Holding;
                                state.polled_and_granted |= !state.peer;
                            }
                        }
                    }
                    Some(pttl) => {
                        let waiter = state.queue.0.get_mut(id)?;
                        let retry_in = match self.pause {
                            Pause::Backoff => poll_retry_in(pttl, &mut waiter.data.delays),
                            Pause::Lease => busy_retry_in(pttl, None),
                        };
                        let effects = state.queue.0.busy(id, now, retry_in);
                        self.apply(&mut state, effects);
                    }
                }
                self.pump(&mut state);
            }
            Action::Slept => {
                let (token, _) = state.timer.take()?;
                state.queue.0.slept(token);
                self.pump(&mut state);
            }
            Action::Expire(id) => {
                state.deadlines.remove(&id);
                let effects = state.queue.0.expire(id);
                self.apply(&mut state, effects);
                self.pump(&mut state);
            }
            Action::Leave(c) => {
                let Phase::Waiting(id) = state.callers[c] else {
                    return None;
                };
                state.queue.0.get_mut(id)?.data.left = true;
                state.callers[c] = Phase::Leaving(id);
                let effects = state.queue.0.gone(id);
                self.apply(&mut state, effects);
                self.pump(&mut state);
            }
            Action::Release(c) => {
                state.callers[c] = Phase::Released;
                state.store.unlock(state.now, owner(c), LEASE);
                // A local holder let go: the actor wakes its head at once.
                let effects = state.queue.0.wake();
                self.apply(&mut state, effects);
                self.pump(&mut state);
            }
            Action::PeerUnlock => {
                state.peer = false;
                state.store.unlock(state.now, PEER, PEER_LEASE); // publishes nothing
            }
            Action::Tick => {
                state.now += STEP;
                state.store.expire(state.now);
                if !state.store.fields.contains_key(&PEER) {
                    state.peer = false; // died, or unlocked: its key is gone either way
                }
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(NO_LONG_SLEEP, |_: &SpinModel, state: &State| {
                let free = state.store.fields.is_empty();
                let long = state
                    .timer
                    .is_some_and(|(_, fires)| fires - state.now > MAX_DELAY);
                !(SpinModel::waiting(state) && free && long)
            }),
            Property::always("at most one owner holds", |_: &SpinModel, state: &State| {
                state.store.fields.len() <= 1
            }),
            Property::always(
                "no waiter that timed out or left keeps a hold",
                |_: &SpinModel, state: &State| {
                    state.store.fields.keys().all(|&o| {
                        let in_redis = |id| state.trying.is_some_and(|(t, _)| t == id);
                        o == PEER
                            || match state.callers[usize::from(o - 1)] {
                                Phase::Holding => true,
                                Phase::Waiting(id) | Phase::Leaving(id) => in_redis(id),
                                _ => false,
                            }
                    })
                },
            ),
            Property::eventually(
                "every waiter is granted, times out or leaves",
                // (A caller that did not ask at the start never does.)
                |_: &SpinModel, state: &State| state.now > 0 && !SpinModel::waiting(state),
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
    assert!(trace.contains(&Action::PeerUnlock), "{trace:?}");
}
