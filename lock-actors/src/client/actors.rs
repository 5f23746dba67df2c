//! The actors of one node, owned by the client: the registries of its lock actors and
//! semaphore actors (one per name in use, started on demand) and the renewal service that
//! keeps its watchdog-leased holds and lease-less permits alive.

use crate::keys::LockName;
use crate::latch::{LatchActor, LatchRegistry};
use crate::lease::list::Renewable;
use crate::lease::renewal::{RenewalHealth, RenewalService};
use crate::lock::lease_entry::WatchRegistry;
use crate::lock::{actor_key, Direct, LockActor, LockKind, LockOwner, LockRegistry};
use crate::node::Node;
use crate::registry::Registry;
use crate::runtime::Closing;
use crate::semaphore::lease_entry::PermitWatch;
use crate::semaphore::{Kind, SemaphoreActor, SemaphoreRegistry};
use actix::Addr;
use std::sync::Arc;
use std::time::Duration;

/// Semaphore actor ids sit far above any lock actor's: a channel never has two
/// subscribers with one id.
const SEMAPHORE_IDS: u64 = 1 << 62;
/// Latch actor ids sit apart from both and from the inspector's watches (from 1 << 61),
/// for the same reason.
const LATCH_IDS: u64 = 1 << 60;

/// A node and the actors of one client on it.
pub(crate) struct NodeActors {
    pub(crate) node: Arc<Node>,
    locks: Arc<LockRegistry>,
    semaphores: Arc<SemaphoreRegistry>,
    latches: Arc<LatchRegistry>,
    /// The holds the renewal service keeps alive.
    pub(crate) watchdog: Arc<WatchRegistry<LockActor>>,
    /// The lease-less permits the renewal service keeps alive.
    permit_watch: Arc<PermitWatch<SemaphoreActor>>,
    /// How the renewal service's batches are going (see `renewal_failing`).
    health: Arc<RenewalHealth>,
    _renewal: Addr<RenewalService>,
}

impl NodeActors {
    /// Empty registries for `node`, and its renewal service started on the node's arbiter.
    pub(crate) fn start(node: Arc<Node>, client_id: Arc<str>) -> Self {
        let watchdog = Arc::new(WatchRegistry::new(client_id.clone()));
        let permit_watch = Arc::new(PermitWatch::new(client_id));
        let lists: Vec<Arc<dyn Renewable>> = vec![watchdog.clone(), permit_watch.clone()];
        let commands = node.commands.clone();
        let lease = node.config.watchdog_timeout;
        let interval = node.config.renew_interval();
        let health = Arc::new(RenewalHealth::default());
        let shared = health.clone();
        let renewal = node
            .arbiter
            .start(move |_| RenewalService::new(lists, commands, lease, interval, shared));
        NodeActors {
            node,
            locks: Arc::new(Registry::new(0)),
            semaphores: Arc::new(Registry::new(SEMAPHORE_IDS)),
            latches: Arc::new(Registry::new(LATCH_IDS)),
            watchdog,
            permit_watch,
            health,
            _renewal: renewal,
        }
    }

    /// The live lock actor for the `kind` lock `name`, started if there is none.
    /// `owner` picks the actor of a per-owner kind (the fair lock); other kinds ignore it.
    pub(crate) fn lock_actor(
        &self,
        kind: LockKind,
        name: &LockName,
        owner: Option<LockOwner>,
    ) -> Addr<LockActor> {
        self.lock_actor_direct(kind, name, owner).0
    }

    /// [`lock_actor`](Self::lock_actor), with what the actor shares with fast-path callers.
    pub(crate) fn lock_actor_direct(
        &self,
        kind: LockKind,
        name: &LockName,
        owner: Option<LockOwner>,
    ) -> (Addr<LockActor>, Arc<Direct<LockActor>>) {
        self.locks.get_or_start(actor_key(kind, name, owner), |id| {
            let node = self.node.clone();
            let registry = self.locks.clone();
            let actor_name = name.clone();
            let direct = Arc::new(Direct::new(
                &node,
                self.watchdog.clone(),
                kind,
                name.clone(),
            ));
            let shared = direct.clone();
            let addr = self.node.arbiter.start(move |_| {
                LockActor::new(node, kind, actor_name, owner, id, shared, registry)
            });
            (addr, direct)
        })
    }

    /// Drops a registry entry whose lock actor turned out to be stopped.
    pub(crate) fn evict_lock_actor(
        &self,
        kind: LockKind,
        name: &LockName,
        owner: Option<LockOwner>,
        addr: &Addr<LockActor>,
    ) {
        self.locks.evict(&actor_key(kind, name, owner), addr);
    }

    /// The live actor of semaphore `name`, started on the client's arbiter if there is none.
    pub(crate) fn semaphore_actor(&self, kind: Kind, name: &LockName) -> Addr<SemaphoreActor> {
        let (addr, ()) = self.semaphores.get_or_start((kind, name.clone()), |id| {
            let node = self.node.clone();
            let registry = self.semaphores.clone();
            let actor_name = name.clone();
            let permit_watch = self.permit_watch.clone();
            let addr = self.node.arbiter.start(move |_| {
                SemaphoreActor::new(node, registry, actor_name, kind, id, permit_watch)
            });
            (addr, ())
        });
        addr
    }

