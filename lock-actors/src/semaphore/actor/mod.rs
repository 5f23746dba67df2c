//! The semaphore actor: one per (node, semaphore name, kind) in use. It queues local
//! waiters, lets only the head contend in Redis, and keeps expirable permits alive.

mod acquire;
mod leases;
mod settle;
mod update;

pub(crate) use update::UpdatePermitLease;

use super::grant::Grant;
use super::guard::{PermitGuard, PermitId, ReturnPermits, SemaphoreGuard};
use super::lease_entry::PermitWatch;
use super::{
    AcquireExpirablePermits, AcquirePermits, AddPermits, AvailablePermits, Kind, ReleasePermits,
    SemaphoreKeys, SetPermits, TrySetPermits, ADD, AVAILABLE, SET, TRY_SET,
};
use crate::config::positive_millis;
use crate::error::LockError;
use crate::keys::LockName;
use crate::node::{Node, Unsubscribe};
use crate::registry::Registry;
use crate::reply::{Deferred, ReplySlot};
use crate::runtime::{Closing, Errand};
use crate::script::ScriptCall;
use crate::telemetry;
use crate::wait_queue::driver::{QueueActor, QueueCore, Queued};
use crate::wait_queue::{Asker, Retry, WaitQueue, Waiter};
use actix::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

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
/// permit-expirable semaphore it puts the lease-less permits it handed out on the node's
/// permit lease list, which the node's renewal service renews every lease/3. The actor lives while anyone holds its
/// address (handles, guards) or it has waiters or held permits, then stops.
///
/// Get its address with [`Semaphore::actor`](crate::Semaphore::actor) or
/// [`PermitExpirableSemaphore::actor`](crate::PermitExpirableSemaphore::actor), and send it
/// [`AcquirePermits`] / [`ReleasePermits`] (plain), [`AcquireExpirablePermits`] /
/// [`ReleasePermit`](crate::messages::ReleasePermit) (permit-expirable), [`TrySetPermits`], [`SetPermits`], [`AddPermits`] and
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
    /// The local waiters, what the head is doing, and their timers.
    waiters: QueueCore<Waiting>,
    /// Our own address while we are busy, so nobody's dropped handle stops us.
    keepalive: Option<Addr<SemaphoreActor>>,
    /// Plain permits out through guards made here: while any are, we stay alive to hear
    /// of their return.
    plain_out: u64,
    /// Permit-expirable permits handed out by this actor and not yet released.
    grants: HashMap<u64, Grant>,
    next_grant: u64,
    /// The node's permit lease list: lease-less permits go on it while held.
    permit_watch: Arc<PermitWatch<SemaphoreActor>>,
    /// Give-backs and releases on their way to Redis.
    background: usize,
    /// One errand of the client's while `background` is not zero, so a close waits for it.
    background_errand: Option<Errand>,
    /// The client is closing: its errand, kept until no waiter or try is left here.
    closing: Option<Errand>,
}

/// Where a waiter's answer goes: a guard of the semaphore's kind.
enum Reply {
    Plain(ReplySlot<Result<SemaphoreGuard, LockError>>),
    Expirable(ReplySlot<Result<PermitGuard, LockError>>),
}

/// The semaphore's part of a local waiter: what it asks for and where its answer goes.
pub(crate) struct Waiting {
    /// Its last try found no key: the semaphore's permits were never set.
    unset: bool,
    permits: u32,
    lease: Option<Duration>,
    reply: Reply,
    /// Counts it in the waiters gauge while it is queued; dropped before its asker hears
    /// the answer, so an asker never sees itself still counted.
    queued: telemetry::Queued,
}

impl Asker for Waiting {
    fn left(&self) -> bool {
        match &self.reply {
            Reply::Plain(slot) => slot.is_closed(),
            Reply::Expirable(slot) => slot.is_closed(),
        }
    }
}

