//! Acquiring a RedLock: requests to every node at once, a grant once a quorum answered
//! within the validity, release everywhere on failure, and a random delay between tries.

use super::guard::{Grant, RedLockGuard};
use super::keeper::Keeping;
use super::{Answer, RedLock};
use crate::compose::{release_all, Member};
use crate::error::LockError;
use crate::handle::AcquireOptions;
use crate::lock::{LockGuard, LockOwner};
use futures_util::future::poll_fn;
use rand::Rng;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

impl RedLock {
    /// Takes the lock with the watchdog, waiting at most the shortest default wait of the
    /// clients.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind: requests in flight run to their end and
    /// any grant they bring is released at once; nodes already granted are released in the
    /// background.
    ///
    /// ```no_run
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = lock.acquire().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<RedLockGuard, LockError> {
        self.acquire_with(AcquireOptions::new()).await
    }

    /// Takes the lock with the watchdog, retrying for at most `wait`.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](RedLock::acquire).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// match lock.acquire_timeout(Duration::from_secs(1)).await {
    ///     Ok(guard) => { /* work while guard.validity() > 0 */ }
    ///     Err(e) if e.is_timeout() => { /* held elsewhere */ }
    ///     Err(e) if e.is_unavailable() => { /* no quorum of nodes answered */ }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<RedLockGuard, LockError> {
        self.acquire_with(AcquireOptions::new().wait(wait)).await
    }

    /// One attempt, no retry: `Ok(None)` when the nodes answered but the lock is held
    /// elsewhere; [`LockError::Unavailable`] when fewer than a quorum answered.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](RedLock::acquire).
    ///
    /// ```no_run
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// if let Some(guard) = lock.try_acquire().await? {
    ///     // we have it
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self) -> Result<Option<RedLockGuard>, LockError> {
        match self
            .acquire_with(AcquireOptions::new().wait(Duration::ZERO))
            .await
        {
            Ok(guard) => Ok(Some(guard)),
            Err(LockError::Timeout { .. }) => Ok(None),
            Err(other) => Err(other),
        }
    }

    /// Takes the lock as `options` say: the owner (the same owner re-enters on every
    /// node), how long to keep retrying, and a fixed lease (no renewal; the guard is lost
    /// when its validity runs out).
    ///
    /// Fails with [`LockError::InvalidConfig`] when the lease cannot leave any validity
    /// (not longer than the drift plus the node timeout), [`LockError::Timeout`] when the
    /// nodes answered but no attempt won a quorum in time, [`LockError::Unavailable`] when
    /// the last attempt heard from fewer than a quorum of nodes.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](RedLock::acquire).
    ///
    /// ```no_run
    /// # use actix_distributed_lock::AcquireOptions;
    /// # use std::time::Duration;
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let options = AcquireOptions::new().wait(Duration::from_secs(2)).lease(Duration::from_secs(10));
    /// let guard = lock.acquire_with(options).await?;
    /// assert!(guard.validity() <= Duration::from_secs(10));
    /// # Ok(()) }
    /// ```
    pub async fn acquire_with(&self, options: AcquireOptions) -> Result<RedLockGuard, LockError> {
        let (owner, wait, fixed_lease) = options.parts();
        let owner = owner.unwrap_or_default();
        let wait = wait.unwrap_or_else(|| self.default_wait());
        let lease = fixed_lease.unwrap_or_else(|| self.watchdog_lease());
        let node_timeout = self.node_timeout_for(lease);
        if node_timeout.is_zero() {
            return Err(LockError::invalid_config(format!(
                "the node timeout of RedLock `{}` must be above zero",
                self.name
            )));
        }
        if lease <= Self::clock_drift(lease) + node_timeout {
            return Err(LockError::invalid_config(format!(
                "a lease of {lease:?} leaves RedLock `{}` no validity after the clock drift \
                 ({:?}) and the node timeout ({node_timeout:?}); use a longer lease",
                self.name,
                Self::clock_drift(lease)
            )));
        }
        let started = Instant::now();
        let deadline = started + wait;
        let mut in_flight = InFlight::new(self.members.len());
        loop {
            let attempt = self.attempt(owner, lease, fixed_lease, node_timeout, &mut in_flight);
            let failure = match attempt.await {
                Ok(Granted {
                    members,
                    started: acquired_at,
                    validity,
                    joining,
                }) => {
                    let keeping = match fixed_lease {
                        Some(_) => Keeping::Fixed,
                        None => Keeping::Renewed {
                            interval: self.renew_interval(),
                            timeout: node_timeout.max(self.renew_interval() / 4),
                        },
                    };
                    return RedLockGuard::start(Grant {
                        lock: self.clone(),
                        owner,
                        fixed_lease,
                        lease,
                        node_timeout,
                        members,
                        joining,
                        joining_until: acquired_at + node_timeout,
                        valid_until: acquired_at + validity,
                        keeping,
                    })
                    .await;
                }
                Err(failure) => failure,
            };
            if let Some(refusal) = failure.hopeless(self) {
                return Err(refusal);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(failure.into_error(self, started.elapsed(), node_timeout));
            }
            tokio::time::sleep(self.next_delay().min(left)).await;
        }
    }

    fn next_delay(&self) -> Duration {
        let mean = self.retry_delay.as_micros() as u64;
        let micros = rand::rng().random_range(mean / 2..=mean + mean / 2);
        Duration::from_micros(micros)
    }

    /// One attempt on every node at once. It succeeds as soon as a quorum has granted the
    /// lock with validity left: the slowest nodes do not set the pace. Their requests, still
    /// unanswered then, go to the guard, which adds a grant that comes within the node
    /// timeout to the hold (renewed and released with it) and releases a later one.
    ///
    /// A node's request is never abandoned while Redis may still run it: it runs on the
    /// node's actor thread, and one that outlives the node timeout stays in `in_flight`.
    /// Until it has answered, that node counts as silent and gets no second request for the
    /// same owner; a grant that arrives late is released before the node is asked again
    /// (or in the background, once the acquire is over).
    async fn attempt(
        &self,
        owner: LockOwner,
        lease: Duration,
        fixed_lease: Option<Duration>,
        node_timeout: Duration,
        in_flight: &mut InFlight,
    ) -> Result<Granted, Failure> {
        let mut options = AcquireOptions::new().owner(owner).wait(Duration::ZERO);
        // In the watchdog mode each member is a watchdog-leased hold on its node, renewed
        // by that node's renewal service with the node's other holds.
        if let Some(lease) = fixed_lease {
            options = options.lease(lease);
        }
        in_flight.settle(&self.members, node_timeout).await;
        let started = Instant::now();
        let quorum = self.quorum();
        let drift = Self::clock_drift(lease);
        // The requests are polled right here, in the caller's task (no hop to five threads
        // and back); those still unanswered when the attempt ends go on as tasks of the
        // caller's runtime (see `Requests`).
        let mut requests = Requests::default();
        let mut answers: Vec<Option<Result<Answer, ()>>> = Vec::new();
        for (index, member) in self.members.iter().enumerate() {
            let answer = match in_flight.request(index, member, options) {
                Request::Ready(call) => {
                    requests.push(index, call);
                    None
                }
                Request::Refused(error) => Some(Ok(Err(error))),
                // Silent for this attempt, as if it had timed out.
                Request::StillInFlight => Some(Err(())),
            };
            answers.push(answer);
        }
        let mut granted = 0;
        let expired = tokio::time::sleep_until((started + node_timeout).into());
        tokio::pin!(expired);
        let quorum_at = poll_fn(|cx| {
            for (index, answer) in requests.poll_answers(cx) {
                granted += usize::from(answer.is_ok());
                answers[index] = Some(Ok(answer));
            }
            let now = Instant::now();
            // Done at a quorum that leaves validity, or when nobody is left to answer.
            if granted >= quorum && now < started + lease - drift {
                return Poll::Ready(Some(now));
            }
            if requests.is_empty() || expired.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await;
        let elapsed = quorum_at.unwrap_or_else(Instant::now) - started;
        let waiting = requests.hand_over(self.members.len());
        let mut members = Vec::new();
        let mut joining = Vec::new();
        let mut failure = Failure::default();
        for (index, (answer, reply)) in answers.into_iter().zip(waiting).enumerate() {
            match (answer, reply) {
                (Some(Ok(Ok(guard))), _) => members.push((index, guard)),
                (Some(Ok(Err(LockError::Timeout { .. } | LockError::AlreadyHeld { .. }))), _) => {
                    failure.busy += 1
                }
                (Some(Ok(Err(error))), _) => failure.silent.push((index, Some(error))),
                // Still in flight from an earlier attempt: silent. (No answer and no reply
                // to wait for cannot happen: a slot is emptied only when answered.)
                (Some(Err(())), _) | (None, None) => failure.silent.push((index, None)),
                (None, Some(reply)) => {
                    if quorum_at.is_some() {
                        joining.push((index, reply));
                    } else {
                        in_flight.keep(index, reply);
                        failure.silent.push((index, None));
                    }
                }
            }
        }
        let validity = lease
            .checked_sub(elapsed + drift)
            .filter(|validity| !validity.is_zero());
        match validity {
            Some(validity) if members.len() >= quorum => {
                tracing::debug!(lock = %self.name, nodes = members.len(),
                    joining = joining.len(), ?elapsed, ?validity, "RedLock acquired");
                Ok(Granted {
                    members,
                    started,
                    validity,
                    joining,
                })
            }
            _ => {
                failure.granted = members.len();
                tracing::debug!(lock = %self.name, granted = members.len(), busy = failure.busy,
                    silent = failure.silent.len(), ?elapsed, "RedLock attempt failed; releasing");
                let held = members
                    .into_iter()
                    .map(|(index, guard)| (self.members[index].node.clone(), guard))
                    .collect();
                release_all(held, node_timeout).await;
                Err(failure)
            }
        }
    }
}

/// A successful attempt.
struct Granted {
    /// (member index, its hold), for every node that granted the lock in time.
    members: Vec<(usize, LockGuard)>,
    /// When the attempt started: its validity counts from here.
    started: Instant,
    validity: Duration,
    /// Requests not answered yet when the quorum was reached, by member index.
    joining: Vec<(usize, oneshot::Receiver<Answer>)>,
}

/// How asking one node went.
enum Request {
    /// The acquire to poll (it runs once polled).
    Ready(Call),
    /// The node cannot be asked (its client was shut down).
    Refused(LockError),
    /// The node has not answered an earlier request yet.
    StillInFlight,
}

/// One node's acquire.
type Call = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// The requests of one attempt not answered yet, by member index. Those left when the
/// attempt ends are carried on as tasks of the caller's runtime: handed over with a
/// receiver for their answer ([`hand_over`](Requests::hand_over)), or, if the attempt is
/// dropped, run to their end (a grant that arrives then is a guard dropped on the spot,
/// which releases it). They stay on the caller's runtime because what they hold (the
/// response timer of a call in flight) belongs to it; should that runtime end first, each
/// is dropped there, and a member acquire dropped in mid-call is settled by its own lock's
/// actor, as any cancelled acquire is. A request is never abandoned while Redis may still
/// run it.
#[derive(Default)]
struct Requests {
    calls: Vec<(usize, Call)>,
}

impl Requests {
    fn push(&mut self, index: usize, call: Call) {
        self.calls.push((index, call));
    }

    fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Polls every request; returns the answers that came in (taken out of the set).
    fn poll_answers(&mut self, cx: &mut std::task::Context<'_>) -> Vec<(usize, Answer)> {
        let mut answered = Vec::new();
        self.calls
            .retain_mut(|(index, call)| match call.as_mut().poll(cx) {
                Poll::Ready(answer) => {
                    answered.push((*index, answer));
                    false
                }
                Poll::Pending => true,
            });
        answered
    }

    /// Hands the unanswered requests to tasks of the caller's runtime: a receiver for each
    /// one's answer, by member index (`None` where there is nothing to wait for).
    fn hand_over(&mut self, members: usize) -> Vec<Option<oneshot::Receiver<Answer>>> {
        let mut waiting: Vec<Option<oneshot::Receiver<Answer>>> =
            (0..members).map(|_| None).collect();
        for (index, call) in self.calls.drain(..) {
            let (reply, answer) = oneshot::channel();
            if carry_on(async move {
                let _ = reply.send(call.await);
            }) {
                waiting[index] = Some(answer);
            }
        }
        waiting
    }
}

impl Drop for Requests {
    fn drop(&mut self) {
        for (_, call) in self.calls.drain(..) {
            carry_on(async move {
                drop(call.await);
            });
        }
    }
}

/// Runs `request` to its end as a task of the current runtime; false (and `request`
/// dropped, which settles it) when there is none, as when a runtime drops its tasks.
fn carry_on(request: impl Future<Output = ()> + Send + 'static) -> bool {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(request);
            true
        }
        Err(_) => false,
    }
}

