//! The keeper of a RedLock hold: a task that renews the hold on every node (in the
//! watchdog mode), adds the nodes whose grant came late, and reports the hold lost once a
//! quorum can no longer be held or its validity ran out.

use super::RedLock;
use crate::lock::{LockGuard, LockOwner};
use futures_util::future::join_all;
use futures_util::stream::{FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};

/// How a hold is kept once granted.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Keeping {
    /// A fixed lease: nothing is renewed; lost when the validity runs out.
    Fixed,
    /// The watchdog mode: renew every node every `interval`, each bounded by `timeout`.
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
        let mut next = match self.keeping {
            Keeping::Fixed => self.standing.borrow().valid_until,
            Keeping::Renewed { interval, .. } => Instant::now() + interval,
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
                () = tokio::time::sleep_until(next.into()) => match self.keeping {
                    Keeping::Fixed => return self.lose("its validity ran out"),
                    Keeping::Renewed { interval, timeout } => {
                        let round = Instant::now();
                        // The validity ends on time even while a round waits for a node.
                        let valid_until = self.standing.borrow().valid_until;
                        let renewing = self.renew_all(timeout);
                        let Ok(renewed) =
                            tokio::time::timeout_at(valid_until.into(), renewing).await
                        else {
                            return self.lose("its validity ran out during a renewal round");
                        };
                        if renewed < quorum {
                            return self.lose("a renewal round reached fewer than a quorum of nodes");
                        }
                        let valid_until = round + self.lease - RedLock::clock_drift(self.lease);
                        self.standing.send_if_modified(|s| {
                            let held = s.status == Status::Held;
                            if held {
                                s.valid_until = valid_until;
                            }
                            held
                        });
                        next = round + interval;
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

    /// Renews every live member at once; returns how many nodes confirmed.
    async fn renew_all(&self, timeout: Duration) -> usize {
        let renewals = self.alive.iter().map(|&index| {
            let member = self.lock.member(index);
            tokio::time::timeout(timeout, member.lock.renew(self.owner, self.lease))
        });
        join_all(renewals)
            .await
            .into_iter()
            .filter(|renewal| matches!(renewal, Ok(Ok(true))))
            .count()
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
