//! Tests of the topology helpers in `tests/support/topology.rs` (Redis Cluster and
//! Sentinel set-ups of real `redis-server`s), with plain `redis` crate clients.
//!
//! Each test prints how long its phases took (`--nocapture` / nextest `--no-capture`).

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, TcpListener};
use std::time::{Duration, Instant};

use redis::sentinel::{SentinelClient, SentinelServerType};
use redis::Commands;

use support::topology::{raw_ssubscribe, RedisCluster, SentinelSetup};

/// Bound for a failover (cluster or Sentinel) on a loaded machine.
const FAILOVER_LIMIT: Duration = Duration::from_secs(30);
/// Bound for asynchronous bookkeeping (unsubscribes, released ports) to catch up.
const SETTLE: Duration = Duration::from_secs(10);

/// A sync connection to one node.
fn node(port: u16) -> redis::Connection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let conn = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("connect to {port}: {e}"));
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    conn
}

fn role(port: u16) -> String {
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut node(port))
        .unwrap();
    info.lines()
        .find_map(|l| l.trim().strip_prefix("role:"))
        .unwrap_or_else(|| panic!("no role in INFO of {port}: {info}"))
        .to_string()
}

/// Waits (at most [`SETTLE`]) until `cond` holds, checking every 20 ms.
fn settle(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + SETTLE;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "timed out after {SETTLE:?} waiting for: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn port_is_free(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// Started and used inside a current-thread tokio runtime, with an async cluster
/// connection: the cluster comes up, hash tags land where `primary_for_key` says, and
/// the counting helpers see what was done. Dropping it frees every port.
#[tokio::test]
async fn cluster_comes_up_and_routes_hash_tags() {
    let t = Instant::now();
    let cluster = RedisCluster::start(3, 1);
    eprintln!("cluster 3x(1+1) up in {:?}", t.elapsed());

    let ports = cluster.ports();
    assert_eq!(ports.len(), 6);
    assert!(!ports.contains(&6379), "must never use the shared redis");
    assert_eq!(cluster.urls().len(), 6);
    assert_eq!(
        cluster.urls()[0],
        format!("redis://127.0.0.1:{}/", ports[0])
    );
    let primaries = cluster.primary_ports();
    assert_eq!(primaries, ports[..3], "the primaries come first");
    assert_eq!(cluster.primary_urls(), cluster.urls()[..3]);
    for &port in &ports[3..] {
        assert_eq!(role(port), "slave", "node {port}");
    }

    // Three hash tags served by three different primaries.
    let mut keys: Vec<(String, u16)> = Vec::new();
    for i in 0..200 {
        let key = format!("{{tag{i}}}:lock");
        let owner = cluster.primary_for_key(&key);
        if keys.iter().all(|(_, o)| *o != owner) {
            keys.push((key, owner));
        }
        if keys.len() == 3 {
            break;
        }
    }
    assert_eq!(keys.len(), 3, "no 3 tags on 3 primaries: {keys:?}");

    let mut conn = cluster.client().get_async_connection().await.unwrap();
    for (key, _) in &keys {
        let () = redis::cmd("SET")
            .arg(key)
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    for (key, owner) in &keys {
        let value: String = node(*owner).get(key).unwrap();
        assert_eq!(&value, key, "read from the owner {owner}");
        for &other in primaries.iter().filter(|p| *p != owner) {
            let err = node(other).get::<_, String>(key).unwrap_err();
            assert!(
                err.to_string().contains(&format!(":{owner}")),
                "{other} must redirect {key} to {owner}: {err}"
            );
        }
    }
    let mut expected: Vec<String> = keys.iter().map(|(k, _)| k.clone()).collect();
    expected.sort();
    assert_eq!(cluster.keys_on_all(), expected);
    assert_eq!(
        cluster.command_calls_total("set"),
        3,
        "replicas are not counted"
    );
    assert_eq!(cluster.command_calls_total("get"), 3);

    let channel = "{tag0}:unlock";
    let owner = cluster.primary_for_key(channel);
    assert_eq!(cluster.sharded_subscribers(channel), 0);
    let subscriber = raw_ssubscribe(owner, channel);
    assert_eq!(cluster.sharded_subscribers(channel), 1);
    drop(subscriber);
    settle("the shard subscriber is gone", || {
        cluster.sharded_subscribers(channel) == 0
    });

    drop(conn);
    let t = Instant::now();
    drop(cluster);
    settle("every node's port is free after drop", || {
        ports.iter().all(|&p| port_is_free(p))
    });
    eprintln!("cluster dropped, ports free in {:?}", t.elapsed());
}

/// Killing a primary makes its replica take over (awaited with the async wait); pausing
/// a node does not hold up the helpers.
#[tokio::test]
async fn cluster_failover_promotes_replica() {
    let t = Instant::now();
    let mut cluster = RedisCluster::start(3, 1);
    eprintln!("cluster 3x(1+1) up in {:?}", t.elapsed());

    let key = "{failover}:lock";
    let old = cluster.primary_for_key(key);
    let replica = cluster.replica_of(old);
    assert_eq!(cluster.replicas_of(old), vec![replica]);
    assert_eq!(role(replica), "slave");

    // A paused node is left out of the helpers' questions (they do not hang on it).
    cluster.pause_node(replica);
    let t = Instant::now();
    assert!(!cluster.live_ports().contains(&replica));
    assert_eq!(cluster.primary_for_key(key), old);
    assert!(cluster.keys_on_all().is_empty());
    cluster.resume_node(replica);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "helpers waited for the paused node"
    );

    let mut conn = node(old);
    let () = conn.set(key, "held").unwrap();
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query(&mut conn)
        .unwrap();
    assert_eq!(acked, 1, "the replica got the key before the kill");
    drop(conn);

    cluster.kill_node(old);
    let t = Instant::now();
    let new = cluster.wait_for_failover_async(old, FAILOVER_LIMIT).await;
    eprintln!(
        "cluster failover {old} -> {new} in {:?} (node timeout {:?})",
        t.elapsed(),
        cluster.node_timeout()
    );

    assert_eq!(new, replica, "the replica took over");
    assert_eq!(role(new), "master");
    assert_eq!(cluster.primary_for_key(key), new);
    let primaries = cluster.primary_ports();
    assert_eq!(primaries.len(), 3, "{primaries:?}");
    assert!(primaries.contains(&new) && !primaries.contains(&old));
    let value: String = node(new).get(key).unwrap();
    assert_eq!(value, "held");
    let mut conn = cluster.client().get_async_connection().await.unwrap();
    let value: String = redis::cmd("GET")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, "held");
    assert_eq!(cluster.keys_on_all(), vec![key.to_string()]);
}

