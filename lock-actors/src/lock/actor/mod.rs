//! The lock actor: one per (node, lock name) in use. It takes, renews and releases the lock
//! for every local owner; `acquire` drives its wait queue, `release` lets go and keeps
//! holds alive, `reconcile` settles holds whose Redis call got no answer, `forced` runs
//! force-unlocks and tells the other actors on the key; `extend` sets a hold's fixed lease
//! again, `foreign` releases for an owner known only by id.

mod acquire;
pub(crate) mod extend;
mod foreign;
#[cfg(test)]
pub(crate) use acquire::{busy_retry_in, poll_retry_in};
mod forced;
mod on_use;
mod reconcile;
mod release;

#[cfg(feature = "inspect")]
pub(crate) use forced::ForceReleaseIf;

use super::direct::Direct;
use super::direct_messages::{DirectHold, Doubted};
use super::fast_path::surely_held_until;
use super::kind::LockKind;
use super::kind::{actor_key, ActorKey};
use super::lease_entry::{HoldLost, WatchRegistry};
use super::machine::{Holds, LockMachine, Shape, Step};
use super::state::read_state;
use super::{GetState, LockGuard, LockOwner, LockState, Released};
use crate::config::SpinDelays;
use crate::error::LockError;
use crate::keys::LockName;
use crate::lease::ends::kept_lease;
use crate::lease::list::Loss;
use crate::lease::status::{HoldStatus, StatusSender};
use crate::node::{Node, Unsubscribe};
use crate::registry::Registry;
use crate::reply::ReplySlot;
use crate::runtime::{Closing, Errand};
use crate::telemetry;
use crate::wait_queue::driver::{QueueActor, QueueCore, Queued};
use crate::wait_queue::{Asker, Effect, Retry, WaitQueue, Waiter, ERROR_RETRY};
use actix::prelude::*;
use on_use::{Made, OnUse};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The live lock actors of one node, each with what it shares with fast-path callers.
pub(crate) type LockRegistry = Registry<ActorKey, LockActor, Arc<Direct<LockActor>>>;

/// Why a holder ends normally (every other reason is a loss).
const RELEASED: &str = "released";

/// Why a holder is lost when its owner's next grant is Redis's first hold of the owner.
const FORGOTTEN: &str = "Redis had forgotten its holds when its owner took the lock again";

/// The actor of one lock name on one node: it takes, renews and releases the lock for every
/// local owner, and queues local waiters in FIFO order.
///
/// Only the head of the local queue contends in Redis, so one process never stampedes a
/// lock; it is woken by the unlock message on `redisson_lock__channel:{name}`, or by a timer
/// at the holder's remaining lease if that message is lost. The actor lives while anyone
/// holds its address (lock handles, guards) or it has holders or waiters, then stops.
///
/// Get its address with [`LockClient::lock_actor`](crate::LockClient::lock_actor) and send
/// it [`Acquire`](crate::messages::Acquire), [`Release`](crate::messages::Release),
/// [`Renew`](crate::messages::Renew), [`ForceRelease`](crate::messages::ForceRelease) and
/// [`GetState`](crate::messages::GetState).
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::messages::Acquire;
/// use actix_distributed_lock::{LockClient, LockOwner};
/// use std::time::Duration;
///
/// # async fn demo(client: LockClient) -> Result<(), Box<dyn std::error::Error>> {
/// let actor = client.lock_actor("order:42")?;
/// let owner = LockOwner::new();
/// let outer = actor.send(Acquire { owner, lease: None, wait: Duration::from_secs(5) }).await??;
/// let inner = actor.send(Acquire { owner, lease: None, wait: Duration::ZERO }).await??;
/// drop(inner);
/// outer.unlock().await?;
/// # Ok(()) }
/// ```
pub struct LockActor {
    node: Arc<Node>,
    kind: LockKind,
    name: LockName,
    /// The one owner a per-owner actor (fair lock) serves; `None` for shared actors.
    owner: Option<LockOwner>,
    /// A fair lock waiter of ours is (or may be) in the Redis queue: leave it when nobody
    /// waits here.
    joined: bool,
    /// A withdraw is sent or waits to be sent again: the errand a close waits for.
    withdrawing: Option<Box<Withdrawing>>,
    id: u64,
    /// The holders, the doubts to reconcile, the clearings of lost holds, the force-unlocks
    /// and the tries in flight, with every rule about them (see `super::machine`): the
    /// actor carries out what it decides.
    /// Made on first use, as the waiters: an actor that only stands by for the fast path
    /// has neither.
    machine: OnUse<LockMachine<LockOwner, Holder, Reconcile>>,
    /// The local waiters, what the head is doing, and their timers.
    waiters: OnUse<QueueCore<Waiting>>,
    /// Our own address while we have holders or waiters, so nobody's dropped handle stops us.
    keepalive: Option<Addr<LockActor>>,
    /// What the actor shares with fast-path callers (see `super::direct`).
    direct: Arc<Direct<LockActor>>,
    /// The registry this actor leaves when it stops.
    registry: Arc<LockRegistry>,
    /// The node's lease list: watchdog-leased holds go on it.
    watchdog: Arc<WatchRegistry<LockActor>>,
    /// A look again at the reconciles is armed (see `settle_reconcile`).
    reconcile_recheck: bool,
    /// Why the last reconcile failed: what a waiter held up by it reports at its deadline.
    reconcile_error: Option<Box<LockError>>,
    /// The client is closing: its errand, kept until no waiter or try is left here (a
    /// withdraw from the fair queue, if one is due, has its own errand by then).
    closing: Option<Errand>,
}