/// The requests of one acquire call that outlived their node timeout, by member.
struct InFlight {
    pending: Vec<Option<oneshot::Receiver<Answer>>>,
}

impl InFlight {
    fn new(nodes: usize) -> Self {
        InFlight {
            pending: (0..nodes).map(|_| None).collect(),
        }
    }

    /// Collects the late answers that have come in; late grants are released (each report
    /// awaited at most `bound`) before their node is asked again.
    async fn settle(&mut self, members: &[Member], bound: Duration) {
        let mut late = Vec::new();
        for (index, slot) in self.pending.iter_mut().enumerate() {
            let Some(reply) = slot else { continue };
            match reply.try_recv() {
                Err(oneshot::error::TryRecvError::Empty) => {}
                Ok(Ok(guard)) => {
                    late.push((members[index].node.clone(), guard));
                    *slot = None;
                }
                Ok(Err(_)) | Err(oneshot::error::TryRecvError::Closed) => *slot = None,
            }
        }
        if !late.is_empty() {
            release_all(late, bound).await;
        }
    }

    /// The acquire to member `index`, unless an earlier one is still unanswered.
    fn request(&self, index: usize, member: &Member, options: AcquireOptions) -> Request {
        if self.pending[index].is_some() {
            return Request::StillInFlight;
        }
        if let Err(error) = member.lock.client().node() {
            return Request::Refused(error);
        }
        let lock = member.lock.clone();
        Request::Ready(Box::pin(async move { lock.acquire_with(options).await }))
    }

