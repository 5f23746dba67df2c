//! Waiters of a count-down latch. One process's waiters park in the library's own wait
//! queue ([`WaitQueue`], driven as the latch actor drives it: carry out the effects of every
//! call in order, then pump, then drop the subscription once [`nobody_waits`]), reading the
//! count through the mirror of `count.lua`. Another process counts the latch down, deletes
//! it, or sets a count again once it is open, through the mirrors of the other scripts.
//! The head's read, its subscription and each message take their own steps: a count-down
//! may land anywhere between reads, before or after Redis registers the subscription, and
//! its message may arrive late, or (where the model allows it) never. A waiter may give up
//! (its caller drops the future) at any moment.
//!
//! Time is absolute, in steps of half the fallback period up to a budget. Redis answers and timers fire
//! within the step they are due in (time does not pass over them); messages may wait.
//!
//! Checked: a waiter is released only if the count was zero at some moment of its wait (a
//! message alone never releases it); no wake-up is lost (the head never sleeps on an open
//! latch with no message coming to wake it); a waiter still waiting is never more than one
//! fallback period past the moment the count reached zero for good; once nobody waits,
//! nothing is left (no queued waiter, no timer, no subscription); every waiter ends.
//! Negative controls: a rule that releases on the `0` message without reading breaks the
//! first; a count-down that publishes nothing breaks the second but not the third (the
//! fallback read covers for it).

use super::super::clock::at;
use super::super::waits::Queue;
use super::store::{Message, Scripts, Store};
use crate::latch::{nobody_waits, open_count, FALLBACK_POLL};
use crate::wait_queue::{Asker, Effect, Gate, Granted, Retry, Subscribed, WaitQueue};
use stateright::{Model, Property};
use std::collections::BTreeMap;
use std::time::Duration;

/// One step of the model's clock: half the fallback period, so a fallback read falls on
/// a step.
const STEP: i64 = 2_500;
/// The clock stops here (no waiter's deadline falls after it).
const BUDGET: i64 = 7_500;
/// How long each waiter waits: past the fallback, or shorter (it may time out first); on
/// steps, so deadlines fire on time.
const WAITS: [u64; 3] = [7_500, 2_500, 7_500];

fn fallback_ms() -> i64 {
    FALLBACK_POLL.as_millis() as i64
}

/// What the queue keeps of one asker: which caller, and whether it gave up.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    caller: usize,
    left: bool,
}

impl Asker for Ask {
    fn left(&self) -> bool {
        self.left
    }
}

/// Where one caller is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Phase {
    /// Not asked yet.
    Idle,
    /// In the queue as waiter `0`.
    Waiting(u64),
    /// Let go: the latch was open.
    Released,
    /// Its wait ran out.
    TimedOut,
    /// It gave up (its future was dropped) and left the queue.
    GaveUp,
    /// Answered with an error (never expected here).
    Failed,
}

/// How the waiting process's actor treats a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rules {
    /// The latch actor's: any message makes the head read the count again.
    Library,
    /// Restated, a naive actor: a `0` message releases every waiter without reading.
    ReleaseOnMessage,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct State {
    now: i64,
    store: Store,
    queue: Queue<Ask>,
    callers: Vec<Phase>,
    /// The head's read in Redis: its waiter, and the count read once it ran.
    trying: Option<(u64, Option<u64>)>,
    /// The subscription request: sent, and whether Redis has registered it.
    subscribing: Option<bool>,
    /// Redis sends the channel's messages to this process.
    subscribed: bool,
    /// The node routes the channel's messages to the latch actor (its `routed`: from its
    /// subscription request until nobody waits).
    routed: bool,
    /// Messages on their way to this process, in order.
    inbox: Vec<Message>,
    /// A message was lost on the way.
    dropped: bool,
    /// The head's sleep timer: its token and when it fires.
    timer: Option<(u64, i64)>,
    /// Deadline timers, by waiter.
    deadlines: BTreeMap<u64, i64>,
    /// What the other process still does: count-downs are bounded by the count; these
    /// by themselves.
    resets_left: u8,
    deletes_left: u8,
    /// Ghost: since when the latch has been open (`None` while the count is above zero).
    open_since: Option<i64>,
    /// Ghost, per caller: the latch was open at some moment of its wait.
    saw_open: Vec<bool>,
    /// Ghost: a caller was released that never saw the latch open.
    released_while_closed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Caller `0` waits (at the start).
    Wait(usize),
    /// Caller `0` gives up: its future is dropped.
    GiveUp(usize),
    /// The head's read runs in Redis.
    ReadRuns,
    /// Its answer comes back.
    ReadAnswered,
    /// Redis registers the subscription.
    SubscribeRuns,
    /// The subscription's confirmation comes back.
    Subscribed,
    /// A message on the channel arrives.
    Deliver,
    /// A message on the channel is lost.
    Drop,
    /// The head's sleep timer fires.
    Slept,
    /// Waiter `0`'s deadline timer fires.
    Expire(u64),
    /// The other process counts the latch down.
    PeerCountDown,
    /// The other process sets a count of 1 again (the latch is open).
    PeerReset,
    /// The other process deletes the latch.
    PeerDelete,
    /// The clock advances one step.
    Tick,
}

