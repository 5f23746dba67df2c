//! Keeps watchdog-leased locks alive: every renew interval, batched scripts (one after the
//! other, 512 holds each) renew every registered hold; a hold found gone is reported lost
//! to its lock actor. On a Redis Cluster a batch holds locks of one hash slot only (a
//! script's keys must share a slot), so batches are grouped by kind and slot.

use super::actor::HoldLost;
use super::kind::LockKind;
use super::{LockActor, LockOwner};
use crate::keys::LockName;
use crate::node::Commands;
use crate::script::ScriptCall;
use actix::prelude::*;
use actix::WeakAddr;
use redis::cluster_routing::Slot;
use std::collections::HashMap;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The first retry after a failed renewal round.
const RETRY_FIRST: Duration = Duration::from_millis(25);

/// Holds renewed per script call; keeps one call from blocking Redis for long.
const BATCH: usize = 512;

/// The holds the watchdog keeps alive. Lock actors add and remove entries directly, so a
/// release stops renewal at once, not after a message round trip.
pub(crate) struct WatchRegistry {
    entries: Mutex<HashMap<u64, WatchEntry>>,
    next_id: AtomicU64,
    /// The client's uuid: owner fields are written out when a batch is built, not kept
    /// per entry (this list can hold many thousands of holds).
    client_id: Arc<str>,
}

struct WatchEntry {
    kind: LockKind,
    name: LockName,
    owner: LockOwner,
    actor: WeakAddr<LockActor>,
    /// Past this instant the lease may have run out in Redis: no renewal was confirmed.
    valid_until: Instant,
}

impl WatchRegistry {
    pub(crate) fn new(client_id: Arc<str>) -> Self {
        WatchRegistry {
            entries: Mutex::default(),
            next_id: AtomicU64::new(0),
            client_id,
        }
    }

    /// Starts renewing `owner`'s hold of `name`; `valid_until` is when its current lease
    /// surely ends.
    pub(crate) fn register(
        &self,
        kind: LockKind,
        name: LockName,
        owner: LockOwner,
        actor: WeakAddr<LockActor>,
        valid_until: Instant,
    ) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let entry = WatchEntry {
            kind,
            name,
            owner,
            actor,
            valid_until,
        };
        self.lock().insert(id, entry);
        id
    }

    /// Stops renewing; no renewal is sent for this entry after this returns.
    pub(crate) fn unregister(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// How many holds are being kept alive.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, WatchEntry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Removes entry `id` and tells its actor the hold is lost.
    fn report_lost(&self, id: u64, why: &str) {
        let Some(entry) = self.lock().remove(&id) else {
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

/// The renewal actor of one node.
pub(crate) struct Watchdog {
    registry: std::sync::Arc<WatchRegistry>,
    commands: Commands,
    lease: Duration,
    interval: Duration,
    /// The rest of this round: holds to renew, by kind (and slot on a cluster), one batch
    /// each.
    round: VecDeque<(LockKind, Vec<u64>)>,
    /// A batch is on the way; the next tick does not start another round meanwhile.
    in_flight: bool,
    /// After a failed round, the next one comes this soon (doubling up to the interval):
    /// a connection that dropped while idle fails once, then works.
    retry_in: Option<Duration>,
}

impl Watchdog {
    pub(crate) fn new(
        registry: std::sync::Arc<WatchRegistry>,
        commands: Commands,
        lease: Duration,
        interval: Duration,
    ) -> Self {
        Watchdog {
            registry,
            commands,
            lease,
            interval,
            round: VecDeque::new(),
            in_flight: false,
            retry_in: None,
        }
    }

    /// Reports holds whose lease may have run out unconfirmed, and starts a round over the
    /// others (unless the last round is still going).
    fn tick(&mut self, ctx: &mut Context<Self>) {
        let now = Instant::now();
        let mut expired = Vec::new();
        let start = !self.in_flight && self.round.is_empty();
        {
            let entries = self.registry.lock();
            let by_slot = self.commands.is_cluster();
            let mut open: HashMap<(LockKind, Option<Slot>), Vec<u64>> = HashMap::new();
            for (id, entry) in entries.iter() {
                if entry.valid_until <= now {
                    expired.push(*id);
                } else if start {
                    let slot = by_slot.then(|| Slot::for_key(entry.name.as_str()));
                    let ids = open.entry((entry.kind, slot)).or_default();
                    ids.push(*id);
                    if ids.len() == BATCH {
                        let full = std::mem::take(ids);
                        self.round.push_back((entry.kind, full));
                    }
                }
            }
            self.round.extend(
                open.into_iter()
                    .filter(|(_, ids)| !ids.is_empty())
                    .map(|((kind, _), ids)| (kind, ids)),
            );
        }
        for id in expired {
            self.registry
                .report_lost(id, "no renewal confirmed within the lease");
        }
        self.next_batch(ctx);
    }

    /// Sends the round's next batch. Batches go one after the other: only one batch's
    /// command is ever built, which keeps the memory of a large watch list flat.
    fn next_batch(&mut self, ctx: &mut Context<Self>) {
        if self.in_flight {
            return;
        }
        let Some((kind, ids)) = self.round.pop_front() else {
            return;
        };
        let lease_ms = self.lease.as_millis().max(1) as u64;
        let mut invocation = ScriptCall::new(kind.renew_script());
        invocation.arg(lease_ms);
        let mut sent_ids = Vec::with_capacity(ids.len());
        let mut first = None;
        {
            let entries = self.registry.lock();
            let client_id = &self.registry.client_id;
            for id in ids {
                // Released since the round started: nothing to renew.
                let Some(entry) = entries.get(&id) else {
                    continue;
                };
                let field = kind.field(format!("{client_id}:{}", entry.owner.id()));
                kind.add_renewal(&mut invocation, &entry.name, &field);
                first.get_or_insert_with(|| entry.name.clone());
                sent_ids.push(id);
            }
        }
        let Some(first) = first else {
            return self.next_batch(ctx);
        };
        let sent = Instant::now();
        self.in_flight = true;
        let renewing = renew_confirmed(self.commands.clone(), invocation, first);
        ctx.spawn(renewing.into_actor(self).map(move |result, act, ctx| {
            act.in_flight = false;
            match result {
                Ok(renewed) => {
                    act.retry_in = None;
                    act.apply(&sent_ids, &renewed, sent);
                    act.next_batch(ctx);
                }
                Err(err) => {
                    act.round.clear();
                    let retry_in = act
                        .retry_in
                        .map_or(RETRY_FIRST, |last| (last * 2).min(act.interval));
                    act.retry_in = Some(retry_in);
                    tracing::warn!(node = act.commands.label(), holds = sent_ids.len(),
                        error = %err, ?retry_in, "lock renewal failed; retrying");
                    ctx.run_later(retry_in, |act, ctx| act.tick(ctx));
                }
            }
        }));
    }

    fn apply(&mut self, ids: &[u64], renewed: &[i64], sent: Instant) {
        let mut gone = Vec::new();
        {
            let mut entries = self.registry.lock();
            for (id, ok) in ids.iter().zip(renewed) {
                if *ok == 1 {
                    if let Some(entry) = entries.get_mut(id) {
                        entry.valid_until = sent + self.lease;
                    }
                } else {
                    gone.push(*id);
                }
            }
        }
        for id in gone {
            self.registry
                .report_lost(id, "renewal found the lock gone from Redis");
        }
    }
}

impl Actor for Watchdog {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(self.interval, |act, ctx| act.tick(ctx));
    }
}
