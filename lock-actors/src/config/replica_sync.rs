//! Replica sync: whether, and on how many replicas, a lock must be confirmed before it is
//! handed out.

use super::{positive_millis, ClientConfig};
use crate::error::LockError;
use std::time::Duration;

/// How long the default replica sync waits for the replicas (Redisson's `slavesSyncTimeout`).
pub(crate) const DEFAULT_SYNC_TIMEOUT: Duration = Duration::from_secs(1);

/// A fixed replica count for replica-synced acquisition: `WAIT` until `replicas` replicas
/// confirmed the write, at most `timeout`. See [`ClientConfig::sync_replicas`].
///
/// # Example
///
/// ```
/// use actix_distributed_lock::{ClientConfig, ReplicaSync, ReplicaSyncMode};
/// use std::time::Duration;
///
/// let config = ClientConfig::new("redis://127.0.0.1/").sync_replicas(1, Duration::from_millis(50));
/// let ReplicaSyncMode::AtLeast(sync) = config.replica_sync() else { panic!() };
/// assert_eq!(sync, ReplicaSync { replicas: 1, timeout: Duration::from_millis(50) });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaSync {
    /// How many replicas must confirm.
    pub replicas: usize,
    /// How long to wait for them.
    pub timeout: Duration,
}

/// Which replicas must confirm a lock before the caller is given it.
///
/// # Example
///
/// ```
/// use actix_distributed_lock::{ClientConfig, ReplicaSyncMode};
/// use std::time::Duration;
///
/// // The default: the replicas the primary has, one second, as Redisson does.
/// assert_eq!(
///     ClientConfig::new("redis://h/").replica_sync(),
///     ReplicaSyncMode::Connected { timeout: Duration::from_secs(1) }
/// );
/// assert_eq!(ClientConfig::new("redis://h/").no_replica_sync().replica_sync(), ReplicaSyncMode::Off);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplicaSyncMode {
    /// The default, Redisson's rule (`checkLockSyncedSlaves`): after an acquire, `WAIT`
    /// for every replica the lock's primary has connected, at most `timeout`; the lock is
    /// handed out when at least one confirmed. A primary without replicas is sent nothing
    /// more. Unlike Redisson, a watchdog renewal is waited for in the same way (one that no
    /// replica confirmed counts as failed), so a failover cannot shorten a lease the holder
    /// counts on.
    Connected {
        /// How long to wait for the replicas (Redisson's `slavesSyncTimeout`).
        timeout: Duration,
    },
    /// [`ClientConfig::sync_replicas`]: a fixed count must confirm every acquire and every
    /// renewal, whatever the primary reports.
    AtLeast(ReplicaSync),
    /// [`ClientConfig::sync_replicas_aof`]: a fixed count must have written every acquire
    /// and every renewal to its append-only file (`WAITAOF`, Redis 7.2+ and Valkey), whatever
    /// the primary reports: the write then outlives a replica's restart too.
    AtLeastAof(ReplicaSync),
    /// [`ClientConfig::no_replica_sync`]: no `WAIT` at all.
    Off,
}

impl Default for ReplicaSyncMode {
    fn default() -> Self {
        ReplicaSyncMode::Connected {
            timeout: DEFAULT_SYNC_TIMEOUT,
        }
    }
}

impl ReplicaSyncMode {
    pub(crate) fn validate(&self) -> Result<(), LockError> {
        match self {
            ReplicaSyncMode::Connected { timeout } => {
                positive_millis("replica_sync_timeout", *timeout)?;
            }
            ReplicaSyncMode::AtLeast(sync) | ReplicaSyncMode::AtLeastAof(sync) => {
                if sync.replicas == 0 {
                    return Err(LockError::invalid_config(
                        "sync_replicas needs at least 1 replica (no_replica_sync() turns it off)",
                    ));
                }
                positive_millis("sync_replicas timeout", sync.timeout)?;
            }
            ReplicaSyncMode::Off => {}
        }
        Ok(())
    }
}

impl ClientConfig {
    /// Replica-synced acquisition with a fixed count: after every acquire and every
    /// renewal, `WAIT` until `replicas` replicas of the lock's primary confirmed the write,
    /// at most `timeout`. An acquire they do not confirm is released again and tried again
    /// (as under the default, see [`replica_sync_timeout`](Self::replica_sync_timeout));
    /// a renewal they do not confirm counts as failed (the watchdog retries, and reports the
    /// lock lost when its lease runs out unconfirmed).
    ///
    /// Stricter than the default, which asks every connected replica but is content with
    /// one: here `replicas` must confirm, and a primary that has fewer refuses every grant
    /// (a promoted replica until it has replicas of its own). What remains either way:
    /// Redis replication is asynchronous, so a failover may still promote a replica that
    /// was not among those that confirmed. `WAIT` does not make Redis a consensus system;
    /// for that use [`RedLock`](crate::RedLock) over independent nodes.
    ///
    /// ```
    /// use actix_distributed_lock::ClientConfig;
    /// use std::time::Duration;
    ///
    /// let c = ClientConfig::new("redis://h/").sync_replicas(1, Duration::from_millis(100));
    /// assert!(c.validate().is_ok());
    /// assert!(ClientConfig::new("redis://h/").sync_replicas(0, Duration::from_millis(1)).validate().is_err());
    /// ```
    pub fn sync_replicas(mut self, replicas: usize, timeout: Duration) -> Self {
        self.replica_sync = ReplicaSyncMode::AtLeast(ReplicaSync { replicas, timeout });
        self
    }

