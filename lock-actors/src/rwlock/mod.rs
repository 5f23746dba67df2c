//! The read-write lock: Redisson's `RReadWriteLock` layout, and the handle that hands out
//! its two sides.

use crate::client::LockClient;
use crate::error::LockError;
use crate::handle::Lock;
use crate::keys::LockName;
use crate::lock::LockKind;

/// Many readers or one writer, on one name (Redisson's `RReadWriteLock`).
///
/// Both sides are ordinary [`Lock`] handles, with the watchdog, `lost()`, bounded waits and
/// reentrancy. In Redis it is one hash `name` with a `mode` field (`read` or `write`), a hold
/// count per reader (`uuid:owner`) or for the writer (`uuid:owner:write`), and one key per
/// read hold, `{name}:uuid:owner:rwlock_timeout:N`, that carries that hold's lease: a dead
/// reader's holds expire on their own even while other readers keep the lock. Unlocks are
/// published on `redisson_rwlock:{name}` with Redisson's messages: a write unlock that frees
/// the lock (or leaves the writer's own read holds) publishes `1`, which wakes every waiter;
/// a read unlock that frees it publishes `0`, which wakes one (a writer).
///
/// What it guarantees: a writer never overlaps a reader or another writer, on one Redis
/// node; a writer may also take the read side (its read holds outlive its write hold, which
/// turns the lock into a read lock: the downgrade path). What it does not: upgrading (a
/// reader asking for the write side waits for its own read hold and times out), fairness
/// between readers and writers (a steady stream of readers can keep a writer waiting), and
/// safety across a Redis failover (a replica that missed the write can grant the lock again,
/// as for every single-node lock).
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::{AcquireOptions, LockOwner};
/// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
/// let doc = client.read_write_lock("doc:7")?;
/// let a = doc.read().acquire().await?;
/// let b = doc.read().acquire().await?; // readers share
/// a.unlock().await?;
/// b.unlock().await?;
///
/// let me = LockOwner::new();
/// let write = doc.write().acquire_with(AcquireOptions::new().owner(me)).await?;
/// let read = doc.read().acquire_with(AcquireOptions::new().owner(me)).await?; // downgrade
/// write.unlock().await?; // still read-locked by `me`
/// read.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ReadWriteLock {
    read: Lock,
    write: Lock,
}

impl ReadWriteLock {
    /// The read side: shared by any number of owners while no other owner writes.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.read_write_lock("doc:7")?.read().acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn read(&self) -> &Lock {
        &self.read
    }

    /// The write side: one owner, and no readers but that owner.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.read_write_lock("doc:7")?.write().acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn write(&self) -> &Lock {
        &self.write
    }
}

impl LockClient {
    /// A handle to the read-write lock `name`. Checks the name; talks to nobody yet.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let doc = client.read_write_lock("doc:7")?;
    /// let guard = doc.read().acquire().await?;
    /// # Ok(()) }
    /// ```
    pub fn read_write_lock(&self, name: &str) -> Result<ReadWriteLock, LockError> {
        let name: LockName = self.name(name)?;
        Ok(ReadWriteLock {
            read: Lock::new(self.clone(), LockKind::Read, name.clone(), false),
            write: Lock::new(self.clone(), LockKind::Write, name, false),
        })
    }
}
