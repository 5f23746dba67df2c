//! A lock guard's fixed lease: how long the hold surely lasts, and setting it again.

use super::{GuardLink, LockGuard, LockOwner, Reply};
use crate::error::LockError;
use crate::keys::LockName;
use crate::lease::control::LeaseControl;
use crate::lease::status::{HoldStatus, StatusReceiver};
use std::time::Duration;

impl LockGuard {
    /// Sets the remaining lease of this hold to `lease` from now: longer to buy time, or
    /// shorter to let the lock go sooner on its own. Only for a hold taken with a fixed
    /// lease ([`AcquireOptions::lease`](crate::AcquireOptions::lease)); every kind.
    ///
    /// The lock's key has one TTL for every hold on it, so this hold's new end is a claim,
    /// and the key keeps the longest claim: after the call it lives at least `lease` from
    /// now (owner-checked), and no shorter than any other hold on it needs, whether that is
    /// another hold of the same owner (a re-entry, which shares the owner's field), another
    /// reader, or a Java service's hold. A shorter `lease` therefore shortens this hold
    /// only: the key, and [`remaining_lease`](LockGuard::remaining_lease), may last longer
    /// for the sake of the others.
    ///
    /// [`lost`](LockGuard::lost) then fires at the new end (less the clock drift
    /// allowance, 1 % of the lease + 2 ms), or later if another hold of the same owner
    /// keeps the field longer; never at the old end.
    ///
    /// Errors: [`LockError::Lost`] when the hold is gone (its lease ran out, it was
    /// force-released, or Redis no longer has it); [`LockError::NotOwner`] when it was
    /// released already (by [`Release`](crate::messages::Release)); [`LockError::InvalidConfig`]
    /// for a zero (or over a century) `lease`, and for a hold the watchdog keeps: such a
    /// hold lasts as long as its guard and has no lease to set; [`LockError::Unavailable`]
    /// when Redis did not answer (the hold then counts on the earlier of its old end and
    /// the new one).
    ///
    /// # Cancel safety
    ///
    /// Nothing is sent before the first poll. From then on the update goes on whether or
    /// not the future is dropped, and until Redis confirms it the hold counts on the earlier
    /// of its old end and the new one: a dropped (or failed) extend may leave Redis with
    /// the longer lease, never the guard believing a longer lease than Redis has.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::AcquireOptions;
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client
    ///     .lock("report")?
    ///     .acquire_with(AcquireOptions::new().lease(Duration::from_secs(10)))
    ///     .await?;
    /// // ... the work takes longer than planned ...
    /// if guard.remaining_lease() < Duration::from_secs(5) {
    ///     guard.extend(Duration::from_secs(30)).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn extend(&self, lease: Duration) -> Result<(), LockError> {
        self.extend_request(lease).await
    }

    /// [`extend`](LockGuard::extend), sent now; the reply does not borrow the guard.
    pub(crate) fn extend_request(&self, lease: Duration) -> Reply<()> {
        extend_hold(
            &self.status,
            &*self.link,
            (self.owner, self.hold),
            &self.name,
            lease,
        )
    }

    /// How long this hold is surely still held, from now, by this client's own reckoning:
    /// the time until [`lost`](LockGuard::lost) fires unless something moves it. Zero once
    /// the hold is released or lost.
    ///
    /// With a fixed lease it runs to the end of the longest remaining lease of the owner's
    /// holds of this lock (the owner's re-entries share one field in Redis), less the clock
    /// drift allowance; with the watchdog, to the end of the lease of the last confirmed
    /// renewal, less the drift allowance (and moves forward at every renewal). It is
    /// counted from each request's send time, so it never exceeds the key's PTTL in Redis,
    /// which may be longer still (the drift allowance, other holders' leases), unless a
    /// Java client shortened the key meanwhile (found at the next renewal or release).
    ///
    /// ```no_run
    /// # use actix_distributed_lock::AcquireOptions;
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client
    ///     .lock("report")?
    ///     .acquire_with(AcquireOptions::new().lease(Duration::from_secs(10)))
    ///     .await?;
    /// assert!(guard.remaining_lease() <= Duration::from_secs(10));
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self) -> Duration {
        // Every hold is timed (by its fixed lease or by the watchdog) from its grant on.
        self.status.remaining().unwrap_or_default()
    }

    /// [`remaining_lease`](LockGuard::remaining_lease) and [`extend`](LockGuard::extend)
    /// without the guard, for code that acts on a hold it does not own
    /// (`#[distributed_lock]`'s `current()`).
    pub(crate) fn lease_control(&self) -> LeaseControl {
        let (status, link, name) = (self.status.clone(), self.link.clone(), self.name.clone());
        let remaining = self.status.clone();
        let hold = (self.owner, self.hold);
        LeaseControl::new(
            move || remaining.remaining().unwrap_or_default(),
            move |lease| extend_hold(&status, &*link, hold, &name, lease),
        )
    }
}

/// Sends the update of `hold`'s lease to `lease` from now, unless its status says it has
/// ended (lost, or released).
fn extend_hold(
    status: &StatusReceiver,
    link: &dyn GuardLink,
    (owner, hold): (LockOwner, u64),
    name: &LockName,
    lease: Duration,
) -> Reply<()> {
    let refused = match status.get() {
        HoldStatus::Held => return link.extend(owner, hold, lease),
        HoldStatus::Lost => LockError::Lost {
            name: name.to_string(),
        },
        HoldStatus::Released => LockError::NotOwner {
            name: name.to_string(),
        },
    };
    Box::pin(std::future::ready(Err(refused)))
}
