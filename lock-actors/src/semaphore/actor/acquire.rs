//! How the semaphore actor takes permits: it drives the wait queue (one try in Redis at a
//! time, for the head) and carries out what the queue asks for.

use super::settle::{Settling, SETTLE_WINDOW};
use super::{Reply, SemaphoreActor, Waiting};
use crate::error::LockError;
use crate::lease::status::StatusSender;
use crate::node::{Subscription, Wake};
use crate::semaphore::grant::Grant;
use crate::semaphore::guard::{PermitGuard, PermitId, SemaphoreGuard};
use crate::semaphore::kind::Take;
use crate::semaphore::lease_entry::permit_deadline;
use crate::telemetry::{self, HoldTimer};
use crate::wait_queue::driver::{self, QueueActor};
use crate::wait_queue::{Granted, Waiter};
use actix::prelude::*;
use std::time::{Duration, Instant};

/// How long a waiter sleeps without news before trying again: a release message lost on
/// the way (or a release by a client that does not publish) costs at most this much.
const FALLBACK_POLL: Duration = Duration::from_secs(5);

/// What one try found.
enum Tried {
    Taken,
    /// Too few permits; the next permit-expirable permit expires this soon (if any does).
    Short {
        next_expiry: Option<Duration>,
    },
    /// The semaphore has no key: its permits were never set (or it was deleted).
    Unset,
}

fn tried(reply: &[i64]) -> Option<Tried> {
    match reply {
        [1, ..] => Some(Tried::Taken),
        [0, _, ms] if *ms >= 0 => Some(Tried::Short {
            // One more millisecond: the script takes back expiries at or before its clock.
            next_expiry: Some(Duration::from_millis(ms.unsigned_abs() + 1)),
        }),
        [0, ..] => Some(Tried::Short { next_expiry: None }),
        [-2, ..] => Some(Tried::Unset),
        // An earlier copy of this request was settled (or ran): not an answer to go by.
        _ => None,
    }
}

impl SemaphoreActor {
    /// Queues an acquire and lets the queue move.
    pub(super) fn enqueue(
        &mut self,
        permits: u32,
        lease: Option<Duration>,
        wait: Duration,
        reply: Reply,
        ctx: &mut Context<Self>,
    ) {
        let data = Waiting {
            unset: false,
            permits,
            lease,
            reply,
            queued: telemetry::Queued::new(self.kind, &self.name, &self.node.config),
        };
        let waiter = self.waiters.queue.waiter(Instant::now(), wait, data);
        let effects = self.waiters.queue.enqueue(waiter, false);
        self.drive(effects, ctx);
    }

    /// Permits may be free now (a release was heard or made here): end the head's sleep.
    pub(super) fn nudge(&mut self, ctx: &mut Context<Self>) {
        let effects = self.waiters.queue.news();
        self.drive(effects, ctx);
    }

    /// Subscribes to the semaphore's channel before the head's second try, so no release
    /// between the two tries goes unheard.
    pub(super) fn subscribe(&mut self, ctx: &mut Context<Self>) {
        let request = Subscription::request(
            &self.node.supervisor,
            self.keys.channel.clone(),
            self.id,
            ctx.address().recipient::<Wake>().downgrade(),
        );
        ctx.spawn(request.into_actor(self).map(|state, act, ctx| {
            let state = state
                .map(Into::into)
                .map_err(|e| e.about(act.name.unmapped()));
            let effects = act.waiters.queue.subscription_ended(state);
            act.drive(effects, ctx);
        }));
    }

    pub(super) fn attempt(&mut self, id: u64, ctx: &mut Context<Self>) {
        let Some(head) = self.waiters.queue.get(id) else {
            return;
        };
        let (permits, lease) = (head.data.permits, head.data.lease);
        let rules = self.kind.rules();
        let receipt = self.new_receipt();
        let take = Take {
            permits,
            lease_ms: lease.unwrap_or(self.watchdog_lease()).as_millis() as u64,
            receipt: &receipt,
            settle_window_ms: SETTLE_WINDOW.as_millis() as u64,
        };
        let (invocation, ids) = rules.acquire_call(&self.keys, self.node.commands.pubsub, &take);
        let sent = Instant::now();
        // The script and its replica WAIT on one server (as for locks: Redisson syncs
        // RSemaphore's and RPermitExpirableSemaphore's acquires too).
        let commands = self.node.commands.clone().pinned();
        let name = self.name.clone();
        let request = async move {
            let reply = commands
                .clone()
                .eval::<Vec<i64>>(invocation, name.clone())
                .await
                .map_err(|error| (error, false))?;
            if matches!(tried(&reply), Some(Tried::Taken)) {
                commands
                    .confirm_replicated(name)
                    .await
                    .map_err(|error| (error, true))?;
            }
            Ok(reply)
        };
        ctx.spawn(request.into_actor(self).map(move |reply, act, ctx| {
            let result = match reply {
                Ok(reply) => tried(&reply).ok_or_else(|| LockError::Unavailable {
                    node: act.node.commands.label().to_string(),
                    reason: "unexpected reply to the semaphore acquire script".into(),
                }),
                // Taken, but not confirmed (no replica did, or the WAIT got no answer):
                // give the permits back, and let the queue decide on a retry.
                Err((error, true)) => {
                    act.give_back(permits, ids.clone(), ctx);
                    if act.kind.rules().writes_receipt() {
                        act.drop_receipt(receipt, ctx);
                    }
                    act.attempted(id, permits, ids, sent, Err(error), ctx);
                    return;
                }
                Err((error, false)) => Err(error),
            };
            match &result {
                // The script may have run, or may still run: settle it.
                Err(LockError::Unavailable { .. }) => {
                    let settling = Settling {
                        permits,
                        ids: ids.clone(),
                        receipt,
                        until: sent + SETTLE_WINDOW / 2,
                    };
                    act.settle(settling, ctx)
                }
                _ if act.kind.rules().writes_receipt() => act.drop_receipt(receipt, ctx),
                _ => {}
            }
            act.attempted(id, permits, ids, sent, result, ctx);
        }));
    }

