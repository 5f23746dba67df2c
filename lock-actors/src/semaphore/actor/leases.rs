//! The permit-expirable side of the semaphore actor: the permits it handed out, their
//! renewal every lease/3, their loss, and their release by id.

use super::{disarm, refuse, Kind, SemaphoreActor};
use crate::config::clock_drift;
use crate::error::LockError;
use crate::script::ScriptCall;
use crate::semaphore::guard::{PermitId, PermitStatus, ReleaseGrant};
use crate::semaphore::{ReleasePermit, EXPIRABLE_RELEASE, RENEW};
use actix::prelude::*;
use std::time::{Duration, Instant};

/// Permit ids renewed per script call, so one call never blocks Redis for long.
const RENEW_BATCH: usize = 512;
/// After a failed renewal round, the next comes this soon rather than a whole interval
/// later: a connection that dropped while idle fails once, then works.
const RENEW_RETRY: Duration = Duration::from_millis(250);

/// Arms the timer that reports grant `grant` lost at `valid_until`: the end of its fixed
/// lease, or of the last confirmed renewal's lease `lease` (a renewal re-arms it), less
/// the clock drift allowance. So the holder hears of the loss before Redis takes the
/// permits back.
pub(super) fn expire_at(
    grant: u64,
    valid_until: Instant,
    lease: Duration,
    ctx: &mut Context<SemaphoreActor>,
) -> SpawnHandle {
    let ends_in = valid_until
        .saturating_duration_since(Instant::now())
        .saturating_sub(clock_drift(lease));
    ctx.run_later(ends_in, move |act, ctx| {
        let why = match act.grants.get(&grant).map(|g| g.lease) {
            Some(Some(_)) => "its fixed lease ran out",
            _ => "no renewal was confirmed within the lease",
        };
        act.lose(grant, why, ctx);
    })
}

