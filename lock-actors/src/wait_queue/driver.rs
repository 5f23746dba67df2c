//! The wait queue's driver, shared by every actor that queues waiters (the lock, semaphore
//! and latch actors): what an actor keeps for its waiters ([`QueueCore`]: the queue, the
//! head's sleep, the deadlines and the watch on the askers) and how the [`WaitQueue`]'s
//! effects are carried out, so every queue actor behaves alike by construction. The queue
//! decides; an actor says only how to try, how to subscribe, how a waiter times out and
//! whether its head may go ([`QueueActor`]).
//!
//! However many wait, an actor runs one deadline timer (at the earliest deadline) and one
//! watch over every waiter's asker: actix polls every future an actor has spawned each
//! time the actor wakes, so a timer and a watch per waiter would make every hand-over cost
//! as much as the queue is long.

use super::{Asker, Effect, Gate, WaitQueue, Waiter};
use crate::error::LockError;
use crate::keys::LockName;
use actix::prelude::*;
use futures_util::future::{AbortHandle, Abortable, LocalBoxFuture};
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::task::{Poll, Waker};
use std::time::Instant;

/// What the driver needs of a waiter's data: a way to see its asker leave, and its answer.
pub(crate) trait Queued: Asker {
    /// Resolves when its asker goes away (the acquire future was dropped).
    fn asker_left(&self) -> impl Future<Output = ()> + 'static;

    /// Answers it with `error`, out of the waiters gauge first.
    fn fail(self, error: LockError);
}

/// What a queue actor keeps for its waiters: the queue itself and the timers that serve it.
pub(crate) struct QueueCore<T> {
    /// The waiters, their head's state and deadlines.
    pub(crate) queue: WaitQueue<T>,
    /// The head's sleep timer, while it sleeps.
    sleep: Option<SpawnHandle>,
    /// The waiters' deadlines and the watch on their askers; made when the first waiter
    /// arms a deadline (most locks are held and released without one).
    timers: Option<Box<Timers>>,
}

impl<T> QueueCore<T> {
    pub(crate) fn new(queue: WaitQueue<T>) -> Self {
        QueueCore {
            queue,
            sleep: None,
            timers: None,
        }
    }

    fn timers(&mut self) -> &mut Timers {
        self.timers.get_or_insert_with(Box::default)
    }
}

/// An actor whose waiters wait in a [`QueueCore`]: the lock, semaphore and latch actors.
pub(crate) trait QueueActor: Actor<Context = Context<Self>> + Sized {
    type Data: Queued;

    /// The lock, semaphore or latch it serves, for logs.
    fn name(&self) -> &LockName;

    /// Its waiters.
    fn core(&mut self) -> &mut QueueCore<Self::Data>;

    /// Sends waiter `id`'s try to Redis.
    fn attempt(&mut self, id: u64, ctx: &mut Context<Self>);

    /// Asks for wake-ups on the channel; answers the queue when the request ends.
    fn subscribe(&mut self, ctx: &mut Context<Self>);

    /// Ends a waiter whose deadline passed.
    fn time_out(&mut self, waiter: Waiter<Self::Data>, ctx: &mut Context<Self>);

    /// Lets the head go if it may (called while no try is out): the queue's
    /// [`WaitQueue::pump`] with this actor's gate. By default the head always may.
    fn pump(&mut self, _ctx: &mut Context<Self>) -> Vec<Effect<Self::Data>> {
        self.core().queue.pump(Instant::now(), |_| Gate::Go)
    }

    /// After every change to the queue (the actor's keep-alive, for one).
    fn driven(&mut self, ctx: &mut Context<Self>);

    /// The one rule every change to the queue follows: carries out `effects` in order,
    /// then lets the head go if it may and carries out those, then [`QueueActor::driven`].
    fn drive(&mut self, effects: Vec<Effect<Self::Data>>, ctx: &mut Context<Self>) {
        apply(self, effects, ctx);
        if self.core().queue.idle() {
            let effects = self.pump(ctx);
            apply(self, effects, ctx);
        }
        self.driven(ctx);
    }
}

/// Carries out what the queue asked for, in order.
pub(crate) fn apply<A: QueueActor>(
    act: &mut A,
    effects: Vec<Effect<A::Data>>,
    ctx: &mut Context<A>,
) {
    for effect in effects {
        match effect {
            Effect::Try { id } => act.attempt(id, ctx),
            Effect::Subscribe => act.subscribe(ctx),
            Effect::Sleep { token, pause } => {
                if let Some(old) = act.core().sleep.take() {
                    ctx.cancel_future(old);
                }
                let timer = ctx.run_later(pause, move |act, ctx| {
                    act.core().sleep = None;
                    act.core().queue.slept(token);
                    act.drive(Vec::new(), ctx);
                });
                act.core().sleep = Some(timer);
            }
            Effect::CancelSleep => {
                if let Some(sleep) = act.core().sleep.take() {
                    ctx.cancel_future(sleep);
                }
            }
            Effect::ArmDeadline { id, at } => arm_deadline(act, id, at, ctx),
            Effect::TimedOut(waiter) => act.time_out(waiter, ctx),
            Effect::Fail(waiter, error) => {
                forget(act, waiter.id, ctx);
                tracing::debug!(name = %act.name(), %error, "acquire failed");
                waiter.data.fail(error);
            }
            Effect::Withdrawn(waiter) => {
                forget(act, waiter.id, ctx);
                tracing::debug!(name = %act.name(), "waiter withdrew");
            }
        }
    }
}

