use super::direct::{Direct, DirectHold};
use super::guard::ReleaseHold;
use super::guard::{HoldStatus, StatusSender};
use super::kind::LockKind;
use super::kind::{actor_key, ActorKey};
use super::reply::{Deferred, ReplySlot};
use super::state::read_state;
use super::watch::{renew_confirmed, HoldLost, WatchRegistry};
use super::{
    Acquire, AcquireFenced, ForceRelease, GetState, LockGuard, LockOwner, LockState, Release,
    Released, Renew,
};
use crate::config::{clock_drift, positive_millis};
use crate::error::LockError;
use crate::keys::LockName;
use crate::node::{Commands, Node, Subscription, Unsubscribe, Wake};
use crate::registry::Registry;
use crate::script::ScriptCall;
use actix::prelude::*;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The live lock actors of one node, each with what it shares with fast-path callers.
pub(crate) type LockRegistry = Registry<ActorKey, LockActor, Arc<Direct>>;

/// Retry delay after a Redis error while waiting (the wait bound still applies).
const ERROR_RETRY: Duration = Duration::from_millis(100);
/// Poll period for a lock whose key has no expiry (never written by us or Redisson).
const NO_TTL_POLL: Duration = Duration::from_secs(1);
/// Why a holder ends normally (every other reason is a loss).
const RELEASED: &str = "released";
/// Waits longer than this are treated as this long (an `Instant` cannot reach further).
const LONGEST_WAIT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The actor of one lock name on one node: it takes, renews and releases the lock for every
/// local owner, and queues local waiters in FIFO order.
///
/// Only the head of the local queue contends in Redis, so one process never stampedes a
/// lock; it is woken by the unlock message on `redisson_lock__channel:{name}`, or by a timer
/// at the holder's remaining lease if that message is lost. The actor lives while anyone
/// holds its address (lock handles, guards) or it has holders or waiters, then stops.
///
/// Get its address with [`LockClient::lock_actor`](crate::LockClient::lock_actor) and send
/// it [`Acquire`], [`Release`], [`Renew`], [`ForceRelease`] and [`GetState`].
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
    /// A fair lock waiter of ours is in the Redis queue: leave it when nobody waits here.
    joined: bool,
    withdraw_in_flight: bool,
    id: u64,
    holders: HashMap<LockOwner, Holder>,
    waiters: VecDeque<Waiter>,
    attempt_in_flight: bool,
    /// An unlock was announced while an attempt was in flight: retry instead of sleeping.
    wake_pending: bool,
    sleep: Option<SpawnHandle>,
    subscription: Subscription,
    /// Our own address while we have holders or waiters, so nobody's dropped handle stops us.
    keepalive: Option<Addr<LockActor>>,
    /// What the actor shares with fast-path callers (see `super::direct`).
    direct: Arc<Direct>,
    /// The registry this actor leaves when it stops.
    registry: Arc<LockRegistry>,
    /// The node's watch list: watchdog-leased holds go on it.
    watchdog: Arc<WatchRegistry>,
    next_waiter: u64,
    /// Holds Redis may count that we do not (a lost reply); settled before any new try.
    reconciles: VecDeque<Reconcile>,
    reconcile_in_flight: bool,
    /// Why the last reconcile failed: what a waiter held up by it reports at its deadline.
    reconcile_error: Option<Box<LockError>>,
}

