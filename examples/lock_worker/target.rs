//! Where the worker's locks live, and the probe that reads Redis `TIME` and writes the
//! fenced store next to each lock.
//!
//! - One server (the default): the `<redis-url>` argument.
//! - `--cluster host:port,host:port`: a Redis Cluster seeded with those nodes. Every lock
//!   name must carry a hash tag (`{a}:lock`): the store key `nemesis:store:<lock>` then
//!   shares the lock's slot, so the store script runs on the node that holds the lock, and
//!   `TIME` is read from that node too (routed to the primary of the lock's slot).
//! - `--sentinel host:port,... --service NAME`: the primary the Sentinels name for NAME,
//!   followed across failovers (the probe asks the Sentinels again after any failure).
//!   `<redis-url>` then only gives credentials and database, as in
//!   `ClientConfig::with_node_url`.
//! - Replica sync: the client's default (the replicas each primary has, 1 s) unless
//!   `--sync-replicas N:ms` (`ClientConfig::sync_replicas`) or `--sync-replicas off`
//!   (`ClientConfig::no_replica_sync`). On a cluster or Sentinel deployment the store then
//!   waits for the replicas after each write too (`WAIT N ms`, 1 replica and 1 s by default),
//!   as an application that fences against failovers would.

use crate::history::now_us;
use actix_distributed_lock::{ClientConfig, LockClient, LockError};
use redis::aio::MultiplexedConnection;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::sentinel::{SentinelClient, SentinelServerType};
use redis::{AsyncConnectionConfig, Cmd};
use std::time::Duration;

/// The fenced store: accept `ARGV[1]` (a token) when it is at least the highest accepted.
const STORE_SCRIPT: &str = r"
-- | KEYS[1] | the store hash: `token` = highest accepted token, `by` = its writer |
-- | ARGV[1] | the writer's fencing token | ARGV[2] | who writes                 |
-- | returns | {accepted 1/0, TIME seconds, TIME microseconds, highest before}   |
local max = tonumber(redis.call('hget', KEYS[1], 'token') or '0')
local t = redis.call('time')
if tonumber(ARGV[1]) >= max then
    redis.call('hset', KEYS[1], 'token', ARGV[1], 'by', ARGV[2])
    return {1, tonumber(t[1]), tonumber(t[2]), max}
end
return {0, tonumber(t[1]), tonumber(t[2]), max}
";

/// The options that choose the deployment (see the module doc).
#[derive(Default)]
pub struct Target {
    cluster: Option<Vec<String>>,
    sentinels: Option<Vec<String>>,
    service: Option<String>,
    sync: Option<(usize, Duration)>,
    /// `--sync-replicas off`.
    no_sync: bool,
}

/// What the store waits for after a write on a replicated deployment, by default.
const STORE_SYNC: (usize, Duration) = (1, Duration::from_secs(1));

fn urls(value: &str) -> Vec<String> {
    value
        .split(',')
        .filter(|a| !a.is_empty())
        .map(|a| {
            if a.contains("://") {
                a.to_string()
            } else {
                format!("redis://{a}/")
            }
        })
        .collect()
}

