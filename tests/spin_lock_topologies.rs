//! The spin lock on a Redis Cluster (names over every slot, hash tags) and on a
//! Sentinel-followed primary (across a failover): exclusion and hand-over by polling alone,
//! nothing subscribed or published on any node, nothing left behind.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{LockClient, LockError, LockGuard};
use std::collections::HashSet;
use std::time::{Duration, Instant};
use support::topology::{RedisCluster, SentinelSetup};
use support::{cluster_client, eventually, sentinel_client};

/// How soon a polling waiter notices an unlock (the default backoff's cap is 128 ms).
const HAND_OVER_BOUND: Duration = Duration::from_secs(2);
const PUB_SUB: [&str; 5] = [
    "subscribe",
    "ssubscribe",
    "psubscribe",
    "publish",
    "spublish",
];

/// A waiter for spin lock `name` of `client`, spawned: its guard and when it got it.
fn waiter(
    client: &LockClient,
    name: &str,
    wait: Duration,
) -> tokio::task::JoinHandle<(Result<LockGuard, LockError>, Instant)> {
    let lock = client.spin_lock(name).unwrap();
    tokio::spawn(async move { (lock.acquire_timeout(wait).await, Instant::now()) })
}

/// Awaits `waiter`'s guard, granted within the bound after `unlocked_at`.
async fn granted(
    waiter: tokio::task::JoinHandle<(Result<LockGuard, LockError>, Instant)>,
    unlocked_at: Instant,
    limit: Duration,
) -> LockGuard {
    let (guard, at) = tokio::time::timeout(limit, waiter)
        .await
        .expect("the waiter ends")
        .unwrap();
    let guard = guard.expect("the waiter takes the lock");
    let took = at - unlocked_at;
    assert!(took < limit, "handed over after {took:?}");
    guard
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_spin_locks_of_every_slot_hand_over_by_polling_and_nothing_subscribes() {
    let cluster = RedisCluster::start(3, 0);
    let holder = cluster_client(&cluster, |c| c).await;
    let other = cluster_client(&cluster, |c| c).await;
    // Names over every primary; two of them share a slot by their hash tag.
    let names: Vec<String> = (0..30).map(|i| format!("spin:{i}")).collect();
    let (tagged, twin) = ("{order:7}:spin", "{order:7}:audit");
    assert_eq!(cluster.slot_for_key(tagged), cluster.slot_for_key(twin));
    let mut guards = Vec::new();
    for name in names.iter().map(String::as_str).chain([tagged, twin]) {
        guards.push(holder.spin_lock(name).unwrap().acquire().await.unwrap());
    }
    let primaries: HashSet<u16> = names.iter().map(|n| cluster.primary_for_key(n)).collect();
    assert_eq!(primaries.len(), 3, "the names landed on {primaries:?}");

    // The other client is excluded everywhere: tries give up and leave nothing.
    for name in [names[0].as_str(), tagged] {
        let lock = other.spin_lock(name).unwrap();
        let busy = lock.acquire_timeout(Duration::from_millis(200)).await;
        assert!(busy.is_err_and(|e| e.is_timeout()), "{name}");
    }
    let before = cluster_script_calls(&cluster);
    let waiters: Vec<_> = [names[1].as_str(), names[2].as_str(), tagged]
        .into_iter()
        .map(|name| waiter(&other, name, Duration::from_secs(30)))
        .collect();
    // A few polls each on the held locks (every try is a script call).
    eventually("the waiters poll", Duration::from_secs(10), || async {
        cluster_script_calls(&cluster) >= before + 9
    })
    .await;
    assert!(
        waiters.iter().all(|w| !w.is_finished()),
        "a held lock was taken"
    );
    let unlocked_at = Instant::now();
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    for waiter in waiters {
        let guard = granted(waiter, unlocked_at, HAND_OVER_BOUND).await;
        guard.unlock().await.unwrap();
    }
    assert_eq!(cluster.keys_on_all(), Vec::<String>::new());
    for command in PUB_SUB {
        assert_eq!(
            cluster.command_calls_total(command),
            0,
            "{command} was called"
        );
    }
}

/// Script calls (every try is one) on all the cluster's primaries.
fn cluster_script_calls(cluster: &RedisCluster) -> u64 {
    cluster.command_calls_total("evalsha") + cluster.command_calls_total("eval")
}

/// Script calls (every try is one) on the Redis node on `port`.
async fn script_calls(port: u16) -> u64 {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap();
    support::parse_command_calls(&info, "evalsha")
}

/// The channels anybody listens on at the Redis node on `port` (classic and sharded), but
/// the sentinels' own `__sentinel__:hello`.
async fn channels_on(port: u16) -> Vec<String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut channels = Vec::new();
    for listing in ["CHANNELS", "SHARDCHANNELS"] {
        let found: Vec<String> = redis::cmd("PUBSUB")
            .arg(listing)
            .query_async(&mut conn)
            .await
            .unwrap();
        channels.extend(found.into_iter().filter(|c| c != "__sentinel__:hello"));
    }
    channels
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sentinel_a_polling_waiter_takes_the_lock_on_the_new_primary_after_a_failover() {
    let mut setup = SentinelSetup::start();
    let holder = sentinel_client(&setup, |c| {
        c.sync_replicas(1, Duration::from_secs(1))
            .watchdog_timeout(Duration::from_secs(9))
    })
    .await;
    let other = sentinel_client(&setup, |c| c).await;
    let name = "spin:nightly";

    // A plain hand-over first.
    let guard = holder.spin_lock(name).unwrap().acquire().await.unwrap();
    let tried = script_calls(setup.primary_port()).await;
    let next = waiter(&other, name, Duration::from_secs(30));
    eventually("the waiter polls", Duration::from_secs(10), || async {
        script_calls(setup.primary_port()).await >= tried + 3
    })
    .await;
    assert!(!next.is_finished(), "a held lock was taken");
    // (The sentinels subscribe and publish on the primary themselves: its command counts
    // are theirs too. The channels listened on say whether a waiter subscribed.)
    assert_eq!(
        channels_on(setup.primary_port()).await,
        Vec::<String>::new()
    );
    let unlocked_at = Instant::now();
    guard.unlock().await.unwrap();
    granted(next, unlocked_at, HAND_OVER_BOUND)
        .await
        .unlock()
        .await
        .unwrap();

    // Held (and on the replica) when the primary dies: the waiter's polls fail until the
    // failover, then reach the new primary, where the holder's unlock frees it.
    let guard = holder.spin_lock(name).unwrap().acquire().await.unwrap();
    let primary = setup.primary_port();
    let tried = script_calls(primary).await;
    let next = waiter(&other, name, Duration::from_secs(60));
    // Once it has tried twice (found it busy): a waiter whose first try gets no answer is
    // failed fast by design; a waiting one rides out the failover.
    eventually("the waiter polls", Duration::from_secs(10), || async {
        script_calls(primary).await >= tried + 2
    })
    .await;
    let old = setup.kill_primary();
    let new = setup
        .wait_for_failover_async(old, Duration::from_secs(40))
        .await;
    assert_ne!(old, new);
    eventually(
        "the holder reaches the new primary",
        Duration::from_secs(20),
        || async { holder.spin_lock(name).unwrap().is_locked().await.is_ok() },
    )
    .await;
    assert!(!guard.is_lost());
    if next.is_finished() {
        let (outcome, _) = next.await.unwrap();
        panic!(
            "the waiter ended while the lock was held: {:?}",
            outcome.map(|g| g.owner())
        );
    }
    assert_eq!(channels_on(new).await, Vec::<String>::new());
    let unlocked_at = Instant::now();
    guard.unlock().await.expect("unlock on the new primary");
    // Polls back off to at most 128 ms; a poll under way may still be retrying its
    // connection to the new primary.
    let guard = granted(next, unlocked_at, Duration::from_secs(30)).await;
    guard.unlock().await.unwrap();
    eventually(
        "nothing is left on the new primary",
        Duration::from_secs(10),
        || async {
            let client = redis::Client::open(format!("redis://127.0.0.1:{new}/")).unwrap();
            let mut conn = client.get_multiplexed_async_connection().await.unwrap();
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg("*")
                .query_async(&mut conn)
                .await
                .unwrap();
            keys.is_empty()
        },
    )
    .await;
}
