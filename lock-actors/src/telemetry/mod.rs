//! Telemetry: the one place that records metrics (through the `metrics` crate's facade,
//! with the `metrics` feature; the application installs the exporter) and opens the
//! acquire and renewal-round spans (`tracing`, always).
//!
//! Every hook is one ungated call at its site: without the `metrics` feature the recording
//! functions are empty and the timers are zero-sized, so they compile to nothing. With it,
//! the labels of every series are static (`kind`, `outcome`, `connection`): recording
//! allocates nothing unless [`ClientConfig::metrics_lock_name_labels`] asks for the lock
//! name as a label too.
//!
//! [`ClientConfig::metrics_lock_name_labels`]: crate::ClientConfig

/// The `kind` label of every series and span: [`Kind::name`] of the one list of kinds
/// (`crate::kinds`); each kind's module maps its own kind onto it.
pub(crate) use crate::kinds::Kind;

#[cfg(feature = "metrics")]
mod record;

use crate::config::ClientConfig;
use crate::error::LockError;
use crate::keys::LockName;
use std::future::Future;
use std::time::{Duration, Instant};
use tracing::field::{debug, Empty};
use tracing::Instrument;

/// How an acquire ended (the `outcome` label and span field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Acquired = 0,
    Timeout = 1,
    Error = 2,
    /// The caller dropped the acquire's future before it ended.
    Cancelled = 3,
}

impl Outcome {
    fn of<T>(result: &Result<T, LockError>) -> Self {
        match result {
            Ok(_) => Outcome::Acquired,
            Err(LockError::Timeout { .. }) => Outcome::Timeout,
            Err(_) => Outcome::Error,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Acquired => "acquired",
            Outcome::Timeout => "timeout",
            Outcome::Error => "error",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// The labels of one lock's series: its kind, and its name when the client opted in.
#[derive(Clone)]
pub(crate) struct Series {
    #[cfg(feature = "metrics")]
    kind: Kind,
    #[cfg(feature = "metrics")]
    lock: Option<LockName>,
}

impl Series {
    pub(crate) fn new(kind: impl Into<Kind>, name: &LockName, config: &ClientConfig) -> Self {
        #[cfg(not(feature = "metrics"))]
        {
            let _ = (kind, name, config);
            Series {}
        }
        #[cfg(feature = "metrics")]
        Series {
            kind: kind.into(),
            lock: config.metrics_lock_name_labels.then(|| name.clone()),
        }
    }
}

/// Runs one acquire (`attempt`) inside its span (`lock.acquire`: lock, kind, outcome,
/// waited) and records its wait time by outcome, and a timeout. A dropped future records
/// the outcome `cancelled`.
pub(crate) async fn acquire<T>(
    kind: impl Into<Kind>,
    name: &LockName,
    config: &ClientConfig,
    attempt: impl Future<Output = Result<T, LockError>>,
) -> Result<T, LockError> {
    let kind = kind.into();
    let span = tracing::debug_span!("lock.acquire", lock = %name, kind = kind.name(),
        outcome = Empty, waited = Empty);
    let mut ending = Ending {
        series: Series::new(kind, name, config),
        started: (cfg!(feature = "metrics") || !span.is_disabled()).then(Instant::now),
        span: span.clone(),
        outcome: Outcome::Cancelled,
    };
    let result = attempt.instrument(span).await;
    ending.outcome = Outcome::of(&result);
    result
}

/// Records an acquire's end when dropped: at its end, or when its future is dropped.
struct Ending {
    series: Series,
    started: Option<Instant>,
    span: tracing::Span,
    outcome: Outcome,
}

impl Drop for Ending {
    fn drop(&mut self) {
        let waited = self.started.map(|at| at.elapsed()).unwrap_or_default();
        self.span.record("outcome", self.outcome.as_str());
        self.span.record("waited", debug(waited));
        #[cfg(feature = "metrics")]
        record::acquired(&self.series, self.outcome, waited);
        #[cfg(not(feature = "metrics"))]
        let _ = &self.series;
    }
}

/// An acquire found the lock (or the permits) taken at its first try, so it waits (or,
/// allowed no wait, gives up).
pub(crate) fn contended(kind: impl Into<Kind>, name: &LockName, config: &ClientConfig) {
    #[cfg(feature = "metrics")]
    record::contended(&Series::new(kind, name, config));
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, name, config);
}

/// A holder here lost its lock (or its permits) while it held it.
pub(crate) fn lost(kind: impl Into<Kind>, name: &LockName, config: &ClientConfig) {
    #[cfg(feature = "metrics")]
    record::lost(&Series::new(kind, name, config));
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, name, config);
}

/// How a guard's request to set its lease again ended (the `outcome` label of the lease
/// updates counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseUpdate {
    /// Redis holds the new lease.
    Updated = 0,
    /// The hold (or a permit) was gone.
    Lost = 1,
    /// Redis did not answer, or refused: the guard keeps the shorter of both leases.
    Error = 2,
}

impl LeaseUpdate {
    /// The outcome of a lease update that answered `result` (`Lost`: the hold was gone).
    pub(crate) fn of<T>(result: &Result<T, LockError>) -> Self {
        match result {
            Ok(_) => LeaseUpdate::Updated,
            Err(LockError::Lost { .. }) => LeaseUpdate::Lost,
            Err(_) => LeaseUpdate::Error,
        }
    }

    #[cfg(feature = "metrics")]
    fn as_str(self) -> &'static str {
        match self {
            LeaseUpdate::Updated => "updated",
            LeaseUpdate::Lost => "lost",
            LeaseUpdate::Error => "error",
        }
    }
}