    fn attempted(
        &mut self,
        id: u64,
        permits: u32,
        ids: Vec<PermitId>,
        sent: Instant,
        result: Result<Tried, LockError>,
        ctx: &mut Context<Self>,
    ) {
        let now = Instant::now();
        let effects = match result {
            Ok(Tried::Taken) => {
                match self.waiters.queue.granted(id) {
                    Granted::To(waiter) => self.grant(waiter, ids, sent, ctx),
                    // The asker left while its permits were on the way: give them back.
                    Granted::Unclaimed => self.give_back(permits, ids, ctx),
                }
                Vec::new()
            }
            Ok(Tried::Unset) => {
                if let Some(waiter) = self.waiters.queue.get_mut(id) {
                    waiter.data.unset = true;
                }
                tracing::debug!(semaphore = %self.name, "no permits set: waiting for them");
                self.waiters.queue.busy(id, now, FALLBACK_POLL)
            }
            Ok(Tried::Short { next_expiry }) => {
                if let Some(waiter) = self.waiters.queue.get_mut(id) {
                    waiter.data.unset = false;
                }
                if self
                    .waiters
                    .queue
                    .get(id)
                    .is_some_and(|waiter| waiter.attempts == 0)
                {
                    telemetry::contended(self.kind, &self.name, &self.node.config);
                }
                let pause = next_expiry.map_or(FALLBACK_POLL, |expiry| expiry.min(FALLBACK_POLL));
                tracing::trace!(semaphore = %self.name, permits, ?pause, "waiting for permits");
                self.waiters.queue.busy(id, now, pause)
            }
            Err(error) => self.waiters.queue.failed(id, now, error),
        };
        self.drive(effects, ctx);
    }

    pub(super) fn time_out(&mut self, mut waiter: Waiter<Waiting>, ctx: &mut Context<Self>) {
        driver::forget(self, waiter.id, ctx);
        let (error, waited) = waiter.timeout_error(self.name.unmapped());
        let error = match error {
            LockError::Timeout { name, waited, .. } if waiter.data.unset => {
                LockError::NoPermitsSet { name, waited }
            }
            other => other,
        };
        tracing::debug!(semaphore = %self.name, permits = waiter.data.permits, ?waited,
            "wait for permits timed out");
        waiter.data.queued.leave();
        waiter.data.reply.fail(error);
    }

    fn grant(
        &mut self,
        waiter: Waiter<Waiting>,
        ids: Vec<PermitId>,
        sent: Instant,
        ctx: &mut Context<Self>,
    ) {
        driver::forget(self, waiter.id, ctx);
        let Waiting {
            permits,
            lease,
            reply,
            queued,
            ..
        } = waiter.data;
        queued.leave();
        tracing::debug!(semaphore = %self.name, permits,
            waited = ?waiter.started.elapsed(), ?lease, "permits acquired");
        match reply {
            Reply::Plain(slot) => {
                self.plain_out += u64::from(permits);
                let errands = self.node.arbiter.errands().clone();
                let permits = SemaphoreGuard::new(
                    ctx.address().recipient(),
                    errands,
                    self.name.clone(),
                    permits,
                )
                .timed(HoldTimer::start(self.kind, &self.name, &self.node.config));
                // An undelivered guard is dropped here, and its drop gives the permits back.
                let _ = slot.send(Ok(permits));
            }
            Reply::Expirable(slot) => {
                let grant = self.next_grant;
                self.next_grant += 1;
                let (status, watching) = StatusSender::held();
                let shown: Vec<String> = ids.iter().map(|id| id.hex.clone()).collect();
                let (watched, expiry) = match lease {
                    // The node's renewal service keeps it alive, and reports it lost when
                    // no renewal confirmed it within the lease; its entries move the
                    // guard's deadline at each confirmed renewal.
                    None => {
                        let watched = self.permit_watch.register_grant(
                            &self.name,
                            ids.iter().map(|id| id.raw.as_slice()),
                            grant,
                            ctx.address().downgrade(),
                            status.loser(),
                            (sent, self.watchdog_lease()),
                        );
                        (watched, None)
                    }
                    // The guard times the fixed lease itself, as the actor's timer does:
                    // its end less the clock drift allowance.
                    Some(lease) => {
                        status.set_deadline(Some(permit_deadline(sent + lease, lease)));
                        let expiry = super::leases::expire_at(grant, sent + lease, lease, ctx);
                        (Vec::new(), Some(expiry))
                    }
                };
                self.grants.insert(
                    grant,
                    Grant {
                        ids,
                        status,
                        watched,
                        expiry,
                        fixed: lease.map(|lease| (sent + lease, lease)),
                    },
                );
                let guard = PermitGuard::new(
                    ctx.address().recipient(),
                    ctx.address().recipient(),
                    self.node.arbiter.errands().clone(),
                    self.name.clone(),
                    grant,
                    shown,
                    lease,
                    watching,
                )
                .timed(HoldTimer::start(self.kind, &self.name, &self.node.config));
                let _ = slot.send(Ok(guard));
            }
        }
        self.refresh_keepalive(ctx);
    }
}

impl Handler<Wake> for SemaphoreActor {
    type Result = ();

    fn handle(&mut self, _: Wake, ctx: &mut Context<Self>) {
        tracing::trace!(semaphore = %self.name, "woken");
        self.nudge(ctx);
    }
}