/// The model: how many waiters, the count, the scripts, the actor's rule, whether messages
/// may be lost.
pub(crate) struct LatchModel {
    pub(crate) callers: usize,
    pub(crate) count: i64,
    /// Whether the other process may delete the latch (once).
    pub(crate) delete: bool,
    pub(crate) scripts: Scripts,
    pub(crate) rules: Rules,
    pub(crate) drops: bool,
    pub(crate) only: Option<&'static str>,
}

impl LatchModel {
    /// Carries out the queue's effects in order, as `wait_queue::driver::apply` does.
    fn apply(&self, state: &mut State, effects: Vec<Effect<Ask>>) {
        for effect in effects {
            match effect {
                Effect::Try { id } => state.trying = Some((id, None)),
                Effect::Subscribe => {
                    state.subscribing = Some(false);
                    state.routed = true;
                }
                Effect::Sleep { token, pause } => {
                    state.timer = Some((token, state.now + pause.as_millis() as i64));
                }
                Effect::CancelSleep => state.timer = None,
                Effect::ArmDeadline { id, at: deadline } => {
                    let ms = deadline.duration_since(at(0)).as_millis() as i64;
                    state.deadlines.insert(id, ms);
                }
                Effect::TimedOut(waiter) => {
                    Self::end(state, waiter.id, waiter.data, Phase::TimedOut)
                }
                Effect::Withdrawn(waiter) => {
                    Self::end(state, waiter.id, waiter.data, Phase::GaveUp)
                }
                Effect::Fail(waiter, _) => Self::end(state, waiter.id, waiter.data, Phase::Failed),
            }
        }
    }

    fn end(state: &mut State, id: u64, ask: Ask, phase: Phase) {
        state.deadlines.remove(&id);
        state.callers[ask.caller] = phase;
    }

    /// Releases waiter `id`, if it is still queued.
    fn release(state: &mut State, id: u64) {
        if let Granted::To(waiter) = state.queue.0.granted(id) {
            state.deadlines.remove(&waiter.id);
            let caller = waiter.data.caller;
            state.callers[caller] = Phase::Released;
            state.released_while_closed |= !state.saw_open[caller];
        }
    }

    /// Lets the head go if it may (the latch actor's gate lets it always).
    fn pump(&self, state: &mut State) {
        let effects = state.queue.0.pump(at(state.now), |_| Gate::Go);
        self.apply(state, effects);
    }

    /// A script of the other process ran: its message goes to this process if subscribed.
    fn publish(&self, state: &mut State, message: Option<Message>) {
        if let Some(message) = message.filter(|_| state.subscribed) {
            state.inbox.push(message);
        }
    }

    /// What follows every step: the actor drops its subscription once nobody waits (its
    /// `refresh_keepalive`), and the ghosts follow the latch.
    fn settle(state: &mut State) {
        if nobody_waits(&state.queue.0) && state.routed {
            state.routed = false;
            state.subscribed = false;
            state
                .queue
                .0
                .subscribed(Subscribed::No { retry_after: None });
        }
        if state.store.open() {
            state.open_since.get_or_insert(state.now);
            for (caller, phase) in state.callers.iter().enumerate() {
                if matches!(phase, Phase::Waiting(_)) {
                    state.saw_open[caller] = true;
                }
            }
        } else {
            state.open_since = None;
        }
    }

