//! Fair lock clients that wait in its queue. Each client is one owner (one fair lock actor)
//! that makes one acquire or more, each with the watchdog or a fixed lease: its try runs
//! `fair/acquire.lua` (and may sit in the network across a tick); a busy answer puts it in
//! the Redis queue, and it subscribes to its own channel before its second try, as the
//! wait queue does; it then sleeps until a wake-up on its channel or its timed fallback
//! (`busy_retry_in`, the actor's rule: the ms the script answered, at most a third of the
//! wait allowance), and tries again. It may give up (its wait ran out, or its caller
//! left): `fair/withdraw.lua` then takes it out of the queue, after a try still in Redis
//! has answered (that answer decides: a grant is handed over, and a guard nobody takes is
//! dropped, which unlocks). It holds with the watchdog (renewals may be lost) or a fixed
//! lease, may re-enter, and unlocks (`fair/unlock.lua`, which wakes the next waiter). It
//! may pause (it does nothing for a while, and answers to it wait) and die anywhere,
//! leaving its queue place to age out by its deadline. Wake-ups may be delayed across
//! ticks, or lost.
//!
//! The clock advances in ticks under a budget, so every path ends. Acquires start, and
//! clients give up, pause and die, only while more than `reserve` ticks are left (a client
//! idle after that has closed); a holder unlocks within `HOLD_TICKS`; a due timer fires,
//! a subscription completes and a request in flight reaches Redis before the next tick
//! (unless its client is paused); once every client has finished, time stands still. The
//! reserve is longer than a waiter needs to be served when no wake-up is lost (a dead
//! holder's lease and a dead waiter's place ahead of it included), so a waiter still
//! waiting where a path ends was never woken: that is the no-lost-wake-up property.

use super::super::clock::{at, micros};
use super::super::store::Scripts;
use super::store::{Breakage, FairStore, Outcome};
use crate::config::clock_drift;
use crate::lease::ends::{kept_lease, renewed_for};
use crate::lock::actor::busy_retry_in;
use crate::lock::fast_path::surely_held_until;
use std::time::Duration;

/// One tick of the model's clock.
pub(super) const STEP: i64 = 1_000;
/// The watchdog lease.
pub(super) const WATCHDOG: u64 = 3_000;
/// The wait allowance per waiter (Redisson's `fairLockWaitTimeout`).
pub(super) const ALLOWANCE: i64 = 3_000;
/// The longest fixed lease a client asks for.
const LONGEST: u64 = 4_500;
/// How many ticks a holder keeps the lock at most before it unlocks.
pub(super) const HOLD_TICKS: u8 = 2;
/// How long a client pauses.
pub(super) const PAUSE_TICKS: u8 = 2;
/// A renewal on its way longer than this is given up by the watchdog.
const RENEWAL_PATIENCE: i64 = 2 * STEP;

/// One hold as its client knows it: a fixed lease and when its try was sent, or `None`
/// (kept by the watchdog).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Hold {
    pub(super) fixed: Option<(u64, i64)>,
}

/// Where a client is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Phase {
    /// Between acquires (or before the first).
    Idle,
    /// Its try is in Redis (see `Client::trying`).
    Trying,
    /// Its try found the lock busy: it subscribes to its channel before trying again.
    Subscribing,
    /// Asleep until a wake-up, or until its timer (`None`: it has no timer).
    Sleeping(Option<i64>),
    /// It holds the lock.
    Holding,
    /// It gave up waiting: its withdraw is in Redis.
    Leaving,
    /// Its acquires are all made.
    Done,
    /// It died: it does nothing more, but what it sent still reaches Redis.
    Dead,
}

