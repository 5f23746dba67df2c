//! One Redis node: its command connection, its subscription connection (owned by the
//! `NodeSupervisor` actor), its watchdog, and the registry of its lock actors.

use crate::config::{ClientConfig, ReplicaSync};
use crate::connection::{Connection, PubSub, SubscriptionTarget};
use crate::error::LockError;
use crate::identity::ServerIdentity;
use crate::keys::LockName;
use crate::lock::watchdog::{WatchRegistry, Watchdog};
use crate::lock::{Direct, LockActor, LockKind, LockOwner};
use crate::runtime::ActorRuntime;
use crate::script::ScriptCall;
use actix::prelude::*;
use actix::{WeakAddr, WeakRecipient};
use redis::aio::PubSubSink;
use redis::cluster_async::ClusterConnection;
use redis::{FromRedisValue, PushInfo, PushKind};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Sends commands to one node, each bounded by the response timeout.
///
/// A clone shares the one multiplexed connection: concurrent commands pipeline on it.
#[derive(Clone)]
pub(crate) struct Commands {
    conn: Connection,
    timeout: Duration,
    label: Arc<str>,
    /// Which publish command this node's lock scripts use.
    pub(crate) pubsub: PubSub,
    replica_sync: Option<ReplicaSync>,
}

impl Commands {
    /// Runs a script about lock `name`; Redis errors become [`LockError`]s.
    ///
    /// The connection manager bounds every request by the response timeout (and a
    /// reconnect by the connect timeout, tried twice), so no extra timer is armed here:
    /// on the hot path that timer cost more than the actor hops.
    pub(crate) async fn eval<T: FromRedisValue>(
        mut self,
        call: ScriptCall,
        name: LockName,
    ) -> Result<T, LockError> {
        let reply = self
            .conn
            .eval(&call)
            .await
            .and_then(|value| Ok(redis::from_redis_value(value)?));
        reply.map_err(|err| self.error(&err, &name))
    }

    /// Runs one plain command about lock `name` and returns its reply.
    pub(crate) async fn command(
        mut self,
        cmd: redis::Cmd,
        name: LockName,
    ) -> Result<redis::Value, LockError> {
        let reply = self.conn.send(&cmd).await;
        reply.map_err(|err| self.error(&err, &name))
    }

    /// Runs a plain command (or pipeline) about lock `name`.
    pub(crate) async fn query<T: FromRedisValue>(
        mut self,
        pipe: redis::Pipeline,
        name: LockName,
    ) -> Result<T, LockError> {
        let reply = pipe.query_async(&mut self.conn).await;
        reply.map_err(|err| self.error(&err, &name))
    }

    fn error(&self, err: &redis::RedisError, name: &LockName) -> LockError {
        let demoted = err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly);
        if err.is_timeout() {
            self.no_answer()
        } else if demoted && !matches!(self.conn, Connection::Single(_)) {
            // Behind a cluster or the sentinels, a read-only node is a primary a failover
            // demoted a moment ago: the connection follows the new one, so try again.
            LockError::Unavailable {
                node: self.label.to_string(),
                reason: "READONLY: the primary was demoted by a failover; following the new one"
                    .into(),
            }
        } else {
            LockError::from_redis(err, name.as_str(), &self.label)
        }
    }

    fn no_answer(&self) -> LockError {
        LockError::Unavailable {
            node: self.label.to_string(),
            reason: format!("no answer within the response timeout ({:?})", self.timeout),
        }
    }

    pub(crate) fn label(&self) -> &str {
        &self.label
    }

    /// Whether this node is a Redis Cluster (a script's keys must then share a slot).
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.conn, Connection::Cluster(_))
    }

    /// With replica-synced acquisition on: waits until enough replicas confirmed every
    /// write sent so far on the connection that serves `name` (so the hold just taken or
    /// renewed), else [`LockError::NotReplicated`]. Without it: `Ok` at once.
    pub(crate) async fn confirm_replicated(mut self, name: LockName) -> Result<(), LockError> {
        let Some(sync) = self.replica_sync else {
            return Ok(());
        };
        let confirmed = self
            .conn
            .wait_replicas(&name, sync.replicas, sync.timeout)
            .await
            .map_err(|err| self.error(&err, &name))?;
        if confirmed >= sync.replicas {
            return Ok(());
        }
        tracing::warn!(lock = %name, confirmed, wanted = sync.replicas,
            "too few replicas confirmed the lock");
        Err(LockError::NotReplicated {
            name: name.to_string(),
            wanted: sync.replicas,
            confirmed,
            timeout: sync.timeout,
        })
    }
}

