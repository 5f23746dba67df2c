//! The permit-expirable semaphore (Redisson's `RPermitExpirableSemaphore`): permits with
//! ids and leases. Clients take one permit or two with a fixed lease or kept by the
//! watchdog (the node's renewal service renews them; a renewal may be delayed, answered
//! late, or lost), release their guards in any order (also a guard whose permits were
//! lost: its release reaches Redis whatever happened meanwhile), close, or die; an acquire
//! may lose its reply (the client settles it: the ids go back, and a marker under the
//! acquire's receipt key makes a copy of it that still runs in Redis after that take
//! nothing; or the copy never runs). The model's clock advances, leases run out, and
//! expired permits go back to the count when a script next reclaims them.
//!
//! What a client believes follows the library's rules: a guard holds its permits until
//! `permit_deadline` of its lease's end (the acquire's send time plus the lease, moved by
//! each confirmed renewal to the renewal's send time plus what `renewed_for` makes of its
//! answer); a renewal that finds a permit gone loses the grant and gives the rest back; a
//! grant no renewal confirmed by its deadline, or a fixed lease at its deadline, is lost
//! with nothing sent. A client that closes drops its guards first (their releases are
//! finished by the close); one that dies leaves its permits to their leases.
//!
//! Before acquires were settled ([`Scripts::Before`]), a lost reply's ids were only given
//! back, and a late copy then took permits that stayed out, for nobody, until their lease
//! ended, past its client's close: `expirable_checks` finds that trace. The other
//! expirable scripts are the same as before the lease-truth fixes, and the client
//! rules then differed only in the clock drift allowance (not subtracted from a watched
//! permit's lease) and in the guard hearing of a loss through the actor rather than on its
//! own clock, neither of which a model with one exact clock can tell apart; so there is no
//! old model here, and negative controls (broken scripts) show the properties can fail.
//! Nor can a renewal find a permit gone while its guard still holds it here (only a
//! release by id from elsewhere takes it away, which is not modelled): the answer 0 only
//! ever reaches guards already lost or released.

use super::super::clock::{at, micros};
use super::store::{Member, Scripts, Store};
use crate::lease::list::Watched;
use crate::semaphore::lease_entry::{permit_deadline, PermitHold};
use crate::semaphore::SemaphoreActor;
use stateright::{Model, Property};
use std::time::Duration;

/// The permits the semaphore is set to (`try_set_permits`, before anything else).
const PERMITS: u32 = 2;
/// The watchdog lease, in model milliseconds.
const WATCHDOG: u64 = 3_000;
/// What a client may ask for: permits and a fixed lease, or the watchdog's (`None`).
pub(super) const ACQUIRES: [(u16, Option<u64>); 4] =
    [(1, None), (1, Some(1_000)), (1, Some(4_500)), (2, None)];
/// What a client may ask for in CI's run.
pub(super) const CI_ACQUIRES: [(u16, Option<u64>); 2] = [(1, None), (1, Some(2_000))];
/// One tick of the model's clock.
const STEP: i64 = 1_000;
/// How long a renewal may be on its way before the renewal service gives it up (and
/// sends another): the response timeout is far shorter than the lease.
const RENEWAL_PATIENCE: i64 = 2 * STEP;
/// The most guards one client holds at once.
const MOST_GUARDS: usize = 2;
/// Permit ids: client `c`'s are `c * IDS + k`; those of an acquire whose reply was lost
/// (never handed to anyone) are from `c * IDS + UNANSWERED` on.
const IDS: Member = 16;
const UNANSWERED: Member = 8;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
enum Life {
    #[default]
    Open,
    Closed,
    Dead,
}

/// How a guard's permits are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Lease {
    /// Kept by the watchdog: surely valid until this (ms), the send time of the acquire or
    /// of the last confirmed renewal plus the lease.
    Watched { valid_until: i64 },
    /// A fixed lease, and when its acquire was sent.
    Fixed { lease: u64, sent: i64 },
    /// Lost: nothing keeps them any more; the guard is still to be released (or dropped).
    Lost,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Guard {
    lease: Lease,
    ids: Vec<Member>,
}

