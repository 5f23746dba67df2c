//! `MultiLock`: all of several locks or none, taken in one canonical order.

use super::{release_all, Member};
use crate::client::LockClient;
use crate::error::LockError;
use crate::handle::{AcquireOptions, Lock};
use crate::lock::{LockGuard, LockKind, LockOwner};
use futures_util::future::{join_all, select_all};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a failed acquire waits for the releases of the members it had taken before it
/// reports the failure (each release is already on its way; see [`release_all`]).
const RELEASE_REPORT_WAIT: Duration = Duration::from_millis(500);

/// All of several locks, or none (Redisson's `RedissonMultiLock`).
///
/// The members may be of any kind ([`LockClient::lock`], [`fair_lock`](LockClient::fair_lock),
/// [`fast_lock`](LockClient::fast_lock), either side of a
/// [`read_write_lock`](LockClient::read_write_lock), [`fenced_lock`](LockClient::fenced_lock))
/// and on one node or several (one [`LockClient`] per node).
///
/// - **Canonical order.** Members are taken one after the other, sorted by (node address,
///   name, kind: write side first, read side last), whatever order they were given in. Two
///   MultiLocks over overlapping sets therefore take their common members in the same order
///   and cannot deadlock. A member named twice (same node, name and kind) is taken once.
///   A node is one keyspace as the server reports it (its `run_id` and the database): locks
///   reached through clients that spell one server differently (`localhost`, `127.0.0.1`)
///   sort under the smallest spelling, and the same name through both is taken once.
///   Between nodes the order follows the addresses as written, which stay put when a server
///   restarts; so processes should spell each server the same way.
/// - **All or none.** When a member cannot be had within the wait (or fails), every member
///   already taken is released at once, before the error is returned; nothing waits for a
///   lease to run out. The error names the member that failed; a `Timeout` reports the
///   whole wait.
/// - **One bound.** The wait covers the whole set: each member waits only for what is left.
/// - **Kept alive together.** Taken without a lease, every member is renewed by its node's
///   watchdog (one batched script per node and interval). With a fixed lease, every member's
///   lease is restarted once the set is complete, so all of them end together.
/// - **One loss signal.** [`MultiLockGuard::lost`] fires when any member is lost.
///
/// Every member is taken for the same [`LockOwner`], so a MultiLock re-enters its reentrant
/// members, and a holder of one member may take a MultiLock that includes it.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::{LockClient, MultiLock};
/// use std::time::Duration;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let orders = LockClient::from_url("redis://10.0.0.1:6379/").await?;
/// let stock = LockClient::from_url("redis://10.0.0.2:6379/").await?;
/// let both = MultiLock::new([orders.lock("order:42")?, stock.fair_lock("stock:sku-1")?])?;
/// let guard = both.acquire_timeout(Duration::from_secs(5)).await?;
/// // ... pay order 42 and take one sku-1 from stock ...
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct MultiLock {
    members: Arc<[Member]>,
}

impl MultiLock {
    /// A MultiLock over `locks`, put into canonical order. Talks to nobody yet.
    ///
    /// Fails with [`LockError::InvalidConfig`] for an empty set, and with
    /// [`LockError::Shutdown`] when a member's client was shut down.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::MultiLock;
    /// # fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let doc = client.read_write_lock("doc:7")?;
    /// let multi = MultiLock::new([client.lock("index")?, doc.write().clone()])?;
    /// assert_eq!(multi.len(), 2);
    /// assert!(MultiLock::new([]).is_err());
    /// # Ok(()) }
    /// ```
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> Result<MultiLock, LockError> {
        let mut members = locks
            .into_iter()
            .map(Member::new)
            .collect::<Result<Vec<_>, _>>()?;
        if members.is_empty() {
            return Err(LockError::invalid_config(
                "a MultiLock needs at least one lock",
            ));
        }
        // One keyspace reached under several spellings (`localhost`, `127.0.0.1`, another
        // client) is one node: its members take the smallest spelling as their node, so
        // they sort together and a lock named through two clients is taken once.
        let canonical: Vec<Arc<str>> = members
            .iter()
            .map(|member| {
                members
                    .iter()
                    .filter(|other| other.server.same_keyspace(&member.server))
                    .map(|other| other.node.clone())
                    .fold(member.node.clone(), |least, node| least.min(node))
            })
            .collect();
        for (member, node) in members.iter_mut().zip(canonical) {
            member.node = node;
        }
        // Fenced first among duplicates, so the one kept still draws its token.
        members.sort_by(|a, b| {
            order_key(a)
                .cmp(&order_key(b))
                .then(b.lock.is_fenced().cmp(&a.lock.is_fenced()))
        });
        members.dedup_by(|later, kept| order_key(later) == order_key(kept));
        Ok(MultiLock {
            members: members.into(),
        })
    }

