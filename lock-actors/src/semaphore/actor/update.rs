//! Setting the lease of permit-expirable permits again (Redisson's `updateLeaseTime`): for
//! a guard's grant, and for any permit by id. A grant never counts on a longer lease than
//! Redis has: until Redis confirms an update it keeps the earlier of both ends.

use super::leases::expire_at;
use super::{refuse, SemaphoreActor};
use crate::config::positive_millis;
use crate::error::LockError;
use crate::semaphore::guard::{PermitId, UpdateGrantLease};
use crate::semaphore::lease_entry::{permit_deadline, renewal_call};
use crate::telemetry::{self, LeaseUpdate};
use actix::prelude::*;
use std::time::{Duration, Instant};

/// Set the lease of the permit `permit_id` again, from now, whoever holds it; replies
/// whether it was out (Redisson's `updateLeaseTime`).
#[derive(Clone)]
pub(crate) struct UpdatePermitLease {
    pub(crate) permit_id: String,
    pub(crate) lease: Duration,
}

impl Message for UpdatePermitLease {
    type Result = Result<bool, LockError>;
}

impl SemaphoreActor {
    /// The update of `ids` to `lease` from now: one answer per id, 1 when it was out (and
    /// not expired). It is the renewal's script: a renewal sets a permit's expiry to its
    /// lease from now, which is what Redisson's `updateLeaseTime` does.
    fn update_request(
        &self,
        ids: &[PermitId],
        lease: Duration,
    ) -> impl std::future::Future<Output = Result<Vec<i64>, LockError>> + 'static {
        let lease_ms = lease.as_millis() as u64;
        let mut invocation = renewal_call(&self.name, lease_ms, self.node.commands.pubsub);
        for id in ids {
            invocation.arg(id.raw.as_slice());
        }
        self.node
            .commands
            .clone()
            .eval::<Vec<i64>>(invocation, self.name.clone())
    }

    /// Grant `grant`'s fixed lease now surely ends at `until` (lease `lease`): its guard's
    /// deadline and its expiry timer move there.
    fn set_grant_end(
        &mut self,
        grant: u64,
        until: Instant,
        lease: Duration,
        ctx: &mut Context<Self>,
    ) {
        let Some(held) = self.grants.get_mut(&grant) else {
            return;
        };
        held.fixed = Some((until, lease));
        held.status
            .set_deadline(Some(permit_deadline(until, lease)));
        if let Some(expiry) = held.expiry.replace(expire_at(grant, until, lease, ctx)) {
            ctx.cancel_future(expiry);
        }
    }

    /// Checks a grant's update: its ids when it has a fixed lease to set.
    fn updatable(
        &mut self,
        msg: &UpdateGrantLease,
        ctx: &mut Context<Self>,
    ) -> Result<Vec<PermitId>, LockError> {
        positive_millis(
            &format!("the lease of semaphore `{}`", self.name),
            msg.lease,
        )?;
        let lost = LockError::Lost {
            name: self.name.to_string(),
        };
        let Some(held) = self.grants.get(&msg.grant) else {
            return Err(lost);
        };
        if held.fixed.is_none() {
            return Err(LockError::invalid_config(format!(
                "the permits of semaphore `{}` were taken without a lease: they are renewed \
                 while their guard lives and have no lease to set; update permits taken with \
                 a fixed lease",
                self.name
            )));
        }
        if held.status.is_lost() {
            // Its deadline passed a moment before the timer that reports it.
            self.lose(msg.grant, "its fixed lease ran out", ctx);
            return Err(lost);
        }
        Ok(held.ids.clone())
    }
}

impl Handler<UpdateGrantLease> for SemaphoreActor {
    type Result = ResponseActFuture<Self, Result<(), LockError>>;

