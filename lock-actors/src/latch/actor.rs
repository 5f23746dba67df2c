//! The latch actor: one per (node, latch name) in use. It parks the local waiters of one
//! latch in the wait queue (only the head reads the count; the rest follow it as soon as
//! it goes), listens on the latch's channel while anyone waits, and runs the latch's
//! scripts.

use super::{
    count_call, count_down_call, delete_call, open_count, try_set_call, AwaitLatch, CountDown,
    DeleteLatch, GetCount, TrySetCount, MOST_COUNT,
};
use crate::error::LockError;
use crate::keys::LockName;
use crate::node::{Node, Subscription, Unsubscribe, Wake};
use crate::registry::Registry;
use crate::reply::{Deferred, ReplySlot};
use crate::runtime::{Closing, Errand};
use crate::script::ScriptCall;
use crate::telemetry;
use crate::wait_queue::driver::{self, QueueActor, QueueCore, Queued};
use crate::wait_queue::{Asker, Granted, Retry, Subscribed, WaitQueue, Waiter};
use actix::prelude::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the head waiter sleeps without news before it reads the count again: a
/// message lost on the way, or a count gone without one (a key deleted by hand, or
/// expired), costs a waiter at most this much.
pub(crate) const FALLBACK_POLL: Duration = Duration::from_secs(5);

/// Nobody waits on the latch: no waiter is queued and nothing is under way for one (a read
/// or a subscription request). The actor then drops its subscription (the model check
/// follows the same rule).
pub(crate) fn nobody_waits<T: Asker>(queue: &WaitQueue<T>) -> bool {
    queue.is_empty() && queue.idle()
}

/// The live latch actors of one node: one per latch name with local interest.
pub(crate) type LatchRegistry = Registry<LockName, LatchActor>;

/// The actor of one count-down latch on one node: it runs the latch's scripts for every
/// local caller and parks local waiters until the count reads zero.
///
/// Only the head of its local queue reads the count; when it finds zero it goes, and the
/// next waiter reads it at once (so a count set again in between keeps the rest waiting,
/// as in Redisson, whose waiters each read the count too). It subscribes to
/// `redisson_countdownlatch__channel__{name}` through the node's one subscription
/// connection before the head's second read and drops the subscription once no one waits;
/// every message wakes the head, and a timer (5 s) reads the count again in case a message
/// was lost. It lives while anyone holds its address or it has waiters or scripts under
/// way, then stops.
///
/// Get its address with [`CountDownLatch::actor`](crate::CountDownLatch::actor) and send
/// it [`TrySetCount`], [`CountDown`], [`GetCount`], [`DeleteLatch`] and [`AwaitLatch`].
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::messages::{AwaitLatch, CountDown, TrySetCount};
/// use std::time::Duration;
///
/// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let actor = client.count_down_latch("import:done")?.actor()?;
/// actor.send(TrySetCount { count: 1 }).await??;
/// actor.send(CountDown).await??;
/// actor.send(AwaitLatch { wait: Some(Duration::from_secs(1)) }).await??;
/// # Ok(()) }
/// ```
pub struct LatchActor {
    node: Arc<Node>,
    /// The registry this actor leaves when it stops.
    registry: Arc<LatchRegistry>,
    name: LockName,
    channel: String,
    id: u64,
    /// The local waiters, what the head is doing, and their timers.
    waiters: QueueCore<Waiting>,
    /// Our own address while we are busy, so nobody's dropped handle stops us.
    keepalive: Option<Addr<LatchActor>>,
    /// We asked the node to route the channel to us and have not withdrawn it since
    /// (whether Redis confirmed it or not: a failed subscription stays routed, for the
    /// node to subscribe again at its next reconnect).
    routed: bool,
    /// Scripts on their way to Redis.
    background: usize,
    /// One errand of the client's while `background` is not zero, so a close lets a
    /// count-down (or any call) already sent finish.
    background_errand: Option<Errand>,
    /// The client is closing: its errand, kept until no waiter or read is left here.
    closing: Option<Errand>,
}

/// One local waiter: where its answer goes.
pub(crate) struct Waiting {
    reply: ReplySlot<Result<(), LockError>>,
    /// Counts it in the waiters gauge while it is queued.
    queued: telemetry::Queued,
}

impl Asker for Waiting {
    fn left(&self) -> bool {
        self.reply.is_closed()
    }
}

impl Queued for Waiting {
    fn asker_left(&self) -> impl std::future::Future<Output = ()> + 'static {
        self.reply.closed()
    }

    fn fail(self, error: LockError) {
        self.queued.leave();
        let _ = self.reply.send(Err(error));
    }
}

impl QueueActor for LatchActor {
    type Data = Waiting;

    fn name(&self) -> &LockName {
        &self.name
    }