/// The deadlines of one actor's waiters and the watch on their askers.
#[derive(Default)]
pub(crate) struct Timers {
    /// Armed deadlines, earliest first.
    deadlines: BTreeSet<(Instant, u64)>,
    /// The armed deadline of each waiter.
    armed: HashMap<u64, Instant>,
    /// The one timer, with the deadline it fires at.
    timer: Option<(Instant, SpawnHandle)>,
    /// Each watched waiter's asker: resolves with the waiter's id when the asker leaves, or
    /// when the waiter left the queue (aborted). Only the futures woken since are polled.
    /// Made when the first asker is watched and dropped when none is left: an empty set
    /// still allocates, and most locks are held and released without a waiter.
    askers: Option<FuturesUnordered<LocalBoxFuture<'static, u64>>>,
    /// Ends the watch on a waiter's asker once the waiter has left the queue.
    watched: HashMap<u64, AbortHandle>,
    /// The watch over `askers` runs.
    watching: bool,
    /// The watch's waker: an asker added while it runs needs it to poll again.
    waker: Option<Waker>,
}

/// Arms waiter `id`'s deadline for `at` (replacing the one it had) and watches its asker
/// leaving (a dropped future): a waiter whose asker left gives its place up at once, not
/// when its deadline or the head's sleep ends.
pub(crate) fn arm_deadline<A: QueueActor>(act: &mut A, id: u64, at: Instant, ctx: &mut Context<A>) {
    let watched = act.core().timers().watched.contains_key(&id);
    let Some(waiter) = act.core().queue.get(id) else {
        return;
    };
    let asker_left = (!watched).then(|| waiter.data.asker_left());
    let timers = act.core().timers();
    if let Some(old) = timers.armed.insert(id, at) {
        timers.deadlines.remove(&(old, id));
    }
    timers.deadlines.insert((at, id));
    if let Some(asker_left) = asker_left {
        let (abort, registration) = AbortHandle::new_pair();
        timers.watched.insert(id, abort);
        let askers = timers.askers.get_or_insert_with(FuturesUnordered::new);
        askers.push(Box::pin(async move {
            let _ = Abortable::new(asker_left, registration).await;
            id
        }));
        if timers.watching {
            if let Some(waker) = &timers.waker {
                waker.wake_by_ref();
            }
        } else {
            timers.watching = true;
            ctx.spawn(AskerWatch);
        }
    }
    rearm(act, ctx);
}

/// Waiter `id` left the queue: its deadline and the watch on its asker end (nothing of it
/// may keep the actor alive).
pub(crate) fn forget<A: QueueActor>(act: &mut A, id: u64, ctx: &mut Context<A>) {
    let timers = act.core().timers();
    if let Some(at) = timers.armed.remove(&id) {
        timers.deadlines.remove(&(at, id));
    }
    if let Some(abort) = timers.watched.remove(&id) {
        abort.abort();
    }
    if timers.deadlines.is_empty() {
        if let Some((_, handle)) = timers.timer.take() {
            ctx.cancel_future(handle);
        }
    }
}

/// Sets the one timer for the earliest deadline, unless it fires by then already.
fn rearm<A: QueueActor>(act: &mut A, ctx: &mut Context<A>) {
    let timers = act.core().timers();
    let Some(&(next, _)) = timers.deadlines.first() else {
        return;
    };
    if let Some((at, handle)) = timers.timer {
        if at <= next {
            return;
        }
        ctx.cancel_future(handle);
    }
    let after = next.saturating_duration_since(Instant::now());
    let handle = ctx.run_later(after, |act, ctx| {
        act.core().timers().timer = None;
        expire_due(act, ctx);
    });
    act.core().timers().timer = Some((next, handle));
}

/// Ends every waiter whose deadline has come, then sets the timer for the next one.
fn expire_due<A: QueueActor>(act: &mut A, ctx: &mut Context<A>) {
    let now = Instant::now();
    loop {
        let timers = act.core().timers();
        let Some(&(at, id)) = timers.deadlines.first() else {
            break;
        };
        if at > now {
            break;
        }
        timers.deadlines.remove(&(at, id));
        timers.armed.remove(&id);
        let effects = act.core().queue.expire(id);
        act.drive(effects, ctx);
    }
    rearm(act, ctx);
}

/// The one watch over an actor's askers: hands the queue each waiter whose asker left;
/// ends when no asker is watched (the next one watched starts it again).
struct AskerWatch;

impl<A: QueueActor> ActorFuture<A> for AskerWatch {
    type Output = ();

    fn poll(
        self: Pin<&mut Self>,
        act: &mut A,
        ctx: &mut Context<A>,
        task: &mut std::task::Context<'_>,
    ) -> Poll<()> {
        loop {
            let timers = act.core().timers();
            let next = match timers.askers.as_mut() {
                Some(askers) => askers.poll_next_unpin(task),
                None => Poll::Ready(None),
            };
            match next {
                Poll::Ready(Some(id)) => {
                    timers.watched.remove(&id);
                    let effects = act.core().queue.gone(id);
                    act.drive(effects, ctx);
                }
                Poll::Ready(None) => {
                    timers.askers = None;
                    timers.watching = false;
                    timers.waker = None;
                    return Poll::Ready(());
                }
                Poll::Pending => {
                    let waker = task.waker();
                    if !timers.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                        timers.waker = Some(waker.clone());
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}