/// One hold to check against Redis once it answers again (its owner is the machine's).
struct Reconcile {
    lease: Duration,
    /// Past this, the lease has run out in Redis anyway: nothing left to settle.
    until: Instant,
    /// An unlock waiting for this settlement to report: its reply and the holds left.
    unlock: Option<(ReplySlot<Result<Released, LockError>>, u32)>,
    /// What a closing client waits for, until settled (or past `until`).
    _errand: Errand,
}

struct Holder {
    holds: Vec<Hold>,
    status: StatusSender,
    /// Status channels of holds taken on the fast path while the owner already held it
    /// through the actor (rare): told whatever `status` is told.
    merged: Vec<StatusSender>,
    watch_id: Option<u64>,
    expiry: Option<SpawnHandle>,
}

impl Holds for Holder {
    fn holds(&self) -> usize {
        self.holds.len()
    }

    fn take_hold(&mut self, id: Option<u64>) -> bool {
        let at = match id {
            Some(id) => self.holds.iter().position(|h| h.id == id),
            None => self.holds.len().checked_sub(1),
        };
        at.map(|at| self.holds.remove(at)).is_some()
    }
}

impl Holder {
    fn set_status(&self, status: HoldStatus) {
        self.status.send_replace(status);
        for merged in &self.merged {
            merged.send_replace(status);
        }
    }

    /// Until when the owner's holds surely last, as its guards time it (merged holds'
    /// guards follow it).
    fn set_deadline(&self, deadline: Option<Instant>) {
        self.status.set_deadline(deadline);
    }

    /// When the owner's fixed leases surely end (the latest end) and the longest of them
    /// (whose drift allowance counts); `None` without a fixed-lease hold.
    fn fixed_end(&self) -> Option<(Instant, Duration)> {
        let until = self.holds.iter().filter_map(|h| h.until).max()?;
        let lease = self.holds.iter().filter_map(|h| h.lease).max()?;
        Some((until, lease))
    }
}

struct Hold {
    id: u64,
    /// A fixed lease; `None`: kept by the watchdog.
    lease: Option<Duration>,
    /// When a fixed lease ends: the acquire's (or a later `Renew`'s) send time plus the
    /// lease. Redis keeps the key at least that long (no script of ours shortens it while
    /// this hold is in it), so the hold is surely ours until then.
    until: Option<Instant>,
    /// The ends that lease updates on their way (sent, not answered yet) ask Redis for:
    /// one may have set the key already, so what the key keeps for this hold is the latest
    /// of these and `until` (see [`extend::key_end`]).
    claims: Vec<Instant>,
}

impl Hold {
    fn new(id: u64, lease: Option<Duration>, sent: Instant) -> Self {
        Hold {
            id,
            lease,
            until: lease.map(|lease| sent + lease),
            claims: Vec::new(),
        }
    }

