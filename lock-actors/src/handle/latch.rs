//! The handle users take count-down latches through: [`CountDownLatch`].

use crate::client::LockClient;
use crate::config::Deployment;
use crate::error::LockError;
use crate::keys::LockName;
use crate::latch::{AwaitLatch, CountDown, DeleteLatch, GetCount, LatchActor, TrySetCount};
use crate::telemetry;
use actix::Addr;
use std::time::Duration;

/// A distributed count-down latch (Redisson's `RCountDownLatch`): waiters wait until the
/// count, set once, has been counted down to zero by any process.
///
/// Get one with [`LockClient::count_down_latch`]. Set the count once with
/// [`try_set_count`](CountDownLatch::try_set_count) (of many processes starting at once,
/// exactly one sets it), count it down from anywhere with
/// [`count_down`](CountDownLatch::count_down), and wait with
/// [`wait`](CountDownLatch::wait) or [`wait_timeout`](CountDownLatch::wait_timeout). A
/// latch with no count set is open. Once open it can be set again (Redisson's latch is
/// reusable the same way). The handle is cheap to clone and holds nothing: a latch is
/// never held, so there is no guard, no lease and nothing to release.
///
/// Waiting: the local waiters of one latch park in its actor and only the first reads the
/// count; they listen on the latch's channel through the node's one subscription
/// connection, and read the count again at every message, or every 5 s should a message
/// be lost. Once no one waits, nothing is kept: no subscription, no actor, and nothing in
/// Redis (waiting writes nothing).
///
/// # Redisson compatibility
///
/// Same data as Redisson's `RCountDownLatch`: the string key `name` holds the count,
/// deleted when it reaches zero; `0` is published on
/// `redisson_countdownlatch__channel__{name}` when it does, `1` when a count is set. A
/// Java `countDown` opens our waiters and ours open Java's. One difference: deleting a
/// latch publishes `0` here (Redisson publishes `1`, which leaves its untimed waiters asleep
/// on an open latch), so Java's waiters and ours wake and find it open.
///
/// On a Redis Cluster, Redisson puts the whole name in the channel's braces, so the name
/// must have no brace of its own (key and channel would land on two slots):
/// [`LockClient::count_down_latch`] refuses such a name there.
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::LockClient;
/// use std::time::Duration;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let client = LockClient::from_url("redis://127.0.0.1:6379/").await?;
/// let shards_done = client.count_down_latch("reindex:shards")?;
/// shards_done.try_set_count(3).await?; // only the first process to start sets it
///
/// // ... each of three workers, anywhere, when its shard is done:
/// shards_done.count_down().await?;
///
/// // ... the coordinator:
/// if shards_done.wait_timeout(Duration::from_secs(600)).await? {
///     println!("every shard is reindexed");
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CountDownLatch {
    client: LockClient,
    name: LockName,
}

impl std::fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("name", &self.name)
            .finish()
    }
}

