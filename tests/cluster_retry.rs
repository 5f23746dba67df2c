//! A reply lost on a Redis Cluster connection after its script ran.
//!
//! Each primary of a 3-primary cluster announces a loopback proxy's port
//! (`cluster-announce-port`), so the client's every connection to it goes through the
//! proxy. The proxy holds the replies back while a script runs on the server, then cuts
//! the connection: the script ran, its reply never arrives. The redis crate's cluster
//! client used to resend such a request after reconnecting, running an unlock, an acquire
//! or a permit release twice. The counts in Redis must stay exact.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{ClientConfig, LockClient, LockError, Released};
use std::collections::HashMap;
use std::time::Duration;
use support::proxy::TcpProxy;
use support::topology::RedisCluster;

/// A 3-primary cluster whose primaries are reached only through proxies.
struct ProxiedCluster {
    cluster: RedisCluster,
    /// Proxy of each primary, by the primary's real port.
    proxies: HashMap<u16, TcpProxy>,
}

impl ProxiedCluster {
    async fn start() -> ProxiedCluster {
        let cluster = RedisCluster::start(3, 0);
        let mut proxies = HashMap::new();
        for port in cluster.primary_ports() {
            let proxy = TcpProxy::start(port).await;
            let mut conn = node(port).await;
            let _: () = redis::cmd("CONFIG")
                .arg("SET")
                .arg("cluster-announce-bus-port")
                .arg(port + 10_000)
                .arg("cluster-announce-port")
                .arg(proxy.port())
                .query_async(&mut conn)
                .await
                .expect("CONFIG SET cluster-announce-port");
            proxies.insert(port, proxy);
        }
        let announced: Vec<u16> = proxies.values().map(TcpProxy::port).collect();
        // Every node must name the proxies, and only them, as the slots' owners: a client
        // that learns a real port talks to that primary past its proxy, and no reply is
        // ever held. Right after the change a node's view can still flip back for a moment
        // (a cluster-bus message sent before the change, read after a newer one), so the
        // views must agree for a whole `STABLE` window, not at one instant.
        let stable = cluster.node_timeout() * 2;
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut agreed_since: Option<std::time::Instant> = None;
        loop {
            let mut agreed = true;
            for port in cluster.primary_ports() {
                let mut conn = node(port).await;
                let slots: redis::Value = redis::cmd("CLUSTER")
                    .arg("SLOTS")
                    .query_async(&mut conn)
                    .await
                    .expect("CLUSTER SLOTS");
                let mut seen = Vec::new();
                slot_ports(&slots, &mut seen);
                agreed &= !seen.is_empty() && seen.iter().all(|p| announced.contains(p));
            }
            let now = std::time::Instant::now();
            match (agreed, agreed_since) {
                (false, _) => agreed_since = None,
                (true, None) => agreed_since = Some(now),
                (true, Some(since)) if now - since >= stable => break,
                (true, Some(_)) => {}
            }
            assert!(
                now < deadline,
                "the nodes did not agree on the proxies' ports for {stable:?} within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        ProxiedCluster { cluster, proxies }
    }

    async fn client(&self) -> LockClient {
        let seeds: Vec<String> = self.proxies.values().map(TcpProxy::url).collect();
        let config = ClientConfig::cluster(seeds).default_wait(Duration::from_secs(10));
        LockClient::connect(config)
            .await
            .expect("connect to the cluster through the proxies")
    }

    /// The real port of the primary serving `key`, and its proxy.
    fn serving(&self, key: &str) -> (u16, &TcpProxy) {
        // Slots never move in these tests: ask which primary's range holds the key.
        let slot = self.cluster.slot_for_key(key);
        let port = *self
            .proxies
            .keys()
            .find(|port| owns_slot(**port, slot))
            .expect("a primary owns the key's slot");
        (port, &self.proxies[&port])
    }
}

/// A fresh connection straight to the node on `port` (not through its proxy).
async fn node(port: u16) -> redis::aio::MultiplexedConnection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .expect("node url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to the node")
}

/// Whether the node on `port` serves `slot`, as its own `CLUSTER NODES` line says.
fn owns_slot(port: u16, slot: u16) -> bool {
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .expect("node url")
        .get_connection()
        .expect("connect to the node");
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(&mut conn)
        .expect("CLUSTER NODES");
    nodes.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.get(2).is_some_and(|flags| flags.contains("myself"))
            && fields.iter().skip(8).any(|range| {
                let mut ends = range.split('-');
                let start = ends.next().and_then(|s| s.parse::<u16>().ok());
                let end = ends.next().and_then(|s| s.parse::<u16>().ok()).or(start);
                matches!((start, end), (Some(a), Some(b)) if a <= slot && slot <= b)
            })
    })
}

/// Every node port named in a `CLUSTER SLOTS` reply.
fn slot_ports(value: &redis::Value, ports: &mut Vec<u16>) {
    let redis::Value::Array(ranges) = value else {
        return;
    };
    for range in ranges {
        let redis::Value::Array(fields) = range else {
            continue;
        };
        for node in fields.iter().skip(2) {
            if let redis::Value::Array(parts) = node {
                if let Some(redis::Value::Int(port)) = parts.get(1) {
                    ports.push(*port as u16);
                }
            }
        }
    }
}

/// The hold counts in lock hash `name`, straight from its node.
async fn hold_counts(port: u16, name: &str) -> Vec<String> {
    let mut conn = node(port).await;
    redis::cmd("HVALS")
        .arg(name)
        .query_async(&mut conn)
        .await
        .expect("HVALS")
}

