//! Client settings: where Redis is, how long leases last, how long to wait.

mod client_id;
mod from_client;
mod namespace;
mod replica_sync;
mod spin_backoff;
mod tls;

pub(crate) use namespace::check_namespace;
pub use namespace::MAX_NAMESPACE_LEN;
pub use replica_sync::{ReplicaSync, ReplicaSyncMode};
pub use spin_backoff::SpinBackoff;
pub(crate) use spin_backoff::SpinDelays;
pub(crate) use tls::TlsSettings;

use crate::error::LockError;
use crate::redact::{node_label, redact_url};
use std::time::Duration;

/// Settings for a [`LockClient`](crate::LockClient).
///
/// Defaults follow Redisson: a 30 s watchdog lease renewed every 10 s. Every duration is
/// checked by [`ClientConfig::validate`] when the client starts.
///
/// # Example
///
/// ```
/// use actix_distributed_lock::ClientConfig;
/// use std::time::Duration;
///
/// let config = ClientConfig::new("redis://127.0.0.1:6379/")
///     .watchdog_timeout(Duration::from_secs(9))
///     .default_wait(Duration::from_secs(2));
/// assert!(config.validate().is_ok());
/// assert_eq!(config.renew_interval(), Duration::from_secs(3));
/// ```
#[derive(Clone)]
pub struct ClientConfig {
    pub(crate) url: String,
    pub(crate) watchdog_timeout: Duration,
    pub(crate) renew_interval: Option<Duration>,
    pub(crate) default_wait: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) max_name_len: usize,
    pub(crate) fair_wait_timeout: Duration,
    pub(crate) deployment: Deployment,
    pub(crate) sharded_subscription: ShardedSubscriptionMode,
    pub(crate) replica_sync: ReplicaSyncMode,
    /// CA, client certificate and insecure mode for `rediss://` (see the `tls` module).
    pub(crate) tls: tls::TlsSettings,
    /// Metrics carry a `lock` label with the lock's name (see `metrics_lock_name_labels`).
    #[cfg(feature = "metrics")]
    pub(crate) metrics_lock_name_labels: bool,
    pub(crate) namespace: Option<String>,
    /// The id written before every owner (see `client_id`); `None`: a new uuid per client.
    pub(crate) client_id: Option<String>,
    /// The one server's connection settings, taken from the application's own
    /// `redis::Client` ([`ClientConfig::from_client`]); `None`: parsed from `url`.
    pub(crate) server: Option<redis::ConnectionInfo>,
}

/// How the Redis behind a [`LockClient`](crate::LockClient) is deployed. Lock code does not
/// change between them: a cluster or a Sentinel-followed primary is one node to the rest of
/// the library.
///
/// Build it with [`ClientConfig::new`] (one server), [`ClientConfig::cluster`],
/// [`ClientConfig::sentinel`] or [`ClientConfig::replicated`].
///
/// # Example
///
/// ```
/// use actix_distributed_lock::{ClientConfig, Deployment};
///
/// let config = ClientConfig::cluster(["redis://10.0.0.1:7000/", "redis://10.0.0.2:7000/"]);
/// assert!(matches!(config.deployment(), Deployment::Cluster { nodes } if nodes.len() == 2));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Deployment {
    /// One server at [`ClientConfig::url`].
    Standalone,
    /// A Redis Cluster, discovered from any of these seed nodes. The client follows the
    /// topology (MOVED/ASK, slot refreshes) on its own.
    Cluster {
        /// Seed node URLs; one reachable node is enough.
        nodes: Vec<String>,
    },
    /// The primary that these sentinels name for `service`; followed across failovers.
    /// [`ClientConfig::url`] then carries the credentials and database for the data nodes.
    Sentinel {
        /// Sentinel URLs (`redis://host:26379/`).
        sentinels: Vec<String>,
        /// The monitored primary's name (`sentinel monitor <service> …`).
        service: String,
    },
    /// A primary and its replicas listed by address, with no Sentinel (a managed Redis
    /// such as ElastiCache, Azure Cache or Memorystore without cluster mode): the primary is
    /// the node whose `INFO replication` says `role:master`, looked for again every second
    /// and after any failure a failover explains, and followed when another node is promoted.
    Replicated {
        /// Every node's URL (`redis://host:6379/`); credentials and database come from each.
        nodes: Vec<String>,
    },
}

