//! How the semaphore actor settles a plain acquire whose reply was lost. A plain permit
//! carries no holder, so the acquire leaves a receipt under its own request id: the reply
//! that comes makes the receipt useless (it is deleted), and a reply that does not come is
//! settled against it (`settle.lua`): permits taken go back, and an acquire that has not
//! run is marked so that a late copy of it takes nothing.

use super::SemaphoreActor;
use crate::error::LockError;
use crate::semaphore::{receipt_key, SETTLE};
use actix::prelude::*;
use std::time::{Duration, Instant};

/// How long a receipt, and a settlement's marker, live in Redis: a lost reply is settled
/// exactly while Redis answers again within it; past it, permits the acquire took stay
/// taken (logged).
pub(super) const SETTLE_WINDOW: Duration = Duration::from_secs(300);

impl SemaphoreActor {
    /// The receipt key of a new plain acquire.
    pub(super) fn new_receipt(&self) -> String {
        let request = uuid::Uuid::new_v4().simple().to_string();
        receipt_key(&self.keys.count, &request)
    }

    /// The acquire of `receipt` got its reply: nothing is left to settle, so the receipt
    /// goes (at its window's end at the latest, if this delete is lost).
    pub(super) fn drop_receipt(&mut self, receipt: String, ctx: &mut Context<Self>) {
        let mut pipe = redis::pipe();
        pipe.cmd("DEL").arg(receipt).ignore();
        let request = self
            .node
            .commands
            .clone()
            .query::<()>(pipe, self.name.clone());
        self.background += 1;
        ctx.spawn(request.into_actor(self).map(|_, act, ctx| {
            act.background -= 1;
            act.refresh_keepalive(ctx);
        }));
        self.refresh_keepalive(ctx);
    }

    /// The acquire of `receipt` (for `permits`) got no answer, or an answer that says an
    /// earlier copy of it may have run: settle it with Redis, again each response timeout
    /// while Redis is silent, until `until`.
    pub(super) fn settle(
        &mut self,
        permits: u32,
        receipt: String,
        until: Instant,
        ctx: &mut Context<Self>,
    ) {
        let mut invocation = self.keys.invocation(SETTLE.get(self.node.commands.pubsub));
        invocation
            .key(receipt.as_str())
            .arg(permits)
            .arg(SETTLE_WINDOW.as_millis() as u64);
        let request = self
            .node
            .commands
            .clone()
            .eval::<i64>(invocation, self.name.clone());
        self.background += 1;
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            act.background -= 1;
            match result {
                Ok(1) => {
                    tracing::debug!(semaphore = %act.name, permits,
                        "an acquire whose reply was lost had taken its permits: given back");
                    act.nudge(ctx);
                }
                Ok(_) => {}
                Err(error) if error.is_transient() && Instant::now() < until => {
                    let pause = act.node.config.response_timeout;
                    act.background += 1;
                    ctx.run_later(pause, move |act, ctx| {
                        act.background -= 1;
                        act.settle(permits, receipt, until, ctx);
                    });
                }
                Err(error) => warn_unsettled(act, permits, &error),
            }
            act.refresh_keepalive(ctx);
        }));
        self.refresh_keepalive(ctx);
    }
}

fn warn_unsettled(act: &SemaphoreActor, permits: u32, error: &LockError) {
    tracing::warn!(semaphore = %act.name, permits, %error,
        "an acquire whose reply was lost could not be settled; if it ran, its permits stay taken");
}
