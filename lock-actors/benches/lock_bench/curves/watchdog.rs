//! The watchdog curve: one client holds more and more watchdog locks (1,000 to 200,000),
//! leased 3 s (renewed every second, 10 times the default rate, so a second shows what
//! the default spreads over ten). At each size, over a few renew intervals: RSS per held
//! lock, renew script calls per interval, the renewal round's time (the library's
//! `lock.renewal_round` span) and the share of one core that Redis spent (INFO
//! `used_cpu_user` + `used_cpu_sys`), with nothing but renewal running.

use super::*;

/// The watchdog lease of the curve (renewals every third of it).
const LEASE: Duration = Duration::from_secs(3);
/// Acquires in flight while the client takes the locks.
const IN_FLIGHT: usize = 256;

pub(crate) struct Point {
    pub(crate) held: usize,
    pub(crate) rss_bytes_per_lock: f64,
    pub(crate) renew_calls_per_interval: f64,
    pub(crate) round_ms_p50: f64,
    pub(crate) round_ms_max: f64,
    pub(crate) rounds: usize,
    /// Redis CPU time over wall time during the renew intervals (1.0 = one core).
    /// Less the idle server's own share (its cron, this program's INFO polls).
    pub(crate) redis_cpu_share: f64,
    pub(crate) commands_per_acquire: f64,
    pub(crate) lost: usize,
}

impl Point {
    /// Held locks at which renewal alone would keep one Redis core busy, at this rate.
    pub(crate) fn saturates_at(&self) -> f64 {
        self.held as f64 / self.redis_cpu_share.max(1e-9)
    }
}

/// Renewal rounds seen (duration, holds renewed), from the library's spans.
static ROUNDS: std::sync::Mutex<Vec<(Duration, u64)>> = std::sync::Mutex::new(Vec::new());
/// The holds renewed of the round being recorded (recorded just before its duration).
static RENEWED: AtomicU64 = AtomicU64::new(0);

fn rounds_seen() -> Vec<(Duration, u64)> {
    std::mem::take(&mut *ROUNDS.lock().unwrap_or_else(|p| p.into_inner()))
}

/// A `tracing` subscriber that only listens to the `lock.renewal_round` spans and keeps
/// their `duration` (recorded when the round's last batch answered).
pub(crate) struct RenewalRounds;

struct RoundFields {
    renewed: Option<u64>,
    duration: Option<Duration>,
}

impl tracing::field::Visit for RoundFields {
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        if field.name() == "renewed" {
            self.renewed = Some(value);
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "duration" {
            self.duration = parse_duration(&format!("{value:?}"));
        }
    }
}

/// A `Duration`'s Debug text (`1.5ms`, `850.2µs`, `1.02s`, `12ns`).
fn parse_duration(text: &str) -> Option<Duration> {
    let units = [
        ("ns", 1e-9),
        ("µs", 1e-6),
        ("us", 1e-6),
        ("ms", 1e-3),
        ("s", 1.0),
    ];
    units.iter().find_map(|(unit, scale)| {
        let number: f64 = text.strip_suffix(unit)?.parse().ok()?;
        Some(Duration::from_secs_f64(number * scale))
    })
}

impl tracing::Subscriber for RenewalRounds {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata.is_span() && metadata.name() == "lock.renewal_round"
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut fields = RoundFields {
            renewed: None,
            duration: None,
        };
        values.record(&mut fields);
        if let Some(renewed) = fields.renewed {
            RENEWED.store(renewed, Ordering::Relaxed);
        }
        if let Some(duration) = fields.duration {
            let renewed = RENEWED.load(Ordering::Relaxed);
            ROUNDS
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((duration, renewed));
        }
    }

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, _: &tracing::Event<'_>) {}

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}

