//! Releasing a hold of an owner known only by its id (`Lock::unlock_as`): through the
//! actor's own bookkeeping when this process holds for that owner, else straight in Redis,
//! owner-checked, leaving the key's TTL to the holds that remain.

use super::LockActor;
use crate::error::LockError;
use crate::lock::kind::Unlocking;
use crate::lock::{ReleaseAs, Released};
use crate::reply::{Deferred, ReplySlot};
use actix::prelude::*;

impl Handler<ReleaseAs> for LockActor {
    type Result = Deferred<Result<Released, LockError>>;

    fn handle(&mut self, msg: ReleaseAs, ctx: &mut Context<Self>) -> Self::Result {
        self.take_charge(ctx);
        if self.machine.holder(&msg.owner).is_some() {
            // Ours: released as `Release` would, latest hold first, its guard told.
            let errand = self.node.arbiter.errands().start();
            return self.release(msg.owner, None, errand, ctx);
        }
        if self.node.is_stopped() {
            return Deferred::ready(Err(LockError::Shutdown));
        }
        let invocation = self.kind.release(
            Unlocking::Foreign,
            &self.name,
            &self.field(msg.owner),
            self.watchdog_lease().as_millis() as u64,
            self.node.commands.pubsub,
        );
        let request = self
            .node
            .commands
            .clone()
            .eval::<Option<(i64, u32)>>(invocation, self.name.clone());
        let errand = self.node.arbiter.errands().start();
        let slot = ReplySlot::new();
        let reply = slot.clone();
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            drop(errand);
            let outcome = match result {
                Ok(None) => Err(LockError::NotOwner {
                    name: act.name.to_string(),
                }),
                Ok(Some((0, holds))) if holds > 0 => Ok(Released::StillHeld { holds }),
                Ok(Some(_)) => {
                    tracing::debug!(lock = %act.name, owner = msg.owner.id(),
                        "released for an owner held elsewhere");
                    // Freed (for this owner at least): a local head may go now.
                    act.wake_head(ctx);
                    Ok(Released::Unlocked)
                }
                Err(error) => Err(error),
            };
            let _ = reply.send(outcome);
            act.refresh_keepalive(ctx);
        }));
        Deferred(slot)
    }
}
