//! One Redis node: its command connection and its subscription connection (owned by the
//! `NodeSupervisor` actor), which routes the messages of each channel to the actors that
//! listen on it. Knows channels and connections, not lock kinds.

pub(crate) mod cluster_resend;
pub(crate) mod connection;
mod followed;
mod homed;
pub(crate) mod identity;
#[cfg(feature = "inspect")]
mod keyspace;
mod manager;
pub(crate) mod publishing;
mod replicas;
mod roles;
mod sentinel;
mod supervisor;
pub(crate) mod tls;

#[cfg(feature = "inspect")]
pub(crate) use keyspace::Shard;
pub use supervisor::NodeSupervisor;
pub(crate) use supervisor::{Subscription, Unsubscribe, Wake};

use crate::config::{ClientConfig, ReplicaSyncMode};
use crate::denied::{keys_target, Refusal};
use crate::error::LockError;
use crate::keys::LockName;
use crate::runtime::ActorRuntime;
use crate::script::ScriptCall;
use actix::prelude::*;
use connection::{Connection, Link, PubSub, SubscriptionTarget};
use identity::ServerIdentity;
use redis::{FromRedisValue, Script};
use replicas::ReplicaCounts;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

/// The longest one `WAIT` of replica sync blocks its connection (see
/// [`Commands::wait_rest`]); a healthy replica answers well within it.
const WAIT_SLICE: Duration = Duration::from_millis(10);

/// Runs nothing: its one key is checked against the user's ACL when it is called, which
/// tells which key of a refused script call was refused (see [`Commands::eval`]).
static KEY_PROBE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("key_probe.lua")));

/// Sends commands to one node, each bounded by the response timeout.
///
/// A clone shares the one multiplexed connection: concurrent commands pipeline on it.
#[derive(Clone)]
pub(crate) struct Commands {
    conn: Connection,
    timeout: Duration,
    /// What logs and errors call the node, and its replicas: one `Arc` (a clone of the
    /// commands is made per call on the hot path).
    shared: Arc<Shared>,
    /// Which publish command this node's lock scripts use.
    pub(crate) pubsub: PubSub,
    replica_sync: ReplicaSyncMode,
}

/// What every clone of a node's [`Commands`] shares.
pub(crate) struct Shared {
    label: Box<str>,
    /// The replicas of each primary, for the default replica sync.
    replicas: ReplicaCounts,
}

impl Shared {
    pub(crate) fn new(label: &str) -> Self {
        Shared {
            label: label.into(),
            replicas: ReplicaCounts::default(),
        }
    }
}

