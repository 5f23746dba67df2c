//! The keeper of a RedLock hold: a task that adds the nodes whose grant came late, follows
//! the validity of the members (in the watchdog mode each member is a watchdog-leased hold
//! that its node's renewal service renews), and reports the hold lost once a quorum can no
//! longer be held or its validity ran out. It renews nothing itself.

use super::RedLock;
use crate::lock::{LockGuard, LockOwner, WatchedUntil};
use futures_util::future::join_all;
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};

/// How many times per renew interval the keeper reads the members' renewals: a node whose
/// renewals fail is noticed within about one interval and a quarter, as a round that
/// reached too few nodes was before.
const READS_PER_INTERVAL: u32 = 4;

/// How a hold is kept once granted.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Keeping {
    /// A fixed lease: nothing is renewed; lost when the validity runs out.
    Fixed,
    /// The watchdog mode: the members' nodes renew them every `interval`; a few times per
    /// interval the keeper reads until when each member's renewal was confirmed and
    /// whether its node's renewals are failing (a local read, each bounded by `timeout`),
    /// and moves the validity on.
    Renewed {
        interval: Duration,
        timeout: Duration,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    Held,
    Released,
    Lost,
}

/// What the guard and its keeper share.
#[derive(Debug, Clone, Copy)]
pub(super) struct Standing {
    pub(super) status: Status,
    pub(super) valid_until: Instant,
}

/// Member holds added by the keeper, shared with the guard that releases them.
pub(super) type Joined = Arc<Mutex<Vec<(usize, LockGuard)>>>;

pub(super) type LostMember = Pin<Box<dyn Future<Output = usize> + Send>>;
/// A node's late answer to the acquire: its index, and its hold if it granted in time.
pub(super) type JoiningMember = Pin<Box<dyn Future<Output = (usize, Option<LockGuard>)> + Send>>;

pub(super) fn lock_joined(joined: &Joined) -> std::sync::MutexGuard<'_, Vec<(usize, LockGuard)>> {
    joined
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Renews a RedLock hold on every node and decides when it is lost.
pub(super) struct Keeper {
    pub(super) lock: RedLock,
    pub(super) owner: LockOwner,
    pub(super) lease: Duration,
    pub(super) keeping: Keeping,
    /// Members (by index) not known to be lost.
    pub(super) alive: Vec<usize>,
    pub(super) standing: Arc<watch::Sender<Standing>>,
    pub(super) joined: Joined,
    /// Late answers still awaited (see `RedLockGuard::nodes_pending`).
    pub(super) pending: Arc<AtomicUsize>,
}

impl Drop for Keeper {
    fn drop(&mut self) {
        // However the keeper ends, the late answers it was waiting for are dropped with it
        // (a grant among them releases itself): none is awaited any more.
        self.pending.store(0, Ordering::Release);
    }
}

