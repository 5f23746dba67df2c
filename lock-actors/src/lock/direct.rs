//! The uncontended fast path, carried out: when a lock's actor has nothing to do, the
//! caller sends the acquire and the unlock script itself, on the node's shared connection,
//! and the actor is not involved at all.
//!
//! What may be done directly, and what a call's outcome means for the lock, is decided by
//! the lock's [`FastPath`] machine (`super::fast_path`), kept here under one mutex shared by
//! the actor and its callers. This module only carries its decisions out: sends the scripts,
//! makes the guards, registers watchdog entries, and wakes the actor for a call in doubt.
//!
//! Whatever a caller cannot finish (its future is dropped mid-call, Redis does not answer)
//! is recorded in the machine as a doubt, and the actor woken for it; the actor absorbs it
//! and settles it with Redis by reconciling (see `LockActor::doubt`): nothing is ever left
//! in Redis that nobody counts.

use super::direct_messages::AcquireRequest;
use super::direct_messages::{DirectHold, Doubted, Turn};
use super::fast_path::{
    surely_held_until, AfterTry, AfterUnlock, FastPath, TryAnswer, UnlockAnswer,
};
use super::guard::{GuardLink, ReleaseHold, Reply};
use super::kind::LockKind;
use super::lease_entry::{HoldLost, WatchRegistry};
use super::machine::Fast;
use super::{ExtendHold, LockGuard, LockOwner, Released};
use crate::error::LockError;
use crate::keys::LockName;
use crate::lease::status::{HoldStatus, StatusSender};
use crate::node::{Commands, Node};
use crate::reply::{post, send_detached, Detached};
use crate::runtime::Errands;
use crate::script::ScriptCall;
use crate::telemetry::HoldTimer;
use actix::{Actor, Addr, Context, Handler};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// What the lock actor answers, as the fast path and the guards need it. `Direct` is
/// generic over it so that this module (below the actor, which builds `Direct`) does not
/// name the actor; the one actor that has all of it is `LockActor`.
pub(crate) trait LockActorApi:
    Actor<Context = Context<Self>>
    + Handler<Detached<Turn>>
    + Handler<ReleaseHold>
    + Handler<Detached<ReleaseHold>>
    + Handler<AcquireRequest>
    + Handler<HoldLost>
    + Handler<Detached<ExtendHold>>
{
}

impl<A> LockActorApi for A where
    A: Actor<Context = Context<A>>
        + Handler<Detached<Turn>>
        + Handler<ReleaseHold>
        + Handler<Detached<ReleaseHold>>
        + Handler<AcquireRequest>
        + Handler<HoldLost>
        + Handler<Detached<ExtendHold>>
{
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
    /// Who may act on the lock, the holds taken directly, the calls in doubt, and the
    /// actor's kept address.
    state: Mutex<FastPath<DirectHold, Doubted, Shared<A>>>,
}