    fn core(&mut self) -> &mut QueueCore<Waiting> {
        &mut self.waiters
    }

    fn attempt(&mut self, id: u64, ctx: &mut Context<Self>) {
        let call = count_call(&self.name);
        let request = self
            .node
            .commands
            .clone()
            .eval::<i64>(call, self.name.clone());
        ctx.spawn(request.into_actor(self).map(move |count, act, ctx| {
            let count = count.map(open_count);
            act.read(id, count, ctx);
        }));
    }

    fn subscribe(&mut self, ctx: &mut Context<Self>) {
        let request = Subscription::request(
            &self.node.supervisor,
            self.channel.clone(),
            self.id,
            ctx.address().recipient::<Wake>().downgrade(),
        );
        self.routed = true;
        ctx.spawn(request.into_actor(self).map(|state, act, ctx| {
            let state = state
                .map(Into::into)
                .map_err(|e| e.about(act.name.unmapped()));
            let effects = act.waiters.queue.subscription_ended(state);
            act.drive(effects, ctx);
        }));
    }

    fn time_out(&mut self, mut waiter: Waiter<Waiting>, ctx: &mut Context<Self>) {
        driver::forget(self, waiter.id, ctx);
        let (error, waited) = waiter.timeout_error(self.name.unmapped());
        tracing::debug!(latch = %self.name, ?waited, "wait for the latch timed out");
        waiter.data.queued.leave();
        let _ = waiter.data.reply.send(Err(error));
    }

    fn driven(&mut self, ctx: &mut Context<Self>) {
        self.refresh_keepalive(ctx);
    }
}

impl LatchActor {
    pub(crate) fn new(
        node: Arc<Node>,
        registry: Arc<LatchRegistry>,
        name: LockName,
        id: u64,
    ) -> Self {
        LatchActor {
            channel: name.latch_channel(),
            node,
            registry,
            name,
            id,
            waiters: QueueCore::new(WaitQueue::new(Retry::TransientOnce)),
            keepalive: None,
            routed: false,
            background: 0,
            background_errand: None,
            closing: None,
        }
    }

    /// The head's read of the count came back: zero lets it go.
    fn read(&mut self, id: u64, count: Result<u64, LockError>, ctx: &mut Context<Self>) {
        let now = Instant::now();
        let effects = match count {
            Ok(0) => {
                if let Granted::To(waiter) = self.waiters.queue.granted(id) {
                    driver::forget(self, waiter.id, ctx);
                    tracing::debug!(latch = %self.name, waited = ?waiter.started.elapsed(),
                        "latch open");
                    waiter.data.queued.leave();
                    let _ = waiter.data.reply.send(Ok(()));
                }
                Vec::new()
            }
            Ok(count) => {
                if self.waiters.queue.get(id).is_some_and(|w| w.attempts == 0) {
                    telemetry::contended(telemetry::Kind::Latch, &self.name, &self.node.config);
                }
                tracing::trace!(latch = %self.name, count, "waiting for the latch");
                self.waiters.queue.busy(id, now, FALLBACK_POLL)
            }
            Err(error) => self.waiters.queue.failed(id, now, error),
        };
        self.drive(effects, ctx);
    }

    /// The count may be zero now (a message came, or a script here found or made it so):
    /// the head reads it again at once.
    fn nudge(&mut self, ctx: &mut Context<Self>) {
        let effects = self.waiters.queue.news();
        self.drive(effects, ctx);
    }

    fn refresh_keepalive(&mut self, ctx: &mut Context<Self>) {
        if self.background == 0 {
            self.background_errand = None;
        } else if self.background_errand.is_none() {
            self.background_errand = Some(self.node.arbiter.errands().start());
        }
        let nobody_waits = nobody_waits(&self.waiters.queue);
        if nobody_waits {
            self.closing = None;
            if self.routed {
                // Nobody waits: nothing is kept on the node for this latch.
                self.unsubscribe();
            }
        }
        if nobody_waits && self.background == 0 {
            self.keepalive = None;
        } else if self.keepalive.is_none() {
            self.keepalive = Some(ctx.address());
        }
    }

    fn unsubscribe(&mut self) {
        self.routed = false;
        self.waiters
            .queue
            .subscribed(Subscribed::No { retry_after: None });
        self.node.supervisor.do_send(Unsubscribe {
            channel: self.channel.clone(),
            id: self.id,
        });
    }

    /// Runs one latch script; `opens` says from its reply whether the latch may be open
    /// now (the local head then reads the count at once).
    fn run<T: redis::FromRedisValue + 'static>(
        &mut self,
        call: ScriptCall,
        opens: fn(&T) -> bool,
        ctx: &mut Context<Self>,
    ) -> ResponseActFuture<Self, Result<T, LockError>> {
        let request = self
            .node
            .commands
            .clone()
            .eval::<T>(call, self.name.clone());
        self.background += 1;
        self.refresh_keepalive(ctx);
        Box::pin(request.into_actor(self).map(move |result, act, ctx| {
            act.background -= 1;
            if result.as_ref().is_ok_and(opens) {
                act.nudge(ctx);
            } else {
                act.refresh_keepalive(ctx);
            }
            result
        }))
    }
}

