//! The semaphore actor: one per (node, semaphore name, kind) in use. It queues local
//! waiters, lets only the head contend in Redis, and keeps expirable permits alive.

mod leases;

use super::guard::{PermitGuard, PermitId, PermitStatus, ReturnPermits, SemaphoreGuard};
use super::{
    AcquireExpirablePermits, AcquirePermits, AddPermits, AvailablePermits, Kind, ReleasePermits,
    SemaphoreKeys, SetPermits, TrySetPermits, ACQUIRE, ADD, AVAILABLE, EXPIRABLE_ACQUIRE, SET,
    TRY_SET,
};
use crate::config::positive_millis;
use crate::error::LockError;
use crate::keys::LockName;
use crate::lock::{Deferred, ReplySlot};
use crate::node::{Node, Subscription, Unsubscribe, Wake};
use crate::registry::Registry;
use crate::script::ScriptCall;
use actix::prelude::*;
use leases::Grant;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long a waiter sleeps without news before trying again: a release message lost on
/// the way (or a release by a client that does not publish) costs at most this much.
const FALLBACK_POLL: Duration = Duration::from_secs(5);
/// Retry delay after a Redis error while waiting (the wait bound still applies).
const ERROR_RETRY: Duration = Duration::from_millis(100);
/// Waits longer than this are treated as this long (an `Instant` cannot reach further).
const LONGEST_WAIT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
/// Most permits one permit-expirable acquire may take: each is a zset member and an argument.
const MOST_EXPIRABLE_PERMITS: u32 = 10_000;
/// The live semaphore actors of one node: one per (kind, name) with local interest.
pub(crate) type SemaphoreRegistry = Registry<(Kind, LockName), SemaphoreActor>;

/// The actor of one semaphore on one node, plain or permit-expirable: it takes and releases
/// permits for every local caller and queues local waiters in FIFO order.
///
/// Only the head of the local queue asks Redis, so one process never stampedes a
/// semaphore; it is woken by the count published on `redisson_sc:{name}` at every release,
/// or by a timer (at most 5 s, or the next permit's expiry) if that message is lost. After
/// the head is served the next waiter tries at once, since permits may be left. For a
/// permit-expirable semaphore it also renews the lease-less permits it handed out, in one
/// script call per renewal round, every lease/3. The actor lives while anyone holds its
/// address (handles, guards) or it has waiters or held permits, then stops.
///
/// Get its address with [`Semaphore::actor`](crate::Semaphore::actor) or
/// [`PermitExpirableSemaphore::actor`](crate::PermitExpirableSemaphore::actor), and send it
/// [`AcquirePermits`] / [`ReleasePermits`] (plain), [`AcquireExpirablePermits`] /
/// [`ReleasePermit`](crate::ReleasePermit) (permit-expirable), [`TrySetPermits`], [`SetPermits`], [`AddPermits`] and
/// [`AvailablePermits`] (both). A message for the other kind fails with
/// [`LockError::InvalidConfig`].
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::messages::{AcquirePermits, TrySetPermits};
/// use actix_distributed_lock::LockClient;
/// use std::time::Duration;
///
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let actor = client.semaphore("exports")?.actor()?;
/// actor.send(TrySetPermits { permits: 2 }).await??;
/// let permits = actor.send(AcquirePermits { permits: 1, wait: Duration::from_secs(5) }).await??;
/// permits.release().await?;
/// # Ok(()) }
/// ```
pub struct SemaphoreActor {
    node: Arc<Node>,
    /// The registry this actor leaves when it stops.
    registry: Arc<SemaphoreRegistry>,
    name: LockName,
    kind: Kind,
    keys: SemaphoreKeys,
    id: u64,
    waiters: VecDeque<Waiter>,
    next_waiter: u64,
    attempt_in_flight: bool,
    /// A release was announced while an attempt was in flight: retry instead of sleeping.
    wake_pending: bool,
    sleep: Option<SpawnHandle>,
    subscription: Subscription,
    /// Our own address while we are busy, so nobody's dropped handle stops us.
    keepalive: Option<Addr<SemaphoreActor>>,
    /// Plain permits out through guards made here: while any are, we stay alive to hear
    /// of their return.
    plain_out: u64,
    /// Permit-expirable permits handed out by this actor and not yet released.
    grants: HashMap<u64, Grant>,
    next_grant: u64,
    renewal: Option<SpawnHandle>,
    renewals_in_flight: usize,
    /// Give-backs and releases on their way to Redis.
    background: usize,
}

