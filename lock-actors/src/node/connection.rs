//! How a node is reached: one server, a Redis Cluster, or a followed primary (the one
//! Sentinel names, or the one of a listed group whose role is primary).
//! The command connection of each, where its subscription connection goes, and which
//! publish command its lock scripts use.

use super::followed::{keep_scanning, Finder, FollowedPrimary};
use super::homed::Homed;
use super::manager::{config_error, manager, Failure};
use super::roles::RoleScan;
use super::sentinel::sentinel_client;
use super::tls::{self, UrlRole};
use crate::config::TlsSettings;
use crate::config::{ClientConfig, Deployment, ShardedSubscriptionMode};
use crate::error::LockError;
use crate::keys::LockName;
use crate::script::ScriptCall;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr,
};
use redis::{
    Cmd, ErrorKind, FromRedisValue, InfoDict, Pipeline, RedisFuture, RedisResult, ServerErrorKind,
    Value,
};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Handle;

/// Which pub/sub the lock scripts publish on and waiters subscribe to, on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum PubSub {
    /// `PUBLISH` / `SUBSCRIBE`.
    Classic,
    /// `SPUBLISH` / `SSUBSCRIBE` (Redis 7+): the message stays on the lock's shard.
    Sharded,
}

/// The command connection of one node, and the runtime it belongs to.
///
/// Every call is polled inside that runtime (see [`Homed`]), whichever task awaits it:
/// the uncontended fast path and reads of a lock's state run in the caller's task, and a
/// reconnect the redis crate starts from there would otherwise belong to the caller's
/// runtime (its spawned task, its backoff timer, the new connection's socket and driver),
/// and break the client for everyone once that runtime ends.
#[derive(Clone)]
pub(crate) struct Connection {
    link: Link,
    /// The runtime the connection was opened on: the client's actor thread.
    home: Handle,
    /// The response timeout, when it is timed here rather than by the redis crate (one
    /// server): the timer is then the caller's, so the many calls of the fast path do not
    /// all arm timers on the home runtime.
    bound: Option<Duration>,
}

/// How a node is reached. Every variant is one multiplexed connection per Redis server it
/// talks to, however many locks and tasks use it.
#[derive(Clone)]
pub(crate) enum Link {
    /// One server; reconnects on its own.
    Single(ConnectionManager),
    /// A cluster: commands go to the primary of their first key's slot.
    Cluster(ClusterConnection),
    /// The primary the sentinels name, or the listed server whose role is primary; found
    /// again after a failover.
    Followed(Arc<FollowedPrimary>),
    /// A followed primary's connection as it was at one generation: a lock script and the
    /// `WAIT` that confirms it must reach the same server, even if the client moves to
    /// another primary between them (a `WAIT` on the new primary would confirm nothing of a
    /// grant made on the old one).
    Pinned(Arc<FollowedPrimary>, u64, ConnectionManager),
}

impl Connection {
    /// This connection kept on the server it reaches now (see [`Link::Pinned`]); a
    /// connection to one server or a cluster is returned as it is.
    pub(crate) fn pinned(&self) -> Connection {
        let Link::Followed(primary) = &self.link else {
            return self.clone();
        };
        let (generation, conn) = primary.current();
        Connection {
            link: Link::Pinned(primary.clone(), generation, conn),
            home: self.home.clone(),
            bound: self.bound,
        }
    }

    /// How the node is reached.
    pub(crate) fn link(&self) -> &Link {
        &self.link
    }

