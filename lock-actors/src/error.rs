//! The one error type of the crate, with messages that say what to do next.

use crate::redact::redact_text;
use std::time::Duration;

/// Everything that can go wrong when taking, holding or releasing a lock.
///
/// Every variant names the lock (or the node) it is about, so a log line is enough to act on.
/// Passwords in Redis URLs never appear here: node addresses are redacted first.
///
/// # Example
///
/// ```
/// use actix_distributed_lock::LockError;
/// use std::time::Duration;
///
/// let err = LockError::Timeout { name: "order:42".into(), waited: Duration::from_secs(5) };
/// assert!(err.to_string().contains("order:42"));
/// assert!(err.is_timeout());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock stayed held by someone else for the whole wait.
    #[error("lock `{name}` is still held by another owner after waiting {waited:?}; retry later or wait longer")]
    Timeout {
        /// The lock's name.
        name: String,
        /// How long this caller waited.
        waited: Duration,
    },
    /// The caller does not hold the lock (never did, already released it, or it expired).
    #[error("lock `{name}` is not held by this owner (already released, expired, or held by another owner); nothing was changed")]
    NotOwner {
        /// The lock's name.
        name: String,
    },
    /// The lock was held, but Redis no longer has it (it expired or was deleted).
    #[error("lock `{name}` was lost: Redis no longer records this owner as the holder; stop the work it protected")]
    Lost {
        /// The lock's name.
        name: String,
    },
    /// Redis could not be reached, or did not answer in time.
    #[error("Redis node {node} is unavailable: {reason}")]
    Unavailable {
        /// The node's address, with any password redacted.
        node: String,
        /// What the connection reported.
        reason: String,
    },
    /// The lock name cannot be used.
    #[error("invalid lock name: {reason}")]
    InvalidName {
        /// Why the name was refused.
        reason: String,
    },
    /// A setting or argument (duration, URL, size) is out of range.
    #[error("invalid configuration: {reason}")]
    InvalidConfig {
        /// Which value was refused and why.
        reason: String,
    },
    /// The key exists but holds data that is not a lock; it was left untouched.
    #[error("key `{name}` holds a value that is not a lock of this kind; it was left untouched (pick another lock name)")]
    WrongType {
        /// The lock's name (which is also its key).
        name: String,
    },
    /// The owner already holds this non-reentrant lock: taking it again would wait for
    /// itself forever, so it is refused at once. Release the first hold first.
    #[error("lock `{name}` is already held by this owner and is not reentrant; release it before taking it again")]
    AlreadyHeld {
        /// The lock's name.
        name: String,
    },
    /// Replica-synced acquisition ([`ClientConfig::sync_replicas`]) is on, and fewer
    /// replicas than asked confirmed the lock within the timeout. The lock was released
    /// again: a failover now could have lost it.
    ///
    /// [`ClientConfig::sync_replicas`]: crate::ClientConfig::sync_replicas
    #[error("lock `{name}` was confirmed by {confirmed} of the {wanted} replicas asked for within {timeout:?}; it was released again (check the replicas, or lower sync_replicas)")]
    NotReplicated {
        /// The lock's name.
        name: String,
        /// How many replicas had to confirm.
        wanted: usize,
        /// How many did.
        confirmed: usize,
        /// How long the client waited for them.
        timeout: Duration,
    },
    /// The client was shut down (or dropped) before the operation finished.
    #[error("the lock client has been shut down")]
    Shutdown,
}

impl LockError {
    /// True for [`LockError::Timeout`]: the lock is busy, trying later may succeed.
    ///
    /// ```
    /// # use actix_distributed_lock::LockError;
    /// assert!(!LockError::Shutdown.is_timeout());
    /// ```
    pub fn is_timeout(&self) -> bool {
        matches!(self, LockError::Timeout { .. })
    }

    /// True for [`LockError::Unavailable`]: Redis could not be reached.
    ///
    /// ```
    /// # use actix_distributed_lock::LockError;
    /// let e = LockError::Unavailable { node: "redis://127.0.0.1:1/".into(), reason: "refused".into() };
    /// assert!(e.is_unavailable());
    /// ```
    pub fn is_unavailable(&self) -> bool {
        matches!(self, LockError::Unavailable { .. })
    }

    pub(crate) fn invalid_config(reason: impl Into<String>) -> Self {
        LockError::InvalidConfig {
            reason: reason.into(),
        }
    }

    /// Maps a Redis error for an operation on lock `name` at `node` (already redacted).
    pub(crate) fn from_redis(err: &redis::RedisError, name: &str, node: &str) -> Self {
        let text = err.to_string();
        if text.contains("WRONGTYPE") {
            LockError::WrongType { name: name.into() }
        } else {
            LockError::Unavailable {
                node: node.into(),
                reason: redact_text(&text),
            }
        }
    }
}
