//! Where a spin lock starts: the client hands out [`Lock`] handles of [`LockKind::Spin`].

use super::Lock;
use crate::client::LockClient;
use crate::config::SpinBackoff;
use crate::error::LockError;
use crate::lock::LockKind;

impl LockClient {
    /// A handle to the spin lock `name` (Redisson's `RSpinLock`), whose waiters back off by
    /// Redisson's default ([`SpinBackoff::exponential`]: 1 ms doubling to 128 ms, with a
    /// little jitter).
    ///
    /// The lock in Redis is the reentrant lock's hash (`uuid:owner` → hold count, the
    /// watchdog or a fixed lease, re-entry), so it excludes Redisson's `RLock` and
    /// `RSpinLock` holders of the same name and this crate's [`lock`](LockClient::lock).
    /// What differs is pub/sub: its unlock publishes nothing and its waiters never
    /// subscribe; the head waiter of each process tries again after each pause of its
    /// backoff (or as the holder's lease runs out, if sooner). Use it where pub/sub is
    /// unavailable (an ACL user without channel rights) or costly (broadcast publishes
    /// across a large cluster); elsewhere [`lock`](LockClient::lock) hands over sooner
    /// and sends fewer commands while waiting.
    ///
    /// A waiter that gives up or is cancelled writes nothing, so it leaves nothing behind.
    /// Waiters of the other kinds on the same name (an `RLock` waiter) are not woken by its
    /// unlock: they try again as their timed fallback fires.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.spin_lock("report:daily")?.acquire_timeout(Duration::from_secs(5)).await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn spin_lock(&self, name: &str) -> Result<Lock, LockError> {
        self.spin_lock_with(name, SpinBackoff::default())
    }

    /// A handle to the spin lock `name` whose waiters back off by `backoff` (see
    /// [`spin_lock`](LockClient::spin_lock)). Refuses a backoff that
    /// [`SpinBackoff::check`] refuses, with [`LockError::InvalidConfig`] naming the setting.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::SpinBackoff;
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let backoff = SpinBackoff::exponential()
    ///     .initial_delay(Duration::from_millis(10))
    ///     .max_delay(Duration::from_millis(200));
    /// let lock = client.spin_lock_with("report:daily", backoff)?;
    /// let refused = client.spin_lock_with("x", SpinBackoff::constant(Duration::ZERO));
    /// assert!(refused.is_err());
    /// # Ok(()) }
    /// ```
    pub fn spin_lock_with(&self, name: &str, backoff: SpinBackoff) -> Result<Lock, LockError> {
        backoff.check()?;
        let name = self.name(name)?;
        Ok(Lock::new(self.clone(), LockKind::Spin, name, false).backing_off(backoff))
    }
}
