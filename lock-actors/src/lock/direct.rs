//! The uncontended fast path: when a lock's actor has nothing to do, the caller sends the
//! acquire and the unlock script itself, on the node's shared connection, and the actor is
//! not involved at all.
//!
//! The actor stays the owner of everything that needs waiting or settling. A `Direct` value,
//! shared by the actor and the callers under one mutex, says who may act:
//!
//! - `Idle`: the actor has no holders, waiters or calls in flight; one caller may try.
//! - `Trying`: that caller's acquire script is on the way. Others go through the actor.
//! - `Held`: the hold it got sits in the slot, with its watchdog entry already registered.
//! - `Unlocking`: its guard took it out of the slot and is sending the unlock itself.
//! - `Actor`: the actor is in charge. Every actor handler first *absorbs* the slot (takes
//!   the direct hold into its own holders) and sets `Actor`; the actor sets `Idle` again
//!   once it is idle.
//!
//! Whatever a caller cannot finish (its future is dropped mid-call, Redis does not answer)
//! is handed to the actor as a doubt, which it settles with Redis by reconciling (see
//! `LockActor::doubt`): nothing is ever left in Redis that nobody counts.

use super::direct_messages::{Adopt, DirectHold, Doubt, SettleUnlock};
use super::guard::{GuardLink, ReleaseHold, Reply};
use super::kind::LockKind;
use super::lease_entry::{HoldLost, WatchRegistry};
use super::{Acquire, AcquireFenced, LockGuard, LockOwner, Released, RestartLease};
use crate::config::clock_drift;
use crate::error::LockError;
use crate::hold_status::{HoldStatus, StatusSender};
use crate::keys::LockName;
use crate::node::{Commands, Node};
use crate::reply::{post, send_detached, Detached};
use crate::runtime::Errands;
use crate::script::ScriptCall;
use crate::telemetry::HoldTimer;
use actix::{Actor, Addr, Context, Handler};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// What the lock actor answers, as the fast path and the guards need it. `Direct` is
/// generic over it so that this module (below the actor, which builds `Direct`) does not
/// name the actor; the one actor that has all of it is `LockActor`.
pub(crate) trait LockActorApi:
    Actor<Context = Context<Self>>
    + Handler<Detached<Adopt>>
    + Handler<Detached<Doubt>>
    + Handler<Detached<SettleUnlock>>
    + Handler<ReleaseHold>
    + Handler<Detached<ReleaseHold>>
    + Handler<Acquire>
    + Handler<AcquireFenced>
    + Handler<HoldLost>
    + Handler<RestartLease>
{
}

impl<A> LockActorApi for A where
    A: Actor<Context = Context<A>>
        + Handler<Detached<Adopt>>
        + Handler<Detached<Doubt>>
        + Handler<Detached<SettleUnlock>>
        + Handler<ReleaseHold>
        + Handler<Detached<ReleaseHold>>
        + Handler<Acquire>
        + Handler<AcquireFenced>
        + Handler<HoldLost>
        + Handler<RestartLease>
{
}

/// Who may act on a lock right now (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Idle,
    Trying,
    Held,
    Unlocking,
    Actor,
}

struct State<A: Actor> {
    mode: Mode,
    slot: Option<DirectHold>,
    /// The actor's address while a caller acts directly (`Trying`, `Held`, `Unlocking`):
    /// the actor does not know of that hold, so this keeps it alive for the messages
    /// about it (a doubt); and while any guard is out (`guards`), so that a guard's
    /// release, unlock or re-entry reaches it (a guard keeps its lock's actor alive).
    /// Cleared when neither holds, which also breaks the cycle actor -> `Direct` -> actor.
    keepalive: Option<Addr<A>>,
    /// Guards out (see [`GuardLink`]).
    guards: usize,
    /// Fast-path calls in flight (see [`Pending`]): each may still have to tell the actor
    /// of a doubt, even after the actor took charge meanwhile.
    calls: usize,
}

