//! What `#[distributed_lock]` expands to calls: kept here so the expansion stays small.
//! Not a public API: names and signatures may change in any release.

mod current;
mod output;
mod owner;

use crate::client::LockClient;
use crate::compose::{MultiLock, MultiLockGuard};
use crate::error::LockError;
use crate::handle::{AcquireOptions, Lock, PermitOptions};
use crate::lease::control::LeaseControl;
use crate::lease::loss::LossSignal;
use crate::lock::{LockGuard, LockOwner};
use crate::semaphore::{PermitGuard, SemaphoreGuard};
use std::future::Future;
use std::sync::{Arc, RwLock};
use std::time::Duration;

pub use crate::kinds::{Family, Kind};
pub use current::{current, fencing_token, run_as_current, run_until_lost, CurrentLock};
pub use output::{fail, fail_from, FromLockError, LockResult};
pub use owner::Turn;

static DEFAULT_CLIENT: RwLock<Option<LockClient>> = RwLock::new(None);

/// Makes `client` the one `#[distributed_lock]` uses outside actix-web handlers when no
/// `client = …` is given. Returns the client it replaces.
///
/// ```no_run
/// # async fn demo() -> Result<(), actix_distributed_lock::LockError> {
/// use actix_distributed_lock::{set_default_client, LockClient};
/// set_default_client(LockClient::from_url("redis://127.0.0.1/").await?);
/// # Ok(()) }
/// ```
pub fn set_default_client(client: LockClient) -> Option<LockClient> {
    let mut slot = DEFAULT_CLIENT.write().unwrap_or_else(|p| p.into_inner());
    slot.replace(client)
}

/// The client set by [`set_default_client`], if any.
///
/// ```
/// # use actix_distributed_lock::default_client;
/// if default_client().is_none() { /* pass `client = …` to the attribute */ }
/// ```
pub fn default_client() -> Option<LockClient> {
    DEFAULT_CLIENT
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// Whatever `client = …` may name: a client, a reference to one, or a shared one.
pub trait AsLockClient {
    /// The client.
    fn as_lock_client(&self) -> &LockClient;
}

impl AsLockClient for LockClient {
    fn as_lock_client(&self) -> &LockClient {
        self
    }
}

impl<T: AsLockClient + ?Sized> AsLockClient for &T {
    fn as_lock_client(&self) -> &LockClient {
        (**self).as_lock_client()
    }
}

impl<T: AsLockClient + ?Sized> AsLockClient for Arc<T> {
    fn as_lock_client(&self) -> &LockClient {
        (**self).as_lock_client()
    }
}

/// The default client, or an error that says how to provide one.
pub fn require_default_client() -> Result<LockClient, LockError> {
    default_client().ok_or_else(|| {
        LockError::invalid_config(
            "#[distributed_lock] has no client: pass `client = …` or call set_default_client()",
        )
    })
}

/// What the attribute asks for besides the name and the wait: the kind, a fixed lease, and
/// (for the semaphore kinds) how many permits.
///
/// ```
/// use actix_distributed_lock::__private::{Kind, Request};
/// let request = Request { kind: Kind::Semaphore, lease: None, permits: 2 };
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// `kind = …`.
    pub kind: Kind,
    /// `lease = …`; the watchdog (or permit renewal) when `None`.
    pub lease: Option<Duration>,
    /// `permits = …`; 1 when not given. Semaphore kinds only.
    pub permits: u32,
}

/// Takes lock (or permits) `name` for `owner` as the attribute's options say, waiting at
/// most `wait` (the client's default wait when `None`).
pub async fn acquire(
    client: &LockClient,
    name: &str,
    owner: LockOwner,
    wait: Option<Duration>,
    request: Request,
) -> Result<Held, LockError> {
    let wait_for = wait.unwrap_or(client.config().default_wait);
    match request.kind {
        Kind::Semaphore => {
            if request.lease.is_some() {
                // The attribute refuses this at compile time; a hand-made request gets an error.
                return Err(LockError::invalid_config(
                    "#[distributed_lock(kind = semaphore)] permits have no lease; use \
                     kind = expirable_semaphore for leased permits",
                ));
            }
            let permits = client
                .semaphore(name)?
                .acquire_timeout(request.permits, wait_for)
                .await?;
            Ok(Held::Permits(permits))
        }
        Kind::ExpirableSemaphore => {
            let mut options = PermitOptions::new().permits(request.permits).wait(wait_for);
            if let Some(lease) = request.lease {
                options = options.lease(lease);
            }
            let permit = client
                .expirable_semaphore(name)?
                .acquire_with(options)
                .await?;
            Ok(Held::Permit(permit))
        }
        kind => {
            let lock = lock_of(client, name, kind)?;
            Ok(Held::Lock(
                lock.acquire_with(options(owner, wait, request.lease))
                    .await?,
            ))
        }
    }
}

/// What `#[distributed_lock]` holds while the body runs: a lock, or one semaphore permit.
#[derive(Debug)]
pub enum Held {
    /// A lock of any kind.
    Lock(LockGuard),
    /// One permit of a semaphore (`kind = semaphore`).
    Permits(SemaphoreGuard),
    /// One permit of a permit-expirable semaphore (`kind = expirable_semaphore`).
    Permit(PermitGuard),
}

impl Held {
    /// The hold's fencing token (fenced locks only).
    pub fn fencing_token(&self) -> Option<u64> {
        match self {
            Held::Lock(guard) => guard.fencing_token(),
            Held::Permits(_) | Held::Permit(_) => None,
        }
    }