    /// How long the key must keep this hold: its end, or a later one an update on its
    /// way may have set (`None`: kept by the watchdog).
    fn key_end(&self) -> Option<Instant> {
        extend::key_end(self.until, &self.claims)
    }
}

/// The lock's part of a local waiter: who asks, for what, and where the answer goes.
pub(crate) struct Waiting {
    owner: LockOwner,
    lease: Option<Duration>,
    /// Draw a fencing token with the hold.
    fenced: bool,
    reply: ReplySlot<Result<LockGuard, LockError>>,
    /// Counts it in the waiters gauge while it is queued; dropped before its asker hears
    /// the answer, so an asker never sees itself still counted.
    queued: telemetry::Queued,
    /// A spin lock waiter's pauses between tries; `None` for the kinds that subscribe.
    backoff: Option<SpinDelays>,
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

impl QueueActor for LockActor {
    type Data = Waiting;

    fn name(&self) -> &LockName {
        &self.name
    }

    fn core(&mut self) -> &mut QueueCore<Waiting> {
        &mut self.waiters
    }

    fn attempt(&mut self, id: u64, ctx: &mut Context<Self>) {
        LockActor::attempt(self, id, ctx);
    }

    fn subscribe(&mut self, ctx: &mut Context<Self>) {
        LockActor::subscribe(self, ctx);
    }

    fn time_out(&mut self, waiter: Waiter<Waiting>, ctx: &mut Context<Self>) {
        LockActor::time_out(self, waiter, ctx);
    }

    fn pump(&mut self, ctx: &mut Context<Self>) -> Vec<Effect<Waiting>> {
        LockActor::pump(self, ctx)
    }

    fn driven(&mut self, ctx: &mut Context<Self>) {
        self.refresh_keepalive(ctx);
    }
}

impl LockActor {
    pub(crate) fn new(
        node: Arc<Node>,
        kind: LockKind,
        name: LockName,
        owner: Option<LockOwner>,
        id: u64,
        direct: Arc<Direct<LockActor>>,
        registry: Arc<LockRegistry>,
    ) -> Self {
        let owner = owner.filter(|_| kind.per_owner());
        let retry = Retry::UnansweredFirstTry {
            grace: node.config.response_timeout,
        };
        LockActor {
            node,
            kind,
            owner,
            joined: false,
            withdrawing: None,
            name,
            id,
            machine: OnUse::new(Shape {
                reentrant: kind.reentrant(),
                shared: kind.shared(),
            }),
            waiters: OnUse::new((retry, kind.polls())),
            keepalive: None,
            watchdog: direct.watchdog.clone(),
            direct,
            registry,
            reconcile_recheck: false,
            reconcile_error: None,
            closing: None,
        }
    }

    /// The channel this actor's waiters are woken on (worked out when needed: an actor
    /// that never waits never stores it).
    fn channel(&self) -> String {
        match self.owner {
            Some(owner) => self.kind.wake_channel(&self.name, &self.field(owner)),
            None => self.kind.channel(&self.name),
        }
    }

    /// Takes charge: no caller acts directly from now on, the holds taken on the fast path
    /// become ours, and its calls in doubt are settled with Redis (after the holds: a doubt
    /// compares Redis's count with ours). Every handler that reads or changes holders calls
    /// it first.
    pub(super) fn take_charge(&mut self, ctx: &mut Context<Self>) {
        let steps = self.machine.take_charge(&mut &*self.direct);
        self.carry_out(steps, "it was force-unlocked", ctx);
    }

    /// Carries out what the machine decided, in its order (`why`: what a loss of every
    /// holder is reported as).
    pub(super) fn carry_out(
        &mut self,
        steps: Vec<Step<DirectHold, Doubted, LockOwner>>,
        why: &str,
        ctx: &mut Context<Self>,
    ) {
        for step in steps {
            match step {
                Step::Adopt(taken) => self.adopt(taken, ctx),
                Step::Settle(doubted) => self.settle_doubted(doubted, ctx),
                Step::LoseAll => {
                    for owner in self.machine.owners() {
                        self.lose(owner, why, ctx);
                    }
                }
                Step::Lose(owner) => {
                    if let Some(holder) = self.machine.remove(&owner) {
                        self.end_holder(owner, holder, why, ctx);
                    }
                }
            }
        }
    }

