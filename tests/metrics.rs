#![cfg(feature = "metrics")]
// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]
//! The `metrics` feature: exact counts of every metric, recorded into metrics-util's
//! `DebuggingRecorder` against a real redis-server, and the acquire and renewal spans.
//!
//! The lock actors record on the shared actor thread, so the recorder (and the tracing
//! subscriber) are global to this test binary; the tests take turns (`TURN`) and assert
//! on differences between snapshots, so none sees another's counts.

use actix_distributed_lock::{Lock, LockClient, LockError, LockGuard};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redis::AsyncCommands;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use support::RedisServer;

/// One test at a time: they share the global recorder.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What the spans and events of the whole binary printed (see `install`).
static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();

/// The global recorder's snapshotter (and the global subscriber), installed once.
fn install() -> &'static Snapshotter {
    static SNAPSHOTTER: OnceLock<Snapshotter> = OnceLock::new();
    SNAPSHOTTER.get_or_init(|| {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder
            .install()
            .expect("the only recorder of this binary");
        let log = LOG.get_or_init(Default::default).clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .with_ansi(false)
            .with_writer(move || SharedLog(log.clone()))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        snapshotter
    })
}

struct SharedLog(Arc<Mutex<Vec<u8>>>);

impl Write for SharedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The log's lines from `from` on that close span `name`.
fn closed_spans(from: usize, name: &str) -> Vec<String> {
    let log = LOG.get().unwrap().lock().unwrap();
    String::from_utf8_lossy(&log[from..])
        .lines()
        .filter(|line| line.contains(&format!("{name}{{")) && line.contains("close"))
        .map(str::to_string)
        .collect()
}

fn log_len() -> usize {
    LOG.get().map_or(0, |log| log.lock().unwrap().len())
}

/// Counters and gauges as they stand, and histogram samples recorded since the last
/// `Figures::now()`, by `name{label=value,...}` (labels sorted).
#[derive(Default)]
struct Figures {
    values: BTreeMap<String, f64>,
    samples: BTreeMap<String, Vec<f64>>,
}

/// Histogram samples drained by a snapshot and not yet handed out by `Figures::now()`.
static UNCLAIMED: Mutex<BTreeMap<String, Vec<f64>>> = Mutex::new(BTreeMap::new());

impl Figures {
    fn now() -> Figures {
        let values = values();
        let samples = std::mem::take(&mut *UNCLAIMED.lock().unwrap());
        Figures { values, samples }
    }

    fn counter(&self, id: &str) -> u64 {
        self.values.get(id).copied().unwrap_or(0.0) as u64
    }

    fn gauge(&self, id: &str) -> f64 {
        self.values.get(id).copied().unwrap_or(0.0)
    }

    fn samples(&self, id: &str) -> &[f64] {
        self.samples.get(id).map_or(&[], Vec::as_slice)
    }
}

/// Counter `id` went up by exactly `by` between `before` and `after`.
#[track_caller]
fn assert_rose(before: &Figures, after: &Figures, id: &str, by: u64) {
    assert_eq!(
        after.counter(id) - before.counter(id),
        by,
        "{id}: {} -> {}",
        before.counter(id),
        after.counter(id)
    );
}

const WAIT_ACQUIRED: &str =
    "distributed_lock_acquire_wait_seconds{kind=reentrant,outcome=acquired}";
const WAIT_TIMEOUT: &str = "distributed_lock_acquire_wait_seconds{kind=reentrant,outcome=timeout}";
const WAIT_CANCELLED: &str =
    "distributed_lock_acquire_wait_seconds{kind=reentrant,outcome=cancelled}";
const HOLD: &str = "distributed_lock_hold_seconds{kind=reentrant}";
const CONTENDED: &str = "distributed_lock_contended_acquires_total{kind=reentrant}";
const TIMEOUTS: &str = "distributed_lock_acquire_timeouts_total{kind=reentrant}";
const WAITERS: &str = "distributed_lock_waiters{kind=reentrant}";
const LOST: &str = "distributed_lock_lost_total{kind=reentrant}";
const RENEWAL_FAILURES: &str = "distributed_lock_renewal_failures_total{}";
const RENEWAL_ROUND: &str = "distributed_lock_renewal_round_seconds{}";