/// Where a waiter's answer goes: a guard of the semaphore's kind.
enum Reply {
    Plain(ReplySlot<Result<SemaphoreGuard, LockError>>),
    Expirable(ReplySlot<Result<PermitGuard, LockError>>),
}

impl Reply {
    fn is_closed(&self) -> bool {
        match self {
            Reply::Plain(slot) => slot.is_closed(),
            Reply::Expirable(slot) => slot.is_closed(),
        }
    }

    fn fail(&self, error: LockError) {
        match self {
            Reply::Plain(slot) => {
                let _ = slot.send(Err(error));
            }
            Reply::Expirable(slot) => {
                let _ = slot.send(Err(error));
            }
        }
    }
}

struct Waiter {
    id: u64,
    permits: u32,
    lease: Option<Duration>,
    started: Instant,
    deadline: Instant,
    reply: Reply,
    attempts: u32,
    /// A try that got no answer is tried once more at once: a connection that dropped while
    /// idle fails its next command, and the connection manager reconnects.
    retried: bool,
    last_error: Option<LockError>,
    /// Armed only once the waiter has to wait: an uncontended acquire never needs it.
    deadline_timer: Option<SpawnHandle>,
}

/// What one try found.
enum Tried {
    Taken,
    /// Too few permits; the next permit-expirable permit expires this soon (if any does).
    Short {
        next_expiry: Option<Duration>,
    },
}

fn tried(reply: &[i64]) -> Option<Tried> {
    match reply {
        [1, ..] => Some(Tried::Taken),
        [0, _, ms] if *ms >= 0 => Some(Tried::Short {
            // One more millisecond: the script takes back expiries at or before its clock.
            next_expiry: Some(Duration::from_millis(ms.unsigned_abs() + 1)),
        }),
        [0, ..] => Some(Tried::Short { next_expiry: None }),
        _ => None,
    }
}

/// A count (or number of permits) Redis is about to answer.
type BoxedCount = std::pin::Pin<Box<dyn std::future::Future<Output = Result<i64, LockError>>>>;

fn disarm(timer: Option<SpawnHandle>, ctx: &mut Context<SemaphoreActor>) {
    if let Some(timer) = timer {
        ctx.cancel_future(timer);
    }
}

impl SemaphoreActor {
    pub(crate) fn new(
        node: Arc<Node>,
        registry: Arc<SemaphoreRegistry>,
        name: LockName,
        kind: Kind,
        id: u64,
    ) -> Self {
        SemaphoreActor {
            keys: SemaphoreKeys::new(&name, kind),
            node,
            registry,
            name,
            kind,
            id,
            waiters: VecDeque::new(),
            next_waiter: 1,
            attempt_in_flight: false,
            wake_pending: false,
            sleep: None,
            subscription: Subscription::NEVER,
            keepalive: None,
            plain_out: 0,
            grants: HashMap::new(),
            next_grant: 1,
            renewal: None,
            renewals_in_flight: 0,
            background: 0,
        }
    }

    fn watchdog_lease(&self) -> Duration {
        self.node.config.watchdog_timeout
    }

    fn wrong_kind(&self, hint: &str) -> LockError {
        let kind = match self.kind {
            Kind::Plain => "a plain semaphore",
            Kind::Expirable => "a permit-expirable semaphore",
        };
        LockError::invalid_config(format!("`{}` is {kind}: {hint}", self.name))
    }

    fn check_permits(&self, permits: u32) -> Result<(), LockError> {
        if permits == 0 {
            return Err(LockError::invalid_config(format!(
                "a permit count for semaphore `{}` must be at least 1 (got 0)",
                self.name
            )));
        }
        Ok(())
    }

    fn refresh_keepalive(&mut self, ctx: &mut Context<Self>) {
        let busy = !self.waiters.is_empty()
            || self.attempt_in_flight
            || !self.grants.is_empty()
            || self.plain_out > 0
            || self.background > 0
            || self.renewals_in_flight > 0;
        if !busy {
            self.keepalive = None;
        } else if self.keepalive.is_none() {
            self.keepalive = Some(ctx.address());
        }
    }

