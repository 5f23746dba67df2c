//! Setting the lease of any permit of a permit-expirable semaphore by its id, whoever holds
//! it (Redisson's `updateLeaseTime(permitId, leaseTime, unit)`).

use super::PermitExpirableSemaphore;
use crate::error::LockError;
use crate::semaphore::{Kind, SemaphoreActor, UpdatePermitLease};
use std::time::Duration;

impl PermitExpirableSemaphore {
    /// Sets the lease of the permit `permit_id` to `lease` from now, whoever took it (a
    /// guard elsewhere, another process, a Java service); `false` when no such permit is
    /// out (never was, released, or expired: an expired one goes back to the count first,
    /// as with Redisson). A permit taken without a lease by Redisson (which never expires)
    /// gets `lease` as its expiry, as Redisson's `updateLeaseTime` gives it.
    ///
    /// A permit held by a guard of this process: one with a fixed lease that now ends
    /// sooner makes its guard end sooner too (a guard lasts as long as its earliest
    /// permit); a later end is Redis's only (the guard keeps counting on its own lease,
    /// see [`PermitGuard::update_lease`](crate::PermitGuard::update_lease) for a guard's
    /// own). One renewed by its guard is refused with [`LockError::InvalidConfig`]: its
    /// lease is the guard's to keep.
    ///
    /// Errors: [`LockError::InvalidConfig`] for a zero (or over a century) `lease`.
    ///
    /// # Cancel safety
    ///
    /// The update goes to the semaphore's actor on the first poll and is carried out
    /// whether or not the future is dropped after that; dropping it loses only the answer.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let id = "0123456789abcdef0123456789abcdef"; // from a guard, maybe elsewhere
    /// let out = client
    ///     .expirable_semaphore("render-slots")?
    ///     .update_lease(id, Duration::from_secs(60))
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn update_lease(&self, permit_id: &str, lease: Duration) -> Result<bool, LockError> {
        let request = UpdatePermitLease {
            permit_id: permit_id.to_string(),
            lease,
        };
        self.client
            .ask_detached::<SemaphoreActor, _>((Kind::Expirable, self.name.clone()), request)
            .await?
    }
}
