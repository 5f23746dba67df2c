//! Force-unlocks: the actor deletes the lock whoever holds it (or, for an operator, only
//! if it is still held by the holders the operator saw), tells its own holders, and tells
//! the other actors of this client on the same key. A fair lock's holds live in per-owner
//! actors and a read-write lock's in the actor of each side, none of them the actor the
//! force-unlock went through.

use super::LockActor;
use crate::error::LockError;
use crate::lock::{ForceRelease, LockOwner};
use crate::reply::{Deferred, ReplySlot};
use actix::prelude::*;

/// Delete the lock if exactly `holders` hold it (their fields, as an inspector shows
/// them). Replies `None` when the holders differ (nothing was done), else whether a lock
/// was deleted.
#[cfg(feature = "inspect")]
#[derive(Debug, Clone)]
pub(crate) struct ForceReleaseIf {
    pub(crate) holders: Vec<String>,
}

#[cfg(feature = "inspect")]
impl Message for ForceReleaseIf {
    type Result = Result<Option<bool>, LockError>;
}

/// The lock's key was force-unlocked: every hold Redis no longer counts is lost.
struct ForcedOut;

impl Message for ForcedOut {
    type Result = ();
}

/// The answers of the other actors on a force-unlocked key, once each has told its holders.
type Told = Vec<Request<LockActor, ForcedOut>>;

impl Handler<ForceRelease> for LockActor {
    type Result = Deferred<Result<bool, LockError>>;

    fn handle(&mut self, _: ForceRelease, ctx: &mut Context<Self>) -> Self::Result {
        let slot = ReplySlot::new();
        let reply = slot.clone();
        self.force(None, ctx, move |outcome| {
            let _ = reply.send(outcome.map(|deleted| deleted == 1));
        });
        Deferred(slot)
    }
}

#[cfg(feature = "inspect")]
impl Handler<ForceReleaseIf> for LockActor {
    type Result = Deferred<Result<Option<bool>, LockError>>;

    fn handle(&mut self, msg: ForceReleaseIf, ctx: &mut Context<Self>) -> Self::Result {
        let slot = ReplySlot::new();
        let reply = slot.clone();
        self.force(Some(msg.holders), ctx, move |outcome| {
            let _ = reply.send(outcome.map(|deleted| (deleted >= 0).then_some(deleted == 1)));
        });
        Deferred(slot)
    }
}

impl LockActor {
    /// Runs the force-unlock (conditional on `holders` when given) and hands its reply (1
    /// deleted, 0 nothing there, -1 other holders) to `report`, once every holder of this
    /// client that it deleted has been told, or is being told.
    fn force(
        &mut self,
        holders: Option<Vec<String>>,
        ctx: &mut Context<Self>,
        report: impl FnOnce(Result<i64, LockError>) + 'static,
    ) {
        // Every acquire on its way may run before the force and be deleted by it; and none
        // is sent until it is answered. Voided before the holds taken directly are counted:
        // a direct grant answered in between is either counted now or found stale.
        let steps = self
            .machine
            .force_begun(&mut &*self.direct, holders.is_none());
        self.carry_out(steps, "it was force-unlocked", ctx);
        let invocation =
            self.kind
                .force_unlock(&self.name, self.node.commands.pubsub, holders.as_deref());
        let request = self
            .node
            .commands
            .clone()
            .eval::<i64>(invocation, self.name.clone());
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            let deleted = result == Ok(1);
            if deleted {
                tracing::warn!(lock = %act.name, "force-unlocked");
            }
            let steps = act.machine.force_answered(&mut &*act.direct, deleted);
            act.carry_out(steps, "it was force-unlocked", ctx);
            let told = match deleted {
                true => act.tell_others_forced(),
                false => Vec::new(),
            };
            // The head held back while the force was on its way goes now.
            act.wake_head(ctx);
            act.refresh_keepalive(ctx);
            // The caller hears of it once every holder of the key in this client is told.
            let told = futures_util::future::join_all(told);
            ctx.spawn(told.into_actor(act).map(move |_, _, _| report(result)));
        }));
    }

    /// Tells every other actor of this client on the same key that it was force-unlocked;
    /// each answers once its holders are told.
    fn tell_others_forced(&self) -> Told {
        let me = (self.kind, &self.name, self.owner);
        let others = self.registry.live_where(|(kind, name, owner)| {
            name.as_str() == self.name.as_str() && (*kind, name, *owner) != me
        });
        others.iter().map(|other| other.send(ForcedOut)).collect()
    }
}

impl Handler<ForcedOut> for LockActor {
    type Result = ResponseActFuture<Self, ()>;

    /// Reads each holder's count from Redis and drops the holders that have fewer holds
    /// there than here: those the force-unlock deleted. A hold taken after the force-unlock
    /// (a waiter it woke, say) is counted in Redis and stays. When Redis cannot answer, the
    /// holds are given up: a holder that works on without its lock is the worse mistake.
    fn handle(&mut self, _: ForcedOut, ctx: &mut Context<Self>) -> Self::Result {
        // Acquires on their way (ours or direct) may have run before the force. Voided before
        // the holds taken directly are counted: a direct grant answered in between is either
        // counted now or found stale.
        let steps = self.machine.force_seen(&mut &*self.direct);
        self.carry_out(steps, "it was force-unlocked", ctx);
        let counted: Vec<(LockOwner, usize)> = self
            .machine
            .holders()
            .map(|(owner, holder)| (*owner, holder.holds.len()))
            .collect();
        if counted.is_empty() {
            self.refresh_keepalive(ctx);
            return Box::pin(fut::ready(()));
        }
        let mut pipe = redis::pipe();
        for (owner, _) in &counted {
            self.kind
                .read_holds(&mut pipe, &self.name, &self.field(*owner));
        }
        let request = self
            .node
            .commands
            .clone()
            .query::<Vec<Option<String>>>(pipe, self.name.clone());
        Box::pin(request.into_actor(self).map(move |result, act, ctx| {
            for (i, (owner, holds)) in counted.into_iter().enumerate() {
                let in_redis = result.as_ref().ok().map(|values| {
                    let reply = values.get(i).and_then(Option::as_deref);
                    act.kind.holds_in(reply, &act.field(owner)) as usize
                });
                if act.machine.forced_lost(&owner, holds, in_redis) {
                    act.lose(owner, "it was force-unlocked", ctx);
                }
            }
            act.refresh_keepalive(ctx);
        }))
    }
}
