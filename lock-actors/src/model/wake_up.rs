//! Waiters and wake-ups: one process's waiters of a reentrant lock queue in the library's
//! own wait queue ([`WaitQueue`], imported and driven as the lock actor drives it: carry
//! out the effects of every call in order, then pump), while another process holds the lock
//! and either unlocks it (publishing the unlock message) or dies (its key runs out). The
//! head's try, its subscription and the messages on the channel each take their own steps,
//! so an unlock may land anywhere between the head's tries, before or after Redis registers
//! the subscription, and its message may arrive late (or, where the model allows it, never).
//!
//! Time is absolute here, in steps of a second up to a budget: the queue keeps instants
//! (deadlines, sleeps) the model cannot shift, and a budget ends every path, so `eventually`
//! is checked (stateright checks it at the ends of paths).
//!
//! Checked: no wake-up is lost (the head never sleeps while the lock stands freed by an
//! unlock whose message was delivered or is not coming at all because it was never sent to
//! a subscriber), every waiter is eventually granted or times out, and at most one owner
//! holds. A negative control whose unlock publishes nothing breaks the first.

use super::clock::at;
use super::waits::{owner, Peer, Step, Waits};
use crate::lock::actor::busy_retry_in;
use crate::wait_queue::{Asker, Effect, Granted, Retry, Subscribed, WaitQueue};
use stateright::{Checker, Model, Property};
use std::time::Duration;

/// One step of the model's clock.
const STEP: i64 = 1_000;
/// The other process's lease.
const PEER_LEASE: u64 = 3_000;
/// The lease the waiters take.
const LEASE: u64 = 10_000;
/// How long each waiter waits.
const WAIT: u64 = 4_000;
/// The clock stops here (every waiter's deadline falls before it).
const BUDGET: i64 = 6_000;
/// The other process.
const PEER: Peer = Peer {
    owner: 9,
    lease: PEER_LEASE,
};

/// What the queue keeps of one asker: which caller it is (askers never leave here).
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    caller: usize,
}

impl Asker for Ask {
    fn left(&self) -> bool {
        false
    }
}

/// Where one caller is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    /// Not asked yet.
    Idle,
    /// In the queue as waiter `0`.
    Waiting(u64),
    /// Granted: holds the lock.
    Holding,
    /// Granted and released since.
    Released,
    /// Its wait ran out.
    TimedOut,
    /// Its wait ran out while its try, waiter `0`'s, was in Redis (the actor gives back a
    /// grant that comes after).
    TimedOutTrying(u64),
}

/// Which unlock the other process's Redis runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unlock {
    /// The reentrant unlock: publishes when it frees the lock.
    Publishing,
    /// A broken unlock that frees the lock and tells nobody (the negative control).
    Silent,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct State {
    /// The queue, the head's try and timers, the lock in Redis, the clock.
    waits: Waits<Ask>,
    callers: Vec<Phase>,
    /// The subscription request: sent, and whether Redis has registered it.
    subscribing: Option<bool>,
    /// Redis delivers the channel's messages to this process.
    subscribed: bool,
    /// Messages on their way to this process.
    inbox: u8,
    /// A message was lost on the way.
    dropped: bool,
    /// The lock was freed by an unlock (cleared when it is taken again).
    freed_by_unlock: bool,
    /// A waiter was granted after a message woke the head.
    woken_and_granted: bool,
    /// A message was delivered since the last grant.
    news: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Caller `0` asks for the lock (at the start).
    Acquire(usize),
    /// A step of the try, the timers, the other process or the clock.
    Step(Step),
    /// Redis registers the subscription.
    SubscribeRuns,
    /// The subscription's confirmation comes back.
    Subscribed,
    /// A message on the channel arrives.
    Deliver,
    /// A message on the channel is lost.
    Drop,
    /// Caller `0` releases its hold.
    Release(usize),
}

/// The model: how many waiters, which unlock, whether messages may be lost.
pub(crate) struct WakeUpModel {
    pub(crate) callers: usize,
    pub(crate) unlock: Unlock,
    pub(crate) drops: bool,
    pub(crate) only: Option<&'static str>,
}

