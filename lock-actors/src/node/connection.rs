//! How a node is reached: one server, a Redis Cluster, or the primary that Sentinel names.
//! The command connection of each, where its subscription connection goes, and which
//! publish command its lock scripts use.

use super::tls::{self, UrlRole};
use crate::config::TlsSettings;
use crate::config::{ClientConfig, Deployment, ShardedSubscriptionMode};
use crate::error::LockError;
use crate::keys::LockName;
use crate::script::ScriptCall;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr,
};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{
    Cmd, ErrorKind, FromRedisValue, InfoDict, Pipeline, RedisFuture, RedisResult, ServerErrorKind,
    Value,
};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
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
/// Every call is polled inside that runtime (see [`at_home`]), whichever task awaits it:
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
    /// The primary the sentinels name, found again after a failover.
    Sentinel(Arc<SentinelPrimary>),
}

impl Connection {
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
                Deployment::Sentinel { .. } => {
                    let sentinel = SentinelPrimary::open(config, label).await?;
                    Ok(Link::Sentinel(Arc::new(sentinel)))
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

    /// `WAIT replicas timeout` on the connection that wrote `name`'s keys; replies how many
    /// replicas confirmed every write sent before it.
    pub(crate) async fn wait_replicas(
        &mut self,
        name: &LockName,
        replicas: usize,
        timeout: Duration,
    ) -> RedisResult<usize> {
        let mut wait = redis::cmd("WAIT");
        wait.arg(replicas).arg(timeout.as_millis() as u64);
        match &mut self.link {
            Link::Cluster(conn) => {
                let route = Route::with_slot(Slot::for_key(name.as_str()), SlotAddr::Master);
                let reply = conn
                    .route_command(
                        wait,
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                    )
                    .await?;
                Ok(redis::from_redis_value(reply)?)
            }
            _ => wait.query_async(self).await,
        }
    }

    /// Sends one script call, loading the script first if the server's cache lost it
    /// (`NOSCRIPT`).
    pub(crate) async fn eval(&mut self, call: &ScriptCall) -> RedisResult<Value> {
        bounded(self.bound, at_home(&self.home, self.link.eval(call))).await
    }

    /// Sends one command and turns an error reply into an error.
    pub(crate) async fn send(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        bounded(self.bound, at_home(&self.home, self.link.send(cmd))).await
    }

    /// Loads `script` into the script cache of every server commands may reach.
    pub(crate) async fn load_script(&mut self, script: &redis::Script) -> RedisResult<()> {
        bounded(
            self.bound,
            at_home(&self.home, self.link.load_script(script)),
        )
        .await
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let call = at_home(&self.home, self.link.req_packed_command(cmd));
        Box::pin(bounded(self.bound, call))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let call = self.link.req_packed_commands(pipeline, offset, count);
        Box::pin(bounded(self.bound, at_home(&self.home, call)))
    }

    fn get_db(&self) -> i64 {
        self.link.get_db()
    }
}

/// Polls `call` inside the runtime `home`: whatever it starts on the way (a spawned task,
/// a timer, a socket) belongs to `home`, not to the runtime of the task that awaits it.
/// The caller's own timers around the call stay the caller's.
async fn at_home<F: Future>(home: &Handle, call: F) -> F::Output {
    let mut call = std::pin::pin!(call);
    std::future::poll_fn(|cx| {
        let _home = home.enter();
        call.as_mut().poll(cx)
    })
    .await
}

/// Bounds `call` by `limit`, if any, with a timer of the awaiting task's runtime; an
/// expired call fails as the redis crate's own response timeout does.
async fn bounded<T>(
    limit: Option<Duration>,
    call: impl Future<Output = RedisResult<T>>,
) -> RedisResult<T> {
    let Some(limit) = limit else {
        return call.await;
    };
    match tokio::time::timeout(limit, call).await {
        Ok(reply) => reply,
        Err(_) => Err(std::io::Error::from(std::io::ErrorKind::TimedOut).into()),
    }
}

impl Link {
    /// Sends one script call, loading the script first if the server's cache lost it
    /// (`NOSCRIPT`). On one server the request is sent straight on the connection manager,
    /// without the boxed future of `ConnectionLike` (the hot path of every uncontended
    /// acquire and unlock); clusters and Sentinel go through `ConnectionLike`, which routes
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
            Link::Sentinel(primary) => {
                let primary = primary.clone();
                Box::pin(async move {
                    let (generation, mut conn) = primary.current();
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
            Link::Sentinel(primary) => {
                let primary = primary.clone();
                Box::pin(async move {
                    let (generation, mut conn) = primary.current();
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
            Link::Sentinel(primary) => primary.current().1.get_db(),
        }
    }
}

/// A connection to the primary that the sentinels name. A request that fails in a way a
/// failover explains (no connection, no answer, `READONLY` from a demoted primary) makes
/// the next one ask the sentinels again; requests are never retried here, since a lock
/// script that may have run must be reconciled by its caller, not sent twice.
///
/// The connection is replaced only when the sentinels name another server. A request that
/// got no answer may still be on its way to the server it was sent to; the caller's
/// reconcile must not overtake it there. On the same connection it cannot (one connection's
/// commands run in order); on a second connection to the same server it could, and would
/// then settle against a state the late request changes afterwards. On another server the
/// late request can only touch the demoted primary's data, which the new primary does not
/// share.
pub(crate) struct SentinelPrimary {
    sentinels: tokio::sync::Mutex<SentinelClient>,
    /// The generation (bumped at each switch), the primary's address, its connection.
    current: Mutex<(u64, String, ConnectionManager)>,
    config: ClientConfig,
    label: String,
    /// When the sentinels were last asked again: at most once per interval.
    last_asked: Mutex<Option<Instant>>,
}

/// How often a failing sentinel-followed connection may ask the sentinels again.
const REDISCOVER_EVERY: Duration = Duration::from_millis(100);

impl SentinelPrimary {
    async fn open(config: &ClientConfig, label: &str) -> Result<Self, Failure> {
        let mut sentinels = sentinel_client(config, label)?;
        let client = sentinels.async_get_client().await?;
        let address = client.get_connection_info().addr().to_string();
        let conn = manager(client, config, Some(config.response_timeout)).await?;
        Ok(SentinelPrimary {
            sentinels: tokio::sync::Mutex::new(sentinels),
            current: Mutex::new((0, address, conn)),
            config: config.clone(),
            label: label.to_string(),
            last_asked: Mutex::new(None),
        })
    }

    fn current(&self) -> (u64, ConnectionManager) {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        (current.0, current.2.clone())
    }

    /// Passes `reply` on; when it is a failure a failover explains, first asks the
    /// sentinels for the primary and switches to it (once, however many requests failed).
    async fn check<T>(&self, generation: u64, reply: RedisResult<T>) -> RedisResult<T> {
        let Err(err) = &reply else {
            return reply;
        };
        let failover_sign = err.is_io_error()
            || err.is_connection_refusal()
            || err.is_connection_dropped()
            || err.is_timeout()
            || err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly);
        if failover_sign {
            self.rediscover(generation).await;
        }
        reply
    }

    fn is_current(&self, address: &str) -> bool {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        current.1 == address
    }

    async fn rediscover(&self, failed_generation: u64) {
        // Someone else is already asking: their answer serves this request too.
        let Ok(mut sentinels) = self.sentinels.try_lock() else {
            return;
        };
        if self.current().0 != failed_generation {
            return;
        }
        {
            let mut last = self.last_asked.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| at.elapsed() < REDISCOVER_EVERY) {
                return;
            }
            *last = Some(Instant::now());
        }
        let found = async {
            let client = sentinels.async_get_client().await?;
            let address = client.get_connection_info().addr().to_string();
            if self.is_current(&address) {
                // Still the same server: keep the connection (see the type's doc); it
                // reconnects by itself if the server closed it.
                return Ok(None);
            }
            let timeout = Some(self.config.response_timeout);
            Ok::<_, Failure>(Some((
                address,
                manager(client, &self.config, timeout).await?,
            )))
        };
        match tokio::time::timeout(self.config.connect_timeout, found).await {
            Ok(Ok(None)) => {
                tracing::debug!(node = %self.label,
                    "the sentinels still name the same primary; its connection stays")
            }
            Ok(Ok(Some((address, conn)))) => {
                tracing::info!(node = %self.label, primary = %address,
                    "connected to the primary the sentinels name");
                crate::telemetry::reconnected(crate::telemetry::Connection::Primary);
                let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
                *current = (current.0 + 1, address, conn);
            }
            Ok(Err(failure)) => {
                tracing::warn!(node = %self.label, error = %failure.describe(),
                    "the sentinels named no reachable primary yet")
            }
            Err(_) => tracing::warn!(node = %self.label, "asking the sentinels timed out"),
        }
    }
}

/// Where a node's subscription connection goes; asked again at every (re)connect.
#[derive(Clone)]
pub(crate) enum SubscriptionTarget {
    /// One server.
    Single(redis::Client),
    /// The primary the sentinels name, asked anew at each connect.
    Sentinel(Arc<tokio::sync::Mutex<SentinelClient>>),
    /// A cluster: one RESP3 connection per node, whose pushes arrive through a callback.
    Cluster(ClusterSeeds),
}

impl SubscriptionTarget {
    pub(crate) fn new(config: &ClientConfig, label: &str) -> Result<Self, LockError> {
        let lock_failure = |failure: Failure| match failure {
            Failure::Lock(e) => e,
            Failure::Redis(e) => config_error(label, &e),
        };
        Ok(match config.deployment() {
            Deployment::Standalone => {
                SubscriptionTarget::Single(open_client(config, label).map_err(lock_failure)?)
            }
            Deployment::Cluster { nodes } => SubscriptionTarget::Cluster(
                ClusterSeeds::new(nodes, config, label).map_err(lock_failure)?,
            ),
            Deployment::Sentinel { .. } => SubscriptionTarget::Sentinel(Arc::new(
                tokio::sync::Mutex::new(sentinel_client(config, label).map_err(lock_failure)?),
            )),
        })
    }

    /// The one server to subscribe on now: the single server, or the primary the
    /// sentinels name now. A cluster has none (it subscribes through its own connection).
    pub(crate) async fn single_client(&self) -> RedisResult<redis::Client> {
        match self {
            SubscriptionTarget::Single(client) => Ok(client.clone()),
            SubscriptionTarget::Sentinel(sentinels) => {
                sentinels.lock().await.async_get_client().await
            }
            SubscriptionTarget::Cluster(_) => Err(redis::RedisError::from((
                redis::ErrorKind::Client,
                "a cluster subscribes through its cluster connection",
            ))),
        }
    }
}

/// A connection step's failure: a Redis error (mapped with the node label later) or one
/// of ours.
pub(crate) enum Failure {
    Redis(redis::RedisError),
    Lock(LockError),
}

impl From<redis::RedisError> for Failure {
    fn from(e: redis::RedisError) -> Self {
        Failure::Redis(e)
    }
}

impl From<LockError> for Failure {
    fn from(e: LockError) -> Self {
        Failure::Lock(e)
    }
}

impl Failure {
    fn describe(&self) -> String {
        match self {
            Failure::Redis(e) => format!("{:?}", e.kind()),
            Failure::Lock(e) => e.to_string(),
        }
    }
}

/// A client for `config`'s URL, with its TLS settings; the error names only the redacted
/// label (the URL may hold a password).
fn open_client(config: &ClientConfig, label: &str) -> Result<redis::Client, Failure> {
    let info = tls::connection_info(config.url(), config, label, UrlRole::Server)?;
    redis::Client::open(info).map_err(|e| Failure::Lock(config_error(label, &e)))
}

fn config_error(label: &str, e: &redis::RedisError) -> LockError {
    tls::url_error(label, e)
}

/// A reconnecting connection to one server, bounded by the connect timeout and, if given,
/// `response_timeout`.
async fn manager(
    client: redis::Client,
    config: &ClientConfig,
    response_timeout: Option<Duration>,
) -> Result<ConnectionManager, Failure> {
    let manager_config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(config.connect_timeout))
        .set_response_timeout(response_timeout)
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(200));
    Ok(ConnectionManager::new_with_config(client, manager_config).await?)
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

fn sentinel_client(config: &ClientConfig, label: &str) -> Result<SentinelClient, Failure> {
    let Deployment::Sentinel { sentinels, service } = config.deployment() else {
        return Err(Failure::Lock(LockError::invalid_config(
            "not a sentinel deployment",
        )));
    };
    let data_nodes = match config.url() {
        "" => None,
        url => Some(tls::connection_info(
            url,
            config,
            label,
            UrlRole::SentinelDataNodes,
        )?),
    };
    let sentinel_infos = sentinels
        .iter()
        .filter(|s| !s.is_empty())
        .map(|url| tls::connection_info(url, config, label, UrlRole::Server))
        .collect::<Result<Vec<_>, _>>()?;
    #[cfg(feature = "tls")]
    {
        let is_tls = |info: &redis::ConnectionInfo| {
            matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. })
        };
        if sentinel_infos.iter().any(is_tls) || data_nodes.as_ref().is_some_and(is_tls) {
            return tls::sentinel_client(&sentinel_infos, data_nodes.as_ref(), service, config)
                .map_err(|e| Failure::Lock(config_error(label, &e)));
        }
    }
    let mut node_info = SentinelNodeConnectionInfo::default();
    if let Some(info) = &data_nodes {
        node_info = node_info.set_redis_connection_info(info.redis_settings().clone());
    }
    SentinelClient::build(
        sentinel_infos,
        service.clone(),
        Some(node_info),
        SentinelServerType::Master,
    )
    .map_err(|e| Failure::Lock(config_error(label, &e)))
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
}
