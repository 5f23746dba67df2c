//! How the lock actor takes the lock: it drives the wait queue (only the local head
//! contends in Redis) and carries out what the queue asks for.

use super::{Hold, Holder, LockActor, Reconcile, Waiting, FORGOTTEN};
use crate::config::{positive_millis, SpinBackoff, SpinDelays};
use crate::error::LockError;
use crate::lease::status::StatusSender;
use crate::lock::direct::{run_acquire, TryReply};
use crate::lock::direct_messages::AcquireRequest;
use crate::lock::fast_path::TryAnswer;
use crate::lock::guard::GuardLink;
use crate::lock::kind::AcquireArgs;
use crate::lock::machine::{Gate, TryOutcome};
use crate::lock::{Acquire, AcquireFenced, LockGuard, LockOwner};
use crate::node::{Subscription, Wake};
use crate::reply::{Deferred, ReplySlot};
use crate::telemetry::{self, HoldTimer};
use crate::wait_queue::driver::{self, QueueActor};
use crate::wait_queue::{Effect, Gate as QueueGate, Granted, Waiter, ERROR_RETRY, UNSYNCED_RETRY};
use actix::prelude::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Poll period for a lock whose key has no expiry (never written by us or Redisson).
const NO_TTL_POLL: Duration = Duration::from_secs(1);

/// How long a waiter whose try found the lock busy sleeps without news: what the acquire
/// answered (`pttl`: the holder's remaining lease, so a lost unlock message costs no more
/// than that; for a fair lock, the wait for an earlier waiter when the lock is free), or a
/// poll when the key has none. A fair waiter (its queue's wait `allowance` given) also polls every
/// third of its allowance, so a lost wake-up on its own channel costs no more than that.
pub(crate) fn busy_retry_in(pttl: i64, allowance: Option<Duration>) -> Duration {
    let ttl = u64::try_from(pttl)
        .map(Duration::from_millis)
        .unwrap_or(NO_TTL_POLL);
    match allowance {
        Some(allowance) => ttl.min(allowance / 3),
        None => ttl,
    }
}

/// How long a spin waiter whose try found the lock busy sleeps: the next pause of its
/// backoff, or less when the holder's lease (`pttl`) runs out sooner.
pub(crate) fn poll_retry_in(pttl: i64, delays: &mut SpinDelays) -> Duration {
    busy_retry_in(pttl, None).min(delays.next())
}

impl LockActor {
    /// The longest lease any local hold may still have in Redis.
    pub(super) fn longest_local_lease(&self) -> Duration {
        self.machine
            .holders()
            .flat_map(|(_, holder)| holder.holds.iter())
            .map(|hold| hold.lease.unwrap_or(self.watchdog_lease()))
            .max()
            .unwrap_or(self.watchdog_lease())
    }

    pub(super) fn grant(
        &mut self,
        waiter: Waiter<Waiting>,
        sent: Instant,
        token: Option<u64>,
        ctx: &mut Context<Self>,
    ) {
        let Waiter {
            id, started, data, ..
        } = waiter;
        let Waiting {
            owner,
            lease,
            reply,
            queued,
            ..
        } = data;
        driver::forget(self, id, ctx);
        let hold = self.direct.next_hold();
        let holder = self.machine.holder_entry(owner, || Holder {
            holds: Vec::new(),
            status: StatusSender::held().0,
            merged: Vec::new(),
            watch_id: None,
            expiry: None,
        });
        holder.holds.push(Hold::new(hold, lease, sent));
        let status = holder.status.subscribe();
        self.arm_lease_keeping(owner, sent, ctx);
        tracing::debug!(lock = %self.name, owner = owner.id(), waited = ?started.elapsed(),
            ?lease, "acquired");
        self.direct.hand_out(|| Arc::new(ctx.address()));
        let link: Arc<dyn GuardLink> = self.direct.clone();
        let guard = LockGuard::new(link, self.name.clone(), owner, hold, lease, status)
            .with_token(token)
            .timed(HoldTimer::start(
                self.kind.label(token.is_some()),
                &self.name,
                &self.node.config,
            ));
        queued.leave();
        // An undelivered guard is dropped here, and its drop releases the hold.
        let _ = reply.send(Ok(guard));
    }

    pub(super) fn time_out(&mut self, waiter: Waiter<Waiting>, ctx: &mut Context<Self>) {
        driver::forget(self, waiter.id, ctx);
        let waited = waiter.started.elapsed();
        // The last error seen (one retried within the wait, or the reconcile's that held
        // the waiter back) says more than "timed out": a busy lock clears it.
        let error = match waiter.last_error {
            Some(error) => error,
            None => LockError::timeout(self.name.to_string(), waited),
        };
        tracing::debug!(lock = %self.name, owner = waiter.data.owner.id(), ?waited,
            "wait timed out");
        waiter.data.queued.leave();
        let _ = waiter.data.reply.send(Err(error));
    }

