//! What the inspector reports: plain data, serializable to JSON (the `--json` output of
//! `lock-inspect` and the inspector page's endpoints use these shapes unchanged).

use crate::kinds::Kind;
use serde::Serialize;

/// The kind of a lock, as the inspector reads it from its keys' types and shapes.
///
/// ```
/// use actix_distributed_lock::inspect::InspectedKind;
/// assert_eq!(InspectedKind::ReadWrite.as_str(), "read_write");
/// assert_eq!(serde_json::to_string(&InspectedKind::Fair).unwrap(), "\"fair\"");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InspectedKind {
    /// A hash of owner → hold count (ours and Redisson's `RLock`). A spin lock (ours and
    /// Redisson's `RSpinLock`) is the same hash, without pub/sub: it is listed as this.
    Reentrant,
    /// A reentrant hash with a fencing-token counter `redisson_lock_token:{name}`.
    Fenced,
    /// A reentrant hash with a waiting queue `redisson_lock_queue:{name}` (Redisson's
    /// `RFairLock`), or a queue of waiters whose lock is free at the moment.
    Fair,
    /// A hash with a `mode` field (`read` or `write`): Redisson's `RReadWriteLock`.
    ReadWrite,
    /// A string whose value is `<client id>:<owner>`: this crate's fast lock.
    Fast,
    /// A string holding an integer: the available permits of a semaphore (Redisson's
    /// `RSemaphore`). A plain counter has the same shape (see "Limits" in the repository's
    /// docs/inspector.md).
    Semaphore,
    /// A permit count with a `{name}:timeout` sorted set of permit ids and their expiry
    /// (Redisson's `RPermitExpirableSemaphore`).
    ExpirableSemaphore,
    /// A string holding an integer that someone waits on through
    /// `redisson_countdownlatch__channel__{name}`: a count-down latch's count (Redisson's
    /// `RCountDownLatch`). A latch nobody waits on has a semaphore's shape and is shown as
    /// one.
    Latch,
}

impl InspectedKind {
    /// The name used in JSON and in `lock-inspect`'s tables.
    pub fn as_str(self) -> &'static str {
        match self {
            InspectedKind::Reentrant => "reentrant",
            InspectedKind::Fenced => "fenced",
            InspectedKind::Fair => "fair",
            InspectedKind::ReadWrite => "read_write",
            InspectedKind::Fast => "fast",
            InspectedKind::Semaphore => "semaphore",
            InspectedKind::ExpirableSemaphore => "expirable_semaphore",
            InspectedKind::Latch => "latch",
        }
    }

    /// How the inspector reads keys of `kind`: kinds that keep the same keys read the same
    /// (a spin lock as the reentrant lock; the two sides of a read-write lock as one lock).
    pub(crate) const fn of(kind: Kind) -> InspectedKind {
        match kind {
            Kind::Reentrant | Kind::Spin => InspectedKind::Reentrant,
            Kind::Fenced => InspectedKind::Fenced,
            Kind::Fair => InspectedKind::Fair,
            Kind::Read | Kind::Write => InspectedKind::ReadWrite,
            Kind::Fast => InspectedKind::Fast,
            Kind::Semaphore => InspectedKind::Semaphore,
            Kind::ExpirableSemaphore => InspectedKind::ExpirableSemaphore,
            Kind::Latch => InspectedKind::Latch,
        }
    }

    /// The kinds whose keys read as this one, by their names (`reentrant` lists `spin`
    /// too: the two keep the same hash).
    ///
    /// ```
    /// use actix_distributed_lock::inspect::InspectedKind;
    /// assert_eq!(InspectedKind::ReadWrite.kinds(), vec!["read", "write"]);
    /// ```
    pub fn kinds(self) -> Vec<&'static str> {
        Kind::ALL
            .iter()
            .filter(|kind| InspectedKind::of(**kind) == self)
            .map(|kind| kind.name())
            .collect()
    }

    /// Every kind, in the order tables list them.
    pub const ALL: [InspectedKind; 8] = [
        InspectedKind::Reentrant,
        InspectedKind::Fenced,
        InspectedKind::Fair,
        InspectedKind::ReadWrite,
        InspectedKind::Fast,
        InspectedKind::Semaphore,
        InspectedKind::ExpirableSemaphore,
        InspectedKind::Latch,
    ];
}

impl std::fmt::Display for InspectedKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One holder of a lock (or one permit of an expirable semaphore).
///
/// Our clients and Redisson's write the same field shape, `<client id>:<number>`: the
/// number is a [`LockOwner`](crate::LockOwner) id for a Rust holder and the Java thread
/// id for a Redisson holder.
///
/// ```
/// use actix_distributed_lock::inspect::Holder;
/// let h = Holder::from_field("0c5f3d2e-8a1b-4c6d-9e0f-112233445566:17:write", 1, None);
/// assert_eq!(h.client_id.as_deref(), Some("0c5f3d2e-8a1b-4c6d-9e0f-112233445566"));
/// assert_eq!(h.owner, Some(17));
/// assert!(h.write);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    /// The field (or value, or permit id) exactly as stored in Redis.
    pub field: String,
    /// The client (Redisson: connection manager) id, when the field has the shape above.
    pub client_id: Option<String>,
    /// The owner id (Rust) or thread id (Java), when the field has the shape above.
    pub owner: Option<u64>,
    /// A write hold of a read-write lock (the field ends in `:write`).
    pub write: bool,
    /// How many times it holds the lock (reentrant holds); 1 for a fast lock or a permit.
    pub count: u64,
    /// What is left of this hold's own lease in milliseconds, where it has one of its own
    /// (a read hold of a read-write lock, a permit of an expirable semaphore); `None`
    /// otherwise: the lock's [`LockInfo::ttl_ms`] applies.
    pub ttl_ms: Option<u64>,
}