/// Counters and gauges by `name{label=value,...}` (labels sorted), as totals: the
/// debugging recorder hands out (and zeroes) what changed since its last snapshot, so the
/// totals add those up (a gauge moved only by increments and decrements adds up too). The
/// histogram samples a snapshot drains are kept for the next `Figures::now()`.
fn values() -> BTreeMap<String, f64> {
    static TOTALS: Mutex<BTreeMap<String, f64>> = Mutex::new(BTreeMap::new());
    let mut totals = TOTALS.lock().unwrap();
    let mut unclaimed = UNCLAIMED.lock().unwrap();
    for (key, _, _, value) in install().snapshot().into_vec() {
        let key = key.key();
        let mut labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        let id = format!("{}{{{}}}", key.name(), labels.join(","));
        match value {
            DebugValue::Counter(n) => *totals.entry(id).or_default() += n as f64,
            DebugValue::Gauge(g) => *totals.entry(id).or_default() += g.into_inner(),
            DebugValue::Histogram(drained) => unclaimed
                .entry(id)
                .or_default()
                .extend(drained.into_iter().map(|v| v.into_inner())),
        }
    }
    totals.clone()
}

/// Waits until counter or gauge `id` reads `value`.
async fn until_reads(id: &str, value: f64) {
    let what = format!("{id} == {value}");
    support::eventually(&what, Duration::from_secs(10), || {
        let now = values().get(id).copied().unwrap_or(0.0);
        async move { now == value }
    })
    .await;
}

/// This test's turn (see `TURN`), with the recorder installed, and a server of its own.
async fn turn() -> (tokio::sync::MutexGuard<'static, ()>, RedisServer) {
    let turn = TURN.lock().await;
    install();
    (turn, RedisServer::start())
}

/// Two clients of `server`, as two processes would be: lock `name` held by the first.
async fn held_elsewhere(server: &RedisServer, name: &str) -> (LockClient, LockClient, LockGuard) {
    let holder = support::client(server).await;
    let waiter = support::client(server).await;
    let held = holder.lock(name).unwrap().acquire().await.unwrap();
    (holder, waiter, held)
}

#[tokio::test]
async fn uncontended_acquires_give_one_wait_and_one_hold_sample_each() {
    let (_turn, server) = turn().await;
    let client = support::client(&server).await;
    let lock = client.lock("metrics:plain").unwrap();
    let before = Figures::now();
    let log_from = log_len();
    for _ in 0..5 {
        let guard = lock.acquire().await.unwrap();
        guard.unlock().await.unwrap();
    }
    let after = Figures::now();
    assert_eq!(after.samples(WAIT_ACQUIRED).len(), 5);
    assert_eq!(after.samples(HOLD).len(), 5);
    assert!(after
        .samples(WAIT_ACQUIRED)
        .iter()
        .all(|s| *s >= 0.0 && *s < 10.0));
    assert_rose(&before, &after, CONTENDED, 0);
    assert_rose(&before, &after, TIMEOUTS, 0);
    assert_eq!(after.gauge(WAITERS), 0.0);
    // One closed span per acquire, with its fields.
    let spans = closed_spans(log_from, "lock.acquire");
    assert_eq!(spans.len(), 5, "{spans:#?}");
    for span in &spans {
        assert!(span.contains("lock=metrics:plain"), "{span}");
        assert!(span.contains("kind=\"reentrant\""), "{span}");
        assert!(span.contains("outcome=\"acquired\""), "{span}");
        assert!(span.contains("waited="), "{span}");
    }
    client.shutdown();
}

