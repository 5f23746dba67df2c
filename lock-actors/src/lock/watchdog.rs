//! Keeps watchdog-leased locks alive: every renew interval, one batched script per node
//! renews every registered hold; a hold found gone is reported lost to its lock actor.

use super::actor::HoldLost;
use super::kind::LockKind;
use super::{LockActor, LockOwner};
use crate::keys::LockName;
use crate::node::Commands;
use actix::prelude::*;
use actix::WeakAddr;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The first retry after a failed renewal round.
const RETRY_FIRST: Duration = Duration::from_millis(25);

/// Holds renewed per script call; keeps one call from blocking Redis for long.
const BATCH: usize = 512;

/// The holds the watchdog keeps alive. Lock actors add and remove entries directly, so a
/// release stops renewal at once, not after a message round trip.
#[derive(Default)]
pub(crate) struct WatchRegistry {
    entries: Mutex<HashMap<u64, WatchEntry>>,
    next_id: AtomicU64,
}

struct WatchEntry {
    kind: LockKind,
    name: LockName,
    field: String,
    owner: LockOwner,
    actor: WeakAddr<LockActor>,
    /// Past this instant the lease may have run out in Redis: no renewal was confirmed.
    valid_until: Instant,
}

impl WatchRegistry {
    /// Starts renewing `field` of `name`; `valid_until` is when its current lease surely ends.
    pub(crate) fn register(
        &self,
        kind: LockKind,
        name: LockName,
        field: String,
        owner: LockOwner,
        actor: WeakAddr<LockActor>,
        valid_until: Instant,
    ) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let entry = WatchEntry {
            kind,
            name,
            field,
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

/// The renewal actor of one node.
pub(crate) struct Watchdog {
    registry: std::sync::Arc<WatchRegistry>,
    commands: Commands,
    lease: Duration,
    interval: Duration,
    batches_in_flight: usize,
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
            batches_in_flight: 0,
            retry_in: None,
        }
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        let now = Instant::now();
        let lease_ms = self.lease.as_millis().max(1) as u64;
        let mut expired = Vec::new();
        // Invocations are built under the lock, one batch at a time, copying each name and
        // field straight into the command: no per-tick clone of the whole watch list.
        let mut batches = Vec::new();
        {
            let entries = self.registry.lock();
            // One open batch per kind: each kind renews with its own script.
            let mut open: HashMap<
                LockKind,
                (redis::ScriptInvocation<'static>, Vec<u64>, LockName),
            > = HashMap::new();
            for (id, entry) in entries.iter() {
                if entry.valid_until <= now {
                    expired.push(*id);
                    continue;
                }
                if self.batches_in_flight > 0 {
                    continue; // the previous round has not answered; do not pile up
                }
                let (invocation, ids, _) = open.entry(entry.kind).or_insert_with(|| {
                    let mut invocation = entry.kind.renew_script().prepare_invoke();
                    invocation.arg(lease_ms);
                    (invocation, Vec::with_capacity(BATCH), entry.name.clone())
                });
                entry
                    .kind
                    .add_renewal(invocation, &entry.name, &entry.field);
                ids.push(*id);
                if ids.len() == BATCH {
                    batches.extend(open.remove(&entry.kind));
                }
            }
            batches.extend(open.into_values());
        }
        for id in expired {
            self.registry
                .report_lost(id, "no renewal confirmed within the lease");
        }
        for (invocation, ids, first) in batches {
            let sent = Instant::now();
            self.batches_in_flight += 1;
            let renewing = self.commands.clone().eval::<Vec<i64>>(invocation, first);
            ctx.spawn(renewing.into_actor(self).map(move |result, act, ctx| {
                act.batches_in_flight -= 1;
                match result {
                    Ok(renewed) => {
                        act.retry_in = None;
                        act.apply(&ids, &renewed, sent);
                    }
                    Err(err) => {
                        let retry_in = act
                            .retry_in
                            .map_or(RETRY_FIRST, |last| (last * 2).min(act.interval));
                        act.retry_in = Some(retry_in);
                        tracing::warn!(node = act.commands.label(), holds = ids.len(),
                            error = %err, ?retry_in, "lock renewal failed; retrying");
                        if act.batches_in_flight == 0 {
                            ctx.run_later(retry_in, |act, ctx| act.tick(ctx));
                        }
                    }
                }
            }));
        }
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
