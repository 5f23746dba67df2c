//! The permit-expirable side of the semaphore actor: the permits it handed out, their
//! loss, and their release by id. The node's renewal service (`crate::lease::renewal`)
//! renews the lease-less ones, which sit on its permit lease list while held here.

use super::{disarm, refuse, SemaphoreActor};
use crate::error::LockError;
use crate::lease::list::Loss;
use crate::lease::status::HoldStatus;
use crate::semaphore::guard::{PermitId, ReleaseGrant};
use crate::semaphore::lease_entry::{permit_deadline, PermitLost};
use crate::semaphore::{ReleasePermit, EXPIRABLE_RELEASE};
use actix::prelude::*;
use std::time::{Duration, Instant};

/// Arms the timer that reports grant `grant` lost at `valid_until`, the end of its fixed
/// lease `lease`, less the clock drift allowance: so the holder hears of the loss before
/// Redis takes the permits back.
pub(super) fn expire_at(
    grant: u64,
    valid_until: Instant,
    lease: Duration,
    ctx: &mut Context<SemaphoreActor>,
) -> SpawnHandle {
    let ends_in = permit_deadline(valid_until, lease).saturating_duration_since(Instant::now());
    ctx.run_later(ends_in, move |act, ctx| {
        act.lose(grant, "its fixed lease ran out", ctx);
    })
}

impl SemaphoreActor {
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
        self.unwatch(&lost.watched);
        tracing::warn!(semaphore = %self.name, permits = lost.ids.len(), why, "permits lost");
        crate::telemetry::lost(self.kind, &self.name, &self.node.config);
        lost.status.send_replace(HoldStatus::Lost);
        self.refresh_keepalive(ctx);
        Some(lost.ids)
    }

    /// Stops keeping `ids` alive here (they are being released); a grant left with no ids
    /// ends as released.
    pub(super) fn forget_ids(&mut self, ids: &[PermitId], ctx: &mut Context<Self>) {
        let mut emptied = Vec::new();
        let mut unwatched = Vec::new();
        for (grant, held) in self.grants.iter_mut() {
            if !held.watched.is_empty() {
                let pairs = held.ids.iter().zip(&held.watched);
                unwatched.extend(pairs.filter(|(id, _)| ids.contains(id)).map(|(_, w)| *w));
                let mut keep = held.ids.iter().map(|id| !ids.contains(id));
                held.watched.retain(|_| keep.next().unwrap_or(false));
            }
            held.ids.retain(|id| !ids.contains(id));
            if held.ids.is_empty() {
                emptied.push(*grant);
            }
        }
        self.unwatch(&unwatched);
        for grant in emptied {
            if let Some(ended) = self.grants.remove(&grant) {
                disarm(ended.expiry, ctx);
                ended.status.send_replace(HoldStatus::Released);
            }
        }
    }

    /// Takes permits off the node's lease list: no renewal is sent for them after this.
    pub(super) fn unwatch(&self, watched: &[u64]) {
        for id in watched {
            self.permit_watch.unregister(*id);
        }
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

impl Handler<PermitLost> for SemaphoreActor {
    type Result = ();

    fn handle(&mut self, msg: PermitLost, ctx: &mut Context<Self>) {
        let ours = self
            .grants
            .get_mut(&msg.grant)
            .is_some_and(|g| g.watched.contains(&msg.watch_id));
        if !ours {
            return; // released or lost meanwhile
        }
        if let Some(g) = self.grants.get_mut(&msg.grant) {
            // The lease list already dropped this entry.
            g.watched.retain(|id| *id != msg.watch_id);
        }
        let Some(ids) = self.lose(msg.grant, msg.loss.why(), ctx) else {
            return;
        };
        if msg.loss == Loss::Gone {
            // The rest of this acquire's permits are of no use alone: give them back.
            self.give_back(ids.len() as u32, ids, ctx);
        }
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
        let releasing = self.release_ids(ids, ctx);
        // Counted in `background` from here on.
        drop(msg.errand);
        releasing
    }
}

impl Handler<ReleasePermit> for SemaphoreActor {
    type Result = ResponseActFuture<Self, Result<(), LockError>>;

    fn handle(&mut self, msg: ReleasePermit, ctx: &mut Context<Self>) -> Self::Result {
        if !self.kind.rules().by_id() {
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