/// One client: one owner and its fair lock actor.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Client {
    pub(super) phase: Phase,
    /// Acquires still to start.
    pub(super) episodes: u8,
    /// The lease the acquire under way asks for (`None`: the watchdog).
    pub(super) lease: Option<u64>,
    /// Its acquire found the lock busy at least once.
    pub(super) waited: bool,
    /// It gave up while its try was in Redis: that try's answer decides.
    pub(super) gave_up: bool,
    /// The send time of its try in Redis, and whether news came meanwhile.
    pub(super) trying: Option<(i64, bool)>,
    /// The send time of its withdraw in Redis.
    pub(super) withdrawing: Option<i64>,
    /// A busy answer may have put it in the Redis queue.
    pub(super) joined: bool,
    /// It listens on its channel.
    pub(super) subscribed: bool,
    /// A wake-up on its channel is on its way.
    pub(super) wake: bool,
    pub(super) holds: Vec<Hold>,
    /// Until when (µs) its watchdog surely holds, while a hold is watched.
    pub(super) watched_until: Option<i64>,
    /// The send time of its renewal in flight.
    pub(super) renewing: Option<i64>,
    /// It sent a renewal in this tick.
    pub(super) renewed: bool,
    /// Ticks it may still hold before it unlocks.
    pub(super) hold_left: u8,
    /// Its hold was handed over: granted after waiting behind another.
    pub(super) handed_over: bool,
    /// Ticks it is still paused for (it does nothing meanwhile, and answers to it wait);
    /// `None` until it pauses, which it does once at most.
    pub(super) paused: Option<u8>,
}

impl Client {
    fn new(episodes: u8) -> Self {
        Client {
            phase: Phase::Idle,
            episodes,
            lease: None,
            waited: false,
            gave_up: false,
            trying: None,
            withdrawing: None,
            joined: false,
            subscribed: false,
            wake: false,
            holds: Vec::new(),
            watched_until: None,
            renewing: None,
            renewed: false,
            hold_left: 0,
            handed_over: false,
            paused: None,
        }
    }

    /// Waiting for the lock (not given up).
    pub(super) fn waiting(&self) -> bool {
        matches!(
            self.phase,
            Phase::Trying | Phase::Subscribing | Phase::Sleeping(_)
        ) && !self.gave_up
    }

    /// Paused now: it does nothing, and nothing of its own is due.
    pub(super) fn asleep(&self) -> bool {
        self.paused.is_some_and(|left| left > 0)
    }

    /// An acquire ends (granted and released, lost, or given up): the next, or done.
    fn end_episode(&mut self) {
        *self = Client {
            phase: if self.episodes > 0 {
                Phase::Idle
            } else {
                Phase::Done
            },
            // What it sent still reaches Redis; it still listens.
            trying: self.trying,
            renewing: self.renewing,
            subscribed: self.subscribed,
            wake: self.wake,
            paused: self.paused,
            ..Client::new(self.episodes)
        };
    }
}

/// The model's state, every instant relative to now.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct State {
    pub(super) store: FairStore,
    pub(super) clients: Vec<Client>,
    /// Ticks the clock may still advance.
    pub(super) ticks_left: u8,
    /// A grant went ahead of a live waiter still waiting in the queue.
    pub(super) out_of_order: bool,
}

/// The owner (queue entry, hash field, channel) of client `c`.
pub(super) fn owner(c: usize) -> u8 {
    c as u8 + 1
}

/// What the model's clients do, as the library does it, and which scripts Redis runs.
pub(crate) struct FairModel {
    pub(crate) scripts: Scripts,
    pub(crate) breakage: Breakage,
    /// Acquires each client makes.
    pub(crate) episodes: Vec<u8>,
    /// Holds a client may have at once (more than one: re-entries).
    pub(crate) max_holds: usize,
    /// The leases a client may ask for (`None`: the watchdog).
    pub(crate) leases: Vec<Option<u64>>,
    /// Waiters sleep at most what `busy_retry_in` says; without, only a wake-up wakes them.
    pub(crate) fallback: bool,
    /// Wake-ups and renewals may be lost, and clients die.
    pub(crate) lossy: bool,
    /// Clients pause.
    pub(crate) pauses: bool,
    /// Ticks the clock advances at most.
    pub(crate) budget: u8,
    /// No acquire starts with this many ticks left or fewer.
    pub(crate) reserve: u8,
    /// Checks only the property of this name (a shortest counterexample for it).
    pub(crate) only: Option<&'static str>,
}

impl FairModel {
    pub(super) fn initial(&self) -> State {
        State {
            store: FairStore::default(),
            clients: self.episodes.iter().map(|&e| Client::new(e)).collect(),
            ticks_left: self.budget,
            out_of_order: false,
        }
    }