impl Commands {
    /// Runs a script about lock `name`; Redis errors become [`LockError`]s.
    ///
    /// The connection bounds every request by the response timeout (and a reconnect by
    /// the connect timeout, tried twice), so no extra timer is armed here: on the hot path
    /// that timer cost more than the actor hops.
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
        match reply {
            Ok(value) => Ok(value),
            Err(err) => match Refusal::of(&err) {
                // Boxed: the refusal's probes are the rare path; inline, their calls would
                // double the size of every script call's future.
                Some(refusal) => {
                    Err(Box::pin(self.script_refused(refusal, &err, &call, &name)).await)
                }
                None => Err(self.error(&err, &name)),
            },
        }
    }

    /// The [`LockError::Denied`] for a script call the ACL refused. Redis does not say
    /// which key it refused: each key of the call is tried alone with a script that does
    /// nothing, and the ones refused are named (only on this error path).
    async fn script_refused(
        &mut self,
        refusal: Refusal,
        err: &redis::RedisError,
        call: &ScriptCall,
        name: &LockName,
    ) -> LockError {
        let target = if refusal == Refusal::Keys {
            let keys = call.key_names();
            let mut refused = Vec::new();
            for key in &keys {
                let probe = ScriptCall::with_key(&KEY_PROBE, key.as_str());
                if let Err(e) = self.conn.eval(&probe).await {
                    if Refusal::of(&e) == Some(Refusal::Keys) {
                        refused.push(key.clone());
                    }
                }
            }
            if refused.is_empty() {
                Some(keys_target(&keys, false))
            } else {
                Some(keys_target(&refused, true))
            }
        } else {
            None
        };
        refusal.into_error(
            err,
            name.unmapped(),
            &self.shared.label,
            Some("EVALSHA"),
            target,
        )
    }

    /// These commands with every call bounded by `limit` (see [`Connection::within`]).
    pub(crate) fn within(mut self, limit: Duration) -> Self {
        self.conn = self.conn.within(limit);
        self
    }

    /// Runs one plain command about lock `name` and returns its reply.
    pub(crate) async fn command(
        mut self,
        cmd: redis::Cmd,
        name: LockName,
    ) -> Result<redis::Value, LockError> {
        let reply = self.conn.send(&cmd).await;
        reply.map_err(|err| match Refusal::of(&err) {
            // Name the command sent (SET, GET, ...): the refusal may not.
            Some(refusal) => {
                let sent = cmd.args_iter().next().and_then(|arg| match arg {
                    redis::Arg::Simple(bytes) => std::str::from_utf8(bytes).ok(),
                    _ => None,
                });
                let key =
                    (refusal == Refusal::Keys).then(|| keys_target(&[name.as_str().into()], true));
                let sent = sent.map(str::to_ascii_uppercase);
                refusal.into_error(
                    &err,
                    name.unmapped(),
                    &self.shared.label,
                    sent.as_deref(),
                    key,
                )
            }
            None => self.error(&err, &name),
        })
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
        } else if demoted && !matches!(self.conn.link(), Link::Single(_)) {
            // Behind a cluster or the sentinels, a read-only node is a primary a failover
            // demoted a moment ago: the connection follows the new one, so try again.
            LockError::Unavailable {
                node: self.shared.label.to_string(),
                reason: "READONLY: the primary was demoted by a failover; following the new one"
                    .into(),
            }
        } else if let Some(refusal) = Refusal::of(err) {
            // A plain command about a lock touches the lock's key only.
            let key =
                (refusal == Refusal::Keys).then(|| keys_target(&[name.as_str().into()], true));
            refusal.into_error(err, name.unmapped(), &self.shared.label, None, key)
        } else {
            LockError::from_redis(err, name.unmapped(), &self.shared.label)
        }
    }

    fn no_answer(&self) -> LockError {
        LockError::Unavailable {
            node: self.shared.label.to_string(),
            reason: format!("no answer within the response timeout ({:?})", self.timeout),
        }
    }

    pub(crate) fn label(&self) -> &str {
        &self.shared.label
    }

    /// Whether this node is a Redis Cluster (a script's keys must then share a slot).
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.conn.link(), Link::Cluster(_))
    }

    /// These commands kept on the server a followed primary's connection reaches now, so a
    /// lock script and the `WAIT` that confirms it go to the same server (see
    /// [`Link::Pinned`]); unchanged on one server or a cluster.
    pub(crate) fn pinned(mut self) -> Commands {
        if matches!(self.conn.link(), Link::Followed(_)) {
            self.conn = self.conn.pinned();
        }
        self
    }

    /// Replica sync after an acquire or a renewal: waits until the replicas confirmed every
    /// write sent so far on the connection that serves `name` (so the hold just taken or
    /// renewed), else
    /// [`LockError::NotReplicated`]. Under the default ([`ReplicaSyncMode::Connected`]) it
    /// waits for the replicas the primary has, content with one, and sends nothing when it
    /// has none; with a fixed count that many must confirm; when off: `Ok` at once.
    pub(crate) async fn confirm_replicated(self, name: LockName) -> Result<(), LockError> {
        match self.replica_wait(&name) {
            Some(wait) => self.wait_for(name, wait).await,
            None => Ok(()),
        }
    }

    /// Whether an acquire of `name` can send its script and its `WAIT` in one flight (see
    /// [`eval_then_wait`](Self::eval_then_wait)).
    pub(crate) fn waits_in_one_flight(&self, name: &LockName) -> bool {
        self.conn.keeps_order() && self.replica_wait(name).is_some()
    }

    /// The `WAIT` replica sync asks for after a write about `name`, if any.
    fn replica_wait(&self, name: &LockName) -> Option<ReplicaWait> {
        let (wanted, needed, timeout, aof) = match self.replica_sync {
            ReplicaSyncMode::Off => return None,
            ReplicaSyncMode::Connected { timeout } => {
                match self
                    .shared
                    .replicas
                    .for_key(self.conn.link(), name.as_str())
                {
                    0 => return None,
                    connected => (connected, 1, timeout, false),
                }
            }
            ReplicaSyncMode::AtLeast(sync) => (sync.replicas, sync.replicas, sync.timeout, false),
            ReplicaSyncMode::AtLeastAof(sync) => (sync.replicas, sync.replicas, sync.timeout, true),
        };
        Some(ReplicaWait {
            wanted,
            needed,
            timeout,
            aof,
        })
    }

    /// An acquire script and, when replica sync asks for one, its `WAIT` sent right behind
    /// it in one flight (one round trip instead of two), where the connection keeps the
    /// order of calls; `granted` tells from the script's reply whether it took the lock
    /// (only then does the `WAIT`'s answer count). `None` when this cannot be done in one
    /// flight (no sync wanted, a cluster, or the script not in the server's cache or
    /// refused): the caller then sends the script and the `WAIT` one after the other, and
    /// nothing was taken.
    pub(crate) async fn eval_then_wait(
        &self,
        call: &ScriptCall,
        name: &LockName,
        granted: impl FnOnce(&redis::Value) -> bool,
    ) -> Option<Result<redis::Value, LockError>> {
        let wait = self.replica_wait(name)?;
        if !self.conn.keeps_order() {
            return None;
        }
        // One server for the script and every slice of its WAIT.
        let pinned = self.clone().pinned();
        let (mut script_conn, mut wait_conn) = (pinned.conn.clone(), pinned.conn.clone());
        let evalsha = call.evalsha();
        let started = Instant::now();
        let slice = WAIT_SLICE.min(wait.timeout).max(Duration::from_millis(1));
        let (reply, confirmed) = futures_util::join!(
            script_conn.send(&evalsha),
            wait_conn.wait_replicas(name, wait.wanted, slice, wait.aof)
        );
        let reply = match reply {
            Ok(reply) => reply,
            // Not run: the caller sends it again the long way, which loads the script or
            // names what the ACL refused.
            Err(err)
                if err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
                    || Refusal::of(&err).is_some() =>
            {
                return None
            }
            Err(err) => return Some(Err(self.error(&err, name))),
        };
        if !granted(&reply) {
            return Some(Ok(reply));
        }
        let confirmed = match confirmed {
            Ok(confirmed) => confirmed,
            // Demoted before any replica confirmed: the grant goes with the old primary's data.
            Err(err) if followed::says_demoted(&err) => {
                return Some(self.judge(name, wait, 0).map(|()| reply))
            }
            Err(err) => return Some(Err(self.error(&err, name))),
        };
        let mut rest = pinned;
        let confirmed = rest.wait_rest(name, wait, started, Some(confirmed)).await;
        Some(confirmed.map(|()| reply))
    }

    /// `WAIT` on the connection serving `name`; `Ok` once enough replicas confirmed.
    async fn wait_for(mut self, name: LockName, wait: ReplicaWait) -> Result<(), LockError> {
        self.wait_rest(&name, wait, Instant::now(), None).await
    }

    /// Waits for the replicas in slices of at most [`WAIT_SLICE`] until every one wanted
    /// confirmed or `wait`'s timeout (from `started`) has passed; `confirmed` is what a first
    /// slice, sent already, answered. In slices because `WAIT` holds up every later request
    /// of the connection until it returns: with a replica that does not answer, one whole
    /// timeout would stall every lock of the client on this primary, and a reply queued
    /// behind it would miss its response timeout. Between slices the requests queued behind
    /// go through.
    async fn wait_rest(
        &mut self,
        name: &LockName,
        wait: ReplicaWait,
        started: Instant,
        mut confirmed: Option<usize>,
    ) -> Result<(), LockError> {
        loop {
            let left = wait.timeout.saturating_sub(started.elapsed());
            if let Some(confirmed) = confirmed {
                if confirmed >= wait.wanted || left.is_zero() {
                    return self.judge(name, wait, confirmed);
                }
            }
            // Never 0 ms: `WAIT n 0` blocks until the replicas answer, however long.
            let slice = WAIT_SLICE.min(left).max(Duration::from_millis(1));
            confirmed = match self
                .conn
                .wait_replicas(name, wait.wanted, slice, wait.aof)
                .await
            {
                Ok(confirmed) => Some(confirmed),
                // The primary was demoted while it waited (`UNBLOCKED`) or before (a replica
                // refuses `WAIT`): no replica confirmed it, and none will.
                Err(err) if followed::says_demoted(&err) => return self.judge(name, wait, 0),
                Err(err) => return Err(self.error(&err, name)),
            };
        }
    }

    /// `Ok` when `confirmed` replicas are enough for `wait`, else [`LockError::NotReplicated`].
    fn judge(&self, name: &LockName, wait: ReplicaWait, confirmed: usize) -> Result<(), LockError> {
        if confirmed >= wait.needed {
            return Ok(());
        }
        tracing::warn!(lock = %name, confirmed, wanted = wait.wanted,
            "too few replicas confirmed the lock");
        Err(LockError::NotReplicated {
            name: name.to_string(),
            wanted: wait.wanted,
            confirmed,
            timeout: wait.timeout,
        })
    }
}

