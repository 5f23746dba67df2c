//! The replica scenario: a primary with one replica, both clients with their default
//! settings, so both wait for the replica after every lock. One task acquires and unlocks
//! (the acquire timed), ours and Redisson's `lock()` (master/slave mode) taking turns round
//! by round on the same pair of servers.

use super::*;

#[derive(Clone, Copy)]
pub(crate) struct Replica {
    pub(crate) acquire_us: f64,
    pub(crate) redisson_us: Option<f64>,
    /// Acquire p50 / Redisson `lock()` p50, round by round.
    pub(crate) ratio: Option<Spread>,
}

#[derive(Serialize)]
pub(crate) struct ReplicaJson {
    acquire_p50_us: Option<f64>,
    redisson_p50_us: Option<f64>,
    ratio_to_redisson: Option<SpreadJson>,
}

impl ReplicaJson {
    pub(crate) fn of(replica: Option<Replica>) -> Self {
        ReplicaJson {
            acquire_p50_us: replica.map(|r| round1(r.acquire_us)),
            redisson_p50_us: replica.and_then(|r| r.redisson_us.map(round1)),
            ratio_to_redisson: replica.and_then(|r| r.ratio.map(|s| s.json())),
        }
    }
}

/// Makes `replica` a replica of `primary` and waits until the primary counts it in sync.
async fn attach(primary: &RedisProcess, replica: &RedisProcess) {
    let mut primary_conn = plain_connection(&primary.url()).await;
    let mut replica_conn = plain_connection(&replica.url()).await;
    let () = redis::cmd("CONFIG")
        .arg(&["SET", "repl-diskless-sync-delay", "0"])
        .query_async(&mut primary_conn)
        .await
        .expect("CONFIG SET");
    let () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary.port)
        .query_async(&mut replica_conn)
        .await
        .expect("REPLICAOF");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut primary_conn)
            .await
            .expect("INFO replication");
        if info.contains("connected_slaves:1") && info.contains("state=online") {
            return;
        }
        assert!(Instant::now() < deadline, "the replica never came in sync");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) async fn replica(knobs: &Knobs, with_redisson: bool, rows: &mut Vec<Row>) -> Replica {
    let rounds = knobs.rounds;
    let (primary, replica) = (RedisProcess::start(), RedisProcess::start());
    attach(&primary, &replica).await;
    eprintln!("[replica] {rounds} rounds of {SINGLE_SAMPLES} acquires each side, one replica, default settings");
    let client = connect(ClientConfig::new(primary.url())).await;
    // The client reads the replica count at connect: the replica is in sync by then.
    let lock = client.lock("bench:replica").expect("valid name");
    let mut java = if with_redisson {
        let jar = redisson::jar().unwrap_or_else(|e| panic!("Redisson peer: {e}"));
        let pair = format!(
            "{},{}",
            primary.url().trim_end_matches('/'),
            replica.url().trim_end_matches('/')
        );
        let mut jvm = redisson::Jvm::start(&jar, &pair, "bench-redisson-replica", None).await;
        for _ in 0..3 {
            jvm.number("single 2000", "p50_us").await;
        }
        Some(jvm)
    } else {
        None
    };
    for _ in 0..200 {
        lock_unlock(&lock).await;
    }
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let mut samples = Vec::with_capacity(SINGLE_SAMPLES);
        for _ in 0..SINGLE_SAMPLES {
            let t0 = Instant::now();
            let guard = lock.acquire().await.expect("acquire");
            samples.push(micros(t0.elapsed()));
            guard.unlock().await.expect("unlock");
        }
        let a = percentile(&mut samples, 50.0);
        ours.push(a);
        match java.as_mut() {
            Some(jvm) => {
                let j = jvm
                    .number(&format!("single {SINGLE_SAMPLES}"), "p50_us")
                    .await;
                eprintln!(
                    "[replica] round {}: acquire p50 {a:.1} us, Redisson lock() p50 {j:.1} us ({:.3})",
                    r + 1,
                    a / j
                );
                theirs.push(j);
            }
            None => eprintln!("[replica] round {}: acquire p50 {a:.1} us", r + 1),
        }
    }
    client.shutdown();
    if let Some(jvm) = java {
        jvm.exit().await;
    }
    let ratio = (!theirs.is_empty()).then(|| Spread::ratios(&ours, &theirs));
    let result = Replica {
        acquire_us: median(&mut ours),
        redisson_us: (!theirs.is_empty()).then(|| median(&mut theirs)),
        ratio,
    };
    rows.push(Row::new(
        "replica",
        "acquire p50 us (script + WAIT)",
        Some(result.acquire_us),
    ));
    if let (Some(j), Some(ratio)) = (result.redisson_us, ratio) {
        rows.push(Row::new(
            "replica",
            "Redisson lock() p50 us (master/slave)",
            Some(j),
        ));
        rows.push(
            Row::new(
                "replica",
                &format!("ratio_to_redisson ({})", ratio.label()),
                Some(ratio.median),
            )
            .target("<= 1.0", Some(ratio.median <= 1.0)),
        );
    }
    result
}
