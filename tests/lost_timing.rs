//! `lost()` is never later than Redis letting the lock go: a holder cut off from Redis is
//! told by the time its key expires there (plus scheduling slack), not at the watchdog's
//! next tick; the same for lease-less permits. And a hold that Redis frees while local
//! holds remain is lost, not released.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{LockClient, LockGuard, RedLock};
use redis::AsyncCommands;
use std::time::{Duration, Instant, SystemTime};
use support::proxy::TcpProxy;
use support::RedisServer;
use tokio::time::timeout;

/// How late `lost()` may be after the key is gone in Redis: scheduling slack only.
const SLACK: Duration = Duration::from_millis(50);

/// The watchdog lease of these tests.
const LEASE: Duration = Duration::from_millis(1500);
/// Their renew interval: not a divisor of the lease, so the lease of the last renewal
/// before a stall ends between two rounds (300 ms before the third one).
const INTERVAL: Duration = Duration::from_millis(600);

/// A client reaching `server` through a proxy the test can stall. A renewal stuck in the
/// stall gets no answer for longer than the lease, so no failure path runs early.
async fn stallable_client(server: &RedisServer) -> (TcpProxy, LockClient) {
    let proxy = TcpProxy::start(server.port()).await;
    let client = support::client_at(&proxy.url(), |config| {
        config
            .watchdog_timeout(LEASE)
            .renew_every(INTERVAL)
            .response_timeout(LEASE * 2)
            .connect_timeout(Duration::from_millis(700))
    })
    .await;
    (proxy, client)
}

/// Records when `lost()` resolves, on a task of its own.
fn lost_at(guard: &LockGuard) -> tokio::task::JoinHandle<Instant> {
    let lost = guard.lost();
    tokio::spawn(async move {
        lost.await;
        Instant::now()
    })
}

