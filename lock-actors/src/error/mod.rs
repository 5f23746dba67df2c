//! The one error type of the crate, with messages that say what to do next.

mod tls;

use crate::redact::redact_text;
use std::sync::Arc;
use std::time::Duration;

/// Everything that can go wrong when taking, holding or releasing a lock.
///
/// Every variant names the lock (or the node) it is about, so a log line is enough to act on.
/// Passwords in Redis URLs never appear here: node addresses are redacted first. A `name`
/// is the lock's name as the caller gave it, without the client's
/// [`namespace`](crate::ClientConfig::namespace).
///
/// # Example
///
/// ```
/// use actix_distributed_lock::LockError;
/// use std::time::Duration;
///
/// let err = LockError::timeout("order:42", Duration::from_secs(5));
/// assert!(err.to_string().contains("order:42"));
/// assert!(err.is_timeout());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock stayed held by someone else for the whole wait.
    ///
    /// Every acquire without [`AcquireOptions::owner`](crate::AcquireOptions::owner) is a
    /// fresh owner, so a second acquire in the same task waits for the first like any other
    /// owner would. `by_this_client` says when the holder at the end of the wait was an
    /// owner of this same client (this process, another task or an earlier acquire); the
    /// message then points to re-entry: [`LockGuard::reenter`](crate::LockGuard::reenter),
    /// or acquiring with the holder's owner. It is found by one read when the wait runs
    /// out, which may add at most 250 ms to the wait; unanswered by then (Redis slow or
    /// silent), it is `false`.
    ///
    /// ```
    /// use actix_distributed_lock::LockError;
    /// use std::time::Duration;
    ///
    /// let busy = LockError::Timeout {
    ///     name: "order:42".into(),
    ///     waited: Duration::from_secs(5),
    ///     by_this_client: true,
    /// };
    /// assert!(busy.to_string().contains("guard.reenter"));
    /// ```
    #[error("{}", timeout_text(.name, .waited, *.by_this_client))]
    Timeout {
        /// The lock's name.
        name: String,
        /// How long this caller waited.
        waited: Duration,
        /// Whether the holder, when the wait ran out, was an owner of this same client.
        by_this_client: bool,
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
    #[error("the key of lock `{name}` holds a value that is not a lock of this kind; it was left untouched (pick another lock name)")]
    WrongType {
        /// The lock's name, as the caller gave it (its key is the name mapped into the
        /// client's namespace, if any).
        name: String,
    },
    /// The owner already holds this non-reentrant lock: taking it again would wait for
    /// itself forever, so it is refused at once. Release the first hold first.
    #[error("lock `{name}` is already held by this owner and is not reentrant; release it before taking it again")]
    AlreadyHeld {
        /// The lock's name.
        name: String,
    },
    /// A conditional force-unlock found the lock held by others than the holders it was
    /// told (an operator's confirmation is about the holders shown; one who took the lock
    /// since is left alone). Nothing was released: look at the lock again.
    ///
    /// ```
    /// use actix_distributed_lock::LockError;
    /// let e = LockError::HolderChanged { name: "order:42".into() };
    /// assert!(e.to_string().contains("nothing was released"));
    /// ```
    #[error("lock `{name}` is no longer held by the holders shown (it changed hands since); nothing was released: look at it again")]
    HolderChanged {
        /// The lock's name.
        name: String,
    },
    /// Replica sync (on by default where the primary has replicas, see
    /// [`ClientConfig::replica_sync_timeout`]): no replica (or, under
    /// [`ClientConfig::sync_replicas`], too few) confirmed the lock within the timeout, in
    /// the first try and the 3 tries after it, 1.5 s apart. Each grant was given back: a
    /// failover then could have lost it.
    ///
    /// [`ClientConfig::sync_replicas`]: crate::ClientConfig::sync_replicas
    /// [`ClientConfig::replica_sync_timeout`]: crate::ClientConfig::replica_sync_timeout
    #[error("lock `{name}` was confirmed by {confirmed} of the {wanted} replicas asked for within {timeout:?}; it was released again (check the replicas; no_replica_sync() turns the wait off)")]
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
    /// A semaphore's wait ran out while the semaphore had no permits set at all (its key
    /// does not exist): nobody called [`Semaphore::try_set_permits`] or
    /// [`Semaphore::set_permits`] (or the key was deleted). Unlike a
    /// [`Timeout`](LockError::Timeout), waiting longer will not help until someone sets them.
    ///
    /// [`Semaphore::try_set_permits`]: crate::Semaphore::try_set_permits
    /// [`Semaphore::set_permits`]: crate::Semaphore::set_permits
    ///
    /// ```
    /// use actix_distributed_lock::LockError;
    /// use std::time::Duration;
    /// let e = LockError::NoPermitsSet { name: "pool".into(), waited: Duration::from_secs(1) };
    /// assert!(e.to_string().contains("try_set_permits"));
    /// ```
    #[error("semaphore `{name}` has no permits set (its key does not exist) after waiting {waited:?}: set them first with `try_set_permits` (or `set_permits`)")]
    NoPermitsSet {
        /// The semaphore's name.
        name: String,
        /// How long this caller waited.
        waited: Duration,
    },
    /// The client was shut down (or dropped) before the operation finished.
    #[error("the lock client has been shut down")]
    Shutdown,
    /// Redis answered the request with an error: a missing ACL permission (`NOPERM`), a
    /// full memory (`OOM`), a read-only replica (`READONLY`), a busy server (`BUSY`), a
    /// failing script (`ERR`) and so on. `code` is the error's first word as the server
    /// sent it; the message says what the server said and what to do about it.
    ///
    /// Only the codes a server recovers from by itself ([`is_transient`]) are retried
    /// within the caller's wait; the others are reported at once.
    ///
    /// [`is_transient`]: LockError::is_transient
    #[error("{}", server_text(.node, .name, .code, .message))]
    Server {
        /// The node's address, with any password redacted.
        node: String,
        /// The lock's name (empty for a request that is about no lock, such as connecting).
        name: String,
        /// The error code: `NOPERM`, `OOM`, `READONLY`, `BUSY`, `ERR`, ...
        code: String,
        /// The rest of the server's error text.
        message: String,
        /// The server's error as the redis crate reported it.
        #[source]
        source: ServerReply,
    },
    /// The ACL user of the Redis URL may not run a command, or touch a key or channel, that
    /// this request needs: Redis refused it (`NOPERM`, or a script's refusal). `command` and
    /// `target` say what was refused; the "ACL users" table of the repository's
    /// docs/production.md lists the rules each lock kind needs. Never retried: the same
    /// request would be refused again.
    ///
    /// ```
    /// use actix_distributed_lock::LockError;
    ///
    /// fn advice(error: &LockError) -> Option<String> {
    ///     let LockError::Denied { command, target, .. } = error else { return None };
    ///     Some(format!("grant the Redis user {command} on {target}"))
    /// }
    /// assert_eq!(advice(&LockError::Shutdown), None);
    /// ```
    #[error("{}", denied_text(.node, .name, .command, .target, .source))]
    Denied {
        /// The node's address, with any password redacted.
        node: String,
        /// The lock's name (empty for a request that is about no lock, such as connecting).
        name: String,
        /// The refused command as Redis spells it in upper case: `EVALSHA` (a lock script),
        /// `PUBLISH`/`SPUBLISH` (a script's wake-up), `SUBSCRIBE`/`SSUBSCRIBE` (a waiter's
        /// wake-up channel), `SCRIPT|LOAD`, ...; `a command of the script` when a script's
        /// own call was refused and Redis did not say which.
        command: String,
        /// What it was refused on: ``key `order:1` ``, ``channel `redisson_lock__channel:{order:1}` ``,
        /// ``one of the keys `a`, `b` ``, or empty when the command itself is not allowed.
        target: String,
        /// The server's error as the redis crate reported it (its text is shown last).
        #[source]
        source: ServerReply,
    },
}

