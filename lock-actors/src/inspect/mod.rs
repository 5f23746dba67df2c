//! The lock inspector: which locks exist, who holds them, who waits, and a forced release
//! for operators. Reads only lock keys (found by `SCAN`, per primary on a cluster, with
//! pipelined reads), never writes but through a kind's own force-unlock.
//!
//! The `lock-inspect` command (feature `cli`) and the inspector page (feature `inspector`,
//! [`page`]) are built on it.
//!
//! ```no_run
//! use actix_distributed_lock::LockClient;
//!
//! # async fn demo() -> Result<(), actix_distributed_lock::LockError> {
//! let client = LockClient::from_url("redis://127.0.0.1:6379/").await?;
//! let inspector = client.inspector();
//! for lock in inspector.list(Some("order:*")).await? {
//!     println!("{} {} held by {:?}", lock.name, lock.kind, lock.holders);
//! }
//! if let Some(lock) = inspector.show("order:42").await? {
//!     println!("{} waiters", lock.waiters.len());
//! }
//! # Ok(()) }
//! ```

mod feed;
mod force;
mod model;
#[cfg(feature = "web")]
#[cfg_attr(docsrs, doc(cfg(feature = "web")))]
pub mod page;
mod read;
mod shape;

pub use model::{Change, ForceUnlocked, Holder, InspectedKind, LockInfo, Waiter, WatchEvent};

use crate::client::LockClient;
use crate::error::LockError;
use crate::node::Shard;
use read::{Link, Names};

/// Reads (and, on request, force-releases) the locks of one deployment through a
/// [`LockClient`]'s connection. Cheap to clone.
///
/// ```no_run
/// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
/// let locks = client.inspector().list(None).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Inspector {
    client: LockClient,
}

impl LockClient {
    /// The inspector of this client's deployment (within its namespace, if it has one).
    ///
    /// ```no_run
    /// # async fn demo(client: actix_distributed_lock::LockClient) -> Result<(), actix_distributed_lock::LockError> {
    /// let held = client.inspector().show("order:42").await?.is_some();
    /// # Ok(()) }
    /// ```
    pub fn inspector(&self) -> Inspector {
        Inspector {
            client: self.clone(),
        }
    }
}