/// Redis' CPU seconds so far (user + sys), from INFO cpu.
async fn redis_cpu(inspector: &mut Inspector) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(&mut inspector.conn)
        .await
        .expect("INFO cpu");
    inspector.count("info");
    info.lines()
        .filter_map(|line| {
            let (key, value) = line.trim().split_once(':')?;
            matches!(key, "used_cpu_user" | "used_cpu_sys")
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

pub(crate) async fn curve(
    url: &str,
    sizes: &Sizes,
    inspector: &mut Inspector,
    progress: &mut Progress,
) -> Vec<Point> {
    let config = ClientConfig::new(url).watchdog_timeout(LEASE);
    let interval = config.renew_interval();
    let client = connect(config).await;
    let inner = script_inner_commands();
    let rss_before = rss_bytes();
    // What an idle server spends over the same kind of window: renewal's share is above it.
    let (cpu_before, t0) = (redis_cpu(inspector).await, Instant::now());
    tokio::time::sleep(interval * 2).await;
    let idle_share = (redis_cpu(inspector).await - cpu_before) / t0.elapsed().as_secs_f64();
    progress.note(&format!(
        "watchdog: idle Redis CPU {:.2}% of a core (taken off each point)",
        idle_share * 100.0
    ));
    let mut guards: Vec<LockGuard> = Vec::with_capacity(*sizes.held.last().unwrap_or(&0));
    let mut points = Vec::new();
    for &held in &sizes.held {
        let from = guards.len();
        let before = inspector.snapshot().await;
        let started = Instant::now();
        let taken: Vec<LockGuard> = futures_util::stream::iter(from..held)
            .map(|i| {
                let lock = client
                    .lock(&format!("bench:curve:watchdog:{i}"))
                    .expect("valid name");
                async move { lock.acquire().await.expect("watchdog acquire") }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let took = started.elapsed();
        let after = inspector.snapshot().await;
        let commands_per_acquire =
            after.sent_since(&before, &inner).0 as f64 / (held - from) as f64;
        guards.extend(taken);
        // A first round with every new hold in it (the first one after start also loads
        // the renew script), then the measured intervals.
        tokio::time::sleep(interval + interval / 2).await;
        rounds_seen();
        let (before, cpu_before, t0) = (
            inspector.snapshot().await,
            redis_cpu(inspector).await,
            Instant::now(),
        );
        tokio::time::sleep(interval * sizes.intervals).await;
        let (after, cpu_after, wall) = (
            inspector.snapshot().await,
            redis_cpu(inspector).await,
            t0.elapsed(),
        );
        let rounds = rounds_seen();
        let rss = rss_bytes();
        let (sent, _) = after.sent_since(&before, &inner);
        let mut round_ms: Vec<f64> = rounds.iter().map(|(d, _)| d.as_secs_f64() * 1e3).collect();
        let lost = guards.iter().filter(|g| g.is_lost()).count();
        let point = Point {
            held,
            rss_bytes_per_lock: rss.saturating_sub(rss_before) as f64 / held as f64,
            renew_calls_per_interval: sent as f64 / f64::from(sizes.intervals),
            round_ms_p50: if round_ms.is_empty() {
                f64::NAN
            } else {
                percentile(&mut round_ms, 50.0)
            },
            round_ms_max: round_ms.iter().copied().fold(f64::NAN, f64::max),
            rounds: rounds.len(),
            redis_cpu_share: ((cpu_after - cpu_before) / wall.as_secs_f64() - idle_share).max(0.0),
            commands_per_acquire,
            lost,
        };
        progress.step(&format!(
            "watchdog: {held} held (+{} in {:.1} s): {:.0} B RSS per lock, {:.1} renew calls per \
             interval, round p50 {:.1} ms over {} rounds, Redis CPU {:.1}% of a core, {lost} lost; \
             renewal by command: {}",
            held - from,
            took.as_secs_f64(),
            point.rss_bytes_per_lock,
            point.renew_calls_per_interval,
            point.round_ms_p50,
            point.rounds,
            point.redis_cpu_share * 100.0,
            after.breakdown_since(&before)
        ));
        points.push(point);
    }
    progress.note(&format!("watchdog: unlocking {} holds", guards.len()));
    let failed = futures_util::stream::iter(guards)
        .map(|guard| async move { guard.unlock().await.is_err() })
        .buffer_unordered(IN_FLIGHT)
        .filter(|failed| std::future::ready(*failed))
        .count()
        .await;
    // A hold lost to slow renewal fails its unlock: the `lost` column says so already.
    progress.note(&format!("watchdog: {failed} unlocks failed"));
    client.shutdown();
    points
}

pub(crate) fn write(points: &[Point], out: &Output) {
    let rows: Vec<String> = points
        .iter()
        .map(|p| {
            format!(
                "{},{:.0},{:.2},{:.2},{:.2},{},{:.4},{:.0},{:.3},{}",
                p.held,
                p.rss_bytes_per_lock,
                p.renew_calls_per_interval,
                p.round_ms_p50,
                p.round_ms_max,
                p.rounds,
                p.redis_cpu_share,
                p.saturates_at(),
                p.commands_per_acquire,
                p.lost
            )
        })
        .collect();
    out.csv(
        "watchdog",
        "held,rss_bytes_per_lock,renew_calls_per_interval,round_ms_p50,round_ms_max,rounds,\
         redis_cpu_share,saturates_one_core_at_locks,commands_per_acquire,lost",
        &rows,
    );
    let line = |name: &str, f: fn(&Point) -> f64| plot::Series {
        name: name.to_string(),
        points: points.iter().map(|p| (p.held as f64, f(p))).collect(),
        dashed: false,
        color: None,
    };
    let panel = |title: &str, y: &str, y_log: bool, series: Vec<plot::Series>| plot::Panel {
        title: title.to_string(),
        x_label: "watchdog locks held by one client".into(),
        y_label: y.to_string(),
        x_log: true,
        y_log,
        y_max: None,
        series,
    };
    let ideal: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (p.held as f64, (p.held as f64 / 512.0).ceil()))
        .collect();
    plot::grid(
        &out.svg("watchdog"),
        &format!(
            "Held watchdog locks in one client (lease {} s, renewed every {} ms)",
            LEASE.as_secs(),
            (LEASE / 3).as_millis()
        ),
        &[
            panel(
                "RSS per held lock",
                "bytes",
                false,
                vec![line("RSS growth / held locks", |p| p.rss_bytes_per_lock)],
            ),
            panel(
                "Renew script calls per interval",
                "calls",
                true,
                vec![
                    line("measured", |p| p.renew_calls_per_interval),
                    plot::Series {
                        name: "held / 512 (one call per batch of 512)".into(),
                        points: ideal,
                        dashed: true,
                        color: None,
                    },
                ],
            ),
            panel(
                "Renewal round time",
                "ms",
                true,
                vec![
                    line("p50", |p| p.round_ms_p50),
                    line("max", |p| p.round_ms_max),
                ],
            ),
            panel(
                "Redis CPU spent on renewal",
                "% of one core",
                true,
                vec![line("used_cpu_user + used_cpu_sys / wall", |p| {
                    p.redis_cpu_share * 100.0
                })],
            ),
        ],
    );
}