/// How a fast-path acquire ended.
pub(crate) enum Tried<A: Actor> {
    /// Taken: here is the guard.
    Acquired(LockGuard),
    /// Not tried: someone else is acting. Ask the actor.
    AskActor,
    /// Held by another owner (a first try is done): ask the actor (given back) to wait for it.
    Busy(Shared<A>),
    /// Redis did not answer: the actor (given back) settles whether it ran; ask it, carrying
    /// the error.
    Failed(LockError, Shared<A>),
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
        Direct {
            node: Arc::downgrade(node),
            watchdog_lease: node.config.watchdog_timeout,
            watchdog,
            kind,
            name,
            errands: node.arbiter.errands().clone(),
            next_hold: AtomicU64::new(1),
            // A fair lock's waiters must all go through the queue in Redis: never direct.
            state: Mutex::new(FastPath::new(kind.per_owner())),
        }
    }

    fn lock(&self) -> MutexGuard<'_, FastPath<DirectHold, Doubted, Shared<A>>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn next_hold(&self) -> u64 {
        self.next_hold.fetch_add(1, Ordering::Relaxed)
    }

    /// Counts a guard out (see [`GuardLink`]): the actor's address is kept from now until
    /// the last guard is counted back. `actor` is asked only when none is kept yet.
    pub(crate) fn hand_out(&self, actor: impl FnOnce() -> Shared<A>) {
        self.lock().hand_out(actor);
    }

    /// For the actor, at every turn: it is in charge now; takes the holds taken directly
    /// and the calls in doubt into its care.
    pub(crate) fn absorb(&self) -> (impl Iterator<Item = DirectHold>, Vec<Doubted>) {
        self.lock().absorb()
    }

    /// For the actor, once it is idle: callers may act directly again.
    pub(crate) fn release_to_callers(&self) {
        self.lock().actor_idle();
    }

    fn watchdog_lease(&self) -> Duration {
        self.watchdog_lease
    }

    /// The record of a call for `owner` that may have run (setting up to `lease`), counted
    /// as an errand until the actor has settled it.
    fn doubted(
        &self,
        owner: LockOwner,
        lease: Duration,
        settle: Option<(LockError, oneshot::Sender<Result<Released, LockError>>)>,
    ) -> Doubted {
        Doubted {
            owner,
            lease,
            errand: self.errands.start(),
            settle,
        }
    }

    /// Wakes the actor for a doubt recorded in the machine. An actor that is gone (its
    /// client stopped) settles nothing: the doubts go with it, as its holds do.
    fn wake(&self, actor: &Shared<A>) {
        post(actor, Turn);
        if !actor.connected() {
            drop(self.lock().absorb());
        }
    }

    /// The node, while its client runs.
    fn node(&self) -> Option<Arc<Node>> {
        self.node.upgrade().filter(|node| !node.is_stopped())
    }

    /// Tries to take the lock for `owner` without the actor, with the watchdog (`fixed`
    /// `None`) or for a fixed lease. The hold stays on the fast path (see
    /// [`FastPath::place`]).
    ///
    /// Takes the actor's address by value: it becomes the kept one unless one is kept
    /// already, so a fast acquire copies no address.
    pub(crate) async fn try_acquire(
        self: &Arc<Self>,
        actor: Shared<A>,
        owner: LockOwner,
        fenced: bool,
        fixed: Option<Duration>,
    ) -> Tried<A> {
        let Some(node) = self.node() else {
            return Tried::AskActor; // the actor says Shutdown
        };
        let epoch = {
            let mut state = self.lock();
            if state.begin_try(actor).is_err() {
                return Tried::AskActor;
            }
            state.epoch()
        };
        let lease = fixed.unwrap_or_else(|| self.watchdog_lease());
        let lease_ms = lease.as_millis() as u64;
        let mut pending = Pending::new(self.clone(), owner, lease);
        let sent = Instant::now();
        // Boxed: the Redis calls' futures are most of the size of an acquire's future, which
        // is moved whole into the caller's task (and copied on every move).
        let reply = Box::pin(self.try_once(&node, owner, lease_ms, fenced)).await;
        let mut answer = match &reply {
            Ok((None, ..)) => TryAnswer::Granted,
            Ok((Some(_), ..)) => TryAnswer::Busy,
            Err(LockError::Unavailable { .. }) => TryAnswer::Unanswered,
            Err(LockError::NotReplicated { .. }) => TryAnswer::NotReplicated,
            Err(_) => TryAnswer::Refused,
        };
        // A grant's watchdog entry names the actor weakly (it must not keep it alive).
        let (after, weak) = pending.answered(|state| {
            // A grant on its way when a force-unlock came is settled as a call in doubt.
            let (counted, after) =
                state.try_answered_since(epoch, answer, || self.doubted(owner, lease, None));
            answer = counted;
            (after, state.actor().map(|actor| actor.downgrade()))
        });
        let reply = match reply {
            Ok((None, ..)) if answer != TryAnswer::Granted => Err(LockError::Lost {
                name: self.name.to_string(),
            }),
            other => other,
        };
        let error = match reply {
            // A direct try runs only while the process counts no hold of the lock: a first
            // hold says nothing new.
            Ok((None, token, _)) => {
                let placed = self.grant(&node, owner, fixed, lease, sent, weak, token, epoch);
                match placed {
                    Ok(guard) => return Tried::Acquired(guard),
                    Err(None) => return Tried::AskActor,
                    Err(Some(actor)) => {
                        // A force-unlock came between the answer and the placing.
                        self.wake(&actor);
                        let error = LockError::Lost {
                            name: self.name.to_string(),
                        };
                        return Tried::Failed(error, actor);
                    }
                }
            }
            Ok((Some(_), ..)) => None,
            Err(error) => Some(error),
        };
        match (after, error) {
            (AfterTry::Queue(actor), _) => Tried::Busy(actor),
            (AfterTry::DoubtAndQueue(actor), Some(error)) => {
                self.wake(&actor);
                Tried::Failed(error, actor)
            }
            (_, Some(error)) => Tried::Error(error),
            (_, None) => Tried::AskActor, // never: the actor was kept while the call was out
        }
    }

    /// Makes the guard of a hold taken directly (counted out already), and puts the hold in
    /// the slot; or, if a force-unlock came since the try began in `epoch`, settles the
    /// grant as a call in doubt and gives back the actor (in charge now) to queue the caller.
    #[allow(clippy::too_many_arguments)]
    fn grant(
        self: &Arc<Self>,
        node: &Node,
        owner: LockOwner,
        fixed: Option<Duration>,
        lease: Duration,
        sent: Instant,
        actor: Option<actix::WeakAddr<A>>,
        token: Option<u64>,
        epoch: u64,
    ) -> Result<LockGuard, Option<Shared<A>>> {
        let (status, receiver) = StatusSender::held();
        let until = surely_held_until(sent, lease);
        status.set_deadline(Some(until));
        let watch_id = match (fixed, actor) {
            (None, Some(actor)) => Some(self.watchdog.register(
                self.kind,
                self.name.clone(),
                owner,
                actor,
                status.loser(),
                sent + lease,
            )),
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
        let placed = {
            let mut state = self.lock();
            let doubt = || self.doubted(owner, lease, None);
            match state.place_fresh(hold, fixed.map(|_| until), taken, epoch, doubt) {
                Ok(()) => None,
                Err(taken) => Some((taken, state.actor().cloned())),
            }
        };
        if let Some((taken, actor)) = placed {
            if let Some(watch_id) = taken.watch_id {
                self.watchdog.unregister(watch_id);
            }
            // Kept while the doubt waits for it (so never `None`).
            return Err(actor);
        }
        tracing::debug!(lock = %self.name, owner = owner.id(), "acquired directly");
        let link: Arc<dyn GuardLink> = self.clone();
        Ok(
            LockGuard::new(link, self.name.clone(), owner, hold, fixed, receiver)
                .with_token(token)
                .timed(HoldTimer::start(
                    self.kind.label(token.is_some()),
                    &self.name,
                    &node.config,
                )),
        )
    }

    /// One acquire on the fast path. A free lock of a kind that can is taken with a plain
    /// `SET NX PX` (no Lua); the acquire script is built and sent only when that finds the
    /// lock busy, or for the other kinds.
    async fn try_once(
        &self,
        node: &Node,
        owner: LockOwner,
        lease_ms: u64,
        fenced: bool,
    ) -> Result<TryReply, LockError> {
        let field = node.owner_field_with(owner.id(), self.kind.field_suffix());
        let field = field.as_str();
        let commands = &node.commands;
        let script = || {
            self.kind
                .acquire(&self.name, field, lease_ms, fenced, 0, commands.pubsub)
        };
        // After a plain command, the script's future is boxed: it is rarely needed.
        let Some(plain) = self.kind.plain_acquire(&self.name, field, lease_ms, fenced) else {
            if commands.waits_in_one_flight(&self.name) {
                // Boxed: only on a primary with replicas.
                return Box::pin(acquire_then_wait(commands, script(), &self.name)).await;
            }
            return run_acquire(commands.clone(), script(), self.name.clone()).await;
        };
        // The command and its WAIT on one server, even if a followed primary moves meanwhile.
        let pinned = commands.clone().pinned();
        let reply = pinned.clone().command(plain, self.name.clone()).await?;
        if reply != redis::Value::Okay {
            return Box::pin(run_acquire(commands.clone(), script(), self.name.clone())).await;
        }
        pinned.confirm_replicated(self.name.clone()).await?;
        Ok((None, None, false))
    }

    /// Unlocks a hold taken out of the slot by [`FastPath::begin_unlock`].
    ///
    /// `pending` stands for this call (counted in flight by `begin_unlock`): while it is,
    /// the actor's address stays kept, so no copy of it is made for the common case.
    async fn unlock_directly(
        self: Arc<Self>,
        mut pending: Pending<A>,
        taken: DirectHold,
    ) -> Result<Released, LockError> {
        let Some(node) = self.node() else {
            let lease = self.watchdog_lease();
            pending.answered(|state| {
                state.unlock_answered(UnlockAnswer::Answered, || {
                    self.doubted(taken.owner, lease, None)
                })
            });
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
        let field = node.owner_field_with(owner.id(), self.kind.field_suffix());
        let call = self.kind.unlock(
            &self.name,
            field.as_str(),
            lease.as_millis() as u64,
            node.commands.pubsub,
        );
        let reply = node
            .commands
            .clone()
            .eval::<Option<i64>>(call, self.name.clone())
            .await;
        drop(node);
        let answer = match &reply {
            Ok(_) => UnlockAnswer::Answered,
            Err(LockError::Unavailable { .. }) => UnlockAnswer::Unanswered,
            Err(_) => UnlockAnswer::Failed,
        };
        // An unanswered unlock's caller awaits its settlement here.
        let mut settled = None;
        let after = pending.answered(|state| {
            state.unlock_answered(answer, || {
                let settle = match (&reply, answer) {
                    (Err(error), UnlockAnswer::Unanswered) => {
                        let (tx, rx) = oneshot::channel();
                        settled = Some(rx);
                        Some((error.clone(), tx))
                    }
                    _ => None,
                };
                self.doubted(owner, lease, settle)
            })
        });
        match reply {
            Ok(Some(_)) => {
                taken.status.send_replace(HoldStatus::Released);
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
                Err(LockError::NotOwner {
                    name: self.name.to_string(),
                })
            }
            Err(error) => {
                taken.status.send_replace(HoldStatus::Released);
                match (after, settled) {
                    (AfterUnlock::Settle(actor), Some(settled)) => {
                        self.wake(&actor);
                        // Settled even if this future is dropped now.
                        settled.await.unwrap_or(Err(LockError::Shutdown))
                    }
                    (AfterUnlock::Settle(actor) | AfterUnlock::Doubt(actor), _) => {
                        self.wake(&actor);
                        Err(error)
                    }
                    (AfterUnlock::Done, _) => Err(error),
                }
            }
        }
    }
}

impl<A: LockActorApi> GuardLink for Direct<A> {
    fn release(&self, owner: LockOwner, hold: u64) {
        let actor = self.lock().count_back();
        if let Some(actor) = actor {
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
        let taken = {
            let mut state = self.lock();
            let taken = state.begin_unlock(hold, Instant::now());
            if taken.is_some() {
                state.count_back_quietly();
            }
            taken
        };
        if let Some(taken) = taken {
            // Straight to Redis: the hold is still on the fast path.
            let pending = Pending::new(self.clone(), owner, self.watchdog_lease());
            return Box::pin(self.unlock_directly(pending, taken));
        }
        let Some(actor) = self.lock().count_back() else {
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

    fn extend(&self, owner: LockOwner, hold: u64, lease: Duration) -> Reply<()> {
        let state = self.lock();
        let Some(actor) = state.actor() else {
            return Box::pin(async { Err(LockError::Shutdown) });
        };
        // Carried out even if the caller drops the `extend()` future after its first poll.
        let request = send_detached(actor, ExtendHold { owner, hold, lease });
        Box::pin(async move { request.await? })
    }

    fn reenter(
        &self,
        owner: LockOwner,
        lease: Option<Duration>,
        wait: Duration,
        fenced: bool,
    ) -> Reply<LockGuard> {
        let state = self.lock();
        let Some(actor) = state.actor() else {
            return Box::pin(async { Err(LockError::Shutdown) });
        };
        let request = actor.send(AcquireRequest::new(owner, lease, wait, fenced));
        Box::pin(async move { request.await.map_err(|_| LockError::Shutdown)? })
    }
}

/// A direct call under way (counted in flight by the machine): if its future is dropped
/// before Redis answered, the call may or may not have run, so it is recorded as a doubt
/// for the actor to settle.
struct Pending<A: LockActorApi> {
    direct: Arc<Direct<A>>,
    owner: LockOwner,
    /// The lease the call would have set (how long a stray hold could last).
    lease: Duration,
    armed: bool,
}

impl<A: LockActorApi> Pending<A> {
    fn new(direct: Arc<Direct<A>>, owner: LockOwner, lease: Duration) -> Self {
        Pending {
            direct,
            owner,
            lease,
            armed: true,
        }
    }

    /// The call got its answer: tells the machine (`answer`), under its lock.
    fn answered<R>(
        &mut self,
        answer: impl FnOnce(&mut FastPath<DirectHold, Doubted, Shared<A>>) -> R,
    ) -> R {
        self.armed = false;
        answer(&mut self.direct.lock())
    }
}

impl<A: LockActorApi> Drop for Pending<A> {
    fn drop(&mut self) {
        if self.armed {
            let doubt = self.direct.doubted(self.owner, self.lease, None);
            let actor = self.direct.lock().call_dropped(doubt);
            if let Some(actor) = actor {
                self.direct.wake(&actor);
            }
        }
    }
}

/// A lock handle's own copy of its actor's address and fast-path state, so that a handle
/// used again and again skips the registry, and its actor stays up while the handle lives
/// (the registry only holds actors weakly: without it an idle actor stops after every
/// unlock and the next acquire starts a new one on the actor thread). Per-owner kinds (the
/// fair lock) keep nothing. Clones of a handle share it (a RedLock clones its members'
/// handles for every request: with a copy each, every acquire started five new actors).
pub(crate) struct DirectCache<A: Actor>(Arc<Mutex<Option<Kept<A>>>>);

/// An actor's address, shared: cloning actix's `Addr` allocates (a sender task of its own),
/// and the fast path hands the kept address to every acquire.
pub(crate) type Shared<A> = Arc<Addr<A>>;

/// An actor's address and what it shares with fast-path callers.
type Kept<A> = (Shared<A>, Arc<Direct<A>>);

impl<A: Actor> Default for DirectCache<A> {
    fn default() -> Self {
        DirectCache(Arc::new(Mutex::new(None)))
    }
}

impl<A: Actor> Clone for DirectCache<A> {
    fn clone(&self) -> Self {
        DirectCache(self.0.clone())
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
    pub(crate) fn keep(&self, kind: LockKind, actor: &Shared<A>, direct: &Arc<Direct<A>>) {
        if !kind.per_owner() {
            *self.0.lock().unwrap_or_else(|p| p.into_inner()) =
                Some((actor.clone(), direct.clone()));
        }
    }
}

/// What one try found: `(None, token, first)` acquired (with a token when fenced; `first`
/// when Redis says it is the owner's first hold there, so any hold the owner counted
/// before is gone), or `(Some(pttl), None, false)` held by another for `pttl` ms more.
pub(crate) type TryReply = (Option<i64>, Option<u64>, bool);

/// Runs an acquire script and reads its reply. With replica-synced acquisition on, a
/// grant counts only once enough replicas confirmed it: otherwise the reply is
/// [`LockError::NotReplicated`], and the hold is still in Redis for the caller to give back.
pub(crate) async fn run_acquire(
    commands: Commands,
    invocation: ScriptCall,
    name: LockName,
) -> Result<TryReply, LockError> {
    // The script and its WAIT on one server, even if a followed primary moves meanwhile.
    let commands = commands.pinned();
    let reply = commands
        .clone()
        .eval::<redis::Value>(invocation, name.clone())
        .await?;
    let tried = tried(reply).ok_or_else(|| LockError::Unavailable {
        node: commands.label().to_string(),
        reason: "unexpected reply to the acquire script".into(),
    })?;
    if tried.0.is_none() {
        commands.confirm_replicated(name).await?;
    }
    Ok(tried)
}

/// [`run_acquire`] with the script and its replica `WAIT` in one flight (see
/// [`Commands::eval_then_wait`]); the long way when that cannot be done. For a first try,
/// which usually finds the lock free: a busy answer wasted the `WAIT`.
async fn acquire_then_wait(
    commands: &Commands,
    invocation: ScriptCall,
    name: &LockName,
) -> Result<TryReply, LockError> {
    let granted = |reply: &redis::Value| {
        matches!(
            reply,
            redis::Value::Nil | redis::Value::Okay | redis::Value::Array(_)
        )
    };
    match commands.eval_then_wait(&invocation, name, granted).await {
        None => run_acquire(commands.clone(), invocation, name.clone()).await,
        Some(reply) => tried(reply?).ok_or_else(|| LockError::Unavailable {
            node: commands.label().to_string(),
            reason: "unexpected reply to the acquire script".into(),
        }),
    }
}

/// Reads an acquire script's reply; `None` for a reply no script of ours gives.
fn tried(reply: redis::Value) -> Option<TryReply> {
    match reply {
        redis::Value::Nil => Some((None, None, false)),
        redis::Value::Okay => Some((None, None, true)),
        redis::Value::Int(pttl) => Some((Some(pttl), None, false)),
        redis::Value::Array(items) => match items.as_slice() {
            [redis::Value::Int(token)] => Some((None, u64::try_from(*token).ok(), false)),
            [redis::Value::Int(token), redis::Value::Int(0)] => {
                Some((None, u64::try_from(*token).ok(), true))
            }
            _ => None,
        },
        _ => None,
    }
}

/// The fast path as the lock machine sees it, behind its mutex.
impl<A: LockActorApi> Fast for &Direct<A> {
    type Taken = DirectHold;
    type Doubt = Doubted;

    fn absorb(&mut self) -> (Vec<DirectHold>, Vec<Doubted>) {
        let (taken, doubts) = self.lock().absorb();
        (taken.collect(), doubts)
    }

    fn voided(&mut self) {
        self.lock().voided();
    }

    fn counts_complete(&self) -> bool {
        self.lock().counts_complete()
    }
}