impl Inspector {
    /// Every lock whose name matches the glob `pattern` (all when `None`), of every kind,
    /// sorted by name. Keys that are not locks are skipped, never touched.
    ///
    /// # Cancel safety
    ///
    /// Reads only: a dropped future leaves nothing behind.
    ///
    /// ```no_run
    /// # async fn demo(i: actix_distributed_lock::inspect::Inspector) -> Result<(), actix_distributed_lock::LockError> {
    /// let orders = i.list(Some("order:*")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn list(&self, pattern: Option<&str>) -> Result<Vec<LockInfo>, LockError> {
        let node = self.client.node()?;
        let names = self.names();
        let prefix = names.prefix.as_deref().map(escape_glob).unwrap_or_default();
        let pattern = format!("{prefix}{}", pattern.unwrap_or("*"));
        let shards = node.commands.shards().await?;
        let per_shard = shards
            .into_iter()
            .map(|shard| list_shard(shard, pattern.clone(), names.clone()));
        let mut locks: Vec<LockInfo> = futures_util::future::try_join_all(per_shard)
            .await?
            .into_iter()
            .flatten()
            .collect();
        locks.sort_by(|a, b| a.name.cmp(&b.name).then(a.key.cmp(&b.key)));
        locks.dedup_by(|a, b| a.key == b.key);
        Ok(locks)
    }

    /// One lock in detail; `Ok(None)` when nothing is stored under its name, and
    /// [`LockError::WrongType`] when the key holds something that is not a lock.
    ///
    /// # Cancel safety
    ///
    /// Reads only: a dropped future leaves nothing behind.
    ///
    /// ```no_run
    /// # async fn demo(i: actix_distributed_lock::inspect::Inspector) -> Result<(), actix_distributed_lock::LockError> {
    /// match i.show("order:42").await? {
    ///     Some(lock) => println!("held by {:?}", lock.holders),
    ///     None => println!("free"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn show(&self, name: &str) -> Result<Option<LockInfo>, LockError> {
        let lock_name = self.client.name(name)?;
        let node = self.client.node()?;
        let link = Link::Lock(node.commands.clone(), lock_name.clone());
        let keys = [
            lock_name.as_str().as_bytes().to_vec(),
            lock_name.fair_queue_key().into_bytes(),
        ];
        let found = read::read(&link, &keys, &self.names(), true).await?;
        if let Some(lock) = found.into_iter().next() {
            return Ok(Some(lock));
        }
        let exists: i64 = node
            .commands
            .clone()
            .query(
                redis::pipe().cmd("EXISTS").arg(lock_name.as_str()).clone(),
                lock_name.clone(),
            )
            .await
            .map(|(n,): (i64,)| n)?;
        if exists == 0 {
            Ok(None)
        } else {
            Err(LockError::WrongType {
                name: name.to_string(),
            })
        }
    }

    /// Releases lock `name` from the holders it has now, with its kind's own force-unlock
    /// (which publishes the message its waiters expect); holders learn they lost it.
    /// `Ok(None)` when there was no lock; semaphores have no holder to force out and are
    /// refused with [`LockError::InvalidConfig`].
    ///
    /// It reads the lock, then releases it in one script only if the holders read are
    /// still the holders: [`LockError::HolderChanged`] if the lock changed hands in
    /// between. To release only what an operator was shown, use
    /// [`force_unlock_if`](Inspector::force_unlock_if).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped once the force-unlock was sent, the lock may be released
    /// without the report; a read-write lock's read-hold timeout keys may then stay until
    /// their own lease ends (they expire; nothing holds the lock through them).
    ///
    /// ```no_run
    /// # async fn demo(i: actix_distributed_lock::inspect::Inspector) -> Result<(), actix_distributed_lock::LockError> {
    /// if let Some(done) = i.force_unlock("order:42").await? {
    ///     println!("removed {:?}", done.removed_keys);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn force_unlock(&self, name: &str) -> Result<Option<ForceUnlocked>, LockError> {
        match self.show(name).await? {
            Some(before) => {
                let shown: Vec<String> = before.holders.iter().map(|h| h.field.clone()).collect();
                force::force_unlock(&self.client, name, before, &shown)
                    .await
                    .map(Some)
            }
            None => Ok(None),
        }
    }

    /// Releases lock `name` as [`force_unlock`](Inspector::force_unlock) does, but only if
    /// exactly `holders` hold it: the [`Holder::field`]s an operator was shown and
    /// confirmed. The check and the release are one script in Redis, so a holder that took
    /// the lock after the operator looked is never evicted: the answer is then
    /// [`LockError::HolderChanged`] and nothing is released (show the lock again). Hold
    /// counts and leases may change in between; who holds it may not. `Ok(None)` when
    /// nothing is stored under the name.
    ///
    /// # Cancel safety
    ///
    /// As [`force_unlock`](Inspector::force_unlock).
    ///
    /// ```no_run
    /// # use actix_distributed_lock::LockError;
    /// # async fn demo(i: actix_distributed_lock::inspect::Inspector) -> Result<(), LockError> {
    /// let Some(shown) = i.show("order:42").await? else { return Ok(()) };
    /// // ... the operator looks at `shown.holders` and confirms ...
    /// let fields: Vec<String> = shown.holders.iter().map(|h| h.field.clone()).collect();
    /// match i.force_unlock_if("order:42", &fields).await {
    ///     Ok(done) => println!("released: {done:?}"),
    ///     Err(LockError::HolderChanged { .. }) => println!("it changed hands; look again"),
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn force_unlock_if(
        &self,
        name: &str,
        holders: &[String],
    ) -> Result<Option<ForceUnlocked>, LockError> {
        match self.show(name).await? {
            Some(before) => force::force_unlock(&self.client, name, before, holders)
                .await
                .map(Some),
            None => Ok(None),
        }
    }

    /// Follows lock `name` live: grants and releases, waiters joining and leaving. Each
    /// message on the lock's channels, and a re-read every [`WATCH_POLL`] (an acquire of a
    /// free lock publishes nothing), yields a [`WatchEvent`] when something changed. The
    /// first event is the lock as found. Dropping the watch stops it.
    ///
    /// ```no_run
    /// # async fn demo(i: actix_distributed_lock::inspect::Inspector) -> Result<(), actix_distributed_lock::LockError> {
    /// let mut watch = i.watch("order:42")?;
    /// while let Some(event) = watch.next().await {
    ///     println!("{:?}", event?.changes);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn watch(&self, name: &str) -> Result<LockWatch, LockError> {
        let key = self.client.name(name)?;
        let node = self.client.node()?;
        let events = feed::start(self.clone(), name.to_string(), key, node)?;
        Ok(LockWatch { events })
    }
}