#[tokio::test]
async fn a_busy_lock_counts_contention_timeouts_cancellations_and_waiters() {
    let (_turn, server) = turn().await;
    let name = "metrics:busy";
    let (holder, waiter, held) = held_elsewhere(&server, name).await;
    let before = Figures::now();
    let log_from = log_len();

    // A bounded wait that runs out: one timeout, one wait sample by outcome `timeout`.
    let error = waiter
        .lock(name)
        .unwrap()
        .acquire_timeout(Duration::from_millis(100))
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{error}");
    let timed_out = Figures::now();
    assert_eq!(timed_out.samples(WAIT_TIMEOUT).len(), 1);
    assert!(timed_out.samples(WAIT_TIMEOUT)[0] >= 0.1);
    assert!(timed_out.samples(WAIT_ACQUIRED).is_empty());
    assert_rose(&before, &timed_out, TIMEOUTS, 1);
    assert_rose(&before, &timed_out, CONTENDED, 1);
    assert_eq!(timed_out.gauge(WAITERS), 0.0);

    // A waiter whose caller gives up (drops the future) while it is queued.
    let lock = waiter.lock(name).unwrap();
    let abandoned =
        tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(30)).await });
    until_reads(WAITERS, 1.0).await;
    abandoned.abort();
    until_reads(WAITERS, 0.0).await;

    // A waiter that gets the lock when the holder lets go.
    let lock = waiter.lock(name).unwrap();
    let waiting = tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(30)).await });
    until_reads(WAITERS, 1.0).await;
    held.unlock().await.unwrap();
    let guard = waiting.await.unwrap().unwrap();
    guard.unlock().await.unwrap();

    let after = Figures::now();
    assert_eq!(after.samples(WAIT_CANCELLED).len(), 1);
    assert_eq!(after.samples(WAIT_ACQUIRED).len(), 1);
    assert!(after.samples(WAIT_TIMEOUT).is_empty());
    // The first holder's hold (taken before, recorded at its unlock) and the waiter's.
    assert_eq!(after.samples(HOLD).len(), 2);
    assert_rose(&timed_out, &after, CONTENDED, 2);
    assert_rose(&timed_out, &after, TIMEOUTS, 0);
    assert_eq!(after.gauge(WAITERS), 0.0);

    let spans = closed_spans(log_from, "lock.acquire");
    let outcomes: Vec<&str> = spans
        .iter()
        .map(|span| {
            ["acquired", "timeout", "cancelled", "error"]
                .into_iter()
                .find(|o| span.contains(&format!("outcome=\"{o}\"")))
                .unwrap_or("none")
        })
        .collect();
    assert_eq!(outcomes, ["timeout", "cancelled", "acquired"], "{spans:#?}");
    holder.shutdown();
    waiter.shutdown();
}

/// A semaphore waiter whose caller gives up leaves the waiters gauge at once, also as the
/// head of the queue asleep until the fallback poll (5 s).
#[tokio::test]
async fn a_cancelled_semaphore_head_leaves_the_waiters_gauge_at_once() {
    const SEMAPHORE_WAITERS: &str = "distributed_lock_waiters{kind=semaphore}";
    let (_turn, server) = turn().await;
    let holder = support::client(&server).await;
    let waiter = support::client(&server).await;
    let semaphore = holder.semaphore("metrics:slots").unwrap();
    semaphore.set_permits(1).await.unwrap();
    let held = semaphore.acquire(1).await.unwrap();
    let baseline = values().get(SEMAPHORE_WAITERS).copied().unwrap_or(0.0);
    let theirs = waiter.semaphore("metrics:slots").unwrap();
    let gets = server.command_calls("get").await;
    let abandoned =
        tokio::spawn(async move { theirs.acquire_timeout(1, Duration::from_secs(30)).await });
    // Parked: it tried, subscribed, tried again and sleeps.
    support::eventually("the waiter is parked", Duration::from_secs(10), || async {
        server.subscribers("redisson_sc:{metrics:slots}").await >= 1
            && server.command_calls("get").await >= gets + 2
    })
    .await;
    until_reads(SEMAPHORE_WAITERS, baseline + 1.0).await;
    abandoned.abort();
    let what = format!("{SEMAPHORE_WAITERS} back to {baseline} within 1 s");
    support::eventually(&what, Duration::from_secs(1), || {
        let now = values().get(SEMAPHORE_WAITERS).copied().unwrap_or(0.0);
        async move { now == baseline }
    })
    .await;
    held.release().await.unwrap();
    holder.shutdown();
    waiter.shutdown();
}

/// How many NOPERM errors (commands an ACL refused) `server` has answered so far.
async fn refused_commands(server: &RedisServer) -> u64 {
    let mut conn = server.conn().await;
    let info: String = redis::cmd("INFO")
        .arg("errorstats")
        .query_async(&mut conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix("errorstat_NOPERM:count="))
        .map_or(0, |n| n.trim().parse().unwrap())
}