    /// A polling kind's waiter's pauses, by `backoff` or Redisson's default; `None` for the
    /// kinds whose waiters subscribe.
    fn delays(&self, backoff: Option<SpinBackoff>) -> Option<SpinDelays> {
        self.kind
            .polls()
            .then(|| backoff.unwrap_or_default().delays())
    }

    /// Queues an acquire (fenced or not; a spin waiter's by its backoff) and lets the queue
    /// move.
    fn enqueue(
        &mut self,
        msg: AcquireRequest,
        ctx: &mut Context<Self>,
    ) -> Deferred<Result<LockGuard, LockError>> {
        let (fenced, backoff) = (msg.fenced, msg.backoff);
        self.take_charge(ctx);
        if self.node.is_stopped() {
            return Deferred::ready(Err(LockError::Shutdown));
        }
        if fenced && !self.kind.fences() {
            return Deferred::ready(Err(LockError::invalid_config(format!(
                "lock `{}` is a {} lock; fencing tokens come with reentrant locks only",
                self.name,
                self.kind.as_str()
            ))));
        }
        if self.kind.per_owner() && self.owner != Some(msg.owner) {
            return Deferred::ready(Err(LockError::invalid_config(format!(
                "this actor of fair lock `{}` takes it for another owner; ask \
                 LockClient::fair_lock_actor(name, owner) for the owner's own actor",
                self.name
            ))));
        }
        if !self.kind.reentrant() && self.machine.holder(&msg.owner).is_some() {
            return Deferred::ready(Err(LockError::AlreadyHeld {
                name: self.name.to_string(),
            }));
        }
        if let Some(lease) = msg.lease {
            if let Err(error) =
                positive_millis(&format!("the lease of lock `{}`", self.name), lease)
            {
                return Deferred::ready(Err(error));
            }
        }
        let reply = ReplySlot::new();
        let data = Waiting {
            owner: msg.owner,
            lease: msg.lease,
            fenced,
            reply: reply.clone(),
            queued: telemetry::Queued::new(self.kind.label(fenced), &self.name, &self.node.config),
            backoff: self.delays(backoff),
        };
        let waiter = self.waiters.queue.waiter(Instant::now(), msg.wait, data);
        self.enqueue_waiter(waiter, ctx);
        Deferred(reply)
    }

    /// Queues `waiter`: a re-entry goes first (it never queues behind other owners: that
    /// would deadlock), everyone else at the back.
    pub(super) fn enqueue_waiter(&mut self, waiter: Waiter<Waiting>, ctx: &mut Context<Self>) {
        let ahead = self.machine.holder(&waiter.data.owner).is_some();
        let effects = self.waiters.queue.enqueue(waiter, ahead);
        self.drive(effects, ctx);
    }

    /// Lets the head go if the machine says it may (the queue is idle): settles a doubt
    /// first, and holds the head back while a local holder, a force-unlock or a doubt of
    /// its owner stands in the way. Called by the queue driver's `drive`, the one rule every
    /// change to the queue or to the holders follows.
    pub(super) fn pump(&mut self, ctx: &mut Context<Self>) -> Vec<Effect<Waiting>> {
        self.settle_reconcile(ctx);
        let now = Instant::now();
        let longest_lease = self.longest_local_lease();
        let (kind, name, machine) = (self.kind, &self.name, &self.machine);
        let reconcile_error = &self.reconcile_error;
        let config = &self.node.config;
        self.waiters
            .queue
            .pump(now, |head| match machine.gate(&head.data.owner) {
                Gate::Go => QueueGate::Go,
                Gate::AlreadyHeld => QueueGate::Refuse(LockError::AlreadyHeld {
                    name: name.to_string(),
                }),
                Gate::LocalHolder => {
                    // Sleep at most the holder's lease, in case the lock is lost without our
                    // hearing of it.
                    let pause = longest_lease.min(head.deadline.saturating_duration_since(now));
                    if head.attempts == 0 {
                        telemetry::contended(kind.label(head.data.fenced), name, config);
                    }
                    QueueGate::Hold { pause, error: None }
                }
                Gate::Forcing => QueueGate::Hold {
                    pause: ERROR_RETRY,
                    error: None,
                },
                // Its own deadline still holds meanwhile (Redis may stay away longer than
                // it waits).
                Gate::Settling => QueueGate::Hold {
                    pause: ERROR_RETRY,
                    error: reconcile_error.as_deref().cloned(),
                },
            })
    }