/// What one `WAIT` asks: `wanted` replicas, at most `timeout`, content with `needed`.
#[derive(Clone, Copy)]
struct ReplicaWait {
    wanted: usize,
    needed: usize,
    timeout: Duration,
    /// `WAITAOF` (the write in the replicas' append-only files) rather than `WAIT`.
    aof: bool,
}

/// Everything an actor needs to know about its node. Shared and immutable, but for the
/// stopped flag.
pub(crate) struct Node {
    pub(crate) commands: Commands,
    pub(crate) supervisor: Addr<NodeSupervisor>,
    pub(crate) config: Arc<ClientConfig>,
    /// Which server(s) this node is, as they report it.
    pub(crate) server: ServerIdentity,
    client_id: Arc<str>,
    pub(crate) arbiter: crate::runtime::Scope,
    /// Set when the client stops: fast paths, which bypass the actors, refuse from then on.
    stopped: AtomicBool,
}

impl Node {
    /// Connects to the node, loads `scripts` into its script cache (best effort) and
    /// starts its supervisor on the client's thread.
    pub(crate) async fn connect(
        config: Arc<ClientConfig>,
        client_id: Arc<str>,
        runtime: &ActorRuntime,
        scripts: Vec<&'static Script>,
    ) -> Result<Arc<Node>, LockError> {
        let label: Arc<str> = config.label().into();
        let arbiter = runtime.arbiter().clone();
        let setup_config = config.clone();
        let setup_label = label.clone();
        let (commands, server, supervisor) = runtime
            .run(async move {
                let mut conn = Connection::open(&setup_config, &setup_label).await?;
                let target = SubscriptionTarget::new(&setup_config, &setup_label, &conn)?;
                let pubsub = conn
                    .pubsub(setup_config.sharded_subscription, &setup_label)
                    .await?;
                if matches!(setup_config.replica_sync, ReplicaSyncMode::AtLeastAof(_)) {
                    offers_waitaof(&mut conn, &setup_label).await?;
                }
                preload_scripts(&mut conn, scripts).await;
                let server = ServerIdentity::read(&mut conn, &setup_config, &setup_label).await;
                let shared = Arc::new(Shared::new(&setup_label));
                if matches!(setup_config.replica_sync, ReplicaSyncMode::Connected { .. }) {
                    keep_counting(&shared, &mut conn).await;
                }
                let commands = Commands {
                    conn,
                    timeout: setup_config.response_timeout,
                    shared,
                    pubsub,
                    replica_sync: setup_config.replica_sync,
                };
                let supervisor_label = setup_label.clone();
                let supervisor_config = setup_config.clone();
                let supervisor = Supervisor::start(move |_| {
                    NodeSupervisor::new(target, pubsub, supervisor_label, &supervisor_config)
                });
                Ok((commands, server, supervisor))
            })
            .await??;
        Ok(Arc::new(Node {
            commands,
            supervisor,
            config,
            server,
            client_id,
            arbiter,
            stopped: AtomicBool::new(false),
        }))
    }