    /// Until when (µs) a client believes its holds held: one deadline per owner, as the
    /// lock actor keeps it: the watchdog's while a hold is watched, else the latest end of
    /// its fixed leases less the drift allowance of the longest.
    fn believed_until(client: &Client) -> i64 {
        if let Some(until) = client.watched_until {
            return until;
        }
        let fixed = client.holds.iter().filter_map(|hold| hold.fixed);
        let lease = fixed.clone().map(|(lease, _)| lease).max();
        let end = fixed.map(|(lease, sent)| sent + lease as i64).max();
        match (lease, end) {
            (Some(lease), Some(end)) => micros(at(end) - clock_drift(Duration::from_millis(lease))),
            _ => i64::MIN,
        }
    }

    /// Until when client `c` believes it holds, if it believes so now.
    pub(super) fn believed(state: &State, c: usize) -> Option<i64> {
        let client = &state.clients[c];
        if client.holds.is_empty() {
            return None;
        }
        Some(Self::believed_until(client)).filter(|&until| until > 0)
    }

    /// Whether client `c` has finished: all its acquires made (or it closed: no acquire
    /// starts within the reserve), or dead.
    pub(super) fn finished(&self, state: &State, c: usize) -> bool {
        let client = &state.clients[c];
        match client.phase {
            Phase::Done | Phase::Dead => true,
            Phase::Idle => state.ticks_left <= self.reserve,
            _ => false,
        }
    }

    /// A script published on waiter `woke`'s channel: heard if it listens.
    fn publish(state: &mut State, outcome: &Outcome) {
        if let Some(woke) = outcome.woke {
            if let Some(client) = state.clients.get_mut(usize::from(woke) - 1) {
                if client.subscribed && client.phase != Phase::Dead {
                    client.wake = true;
                }
            }
        }
    }

    /// `fair/unlock.lua` for client `c` with `lease` for the holds left; publishes.
    fn unlock(&self, state: &mut State, c: usize, lease: u64) -> Option<i64> {
        let outcome = state.store.unlock(self.breakage, 0, owner(c), lease);
        Self::publish(state, &outcome);
        outcome.reply
    }

    /// The lease an unlock leaves the owner's remaining holds.
    fn kept(client: &Client) -> u64 {
        kept_lease(
            client
                .holds
                .iter()
                .map(|hold| hold.fixed.map(|(lease, sent)| at(sent + lease as i64))),
            at(0),
            Duration::from_millis(WATCHDOG),
        )
        .map_or(WATCHDOG, |kept| kept.as_millis() as u64)
    }

    /// A client whose hold is no longer believed reports the owner lost, as the library
    /// does: its holds are dropped, and owner-checked unlocks clear what Redis may still
    /// count for it (which wakes the next waiter if that frees the lock).
    pub(super) fn lose_expired(&self, state: &mut State) {
        for c in 0..state.clients.len() {
            let client = &state.clients[c];
            if client.phase != Phase::Holding || Self::believed(state, c).is_some() {
                continue;
            }
            let holds = client.holds.len();
            state.clients[c].end_episode();
            for _ in 0..holds {
                if self.unlock(state, c, 1) != Some(0) {
                    break;
                }
            }
        }
    }