impl Target {
    /// Takes `flag value` if it is one of this module's options: `Ok(true)`; `Ok(false)`
    /// for any other flag.
    pub fn option(&mut self, flag: &str, value: &str) -> Result<bool, String> {
        match flag {
            "--cluster" => self.cluster = Some(urls(value)),
            "--sentinel" => self.sentinels = Some(urls(value)),
            "--service" => self.service = Some(value.to_string()),
            "--sync-replicas" if value == "off" => self.no_sync = true,
            "--sync-replicas" => {
                let parsed = value.split_once(':').and_then(|(n, ms)| {
                    Some((n.parse().ok()?, Duration::from_millis(ms.parse().ok()?)))
                });
                let Some(sync) = parsed.filter(|(n, _)| *n > 0) else {
                    return Err(format!(
                        "--sync-replicas: `{value}` is not N:ms (N > 0) or `off`"
                    ));
                };
                self.sync = Some(sync);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether the options go together, and every lock has a hash tag on a cluster.
    pub fn check(&self, locks: &[String]) -> Result<(), String> {
        if self.cluster.is_some() && self.sentinels.is_some() {
            return Err("--cluster and --sentinel exclude each other".into());
        }
        if self.sentinels.is_some() != self.service.is_some() {
            return Err("--sentinel and --service go together".into());
        }
        if self.cluster.is_some() {
            if let Some(lock) = locks.iter().find(|l| hash_tag(l).is_none()) {
                return Err(format!(
                    "--cluster: lock `{lock}` has no hash tag, so its store would land on \
                     another slot (name it like `{{tag}}:{lock}`)"
                ));
            }
        }
        Ok(())
    }

    /// The client's settings for this deployment (before the timeouts).
    pub fn client_config(&self, url: &str) -> ClientConfig {
        let config = match (&self.cluster, &self.sentinels, &self.service) {
            (Some(nodes), _, _) => ClientConfig::cluster(nodes.iter().map(String::as_str)),
            (_, Some(sentinels), Some(service)) => {
                ClientConfig::sentinel(sentinels.iter().map(String::as_str), service.as_str())
                    .with_node_url(url)
            }
            _ => ClientConfig::new(url),
        };
        match (self.sync, self.no_sync) {
            (_, true) => config.no_replica_sync(),
            (Some((replicas, timeout)), _) => config.sync_replicas(replicas, timeout),
            (None, _) => config,
        }
    }

    /// What the store waits for after each write: nothing without replica sync or on one
    /// server (which has no replicas here).
    fn store_sync(&self) -> Option<(usize, Duration)> {
        let replicated = self.cluster.is_some() || self.sentinels.is_some();
        match (self.no_sync, self.sync) {
            (true, _) => None,
            (false, Some(sync)) => Some(sync),
            (false, None) => replicated.then_some(STORE_SYNC),
        }
    }

    /// The probe for this deployment, with `timeout` on connecting and on every reply.
    pub fn probe(&self, url: &str, timeout: Duration) -> redis::RedisResult<Probe> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        let link = match (&self.cluster, &self.sentinels, &self.service) {
            (Some(nodes), _, _) => Link::Cluster(
                ClusterClient::builder(nodes.clone())
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .build()?,
            ),
            (_, Some(sentinels), Some(service)) => Link::Sentinel(
                tokio::sync::Mutex::new(SentinelClient::build(
                    sentinels.clone(),
                    service.clone(),
                    None,
                    SentinelServerType::Master,
                )?),
                config,
            ),
            _ => Link::Single(redis::Client::open(url)?, config),
        };
        Ok(Probe {
            link,
            conn: tokio::sync::Mutex::new(None),
            store: redis::Script::new(STORE_SCRIPT),
            sync: self.store_sync(),
        })
    }
}

/// Connects the client, trying again for up to 10 s: on a loaded machine the first look-up
/// (the Sentinels, the cluster's slots) can take longer than the connect timeout.
pub async fn connect(config: ClientConfig) -> Result<LockClient, LockError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match LockClient::connect(config.clone()).await {
            Err(LockError::Unavailable { .. }) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => return other,
        }
    }
}

/// The hash tag of `key` as Redis Cluster reads it: the text between the first `{` and the
/// next `}`, if not empty.
fn hash_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let close = key[open + 1..].find('}')?;
    (close > 0).then(|| &key[open + 1..open + 1 + close])
}

/// Redis `TIME` with the local wall-clock times just before sending and just after the
/// reply: the checker verifies `l_send <= t <= l_recv`, i.e. that Redis and this process
/// read one clock.
#[derive(Clone, Copy)]
pub struct Stamp {
    pub t: u64,
    pub l_send: u64,
    pub l_recv: u64,
}

