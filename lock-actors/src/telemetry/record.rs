//! The metrics themselves: names, static keys (so the hot path allocates nothing for its
//! labels), descriptions, and the calls into the installed `metrics` recorder.

use super::{Connection, Kind, LeaseUpdate, Outcome, Series};
use metrics::{Key, Label, Level, Metadata, Unit};
use std::time::Duration;

pub(crate) const ACQUIRE_WAIT: &str = "distributed_lock_acquire_wait_seconds";
pub(crate) const HOLD: &str = "distributed_lock_hold_seconds";
pub(crate) const CONTENDED: &str = "distributed_lock_contended_acquires_total";
pub(crate) const TIMEOUTS: &str = "distributed_lock_acquire_timeouts_total";
pub(crate) const LOST: &str = "distributed_lock_lost_total";
pub(crate) const RENEWAL_FAILURES: &str = "distributed_lock_renewal_failures_total";
pub(crate) const RENEWAL_ROUND: &str = "distributed_lock_renewal_round_seconds";
pub(crate) const RECONNECTS: &str = "distributed_lock_reconnects_total";
pub(crate) const WAITERS: &str = "distributed_lock_waiters";
pub(crate) const LEASE_UPDATES: &str = "distributed_lock_lease_updates_total";

static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

const fn label(key: &'static str, value: &'static str) -> Label {
    Label::from_static_parts(key, value)
}

/// One static key per kind, for metric `$name` labelled by `kind` only.
macro_rules! by_kind {
    (@one $name:expr, $kind:literal) => {{
        static LABELS: [Label; 1] = [label("kind", $kind)];
        Key::from_static_parts($name, &LABELS)
    }};
    ($name:expr; $($variant:ident $kind:literal $family:ident),+) => {
        [$(by_kind!(@one $name, $kind)),+]
    };
}

/// One static key per kind and outcome, for the acquire wait histogram.
macro_rules! by_kind_and_outcome {
    (@one $name:expr, $kind:literal, $outcome:literal) => {{
        static LABELS: [Label; 2] = [label("kind", $kind), label("outcome", $outcome)];
        Key::from_static_parts($name, &LABELS)
    }};
    (@kind $name:expr, $kind:literal) => {
        [
            by_kind_and_outcome!(@one $name, $kind, "acquired"),
            by_kind_and_outcome!(@one $name, $kind, "timeout"),
            by_kind_and_outcome!(@one $name, $kind, "error"),
            by_kind_and_outcome!(@one $name, $kind, "cancelled"),
        ]
    };
    ($name:expr; $($variant:ident $kind:literal $family:ident),+) => {
        [$(by_kind_and_outcome!(@kind $name, $kind)),+]
    };
}

/// One static key per kind and lease update outcome.
macro_rules! by_kind_and_update {
    (@one $name:expr, $kind:literal, $outcome:literal) => {{
        static LABELS: [Label; 2] = [label("kind", $kind), label("outcome", $outcome)];
        Key::from_static_parts($name, &LABELS)
    }};
    ($name:expr; $($variant:ident $kind:literal $family:ident),+) => {
        [$([
            by_kind_and_update!(@one $name, $kind, "updated"),
            by_kind_and_update!(@one $name, $kind, "lost"),
            by_kind_and_update!(@one $name, $kind, "error"),
        ]),+]
    };
}

static ACQUIRE_WAIT_KEYS: [[Key; 4]; Kind::COUNT] = with_kinds!(by_kind_and_outcome, ACQUIRE_WAIT);
static LEASE_UPDATE_KEYS: [[Key; 3]; Kind::COUNT] = with_kinds!(by_kind_and_update, LEASE_UPDATES);
static HOLD_KEYS: [Key; Kind::COUNT] = with_kinds!(by_kind, HOLD);
static CONTENDED_KEYS: [Key; Kind::COUNT] = with_kinds!(by_kind, CONTENDED);
static TIMEOUT_KEYS: [Key; Kind::COUNT] = with_kinds!(by_kind, TIMEOUTS);
static LOST_KEYS: [Key; Kind::COUNT] = with_kinds!(by_kind, LOST);
static WAITER_KEYS: [Key; Kind::COUNT] = with_kinds!(by_kind, WAITERS);
static RENEWAL_FAILURES_KEY: Key = Key::from_static_name(RENEWAL_FAILURES);
static RENEWAL_ROUND_KEY: Key = Key::from_static_name(RENEWAL_ROUND);
static RECONNECT_KEYS: [Key; 2] = [
    {
        static LABELS: [Label; 1] = [label("connection", "subscription")];
        Key::from_static_parts(RECONNECTS, &LABELS)
    },
    {
        static LABELS: [Label; 1] = [label("connection", "primary")];
        Key::from_static_parts(RECONNECTS, &LABELS)
    },
];