impl Reply {
    /// Resolves when the asker drops its request (or it has been answered).
    fn closed(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        match self {
            Reply::Plain(slot) => Box::pin(slot.closed()),
            Reply::Expirable(slot) => Box::pin(slot.closed()),
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
/// A count (or number of permits) Redis is about to answer.
type BoxedCount = std::pin::Pin<Box<dyn std::future::Future<Output = Result<i64, LockError>>>>;

fn disarm(timer: Option<SpawnHandle>, ctx: &mut Context<SemaphoreActor>) {
    if let Some(timer) = timer {
        ctx.cancel_future(timer);
    }
}

impl Queued for Waiting {
    fn asker_left(&self) -> impl std::future::Future<Output = ()> + 'static {
        self.reply.closed()
    }

    fn fail(self, error: LockError) {
        self.queued.leave();
        self.reply.fail(error);
    }
}

impl QueueActor for SemaphoreActor {
    type Data = Waiting;

    fn name(&self) -> &LockName {
        &self.name
    }

    fn core(&mut self) -> &mut QueueCore<Waiting> {
        &mut self.waiters
    }

    fn attempt(&mut self, id: u64, ctx: &mut Context<Self>) {
        SemaphoreActor::attempt(self, id, ctx);
    }

    fn subscribe(&mut self, ctx: &mut Context<Self>) {
        SemaphoreActor::subscribe(self, ctx);
    }

    fn time_out(&mut self, waiter: Waiter<Waiting>, ctx: &mut Context<Self>) {
        SemaphoreActor::time_out(self, waiter, ctx);
    }

    fn driven(&mut self, ctx: &mut Context<Self>) {
        self.refresh_keepalive(ctx);
    }
}

impl SemaphoreActor {
    pub(crate) fn new(
        node: Arc<Node>,
        registry: Arc<SemaphoreRegistry>,
        name: LockName,
        kind: Kind,
        id: u64,
        permit_watch: Arc<PermitWatch<SemaphoreActor>>,
    ) -> Self {
        SemaphoreActor {
            keys: SemaphoreKeys::new(&name, kind),
            node,
            registry,
            name,
            kind,
            id,
            waiters: QueueCore::new(WaitQueue::new(Retry::TransientOnce)),
            keepalive: None,
            plain_out: 0,
            grants: HashMap::new(),
            next_grant: 1,
            permit_watch,
            background: 0,
            background_errand: None,
            closing: None,
        }
    }

    fn watchdog_lease(&self) -> Duration {
        self.node.config.watchdog_timeout
    }

    fn wrong_kind(&self, hint: &str) -> LockError {
        let kind = self.kind.rules().describe();
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
        if self.background == 0 {
            self.background_errand = None;
        } else if self.background_errand.is_none() {
            self.background_errand = Some(self.node.arbiter.errands().start());
        }
        if self.waiters.queue.is_empty() && !self.waiters.queue.trying() {
            self.closing = None;
        }
        let busy = !self.waiters.queue.is_empty()
            || self.waiters.queue.trying()
            || !self.grants.is_empty()
            || self.plain_out > 0
            || self.background > 0;
        if !busy {
            self.keepalive = None;
        } else if self.keepalive.is_none() {
            self.keepalive = Some(ctx.address());
        }
    }

    /// Returns permits that nobody will use (an acquire whose asker left, the rest of a lost
    /// grant, or an acquire whose answer was lost).
    fn give_back(&mut self, permits: u32, ids: Vec<PermitId>, ctx: &mut Context<Self>) {
        let call =
            self.kind
                .rules()
                .give_back_call(&self.keys, self.node.commands.pubsub, permits, &ids);
        let request = self
            .node
            .commands
            .clone()
            .eval::<redis::Value>(call, self.name.clone());
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

crate::reply::handles_detached!(SemaphoreActor);

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
        if self.waiters.queue.ever_subscribed() {
            self.node.supervisor.do_send(Unsubscribe {
                channel: self.keys.channel.clone(),
                id: self.id,
            });
        }
        // Dropping the status senders tells every guard that nothing renews its permits.
        for (_, grant) in self.grants.drain() {
            for id in grant.watched {
                self.permit_watch.unregister(id);
            }
        }
    }
}

impl Handler<Closing> for SemaphoreActor {
    type Result = ();

    /// Fails every waiter with `Shutdown` (a head whose try is in Redis hears its answer
    /// first); give-backs and releases under way go on, counted by `background`.
    fn handle(&mut self, msg: Closing, ctx: &mut Context<Self>) {
        self.closing = Some(msg.0);
        let effects = self.waiters.queue.close();
        self.drive(effects, ctx);
    }
}

impl Handler<AcquirePermits> for SemaphoreActor {
    type Result = Deferred<Result<SemaphoreGuard, LockError>>;

    fn handle(&mut self, msg: AcquirePermits, ctx: &mut Context<Self>) -> Self::Result {
        if self.kind.rules().by_id() {
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
        if !self.kind.rules().by_id() {
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
        if self.kind.rules().by_id() {
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
        let returning = self.add_permits_back(msg.permits, ctx);
        // Counted in `background` from here on.
        drop(msg.errand);
        returning
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