    /// The locks, in the order they are taken.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::MultiLock;
    /// # fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let multi = MultiLock::new([client.lock("b")?, client.lock("a")?])?;
    /// let names: Vec<&str> = multi.locks().map(|lock| lock.name()).collect();
    /// assert_eq!(names, ["a", "b"]);
    /// # Ok(()) }
    /// ```
    pub fn locks(&self) -> impl ExactSizeIterator<Item = &Lock> + '_ {
        self.members.iter().map(|member| &member.lock)
    }

    /// How many distinct locks this MultiLock takes.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::MultiLock;
    /// # fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let multi = MultiLock::new([client.lock("a")?, client.lock("a")?])?;
    /// assert_eq!(multi.len(), 1); // named twice, taken once
    /// # Ok(()) }
    /// ```
    #[allow(clippy::len_without_is_empty)] // never empty: `new` refuses an empty set
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Takes every lock with the watchdog, waiting at most the default wait of the first
    /// member's client for the whole set.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind: the member being waited for is withdrawn
    /// (as [`Lock::acquire`]), and the members already taken are released in the background.
    ///
    /// ```no_run
    /// # use actix_distributed_lock::MultiLock;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.multi_lock(["order:42", "invoice:42"])?.acquire().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<MultiLockGuard, LockError> {
        self.acquire_with(AcquireOptions::new()).await
    }

    /// Takes every lock with the watchdog, waiting at most `wait` for the whole set.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](MultiLock::acquire).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let multi = client.multi_lock(["order:42", "invoice:42"])?;
    /// match multi.acquire_timeout(Duration::from_secs(1)).await {
    ///     Ok(guard) => { /* work */ }
    ///     Err(e) if e.is_timeout() => { /* one of them is busy; none is held */ }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<MultiLockGuard, LockError> {
        self.acquire_with(AcquireOptions::new().wait(wait)).await
    }

    /// Tries each lock once, without waiting: `Ok(None)` when one of them is held elsewhere
    /// (and then none is held by us).
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](MultiLock::acquire).
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// if let Some(guard) = client.multi_lock(["a", "b"])?.try_acquire().await? {
    ///     // we have both
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self) -> Result<Option<MultiLockGuard>, LockError> {
        match self
            .acquire_with(AcquireOptions::new().wait(Duration::ZERO))
            .await
        {
            Ok(guard) => Ok(Some(guard)),
            Err(LockError::Timeout { .. }) => Ok(None),
            Err(other) => Err(other),
        }
    }

    /// Takes every lock as `options` say: one owner for all, one wait for the whole set, and
    /// a fixed lease that every member gets from the moment the set is complete.
    ///
    /// # Cancel safety
    ///
    /// As [`acquire`](MultiLock::acquire).
    ///
    /// ```no_run
    /// # use actix_distributed_lock::{AcquireOptions, LockOwner};
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let options = AcquireOptions::new()
    ///     .owner(LockOwner::new())
    ///     .wait(Duration::from_secs(2))
    ///     .lease(Duration::from_secs(10));
    /// let guard = client.multi_lock(["a", "b"])?.acquire_with(options).await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire_with(&self, options: AcquireOptions) -> Result<MultiLockGuard, LockError> {
        let (owner, wait, lease) = options.parts();
        let owner = owner.unwrap_or_default();
        let wait = wait.unwrap_or_else(|| self.members[0].lock.client().config().default_wait);
        let started = Instant::now();
        let deadline = started + wait;
        let mut held: Vec<(Arc<str>, LockGuard)> = Vec::with_capacity(self.members.len());
        for member in self.members.iter() {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut member_options = AcquireOptions::new().owner(owner).wait(left);
            if let Some(lease) = lease {
                // Long enough to outlast the wait for the members after this one; cut back to
                // `lease` once the set is complete.
                member_options = member_options.lease(lease.saturating_add(left));
            }
            match member.lock.acquire_with(member_options).await {
                Ok(guard) => held.push((member.node.clone(), guard)),
                Err(error) => {
                    let taken = held.len();
                    release_all(held, RELEASE_REPORT_WAIT).await;
                    let error = match error {
                        LockError::Timeout {
                            name,
                            by_this_client,
                            ..
                        } => LockError::Timeout {
                            name,
                            waited: started.elapsed(),
                            by_this_client,
                        },
                        other => other,
                    };
                    tracing::debug!(lock = member.lock.name(), released = taken, %error,
                        "MultiLock not acquired; released the members it had taken");
                    return Err(error);
                }
            }
        }
        if let (Some(lease), false) = (lease, wait.is_zero()) {
            restart_leases(&self.members, &mut held, lease).await?;
        }
        Ok(MultiLockGuard {
            lock: self.clone(),
            owner,
            lease,
            members: held.into_iter().map(|(_, guard)| guard).collect(),
        })
    }
}