    /// Counts a hold taken on the fast path as ours (a watchdog-leased one comes with its
    /// watchdog entry registered; a fixed lease gets its expiry timer here).
    fn adopt(&mut self, taken: DirectHold, ctx: &mut Context<Self>) {
        let DirectHold {
            owner,
            hold,
            status,
            watch_id,
            lease,
            sent,
        } = taken;
        let hold = Hold::new(hold, lease, sent);
        match self.machine.holder_mut(&owner) {
            Some(holder) => {
                // The owner also holds it through us: one watchdog entry is enough.
                if let Some(watch_id) = watch_id {
                    self.watchdog.unregister(watch_id);
                }
                holder.holds.push(hold);
                // Its watchdog entry is gone: it is timed as the owner's other holds are.
                holder.status.follow(&status);
                holder.merged.push(status);
                self.arm_lease_keeping(owner, sent, ctx);
            }
            None => {
                let ended =
                    lease.is_some_and(|lease| Instant::now() >= surely_held_until(sent, lease));
                self.machine.holder_entry(owner, || Holder {
                    holds: vec![hold],
                    status,
                    merged: Vec::new(),
                    watch_id,
                    expiry: None,
                });
                if ended {
                    // Its fixed lease ran out while it waited in the slot: as the expiry
                    // timer would have, at once (a release that follows finds it gone).
                    self.lose_and_clear(owner, "its fixed lease ran out", ctx);
                } else if lease.is_some() {
                    self.arm_lease_keeping(owner, sent, ctx);
                }
            }
        }
        self.refresh_keepalive(ctx);
    }

    /// What stands for `owner` in this lock's Redis data.
    fn field(&self, owner: LockOwner) -> String {
        self.kind.field(self.node.owner_field(owner.id()))
    }

    fn watchdog_lease(&self) -> Duration {
        self.node.config.watchdog_timeout
    }

    /// The longest lease `owner`'s holds here have left: the TTL their key keeps while they
    /// remain (a watchdog-leased hold counts a whole watchdog lease, as its next renewal
    /// sets; a hold whose lease update is on its way, the later of its ends). `None` when
    /// the owner holds nothing here.
    fn kept_lease(&self, owner: LockOwner) -> Option<Duration> {
        let holds = self.machine.holder(&owner)?.holds.iter().map(Hold::key_end);
        kept_lease(holds, Instant::now(), self.watchdog_lease())
    }

    /// Whether a waiter is queued or the head's try is out (without making the queue).
    fn waiting(&self) -> bool {
        self.waiters
            .made()
            .is_some_and(|w| !w.queue.is_empty() || w.queue.trying())
    }

    fn refresh_keepalive(&mut self, ctx: &mut Context<Self>) {
        if self.joined && !self.waiting() {
            self.withdraw(ctx);
        }
        if !self.waiting() {
            self.closing = None;
        }
        let busy = self.machine.made().is_some_and(|m| m.busy())
            || self.waiting()
            || self.withdrawing.is_some();
        if !busy {
            self.keepalive = None;
            self.direct.release_to_callers();
        } else if self.keepalive.is_none() {
            self.keepalive = Some(ctx.address());
        }
    }

