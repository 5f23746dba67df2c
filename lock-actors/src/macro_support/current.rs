//! The hold a `#[distributed_lock]` body runs under, reachable from inside the body (and
//! anything it awaits) as a task-local: [`current`], [`fencing_token`], and the race of a
//! body against the loss of its lock (`on_lost = stop`).

use crate::error::LockError;
use crate::lease::control::LeaseControl;
use crate::lease::loss::LossSignal;
use futures_util::future::join_all;
use futures_util::future::select_all;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

tokio::task_local! {
    /// The hold of the innermost annotated call whose body is running in this task.
    static CURRENT: CurrentLock;
}

/// The hold of the `#[distributed_lock]` call whose body is running: its name, its fencing
/// token, and whether it is lost. Get it with [`current`].
///
/// A lock can be lost while the body runs: the watchdog found it gone, a fixed `lease` ran
/// out, someone force-released it, or Redis was out of reach for longer than the lease.
/// By default the body keeps running; check [`is_lost`](CurrentLock::is_lost) before a step
/// that must not run without the lock, or race a step against [`lost`](CurrentLock::lost).
/// With `on_lost = stop` the attribute does that for the whole body.
///
/// What it stands for by the attribute's form:
///
/// | form | `name()` | `names()` | `fencing_token()` | lost when |
/// |---|---|---|---|---|
/// | one template | the lock's name | that name | the hold's token (`kind = fenced`), else `None` | the lock is lost |
/// | several templates (a MultiLock) | every member's name joined with `", "` | each member's name | `None` | any member is lost (the set no longer excludes) |
/// | `kind = semaphore` | the semaphore's name | that name | `None` | never (its permits have no lease) |
/// | `kind = expirable_semaphore` | the semaphore's name | that name | `None` | the permits are lost |
///
/// With a fixed `lease = "…"`, the body can see how long its hold has left
/// ([`remaining_lease`](CurrentLock::remaining_lease)) and set it again
/// ([`extend`](CurrentLock::extend)) when the work runs longer than planned.
///
/// Cheap to clone; a clone moved into a spawned task keeps reporting on the same hold
/// (after the body ends and the lock is released, `lost()` never resolves).
///
/// # Example
///
/// ```no_run
/// use actix_distributed_lock::{current, distributed_lock, LockClient, LockError};
///
/// #[distributed_lock("report:<day>", client = client)]
/// async fn build_report(client: &LockClient, day: &str) -> Result<(), LockError> {
///     let hold = current().expect("inside an annotated body");
///     for part in 0..10 {
///         if hold.is_lost() {
///             return Err(LockError::Lost { name: hold.name().to_string() });
///         }
///         // build part `part` of the report …
///     }
///     Ok(())
/// }
/// ```
#[derive(Clone)]
pub struct CurrentLock {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    names: Vec<String>,
    watches: Vec<LossSignal>,
    /// Each member's lease (empty until [`CurrentLock::with_leases`]).
    leases: Vec<LeaseControl>,
    token: Option<u64>,
}

impl CurrentLock {
    /// The hold of `members` (name and loss watch of each; never empty), with `token`.
    pub(crate) fn new(members: Vec<(String, LossSignal)>, token: Option<u64>) -> Self {
        let (names, watches): (Vec<String>, Vec<LossSignal>) = members.into_iter().unzip();
        CurrentLock {
            inner: Arc::new(Inner {
                name: names.join(", "),
                names,
                watches,
                leases: Vec::new(),
                token,
            }),
        }
    }

    /// The same hold, with each member's lease (in the order of its members).
    pub(crate) fn with_leases(self, leases: Vec<LeaseControl>) -> Self {
        let inner = &self.inner;
        CurrentLock {
            inner: Arc::new(Inner {
                name: inner.name.clone(),
                names: inner.names.clone(),
                watches: inner.watches.clone(),
                leases,
                token: inner.token,
            }),
        }
    }

