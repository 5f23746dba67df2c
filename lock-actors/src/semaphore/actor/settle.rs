//! How the semaphore actor settles an acquire whose reply was lost: it may have run, or a
//! copy of it may still run (on a connection that was replaced). Every acquire has a
//! receipt key of its own request id. A plain permit carries no holder, so a plain acquire
//! writes its receipt when it takes permits: the reply that comes makes it useless (it is
//! deleted), and a reply that does not come is settled against it (`settle.lua`). A
//! permit-expirable acquire's permits are found by their ids (`expirable_settle.lua` gives
//! back those recorded). Either way, an acquire that has not run is marked settled under
//! its receipt key, so that a late copy of it takes nothing.

use super::SemaphoreActor;
use crate::error::LockError;
use crate::semaphore::guard::PermitId;
use crate::semaphore::kind::{settled_any, Unanswered};
use crate::semaphore::receipt_key;
use actix::prelude::*;
use std::time::{Duration, Instant};

/// How long a receipt, and a settlement's marker, live in Redis: a lost reply is settled
/// exactly while Redis answers again within it; past it, permits the acquire took stay
/// taken (logged).
pub(super) const SETTLE_WINDOW: Duration = Duration::from_secs(300);

/// An acquire to settle, tried again each response timeout while Redis is silent, until
/// `until`.
pub(super) struct Settling {
    pub(super) permits: u32,
    pub(super) ids: Vec<PermitId>,
    pub(super) receipt: String,
    pub(super) until: Instant,
}

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

    /// The acquire of `settling` got no answer, or an answer that says an earlier copy of
    /// it may have run: settle it with Redis, again each response timeout while Redis is
    /// silent, until its end.
    pub(super) fn settle(&mut self, settling: Settling, ctx: &mut Context<Self>) {
        let unanswered = Unanswered {
            permits: settling.permits,
            ids: &settling.ids,
            receipt: &settling.receipt,
            settle_window_ms: SETTLE_WINDOW.as_millis() as u64,
        };
        let invocation =
            self.kind
                .rules()
                .settle_call(&self.keys, self.node.commands.pubsub, &unanswered);
        let request = self
            .node
            .commands
            .clone()
            .eval::<redis::Value>(invocation, self.name.clone());
        self.background += 1;
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            act.background -= 1;
            let permits = settling.permits;
            match result {
                Ok(reply) if settled_any(&reply) => {
                    tracing::debug!(semaphore = %act.name, permits,
                        "an acquire whose reply was lost had taken its permits: given back");
                    act.nudge(ctx);
                }
                Ok(_) => {}
                Err(error) if error.is_transient() && Instant::now() < settling.until => {
                    let pause = act.node.config.response_timeout;
                    act.background += 1;
                    ctx.run_later(pause, move |act, ctx| {
                        act.background -= 1;
                        act.settle(settling, ctx);
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
