//! Where semaphores start: the client's constructors of semaphore handles, and how a
//! handle reaches the actor of its semaphore.

use super::{Kind, PermitExpirableSemaphore, Semaphore, SemaphoreActor};
use crate::client::LockClient;
use crate::error::LockError;
use crate::keys::LockName;
use actix::dev::ToEnvelope;
use actix::{Addr, Handler, MailboxError, Message};

/// The live actor of semaphore `name` (started if there is none).
pub(crate) fn actor(
    client: &LockClient,
    kind: Kind,
    name: &LockName,
) -> Result<Addr<SemaphoreActor>, LockError> {
    Ok(client.actors()?.semaphore_actor(kind, name))
}

/// Sends `msg` to the actor of semaphore `name`, once more to a fresh actor if that one
/// had just stopped.
pub(crate) async fn ask<M>(
    client: &LockClient,
    kind: Kind,
    name: &LockName,
    msg: M,
) -> Result<M::Result, LockError>
where
    M: Message + Clone + Send + 'static,
    M::Result: Send,
    SemaphoreActor: Handler<M>,
    <SemaphoreActor as actix::Actor>::Context: ToEnvelope<SemaphoreActor, M>,
{
    for _ in 0..2 {
        let actors = client.actors()?;
        let actor = actors.semaphore_actor(kind, name);
        match actor.send(msg.clone()).await {
            Ok(reply) => return Ok(reply),
            Err(MailboxError::Closed) => actors.evict_semaphore_actor(kind, name, &actor),
            Err(MailboxError::Timeout) => break,
        }
    }
    Err(LockError::Shutdown)
}

impl LockClient {
    /// A handle to the semaphore `name` (Redisson's `RSemaphore`). Checks the name; talks to
    /// nobody yet. Set its permits once with [`Semaphore::try_set_permits`].
    ///
    /// Guarantees: at most the set number of permits are out at once while Redis keeps its
    /// data. Not guaranteed: permits of a holder that dies are never returned (use
    /// [`expirable_semaphore`](LockClient::expirable_semaphore) for that); a Redis failover
    /// can lose or duplicate permits.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let pool = client.semaphore("db-connections")?;
    /// pool.try_set_permits(10).await?;
    /// let permits = pool.acquire(1).await?;
    /// // ... use one connection ...
    /// permits.release().await?;
    /// assert!(client.semaphore("").is_err());
    /// # Ok(()) }
    /// ```
    pub fn semaphore(&self, name: &str) -> Result<Semaphore, LockError> {
        let name = LockName::new(name, self.config().max_name_len)?;
        Ok(Semaphore::new(self.clone(), name))
    }

    /// A handle to the permit-expirable semaphore `name` (Redisson's
    /// `RPermitExpirableSemaphore`): each permit has an id and a lease, so a dead holder's
    /// permits come back on their own. Checks the name; talks to nobody yet.
    ///
    /// Guarantees: at most the set number of permits are out at once while Redis keeps its
    /// data and holders' leases hold; a permit whose holder stopped renewing returns within
    /// its lease (on the next acquire). Not guaranteed: a holder paused longer than its lease
    /// keeps working after its permit went to someone else (watch
    /// [`PermitGuard::lost`]); a Redis failover can lose or duplicate permits.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let workers = client.expirable_semaphore("render-slots")?;
    /// workers.try_set_permits(4).await?;
    /// let permit = workers.acquire().await?; // renewed while `permit` lives
    /// println!("holding permit {}", permit.permit_id());
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn expirable_semaphore(&self, name: &str) -> Result<PermitExpirableSemaphore, LockError> {
        let name = LockName::new(name, self.config().max_name_len)?;
        Ok(PermitExpirableSemaphore::new(self.clone(), name))
    }

    /// How many semaphore actors this client runs now (one per semaphore name and kind in
    /// use; an idle one stops on its own).
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) {
    /// println!("{} semaphores in use", client.active_semaphores());
    /// # }
    /// ```
    pub fn active_semaphores(&self) -> usize {
        self.actors().map_or(0, |actors| actors.semaphore_actors())
    }
}