/// Which actor serves a lock: its kind, its name, and for per-owner kinds (the fair lock)
/// its owner.
type ActorKey = (LockKind, LockName, Option<LockOwner>);

/// A registered actor: its id, its address, and what it shares with fast-path callers.
type RegisteredActor = (u64, WeakAddr<LockActor>, Arc<Direct>);

fn actor_key(kind: LockKind, name: &LockName, owner: Option<LockOwner>) -> ActorKey {
    (kind, name.clone(), owner.filter(|_| kind.per_owner()))
}

/// Everything a lock actor needs to know about its node. Shared, immutable but for the
/// registry and the watch list.
pub(crate) struct Node {
    pub(crate) commands: Commands,
    pub(crate) supervisor: Addr<NodeSupervisor>,
    pub(crate) watchdog: Arc<WatchRegistry>,
    pub(crate) config: Arc<ClientConfig>,
    /// Which server(s) this node is, as they report it.
    pub(crate) server: ServerIdentity,
    client_id: Arc<str>,
    pub(crate) arbiter: actix_rt::ArbiterHandle,
    registry: Mutex<HashMap<ActorKey, RegisteredActor>>,
    next_actor: AtomicU64,
    /// Set when the client stops: fast paths, which bypass the actors, refuse from then on.
    stopped: AtomicBool,
    _watchdog_actor: Addr<Watchdog>,
    /// The semaphore actors of this node (see `crate::semaphore`).
    pub(crate) semaphores: crate::semaphore::Registry,
}

impl Node {
    /// Connects to the node and starts its supervisor and watchdog on the client's thread.
    pub(crate) async fn connect(
        config: Arc<ClientConfig>,
        client_id: Arc<str>,
        runtime: &ActorRuntime,
    ) -> Result<Arc<Node>, LockError> {
        let label: Arc<str> = config.label().into();
        let target = SubscriptionTarget::new(&config, &label)?;
        let arbiter = runtime.arbiter().clone();
        let setup_config = config.clone();
        let setup_label = label.clone();
        let setup_client_id = client_id.clone();
        let (commands, server, supervisor, watchdog, watchdog_actor) = runtime
            .run(async move {
                let mut conn = Connection::open(&setup_config, &setup_label).await?;
                let pubsub = conn
                    .pubsub(setup_config.sharded_subscription, &setup_label)
                    .await?;
                crate::lock::preload_scripts(&mut conn).await;
                let server = ServerIdentity::read(&mut conn, &setup_config, &setup_label).await;
                let commands = Commands {
                    conn,
                    timeout: setup_config.response_timeout,
                    label: setup_label.clone(),
                    pubsub,
                    replica_sync: setup_config.replica_sync,
                };
                let supervisor_label = setup_label.clone();
                let supervisor_config = setup_config.clone();
                let supervisor = Supervisor::start(move |_| {
                    NodeSupervisor::new(target, pubsub, supervisor_label, &supervisor_config)
                });
                let watchdog = Arc::new(WatchRegistry::new(setup_client_id));
                let watchdog_actor = Watchdog::new(
                    watchdog.clone(),
                    commands.clone(),
                    setup_config.watchdog_timeout,
                    setup_config.renew_interval(),
                )
                .start();
                Ok((commands, server, supervisor, watchdog, watchdog_actor))
            })
            .await??;
        Ok(Arc::new(Node {
            commands,
            supervisor,
            watchdog,
            config,
            server,
            client_id,
            arbiter,
            registry: Mutex::new(HashMap::new()),
            next_actor: AtomicU64::new(1),
            stopped: AtomicBool::new(false),
            _watchdog_actor: watchdog_actor,
            semaphores: Default::default(),
        }))
    }