/// The permit count of semaphore `name`, straight from its node.
async fn permits(port: u16, name: &str) -> Option<i64> {
    let mut conn = node(port).await;
    redis::cmd("GET")
        .arg(name)
        .query_async(&mut conn)
        .await
        .expect("GET")
}

/// Runs `request` while `proxy` holds every reply back; once `ran` says the request ran
/// on the server, cuts the connections (the reply is lost) and lets replies flow again.
/// Returns what `request` returned.
async fn lose_the_reply<T: std::fmt::Debug>(
    proxy: &TcpProxy,
    request: impl std::future::Future<Output = T>,
    mut ran: impl AsyncFnMut() -> bool,
) -> T {
    proxy.hold_replies(true);
    tokio::pin!(request);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        tokio::select! {
            early = &mut request => panic!("the request ended before it ran: {early:?}"),
            _ = tokio::time::sleep(Duration::from_millis(2)) => {}
        }
        if ran().await {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the request did not run on the server within 10 s"
        );
    }
    proxy.cut();
    proxy.hold_replies(false);
    request.await
}

/// Waits until `ask` gets an answer again (the connection cut by the last test step is
/// found broken by the first request after it, which may then fail before it ran).
async fn until_answered<T, E>(mut ask: impl AsyncFnMut() -> Result<T, E>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while ask().await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no answer within 10 s after the cut"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[actix_rt::test]
async fn an_unlock_whose_reply_is_lost_runs_once_and_the_outer_hold_stays() {
    let cluster = ProxiedCluster::start().await;
    let locks = cluster.client().await;
    let name = "retry:unlock";
    let (port, proxy) = cluster.serving(name);
    let lock = locks.lock(name).unwrap();
    let outer = lock.acquire().await.expect("acquire");
    let inner = outer
        .reenter(Duration::from_secs(1))
        .await
        .expect("re-enter");
    assert_eq!(hold_counts(port, name).await, vec!["2"]);

    let unlocked = lose_the_reply(proxy, inner.unlock(), async || {
        hold_counts(port, name).await == vec!["1"]
    })
    .await;
    // Whatever the caller was told, Redis counts exactly the one hold left.
    // Our reconcile path settles the lost reply: the one hold left is reported.
    assert!(
        matches!(unlocked, Ok(Released::StillHeld { holds: 1 })),
        "{unlocked:?}"
    );
    assert_eq!(
        hold_counts(port, name).await,
        vec!["1"],
        "the unlock ran twice: the outer hold was freed"
    );
    assert!(!outer.is_lost());
    assert_eq!(lock.hold_count(outer.owner()).await.expect("hold count"), 1);
    outer.unlock().await.expect("unlock the outer hold");
    assert!(hold_counts(port, name).await.is_empty());
}

#[actix_rt::test]
async fn an_acquire_whose_reply_is_lost_leaves_exactly_the_holds_handed_out() {
    let cluster = ProxiedCluster::start().await;
    let locks = cluster.client().await;
    let name = "retry:acquire";
    let (port, proxy) = cluster.serving(name);
    let lock = locks.lock(name).unwrap();
    // Once first, so the server has the scripts (a NOSCRIPT reply would be held too).
    lock.acquire()
        .await
        .expect("warm-up")
        .unlock()
        .await
        .expect("warm-up");

    let acquired = lose_the_reply(proxy, lock.acquire(), async || {
        !hold_counts(port, name).await.is_empty()
    })
    .await;
    assert!(
        matches!(acquired, Ok(_) | Err(LockError::Unavailable { .. })),
        "{acquired:?}"
    );
    let expected: Vec<&str> = match &acquired {
        Ok(_) => vec!["1"],
        Err(_) => vec![],
    };
    // A lost reply may leave a hold that nobody counts only until it is reconciled.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while hold_counts(port, name).await != expected && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        hold_counts(port, name).await,
        expected,
        "the acquire ran twice: Redis counts a hold nobody has"
    );
    if let Ok(guard) = acquired {
        guard.unlock().await.expect("unlock");
    }
    assert!(hold_counts(port, name).await.is_empty());
}

#[actix_rt::test]
async fn a_permit_release_or_add_whose_reply_is_lost_counts_once() {
    let cluster = ProxiedCluster::start().await;
    let locks = cluster.client().await;
    let name = "retry:permits";
    let (port, proxy) = cluster.serving(name);
    let semaphore = locks.semaphore(name).unwrap();
    assert!(semaphore.try_set_permits(5).await.expect("set permits"));
    // Once first, so the server has the scripts (a NOSCRIPT reply would be held too).
    semaphore.release(1).await.expect("warm-up");
    semaphore.add_permits(-1).await.expect("warm-up");

    let released = lose_the_reply(proxy, semaphore.release(1), async || {
        permits(port, name).await == Some(6)
    })
    .await;
    // The caller cannot know whether it ran: it is told so, never that it failed.
    assert!(
        matches!(released, Ok(()) | Err(LockError::Unavailable { .. })),
        "{released:?}"
    );
    assert_eq!(permits(port, name).await, Some(6), "the release ran twice");

    until_answered(async || semaphore.available_permits().await).await;
    let added = lose_the_reply(proxy, semaphore.add_permits(2), async || {
        permits(port, name).await == Some(8)
    })
    .await;
    assert!(
        matches!(added, Ok(8) | Err(LockError::Unavailable { .. })),
        "{added:?}"
    );
    assert_eq!(permits(port, name).await, Some(8), "the add ran twice");
    assert_eq!(semaphore.available_permits().await.expect("available"), 8);
}