    /// Client `c`'s try reaches Redis and its answer comes back.
    pub(super) fn run_try(&self, state: &mut State, c: usize) -> Option<()> {
        let (sent, woken) = state.clients[c].trying.take()?;
        let lease = state.clients[c].lease.unwrap_or(WATCHDOG);
        let before = state.store.queue.clone();
        let outcome =
            state
                .store
                .acquire(self.scripts, self.breakage, 0, owner(c), lease, ALLOWANCE);
        Self::publish(state, &outcome);
        let client = &mut state.clients[c];
        match outcome.reply {
            None => {
                self.check_order(state, c, &before);
                let client = &mut state.clients[c];
                client.joined = false; // the script took it out of the queue
                if client.phase == Phase::Dead {
                    return Some(()); // its hold runs out in Redis
                }
                // A waiter that gave up while this try was in Redis takes it too (its
                // caller, if it left, drops the guard: an unlock at any time after).
                client.gave_up = false;
                client.phase = Phase::Holding;
                client.hold_left = HOLD_TICKS;
                client.handed_over = client.waited;
                client.holds.push(Hold {
                    fixed: client.lease.map(|lease| (lease, sent)),
                });
                if client.lease.is_none() {
                    let lease = Duration::from_millis(WATCHDOG);
                    client.watched_until = Some(micros(surely_held_until(at(sent), lease)));
                }
            }
            Some(ms) => {
                client.joined = true;
                if client.phase == Phase::Dead {
                    return Some(());
                }
                if client.gave_up {
                    client.phase = Phase::Leaving;
                    client.withdrawing = Some(0);
                    return Some(());
                }
                client.waited = true;
                client.phase = if woken {
                    client.trying = Some((0, false));
                    Phase::Trying
                } else if !client.subscribed {
                    Phase::Subscribing
                } else if self.fallback {
                    let allowance = Duration::from_millis(ALLOWANCE as u64);
                    let sleep = busy_retry_in(ms, Some(allowance));
                    Phase::Sleeping(Some(sleep.as_millis() as i64))
                } else {
                    Phase::Sleeping(None)
                };
            }
        }
        Some(())
    }

    /// A fresh grant to client `c` (the queue as it was before the script in `before`):
    /// was a live waiter still waiting in the queue ahead of it?
    fn check_order(&self, state: &mut State, c: usize, before: &[u8]) {
        if state.store.hash.fields.get(&owner(c)) != Some(&1) {
            return;
        }
        let place = |queue: &[u8], c: usize| queue.iter().position(|&o| o == owner(c));
        let mine = place(before, c);
        let skipped = (0..state.clients.len()).any(|d| {
            d != c
                && state.clients[d].waiting()
                && place(&state.store.queue, d).is_some()
                && match (place(before, d), mine) {
                    (Some(theirs), Some(mine)) => theirs < mine,
                    (_, None) => true,
                    (None, Some(_)) => false,
                }
        });
        state.out_of_order |= skipped;
    }

    /// Whether the clock may advance: budget left, someone not finished, and nothing due
    /// (a timer, a request in flight for a tick already, a subscription, an unlock).
    pub(super) fn may_tick(&self, state: &State) -> bool {
        if state.ticks_left == 0 || (0..state.clients.len()).all(|c| self.finished(state, c)) {
            return false;
        }
        state.clients.iter().all(|client| {
            if client.asleep() {
                return true;
            }
            let late = |sent: Option<i64>| sent.is_some_and(|sent| sent <= -STEP);
            let due = match client.phase {
                Phase::Subscribing => true,
                Phase::Sleeping(Some(until)) => until <= 0,
                Phase::Holding => client.hold_left == 0,
                _ => false,
            };
            // Without losses, a wake-up is not held up across a tick either.
            let held_up = client.wake && !self.lossy;
            !due && !held_up
                && !late(client.trying.map(|(sent, _)| sent))
                && !late(client.withdrawing)
        })
    }

    /// `STEP` passes: every instant moves back by it; keys expire; a renewal out for too
    /// long is given up.
    pub(super) fn tick(state: &mut State) {
        state.ticks_left -= 1;
        let store = &mut state.store;
        store.hash.expires_at = store.hash.expires_at.map(|at| at - STEP);
        store.hash.expire(0);
        for deadline in store.deadlines.values_mut() {
            *deadline -= STEP;
        }
        for client in &mut state.clients {
            for hold in &mut client.holds {
                if let Some((_, sent)) = &mut hold.fixed {
                    *sent = (*sent - STEP).max(-(LONGEST as i64));
                }
            }
            client.watched_until = client.watched_until.map(|until| until - STEP * 1_000);
            client.renewing = client
                .renewing
                .map(|sent| sent - STEP)
                .filter(|&sent| sent > -RENEWAL_PATIENCE);
            client.renewed = false;
            client.trying = client.trying.map(|(sent, woken)| (sent - STEP, woken));
            client.withdrawing = client.withdrawing.map(|sent| sent - STEP);
            if let Phase::Sleeping(Some(until)) = &mut client.phase {
                *until -= STEP;
            }
            if client.phase == Phase::Holding {
                client.hold_left = client.hold_left.saturating_sub(1);
            }
            if let Some(left) = &mut client.paused {
                *left = left.saturating_sub(1);
            }
        }
    }