/// One hold to check against Redis once it answers again.
struct Reconcile {
    owner: LockOwner,
    lease: Duration,
    /// Past this, the lease has run out in Redis anyway: nothing left to settle.
    until: Instant,
    /// An unlock waiting for this settlement to report: its reply and the holds left.
    unlock: Option<(ReplySlot<Result<Released, LockError>>, u32)>,
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

impl Holder {
    fn set_status(&self, status: HoldStatus) {
        self.status.send_replace(status);
        for merged in &self.merged {
            merged.send_replace(status);
        }
    }
}

struct Hold {
    id: u64,
    lease: Option<Duration>,
}

struct Waiter {
    id: u64,
    owner: LockOwner,
    lease: Option<Duration>,
    /// Draw a fencing token with the hold.
    fenced: bool,
    started: Instant,
    deadline: Instant,
    reply: ReplySlot<Result<LockGuard, LockError>>,
    attempts: u32,
    last_error: Option<LockError>,
    /// A first try that got no answer is tried once more before failing: a connection that
    /// dropped while idle fails its next command, and the connection manager reconnects.
    retried: bool,
    /// The deadline the caller asked for (a retry after a lost reply shortens `deadline`).
    patience: Instant,
    /// Armed only once the waiter has to wait: an uncontended acquire never needs it.
    /// Its deadline timer and the watch on its asker leaving (a dropped future).
    deadline_timer: Option<[SpawnHandle; 2]>,
}

/// What one try found: `(None, token)` acquired (with a token when fenced), or
/// `(Some(pttl), None)` held by another for `pttl` ms more.
pub(crate) type Tried = (Option<i64>, Option<u64>);

/// Runs an acquire script and reads its reply. With replica-synced acquisition on, a
/// grant counts only once enough replicas confirmed it: otherwise the reply is
/// [`LockError::NotReplicated`], and the hold is still in Redis for the caller to give back.
///
/// `plain_first` (see [`LockKind::plain_acquire`]) is a command that takes a free lock
/// without Lua; the script runs only when it did not (busy, or a key of another type).
pub(crate) async fn run_acquire(
    commands: Commands,
    invocation: ScriptCall,
    plain_first: Option<redis::Cmd>,
    name: LockName,
) -> Result<Tried, LockError> {
    let taken_plainly = match plain_first {
        Some(cmd) => commands.clone().command(cmd, name.clone()).await? == redis::Value::Okay,
        None => false,
    };
    let tried = if taken_plainly {
        (None, None)
    } else {
        let reply = commands
            .clone()
            .eval::<redis::Value>(invocation, name.clone())
            .await?;
        tried(reply).ok_or_else(|| LockError::Unavailable {
            node: commands.label().to_string(),
            reason: "unexpected reply to the acquire script".into(),
        })?
    };
    if tried.0.is_none() {
        commands.confirm_replicated(name).await?;
    }
    Ok(tried)
}

/// Reads an acquire script's reply; `None` for a reply no script of ours gives.
fn tried(reply: redis::Value) -> Option<Tried> {
    match reply {
        redis::Value::Nil => Some((None, None)),
        redis::Value::Int(pttl) => Some((Some(pttl), None)),
        redis::Value::Array(items) => match items.first() {
            Some(redis::Value::Int(token)) => Some((None, u64::try_from(*token).ok())),
            _ => None,
        },
        _ => None,
    }
}

fn disarm(timers: Option<[SpawnHandle; 2]>, ctx: &mut Context<LockActor>) {
    for timer in timers.into_iter().flatten() {
        ctx.cancel_future(timer);
    }
}

impl LockActor {
    pub(crate) fn new(
        node: Arc<Node>,
        kind: LockKind,
        name: LockName,
        owner: Option<LockOwner>,
        id: u64,
        direct: Arc<Direct>,
        registry: Arc<LockRegistry>,
    ) -> Self {
        let owner = owner.filter(|_| kind.per_owner());
        LockActor {
            node,
            kind,
            owner,
            joined: false,
            withdraw_in_flight: false,
            name,
            id,
            holders: HashMap::new(),
            waiters: VecDeque::new(),
            attempt_in_flight: false,
            wake_pending: false,
            sleep: None,
            subscription: Subscription::NEVER,
            keepalive: None,
            watchdog: direct.watchdog.clone(),
            direct,
            registry,
            next_waiter: 1,
            reconciles: VecDeque::new(),
            reconcile_in_flight: false,
            reconcile_error: None,
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

    /// Takes charge: no caller acts directly from now on, and a hold taken on the fast path
    /// becomes one of ours. Every handler that reads or changes holders calls it first.
    fn take_charge(&mut self, ctx: &mut Context<Self>) {
        if let Some(taken) = self.direct.absorb() {
            self.adopt(taken, ctx);
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
        let hold = Hold { id: hold, lease };
        match self.holders.get_mut(&owner) {
            Some(holder) => {
                // The owner also holds it through us: one watchdog entry is enough.
                if let Some(watch_id) = watch_id {
                    self.watchdog.unregister(watch_id);
                }
                holder.holds.push(hold);
                holder.merged.push(status);
                self.arm_lease_keeping(owner, sent, ctx);
            }
            None => {
                self.holders.insert(
                    owner,
                    Holder {
                        holds: vec![hold],
                        status,
                        merged: Vec::new(),
                        watch_id,
                        expiry: None,
                    },
                );
                if lease.is_some() {
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

    fn refresh_keepalive(&mut self, ctx: &mut Context<Self>) {
        if self.joined && self.waiters.is_empty() && !self.attempt_in_flight {
            self.withdraw(ctx);
        }
        let busy = !self.holders.is_empty()
            || !self.waiters.is_empty()
            || self.attempt_in_flight
            || self.withdraw_in_flight
            || !self.reconciles.is_empty();
        if !busy {
            self.keepalive = None;
            self.direct.release_to_callers();
        } else if self.keepalive.is_none() {
            self.keepalive = Some(ctx.address());
        }
    }

    /// Takes our owner out of the fair lock's Redis queue: nobody here waits any more.
    fn withdraw(&mut self, ctx: &mut Context<Self>) {
        self.joined = false;
        let Some(owner) = self.owner else {
            return;
        };
        let allowance_ms = self.node.config.fair_wait_timeout.as_millis() as u64;
        let Some(invocation) = self.kind.withdraw(
            &self.name,
            &self.field(owner),
            allowance_ms,
            self.node.commands.pubsub,
        ) else {
            return;
        };
        self.withdraw_in_flight = true;
        let request = self
            .node
            .commands
            .clone()
            .eval::<i64>(invocation, self.name.clone());
        ctx.spawn(request.into_actor(self).map(|result, act, ctx| {
            act.withdraw_in_flight = false;
            if let Err(error) = result {
                tracing::warn!(lock = %act.name, %error,
                    "could not leave the fair queue; skipped once the waiter's deadline passes");
            }
            act.refresh_keepalive(ctx);
        }));
    }

    /// Lets the head of the queue contend, unless it already is.
    ///
    /// A head that is asleep (waiting for an unlock or its timer) is left alone; use
    /// [`wake_head`](Self::wake_head) when there is news.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        if self.attempt_in_flight
            || self.subscription == Subscription::Pending
            || self.sleep.is_some()
        {
            return;
        }
        self.settle_reconcile(ctx);
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
            } else if !self.kind.reentrant() && self.holders.contains_key(&head.owner) {
                // Its owner got the lock while it queued: it would wait for itself.
                if let Some(again) = self.waiters.pop_front() {
                    disarm(again.deadline_timer, ctx);
                    let _ = again.reply.send(Err(LockError::AlreadyHeld {
                        name: self.name.to_string(),
                    }));
                }
            } else {
                break;
            }
        }
        let Some(head) = self.waiters.front() else {
            // An idle actor keeps no queue buffer (it is most of a held lock's footprint).
            if self.waiters.capacity() > 0 {
                self.waiters = VecDeque::new();
            }
            self.refresh_keepalive(ctx);
            return;
        };
        if !self.kind.shared()
            && !self.holders.is_empty()
            && !self.holders.contains_key(&head.owner)
        {
            // Another local owner holds it: Redis could only say "busy", and that owner's
            // release (or loss) wakes the head here. Sleep at most its lease, in case the
            // lock is lost without our hearing of it.
            let (id, deadline) = (head.id, head.deadline);
            let lease = self.longest_local_lease();
            if let Some(head) = self.waiters.front_mut() {
                head.attempts = head.attempts.max(1);
            }
            self.arm_deadline(id, ctx);
            self.sleep_for(lease.min(deadline.saturating_duration_since(now)), ctx);
            return;
        }
        if self.doubted(head.owner) {
            // Its owner's count is being settled with Redis; try once that is done. Its own
            // deadline still holds meanwhile (Redis may stay away longer than it waits).
            let (id, error) = (head.id, self.reconcile_error.as_deref().cloned());
            if let Some(head) = self.waiters.front_mut() {
                head.attempts = head.attempts.max(1);
                if head.last_error.is_none() {
                    head.last_error = error;
                }
            }
            self.arm_deadline(id, ctx);
            self.sleep_for(ERROR_RETRY, ctx);
            return;
        }
        if head.attempts > 0 && self.subscription.due(now) {
            self.subscribe(ctx);
            return;
        }
        self.attempt(ctx);
    }

    /// The longest lease any local hold may still have in Redis.
    fn longest_local_lease(&self) -> Duration {
        self.holders
            .values()
            .flat_map(|holder| holder.holds.iter())
            .map(|hold| hold.lease.unwrap_or(self.watchdog_lease()))
            .max()
            .unwrap_or(self.watchdog_lease())
    }

    /// A Redis call about `owner`'s hold failed without an answer: it may or may not have run.
    /// Remember to compare Redis's count with ours once Redis answers again.
    fn doubt(
        &mut self,
        owner: LockOwner,
        lease: Duration,
        unlock: Option<(ReplySlot<Result<Released, LockError>>, u32)>,
        ctx: &mut Context<Self>,
    ) {
        tracing::debug!(lock = %self.name, owner = owner.id(), "reply lost; will reconcile");
        self.reconciles.push_back(Reconcile {
            owner,
            lease,
            until: Instant::now() + lease,
            unlock,
        });
        self.refresh_keepalive(ctx);
    }

    /// Sends the oldest pending reconcile, unless one is under way. Tries of other owners go
    /// on meanwhile; tries of its owner wait for it (it compares our count with Redis's).
    fn settle_reconcile(&mut self, ctx: &mut Context<Self>) {
        let now = Instant::now();
        while self.reconciles.front().is_some_and(|r| r.until <= now) {
            self.reconciles.pop_front();
        }
        if self.reconcile_in_flight {
            return;
        }
        let Some(reconcile) = self.reconciles.front() else {
            return;
        };
        let (owner, lease) = (reconcile.owner, reconcile.lease);
        let counted = self.holders.get(&owner).map_or(0, |h| h.holds.len());
        let invocation = self.kind.reconcile(
            &self.name,
            &self.field(owner),
            lease.as_millis() as u64,
            counted,
            self.node.commands.pubsub,
        );
        self.reconcile_in_flight = true;
        let request = self
            .node
            .commands
            .clone()
            .eval::<Option<i64>>(invocation, self.name.clone());
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            act.reconcile_in_flight = false;
            match result {
                Ok(undone) => {
                    act.reconcile_error = None;
                    let settled = act.reconciles.pop_front();
                    if undone != Some(-1) {
                        tracing::info!(lock = %act.name, owner = owner.id(),
                            "undid a hold whose reply was lost");
                    }
                    // Either way Redis now counts what we count: the unlock is done.
                    if let Some((reply, holds)) = settled.and_then(|r| r.unlock) {
                        let released = match holds {
                            0 => Released::Unlocked,
                            holds => Released::StillHeld { holds },
                        };
                        let _ = reply.send(Ok(released));
                    }
                    act.wake_head(ctx);
                }
                Err(error) => {
                    act.reconcile_error = Some(Box::new(error));
                    ctx.run_later(ERROR_RETRY, |act, ctx| act.settle_reconcile(ctx));
                }
            }
            act.refresh_keepalive(ctx);
        }));
    }

    fn doubted(&self, owner: LockOwner) -> bool {
        self.reconciles.iter().any(|r| r.owner == owner)
    }

    /// The lock may be free now (an unlock was heard, or the head changed): end the head's
    /// sleep and let it try.
    fn wake_head(&mut self, ctx: &mut Context<Self>) {
        if let Some(sleep) = self.sleep.take() {
            ctx.cancel_future(sleep);
        }
        self.pump(ctx);
    }

    /// Subscribes to the unlock channel before the head's second try, so no unlock between
    /// the two tries goes unheard.
    fn subscribe(&mut self, ctx: &mut Context<Self>) {
        self.subscription = Subscription::Pending;
        let request = Subscription::request(
            &self.node.supervisor,
            self.channel(),
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
        let (id, owner, lease) = (head.id, head.owner, head.lease);
        let lease_ms = lease.unwrap_or(self.watchdog_lease()).as_millis() as u64;
        let patience_ms = self.node.config.fair_wait_timeout.as_millis() as u64;
        let invocation = self.kind.acquire(
            &self.name,
            &self.field(owner),
            lease_ms,
            head.fenced,
            patience_ms,
            self.node.commands.pubsub,
        );
        self.attempt_in_flight = true;
        self.wake_pending = false;
        let sent = Instant::now();
        let request = run_acquire(
            self.node.commands.clone(),
            invocation,
            None,
            self.name.clone(),
        );
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            act.attempt_in_flight = false;
            act.attempted(id, owner, lease, sent, result, ctx);
            act.pump(ctx);
            act.refresh_keepalive(ctx);
        }));
        self.refresh_keepalive(ctx);
    }