/// Which pub/sub carries unlock notifications: classic (`PUBLISH`/`SUBSCRIBE`, broadcast
/// to every node of a cluster) or sharded (`SPUBLISH`/`SSUBSCRIBE`, Redis 7+, kept on the
/// shard that owns the lock's slot). The names follow Redisson's `shardedSubscriptionMode`.
///
/// Redisson (3.23 and later) uses sharded pub/sub in cluster mode when every node runs
/// Redis 7 or newer (its `AUTO`), and classic pub/sub otherwise. A Rust and a Java service
/// hear each other's unlocks when both pick the same: keep both on `Auto`, or set the same
/// explicit mode on both sides.
///
/// # Example
///
/// ```
/// use actix_distributed_lock::{ClientConfig, ShardedSubscriptionMode};
///
/// let config = ClientConfig::cluster(["redis://10.0.0.1:7000/"])
///     .sharded_subscription(ShardedSubscriptionMode::Off); // a Java side set to OFF
/// assert!(config.validate().is_ok());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShardedSubscriptionMode {
    /// Sharded on a cluster whose nodes all run Redis 7+; classic otherwise (the default).
    #[default]
    Auto,
    /// Always sharded (also on a single Redis 7+ server).
    On,
    /// Always classic.
    Off,
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("url", &redact_url(&self.url))
            .field("watchdog_timeout", &self.watchdog_timeout)
            .field("renew_interval", &self.renew_interval())
            .field("default_wait", &self.default_wait)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("max_name_len", &self.max_name_len)
            .field("fair_wait_timeout", &self.fair_wait_timeout)
            .field("deployment", &self.label())
            .field("sharded_subscription", &self.sharded_subscription)
            .field("replica_sync", &self.replica_sync)
            .field("tls", &self.tls)
            .field("namespace", &self.namespace)
            .field("client_id", &self.client_id)
            .field("from_client", &self.server.is_some())
            .finish()
    }
}

impl ClientConfig {
    /// Settings for the Redis node at `url` (`redis://`, `rediss://` with the `tls` feature,
    /// `redis://user:password@host:port/db` for ACL users), with the defaults.
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// let config = ClientConfig::new("redis://127.0.0.1/");
    /// assert_eq!(config.url(), "redis://127.0.0.1/");
    /// ```
    pub fn new(url: impl Into<String>) -> Self {
        ClientConfig {
            url: url.into(),
            watchdog_timeout: Duration::from_secs(30),
            renew_interval: None,
            default_wait: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(3),
            max_name_len: 4096,
            fair_wait_timeout: Duration::from_secs(5 * 60),
            deployment: Deployment::Standalone,
            sharded_subscription: ShardedSubscriptionMode::Auto,
            replica_sync: ReplicaSyncMode::default(),
            tls: tls::TlsSettings::default(),
            #[cfg(feature = "metrics")]
            metrics_lock_name_labels: false,
            namespace: None,
            client_id: None,
            server: None,
        }
    }

    /// Settings for a Redis Cluster reached through any of the seed `nodes`, with the
    /// defaults. One supervisor serves the whole cluster: it follows MOVED/ASK redirects and
    /// slot changes, keeps one connection per node for commands and one per node for
    /// subscriptions, and hears unlocks through sharded pub/sub where the nodes have it (see
    /// [`ShardedSubscriptionMode`]).
    ///
    /// Every key and channel of a lock share the hash slot of its name (Redisson's layout:
    /// the name is the hash tag). A name with braces of its own keeps them as its hash tag,
    /// so `order:{42}:pay` and `order:{42}:ship` land on the same node; a name whose braces
    /// would split a lock's keys over two slots is refused with [`LockError::InvalidName`].
    ///
    /// [`LockError::InvalidName`]: crate::LockError::InvalidName
    ///
    /// ```
    /// use actix_distributed_lock::ClientConfig;
    ///
    /// let config = ClientConfig::cluster(["redis://127.0.0.1:7000/", "redis://127.0.0.1:7001/"]);
    /// assert!(config.validate().is_ok());
    /// assert_eq!(config.url(), "redis://127.0.0.1:7000/");
    /// ```
    pub fn cluster<I, S>(nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let nodes: Vec<String> = nodes.into_iter().map(Into::into).collect();
        let mut config = ClientConfig::new(nodes.first().cloned().unwrap_or_default());
        config.deployment = Deployment::Cluster { nodes };
        config
    }