    /// How the node is reached, for a call made on it directly.
    pub(crate) fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }

    /// Connects to `config`'s deployment (bounded by the connect timeout).
    pub(crate) async fn open(config: &ClientConfig, label: &str) -> Result<Self, LockError> {
        let bounded = async {
            match config.deployment() {
                Deployment::Standalone => {
                    let client = open_client(config, label)?;
                    Ok(Link::Single(manager(client, config, None).await?))
                }
                Deployment::Cluster { nodes } => {
                    // Never resent by the crate: see `cluster_resend`.
                    let client = ClusterSeeds::new(nodes, config, label)?
                        .builder()
                        .retries(0)
                        .build()
                        .map_err(|e| config_error(label, &e))?;
                    let conn = client.get_async_connection().await?;
                    Ok(Link::Cluster(conn))
                }
                // Boxed: the finder's futures would otherwise nest every caller's future
                // of `LockClient::connect` past rustc's default query depth.
                Deployment::Sentinel { .. } => {
                    let finder = Finder::Sentinel(sentinel_client(config, label)?);
                    let primary = Box::pin(FollowedPrimary::open(config, label, finder)).await?;
                    Ok(Link::Followed(Arc::new(primary)))
                }
                Deployment::Replicated { nodes } => {
                    let finder = Finder::Roles(RoleScan::new(nodes, config, label)?);
                    let primary = Box::pin(FollowedPrimary::open(config, label, finder)).await?;
                    let primary = Arc::new(primary);
                    keep_scanning(&primary);
                    Ok(Link::Followed(primary))
                }
            }
        };
        match tokio::time::timeout(config.connect_timeout, bounded).await {
            Ok(Ok(link)) => Ok(Connection {
                bound: matches!(link, Link::Single(_)).then_some(config.response_timeout),
                link,
                home: Handle::current(),
            }),
            Ok(Err(Failure::Lock(e))) => Err(e),
            Ok(Err(Failure::Redis(e))) => Err(crate::denied::from_redis(&e, "", label)),
            Err(_) => Err(LockError::Unavailable {
                node: label.to_string(),
                reason: format!(
                    "no connection within the connect timeout ({:?})",
                    config.connect_timeout
                ),
            }),
        }
    }

    /// Which pub/sub this deployment uses under `mode`: sharded only on a cluster, and
    /// under `Auto` only when every primary runs Redis 7 or newer (Redisson's rule).
    pub(crate) async fn pubsub(
        &mut self,
        mode: ShardedSubscriptionMode,
        label: &str,
    ) -> Result<PubSub, LockError> {
        let Link::Cluster(conn) = &mut self.link else {
            return Ok(PubSub::Classic);
        };
        if mode == ShardedSubscriptionMode::Off {
            return Ok(PubSub::Classic);
        }
        let mut info = redis::cmd("INFO");
        info.arg("server");
        let all = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
        let reply = conn
            .route_command(info, all)
            .await
            .map_err(|e| crate::denied::from_redis(&e, "", label))?;
        let mut majors = Vec::new();
        collect_major_versions(&reply, &mut majors);
        let sharded = !majors.is_empty() && majors.iter().all(|major| *major >= 7);
        match (sharded, mode) {
            (true, _) => Ok(PubSub::Sharded),
            (false, ShardedSubscriptionMode::On) => Err(LockError::invalid_config(format!(
                "sharded_subscription is On, but not every primary of {label} runs Redis 7+ \
                 (found major versions {majors:?})"
            ))),
            (false, _) => Ok(PubSub::Classic),
        }
    }

    /// `WAIT replicas timeout` (with `aof`: `WAITAOF 0 replicas timeout`) on the connection
    /// that wrote `name`'s keys; replies how many replicas confirmed (with `aof`: wrote to
    /// their append-only file) every write sent before it.
    pub(crate) async fn wait_replicas(
        &mut self,
        name: &LockName,
        replicas: usize,
        timeout: Duration,
        aof: bool,
    ) -> RedisResult<usize> {
        let mut wait = redis::cmd(if aof { "WAITAOF" } else { "WAIT" });
        if aof {
            wait.arg(0);
        }
        wait.arg(replicas).arg(timeout.as_millis() as u64);
        let confirmed = |reply: Value| -> RedisResult<usize> {
            if aof {
                // [fsynced locally, replicas that fsynced]
                let (_, replicas): (usize, usize) = redis::from_redis_value(reply)?;
                Ok(replicas)
            } else {
                Ok(redis::from_redis_value(reply)?)
            }
        };
        match &mut self.link {
            Link::Cluster(conn) => {
                let route = Route::with_slot(Slot::for_key(name.as_str()), SlotAddr::Master);
                let reply = conn
                    .route_command(
                        wait,
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                    )
                    .await?;
                confirmed(reply)
            }
            _ => confirmed(wait.query_async(self).await?),
        }
    }

    /// This connection with every call bounded by `limit` (or by its own response timeout,
    /// if shorter), timed by the awaiting task, whatever the kind of deployment.
    pub(crate) fn within(mut self, limit: Duration) -> Self {
        self.bound = Some(self.bound.map_or(limit, |bound| bound.min(limit)));
        self
    }

    /// Sends one script call, loading the script first if the server's cache lost it
    /// (`NOSCRIPT`).
    pub(crate) fn eval<'a>(
        &'a mut self,
        call: &'a ScriptCall,
    ) -> impl Future<Output = RedisResult<Value>> + Send + 'a {
        Homed::new(&self.home, self.bound, self.link.eval(call))
    }

    /// Whether two calls made one after the other from one task reach the server in that
    /// order: true on one server and on a followed primary (one multiplexed connection);
    /// a cluster's calls go through its routing task, which keeps no such promise.
    pub(crate) fn keeps_order(&self) -> bool {
        !matches!(self.link, Link::Cluster(_))
    }

    /// Sends one command and turns an error reply into an error.
    pub(crate) fn send<'a>(
        &'a mut self,
        cmd: &'a Cmd,
    ) -> impl Future<Output = RedisResult<Value>> + Send + 'a {
        Homed::new(&self.home, self.bound, self.link.send(cmd))
    }

    /// Loads `script` into the script cache of every server commands may reach.
    pub(crate) fn load_script<'a>(
        &'a mut self,
        script: &'a redis::Script,
    ) -> impl Future<Output = RedisResult<()>> + Send + 'a {
        Homed::new(&self.home, self.bound, self.link.load_script(script))
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let call = self.link.req_packed_command(cmd);
        Box::pin(Homed::new(&self.home, self.bound, call))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let call = self.link.req_packed_commands(pipeline, offset, count);
        Box::pin(Homed::new(&self.home, self.bound, call))
    }

    fn get_db(&self) -> i64 {
        self.link.get_db()
    }
}

