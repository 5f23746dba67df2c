//! The renewal service of one node: keeps watchdog-leased locks and lease-less permits
//! alive. Every renew interval, batched scripts (512 entries each) renew every entry on
//! the node's lease lists (one of lock holds, one of permits), one
//! batch at a time on a single primary and every slot's batch side by side on a cluster;
//! a batch that fails retries on its own with backoff while the others go on. A timer on
//! the nearest `valid_until` reports a hold lost to its lock actor the moment no
//! confirmed renewal covers it any more (less the clock drift allowance), so the holder
//! hears it no later than Redis lets the key go. A batch holds entries of one group: lock
//! holds of one kind (and on a Redis Cluster, where a script's keys must share a slot, of
//! one hash slot), or permits of one semaphore.

use crate::config::clock_drift;
use crate::lease::list::renew_confirmed;
use crate::lease::list::{Loss, Rearm, Renewable};
use crate::node::Commands;
use crate::telemetry::{self, RenewalRound};
use actix::prelude::*;
use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The first retry after a failed renewal batch.
const RETRY_FIRST: Duration = Duration::from_millis(25);

/// The waits between tries of a failing batch: from [`RETRY_FIRST`], doubling, with up to
/// as much again of random jitter (so clients that lost the same node do not retry in
/// step), never more than one renew `interval` apart.
fn retry_backoff(interval: Duration) -> ExponentialBackoff {
    ExponentialBuilder::new()
        .with_min_delay(RETRY_FIRST.min(interval / 2))
        .with_max_delay(interval / 2)
        .with_jitter()
        .without_max_times()
        .build()
}

/// Holds renewed per script call; keeps one call from blocking Redis for long.
const BATCH: usize = 512;

/// Entries of one group of one lease list renewed in one script call.
struct Batch {
    /// Which of the service's lease lists.
    list: usize,
    ids: Vec<u64>,
    /// Set once it has failed (it then counts in `failing` until it goes through or
    /// empties): the waits before its next tries.
    retry: Option<ExponentialBackoff>,
    /// The round it was first sent in (`None` for a retry: retries are outside rounds).
    round: Option<u64>,
}

/// The renewal actor of one node.
pub(crate) struct RenewalService {
    /// The lease lists it keeps alive (lock holds, permits); a batch names one by index.
    lists: Vec<Arc<dyn Renewable>>,
    commands: Commands,
    lease: Duration,
    interval: Duration,
    /// Batches waiting for their turn to be sent, with the backoff of their next retry.
    queue: VecDeque<Batch>,
    /// Batches on the way.
    in_flight: usize,
    /// How many batches may be on the way at once. One primary (a single server or a
    /// Sentinel-managed one): one at a time, so only one batch's command is ever built and
    /// the memory of a large lease list stays flat. A cluster: every slot's batch at
    /// once, so a stalled primary holds back only its own batches.
    max_in_flight: usize,
    /// The deadline timer: reports holds whose `valid_until` has come.
    deadline: Option<SpawnHandle>,
    /// How its renewals are going, shared with the client.
    health: Arc<RenewalHealth>,
    /// Rounds whose batches have not all answered yet (their spans and times), by number.
    rounds: BTreeMap<u64, RenewalRound>,
    next_round: u64,
}

/// How one node's renewals are going, shared with the client: a RedLock counts a member
/// whose node's renewals fail, or hang, as not renewed.
#[derive(Default)]
pub(crate) struct RenewalHealth {
    /// Batches that failed and have not gone through since.
    failing: AtomicUsize,
    /// The send times of the batches on the way, by batch number (oldest first).
    on_the_way: Mutex<BTreeMap<u64, Instant>>,
    next: AtomicU64,
}

impl RenewalHealth {
    /// Whether renewals to the node fail now, or one has waited longer than `patience`
    /// for its answer (a stopped node may not fail a request before the connection's own
    /// timeout; the request is not abandoned, only counted as late).
    pub(crate) fn failing(&self, patience: Duration) -> bool {
        if self.failing.load(Ordering::Relaxed) > 0 {
            return true;
        }
        let on_the_way = self.on_the_way.lock().unwrap_or_else(|p| p.into_inner());
        on_the_way
            .first_key_value()
            .is_some_and(|(_, sent)| sent.elapsed() > patience)
    }

    fn sent(&self, at: Instant) -> u64 {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let mut on_the_way = self.on_the_way.lock().unwrap_or_else(|p| p.into_inner());
        on_the_way.insert(number, at);
        number
    }

    fn answered(&self, number: u64) {
        let mut on_the_way = self.on_the_way.lock().unwrap_or_else(|p| p.into_inner());
        on_the_way.remove(&number);
    }
}

impl RenewalService {
    pub(crate) fn new(
        lists: Vec<Arc<dyn Renewable>>,
        commands: Commands,
        lease: Duration,
        interval: Duration,
        health: Arc<RenewalHealth>,
    ) -> Self {
        let commands_is_cluster = commands.is_cluster();
        RenewalService {
            lists,
            commands,
            lease,
            interval,
            queue: VecDeque::new(),
            in_flight: 0,
            max_in_flight: if commands_is_cluster { usize::MAX } else { 1 },
            deadline: None,
            health,
            rounds: BTreeMap::new(),
            next_round: 0,
        }
    }