    fn attempted(
        &mut self,
        id: u64,
        owner: LockOwner,
        lease: Option<Duration>,
        sent: Instant,
        result: Result<Tried, LockError>,
        ctx: &mut Context<Self>,
    ) {
        match result {
            Err(LockError::Unavailable { .. }) => {
                self.doubt(owner, lease.unwrap_or(self.watchdog_lease()), None, ctx);
            }
            // Granted in Redis, but not on enough replicas: not a hold to hand out.
            Err(LockError::NotReplicated { .. }) => self.give_back(owner, lease, ctx),
            _ => {}
        }
        let Some(pos) = self.waiters.iter().position(|w| w.id == id) else {
            if let Ok((None, _)) = result {
                // The asker gave up while its grant was on the way: give the hold back.
                self.give_back(owner, lease, ctx);
            }
            return;
        };
        let now = Instant::now();
        match result {
            Ok((None, token)) => {
                self.joined = false; // the acquire script took us out of the queue
                if let Some(waiter) = self.waiters.remove(pos) {
                    self.grant(waiter, sent, token, ctx);
                }
            }
            Ok((Some(pttl), _)) => {
                self.joined |= self.kind.per_owner();
                let waiter = &mut self.waiters[pos];
                waiter.attempts += 1;
                waiter.last_error = None;
                if waiter.retried && waiter.deadline != waiter.patience {
                    // Redis answered: the caller's own wait applies again.
                    waiter.deadline = waiter.patience;
                    disarm(waiter.deadline_timer.take(), ctx);
                }
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
                let mut ttl = u64::try_from(pttl)
                    .map(Duration::from_millis)
                    .unwrap_or(NO_TTL_POLL);
                if self.kind.per_owner() {
                    // A fair waiter also polls every third of its allowance, so a lost
                    // wake-up on its own channel costs no more than that.
                    ttl = ttl.min(self.node.config.fair_wait_timeout / 3);
                }
                self.sleep_for(ttl.min(until_deadline), ctx);
                tracing::trace!(lock = %self.name, owner = owner.id(), ?ttl, "waiting");
            }
            Err(error @ LockError::Unavailable { .. })
                if self.waiters[pos].attempts == 0 && !self.waiters[pos].retried =>
            {
                // Once more, after the reconcile `doubt` queued (the try may have run).
                // Bounded by a response timeout: Redis that stays away is reported fast.
                let grace = self.node.config.response_timeout;
                let waiter = &mut self.waiters[pos];
                waiter.retried = true;
                waiter.deadline = now + grace;
                waiter.last_error = Some(error);
                disarm(waiter.deadline_timer.take(), ctx);
                self.arm_deadline(id, ctx);
            }
            Err(error) => {
                let waiter = &mut self.waiters[pos];
                let permanent = !error.is_transient();
                if waiter.attempts == 0 || permanent || now >= waiter.deadline {
                    if let Some(failed) = self.waiters.remove(pos) {
                        disarm(failed.deadline_timer, ctx);
                        tracing::debug!(lock = %self.name, %error, "acquire failed");
                        let _ = failed.reply.send(Err(error));
                    }
                    return;
                }
                waiter.attempts += 1;
                waiter.last_error = Some(error);
                let pause = ERROR_RETRY.min(waiter.deadline - now);
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
            let waiter = &self.waiters[pos];
            if waiter.reply.is_closed() && !(pos == 0 && keep_head) {
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
        let Some(waiter) = self.waiters.iter().find(|w| w.id == id) else {
            return;
        };
        if waiter.deadline_timer.is_some() {
            return;
        }
        let left = waiter.deadline.saturating_duration_since(Instant::now());
        let asker_left = waiter.reply.closed();
        let deadline = ctx.run_later(left, move |act, ctx| act.expire(id, ctx));
        let gone = ctx.spawn(
            asker_left
                .into_actor(self)
                .map(move |(), act, ctx| act.gone(id, ctx)),
        );
        if let Some(waiter) = self.waiters.iter_mut().find(|w| w.id == id) {
            waiter.deadline_timer = Some([deadline, gone]);
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
        // The last error seen (one retried within the wait, or the reconcile's that held
        // the waiter back) says more than "timed out": a busy lock clears it.
        let error = match waiter.last_error {
            Some(error) => error,
            None => LockError::Timeout {
                name: self.name.to_string(),
                waited,
            },
        };
        tracing::debug!(lock = %self.name, owner = waiter.owner.id(), ?waited, "wait timed out");
        let _ = waiter.reply.send(Err(error));
    }

    /// The asker of waiter `id` went away (its future was dropped): it leaves the queue now,
    /// so it neither holds up the waiters behind it nor stays in a fair lock's Redis queue.
    fn gone(&mut self, id: u64, ctx: &mut Context<Self>) {
        let Some(pos) = self.waiters.iter().position(|w| w.id == id) else {
            return;
        };
        if pos == 0 && self.attempt_in_flight {
            return; // its attempt's answer decides (a grant is given back)
        }
        if let Some(gone) = self.waiters.remove(pos) {
            disarm(gone.deadline_timer, ctx);
            tracing::debug!(lock = %self.name, owner = gone.owner.id(), "waiter withdrew");
        }
        if pos == 0 {
            self.wake_head(ctx);
        }
        self.refresh_keepalive(ctx);
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
            self.wake_head(ctx); // the next waiter has not been asleep on its own timer
        }
        self.refresh_keepalive(ctx);
    }

    fn grant(
        &mut self,
        waiter: Waiter,
        sent: Instant,
        token: Option<u64>,
        ctx: &mut Context<Self>,
    ) {
        disarm(waiter.deadline_timer, ctx);
        let hold = self.direct.next_hold();
        let owner = waiter.owner;
        let address = ctx.address();
        let holder = self.holders.entry(owner).or_insert_with(|| Holder {
            holds: Vec::new(),
            status: StatusSender::held().0,
            merged: Vec::new(),
            watch_id: None,
            expiry: None,
        });
        holder.holds.push(Hold {
            id: hold,
            lease: waiter.lease,
        });
        let status = holder.status.subscribe();
        self.arm_lease_keeping(owner, sent, ctx);
        tracing::debug!(lock = %self.name, owner = owner.id(), waited = ?waiter.started.elapsed(),
            lease = ?waiter.lease, "acquired");
        let guard = LockGuard::new(
            address,
            self.name.clone(),
            owner,
            hold,
            waiter.lease,
            status,
        )
        .with_token(token);
        // An undelivered guard is dropped here, and its drop releases the hold.
        let _ = waiter.reply.send(Ok(guard));
    }

    /// Keeps `owner`'s hold alive the way its holds ask: the watchdog while any hold has no
    /// fixed lease, else a timer that reports the loss when the fixed lease runs out.
    fn arm_lease_keeping(&mut self, owner: LockOwner, since: Instant, ctx: &mut Context<Self>) {
        let watchdog_lease = self.watchdog_lease();
        let Some(holder) = self.holders.get_mut(&owner) else {
            return;
        };
        if let Some(expiry) = holder.expiry.take() {
            ctx.cancel_future(expiry);
        }
        let watched = holder.holds.iter().any(|h| h.lease.is_none());
        match (watched, holder.watch_id) {
            (true, None) => {
                holder.watch_id = Some(self.watchdog.register(
                    self.kind,
                    self.name.clone(),
                    owner,
                    ctx.address().recipient().downgrade(),
                    since + watchdog_lease,
                ));
            }
            (true, Some(_)) => {}
            (false, watch_id) => {
                if let Some(id) = watch_id {
                    self.watchdog.unregister(id);
                    holder.watch_id = None;
                }
                let lease = holder
                    .holds
                    .last()
                    .and_then(|h| h.lease)
                    .unwrap_or(watchdog_lease);
                let ends_in = (since + lease)
                    .saturating_duration_since(Instant::now())
                    .saturating_sub(clock_drift(lease));
                holder.expiry = Some(ctx.run_later(ends_in, move |act, ctx| {
                    act.lose(owner, "its fixed lease ran out", ctx);
                }));
            }
        }
    }

    /// `owner` no longer holds the lock: tell its guards, stop keeping it alive.
    fn lose(&mut self, owner: LockOwner, why: &str, ctx: &mut Context<Self>) {
        if let Some(holder) = self.holders.remove(&owner) {
            if let Some(id) = holder.watch_id {
                self.watchdog.unregister(id);
            }
            if why == RELEASED {
                holder.set_status(HoldStatus::Released);
            } else {
                tracing::warn!(lock = %self.name, owner = owner.id(), why, "lock lost");
                holder.set_status(HoldStatus::Lost);
            }
            // A head that slept on this local holder may go now.
            self.wake_head(ctx);
        }
    }

    /// Releases a hold that was granted to a waiter who had already left.
    fn give_back(&mut self, owner: LockOwner, lease: Option<Duration>, ctx: &mut Context<Self>) {
        let lease = lease.unwrap_or(self.watchdog_lease());
        let still_holds = self.holders.contains_key(&owner);
        let request = self.unlock_request(owner, lease);
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            if let Err(error) = result {
                tracing::warn!(lock = %act.name, %error,
                    "could not give back an abandoned grant; it expires at its lease");
            }
            if !still_holds {
                act.wake_head(ctx);
            }
        }));
    }