impl Link {
    /// Sends one script call, loading the script first if the server's cache lost it
    /// (`NOSCRIPT`). On one server the request is sent straight on the connection manager,
    /// without the boxed future of `ConnectionLike` (the hot path of every uncontended
    /// acquire and unlock); clusters and followed primaries go through `ConnectionLike`, which routes
    /// by the first key and follows failovers.
    async fn eval(&mut self, call: &ScriptCall) -> RedisResult<Value> {
        let evalsha = call.evalsha();
        let reply = self.send(&evalsha).await;
        match reply {
            Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.load_script(call.script()).await?;
                self.send(&evalsha).await
            }
            other => other,
        }
    }

    /// Sends one command (on one server without `ConnectionLike`'s boxed future) and turns
    /// an error reply into an error.
    async fn send(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        let reply = match self {
            Link::Single(conn) => conn.send_packed_command(cmd).await,
            other => other.req_packed_command(cmd).await,
        };
        // A script's error (NOSCRIPT, WRONGTYPE) comes back as a value: make it an error.
        reply?.extract_error()
    }

    /// Loads `script` into the script cache of every server commands may reach.
    async fn load_script(&mut self, script: &redis::Script) -> RedisResult<()> {
        // SCRIPT LOAD goes to every primary of a cluster (the redis crate routes it so).
        script.prepare_invoke().load_async(self).await.map(drop)
    }
}

impl ConnectionLike for Link {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Link::Single(conn) => conn.req_packed_command(cmd),
            Link::Cluster(conn) => Box::pin(super::cluster_resend::send(conn, cmd)),
            Link::Followed(primary) => {
                let primary = primary.clone();
                Box::pin(async move {
                    let (generation, mut conn) = primary.current();
                    let reply = conn.req_packed_command(cmd).await;
                    primary.check(generation, reply).await
                })
            }
            Link::Pinned(primary, generation, conn) => {
                let (primary, generation, mut conn) = (primary.clone(), *generation, conn.clone());
                Box::pin(async move {
                    let reply = conn.req_packed_command(cmd).await;
                    primary.check(generation, reply).await
                })
            }
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Link::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Link::Cluster(conn) => Box::pin(super::cluster_resend::send_pipeline(
                conn, pipeline, offset, count,
            )),
            Link::Followed(primary) => {
                let primary = primary.clone();
                Box::pin(async move {
                    let (generation, mut conn) = primary.current();
                    let reply = conn.req_packed_commands(pipeline, offset, count).await;
                    primary.check(generation, reply).await
                })
            }
            Link::Pinned(primary, generation, conn) => {
                let (primary, generation, mut conn) = (primary.clone(), *generation, conn.clone());
                Box::pin(async move {
                    let reply = conn.req_packed_commands(pipeline, offset, count).await;
                    primary.check(generation, reply).await
                })
            }
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Link::Single(conn) => conn.get_db(),
            Link::Cluster(conn) => conn.get_db(),
            Link::Followed(primary) => primary.current().1.get_db(),
            Link::Pinned(_, _, conn) => conn.get_db(),
        }
    }
}

