//! The herd scenario: 1000 waiters of one client on one name, released one after another.

use super::*;

#[derive(Clone, Copy)]
pub(crate) struct Herd {
    pub(crate) commands_per_handoff: f64,
    pub(crate) total_s: f64,
    pub(crate) connections: usize,
}

pub(crate) async fn herd(
    url: &str,
    inspector: &mut Inspector,
    inner: &HashSet<String>,
    rows: &mut Vec<Row>,
) -> Herd {
    eprintln!("[herd] {HERD} waiters in one client on one name");
    let holder = connect(ClientConfig::new(url)).await;
    let name = "bench:herd";
    let guard = holder
        .lock(name)
        .expect("valid name")
        .acquire()
        .await
        .expect("herd holder acquire");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let others = inspector.clients().await;
    let client = connect(ClientConfig::new(url).default_wait(Duration::from_secs(120))).await;
    let pttl_before = inspector.calls("pttl").await;
    let done = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..HERD)
        .map(|_| {
            let lock = client.lock(name).expect("valid name");
            let done = done.clone();
            tokio::spawn(async move {
                let guard = lock.acquire().await.expect("herd acquire");
                guard.unlock().await.expect("herd unlock");
                done.fetch_add(1, Ordering::Relaxed);
                Instant::now()
            })
        })
        .collect();
    // Queued: the head is parked (two refusals), and every task has had time to ask.
    let deadline = Instant::now() + Duration::from_secs(10);
    while inspector.calls("pttl").await < pttl_before + 2 {
        assert!(Instant::now() < deadline, "herd head never parked");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut connections = inspector.clients().await.saturating_sub(others);
    let pttl_parked = inspector.calls("pttl").await;

    let before = inspector.snapshot().await;
    let t0 = Instant::now();
    guard.unlock().await.expect("herd holder unlock");
    while done.load(Ordering::Relaxed) < HERD {
        connections = connections.max(inspector.clients().await.saturating_sub(others));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut last = t0;
    for task in tasks {
        last = last.max(task.await.expect("herd task"));
    }
    let total_s = last.duration_since(t0).as_secs_f64();
    let after = inspector.snapshot().await;
    let (sent, raw) = after.sent_since(&before, inner);
    client.shutdown();
    holder.shutdown();

    let per_handoff = sent as f64 / HERD as f64;
    eprintln!(
        "[herd] {sent} commands sent for {HERD} hand-offs ({raw} counting those run inside scripts), \
         {total_s:.3} s; {} refusals while queued; {connections} connections",
        pttl_parked - pttl_before
    );
    eprintln!("[herd] by command: {}", after.breakdown_since(&before));
    rows.push(
        Row::new("herd", "commands sent per hand-off", Some(per_handoff))
            .target("<= 3", Some(per_handoff <= 3.0)),
    );
    rows.push(Row::new(
        "herd",
        "commands per hand-off incl. inside scripts",
        Some(raw as f64 / HERD as f64),
    ));
    rows.push(Row::new("herd", "total s", Some(total_s)));
    rows.push(
        Row::new(
            "connections",
            "per node, one client",
            Some(connections as f64),
        )
        .target("2", Some(connections == 2)),
    );
    Herd {
        commands_per_handoff: per_handoff,
        total_s,
        connections,
    }
}