    /// Starts a round: every entry not already in a batch, grouped (by slot on a cluster)
    /// into batches, queued to go out (see `max_in_flight`).
    fn tick(&mut self, ctx: &mut Context<Self>) {
        let by_slot = self.commands.is_cluster();
        let (round, queued) = (self.next_round, self.queue.len());
        for (list, renewable) in self.lists.iter().enumerate() {
            let batches = renewable.round(by_slot, BATCH);
            self.queue.extend(batches.into_iter().map(|ids| Batch {
                list,
                ids,
                retry: None,
                round: Some(round),
            }));
        }
        let batches = self.queue.len() - queued;
        if batches > 0 {
            self.next_round += 1;
            let started = RenewalRound::start(self.commands.label(), batches);
            self.rounds.insert(round, started);
        }
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
    /// queues the same batch again after its backoff (see [`retry_backoff`]) while
    /// any of them is still registered, and the other batches go on meanwhile. Holds whose
    /// lease runs out are reported by the deadline timer, not here.
    fn send_batch(&mut self, batch: Batch, ctx: &mut Context<Self>) {
        let Batch {
            list,
            ids,
            retry,
            round,
        } = batch;
        let failed = retry.is_some();
        let renewable = self.lists[list].clone();
        let Some((invocation, sent_ids, first)) =
            renewable.renewal(ids, self.lease, &self.commands)
        else {
            if failed {
                self.health.failing.fetch_sub(1, Ordering::Relaxed);
            }
            self.round_answered(round, |r| r.renewed(0, 0));
            return;
        };
        let sent = Instant::now();
        self.in_flight += 1;
        let on_the_way = self.health.sent(sent);
        let renewing = renew_confirmed(self.commands.clone(), invocation, first);
        ctx.spawn(renewing.into_actor(self).map(move |result, act, ctx| {
            act.in_flight -= 1;
            act.health.answered(on_the_way);
            match result {
                Ok(renewed) => {
                    if failed {
                        act.health.failing.fetch_sub(1, Ordering::Relaxed);
                    }
                    let lease = act.lease;
                    let lost = renewable.confirm(&sent_ids, &renewed, sent, lease);
                    let (renewed, gone) = (sent_ids.len().saturating_sub(lost.len()), lost.len());
                    for id in lost {
                        renewable.report_lost(id, Loss::Gone);
                    }
                    act.round_answered(round, |r| r.renewed(renewed, gone));
                }
                Err(err) => {
                    if !failed {
                        act.health.failing.fetch_add(1, Ordering::Relaxed);
                    }
                    telemetry::renewal_failed();
                    act.round_answered(round, RenewalRound::failed);
                    let mut retry = retry.unwrap_or_else(|| retry_backoff(act.interval));
                    let retry_in = retry.next().unwrap_or(act.interval);
                    tracing::warn!(node = act.commands.label(), holds = sent_ids.len(),
                                error = %err, ?retry_in, "renewal failed; retrying this batch");
                    let again = Batch {
                        list,
                        ids: sent_ids,
                        retry: Some(retry),
                        round: None,
                    };
                    ctx.run_later(retry_in, move |act, ctx| {
                        act.queue.push_front(again);
                        act.pump(ctx);
                    });
                }
            }
            act.pump(ctx);
        }));
    }

    /// A batch of `round` answered (`answer` notes how): the round ends with its last batch.
    fn round_answered(
        &mut self,
        round: Option<u64>,
        answer: impl FnOnce(&mut RenewalRound) -> bool,
    ) {
        let Some(number) = round else {
            return;
        };
        if self.rounds.get_mut(&number).is_some_and(answer) {
            self.rounds.remove(&number);
        }
    }

    /// Reports every hold whose lease may have run out unconfirmed (counting the clock
    /// drift allowance, so the holder hears of it before Redis lets the key go), then arms
    /// the timer for the next such instant.
    fn expire(&mut self, ctx: &mut Context<Self>) {
        self.deadline = None;
        let now = Instant::now() + clock_drift(self.lease);
        // Whatever is armed below; until then a new hold must not rely on this timer.
        for renewable in &self.lists {
            for id in renewable.due(now) {
                renewable.report_lost(id, Loss::Unconfirmed);
            }
        }
        self.arm(ctx);
    }

    /// Arms the deadline timer at the earliest `valid_until` of the registered entries.
    fn arm(&mut self, ctx: &mut Context<Self>) {
        // Every list notes the instant it is armed at: the earliest of all.
        let next = self.lists.iter().filter_map(|list| list.arm_next()).min();
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

impl Handler<Rearm> for RenewalService {
    type Result = ();

    fn handle(&mut self, _: Rearm, ctx: &mut Context<Self>) {
        self.arm(ctx);
    }
}

impl Actor for RenewalService {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        for list in &self.lists {
            list.attach(ctx.address().recipient());
        }
        ctx.run_interval(self.interval, |act, ctx| act.tick(ctx));
        self.arm(ctx);
    }
}
