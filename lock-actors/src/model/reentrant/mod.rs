//! The reentrant lock under mixed leases (and the fenced and fast locks, which share its
//! rules): each client is one owner that takes the lock with the watchdog or with a fixed
//! lease, re-enters with either (not the fast lock, which refuses re-entry), lets its
//! watchdog renew (or pauses it: a renewal may come at any time, or never), and unlocks its
//! holds in any order, while the model's clock advances and Redis expires the key. Where
//! the model allows it, the key is lost once (a failover to a replica that missed it, or a
//! force-unlock): then no renewal may tell its client the hold is still there.
//!
//! What a client believes follows the library's rules ([`Rules::Current`]): a fixed-lease
//! hold is surely held until `surely_held_until(sent, lease)`; the owner's watchdog holds
//! until their last renewal's send time plus what `renewed_for` makes of its answer, less
//! the drift allowance; an unlock sets what `kept_lease` says the remaining holds need.
//! [`Rules::Before`] restates the rules as they were before the key's TTL became the truth
//! (one deadline per owner: the watchdog's while any hold is watched, else the last hold's
//! lease), to show the checker finds the defects those rules had.
//!
//! Where the model allows it ([`ReentrantModel::extends`]), a client also sets a fixed
//! hold's lease again, longer or shorter (`extend`: the lock actor's rules, imported).

use super::clock::{at, micros};
use super::store::{Scripts, SetLease, Store};
use crate::config::clock_drift;
use crate::lease::ends::{kept_lease, renewed_for};
use crate::lock::actor::extend::key_end;
use crate::lock::fast_path::surely_held_until;
use stateright::{Model, Property};
use std::time::{Duration, Instant};

/// The watchdog lease, in model milliseconds.
const WATCHDOG: u64 = 3_000;
/// The fixed leases a client may ask for: shorter and longer than the watchdog's.
const FIXED: [u64; 2] = [1_000, 4_500];
/// The longest lease of all.
const LONGEST: u64 = 4_500;
/// One tick of the model's clock.
const STEP: i64 = 1_000;
/// How long a renewal may be on its way before the watchdog gives it up (and sends
/// another): the library's response timeout is far shorter than the lease, so a renewal
/// arrives within a tick of its send, or is lost.
const RENEWAL_PATIENCE: i64 = 2 * STEP;

/// Which lock the clients take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Reentrant,
    /// The reentrant lock, each hold with a fencing token.
    Fenced,
    /// One hold, no re-entry: a string key whose value is its holder.
    Fast,
}

/// Which client rules the model's clients follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Rules {
    /// The library's, imported.
    Current,
    /// As they were before the lease-truth fixes (restated: that code is gone).
    Before,
}

/// One hold as its client knows it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Hold {
    /// A fixed lease and when it ends (its acquire's send time plus the lease, or what an
    /// extend made of it); `None`: kept by the watchdog.
    fixed: Option<(u64, i64)>,
    /// The client's extend on its way is this hold's.
    extending: bool,
}

/// A client's extend on its way (`LockGuard::extend`): the lease asked for, when it was
/// sent, and the `set_lease.lua` call's TTL and hold count as the lock actor made them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Extend {
    lease: u64,
    sent: i64,
    ttl: u64,
    counted: u32,
    /// Its answer once it ran in Redis (`None`: not yet).
    ran: Option<i64>,
}

/// One client: one owner, its holds, until when its watchdog surely holds (µs), and the
/// send time of its renewal in flight.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
struct Client {
    holds: Vec<Hold>,
    watched_until: Option<i64>,
    renewing: Option<i64>,
    /// A Redisson client whose watchdog renews (it locked without a lease).
    java_watchdog: bool,
    extend: Option<Extend>,
}

/// The model's state, with every instant relative to now.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct State {
    store: Store,
    clients: Vec<Client>,
    /// The key was lost once (only where the model allows it).
    key_lost: bool,
    /// A renewal told its client the hold was there while Redis did not count its owner.
    blind_renewal: bool,
    /// A fenced grant drew a token not above the one before it.
    token_regressed: bool,
    /// A client gave up its holds while one of its fixed leases had time left (less the
    /// drift allowance): Redis still kept the key for it.
    fixed_cut: bool,
}

