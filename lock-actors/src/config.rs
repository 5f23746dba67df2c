//! Client settings: where Redis is, how long leases last, how long to wait.

use crate::error::{redact_url, LockError};
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
            fair_wait_timeout: Duration::from_secs(5),
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

    /// How long a fair lock waiter may go without a sign of life before other waiters skip
    /// it (a waiter that died in the queue). Live waiters show one every third of it.
    /// Default 5 s, as Redisson's `threadWaitTime`.
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
        if self.url.is_empty() {
            return Err(LockError::invalid_config("the Redis URL is empty"));
        }
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
        Ok(())
    }
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
