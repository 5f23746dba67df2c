//! The single_task scenario: one task's acquire against one plain EVALSHA round trip, and
//! the plain-redis lock the references send.

use super::*;

#[derive(Clone, Copy)]
pub(crate) struct Single {
    pub(crate) acquire_us: f64,
    pub(crate) rtt_us: f64,
    /// Acquire p50 / EVALSHA p50, round by round.
    pub(crate) ratio: Spread,
    /// The EVALSHA p50 against itself, sampled in turn with the other two.
    pub(crate) aa: Spread,
}

pub(crate) async fn single_task(
    url: &str,
    knobs: &Knobs,
    mut redisson: Option<&mut redisson::Redisson>,
    rows: &mut Vec<Row>,
) -> Single {
    let (side, rounds) = (knobs.side, knobs.rounds);
    eprintln!("[single_task] {rounds} rounds of {SINGLE_SAMPLES} acquires, {SINGLE_SAMPLES} EVALSHA round trips and {SINGLE_SAMPLES} more (A/A), in turn");
    let client = connect(ClientConfig::new(url)).await;
    let lock = client.lock("bench:single").expect("valid name");
    let mut conn = plain_connection(url).await;
    let plain = PlainLock::new("bench:single:plain");
    // Warm-up: actor started, scripts cached by Redis, connections hot.
    for _ in 0..200 {
        lock_unlock(&lock).await;
        plain.acquire_timed(&mut conn).await;
        plain.unlock(&mut conn).await;
    }
    let (mut acquire_p50s, mut rtt_p50s, mut again_p50s) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        let mut samples = [
            Vec::with_capacity(SINGLE_SAMPLES),
            Vec::with_capacity(SINGLE_SAMPLES),
            Vec::with_capacity(SINGLE_SAMPLES),
        ];
        for i in 0..SINGLE_SAMPLES {
            // The three take turns in one long sequence in which each follows each other
            // alike (a fixed cycle made one EVALSHA 3 % slower than the other, every round).
            for k in 0..3 {
                let which = turn(i * 3 + k, 3);
                let us = match (which, side) {
                    (0, Side::Reference) | (1 | 2, Side::Library) => f64::NAN,
                    (0, _) => {
                        let t0 = Instant::now();
                        let guard = lock.acquire().await.expect("acquire");
                        let us = micros(t0.elapsed());
                        guard.unlock().await.expect("unlock");
                        us
                    }
                    _ => {
                        let us = plain.acquire_timed(&mut conn).await;
                        plain.unlock(&mut conn).await;
                        us
                    }
                };
                samples[which].push(us);
            }
        }
        let [mut acquire, mut rtt, mut again] = samples;
        let a = percentile(&mut acquire, 50.0);
        let e = percentile(&mut rtt, 50.0);
        let e2 = percentile(&mut again, 50.0);
        eprintln!(
            "[single_task] round {}: acquire p50 {a:.1} us, EVALSHA p50 {e:.1} us ({:.3}), A/A {:.3}",
            r + 1,
            a / e,
            e2 / e
        );
        acquire_p50s.push(a);
        rtt_p50s.push(e);
        again_p50s.push(e2);
        if let Some(java) = redisson.as_deref_mut() {
            let j = java.single_round(SINGLE_SAMPLES).await;
            eprintln!(
                "[single_task] round {}: Redisson lock() p50 {j:.1} us",
                r + 1
            );
        }
    }
    client.shutdown();
    let ratio = Spread::ratios(&acquire_p50s, &rtt_p50s);
    let aa = Spread::ratios(&again_p50s, &rtt_p50s);
    let result = Single {
        acquire_us: median(&mut acquire_p50s),
        rtt_us: median(&mut rtt_p50s),
        ratio,
        aa,
    };
    rows.push(Row::new(
        "single_task",
        "acquire p50 us",
        Some(result.acquire_us),
    ));
    rows.push(Row::new(
        "single_task",
        "EVALSHA rtt p50 us",
        Some(result.rtt_us),
    ));
    rows.push(
        Row::new(
            "single_task",
            &format!("ratio ({})", ratio.label()),
            Some(ratio.median),
        )
        .target("<= 1.3", Some(ratio.median <= 1.3)),
    );
    rows.push(aa_row("single_task", "EVALSHA / EVALSHA", aa));
    if let Some(r) = redisson {
        r.single_rows(result.acquire_us, rows);
    }
    result
}

/// The library's acquire and unlock scripts on one name, sent with plain redis.
pub(crate) struct PlainLock {
    pub(crate) acquire: Script,
    pub(crate) unlock: Script,
    pub(crate) name: String,
    pub(crate) channel: String,
    pub(crate) field: String,
}

impl PlainLock {
    pub(crate) fn new(name: &str) -> Self {
        PlainLock {
            acquire: Script::new(ACQUIRE_LUA),
            unlock: Script::new(UNLOCK_LUA),
            name: name.to_string(),
            channel: format!("redisson_lock__channel:{{{name}}}"),
            field: format!("{}:1", uuid::Uuid::new_v4()),
        }
    }

    /// One EVALSHA of the acquire script; returns its round trip in µs.
    pub(crate) async fn acquire_timed(&self, conn: &mut MultiplexedConnection) -> f64 {
        let t0 = Instant::now();
        let taken: redis::Value = self
            .acquire
            .key(&self.name)
            .arg(LEASE_MS)
            .arg(&self.field)
            .invoke_async(conn)
            .await
            .expect("plain acquire");
        let us = micros(t0.elapsed());
        // A first hold replies a status OK.
        assert_eq!(
            taken,
            redis::Value::Okay,
            "plain lock {} was busy",
            self.name
        );
        us
    }

    pub(crate) async fn unlock(&self, conn: &mut MultiplexedConnection) {
        let _: Option<i64> = self
            .unlock
            .key(&self.name)
            .key(&self.channel)
            .arg("0")
            .arg(LEASE_MS)
            .arg(&self.field)
            .invoke_async(conn)
            .await
            .expect("plain unlock");
    }
}
