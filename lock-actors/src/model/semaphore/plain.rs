//! The plain semaphore (Redisson's `RSemaphore`): a count of anonymous permits. Clients
//! take one permit at a time (the reply may be lost: a copy of the acquire may still run
//! in Redis, late or never), settle an acquire whose reply was lost, release permits (a
//! release Redis never gets loses its permit, as documented), close, or die.
//!
//! What the library promises for plain permits, and what is checked: the count is exact
//! (available permits, permits held, permits an acquire whose reply was lost took and has
//! not given back yet, and permits lost by design add up to the permits set); no more
//! permits are held than the semaphore has; and a client that closes leaves no permit
//! behind: its guards' permits are back, and an acquire whose reply was lost is settled
//! (its permits go back, or a late copy of it takes nothing). Permits are lost by design
//! only where the library says so: a holder that dies keeps its permits taken for good
//! (plain permits have no lease), a release Redis never gets leaves its permit taken, and
//! so does an acquire of a client that dies before settling it.
//!
//! Plain permits have no lease, so this model has no clock. [`Rules::Before`] restates the
//! client as it was before receipts: an acquire whose reply was lost was logged, and its
//! permits stayed taken if it had run.

use super::store::{Member, Scripts, Store};
use stateright::{Checker, Model, Property};

/// The permits the semaphore is set to (`try_set_permits`, before anything else).
const PERMITS: u32 = 2;
/// The most permits one client holds at once.
const MOST_HELD: u8 = 2;

/// Which client rules the model's clients follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Rules {
    /// The library's: an acquire whose reply was lost is settled by its receipt.
    Current,
    /// Before receipts: nothing is done about it (restated: that code is gone).
    Before,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
enum Life {
    #[default]
    Open,
    Closed,
    Dead,
}

/// One client, and what is true of it that it does not know (the ghost counts).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
struct Client {
    life: Life,
    /// Permits held through its guards.
    held: u8,
    /// A copy of an acquire whose reply was lost may still run in Redis.
    late: bool,
    /// It is to settle that acquire.
    settling: bool,
    /// Ghost: permits Redis gave its acquires whose replies were lost, not given back.
    stray: u8,
    /// Ghost: permits lost by design (held when it died, or released to a Redis that never
    /// got the release).
    lost: u8,
}

/// Sticky marks of what has happened, for the `sometimes` checks.
const SETTLED_BACK: u8 = 1;
const LATE_COPY_REFUSED: u8 = 2;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct State {
    store: Store,
    clients: Vec<Client>,
    seen: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Client `0` takes a permit, and hears the reply.
    Acquire(usize),
    /// Client `0` sends an acquire and its reply is lost.
    AcquireUnanswered(usize),
    /// The copy of client `0`'s unanswered acquire runs in Redis.
    LateCopyRuns(usize),
    /// That copy never runs.
    LateCopyLost(usize),
    /// Client `0` settles its unanswered acquire.
    Settle(usize),
    /// Client `0`'s settlement runs in Redis but its reply is lost (it settles again).
    SettleUnanswered(usize),
    /// Client `0` releases a permit.
    Release(usize),
    /// Client `0` releases a permit and Redis never gets the release.
    ReleaseLost(usize),
    /// Client `0` drops its guards and closes.
    Close(usize),
    /// Client `0`'s process dies.
    Die(usize),
}

pub(crate) struct PlainModel {
    pub(crate) scripts: Scripts,
    pub(crate) rules: Rules,
    pub(crate) clients: usize,
    /// Checks only the property of this name (a shortest counterexample for it).
    pub(crate) only: Option<&'static str>,
}

/// Client `c`'s receipt for an acquire whose reply was lost; `c + ANSWERED` for one whose
/// reply came (deleted at once, as the actor does).
fn receipt(c: usize) -> Member {
    c as Member
}
const ANSWERED: Member = 100;

impl PlainModel {
    /// A receipt nothing will read again (no copy of its acquire is left to run, and no
    /// settlement is due) is dropped: in Redis it lives out its window unread.
    fn forget_receipt(state: &mut State, c: usize) {
        let client = &state.clients[c];
        if !client.late && !client.settling {
            state.store.receipts.remove(&receipt(c));
        }
    }

    fn settle(&self, state: &mut State, c: usize) {
        if self.store_settle(state, c) == 1 {
            state.seen |= SETTLED_BACK;
        }
    }

    fn store_settle(&self, state: &mut State, c: usize) -> i64 {
        let back = state.store.settle(self.scripts, receipt(c), 1);
        if back == 1 {
            let stray = &mut state.clients[c].stray;
            *stray = stray.saturating_sub(1);
        }
        back
    }
}

