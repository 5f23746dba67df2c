//! What the wait-queue models (`wake_up`, `spin`) share: one process's waiters in the
//! library's own wait queue against a hold of another process. The queue's effects are
//! carried out as state (the head's try in Redis, its sleep timer, the waiters' deadlines),
//! and the steps that fire them, the other process's unlock and the clock are steps here;
//! each model adds its own (subscriptions and messages, leaving waiters).

use super::clock::at;
use super::store::{Scripts, Store};
use crate::wait_queue::{Asker, Effect, Gate, WaitQueue};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::time::Duration;

/// The library's queue, compared and hashed by what it shows of itself (it keeps errors
/// that are not hashable; its debug form names every field).
#[derive(Debug, Clone)]
pub(crate) struct Queue<A>(pub(crate) WaitQueue<A>);

impl<A: Debug> PartialEq for Queue<A> {
    fn eq(&self, other: &Self) -> bool {
        format!("{:?}", self.0) == format!("{:?}", other.0)
    }
}

impl<A: Debug> Eq for Queue<A> {}

impl<A: Debug> Hash for Queue<A> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        format!("{:?}", self.0).hash(state);
    }
}

/// A step of the shared part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Step {
    /// The head's try runs in Redis.
    TryRuns,
    /// Its answer comes back.
    TryAnswered,
    /// The head's sleep timer fires.
    Slept,
    /// Waiter `0`'s deadline timer fires.
    Expire(u64),
    /// The other process unlocks.
    PeerUnlock,
    /// The clock advances one step (the other process may die meanwhile: its key runs out).
    Tick,
}

/// The queue, what it asked for, the lock in Redis and the clock. (Compared and hashed by
/// hand: the queue's payload need only show itself.)
#[derive(Debug, Clone)]
pub(crate) struct Waits<A> {
    pub(super) now: i64,
    pub(super) store: Store,
    pub(super) queue: Queue<A>,
    /// The head's try in Redis: its waiter, and its answer once it ran (`None` taken,
    /// `Some(pttl)` busy).
    pub(super) trying: Option<(u64, Option<Option<i64>>)>,
    /// The head's sleep timer: its token and when it fires.
    pub(super) timer: Option<(u64, i64)>,
    /// Deadline timers, by waiter.
    pub(super) deadlines: BTreeMap<u64, i64>,
    /// The other process holds the lock (it starts holding it).
    pub(super) peer: bool,
}

/// What a state of [`Waits`] is compared and hashed by: every field.
type WaitsKey<'a, A> = (
    i64,
    &'a Store,
    &'a Queue<A>,
    Option<(u64, Option<Option<i64>>)>,
    Option<(u64, i64)>,
    &'a BTreeMap<u64, i64>,
    bool,
);

impl<A> Waits<A> {
    fn key(&self) -> WaitsKey<'_, A> {
        let (queue, deadlines) = (&self.queue, &self.deadlines);
        (
            self.now,
            &self.store,
            queue,
            self.trying,
            self.timer,
            deadlines,
            self.peer,
        )
    }
}

impl<A: Debug> PartialEq for Waits<A> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl<A: Debug> Eq for Waits<A> {}

impl<A: Debug> Hash for Waits<A> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

/// The owner that stands for caller `caller` in the model's Redis.
pub(super) fn owner(caller: usize) -> u8 {
    caller as u8 + 1
}

/// The other process, as each model sets it.
#[derive(Clone, Copy)]
pub(super) struct Peer {
    pub(super) owner: u8,
    pub(super) lease: u64,
}

impl<A: Asker + Debug + Clone> Waits<A> {
    /// At time 0, the other process holding the lock.
    pub(super) fn new(queue: WaitQueue<A>, peer: Peer) -> Self {
        let mut store = Store::default();
        store.acquire(Scripts::Current, 0, peer.owner, peer.lease);
        Waits {
            now: 0,
            store,
            queue: Queue(queue),
            trying: None,
            timer: None,
            deadlines: BTreeMap::new(),
            peer: true,
        }
    }