impl WakeUpModel {
    /// Carries out the queue's effects in order, as `wait_queue::driver::apply` does.
    fn apply(&self, state: &mut State, effects: Vec<Effect<Ask>>) {
        for effect in effects {
            match state.waits.carry_out(effect) {
                Some(Effect::Subscribe) => state.subscribing = Some(false),
                Some(Effect::TimedOut(w) | Effect::Fail(w, _) | Effect::Withdrawn(w)) => {
                    let trying = state.waits.trying.is_some_and(|(id, _)| id == w.id);
                    state.callers[w.data.caller] = if trying {
                        Phase::TimedOutTrying(w.id)
                    } else {
                        Phase::TimedOut
                    };
                }
                _ => {}
            }
        }
    }

    /// Lets the head go if it may, with the lock actor's gate for a reentrant lock.
    fn pump(&self, state: &mut State) {
        let local = state.callers.iter().position(|p| *p == Phase::Holding);
        let effects = state.waits.pump(local, |ask| ask.caller, LEASE);
        self.apply(state, effects);
    }

    /// The lock was freed by an unlock: its message goes to this process if subscribed.
    fn publish(&self, state: &mut State) {
        state.freed_by_unlock = true;
        if self.unlock == Unlock::Publishing && state.subscribed {
            state.inbox += 1;
        }
    }

    fn waiting(state: &State) -> bool {
        state
            .callers
            .iter()
            .any(|phase| matches!(phase, Phase::Waiting(_)))
    }
}