impl Holder {
    /// Splits a field of shape `<client id>:<number>[:write]`; any other field is kept
    /// whole, with no client or owner.
    pub fn from_field(field: &str, count: u64, ttl_ms: Option<u64>) -> Holder {
        let (base, write) = match field.strip_suffix(":write") {
            Some(base) => (base, true),
            None => (field, false),
        };
        let (client_id, owner) = match base.rsplit_once(':') {
            Some((client, number)) if !client.is_empty() => match number.parse::<u64>() {
                Ok(owner) => (Some(client.to_string()), Some(owner)),
                Err(_) => (None, None),
            },
            _ => (None, None),
        };
        Holder {
            field: field.to_string(),
            client_id,
            owner,
            write: write && owner.is_some(),
            count,
            ttl_ms,
        }
    }
}

/// One waiter in a fair lock's queue, in queue order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Waiter {
    /// Its place in the queue, from 1 (the next to be granted).
    pub position: usize,
    /// The queued field, exactly as stored (same shape as [`Holder::field`]).
    pub field: String,
    /// The client id part of the field, if it has one.
    pub client_id: Option<String>,
    /// The owner (Rust) or thread (Java) id part of the field, if it has one.
    pub owner: Option<u64>,
    /// Milliseconds until its place in the queue expires unless it tries again (from the
    /// timeout sorted set's score and the server's clock); negative when already past.
    pub deadline_ms: Option<i64>,
}

/// One lock as the inspector found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockInfo {
    /// The lock's name as the inspecting client names it (without the client's namespace,
    /// if it has one).
    pub name: String,
    /// The Redis key of the lock.
    pub key: String,
    /// What kind of lock it is.
    pub kind: InspectedKind,
    /// For a read-write lock: `"read"` or `"write"`.
    pub mode: Option<String>,
    /// Who holds it (empty when free, e.g. a fair lock whose queue is waiting).
    pub holders: Vec<Holder>,
    /// The key's remaining time to live in milliseconds; `None` when it has none (a
    /// semaphore, or a lock written without a lease).
    pub ttl_ms: Option<u64>,
    /// A fair lock's waiters, in queue order; empty for the other kinds.
    pub waiters: Vec<Waiter>,
    /// A semaphore's available permits.
    pub permits: Option<i64>,
    /// A fenced lock's last issued fencing token.
    pub fencing_token: Option<i64>,
    /// A count-down latch's count (0 and below: open).
    pub count: Option<i64>,
}

/// What [`Inspector::force_unlock`](crate::inspect::Inspector::force_unlock) did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForceUnlocked {
    /// The lock as it was just before (holders, waiters, TTL).
    pub before: LockInfo,
    /// The keys deleted (the lock's key, and for a read-write lock its read holds'
    /// timeout keys). The fencing counter and a fair lock's queue are kept: waiters stay.
    pub removed_keys: Vec<String>,
    /// The channel the release message went to, and the message (`0` wakes one waiter,
    /// `1` every reader), as the kind's own unlock publishes it.
    pub published: Option<(String, String)>,
}

/// A change [`LockWatch`](crate::inspect::LockWatch) saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Change {
    /// A holder appeared (or its hold count changed: the new count).
    Granted {
        /// The new holder.
        holder: Holder,
    },
    /// A holder left (released, expired, or forced out).
    Released {
        /// The holder that left.
        holder: Holder,
    },
    /// A waiter joined the fair queue.
    Queued {
        /// The new waiter.
        waiter: Waiter,
    },
    /// A waiter left the fair queue (granted, gave up, or timed out).
    Dequeued {
        /// The waiter that left.
        waiter: Waiter,
    },
    /// A message on one of the lock's channels (an unlock or a permit release).
    Message {
        /// The channel.
        channel: String,
    },
    /// A count-down latch's count changed (counted down, or set anew); a latch that opened
    /// is gone, so its last change is to no lock at all.
    Counted {
        /// The count now.
        count: i64,
    },
}

/// One step of a watch: what changed, and the lock as it is now (`None`: no lock there).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WatchEvent {
    /// Milliseconds since the Unix epoch, by this process's clock.
    pub at_ms: u64,
    /// What changed since the previous event (the first event lists the holders and
    /// waiters found as `Granted` and `Queued`).
    pub changes: Vec<Change>,
    /// The lock now.
    pub lock: Option<LockInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of the one list is read as one of the inspector's kinds, and each of those
    /// stands for at least one kind: neither list knows a kind the other does not.
    #[test]
    fn the_inspector_knows_every_kind() {
        for inspected in InspectedKind::ALL {
            assert!(
                !inspected.kinds().is_empty(),
                "{inspected} stands for no kind"
            );
        }
        let covered: usize = InspectedKind::ALL.iter().map(|k| k.kinds().len()).sum();
        assert_eq!(covered, Kind::COUNT);
        assert_eq!(InspectedKind::Reentrant.kinds(), vec!["reentrant", "spin"]);
    }
}
