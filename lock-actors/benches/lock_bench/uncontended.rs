//! The uncontended scenario: 64 tasks, acquire + unlock on their own names, against the
//! same two scripts sent with plain redis on one multiplexed connection.

use super::*;

#[derive(Clone, Copy)]
pub(crate) struct Uncontended {
    pub(crate) pairs: f64,
    pub(crate) ceiling: f64,
    /// Library / ceiling, round by round.
    pub(crate) ratio: Spread,
    /// The ceiling against itself, interleaved as the library and the ceiling are.
    pub(crate) aa: Spread,
    /// What `redis-benchmark` (C, pipelined) makes of the same two scripts: pairs/s.
    pub(crate) bound: Option<f64>,
    /// The ceiling with its connection driven on a thread of its own, as the library's is,
    /// against the ceiling (full runs only).
    pub(crate) apart: Option<Spread>,
}

pub(crate) async fn uncontended(
    url: &str,
    knobs: &Knobs,
    inspector: &mut Inspector,
    mut redisson: Option<&mut redisson::Redisson>,
    rows: &mut Vec<Row>,
) -> Uncontended {
    let (round, rounds) = (knobs.round, knobs.rounds);
    // A full run adds a fourth side: the ceiling driven from another thread.
    let count = if knobs.quick { 3 } else { 4 };
    eprintln!("[uncontended] {TASKS} tasks, {rounds} rounds of {round:?} per side, library, ceiling and the ceiling again (A/A){} in {SLICES} turns",
        if knobs.quick { "" } else { " and the ceiling driven apart" });
    let client = connect(ClientConfig::new(url)).await;
    let conn = plain_connection(url).await;
    let apart_conn = (!knobs.quick).then(|| driven_apart(url));
    let scripts = Arc::new((Script::new(ACQUIRE_LUA), Script::new(UNLOCK_LUA)));
    let (mut library, mut ceiling, mut again) = (Vec::new(), Vec::new(), Vec::new());
    let mut apart = Vec::new();
    for r in 0..rounds {
        let sides = sliced_round(count, round, async |side, slice| match (side, knobs.side) {
            (0, Side::Reference) | (1.., Side::Library) => f64::NAN,
            (0, _) => library_round(&client, slice).await,
            (3, _) => match &apart_conn {
                Some(far) => ceiling_round(far.clone(), scripts.clone(), slice).await,
                None => f64::NAN,
            },
            _ => ceiling_round(conn.clone(), scripts.clone(), slice).await,
        })
        .await;
        let (l, c, a) = (sides[0], sides[1], sides[2]);
        let far = sides.get(3).copied();
        eprintln!(
            "[uncontended] round {}: library {l:.0} pairs/s, ceiling {c:.0} pairs/s ({:.3}), A/A {:.3}{}",
            r + 1,
            l / c,
            a / c,
            far.map_or(String::new(), |f| format!(", driven apart {:.3}", f / c))
        );
        library.push(l);
        ceiling.push(c);
        again.push(a);
        apart.extend(far);
        if let Some(java) = redisson.as_deref_mut() {
            java.uncontended_round(round, inspector).await;
        }
    }
    client.shutdown();
    let bound = if knobs.quick {
        None
    } else {
        benchmark_bound(url).await
    };
    let ratio = Spread::ratios(&library, &ceiling);
    let aa = Spread::ratios(&again, &ceiling);
    let apart = (!apart.is_empty()).then(|| Spread::ratios(&apart, &ceiling));
    let result = Uncontended {
        pairs: median(&mut library),
        ceiling: median(&mut ceiling),
        ratio,
        aa,
        bound,
        apart,
    };
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
        Row::new(
            "uncontended",
            &format!("ratio_to_ceiling ({})", ratio.label()),
            Some(ratio.median),
        )
        .target(">= 1.0 every round", Some(ratio.low >= 1.0)),
    );
    rows.push(aa_row("uncontended", "ceiling / ceiling", aa));
    if let Some(apart) = apart {
        // Not a target: it tells whether the library's thread crossing or its own work per
        // pair is what stands between it and the ceiling.
        rows.push(Row::new(
            "uncontended",
            &format!(
                "ceiling driven from another thread / ceiling ({})",
                apart.label()
            ),
            Some(apart.median),
        ));
    }
    if let Some(bound) = bound {
        rows.push(Row::new(
            "uncontended",
            "pairs/s, bound (redis-benchmark, pipelined)",
            Some(bound),
        ));
        rows.push(Row::new(
            "uncontended",
            "ratio_to_bound",
            Some(result.pairs / bound),
        ));
    }
    if let Some(r) = redisson {
        r.uncontended_rows(result.pairs, rows);
    }
    result
}

