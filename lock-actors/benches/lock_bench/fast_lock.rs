//! The fast_lock scenario: our non-reentrant fast lock against rslock's lock + unlock.

use super::*;

pub(crate) struct FastLock {
    pub(crate) pairs: f64,
    pub(crate) rslock: f64,
    /// Library / rslock, round by round.
    pub(crate) ratio: Spread,
    /// rslock against itself, interleaved as the library and rslock are.
    pub(crate) aa: Spread,
}

pub(crate) async fn fast_lock(url: &str, knobs: &Knobs, rows: &mut Vec<Row>) -> FastLock {
    let (round, rounds) = (knobs.round, knobs.rounds);
    eprintln!(
        "[fast_lock] {TASKS} tasks, {rounds} rounds of {round:?} per side, library, rslock and rslock again (A/A) in {SLICES} turns"
    );
    let client = LockClient::connect(ClientConfig::new(url))
        .await
        .expect("connect the benchmark client");
    let manager = rslock::LockManager::new(vec![url.to_string()]);
    let (mut ours, mut theirs, mut again) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..rounds {
        let sides = sliced_round(3, round, async |side, slice| match side {
            0 => fast_lock_round(&client, slice).await,
            _ => rslock_round(&manager, slice).await,
        })
        .await;
        let (l, o, a) = (sides[0], sides[1], sides[2]);
        eprintln!(
            "[fast_lock] round {}: library {l:.0} pairs/s, rslock {o:.0} pairs/s ({:.3}), A/A {:.3}",
            r + 1,
            l / o,
            a / o
        );
        ours.push(l);
        theirs.push(o);
        again.push(a);
    }
    client.shutdown();
    let ratio = Spread::ratios(&ours, &theirs);
    let aa = Spread::ratios(&again, &theirs);
    let result = FastLock {
        pairs: median(&mut ours),
        rslock: median(&mut theirs),
        ratio,
        aa,
    };
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
        Row::new(
            "fast_lock",
            &format!("ratio_to_rslock ({})", ratio.label()),
            Some(ratio.median),
        )
        .target(">= 1.0 every round", Some(ratio.low >= 1.0)),
    );
    rows.push(aa_row("fast_lock", "rslock / rslock", aa));
    result
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