/// Lets the default user (everyone here) run scripts, or not.
async fn allow_scripts(server: &RedisServer, allowed: bool) {
    let mut conn = server.conn().await;
    let rule = if allowed {
        "+@scripting"
    } else {
        "-@scripting"
    };
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("default")
        .arg(rule)
        .query_async(&mut conn)
        .await
        .unwrap();
}

#[tokio::test]
async fn renewal_failures_and_a_lost_lock_are_counted_exactly() {
    let (_turn, server) = turn().await;
    let client = support::client_with(&server, |config| {
        config
            .watchdog_timeout(Duration::from_secs(3))
            .renew_every(Duration::from_millis(300))
    })
    .await;
    let name = "metrics:lost";
    let guard = client.lock(name).unwrap().acquire().await.unwrap();
    let before = Figures::now();
    let refused_before = refused_commands(&server).await;
    let log_from = log_len();

    // The server refuses scripts: every renewal batch fails (NOPERM) and is retried with
    // backoff.
    allow_scripts(&server, false).await;
    let failures = before.counter(RENEWAL_FAILURES) as f64;
    support::eventually("two failed renewals", Duration::from_secs(10), || {
        let now = values().get(RENEWAL_FAILURES).copied().unwrap_or(0.0);
        async move { now >= failures + 2.0 }
    })
    .await;
    // Meanwhile the lock's key went away: once scripts run again, the next renewal finds
    // the hold gone, and the holder is told.
    let mut conn = server.conn().await;
    let _: () = conn.del(name).await.unwrap();
    allow_scripts(&server, true).await;
    tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("the holder hears its lock is lost");
    // Every renewal the server refused is counted, once.
    let refused = refused_commands(&server).await - refused_before;
    assert!(refused >= 2);
    until_reads(RENEWAL_FAILURES, failures + refused as f64).await;
    // Until the loss is counted: the renewal service marks the hold lost for its guards at
    // once and then tells the lock actor, which counts it (lock/lease_entry.rs, `lost`), so
    // the count may come a moment after `lost()` resolved. A count that never comes fails
    // here.
    until_reads(LOST, before.counter(LOST) as f64 + 1.0).await;
    let after = Figures::now();
    assert_rose(&before, &after, LOST, 1);
    assert_rose(&before, &after, RENEWAL_FAILURES, refused);
    assert!(!after.samples(RENEWAL_ROUND).is_empty());
    // A round whose batch failed says so in its span.
    let rounds = closed_spans(log_from, "lock.renewal_round");
    assert!(
        rounds.iter().any(|r| r.contains("failures=1")),
        "{rounds:#?}"
    );
    drop(guard);
    client.shutdown();
}

#[tokio::test]
async fn healthy_renewal_rounds_are_timed_and_renew_every_hold() {
    let (_turn, server) = turn().await;
    let client = support::client_with(&server, |config| {
        config
            .watchdog_timeout(Duration::from_secs(3))
            .renew_every(Duration::from_millis(200))
    })
    .await;
    let a = client
        .lock("metrics:renewed:a")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let b = client
        .lock("metrics:renewed:b")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let before = Figures::now();
    let log_from = log_len();
    support::eventually("two renewal rounds", Duration::from_secs(10), || {
        let rounds = closed_spans(log_from, "lock.renewal_round").len();
        async move { rounds >= 2 }
    })
    .await;
    a.unlock().await.unwrap();
    b.unlock().await.unwrap();
    let after = Figures::now();
    let rounds = closed_spans(log_from, "lock.renewal_round");
    assert!(after.samples(RENEWAL_ROUND).len() >= rounds.len());
    for round in &rounds[..2] {
        assert!(round.contains("renewed=2"), "{round}");
        assert!(round.contains("failures=0"), "{round}");
        assert!(round.contains("lost=0"), "{round}");
    }
    assert_rose(&before, &after, RENEWAL_FAILURES, 0);
    assert_rose(&before, &after, LOST, 0);
    client.shutdown();
}

