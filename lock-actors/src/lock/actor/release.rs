//! How the lock actor lets go: releases, renewals on request, and what keeps a hold
//! alive (the watchdog, or the timer at a fixed lease's end) until then.

use super::{Holder, LockActor, Reconcile, RELEASED};
use crate::config::clock_drift;
use crate::config::positive_millis;
use crate::error::LockError;
use crate::lease::ends::renewed_for;
use crate::lease::list::renew_confirmed;
use crate::lease::status::HoldStatus;
use crate::lock::guard::ReleaseHold;
use crate::lock::machine::{Let, LostPlan, UnlockOutcome, UnlockReply};
use crate::lock::{LockOwner, Release, Released, Renew};
use crate::reply::{Deferred, ReplySlot};
use crate::runtime::Errand;
use crate::script::ScriptCall;
use crate::wait_queue::driver::QueueActor;
use actix::prelude::*;
use std::time::{Duration, Instant};

impl LockActor {
    /// Keeps `owner`'s hold alive the way its holds ask: the watchdog while any hold has no
    /// fixed lease, else a timer that reports the loss when the fixed lease runs out.
    pub(super) fn arm_lease_keeping(
        &mut self,
        owner: LockOwner,
        since: Instant,
        ctx: &mut Context<Self>,
    ) {
        let watchdog_lease = self.watchdog_lease();
        let Some(holder) = self.machine.holder_mut(&owner) else {
            return;
        };
        if let Some(expiry) = holder.expiry.take() {
            ctx.cancel_future(expiry);
        }
        let watched = holder.holds.iter().any(|h| h.lease.is_none());
        let fixed = holder.fixed_end();
        // Beside watched holds, a fixed lease keeps the key until its end whatever the
        // renewals do (no script shortens it): the hold is surely ours until then.
        holder.status.set_floor(
            fixed
                .filter(|_| watched)
                .map(|(until, lease)| until - clock_drift(lease)),
        );
        match (watched, holder.watch_id) {
            (true, None) => {
                let deadline = since + watchdog_lease - clock_drift(watchdog_lease);
                holder.set_deadline(Some(deadline));
                self.watch(owner, since + watchdog_lease, ctx);
            }
            (true, Some(_)) => {}
            (false, watch_id) => {
                if let Some(id) = watch_id {
                    self.watchdog.unregister(id);
                    holder.watch_id = None;
                }
                // The key lives while any hold is in it: until the last fixed lease ends.
                let (until, lease) = fixed.unwrap_or((since + watchdog_lease, watchdog_lease));
                holder.set_deadline(Some(until - clock_drift(lease)));
                let ends_in = until
                    .saturating_duration_since(Instant::now())
                    .saturating_sub(clock_drift(lease));
                holder.expiry = Some(ctx.run_later(ends_in, move |act, ctx| {
                    act.lose_and_clear(owner, "its fixed lease ran out", ctx);
                }));
            }
        }
    }

    /// No renewal of `owner`'s watched holds was confirmed within the watchdog lease, but
    /// a fixed lease of the owner keeps the key longer: the hold is watched again until
    /// that lease's end (less its drift allowance), so a renewal that gets through keeps
    /// it on, and none means the loss comes at that end. `false` when no fixed lease
    /// outlasts now (the hold is lost).
    pub(super) fn watch_until_fixed_end(
        &mut self,
        owner: LockOwner,
        ctx: &mut Context<Self>,
    ) -> bool {
        let fixed = self.machine.holder(&owner).and_then(|h| h.fixed_end());
        let Some((until, lease)) = fixed else {
            return false;
        };
        let end = until - clock_drift(lease);
        if end <= Instant::now() {
            return false;
        }
        self.watch(owner, end, ctx);
        true
    }

    /// Puts `owner`'s hold on the watchdog's list, surely valid until `valid_until`.
    fn watch(&mut self, owner: LockOwner, valid_until: Instant, ctx: &mut Context<Self>) {
        let Some(loser) = self.machine.holder(&owner).map(|h| h.status.loser()) else {
            return;
        };
        let id = self.watchdog.register(
            self.kind,
            self.name.clone(),
            owner,
            ctx.address().downgrade(),
            loser,
            valid_until,
        );
        if let Some(holder) = self.machine.holder_mut(&owner) {
            holder.watch_id = Some(id);
        }
    }