    /// The hash field that stands for `owner` in Redis: `<client-uuid>:<owner-id>`.
    pub(crate) fn owner_field(&self, owner: LockOwner) -> String {
        use std::fmt::Write;
        // Sized up front (a u64 has at most 20 digits): this runs on every acquire and
        // unlock, and `format!` would grow the string twice.
        let mut field = String::with_capacity(self.client_id.len() + 21);
        field.push_str(&self.client_id);
        let _ = write!(field, ":{}", owner.id()); // writing to a String cannot fail
        field
    }

    /// The live lock actor for the `kind` lock `name`, started if there is none.
    /// `owner` picks the actor of a per-owner kind (the fair lock); other kinds ignore it.
    pub(crate) fn lock_actor(
        self: &Arc<Self>,
        kind: LockKind,
        name: &LockName,
        owner: Option<LockOwner>,
    ) -> Addr<LockActor> {
        self.lock_actor_direct(kind, name, owner).0
    }

    /// [`lock_actor`](Self::lock_actor), with what the actor shares with fast-path callers.
    pub(crate) fn lock_actor_direct(
        self: &Arc<Self>,
        kind: LockKind,
        name: &LockName,
        owner: Option<LockOwner>,
    ) -> (Addr<LockActor>, Arc<Direct>) {
        let mut registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        let key = actor_key(kind, name, owner);
        if let Some((_, weak, direct)) = registry.get(&key) {
            if let Some(addr) = weak.upgrade() {
                if addr.connected() {
                    return (addr, direct.clone());
                }
            }
        }
        let id = self.next_actor.fetch_add(1, Ordering::Relaxed);
        let node = self.clone();
        let actor_name = name.clone();
        let direct = Arc::new(Direct::new(self.clone(), kind, name.clone()));
        let shared = direct.clone();
        let addr = LockActor::start_in_arbiter(&self.arbiter, move |_| {
            LockActor::new(node, kind, actor_name, owner, id, shared)
        });
        registry.insert(key, (id, addr.downgrade(), direct.clone()));
        (addr, direct)
    }

    /// Called by a lock actor about to stop: it may, and leaves the registry, unless
    /// `still_wanted` (someone holds its address) says otherwise.
    pub(crate) fn retire_actor(
        &self,
        kind: LockKind,
        name: &LockName,
        owner: Option<LockOwner>,
        id: u64,
        still_wanted: impl FnOnce() -> bool,
    ) -> bool {
        let mut registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        if still_wanted() {
            return false;
        }
        let key = actor_key(kind, name, owner);
        if registry.get(&key).is_some_and(|(live, _, _)| *live == id) {
            registry.remove(&key);
        }
        true
    }

    /// Marks the node stopped when the client stops, so the fast paths refuse as the actors
    /// do (the connection may outlive the actor thread by a moment), and empties the lock
    /// actor registry. Each entry's fast-path state holds the node, so entries left behind
    /// by actors dropped with the thread (they never retire) would keep the node, and with
    /// it its connections, alive for good.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let entries = std::mem::take(&mut *self.registry.lock().unwrap_or_else(|p| p.into_inner()));
        drop(entries); // outside the lock: dropping an entry may drop the last node handle
    }

    /// True once the client has stopped (see [`Node::stop`]).
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Drops a registry entry whose actor turned out to be stopped.
    pub(crate) fn evict_actor(
        &self,
        kind: LockKind,
        name: &LockName,
        owner: Option<LockOwner>,
        addr: &Addr<LockActor>,
    ) {
        let mut registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        let key = actor_key(kind, name, owner);
        let stale = registry
            .get(&key)
            .is_some_and(|(_, weak, _)| weak.upgrade().is_none_or(|live| &live == addr));
        if stale {
            registry.remove(&key);
        }
    }

    /// How many lock actors are registered (live or stopping).
    pub(crate) fn actor_count(&self) -> usize {
        self.registry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

/// Wake a lock actor: its channel carried an unlock (`all` for a read unlock), or the
/// subscription connection came back and every waiter must try again.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wake {
    pub(crate) all: bool,
}