    fn handle(&mut self, msg: UpdateGrantLease, ctx: &mut Context<Self>) -> Self::Result {
        let ids = match self.updatable(&msg, ctx) {
            Ok(ids) => ids,
            Err(error) => {
                let outcome = LeaseUpdate::of::<()>(&Err(error.clone()));
                telemetry::lease_updated(self.kind, &self.name, &self.node.config, outcome);
                return refuse(error);
            }
        };
        let UpdateGrantLease { grant, lease } = msg;
        let sent = Instant::now();
        let until = sent + lease;
        // Until Redis answers, the earlier of the old end and the new one.
        if let Some((old, old_lease)) = self.grants.get(&grant).and_then(|g| g.fixed) {
            if until < old {
                self.set_grant_end(grant, until, lease.max(old_lease), ctx);
            }
        }
        let wanted = ids.len();
        self.background += 1;
        self.refresh_keepalive(ctx);
        Box::pin(
            self.update_request(&ids, lease)
                .into_actor(self)
                .map(move |result, act, ctx| {
                    act.background -= 1;
                    let outcome = match result {
                        Ok(updated) if updated.iter().filter(|&&u| u == 1).count() == wanted => {
                            act.set_grant_end(grant, until, lease, ctx);
                            Ok(())
                        }
                        Ok(_) => {
                            // A permit is gone: the grant is lost; the rest go back.
                            if let Some(ids) = act.lose(grant, "a lease update found a permit gone", ctx) {
                                act.give_back(ids.len() as u32, ids, ctx);
                            }
                            Err(LockError::Lost {
                                name: act.name.to_string(),
                            })
                        }
                        Err(error) => {
                            tracing::warn!(semaphore = %act.name, %error,
                                "a lease update got no answer; the permits count on the shorter lease");
                            Err(error)
                        }
                    };
                    let update = LeaseUpdate::of(&outcome);
                    telemetry::lease_updated(act.kind, &act.name, &act.node.config, update);
                    act.refresh_keepalive(ctx);
                    outcome
                }),
        )
    }
}

impl Handler<UpdatePermitLease> for SemaphoreActor {
    type Result = ResponseActFuture<Self, Result<bool, LockError>>;

    fn handle(&mut self, msg: UpdatePermitLease, ctx: &mut Context<Self>) -> Self::Result {
        if !self.kind.rules().by_id() {
            return refuse(self.wrong_kind("its permits have no ids or leases"));
        }
        let what = format!("the lease of semaphore `{}`", self.name);
        if let Err(error) = positive_millis(&what, msg.lease) {
            return refuse(error);
        }
        let Some(id) = PermitId::parse(&msg.permit_id) else {
            return Box::pin(fut::ready(Ok(false)));
        };
        // A permit of a grant held here: as the grant's own update for a fixed lease; a
        // renewed one is its guard's to keep.
        let local = self
            .grants
            .iter()
            .find(|(_, g)| g.ids.contains(&id))
            .map(|(grant, g)| (*grant, g.fixed));
        let sent = Instant::now();
        let until = sent + msg.lease;
        match local {
            Some((_, None)) => {
                return refuse(LockError::invalid_config(format!(
                    "permit {} of semaphore `{}` is renewed by its guard in this process and \
                     has no lease to set",
                    id.hex, self.name
                )))
            }
            // The grant ends with its earliest permit: a shorter lease shortens it now.
            Some((grant, Some((old, old_lease)))) if until < old => {
                self.set_grant_end(grant, until, msg.lease.max(old_lease), ctx);
            }
            _ => {}
        }
        self.background += 1;
        self.refresh_keepalive(ctx);
        Box::pin(
            self.update_request(std::slice::from_ref(&id), msg.lease)
                .into_actor(self)
                .map(move |result, act, ctx| {
                    act.background -= 1;
                    let outcome = result.map(|updated| updated.first() == Some(&1));
                    if let (Ok(false), Some((grant, _))) = (&outcome, local) {
                        act.lose(grant, "a lease update found a permit gone", ctx);
                    }
                    let update = match &outcome {
                        Ok(false) => LeaseUpdate::Lost,
                        other => LeaseUpdate::of(other),
                    };
                    telemetry::lease_updated(act.kind, &act.name, &act.node.config, update);
                    act.refresh_keepalive(ctx);
                    outcome
                }),
        )
    }
}