#[tokio::test]
async fn lock_names_are_labels_only_when_asked_for() {
    let (_turn, server) = turn().await;
    let named = support::client_with(&server, |config| config.metrics_lock_name_labels(true)).await;
    let plain = support::client(&server).await;
    Figures::now(); // drains samples of earlier tests
    let guard = named
        .fast_lock("metrics:named")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    guard.unlock().await.unwrap();
    let guard = plain
        .fast_lock("metrics:unnamed")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    guard.unlock().await.unwrap();
    let after = Figures::now();
    let wait = "distributed_lock_acquire_wait_seconds";
    let hold = "distributed_lock_hold_seconds";
    let named_wait = format!("{wait}{{kind=fast,lock=metrics:named,outcome=acquired}}");
    assert_eq!(after.samples(&named_wait).len(), 1);
    assert_eq!(
        after
            .samples(&format!("{wait}{{kind=fast,outcome=acquired}}"))
            .len(),
        1
    );
    assert_eq!(
        after
            .samples(&format!("{hold}{{kind=fast,lock=metrics:named}}"))
            .len(),
        1
    );
    assert_eq!(after.samples(&format!("{hold}{{kind=fast}}")).len(), 1);
    let all: Vec<&String> = after.samples.keys().chain(after.values.keys()).collect();
    assert!(
        all.iter().all(|id| !id.contains("metrics:unnamed")),
        "{all:#?}"
    );
    named.shutdown();
    plain.shutdown();
}

#[tokio::test]
async fn semaphores_are_counted_by_their_own_kind() {
    let (_turn, server) = turn().await;
    let client = support::client(&server).await;
    let slots = client.semaphore("metrics:slots").unwrap();
    assert!(slots.try_set_permits(1).await.unwrap());
    let before = Figures::now();
    let permit = slots.acquire(1).await.unwrap();
    assert!(slots.try_acquire(1).await.unwrap().is_none());
    drop(permit);
    let expirable = client.expirable_semaphore("metrics:leased").unwrap();
    assert!(expirable.try_set_permits(1).await.unwrap());
    let guard = expirable.acquire(1).await.unwrap();
    guard.release().await.unwrap();
    let after = Figures::now();
    let wait = "distributed_lock_acquire_wait_seconds";
    assert_eq!(
        after
            .samples(&format!("{wait}{{kind=semaphore,outcome=acquired}}"))
            .len(),
        1
    );
    assert_eq!(
        after
            .samples(&format!("{wait}{{kind=semaphore,outcome=timeout}}"))
            .len(),
        1
    );
    let expirable_wait = format!("{wait}{{kind=expirable_semaphore,outcome=acquired}}");
    assert_eq!(after.samples(&expirable_wait).len(), 1);
    let timeouts = "distributed_lock_acquire_timeouts_total{kind=semaphore}";
    assert_rose(&before, &after, timeouts, 1);
    let contended = "distributed_lock_contended_acquires_total{kind=semaphore}";
    assert_rose(&before, &after, contended, 1);
    // The permit given back by its drop is recorded when its guard goes.
    assert_eq!(
        after
            .samples("distributed_lock_hold_seconds{kind=semaphore}")
            .len(),
        1
    );
    let expirable_hold = "distributed_lock_hold_seconds{kind=expirable_semaphore}";
    assert_eq!(after.samples(expirable_hold).len(), 1);
    client.shutdown();
}

#[tokio::test]
async fn spin_locks_are_counted_by_their_own_kind() {
    counted_by_its_own_kind("spin", |client, name| client.spin_lock(name)).await;
}

/// A fenced lock is a reentrant lock whose holds draw a token; its acquires, waits and holds
/// count under `kind=fenced`, as every other place that names kinds calls it.
#[tokio::test]
async fn fenced_locks_are_counted_by_their_own_kind() {
    counted_by_its_own_kind("fenced", |client, name| client.fenced_lock(name)).await;
}

