//! How a semaphore handle reaches the actor of its semaphore (through the client's
//! registry), once more if that actor had just stopped.

use super::{Kind, SemaphoreActor};
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