    /// Settings for the primary that `sentinels` name for `service`, followed across
    /// failovers: after a failover the client reconnects to the new primary, subscribes
    /// again and wakes every waiter so it retries there.
    ///
    /// Credentials and database for the data nodes come from [`with_node_url`]
    /// (`redis://user:password@/db`-style; its host is ignored).
    ///
    /// [`with_node_url`]: ClientConfig::with_node_url
    ///
    /// ```
    /// use actix_distributed_lock::ClientConfig;
    ///
    /// let config = ClientConfig::sentinel(
    ///     ["redis://127.0.0.1:26379/", "redis://127.0.0.1:26380/"],
    ///     "mymaster",
    /// );
    /// assert!(config.validate().is_ok());
    /// ```
    pub fn sentinel<I, S>(sentinels: I, service: impl Into<String>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let sentinels: Vec<String> = sentinels.into_iter().map(Into::into).collect();
        let mut config = ClientConfig::new(String::new());
        config.deployment = Deployment::Sentinel {
            sentinels,
            service: service.into(),
        };
        config
    }

    /// Settings for a primary and its replicas listed by address, with no Sentinel (Redisson's
    /// "replicated" mode; a managed Redis such as AWS ElastiCache, Azure Cache or Google
    /// Memorystore without cluster mode). The client asks every node for its role
    /// (`INFO replication`) when it connects, again every second, and at once after a
    /// failure a failover explains (no answer, `READONLY`); it follows the node promoted to
    /// primary as it follows a Sentinel failover: it reconnects there, subscribes again and
    /// wakes every waiter so it retries on the new primary.
    ///
    /// List every node of the group, replicas included: a node left out cannot be followed
    /// once promoted.
    ///
    /// ```
    /// use actix_distributed_lock::{ClientConfig, Deployment};
    ///
    /// let config = ClientConfig::replicated([
    ///     "redis://10.0.0.1:6379/",
    ///     "redis://10.0.0.2:6379/",
    /// ]);
    /// assert!(config.validate().is_ok());
    /// assert!(matches!(config.deployment(), Deployment::Replicated { nodes } if nodes.len() == 2));
    /// ```
    pub fn replicated<I, S>(nodes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let nodes: Vec<String> = nodes.into_iter().map(Into::into).collect();
        let mut config = ClientConfig::new(nodes.first().cloned().unwrap_or_default());
        config.deployment = Deployment::Replicated { nodes };
        config
    }

    /// For a [`sentinel`](ClientConfig::sentinel) deployment: the URL whose user, password
    /// and database apply to the primary the sentinels name (its host and port are not used).
    ///
    /// ```
    /// use actix_distributed_lock::ClientConfig;
    ///
    /// let config = ClientConfig::sentinel(["redis://127.0.0.1:26379/"], "mymaster")
    ///     .with_node_url("redis://:secret@ignored/2");
    /// assert_eq!(config.url(), "redis://:secret@ignored/2");
    /// ```
    pub fn with_node_url(mut self, url: impl Into<String>) -> Self {
        self.url = url.into();
        self
    }

    /// How this client reaches Redis: one server, a cluster, a Sentinel-named primary, or a
    /// primary found by role among listed nodes.
    ///
    /// ```
    /// use actix_distributed_lock::{ClientConfig, Deployment};
    /// assert_eq!(ClientConfig::new("redis://h/").deployment(), &Deployment::Standalone);
    /// ```
    pub fn deployment(&self) -> &Deployment {
        &self.deployment
    }

    /// Which pub/sub carries unlock notifications (see [`ShardedSubscriptionMode`]).
    /// Default [`Auto`](ShardedSubscriptionMode::Auto), as Redisson.
    ///
    /// ```
    /// use actix_distributed_lock::{ClientConfig, ShardedSubscriptionMode};
    /// let c = ClientConfig::new("redis://h/").sharded_subscription(ShardedSubscriptionMode::On);
    /// assert!(c.validate().is_ok());
    /// ```
    pub fn sharded_subscription(mut self, mode: ShardedSubscriptionMode) -> Self {
        self.sharded_subscription = mode;
        self
    }

    /// What logs and errors call this deployment: its URLs with passwords redacted.
    pub(crate) fn label(&self) -> String {
        let list = |urls: &[String]| {
            urls.iter()
                .map(|u| node_label(u))
                .collect::<Vec<_>>()
                .join(",")
        };
        match &self.deployment {
            Deployment::Standalone => node_label(&self.url),
            Deployment::Cluster { nodes } => format!("cluster[{}]", list(nodes)),
            Deployment::Sentinel { sentinels, service } => {
                format!("sentinel[{}]/{service}", list(sentinels))
            }
            Deployment::Replicated { nodes } => format!("replicated[{}]", list(nodes)),
        }
    }