/// The key of `series` in a table of static keys: the static one, or (lock-name labels
/// opted in) an owned one with the lock's name added.
fn keyed<T>(static_key: &Key, series: &Series, record: impl FnOnce(&Key) -> T) -> T {
    match &series.lock {
        None => record(static_key),
        Some(name) => {
            let mut labels: Vec<Label> = static_key.labels().cloned().collect();
            labels.push(Label::new("lock", name.to_string()));
            record(&Key::from_parts(static_key.name().to_string(), labels))
        }
    }
}

pub(super) fn acquired(series: &Series, outcome: Outcome, waited: Duration) {
    let key = &ACQUIRE_WAIT_KEYS[series.kind as usize][outcome as usize];
    keyed(key, series, |key| {
        metrics::with_recorder(|r| r.register_histogram(key, &METADATA))
            .record(waited.as_secs_f64())
    });
    if outcome == Outcome::Timeout {
        keyed(&TIMEOUT_KEYS[series.kind as usize], series, |key| {
            metrics::with_recorder(|r| r.register_counter(key, &METADATA)).increment(1)
        });
    }
}

pub(super) fn held(series: &Series, held: Duration) {
    keyed(&HOLD_KEYS[series.kind as usize], series, |key| {
        metrics::with_recorder(|r| r.register_histogram(key, &METADATA)).record(held.as_secs_f64())
    });
}

pub(super) fn contended(series: &Series) {
    keyed(&CONTENDED_KEYS[series.kind as usize], series, |key| {
        metrics::with_recorder(|r| r.register_counter(key, &METADATA)).increment(1)
    });
}

pub(super) fn lost(series: &Series) {
    keyed(&LOST_KEYS[series.kind as usize], series, |key| {
        metrics::with_recorder(|r| r.register_counter(key, &METADATA)).increment(1)
    });
}

pub(super) fn waiters(series: &Series, delta: f64) {
    keyed(&WAITER_KEYS[series.kind as usize], series, |key| {
        let gauge = metrics::with_recorder(|r| r.register_gauge(key, &METADATA));
        if delta >= 0.0 {
            gauge.increment(delta)
        } else {
            gauge.decrement(-delta)
        }
    });
}

pub(super) fn lease_updated(series: &Series, outcome: LeaseUpdate) {
    let key = &LEASE_UPDATE_KEYS[series.kind as usize][outcome as usize];
    debug_assert_eq!(
        key.labels().nth(1).map(|l| l.value()),
        Some(outcome.as_str())
    );
    keyed(key, series, |key| {
        metrics::with_recorder(|r| r.register_counter(key, &METADATA)).increment(1)
    });
}

pub(super) fn renewal_failed() {
    metrics::with_recorder(|r| r.register_counter(&RENEWAL_FAILURES_KEY, &METADATA)).increment(1);
}

pub(super) fn renewal_round(took: Duration) {
    metrics::with_recorder(|r| r.register_histogram(&RENEWAL_ROUND_KEY, &METADATA))
        .record(took.as_secs_f64());
}

pub(super) fn reconnected(connection: Connection) {
    let key = &RECONNECT_KEYS[connection as usize];
    debug_assert_eq!(
        key.labels().next().map(|l| l.value()),
        Some(connection.as_str())
    );
    metrics::with_recorder(|r| r.register_counter(key, &METADATA)).increment(1);
}

pub(super) fn describe() {
    metrics::with_recorder(|r| {
        let seconds = Some(Unit::Seconds);
        let count = Some(Unit::Count);
        r.describe_histogram(
            ACQUIRE_WAIT.into(),
            seconds,
            "Time from asking for a lock (or permits) to the end of the acquire, by kind and \
             outcome (acquired, timeout, error, cancelled)."
                .into(),
        );
        r.describe_histogram(
            HOLD.into(),
            seconds,
            "Time a guard held its lock (or permits): from the grant to its release or drop."
                .into(),
        );
        r.describe_counter(
            CONTENDED.into(),
            count,
            "Acquires that found the lock (or permits) taken at their first try and had to wait."
                .into(),
        );
        r.describe_counter(
            TIMEOUTS.into(),
            count,
            "Acquires that gave up because their wait ran out.".into(),
        );
        r.describe_counter(
            LOST.into(),
            count,
            "Holders in this process that lost their lock (or permits) while holding it.".into(),
        );
        r.describe_counter(
            RENEWAL_FAILURES.into(),
            count,
            "Renewal batches (watchdog and permit renewals) that failed; every failed retry \
             counts."
                .into(),
        );
        r.describe_histogram(
            RENEWAL_ROUND.into(),
            seconds,
            "Time of one renewal round of one node, until every batch in it answered.".into(),
        );
        r.describe_counter(
            RECONNECTS.into(),
            count,
            "Connections that came back after they were lost, by connection (subscription, \
             primary)."
                .into(),
        );
        r.describe_counter(
            LEASE_UPDATES.into(),
            count,
            "Fixed leases set again by their holders (a lock guard's extend, a permit's lease \
             update), by kind and outcome (updated, lost, error)."
                .into(),
        );
        r.describe_gauge(
            WAITERS.into(),
            count,
            "Acquires waiting in this process's local wait queues (the head trying in Redis \
             included)."
                .into(),
        );
    });
}
