//! The spin_handoff scenario: the spin lock's hand-off, beside the pub/sub lock's
//! (`handoff`). A holder in one client unlocks while a spin waiter in another client polls
//! at its backoff's cap (Redisson's default, 128 ms); from just before the unlock call to the
//! waiter's acquire returning. The unlock falls at a random point of the waiter's pause, so
//! the p50 is about half the cap plus one try: the price of waiting without pub/sub.

use super::*;

#[derive(Clone, Copy)]
pub(crate) struct SpinHandoff {
    pub(crate) p50_us: f64,
    pub(crate) p99_us: f64,
}

/// The default backoff's cap, which the waiter reaches after 1 + 2 + ... + 128 ms of pauses
/// (jitter included) and polls at from then on.
const SPIN_CAP: Duration = Duration::from_millis(128);
/// How long the waiter polls before the unlock's random point: past the climb to the cap.
const SPIN_CLIMB: Duration = Duration::from_millis(300);

pub(crate) async fn spin_handoff(
    url: &str,
    pubsub_p50_us: Option<f64>,
    rows: &mut Vec<Row>,
) -> SpinHandoff {
    eprintln!("[spin_handoff] {SPIN_HANDOFFS} hand-offs between two clients, the waiter polling");
    let holder = connect(ClientConfig::new(url)).await;
    let waiter = connect(ClientConfig::new(url)).await;
    let mut samples = Vec::with_capacity(SPIN_HANDOFFS);
    for i in 0..SPIN_HANDOFFS {
        let name = format!("bench:spin_handoff:{i}");
        let guard = holder
            .spin_lock(&name)
            .expect("valid name")
            .acquire()
            .await
            .expect("holder acquire");
        let waiting = spawn_waiter(waiter.spin_lock(&name).expect("valid name"));
        let cap_us = SPIN_CAP.as_micros() as u64;
        let offset = Duration::from_micros(rand::random_range(0..cap_us));
        tokio::time::sleep(SPIN_CLIMB + offset).await;
        let t0 = Instant::now();
        guard.unlock().await.expect("holder unlock");
        let acquired = waiting.await.expect("waiter task");
        samples.push(micros(acquired.duration_since(t0)));
        if (i + 1) % 50 == 0 {
            eprintln!(
                "[spin_handoff] {} done, p50 so far {:.1} us",
                i + 1,
                percentile(&mut samples.clone(), 50.0)
            );
        }
    }
    holder.shutdown();
    waiter.shutdown();
    let p50 = percentile(&mut samples, 50.0);
    let p99 = percentile(&mut samples, 99.0);
    let cap_us = micros(SPIN_CAP);
    rows.push(
        Row::new("spin_handoff", "p50 us (waiter polls)", Some(p50))
            .target("<= backoff cap", Some(p50 <= cap_us)),
    );
    rows.push(Row::new("spin_handoff", "p99 us", Some(p99)));
    rows.push(Row::new(
        "spin_handoff",
        "p50 / handoff p50 (pub/sub)",
        pubsub_p50_us.map(|pubsub| p50 / pubsub),
    ));
    SpinHandoff {
        p50_us: p50,
        p99_us: p99,
    }
}
