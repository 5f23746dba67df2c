//! A permit guard's fixed lease: how long its permits surely last, and setting it again
//! (Redisson's `updateLeaseTime`).

use super::PermitGuard;
use crate::error::LockError;
use crate::keys::LockName;
use crate::lease::control::LeaseControl;
use crate::lease::status::{HoldStatus, StatusReceiver};
use crate::reply::Detached;
use actix::Recipient;
use std::future::Future;
use std::time::Duration;

/// Set the lease of grant `grant`'s permits again, from now (sent by its guard).
pub(crate) struct UpdateGrantLease {
    pub(crate) grant: u64,
    pub(crate) lease: Duration,
}

impl actix::Message for UpdateGrantLease {
    type Result = Result<(), LockError>;
}

impl PermitGuard {
    /// Sets the lease of this guard's permits to `lease` from now, longer or shorter
    /// (Redisson's `updateLeaseTime(permitId, leaseTime, unit)`, for every permit of the
    /// guard). Only for permits taken with a fixed lease
    /// ([`PermitOptions::lease`](crate::PermitOptions::lease)). A permit belongs to one
    /// holder, so the new lease is the permits' whole lease: a Java client reading them
    /// (Redisson's `getLeaseTime`, a `tryRelease` after the old lease) sees the new one.
    ///
    /// [`lost`](PermitGuard::lost) then fires at the new end, less the clock drift
    /// allowance (1 % of the lease + 2 ms); never at the old end.
    ///
    /// Errors: [`LockError::Lost`] when a permit is no longer out (its lease ran out, or it
    /// was released by id): the guard is lost, and its other permits go back;
    /// [`LockError::NotOwner`] when the guard was released already;
    /// [`LockError::InvalidConfig`] for a zero (or over a century) `lease`, and for permits
    /// taken without a lease: those are renewed while their guard lives and have no lease
    /// to set; [`LockError::Unavailable`] when Redis did not answer (the permits then count
    /// on the earlier of their old end and the new one).
    ///
    /// # Cancel safety
    ///
    /// Nothing is sent before the first poll. From then on the update goes on whether or
    /// not the future is dropped, and until Redis confirms it the permits count on the
    /// earlier of their old end and the new one: a dropped update may leave Redis with the
    /// longer lease, never the guard believing a longer lease than Redis has.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::PermitOptions;
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let slots = client.expirable_semaphore("render-slots")?;
    /// let permit = slots.acquire_with(PermitOptions::new().lease(Duration::from_secs(10))).await?;
    /// // ... the render takes longer than planned ...
    /// permit.update_lease(Duration::from_secs(60)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn update_lease(&self, lease: Duration) -> Result<(), LockError> {
        update_grant(
            &self.status,
            &self.lease_actor,
            self.grant,
            &self.name,
            lease,
        )
        .await
    }

    /// How long this guard's permits are surely still out, from now, by this client's own
    /// reckoning: the time until [`lost`](PermitGuard::lost) fires unless something moves
    /// it. Zero once released or lost.
    ///
    /// With a fixed lease it runs to the lease's end less the clock drift allowance; without
    /// one, to the end of the lease of the earliest permit's last confirmed renewal, less
    /// the drift allowance. It is counted from each request's send time, so it never
    /// exceeds what Redis keeps (each permit's expiry in the semaphore's timeout zset).
    ///
    /// ```no_run
    /// # use actix_distributed_lock::PermitOptions;
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let slots = client.expirable_semaphore("render-slots")?;
    /// let permit = slots.acquire_with(PermitOptions::new().lease(Duration::from_secs(10))).await?;
    /// assert!(permit.remaining_lease() <= Duration::from_secs(10));
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self) -> Duration {
        self.status.remaining().unwrap_or_default()
    }

    /// [`remaining_lease`](PermitGuard::remaining_lease) and
    /// [`update_lease`](PermitGuard::update_lease) without the guard, for code that acts on
    /// a hold it does not own (`#[distributed_lock]`'s `current()`).
    pub(crate) fn lease_control(&self) -> LeaseControl {
        let (status, actor, name) = (
            self.status.clone(),
            self.lease_actor.clone(),
            self.name.clone(),
        );
        let remaining = self.status.clone();
        let grant = self.grant;
        LeaseControl::new(
            move || remaining.remaining().unwrap_or_default(),
            move |lease| Box::pin(update_grant(&status, &actor, grant, &name, lease)),
        )
    }
}

/// Sends the update of grant `grant`'s lease to `lease` from now, unless its status says
/// it has ended (lost, or released); the future does not borrow the guard.
fn update_grant(
    status: &StatusReceiver,
    actor: &Recipient<Detached<UpdateGrantLease>>,
    grant: u64,
    name: &LockName,
    lease: Duration,
) -> impl Future<Output = Result<(), LockError>> + Send + 'static {
    let sent = match status.get() {
        HoldStatus::Held => {
            // Carried out even if the caller drops the future after its first poll.
            let (update, answer) = Detached::new(actor, UpdateGrantLease { grant, lease });
            actor.do_send(update);
            Ok(answer)
        }
        HoldStatus::Lost => Err(LockError::Lost {
            name: name.to_string(),
        }),
        HoldStatus::Released => Err(LockError::NotOwner {
            name: name.to_string(),
        }),
    };
    async move { sent?.await? }
}