    /// Sets the lease of the hold (for a MultiLock: of every member) to `lease` from now,
    /// longer or shorter: for a call with a fixed `lease = "…"`, whose body runs longer
    /// than planned. As [`LockGuard::extend`](crate::LockGuard::extend) (and
    /// [`PermitGuard::update_lease`](crate::PermitGuard::update_lease) for
    /// `kind = expirable_semaphore`): the first failure is returned, [`LockError::Lost`]
    /// for a hold that is gone, [`LockError::InvalidConfig`] for a call without a `lease`
    /// (the watchdog keeps it as long as the body runs) or on plain semaphore permits.
    ///
    /// # Cancel safety
    ///
    /// As [`LockGuard::extend`](crate::LockGuard::extend): the update goes on if the future
    /// is dropped, and the hold counts on the earlier end until Redis confirms it.
    ///
    /// ```no_run
    /// use actix_distributed_lock::{current, distributed_lock, LockClient, LockError};
    /// use std::time::Duration;
    ///
    /// #[distributed_lock("export:<id>", client = client, lease = "30s")]
    /// async fn export(client: &LockClient, id: u64) -> Result<(), LockError> {
    ///     let hold = current().expect("inside an annotated body");
    ///     for _batch in 0..100 {
    ///         if hold.remaining_lease() < Duration::from_secs(10) {
    ///             hold.extend(Duration::from_secs(30)).await?;
    ///         }
    ///         // export one batch …
    ///     }
    ///     Ok(())
    /// }
    /// ```
    pub async fn extend(&self, lease: Duration) -> Result<(), LockError> {
        let updates: Vec<_> = self.inner.leases.iter().map(|l| l.extend(lease)).collect();
        join_all(updates)
            .await
            .into_iter()
            .find_map(Result::err)
            .map_or(Ok(()), Err)
    }

    /// How long the hold (for a MultiLock: every member) is surely still held, from now:
    /// as [`LockGuard::remaining_lease`](crate::LockGuard::remaining_lease), the least of
    /// the members'. `Duration::MAX` for plain semaphore permits (they never run out).
    ///
    /// ```no_run
    /// use actix_distributed_lock::{current, distributed_lock, LockClient, LockError};
    ///
    /// #[distributed_lock("export:<id>", client = client, lease = "30s")]
    /// async fn export(client: &LockClient, id: u64) -> Result<(), LockError> {
    ///     println!("{:?} left", current().unwrap().remaining_lease());
    ///     Ok(())
    /// }
    /// ```
    pub fn remaining_lease(&self) -> Duration {
        let leases = self.inner.leases.iter();
        leases
            .map(LeaseControl::remaining)
            .min()
            .unwrap_or_default()
    }

    /// The lock's name; for a MultiLock, every member's name joined with `", "`.
    ///
    /// ```no_run
    /// use actix_distributed_lock::{current, distributed_lock, LockClient, LockError};
    ///
    /// #[distributed_lock("order:<id>", "stock:<sku>", client = client)]
    /// async fn reserve(client: &LockClient, id: u64, sku: &str) -> Result<(), LockError> {
    ///     assert_eq!(current().unwrap().name(), format!("order:{id}, stock:{sku}"));
    ///     Ok(())
    /// }
    /// ```
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Each lock's name: one for a single template, every member's for a MultiLock, in the
    /// order of the templates.
    ///
    /// ```no_run
    /// use actix_distributed_lock::{current, distributed_lock, LockClient, LockError};
    ///
    /// #[distributed_lock("order:<id>", "stock:<sku>", client = client)]
    /// async fn reserve(client: &LockClient, id: u64, sku: &str) -> Result<(), LockError> {
    ///     assert_eq!(current().unwrap().names().len(), 2);
    ///     Ok(())
    /// }
    /// ```
    pub fn names(&self) -> &[String] {
        &self.inner.names
    }

    /// The hold's fencing token with `kind = fenced`; `None` for every other kind and for a
    /// MultiLock. See [`LockGuard::fencing_token`](crate::LockGuard::fencing_token).
    ///
    /// ```no_run
    /// use actix_distributed_lock::{current, distributed_lock, LockClient, LockError};
    ///
    /// #[distributed_lock("ledger:<id>", client = client, kind = fenced)]
    /// async fn post_entry(client: &LockClient, id: u64) -> Result<u64, LockError> {
    ///     Ok(current().and_then(|hold| hold.fencing_token()).expect("fenced"))
    /// }
    /// ```
    pub fn fencing_token(&self) -> Option<u64> {
        self.inner.token
    }