    /// `owner` no longer holds the lock: tell its guards, stop keeping it alive.
    pub(super) fn lose(&mut self, owner: LockOwner, why: &str, ctx: &mut Context<Self>) {
        if let Some(holder) = self.machine.remove(&owner) {
            self.tell_lost(owner, holder, why, ctx);
        }
    }

    /// Stops keeping `holder` alive (taken out of the machine): its watchdog entry, and its
    /// expiry timer (which would otherwise take a later holder of the same owner for it).
    fn stop_keeping(&mut self, holder: &Holder, ctx: &mut Context<Self>) {
        if let Some(id) = holder.watch_id {
            self.watchdog.unregister(id);
        }
        if let Some(expiry) = holder.expiry {
            ctx.cancel_future(expiry);
        }
    }

    /// [`end_holder`](Self::end_holder), then wakes the head of the queue.
    fn tell_lost(&mut self, owner: LockOwner, holder: Holder, why: &str, ctx: &mut Context<Self>) {
        self.end_holder(owner, holder, why, ctx);
        // A head that slept on this local holder may go now.
        self.wake_head(ctx);
    }

    /// Tells the guards of `holder` (taken out of the machine) that it is over, and stops
    /// keeping it alive.
    pub(super) fn end_holder(
        &mut self,
        owner: LockOwner,
        holder: Holder,
        why: &str,
        ctx: &mut Context<Self>,
    ) {
        self.stop_keeping(&holder, ctx);
        if why == RELEASED {
            holder.set_status(HoldStatus::Released);
        } else {
            tracing::warn!(lock = %self.name, owner = owner.id(), why, "lock lost");
            crate::telemetry::lost(self.kind, &self.name, &self.node.config);
            holder.set_status(HoldStatus::Lost);
        }
    }

    /// `owner` lost the lock while Redis may still count its holds (a renewal that reached
    /// Redis after its deadline, a fixed lease that ends a drift allowance before the key):
    /// the machine decides how those holds are taken out, so no key outlives what its
    /// holder was told, and registers it before the holder goes (no caller acts directly on
    /// the key meanwhile: its owner's new hold would be taken out with the old ones).
    pub(super) fn lose_and_clear(&mut self, owner: LockOwner, why: &str, ctx: &mut Context<Self>) {
        let watchdog = self.watchdog_lease();
        // How long a stray hold could last.
        let lease = self.machine.holder(&owner).map_or(watchdog, |h| {
            let longest = h.holds.iter().filter_map(|hold| hold.lease).max();
            longest.unwrap_or(watchdog).max(watchdog)
        });
        let can_send = !self.node.is_stopped();
        let errands = self.node.arbiter.errands();
        let (holder, plan) = self
            .machine
            .lose_and_clear(owner, &&*self.direct, can_send, || {
                Reconcile::new(lease, None, errands.start())
            });
        match plan {
            LostPlan::Clear(holds) | LostPlan::ClearLater(holds) => {
                self.clear_lost(owner, holds, ctx)
            }
            LostPlan::Settle(_) => self.refresh_keepalive(ctx),
            LostPlan::Nothing => {}
        }
        if let Some(holder) = holder {
            self.tell_lost(owner, holder, why, ctx);
        }
    }

