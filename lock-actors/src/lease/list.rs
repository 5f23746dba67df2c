//! The lease list: leases that must be kept alive (watchdog-leased lock holds, lease-less
//! permits), each with the instant it surely ends. Actors add and remove entries directly;
//! the client's renewal service (`crate::lease::renewal`) batches and sends the renewals
//! and reads here which entries to renew and which ran out. What an entry is (which script
//! renews it, whom to tell of its loss) is the [`Watched`] type's business.

use crate::keys::LockName;
use crate::lease::ends::renewed_for;
use crate::node::Commands;
use crate::script::ScriptCall;
use actix::prelude::*;
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// One lease on a lease list: renewed by one argument (and its keys) of a batched script.
///
/// The list keeps an entry's `valid_until` and batch mark inside the entry itself (through
/// the accessors below), not in a wrapper: a wrapper would pad every entry of a list that
/// can hold many thousands of holds (the watchdog bench counts the bytes of each).
pub(crate) trait Watched: Send + 'static {
    /// Entries of one group go in one script call (on a cluster, of one slot).
    type Group: Eq + Hash;

    /// This entry's batch group; `by_slot`: on a cluster, where a call's keys share a slot.
    fn group(&self, by_slot: bool) -> Self::Group;
    /// The name whose slot a call starting with this entry goes to.
    fn name(&self) -> &LockName;
    /// A renewal call to `lease_ms` for this entry's group, with no entry added yet.
    fn begin(&self, lease_ms: u64, commands: &Commands) -> ScriptCall;
    /// Adds this entry to a call of its group; `client_id` is the client's uuid.
    fn add(&self, call: &mut ScriptCall, client_id: &str);
    /// Past this instant the lease may have run out in Redis: no renewal was confirmed.
    /// It is the send time of the last confirmed renewal (or of the acquire) plus the
    /// lease, so it never lies after the key's expiry in Redis.
    fn valid_until(&mut self) -> &mut Instant;
    /// In a batch that is queued, on the way or waiting to retry: a new round leaves it
    /// to that batch.
    fn in_batch(&mut self) -> &mut bool;
    /// The entry `id` was removed as lost: tell its holder.
    fn lost(self, id: u64, loss: Loss);
    /// A renewal to `lease` confirmed this entry until `valid_until`.
    fn renewed(&mut self, valid_until: Instant, lease: Duration) {
        let _ = lease;
        *self.valid_until() = valid_until;
    }
    /// How long a renewal to `lease` whose script answered `answer` for this entry keeps
    /// it, counted from the renewal's send time; `None`: the lease is gone.
    fn renewed_for(answer: i64, lease: Duration) -> Option<Duration> {
        (answer == 1).then_some(lease)
    }
}

/// The entries one renewal service keeps alive. Actors add and remove entries directly, so
/// a release stops renewal at once, not after a message round trip.
pub(crate) struct WatchList<E> {
    entries: Mutex<Entries<E>>,
    next_id: AtomicU64,
    /// The client's uuid: owner fields are written out when a batch is built, not kept
    /// per entry (this list can hold many thousands of holds).
    client_id: Arc<str>,
    /// The renewal service, told when a new entry ends before its deadline timer.
    service: OnceLock<Recipient<Rearm>>,
}

struct Entries<E> {
    holds: HashMap<u64, E>,
    /// When the service's deadline timer fires (`None`: not armed). An entry that ends
    /// earlier must re-arm it.
    armed: Option<Instant>,
}

impl<E: Watched> WatchList<E> {
    pub(crate) fn new(client_id: Arc<str>) -> Self {
        WatchList {
            entries: Mutex::new(Entries {
                holds: HashMap::new(),
                armed: None,
            }),
            next_id: AtomicU64::new(0),
            client_id,
            service: OnceLock::new(),
        }
    }