    /// True once the lock (for a MultiLock: any member) is known to be lost.
    ///
    /// ```no_run
    /// use actix_distributed_lock::{current, distributed_lock, LockClient, LockError};
    ///
    /// #[distributed_lock("job:<id>", client = client)]
    /// async fn job(client: &LockClient, id: u64) -> Result<(), LockError> {
    ///     let hold = current().unwrap();
    ///     if hold.is_lost() {
    ///         return Err(LockError::Lost { name: hold.name().to_string() });
    ///     }
    ///     Ok(())
    /// }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.inner.watches.iter().any(LossSignal::is_lost)
    }

    /// Resolves when the lock (for a MultiLock: any member) is lost while held; never
    /// after the annotated call has released it. The future does not borrow `self`.
    ///
    /// ```no_run
    /// use actix_distributed_lock::{current, distributed_lock, LockClient, LockError};
    ///
    /// #[distributed_lock("job:<id>", client = client)]
    /// async fn job(client: &LockClient, id: u64) -> Result<(), LockError> {
    ///     let hold = current().unwrap();
    ///     tokio::select! {
    ///         _ = hold.lost() => Err(LockError::Lost { name: hold.name().to_string() }),
    ///         _ = async { /* one step that must not outlive the lock */ } => Ok(()),
    ///     }
    /// }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let each: Vec<_> = self.inner.watches.iter().map(LossSignal::lost).collect();
        async move {
            // Never empty: an annotated call holds at least one lock.
            select_all(each).await;
        }
    }

    /// [`LockError::Lost`] naming the lost member (the first in template order), or the
    /// whole name when none is known lost yet.
    fn lost_error(&self) -> LockError {
        let inner = &self.inner;
        let lost = inner.watches.iter().position(LossSignal::is_lost);
        let name = lost.map_or(&inner.name, |index| &inner.names[index]);
        LockError::Lost { name: name.clone() }
    }
}

impl std::fmt::Debug for CurrentLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CurrentLock")
            .field("names", &self.inner.names)
            .field("fencing_token", &self.inner.token)
            .field("lost", &self.is_lost())
            .finish()
    }
}

/// The hold of the innermost `#[distributed_lock]` call whose body is running in this task
/// (a nested annotated call's own hold while its body runs, the enclosing one's again after),
/// or `None` outside any.
///
/// It is a task-local: a `tokio::spawn`ed task starts without it. Move a clone in:
/// `let hold = current(); tokio::spawn(async move { … hold … })`.
///
/// ```
/// assert!(actix_distributed_lock::current().is_none());
/// ```
pub fn current() -> Option<CurrentLock> {
    CURRENT.try_with(CurrentLock::clone).ok()
}

/// The fencing token of the innermost `#[distributed_lock(…, kind = fenced)]` call running in
/// this task, or `None` outside one (or for an unfenced lock); the same as
/// `current().and_then(|hold| hold.fencing_token())`.
///
/// ```no_run
/// use actix_distributed_lock::{distributed_lock, fencing_token, LockClient, LockError};
///
/// #[distributed_lock("ledger:<id>", client = client, kind = fenced)]
/// async fn post_entry(client: &LockClient, id: u64) -> Result<u64, LockError> {
///     let token = fencing_token().expect("inside a fenced lock");
///     // ledger.write_if_newer(id, token, …)
///     Ok(token)
/// }
/// ```
pub fn fencing_token() -> Option<u64> {
    CURRENT
        .try_with(|current| current.fencing_token())
        .ok()
        .flatten()
}

/// Runs an annotated body with `current` as the task's current hold; the body runs on when
/// the lock is lost (`on_lost = keep_running`, the default).
pub async fn run_as_current<F: Future>(current: CurrentLock, body: F) -> F::Output {
    CURRENT.scope(current, body).await
}

/// Runs an annotated body with `current` as the task's current hold until it ends or the
/// lock is lost (`on_lost = stop`): then the body's future is dropped where it waits and
/// the result is [`LockError::Lost`] naming the lost lock. A loss seen before a poll of the
/// body wins over that poll, so no step of the body starts after a loss known here.
pub async fn run_until_lost<F: Future>(
    current: CurrentLock,
    body: F,
) -> Result<F::Output, LockError> {
    let lost = current.lost();
    let body = CURRENT.scope(current.clone(), body);
    tokio::select! {
        biased;
        () = lost => Err(current.lost_error()),
        out = body => Ok(out),
    }
}