impl<A: Actor> State<A> {
    fn set(&mut self, mode: Mode) {
        self.mode = mode;
        self.settle();
    }

    /// A caller acts directly or a guard is out: the actor's address must be kept.
    fn needs_actor(&self) -> bool {
        !matches!(self.mode, Mode::Idle | Mode::Actor) || self.guards > 0 || self.calls > 0
    }

    /// Lets the actor's address go once nobody needs it any more.
    fn settle(&mut self) {
        if !self.needs_actor() {
            self.keepalive = None;
        }
    }
}

/// What a lock's actor and its callers share (one per actor).
pub(crate) struct Direct<A: Actor> {
    /// Weak: a guard keeps its `Direct`, and must not keep a stopped client's node (and
    /// with it the node's connections) alive.
    node: Weak<Node>,
    /// The node's watchdog lease, kept here for the hot path.
    watchdog_lease: Duration,
    /// The node's lease list: a watchdog-leased hold taken here goes on it.
    pub(crate) watchdog: Arc<WatchRegistry<A>>,
    kind: LockKind,
    name: LockName,
    /// The client's errands: a guard's release counts as one until Redis answers it.
    errands: Errands,
    /// Hold ids, drawn by the actor and by fast-path callers alike.
    next_hold: AtomicU64,
    state: Mutex<State<A>>,
}

/// How a fast-path acquire ended.
pub(crate) enum Tried<A: Actor> {
    /// Taken: here is the guard.
    Acquired(LockGuard),
    /// Not tried: someone else is acting. Ask the actor.
    AskActor,
    /// Held by another owner (a first try is done): ask the actor (given back) to wait for it.
    Busy(Addr<A>),
    /// Redis did not answer: the actor (given back) settles whether it ran; ask it, carrying
    /// the error.
    Failed(LockError, Addr<A>),
    /// A definite error (wrong key type, say): report it.
    Error(LockError),
}