impl Model for PlainModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let mut store = Store::default();
        store.try_set(PERMITS);
        vec![State {
            store,
            clients: vec![Client::default(); self.clients],
            seen: 0,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (c, client) in state.clients.iter().enumerate() {
            if client.late {
                actions.push(Action::LateCopyRuns(c));
                actions.push(Action::LateCopyLost(c));
            }
            if client.life != Life::Open {
                continue;
            }
            if client.held < MOST_HELD {
                actions.push(Action::Acquire(c));
                if !client.late && !client.settling {
                    actions.push(Action::AcquireUnanswered(c));
                }
            }
            if client.settling {
                actions.push(Action::Settle(c));
                actions.push(Action::SettleUnanswered(c));
            }
            if client.held > 0 {
                actions.push(Action::Release(c));
                actions.push(Action::ReleaseLost(c));
            }
            actions.push(Action::Close(c));
            actions.push(Action::Die(c));
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        match action {
            Action::Acquire(c) => {
                let answered = receipt(c) + ANSWERED;
                let [taken, _] = state.store.acquire(self.scripts, answered, 1);
                // The reply came: the actor deletes the receipt.
                state.store.receipts.remove(&answered);
                if taken != 1 {
                    return None; // too few: nothing changed (waiting is not modelled)
                }
                state.clients[c].held += 1;
            }
            Action::AcquireUnanswered(c) => {
                let client = &mut state.clients[c];
                client.late = true;
                client.settling = self.rules == Rules::Current;
            }
            Action::LateCopyRuns(c) => {
                match state.store.acquire(self.scripts, receipt(c), 1) {
                    [1, _] => state.clients[c].stray += 1,
                    [-1, _] => state.seen |= LATE_COPY_REFUSED,
                    _ => {}
                }
                state.clients[c].late = false;
                Self::forget_receipt(&mut state, c);
            }
            Action::LateCopyLost(c) => {
                state.clients[c].late = false;
                Self::forget_receipt(&mut state, c);
            }
            Action::Settle(c) => {
                self.settle(&mut state, c);
                state.clients[c].settling = false;
                Self::forget_receipt(&mut state, c);
            }
            Action::SettleUnanswered(c) => self.settle(&mut state, c),
            Action::Release(c) => {
                state.clients[c].held -= 1;
                state.store.add(1);
            }
            Action::ReleaseLost(c) => {
                let client = &mut state.clients[c];
                client.held -= 1;
                client.lost += 1;
            }
            Action::Close(c) => {
                // The guards dropped first give their permits back, and the close waits for
                // what is under way: the settlement of an unanswered acquire among it.
                let held = std::mem::take(&mut state.clients[c].held);
                for _ in 0..held {
                    state.store.add(1);
                }
                if state.clients[c].settling {
                    self.settle(&mut state, c);
                    state.clients[c].settling = false;
                }
                state.clients[c].life = Life::Closed;
                Self::forget_receipt(&mut state, c);
            }
            Action::Die(c) => {
                let client = &mut state.clients[c];
                client.lost += std::mem::take(&mut client.held);
                client.settling = false;
                client.life = Life::Dead;
                Self::forget_receipt(&mut state, c);
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(HELD, |_: &PlainModel, state: &State| {
                let held: u32 = state.clients.iter().map(|c| u32::from(c.held)).sum();
                held <= PERMITS
            }),
            Property::always(EXACT, |_: &PlainModel, state: &State| {
                let out: i64 = state
                    .clients
                    .iter()
                    .map(|c| i64::from(c.held + c.stray + c.lost))
                    .sum();
                state.store.count.unwrap_or(0) + out == i64::from(PERMITS)
            }),
            Property::always(CLOSED, |_: &PlainModel, state: &State| {
                state
                    .clients
                    .iter()
                    .filter(|c| c.life == Life::Closed)
                    .all(|c| c.held == 0 && c.stray == 0)
            }),
            Property::sometimes("both permits out", |_: &PlainModel, state: &State| {
                state.clients.iter().map(|c| c.held).sum::<u8>() == 2
            }),
            Property::sometimes(
                "an unanswered acquire's permit was settled back",
                |_: &PlainModel, state: &State| state.seen & SETTLED_BACK != 0,
            ),
            Property::sometimes(
                "a late copy of a settled acquire took nothing",
                |_: &PlainModel, state: &State| state.seen & LATE_COPY_REFUSED != 0,
            ),
        ];
        if let Some(only) = self.only {
            properties.retain(|property| property.name == only);
        }
        properties
    }
}

/// The safety properties.
const HELD: &str = "never more permits held than the semaphore has";
const EXACT: &str = "the count is exact";
const CLOSED: &str = "a closed client leaves no permit behind";

/// The bounds: CI's, or deeper with `LOCK_MODEL_DEPTH=deep`.
fn model(scripts: Scripts, rules: Rules) -> PlainModel {
    PlainModel {
        scripts,
        rules,
        clients: if super::deep() { 3 } else { 2 },
        only: None,
    }
}

fn check(model: PlainModel, label: &str) -> impl Checker<PlainModel> {
    super::super::explore(model, label)
}

/// A shortest trace that breaks `property` (breadth-first, checking only it).
fn counterexample(scripts: Scripts, rules: Rules, property: &'static str) -> Vec<Action> {
    let model = PlainModel {
        only: Some(property),
        ..model(scripts, rules)
    };
    let label = format!("plain, {scripts:?} scripts, {rules:?} rules: {property}");
    let trace = check(model, &label)
        .assert_any_discovery(property)
        .into_actions();
    eprintln!("  broken by {trace:?}");
    trace
}

#[test]
fn the_plain_semaphore_keeps_every_property() {
    check(model(Scripts::Current, Rules::Current), "plain semaphore").assert_properties();
}

#[test]
fn before_receipts_an_unanswered_acquire_left_its_permit_taken() {
    // The reply is lost, the acquire runs anyway: its permit stays taken after the close.
    let left = counterexample(Scripts::Before, Rules::Before, CLOSED);
    assert_eq!(
        left,
        [
            Action::AcquireUnanswered(0),
            Action::LateCopyRuns(0),
            Action::Close(0)
        ]
    );
}

#[test]
fn a_settlement_that_leaves_no_marker_is_caught() {
    use super::store::Defect;
    // Settled before the copy ran, the copy then takes a permit nobody will give back.
    let left = counterexample(
        Scripts::Broken(Defect::SettleLeavesNoMarker),
        Rules::Current,
        CLOSED,
    );
    assert_eq!(
        left,
        [
            Action::AcquireUnanswered(0),
            Action::Close(0),
            Action::LateCopyRuns(0)
        ]
    );
}