    fn unlock_request(
        &self,
        owner: LockOwner,
        lease: Duration,
    ) -> impl std::future::Future<Output = Result<Option<i64>, LockError>> + 'static {
        let invocation = self.kind.unlock(
            &self.name,
            &self.field(owner),
            lease.as_millis() as u64,
            self.node.commands.pubsub,
        );
        self.node
            .commands
            .clone()
            .eval(invocation, self.name.clone())
    }

    fn release(
        &mut self,
        owner: LockOwner,
        hold: Option<u64>,
        ctx: &mut Context<Self>,
    ) -> Deferred<Result<Released, LockError>> {
        // The client stopped, and this thread with it, a moment from now: as every later
        // call, a release then does nothing (the hold expires at its lease).
        if self.node.is_stopped() {
            return Deferred::ready(Err(LockError::Shutdown));
        }
        let not_owner = || {
            Deferred::ready(Err(LockError::NotOwner {
                name: self.name.to_string(),
            }))
        };
        let Some(holder) = self.holders.get_mut(&owner) else {
            return not_owner();
        };
        let pos = match hold {
            Some(id) => holder.holds.iter().position(|h| h.id == id),
            None => holder.holds.len().checked_sub(1),
        };
        let Some(pos) = pos else {
            return not_owner();
        };
        holder.holds.remove(pos);
        let remaining = holder.holds.len() as u32;
        let lease = if holder.holds.iter().any(|h| h.lease.is_none()) {
            self.watchdog_lease()
        } else {
            holder
                .holds
                .last()
                .and_then(|h| h.lease)
                .unwrap_or(self.watchdog_lease())
        };
        if remaining == 0 {
            // Renewal stops here, before the unlock is even sent.
            if let Some(holder) = self.holders.remove(&owner) {
                if let Some(id) = holder.watch_id {
                    self.watchdog.unregister(id);
                }
                if let Some(expiry) = holder.expiry {
                    ctx.cancel_future(expiry);
                }
                holder.set_status(HoldStatus::Released);
            }
        } else {
            self.arm_lease_keeping(owner, Instant::now(), ctx);
        }
        let slot = ReplySlot::new();
        let reply = slot.clone();
        let request = self.unlock_request(owner, lease);
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            let outcome = match result {
                // With no hold left, the holder entry went before the unlock was sent; one
                // there now is a newer hold of the same owner (a re-entry answered first)
                // and must be left alone.
                Ok(None) => {
                    if remaining > 0 {
                        act.lose(
                            owner,
                            "an unlock found it held by nobody or by another owner",
                            ctx,
                        );
                    }
                    Err(LockError::NotOwner {
                        name: act.name.to_string(),
                    })
                }
                Ok(Some(0)) if remaining > 0 => Ok(Released::StillHeld { holds: remaining }),
                // 1: freed. 0 with no hold left: freed for this owner (a read lock others
                // still hold, or a newer hold of ours that Redis counted first).
                Ok(Some(_)) => {
                    // Redis freed the lock while we still count holds (it had fewer
                    // than we did): those holds are gone, and their holder must stop.
                    if remaining > 0 {
                        act.lose(owner, "an unlock freed it while holds remained", ctx);
                    }
                    tracing::debug!(lock = %act.name, owner = owner.id(), "released");
                    act.wake_head(ctx);
                    Ok(Released::Unlocked)
                }
                Err(error @ LockError::Unavailable { .. }) => {
                    act.settle_unlock(owner, lease, error, reply.clone(), remaining, ctx);
                    return;
                }
                Err(error) => Err(error),
            };
            let _ = reply.send(outcome);
            act.refresh_keepalive(ctx);
        }));
        self.refresh_keepalive(ctx);
        Deferred(slot)
    }
}