    fn keep(&mut self, index: usize, reply: oneshot::Receiver<Answer>) {
        self.pending[index] = Some(reply);
    }
}

/// What went wrong in one attempt.
#[derive(Default)]
struct Failure {
    granted: usize,
    busy: usize,
    /// Nodes that did not answer in time (`None`) or answered with an error.
    silent: Vec<(usize, Option<LockError>)>,
}

impl Failure {
    /// The first refusal no retry cures (a missing permission, a full memory, a replica, a
    /// wrong type), when so many nodes refused so that no quorum is left to win.
    fn hopeless(&self, lock: &RedLock) -> Option<LockError> {
        let refusals: Vec<&LockError> = self
            .silent
            .iter()
            .filter_map(|(_, error)| error.as_ref())
            .filter(|error| !error.is_transient())
            .collect();
        let first = refusals.first()?;
        (lock.nodes() - refusals.len() < lock.quorum()).then(|| (*first).clone())
    }

    fn into_error(self, lock: &RedLock, waited: Duration, node_timeout: Duration) -> LockError {
        let answered = self.granted + self.busy;
        if answered >= lock.quorum() {
            // The lock was busy, or the attempts took longer than the lease allows.
            return LockError::timeout(lock.name.to_string(), waited);
        }
        if let Some((_, Some(error))) = self
            .silent
            .iter()
            .find(|(_, e)| matches!(e, Some(LockError::WrongType { .. })))
        {
            return error.clone();
        }
        let nodes: Vec<String> = self
            .silent
            .iter()
            .map(|(index, _)| lock.member(*index).node.to_string())
            .collect();
        let last_error = self
            .silent
            .iter()
            .find_map(|(_, e)| e.as_ref())
            .map_or_else(
                || format!("no answer within {node_timeout:?}"),
                ToString::to_string,
            );
        LockError::Unavailable {
            node: nodes.join(", "),
            reason: format!(
                "RedLock `{}` needs {} of {} nodes, but only {answered} answered \
                 (within {node_timeout:?} each, for {waited:?}); {last_error}",
                lock.name,
                lock.quorum(),
                lock.nodes()
            ),
        }
    }
}

impl RedLockGuard {
    /// Takes the lock again for the same owner (a nested hold on every node that grants
    /// it), with this guard's lease kind, retrying for at most `wait`.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(lock: actix_distributed_lock::RedLock) -> Result<(), actix_distributed_lock::LockError> {
    /// let outer = lock.acquire().await?;
    /// let inner = outer.reenter(Duration::ZERO).await?;
    /// inner.unlock().await?; // still held by `outer`
    /// # Ok(()) }
    /// ```
    pub async fn reenter(&self, wait: Duration) -> Result<RedLockGuard, LockError> {
        let mut options = AcquireOptions::new().owner(self.owner()).wait(wait);
        if let Some(lease) = self.fixed_lease {
            options = options.lease(lease);
        }
        self.lock.acquire_with(options).await
    }
}