    /// Queues an acquire and lets the queue move.
    fn enqueue(
        &mut self,
        permits: u32,
        lease: Option<Duration>,
        wait: Duration,
        reply: Reply,
        ctx: &mut Context<Self>,
    ) {
        let id = self.next_waiter;
        self.next_waiter += 1;
        let started = Instant::now();
        let waiter = Waiter {
            id,
            permits,
            lease,
            started,
            deadline: started + wait.min(LONGEST_WAIT),
            reply,
            attempts: 0,
            retried: false,
            last_error: None,
            deadline_timer: None,
        };
        self.withdraw_gone(ctx);
        let tries_now = self.waiters.is_empty() && !self.attempt_in_flight && self.sleep.is_none();
        self.waiters.push_back(waiter);
        if !tries_now {
            self.arm_deadline(id, ctx);
        }
        self.pump(ctx);
        self.refresh_keepalive(ctx);
    }

    /// Lets the head of the queue contend, unless it already is or is asleep (use
    /// [`nudge`](Self::nudge) when there is news).
    fn pump(&mut self, ctx: &mut Context<Self>) {
        if self.attempt_in_flight
            || self.subscription == Subscription::Pending
            || self.sleep.is_some()
        {
            return;
        }
        let now = Instant::now();
        while let Some(head) = self.waiters.front() {
            if head.reply.is_closed() {
                if let Some(gone) = self.waiters.pop_front() {
                    disarm(gone.deadline_timer, ctx);
                }
            } else if head.attempts > 0 && head.deadline <= now {
                if let Some(late) = self.waiters.pop_front() {
                    self.time_out(late, ctx);
                }
            } else {
                break;
            }
        }
        let Some(head) = self.waiters.front() else {
            if self.waiters.capacity() > 0 {
                self.waiters = VecDeque::new();
            }
            self.refresh_keepalive(ctx);
            return;
        };
        if head.attempts > 0 && self.subscription.due(now) {
            self.subscribe(ctx);
            return;
        }
        self.attempt(ctx);
    }

    /// Permits may be free now (a release was heard or made here): end the head's sleep.
    fn nudge(&mut self, ctx: &mut Context<Self>) {
        if self.attempt_in_flight || self.subscription == Subscription::Pending {
            self.wake_pending = true;
        }
        if let Some(sleep) = self.sleep.take() {
            ctx.cancel_future(sleep);
        }
        self.pump(ctx);
    }

    /// Subscribes to the semaphore's channel before the head's second try, so no release
    /// between the two tries goes unheard.
    fn subscribe(&mut self, ctx: &mut Context<Self>) {
        self.subscription = Subscription::Pending;
        let request = Subscription::request(
            &self.node.supervisor,
            self.keys.channel.clone(),
            self.id,
            ctx.address().recipient::<Wake>().downgrade(),
        );
        ctx.spawn(request.into_actor(self).map(|state, act, ctx| {
            act.subscription = state;
            act.pump(ctx);
        }));
    }