/// Polls `keys` on `server` directly (not through the proxy) and returns, for each, the
/// first instant it was seen gone. Reading a key expires it in Redis on the spot, so the
/// poll sees the expiry within one poll period.
async fn expiries(server: &RedisServer, keys: &[String], limit: Duration) -> Vec<Instant> {
    let mut conn = server.conn().await;
    let mut gone: Vec<Option<Instant>> = vec![None; keys.len()];
    let until = Instant::now() + limit;
    while gone.iter().any(Option::is_none) {
        assert!(Instant::now() < until, "keys still there after {limit:?}");
        for (key, seen) in keys.iter().zip(gone.iter_mut()) {
            if seen.is_none() && !conn.exists::<_, bool>(key).await.unwrap() {
                *seen = Some(Instant::now());
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    gone.into_iter().flatten().collect()
}

/// Waits until a renewal round has reached every key of `keys` on `server` since the call:
/// its PTTL rose again.
async fn renewed(server: &RedisServer, keys: &[String]) {
    let mut conn = server.conn().await;
    let mut lowest = vec![i64::MAX; keys.len()];
    let mut seen = vec![false; keys.len()];
    let until = Instant::now() + LEASE * 3;
    while seen.contains(&false) {
        assert!(Instant::now() < until, "no renewal of {keys:?} seen");
        for (i, key) in keys.iter().enumerate() {
            let ttl: i64 = conn.pttl(key).await.unwrap();
            seen[i] |= ttl > lowest[i].saturating_add(100);
            lowest[i] = lowest[i].min(ttl);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until a renewal round has moved the expiry score of all `count` permits in the
/// zset `set` since the call.
async fn permits_renewed(server: &RedisServer, set: &str, count: usize) {
    let mut conn = server.conn().await;
    let first: Vec<(Vec<u8>, u64)> = conn.zrange_withscores(set, 0, -1).await.unwrap();
    assert_eq!(first.len(), count);
    let until = Instant::now() + LEASE * 3;
    loop {
        let now: Vec<(Vec<u8>, u64)> = conn.zrange_withscores(set, 0, -1).await.unwrap();
        let moved = first.iter().all(|(id, score)| {
            now.iter()
                .any(|(other, later)| other == id && later > score)
        });
        if moved {
            return;
        }
        assert!(Instant::now() < until, "no renewal of the permits seen");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_cut_off_from_redis_is_told_by_the_time_its_key_expires() {
    let server = RedisServer::start();
    let (proxy, client) = stallable_client(&server).await;
    let mut guards = Vec::new();
    let mut keys = Vec::new();
    for i in 0..3 {
        let name = format!("lost:timely:{i}");
        guards.push(client.lock(&name).unwrap().acquire().await.unwrap());
        keys.push(name);
    }
    // Every hold renewed by a round: its lease now ends 300 ms before a later round.
    renewed(&server, &keys).await;
    let losts: Vec<_> = guards.iter().map(lost_at).collect();
    proxy.blackhole(true);
    let gone = expiries(&server, &keys, LEASE * 3).await;
    for ((key, lost), gone) in keys.iter().zip(losts).zip(gone) {
        let lost = timeout(LEASE * 2, lost)
            .await
            .unwrap_or_else(|_| panic!("{key}: lost() never fired"))
            .unwrap();
        let late = lost.saturating_duration_since(gone);
        assert!(
            late <= SLACK,
            "{key}: lost() fired {late:?} after the key expired in Redis"
        );
    }
    for guard in &guards {
        assert!(guard.is_lost());
    }
    assert_eq!(client.watched_holds(), 0);
}

/// A permit id as Redis stores it: the raw bytes behind the hex the guard shows.
fn raw_id(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_less_permit_cut_off_from_redis_is_lost_by_its_expiry_score() {
    let server = RedisServer::start();
    let (proxy, client) = stallable_client(&server).await;
    let semaphore = client.expirable_semaphore("permits:timely").unwrap();
    semaphore.try_set_permits(3).await.unwrap();
    let mut permits = Vec::new();
    for _ in 0..3 {
        permits.push(semaphore.acquire(1).await.unwrap());
    }
    // Every permit renewed by a round: its lease now ends 300 ms before a later round.
    permits_renewed(&server, "{permits:timely}:timeout", permits.len()).await;
    // The wall clock when each guard is told: Redis runs on this machine, so its clock
    // (which scores the permits) is the same one.
    let told: Vec<_> = permits
        .iter()
        .map(|permit| {
            let lost = permit.lost();
            tokio::spawn(async move {
                lost.await;
                SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap()
                    .as_millis() as u64
            })
        })
        .collect();
    proxy.blackhole(true);
    let mut conn = server.conn().await;
    let set = "{permits:timely}:timeout";
    for (permit, told) in permits.iter().zip(told) {
        let told_ms = timeout(LEASE * 2, told)
            .await
            .expect("lost() fires while Redis is out of reach")
            .unwrap();
        let expiry: u64 = conn.zscore(set, raw_id(permit.permit_id())).await.unwrap();
        let late = told_ms.saturating_sub(expiry);
        assert!(
            late <= SLACK.as_millis() as u64,
            "permit {} reported lost {late} ms after its expiry score",
            permit.permit_id()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_freeing_a_lock_while_local_holds_remain_is_a_loss() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let lock = client.lock("lost:outer").unwrap();
    let outer = lock.acquire().await.unwrap();
    let inner = outer.reenter(Duration::from_secs(1)).await.unwrap();
    // Redis counts one hold where we count two (another process's HINCRBY -1, a restore
    // from an older snapshot): the inner unlock frees the key in Redis.
    let field = format!("{}:{}", client.id(), outer.owner().id());
    let mut conn = server.conn().await;
    let _: () = conn.hset("lost:outer", &field, 1).await.unwrap();
    inner.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap(), "Redis freed the lock");
    timeout(Duration::from_secs(2), outer.lost())
        .await
        .expect("the outer hold hears it is lost");
    assert!(outer.is_lost());
    assert_eq!(client.watched_holds(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_is_lost_by_the_time_a_majority_of_its_keys_expire() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let mut proxies = Vec::new();
    let mut clients = Vec::new();
    for server in &servers {
        let (proxy, client) = stallable_client(server).await;
        proxies.push(proxy);
        clients.push(client);
    }
    // A node timeout longer than the rest of the validity when a round starts: a round
    // that waits it out must not hold back the loss.
    let lock = RedLock::new(&clients, "lost:redlock")
        .unwrap()
        .node_timeout(LEASE * 4 / 5);
    let guard = lock.acquire().await.unwrap();
    let start = Instant::now();
    while guard.nodes_pending() > 0 || guard.nodes_held() < 3 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "held on all nodes"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A renewal round has passed on every node.
    for server in &servers {
        renewed(server, &["lost:redlock".to_string()]).await;
    }
    let lost = guard.lost();
    let lost = tokio::spawn(async move {
        lost.await;
        Instant::now()
    });
    proxies[1].blackhole(true);
    proxies[2].blackhole(true);
    let key = vec!["lost:redlock".to_string()];
    let gone_1 = expiries(&servers[1], &key, LEASE * 3);
    let gone_2 = expiries(&servers[2], &key, LEASE * 3);
    let (gone_1, gone_2) = tokio::join!(gone_1, gone_2);
    // From here on only one node of three holds the key: no majority.
    let majority_gone = gone_1[0].max(gone_2[0]);
    let lost = timeout(LEASE * 2, lost)
        .await
        .expect("lost() fires")
        .unwrap();
    let late = lost.saturating_duration_since(majority_gone);
    assert!(
        late <= SLACK,
        "RedLock lost() fired {late:?} after a majority of its keys expired"
    );
    assert!(guard.is_lost());
}