impl Stamp {
    pub fn json(stamp: Option<Stamp>) -> serde_json::Value {
        match stamp {
            Some(s) => serde_json::json!({"t": s.t, "l_send": s.l_send, "l_recv": s.l_recv}),
            None => serde_json::Value::Null,
        }
    }
}

enum Link {
    Single(redis::Client, AsyncConnectionConfig),
    Cluster(ClusterClient),
    Sentinel(tokio::sync::Mutex<SentinelClient>, AsyncConnectionConfig),
}

#[derive(Clone)]
enum Conn {
    Plain(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl Conn {
    /// `cmd` on the primary that serves `key`'s slot (on one server: the server).
    async fn on_slot_of(&mut self, key: &str, cmd: Cmd) -> redis::RedisResult<redis::Value> {
        match self {
            Conn::Plain(conn) => cmd.query_async(conn).await,
            Conn::Cluster(conn) => {
                let route = Route::with_key(key, SlotAddr::Master);
                conn.route_command(
                    cmd,
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                )
                .await
            }
        }
    }
}

/// A side connection for `TIME` and the store, reconnected after any failure.
pub struct Probe {
    link: Link,
    conn: tokio::sync::Mutex<Option<Conn>>,
    store: redis::Script,
    sync: Option<(usize, Duration)>,
}

impl Probe {
    async fn connect(&self) -> redis::RedisResult<Conn> {
        match &self.link {
            Link::Single(client, config) => client
                .get_multiplexed_async_connection_with_config(config)
                .await
                .map(Conn::Plain),
            Link::Cluster(client) => client.get_async_connection().await.map(Conn::Cluster),
            Link::Sentinel(client, config) => client
                .lock()
                .await
                .get_async_connection_with_config(config)
                .await
                .map(Conn::Plain),
        }
    }

    async fn connection(&self) -> Option<Conn> {
        let mut slot = self.conn.lock().await;
        if slot.is_none() {
            *slot = self.connect().await.ok();
        }
        slot.clone()
    }

    async fn forget(&self) {
        *self.conn.lock().await = None;
    }

    /// Redis `TIME` from the node that holds `lock`.
    pub async fn time(&self, lock: &str) -> Option<Stamp> {
        let mut conn = self.connection().await?;
        let l_send = now_us();
        let reply = conn.on_slot_of(lock, redis::cmd("TIME")).await;
        let l_recv = now_us();
        match reply.and_then(|v| Ok(redis::from_redis_value::<(u64, u64)>(v)?)) {
            Ok((secs, micros)) => Some(Stamp {
                t: secs * 1_000_000 + micros,
                l_send,
                l_recv,
            }),
            Err(_) => {
                self.forget().await;
                None
            }
        }
    }

    /// One store write: `Ok((accepted, redis time, highest token before))`.
    pub async fn write(
        &self,
        lock: &str,
        token: u64,
        by: &str,
    ) -> Result<(bool, u64, u64), String> {
        let Some(mut conn) = self.connection().await else {
            return Err("no connection".into());
        };
        let key = format!("nemesis:store:{lock}");
        let mut invocation = self.store.prepare_invoke();
        invocation.key(&key).arg(token).arg(by);
        let reply: redis::RedisResult<(i64, u64, u64, u64)> = match &mut conn {
            Conn::Plain(c) => invocation.invoke_async(c).await,
            Conn::Cluster(c) => invocation.invoke_async(c).await,
        };
        let reply = match (reply, self.sync) {
            // The write is the application's: it waits for the replicas as the lock does.
            (Ok(reply), Some((replicas, timeout))) => {
                let mut wait = redis::cmd("WAIT");
                wait.arg(replicas).arg(timeout.as_millis() as u64);
                // Best effort: the write went through either way.
                let _ = conn.on_slot_of(&key, wait).await;
                Ok(reply)
            }
            (reply, _) => reply,
        };
        match reply {
            Ok((accepted, secs, micros, max)) => {
                Ok((accepted == 1, secs * 1_000_000 + micros, max))
            }
            Err(e) => {
                self.forget().await;
                Err(e.to_string())
            }
        }
    }
}
