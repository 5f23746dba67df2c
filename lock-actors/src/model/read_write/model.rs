//! The read-write lock under mixed leases: each client is one owner that takes read holds
//! and write holds, each with the watchdog or with a fixed lease shorter or longer than the
//! watchdog's, re-enters either side (a writer may read too: its read holds outlive its
//! write hold), lets its watchdog renew (a renewal may arrive late, or never: a paused
//! client is one that takes no step), and unlocks its holds in any order, while the
//! model's clock advances and Redis expires the hash and the read holds' timeout keys.
//!
//! The two sides are two lock actors in the library, each keeping the owner's holds of its
//! side with one deadline, its own watchdog entry and its own renewal script; a client
//! here is the pair. What a side believes follows the library's rules ([`Rules::Current`],
//! imported as the reentrant model does): a fixed-lease hold is surely held until
//! `surely_held_until`; while any hold of the side is watched, until the last renewal's
//! send time plus what `renewed_for` makes of its answer, less the drift allowance, or
//! until the last fixed lease ends if that is later; otherwise until the last fixed lease
//! ends, less the drift allowance of the longest; an
//! unlock sends what `kept_lease` says the side's remaining holds need. [`Rules::Before`]
//! restates the rules as they were before the key's TTL became the truth: a renewal counted
//! when it answered `1`; an unlock sent the watchdog lease while a watched hold remained,
//! else the last hold's lease; with no watched hold the deadline was the last hold's lease
//! from when its timer was armed (the grant, or the last unlock); a lost hold was only
//! forgotten, not cleared from Redis.
//!
//! Bounds: leases and ticks on one grid (1,000, 3,000 and 4,000 ms leases, ticks of
//! 1,000 ms), a few holds per client. Left out: with the current scripts, a renewal still
//! on its way when its side stops watching (it reaches Redis unanswered, and today's
//! renewals only ever lengthen a TTL); with the old rules, an acquire that would make Redis
//! count more holds than the store has room for (they forgot lost holds without clearing
//! them, so Redis's counts could grow).

use super::client::{Client, Hold, Holder, Side};
use super::store::{Scripts, Store, OWNERS, TIMEOUTS};
use crate::config::clock_drift;
use crate::lease::ends::{kept_lease, renewed_for};
use crate::lock::fast_path::surely_held_until;
use crate::model::clock::{at, micros};
use stateright::{Model, Property, Representative};
use std::time::Duration;

/// The watchdog lease, in model milliseconds.
pub(super) const WATCHDOG: u64 = 3_000;
/// The fixed leases a client may ask for: shorter and longer than the watchdog's (whole
/// steps of the clock, so every instant in the state stays on its grid).
const FIXED: [u64; 2] = [1_000, 4_000];
/// The longest lease of all.
const LONGEST: u64 = 4_000;
/// One tick of the model's clock.
const STEP: i64 = 1_000;
/// How long a renewal may be on its way before the watchdog gives it up (and sends
/// another): the library's response timeout is far shorter than the lease, so a renewal
/// arrives within a tick of its send, or is lost.
const RENEWAL_PATIENCE: i64 = 2 * STEP;

/// Which client rules the model's clients follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Rules {
    /// The library's, imported.
    Current,
    /// As they were before the lease-truth fixes (restated: that code is gone).
    Before,
}

/// The model's state, with every instant relative to now.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct State {
    store: Store,
    clients: Vec<Client>,
    /// Whether two owners have read at once so far (for a reachability check only).
    shared: bool,
}

impl State {
    /// `STEP` passes: every instant moves back by it, keys expire, a renewal out for too
    /// long is given up.
    fn tick(&mut self) {
        self.store.shift(STEP);
        self.store.expire(0);
        // A hold sent its lease ago or more is past it: older send times all look the same
        // (to the rules, which take the longest lease and the latest end, and to
        // `kept_lease`, which counts an ended lease as nothing left).
        for client in &mut self.clients {
            for holder in [&mut client.read, &mut client.write] {
                for (lease, sent) in holder.holds.fixed_mut() {
                    *sent = (*sent - STEP as i32).max(-(*lease as i32));
                }
                // The old rules' timer runs the last hold's lease at most.
                holder.armed = holder.armed.map(|at| (at - STEP).max(-(LONGEST as i64)));
                // Past its end the watchdog's deadline counts for nothing more (a fixed
                // lease may keep the side on): every instant before now is the same one.
                holder.watched_until = holder
                    .watched_until
                    .map(|until| (until - STEP * 1_000).max(-1));
                holder.renewing = holder
                    .renewing
                    .map(|sent| sent - STEP)
                    .filter(|&sent| sent > -RENEWAL_PATIENCE);
            }
        }
    }
}