    /// [`owner_field`](Self::owner_field) and `suffix`, without a heap allocation (see
    /// [`OwnerField`](crate::keys::OwnerField)).
    pub(crate) fn owner_field_with(&self, owner: u64, suffix: &str) -> crate::keys::OwnerField {
        crate::keys::OwnerField::new(&self.client_id, owner, suffix)
    }

    /// The hash field that stands for owner id `owner` in Redis: `<client-uuid>:<owner-id>`.
    pub(crate) fn owner_field(&self, owner: u64) -> String {
        self.owner_field_with(owner, "").as_str().to_owned()
    }

    /// Marks the node stopped when the client stops, so the fast paths refuse as the actors
    /// do (the connection may outlive the actor thread by a moment).
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
    }

    /// True once the client has stopped (see [`Node::stop`]).
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }
}

/// Reads the replica counts now, and again every [`replicas::REFRESH`] in a task of the
/// client's thread (it ends with the client). A server that will not tell (an ACL user
/// without `INFO`) counts as one without replicas, and a warning says so.
async fn keep_counting(shared: &Arc<Shared>, conn: &mut Connection) {
    if let Err(error) = shared.replicas.refresh(conn).await {
        // Said once, loudly: until it can be read, no acquire waits for a replica.
        tracing::warn!(node = %shared.label, %error,
            "could not read how many replicas the primary has (INFO replication, or CLUSTER \
             SLOTS on a cluster): acquires do not wait for replicas until it can be read; \
             allow those commands, or set no_replica_sync()");
    }
    let (shared, mut conn) = (shared.clone(), conn.clone());
    tokio::task::spawn_local(async move {
        let mut tick = tokio::time::interval(replicas::REFRESH);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await; // the first tick is at once: read above
        loop {
            tick.tick().await;
            if let Err(error) = shared.replicas.refresh(&mut conn).await {
                tracing::debug!(node = %shared.label, %error,
                    "could not read the replica count again");
            }
        }
    });
}

