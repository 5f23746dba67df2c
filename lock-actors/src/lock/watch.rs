//! The watch list: the holds of watchdog-leased locks that must be kept alive, each with
//! the instant its lease surely ends. Lock actors add and remove entries directly; the
//! client's renewal service (`crate::client::renewal`) batches and sends the renewals and
//! reads here which holds to renew and which ran out.

use super::kind::LockKind;
use super::LockOwner;
use crate::keys::LockName;
use crate::node::Commands;
use crate::script::ScriptCall;
use actix::prelude::*;
use actix::WeakAddr;
use redis::cluster_routing::Slot;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The holds the watchdog keeps alive. Lock actors add and remove entries directly, so a
/// release stops renewal at once, not after a message round trip.
///
/// `A` is the lock actor told of a loss. The list holds its address weakly and as it is
/// (no boxed recipient per entry: the list can hold many thousands of holds, and the
/// watchdog bench counts the bytes of each).
pub(crate) struct WatchRegistry<A: Actor> {
    entries: Mutex<Entries<A>>,
    next_id: AtomicU64,
    /// The client's uuid: owner fields are written out when a batch is built, not kept
    /// per entry (this list can hold many thousands of holds).
    client_id: Arc<str>,
    /// The watchdog actor, told when a new hold ends before its deadline timer.
    watchdog: OnceLock<Recipient<Rearm>>,
}

struct Entries<A: Actor> {
    holds: HashMap<u64, WatchEntry<A>>,
    /// When the watchdog's deadline timer fires (`None`: not armed). An entry that ends
    /// earlier must re-arm it.
    armed: Option<Instant>,
}

impl<A: Actor> Default for Entries<A> {
    fn default() -> Self {
        Entries {
            holds: HashMap::new(),
            armed: None,
        }
    }
}

struct WatchEntry<A: Actor> {
    kind: LockKind,
    name: LockName,
    owner: LockOwner,
    actor: WeakAddr<A>,
    /// Past this instant the lease may have run out in Redis: no renewal was confirmed.
    /// It is the send time of the last confirmed renewal (or of the acquire) plus the
    /// lease, so it never lies after the key's expiry in Redis.
    valid_until: Instant,
    /// In a batch that is queued, on the way or waiting to retry: a new round leaves it
    /// to that batch.
    in_batch: bool,
}