    fn attempt(&mut self, ctx: &mut Context<Self>) {
        let Some(head) = self.waiters.front() else {
            return;
        };
        let (id, permits, lease) = (head.id, head.permits, head.lease);
        let (invocation, ids) = match self.kind {
            Kind::Plain => {
                let mut invocation = ScriptCall::with_key(
                    ACQUIRE.get(self.node.commands.pubsub),
                    self.keys.count.as_str(),
                );
                invocation.arg(permits);
                (invocation, Vec::new())
            }
            Kind::Expirable => {
                let lease_ms = lease.unwrap_or(self.watchdog_lease()).as_millis() as u64;
                let ids: Vec<PermitId> = (0..permits).map(|_| PermitId::random()).collect();
                let mut invocation = self
                    .keys
                    .invocation(EXPIRABLE_ACQUIRE.get(self.node.commands.pubsub));
                invocation.arg(lease_ms);
                for permit in &ids {
                    invocation.arg(permit.raw.as_slice());
                }
                (invocation, ids)
            }
        };
        self.attempt_in_flight = true;
        self.wake_pending = false;
        let sent = Instant::now();
        let request = self
            .node
            .commands
            .clone()
            .eval::<Vec<i64>>(invocation, self.name.clone());
        ctx.spawn(request.into_actor(self).map(move |reply, act, ctx| {
            act.attempt_in_flight = false;
            let result = reply.and_then(|reply| {
                tried(&reply).ok_or_else(|| LockError::Unavailable {
                    node: act.node.commands.label().to_string(),
                    reason: "unexpected reply to the semaphore acquire script".into(),
                })
            });
            act.attempted(id, permits, ids, sent, result, ctx);
            act.pump(ctx);
            act.refresh_keepalive(ctx);
        }));
        self.refresh_keepalive(ctx);
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
        if let Err(LockError::Unavailable { .. }) = &result {
            // The script may have run: give back what it may have taken.
            if ids.is_empty() {
                tracing::warn!(semaphore = %self.name, permits,
                    "an acquire got no answer; if it ran, its permits stay taken");
            } else {
                self.give_back(permits, ids.clone(), ctx);
            }
        }
        let Some(pos) = self.waiters.iter().position(|w| w.id == id) else {
            if let Ok(Tried::Taken) = result {
                // The asker left while its permits were on the way: give them back.
                self.give_back(permits, ids, ctx);
            }
            return;
        };
        let now = Instant::now();
        match result {
            Ok(Tried::Taken) => {
                if let Some(waiter) = self.waiters.remove(pos) {
                    self.grant(waiter, ids, sent, ctx);
                }
            }
            Ok(Tried::Short { next_expiry }) => {
                let waiter = &mut self.waiters[pos];
                waiter.attempts += 1;
                waiter.last_error = None;
                if now >= waiter.deadline {
                    if let Some(late) = self.waiters.remove(pos) {
                        self.time_out(late, ctx);
                    }
                    return;
                }
                let until_deadline = waiter.deadline - now;
                let will_subscribe = self.subscription.due(now);
                self.arm_deadline(id, ctx);
                if self.wake_pending || will_subscribe {
                    return; // `pump` retries at once (after subscribing, if need be)
                }
                let pause = next_expiry
                    .map_or(FALLBACK_POLL, |expiry| expiry.min(FALLBACK_POLL))
                    .min(until_deadline);
                tracing::trace!(semaphore = %self.name, permits, ?pause, "waiting for permits");
                self.sleep_for(pause, ctx);
            }
            Err(error) => {
                let waiter = &mut self.waiters[pos];
                let transient = error.is_transient();
                if transient && !waiter.retried {
                    waiter.retried = true;
                    waiter.last_error = Some(error);
                    return; // `pump` tries once more at once
                }
                if !transient || now >= waiter.deadline {
                    if let Some(failed) = self.waiters.remove(pos) {
                        disarm(failed.deadline_timer, ctx);
                        tracing::debug!(semaphore = %self.name, %error, "acquire failed");
                        failed.reply.fail(error);
                    }
                    return;
                }
                waiter.attempts += 1;
                let pause = ERROR_RETRY.min(waiter.deadline - now);
                waiter.last_error = Some(error);
                self.arm_deadline(id, ctx);
                self.sleep_for(pause, ctx);
            }
        }
    }

    /// Drops waiters whose askers went away (a cancelled acquire), so a newcomer never
    /// queues behind them. A head whose try is in flight stays: its answer decides.
    fn withdraw_gone(&mut self, ctx: &mut Context<Self>) {
        let keep_head = self.attempt_in_flight;
        let mut head_gone = false;
        let mut pos = 0;
        while pos < self.waiters.len() {
            if self.waiters[pos].reply.is_closed() && !(pos == 0 && keep_head) {
                head_gone |= pos == 0;
                if let Some(gone) = self.waiters.remove(pos) {
                    disarm(gone.deadline_timer, ctx);
                }
            } else {
                pos += 1;
            }
        }
        if head_gone {
            // Its sleep was its own: whoever heads the queue now has not tried yet.
            if let Some(sleep) = self.sleep.take() {
                ctx.cancel_future(sleep);
            }
        }
    }

    /// Starts waiter `id`'s deadline timer, if it has none yet.
    fn arm_deadline(&mut self, id: u64, ctx: &mut Context<Self>) {
        let Some(waiter) = self.waiters.iter_mut().find(|w| w.id == id) else {
            return;
        };
        if waiter.deadline_timer.is_none() {
            let left = waiter.deadline.saturating_duration_since(Instant::now());
            waiter.deadline_timer = Some(ctx.run_later(left, move |act, ctx| act.expire(id, ctx)));
        }
    }

