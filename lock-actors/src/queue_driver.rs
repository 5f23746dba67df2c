//! The one effect driver of the wait queue: how an actor that queues waiters (the lock
//! actor, the semaphore actor) carries out what its [`WaitQueue`] asks for — tries,
//! subscriptions, the head's sleep, each waiter's deadline and the watch on its asker — so
//! both actors behave alike by construction. The queue decides; the actor says only how to
//! try, how to subscribe, how a waiter times out and when the head may go.

use crate::error::LockError;
use crate::keys::LockName;
use crate::wait_queue::{Asker, Effect, WaitQueue, Waiter};
use actix::prelude::*;
use std::future::Future;
use std::time::Instant;

/// What the driver needs of a waiter's data: its timers and its answer.
pub(crate) trait Queued: Asker {
    /// Its deadline timer and the watch on its asker leaving, once it has to wait.
    fn timers(&mut self) -> &mut Option<[SpawnHandle; 2]>;

    /// Resolves when its asker goes away (the acquire future was dropped).
    fn asker_left(&self) -> impl Future<Output = ()> + 'static;

    /// Answers it with `error`, out of the waiters gauge first.
    fn fail(self, error: LockError);
}

/// An actor whose waiters wait in a [`WaitQueue`].
pub(crate) trait QueueActor: Actor<Context = Context<Self>> {
    type Data: Queued;

    /// The lock or semaphore it serves, for logs.
    fn name(&self) -> &LockName;

    fn queue(&mut self) -> &mut WaitQueue<Self::Data>;

    /// The head's sleep timer, while it sleeps.
    fn sleep_timer(&mut self) -> &mut Option<SpawnHandle>;

    /// Sends waiter `id`'s try to Redis.
    fn attempt(&mut self, id: u64, ctx: &mut Context<Self>);

    /// Asks for wake-ups on the channel; answers the queue when the request ends.
    fn subscribe(&mut self, ctx: &mut Context<Self>);

    /// Ends a waiter whose deadline passed.
    fn time_out(&mut self, waiter: Waiter<Self::Data>, ctx: &mut Context<Self>);

    /// Carries out `effects` (with [`apply`]), then lets the head go if it may.
    fn drive(&mut self, effects: Vec<Effect<Self::Data>>, ctx: &mut Context<Self>);
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
                if let Some(old) = act.sleep_timer().take() {
                    ctx.cancel_future(old);
                }
                let timer = ctx.run_later(pause, move |act, ctx| {
                    *act.sleep_timer() = None;
                    act.queue().slept(token);
                    act.drive(Vec::new(), ctx);
                });
                *act.sleep_timer() = Some(timer);
            }
            Effect::CancelSleep => {
                if let Some(sleep) = act.sleep_timer().take() {
                    ctx.cancel_future(sleep);
                }
            }
            Effect::ArmDeadline { id, at } => arm_deadline(act, id, at, ctx),
            Effect::TimedOut(waiter) => act.time_out(waiter, ctx),
            Effect::Fail(mut waiter, error) => {
                disarm(waiter.data.timers().take(), ctx);
                tracing::debug!(name = %act.name(), %error, "acquire failed");
                waiter.data.fail(error);
            }
            Effect::Withdrawn(mut waiter) => {
                disarm(waiter.data.timers().take(), ctx);
                tracing::debug!(name = %act.name(), "waiter withdrew");
            }
        }
    }
}

/// Arms waiter `id`'s deadline timer for `at` and the watch on its asker leaving (a
/// dropped future), replacing any it had: a waiter whose asker left gives its place up at
/// once, not when its deadline or the head's sleep ends.
pub(crate) fn arm_deadline<A: QueueActor>(act: &mut A, id: u64, at: Instant, ctx: &mut Context<A>) {
    let Some(waiter) = act.queue().get(id) else {
        return;
    };
    let left = at.saturating_duration_since(Instant::now());
    let asker_left = waiter.data.asker_left();
    let deadline = ctx.run_later(left, move |act, ctx| {
        let effects = act.queue().expire(id);
        act.drive(effects, ctx);
    });
    let gone = ctx.spawn(asker_left.into_actor(act).map(move |(), act, ctx| {
        let effects = act.queue().gone(id);
        act.drive(effects, ctx);
    }));
    if let Some(waiter) = act.queue().get_mut(id) {
        disarm(waiter.data.timers().replace([deadline, gone]), ctx);
    }
}

/// Cancels a waiter's deadline timer and the watch on its asker.
pub(crate) fn disarm<A: Actor<Context = Context<A>>>(
    timers: Option<[SpawnHandle; 2]>,
    ctx: &mut Context<A>,
) {
    for timer in timers.into_iter().flatten() {
        ctx.cancel_future(timer);
    }
}