impl Guard {
    /// Until when its client believes it held (µs, relative to now); `None` once lost.
    fn deadline(&self) -> Option<i64> {
        let (valid_until, lease) = match self.lease {
            Lease::Watched { valid_until } => (valid_until, WATCHDOG),
            Lease::Fixed { lease, sent } => (sent + lease as i64, lease),
            Lease::Lost => return None,
        };
        let lease = Duration::from_millis(lease);
        Some(micros(permit_deadline(at(valid_until), lease)))
    }

    fn believed(&self) -> bool {
        self.deadline().is_some_and(|deadline| deadline > 0)
    }
}

/// A renewal on its way: when it was sent, which permits it renews.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Renewal {
    sent: i64,
    ids: Vec<Member>,
}

/// A copy of an acquire whose reply was lost, which may still run in Redis.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Late {
    ids: Vec<Member>,
    lease: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
struct Client {
    life: Life,
    guards: Vec<Guard>,
    renewing: Option<Renewal>,
    late: Option<Late>,
}

/// Marks of what the last step did, for the `sometimes` checks (kept for that step only,
/// so they split few states).
const RECLAIMED: u8 = 1;
const RENEWED: u8 = 2;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct State {
    store: Store,
    clients: Vec<Client>,
    seen: u8,
}

impl State {
    /// `STEP` passes: every instant moves back by it; a renewal out for too long is given
    /// up; a guard past its deadline is lost (the renewal service's timer, or the fixed
    /// lease's, fires), with nothing sent.
    fn tick(&mut self) {
        self.store.shift(STEP);
        for client in &mut self.clients {
            for guard in &mut client.guards {
                match &mut guard.lease {
                    Lease::Watched { valid_until } => *valid_until -= STEP,
                    Lease::Fixed { sent, .. } => *sent -= STEP,
                    Lease::Lost => {}
                }
                if guard.deadline().is_some_and(|deadline| deadline <= 0) {
                    guard.lease = Lease::Lost;
                }
            }
            client.renewing = client.renewing.take().and_then(|mut renewal| {
                renewal.sent -= STEP;
                (renewal.sent > -RENEWAL_PATIENCE).then_some(renewal)
            });
        }
    }

    /// `n` permit ids of client `c` that nothing refers to (ids are random in the library:
    /// a new one is never one still in use), from `first` on.
    fn fresh_ids(&self, c: usize, first: Member, n: u16) -> Vec<Member> {
        let client = &self.clients[c];
        let in_use = |id: &Member| {
            self.store.timeouts.contains_key(id)
                || client.guards.iter().any(|guard| guard.ids.contains(id))
                || client.renewing.as_ref().is_some_and(|r| r.ids.contains(id))
                || client
                    .late
                    .as_ref()
                    .is_some_and(|late| late.ids.contains(id))
        };
        let base = c as Member * IDS + first;
        let ids: Vec<Member> = (base..base + UNANSWERED)
            .filter(|id| !in_use(id))
            .take(n as usize)
            .collect();
        assert_eq!(ids.len(), n as usize, "ids of client {c} ran out");
        ids
    }