/// A guard's lease was set again (a lock hold's `extend`, a permit's `update_lease`), with
/// `outcome`.
pub(crate) fn lease_updated(
    kind: impl Into<Kind>,
    name: &LockName,
    config: &ClientConfig,
    outcome: LeaseUpdate,
) {
    tracing::debug!(lock = %name, outcome = ?outcome, "lease set again");
    #[cfg(feature = "metrics")]
    record::lease_updated(&Series::new(kind, name, config), outcome);
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, name, config, outcome);
}

/// A connection of a node came back after it was lost (`connection`: `subscription`, or
/// `primary` for a Sentinel-named primary reached anew).
pub(crate) fn reconnected(connection: Connection) {
    #[cfg(feature = "metrics")]
    record::reconnected(connection);
    #[cfg(not(feature = "metrics"))]
    let _ = connection;
}

/// Which connection of a node came back (the `connection` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Connection {
    Subscription = 0,
    Primary = 1,
}

impl Connection {
    #[cfg(feature = "metrics")]
    fn as_str(self) -> &'static str {
        match self {
            Connection::Subscription => "subscription",
            Connection::Primary => "primary",
        }
    }
}

/// Describes every metric (name, unit, meaning) to the installed recorder; called when a
/// client starts, so an exporter installed before it shows them with their help text.
pub(crate) fn describe() {
    #[cfg(feature = "metrics")]
    record::describe();
}

/// How long a guard held its lock (or permits): recorded when it is dropped (released,
/// unlocked, or lost and dropped). Zero-sized without the `metrics` feature.
#[derive(Default)]
pub(crate) struct HoldTimer {
    #[cfg(feature = "metrics")]
    since: Option<(Instant, Series)>,
}

impl HoldTimer {
    /// Starts timing a hold of lock `name`.
    pub(crate) fn start(kind: impl Into<Kind>, name: &LockName, config: &ClientConfig) -> Self {
        #[cfg(not(feature = "metrics"))]
        {
            let _ = (kind, name, config);
            HoldTimer {}
        }
        #[cfg(feature = "metrics")]
        HoldTimer {
            since: Some((Instant::now(), Series::new(kind, name, config))),
        }
    }
}

#[cfg(feature = "metrics")]
impl Drop for HoldTimer {
    fn drop(&mut self) {
        if let Some((since, series)) = self.since.take() {
            record::held(&series, since.elapsed());
        }
    }
}

/// One waiter in a local wait queue: counts in the `waiters` gauge while it lives (it
/// lives in the waiter's payload, so it leaves the count with the waiter, however the
/// waiter ends). Zero-sized without the `metrics` feature.
pub(crate) struct Queued {
    #[cfg(feature = "metrics")]
    series: Series,
}

impl Queued {
    pub(crate) fn new(kind: impl Into<Kind>, name: &LockName, config: &ClientConfig) -> Self {
        #[cfg(not(feature = "metrics"))]
        {
            let _ = (kind, name, config);
            Queued {}
        }
        #[cfg(feature = "metrics")]
        {
            let series = Series::new(kind, name, config);
            record::waiters(&series, 1.0);
            Queued { series }
        }
    }
}

impl Queued {
    /// Leaves the count now (before the waiter's asker hears its answer).
    pub(crate) fn leave(self) {}
}

#[cfg(feature = "metrics")]
impl Drop for Queued {
    fn drop(&mut self) {
        record::waiters(&self.series, -1.0);
    }
}

/// One renewal round of one node's renewal service: its span (`lock.renewal_round`:
/// node, renewed, lost, failures, duration) and, once every batch sent in it answered,
/// its time. Retries of a failed batch are not part of the round (each failure counts).
pub(crate) struct RenewalRound {
    span: tracing::Span,
    started: Instant,
    batches_left: usize,
    renewed: usize,
    lost: usize,
    failures: usize,
}

impl RenewalRound {
    /// A round of `batches` batches starts on node `node`.
    pub(crate) fn start(node: &str, batches: usize) -> Self {
        RenewalRound {
            span: tracing::debug_span!(
                "lock.renewal_round",
                node,
                batches,
                renewed = Empty,
                lost = Empty,
                failures = Empty,
                duration = Empty
            ),
            started: Instant::now(),
            batches_left: batches,
            renewed: 0,
            lost: 0,
            failures: 0,
        }
    }

    /// A batch of this round was answered: `renewed` entries renewed, `lost` found gone.
    /// Returns whether that was the round's last batch (the round is recorded then).
    pub(crate) fn renewed(&mut self, renewed: usize, lost: usize) -> bool {
        self.renewed += renewed;
        self.lost += lost;
        self.answered()
    }

    /// A batch of this round failed (it retries on its own, outside the round).
    pub(crate) fn failed(&mut self) -> bool {
        self.failures += 1;
        self.answered()
    }

    fn answered(&mut self) -> bool {
        self.batches_left = self.batches_left.saturating_sub(1);
        if self.batches_left > 0 {
            return false;
        }
        let duration: Duration = self.started.elapsed();
        self.span.record("renewed", self.renewed);
        self.span.record("lost", self.lost);
        self.span.record("failures", self.failures);
        self.span.record("duration", debug(duration));
        #[cfg(feature = "metrics")]
        record::renewal_round(duration);
        true
    }
}

/// A renewal batch failed (a retry that fails counts again).
pub(crate) fn renewal_failed() {
    #[cfg(feature = "metrics")]
    record::renewal_failed();
}