fn timeout_text(name: &str, waited: &Duration, by_this_client: bool) -> String {
    if by_this_client {
        format!(
            "lock `{name}` is still held after waiting {waited:?}, by another owner of this \
             same client: each acquire is a fresh owner unless given one, so a second acquire \
             in the same task waits for the first. Re-enter instead with \
             `guard.reenter(wait)` or `AcquireOptions::new().owner(owner)` with the holder's \
             `LockOwner` (the reentrant kinds; the guide's \"The reentrant lock\"), or \
             release the first hold"
        )
    } else {
        format!(
            "lock `{name}` is still held by another owner after waiting {waited:?}; retry \
             later or wait longer"
        )
    }
}

fn denied_text(
    node: &str,
    name: &str,
    command: &str,
    target: &str,
    server: &ServerReply,
) -> String {
    let on = if target.is_empty() {
        String::new()
    } else {
        format!(" on {target}")
    };
    let about = if name.is_empty() {
        String::new()
    } else {
        format!(" for lock `{name}`")
    };
    format!(
        "Redis node {node} refused {command}{on}{about}: the ACL user of the Redis URL lacks \
         this permission; grant it (ACL SETUSER; the \"ACL users\" table of docs/production.md \
         lists the rules of each lock kind) or use another user (server: {server})"
    )
}