impl Representative for State {
    /// The clients are alike (every one may read and write): of the states that differ
    /// only in which client is which, the least stands for them all.
    fn representative(&self) -> Self {
        let mut best = self.clone();
        let n = self.clients.len();
        let mut order: Vec<usize> = (0..n).collect();
        while next_permutation(&mut order) {
            let renamed = self.renamed(&order);
            if renamed < best {
                best = renamed;
            }
        }
        best
    }
}

impl State {
    /// The state with client `order[i]` as client `i` (and the owners in Redis renamed
    /// alike).
    fn renamed(&self, order: &[usize]) -> State {
        let mut new_owner = [0u8; OWNERS];
        for (i, &c) in order.iter().enumerate() {
            new_owner[c] = owner(i);
        }
        // Owners no client stands for (the store has room for more) keep their place.
        for (o, new) in new_owner.iter_mut().enumerate().skip(order.len()) {
            *new = o as u8 + 1;
        }
        State {
            store: self.store.renamed(|o| new_owner[usize::from(o) - 1]),
            clients: order.iter().map(|&c| self.clients[c]).collect(),
            shared: self.shared,
        }
    }
}

/// The next permutation of `order` in lexicographic order; `false` after the last.
fn next_permutation(order: &mut [usize]) -> bool {
    let Some(i) = (1..order.len()).rev().find(|&i| order[i - 1] < order[i]) else {
        return false;
    };
    let j = (i..order.len())
        .rev()
        .find(|&j| order[j] > order[i - 1])
        .expect("one is");
    order.swap(i - 1, j);
    order[i..].reverse();
    true
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Client `0` takes (or re-enters) side `1` with a fixed lease or the watchdog (`None`).
    Acquire(usize, Side, Option<u64>),
    /// Client `0`'s watchdog sends a renewal of its holds of side `1`.
    SendRenewal(usize, Side),
    /// That renewal reaches Redis (any time after it was sent) and its answer comes back.
    RenewalArrives(usize, Side),
    /// That renewal is lost on the way (the watchdog sends another later).
    RenewalLost(usize, Side),
    /// Client `0` unlocks its hold `2` of side `1`.
    Unlock(usize, Side, usize),
    /// The clock advances one step.
    Tick,
}

/// The model: which scripts and rules, how many clients, how many holds (of both sides) a
/// client takes at most, how many clients take write holds (the last ones). Time needs no
/// bound: every instant in the state is relative to now and bounded by the longest lease,
/// so the state space is finite and explored whole.
pub(crate) struct ReadWriteModel {
    pub(crate) scripts: Scripts,
    pub(crate) rules: Rules,
    pub(crate) clients: usize,
    pub(crate) max_holds: usize,
    pub(crate) writers: usize,
    /// Unlocks release the latest hold first (nested guards), as a Redisson user's do:
    /// the order the read holds' numbered timeout keys assume.
    pub(crate) last_first: bool,
    /// Explores the states up to which client is which (only when all may write).
    pub(crate) symmetric: bool,
    /// Keeps the history [`SHARED_THEN_WRITTEN`] asks about in the state (it doubles the
    /// states, so only the check of that property does).
    pub(crate) track_shared: bool,
    /// Explores from this state instead of the empty lock.
    pub(crate) start: Option<State>,
    /// Checks only the property of this name (a shortest counterexample for it).
    pub(crate) only: Option<&'static str>,
}

fn owner(c: usize) -> u8 {
    c as u8 + 1
}