    /// Drops a registry entry whose semaphore actor turned out to be stopped.
    pub(crate) fn evict_semaphore_actor(
        &self,
        kind: Kind,
        name: &LockName,
        addr: &Addr<SemaphoreActor>,
    ) {
        self.semaphores.evict(&(kind, name.clone()), addr);
    }

    /// The live actor of latch `name`, started on the client's arbiter if there is none.
    pub(crate) fn latch_actor(&self, name: &LockName) -> Addr<LatchActor> {
        let (addr, ()) = self.latches.get_or_start(name.clone(), |id| {
            let node = self.node.clone();
            let registry = self.latches.clone();
            let actor_name = name.clone();
            let addr = self
                .node
                .arbiter
                .start(move |_| LatchActor::new(node, registry, actor_name, id));
            (addr, ())
        });
        addr
    }

    /// How many latch actors are registered (live or stopping).
    pub(crate) fn latch_actors(&self) -> usize {
        self.latches.len()
    }

    /// The live actor `A` names by `key`, started if there is none.
    pub(crate) fn find<A: Registered>(&self, key: &A::Key) -> Addr<A> {
        A::find(self, key)
    }

    /// Whether a renewal batch to this node failed and has not gone through since, or has
    /// waited longer than `patience` for its answer: its holds are not being renewed now
    /// (they are lost at their deadline unless a retry goes through first).
    pub(crate) fn renewal_failing(&self, patience: Duration) -> bool {
        self.health.failing(patience)
    }

    /// How many lock actors are registered (live or stopping).
    pub(crate) fn lock_actors(&self) -> usize {
        self.locks.len()
    }

    /// How many semaphore actors are registered (live or stopping).
    pub(crate) fn semaphore_actors(&self) -> usize {
        self.semaphores.len()
    }

    /// Tells every live actor that the client is closing (see [`Closing`]); each keeps an
    /// errand of the client's until it has nothing more to send. A message already in an
    /// actor's mailbox (a cancelled acquire, a dropped guard's release) is handled first.
    pub(crate) fn close(&self) {
        let errands = self.node.arbiter.errands();
        for actor in self.locks.live_where(|_| true) {
            actor.do_send(Closing(errands.start()));
        }
        for actor in self.semaphores.live_where(|_| true) {
            actor.do_send(Closing(errands.start()));
        }
        for actor in self.latches.live_where(|_| true) {
            actor.do_send(Closing(errands.start()));
        }
    }

    /// Marks the node stopped when the client stops, so the fast paths refuse as the actors
    /// do (the connection may outlive the actor thread by a moment), and empties the lock
    /// actor registry. Each entry's fast-path state holds the node, so entries left behind
    /// by actors dropped with the thread (they never retire) would keep the node, and with
    /// it its connections, alive for good.
    pub(crate) fn stop(&self) {
        self.node.stop();
        self.locks.clear();
    }
}

/// An actor the client runs one of per key (a lock's kind, name and per-owner owner; a
/// semaphore's kind and name), found or started through [`NodeActors`], and dropped from
/// it when found stopped: what [`LockClient::ask`](super::LockClient::ask) needs to reach
/// any of them.
pub(crate) trait Registered: actix::Actor<Context = actix::Context<Self>> {
    /// What names one actor.
    type Key;

    /// The live actor for `key`, started if there is none.
    fn find(actors: &NodeActors, key: &Self::Key) -> Addr<Self>;

    /// Drops the registry entry of `key` if it still is `stopped`.
    fn evict(actors: &NodeActors, key: &Self::Key, stopped: &Addr<Self>);
}

impl Registered for LockActor {
    type Key = (LockKind, LockName, Option<LockOwner>);

    fn find(actors: &NodeActors, (kind, name, owner): &Self::Key) -> Addr<Self> {
        actors.lock_actor(*kind, name, *owner)
    }

    fn evict(actors: &NodeActors, (kind, name, owner): &Self::Key, stopped: &Addr<Self>) {
        actors.evict_lock_actor(*kind, name, *owner, stopped);
    }
}

impl Registered for SemaphoreActor {
    type Key = (Kind, LockName);

    fn find(actors: &NodeActors, (kind, name): &Self::Key) -> Addr<Self> {
        actors.semaphore_actor(*kind, name)
    }

    fn evict(actors: &NodeActors, (kind, name): &Self::Key, stopped: &Addr<Self>) {
        actors.evict_semaphore_actor(*kind, name, stopped);
    }
}

impl Registered for LatchActor {
    type Key = LockName;

    fn find(actors: &NodeActors, name: &Self::Key) -> Addr<Self> {
        actors.latch_actor(name)
    }

    fn evict(actors: &NodeActors, name: &Self::Key, stopped: &Addr<Self>) {
        actors.latches.evict(name, stopped);
    }
}