impl Keeper {
    pub(super) async fn run(
        mut self,
        losts: Vec<LostMember>,
        joining: FuturesUnordered<JoiningMember>,
        mut stopped: oneshot::Receiver<()>,
    ) {
        // Whatever ends this task (the client's actor thread stopping included) ends the hold;
        // dropping `joining` then makes a grant still to come release itself.
        let _lost_on_exit = LostOnExit(self.standing.clone());
        let mut losts: FuturesUnordered<LostMember> = losts.into_iter().collect();
        let mut joining = joining;
        let quorum = self.lock.quorum();
        // A fixed lease's validity moves when its guard extends it.
        let mut moves = self.standing.subscribe();
        let mut next = match self.keeping {
            Keeping::Fixed => self.standing.borrow().valid_until,
            Keeping::Renewed { interval, .. } => (Instant::now() + interval / READS_PER_INTERVAL)
                .min(self.standing.borrow().valid_until),
        };
        loop {
            tokio::select! {
                biased;
                _ = &mut stopped => return,
                Some(index) = losts.next() => {
                    self.alive.retain(|alive| *alive != index);
                    if self.alive.len() < quorum {
                        return self.lose("members were found gone on too many nodes");
                    }
                }
                Some((index, answer)) = joining.next() => {
                    if let Some(lost) = answer.and_then(|guard| self.join(index, guard)) {
                        losts.push(lost);
                    }
                    // After the join, so that a count of 0 means `nodes_held` is final.
                    self.pending.fetch_sub(1, Ordering::Release);
                }
                Ok(()) = moves.changed(), if matches!(self.keeping, Keeping::Fixed) => {
                    next = self.standing.borrow().valid_until;
                }
                () = tokio::time::sleep_until(next.into()) => match self.keeping {
                    Keeping::Fixed if Instant::now() < self.standing.borrow().valid_until => {
                        next = self.standing.borrow().valid_until;
                    }
                    Keeping::Fixed => return self.lose("its validity ran out"),
                    Keeping::Renewed { interval, timeout } => {
                        let now = Instant::now();
                        let mut ends: Vec<Instant> =
                            self.member_ends(timeout).await.into_iter().flatten().collect();
                        if ends.len() < quorum {
                            return self.lose("renewals reached fewer than a quorum of nodes");
                        }
                        // The quorum-th latest confirmed end: until then a quorum holds.
                        ends.sort_unstable_by(|a, b| b.cmp(a));
                        let drift = RedLock::clock_drift(self.lease);
                        let valid_until = ends[quorum - 1].checked_sub(drift).unwrap_or(now);
                        if valid_until <= now {
                            return self.lose("its validity ran out");
                        }
                        self.standing.send_if_modified(|s| {
                            let later = s.status == Status::Held && valid_until > s.valid_until;
                            if later {
                                s.valid_until = valid_until;
                            }
                            later
                        });
                        let until = self.standing.borrow().valid_until;
                        next = (now + interval / READS_PER_INTERVAL).min(until);
                    }
                },
            }
        }
    }

    /// Adds a node that granted after the quorum to the hold, unless the hold has ended
    /// (then dropping its guard releases it). Returns the watch for the node's loss.
    fn join(&mut self, index: usize, guard: LockGuard) -> Option<LostMember> {
        let mut joined = lock_joined(&self.joined);
        // Checked under the lock the unlock takes after marking the hold released: a
        // hold is either added before the unlock collects them, or released here.
        if self.standing.borrow().status != Status::Held {
            return None;
        }
        let lost = guard.lost().map(move |()| index).boxed();
        joined.push((index, guard));
        self.alive.push(index);
        Some(lost)
    }

    /// Reads, for every live member, until when its renewal was confirmed (as its node's
    /// renewal service confirmed it): `Some(end)` for a member whose node's renewals go
    /// through, `None` for one whose node's renewals fail or wait longer than `timeout`
    /// for an answer, or that is no longer watched. A local read, bounded by `timeout`:
    /// nothing is sent to Redis.
    async fn member_ends(&self, timeout: Duration) -> Vec<Option<Instant>> {
        let owner = self.owner;
        let reads = self.alive.iter().map(|&index| {
            let lock = &self.lock.member(index).lock;
            let failing = lock
                .client()
                .actors()
                .map_or(true, |actors| actors.renewal_failing(timeout));
            let actor = lock.actor();
            async move {
                if failing {
                    return None;
                }
                let read = actor.ok()?.send(WatchedUntil { owner });
                tokio::time::timeout(timeout, read).await.ok()?.ok()?
            }
        });
        join_all(reads).await
    }

    fn lose(&self, why: &str) {
        let changed = self.standing.send_if_modified(|s| {
            let held = s.status == Status::Held;
            if held {
                s.status = Status::Lost;
            }
            held
        });
        if changed {
            tracing::warn!(
                lock = self.lock.name(),
                owner = self.owner.id(),
                why,
                nodes_alive = self.alive.len(),
                quorum = self.lock.quorum(),
                "RedLock lost"
            );
        }
    }
}

/// Marks a hold that is still `Held` as lost when the keeper ends.
struct LostOnExit(Arc<watch::Sender<Standing>>);

impl Drop for LostOnExit {
    fn drop(&mut self) {
        self.0.send_if_modified(|s| {
            let held = s.status == Status::Held;
            if held {
                s.status = Status::Lost;
            }
            held
        });
    }
}