/// A plain multiplexed connection whose driver runs on a thread of its own (a one-thread
/// runtime kept for the rest of the process), as the library drives its connection on its
/// actor thread: each request and reply crosses between the callers' threads and that one.
fn driven_apart(url: &str) -> MultiplexedConnection {
    let url = url.to_string();
    let (opened, conn) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("ceiling-driver".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the driver thread's runtime");
            runtime.block_on(async move {
                let _ = opened.send(plain_connection(&url).await);
                std::future::pending::<()>().await
            })
        })
        .expect("the driver thread");
    conn.recv()
        .expect("the driver thread opened its connection")
}

/// The physical limit of the uncontended pair on this server: `redis-benchmark` (C, 64
/// clients, 16 requests pipelined each) sends the library's acquire script on random keys,
/// then its unlock script on random keys; pairs/s is one over the sum of the two costs.
/// An upper bound: the random unlocks mostly find no hold (the script's short path).
/// `None` (and a line on stderr) when `redis-benchmark` is missing or fails.
async fn benchmark_bound(url: &str) -> Option<f64> {
    let port = url.rsplit(':').next()?.trim_end_matches('/').to_string();
    let mut conn = plain_connection(url).await;
    let mut shas = Vec::new();
    for source in [ACQUIRE_LUA, UNLOCK_LUA] {
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(source)
            .query_async(&mut conn)
            .await
            .ok()?;
        shas.push(sha);
    }
    let field = format!("{}:1", uuid::Uuid::new_v4());
    let lease = LEASE_MS.to_string();
    let acquire_args = [
        "EVALSHA",
        &shas[0],
        "1",
        "bench:bound:__rand_int__",
        &lease,
        &field,
    ];
    let unlock_args = [
        "EVALSHA",
        &shas[1],
        "2",
        "bench:bound:__rand_int__",
        "redisson_lock__channel:{bench:bound}",
        "0",
        &lease,
        &field,
    ];
    let acquires = redis_benchmark(&port, &acquire_args)?;
    let unlocks = redis_benchmark(&port, &unlock_args)?;
    let _: () = redis::cmd("FLUSHDB").query_async(&mut conn).await.ok()?;
    eprintln!("[uncontended] redis-benchmark: acquire {acquires:.0}/s, unlock {unlocks:.0}/s");
    Some(1.0 / (1.0 / acquires + 1.0 / unlocks))
}

/// Requests per second of `redis-benchmark` sending `command` (keys made random by
/// `__rand_int__`), 200,000 times from 64 clients, 16 pipelined.
fn redis_benchmark(port: &str, command: &[&str]) -> Option<f64> {
    let output = std::process::Command::new("redis-benchmark")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            port,
            "-c",
            "64",
            "-P",
            "16",
            "-n",
            "200000",
        ])
        .args(["-r", "100000000", "--csv"])
        .args(command)
        .output();
    let output = match output {
        Ok(output) if output.status.success() => output,
        Ok(output) => {
            eprintln!(
                "[uncontended] redis-benchmark failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            return None;
        }
        Err(error) => {
            eprintln!("[uncontended] redis-benchmark not run: {error}");
            return None;
        }
    };
    // CSV: a header line, then `"<command>","<requests per second>",...`.
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().find(|line| !line.starts_with("\"test\""))?;
    let rps = line.split(',').nth(1)?.trim_matches('"');
    rps.parse().ok()
}

/// How long the tasks of a throughput measurement run before it starts counting.
const WARM_UP: Duration = Duration::from_millis(100);

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
    tokio::time::sleep(WARM_UP).await;
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
                let taken: redis::Value = scripts
                    .0
                    .key(&name)
                    .arg(LEASE_MS)
                    .arg(&field)
                    .invoke_async(&mut conn)
                    .await
                    .expect("ceiling acquire");
                // A first hold replies a status OK.
                assert_eq!(taken, redis::Value::Okay, "ceiling lock {name} was busy");
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