/// The canonical order: node, then name, then kind (the write side before anything else on
/// its name, so a writer's own read hold comes after its write hold; the read side last).
fn order_key(member: &Member) -> (&str, &str, u8) {
    let rank = match member.lock.kind() {
        LockKind::Write => 0,
        LockKind::Read => 2,
        _ => 1,
    };
    (&member.node, member.lock.key(), rank)
}

/// Gives every member hold of a complete set (`held`, in the order of `members`) its fixed
/// `lease` from now; on a member found gone, releases the set and fails.
async fn restart_leases(
    members: &[Member],
    held: &mut Vec<(Arc<str>, LockGuard)>,
    lease: Duration,
) -> Result<(), LockError> {
    // Each member's own hold restarts; a longer hold of the same owner (a member it held
    // before) keeps what it has left.
    let renewals = join_all(held.iter().map(|(_, guard)| guard.extend(lease))).await;
    for (member, renewed) in members.iter().zip(renewals) {
        match renewed {
            Ok(()) => {}
            Err(LockError::Lost { .. }) => {
                release_all(std::mem::take(held), RELEASE_REPORT_WAIT).await;
                return Err(LockError::Lost {
                    name: member.lock.name().to_string(),
                });
            }
            // The member keeps the longer lease it was taken with; it still ends on its own.
            Err(error) => tracing::warn!(lock = member.lock.name(), %error,
                "could not shorten a MultiLock member's lease to the one asked for"),
        }
    }
    Ok(())
}

/// Proof that every lock of a [`MultiLock`] is yours; dropping it releases them all.
///
/// - [`unlock`](MultiLockGuard::unlock) releases every member at once and reports how it went.
/// - Dropping the guard releases every member in the background (so `?`, early returns and
///   panics release too).
/// - [`lost`](MultiLockGuard::lost) resolves when any member is lost: the set is no longer
///   whole, so stop the work it protected.
///
/// # Example
///
/// ```no_run
/// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
/// let guard = client.multi_lock(["order:42", "stock:sku-1"])?.acquire().await?;
/// tokio::select! {
///     _ = guard.lost() => eprintln!("one of the locks was lost; abandoning"),
///     _ = async { /* protected work */ } => {}
/// }
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases every lock at once; keep it for as long as the work needs them"]
pub struct MultiLockGuard {
    lock: MultiLock,
    owner: LockOwner,
    lease: Option<Duration>,
    members: Vec<LockGuard>,
}

impl MultiLockGuard {
    /// The owner every member is held for; acquire again with it to re-enter.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.multi_lock(["a", "b"])?.acquire().await?;
    /// assert!(guard.guards().iter().all(|member| member.owner() == guard.owner()));
    /// # Ok(()) }
    /// ```
    pub fn owner(&self) -> LockOwner {
        self.owner
    }

