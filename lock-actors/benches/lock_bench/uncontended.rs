//! The uncontended scenario: 64 tasks, acquire + unlock on their own names, against the
//! same two scripts sent with plain redis on one multiplexed connection.

use super::*;

#[derive(Clone, Copy)]
pub(crate) struct Uncontended {
    pub(crate) pairs: f64,
    pub(crate) ceiling: f64,
}

pub(crate) async fn uncontended(
    url: &str,
    knobs: &Knobs,
    inspector: &mut Inspector,
    mut redisson: Option<&mut redisson::Redisson>,
    rows: &mut Vec<Row>,
) -> Uncontended {
    let round = knobs.round;
    eprintln!("[uncontended] {TASKS} tasks, {ROUNDS} rounds of {round:?} each, library and ceiling interleaved");
    let client = connect(ClientConfig::new(url)).await;
    let conn = plain_connection(url).await;
    let scripts = Arc::new((Script::new(ACQUIRE_LUA), Script::new(UNLOCK_LUA)));
    let mut library = Vec::new();
    let mut ceiling = Vec::new();
    for r in 0..ROUNDS {
        // Alternate which goes first, so a drift of the machine hits both alike.
        let (c, l) = if knobs.side == Side::Library {
            (f64::NAN, library_round(&client, round).await)
        } else if knobs.side == Side::Reference {
            (
                ceiling_round(conn.clone(), scripts.clone(), round).await,
                f64::NAN,
            )
        } else if r % 2 == 0 {
            let c = ceiling_round(conn.clone(), scripts.clone(), round).await;
            (c, library_round(&client, round).await)
        } else {
            let l = library_round(&client, round).await;
            (ceiling_round(conn.clone(), scripts.clone(), round).await, l)
        };
        eprintln!(
            "[uncontended] round {}: library {:.0} pairs/s, ceiling {:.0} pairs/s ({:.2})",
            r + 1,
            l,
            c,
            l / c
        );
        library.push(l);
        ceiling.push(c);
        if let Some(java) = redisson.as_deref_mut() {
            java.uncontended_round(round, inspector).await;
        }
    }
    client.shutdown();
    let result = Uncontended {
        pairs: median(&mut library),
        ceiling: median(&mut ceiling),
    };
    let ratio = result.pairs / result.ceiling;
    rows.push(Row::new(
        "uncontended",
        "pairs/s, library",
        Some(result.pairs),
    ));
    rows.push(Row::new(
        "uncontended",
        "pairs/s, ceiling (plain redis)",
        Some(result.ceiling),
    ));
    rows.push(
        Row::new("uncontended", "ratio_to_ceiling", Some(ratio))
            .target(">= 0.90", Some(ratio >= 0.90)),
    );
    if let Some(r) = redisson {
        r.uncontended_rows(result.pairs, rows);
    }
    result
}

/// Runs `tasks` copies of `body` until stopped: the pairs per second they made during
/// `round` (after a short warm-up), and every pair they made, warm-up included (the cost
/// curves divide the Redis commands of the whole run by it).
pub(crate) async fn tasks_round<F, Fut>(tasks: usize, round: Duration, mut body: F) -> (f64, u64)
where
    F: FnMut(usize, Arc<AtomicBool>, Arc<AtomicU64>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = (0..tasks)
        .map(|i| tokio::spawn(body(i, stop.clone(), count.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = count.load(Ordering::Relaxed);
    let t0 = Instant::now();
    tokio::time::sleep(round).await;
    let done = count.load(Ordering::Relaxed) - before;
    let elapsed = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("a benchmark task panicked");
    }
    (
        done as f64 / elapsed.as_secs_f64(),
        count.load(Ordering::Relaxed),
    )
}

pub(crate) async fn library_round(client: &LockClient, round: Duration) -> f64 {
    library_pairs(client, TASKS, round).await.0
}

/// [`library_round`] with `tasks` tasks: pairs/s and all pairs made (see [`tasks_round`]).
pub(crate) async fn library_pairs(
    client: &LockClient,
    tasks: usize,
    round: Duration,
) -> (f64, u64) {
    tasks_round(tasks, round, |i, stop, count| {
        let lock = client
            .lock(&format!("bench:uncontended:{i}"))
            .expect("valid name");
        async move {
            while !stop.load(Ordering::Relaxed) {
                let guard = lock.acquire().await.expect("uncontended acquire");
                guard.unlock().await.expect("uncontended unlock");
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await
}

pub(crate) async fn ceiling_round(
    conn: MultiplexedConnection,
    scripts: Arc<(Script, Script)>,
    round: Duration,
) -> f64 {
    ceiling_pairs(conn, scripts, TASKS, round).await.0
}

/// [`ceiling_round`] with `tasks` tasks: pairs/s and all pairs made (see [`tasks_round`]).
pub(crate) async fn ceiling_pairs(
    conn: MultiplexedConnection,
    scripts: Arc<(Script, Script)>,
    tasks: usize,
    round: Duration,
) -> (f64, u64) {
    let owner = uuid::Uuid::new_v4();
    tasks_round(tasks, round, |i, stop, count| {
        let mut conn = conn.clone();
        let scripts = scripts.clone();
        let name = format!("bench:ceiling:{i}");
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let field = format!("{owner}:{i}");
        async move {
            while !stop.load(Ordering::Relaxed) {
                let taken: Option<i64> = scripts
                    .0
                    .key(&name)
                    .arg(LEASE_MS)
                    .arg(&field)
                    .invoke_async(&mut conn)
                    .await
                    .expect("ceiling acquire");
                assert_eq!(taken, None, "ceiling lock {name} was busy");
                let freed: Option<i64> = scripts
                    .1
                    .key(&name)
                    .key(&channel)
                    .arg("0")
                    .arg(LEASE_MS)
                    .arg(&field)
                    .invoke_async(&mut conn)
                    .await
                    .expect("ceiling unlock");
                assert_eq!(freed, Some(1), "ceiling unlock of {name}");
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await
}
