//! The single_task scenario: one task's acquire against one plain EVALSHA round trip, and
//! the plain-redis lock the references send.

use super::*;

#[derive(Clone, Copy)]
pub(crate) struct Single {
    pub(crate) acquire_us: f64,
    pub(crate) rtt_us: f64,
}

pub(crate) async fn single_task(
    url: &str,
    side: Side,
    mut redisson: Option<&mut redisson::Redisson>,
    rows: &mut Vec<Row>,
) -> Single {
    eprintln!("[single_task] {ROUNDS} rounds of {SINGLE_SAMPLES} acquires and {SINGLE_SAMPLES} EVALSHA round trips");
    let client = connect(ClientConfig::new(url)).await;
    let lock = client.lock("bench:single").expect("valid name");
    let mut conn = plain_connection(url).await;
    let plain = PlainLock::new("bench:single:plain");
    // Warm-up: actor started, scripts cached by Redis, connections hot.
    for _ in 0..200 {
        lock.acquire()
            .await
            .expect("acquire")
            .unlock()
            .await
            .expect("unlock");
        plain.acquire_timed(&mut conn).await;
        plain.unlock(&mut conn).await;
    }
    let mut acquire_p50s = Vec::new();
    let mut rtt_p50s = Vec::new();
    for r in 0..ROUNDS {
        let mut acquire = Vec::with_capacity(SINGLE_SAMPLES);
        let mut rtt = Vec::with_capacity(SINGLE_SAMPLES);
        for _ in 0..SINGLE_SAMPLES {
            if side == Side::Reference {
                acquire.push(f64::NAN);
            } else {
                let t0 = Instant::now();
                let guard = lock.acquire().await.expect("acquire");
                acquire.push(micros(t0.elapsed()));
                guard.unlock().await.expect("unlock");
            }
            if side == Side::Library {
                rtt.push(f64::NAN);
            } else {
                rtt.push(plain.acquire_timed(&mut conn).await);
                plain.unlock(&mut conn).await;
            }
        }
        let a = percentile(&mut acquire, 50.0);
        let e = percentile(&mut rtt, 50.0);
        eprintln!(
            "[single_task] round {}: acquire p50 {a:.1} us, EVALSHA p50 {e:.1} us ({:.2})",
            r + 1,
            a / e
        );
        acquire_p50s.push(a);
        rtt_p50s.push(e);
        if let Some(java) = redisson.as_deref_mut() {
            let j = java.single_round(SINGLE_SAMPLES).await;
            eprintln!(
                "[single_task] round {}: Redisson lock() p50 {j:.1} us",
                r + 1
            );
        }
    }
    client.shutdown();
    let result = Single {
        acquire_us: median(&mut acquire_p50s),
        rtt_us: median(&mut rtt_p50s),
    };
    let ratio = result.acquire_us / result.rtt_us;
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
    rows.push(Row::new("single_task", "ratio", Some(ratio)).target("<= 1.3", Some(ratio <= 1.3)));
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
        let taken: Option<i64> = self
            .acquire
            .key(&self.name)
            .arg(LEASE_MS)
            .arg(&self.field)
            .invoke_async(conn)
            .await
            .expect("plain acquire");
        let us = micros(t0.elapsed());
        assert_eq!(taken, None, "plain lock {} was busy", self.name);
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
