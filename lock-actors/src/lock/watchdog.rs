//! Keeps watchdog-leased locks alive: every renew interval, batched scripts (512 holds
//! each) renew every registered hold, one batch at a time on a single primary and every
//! slot's batch side by side on a cluster; a batch that fails retries on its own with
//! backoff while the others go on. A timer on the nearest `valid_until` reports a hold
//! lost to its lock actor the moment no confirmed renewal covers it any more (less the
//! clock drift allowance), so the holder hears it no later than Redis lets the key go. On
//! a Redis Cluster a batch holds locks of one hash slot only (a script's keys must share a
//! slot), so batches are grouped by kind and slot.

use super::actor::HoldLost;
use super::kind::LockKind;
use super::{LockActor, LockOwner};
use crate::config::clock_drift;
use crate::keys::LockName;
use crate::node::Commands;
use crate::script::ScriptCall;
use actix::prelude::*;
use actix::WeakAddr;
use redis::cluster_routing::Slot;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The first retry after a failed renewal batch.
const RETRY_FIRST: Duration = Duration::from_millis(25);

/// Holds renewed per script call; keeps one call from blocking Redis for long.
const BATCH: usize = 512;

/// The holds the watchdog keeps alive. Lock actors add and remove entries directly, so a
/// release stops renewal at once, not after a message round trip.
pub(crate) struct WatchRegistry {
    entries: Mutex<Entries>,
    next_id: AtomicU64,
    /// The client's uuid: owner fields are written out when a batch is built, not kept
    /// per entry (this list can hold many thousands of holds).
    client_id: Arc<str>,
    /// The watchdog actor, told when a new hold ends before its deadline timer.
    watchdog: OnceLock<Recipient<Rearm>>,
}

#[derive(Default)]
struct Entries {
    holds: HashMap<u64, WatchEntry>,
    /// When the watchdog's deadline timer fires (`None`: not armed). An entry that ends
    /// earlier must re-arm it.
    armed: Option<Instant>,
}

struct WatchEntry {
    kind: LockKind,
    name: LockName,
    owner: LockOwner,
    actor: WeakAddr<LockActor>,
    /// Past this instant the lease may have run out in Redis: no renewal was confirmed.
    /// It is the send time of the last confirmed renewal (or of the acquire) plus the
    /// lease, so it never lies after the key's expiry in Redis.
    valid_until: Instant,
    /// In a batch that is queued, on the way or waiting to retry: a new round leaves it
    /// to that batch.
    in_batch: bool,
}

impl WatchRegistry {
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

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Removes entry `id` and tells its actor the hold is lost.
    fn report_lost(&self, id: u64, why: &str) {
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

/// Holds of one kind (and slot) renewed in one script call.
struct Batch {
    kind: LockKind,
    ids: Vec<u64>,
    /// The wait before sending it again if this try fails.
    retry_in: Duration,
}

/// The renewal actor of one node.
pub(crate) struct Watchdog {
    registry: std::sync::Arc<WatchRegistry>,
    commands: Commands,
    lease: Duration,
    interval: Duration,
    /// Batches waiting for their turn to be sent, with the backoff of their next retry.
    queue: VecDeque<Batch>,
    /// Batches on the way.
    in_flight: usize,
    /// How many batches may be on the way at once. One primary (a single server or a
    /// Sentinel-managed one): one at a time, so only one batch's command is ever built and
    /// the memory of a large watch list stays flat. A cluster: every slot's batch at
    /// once, so a stalled primary holds back only its own batches.
    max_in_flight: usize,
    /// The deadline timer: reports holds whose `valid_until` has come.
    deadline: Option<SpawnHandle>,
}

impl Watchdog {
    pub(crate) fn new(
        registry: std::sync::Arc<WatchRegistry>,
        commands: Commands,
        lease: Duration,
        interval: Duration,
    ) -> Self {
        let commands_is_cluster = commands.is_cluster();
        Watchdog {
            registry,
            commands,
            lease,
            interval,
            queue: VecDeque::new(),
            in_flight: 0,
            max_in_flight: if commands_is_cluster { usize::MAX } else { 1 },
            deadline: None,
        }
    }

    /// Starts a round: every hold not already in a batch, grouped by kind (and slot on a
    /// cluster) into batches, queued to go out (see `max_in_flight`).
    fn tick(&mut self, ctx: &mut Context<Self>) {
        let mut batches = Vec::new();
        {
            let mut entries = self.registry.lock();
            let by_slot = self.commands.is_cluster();
            let mut open: HashMap<(LockKind, Option<Slot>), Vec<u64>> = HashMap::new();
            for (id, entry) in entries.holds.iter_mut() {
                if entry.in_batch {
                    continue;
                }
                entry.in_batch = true;
                let slot = by_slot.then(|| Slot::for_key(entry.name.as_str()));
                let ids = open.entry((entry.kind, slot)).or_default();
                ids.push(*id);
                if ids.len() == BATCH {
                    batches.push((entry.kind, std::mem::take(ids)));
                }
            }
            batches.extend(
                open.into_iter()
                    .filter(|(_, ids)| !ids.is_empty())
                    .map(|((kind, _), ids)| (kind, ids)),
            );
        }
        self.queue
            .extend(batches.into_iter().map(|(kind, ids)| Batch {
                kind,
                ids,
                retry_in: RETRY_FIRST,
            }));
        self.pump(ctx);
    }

    /// Sends queued batches while fewer than `max_in_flight` are on the way.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        while self.in_flight < self.max_in_flight {
            let Some(batch) = self.queue.pop_front() else {
                return;
            };
            self.send_batch(batch, ctx);
        }
    }