/// Where a node's subscription connection goes; asked again at every (re)connect.
#[derive(Clone)]
pub(crate) enum SubscriptionTarget {
    /// One server.
    Single(redis::Client),
    /// The followed primary, looked for again at each connect; the subscription moves
    /// when the command connection does.
    Followed(Arc<FollowedPrimary>),
    /// A cluster: one RESP3 connection per node, whose pushes arrive through a callback.
    Cluster(ClusterSeeds),
}

impl SubscriptionTarget {
    /// Where `conn`'s node subscribes: the same followed primary as `conn`.
    pub(crate) fn new(
        config: &ClientConfig,
        label: &str,
        conn: &Connection,
    ) -> Result<Self, LockError> {
        let lock_failure = |failure: Failure| match failure {
            Failure::Lock(e) => e,
            Failure::Redis(e) => config_error(label, &e),
        };
        Ok(match (conn.link(), config.deployment()) {
            (Link::Followed(primary), _) => SubscriptionTarget::Followed(primary.clone()),
            (_, Deployment::Cluster { nodes }) => SubscriptionTarget::Cluster(
                ClusterSeeds::new(nodes, config, label).map_err(lock_failure)?,
            ),
            _ => SubscriptionTarget::Single(open_client(config, label).map_err(lock_failure)?),
        })
    }

    /// For a followed primary: the switches of the primary, the current one marked seen.
    pub(crate) fn switches(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        let SubscriptionTarget::Followed(primary) = self else {
            return None;
        };
        let mut switches = primary.switches();
        switches.borrow_and_update();
        Some(switches)
    }

    /// The one server to subscribe on now: the single server, or the followed primary as
    /// found now. A cluster has none (it subscribes through its own connection).
    pub(crate) async fn single_client(&self) -> RedisResult<redis::Client> {
        match self {
            SubscriptionTarget::Single(client) => Ok(client.clone()),
            SubscriptionTarget::Followed(primary) => {
                primary.look_again().await;
                Ok(primary.current_client())
            }
            SubscriptionTarget::Cluster(_) => Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "a cluster subscribes through its cluster connection",
            ))),
        }
    }
}

/// A client for `config`'s URL, with its TLS settings; the error names only the redacted
/// label (the URL may hold a password).
fn open_client(config: &ClientConfig, label: &str) -> Result<redis::Client, Failure> {
    let info = tls::server_info(config, label, UrlRole::Server)?;
    redis::Client::open(info).map_err(|e| Failure::Lock(config_error(label, &e)))
}

/// Where a cluster is discovered from, and the timeouts and TLS settings its connections use.
#[derive(Clone)]
pub(crate) struct ClusterSeeds {
    nodes: Vec<redis::ConnectionInfo>,
    connect_timeout: Duration,
    response_timeout: Duration,
    /// The client's TLS settings, for the nodes the cluster client discovers.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    tls: TlsSettings,
}

impl ClusterSeeds {
    fn new(nodes: &[String], config: &ClientConfig, label: &str) -> Result<Self, Failure> {
        let mut infos = Vec::with_capacity(nodes.len());
        for node in nodes.iter().filter(|n| !n.is_empty()) {
            infos.push(tls::connection_info(node, config, label, UrlRole::Server)?);
        }
        Ok(ClusterSeeds {
            nodes: infos,
            connect_timeout: config.connect_timeout,
            response_timeout: config.response_timeout,
            tls: config.tls.clone(),
        })
    }

    /// A builder for a cluster client over these seeds. It lets the redis crate resend a
    /// request whose reply was lost (fine for subscribing); the command connection turns
    /// that off (see `cluster_resend`).
    pub(crate) fn builder(&self) -> ClusterClientBuilder {
        let builder = ClusterClientBuilder::new(self.nodes.clone())
            .connection_timeout(self.connect_timeout)
            .response_timeout(self.response_timeout)
            .retries(3);
        #[cfg(feature = "tls")]
        let builder = {
            let seeds_use_tls = self
                .nodes
                .iter()
                .any(|n| matches!(n.addr(), redis::ConnectionAddr::TcpTls { .. }));
            tls::cluster_builder(builder, &self.tls, seeds_use_tls)
        };
        builder
    }
}

