//! How the lock actor sets a fixed-lease hold's lease again (a guard's `extend`, a
//! MultiLock member's restart once its set is complete), without ever counting on a longer
//! lease than Redis has.

use super::LockActor;
use crate::config::positive_millis;
use crate::error::LockError;
use crate::lease::ends::kept_lease;
use crate::lock::{ExtendHold, LockOwner};
use crate::reply::{Deferred, ReplySlot};
use crate::telemetry::{self, LeaseUpdate};
use actix::prelude::*;
use std::time::{Duration, Instant};

impl LockActor {
    /// The TTL an update asks for from `now` when hold `hold` of `owner` is to end at
    /// `until` (see [`update_ttl`]).
    fn update_ttl_for(
        &self,
        owner: LockOwner,
        hold: u64,
        until: Instant,
        now: Instant,
    ) -> Duration {
        let holds = self
            .machine
            .holder(&owner)
            .into_iter()
            .flat_map(|h| &h.holds);
        let ends = holds.map(|h| match h.id {
            id if id == hold => key_end(Some(until), &h.claims),
            _ => h.key_end(),
        });
        update_ttl(ends, now, self.watchdog_lease(), until - now)
    }

    /// Checks an [`ExtendHold`] against what this actor keeps: the hold's current end when
    /// it may be extended, or why not.
    fn extendable(&mut self, msg: ExtendHold, ctx: &mut Context<Self>) -> Result<(), LockError> {
        if self.node.is_stopped() {
            return Err(LockError::Shutdown);
        }
        positive_millis(&format!("the lease of lock `{}`", self.name), msg.lease)?;
        let name = self.name.to_string();
        let lost = || LockError::Lost { name: name.clone() };
        let Some(holder) = self.machine.holder(&msg.owner) else {
            return Err(lost());
        };
        if holder.status.is_lost() {
            // Its deadline passed a moment before the timer that reports it: it is over
            // (Redis may still have it, for the drift allowance; a lost hold is not revived).
            self.lose_and_clear(msg.owner, "its fixed lease ran out", ctx);
            return Err(lost());
        }
        let Some(hold) = holder.holds.iter().find(|h| h.id == msg.hold) else {
            return Err(lost());
        };
        if hold.lease.is_none() {
            return Err(LockError::invalid_config(format!(
                "lock `{}` is held with the watchdog (taken without a lease): it lasts as long \
                 as its guard and needs no extending; extend holds taken with a fixed lease",
                self.name
            )));
        }
        Ok(())
    }
}

impl Handler<ExtendHold> for LockActor {
    type Result = Deferred<Result<(), LockError>>;

    /// Sets the hold's end to `lease` from now. Until Redis confirms it, the hold counts on
    /// the earlier of its old end and the new one (a longer lease may not have reached
    /// Redis; a shorter one may have); once confirmed, on the new end (or the key's reported
    /// PTTL, if shorter).
    fn handle(&mut self, msg: ExtendHold, ctx: &mut Context<Self>) -> Self::Result {
        self.take_charge(ctx);
        if let Err(error) = self.extendable(msg, ctx) {
            telemetry::lease_updated(
                self.kind,
                &self.name,
                &self.node.config,
                LeaseUpdate::of::<()>(&Err(error.clone())),
            );
            return Deferred::ready(Err(error));
        }
        let ExtendHold { owner, hold, lease } = msg;
        let sent = Instant::now();
        let until = sent + lease;
        let ttl = self.update_ttl_for(owner, hold, until, sent);
        let Some(holder) = self.machine.holder_mut(&owner) else {
            return Deferred::ready(Err(LockError::Shutdown)); // checked above: never
        };
        let counted = holder.holds.len();
        if let Some(kept) = holder.holds.iter_mut().find(|h| h.id == hold) {
            kept.claims.push(until);
            let pending = end_while_updating(kept.until, until);
            if pending != kept.until {
                kept.until = pending;
                self.arm_lease_keeping(owner, sent, ctx);
            }
        }
        let invocation = self.kind.set_lease(
            &self.name,
            &self.field(owner),
            ttl.as_millis() as u64,
            counted,
        );
        let request = self
            .node
            .commands
            .clone()
            .eval::<i64>(invocation, self.name.clone());
        let slot = ReplySlot::new();
        let reply = slot.clone();
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            act.settle_claim(owner, hold, until);
            let outcome = match result {
                Ok(pttl) if pttl != 0 => {
                    act.lease_set(owner, hold, lease, sent, pttl, ctx);
                    Ok(())
                }
                Ok(_) => {
                    act.lose(owner, "a lease update found it gone", ctx);
                    act.refresh_keepalive(ctx);
                    Err(LockError::Lost {
                        name: act.name.to_string(),
                    })
                }
                Err(error) => {
                    tracing::warn!(lock = %act.name, %error,
                        "a lease update got no answer; the hold counts on the shorter lease");
                    Err(error)
                }
            };
            let update = LeaseUpdate::of(&outcome);
            telemetry::lease_updated(act.kind, &act.name, &act.node.config, update);
            let _ = reply.send(outcome);
        }));
        Deferred(slot)
    }
}