/// `Ok` when the server knows `WAITAOF` (Redis 7.2+, Valkey), which
/// [`ReplicaSyncMode::AtLeastAof`] sends after every acquire; a clear error at connect
/// otherwise, rather than every acquire failing.
async fn offers_waitaof(conn: &mut Connection, label: &str) -> Result<(), LockError> {
    let mut info = redis::cmd("COMMAND");
    info.arg("INFO").arg("WAITAOF");
    let reply = conn
        .send(&info)
        .await
        .map_err(|e| crate::denied::from_redis(&e, "", label))?;
    match reply {
        redis::Value::Array(items) if items.first().is_some_and(|i| *i != redis::Value::Nil) => {
            Ok(())
        }
        _ => Err(LockError::invalid_config(format!(
            "sync_replicas_aof needs WAITAOF (Redis 7.2 or later, Valkey), which {label} does \
             not offer; use sync_replicas instead"
        ))),
    }
}

/// Loads every script into Redis's script cache, so first uses do not pay a NOSCRIPT round
/// trip (the first watchdog round would otherwise hit it once per batch). Best effort: a
/// script missing later (Redis restarted) is loaded on its first NOSCRIPT anyway.
async fn preload_scripts(conn: &mut Connection, scripts: Vec<&'static Script>) {
    for script in scripts {
        if let Err(error) = conn.load_script(script).await {
            tracing::debug!(%error, "could not preload a lock script; it loads on first use");
        }
    }
}