    fn sleep_for(&mut self, pause: Duration, ctx: &mut Context<Self>) {
        if let Some(old) = self.sleep.take() {
            ctx.cancel_future(old);
        }
        self.sleep = Some(ctx.run_later(pause, |act, ctx| {
            act.sleep = None;
            act.pump(ctx);
        }));
    }

    fn time_out(&mut self, waiter: Waiter, ctx: &mut Context<Self>) {
        disarm(waiter.deadline_timer, ctx);
        let waited = waiter.started.elapsed();
        let error = match waiter.last_error {
            Some(transient) if transient.is_transient() => transient,
            _ => LockError::Timeout {
                name: self.name.to_string(),
                waited,
            },
        };
        tracing::debug!(semaphore = %self.name, permits = waiter.permits, ?waited,
            "wait for permits timed out");
        waiter.reply.fail(error);
    }

    /// The deadline timer of waiter `id` fired.
    fn expire(&mut self, id: u64, ctx: &mut Context<Self>) {
        let Some(pos) = self.waiters.iter().position(|w| w.id == id) else {
            return;
        };
        if pos == 0 && self.attempt_in_flight {
            return; // its attempt's answer decides
        }
        if let Some(waiter) = self.waiters.remove(pos) {
            self.time_out(waiter, ctx);
        }
        if pos == 0 {
            // The next waiter has not been asleep on its own timer.
            if let Some(sleep) = self.sleep.take() {
                ctx.cancel_future(sleep);
            }
            self.pump(ctx);
        }
        self.refresh_keepalive(ctx);
    }

    fn grant(
        &mut self,
        waiter: Waiter,
        ids: Vec<PermitId>,
        sent: Instant,
        ctx: &mut Context<Self>,
    ) {
        disarm(waiter.deadline_timer, ctx);
        tracing::debug!(semaphore = %self.name, permits = waiter.permits,
            waited = ?waiter.started.elapsed(), lease = ?waiter.lease, "permits acquired");
        match waiter.reply {
            Reply::Plain(slot) => {
                self.plain_out += u64::from(waiter.permits);
                let permits = SemaphoreGuard::new(ctx.address(), self.name.clone(), waiter.permits);
                // An undelivered guard is dropped here, and its drop gives the permits back.
                let _ = slot.send(Ok(permits));
            }
            Reply::Expirable(slot) => {
                let grant = self.next_grant;
                self.next_grant += 1;
                let lease = waiter.lease;
                let valid_until = sent + lease.unwrap_or(self.watchdog_lease());
                // A fixed lease ends then; a renewed one then unless a renewal moves it.
                let held_for = lease.unwrap_or(self.watchdog_lease());
                let expiry = Some(leases::expire_at(grant, valid_until, held_for, ctx));
                let (status, watching) = watch::channel(PermitStatus::Held);
                let shown: Vec<String> = ids.iter().map(|id| id.hex.clone()).collect();
                self.grants.insert(
                    grant,
                    Grant {
                        ids,
                        lease,
                        status,
                        valid_until,
                        expiry,
                    },
                );
                if lease.is_none() && self.renewal.is_none() {
                    let every = self.node.config.renew_interval();
                    self.renewal = Some(ctx.run_interval(every, |act, ctx| act.renew(ctx)));
                }
                let guard = PermitGuard::new(
                    ctx.address(),
                    self.name.clone(),
                    grant,
                    shown,
                    lease,
                    watching,
                );
                let _ = slot.send(Ok(guard));
            }
        }
        self.refresh_keepalive(ctx);
    }