impl Message for Wake {
    type Result = ();
}

/// How long an actor goes without pub/sub after a failed SUBSCRIBE before trying again.
const SUBSCRIBE_RETRY: Duration = Duration::from_secs(1);

/// Where a waiting actor's subscription to its wake-up channel stands (lock and semaphore
/// actors alike: they subscribe before their head waiter's second try).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Subscription {
    /// Not subscribed; after a failure, not again before `retry_after`.
    None {
        retry_after: Option<Instant>,
    },
    Pending,
    Active,
}

impl Subscription {
    /// Never asked for.
    pub(crate) const NEVER: Subscription = Subscription::None { retry_after: None };

    /// Not subscribed, and free to ask now.
    pub(crate) fn due(self, now: Instant) -> bool {
        matches!(self, Subscription::None { retry_after } if retry_after.is_none_or(|at| at <= now))
    }

    /// Asks the supervisor to route `channel` to `subscriber`; resolves to the state the
    /// request ends in (a failure is logged, and polling at the lease covers for it).
    pub(crate) fn request(
        supervisor: &Addr<NodeSupervisor>,
        channel: String,
        id: u64,
        subscriber: WeakRecipient<Wake>,
    ) -> impl std::future::Future<Output = Subscription> + 'static {
        let request = supervisor.send(Subscribe {
            channel: channel.clone(),
            id,
            subscriber,
        });
        async move {
            match request.await {
                Ok(Ok(())) => Subscription::Active,
                failed => {
                    tracing::warn!(%channel, ?failed,
                        "cannot subscribe to wake-ups; polling until it works");
                    Subscription::None {
                        retry_after: Some(Instant::now() + SUBSCRIBE_RETRY),
                    }
                }
            }
        }
    }
}

/// Route a channel's messages to a lock actor; replies once Redis confirmed the subscription.
pub(crate) struct Subscribe {
    pub(crate) channel: String,
    pub(crate) id: u64,
    pub(crate) subscriber: WeakRecipient<Wake>,
}

impl Message for Subscribe {
    type Result = Result<(), LockError>;
}

/// Stop routing a channel to lock actor `id`.
pub(crate) struct Unsubscribe {
    pub(crate) channel: String,
    pub(crate) id: u64,
}

impl Message for Unsubscribe {
    type Result = ();
}

/// Owns the subscription connection of one Redis node and routes unlock messages to the
/// lock actors that wait on them.
///
/// When the connection drops, the supervisor restarts (actix [`Supervised`]): it reconnects
/// with backoff, subscribes again to every channel that still has a listener, and then wakes
/// every listener so it retries at once (an unlock published while disconnected is lost).
/// On a Sentinel deployment each reconnect asks the sentinels for the primary first. On a
/// Redis Cluster it keeps one RESP3 connection per node (the redis crate follows the
/// topology and re-subscribes each channel on the node that owns its slot); a dropped node
/// connection or a channel moved away with its slot makes it subscribe again and wake the
/// listeners in the same way.
/// You reach it only through [`LockClient`](crate::LockClient); it has no public messages.
///
/// # Example
///
/// Nothing to call: a waiter parked across a Redis restart is woken by the supervisor once
/// the subscription is back, and simply acquires.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
/// // Even if Redis restarts while this waits, the wait ends as soon as Redis is back.
/// let guard = client.lock("job")?.acquire_timeout(Duration::from_secs(60)).await?;
/// # Ok(()) }
/// ```
pub struct NodeSupervisor {
    target: SubscriptionTarget,
    pubsub: PubSub,
    label: Arc<str>,
    connect_timeout: Duration,
    response_timeout: Duration,
    routes: HashMap<String, Vec<(u64, WeakRecipient<Wake>)>>,
    sink: Option<Sink>,
    connected_once: bool,
    retry_delay: Duration,
    /// A cluster node connection dropped: subscriptions are being restored.
    resync_pending: bool,
}