    /// Renews the holds of `batch` still registered in one script call; on failure,
    /// queues the same batch again after its backoff (doubling up to the interval) while
    /// any of them is still registered, and the other batches go on meanwhile. Holds whose
    /// lease runs out are reported by the deadline timer, not here.
    fn send_batch(&mut self, batch: Batch, ctx: &mut Context<Self>) {
        let Batch {
            kind,
            ids,
            retry_in,
        } = batch;
        let lease_ms = self.lease.as_millis().max(1) as u64;
        let mut invocation = ScriptCall::new(kind.renew_script());
        invocation.arg(lease_ms);
        let mut sent_ids = Vec::with_capacity(ids.len());
        let mut first = None;
        {
            let entries = self.registry.lock();
            let client_id = &self.registry.client_id;
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
        }
        let Some(first) = first else {
            return;
        };
        let sent = Instant::now();
        self.in_flight += 1;
        let renewing = renew_confirmed(self.commands.clone(), invocation, first);
        ctx.spawn(
            renewing
                .into_actor(self)
                .map(move |result, act, ctx| {
                    act.in_flight -= 1;
                    match result {
                        Ok(renewed) => act.apply(&sent_ids, &renewed, sent),
                        Err(err) => {
                            tracing::warn!(node = act.commands.label(), holds = sent_ids.len(),
                                error = %err, ?retry_in, "lock renewal failed; retrying this batch");
                            let again = Batch {
                                kind,
                                ids: sent_ids,
                                retry_in: (retry_in * 2).min(act.interval),
                            };
                            ctx.run_later(retry_in, move |act, ctx| {
                                act.queue.push_front(again);
                                act.pump(ctx);
                            });
                        }
                    }
                    act.pump(ctx);
                }),
        );
    }

    fn apply(&mut self, ids: &[u64], renewed: &[i64], sent: Instant) {
        let mut gone = Vec::new();
        {
            let mut entries = self.registry.lock();
            for (id, ok) in ids.iter().zip(renewed) {
                if *ok == 1 {
                    if let Some(entry) = entries.holds.get_mut(id) {
                        entry.valid_until = entry.valid_until.max(sent + self.lease);
                        entry.in_batch = false;
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

    /// Reports every hold whose lease may have run out unconfirmed (counting the clock
    /// drift allowance, so the holder hears of it before Redis lets the key go), then arms
    /// the timer for the next such instant.
    fn expire(&mut self, ctx: &mut Context<Self>) {
        self.deadline = None;
        let now = Instant::now() + clock_drift(self.lease);
        let expired: Vec<u64> = {
            let mut entries = self.registry.lock();
            // Whatever is armed below; until then a new hold must not rely on this timer.
            entries.armed = None;
            entries
                .holds
                .iter()
                .filter(|(_, entry)| entry.valid_until <= now)
                .map(|(id, _)| *id)
                .collect()
        };
        for id in expired {
            self.registry
                .report_lost(id, "no renewal confirmed within the lease");
        }
        self.arm(ctx);
    }

    /// Arms the deadline timer at the earliest `valid_until` of the registered holds.
    fn arm(&mut self, ctx: &mut Context<Self>) {
        let next = {
            let mut entries = self.registry.lock();
            let next = entries.holds.values().map(|entry| entry.valid_until).min();
            entries.armed = next;
            next
        };
        if let Some(old) = self.deadline.take() {
            ctx.cancel_future(old);
        }
        if let Some(next) = next {
            let wait = next
                .saturating_duration_since(Instant::now())
                .saturating_sub(clock_drift(self.lease));
            self.deadline = Some(ctx.run_later(wait, |act, ctx| act.expire(ctx)));
        }
    }
}

impl Handler<Rearm> for Watchdog {
    type Result = ();

    fn handle(&mut self, _: Rearm, ctx: &mut Context<Self>) {
        self.arm(ctx);
    }
}

impl Actor for Watchdog {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let _ = self.registry.watchdog.set(ctx.address().recipient());
        ctx.run_interval(self.interval, |act, ctx| act.tick(ctx));
        self.arm(ctx);
    }
}