    /// Carries out `effect` if it is the try, a timer or a deadline (as
    /// `wait_queue::driver::apply` does); hands back the others (a waiter that ends, a
    /// subscription), its deadline timer dropped.
    pub(super) fn carry_out(&mut self, effect: Effect<A>) -> Option<Effect<A>> {
        match effect {
            Effect::Try { id } => self.trying = Some((id, None)),
            Effect::Sleep { token, pause } => {
                self.timer = Some((token, self.now + pause.as_millis() as i64));
            }
            Effect::CancelSleep => self.timer = None,
            Effect::ArmDeadline { id, at: deadline } => {
                let ms = deadline.duration_since(at(0)).as_millis() as i64;
                self.deadlines.insert(id, ms);
            }
            Effect::TimedOut(ref waiter)
            | Effect::Fail(ref waiter, _)
            | Effect::Withdrawn(ref waiter) => {
                self.deadlines.remove(&waiter.id);
                return Some(effect);
            }
            Effect::Subscribe => return Some(effect),
        }
        None
    }

    /// Lets the head go if it may, with the lock actor's gate: a head whose lock another
    /// local owner (`holder`, a caller) holds sleeps, at most that hold's `lease`, instead
    /// of asking Redis. `caller` says whose a waiter is.
    pub(super) fn pump(
        &mut self,
        holder: Option<usize>,
        caller: fn(&A) -> usize,
        lease: u64,
    ) -> Vec<Effect<A>> {
        self.queue.0.pump(at(self.now), |head| match holder {
            Some(holder) if holder != caller(&head.data) => Gate::Hold {
                pause: Duration::from_millis(lease),
                error: None,
            },
            _ => Gate::Go,
        })
    }

    /// The shared steps that may happen now (the clock up to `budget`).
    pub(super) fn steps(&self, peer: Peer, budget: i64, steps: &mut Vec<Step>) {
        match self.trying {
            Some((_, None)) => steps.push(Step::TryRuns),
            Some((_, Some(_))) => steps.push(Step::TryAnswered),
            None => {}
        }
        if self.timer.is_some_and(|(_, fires)| fires <= self.now) {
            steps.push(Step::Slept);
        }
        for (&id, &fires) in &self.deadlines {
            if fires <= self.now {
                steps.push(Step::Expire(id));
            }
        }
        if self.peer && self.store.fields.contains_key(&peer.owner) {
            steps.push(Step::PeerUnlock);
        }
        if self.now < budget {
            steps.push(Step::Tick);
        }
    }

    /// The head's try runs in Redis for `owner`, with `lease`.
    pub(super) fn try_runs(&mut self, owner: u8, lease: u64) -> Option<()> {
        let (id, _) = self.trying?;
        let answer = self.store.acquire(Scripts::Current, self.now, owner, lease);
        self.trying = Some((id, Some(answer)));
        Some(())
    }

    /// The head's try's answer comes back: its waiter and the answer.
    pub(super) fn answered(&mut self) -> Option<(u64, Option<i64>)> {
        match self.trying.take()? {
            (id, Some(answer)) => Some((id, answer)),
            (_, None) => None,
        }
    }

    /// The head's sleep timer fires.
    pub(super) fn slept(&mut self) -> Option<()> {
        let (token, _) = self.timer.take()?;
        self.queue.0.slept(token);
        Some(())
    }

    /// Waiter `id`'s deadline timer fires.
    pub(super) fn expire(&mut self, id: u64) -> Vec<Effect<A>> {
        self.deadlines.remove(&id);
        self.queue.0.expire(id)
    }

    /// The other process unlocks: whether that freed the lock.
    pub(super) fn peer_unlocks(&mut self, peer: Peer) -> bool {
        self.peer = false;
        self.store.unlock(self.now, peer.owner, peer.lease) == Some(1)
    }

    /// The clock advances `step`; keys run out.
    pub(super) fn tick(&mut self, step: i64, peer: Peer) {
        self.now += step;
        self.store.expire(self.now);
        if !self.store.fields.contains_key(&peer.owner) {
            self.peer = false; // died, or unlocked: its key is gone either way
        }
    }
}