impl LockActor {
    /// Redis confirmed `owner`'s hold `hold` with lease `lease` from `sent`, the key then
    /// having `pttl` ms left (-1: no expiry): the hold ends at the earlier of both.
    fn lease_set(
        &mut self,
        owner: LockOwner,
        hold: u64,
        lease: Duration,
        sent: Instant,
        pttl: i64,
        ctx: &mut Context<Self>,
    ) {
        let Some(kept) = self
            .machine
            .holder_mut(&owner)
            .and_then(|holder| holder.holds.iter_mut().find(|h| h.id == hold))
        else {
            return; // released (or lost) meanwhile
        };
        kept.lease = Some(lease);
        kept.until = Some(end_once_set(sent, lease, pttl));
        self.arm_lease_keeping(owner, sent, ctx);
    }
}

impl LockActor {
    /// The update of `owner`'s hold `hold` to end at `until` was answered (or failed): it
    /// no longer claims a later end than the hold counts on.
    fn settle_claim(&mut self, owner: LockOwner, hold: u64, until: Instant) {
        let kept = self
            .machine
            .holder_mut(&owner)
            .and_then(|holder| holder.holds.iter_mut().find(|h| h.id == hold));
        if let Some(kept) = kept {
            if let Some(at) = kept.claims.iter().position(|&claim| claim == until) {
                kept.claims.swap_remove(at);
            }
        }
    }
}

/// How long the key must keep a hold that ends at `until` (`None`: kept by the watchdog)
/// while lease updates asking for `claims` are on their way: the latest of them. The hold
/// counts on the earlier end meanwhile ([`end_while_updating`]), but an update may have
/// run in Redis already, and the answer it brings moves the hold to its end: a call that
/// sets the key's TTL for the owner's holds (an unlock of another hold, another update)
/// must leave the key that long.
pub(crate) fn key_end(until: Option<Instant>, claims: &[Instant]) -> Option<Instant> {
    let until = until?;
    Some(claims.iter().copied().fold(until, Instant::max))
}

/// The TTL a lease update asks the key for from `now`: the longest any of the owner's holds
/// needs, with the updated hold's new end among `ends` (`None`: a hold the watchdog keeps,
/// which counts a whole `watchdog` lease); `lease` itself when the owner holds nothing here.
pub(crate) fn update_ttl(
    ends: impl IntoIterator<Item = Option<Instant>>,
    now: Instant,
    watchdog: Duration,
    lease: Duration,
) -> Duration {
    kept_lease(ends, now, watchdog).unwrap_or(lease)
}

/// A hold's end while an update of its lease to end at `until` is on its way (or got no
/// answer): the earlier of its old end and the new one, since a longer lease may not have
/// reached Redis and a shorter one may have.
pub(crate) fn end_while_updating(old: Option<Instant>, until: Instant) -> Option<Instant> {
    match old {
        Some(old) if until < old => Some(until),
        other => other,
    }
}

/// A hold's end once Redis confirmed its update to `lease` sent at `sent`, the key then
/// having `pttl` ms left (-1: no expiry): the earlier of the lease's end and the key's.
pub(crate) fn end_once_set(sent: Instant, lease: Duration, pttl: i64) -> Instant {
    match u64::try_from(pttl) {
        Ok(ms) => sent + lease.min(Duration::from_millis(ms)),
        Err(_) => sent + lease,
    }
}
