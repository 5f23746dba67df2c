//! The fast_lock scenario: our non-reentrant fast lock against rslock's lock + unlock.

use super::*;

pub(crate) struct FastLock {
    pub(crate) pairs: f64,
    pub(crate) rslock: f64,
    /// The lowest library / rslock ratio of one round.
    pub(crate) min_round_ratio: f64,
}

pub(crate) async fn fast_lock(url: &str, round: Duration, rows: &mut Vec<Row>) -> FastLock {
    eprintln!(
        "[fast_lock] {TASKS} tasks, {ROUNDS} rounds of {round:?} per side, each in {SLICES} alternating slices"
    );
    let client = LockClient::connect(ClientConfig::new(url))
        .await
        .expect("connect the benchmark client");
    let manager = rslock::LockManager::new(vec![url.to_string()]);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        let (l, o) = interleaved_round(&client, &manager, round).await;
        eprintln!(
            "[fast_lock] round {}: library {l:.0} pairs/s, rslock {o:.0} pairs/s ({:.2})",
            r + 1,
            l / o
        );
        ours.push(l);
        theirs.push(o);
    }
    client.shutdown();
    let min_round_ratio = ours
        .iter()
        .zip(&theirs)
        .map(|(l, o)| l / o)
        .fold(f64::INFINITY, f64::min);
    let result = FastLock {
        pairs: median(&mut ours),
        rslock: median(&mut theirs),
        min_round_ratio,
    };
    let ratio = result.pairs / result.rslock;
    rows.push(Row::new(
        "fast_lock",
        "pairs/s, library",
        Some(result.pairs),
    ));
    rows.push(Row::new(
        "fast_lock",
        "pairs/s, rslock",
        Some(result.rslock),
    ));
    rows.push(
        Row::new("fast_lock", "ratio_to_rslock", Some(ratio)).target(">= 1.0", Some(ratio >= 1.0)),
    );
    rows.push(
        Row::new("fast_lock", "min_round_ratio", Some(min_round_ratio))
            .target(">= 1.05", Some(min_round_ratio >= 1.05)),
    );
    result
}

/// Slices a round is cut into per side. The two sides alternate slice by slice (library,
/// rslock, rslock, library, ...), so a drift of this shared machine's load within a round
/// weighs on both alike; one slice per side, back to back, let a round's ratio swing from
/// 0.74 to 1.45 in one run.
const SLICES: u32 = 8;

/// One round: `round` of each side, run as [`SLICES`] alternating slices; the pairs/s of
/// the library and of rslock, each the mean over its slices (all of equal length).
async fn interleaved_round(
    client: &LockClient,
    manager: &rslock::LockManager,
    round: Duration,
) -> (f64, f64) {
    let slice = round / SLICES;
    let (mut ours, mut theirs) = (0.0, 0.0);
    for s in 0..SLICES {
        if s % 2 == 0 {
            ours += fast_lock_round(client, slice).await;
            theirs += rslock_round(manager, slice).await;
        } else {
            theirs += rslock_round(manager, slice).await;
            ours += fast_lock_round(client, slice).await;
        }
    }
    (ours / f64::from(SLICES), theirs / f64::from(SLICES))
}

pub(crate) async fn fast_lock_round(client: &LockClient, round: Duration) -> f64 {
    fast_lock_pairs(client, TASKS, round).await.0
}

/// [`fast_lock_round`] with `tasks` tasks: pairs/s and all pairs made (see [`tasks_round`]).
pub(crate) async fn fast_lock_pairs(
    client: &LockClient,
    tasks: usize,
    round: Duration,
) -> (f64, u64) {
    tasks_round(tasks, round, |i, stop, count| {
        let lock = client
            .fast_lock(&format!("bench:fast:{i}"))
            .expect("valid name");
        async move {
            while !stop.load(Ordering::Relaxed) {
                let guard = lock.acquire().await.expect("uncontended fast acquire");
                guard.unlock().await.expect("uncontended fast unlock");
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await
}

pub(crate) async fn rslock_round(manager: &rslock::LockManager, round: Duration) -> f64 {
    rslock_pairs(manager, TASKS, round).await.0
}

/// [`rslock_round`] with `tasks` tasks: pairs/s and all pairs made (see [`tasks_round`]).
pub(crate) async fn rslock_pairs(
    manager: &rslock::LockManager,
    tasks: usize,
    round: Duration,
) -> (f64, u64) {
    tasks_round(tasks, round, |i, stop, count| {
        let manager = manager.clone();
        let name = format!("bench:rslock:{i}");
        async move {
            while !stop.load(Ordering::Relaxed) {
                let lock = manager
                    .lock(name.as_bytes(), Duration::from_millis(LEASE_MS))
                    .await
                    .expect("rslock lock");
                manager.unlock(&lock).await;
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
    })
    .await
}