const FIRST_RETRY: Duration = Duration::from_millis(50);
const LAST_RETRY: Duration = Duration::from_secs(2);
/// Channels per SUBSCRIBE command when subscribing again after a reconnect.
const RESUBSCRIBE_CHUNK: usize = 1000;

/// The sending half of a subscription connection.
#[derive(Clone)]
enum Sink {
    /// A classic pub/sub connection to one server.
    Single(PubSubSink),
    /// A cluster's RESP3 connections; messages arrive as [`Pushed`].
    Cluster(ClusterConnection),
}

impl Sink {
    async fn subscribe(&mut self, channels: &[String], pubsub: PubSub) -> redis::RedisResult<()> {
        match (self, pubsub) {
            (Sink::Single(sink), _) => sink.subscribe(channels).await,
            (Sink::Cluster(conn), PubSub::Classic) => conn.subscribe(channels).await,
            // One command per channel: each may live on another shard.
            (Sink::Cluster(conn), PubSub::Sharded) => {
                for channel in channels {
                    conn.ssubscribe(channel).await?;
                }
                Ok(())
            }
        }
    }

    async fn unsubscribe(&mut self, channel: &str, pubsub: PubSub) -> redis::RedisResult<()> {
        match (self, pubsub) {
            (Sink::Single(sink), _) => sink.unsubscribe(channel).await,
            (Sink::Cluster(conn), PubSub::Classic) => conn.unsubscribe(channel).await,
            (Sink::Cluster(conn), PubSub::Sharded) => conn.sunsubscribe(channel).await,
        }
    }
}

/// A push from a cluster's subscription connections (a message, a confirmation, or the
/// library's note that a node connection dropped).
struct Pushed(PushInfo);

impl Message for Pushed {
    type Result = ();
}

impl NodeSupervisor {
    fn new(
        target: SubscriptionTarget,
        pubsub: PubSub,
        label: Arc<str>,
        config: &ClientConfig,
    ) -> Self {
        NodeSupervisor {
            target,
            pubsub,
            label,
            connect_timeout: config.connect_timeout,
            response_timeout: config.response_timeout,
            routes: HashMap::new(),
            sink: None,
            connected_once: false,
            retry_delay: FIRST_RETRY,
            resync_pending: false,
        }
    }

    fn connect(&mut self, ctx: &mut Context<Self>) {
        let target = self.target.clone();
        let limit = self.connect_timeout;
        let supervisor = ctx.address().downgrade();
        let attempt = async move {
            let connecting = async {
                if let SubscriptionTarget::Cluster(seeds) = &target {
                    let forward = move |push: PushInfo| {
                        if let Some(supervisor) = supervisor.upgrade() {
                            supervisor.do_send(Pushed(push));
                        }
                        Ok::<(), std::convert::Infallible>(())
                    };
                    let client = seeds
                        .builder()
                        .use_protocol(redis::ProtocolVersion::RESP3)
                        .push_sender(forward)
                        .build()?;
                    let conn = client.get_async_connection().await?;
                    return Ok((Sink::Cluster(conn), None));
                }
                let client = target.single_client().await?;
                let (sink, stream) = client.get_async_pubsub().await?.split();
                Ok::<_, redis::RedisError>((Sink::Single(sink), Some(stream)))
            };
            tokio::time::timeout(limit, connecting).await
        };
        ctx.spawn(
            attempt
                .into_actor(self)
                .map(|result, act, ctx| match result {
                    Ok(Ok((sink, stream))) => {
                        if let Some(stream) = stream {
                            ctx.add_stream(stream);
                        }
                        act.sink = Some(sink);
                        act.retry_delay = FIRST_RETRY;
                        tracing::debug!(node = %act.label, "subscription connection up");
                        let reconnected = std::mem::replace(&mut act.connected_once, true);
                        act.resubscribe(reconnected, ctx);
                    }
                    failed => {
                        let reason = match failed {
                            Ok(Err(e)) => format!("{:?}", e.kind()),
                            _ => "connect timeout".to_string(),
                        };
                        tracing::warn!(node = %act.label, %reason, retry_in = ?act.retry_delay,
                    "subscription connection failed");
                        ctx.run_later(act.retry_delay, |act, ctx| act.connect(ctx));
                        act.retry_delay = (act.retry_delay * 2).min(LAST_RETRY);
                    }
                }),
        );
    }