    /// Starts renewing `entry` (reported lost at its `valid_until` unless a renewal
    /// confirms it first); returns its id.
    pub(crate) fn watch(&self, mut entry: E) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let valid_until = *entry.valid_until();
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
            if let Some(service) = self.service.get() {
                service.do_send(Rearm);
            }
        }
        id
    }

    /// Stops renewing; no renewal is sent for this entry after this returns.
    pub(crate) fn unregister(&self, id: u64) {
        self.lock().holds.remove(&id);
    }

    /// Until when entry `id`'s lease surely lasts (see [`Watched::valid_until`]); `None`
    /// once it is no longer watched.
    pub(crate) fn valid_until(&self, id: u64) -> Option<Instant> {
        self.lock()
            .holds
            .get_mut(&id)
            .map(|entry| *entry.valid_until())
    }

    /// How many entries are being kept alive.
    pub(crate) fn len(&self) -> usize {
        self.lock().holds.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries<E>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What the renewal service asks of a lease list, whatever its entries are.
pub(crate) trait Renewable: Send + Sync {
    /// Hands the renewal service's address over: told when a new entry ends before the
    /// deadline timer is armed.
    fn attach(&self, service: Recipient<Rearm>);
    /// A renewal round: every entry not already in a batch, marked as in one, grouped
    /// (by slot when `by_slot`) into batches of at most `batch` entries.
    fn round(&self, by_slot: bool, batch: usize) -> Vec<Vec<u64>>;
    /// The renewal call for the entries `ids` still registered: the call, the ids it
    /// renews (in argument order) and the name that picks the slot; `None` when none is
    /// left.
    fn renewal(
        &self,
        ids: Vec<u64>,
        lease: Duration,
        commands: &Commands,
    ) -> Option<(ScriptCall, Vec<u64>, LockName)>;
    /// Applies a batch's answers for `ids` sent at `sent`: a renewed entry is valid for
    /// what [`Watched::renewed_for`] makes of its answer from `sent` (the key's TTL is the
    /// truth: never later than it) and free for the next round. Returns the ids whose
    /// lease was gone.
    fn confirm(&self, ids: &[u64], renewed: &[i64], sent: Instant, lease: Duration) -> Vec<u64>;
    /// The entries whose lease may have run out unconfirmed by `now`; the deadline timer
    /// is counted as unarmed from here until [`arm_next`](Self::arm_next).
    fn due(&self, now: Instant) -> Vec<u64>;
    /// The earliest `valid_until` of the entries, noted as the instant the deadline timer
    /// is armed at.
    fn arm_next(&self) -> Option<Instant>;
    /// Removes entry `id` and tells its holder it is lost.
    fn report_lost(&self, id: u64, loss: Loss);
}

impl<E: Watched> Renewable for WatchList<E> {
    fn attach(&self, service: Recipient<Rearm>) {
        let _ = self.service.set(service);
    }

    fn round(&self, by_slot: bool, batch: usize) -> Vec<Vec<u64>> {
        let mut batches = Vec::new();
        let mut entries = self.lock();
        let mut open: HashMap<E::Group, Vec<u64>> = HashMap::new();
        for (id, entry) in entries.holds.iter_mut() {
            if std::mem::replace(entry.in_batch(), true) {
                continue;
            }
            let ids = open.entry(entry.group(by_slot)).or_default();
            ids.push(*id);
            if ids.len() == batch {
                batches.push(std::mem::take(ids));
            }
        }
        batches.extend(open.into_values().filter(|ids| !ids.is_empty()));
        batches
    }

    fn renewal(
        &self,
        ids: Vec<u64>,
        lease: Duration,
        commands: &Commands,
    ) -> Option<(ScriptCall, Vec<u64>, LockName)> {
        let lease_ms = lease.as_millis().max(1) as u64;
        let mut call: Option<(ScriptCall, LockName)> = None;
        let mut sent_ids = Vec::with_capacity(ids.len());
        let entries = self.lock();
        for id in ids {
            // Released (or lost) since the batch was made: nothing to renew.
            let Some(entry) = entries.holds.get(&id) else {
                continue;
            };
            let (invocation, _) =
                call.get_or_insert_with(|| (entry.begin(lease_ms, commands), entry.name().clone()));
            entry.add(invocation, &self.client_id);
            sent_ids.push(id);
        }
        call.map(|(invocation, first)| (invocation, sent_ids, first))
    }

    fn confirm(&self, ids: &[u64], renewed: &[i64], sent: Instant, lease: Duration) -> Vec<u64> {
        let mut gone = Vec::new();
        let mut entries = self.lock();
        // A short answer leaves the rest unconfirmed: they count as gone.
        for (id, answer) in ids.iter().zip(renewed.iter().chain(std::iter::repeat(&0))) {
            match E::renewed_for(*answer, lease) {
                Some(valid_for) => {
                    if let Some(entry) = entries.holds.get_mut(id) {
                        entry.renewed(sent + valid_for, lease);
                        *entry.in_batch() = false;
                    }
                }
                None => gone.push(*id),
            }
        }
        gone
    }

    fn due(&self, now: Instant) -> Vec<u64> {
        let mut entries = self.lock();
        entries.armed = None;
        entries
            .holds
            .iter_mut()
            .filter_map(|(id, entry)| (*entry.valid_until() <= now).then_some(*id))
            .collect()
    }

    fn arm_next(&self) -> Option<Instant> {
        let mut entries = self.lock();
        let next = entries
            .holds
            .values_mut()
            .map(|entry| *entry.valid_until())
            .min();
        entries.armed = next;
        next
    }

    fn report_lost(&self, id: u64, loss: Loss) {
        let Some(entry) = self.lock().holds.remove(&id) else {
            return;
        };
        entry.lost(id, loss);
    }
}

/// How an entry was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loss {
    /// A renewal found it gone (or expired) in Redis.
    Gone,
    /// No renewal was confirmed within its lease.
    Unconfirmed,
}

impl Loss {
    /// What happened, for the log.
    pub(crate) fn why(self) -> &'static str {
        match self {
            Loss::Gone => "renewal found the lease gone from Redis",
            Loss::Unconfirmed => "no renewal confirmed within the lease",
        }
    }
}

/// An entry registered with an earlier end than the deadline timer's: arm it again.
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
    // The renewal and its WAIT on one server, even if a followed primary moves meanwhile.
    let commands = commands.pinned();
    let renewed = commands
        .clone()
        .eval::<Vec<i64>>(invocation, first.clone())
        .await?;
    if renewed
        .iter()
        .any(|&answer| renewed_for(answer, Duration::MAX).is_some())
    {
        commands.confirm_replicated(first).await?;
    }
    Ok(renewed)
}