    /// The lock may be free now (a local holder let go, or the head changed): end the
    /// head's sleep and let it try.
    pub(super) fn wake_head(&mut self, ctx: &mut Context<Self>) {
        let effects = self.waiters.queue.wake();
        self.drive(effects, ctx);
    }

    pub(super) fn attempt(&mut self, id: u64, ctx: &mut Context<Self>) {
        let Some(head) = self.waiters.queue.get(id) else {
            return;
        };
        let (owner, lease, fenced) = (head.data.owner, head.data.lease, head.data.fenced);
        let waits = head.deadline > Instant::now();
        let lease_ms = lease.unwrap_or(self.watchdog_lease()).as_millis() as u64;
        let patience_ms = self.node.config.fair_wait_timeout.as_millis() as u64;
        let field = self.field(owner);
        let invocation = self.kind.acquire_args(AcquireArgs {
            name: &self.name,
            field: &field,
            lease_ms,
            fenced,
            fair_patience_ms: patience_ms,
            pubsub: self.node.commands.pubsub,
            waits,
        });
        let sent = Instant::now();
        let ticket = self.machine.try_sent();
        let request = run_acquire(self.node.commands.clone(), invocation, self.name.clone());
        ctx.spawn(request.into_actor(self).map(move |mut result, act, ctx| {
            let answer = match &result {
                Ok((None, ..)) => TryAnswer::Granted,
                Ok((Some(_), ..)) => TryAnswer::Busy,
                Err(LockError::Unavailable { .. }) => TryAnswer::Unanswered,
                Err(LockError::NotReplicated { .. }) => TryAnswer::NotReplicated,
                Err(_) => TryAnswer::Refused,
            };
            let lease_kept = lease.unwrap_or(act.watchdog_lease());
            let errands = act.node.arbiter.errands();
            let doubt = || Reconcile::new(lease_kept, None, errands.start());
            let mut outcome = act.machine.try_answered(owner, ticket, answer, doubt);
            if let (TryOutcome::Grant, Ok((None, _, true))) = (outcome, &result) {
                // Redis had no hold of the owner's: any counted here are gone, told before
                // the new hold is made or given back.
                let (steps, after) =
                    act.machine
                        .first_hold(owner, ticket, &mut &*act.direct, doubt);
                act.carry_out(steps, FORGOTTEN, ctx);
                outcome = after;
            }
            match outcome {
                // A force-unlock came while it was on its way: the grant may be deleted
                // already. Settled as a lost reply; the waiter tries again once it is.
                TryOutcome::Stale => result = Ok((Some(0), None, false)),
                TryOutcome::Doubted => {
                    tracing::debug!(lock = %act.name, owner = owner.id(),
                        "reply lost; will reconcile");
                    // The try may still run (held up on the way): it may put us in the fair
                    // queue, so leave it once nobody waits here.
                    act.joined |= act.kind.per_owner();
                }
                TryOutcome::Grant | TryOutcome::Other => {}
            }
            act.attempted(id, owner, lease, sent, result, ctx);
        }));
    }

    pub(super) fn attempted(
        &mut self,
        id: u64,
        owner: LockOwner,
        lease: Option<Duration>,
        sent: Instant,
        result: Result<TryReply, LockError>,
        ctx: &mut Context<Self>,
    ) {
        if let Err(LockError::NotReplicated { .. }) = result {
            // Granted in Redis, but not on enough replicas: not a hold to hand out.
            self.give_back(owner, lease, ctx);
        }
        let now = Instant::now();
        let effects = match result {
            Ok((None, token, _)) => {
                match self.waiters.queue.granted(id) {
                    Granted::To(waiter) => {
                        self.joined = false; // the acquire script took us out of the queue
                        self.grant(waiter, sent, token, ctx);
                    }
                    // The asker gave up while its grant was on the way: give the hold back.
                    Granted::Unclaimed => self.give_back(owner, lease, ctx),
                }
                Vec::new()
            }
            Ok((Some(pttl), ..)) => {
                if let Some(waiter) = self
                    .waiters
                    .queue
                    .get(id)
                    .filter(|waiter| waiter.attempts == 0)
                {
                    let kind = self.kind.label(waiter.data.fenced);
                    telemetry::contended(kind, &self.name, &self.node.config);
                }
                // A busy answer puts a fair owner in the Redis queue, whether or not its
                // waiter is still here (one that left meanwhile is withdrawn below).
                self.joined |= self.kind.per_owner();
                let allowance = self
                    .kind
                    .per_owner()
                    .then_some(self.node.config.fair_wait_timeout);
                let waiting = self.waiters.queue.get_mut(id);
                let ttl = match waiting.and_then(|waiter| waiter.data.backoff.as_mut()) {
                    Some(delays) => poll_retry_in(pttl, delays),
                    None => busy_retry_in(pttl, allowance),
                };
                tracing::trace!(lock = %self.name, owner = owner.id(), ?ttl, "busy");
                self.waiters.queue.busy(id, now, ttl)
            }
            Err(error) => self.waiters.queue.failed(id, now, error),
        };
        self.drive(effects, ctx);
    }