    /// Takes our owner out of the fair lock's Redis queue: nobody here waits any more.
    ///
    /// Sent until Redis answers: a place left behind would hold up every later waiter of
    /// the lock, in every process, until its queue deadline. A withdraw that got no answer
    /// is sent again (backing off up to [`WITHDRAW_RETRY_MAX`]) on the same connection as
    /// the tries before it, so it runs after any of them that is still on its way. It is
    /// given up when a waiter of ours queues again (its own tries say where we stand) or
    /// the client closes.
    fn withdraw(&mut self, ctx: &mut Context<Self>) {
        let Some(owner) = self.owner else {
            self.joined = false;
            return;
        };
        if let Some(withdrawing) = &self.withdrawing {
            if withdrawing.in_flight || Instant::now() < withdrawing.not_before {
                // `joined` stays: sent (again) once this one has answered or paused.
                return;
            }
        }
        let allowance_ms = self.node.config.fair_wait_timeout.as_millis() as u64;
        let Some(invocation) = self.kind.withdraw(
            &self.name,
            &self.field(owner),
            allowance_ms,
            self.node.commands.pubsub,
        ) else {
            self.joined = false;
            return;
        };
        self.joined = false;
        // Taken in the turn that emptied the queue (the one that answered a timed-out or
        // cancelled waiter), so a close that follows waits for it; kept across retries.
        let node = &self.node;
        let withdrawing = self.withdrawing.get_or_insert_with(|| {
            Box::new(Withdrawing {
                _errand: node.arbiter.errands().start(),
                in_flight: false,
                not_before: Instant::now(),
                pause: ERROR_RETRY,
            })
        });
        withdrawing.in_flight = true;
        let request = self
            .node
            .commands
            .clone()
            .eval::<i64>(invocation, self.name.clone());
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            match result {
                // Done; a try sent meanwhile that queued us again has set `joined`.
                Ok(_) => act.withdrawing = None,
                Err(error) => {
                    // It may not have run: we may still be in the queue.
                    act.joined = true;
                    if let Some(withdrawing) = act.withdrawing.as_mut() {
                        let pause = withdrawing.pause;
                        withdrawing.in_flight = false;
                        withdrawing.not_before = Instant::now() + pause;
                        withdrawing.pause = (pause * 2).min(WITHDRAW_RETRY_MAX);
                        tracing::warn!(lock = %act.name, %error, ?pause,
                            "could not leave the fair queue; trying again");
                        ctx.run_later(pause, |act, ctx| {
                            if !act.joined || act.waiting() {
                                // A waiter of ours is in line again (or was granted): its
                                // tries take over, and a later withdraw takes a new errand.
                                act.withdrawing = None;
                            }
                            act.refresh_keepalive(ctx);
                        });
                    }
                }
            }
            act.refresh_keepalive(ctx);
        }));
    }
}

/// The longest pause between two sends of a withdraw that got no answer.
const WITHDRAW_RETRY_MAX: Duration = Duration::from_secs(2);

impl Made for LockMachine<LockOwner, Holder, Reconcile> {
    type Seed = Shape;

    fn make(shape: Shape) -> Self {
        LockMachine::new(shape)
    }
}

impl Made for QueueCore<Waiting> {
    /// How a failed try is retried, and whether the kind polls (a spin lock).
    type Seed = (Retry, bool);

    fn make((retry, polls): (Retry, bool)) -> Self {
        QueueCore::new(if polls {
            WaitQueue::polling(retry)
        } else {
            WaitQueue::new(retry)
        })
    }
}

/// A withdraw from the fair queue under way (see [`LockActor::withdraw`]).
struct Withdrawing {
    /// What a closing client waits for, until Redis answered.
    _errand: Errand,
    /// Sent and not answered yet.
    in_flight: bool,
    /// After a send that got no answer: not sent again before this.
    not_before: Instant,
    /// The pause after the next send that gets no answer.
    pause: Duration,
}

impl Drop for LockActor {
    /// A hold still on the fast path dies with us (the client stopped): its guard hears of
    /// it as a loss, as for every hold the actor had.
    fn drop(&mut self) {
        // Its doubts too: whoever awaits a settlement hears `Shutdown`.
        drop(self.direct.absorb());
    }
}

crate::reply::handles_detached!(LockActor);

impl Actor for LockActor {
    type Context = Context<Self>;

    /// Leaves the registry and stops, unless someone took our address from the registry
    /// meanwhile: both happen under the registry's lock, so it never hands out a stopping
    /// actor.
    fn stopping(&mut self, ctx: &mut Context<Self>) -> Running {
        let key = actor_key(self.kind, &self.name, self.owner);
        if self.registry.retire(&key, self.id, || ctx.connected()) {
            Running::Stop
        } else {
            Running::Continue
        }
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        for watch_id in self.direct.absorb().0.filter_map(|t| t.watch_id) {
            self.watchdog.unregister(watch_id);
        }
        if self
            .waiters
            .made()
            .is_some_and(|w| w.queue.ever_subscribed())
        {
            self.node.supervisor.do_send(Unsubscribe {
                channel: self.channel(),
                id: self.id,
            });
        }
        if let Some(machine) = self.machine.made_mut() {
            for (_, holder) in machine.drain() {
                if let Some(id) = holder.watch_id {
                    self.watchdog.unregister(id);
                }
            }
        }
    }
}