    /// The Redis URL, exactly as given (it may contain a password; never log it).
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// assert_eq!(ClientConfig::new("redis://h/").url(), "redis://h/");
    /// ```
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The lease of a lock taken without an explicit lease; the watchdog keeps it alive
    /// while it is held. Default 30 s.
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// # use std::time::Duration;
    /// let c = ClientConfig::new("redis://h/").watchdog_timeout(Duration::from_secs(9));
    /// assert_eq!(c.renew_interval(), Duration::from_secs(3));
    /// ```
    pub fn watchdog_timeout(mut self, lease: Duration) -> Self {
        self.watchdog_timeout = lease;
        self
    }

    /// How often the watchdog renews; default a third of the watchdog timeout. Must be
    /// shorter than the watchdog timeout.
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// # use std::time::Duration;
    /// let c = ClientConfig::new("redis://h/").renew_every(Duration::from_secs(40));
    /// assert!(c.validate().is_err()); // longer than the 30 s lease
    /// ```
    pub fn renew_every(mut self, interval: Duration) -> Self {
        self.renew_interval = Some(interval);
        self
    }

    /// How long `acquire()` waits when the caller gives no bound. Default 30 s.
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// # use std::time::Duration;
    /// let c = ClientConfig::new("redis://h/").default_wait(Duration::from_secs(1));
    /// # assert!(c.validate().is_ok());
    /// ```
    pub fn default_wait(mut self, wait: Duration) -> Self {
        self.default_wait = wait;
        self
    }

    /// How long connecting to Redis may take. Default 5 s.
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// # use std::time::Duration;
    /// let c = ClientConfig::new("redis://h/").connect_timeout(Duration::from_millis(500));
    /// # assert!(c.validate().is_ok());
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one Redis command may take before the operation reports
    /// [`LockError::Unavailable`]. Default 3 s.
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// # use std::time::Duration;
    /// let c = ClientConfig::new("redis://h/").response_timeout(Duration::from_millis(500));
    /// # assert!(c.validate().is_ok());
    /// ```
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// The longest lock name accepted, in bytes. Default 4096.
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// let c = ClientConfig::new("redis://h/").max_name_len(64);
    /// # assert!(c.validate().is_ok());
    /// ```
    pub fn max_name_len(mut self, bytes: usize) -> Self {
        self.max_name_len = bytes;
        self
    }

    /// The fair lock's wait allowance per waiter, Redisson's `fairLockWaitTimeout` (its
    /// `threadWaitTime` in 3.x): a waiter's deadline in the queue is the deadline of the one
    /// ahead of it (or the lock's remaining lease) plus this, and every grant takes it off
    /// every deadline left. A waiter whose deadline passes at the head of the queue is
    /// skipped as dead (a live one that is skipped joins again at the back). Default 5 min,
    /// as Redisson's; set it to the same value as the Java services that share the locks.
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// # use std::time::Duration;
    /// let c = ClientConfig::new("redis://h/").fair_wait_timeout(Duration::from_secs(2));
    /// # assert!(c.validate().is_ok());
    /// ```
    pub fn fair_wait_timeout(mut self, timeout: Duration) -> Self {
        self.fair_wait_timeout = timeout;
        self
    }

    /// The renewal interval in force: the one set, or a third of the watchdog timeout.
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// # use std::time::Duration;
    /// assert_eq!(ClientConfig::new("redis://h/").renew_interval(), Duration::from_secs(10));
    /// ```
    pub fn renew_interval(&self) -> Duration {
        self.renew_interval.unwrap_or(self.watchdog_timeout / 3)
    }