/// The `INFO` text of every node in a reply: one text from a single server, a map of
/// node to text from a cluster's fan-out. Parsed by the redis crate's own [`InfoDict`].
pub(crate) fn info_per_node(value: &Value) -> Vec<InfoDict> {
    let mut found = Vec::new();
    collect_info(value, &mut found);
    found
}

fn collect_info(value: &Value, found: &mut Vec<InfoDict>) {
    match value {
        Value::Map(pairs) => pairs.iter().for_each(|(_, v)| collect_info(v, found)),
        Value::Array(items) | Value::Set(items) => {
            items.iter().for_each(|v| collect_info(v, found))
        }
        text => found.extend(InfoDict::from_redis_value_ref(text).ok()),
    }
}

/// The major `redis_version` of every node in an INFO reply.
fn collect_major_versions(value: &Value, majors: &mut Vec<u32>) {
    majors.extend(info_per_node(value).iter().filter_map(|info| {
        let version: String = info.get("redis_version")?;
        version.split('.').next()?.trim().parse::<u32>().ok()
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_nodes_major_version() {
        let reply = Value::Map(vec![
            (
                Value::SimpleString("a:1".into()),
                Value::BulkString(b"# Server\r\nredis_version:7.0.15\r\n".to_vec()),
            ),
            (
                Value::SimpleString("b:2".into()),
                Value::BulkString(b"redis_version:6.2.1\r\nredis_mode:cluster\r\n".to_vec()),
            ),
        ]);
        let mut majors = Vec::new();
        collect_major_versions(&reply, &mut majors);
        assert_eq!(majors, vec![7, 6]);
    }

    /// Every acquire and unlock of the fast path awaits one of these calls: wrapping it for
    /// its home runtime and its bound must not copy the call's future into layer after
    /// layer (it once grew from 1.3 KB to 5.6 KB, and the moves cost a third more CPU).
    #[test]
    fn a_call_kept_at_home_adds_little_to_its_future() {
        fn size<F>(_: &F) -> usize {
            std::mem::size_of::<F>()
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _inside = runtime.enter();
        let client = redis::Client::open("redis://127.0.0.1:1").unwrap();
        let manager = ConnectionManager::new_lazy_with_config(
            client,
            redis::aio::ConnectionManagerConfig::new(),
        )
        .unwrap();
        let mut link = Link::Single(manager.clone());
        let mut conn = Connection {
            link: Link::Single(manager),
            home: Handle::current(),
            bound: Some(Duration::from_secs(1)),
        };
        let cmd = redis::cmd("GET");
        let (bare, kept) = (size(&link.send(&cmd)), size(&conn.send(&cmd)));
        assert!(
            kept <= bare + 256,
            "send: {kept} bytes kept at home, {bare} bare"
        );
        static SCRIPT: std::sync::LazyLock<redis::Script> =
            std::sync::LazyLock::new(|| redis::Script::new("return 1"));
        let call = ScriptCall::new(&SCRIPT);
        let (bare, kept) = (size(&link.eval(&call)), size(&conn.eval(&call)));
        assert!(
            kept <= bare + 256,
            "eval: {kept} bytes kept at home, {bare} bare"
        );

        // The node's script call adds its arguments and error handling; the probes that
        // name the keys an ACL refused are boxed (the rare path): inline, their calls made
        // every script call's future 2,776 bytes against 2,256 (a debug build), and the
        // fast path boxes and moves that future twice per acquire and unlock.
        let commands = super::super::Commands {
            conn,
            timeout: Duration::from_secs(1),
            shared: std::sync::Arc::new(super::super::Shared::new("test")),
            pubsub: PubSub::Classic,
            replica_sync: crate::config::ReplicaSyncMode::Off,
        };
        let name = LockName::new("a", 64).unwrap();
        let node_call = size(&commands.eval::<Value>(ScriptCall::new(&SCRIPT), name));
        assert!(
            node_call <= kept + 640,
            "a node's script call: {node_call} bytes, its connection's call {kept}"
        );
    }
}