    /// Returns permits that nobody will use (an acquire whose asker left, the rest of a lost
    /// grant, or an acquire whose answer was lost).
    fn give_back(&mut self, permits: u32, ids: Vec<PermitId>, ctx: &mut Context<Self>) {
        let request: BoxedCount = match self.kind {
            Kind::Plain => self.add_request(i64::from(permits)),
            Kind::Expirable => {
                let releasing = self.release_request(&ids);
                Box::pin(async move { releasing.await.map(|(released, _)| released) })
            }
        };
        self.background += 1;
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            act.background -= 1;
            match result {
                Ok(_) => act.nudge(ctx),
                Err(error) => tracing::warn!(semaphore = %act.name, %error, permits,
                    "could not give back unused permits"),
            }
            act.refresh_keepalive(ctx);
        }));
        self.refresh_keepalive(ctx);
    }

    fn add_request(&self, delta: i64) -> BoxedCount {
        let mut invocation =
            ScriptCall::with_key(ADD.get(self.node.commands.pubsub), self.keys.count.as_str());
        invocation.key(self.keys.channel.as_str()).arg(delta);
        Box::pin(
            self.node
                .commands
                .clone()
                .eval(invocation, self.name.clone()),
        )
    }

    /// Runs a script that changes or reads the count; a change may free permits for the
    /// local head.
    fn count_request(
        &mut self,
        invocation: ScriptCall,
        ctx: &mut Context<Self>,
    ) -> ResponseActFuture<Self, Result<i64, LockError>> {
        let request = self
            .node
            .commands
            .clone()
            .eval::<i64>(invocation, self.name.clone());
        self.background += 1;
        self.refresh_keepalive(ctx);
        Box::pin(request.into_actor(self).map(|result, act, ctx| {
            act.background -= 1;
            if matches!(result, Ok(available) if available > 0) {
                act.nudge(ctx);
            }
            act.refresh_keepalive(ctx);
            result
        }))
    }
}

fn refuse<T: 'static>(error: LockError) -> ResponseActFuture<SemaphoreActor, Result<T, LockError>> {
    Box::pin(fut::ready(Err(error)))
}

impl Actor for SemaphoreActor {
    type Context = Context<Self>;

    /// Leaves the registry and stops, unless someone took our address from the registry
    /// meanwhile (both happen under the registry's lock).
    fn stopping(&mut self, ctx: &mut Context<Self>) -> Running {
        let key = (self.kind, self.name.clone());
        if self.registry.retire(&key, self.id, || ctx.connected()) {
            Running::Stop
        } else {
            Running::Continue
        }
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        if self.subscription != (Subscription::NEVER) {
            self.node.supervisor.do_send(Unsubscribe {
                channel: self.keys.channel.clone(),
                id: self.id,
            });
        }
        // Dropping the status senders tells every guard that nothing renews its permits.
        self.grants.clear();
    }
}

impl Handler<AcquirePermits> for SemaphoreActor {
    type Result = Deferred<Result<SemaphoreGuard, LockError>>;

    fn handle(&mut self, msg: AcquirePermits, ctx: &mut Context<Self>) -> Self::Result {
        if self.kind != Kind::Plain {
            return Deferred::ready(Err(self.wrong_kind("send AcquireExpirablePermits")));
        }
        if let Err(error) = self.check_permits(msg.permits) {
            return Deferred::ready(Err(error));
        }
        let slot = ReplySlot::new();
        self.enqueue(msg.permits, None, msg.wait, Reply::Plain(slot.clone()), ctx);
        Deferred(slot)
    }
}

impl Handler<AcquireExpirablePermits> for SemaphoreActor {
    type Result = Deferred<Result<PermitGuard, LockError>>;

    fn handle(&mut self, msg: AcquireExpirablePermits, ctx: &mut Context<Self>) -> Self::Result {
        if self.kind != Kind::Expirable {
            return Deferred::ready(Err(self.wrong_kind("send AcquirePermits")));
        }
        if let Err(error) = self.check_permits(msg.permits) {
            return Deferred::ready(Err(error));
        }
        if msg.permits > MOST_EXPIRABLE_PERMITS {
            return Deferred::ready(Err(LockError::invalid_config(format!(
                "at most {MOST_EXPIRABLE_PERMITS} permits of semaphore `{}` per acquire (got {})",
                self.name, msg.permits
            ))));
        }
        if let Some(lease) = msg.lease {
            let what = format!("the lease of semaphore `{}`", self.name);
            if let Err(error) = positive_millis(&what, lease) {
                return Deferred::ready(Err(error));
            }
        }
        let slot = ReplySlot::new();
        let reply = Reply::Expirable(slot.clone());
        self.enqueue(msg.permits, msg.lease, msg.wait, reply, ctx);
        Deferred(slot)
    }
}

impl Handler<ReleasePermits> for SemaphoreActor {
    type Result = ResponseActFuture<Self, Result<(), LockError>>;