impl State {
    /// `STEP` passes: every instant moves back by it, the key expires, a renewal out for
    /// too long is given up.
    fn tick(&mut self) {
        self.store.expires_at = self.store.expires_at.map(|at| at - STEP);
        self.store.expire(0);
        for client in &mut self.clients {
            for hold in &mut client.holds {
                // A hold sent a longest lease ago or more is past its lease whatever it is
                // (and forgotten once it counts): older send times all look the same.
                if let Some((lease, until)) = &mut hold.fixed {
                    *until = (*until - STEP).max(*lease as i64 - LONGEST as i64);
                }
            }
            // An extend out for too long is given up (its hold keeps the earlier end).
            client.extend = client.extend.take().and_then(|mut extend| {
                extend.sent -= STEP;
                (extend.sent > -RENEWAL_PATIENCE).then_some(extend)
            });
            if client.extend.is_none() {
                client
                    .holds
                    .iter_mut()
                    .for_each(|hold| hold.extending = false);
            }
            // Past its end the watchdog's deadline counts for nothing more (a fixed lease
            // may keep the owner on): every instant before now is the same one.
            client.watched_until = client
                .watched_until
                .map(|until| (until - STEP * 1_000).max(-1));
            client.renewing = client
                .renewing
                .map(|sent| sent - STEP)
                .filter(|&sent| sent > -RENEWAL_PATIENCE);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Client `0` acquires (or re-enters) with a fixed lease or the watchdog (`None`).
    Acquire(usize, Option<u64>),
    /// Client `0`'s watchdog sends a renewal of its holds.
    SendRenewal(usize),
    /// Client `0`'s renewal reaches Redis (any time after it was sent) and its answer
    /// comes back.
    RenewalArrives(usize),
    /// Client `0`'s renewal is lost on the way (the watchdog sends another later).
    RenewalLost(usize),
    /// Client `0` unlocks its hold `1`.
    Unlock(usize, usize),
    /// The clock advances one step.
    Tick,
    /// The key is lost (a failover, a force-unlock).
    KeyLost,
    /// Client `0` sets the lease of its fixed hold `1` to `2` from now (`LockGuard::extend`).
    Extend(usize, usize, u64),
    /// Client `0`'s extend runs in Redis and its answer comes back.
    ExtendArrives(usize),
    /// Client `0`'s extend runs in Redis; its answer is lost.
    ExtendUnanswered(usize),
    /// Client `0`'s extend is lost on the way.
    ExtendLost(usize),
}

/// The model: which scripts and rules, how many clients, how deep their re-entries go.
/// Time needs no bound: every instant in the state is relative to now and bounded by the
/// longest lease, so the state space is finite and explored whole.
pub(crate) struct ReentrantModel {
    pub(crate) kind: Kind,
    /// The last client is a Redisson client (Java) on the same lock: it runs Redisson's
    /// scripts (its lock and renewal set the key's TTL to their lease; its unlock leaves
    /// the watchdog lease), renews while it holds without a lease, and believes it holds
    /// while Redis counts it (Redisson has no notion of a lost lock).
    pub(crate) redisson: bool,
    /// The key may be lost once.
    pub(crate) key_loss: bool,
    pub(crate) scripts: Scripts,
    pub(crate) rules: Rules,
    pub(crate) clients: usize,
    pub(crate) max_holds: usize,
    /// The library's clients extend their fixed holds (current rules only).
    pub(crate) extends: bool,
    /// The `set_lease.lua` their extends run.
    pub(crate) set_lease: SetLease,
    /// An extend runs in Redis before any later call of its client (one connection, in
    /// order); else it may overtake them, as renewals may.
    pub(crate) in_order: bool,
    /// A client may unlock a hold while its extend is on its way.
    pub(crate) unlock_while_extending: bool,
    /// An unlock leaves the key as long as an extend on its way may have set it (the lock
    /// actor's rule, `key_end`); off, the rule before, which counted only the hold's
    /// earlier end and so could cut the key below the end the extend's answer then gives.
    pub(crate) keep_claims: bool,
    /// Checks only the property of this name (a shortest counterexample for it).
    pub(crate) only: Option<&'static str>,
    /// Beside watched holds, the owner's fixed leases keep it until the latest of them
    /// ends (the lock actor's rule); off, the rule before, which gave the owner up at the
    /// watchdog's deadline alone.
    pub(crate) fixed_beside_watchdog: bool,
}

/// Until when a client's fixed leases surely keep the key (µs, relative to now; `i64::MIN`
/// without one): the latest end, less the drift allowance of the longest lease.
fn latest_fixed_end(client: &Client) -> i64 {
    let fixed = client.holds.iter().filter_map(|hold| hold.fixed);
    let lease = fixed.clone().map(|(lease, _)| lease).max();
    let end = fixed.map(|(_, until)| until).max();
    match (lease, end) {
        (Some(lease), Some(end)) => micros(at(end) - clock_drift(Duration::from_millis(lease))),
        _ => i64::MIN,
    }
}

impl ReentrantModel {
    fn is_java(&self, c: usize) -> bool {
        self.redisson && c + 1 == self.clients
    }

    /// Until when a client believes its holds are held (µs, relative to now): one deadline
    /// per owner, as the lock actor keeps it (`arm_lease_keeping`): the latest end of its
    /// fixed leases, less the drift allowance of the longest, or the watchdog's while any
    /// hold is watched if that is later ([`Rules::Before`]: the watchdog's alone while any
    /// hold is watched, else the latest hold's lease alone).
    fn believed_until(&self, client: &Client, _hold: &Hold) -> i64 {
        match (self.rules, client.watched_until) {
            (Rules::Before, Some(until)) => until,
            (Rules::Current, Some(until)) if self.fixed_beside_watchdog => {
                until.max(self.fixed_until(client))
            }
            (Rules::Current, Some(until)) => until,
            (_, None) => self.fixed_until(client),
        }
    }

    /// Until when a client's fixed leases keep its holds (µs, relative to now; `i64::MIN`
    /// without one), by the rules' reckoning.
    fn fixed_until(&self, client: &Client) -> i64 {
        match self.rules {
            Rules::Current => latest_fixed_end(client),
            Rules::Before => match client.holds.last().and_then(|last| last.fixed) {
                Some((lease, until)) => {
                    micros(at(until) - clock_drift(Duration::from_millis(lease)))
                }
                None => i64::MIN,
            },
        }
    }

    /// Until when client `c` believes each of its holds valid now.
    fn believed<'a>(&'a self, state: &'a State, c: usize) -> impl Iterator<Item = i64> + 'a {
        let client = &state.clients[c];
        let java = self.is_java(c);
        let counted = state.store.fields.contains_key(&(c as u8 + 1));
        client
            .holds
            .iter()
            .map(move |hold| match java {
                true if counted => i64::MAX,
                true => i64::MIN,
                false => self.believed_until(client, hold),
            })
            .filter(|&until| until > 0)
    }

    /// The lease an unlock leaves the owner's remaining holds.
    fn kept(&self, client: &Client) -> u64 {
        let kept = match self.rules {
            Rules::Current => kept_lease(
                client.holds.iter().map(|hold| {
                    let until = hold.fixed.map(|(_, until)| at(until));
                    let claim = client.extend.filter(|_| hold.extending && self.keep_claims);
                    let claims: Vec<Instant> = claim
                        .map(|extend| at(extend.sent + extend.lease as i64))
                        .into_iter()
                        .collect();
                    key_end(until, &claims)
                }),
                at(0),
                Duration::from_millis(WATCHDOG),
            ),
            Rules::Before => None,
        };
        kept.map_or(WATCHDOG, |kept| kept.as_millis() as u64)
    }

    /// The kind's unlock.
    fn unlock(&self, store: &mut Store, owner: u8, lease: u64) -> Option<i64> {
        match self.kind {
            Kind::Fast => store.fast_unlock(0, owner),
            Kind::Reentrant | Kind::Fenced => store.unlock(0, owner, lease),
        }
    }

    /// A client one of whose holds is no longer believed held reports the owner lost, as
    /// the library does: every hold of the owner is dropped, and as many owner-checked
    /// unlocks as it had holds clear what Redis may still count for it (with a 1 ms lease
    /// while some remain), so no stray count outlives the loss.
    fn lose_expired(&self, state: &mut State) {
        for c in 0..state.clients.len() {
            if self.is_java(c) {
                // Redisson finds out at its unlock: its holds are gone with the key.
                if !state.store.fields.contains_key(&(c as u8 + 1)) {
                    state.clients[c] = Client::default();
                }
                continue;
            }
            let client = &state.clients[c];
            if client
                .holds
                .iter()
                .all(|hold| self.believed_until(client, hold) > 0)
            {
                continue;
            }
            // A fixed lease still running (its latest end, less the drift allowance of the
            // longest) means Redis keeps the key for it: giving up now cuts it short.
            state.fixed_cut |= latest_fixed_end(client) > 0;
            let holds = client.holds.len();
            self.run_extend_first(state, c);
            state.clients[c] = Client::default();
            for _ in 0..holds {
                if self.unlock(&mut state.store, c as u8 + 1, 1) != Some(0) {
                    break;
                }
            }
        }
    }
}

impl Model for ReentrantModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            store: Store::default(),
            clients: vec![Client::default(); self.clients],
            key_lost: false,
            blind_renewal: false,
            token_regressed: false,
            fixed_cut: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (c, client) in state.clients.iter().enumerate() {
            let max_holds = match self.kind {
                Kind::Fast => 1,
                Kind::Reentrant | Kind::Fenced => self.max_holds,
            };
            if self.extends && !self.is_java(c) {
                self.extend_actions(c, client, actions);
            }
            if client.holds.len() < max_holds {
                actions.push(Action::Acquire(c, None));
                for lease in FIXED {
                    actions.push(Action::Acquire(c, Some(lease)));
                }
            }
            match client.renewing {
                None if client.watched_until.is_some() || client.java_watchdog => {
                    actions.push(Action::SendRenewal(c))
                }
                None => {}
                Some(_) => {
                    actions.push(Action::RenewalArrives(c));
                    actions.push(Action::RenewalLost(c));
                }
            }
            if self.unlock_while_extending || client.extend.is_none() {
                for h in 0..client.holds.len() {
                    actions.push(Action::Unlock(c, h));
                }
            }
        }
        actions.push(Action::Tick);
        if self.key_loss && !state.key_lost {
            actions.push(Action::KeyLost);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut state = last.clone();
        let owner = |c: usize| c as u8 + 1;
        if let Action::Acquire(c, _) | Action::Unlock(c, _) = action {
            self.run_extend_first(&mut state, c);
        }
        match action {
            Action::Acquire(c, fixed) => {
                let lease = fixed.unwrap_or(WATCHDOG);
                let taken = match self.kind {
                    _ if self.is_java(c) => state
                        .store
                        .acquire(Scripts::Before, 0, owner(c), lease)
                        .is_none(),
                    Kind::Reentrant => state
                        .store
                        .acquire(self.scripts, 0, owner(c), lease)
                        .is_none(),
                    Kind::Fast => state.store.fast_acquire(0, owner(c), lease).is_none(),
                    Kind::Fenced => {
                        let before = state.store.token;
                        let token = state.store.fenced_acquire(0, owner(c), lease);
                        state.token_regressed |= token.is_ok_and(|token| token <= before);
                        // Only the step matters: the counter restarts at 0 in the state, so
                        // the state space stays finite.
                        state.store.token = 0;
                        token.is_ok()
                    }
                };
                if !taken {
                    return None; // busy: nothing changes (waiting is another model's)
                }
                let client = &mut state.clients[c];
                client.holds.push(Hold {
                    fixed: fixed.map(|lease| (lease, lease as i64)),
                    extending: false,
                });
                if self.is_java(c) {
                    client.java_watchdog |= fixed.is_none();
                    return Some(state);
                }
                if fixed.is_none() && client.watched_until.is_none() {
                    let lease = Duration::from_millis(WATCHDOG);
                    client.watched_until = Some(micros(surely_held_until(at(0), lease)));
                }
            }
            Action::SendRenewal(c) => state.clients[c].renewing = Some(0),
            Action::RenewalLost(c) => state.clients[c].renewing = None,
            Action::RenewalArrives(c) => {
                let sent = state.clients[c].renewing.take()?;
                if self.is_java(c) {
                    // Redisson's renewal: the key's TTL set to its lease, if it holds.
                    state.store.renew(Scripts::Before, 0, owner(c), WATCHDOG);
                    self.lose_expired(&mut state);
                    return Some(state);
                }
                state.store.expire(0);
                let counted = state.store.fields.contains_key(&owner(c));
                let answer = state.store.renew(self.scripts, 0, owner(c), WATCHDOG);
                let lease = Duration::from_millis(WATCHDOG);
                let client = &mut state.clients[c];
                if client.watched_until.is_none() {
                    return Some(state); // nothing watched any more: the answer is moot
                }
                let renewed = match self.rules {
                    Rules::Current => renewed_for(answer, lease),
                    Rules::Before => (answer == 1).then_some(lease),
                };
                state.blind_renewal |= renewed.is_some() && !counted;
                match renewed {
                    Some(valid_for) => {
                        // Timed from the send: the answer may have taken any time to come.
                        let until = micros(at(sent) + valid_for - clock_drift(lease));
                        client.watched_until = Some(until);
                    }
                    // Lost: its guards hear of it; the client forgets the watched holds.
                    None => {
                        client.holds.retain(|hold| hold.fixed.is_some());
                        client.watched_until = None;
                    }
                }
            }
            Action::Unlock(c, h) if self.is_java(c) => {
                let client = &mut state.clients[c];
                client.holds.remove(h);
                client.java_watchdog &= client.holds.iter().any(|hold| hold.fixed.is_none());
                // Redisson's unlock leaves the others its watchdog lease.
                if state.store.unlock(0, owner(c), WATCHDOG).is_none() {
                    state.clients[c] = Client::default();
                }
            }
            Action::Unlock(c, h) => {
                let client = &mut state.clients[c];
                client.holds.remove(h);
                if !client.holds.iter().any(|hold| hold.fixed.is_none()) {
                    client.watched_until = None;
                }
                let lease = self.kept(client);
                if self.unlock(&mut state.store, owner(c), lease).is_none() {
                    // Not the owner any more: reported lost.
                    state.clients[c] = Client::default();
                }
            }
            Action::Tick => state.tick(),
            Action::KeyLost => {
                state.key_lost = true;
                state.store.fields.clear();
                state.store.expires_at = None;
            }
            Action::Extend(c, h, lease) => self.send_extend(&mut state.clients[c], h, lease),
            Action::ExtendArrives(c) => {
                let extend = state.clients[c].extend.take()?;
                let answer = self.run_extend(&mut state.store, c, extend);
                self.extend_answered(&mut state.clients[c], extend, Some(answer));
            }
            Action::ExtendUnanswered(c) => {
                let extend = state.clients[c].extend.take()?;
                self.run_extend(&mut state.store, c, extend);
                self.extend_answered(&mut state.clients[c], extend, None);
            }
            Action::ExtendLost(c) => {
                let extend = state.clients[c].extend.take()?;
                self.extend_answered(&mut state.clients[c], extend, None);
            }
        }
        self.lose_expired(&mut state);
        if self.rules == Rules::Current {
            // Which hold came first does not matter to these rules: one order per set.
            for client in &mut state.clients {
                client.holds.sort();
            }
        }
        Some(state)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(
                "Redis keeps every hold at least as long as its client believes it held",
                |model: &ReentrantModel, state: &State| {
                    let store = &state.store;
                    (0..state.clients.len()).all(|c| {
                        model.is_java(c)
                            || model.believed(state, c).all(|until| {
                                store.fields.contains_key(&(c as u8 + 1))
                                    && store.expires_at.is_none_or(|at| at * 1_000 >= until)
                            })
                    })
                },
            ),
            Property::always(
                "at most one owner holds on the model's clock",
                |model: &ReentrantModel, state: &State| {
                    (0..state.clients.len())
                        .filter(|&c| model.believed(state, c).next().is_some())
                        .count()
                        <= 1
                },
            ),
            Property::always(
                "a renewal tells its client the hold is there only while Redis counts it",
                |_: &ReentrantModel, state: &State| !state.blind_renewal,
            ),
            Property::always(
                "every fencing token is above the one before it",
                |_: &ReentrantModel, state: &State| !state.token_regressed,
            ),
            Property::always(
                "no client gives up a hold while one of its fixed leases runs",
                |_: &ReentrantModel, state: &State| !state.fixed_cut,
            ),
            Property::sometimes(
                "an owner holds with mixed leases",
                |model: &ReentrantModel, state: &State| {
                    (0..state.clients.len()).any(|c| {
                        let holds = &state.clients[c].holds;
                        holds.iter().any(|h| h.fixed.is_some())
                            && holds.iter().any(|h| h.fixed.is_none())
                            && model.believed(state, c).count() == holds.len()
                    })
                },
            ),
            Property::sometimes(
                "the second owner holds",
                |model: &ReentrantModel, state: &State| model.believed(state, 1).next().is_some(),
            ),
        ];
        if self.redisson {
            properties.push(Property::sometimes(
                "the Redisson client holds",
                |model: &ReentrantModel, state: &State| {
                    model.believed(state, model.clients - 1).next().is_some()
                },
            ));
        }
        if self.kind == Kind::Fast {
            properties.retain(|property| property.name != "an owner holds with mixed leases");
        }
        if let Some(only) = self.only {
            properties.retain(|property| property.name == only);
        }
        properties
    }
}

mod checks;
mod extend;