    /// Sends owner-checked unlocks for `holds` holds of `owner` that this process no longer
    /// counts (registered with the machine already): each removes only what is `owner`'s
    /// (nothing if Redis let the key go, or someone else holds it now).
    fn clear_lost(&mut self, owner: LockOwner, holds: usize, ctx: &mut Context<Self>) {
        let field = self.field(owner);
        // The key's TTL while holds remain: they are lost too, so the shortest there is.
        let calls: Vec<_> = (0..holds)
            .map(|_| {
                self.kind
                    .unlock(&self.name, &field, 1, self.node.commands.pubsub)
            })
            .collect();
        let (commands, name) = (self.node.commands.clone(), self.name.clone());
        let errand = self.node.arbiter.errands().start();
        let request = async move {
            for call in calls {
                // 0: a hold is left; nil (nothing of ours) or 1 (freed): done.
                if commands
                    .clone()
                    .eval::<Option<i64>>(call, name.clone())
                    .await?
                    != Some(0)
                {
                    break;
                }
            }
            Ok::<_, LockError>(())
        };
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            drop(errand);
            act.machine.clear_done(&owner);
            if let Err(error) = result {
                tracing::warn!(lock = %act.name, %error,
                    "could not remove a lost hold; it expires at its lease");
            }
            act.wake_head(ctx);
        }));
    }

    /// Releases a hold that was granted to a waiter who had already left.
    pub(super) fn give_back(
        &mut self,
        owner: LockOwner,
        lease: Option<Duration>,
        ctx: &mut Context<Self>,
    ) {
        let lease = self
            .kept_lease(owner)
            .unwrap_or(lease.unwrap_or(self.watchdog_lease()));
        let request = self.unlock_request(owner, lease);
        let errand = self.node.arbiter.errands().start();
        self.machine.give_back_sent(owner);
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            drop(errand);
            act.machine.give_back_answered(&owner);
            if let Err(error) = result {
                tracing::warn!(lock = %act.name, %error,
                    "could not give back an abandoned grant; it expires at its lease");
            }
            // The owner's head waited for it (and, if the owner held nothing else here,
            // any head may go now).
            act.wake_head(ctx);
        }));
    }

    pub(super) fn unlock_request(
        &self,
        owner: LockOwner,
        lease: Duration,
    ) -> impl std::future::Future<Output = Result<Option<i64>, LockError>> + 'static {
        let invocation = self.kind.unlock(
            &self.name,
            &self.field(owner),
            lease.as_millis() as u64,
            self.node.commands.pubsub,
        );
        self.node
            .commands
            .clone()
            .eval(invocation, self.name.clone())
    }

    /// Releases one hold of `owner` (`hold`, or the latest). `errand` is kept until Redis
    /// has answered the unlock.
    pub(super) fn release(
        &mut self,
        owner: LockOwner,
        hold: Option<u64>,
        errand: Errand,
        ctx: &mut Context<Self>,
    ) -> Deferred<Result<Released, LockError>> {
        // The client stopped, and this thread with it, a moment from now: as every later
        // call, a release then does nothing (the hold expires at its lease).
        if self.node.is_stopped() {
            return Deferred::ready(Err(LockError::Shutdown));
        }
        let not_owner = || {
            Deferred::ready(Err(LockError::NotOwner {
                name: self.name.to_string(),
            }))
        };
        let remaining = match self.machine.release(owner, hold) {
            Let::NotOwner => return not_owner(),
            Let::Last(holder) => {
                // Renewal stops here, before the unlock is even sent.
                self.stop_keeping(&holder, ctx);
                holder.set_status(HoldStatus::Released);
                0
            }
            Let::Kept(remaining) => {
                self.arm_lease_keeping(owner, Instant::now(), ctx);
                remaining
            }
        };
        // What the key keeps while the other holds remain (unused when none does).
        let lease = self
            .kept_lease(owner)
            .unwrap_or_else(|| self.watchdog_lease());
        let slot = ReplySlot::new();
        let reply = slot.clone();
        let request = self.unlock_request(owner, lease);
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            let _errand = errand;
            let answer = match &result {
                Ok(None) => UnlockReply::NotHeld,
                Ok(Some(0)) => UnlockReply::HoldsLeft,
                Ok(Some(_)) => UnlockReply::Freed,
                Err(LockError::Unavailable { .. }) => UnlockReply::Unanswered,
                Err(_) => UnlockReply::Failed,
            };
            let errands = act.node.arbiter.errands();
            let unlock = (reply.clone(), remaining);
            let (unlocked, lose) = act.machine.unlock_answered(owner, remaining, answer, || {
                Reconcile::new(lease, Some(unlock), errands.start())
            });
            if lose {
                // Redis had fewer holds than we counted (it found nothing of ours, or freed
                // the lock): those holds are gone, and their holder must stop.
                act.lose(owner, "an unlock found its holds gone in Redis", ctx);
            }
            let outcome = match result {
                Err(error) if unlocked == UnlockOutcome::Settling => {
                    tracing::warn!(lock = %act.name, %error, "unlock got no answer; settling it");
                    act.report_unsettled(error, reply, ctx);
                    act.drive(Vec::new(), ctx);
                    act.refresh_keepalive(ctx);
                    return;
                }
                Err(error) => Err(error),
                Ok(_) => match unlocked {
                    UnlockOutcome::NotOwner => Err(LockError::NotOwner {
                        name: act.name.to_string(),
                    }),
                    UnlockOutcome::StillHeld(holds) => Ok(Released::StillHeld { holds }),
                    _ => {
                        tracing::debug!(lock = %act.name, owner = owner.id(), "released");
                        Ok(Released::Unlocked)
                    }
                },
            };
            // A head of the owner waited for this unlock; and whoever took the lock away
            // (a force-unlock, its expiry) freed it for the waiters here too, as a release
            // does: a local head slept on this holder.
            act.wake_head(ctx);
            let _ = reply.send(outcome);
            act.refresh_keepalive(ctx);
        }));
        self.refresh_keepalive(ctx);
        Deferred(slot)
    }

    /// An unlock got no answer: it may or may not have run. Records it as a doubt to settle
    /// with Redis; `reply` gets what Redis turns out to hold, or `error` if Redis stays
    /// silent for a response timeout (the settlement goes on; at worst the lock expires at
    /// its lease).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn await_settlement(
        &mut self,
        owner: LockOwner,
        lease: Duration,
        error: LockError,
        reply: ReplySlot<Result<Released, LockError>>,
        remaining: u32,
        errand: Errand,
        ctx: &mut Context<Self>,
    ) {
        tracing::warn!(lock = %self.name, %error, "unlock got no answer; settling it");
        self.doubt(owner, lease, Some((reply.clone(), remaining)), errand, ctx);
        self.report_unsettled(error, reply, ctx);
    }

    /// An unlock's caller hears `error` if its settlement takes longer than a response
    /// timeout (whichever comes first is what it hears).
    fn report_unsettled(
        &mut self,
        error: LockError,
        reply: ReplySlot<Result<Released, LockError>>,
        ctx: &mut Context<Self>,
    ) {
        ctx.run_later(self.node.config.response_timeout, move |_, _| {
            let _ = reply.send(Err(error));
        });
    }
}