fn refuse<T: 'static>(error: LockError) -> ResponseActFuture<LatchActor, Result<T, LockError>> {
    Box::pin(fut::ready(Err(error)))
}

crate::reply::handles_detached!(LatchActor);

impl Actor for LatchActor {
    type Context = Context<Self>;

    /// Leaves the registry and stops, unless someone took our address from the registry
    /// meanwhile (both happen under the registry's lock).
    fn stopping(&mut self, ctx: &mut Context<Self>) -> Running {
        if self
            .registry
            .retire(&self.name, self.id, || ctx.connected())
        {
            Running::Stop
        } else {
            Running::Continue
        }
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        if self.waiters.queue.ever_subscribed() {
            self.node.supervisor.do_send(Unsubscribe {
                channel: self.channel.clone(),
                id: self.id,
            });
        }
    }
}

impl Handler<Closing> for LatchActor {
    type Result = ();

    /// Fails every waiter with `Shutdown` (a head whose read is in Redis hears its answer
    /// first); scripts under way go on, counted by `background`.
    fn handle(&mut self, msg: Closing, ctx: &mut Context<Self>) {
        self.closing = Some(msg.0);
        let effects = self.waiters.queue.close();
        self.drive(effects, ctx);
    }
}

impl Handler<Wake> for LatchActor {
    type Result = ();

    /// Any message on the channel (or a reconnect) means: read the count again.
    fn handle(&mut self, _: Wake, ctx: &mut Context<Self>) {
        tracing::trace!(latch = %self.name, "woken");
        self.nudge(ctx);
    }
}

impl Handler<AwaitLatch> for LatchActor {
    type Result = Deferred<Result<(), LockError>>;

    fn handle(&mut self, msg: AwaitLatch, ctx: &mut Context<Self>) -> Self::Result {
        let slot = ReplySlot::new();
        let data = Waiting {
            reply: slot.clone(),
            queued: telemetry::Queued::new(telemetry::Kind::Latch, &self.name, &self.node.config),
        };
        let wait = msg.wait.unwrap_or(Duration::MAX);
        let waiter = self.waiters.queue.waiter(Instant::now(), wait, data);
        let effects = self.waiters.queue.enqueue(waiter, false);
        self.drive(effects, ctx);
        Deferred(slot)
    }
}

impl Handler<TrySetCount> for LatchActor {
    type Result = ResponseActFuture<Self, Result<bool, LockError>>;

    fn handle(&mut self, msg: TrySetCount, ctx: &mut Context<Self>) -> Self::Result {
        if msg.count == 0 || msg.count > MOST_COUNT {
            return refuse(LockError::invalid_config(format!(
                "the count of latch `{}` must be from 1 to {MOST_COUNT} (got {})",
                self.name, msg.count
            )));
        }
        let call = try_set_call(&self.name, self.node.commands.pubsub, msg.count);
        Box::pin(
            self.run::<i64>(call, |_| false, ctx)
                .map(|result, _, _| result.map(|set| set == 1)),
        )
    }
}

impl Handler<CountDown> for LatchActor {
    type Result = ResponseActFuture<Self, Result<u64, LockError>>;

    fn handle(&mut self, _: CountDown, ctx: &mut Context<Self>) -> Self::Result {
        let call = count_down_call(&self.name, self.node.commands.pubsub);
        Box::pin(
            self.run::<i64>(call, |left| *left <= 0, ctx)
                .map(|result, _, _| result.map(open_count)),
        )
    }
}

impl Handler<GetCount> for LatchActor {
    type Result = ResponseActFuture<Self, Result<u64, LockError>>;

    fn handle(&mut self, _: GetCount, ctx: &mut Context<Self>) -> Self::Result {
        let call = count_call(&self.name);
        Box::pin(
            self.run::<i64>(call, |count| *count <= 0, ctx)
                .map(|result, _, _| result.map(open_count)),
        )
    }
}

impl Handler<DeleteLatch> for LatchActor {
    type Result = ResponseActFuture<Self, Result<bool, LockError>>;

    fn handle(&mut self, _: DeleteLatch, ctx: &mut Context<Self>) -> Self::Result {
        let call = delete_call(&self.name, self.node.commands.pubsub);
        Box::pin(
            self.run::<i64>(call, |deleted| *deleted == 1, ctx)
                .map(|result, _, _| result.map(|deleted| deleted == 1)),
        )
    }
}
