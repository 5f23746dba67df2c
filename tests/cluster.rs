//! Redis Cluster against real `redis-server --cluster-enabled yes` processes:
//! locks spread over every slot, contention across clients, wake-ups through sharded
//! pub/sub, slot migration of a held lock, and a primary failover with and without
//! replica-synced acquisition.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{ClientConfig, LockError, ShardedSubscriptionMode};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::cluster_client;
use support::eventually;
use support::topology::RedisCluster;

/// Until a waiter of lock `name` has subscribed to its unlock channel on the lock's shard.
async fn until_parked(cluster: &RedisCluster, name: &str) {
    let channel = format!("redisson_lock__channel:{{{name}}}");
    eventually(
        "the waiter subscribed on the lock's shard",
        Duration::from_secs(10),
        || std::future::ready(cluster.sharded_subscribers(&channel) >= 1),
    )
    .await;
}

/// A hash field's value on whichever node serves `key`.
fn hget(cluster: &RedisCluster, key: &str, field: &str) -> Option<u32> {
    let mut conn = cluster
        .client()
        .get_connection()
        .expect("cluster connection");
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query(&mut conn)
        .expect("HGET")
}

#[actix_rt::test]
async fn a_thousand_locks_spread_over_every_primary_and_leave_nothing_behind() {
    let cluster = RedisCluster::start(3, 0);
    let locks = cluster_client(&cluster, |c| c).await;
    let names: Vec<String> = (0..1000).map(|i| format!("order:{i}")).collect();
    let mut guards = Vec::new();
    for name in &names {
        guards.push(locks.lock(name).unwrap().acquire().await.expect("acquire"));
    }
    // Every primary holds some of them: the names really are spread over the slots.
    let owners: HashSet<u16> = names.iter().map(|n| cluster.primary_for_key(n)).collect();
    assert_eq!(owners.len(), 3, "1000 names landed on {owners:?}");
    let mut held = cluster.keys_on_all();
    held.sort();
    let mut expected = names.clone();
    expected.sort();
    assert_eq!(held, expected);
    for guard in guards {
        guard.unlock().await.expect("unlock");
    }
    assert_eq!(cluster.keys_on_all(), Vec::<String>::new());
    assert_eq!(
        cluster.command_calls_total("publish"),
        0,
        "classic publish used"
    );
}

#[actix_rt::test]
async fn the_watchdog_renews_locks_of_every_slot_without_cross_slot_errors() {
    let cluster = RedisCluster::start(3, 0);
    // A 1.5 s lease renewed every 500 ms: a round can be a second late on a loaded machine
    // before a lock expires.
    let lease = Duration::from_millis(1500);
    let locks = cluster_client(&cluster, |c| c.watchdog_timeout(lease)).await;
    let mut guards = Vec::new();
    for i in 0..200 {
        guards.push(
            locks
                .lock(&format!("job:{i}"))
                .unwrap()
                .acquire()
                .await
                .unwrap(),
        );
    }
    // Two leases: without per-slot batches the renewal script fails with CROSSSLOT and
    // every lock expires.
    tokio::time::sleep(lease * 2).await;
    assert!(
        guards.iter().all(|g| !g.is_lost()),
        "a lock was reported lost"
    );
    assert_eq!(cluster.keys_on_all().len(), 200);
    for guard in guards {
        guard.unlock().await.expect("still held, so unlock works");
    }
    assert!(cluster.keys_on_all().is_empty());
}