    /// Client `c` gives up waiting (its wait ran out, or its caller left).
    pub(super) fn give_up(state: &mut State, c: usize) {
        let client = &mut state.clients[c];
        if client.phase == Phase::Trying {
            client.gave_up = true; // its try's answer decides
        } else if client.joined {
            client.phase = Phase::Leaving;
            client.withdrawing = Some(0);
        } else {
            client.end_episode();
        }
    }

    /// Client `c` dies: it forgets everything, but what it sent still reaches Redis.
    pub(super) fn die(state: &mut State, c: usize) {
        let client = &state.clients[c];
        state.clients[c] = Client {
            phase: Phase::Dead,
            trying: client.trying,
            withdrawing: client.withdrawing,
            renewing: client.renewing,
            joined: client.joined,
            ..Client::new(0)
        };
    }

    /// Client `c`'s withdraw reaches Redis and its answer comes back.
    pub(super) fn run_withdraw(&self, state: &mut State, c: usize) -> Option<()> {
        state.clients[c].withdrawing.take()?;
        let outcome = state.store.withdraw(self.breakage, 0, owner(c), ALLOWANCE);
        Self::publish(state, &outcome);
        let client = &mut state.clients[c];
        client.joined = false;
        if client.phase == Phase::Leaving {
            client.end_episode();
        }
        Some(())
    }

    /// Client `c`'s renewal reaches Redis and its answer comes back.
    pub(super) fn renewal_arrives(&self, state: &mut State, c: usize) -> Option<()> {
        let sent = state.clients[c].renewing.take()?;
        let answer = state.store.renew(self.scripts, 0, owner(c), WATCHDOG);
        let client = &mut state.clients[c];
        if client.watched_until.is_none() || client.phase != Phase::Holding {
            return Some(()); // nothing watched any more: the answer is moot
        }
        let lease = Duration::from_millis(WATCHDOG);
        match renewed_for(answer, lease) {
            Some(valid_for) => {
                let until = micros(at(sent) + valid_for - clock_drift(lease));
                client.watched_until = Some(until);
            }
            None => {
                client.holds.retain(|hold| hold.fixed.is_some());
                client.watched_until = None;
                if client.holds.is_empty() {
                    client.end_episode();
                }
            }
        }
        Some(())
    }

    /// Client `c` re-enters with `lease` (`None`: the watchdog): its try goes ahead of its
    /// other waiters and finds its own hold.
    pub(super) fn reenter(&self, state: &mut State, c: usize, lease: Option<u64>) -> Option<()> {
        let asked = lease.unwrap_or(WATCHDOG);
        let outcome =
            state
                .store
                .acquire(self.scripts, self.breakage, 0, owner(c), asked, ALLOWANCE);
        if outcome.reply.is_some() {
            return None; // not its lock any more: a property has failed already
        }
        let client = &mut state.clients[c];
        client.holds.push(Hold {
            fixed: lease.map(|lease| (lease, 0)),
        });
        if lease.is_none() && client.watched_until.is_none() {
            let lease = Duration::from_millis(WATCHDOG);
            client.watched_until = Some(micros(surely_held_until(at(0), lease)));
        }
        Some(())
    }

    /// Client `c` unlocks its hold `h`.
    pub(super) fn unlock_hold(&self, state: &mut State, c: usize, h: usize) {
        let client = &mut state.clients[c];
        client.holds.remove(h);
        if !client.holds.iter().any(|hold| hold.fixed.is_none()) {
            client.watched_until = None;
        }
        let lease = Self::kept(client);
        let last = client.holds.is_empty();
        let lost = self.unlock(state, c, lease).is_none();
        if last || lost {
            // Released, or not the owner any more (reported lost).
            state.clients[c].end_episode();
        }
    }
}