    /// The member holds, in the order they were taken (for names and fencing tokens).
    ///
    /// ```no_run
    /// # use actix_distributed_lock::MultiLock;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let multi = MultiLock::new([client.fenced_lock("ledger:a")?, client.fenced_lock("ledger:b")?])?;
    /// let guard = multi.acquire().await?;
    /// for member in guard.guards() {
    ///     println!("{}: token {:?}", member.name(), member.fencing_token());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn guards(&self) -> &[LockGuard] {
        &self.members
    }

    /// Resolves when any member is lost while held (see [`LockGuard::lost`]); never after a
    /// normal release. The future does not borrow the guard.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.multi_lock(["a", "b"])?.acquire().await?;
    /// let lost = guard.lost();
    /// tokio::spawn(async move { lost.await; eprintln!("the set is broken") });
    /// # Ok(()) }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let each: Vec<_> = self
            .members
            .iter()
            .map(|member| Box::pin(member.lost()))
            .collect();
        async move {
            // Never empty: a MultiLock has at least one member.
            select_all(each).await;
        }
    }

    /// True once any member is known to be lost.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.multi_lock(["a", "b"])?.acquire().await?;
    /// assert!(!guard.is_lost());
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.members.iter().any(LockGuard::is_lost)
    }

    /// Releases every member at once. Every release is attempted even when one fails; the
    /// first failure is returned ([`LockError::NotOwner`] for a member that was lost).
    ///
    /// # Cancel safety
    ///
    /// Every release is sent before the first `.await` point completes; dropping the future
    /// after that only loses the report.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.multi_lock(["a", "b"])?.acquire().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub async fn unlock(self) -> Result<(), LockError> {
        let reports = join_all(self.members.into_iter().map(LockGuard::unlock)).await;
        reports
            .into_iter()
            .find_map(Result::err)
            .map_or(Ok(()), Err)
    }

    /// Sets the lease of every member's hold to `lease` from now, longer or shorter, as
    /// [`LockGuard::extend`] does for each (at once): for a set taken with a fixed lease.
    /// Every member is tried; the first failure is returned ([`LockError::Lost`] naming a
    /// member that was gone: the set no longer excludes, so stop the work; a watchdog-kept
    /// set is refused with [`LockError::InvalidConfig`]).
    ///
    /// # Cancel safety
    ///
    /// Every member's update is sent before the first `.await` point completes and goes on
    /// if the future is dropped; each member counts on the earlier of its old end and the
    /// new one until Redis confirms it (see [`LockGuard::extend`]).
    ///
    /// ```no_run
    /// # use actix_distributed_lock::AcquireOptions;
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let options = AcquireOptions::new().lease(Duration::from_secs(10));
    /// let guard = client.multi_lock(["a", "b"])?.acquire_with(options).await?;
    /// guard.extend(Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn extend(&self, lease: Duration) -> Result<(), LockError> {
        let updates = self.members.iter().map(|m| m.extend_request(lease));
        let reports = join_all(updates.collect::<Vec<_>>()).await;
        reports
            .into_iter()
            .find_map(Result::err)
            .map_or(Ok(()), Err)
    }

    /// How long the whole set is surely still held: the least
    /// [`remaining_lease`](LockGuard::remaining_lease) of its members.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.multi_lock(["a", "b"])?.acquire().await?;
    /// let left = guard.remaining_lease();
    /// # Ok(()) }
    /// ```
    pub fn remaining_lease(&self) -> Duration {
        self.members
            .iter()
            .map(LockGuard::remaining_lease)
            .min()
            .unwrap_or_default()
    }

    /// Takes the whole set again for the same owner (nested holds), with this guard's lease
    /// kind, waiting at most `wait`; succeeds at once while this guard holds every member.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let outer = client.multi_lock(["a", "b"])?.acquire().await?;
    /// let inner = outer.reenter(Duration::ZERO).await?;
    /// inner.unlock().await?; // still held by `outer`
    /// # Ok(()) }
    /// ```
    pub async fn reenter(&self, wait: Duration) -> Result<MultiLockGuard, LockError> {
        let mut options = AcquireOptions::new().owner(self.owner).wait(wait);
        if let Some(lease) = self.lease {
            options = options.lease(lease);
        }
        self.lock.acquire_with(options).await
    }
}

impl std::fmt::Debug for MultiLockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiLockGuard")
            .field("owner", &self.owner)
            .field("lease", &self.lease)
            .field("members", &self.members)
            .finish()
    }
}

impl LockClient {
    /// A [`MultiLock`] over the reentrant locks `names` on this client's node.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let guard = client.multi_lock(["order:42", "stock:sku-1"])?.acquire().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    pub fn multi_lock<I>(&self, names: I) -> Result<MultiLock, LockError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let locks = names
            .into_iter()
            .map(|name| self.lock(name.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        MultiLock::new(locks)
    }
}