    fn waiting(state: &State) -> bool {
        state
            .callers
            .iter()
            .any(|phase| matches!(phase, Phase::Waiting(_)))
    }

    /// Nothing is due now: Redis has answered, no timer is due.
    fn quiet(state: &State) -> bool {
        state.trying.is_none()
            && state.subscribing.is_none()
            && state.timer.is_none_or(|(_, fires)| fires > state.now)
            && state.deadlines.values().all(|fires| *fires > state.now)
    }
}

impl Model for LatchModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            now: 0,
            store: Store::with_count(self.count),
            queue: Queue(WaitQueue::new(Retry::TransientOnce)),
            callers: vec![Phase::Idle; self.callers],
            trying: None,
            subscribing: None,
            subscribed: false,
            routed: false,
            inbox: Vec::new(),
            dropped: false,
            timer: None,
            deadlines: BTreeMap::new(),
            resets_left: 1,
            deletes_left: u8::from(self.delete),
            open_since: None,
            saw_open: vec![false; self.callers],
            released_while_closed: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (c, phase) in state.callers.iter().enumerate() {
            match phase {
                Phase::Idle if state.now == 0 => actions.push(Action::Wait(c)),
                Phase::Waiting(id) if state.queue.0.get(*id).is_some_and(|w| !w.data.left) => {
                    actions.push(Action::GiveUp(c))
                }
                _ => {}
            }
        }
        match state.trying {
            Some((_, None)) => actions.push(Action::ReadRuns),
            Some((_, Some(_))) => actions.push(Action::ReadAnswered),
            None => {}
        }
        match state.subscribing {
            Some(false) => actions.push(Action::SubscribeRuns),
            Some(true) => actions.push(Action::Subscribed),
            None => {}
        }
        // Messages follow the subscription's confirmation on its connection.
        if !state.inbox.is_empty() && state.subscribing.is_none() {
            actions.push(Action::Deliver);
            if self.drops {
                actions.push(Action::Drop);
            }
        }
        if let Some((_, fires)) = state.timer {
            if fires <= state.now {
                actions.push(Action::Slept);
            }
        }
        for (&id, &fires) in &state.deadlines {
            if fires <= state.now {
                actions.push(Action::Expire(id));
            }
        }
        if !state.store.open() {
            actions.push(Action::PeerCountDown);
            if state.deletes_left > 0 {
                actions.push(Action::PeerDelete);
            }
        } else if state.resets_left > 0 {
            actions.push(Action::PeerReset);
        }
        if state.now < BUDGET && Self::quiet(state) {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        let now = at(state.now);
        match action {
            Action::Wait(c) => {
                let wait = Duration::from_millis(WAITS[c]);
                let ask = Ask {
                    caller: c,
                    left: false,
                };
                let waiter = state.queue.0.waiter(now, wait, ask);
                state.callers[c] = Phase::Waiting(waiter.id);
                let effects = state.queue.0.enqueue(waiter, false);
                self.apply(&mut state, effects);
                self.pump(&mut state);
            }
            Action::GiveUp(c) => {
                let Phase::Waiting(id) = state.callers[c] else {
                    return None;
                };
                state.queue.0.get_mut(id)?.data.left = true;
                // The actor's watch on its askers hands the queue the waiter that left.
                let effects = state.queue.0.gone(id);
                self.apply(&mut state, effects);
                self.pump(&mut state);
            }
            Action::ReadRuns => {
                let (id, _) = state.trying?;
                let count = state.store.count().ok()?;
                state.trying = Some((id, Some(open_count(count))));
            }
            Action::ReadAnswered => {
                let (id, Some(count)) = state.trying.take()? else {
                    return None;
                };
                if count == 0 {
                    Self::release(&mut state, id);
                } else {
                    let effects = state.queue.0.busy(id, now, FALLBACK_POLL);
                    self.apply(&mut state, effects);
                }
                self.pump(&mut state);
            }
            Action::SubscribeRuns => {
                state.subscribed = true;
                state.subscribing = Some(true);
            }
            Action::Subscribed => {
                state.subscribing = None;
                let effects = state.queue.0.subscription_ended(Ok(Subscribed::Yes));
                self.apply(&mut state, effects);
                self.pump(&mut state);
            }
            Action::Deliver => {
                let message = state.inbox.remove(0);
                if state.routed {
                    match (self.rules, message) {
                        (Rules::ReleaseOnMessage, Message::Zero) => {
                            let ids: Vec<u64> = state
                                .callers
                                .iter()
                                .filter_map(|phase| match phase {
                                    Phase::Waiting(id) => Some(*id),
                                    _ => None,
                                })
                                .collect();
                            for id in ids {
                                Self::release(&mut state, id);
                            }
                        }
                        _ => {
                            let effects = state.queue.0.news();
                            self.apply(&mut state, effects);
                        }
                    }
                    self.pump(&mut state);
                }
            }
            Action::Drop => {
                state.inbox.remove(0);
                state.dropped = true;
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
            Action::PeerCountDown => {
                let outcome = state.store.count_down(self.scripts);
                self.publish(&mut state, outcome.published);
            }
            Action::PeerReset => {
                state.resets_left -= 1;
                let outcome = state.store.try_set(1);
                self.publish(&mut state, outcome.published);
            }
            Action::PeerDelete => {
                state.deletes_left -= 1;
                let outcome = state.store.delete();
                self.publish(&mut state, outcome.published);
            }
            Action::Tick => state.now += STEP,
        }
        Self::settle(&mut state);
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(NEVER_WHILE_CLOSED, |_: &LatchModel, state: &State| {
                !state.released_while_closed
            }),
            Property::always(NO_LOST_WAKE_UP, |_: &LatchModel, state: &State| {
                let asleep = state.timer.is_some() && LatchModel::waiting(state);
                !(asleep && state.store.open() && state.inbox.is_empty() && !state.dropped)
            }),
            Property::always(WITHIN_FALLBACK, |_: &LatchModel, state: &State| {
                let late = state
                    .open_since
                    .is_some_and(|since| state.now - since > fallback_ms());
                !(late && LatchModel::waiting(state))
            }),
            Property::always(NOTHING_LEFT, |_: &LatchModel, state: &State| {
                let idle = !LatchModel::waiting(state)
                    && state.trying.is_none()
                    && state.subscribing.is_none();
                !idle
                    || (state.queue.0.is_empty()
                        && !state.routed
                        && !state.subscribed
                        && state.timer.is_none()
                        && state.deadlines.is_empty())
            }),
            Property::always("no waiter fails", |_: &LatchModel, state: &State| {
                !state.callers.contains(&Phase::Failed)
            }),
            Property::eventually(
                "every waiter is released, times out or gives up",
                // (A caller that did not ask at the start never does.)
                |_: &LatchModel, state: &State| state.now > 0 && !LatchModel::waiting(state),
            ),
            Property::sometimes("a waiter is released", |_: &LatchModel, state: &State| {
                state.callers.contains(&Phase::Released)
            }),
            Property::sometimes("a waiter times out", |_: &LatchModel, state: &State| {
                state.callers.contains(&Phase::TimedOut)
            }),
            Property::sometimes("a waiter gives up", |_: &LatchModel, state: &State| {
                state.callers.contains(&Phase::GaveUp)
            }),
        ];
        if let Some(only) = self.only {
            properties.retain(|property| property.name == only);
        }
        properties
    }
}

/// The properties the negative controls break (or keep).
pub(super) const NEVER_WHILE_CLOSED: &str =
    "a waiter is released only if the latch was open at some moment of its wait";
pub(super) const NO_LOST_WAKE_UP: &str =
    "no wake-up is lost: the head never sleeps on an open latch with no message coming";
pub(super) const WITHIN_FALLBACK: &str =
    "no waiter waits more than one fallback period past the latch's opening";
pub(super) const NOTHING_LEFT: &str = "once nobody waits, no waiter, timer or subscription is left";