    /// True once the hold is known to be lost (plain semaphore permits never are).
    pub fn is_lost(&self) -> bool {
        match self {
            Held::Lock(guard) => guard.is_lost(),
            Held::Permits(_) => false,
            Held::Permit(permit) => permit.is_lost(),
        }
    }

    /// The hold as the body sees it through [`current`].
    pub fn current(&self) -> CurrentLock {
        let (name, watch, lease) = match self {
            Held::Lock(guard) => (guard.name(), guard.loss_signal(), guard.lease_control()),
            Held::Permits(permits) => {
                let what = format!("semaphore `{}`", permits.name());
                (
                    permits.name(),
                    LossSignal::never(),
                    LeaseControl::unleased(what),
                )
            }
            Held::Permit(permit) => (permit.name(), permit.loss_signal(), permit.lease_control()),
        };
        CurrentLock::new(vec![(name.to_string(), watch)], self.fencing_token())
            .with_leases(vec![lease])
    }
}

/// A MultiLock's hold as the body sees it through [`current`]: lost when any member is.
pub fn current_of_many(guard: &MultiLockGuard) -> CurrentLock {
    let members = guard
        .guards()
        .iter()
        .map(|member| (member.name().to_string(), member.loss_signal()))
        .collect();
    let leases = guard
        .guards()
        .iter()
        .map(LockGuard::lease_control)
        .collect();
    CurrentLock::new(members, None).with_leases(leases)
}

/// Takes every lock of `names` (the attribute's several templates) as one [`MultiLock`],
/// all of the same `kind`, for `owner`.
pub async fn acquire_many(
    client: &LockClient,
    names: &[String],
    owner: LockOwner,
    wait: Option<Duration>,
    request: Request,
) -> Result<MultiLockGuard, LockError> {
    let locks = names
        .iter()
        .map(|name| lock_of(client, name, request.kind))
        .collect::<Result<Vec<_>, _>>()?;
    MultiLock::new(locks)?
        .acquire_with(options(owner, wait, request.lease))
        .await
}

/// The lock a MultiLock rejection names: the member the error is about, else all of them.
pub fn failed_lock_name(error: &LockError, all: String) -> String {
    match error {
        LockError::Timeout { name, .. }
        | LockError::NotOwner { name }
        | LockError::Lost { name }
        | LockError::WrongType { name }
        | LockError::AlreadyHeld { name } => name.clone(),
        _ => all,
    }
}

fn options(owner: LockOwner, wait: Option<Duration>, lease: Option<Duration>) -> AcquireOptions {
    let mut options = AcquireOptions::new().owner(owner);
    if let Some(wait) = wait {
        options = options.wait(wait);
    }
    if let Some(lease) = lease {
        options = options.lease(lease);
    }
    options
}

pub(crate) fn lock_of(client: &LockClient, name: &str, kind: Kind) -> Result<Lock, LockError> {
    Ok(match kind {
        Kind::Reentrant => client.lock(name)?,
        Kind::Fenced => client.fenced_lock(name)?,
        Kind::Fast => client.fast_lock(name)?,
        Kind::Fair => client.fair_lock(name)?,
        Kind::Spin => client.spin_lock(name)?,
        Kind::Read => client.read_write_lock(name)?.read().clone(),
        Kind::Write => client.read_write_lock(name)?.write().clone(),
        Kind::Semaphore | Kind::ExpirableSemaphore => {
            // The attribute refuses several templates of a semaphore kind at compile time.
            return Err(LockError::invalid_config(
                "#[distributed_lock] takes permits of one semaphore, not a MultiLock of them",
            ));
        }
        Kind::Latch => {
            // The attribute has no spelling for it; a hand-made request gets an error.
            return Err(LockError::invalid_config(
                "#[distributed_lock] holds locks and permits; a count-down latch is waited on \
                 (LockClient::count_down_latch)",
            ));
        }
    })
}

/// Releases after the body finished normally; an unlock that fails is logged, not raised:
/// the body's result stands, and the lock expires at its lease.
pub async fn release(held: Held) {
    let lost = held.is_lost();
    let failed = match held {
        Held::Lock(guard) => {
            let name = guard.name().to_string();
            guard.unlock().await.err().map(|error| (name, error))
        }
        Held::Permits(permits) => permits.release().await.err().map(|e| (String::new(), e)),
        Held::Permit(permit) => permit.release().await.err().map(|e| (String::new(), e)),
    };
    match failed {
        // The loss was reported when it happened; the refused unlock is its echo.
        Some((name, error)) if lost => {
            tracing::debug!(lock = %name, %error, "release after #[distributed_lock] body: the lock was lost");
        }
        Some((name, error)) => {
            tracing::warn!(lock = %name, %error, "release after #[distributed_lock] body failed");
        }
        None => {}
    }
}

/// [`release`] for the several-template form: releases every member.
pub async fn release_many(guard: MultiLockGuard) {
    let lost = guard.is_lost();
    match guard.unlock().await {
        Err(error) if lost => {
            tracing::debug!(%error, "unlock after #[distributed_lock] body: a member was lost");
        }
        Err(error) => tracing::warn!(%error, "unlock after #[distributed_lock] body failed"),
        Ok(()) => {}
    }
}

/// Pins the output type of the moved body, so `?` inside it knows its error type.
pub fn typed<T, F: Future<Output = T>>(body: F) -> F {
    body
}

/// Milliseconds to a `Duration` (the attribute parses durations at compile time).
pub const fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}