impl ReadWriteModel {
    /// Until when a side believes its holds are held (µs, relative to now): one deadline
    /// per owner and side, as the lock actor keeps it (`arm_lease_keeping`).
    /// While a hold is watched, the current rules take the later of the watchdog's deadline
    /// and the fixed leases' end (a fixed lease keeps the key whatever the renewals do).
    fn believed_until(&self, holder: &Holder) -> i64 {
        match (self.rules, holder.watched_until) {
            (Rules::Current, Some(until)) => until.max(self.fixed_until(holder)),
            (Rules::Before, Some(until)) => until,
            (_, None) => self.fixed_until(holder),
        }
    }

    /// Until when a side's fixed leases keep its holds (µs, relative to now; `i64::MIN`
    /// without one), by the rules' reckoning.
    fn fixed_until(&self, holder: &Holder) -> i64 {
        let fixed = holder.holds.iter().filter_map(|hold| hold.fixed);
        let (lease, end) = match self.rules {
            Rules::Current => (
                fixed.clone().map(|(lease, _)| lease).max(),
                fixed
                    .map(|(lease, sent)| i64::from(sent) + i64::from(lease))
                    .max(),
            ),
            Rules::Before => match (
                holder.holds.last().and_then(|last| last.fixed),
                holder.armed,
            ) {
                (Some((lease, _)), Some(armed)) => (Some(lease), Some(armed + i64::from(lease))),
                _ => (None, None),
            },
        };
        match (lease, end) {
            (Some(lease), Some(end)) => {
                micros(at(end) - clock_drift(Duration::from_millis(lease.into())))
            }
            _ => i64::MIN,
        }
    }

    /// Until when client `c` believes its holds of `side` held, if it holds any now.
    fn believes(&self, state: &State, c: usize, side: Side) -> Option<i64> {
        let holder = state.clients[c].side(side);
        let until = self.believed_until(holder);
        (!holder.holds.is_empty() && until > 0).then_some(until)
    }

    /// The lease an unlock sends for the side's remaining holds.
    fn kept(&self, holder: &Holder) -> u64 {
        match self.rules {
            Rules::Current => kept_lease(
                holder.holds.iter().map(|hold| {
                    hold.fixed
                        .map(|(lease, sent)| at(i64::from(sent + lease as i32)))
                }),
                at(0),
                Duration::from_millis(WATCHDOG),
            )
            .map_or(WATCHDOG, |kept| kept.as_millis() as u64),
            Rules::Before if holder.watched() => WATCHDOG,
            Rules::Before => holder
                .holds
                .last()
                .and_then(|hold| hold.fixed)
                .map_or(WATCHDOG, |(lease, _)| lease.into()),
        }
    }

    fn acquire(&self, store: &mut Store, side: Side, c: usize, lease: u64) -> Option<i64> {
        match side {
            Side::Read => store.read_acquire(0, owner(c), lease),
            Side::Write => store.write_acquire(0, owner(c), lease),
        }
    }

    fn renew(&self, store: &mut Store, side: Side, c: usize) -> i64 {
        match side {
            Side::Read => store.read_renew(self.scripts, 0, owner(c), WATCHDOG),
            Side::Write => store.write_renew(self.scripts, 0, owner(c), WATCHDOG),
        }
    }

    fn unlock(&self, store: &mut Store, side: Side, c: usize, lease: u64) -> Option<i64> {
        match side {
            Side::Read => store.read_unlock(self.scripts, 0, owner(c), lease),
            Side::Write => store.write_unlock(self.scripts, 0, owner(c), lease),
        }
    }

    /// A side one of whose holds is no longer believed held reports the owner lost, as the
    /// lock actor does: every hold of the side is dropped, and (current rules) as many
    /// owner-checked unlocks as it had holds clear what Redis may still count for it (with
    /// a 1 ms lease), so no stray count outlives the loss.
    fn lose_expired(&self, state: &mut State) {
        for c in 0..state.clients.len() {
            for side in [Side::Read, Side::Write] {
                let holder = state.clients[c].side(side);
                if holder.holds.is_empty() || self.believed_until(holder) > 0 {
                    continue;
                }
                let holds = holder.holds.len();
                *state.clients[c].side_mut(side) = Holder::default();
                if self.rules == Rules::Before {
                    continue;
                }
                for _ in 0..holds {
                    if self.unlock(&mut state.store, side, c, 1) != Some(0) {
                        break;
                    }
                }
            }
        }
    }