    /// Renames every permit id to its canonical name: permit ids are random in the
    /// library, so states that differ only in their names are the same state. Each client's
    /// ids (those handed out, and those of unanswered acquires, apart) are numbered in the
    /// order they first appear: in its guards (ordered by lease and by what Redis has of
    /// their permits), its renewal on the way, its unanswered acquire, then the zset.
    fn canonical(&mut self) {
        let timeouts = &self.store.timeouts;
        let mut renames = std::collections::BTreeMap::new();
        for (c, client) in self.clients.iter_mut().enumerate() {
            let renewing = client.renewing.as_ref();
            client.guards.sort_by_cached_key(|guard| {
                let seen: Vec<_> = guard
                    .ids
                    .iter()
                    .map(|id| {
                        (
                            timeouts.get(id),
                            renewing.is_some_and(|r| r.ids.contains(id)),
                        )
                    })
                    .collect();
                (guard.lease, seen)
            });
            let base = c as Member * IDS;
            let mut next = [base, base + UNANSWERED];
            let mut name = |id: Member| {
                let range = usize::from(id >= base + UNANSWERED);
                renames.entry(id).or_insert_with(|| {
                    next[range] += 1;
                    next[range] - 1
                });
            };
            let guards = client.guards.iter().flat_map(|guard| guard.ids.iter());
            let renewed = client.renewing.iter().flat_map(|r| r.ids.iter());
            let late = client.late.iter().flat_map(|late| late.ids.iter());
            guards.chain(renewed).chain(late).for_each(|id| name(*id));
            let mut left: Vec<(i64, Member)> = timeouts
                .iter()
                .filter(|(id, _)| (base..base + IDS).contains(*id))
                .map(|(id, expiry)| (*expiry, *id))
                .collect();
            left.sort();
            left.into_iter().for_each(|(_, id)| name(id));
        }
        let rename = |ids: &mut Vec<Member>| {
            for id in ids.iter_mut() {
                *id = renames[id];
            }
            ids.sort();
        };
        for client in &mut self.clients {
            client
                .guards
                .iter_mut()
                .for_each(|guard| rename(&mut guard.ids));
            client.guards.sort();
            client.renewing.iter_mut().for_each(|r| rename(&mut r.ids));
            client
                .late
                .iter_mut()
                .for_each(|late| rename(&mut late.ids));
        }
        self.store.timeouts = std::mem::take(&mut self.store.timeouts)
            .into_iter()
            .map(|(id, expiry)| (renames[&id], expiry))
            .collect();
    }

    /// Runs an acquire in Redis, noting whether it reclaimed expired permits.
    fn acquire(
        &mut self,
        scripts: Scripts,
        (lease, receipt): (u64, Member),
        ids: &[Member],
    ) -> bool {
        let before = self.store.timeouts.len();
        let taken = self
            .store
            .expirable_acquire(scripts, 0, (lease, receipt), ids)[0]
            == 1;
        let added = if taken { ids.len() } else { 0 };
        if self.store.timeouts.len() < before + added {
            self.seen |= RECLAIMED;
        }
        taken
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Client `0` takes `1` permits with a fixed lease `2` or the watchdog (`None`), and
    /// hears the reply.
    Acquire(usize, u16, Option<u64>),
    /// Client `0` sends such an acquire, hears no reply and settles it.
    AcquireUnanswered(usize, u16, Option<u64>),
    /// The copy of client `0`'s unanswered acquire runs in Redis (after the settlement).
    LateCopyRuns(usize),
    /// That copy never runs.
    LateCopyLost(usize),
    /// The renewal service sends a renewal of client `0`'s watched permits.
    SendRenewal(usize),
    /// It reaches Redis (any time after it was sent) and its answer comes back.
    RenewalArrives(usize),
    /// It reaches Redis, and its answer is lost (another is sent later).
    RenewalUnanswered(usize),
    /// It is lost on the way.
    RenewalLost(usize),
    /// Client `0` releases (or drops) its guard `1`.
    Release(usize, usize),
    /// Client `0` drops its guards and closes.
    Close(usize),
    /// Client `0`'s process dies.
    Die(usize),
    /// The clock advances one step.
    Tick,
}

pub(crate) struct ExpirableModel {
    pub(crate) scripts: Scripts,
    pub(crate) clients: usize,
    /// What the clients may ask for: permits and a fixed lease, or the watchdog's (`None`).
    pub(crate) acquires: &'static [(u16, Option<u64>)],
    /// Whether acquires may lose their replies.
    pub(crate) lost_replies: bool,
    /// Checks only the property of this name (a shortest counterexample for it).
    pub(crate) only: Option<&'static str>,
}

impl ExpirableModel {
    fn release(&self, state: &mut State, ids: &[Member]) {
        state.store.expirable_release(self.scripts, 0, ids);
    }

