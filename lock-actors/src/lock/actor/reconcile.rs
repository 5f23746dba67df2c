//! Holds whose Redis call got no answer: the lock actor settles its count with Redis
//! (a reconcile) before it tries again for the same owner.

use super::{LockActor, Reconcile};
use crate::error::LockError;
use crate::lock::direct_messages::{Doubted, Turn};
use crate::lock::machine::NextReconcile;
use crate::lock::{LockOwner, Released};
use crate::reply::ReplySlot;
use crate::runtime::Errand;
use crate::wait_queue::driver::QueueActor;
use crate::wait_queue::ERROR_RETRY;
use actix::prelude::*;
use std::time::{Duration, Instant};

/// How soon a reconcile held back by a direct call on its way looks again (such a call
/// ends within the response timeout; doubts are rare, so a short poll costs nothing).
const RECONCILE_RECHECK: Duration = Duration::from_millis(5);

impl Reconcile {
    /// The record of a call that set up to `lease` and got no answer; `unlock`: an unlock's
    /// reply and the holds left, reported once settled.
    pub(super) fn new(
        lease: Duration,
        unlock: Option<(ReplySlot<Result<Released, LockError>>, u32)>,
        errand: Errand,
    ) -> Self {
        Reconcile {
            lease,
            until: Instant::now() + lease,
            unlock,
            _errand: errand,
        }
    }
}

impl LockActor {
    /// A Redis call about `owner`'s hold failed without an answer: it may or may not have run.
    /// Remember to compare Redis's count with ours once Redis answers again.
    pub(super) fn doubt(
        &mut self,
        owner: LockOwner,
        lease: Duration,
        unlock: Option<(ReplySlot<Result<Released, LockError>>, u32)>,
        errand: Errand,
        ctx: &mut Context<Self>,
    ) {
        tracing::debug!(lock = %self.name, owner = owner.id(), "reply lost; will reconcile");
        self.machine
            .doubt(owner, Reconcile::new(lease, unlock, errand));
        self.refresh_keepalive(ctx);
    }

    /// Sends the oldest pending reconcile when the machine says it may go. Tries of other
    /// owners go on meanwhile; tries of its owner wait for it (it compares our count with
    /// Redis's).
    pub(super) fn settle_reconcile(&mut self, ctx: &mut Context<Self>) {
        let now = Instant::now();
        self.machine.prune_doubts(|r| r.until <= now);
        let next = self.machine.next_reconcile(&&*self.direct, |r| r.lease);
        let (owner, counted, doubted) = match next {
            NextReconcile::Wait => return,
            NextReconcile::Recheck => {
                // A direct call is on its way (or a hold or doubt waits to be absorbed):
                // what Redis counts is not known yet. Look again shortly, at a turn that
                // absorbs.
                if !self.reconcile_recheck {
                    self.reconcile_recheck = true;
                    ctx.run_later(RECONCILE_RECHECK, |act, ctx| {
                        act.reconcile_recheck = false;
                        act.take_charge(ctx);
                        act.drive(Vec::new(), ctx);
                    });
                }
                return;
            }
            NextReconcile::Send {
                owner,
                counted,
                doubt,
            } => (owner, counted, doubt),
        };
        // Holds of the owner that remain keep what they have left; else the doubted lease.
        let lease = self.kept_lease(owner).unwrap_or(doubted);
        let invocation = self.kind.reconcile(
            &self.name,
            &self.field(owner),
            lease.as_millis() as u64,
            counted,
            self.node.commands.pubsub,
        );
        let request = self
            .node
            .commands
            .clone()
            .eval::<Option<i64>>(invocation, self.name.clone());
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            let settled = act.machine.reconcile_answered(result.is_ok());
            match result {
                Ok(undone) => {
                    act.reconcile_error = None;
                    if undone != Some(-1) {
                        tracing::info!(lock = %act.name, owner = owner.id(),
                            "undid a hold whose reply was lost");
                    }
                    // Either way Redis now counts what we count: the unlock is done.
                    if let Some((reply, holds)) = settled.and_then(|r| r.unlock) {
                        let released = match holds {
                            0 => Released::Unlocked,
                            holds => Released::StillHeld { holds },
                        };
                        let _ = reply.send(Ok(released));
                    }
                    act.wake_head(ctx);
                }
                Err(error) => {
                    act.reconcile_error = Some(Box::new(error));
                    ctx.run_later(ERROR_RETRY, |act, ctx| act.settle_reconcile(ctx));
                }
            }
            act.refresh_keepalive(ctx);
        }));
    }
}

impl LockActor {
    /// Settles a fast-path call in doubt, absorbed from the machine: an unlock that got no
    /// answer is reported to its caller once settled; any other call is reconciled.
    pub(super) fn settle_doubted(&mut self, doubted: Doubted, ctx: &mut Context<Self>) {
        let Doubted {
            owner,
            lease,
            errand,
            settle,
        } = doubted;
        match settle {
            Some((error, reply)) => {
                let reply = ReplySlot::forwarding(reply);
                self.await_settlement(owner, lease, error, reply, 0, errand, ctx);
            }
            None => self.doubt(owner, lease, None, errand, ctx),
        }
    }
}

/// The fast path recorded something for us (a doubt): take charge, which absorbs it, and
/// carry it out.
impl Handler<Turn> for LockActor {
    type Result = ();

    fn handle(&mut self, _: Turn, ctx: &mut Context<Self>) {
        self.take_charge(ctx);
        self.drive(Vec::new(), ctx);
        self.refresh_keepalive(ctx);
    }
}