    /// Which clients believe they hold `side` now.
    fn holding(&self, state: &State, side: Side) -> Vec<usize> {
        (0..state.clients.len())
            .filter(|&c| self.believes(state, c, side).is_some())
            .collect()
    }
}

impl Model for ReadWriteModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        assert!(
            !self.symmetric || self.writers == self.clients,
            "clients are alike only when all may write"
        );
        let empty = || State {
            store: Store::default(),
            clients: vec![Client::default(); self.clients],
            shared: false,
        };
        vec![self.start.clone().unwrap_or_else(empty)]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (c, client) in state.clients.iter().enumerate() {
            for side in [Side::Read, Side::Write] {
                let holder = client.side(side);
                let may = side == Side::Read || c + self.writers >= self.clients;
                if may && client.read.holds.len() + client.write.holds.len() < self.max_holds {
                    actions.push(Action::Acquire(c, side, None));
                    for lease in FIXED {
                        actions.push(Action::Acquire(c, side, Some(lease)));
                    }
                }
                match holder.renewing {
                    None if holder.watched_until.is_some() => {
                        actions.push(Action::SendRenewal(c, side))
                    }
                    None => {}
                    Some(_) => {
                        actions.push(Action::RenewalArrives(c, side));
                        actions.push(Action::RenewalLost(c, side));
                    }
                }
                let first = match self.last_first {
                    true => holder.holds.len().saturating_sub(1),
                    false => 0,
                };
                for h in first..holder.holds.len() {
                    actions.push(Action::Unlock(c, side, h));
                }
            }
        }
        actions.push(Action::Tick);
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Acquire(c, side, fixed) => {
                let lease = fixed.unwrap_or(WATCHDOG);
                // The old rules forget a lost hold without clearing it, so Redis may count
                // more holds than the client has: beyond the store's room is beyond the
                // model's bounds.
                let counted = match side {
                    Side::Read => state.store.reader(owner(c)),
                    Side::Write => state.store.writer(owner(c)),
                };
                if counted as usize >= TIMEOUTS {
                    return None;
                }
                if self.acquire(&mut state.store, side, c, lease).is_some() {
                    return None; // busy: nothing changes (waiting is another model's)
                }
                let holder = state.clients[c].side_mut(side);
                holder.holds.push(Hold {
                    fixed: fixed.map(|lease| (lease as u32, 0)),
                });
                if fixed.is_none() && holder.watched_until.is_none() {
                    let lease = Duration::from_millis(WATCHDOG);
                    holder.watched_until = Some(micros(surely_held_until(at(0), lease)));
                }
                if self.rules == Rules::Before {
                    holder.armed = Some(0); // the fixed-lease timer, from this grant's send
                }
            }
            Action::SendRenewal(c, side) => state.clients[c].side_mut(side).renewing = Some(0),
            Action::RenewalLost(c, side) => state.clients[c].side_mut(side).renewing = None,
            Action::RenewalArrives(c, side) => {
                let sent = state.clients[c].side_mut(side).renewing.take()?;
                let answer = self.renew(&mut state.store, side, c);
                let lease = Duration::from_millis(WATCHDOG);
                let holder = state.clients[c].side_mut(side);
                if holder.watched_until.is_some() {
                    let renewed = match self.rules {
                        Rules::Current => renewed_for(answer, lease),
                        Rules::Before => (answer == 1).then_some(lease),
                    };
                    match renewed {
                        // Timed from the send: the answer may have taken any time to come.
                        Some(valid_for) => {
                            let until = micros(at(sent) + valid_for - clock_drift(lease));
                            holder.watched_until = Some(until);
                        }
                        // Gone: the side loses the owner's holds (nothing to clear).
                        None => *holder = Holder::default(),
                    }
                }
            }
            Action::Unlock(c, side, h) => {
                let holder = state.clients[c].side_mut(side);
                holder.holds.remove(h);
                if !holder.watched() {
                    holder.watched_until = None;
                }
                let remaining = holder.holds.len();
                if self.rules == Rules::Before && remaining > 0 {
                    holder.armed = Some(0); // the fixed-lease timer, restarted now
                }
                let lease = self.kept(holder);
                let answer = self.unlock(&mut state.store, side, c, lease);
                // Not the owner any more, or freed under remaining holds: they are lost.
                if remaining > 0 && answer != Some(0) {
                    *state.clients[c].side_mut(side) = Holder::default();
                }
            }
            Action::Tick => state.tick(),
        }
        self.lose_expired(&mut state);
        state.store.forget_unread();
        for client in &mut state.clients {
            for holder in [&mut client.read, &mut client.write] {
                if holder.watched() {
                    holder.armed = None; // the watchdog keeps them: no timer
                } else if self.scripts == Scripts::Current {
                    // A renewal still on its way when the side stopped watching reaches
                    // Redis later, unanswered; the current renewals only ever lengthen a
                    // TTL, which no property here can suffer from, so it is left out
                    // (it would triple the states).
                    holder.renewing = None;
                }
                if self.rules == Rules::Current && !self.last_first {
                    // Which hold came first does not matter to these rules.
                    holder.holds.sort();
                }
            }
        }
        if self.track_shared {
            state.shared |= self.holding(&state, Side::Read).len() >= 2;
        }
        if self.symmetric {
            state = state.representative();
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(KEPT, |model: &ReadWriteModel, state: &State| {
                let store = &state.store;
                (0..state.clients.len()).all(|c| {
                    [Side::Read, Side::Write].into_iter().all(|side| {
                        let Some(until) = model.believes(state, c, side) else {
                            return true;
                        };
                        let count = match side {
                            Side::Read => store.reader(owner(c)),
                            Side::Write => store.writer(owner(c)),
                        };
                        count > 0 && store.expires_at.is_none_or(|at| at * 1_000 >= until)
                    })
                })
            }),
            Property::always(EXCLUSIVE, |model: &ReadWriteModel, state: &State| {
                let writers = model.holding(state, Side::Write);
                let readers = model.holding(state, Side::Read);
                writers.len() <= 1 && readers.iter().all(|r| writers.iter().all(|w| w == r))
            }),
            Property::sometimes(
                "two owners read at once",
                |model: &ReadWriteModel, state: &State| model.holding(state, Side::Read).len() >= 2,
            ),
            Property::sometimes(
                "an owner reads with mixed leases",
                |model: &ReadWriteModel, state: &State| {
                    model.holding(state, Side::Read).into_iter().any(|c| {
                        let holds = &state.clients[c].read.holds;
                        holds.iter().any(|h| h.fixed.is_some())
                            && holds.iter().any(|h| h.fixed.is_none())
                    })
                },
            ),
            Property::sometimes(
                "a fixed read lease longer than the watchdog beside another owner's watched read",
                |model: &ReadWriteModel, state: &State| {
                    let readers = model.holding(state, Side::Read);
                    let reads = |c: usize, long: bool| {
                        state.clients[c].read.holds.iter().any(|h| match h.fixed {
                            Some((lease, _)) => long && u64::from(lease) > WATCHDOG,
                            None => !long,
                        })
                    };
                    readers.iter().any(|&a| {
                        reads(a, true) && readers.iter().any(|&b| b != a && reads(b, false))
                    })
                },
            ),
            Property::sometimes(
                "a writer reads too",
                |model: &ReadWriteModel, state: &State| {
                    let readers = model.holding(state, Side::Read);
                    model
                        .holding(state, Side::Write)
                        .iter()
                        .any(|w| readers.contains(w))
                },
            ),
        ];
        if self.track_shared {
            properties.push(Property::sometimes(
                SHARED_THEN_WRITTEN,
                |model: &ReadWriteModel, state: &State| {
                    state.shared && !model.holding(state, Side::Write).is_empty()
                },
            ));
        }
        if let Some(only) = self.only {
            properties.retain(|property| property.name == only);
        }
        properties
    }
}

/// The two safety properties.
pub(super) const KEPT: &str =
    "Redis keeps every hold at least as long as its client believes it held";
/// A reachability check that needs the state's history.
pub(super) const SHARED_THEN_WRITTEN: &str = "a writer holds after two owners read at once";
pub(super) const EXCLUSIVE: &str =
    "never two writers, never a reader with another owner's writer, on the model's clock";