    /// After (re)connecting: subscribe every routed channel, then, when this follows a
    /// lost connection (`wake`), wake every listener. A failed attempt is tried again with
    /// backoff while the connection is up.
    fn resubscribe(&mut self, wake: bool, ctx: &mut Context<Self>) {
        let (Some(sink), false) = (self.sink.clone(), self.routes.is_empty()) else {
            self.resync_pending = false;
            return;
        };
        let channels: Vec<String> = self.routes.keys().cloned().collect();
        let limit = self.response_timeout;
        let pubsub = self.pubsub;
        let mut sink = sink;
        let subscribing = async move {
            for chunk in channels.chunks(RESUBSCRIBE_CHUNK) {
                tokio::time::timeout(limit, sink.subscribe(chunk, pubsub))
                    .await
                    .map_err(|_| "timeout".to_string())?
                    .map_err(|e| format!("{:?}", e.kind()))?;
            }
            Ok::<(), String>(())
        };
        ctx.spawn(subscribing.into_actor(self).map(move |result, act, ctx| {
            match result {
                Err(reason) if matches!(act.sink, Some(Sink::Cluster(_))) => {
                    // A cluster node may be failing over: try again until it is served.
                    tracing::warn!(node = %act.label, %reason, retry_in = ?act.retry_delay,
                        "re-subscribing failed; retrying");
                    let delay = act.retry_delay;
                    act.retry_delay = (act.retry_delay * 2).min(LAST_RETRY);
                    ctx.run_later(delay, move |act, ctx| act.resubscribe(wake, ctx));
                    return;
                }
                Err(reason) => tracing::warn!(node = %act.label, %reason, "re-subscribing failed"),
                Ok(()) => act.retry_delay = FIRST_RETRY,
            }
            act.resync_pending = false;
            if wake {
                tracing::info!(node = %act.label, channels = act.routes.len(),
                    "subscriptions restored; waking every waiter");
                act.wake_all();
            }
        }));
    }

    fn wake_all(&self) {
        for subscriber in self.routes.values().flatten() {
            if let Some(recipient) = subscriber.1.upgrade() {
                recipient.do_send(Wake { all: true });
            }
        }
    }

    /// Passes an unlock message on `channel` to its listeners.
    fn deliver(&self, channel: &[u8], payload: &[u8]) {
        let Some(subscribers) = std::str::from_utf8(channel)
            .ok()
            .and_then(|channel| self.routes.get(channel))
        else {
            return;
        };
        let all = payload == crate::keys::READ_UNLOCK_MESSAGE.as_bytes();
        for (_, subscriber) in subscribers {
            if let Some(recipient) = subscriber.upgrade() {
                recipient.do_send(Wake { all });
            }
        }
    }
}

impl Actor for NodeSupervisor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.connect(ctx);
    }
}

impl Supervised for NodeSupervisor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        self.sink = None;
    }
}

impl StreamHandler<redis::Msg> for NodeSupervisor {
    fn handle(&mut self, msg: redis::Msg, _: &mut Context<Self>) {
        self.deliver(msg.get_channel_name().as_bytes(), msg.get_payload_bytes());
    }