    /// The stronger form of [`sync_replicas`](Self::sync_replicas): after every acquire and
    /// every renewal, wait (`WAITAOF 0 <replicas> <timeout>`) until `replicas` replicas of
    /// the lock's primary have written it to their append-only file, not only received it
    /// (Redisson's `SyncMode.WAIT_AOF`). A grant they do not confirm is given back and tried
    /// again as under `sync_replicas`; a renewal they do not confirm counts as failed.
    ///
    /// Needs `WAITAOF` (Redis 7.2 or later, Valkey 8) and replicas with `appendonly yes`:
    /// connecting to a server without the command fails with
    /// [`LockError::InvalidConfig`](crate::LockError::InvalidConfig), and a replica without
    /// an append-only file never confirms.
    ///
    /// ```
    /// use actix_distributed_lock::{ClientConfig, ReplicaSync, ReplicaSyncMode};
    /// use std::time::Duration;
    ///
    /// let c = ClientConfig::new("redis://h/").sync_replicas_aof(1, Duration::from_millis(500));
    /// assert_eq!(
    ///     c.replica_sync(),
    ///     ReplicaSyncMode::AtLeastAof(ReplicaSync { replicas: 1, timeout: Duration::from_millis(500) })
    /// );
    /// assert!(ClientConfig::new("redis://h/").sync_replicas_aof(0, Duration::from_secs(1)).validate().is_err());
    /// ```
    pub fn sync_replicas_aof(mut self, replicas: usize, timeout: Duration) -> Self {
        self.replica_sync = ReplicaSyncMode::AtLeastAof(ReplicaSync { replicas, timeout });
        self
    }

    /// The default replica sync with another timeout (Redisson's `slavesSyncTimeout`,
    /// 1 s by default): after an acquire or a renewal, wait at most `timeout` for the
    /// replicas the lock's primary has connected. When none of them confirmed a renewal, it
    /// counts as failed (the watchdog tries again); when none confirmed an acquire, the lock is given back and
    /// tried again up to 3 times, 1.5 s apart (Redisson's `retryAttempts` and
    /// `retryInterval`), within the caller's wait; then the acquire fails with
    /// [`LockError::NotReplicated`]. A primary without replicas is sent nothing more.
    ///
    /// [`LockError::NotReplicated`]: crate::LockError::NotReplicated
    ///
    /// ```
    /// use actix_distributed_lock::{ClientConfig, ReplicaSyncMode};
    /// use std::time::Duration;
    ///
    /// let c = ClientConfig::new("redis://h/").replica_sync_timeout(Duration::from_millis(300));
    /// assert_eq!(c.replica_sync(), ReplicaSyncMode::Connected { timeout: Duration::from_millis(300) });
    /// assert!(ClientConfig::new("redis://h/").replica_sync_timeout(Duration::ZERO).validate().is_err());
    /// ```
    pub fn replica_sync_timeout(mut self, timeout: Duration) -> Self {
        self.replica_sync = ReplicaSyncMode::Connected { timeout };
        self
    }

    /// No replica sync: a lock is handed out as soon as its primary took it, and a failover
    /// that loses the write before a replica had it can hand the lock out again (Redisson's
    /// `checkLockSyncedSlaves = false`). One round trip less per acquire on a primary with
    /// replicas; nothing changes on one without.
    ///
    /// ```
    /// use actix_distributed_lock::{ClientConfig, ReplicaSyncMode};
    /// assert_eq!(ClientConfig::new("redis://h/").no_replica_sync().replica_sync(), ReplicaSyncMode::Off);
    /// ```
    pub fn no_replica_sync(mut self) -> Self {
        self.replica_sync = ReplicaSyncMode::Off;
        self
    }

    /// The replica sync in force (see [`ReplicaSyncMode`]).
    ///
    /// ```
    /// use actix_distributed_lock::{ClientConfig, ReplicaSyncMode};
    /// assert!(matches!(ClientConfig::new("redis://h/").replica_sync(), ReplicaSyncMode::Connected { .. }));
    /// ```
    pub fn replica_sync(&self) -> ReplicaSyncMode {
        self.replica_sync
    }
}