    /// The renewal's answers reach the client: each watched grant is valid for what
    /// `renewed_for` makes of its answer from the send; a grant with a permit found gone is
    /// lost, and its other permits are given back.
    fn renewal_answered(&self, state: &mut State, c: usize, renewal: &Renewal, answers: &[i64]) {
        let lease = Duration::from_millis(WATCHDOG);
        let mut gone = Vec::new();
        for (id, answer) in renewal.ids.iter().zip(answers) {
            let client = &mut state.clients[c];
            let Some(g) = client.guards.iter().position(|guard| {
                matches!(guard.lease, Lease::Watched { .. }) && guard.ids.contains(id)
            }) else {
                continue; // released or lost meanwhile: the answer is moot
            };
            match <PermitHold<SemaphoreActor> as Watched>::renewed_for(*answer, lease) {
                Some(valid_for) => {
                    let valid_until = renewal.sent + valid_for.as_millis() as i64;
                    client.guards[g].lease = Lease::Watched { valid_until };
                    state.seen |= RENEWED;
                }
                None => gone.push(g),
            }
        }
        gone.sort();
        gone.dedup();
        for g in gone {
            let guard = &mut state.clients[c].guards[g];
            guard.lease = Lease::Lost;
            let ids = guard.ids.clone();
            self.release(state, &ids);
        }
    }
}

impl Model for ExpirableModel {
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
            if client.late.is_some() {
                actions.push(Action::LateCopyRuns(c));
                actions.push(Action::LateCopyLost(c));
            }
            if client.renewing.is_some() {
                actions.push(Action::RenewalArrives(c));
                actions.push(Action::RenewalUnanswered(c));
                actions.push(Action::RenewalLost(c));
            }
            if client.life != Life::Open {
                continue;
            }
            if client.guards.len() < MOST_GUARDS {
                for &(permits, lease) in self.acquires {
                    actions.push(Action::Acquire(c, permits, lease));
                }
                if self.lost_replies && client.late.is_none() {
                    actions.push(Action::AcquireUnanswered(c, 1, None));
                }
            }
            let watched = |guard: &Guard| matches!(guard.lease, Lease::Watched { .. });
            if client.renewing.is_none() && client.guards.iter().any(watched) {
                actions.push(Action::SendRenewal(c));
            }
            for g in 0..client.guards.len() {
                actions.push(Action::Release(c, g));
            }
            actions.push(Action::Close(c));
            actions.push(Action::Die(c));
        }
        actions.push(Action::Tick);
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        state.seen = 0;
        match action {
            Action::Acquire(c, permits, fixed) => {
                let ids = state.fresh_ids(c, 0, permits);
                let lease = fixed.unwrap_or(WATCHDOG);
                if !state.acquire(self.scripts, (lease, answered(c)), &ids) {
                    // Too few (waiting is not modelled): only a reclaim may have changed.
                    return (state.store != last.store).then(|| {
                        state.canonical();
                        state
                    });
                }
                let lease = match fixed {
                    None => Lease::Watched {
                        valid_until: WATCHDOG as i64,
                    },
                    Some(lease) => Lease::Fixed { lease, sent: 0 },
                };
                state.clients[c].guards.push(Guard { lease, ids });
            }
            Action::AcquireUnanswered(c, permits, fixed) => {
                let ids = state.fresh_ids(c, UNANSWERED, permits);
                // The settlement goes first; a copy that ran before it is given back by it.
                state
                    .store
                    .expirable_settle(self.scripts, 0, unanswered(c), &ids);
                let lease = fixed.unwrap_or(WATCHDOG);
                state.clients[c].late = Some(Late { ids, lease });
            }
            Action::LateCopyRuns(c) => {
                let late = state.clients[c].late.take()?;
                state.acquire(self.scripts, (late.lease, unanswered(c)), &late.ids);
                // Its marker changes nothing any more (each request has its own).
                state.store.receipts.remove(&unanswered(c));
            }
            Action::LateCopyLost(c) => {
                state.clients[c].late = None;
                state.store.receipts.remove(&unanswered(c));
            }
            Action::SendRenewal(c) => {
                let client = &mut state.clients[c];
                let ids = client
                    .guards
                    .iter()
                    .filter(|guard| matches!(guard.lease, Lease::Watched { .. }))
                    .flat_map(|guard| guard.ids.iter().copied())
                    .collect();
                client.renewing = Some(Renewal { sent: 0, ids });
            }
            Action::RenewalArrives(c) => {
                let renewal = state.clients[c].renewing.take()?;
                let answers = state.store.renew(self.scripts, 0, WATCHDOG, &renewal.ids);
                if state.clients[c].life == Life::Open {
                    self.renewal_answered(&mut state, c, &renewal, &answers);
                }
            }
            Action::RenewalUnanswered(c) => {
                let renewal = state.clients[c].renewing.take()?;
                state.store.renew(self.scripts, 0, WATCHDOG, &renewal.ids);
            }
            Action::RenewalLost(c) => state.clients[c].renewing = None,
            Action::Release(c, g) => {
                // Renewal stops first, then the release goes to Redis.
                let guard = state.clients[c].guards.remove(g);
                self.release(&mut state, &guard.ids);
            }
            Action::Close(c) => {
                for guard in std::mem::take(&mut state.clients[c].guards) {
                    self.release(&mut state, &guard.ids);
                }
                state.clients[c].life = Life::Closed;
            }
            Action::Die(c) => {
                let client = &mut state.clients[c];
                client.guards.clear();
                client.life = Life::Dead;
            }
            Action::Tick => state.tick(),
        }
        state.canonical();
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(OUT, |_: &ExpirableModel, state: &State| {
                out(state) <= PERMITS as usize
            }),
            Property::always(KEPT, |_: &ExpirableModel, state: &State| {
                let timeouts = &state.store.timeouts;
                state.clients.iter().all(|client| {
                    client.guards.iter().all(|guard| match guard.deadline() {
                        Some(deadline) if deadline > 0 => guard.ids.iter().all(|id| {
                            timeouts
                                .get(id)
                                .is_some_and(|expiry| expiry * 1_000 >= deadline)
                        }),
                        _ => true,
                    })
                })
            }),
            Property::always(CLOSED, |_: &ExpirableModel, state: &State| {
                (0..state.clients.len())
                    .filter(|&c| state.clients[c].life == Life::Closed)
                    .all(|c| {
                        let own = c as Member * IDS..(c as Member + 1) * IDS;
                        !state.store.timeouts.keys().any(|id| own.contains(id))
                    })
            }),
            Property::sometimes("both permits out", |_: &ExpirableModel, state: &State| {
                out(state) == 2
            }),
            Property::sometimes(
                "a permit reclaimed after expiry",
                |_: &ExpirableModel, state: &State| state.seen & RECLAIMED != 0,
            ),
            Property::sometimes(
                "a renewal kept a permit",
                |_: &ExpirableModel, state: &State| state.seen & RENEWED != 0,
            ),
        ];
        if let Some(only) = self.only {
            properties.retain(|property| property.name == only);
        }
        properties
    }
}

/// Permits believed held, counted on the model's clock.
fn out(state: &State) -> usize {
    state
        .clients
        .iter()
        .flat_map(|client| &client.guards)
        .filter(|guard| guard.believed())
        .map(|guard| guard.ids.len())
        .sum()
}

/// The safety properties.
pub(super) const OUT: &str = "never more permits out than the semaphore has";
const KEPT: &str =
    "Redis keeps every expirable permit at least as long as its client believes it held";
pub(super) const CLOSED: &str =
    "a closed client leaves no permit behind, not even by a late copy of an acquire";
/// The receipt of client `c`'s acquires whose replies are heard (never marked).
fn answered(c: usize) -> Member {
    2 * c as Member
}

/// The receipt of client `c`'s unanswered acquire (one at a time).
fn unanswered(c: usize) -> Member {
    2 * c as Member + 1
}