impl LockActor {
    /// An unlock got no answer: it may or may not have run. Settle it with Redis and
    /// report that, or report `error` if Redis stays silent for a response timeout (the
    /// settlement goes on; at worst the lock expires at its lease).
    fn settle_unlock(
        &mut self,
        owner: LockOwner,
        lease: Duration,
        error: LockError,
        reply: ReplySlot<Result<Released, LockError>>,
        remaining: u32,
        ctx: &mut Context<Self>,
    ) {
        tracing::warn!(lock = %self.name, %error, "unlock got no answer; settling it");
        self.doubt(owner, lease, Some((reply.clone(), remaining)), ctx);
        ctx.run_later(self.node.config.response_timeout, move |_, _| {
            let _ = reply.send(Err(error));
        });
        self.pump(ctx);
        self.refresh_keepalive(ctx);
    }
}

impl Drop for LockActor {
    /// A hold still on the fast path dies with us (the client stopped): its guard hears of
    /// it as a loss, as for every hold the actor had.
    fn drop(&mut self) {
        drop(self.direct.absorb());
    }
}

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
        if let Some(watch_id) = self.direct.absorb().and_then(|taken| taken.watch_id) {
            self.watchdog.unregister(watch_id);
        }
        if self.subscription != (Subscription::NEVER) {
            self.node.supervisor.do_send(Unsubscribe {
                channel: self.channel(),
                id: self.id,
            });
        }
        for (_, holder) in self.holders.drain() {
            if let Some(id) = holder.watch_id {
                self.watchdog.unregister(id);
            }
        }
    }
}