impl<A: LockActorApi> Direct<A> {
    pub(crate) fn new(
        node: &Arc<Node>,
        watchdog: Arc<WatchRegistry<A>>,
        kind: LockKind,
        name: LockName,
    ) -> Self {
        // A fair lock's waiters must all go through the queue in Redis: never direct.
        let mode = if kind.per_owner() {
            Mode::Actor
        } else {
            Mode::Idle
        };
        Direct {
            node: Arc::downgrade(node),
            watchdog_lease: node.config.watchdog_timeout,
            watchdog,
            kind,
            name,
            errands: node.arbiter.errands().clone(),
            next_hold: AtomicU64::new(1),
            state: Mutex::new(State {
                mode,
                slot: None,
                keepalive: None,
                guards: 0,
                calls: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<A>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn next_hold(&self) -> u64 {
        self.next_hold.fetch_add(1, Ordering::Relaxed)
    }

    /// Counts a guard out (see [`GuardLink`]): the actor's address is kept from now until
    /// the last guard is counted back. `actor` is asked only when none is kept yet.
    pub(crate) fn hand_out(&self, actor: impl FnOnce() -> Addr<A>) {
        let mut state = self.lock();
        state.guards += 1;
        if state.keepalive.is_none() {
            state.keepalive = Some(actor());
        }
    }

    /// Counts a guard back and returns the actor's address for its last message: the kept
    /// one itself when that was the last guard and no caller acts directly, else a copy.
    fn count_back(&self) -> Option<Addr<A>> {
        let mut state = self.lock();
        state.guards = state.guards.saturating_sub(1);
        if state.needs_actor() {
            state.keepalive.clone()
        } else {
            state.keepalive.take()
        }
    }

    /// Counts a guard back whose last message needs no address (a direct unlock).
    fn count_back_quietly(&self) {
        let mut state = self.lock();
        state.guards = state.guards.saturating_sub(1);
        state.settle();
    }

    /// For the actor: it is in charge now; takes the direct hold, if any, into its care.
    pub(crate) fn absorb(&self) -> Option<DirectHold> {
        let mut state = self.lock();
        state.set(Mode::Actor);
        state.slot.take()
    }

    /// For the actor, once it is idle: callers may act directly again. A caller's hold or
    /// call in flight is left alone.
    pub(crate) fn release_to_callers(&self) {
        let mut state = self.lock();
        if state.mode == Mode::Actor && !self.kind.per_owner() {
            state.set(Mode::Idle);
        }
    }

    /// Moves from `from` to `to` if the mode is still `from`.
    fn shift(&self, from: Mode, to: Mode) -> bool {
        let mut state = self.lock();
        if state.mode == from {
            state.set(to);
            true
        } else {
            false
        }
    }

    /// For a guard: takes its hold out of the slot to unlock it directly, if the hold is
    /// there and nobody else acts. The unlock call counts as in flight from here: hand the
    /// hold to [`Pending::new`] at once.
    pub(crate) fn take_for_unlock(&self, hold: u64) -> Option<DirectHold> {
        let mut state = self.lock();
        if state.mode == Mode::Held && state.slot.as_ref().is_some_and(|d| d.hold == hold) {
            state.set(Mode::Unlocking);
            state.calls += 1; // settled by the `Pending` of the unlock
            state.slot.take()
        } else {
            None
        }
    }

    fn watchdog_lease(&self) -> Duration {
        self.watchdog_lease
    }

    /// Tells the actor that a call for `owner` got no answer (it may have run, setting up
    /// to `lease`): the actor settles it with Redis.
    fn doubt(&self, actor: &Addr<A>, owner: LockOwner, lease: Duration) {
        let errand = self.errands.start();
        post(
            actor,
            Doubt {
                owner,
                lease,
                errand,
            },
        );
    }

    /// The node, while its client runs.
    fn node(&self) -> Option<Arc<Node>> {
        self.node.upgrade().filter(|node| !node.is_stopped())
    }

    /// Tries to take the lock for `owner` without the actor: with the watchdog (`fixed`
    /// `None`; the hold stays on the fast path), or for a fixed lease (handed to the actor
    /// at once, which ends it when the lease runs out).
    ///
    /// Takes the actor's address by value: it becomes the kept one (see `State::keepalive`)
    /// unless one is kept already, so a fast acquire copies no address.
    pub(crate) async fn try_acquire(
        self: &Arc<Self>,
        actor: Addr<A>,
        owner: LockOwner,
        fenced: bool,
        fixed: Option<Duration>,
    ) -> Tried<A> {
        let Some(node) = self.node() else {
            return Tried::AskActor; // the actor says Shutdown
        };
        let mut own = Some(actor);
        {
            let mut state = self.lock();
            if state.mode != Mode::Idle {
                return Tried::AskActor;
            }
            state.set(Mode::Trying);
            state.calls += 1; // settled by `pending` below
            if state.keepalive.is_none() {
                state.keepalive = own.take();
            }
        }
        let lease = fixed.unwrap_or_else(|| self.watchdog_lease());
        let field = self.kind.field(node.owner_field(owner.id()));
        let lease_ms = lease.as_millis() as u64;
        let mut pending = Pending::new(self.clone(), owner);
        pending.lease = lease;
        let sent = Instant::now();
        let reply = self.try_once(&node, &field, lease_ms, fenced).await;
        // The kept address is there while the call counts as in flight: take from it what
        // the outcome needs. A grant's guard is out from here (see `GuardLink`).
        let (actor, weak) = {
            let mut state = self.lock();
            if matches!(reply, Ok((None, _))) {
                state.guards += 1;
                (None, state.keepalive.as_ref().map(Addr::downgrade))
            } else {
                (own.or_else(|| state.keepalive.clone()), None)
            }
        };
        pending.settled();
        drop(pending);
        match reply {
            Ok((None, token)) => {
                let (status, receiver) = StatusSender::held();
                let watch_id = match (fixed, weak) {
                    (None, Some(weak)) => Some({
                        status.set_deadline(Some(sent + lease - clock_drift(lease)));
                        self.watchdog.register(
                            self.kind,
                            self.name.clone(),
                            owner,
                            weak,
                            status.loser(),
                            sent + lease,
                        )
                    }),
                    _ => None,
                };
                let hold = self.next_hold();
                let taken = DirectHold {
                    owner,
                    hold,
                    status,
                    watch_id,
                    lease: fixed,
                    sent,
                };
                {
                    let mut state = self.lock();
                    let handed_over = if fixed.is_some() {
                        // A fixed lease needs the actor's timer: it takes charge now.
                        state.set(Mode::Actor);
                        Some(taken)
                    } else if state.mode == Mode::Trying {
                        state.set(Mode::Held);
                        state.slot = Some(taken);
                        None
                    } else {
                        Some(taken) // the actor took charge meanwhile: it adopts the hold
                    };
                    // Kept: the guard counted above is out.
                    if let (Some(taken), Some(actor)) = (handed_over, &state.keepalive) {
                        post(actor, Adopt(taken));
                    }
                }
                tracing::debug!(lock = %self.name, owner = owner.id(), "acquired directly");
                let link: Arc<dyn GuardLink> = self.clone();
                let guard = LockGuard::new(link, self.name.clone(), owner, hold, fixed, receiver)
                    .with_token(token)
                    .timed(HoldTimer::start(self.kind, &self.name, &node.config));
                Tried::Acquired(guard)
            }
            Ok((Some(_), _)) => {
                // Held by another owner: the actor queues the caller from here on.
                self.shift(Mode::Trying, Mode::Actor);
                match actor {
                    Some(actor) => Tried::Busy(actor),
                    None => Tried::AskActor, // never: it was kept while the call was out
                }
            }
            Err(error @ LockError::Unavailable { .. }) => {
                self.shift(Mode::Trying, Mode::Actor);
                match actor {
                    Some(actor) => {
                        self.doubt(&actor, owner, lease);
                        Tried::Failed(error, actor)
                    }
                    None => Tried::Error(error), // never, as above
                }
            }
            Err(error @ LockError::NotReplicated { .. }) => {
                // Taken in Redis but not on enough replicas: the actor's reconcile finds
                // the hold it does not count, and gives it back.
                self.shift(Mode::Trying, Mode::Actor);
                if let Some(actor) = actor {
                    self.doubt(&actor, owner, lease);
                }
                Tried::Error(error)
            }
            Err(error) => {
                self.shift(Mode::Trying, Mode::Idle);
                Tried::Error(error)
            }
        }
    }

    /// One acquire on the fast path. A free lock of a kind that can is taken with a plain
    /// `SET NX PX` (no Lua); the acquire script is built and sent only when that finds the
    /// lock busy, or for the other kinds.
    async fn try_once(
        &self,
        node: &Node,
        field: &str,
        lease_ms: u64,
        fenced: bool,
    ) -> Result<(Option<i64>, Option<u64>), LockError> {
        let commands = &node.commands;
        let script = || {
            self.kind
                .acquire(&self.name, field, lease_ms, fenced, 0, commands.pubsub)
        };
        let Some(plain) = self.kind.plain_acquire(&self.name, field, lease_ms, fenced) else {
            return run_acquire(commands.clone(), script(), None, self.name.clone()).await;
        };
        let reply = commands.clone().command(plain, self.name.clone()).await?;
        if reply != redis::Value::Okay {
            return run_acquire(commands.clone(), script(), None, self.name.clone()).await;
        }
        commands
            .clone()
            .confirm_replicated(self.name.clone())
            .await?;
        Ok((None, None))
    }

    /// Unlocks a hold taken out of the slot by [`take_for_unlock`](Self::take_for_unlock).
    ///
    /// `pending` stands for this call (counted in flight by `take_for_unlock`): while it
    /// is, the actor's address stays kept, so no copy of it is made for the common case.
    async fn unlock_directly(
        self: &Arc<Self>,
        mut pending: Pending<A>,
        taken: DirectHold,
    ) -> Result<Released, LockError> {
        let Some(node) = self.node() else {
            pending.settled();
            // As the actor would say: after shutdown nothing is released (the hold expires
            // at its lease), whether or not the connection is still open for a moment.
            return Err(LockError::Shutdown);
        };
        let owner = taken.owner;
        let lease = self.watchdog_lease();
        // Renewal stops before the unlock is even sent.
        if let Some(watch_id) = taken.watch_id {
            self.watchdog.unregister(watch_id);
        }
        let field = self.kind.field(node.owner_field(owner.id()));
        let call = self.kind.unlock(
            &self.name,
            &field,
            lease.as_millis() as u64,
            node.commands.pubsub,
        );
        let reply = node
            .commands
            .clone()
            .eval::<Option<i64>>(call, self.name.clone())
            .await;
        drop(node);
        // Kept while the call is in flight: a copy for the replies that need the actor.
        let actor = match reply {
            Ok(_) => None,
            Err(_) => self.lock().keepalive.clone(),
        };
        pending.settled();
        match reply {
            Ok(Some(_)) => {
                taken.status.send_replace(HoldStatus::Released);
                self.shift(Mode::Unlocking, Mode::Idle);
                tracing::debug!(lock = %self.name, owner = owner.id(), "released directly");
                Ok(Released::Unlocked)
            }
            Ok(None) => {
                tracing::warn!(lock = %self.name, owner = owner.id(),
                    why = "an unlock found it held by nobody or by another owner", "lock lost");
                if let Some(node) = self.node() {
                    crate::telemetry::lost(self.kind, &self.name, &node.config);
                }
                taken.status.send_replace(HoldStatus::Lost);
                self.shift(Mode::Unlocking, Mode::Idle);
                Err(LockError::NotOwner {
                    name: self.name.to_string(),
                })
            }
            Err(error @ LockError::Unavailable { .. }) => {
                taken.status.send_replace(HoldStatus::Released);
                self.shift(Mode::Unlocking, Mode::Actor);
                let settle = SettleUnlock {
                    owner,
                    lease,
                    error,
                };
                let actor = actor.ok_or(LockError::Shutdown)?;
                // Settled even if this future is dropped now.
                send_detached(&actor, settle).await?
            }
            Err(error) => {
                taken.status.send_replace(HoldStatus::Released);
                self.shift(Mode::Unlocking, Mode::Actor);
                if let Some(actor) = actor {
                    self.doubt(&actor, owner, lease);
                }
                Err(error)
            }
        }
    }
}

impl<A: LockActorApi> GuardLink for Direct<A> {
    fn release(&self, owner: LockOwner, hold: u64) {
        if let Some(actor) = self.count_back() {
            let errand = self.errands.start();
            post(
                &actor,
                ReleaseHold {
                    owner,
                    hold,
                    errand,
                },
            );
        }
    }

    fn unlock(self: Arc<Self>, owner: LockOwner, hold: u64) -> Reply<Released> {
        if let Some(taken) = self.take_for_unlock(hold) {
            // Straight to Redis: the hold is still on the fast path.
            let pending = Pending::new(self.clone(), owner);
            self.count_back_quietly();
            return Box::pin(async move { self.unlock_directly(pending, taken).await });
        }
        let Some(actor) = self.count_back() else {
            return Box::pin(async { Err(LockError::Shutdown) });
        };
        let errand = self.errands.start();
        // Released even if the caller drops the `unlock()` future before the actor's turn.
        let request = send_detached(
            &actor,
            ReleaseHold {
                owner,
                hold,
                errand,
            },
        );
        Box::pin(async move { request.await? })
    }

    fn restart_lease(&self, owner: LockOwner, hold: u64, lease: Duration) -> Reply<bool> {
        let state = self.lock();
        let Some(actor) = state.keepalive.as_ref() else {
            return Box::pin(async { Err(LockError::Shutdown) });
        };
        let request = actor.send(RestartLease { owner, hold, lease });
        Box::pin(async move { request.await.map_err(|_| LockError::Shutdown)? })
    }

    fn reenter(
        &self,
        owner: LockOwner,
        lease: Option<Duration>,
        wait: Duration,
        fenced: bool,
    ) -> Reply<LockGuard> {
        let state = self.lock();
        let Some(actor) = state.keepalive.as_ref() else {
            return Box::pin(async { Err(LockError::Shutdown) });
        };
        if fenced {
            let request = actor.send(AcquireFenced { owner, lease, wait });
            Box::pin(async move { request.await.map_err(|_| LockError::Shutdown)? })
        } else {
            let request = actor.send(Acquire { owner, lease, wait });
            Box::pin(async move { request.await.map_err(|_| LockError::Shutdown)? })
        }
    }
}

/// A fast-path call under way: if its future is dropped before Redis answered, the call
/// may or may not have run, so the actor is told to settle it.
struct Pending<A: LockActorApi> {
    direct: Arc<Direct<A>>,
    owner: LockOwner,
    /// The lease the call would have set (how long a stray hold could last).
    lease: Duration,
    armed: bool,
}

impl<A: LockActorApi> Pending<A> {
    /// Stands for a call already counted in flight (`calls`) under the state's lock.
    fn new(direct: Arc<Direct<A>>, owner: LockOwner) -> Self {
        let lease = direct.watchdog_lease();
        Pending {
            direct,
            owner,
            lease,
            armed: true,
        }
    }

    /// The call got its answer: it no longer counts as in flight.
    fn settled(&mut self) {
        if self.armed {
            self.armed = false;
            let mut state = self.direct.lock();
            state.calls = state.calls.saturating_sub(1);
            state.settle();
        }
    }
}

impl<A: LockActorApi> Drop for Pending<A> {
    fn drop(&mut self) {
        if self.armed {
            let mut state = self.direct.lock();
            // Kept while the call counts as in flight.
            if let Some(actor) = &state.keepalive {
                self.direct.doubt(actor, self.owner, self.lease);
            }
            state.calls = state.calls.saturating_sub(1);
            if matches!(state.mode, Mode::Trying | Mode::Unlocking) {
                state.set(Mode::Actor);
            } else {
                state.settle();
            }
        }
    }
}
/// A lock handle's own copy of its actor's address and fast-path state, so that a handle
/// used again and again skips the registry, and its actor stays up while the handle lives
/// (the registry only holds actors weakly: without it an idle actor stops after every
/// unlock and the next acquire starts a new one on the actor thread). Per-owner kinds (the
/// fair lock) keep nothing. A clone of the handle starts empty.
pub(crate) struct DirectCache<A: Actor>(Mutex<Option<Kept<A>>>);

/// An actor's address and what it shares with fast-path callers.
type Kept<A> = (Addr<A>, Arc<Direct<A>>);

impl<A: Actor> Default for DirectCache<A> {
    fn default() -> Self {
        DirectCache(Mutex::new(None))
    }
}

impl<A: Actor> Clone for DirectCache<A> {
    fn clone(&self) -> Self {
        DirectCache::default()
    }
}

impl<A: Actor> DirectCache<A> {
    /// The kept actor and state, while the actor runs.
    pub(crate) fn get(&self) -> Option<Kept<A>> {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        kept.as_ref()
            .filter(|(actor, _)| actor.connected())
            .map(|(actor, direct)| (actor.clone(), direct.clone()))
    }

    /// Keeps `actor` and `direct` for the next call (unless the kind is per owner).
    pub(crate) fn keep(&self, kind: LockKind, actor: &Addr<A>, direct: &Arc<Direct<A>>) {
        if !kind.per_owner() {
            *self.0.lock().unwrap_or_else(|p| p.into_inner()) =
                Some((actor.clone(), direct.clone()));
        }
    }
}

/// What one try found: `(None, token)` acquired (with a token when fenced), or
/// `(Some(pttl), None)` held by another for `pttl` ms more.
pub(crate) type TryReply = (Option<i64>, Option<u64>);

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
) -> Result<TryReply, LockError> {
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
fn tried(reply: redis::Value) -> Option<TryReply> {
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