    /// Subscribes to the unlock channel before the head's second try, so no unlock between
    /// the two tries goes unheard.
    pub(super) fn subscribe(&mut self, ctx: &mut Context<Self>) {
        let request = Subscription::request(
            &self.node.supervisor,
            self.channel(),
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
}

/// The public messages come down to the one request.
impl Handler<AcquireFenced> for LockActor {
    type Result = Deferred<Result<LockGuard, LockError>>;

    fn handle(&mut self, msg: AcquireFenced, ctx: &mut Context<Self>) -> Self::Result {
        self.enqueue(
            AcquireRequest::new(msg.owner, msg.lease, msg.wait, true),
            ctx,
        )
    }
}

impl Handler<Acquire> for LockActor {
    type Result = Deferred<Result<LockGuard, LockError>>;

    fn handle(&mut self, msg: Acquire, ctx: &mut Context<Self>) -> Self::Result {
        self.enqueue(
            AcquireRequest::new(msg.owner, msg.lease, msg.wait, false),
            ctx,
        )
    }
}

impl Handler<AcquireRequest> for LockActor {
    type Result = Deferred<Result<LockGuard, LockError>>;

    fn handle(&mut self, mut msg: AcquireRequest, ctx: &mut Context<Self>) -> Self::Result {
        match msg.after_direct.take() {
            None => self.enqueue(msg, ctx),
            Some(error) => self.after_direct(msg, error, ctx),
        }
    }
}

impl LockActor {
    /// Queues a caller whose fast-path try found the lock busy (`error` `None`) or got no
    /// answer.
    fn after_direct(
        &mut self,
        msg: AcquireRequest,
        error: Option<LockError>,
        ctx: &mut Context<Self>,
    ) -> Deferred<Result<LockGuard, LockError>> {
        self.take_charge(ctx);
        let reply = ReplySlot::new();
        let failed = error.is_some();
        if !failed {
            // Its fast-path try found the lock busy.
            telemetry::contended(self.kind.label(msg.fenced), &self.name, &self.node.config);
        }
        let mut backoff = self.delays(msg.backoff);
        // A spin waiter whose fast-path try found the lock busy pauses before its next one.
        let rest = backoff.as_mut().filter(|_| !failed).map(SpinDelays::next);
        let data = Waiting {
            owner: msg.owner,
            lease: msg.lease,
            fenced: msg.fenced,
            reply: reply.clone(),
            queued: telemetry::Queued::new(
                self.kind.label(msg.fenced),
                &self.name,
                &self.node.config,
            ),
            backoff,
        };
        let now = Instant::now();
        let mut waiter = self.waiters.queue.waiter(now, msg.wait, data);
        if let Some(LockError::NotReplicated { .. }) = error {
            // Its fast-path grant had no replica confirm it (and is being given back): the
            // first of the retries the queue makes, after the same pause, within its wait.
            waiter.attempts = 1;
            waiter.unsynced = 1;
            waiter.not_before(now + UNSYNCED_RETRY);
            waiter.last_error = error;
            self.enqueue_waiter(waiter, ctx);
            return Deferred(reply);
        }
        if failed {
            // One more try within a response timeout (the caller's wait applies again once
            // Redis answers).
            waiter.deadline = now + self.node.config.response_timeout;
        }
        waiter.attempts = u32::from(!failed);
        waiter.last_error = error;
        waiter.retried = failed;
        waiter.rest = rest;
        self.enqueue_waiter(waiter, ctx);
        Deferred(reply)
    }
}

impl Handler<Wake> for LockActor {
    type Result = ();

    fn handle(&mut self, wake: Wake, ctx: &mut Context<Self>) {
        tracing::trace!(lock = %self.name, read_unlock = wake.all, "woken");
        let effects = self.waiters.queue.news();
        self.drive(effects, ctx);
    }
}