/// `migrate_slot` moves a slot with its keys (more than one MIGRATE batch) to another
/// primary; the new owner serves them and a client connected before follows.
#[test]
fn cluster_migrate_slot_moves_keys() {
    let t = Instant::now();
    let cluster = RedisCluster::start(3, 1);
    eprintln!("cluster 3x(1+1) up in {:?}", t.elapsed());

    let key = "{migrate}:lock";
    let others: Vec<String> = (0..250).map(|i| format!("{{migrate}}:{i}")).collect();
    let mut conn = cluster.client().get_connection().unwrap();
    let () = conn.set(key, "held").unwrap();
    for other in &others {
        let () = conn.set(other, 1).unwrap();
    }

    let slot = cluster.slot_for_key(key);
    let from = cluster.primary_for_key(key);
    let to = *cluster
        .primary_ports()
        .iter()
        .find(|p| **p != from)
        .unwrap();
    let t = Instant::now();
    cluster.migrate_slot(slot, to);
    eprintln!(
        "slot {slot} with 251 keys migrated {from} -> {to} in {:?}",
        t.elapsed()
    );

    assert_eq!(cluster.owner_of_slot(slot), to);
    assert_eq!(cluster.primary_for_key(key), to);
    let value: String = node(to).get(key).unwrap();
    assert_eq!(value, "held");
    let count: i64 = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(slot)
        .query(&mut node(to))
        .unwrap();
    assert_eq!(count, 251);
    let left: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut node(from)).unwrap();
    assert!(left.is_empty(), "keys left on the source: {left:?}");
    let all = cluster.keys_on_all();
    assert_eq!(all.len(), 251);
    assert_eq!(
        all.iter().collect::<BTreeSet<_>>().len(),
        251,
        "no duplicates"
    );

    // The connection made before the migration follows the MOVED redirect.
    let value: String = conn.get(key).unwrap();
    assert_eq!(value, "held");
    let value: String = cluster.client().get_connection().unwrap().get(key).unwrap();
    assert_eq!(value, "held");

    // Moving it back works too, and a no-op move is fine.
    cluster.migrate_slot(slot, from);
    cluster.migrate_slot(slot, from);
    assert_eq!(cluster.primary_for_key(key), from);
    let value: String = node(from).get(key).unwrap();
    assert_eq!(value, "held");
}

/// The Sentinel set-up comes up, a `SentinelClient` finds the primary, and after
/// `kill_primary` the Sentinels promote the replica.
#[test]
fn sentinel_fails_over_after_kill_primary() {
    let t = Instant::now();
    let mut setup = SentinelSetup::start();
    eprintln!(
        "sentinel setup (1+1 data, 3 sentinels) up in {:?}",
        t.elapsed()
    );

    assert_eq!(setup.sentinel_urls().len(), 3);
    let primary = setup.primary_port();
    let replica = setup.replica_port();
    assert_ne!(primary, replica);
    for port in [primary, replica].into_iter().chain(setup.sentinel_ports()) {
        assert_ne!(port, 6379, "must never use the shared redis");
    }
    assert_eq!(role(primary), "master");
    assert_eq!(role(replica), "slave");

    // A fresh Sentinel client each time: it asks the sentinels which node is the primary.
    fn primary_conn(setup: &SentinelSetup) -> redis::Connection {
        SentinelClient::build(
            setup.sentinel_urls(),
            String::from(setup.master_name()),
            None,
            SentinelServerType::Master,
        )
        .unwrap()
        .get_connection()
        .unwrap()
    }
    let mut conn = primary_conn(&setup);
    let () = conn.set("sentinel:key", "v").unwrap();
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query(&mut conn)
        .unwrap();
    assert_eq!(acked, 1, "the replica got the key before the kill");
    drop(conn);
    let value: String = node(primary).get("sentinel:key").unwrap();
    assert_eq!(value, "v", "the sentinel client wrote to the primary");

    let old = setup.kill_primary();
    assert_eq!(old, primary);
    let t = Instant::now();
    let new = setup.wait_for_failover(old, FAILOVER_LIMIT);
    eprintln!("sentinel failover {old} -> {new} in {:?}", t.elapsed());

    assert_eq!(new, replica);
    assert_eq!(setup.primary_port(), new);
    let pong: String = redis::cmd("PING").query(&mut node(new)).unwrap();
    assert_eq!(pong, "PONG");
    assert_eq!(role(new), "master");
    let value: String = node(new).get("sentinel:key").unwrap();
    assert_eq!(value, "v");
    let mut conn = primary_conn(&setup);
    let () = conn.set("sentinel:after", "w").unwrap();
    let value: String = node(new).get("sentinel:after").unwrap();
    assert_eq!(value, "w", "the sentinel client writes to the new primary");
}