impl CountDownLatch {
    /// The latch's name as the caller gave it, without the client's namespace (the key of
    /// its count is the name mapped into the namespace).
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// assert_eq!(client.count_down_latch("l")?.name(), "l");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.name.unmapped()
    }

    /// Sets the count to `count` only if no count is set (the latch is open); returns
    /// whether it did. Atomic: of many processes starting at once, exactly one sets it.
    ///
    /// Errors: [`LockError::InvalidConfig`] for `count == 0` or above `i64::MAX`,
    /// [`LockError::WrongType`] when the key holds something other than a count,
    /// [`LockError::Unavailable`], [`LockError::Shutdown`].
    ///
    /// # Cancel safety
    ///
    /// The request goes to the latch's actor on the first poll; dropping the future after
    /// that loses only the answer, not the change.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let first = client.count_down_latch("l")?.try_set_count(2).await?;
    /// # Ok(()) }
    /// ```
    pub async fn try_set_count(&self, count: u64) -> Result<bool, LockError> {
        self.change(TrySetCount { count }).await
    }

    /// Counts the latch down by one; returns the count left. At zero the latch opens: its
    /// key goes and every waiter, here and in any other process, Java's included, goes on.
    /// Counting down an open latch changes nothing and returns 0.
    ///
    /// # Cancel safety
    ///
    /// As [`try_set_count`](CountDownLatch::try_set_count).
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let left = client.count_down_latch("l")?.count_down().await?;
    /// # Ok(()) }
    /// ```
    pub async fn count_down(&self) -> Result<u64, LockError> {
        self.change(CountDown).await
    }

    /// The count now; 0 when the latch is open.
    ///
    /// # Cancel safety
    ///
    /// Reads only: a dropped future leaves nothing behind.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// println!("{} to go", client.count_down_latch("l")?.count().await?);
    /// # Ok(()) }
    /// ```
    pub async fn count(&self) -> Result<u64, LockError> {
        self.ask(GetCount).await
    }

    /// Deletes the latch's count, which opens it; returns whether a count was set. Every
    /// waiter goes on.
    ///
    /// # Cancel safety
    ///
    /// As [`try_set_count`](CountDownLatch::try_set_count).
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let existed = client.count_down_latch("l")?.delete().await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete(&self) -> Result<bool, LockError> {
        self.change(DeleteLatch).await
    }

    /// Waits until the count is zero, however long that takes (Redisson's `await()`).
    /// Returns at once when the latch is open.
    ///
    /// Errors: [`LockError::WrongType`] when the key holds something other than a count,
    /// [`LockError::Unavailable`] when Redis stays away, [`LockError::Shutdown`] when the
    /// client closes meanwhile.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves nothing behind: the waiter leaves the latch's queue, and
    /// once no one waits the subscription to its channel is dropped. Nothing of a waiter
    /// is ever written to Redis.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// client.count_down_latch("l")?.wait().await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait(&self) -> Result<(), LockError> {
        self.wait_for(None).await
    }

    /// Waits at most `wait` for the count to be zero: `Ok(true)` once it is, `Ok(false)`
    /// when `wait` ran out first (Redisson's `await(time, unit)`). `Duration::ZERO` looks
    /// once.
    ///
    /// # Cancel safety
    ///
    /// As [`wait`](CountDownLatch::wait).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// if !client.count_down_latch("l")?.wait_timeout(Duration::from_secs(5)).await? {
    ///     println!("still counting");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait_timeout(&self, wait: Duration) -> Result<bool, LockError> {
        match self.wait_for(Some(wait)).await {
            Ok(()) => Ok(true),
            Err(LockError::Timeout { .. }) => Ok(false),
            Err(other) => Err(other),
        }
    }

    /// The address of this latch's actor, for driving it with messages from other actors.
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let actor = client.count_down_latch("l")?.actor()?;
    /// # Ok(()) }
    /// ```
    pub fn actor(&self) -> Result<Addr<LatchActor>, LockError> {
        Ok(self.client.actors()?.find::<LatchActor>(&self.name))
    }

    async fn wait_for(&self, wait: Option<Duration>) -> Result<(), LockError> {
        let waiting = self.ask(AwaitLatch { wait });
        let config = self.client.config();
        telemetry::acquire(telemetry::Kind::Latch, &self.name, config, waiting).await
    }

    /// Sends `msg` to the latch's actor (a fresh one if that one had just stopped).
    async fn ask<M, T>(&self, msg: M) -> Result<T, LockError>
    where
        M: actix::Message<Result = Result<T, LockError>> + Clone + Send + 'static,
        T: Send + 'static,
        LatchActor: actix::Handler<M>,
    {
        self.client
            .ask::<LatchActor, _>(self.name.clone(), msg)
            .await?
    }

    /// [`ask`](Self::ask) for a change documented to go on once polled: sent detached.
    async fn change<M, T>(&self, msg: M) -> Result<T, LockError>
    where
        M: actix::Message<Result = Result<T, LockError>> + Send + 'static,
        T: Send + 'static,
        LatchActor: actix::Handler<M>,
    {
        self.client
            .ask_detached::<LatchActor, _>(self.name.clone(), msg)
            .await?
    }
}

/// Where count-down latches start: the client hands out the handles.
impl LockClient {
    /// A handle to the count-down latch `name` (Redisson's `RCountDownLatch`). Checks the
    /// name; talks to nobody yet. Set its count once with
    /// [`CountDownLatch::try_set_count`].
    ///
    /// Errors: [`LockError::InvalidName`] for a bad name, and on a Redis Cluster for a name
    /// with a brace (Redisson's channel for it would land on another slot than its key).
    ///
    /// Guarantees: a waiter goes on only after it read a count of zero (a message alone
    /// never lets it go), and once the count is zero every waiter goes on within one
    /// message or, should that be lost, 5 s. Not guaranteed: a count set again right after
    /// it reached zero may keep waiters that had not read it yet waiting (as in Redisson); a
    /// Redis failover can lose the last count-downs.
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let latch = client.count_down_latch("deploy:canaries")?;
    /// latch.try_set_count(2).await?;
    /// latch.count_down().await?;
    /// assert_eq!(latch.count().await?, 1);
    /// assert!(client.count_down_latch("").is_err());
    /// # Ok(()) }
    /// ```
    pub fn count_down_latch(&self, name: &str) -> Result<CountDownLatch, LockError> {
        let name = self.mapped_name(name)?;
        let cluster = matches!(self.config().deployment(), Deployment::Cluster { .. });
        if cluster && !name.latch_shares_one_slot() {
            return Err(LockError::InvalidName {
                reason: format!(
                    "latch `{name}` has a brace: Redisson's latch channel wraps the whole name \
                     in braces, so on a cluster its key and its channel would land on two \
                     slots; use a latch name without braces"
                ),
            });
        }
        Ok(CountDownLatch {
            client: self.clone(),
            name,
        })
    }

    /// How many latch actors this client runs now (one per latch in use: waited on, or
    /// with a call under way).
    ///
    /// ```no_run
    /// # fn demo(client: actix_distributed_lock::LockClient) {
    /// println!("{} latches in use", client.active_latches());
    /// # }
    /// ```
    pub fn active_latches(&self) -> usize {
        self.actors().map_or(0, |actors| actors.latch_actors())
    }
}