impl Handler<AcquireFenced> for LockActor {
    type Result = Deferred<Result<LockGuard, LockError>>;

    fn handle(&mut self, msg: AcquireFenced, ctx: &mut Context<Self>) -> Self::Result {
        let plain = Acquire {
            owner: msg.owner,
            lease: msg.lease,
            wait: msg.wait,
        };
        self.enqueue(plain, true, ctx)
    }
}

impl Handler<Acquire> for LockActor {
    type Result = Deferred<Result<LockGuard, LockError>>;

    fn handle(&mut self, msg: Acquire, ctx: &mut Context<Self>) -> Self::Result {
        self.enqueue(msg, false, ctx)
    }
}

impl LockActor {
    /// Queues an acquire (fenced or not) and lets the queue move.
    fn enqueue(
        &mut self,
        msg: Acquire,
        fenced: bool,
        ctx: &mut Context<Self>,
    ) -> Deferred<Result<LockGuard, LockError>> {
        self.take_charge(ctx);
        if self.node.is_stopped() {
            return Deferred::ready(Err(LockError::Shutdown));
        }
        if fenced && self.kind != LockKind::Reentrant {
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
        if !self.kind.reentrant() && self.holders.contains_key(&msg.owner) {
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
        let id = self.next_waiter;
        self.next_waiter += 1;
        let started = Instant::now();
        let reply = ReplySlot::new();
        let waiter = Waiter {
            id,
            owner: msg.owner,
            lease: msg.lease,
            fenced,
            started,
            deadline: started + msg.wait.min(LONGEST_WAIT),
            reply: reply.clone(),
            attempts: 0,
            last_error: None,
            retried: false,
            patience: started + msg.wait.min(LONGEST_WAIT),
            deadline_timer: None,
        };
        self.enqueue_waiter(waiter, ctx);
        self.refresh_keepalive(ctx);
        Deferred(reply)
    }

    fn enqueue_waiter(&mut self, waiter: Waiter, ctx: &mut Context<Self>) {
        let (id, owner) = (waiter.id, waiter.owner);
        self.withdraw_gone(ctx);
        if self.holders.contains_key(&owner) {
            // Re-entry never queues behind other owners (that would deadlock).
            self.waiters.push_front(waiter);
            self.wake_head(ctx);
        } else {
            let tries_now = self.waiters.is_empty()
                && !self.attempt_in_flight
                && self.sleep.is_none()
                && waiter.attempts == 0
                && waiter.last_error.is_none();
            self.waiters.push_back(waiter);
            if !tries_now {
                self.arm_deadline(id, ctx);
            }
            self.pump(ctx);
        }
    }
}

impl Handler<ReleaseHold> for LockActor {
    type Result = Deferred<Result<Released, LockError>>;

    fn handle(&mut self, msg: ReleaseHold, ctx: &mut Context<Self>) -> Self::Result {
        self.take_charge(ctx);
        self.release(msg.owner, Some(msg.hold), ctx)
    }
}

impl Handler<Release> for LockActor {
    type Result = Deferred<Result<Released, LockError>>;

    fn handle(&mut self, msg: Release, ctx: &mut Context<Self>) -> Self::Result {
        self.take_charge(ctx);
        self.release(msg.owner, None, ctx)
    }
}

impl Handler<Renew> for LockActor {
    type Result = Deferred<Result<bool, LockError>>;

    fn handle(&mut self, msg: Renew, ctx: &mut Context<Self>) -> Self::Result {
        self.take_charge(ctx);
        if self.node.is_stopped() {
            return Deferred::ready(Err(LockError::Shutdown));
        }
        let lease_ms =
            match positive_millis(&format!("the lease of lock `{}`", self.name), msg.lease) {
                Ok(ms) => ms,
                Err(error) => return Deferred::ready(Err(error)),
            };
        let mut invocation = ScriptCall::new(self.kind.renew_script());
        invocation.arg(lease_ms);
        self.kind
            .add_renewal(&mut invocation, &self.name, &self.field(msg.owner));
        let sent = Instant::now();
        let request = renew_confirmed(self.node.commands.clone(), invocation, self.name.clone());
        let slot = ReplySlot::new();
        let reply = slot.clone();
        let owner = msg.owner;
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            let outcome = result.map(|renewed| renewed.first() == Some(&1));
            match outcome {
                Ok(true) => {
                    if let Some(holder) = act.holders.get_mut(&owner) {
                        if let Some(last) = holder.holds.last_mut() {
                            if last.lease.is_some() {
                                last.lease = Some(msg.lease);
                            }
                        }
                        act.arm_lease_keeping(owner, sent, ctx);
                    }
                }
                Ok(false) => act.lose(owner, "a renewal found it gone", ctx),
                Err(_) => {}
            }
            let _ = reply.send(outcome);
        }));
        Deferred(slot)
    }
}