/// The error codes a server recovers from by itself: a script that ends (`BUSY`), a data
/// set that finishes loading (`LOADING`), a cluster that finishes failing over or
/// resharding. Retrying them within the caller's wait is worth it; any other code would
/// only be refused again.
const TRANSIENT_CODES: [&str; 7] = [
    "BUSY",
    "LOADING",
    "TRYAGAIN",
    "MASTERDOWN",
    "CLUSTERDOWN",
    "MOVED",
    "ASK",
];

fn server_text(node: &str, name: &str, code: &str, message: &str) -> String {
    let about = if name.is_empty() {
        String::new()
    } else {
        format!(" about lock `{name}`")
    };
    // Redis 7.0 refuses a script's PUBLISH on a channel the user may not use with a plain
    // `ERR`; it is the same missing permission as a `NOPERM`.
    let refused_channel = message.contains("can't publish to the channel");
    let hint = match code {
        "NOPERM" => ACL_HINT,
        "ERR" if refused_channel => ACL_HINT,
        "OOM" => concat!(
            "the server reached maxmemory and its policy evicts nothing (noeviction): ",
            "free memory, raise maxmemory, or pick an evicting policy"
        ),
        "READONLY" => "this node is a read-only replica: point the client at the primary",
        "BUSY" => concat!(
            "the server is running a long script; it answers again when the script ends ",
            "(or SCRIPT KILL)"
        ),
        "LOADING" => "the server is loading its data set; it answers again once loaded",
        "TRYAGAIN" | "MASTERDOWN" | "CLUSTERDOWN" | "MOVED" | "ASK" => {
            "the cluster is failing over or resharding; try again shortly"
        }
        "NOAUTH" | "WRONGPASS" => "check the user and password of the Redis URL",
        _ => "see the server's message",
    };
    format!("Redis node {node} refused a request{about}: {code} {message} ({hint})")
}

const ACL_HINT: &str = concat!(
    "the ACL user of the Redis URL lacks a permission for this lock's keys, its channel ",
    "`redisson_lock__channel:{name}` or a command: grant it (ACL SETUSER) or use another user"
);

/// The error a Redis server answered with, kept as the
/// [`source`](std::error::Error::source) of [`LockError::Server`]. It shows as the server
/// sent it (`NOPERM this user has no permissions ...`); two are equal when their code and
/// text are.
///
/// # Example
///
/// ```
/// use actix_distributed_lock::LockError;
/// use std::error::Error;
///
/// fn server_said(error: &LockError) -> Option<String> {
///     let LockError::Server { source, .. } = error else { return None };
///     Some(source.to_string())
/// }
/// assert_eq!(server_said(&LockError::Shutdown), None);
/// ```
#[derive(Debug, Clone)]
pub struct ServerReply(Arc<redis::RedisError>);

impl ServerReply {
    pub(crate) fn new(err: &redis::RedisError) -> Self {
        ServerReply(Arc::new(err.clone()))
    }
}

impl PartialEq for ServerReply {
    fn eq(&self, other: &Self) -> bool {
        self.0.code() == other.0.code() && self.0.detail() == other.0.detail()
    }
}

impl Eq for ServerReply {}

impl std::fmt::Display for ServerReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let code = self.0.code().unwrap_or("ERR");
        // After a tab: the server's own text, behind the fields our scripts add to a
        // refused publish (see `denied`); Redis's own texts have no tabs.
        match self.0.detail().map(|d| d.rsplit('\t').next().unwrap_or(d)) {
            Some(detail) => write!(f, "{code} {}", redact_text(detail)),
            None => f.write_str(code),
        }
    }
}

impl std::error::Error for ServerReply {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
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