#[actix_rt::test]
async fn two_clients_contending_on_one_name_never_overlap_and_wake_by_sharded_pubsub() {
    let cluster = RedisCluster::start(3, 0);
    let a = cluster_client(&cluster, |c| c).await;
    let b = cluster_client(&cluster, |c| c).await;
    let inside = Arc::new(AtomicUsize::new(0));
    let entries = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (i, locks) in [a.clone(), b.clone(), a.clone(), b.clone()]
        .into_iter()
        .enumerate()
    {
        let (inside, entries) = (inside.clone(), entries.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..50 {
                let guard = locks
                    .lock("stock:sku-1")
                    .unwrap()
                    .acquire()
                    .await
                    .expect("acquire");
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders (task {i})"
                );
                tokio::task::yield_now().await;
                inside.fetch_sub(1, Ordering::SeqCst);
                entries.fetch_add(1, Ordering::SeqCst);
                guard.unlock().await.expect("unlock");
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(entries.load(Ordering::SeqCst), 200);
    assert!(
        cluster.command_calls_total("spublish") >= 200,
        "unlocks use SPUBLISH"
    );
    assert!(
        cluster.command_calls_total("ssubscribe") >= 1,
        "waiters use SSUBSCRIBE"
    );
    assert_eq!(cluster.command_calls_total("subscribe"), 0);

    // A waiter with a 30 s watchdog lease can only be woken that fast by the message.
    let held = a.lock("stock:sku-2").unwrap().acquire().await.unwrap();
    let waiter = tokio::spawn({
        let b = b.clone();
        async move {
            let guard = b.lock("stock:sku-2").unwrap().acquire().await.unwrap();
            let at = Instant::now();
            guard.unlock().await.unwrap();
            at
        }
    });
    until_parked(&cluster, "stock:sku-2").await;
    let released = Instant::now();
    held.unlock().await.unwrap();
    let woke = waiter.await.unwrap();
    assert!(
        woke - released < Duration::from_secs(5),
        "woken after {:?}",
        woke - released
    );
}

#[actix_rt::test]
async fn sharded_subscription_off_uses_classic_pubsub_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let locks = cluster_client(&cluster, |c| {
        c.sharded_subscription(ShardedSubscriptionMode::Off)
    })
    .await;
    let other = cluster_client(&cluster, |c| {
        c.sharded_subscription(ShardedSubscriptionMode::Off)
    })
    .await;
    let held = locks.lock("classic").unwrap().acquire().await.unwrap();
    let waiter = tokio::spawn({
        let other = other.clone(); // the client stays alive for the guard's unlock below
        async move { other.lock("classic").unwrap().acquire().await }
    });
    // Classic subscriptions are counted on the node that took them: add up every node.
    eventually(
        "the waiter subscribed (classic)",
        Duration::from_secs(10),
        || {
            let subscribed: i64 = cluster
                .primary_ports()
                .into_iter()
                .map(|port| {
                    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                        .and_then(|c| c.get_connection())
                        .expect("node connection");
                    let (_, n): (String, i64) = redis::cmd("PUBSUB")
                        .arg("NUMSUB")
                        .arg("redisson_lock__channel:{classic}")
                        .query(&mut conn)
                        .expect("PUBSUB NUMSUB");
                    n
                })
                .sum();
            std::future::ready(subscribed >= 1)
        },
    )
    .await;
    held.unlock().await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken by the classic message")
        .unwrap()
        .unwrap();
    guard.unlock().await.unwrap();
    assert!(cluster.command_calls_total("publish") >= 2);
    assert_eq!(cluster.command_calls_total("spublish"), 0);
}

#[actix_rt::test]
async fn a_name_whose_braces_would_split_its_keys_over_two_slots_is_refused() {
    let cluster = RedisCluster::start(3, 0);
    let locks = cluster_client(&cluster, |c| c).await;
    for bad in ["x{}y", "a{b"] {
        assert!(
            matches!(locks.lock(bad), Err(LockError::InvalidName { .. })),
            "{bad} accepted"
        );
    }
    // A user's own hash tag is honoured: both locks land on the tag's node.
    let pay = locks
        .lock("order:{42}:pay")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let ship = locks
        .lock("order:{42}:ship")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    assert_eq!(
        cluster.primary_for_key("order:{42}:pay"),
        cluster.primary_for_key("42")
    );
    assert_eq!(
        cluster.primary_for_key("order:{42}:ship"),
        cluster.primary_for_key("42")
    );
    pay.unlock().await.unwrap();
    ship.unlock().await.unwrap();
}

#[actix_rt::test]
async fn a_held_lock_survives_its_slot_migrating_and_its_waiter_gets_it_after() {
    let cluster = RedisCluster::start(3, 0);
    let holder = cluster_client(&cluster, |c| {
        c.watchdog_timeout(Duration::from_millis(1500))
    })
    .await;
    let other = cluster_client(&cluster, |c| c).await;
    let name = "migrating:lock";
    let guard = holder.lock(name).unwrap().acquire().await.unwrap();
    let waiter = tokio::spawn(async move {
        let guard = other
            .lock(name)
            .unwrap()
            .acquire_timeout(Duration::from_secs(30))
            .await?;
        guard.unlock().await.map(|_| ())
    });
    until_parked(&cluster, name).await;
    let from = cluster.primary_for_key(name);
    let to = *cluster
        .primary_ports()
        .iter()
        .find(|p| **p != from)
        .unwrap();
    cluster.migrate_slot(cluster.slot_for_key(name), to);
    assert_eq!(cluster.primary_for_key(name), to);
    // Several renew intervals later, on the new node, the holder still has it.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!guard.is_lost(), "the migration lost the lock");
    let field = format!("{}:{}", holder.id(), guard.owner().id());
    assert_eq!(hget(&cluster, name, &field), Some(1));
    guard.unlock().await.expect("unlock on the new node");
    tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter got the lock after the migration")
        .unwrap()
        .expect("acquire");
    assert!(cluster.keys_on_all().is_empty());
}

#[actix_rt::test]
async fn after_a_primary_fails_over_waiters_recover_and_a_replica_synced_lock_is_still_held() {
    let mut cluster = RedisCluster::start_with(3, 1, Duration::from_millis(1000));
    // The first request after the failover meets the dead primary, then the cluster client
    // refreshes its slots and retries on the promoted replica, all within one response
    // timeout: 500 ms was too tight once under the full suite's load (CI, session 4).
    let answer_within = Duration::from_millis(1500);
    let synced = |c: ClientConfig| {
        c.sync_replicas(1, Duration::from_secs(1))
            .watchdog_timeout(Duration::from_secs(6))
            .response_timeout(answer_within)
    };
    let holder = cluster_client(&cluster, synced).await;
    let other = cluster_client(&cluster, |c| c.response_timeout(answer_within)).await;
    let name = "failover:lock";
    let guard = holder
        .lock(name)
        .unwrap()
        .acquire()
        .await
        .expect("replica-synced acquire");
    let waiter = tokio::spawn(async move {
        let guard = other
            .lock(name)
            .unwrap()
            .acquire_timeout(Duration::from_secs(40))
            .await?;
        guard.unlock().await.map(|_| ())
    });
    until_parked(&cluster, name).await;
    let primary = cluster.primary_for_key(name);
    cluster.kill_node(primary);
    let promoted = cluster
        .wait_for_failover_async(primary, Duration::from_secs(30))
        .await;
    assert_ne!(promoted, primary);
    // The replica that confirmed the lock now serves it, with the holder's field.
    let field = format!("{}:{}", holder.id(), guard.owner().id());
    assert_eq!(
        hget(&cluster, name, &field),
        Some(1),
        "the promoted replica lost the lock"
    );
    assert!(!guard.is_lost());
    guard
        .unlock()
        .await
        .expect("unlock on the promoted replica");
    tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("the waiter recovered after the failover")
        .unwrap()
        .expect("acquire after failover");
    assert!(cluster.keys_on_all().is_empty());
}

#[actix_rt::test]
async fn without_replica_sync_a_grant_is_handed_out_that_no_replica_has() {
    let mut cluster = RedisCluster::start_with(3, 1, Duration::from_millis(5000));
    let name = "unreplicated";
    let primary = cluster.primary_for_key(name);
    let replica = cluster.replica_of(primary);
    // A replica that cannot keep up (stopped): the window in which a failover loses locks.
    cluster.pause_node(replica);
    let plain = cluster_client(&cluster, |c| c).await;
    let guard = plain
        .lock(name)
        .unwrap()
        .acquire()
        .await
        .expect("granted, unreplicated");
    // The same grant under replica-synced acquisition is refused, and given back.
    let synced = cluster_client(&cluster, |c| c.sync_replicas(1, Duration::from_millis(200))).await;
    let same_slot = "{unreplicated}:synced";
    let result = synced.lock(same_slot).unwrap().acquire().await;
    assert!(
        matches!(
            result,
            Err(LockError::NotReplicated {
                wanted: 1,
                confirmed: 0,
                ..
            })
        ),
        "{result:?}"
    );
    let mut conn = cluster.client().get_connection().unwrap();
    eventually(
        "the unconfirmed grant is given back",
        Duration::from_secs(5),
        || {
            let exists: bool = redis::cmd("EXISTS")
                .arg(same_slot)
                .query(&mut conn)
                .unwrap();
            std::future::ready(!exists)
        },
    )
    .await;
    cluster.resume_node(replica);
    guard.unlock().await.unwrap();
}