impl<A> WatchRegistry<A>
where
    A: Actor + Handler<HoldLost>,
    A::Context: actix::dev::ToEnvelope<A, HoldLost>,
{
    pub(crate) fn new(client_id: Arc<str>) -> Self {
        WatchRegistry {
            entries: Mutex::default(),
            next_id: AtomicU64::new(0),
            client_id,
            watchdog: OnceLock::new(),
        }
    }

    /// Starts renewing `owner`'s hold of `name`; `valid_until` is when its current lease
    /// surely ends (the hold is reported lost then unless a renewal confirms it first).
    pub(crate) fn register(
        &self,
        kind: LockKind,
        name: LockName,
        owner: LockOwner,
        actor: WeakAddr<A>,
        valid_until: Instant,
    ) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let entry = WatchEntry {
            kind,
            name,
            owner,
            actor,
            valid_until,
            in_batch: false,
        };
        let rearm = {
            let mut entries = self.lock();
            entries.holds.insert(id, entry);
            let earlier = entries.armed.is_none_or(|armed| valid_until < armed);
            if earlier {
                entries.armed = Some(valid_until);
            }
            earlier
        };
        if rearm {
            if let Some(watchdog) = self.watchdog.get() {
                watchdog.do_send(Rearm);
            }
        }
        id
    }

    /// Stops renewing; no renewal is sent for this entry after this returns.
    pub(crate) fn unregister(&self, id: u64) {
        self.lock().holds.remove(&id);
    }

    /// How many holds are being kept alive.
    pub(crate) fn len(&self) -> usize {
        self.lock().holds.len()
    }

    /// Hands the renewal service's address over: told when a new hold ends before the
    /// deadline timer is armed.
    pub(crate) fn attach(&self, service: Recipient<Rearm>) {
        let _ = self.watchdog.set(service);
    }

    /// A renewal round: every hold not already in a batch, marked as in one, grouped by
    /// kind (and by slot when `by_slot`) into batches of at most `batch` holds.
    pub(crate) fn round(&self, by_slot: bool, batch: usize) -> Vec<(LockKind, Vec<u64>)> {
        let mut batches = Vec::new();
        let mut entries = self.lock();
        let mut open: HashMap<(LockKind, Option<Slot>), Vec<u64>> = HashMap::new();
        for (id, entry) in entries.holds.iter_mut() {
            if entry.in_batch {
                continue;
            }
            entry.in_batch = true;
            let slot = by_slot.then(|| Slot::for_key(entry.name.as_str()));
            let ids = open.entry((entry.kind, slot)).or_default();
            ids.push(*id);
            if ids.len() == batch {
                batches.push((entry.kind, std::mem::take(ids)));
            }
        }
        batches.extend(
            open.into_iter()
                .filter(|(_, ids)| !ids.is_empty())
                .map(|((kind, _), ids)| (kind, ids)),
        );
        batches
    }

    /// The renewal script call for the holds `ids` of `kind` still registered: the call,
    /// the ids it renews (in argument order) and the first lock's name (which picks the
    /// slot); `None` when none is left.
    pub(crate) fn renewal(
        &self,
        kind: LockKind,
        ids: Vec<u64>,
        lease: Duration,
    ) -> Option<(ScriptCall, Vec<u64>, LockName)> {
        let lease_ms = lease.as_millis().max(1) as u64;
        let mut invocation = ScriptCall::new(kind.renew_script());
        invocation.arg(lease_ms);
        let mut sent_ids = Vec::with_capacity(ids.len());
        let mut first = None;
        let entries = self.lock();
        let client_id = &self.client_id;
        for id in ids {
            // Released (or lost) since the batch was made: nothing to renew.
            let Some(entry) = entries.holds.get(&id) else {
                continue;
            };
            let field = kind.field(format!("{client_id}:{}", entry.owner.id()));
            kind.add_renewal(&mut invocation, &entry.name, &field);
            first.get_or_insert_with(|| entry.name.clone());
            sent_ids.push(id);
        }
        first.map(|first| (invocation, sent_ids, first))
    }

    /// Applies a batch's answers (`1`: renewed) for `ids` sent at `sent`: a renewed hold
    /// is valid until `sent + lease` and free for the next round. Returns the ids whose
    /// lock was gone.
    pub(crate) fn confirm(
        &self,
        ids: &[u64],
        renewed: &[i64],
        sent: Instant,
        lease: Duration,
    ) -> Vec<u64> {
        let mut gone = Vec::new();
        let mut entries = self.lock();
        for (id, ok) in ids.iter().zip(renewed) {
            if *ok == 1 {
                if let Some(entry) = entries.holds.get_mut(id) {
                    entry.valid_until = entry.valid_until.max(sent + lease);
                    entry.in_batch = false;
                }
            } else {
                gone.push(*id);
            }
        }
        gone
    }

    /// The holds whose lease may have run out unconfirmed by `now`; the deadline timer is
    /// counted as unarmed from here until [`arm_next`](Self::arm_next).
    pub(crate) fn due(&self, now: Instant) -> Vec<u64> {
        let mut entries = self.lock();
        entries.armed = None;
        entries
            .holds
            .iter()
            .filter(|(_, entry)| entry.valid_until <= now)
            .map(|(id, _)| *id)
            .collect()
    }

    /// The earliest `valid_until` of the registered holds, noted as the instant the
    /// deadline timer is armed at.
    pub(crate) fn arm_next(&self) -> Option<Instant> {
        let mut entries = self.lock();
        let next = entries.holds.values().map(|entry| entry.valid_until).min();
        entries.armed = next;
        next
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries<A>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Removes entry `id` and tells its actor the hold is lost.
    pub(crate) fn report_lost(&self, id: u64, why: &str) {
        let Some(entry) = self.lock().holds.remove(&id) else {
            return;
        };
        tracing::warn!(lock = %entry.name, owner = entry.owner.id(), why, "lock lost");
        if let Some(actor) = entry.actor.upgrade() {
            actor.do_send(HoldLost {
                owner: entry.owner,
                watch_id: id,
            });
        }
    }
}

/// The renewal service found `owner`'s hold gone, or no renewal confirmed it within its
/// lease (sent to the lock actor that registered it).
pub(crate) struct HoldLost {
    pub(crate) owner: LockOwner,
    pub(crate) watch_id: u64,
}

impl Message for HoldLost {
    type Result = ();
}

/// A hold registered with an earlier end than the deadline timer's: arm it again.
pub(crate) struct Rearm;

impl Message for Rearm {
    type Result = ();
}

/// Runs a renewal batch (every key in `first`'s slot); with replica-synced acquisition on,
/// it counts only once enough replicas confirmed it (else the batch failed).
pub(crate) async fn renew_confirmed(
    commands: Commands,
    invocation: ScriptCall,
    first: LockName,
) -> Result<Vec<i64>, crate::error::LockError> {
    let renewed = commands
        .clone()
        .eval::<Vec<i64>>(invocation, first.clone())
        .await?;
    if renewed.contains(&1) {
        commands.confirm_replicated(first).await?;
    }
    Ok(renewed)
}