impl Handler<ForceRelease> for LockActor {
    type Result = Deferred<Result<bool, LockError>>;

    fn handle(&mut self, _: ForceRelease, ctx: &mut Context<Self>) -> Self::Result {
        self.take_charge(ctx);
        let invocation = self
            .kind
            .force_unlock(&self.name, self.node.commands.pubsub);
        let request = self
            .node
            .commands
            .clone()
            .eval::<i64>(invocation, self.name.clone());
        let slot = ReplySlot::new();
        let reply = slot.clone();
        ctx.spawn(request.into_actor(self).map(move |result, act, ctx| {
            let outcome = result.map(|deleted| deleted == 1);
            if outcome == Ok(true) {
                tracing::warn!(lock = %act.name, "force-unlocked");
                let owners: Vec<LockOwner> = act.holders.keys().copied().collect();
                for owner in owners {
                    act.lose(owner, "it was force-unlocked", ctx);
                }
                act.wake_head(ctx);
            }
            let _ = reply.send(outcome);
            act.refresh_keepalive(ctx);
        }));
        Deferred(slot)
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

impl Handler<Wake> for LockActor {
    type Result = ();

    fn handle(&mut self, wake: Wake, ctx: &mut Context<Self>) {
        tracing::trace!(lock = %self.name, read_unlock = wake.all, "woken");
        if self.attempt_in_flight || self.subscription == Subscription::Pending {
            self.wake_pending = true;
        }
        self.wake_head(ctx);
    }
}

impl Handler<HoldLost> for LockActor {
    type Result = ();

    fn handle(&mut self, msg: HoldLost, ctx: &mut Context<Self>) {
        self.take_charge(ctx);
        let current = self
            .holders
            .get(&msg.owner)
            .is_some_and(|h| h.watch_id == Some(msg.watch_id));
        if current {
            if let Some(holder) = self.holders.get_mut(&msg.owner) {
                holder.watch_id = None; // the watchdog already dropped the entry
            }
            self.lose(msg.owner, "the watchdog found it gone", ctx);
            self.refresh_keepalive(ctx);
        }
    }
}

/// A hold taken on the fast path after the actor took charge: count it as ours.
pub(crate) struct Adopt(pub(crate) DirectHold);

impl Message for Adopt {
    type Result = ();
}

impl Handler<Adopt> for LockActor {
    type Result = ();

    fn handle(&mut self, msg: Adopt, ctx: &mut Context<Self>) {
        self.take_charge(ctx);
        self.adopt(msg.0, ctx);
    }
}

/// A fast-path call about `owner` got no answer (or its caller left): it may or may not
/// have run; settle `owner`'s count with Redis.
pub(crate) struct Doubt {
    pub(crate) owner: LockOwner,
    pub(crate) lease: Duration,
}

impl Message for Doubt {
    type Result = ();
}

impl Handler<Doubt> for LockActor {
    type Result = ();

    fn handle(&mut self, msg: Doubt, ctx: &mut Context<Self>) {
        self.take_charge(ctx);
        self.doubt(msg.owner, msg.lease, None, ctx);
        self.pump(ctx);
        self.refresh_keepalive(ctx);
    }
}

/// A fast-path unlock got no answer: report what Redis turns out to hold once it answers,
/// or `error` if it stays silent for a response timeout.
pub(crate) struct SettleUnlock {
    pub(crate) owner: LockOwner,
    pub(crate) lease: Duration,
    pub(crate) error: LockError,
}

impl Message for SettleUnlock {
    type Result = Result<Released, LockError>;
}

impl Handler<SettleUnlock> for LockActor {
    type Result = Deferred<Result<Released, LockError>>;

    fn handle(&mut self, msg: SettleUnlock, ctx: &mut Context<Self>) -> Self::Result {
        self.take_charge(ctx);
        let slot = ReplySlot::new();
        self.settle_unlock(msg.owner, msg.lease, msg.error, slot.clone(), 0, ctx);
        Deferred(slot)
    }
}

/// Take the lock after a fast-path try: it found the lock held by another owner (the
/// waiter's first try is done: it subscribes, then tries again), or it got no answer (the
/// try is being settled: the waiter gets one more try within a response timeout, as after
/// a first try of its own).
pub(crate) struct AfterDirect {
    pub(crate) owner: LockOwner,
    pub(crate) lease: Option<Duration>,
    pub(crate) wait: Duration,
    pub(crate) fenced: bool,
    /// `None`: it was busy. `Some`: Redis did not answer.
    pub(crate) error: Option<LockError>,
}

impl Message for AfterDirect {
    type Result = Result<LockGuard, LockError>;
}

impl Handler<AfterDirect> for LockActor {
    type Result = Deferred<Result<LockGuard, LockError>>;

    fn handle(&mut self, msg: AfterDirect, ctx: &mut Context<Self>) -> Self::Result {
        self.take_charge(ctx);
        let id = self.next_waiter;
        self.next_waiter += 1;
        let started = Instant::now();
        let patience = started + msg.wait.min(LONGEST_WAIT);
        let reply = ReplySlot::new();
        let failed = msg.error.is_some();
        let waiter = Waiter {
            id,
            owner: msg.owner,
            lease: msg.lease,
            fenced: msg.fenced,
            started,
            deadline: if failed {
                started + self.node.config.response_timeout
            } else {
                patience
            },
            reply: reply.clone(),
            attempts: u32::from(!failed),
            last_error: msg.error,
            retried: failed,
            patience,
            deadline_timer: None,
        };
        self.enqueue_waiter(waiter, ctx);
        self.refresh_keepalive(ctx);
        Deferred(reply)
    }
}
