//! An operator's forced release, through each kind's own force-unlock, so waiters get the
//! message they expect and the holders learn of the loss; done only while the lock is held
//! by exactly the holders the operator saw, checked in the same script.

use super::model::{ForceUnlocked, InspectedKind, LockInfo};
use crate::client::LockClient;
use crate::error::LockError;
use crate::handle::Lock;
use crate::keys::LockName;

/// Releases `before` (lock `name` as just read) with its kind's force-unlock, if its
/// holders are still exactly `shown` (holder fields).
pub(super) async fn force_unlock(
    client: &LockClient,
    name: &str,
    before: LockInfo,
    shown: &[String],
) -> Result<ForceUnlocked, LockError> {
    let key = client.name(name)?;
    let forced = |lock: Lock| {
        let shown = shown.to_vec();
        async move {
            lock.force_unlock_if(shown)
                .await?
                .ok_or_else(|| LockError::HolderChanged {
                    name: name.to_string(),
                })
        }
    };
    let (was_held, published) = match before.kind {
        InspectedKind::Reentrant | InspectedKind::Fenced => {
            let held = forced(client.lock(name)?).await?;
            (held, Some((key.unlock_channel(), "0")))
        }
        InspectedKind::Fast => {
            let held = forced(client.fast_lock(name)?).await?;
            (held, Some((key.unlock_channel(), "0")))
        }
        InspectedKind::Fair => {
            let held = forced(client.fair_lock(name)?).await?;
            // The next waiter is woken on its own channel.
            let next = before.waiters.first();
            (held, next.map(|w| (key.fair_waiter_channel(&w.field), "0")))
        }
        InspectedKind::ReadWrite => {
            let rw = client.read_write_lock(name)?;
            if before.mode.as_deref() == Some("write") {
                (
                    forced(rw.write().clone()).await?,
                    Some((key.rwlock_channel(), "1")),
                )
            } else {
                (
                    forced(rw.read().clone()).await?,
                    Some((key.rwlock_channel(), "0")),
                )
            }
        }
        InspectedKind::Latch => {
            return Err(LockError::invalid_config(format!(
                "`{name}` is a count-down latch: nobody holds it; count it down \
                 (count_down) or delete it to open it"
            )))
        }
        InspectedKind::Semaphore | InspectedKind::ExpirableSemaphore => {
            return Err(LockError::invalid_config(format!(
                "`{name}` is a {}: its permits have no holder to force out; add permits \
                 (add_permits) instead, or let an expirable permit's lease run out",
                before.kind.as_str().replace('_', " ")
            )))
        }
    };
    let mut removed_keys = Vec::new();
    if was_held {
        removed_keys.push(before.key.clone());
        removed_keys.extend(remove_read_timeouts(client, &key, &before).await?);
    }
    Ok(ForceUnlocked {
        before,
        removed_keys,
        published: published
            .filter(|_| was_held)
            .map(|(channel, message)| (channel, message.to_string())),
    })
}

/// Deletes the timeout keys of a forced read-write lock's read holds (they would expire on
/// their own; nothing is left behind) and returns the ones that existed.
async fn remove_read_timeouts(
    client: &LockClient,
    key: &LockName,
    before: &LockInfo,
) -> Result<Vec<String>, LockError> {
    let keys: Vec<String> = before
        .holders
        .iter()
        .filter(|h| before.kind == InspectedKind::ReadWrite && !h.write)
        .flat_map(|h| {
            let prefix = key.read_timeout_prefix(&h.field);
            (1..=h.count).map(move |n| format!("{prefix}:{n}"))
        })
        .collect();
    if keys.is_empty() {
        return Ok(keys);
    }
    let mut pipe = redis::pipe();
    for k in &keys {
        pipe.cmd("DEL").arg(k);
    }
    let node = client.node()?;
    let deleted: Vec<i64> = node.commands.clone().query(pipe, key.clone()).await?;
    Ok(keys
        .into_iter()
        .zip(deleted)
        .filter(|(_, n)| *n > 0)
        .map(|(k, _)| k)
        .collect())
}