    fn finished(&mut self, ctx: &mut Context<Self>) {
        tracing::warn!(node = %self.label, "subscription connection lost; reconnecting");
        ctx.stop();
    }
}

impl Handler<Pushed> for NodeSupervisor {
    type Result = ();

    fn handle(&mut self, Pushed(push): Pushed, ctx: &mut Context<Self>) {
        let bytes = |i: usize| match push.data.get(i) {
            Some(redis::Value::BulkString(b)) => Some(b.as_slice()),
            _ => None,
        };
        match push.kind {
            PushKind::Message | PushKind::SMessage => {
                if let (Some(channel), Some(payload)) = (bytes(0), bytes(1)) {
                    self.deliver(channel, payload);
                }
            }
            // The redis crate reconnects that node and re-subscribes its channels; an
            // unlock published meanwhile is lost, so once the channels are confirmed again
            // every listener retries.
            PushKind::Disconnection if !std::mem::replace(&mut self.resync_pending, true) => {
                tracing::warn!(node = %self.label,
                    "a cluster subscription connection dropped; restoring");
                ctx.run_later(FIRST_RETRY, |act, ctx| act.resubscribe(true, ctx));
            }
            PushKind::SUnsubscribe | PushKind::Unsubscribe => {
                // Not asked for while still routed: the channel's slot moved to another
                // node. Subscribe there and let its listeners retry.
                let channel = bytes(0).and_then(|c| std::str::from_utf8(c).ok());
                if let Some(channel) = channel.filter(|c| self.routes.contains_key(*c)) {
                    tracing::info!(node = %self.label, %channel,
                        "a channel moved with its slot; subscribing again");
                    if !std::mem::replace(&mut self.resync_pending, true) {
                        ctx.run_later(FIRST_RETRY, |act, ctx| act.resubscribe(true, ctx));
                    }
                }
            }
            _ => {}
        }
    }
}

impl Handler<Subscribe> for NodeSupervisor {
    type Result = ResponseActFuture<Self, Result<(), LockError>>;

    fn handle(&mut self, msg: Subscribe, _: &mut Context<Self>) -> Self::Result {
        let subscribers = self.routes.entry(msg.channel.clone()).or_default();
        subscribers.push((msg.id, msg.subscriber));
        let Some(mut sink) = self.sink.clone() else {
            // Disconnected: the reconnect subscribes this channel and wakes its listener.
            return Box::pin(fut::ready(Ok(())));
        };
        let limit = self.response_timeout;
        let label = self.label.clone();
        let pubsub = self.pubsub;
        Box::pin(
            async move {
                let channel = [msg.channel];
                match tokio::time::timeout(limit, sink.subscribe(&channel, pubsub)).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(LockError::Unavailable {
                        node: label.to_string(),
                        reason: format!("SUBSCRIBE failed: {:?}", e.kind()),
                    }),
                    Err(_) => Err(LockError::Unavailable {
                        node: label.to_string(),
                        reason: format!("SUBSCRIBE got no answer within {limit:?}"),
                    }),
                }
            }
            .into_actor(self),
        )
    }
}

impl Handler<Unsubscribe> for NodeSupervisor {
    type Result = ();

    fn handle(&mut self, msg: Unsubscribe, ctx: &mut Context<Self>) {
        let Some(subscribers) = self.routes.get_mut(&msg.channel) else {
            return;
        };
        subscribers.retain(|(id, _)| *id != msg.id);
        if !subscribers.is_empty() {
            return;
        }
        self.routes.remove(&msg.channel);
        if let Some(mut sink) = self.sink.clone() {
            let limit = self.response_timeout;
            let pubsub = self.pubsub;
            ctx.spawn(
                async move {
                    let _ =
                        tokio::time::timeout(limit, sink.unsubscribe(&msg.channel, pubsub)).await;
                }
                .into_actor(self),
            );
        }
    }
}