impl Handler<ReleaseHold> for LockActor {
    type Result = Deferred<Result<Released, LockError>>;

    fn handle(&mut self, msg: ReleaseHold, ctx: &mut Context<Self>) -> Self::Result {
        self.take_charge(ctx);
        self.release(msg.owner, Some(msg.hold), msg.errand, ctx)
    }
}

impl Handler<Release> for LockActor {
    type Result = Deferred<Result<Released, LockError>>;

    fn handle(&mut self, msg: Release, ctx: &mut Context<Self>) -> Self::Result {
        self.take_charge(ctx);
        let errand = self.node.arbiter.errands().start();
        self.release(msg.owner, None, errand, ctx)
    }
}

impl Handler<Renew> for LockActor {
    type Result = Deferred<Result<bool, LockError>>;

    fn handle(&mut self, msg: Renew, ctx: &mut Context<Self>) -> Self::Result {
        self.take_charge(ctx);
        if self.node.is_stopped() {
            return Deferred::ready(Err(LockError::Shutdown));
        }
        let lease_ms =
            match positive_millis(&format!("the lease of lock `{}`", self.name), msg.lease) {
                Ok(ms) => ms,
                Err(error) => return Deferred::ready(Err(error)),
            };
        let mut invocation = ScriptCall::new(self.kind.renew_script());
        invocation.arg(lease_ms);
        self.kind
            .add_renewal(&mut invocation, &self.name, &self.field(msg.owner));
        let sent = Instant::now();
        let request = renew_confirmed(self.node.commands.clone(), invocation, self.name.clone());
        let slot = ReplySlot::new();
        let reply = slot.clone();
        let owner = msg.owner;
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            let valid_for = result.map(|renewed| {
                renewed
                    .first()
                    .and_then(|&answer| renewed_for(answer, msg.lease))
            });
            let outcome = valid_for
                .as_ref()
                .map(Option::is_some)
                .map_err(Clone::clone);
            match valid_for {
                Ok(Some(valid_for)) => {
                    if let Some(holder) = act.machine.holder_mut(&owner) {
                        // The key now lasts at least this long, for every hold in it (a
                        // renewal never shortens it: a longer hold keeps its own end).
                        let renewed_until = sent + valid_for;
                        for hold in &mut holder.holds {
                            if let Some(until) = &mut hold.until {
                                *until = (*until).max(renewed_until);
                            }
                        }
                        act.arm_lease_keeping(owner, sent, ctx);
                    }
                }
                Ok(None) => act.lose(owner, "a renewal found it gone", ctx),
                Err(_) => {}
            }
            let _ = reply.send(outcome);
        }));
        Deferred(slot)
    }
}