    /// Checks every value; the client refuses to start with an invalid config.
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// # use std::time::Duration;
    /// let bad = ClientConfig::new("redis://h/").watchdog_timeout(Duration::ZERO);
    /// assert!(bad.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), LockError> {
        match &self.deployment {
            Deployment::Standalone if self.url.is_empty() => {
                return Err(LockError::invalid_config("the Redis URL is empty"));
            }
            Deployment::Cluster { nodes } if nodes.iter().all(String::is_empty) => {
                return Err(LockError::invalid_config(
                    "a cluster needs at least one seed node URL",
                ));
            }
            Deployment::Sentinel { sentinels, .. } if sentinels.iter().all(String::is_empty) => {
                return Err(LockError::invalid_config(
                    "a sentinel deployment needs at least one sentinel URL",
                ));
            }
            Deployment::Replicated { nodes } if nodes.iter().all(String::is_empty) => {
                return Err(LockError::invalid_config(
                    "a replicated deployment needs at least one node URL",
                ));
            }
            Deployment::Sentinel { service, .. } if service.is_empty() => {
                return Err(LockError::invalid_config(
                    "a sentinel deployment needs the monitored primary's name",
                ));
            }
            _ => {}
        }
        self.replica_sync.validate()?;
        positive_millis("watchdog_timeout", self.watchdog_timeout)?;
        positive_millis("connect_timeout", self.connect_timeout)?;
        positive_millis("response_timeout", self.response_timeout)?;
        if self.fair_wait_timeout < Duration::from_millis(3) {
            return Err(LockError::invalid_config(format!(
                "fair_wait_timeout ({:?}) must be at least 3 ms",
                self.fair_wait_timeout
            )));
        }
        let interval = self.renew_interval();
        positive_millis("renew interval", interval)?;
        if interval >= self.watchdog_timeout {
            return Err(LockError::invalid_config(format!(
                "the renew interval ({interval:?}) must be shorter than the watchdog timeout ({:?})",
                self.watchdog_timeout
            )));
        }
        if self.max_name_len == 0 {
            return Err(LockError::invalid_config("max_name_len must be at least 1"));
        }
        self.tls.validate()?;
        if let Some(namespace) = &self.namespace {
            check_namespace(namespace)?;
        }
        if let Some(id) = &self.client_id {
            client_id::check_client_id(id)?;
        }
        Ok(())
    }
}

/// How much sooner than `lease` a holder stops counting on it: 1 % of the lease + 2 ms,
/// the RedLock allowance for clocks running at different rates (and for the moment the
/// holder needs to hear of it). A hold is reported lost this long before the end of its
/// last confirmed lease, so never after Redis lets it go.
pub(crate) fn clock_drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

/// Redis counts leases in whole milliseconds: anything shorter than 1 ms is zero to it.
pub(crate) fn positive_millis(what: &str, d: Duration) -> Result<u64, LockError> {
    let ms = d.as_millis();
    if ms == 0 {
        return Err(LockError::invalid_config(format!(
            "{what} must be at least 1 ms (got {d:?})"
        )));
    }
    // Redis refuses expiry times that overflow its clock; a century is beyond any real use.
    const CENTURY_MS: u128 = 100 * 365 * 24 * 3600 * 1000;
    if ms > CENTURY_MS {
        return Err(LockError::invalid_config(format!(
            "{what} must be at most 100 years (got {d:?})"
        )));
    }
    Ok(ms as u64)
}

impl ClientConfig {
    /// The watchdog lease in force (see [`ClientConfig::watchdog_timeout`]).
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// # use std::time::Duration;
    /// assert_eq!(ClientConfig::new("redis://h/").watchdog_timeout_value(), Duration::from_secs(30));
    /// ```
    pub fn watchdog_timeout_value(&self) -> Duration {
        self.watchdog_timeout
    }

    /// The default wait in force (see [`ClientConfig::default_wait`]).
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// # use std::time::Duration;
    /// assert_eq!(ClientConfig::new("redis://h/").default_wait_value(), Duration::from_secs(30));
    /// ```
    pub fn default_wait_value(&self) -> Duration {
        self.default_wait
    }
}

#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
impl ClientConfig {
    /// Adds the lock's name as a `lock` label to every per-lock metric (off by default).
    ///
    /// Each lock name then is a series of its own in the exporter: turn it on only when
    /// the names are few and fixed (not `order:<id>`), or the exporter's memory grows with
    /// every name ever locked. Recording then also allocates the label on every event.
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// let config = ClientConfig::new("redis://127.0.0.1/").metrics_lock_name_labels(true);
    /// assert!(config.metrics_lock_name_labels_value());
    /// ```
    pub fn metrics_lock_name_labels(mut self, on: bool) -> Self {
        self.metrics_lock_name_labels = on;
        self
    }

    /// Whether metrics carry the lock's name (see
    /// [`metrics_lock_name_labels`](ClientConfig::metrics_lock_name_labels)).
    ///
    /// ```
    /// # use actix_distributed_lock::ClientConfig;
    /// assert!(!ClientConfig::new("redis://127.0.0.1/").metrics_lock_name_labels_value());
    /// ```
    pub fn metrics_lock_name_labels_value(&self) -> bool {
        self.metrics_lock_name_labels
    }
}
