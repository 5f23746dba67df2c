//! Acting on a lock for an owner known only by its id (see
//! [`LockOwner`](crate::LockOwner#whoever-has-the-id-is-the-owner)): checking and releasing
//! its holds, wherever they were taken.

use super::Lock;
use crate::error::LockError;
use crate::lock::{LockActor, LockOwner, ReleaseAs, Released};

impl Lock {
    /// Releases one hold of `owner`, wherever it was taken: by another task of this process
    /// or, through a client with the same [`client_id`](crate::ClientConfig::client_id), by
    /// another process (or a Redisson client whose id that is, for its thread `owner`).
    /// Redisson's `unlockAsync(threadId)`. Returns [`Released::Unlocked`] when that was the
    /// owner's last hold.
    ///
    /// A hold this process keeps for `owner` is released as
    /// [`Release`](crate::messages::Release) does (its newest hold; the guard hears it
    /// ended). Otherwise the unlock runs straight in Redis, owner-checked: the holds the
    /// owner has left keep the key's TTL as it was (their leases are not known here), and
    /// the process that took the hold learns of the release at its next renewal, or keeps
    /// counting on a fixed lease that no longer holds.
    ///
    /// Errors: [`LockError::NotOwner`] when `owner` holds nothing (nothing is changed).
    ///
    /// # Cancel safety
    ///
    /// The release is sent on the first poll and carried out whether or not the future is
    /// dropped after that; dropping it loses only the report.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::{AcquireOptions, LockOwner, Released};
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let lock = client.lock("job:17")?;
    /// let guard = lock.acquire_with(AcquireOptions::new().owner(LockOwner::from_id(17))).await?;
    /// // ... in code that knows only the job's number ...
    /// assert_eq!(lock.unlock_as(LockOwner::from_id(17)).await?, Released::Unlocked);
    /// drop(guard); // released already: nothing more is sent
    /// # Ok(()) }
    /// ```
    pub async fn unlock_as(&self, owner: LockOwner) -> Result<Released, LockError> {
        self.client
            .ask_detached::<LockActor, _>(
                (self.kind, self.name.clone(), Some(owner)),
                ReleaseAs { owner },
            )
            .await?
    }

    /// Whether `owner` holds this lock now, wherever the hold was taken (Redisson's
    /// `isHeldByThread(threadId)`): the same as `hold_count(owner) > 0`, one read.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::LockOwner;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// if client.lock("job:17")?.is_held_by(LockOwner::from_id(17)).await? {
    ///     // job 17 is still running somewhere
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn is_held_by(&self, owner: LockOwner) -> Result<bool, LockError> {
        Ok(self.hold_count(owner).await? > 0)
    }
}
