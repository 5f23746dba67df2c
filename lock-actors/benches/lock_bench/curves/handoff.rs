//! The hand-off curve: N waiters on one lock, held by a client of this process, the
//! waiters in 1 or in several waiter processes. From the holder's unlock call on, each
//! waiter in turn acquires and at once unlocks; a hand-off is the time from one unlock
//! call to the next acquire returning (CLOCK_MONOTONIC, one clock for every process).
//! Small N repeat until enough hand-offs are measured.

use super::waiter::WaiterProcess;
use super::*;

pub(crate) struct Point {
    pub(crate) waiters: usize,
    pub(crate) processes: usize,
    pub(crate) handoffs: usize,
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) commands_per_handoff: f64,
}

pub(crate) struct Curve {
    pub(crate) points: Vec<Point>,
    /// PUBLISH delivery + one EVALSHA (the single hand-off's limit, as `scripts/bench`).
    pub(crate) limit_us: f64,
}

pub(crate) async fn curve(
    url: &str,
    sizes: &Sizes,
    inspector: &mut Inspector,
    progress: &mut Progress,
) -> Curve {
    progress.note(&format!(
        "handoff: starting {} waiter processes",
        sizes.processes
    ));
    let mut processes = Vec::new();
    for _ in 0..sizes.processes {
        processes.push(WaiterProcess::start(url).await);
    }
    let holder = connect(ClientConfig::new(url)).await;
    let inner = script_inner_commands();
    let mut points = Vec::new();
    for spread in [1, sizes.processes] {
        for &waiters in &sizes.waiters {
            let point = measure(
                &holder,
                &mut processes[..spread],
                waiters,
                sizes.min_handoffs,
                inspector,
                &inner,
            )
            .await;
            progress.step(&format!(
                "handoff: {waiters} waiters in {spread} process(es): {} hand-offs, p50 {:.0} us, \
                 p99 {:.0} us, {:.2} commands per hand-off",
                point.handoffs, point.p50_us, point.p99_us, point.commands_per_handoff
            ));
            points.push(point);
        }
    }
    holder.shutdown();
    for process in processes {
        process.exit().await;
    }
    let (publish_us, rtt_us) = handoff_limit(url, IDLE_BEFORE_UNLOCK).await;
    let limit_us = publish_us + rtt_us;
    progress.step(&format!(
        "handoff: limit from idle = {publish_us:.0} us PUBLISH delivery + {rtt_us:.0} us EVALSHA \
         = {limit_us:.0} us"
    ));
    Curve { points, limit_us }
}