impl Handler<Closing> for LockActor {
    type Result = ();

    /// Fails every waiter with `Shutdown` (a head whose try is in Redis hears its answer
    /// first), and leaves the fair queue once nobody waits.
    fn handle(&mut self, msg: Closing, ctx: &mut Context<Self>) {
        self.closing = Some(msg.0);
        let effects = self.waiters.queue.close();
        self.drive(effects, ctx);
    }
}

impl Handler<GetState> for LockActor {
    type Result = ResponseFuture<Result<LockState, LockError>>;

    fn handle(&mut self, msg: GetState, _: &mut Context<Self>) -> Self::Result {
        let field = msg.owner.map(|owner| self.field(owner));
        Box::pin(read_state(
            self.node.commands.clone(),
            self.kind,
            self.name.clone(),
            field,
        ))
    }
}

impl Handler<HoldLost> for LockActor {
    type Result = ();

    fn handle(&mut self, msg: HoldLost, ctx: &mut Context<Self>) {
        self.take_charge(ctx);
        let current = self
            .machine
            .holder(&msg.owner)
            .is_some_and(|h| h.watch_id == Some(msg.watch_id));
        if current {
            if let Some(holder) = self.machine.holder_mut(&msg.owner) {
                holder.watch_id = None; // the watchdog already dropped the entry
            }
            match msg.loss {
                Loss::Gone => self.lose(msg.owner, "the watchdog found it gone", ctx),
                // A fixed lease of the owner keeps the key longer: not lost before its end.
                Loss::Unconfirmed if self.watch_until_fixed_end(msg.owner, ctx) => {}
                // A renewal may still have reached Redis and kept the key: take it out.
                Loss::Unconfirmed => {
                    self.lose_and_clear(msg.owner, "no renewal was confirmed within its lease", ctx)
                }
            }
            self.refresh_keepalive(ctx);
        }
    }
}

/// Until when `owner`'s watchdog-leased hold of this lock surely lasts: the send time of
/// its last confirmed renewal (or of its acquire) plus the lease. `None` when the owner
/// holds no watchdog-leased hold here (never had one, released, or lost).
pub(crate) struct WatchedUntil {
    pub(crate) owner: LockOwner,
}

impl Message for WatchedUntil {
    type Result = Option<Instant>;
}

impl Handler<WatchedUntil> for LockActor {
    type Result = Option<Instant>;

    fn handle(&mut self, msg: WatchedUntil, ctx: &mut Context<Self>) -> Option<Instant> {
        self.take_charge(ctx);
        let watch_id = self.machine.holder(&msg.owner)?.watch_id?;
        self.watchdog.valid_until(watch_id)
    }
}

#[cfg(all(test, target_pointer_width = "64"))]
mod size_tests {
    use super::{Direct, LockActor, LockGuard};
    use std::mem::size_of;

    /// A held lock keeps its actor, the actor's context, the state it shares with the fast
    /// path and a guard: the watchdog bench counts their bytes per held lock, and
    /// docs/performance.md names these sizes. Growing one is a choice to make on purpose.
    #[test]
    fn a_held_locks_parts_stay_within_their_documented_sizes() {
        let sizes = [
            size_of::<LockActor>(),
            size_of::<actix::Context<LockActor>>(),
            size_of::<Direct<LockActor>>(),
            size_of::<LockGuard>(),
        ];
        eprintln!("actor, context, fast-path state, guard: {sizes:?}");
        assert!(
            sizes[0] <= 176 && sizes[1] <= 192 && sizes[2] <= 288,
            "{sizes:?}"
        );
        // With `metrics` a guard also carries its hold's start and series.
        let guard = if cfg!(feature = "metrics") { 136 } else { 96 };
        assert!(sizes[3] <= guard, "{sizes:?}");
    }
}
