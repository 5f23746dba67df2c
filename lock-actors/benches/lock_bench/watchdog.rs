//! The watchdog scenario: 10,000 locks held; renewal calls per interval, memory per lock.

use super::*;

#[derive(Clone, Copy)]
pub(crate) struct Watchdog {
    pub(crate) calls_per_interval: f64,
    pub(crate) rss_per_lock: f64,
}

pub(crate) async fn watchdog(
    url: &str,
    inspector: &mut Inspector,
    inner: &HashSet<String>,
    rows: &mut Vec<Row>,
) -> Watchdog {
    eprintln!(
        "[watchdog] {HELD} locks held with a {WATCHDOG_TIMEOUT:?} watchdog lease, for {INTERVALS} intervals"
    );
    let config = ClientConfig::new(url).watchdog_timeout(WATCHDOG_TIMEOUT);
    let interval = config.renew_interval();
    let client = connect(config).await;
    let rss_before = rss_bytes();
    let started = Instant::now();
    // Kept as the tasks made them: no second copy of 10,000 guards in RSS.
    let mut guards: Vec<Vec<LockGuard>> = Vec::with_capacity(TASKS);
    let per_task = HELD.div_ceil(TASKS);
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut guards = Vec::with_capacity(per_task);
                for i in (t * per_task)..((t + 1) * per_task).min(HELD) {
                    let lock = client
                        .lock(&format!("bench:watchdog:{i}"))
                        .expect("valid name");
                    guards.push(lock.acquire().await.expect("watchdog acquire"));
                }
                guards
            })
        })
        .collect();
    for task in tasks {
        guards.push(task.await.expect("watchdog task"));
    }
    let held = guards.iter().map(Vec::len).sum::<usize>();
    let rss_acquired = rss_bytes();
    eprintln!(
        "[watchdog] {held} holds in {:.2} s; RSS {} -> {} kB; {} watched",
        started.elapsed().as_secs_f64(),
        rss_before / 1024,
        rss_acquired / 1024,
        client.watched_holds()
    );

    // One renewal first: it loads the renew script (every batch of the first tick finds
    // NOSCRIPT and sends the script again), which is a one-off, not the steady cost.
    let warm = inspector.snapshot().await;
    tokio::time::sleep(interval + interval / 2).await;
    let before = inspector.snapshot().await;
    eprintln!(
        "[watchdog] first renewal: {}",
        before.breakdown_since(&warm)
    );
    tokio::time::sleep(interval * INTERVALS).await;
    let after = inspector.snapshot().await;
    let (sent, raw) = after.sent_since(&before, inner);
    let calls_per_interval = sent as f64 / f64::from(INTERVALS);
    let lost = guards.iter().flatten().filter(|g| g.is_lost()).count();
    eprintln!(
        "[watchdog] {sent} calls in {INTERVALS} intervals of {interval:?} ({raw} counting those run inside scripts); {lost} holds lost"
    );
    eprintln!("[watchdog] by command: {}", after.breakdown_since(&before));
    // Steady state: still held, after renewals (their buffers count, as they recur).
    let rss_after = rss_bytes();
    let rss_per_lock = rss_after.saturating_sub(rss_before) as f64 / HELD as f64;
    eprintln!(
        "[watchdog] RSS after the renewals {} kB: {rss_per_lock:.0} bytes per held lock \
         ({:.0} right after acquiring)",
        rss_after / 1024,
        rss_acquired.saturating_sub(rss_before) as f64 / HELD as f64
    );
    let releases = futures_util::stream::iter(guards.into_iter().flatten())
        .map(|guard| async move { guard.unlock().await })
        .buffer_unordered(TASKS)
        .collect::<Vec<_>>()
        .await;
    let failed = releases.iter().filter(|r| r.is_err()).count();
    assert_eq!(failed, 0, "watchdog holds that failed to unlock");
    client.shutdown();

    let calls_target = (HELD / 100 + 1) as f64;
    rows.push(
        Row::new(
            "watchdog",
            "renew calls per interval",
            Some(calls_per_interval),
        )
        .target("<= 101", Some(calls_per_interval <= calls_target)),
    );
    rows.push(
        Row::new("watchdog", "RSS bytes per held lock", Some(rss_per_lock))
            .target("<= 1800", Some(rss_per_lock <= 1800.0)),
    );
    Watchdog {
        calls_per_interval,
        rss_per_lock,
    }
}