impl Inspector {
    fn names(&self) -> Names {
        Names {
            prefix: self
                .client
                .config()
                .namespace_value()
                .map(|ns| format!("{ns}:")),
        }
    }
}

/// Keys per `SCAN` step and per pipeline of reads.
const SCAN_COUNT: usize = 1000;

/// Batches of reads in flight on one server while its `SCAN` goes on.
const READS_IN_FLIGHT: usize = 4;

/// Every lock on one server whose key matches `pattern`: the `SCAN` steps one after the
/// other, the reads of up to [`READS_IN_FLIGHT`] batches at once behind them.
async fn list_shard(
    shard: Shard,
    pattern: String,
    names: Names,
) -> Result<Vec<LockInfo>, LockError> {
    use futures_util::TryStreamExt;
    // Everything the steps use is owned, so the future stays `Send` for any caller.
    let link = Link::Shard(shard.clone());
    let batches = futures_util::stream::try_unfold(
        (shard, pattern, Some(0u64)),
        |(mut shard, pattern, cursor)| async move {
            let Some(cursor) = cursor else {
                return Ok(None);
            };
            let (next, keys) = shard.scan(cursor, &pattern, SCAN_COUNT).await?;
            let next = (next != 0).then_some(next);
            Ok::<_, LockError>(Some((keys, (shard, pattern, next))))
        },
    );
    let reads = batches
        .map_ok(move |keys| {
            let (link, names) = (link.clone(), names.clone());
            async move { read::read(&link, &keys, &names, false).await }
        })
        .try_buffered(READS_IN_FLIGHT);
    let found: Vec<Vec<LockInfo>> = reads.try_collect().await?;
    Ok(found.into_iter().flatten().collect())
}

/// `text` with the glob characters of `SCAN MATCH` escaped.
fn escape_glob(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// How often a [`LockWatch`] re-reads its lock when no message came.
pub const WATCH_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// A live view of one lock, from [`Inspector::watch`]; also a [`Stream`](futures_util::Stream).
pub struct LockWatch {
    events: tokio::sync::mpsc::Receiver<Result<WatchEvent, LockError>>,
}

impl LockWatch {
    /// The next change; `None` once the client shut down. An error (the server went away)
    /// is reported once and the watch goes on trying.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an event not taken stays for the next call.
    pub async fn next(&mut self) -> Option<Result<WatchEvent, LockError>> {
        self.events.recv().await
    }
}

impl futures_util::Stream for LockWatch {
    type Item = Result<WatchEvent, LockError>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.events.poll_recv(cx)
    }
}

impl std::fmt::Debug for LockWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockWatch").finish_non_exhaustive()
    }
}