impl SemaphoreActor {
    /// One renewal round: every lease-less permit handed out here, in batched script calls.
    pub(super) fn renew(&mut self, ctx: &mut Context<Self>) {
        let now = Instant::now();
        let overdue: Vec<u64> = self
            .grants
            .iter()
            .filter(|(_, g)| g.lease.is_none() && g.valid_until <= now)
            .map(|(id, _)| *id)
            .collect();
        for grant in overdue {
            self.lose(grant, "no renewal was confirmed within the lease", ctx);
        }
        let watched: Vec<(u64, PermitId)> = self
            .grants
            .iter()
            .filter(|(_, g)| g.lease.is_none())
            .flat_map(|(grant, g)| g.ids.iter().map(move |id| (*grant, id.clone())))
            .collect();
        if watched.is_empty() {
            self.settle_renewal(ctx);
            return;
        }
        if self.renewals_in_flight > 0 {
            return; // the last round has not answered; do not pile up
        }
        let Some(timeouts) = self.keys.timeouts.clone() else {
            return;
        };
        let lease = self.watchdog_lease();
        for batch in watched.chunks(RENEW_BATCH) {
            let batch = batch.to_vec();
            let mut invocation =
                ScriptCall::with_key(RENEW.get(self.node.commands.pubsub), timeouts.as_str());
            invocation.arg(lease.as_millis() as u64);
            for (_, id) in &batch {
                invocation.arg(id.raw.as_slice());
            }
            let sent = Instant::now();
            self.renewals_in_flight += 1;
            let request = self
                .node
                .commands
                .clone()
                .eval::<Vec<i64>>(invocation, self.name.clone());
            ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
                act.renewals_in_flight -= 1;
                match result {
                    Ok(renewed) => act.renewed(&batch, &renewed, sent + lease, ctx),
                    Err(error) => {
                        tracing::warn!(semaphore = %act.name, %error, permits = batch.len(),
                            retry_in = ?RENEW_RETRY, "permit renewal failed; retrying");
                        if act.renewals_in_flight == 0 {
                            ctx.run_later(RENEW_RETRY, |act, ctx| act.renew(ctx));
                        }
                    }
                }
                act.refresh_keepalive(ctx);
            }));
        }
        self.refresh_keepalive(ctx);
    }

    fn renewed(
        &mut self,
        batch: &[(u64, PermitId)],
        renewed: &[i64],
        valid_until: Instant,
        ctx: &mut Context<Self>,
    ) {
        let mut gone: Vec<u64> = Vec::new();
        let mut extended: Vec<u64> = Vec::new();
        for ((grant, id), ok) in batch
            .iter()
            .zip(renewed.iter().chain(std::iter::repeat(&0)))
        {
            if *ok != 1 {
                // An id released (by id) while the round was on its way went for a reason.
                let still_held = self.grants.get(grant).is_some_and(|g| g.ids.contains(id));
                if still_held && !gone.contains(grant) {
                    gone.push(*grant);
                }
            } else if let Some(g) = self.grants.get_mut(grant) {
                if valid_until > g.valid_until {
                    g.valid_until = valid_until;
                    if !extended.contains(grant) {
                        extended.push(*grant);
                    }
                }
            }
        }
        for grant in extended {
            if gone.contains(&grant) {
                continue;
            }
            let lease = self.watchdog_lease();
            if let Some(g) = self.grants.get_mut(&grant) {
                let old = g.expiry.take();
                let until = g.valid_until;
                disarm(old, ctx);
                let timer = expire_at(grant, until, lease, ctx);
                if let Some(g) = self.grants.get_mut(&grant) {
                    g.expiry = Some(timer);
                }
            }
        }
        for grant in gone {
            if let Some(ids) = self.lose(grant, "a renewal found a permit gone or expired", ctx) {
                // The rest of this acquire's permits are of no use alone: give them back.
                self.give_back(ids.len() as u32, ids, ctx);
            }
        }
    }

    /// Ends the renewal round timer once no lease-less permit is held here, so an idle
    /// actor has nothing scheduled and can stop.
    pub(super) fn settle_renewal(&mut self, ctx: &mut Context<Self>) {
        if self.grants.values().any(|g| g.lease.is_none()) {
            return;
        }
        if let Some(renewal) = self.renewal.take() {
            ctx.cancel_future(renewal);
        }
    }

    /// Grant `grant`'s permits are no longer held: tell its guard, stop renewing them.
    /// Returns the ids it had.
    pub(super) fn lose(
        &mut self,
        grant: u64,
        why: &str,
        ctx: &mut Context<Self>,
    ) -> Option<Vec<PermitId>> {
        let lost = self.grants.remove(&grant)?;
        disarm(lost.expiry, ctx);
        tracing::warn!(semaphore = %self.name, permits = lost.ids.len(), why, "permits lost");
        lost.status.send_replace(PermitStatus::Lost);
        self.settle_renewal(ctx);
        self.refresh_keepalive(ctx);
        Some(lost.ids)
    }

    /// Stops keeping `ids` alive here (they are being released); a grant left with no ids
    /// ends as released.
    pub(super) fn forget_ids(&mut self, ids: &[PermitId], ctx: &mut Context<Self>) {
        let mut emptied = Vec::new();
        for (grant, held) in self.grants.iter_mut() {
            held.ids.retain(|id| !ids.contains(id));
            if held.ids.is_empty() {
                emptied.push(*grant);
            }
        }
        for grant in emptied {
            if let Some(ended) = self.grants.remove(&grant) {
                disarm(ended.expiry, ctx);
                ended.status.send_replace(PermitStatus::Released);
            }
        }
        self.settle_renewal(ctx);
    }

    /// Releases permit ids; answers (released, of which still within their lease).
    pub(super) fn release_request(
        &self,
        ids: &[PermitId],
    ) -> impl std::future::Future<Output = Result<(i64, i64), LockError>> + 'static {
        let mut invocation = self
            .keys
            .invocation(EXPIRABLE_RELEASE.get(self.node.commands.pubsub));
        for id in ids {
            invocation.arg(id.raw.as_slice());
        }
        let request = self
            .node
            .commands
            .clone()
            .eval::<Vec<i64>>(invocation, self.name.clone());
        async move {
            let counts = request.await?;
            Ok((
                counts.first().copied().unwrap_or(0),
                counts.get(1).copied().unwrap_or(0),
            ))
        }
    }

    /// Releases permit-expirable permits by id; `Ok` only if every one was still out and
    /// within its lease.
    pub(super) fn release_ids(
        &mut self,
        ids: Vec<PermitId>,
        ctx: &mut Context<Self>,
    ) -> ResponseActFuture<Self, Result<(), LockError>> {
        // Renewal stops here, before the release is even sent.
        self.forget_ids(&ids, ctx);
        let wanted = ids.len() as i64;
        self.background += 1;
        self.refresh_keepalive(ctx);
        Box::pin(
            self.release_request(&ids)
                .into_actor(self)
                .map(move |result, act, ctx| {
                    act.background -= 1;
                    let outcome = match result {
                        Ok((released, live)) => {
                            if released > 0 {
                                act.nudge(ctx);
                            }
                            if live == wanted {
                                tracing::debug!(semaphore = %act.name, permits = wanted,
                                    "permits released");
                                Ok(())
                            } else {
                                Err(LockError::NotOwner {
                                    name: act.name.to_string(),
                                })
                            }
                        }
                        Err(error) => Err(error),
                    };
                    act.refresh_keepalive(ctx);
                    outcome
                }),
        )
    }
}

impl Handler<ReleaseGrant> for SemaphoreActor {
    type Result = ResponseActFuture<Self, Result<(), LockError>>;

    fn handle(&mut self, msg: ReleaseGrant, ctx: &mut Context<Self>) -> Self::Result {
        let ids = match self.grants.get(&msg.grant) {
            Some(grant) => grant.ids.clone(),
            // Lost or already released: Redis decides whether the permits are still out.
            None => msg
                .ids
                .iter()
                .filter_map(|id| PermitId::parse(id))
                .collect(),
        };
        self.release_ids(ids, ctx)
    }
}

impl Handler<ReleasePermit> for SemaphoreActor {
    type Result = ResponseActFuture<Self, Result<(), LockError>>;

    fn handle(&mut self, msg: ReleasePermit, ctx: &mut Context<Self>) -> Self::Result {
        if self.kind != Kind::Expirable {
            return refuse(self.wrong_kind("release a number of permits (ReleasePermits)"));
        }
        let Some(id) = PermitId::parse(&msg.permit_id) else {
            return refuse(LockError::NotOwner {
                name: self.name.to_string(),
            });
        };
        self.release_ids(vec![id], ctx)
    }
}