    fn handle(&mut self, msg: ReleasePermits, ctx: &mut Context<Self>) -> Self::Result {
        if self.kind != Kind::Plain {
            return refuse(self.wrong_kind("release its permits by id (ReleasePermit)"));
        }
        if let Err(error) = self.check_permits(msg.permits) {
            return refuse(error);
        }
        self.add_permits_back(msg.permits, ctx)
    }
}

impl Handler<ReturnPermits> for SemaphoreActor {
    type Result = ResponseActFuture<Self, Result<(), LockError>>;

    fn handle(&mut self, msg: ReturnPermits, ctx: &mut Context<Self>) -> Self::Result {
        self.plain_out = self.plain_out.saturating_sub(u64::from(msg.permits));
        if !msg.to_redis {
            self.refresh_keepalive(ctx);
            return Box::pin(fut::ready(Ok(())));
        }
        self.add_permits_back(msg.permits, ctx)
    }
}

impl SemaphoreActor {
    /// Adds released plain permits to the count, and lets the local head try.
    fn add_permits_back(
        &mut self,
        permits: u32,
        ctx: &mut Context<Self>,
    ) -> ResponseActFuture<Self, Result<(), LockError>> {
        let request = self.add_request(i64::from(permits));
        self.background += 1;
        self.refresh_keepalive(ctx);
        Box::pin(request.into_actor(self).map(move |result, act, ctx| {
            act.background -= 1;
            match &result {
                Ok(_) => {
                    tracing::debug!(semaphore = %act.name, permits, "permits released");
                    act.nudge(ctx);
                }
                Err(error) => {
                    tracing::warn!(semaphore = %act.name, permits, %error, "releasing permits failed");
                }
            }
            act.refresh_keepalive(ctx);
            result.map(|_| ())
        }))
    }
}

impl Handler<TrySetPermits> for SemaphoreActor {
    type Result = ResponseActFuture<Self, Result<bool, LockError>>;

    fn handle(&mut self, msg: TrySetPermits, ctx: &mut Context<Self>) -> Self::Result {
        if let Err(error) = self.check_permits(msg.permits) {
            return refuse(error);
        }
        let mut invocation = ScriptCall::with_key(
            TRY_SET.get(self.node.commands.pubsub),
            self.keys.count.as_str(),
        );
        invocation.key(self.keys.channel.as_str()).arg(msg.permits);
        Box::pin(
            self.count_request(invocation, ctx)
                .map(|result, _, _| result.map(|set| set == 1)),
        )
    }
}

impl Handler<SetPermits> for SemaphoreActor {
    type Result = ResponseActFuture<Self, Result<i64, LockError>>;

    fn handle(&mut self, msg: SetPermits, ctx: &mut Context<Self>) -> Self::Result {
        let mut invocation = self.keys.invocation(SET.get(self.node.commands.pubsub));
        invocation.arg(msg.permits);
        self.count_request(invocation, ctx)
    }
}

impl Handler<AddPermits> for SemaphoreActor {
    type Result = ResponseActFuture<Self, Result<i64, LockError>>;

    fn handle(&mut self, msg: AddPermits, ctx: &mut Context<Self>) -> Self::Result {
        if msg.delta.unsigned_abs() > u64::from(u32::MAX) {
            return refuse(LockError::invalid_config(format!(
                "permits added to semaphore `{}` must be within ±{} (got {})",
                self.name,
                u32::MAX,
                msg.delta
            )));
        }
        let mut invocation =
            ScriptCall::with_key(ADD.get(self.node.commands.pubsub), self.keys.count.as_str());
        invocation.key(self.keys.channel.as_str()).arg(msg.delta);
        self.count_request(invocation, ctx)
    }
}

impl Handler<AvailablePermits> for SemaphoreActor {
    type Result = ResponseActFuture<Self, Result<i64, LockError>>;

    fn handle(&mut self, _: AvailablePermits, ctx: &mut Context<Self>) -> Self::Result {
        let invocation = self
            .keys
            .invocation(AVAILABLE.get(self.node.commands.pubsub));
        self.count_request(invocation, ctx)
    }
}

impl Handler<Wake> for SemaphoreActor {
    type Result = ();

    fn handle(&mut self, _: Wake, ctx: &mut Context<Self>) {
        tracing::trace!(semaphore = %self.name, "woken");
        self.nudge(ctx);
    }
}