/// One busy acquire that times out, then one that gets the lock, on a lock `open` makes:
/// each counts under `kind`, and nothing under another label stands in for it.
async fn counted_by_its_own_kind(
    kind: &str,
    open: fn(&LockClient, &str) -> Result<Lock, LockError>,
) {
    let (_turn, server) = turn().await;
    let holder = support::client(&server).await;
    let waiter = support::client(&server).await;
    let name = format!("metrics:{kind}");
    let held = open(&holder, &name).unwrap().acquire().await;
    let lock = open(&waiter, &name).unwrap();
    let before = Figures::now();
    let busy = lock.acquire_timeout(Duration::from_millis(100)).await;
    assert!(busy.is_err_and(|error| error.is_timeout()));
    held.unwrap().unlock().await.unwrap();
    lock.acquire().await.unwrap().unlock().await.unwrap();
    let after = Figures::now();
    let wait = "distributed_lock_acquire_wait_seconds";
    for outcome in ["timeout", "acquired"] {
        let id = format!("{wait}{{kind={kind},outcome={outcome}}}");
        assert_eq!(after.samples(&id).len(), 1, "{id}");
    }
    let timeouts = format!("distributed_lock_acquire_timeouts_total{{kind={kind}}}");
    assert_rose(&before, &after, &timeouts, 1);
    let contended = format!("distributed_lock_contended_acquires_total{{kind={kind}}}");
    assert_rose(&before, &after, &contended, 1);
    let hold = format!("distributed_lock_hold_seconds{{kind={kind}}}");
    assert_eq!(after.samples(&hold).len(), 2, "{hold}");
    let waiters = format!("distributed_lock_waiters{{kind={kind}}}");
    assert_eq!(after.gauge(&waiters), 0.0);
    holder.shutdown();
    waiter.shutdown();
}

#[tokio::test]
async fn a_lost_subscription_connection_counts_one_reconnect() {
    let (_turn, server) = turn().await;
    let name = "metrics:reconnect";
    let (holder, waiter, held) = held_elsewhere(&server, name).await;
    let lock = waiter.lock(name).unwrap();
    let waiting = tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(30)).await });
    server
        .wait_for_subscribers(&format!("redisson_lock__channel:{{{name}}}"), 1)
        .await;
    let reconnects = "distributed_lock_reconnects_total{connection=subscription}";
    let before = Figures::now();
    let mut conn = server.conn().await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(killed, 1);
    until_reads(reconnects, before.counter(reconnects) as f64 + 1.0).await;
    held.unlock().await.unwrap();
    let guard = waiting.await.unwrap().unwrap();
    guard.unlock().await.unwrap();
    let after = Figures::now();
    assert_rose(&before, &after, reconnects, 1);
    holder.shutdown();
    waiter.shutdown();
}

/// A latch's waits are counted as acquires of kind `latch`: one opened, one timed out
/// (contended: the count was above zero at its first read), one cancelled; the waiters
/// gauge counts a parked waiter; a latch holds nothing, so it has no hold time.
#[tokio::test]
async fn latch_waits_are_counted_by_their_own_kind() {
    const LATCH_WAITERS: &str = "distributed_lock_waiters{kind=latch}";
    let (_turn, server) = turn().await;
    let client = support::client(&server).await;
    let latch = client.count_down_latch("metrics:latch").unwrap();
    let before = Figures::now();
    assert!(latch.wait_timeout(Duration::ZERO).await.unwrap(), "open");
    assert!(latch.try_set_count(1).await.unwrap());
    assert!(!latch.wait_timeout(Duration::ZERO).await.unwrap());
    let baseline = values().get(LATCH_WAITERS).copied().unwrap_or(0.0);
    let waiting = {
        let latch = latch.clone();
        tokio::spawn(async move { latch.wait().await })
    };
    server
        .wait_for_subscribers("redisson_countdownlatch__channel__{metrics:latch}", 1)
        .await;
    until_reads(LATCH_WAITERS, baseline + 1.0).await;
    waiting.abort();
    until_reads(LATCH_WAITERS, baseline).await;
    let after = Figures::now();
    let wait = "distributed_lock_acquire_wait_seconds";
    for (outcome, n) in [
        ("acquired", 1),
        ("timeout", 1),
        ("cancelled", 1),
        ("error", 0),
    ] {
        let id = format!("{wait}{{kind=latch,outcome={outcome}}}");
        assert_eq!(after.samples(&id).len(), n, "{id}");
    }
    assert_rose(
        &before,
        &after,
        "distributed_lock_acquire_timeouts_total{kind=latch}",
        1,
    );
    assert_rose(
        &before,
        &after,
        "distributed_lock_contended_acquires_total{kind=latch}",
        2,
    );
    assert!(after
        .samples("distributed_lock_hold_seconds{kind=latch}")
        .is_empty());
    client.shutdown();
}
