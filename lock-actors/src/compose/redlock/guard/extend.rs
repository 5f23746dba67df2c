//! A fixed-lease RedLock hold's lease set again on every node it is held on (redsync's
//! `Extend`): valid on a quorum again, or counting on the earlier end.

use super::{lock_joined, RedLockGuard, Status};
use crate::compose::redlock::RedLock;
use crate::error::LockError;
use futures_util::future::join_all;
use std::time::{Duration, Instant};

impl RedLockGuard {
    /// Sets the lease of this hold to `lease` from now on every node it is held on, longer
    /// or shorter (redsync's `Extend`). Only for a hold taken with a fixed lease; one kept
    /// by the watchdog is refused with [`LockError::InvalidConfig`].
    ///
    /// Each node's hold is set as [`LockGuard::extend`](crate::LockGuard::extend) sets it
    /// (never below what another hold on that node's key needs), all at once, each waiting
    /// at most the node timeout. When a quorum confirmed it in time, the
    /// [`validity`](RedLockGuard::validity) becomes `lease − elapsed − drift`, counted from
    /// before the first request, as at acquisition; [`lost`](RedLockGuard::lost) fires
    /// then. Otherwise the hold keeps the earlier of its old validity and that one, and an
    /// error is returned: [`LockError::Lost`] when fewer than a quorum of nodes still hold
    /// it (the hold is lost), else the first node's error (or
    /// [`LockError::Unavailable`]: too few nodes confirmed; the hold goes on). A node whose grant comes in after the extend (see
    /// [`nodes_pending`](RedLockGuard::nodes_pending)) keeps the lease it was taken with.
    ///
    /// # Cancel safety
    ///
    /// Nothing is sent before the first poll; from then each node's update goes on whether
    /// or not the future is dropped. The validity moves to the new end only when the future
    /// completes: a dropped extend leaves the guard on its old validity (and on the new
    /// one straight away when it is the earlier).
    ///
    /// ```no_run
    /// # use actix_distributed_lock::AcquireOptions;
    /// # use std::time::Duration;
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = lock.acquire_with(AcquireOptions::new().lease(Duration::from_secs(10))).await?;
    /// // ... more work than planned ...
    /// guard.extend(Duration::from_secs(10)).await?;
    /// assert!(guard.validity() > Duration::from_secs(9));
    /// # Ok(()) }
    /// ```
    pub async fn extend(&self, lease: Duration) -> Result<(), LockError> {
        let name = || self.lock.name().to_string();
        if self.fixed_lease.is_none() {
            return Err(LockError::invalid_config(format!(
                "RedLock `{}` is held with the watchdog (taken without a lease): it lasts as \
                 long as its guard and needs no extending; extend holds taken with a fixed lease",
                self.lock.name()
            )));
        }
        match self.standing.borrow().status {
            Status::Held if !self.is_lost() => {}
            Status::Released => return Err(LockError::NotOwner { name: name() }),
            _ => return Err(LockError::Lost { name: name() }),
        }
        let started = Instant::now();
        let validity_until = started + lease.saturating_sub(RedLock::clock_drift(lease));
        // A shorter lease may reach some nodes: until a quorum confirms, the earlier end.
        self.move_validity(|old| old.min(validity_until));
        let bound = self.node_timeout;
        let (nodes, updates): (Vec<usize>, Vec<_>) = {
            let joined = lock_joined(&self.joined);
            self.members
                .iter()
                .chain(joined.iter())
                .map(|(index, guard)| {
                    let update = tokio::time::timeout(bound, guard.extend_request(lease));
                    (*index, update)
                })
                .unzip()
        };
        let reports = join_all(updates).await;
        let quorum = self.lock.quorum();
        let confirmed = reports.iter().filter(|r| matches!(r, Ok(Ok(())))).count();
        if confirmed >= quorum && Instant::now() < validity_until {
            self.move_validity(|_| validity_until);
            return Ok(());
        }
        // Too few confirmed in time. Lost when too few nodes still hold it (or no validity
        // is left); otherwise the hold goes on with its earlier validity.
        let gone = reports
            .iter()
            .filter(|r| matches!(r, Ok(Err(LockError::Lost { .. }))))
            .count();
        if reports.len() - gone < quorum || self.is_lost() {
            return Err(LockError::Lost { name: name() });
        }
        let first = nodes.into_iter().zip(reports).find_map(|(index, report)| {
            let node = || self.lock.member(index).node.to_string();
            match report {
                Ok(Ok(())) | Ok(Err(LockError::Lost { .. })) => None,
                Ok(Err(error)) => Some(error),
                Err(_) => Some(LockError::Unavailable {
                    node: node(),
                    reason: format!("no answer to the new lease within {bound:?}"),
                }),
            }
        });
        Err(first.unwrap_or_else(|| LockError::Unavailable {
            node: self.lock.name().to_string(),
            reason: format!(
                "the new lease reached {confirmed} nodes, fewer than the quorum of {quorum}; the \
                 hold keeps its earlier validity"
            ),
        }))
    }

    /// How long the lock is still surely held: its [`validity`](RedLockGuard::validity)
    /// (the same, under the name every guard has).
    ///
    /// ```no_run
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = lock.acquire().await?;
    /// assert_eq!(guard.remaining_lease().as_secs(), guard.validity().as_secs());
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self) -> Duration {
        self.validity()
    }

    /// Sets the validity's end to what `to` makes of the current one, while held (the
    /// keeper follows it).
    fn move_validity(&self, to: impl FnOnce(Instant) -> Instant) {
        self.standing.send_if_modified(|s| {
            let until = to(s.valid_until);
            let moved = s.status == Status::Held && until != s.valid_until;
            if moved {
                s.valid_until = until;
            }
            moved
        });
    }
}