impl Model for WakeUpModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let queue = WaitQueue::new(Retry::UnansweredFirstTry {
            grace: Duration::from_millis(STEP as u64),
        });
        vec![State {
            waits: Waits::new(queue, PEER),
            callers: vec![Phase::Idle; self.callers],
            subscribing: None,
            subscribed: false,
            inbox: 0,
            dropped: false,
            freed_by_unlock: false,
            woken_and_granted: false,
            news: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (c, phase) in state.callers.iter().enumerate() {
            match phase {
                Phase::Idle if state.waits.now == 0 => actions.push(Action::Acquire(c)),
                Phase::Holding => actions.push(Action::Release(c)),
                _ => {}
            }
        }
        match state.subscribing {
            Some(false) => actions.push(Action::SubscribeRuns),
            Some(true) => actions.push(Action::Subscribed),
            None => {}
        }
        // Messages follow the subscription's confirmation on its connection.
        if state.inbox > 0 && state.subscribing.is_none() {
            actions.push(Action::Deliver);
            if self.drops {
                actions.push(Action::Drop);
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
            Action::Acquire(c) => {
                let wait = Duration::from_millis(WAIT);
                let waiter = state.waits.queue.0.waiter(now, wait, Ask { caller: c });
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
                    .position(|phase| matches!(phase, Phase::Waiting(w) | Phase::TimedOutTrying(w) if *w == id))?;
                state.waits.try_runs(owner(c), LEASE)?;
            }
            Action::Step(Step::TryAnswered) => {
                let (id, answer) = state.waits.answered()?;
                match answer {
                    None => match state.waits.queue.0.granted(id) {
                        Granted::To(waiter) => {
                            state.waits.deadlines.remove(&waiter.id);
                            state.callers[waiter.data.caller] = Phase::Holding;
                            state.freed_by_unlock = false;
                            state.woken_and_granted |= state.news;
                            state.news = false;
                        }
                        // Its waiter timed out meanwhile: the actor gives the hold back.
                        Granted::Unclaimed => {
                            let c = state
                                .callers
                                .iter()
                                .position(|phase| *phase == Phase::TimedOutTrying(id))?;
                            let at_now = state.waits.now;
                            if state.waits.store.unlock(at_now, owner(c), LEASE) == Some(1) {
                                self.publish(&mut state);
                            }
                            state.callers[c] = Phase::TimedOut;
                        }
                    },
                    Some(pttl) => {
                        let retry_in = busy_retry_in(pttl, None);
                        let effects = state.waits.queue.0.busy(id, now, retry_in);
                        self.apply(&mut state, effects);
                        for phase in &mut state.callers {
                            if *phase == Phase::TimedOutTrying(id) {
                                *phase = Phase::TimedOut;
                            }
                        }
                    }
                }
                self.pump(&mut state);
            }
            Action::SubscribeRuns => {
                state.subscribed = true;
                state.subscribing = Some(true);
            }
            Action::Subscribed => {
                state.subscribing = None;
                state.waits.queue.0.subscribed(Subscribed::Yes);
                self.pump(&mut state);
            }
            Action::Deliver => {
                state.inbox -= 1;
                state.news = true;
                let effects = state.waits.queue.0.news();
                self.apply(&mut state, effects);
                self.pump(&mut state);
            }
            Action::Drop => {
                state.inbox -= 1;
                state.dropped = true;
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
            Action::Release(c) => {
                state.callers[c] = Phase::Released;
                let now = state.waits.now;
                if state.waits.store.unlock(now, owner(c), LEASE) == Some(1) {
                    self.publish(&mut state);
                }
                // A local holder let go: the actor wakes its head at once.
                let effects = state.waits.queue.0.wake();
                self.apply(&mut state, effects);
                self.pump(&mut state);
            }
            Action::Step(Step::PeerUnlock) => {
                if state.waits.peer_unlocks(PEER) {
                    self.publish(&mut state);
                }
            }
            Action::Step(Step::Tick) => state.waits.tick(STEP, PEER),
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(
                "no wake-up is lost: the head never sleeps on a lock an unlock freed",
                |_: &WakeUpModel, state: &State| {
                    let asleep = state.waits.timer.is_some() && WakeUpModel::waiting(state);
                    !(asleep
                        && state.freed_by_unlock
                        && state.waits.store.fields.is_empty()
                        && state.inbox == 0
                        && !state.dropped)
                },
            ),
            Property::always(
                "at most one owner holds",
                |_: &WakeUpModel, state: &State| state.waits.store.fields.len() <= 1,
            ),
            Property::eventually(
                "every waiter is granted or times out",
                // (A caller that did not ask at the start never does.)
                |_: &WakeUpModel, state: &State| {
                    state.waits.now > 0 && !WakeUpModel::waiting(state)
                },
            ),
            Property::sometimes(
                "a waiter woken by an unlock's message is granted",
                |_: &WakeUpModel, state: &State| state.woken_and_granted,
            ),
            Property::sometimes("a waiter times out", |_: &WakeUpModel, state: &State| {
                state.callers.contains(&Phase::TimedOut)
            }),
        ];
        if let Some(only) = self.only {
            properties.retain(|property| property.name == only);
        }
        properties
    }
}

const NO_LOST_WAKE_UP: &str = "no wake-up is lost: the head never sleeps on a lock an unlock freed";

use super::deep;

fn check(model: WakeUpModel, label: &str) -> impl Checker<WakeUpModel> {
    super::explore(model, label)
}

#[test]
fn waiters_are_woken_by_every_unlock_and_granted_or_time_out() {
    let model = WakeUpModel {
        callers: if deep() { 3 } else { 2 },
        unlock: Unlock::Publishing,
        drops: false,
        only: None,
    };
    check(model, "wake-ups").assert_properties();
}

#[test]
fn lost_messages_cost_a_waiter_time_but_never_its_turn() {
    // A message lost on the way: the head sleeps on, at most the holder's remaining lease
    // (the no-lost-wake-up property is about the library, and exempts a lost message), and
    // every waiter is still granted or times out.
    let model = WakeUpModel {
        callers: 2,
        unlock: Unlock::Publishing,
        drops: true,
        only: None,
    };
    check(model, "wake-ups, messages lost").assert_properties();
}

#[test]
fn an_unlock_that_publishes_nothing_loses_the_wake_up() {
    let model = WakeUpModel {
        callers: 1,
        unlock: Unlock::Silent,
        drops: false,
        only: Some(NO_LOST_WAKE_UP),
    };
    let trace = check(model, "wake-ups, silent unlock")
        .assert_any_discovery(NO_LOST_WAKE_UP)
        .into_actions();
    eprintln!("  broken by {trace:?}");
    assert!(trace.contains(&Action::Step(Step::PeerUnlock)), "{trace:?}");
}