/// `waiters` waiters spread round-robin over `processes`; repeated until at least
/// `min_handoffs` hand-offs were measured.
async fn measure(
    holder: &LockClient,
    processes: &mut [WaiterProcess],
    waiters: usize,
    min_handoffs: usize,
    inspector: &mut Inspector,
    inner: &HashSet<String>,
) -> Point {
    let spread = processes.len();
    let share: Vec<usize> = (0..spread)
        .map(|p| waiters / spread + usize::from(p < waiters % spread))
        .collect();
    let busy = share.iter().filter(|n| **n > 0).count() as u64;
    let reps = min_handoffs.div_ceil(waiters).max(1);
    let mut samples = Vec::with_capacity(reps * waiters);
    let (mut sent, mut handoffs) = (0u64, 0usize);
    for rep in 0..reps {
        let name = format!("bench:curve:handoff:{waiters}:{spread}:{rep}");
        let guard = holder
            .lock(&name)
            .expect("valid name")
            .acquire()
            .await
            .expect("holder acquire");
        let pttl_before = inspector.calls("pttl").await;
        for (process, n) in processes.iter_mut().zip(&share) {
            if *n > 0 {
                process.send(&format!("wait {name} {n}")).await;
            }
        }
        for (process, n) in processes.iter_mut().zip(&share) {
            if *n > 0 {
                let queued = process.answer().await;
                assert_eq!(queued, "queued", "a waiter process said {queued}");
            }
        }
        // Parked: each process' head waiter subscribed and was refused twice (each refusal
        // runs PTTL in the script); the others queue in their process.
        let deadline = Instant::now() + Duration::from_secs(10);
        while inspector.calls("pttl").await < pttl_before + 2 * busy {
            assert!(Instant::now() < deadline, "hand-off waiters never parked");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        tokio::time::sleep(IDLE_BEFORE_UNLOCK + Duration::from_micros(waiters as u64 * 5)).await;
        let before = inspector.snapshot().await;
        let t0 = mono_ns();
        guard.unlock().await.expect("holder unlock");
        let mut grants = Vec::with_capacity(waiters);
        for (process, n) in processes.iter_mut().zip(&share) {
            if *n > 0 {
                grants.extend(process.done().await);
            }
        }
        let after = inspector.snapshot().await;
        sent += after.sent_since(&before, inner).0;
        handoffs += waiters;
        // In the order the lock went round: each hand-off runs from the previous
        // holder's unlock call to this acquire's return.
        grants.sort_unstable();
        let mut released = t0;
        for (acq, rel) in grants {
            assert!(
                acq >= released,
                "two holders of {name}: an acquire returned before the unlock was called"
            );
            samples.push((acq - released) as f64 / 1e3);
            released = rel;
        }
    }
    Point {
        waiters,
        processes: spread,
        handoffs,
        p50_us: percentile(&mut samples, 50.0),
        p99_us: percentile(&mut samples, 99.0),
        commands_per_handoff: sent as f64 / handoffs as f64,
    }
}

pub(crate) fn write(curve: &Curve, out: &Output) {
    let rows: Vec<String> = curve
        .points
        .iter()
        .map(|p| {
            format!(
                "{},{},{},{:.1},{:.1},{:.3},{:.1}",
                p.waiters,
                p.processes,
                p.handoffs,
                p.p50_us,
                p.p99_us,
                p.commands_per_handoff,
                curve.limit_us
            )
        })
        .collect();
    out.csv(
        "handoff",
        "waiters,processes,handoffs,p50_us,p99_us,commands_per_handoff,limit_us",
        &rows,
    );
    let mut series = Vec::new();
    let spreads: Vec<usize> = {
        let mut s: Vec<usize> = curve.points.iter().map(|p| p.processes).collect();
        s.dedup();
        s
    };
    for (k, spread) in spreads.into_iter().enumerate() {
        let of = |f: fn(&Point) -> f64| -> Vec<(f64, f64)> {
            curve
                .points
                .iter()
                .filter(|p| p.processes == spread)
                .map(|p| (p.waiters as f64, f(p)))
                .collect()
        };
        let procs = if spread == 1 {
            "1 process".to_string()
        } else {
            format!("{spread} processes")
        };
        series.push(plot::Series {
            name: format!("p50, waiters in {procs}"),
            points: of(|p| p.p50_us),
            dashed: false,
            color: Some(k),
        });
        series.push(plot::Series {
            name: format!("p99, waiters in {procs} (dashed)"),
            points: of(|p| p.p99_us),
            dashed: true,
            color: Some(k),
        });
    }
    let (x0, x1) = curve.points.iter().fold((f64::MAX, 0.0f64), |(a, b), p| {
        (a.min(p.waiters as f64), b.max(p.waiters as f64))
    });
    series.push(plot::Series {
        name: "limit: PUBLISH delivery + one EVALSHA".into(),
        points: vec![(x0, curve.limit_us), (x1, curve.limit_us)],
        dashed: true,
        color: Some(4),
    });
    plot::single(
        &out.svg("handoff"),
        plot::Panel {
            title: "Hand-off: unlock call to the next waiter's acquire returning".into(),
            x_label: "waiters on one lock".into(),
            y_label: "microseconds".into(),
            x_log: true,
            y_log: true,
            y_max: None,
            series,
        },
    );
}