    /// True when trying the same request again may succeed without anyone changing
    /// anything: Redis did not answer ([`LockError::Unavailable`]), or answered that it
    /// cannot serve for a moment ([`LockError::Server`] with `BUSY`, `LOADING`, `TRYAGAIN`,
    /// `MASTERDOWN`, `CLUSTERDOWN`, `MOVED` or `ASK`). A missing permission, a full memory,
    /// a read-only replica, a wrong type or a failing script are not transient: the same
    /// request would be refused again. (A busy lock is not an error of Redis: see
    /// [`is_timeout`](LockError::is_timeout).)
    ///
    /// The library's own retries (an acquire's retries within its wait, a RedLock's
    /// attempts, a semaphore's) retry only transient errors.
    ///
    /// ```
    /// # use actix_distributed_lock::LockError;
    /// let e = LockError::Unavailable { node: "redis://127.0.0.1:1/".into(), reason: "refused".into() };
    /// assert!(e.is_transient());
    /// assert!(!LockError::WrongType { name: "a".into() }.is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        match self {
            LockError::Unavailable { .. } => true,
            LockError::Server { code, .. } => TRANSIENT_CODES.contains(&code.as_str()),
            _ => false,
        }
    }

    /// The server's error code for [`LockError::Server`] (`OOM`, `READONLY`, ...) and
    /// `NOPERM` for [`LockError::Denied`], `None` for every other variant.
    ///
    /// ```
    /// # use actix_distributed_lock::LockError;
    /// assert_eq!(LockError::Shutdown.server_code(), None);
    /// ```
    pub fn server_code(&self) -> Option<&str> {
        match self {
            LockError::Server { code, .. } => Some(code),
            LockError::Denied { .. } => Some("NOPERM"),
            _ => None,
        }
    }

    /// True for [`LockError::Denied`]: the Redis user's ACL refused a command, key or
    /// channel.
    ///
    /// ```
    /// # use actix_distributed_lock::LockError;
    /// assert!(!LockError::Shutdown.is_denied());
    /// ```
    pub fn is_denied(&self) -> bool {
        matches!(self, LockError::Denied { .. })
    }

    /// A [`LockError::Denied`] that names no lock yet (a subscription, refused below the
    /// lock actor) names lock `name`; any other error is returned as it is.
    pub(crate) fn about(mut self, lock: &str) -> Self {
        if let LockError::Denied { name, .. } = &mut self {
            if name.is_empty() {
                *name = lock.to_string();
            }
        }
        self
    }

    /// A [`LockError::Timeout`] on lock `name` after `waited`, with a holder not known to
    /// be of this client.
    ///
    /// ```
    /// use actix_distributed_lock::LockError;
    /// use std::time::Duration;
    ///
    /// let err = LockError::timeout("order:42", Duration::from_secs(5));
    /// assert!(err.is_timeout());
    /// ```
    pub fn timeout(name: impl Into<String>, waited: Duration) -> Self {
        LockError::Timeout {
            name: name.into(),
            waited,
            by_this_client: false,
        }
    }

    pub(crate) fn invalid_config(reason: impl Into<String>) -> Self {
        LockError::InvalidConfig {
            reason: reason.into(),
        }
    }

    /// Maps a Redis error for an operation on lock `name` at `node` (already redacted),
    /// ACL refusals aside (`denied::from_redis` makes those [`LockError::Denied`]): an
    /// error the server answered with by its code (the redis crate parses it), anything
    /// else (no connection, no answer, a reply that makes no sense) as `Unavailable`.
    pub(crate) fn from_redis(err: &redis::RedisError, name: &str, node: &str) -> Self {
        // Mistakes in the URL, not outages: retrying would only repeat them.
        match err.kind() {
            redis::ErrorKind::AuthenticationFailed => {
                return LockError::invalid_config(format!(
                    "Redis node {node} refused the user and password of the Redis URL \
                     (authentication failed): check them"
                ))
            }
            redis::ErrorKind::Parse => {
                return LockError::invalid_config(format!(
                    "Redis node {node} did not answer as Redis — wrong port? (its reply is not \
                     the Redis protocol)"
                ))
            }
            _ => {}
        }
        match err.code() {
            Some("WRONGTYPE") => LockError::WrongType { name: name.into() },
            Some(code @ ("WRONGPASS" | "NOAUTH")) => LockError::invalid_config(format!(
                "Redis node {node} refused the user and password of the Redis URL ({code} {}): \
                 check them",
                redact_text(err.detail().unwrap_or_default())
            )),
            Some(code) => LockError::Server {
                node: node.into(),
                name: name.into(),
                code: code.to_string(),
                message: redact_text(err.detail().unwrap_or_default()),
                source: ServerReply(Arc::new(err.clone())),
            },
            None => LockError::Unavailable {
                node: node.into(),
                reason: tls_reason(err).unwrap_or_else(|| redact_text(&err.to_string())),
            },
        }
    }
}

/// What a failed TLS handshake means, when `err` is one.
fn tls_reason(err: &redis::RedisError) -> Option<String> {
    #[cfg(feature = "tls")]
    return tls::describe_failure(err);
    #[cfg(not(feature = "tls"))]
    {
        let _ = err;
        None
    }
}
