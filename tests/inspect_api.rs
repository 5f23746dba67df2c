//! The lock inspector's library API (`LockClient::inspector`) against real
//! redis-server processes: every kind listed with its holders, counts, TTLs, waiters,
//! permits and token; keys that are not locks skipped and untouched; `show`'s answers for
//! a missing name and a non-lock key; force-unlock per kind (the waiter gets the lock, the
//! holder learns of the loss, nothing is left behind); namespaces; every primary of a
//! cluster. The `lock-inspect` command is tested in tests/inspector.rs.
#![cfg(feature = "inspector")]
// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::inspect::{InspectedKind, LockInfo};
use actix_distributed_lock::{AcquireOptions, ClientConfig, LockError, LockOwner};
use redis::AsyncCommands;
use std::time::Duration;
use support::topology::RedisCluster;
use support::{client, client_with, cluster_client, RedisServer};

/// How long a forced-out holder may take to hear of its loss: its next renewal (a third
/// of the 3 s watchdog lease the holders here use), with room for a loaded machine.
const LOSS_BOUND: Duration = Duration::from_secs(15);

/// Waits for `lost` (a holder's `lost()`), failing after [`LOSS_BOUND`].
async fn hears_lost(lost: impl std::future::Future<Output = ()>, holder: &str) {
    if tokio::time::timeout(LOSS_BOUND, lost).await.is_err() {
        panic!("{holder}: lost() did not fire within {LOSS_BOUND:?} of the forced unlock");
    }
}

fn find<'a>(locks: &'a [LockInfo], name: &str) -> &'a LockInfo {
    locks
        .iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("`{name}` not listed in {locks:#?}"))
}

/// Every non-lock key type, and look-alikes of lock hashes and strings.
async fn write_non_locks(conn: &mut redis::aio::MultiplexedConnection) {
    let _: () = conn.set("plain:string", "hello").await.unwrap();
    let _: () = conn.set("plain:counter:like:owner", "a:b").await.unwrap();
    let _: () = conn.hset("plain:hash", "name", "bob").await.unwrap();
    let _: () = conn.hset("plain:almost", "client:7", "many").await.unwrap();
    let _: () = conn.rpush("plain:list", "x").await.unwrap();
    let _: () = conn.sadd("plain:set", "x").await.unwrap();
    let _: () = conn.zadd("plain:zset", "x", 1).await.unwrap();
    let _: String = redis::cmd("XADD")
        .arg("plain:stream")
        .arg("*")
        .arg("f")
        .arg("v")
        .query_async(conn)
        .await
        .unwrap();
}

async fn dump_all(conn: &mut redis::aio::MultiplexedConnection, keys: &[&str]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for key in keys {
        let dump: Vec<u8> = redis::cmd("DUMP").arg(key).query_async(conn).await.unwrap();
        out.push(dump);
    }
    out
}

const NON_LOCKS: [&str; 8] = [
    "plain:string",
    "plain:counter:like:owner",
    "plain:hash",
    "plain:almost",
    "plain:list",
    "plain:set",
    "plain:zset",
    "plain:stream",
];

#[tokio::test]
async fn every_kind_is_listed_with_its_holders_and_non_locks_are_skipped_untouched() {
    let server = RedisServer::start();
    let a = client(&server).await;
    let b = client(&server).await;
    let mut conn = server.conn().await;
    write_non_locks(&mut conn).await;
    let before = dump_all(&mut conn, &NON_LOCKS).await;

    let owner = LockOwner::new();
    let first = a
        .lock("k:reentrant")
        .unwrap()
        .acquire_with(AcquireOptions::new().owner(owner))
        .await
        .unwrap();
    let second = a
        .lock("k:reentrant")
        .unwrap()
        .acquire_with(AcquireOptions::new().owner(owner))
        .await
        .unwrap();
    let fenced = b.fenced_lock("k:fenced").unwrap().acquire().await.unwrap();
    let fast = b.fast_lock("k:fast").unwrap().acquire().await.unwrap();
    let rw = a.read_write_lock("k:rw").unwrap();
    let r1 = rw.read().acquire().await.unwrap();
    let r2 = b
        .read_write_lock("k:rw")
        .unwrap()
        .read()
        .acquire()
        .await
        .unwrap();
    let w = b
        .read_write_lock("k:rw-w")
        .unwrap()
        .write()
        .acquire()
        .await
        .unwrap();
    let sem = a.semaphore("k:sem").unwrap();
    sem.set_permits(5).await.unwrap();
    let taken = sem.acquire(2).await.unwrap();
    let exp = b.expirable_semaphore("k:exp").unwrap();
    exp.set_permits(3).await.unwrap();
    let permit = exp
        .acquire_with(actix_distributed_lock::PermitOptions::new().lease(Duration::from_secs(60)))
        .await
        .unwrap();

    let locks = a.inspector().list(None).await.unwrap();
    let names: Vec<&str> = locks.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "k:exp",
            "k:fast",
            "k:fenced",
            "k:reentrant",
            "k:rw",
            "k:rw-w",
            "k:sem"
        ],
        "exactly the locks, sorted by name: {locks:#?}"
    );
    let lease = a.config().watchdog_timeout_value().as_millis() as u64;

    let re = find(&locks, "k:reentrant");
    assert_eq!(re.kind, InspectedKind::Reentrant);
    assert_eq!(re.holders.len(), 1);
    assert_eq!(re.holders[0].client_id.as_deref(), Some(a.id()));
    assert_eq!(re.holders[0].owner, Some(owner.id()));
    assert_eq!(re.holders[0].count, 2);
    let ttl = re.ttl_ms.expect("a watchdog lock has a TTL");
    assert!(
        ttl > 0 && ttl <= lease,
        "ttl {ttl} within the lease {lease}"
    );

    let fe = find(&locks, "k:fenced");
    assert_eq!(fe.kind, InspectedKind::Fenced);
    assert_eq!(
        fe.fencing_token,
        Some(fenced.fencing_token().unwrap() as i64)
    );
    assert_eq!(fe.holders[0].client_id.as_deref(), Some(b.id()));

    let fa = find(&locks, "k:fast");
    assert_eq!(fa.kind, InspectedKind::Fast);
    assert_eq!(fa.holders[0].client_id.as_deref(), Some(b.id()));
    assert_eq!(fa.holders[0].count, 1);

    let rd = find(&locks, "k:rw");
    assert_eq!(
        (rd.kind, rd.mode.as_deref()),
        (InspectedKind::ReadWrite, Some("read"))
    );
    let mut readers: Vec<&str> = rd
        .holders
        .iter()
        .map(|h| h.client_id.as_deref().unwrap())
        .collect();
    readers.sort();
    let mut expected = vec![a.id(), b.id()];
    expected.sort();
    assert_eq!(readers, expected);
    assert!(rd.holders.iter().all(|h| !h.write));

    let wr = find(&locks, "k:rw-w");
    assert_eq!(wr.mode.as_deref(), Some("write"));
    assert!(wr.holders[0].write);

    let se = find(&locks, "k:sem");
    assert_eq!((se.kind, se.permits), (InspectedKind::Semaphore, Some(3)));
    assert_eq!(se.ttl_ms, None);

    let ex = find(&locks, "k:exp");
    assert_eq!(
        (ex.kind, ex.permits),
        (InspectedKind::ExpirableSemaphore, Some(2))
    );
    assert_eq!(ex.holders.len(), 1);
    assert_eq!(ex.holders[0].field, permit.permit_id());
    let left = ex.holders[0].ttl_ms.unwrap();
    assert!(left > 30_000 && left <= 60_000, "permit lease left {left}");

    // A pattern narrows the list.
    let some = a.inspector().list(Some("k:r*")).await.unwrap();
    let names: Vec<&str> = some.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["k:reentrant", "k:rw", "k:rw-w"]);

    // show: read holds carry their own lease.
    let shown = a.inspector().show("k:rw").await.unwrap().unwrap();
    assert!(
        shown
            .holders
            .iter()
            .all(|h| h.ttl_ms.is_some_and(|t| t <= lease)),
        "{shown:#?}"
    );

    assert_eq!(
        dump_all(&mut conn, &NON_LOCKS).await,
        before,
        "non-lock keys untouched"
    );
    drop((first, second, fenced, fast, r1, r2, w, taken, permit));
}

#[tokio::test]
async fn show_tells_a_missing_lock_from_a_key_that_is_no_lock() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut conn = server.conn().await;
    write_non_locks(&mut conn).await;
    let inspector = client.inspector();
    assert_eq!(inspector.show("nothing:here").await.unwrap(), None);
    for key in NON_LOCKS {
        let err = inspector.show(key).await.unwrap_err();
        assert!(matches!(err, LockError::WrongType { .. }), "{key}: {err:?}");
        let err = inspector.force_unlock(key).await.unwrap_err();
        assert!(matches!(err, LockError::WrongType { .. }), "{key}: {err:?}");
    }
    assert_eq!(inspector.force_unlock("nothing:here").await.unwrap(), None);
    assert!(matches!(
        inspector.show("").await.unwrap_err(),
        LockError::InvalidName { .. }
    ));
}

#[tokio::test]
async fn a_fair_queue_is_shown_in_order_and_a_forced_unlock_hands_the_lock_to_its_head() {
    let server = RedisServer::start();
    let holder_client = client_with(&server, |c| c.watchdog_timeout(Duration::from_secs(3))).await;
    let waiters_client = client(&server).await;
    let holder = holder_client
        .fair_lock("fair:q")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let mut owners = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..3 {
        let owner = LockOwner::new();
        owners.push(owner.id());
        let lock = waiters_client.fair_lock("fair:q").unwrap();
        tasks.push(tokio::spawn(async move {
            lock.acquire_with(
                AcquireOptions::new()
                    .owner(owner)
                    .wait(Duration::from_secs(30)),
            )
            .await
        }));
        // Each joins the queue before the next: the order is then known.
        let inspector = holder_client.inspector();
        support::eventually("the waiter queued", Duration::from_secs(10), || {
            let inspector = inspector.clone();
            async move {
                inspector
                    .show("fair:q")
                    .await
                    .unwrap()
                    .is_some_and(|l| l.waiters.len() == i + 1)
            }
        })
        .await;
    }
    let shown = holder_client
        .inspector()
        .show("fair:q")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(shown.kind, InspectedKind::Fair);
    let queued: Vec<u64> = shown.waiters.iter().map(|w| w.owner.unwrap()).collect();
    assert_eq!(queued, owners, "waiters in request order");
    assert_eq!(
        shown.waiters.iter().map(|w| w.position).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert!(shown.waiters.iter().all(|w| w.deadline_ms.is_some()));

    let done = holder_client
        .inspector()
        .force_unlock("fair:q")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.removed_keys, ["fair:q"]);
    hears_lost(holder.lost(), "holder").await;
    let head = tasks
        .remove(0)
        .await
        .unwrap()
        .expect("the head of the queue gets the lock");
    let now = holder_client
        .inspector()
        .show("fair:q")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(now.holders[0].owner, Some(owners[0]));
    drop(head);
    for t in tasks {
        drop(t.await.unwrap().unwrap());
    }
}

#[tokio::test]
async fn force_unlock_frees_each_kind_and_leaves_nothing_behind() {
    let server = RedisServer::start();
    // A short watchdog lease: a holder hears of its loss at its next renewal.
    let holders = client_with(&server, |c| c.watchdog_timeout(Duration::from_secs(3))).await;
    let operator = client(&server).await;
    let inspector = operator.inspector();

    // Reentrant: a waiter in another client gets it, the holder learns it lost it.
    let held = holders.lock("f:re").unwrap().acquire().await.unwrap();
    let lock = operator.lock("f:re").unwrap();
    let waiter = tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(30)).await });
    server
        .wait_for_subscribers("redisson_lock__channel:{f:re}", 1)
        .await;
    let done = inspector.force_unlock("f:re").await.unwrap().unwrap();
    assert_eq!(done.removed_keys, ["f:re"]);
    assert_eq!(
        done.published,
        Some(("redisson_lock__channel:{f:re}".to_string(), "0".to_string()))
    );
    assert_eq!(
        done.before.holders[0].client_id.as_deref(),
        Some(holders.id())
    );
    hears_lost(held.lost(), "held").await;
    drop(waiter.await.unwrap().expect("the waiter gets the lock"));

    // Read holds: the hash and every read hold's timeout key go.
    let r1 = holders
        .read_write_lock("f:rw")
        .unwrap()
        .read()
        .acquire()
        .await
        .unwrap();
    let r2 = holders
        .read_write_lock("f:rw")
        .unwrap()
        .read()
        .acquire()
        .await
        .unwrap();
    let done = inspector.force_unlock("f:rw").await.unwrap().unwrap();
    assert_eq!(done.removed_keys.len(), 3, "{:?}", done.removed_keys);
    assert_eq!(done.published.as_ref().unwrap().1, "0");
    hears_lost(r1.lost(), "r1").await;
    hears_lost(r2.lost(), "r2").await;

    // A write hold publishes `1` (wake every reader), as Redisson's does.
    let w = holders
        .read_write_lock("f:w")
        .unwrap()
        .write()
        .acquire()
        .await
        .unwrap();
    let done = inspector.force_unlock("f:w").await.unwrap().unwrap();
    assert_eq!(done.published.as_ref().unwrap().1, "1");
    hears_lost(w.lost(), "w").await;

    // Fast and fenced: the fencing counter stays (tokens keep increasing).
    let f = holders
        .fast_lock("f:fast")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    inspector.force_unlock("f:fast").await.unwrap().unwrap();
    hears_lost(f.lost(), "f").await;
    let t = holders
        .fenced_lock("f:fenced")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let done = inspector.force_unlock("f:fenced").await.unwrap().unwrap();
    assert_eq!(done.removed_keys, ["f:fenced"]);
    hears_lost(t.lost(), "t").await;

    // Semaphores have no holder to force out: refused, untouched.
    let sem = holders.semaphore("f:sem").unwrap();
    sem.set_permits(2).await.unwrap();
    let err = inspector.force_unlock("f:sem").await.unwrap_err();
    assert!(matches!(err, LockError::InvalidConfig { .. }), "{err:?}");
    assert!(err.to_string().contains("semaphore"), "{err}");
    assert_eq!(sem.available_permits().await.unwrap(), 2);

    let mut left = server.keys().await;
    left.sort();
    assert_eq!(left, ["f:sem", "redisson_lock_token:{f:fenced}"]);
}

#[tokio::test]
async fn a_namespaced_inspector_sees_its_namespace_only_and_names_locks_as_its_callers_do() {
    let server = RedisServer::start();
    let billing = client_with(&server, |c| c.namespace("billing")).await;
    let shipping = client_with(&server, |c| c.namespace("shipping")).await;
    let plain = client(&server).await;
    let _b = billing.lock("order:1").unwrap().acquire().await.unwrap();
    let _s = shipping.lock("order:1").unwrap().acquire().await.unwrap();
    let locks = billing.inspector().list(None).await.unwrap();
    assert_eq!(locks.len(), 1, "{locks:#?}");
    assert_eq!(
        (locks[0].name.as_str(), locks[0].key.as_str()),
        ("order:1", "billing:order:1")
    );
    assert!(billing.inspector().show("order:1").await.unwrap().is_some());
    let all = plain.inspector().list(None).await.unwrap();
    let names: Vec<&str> = all.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["billing:order:1", "shipping:order:1"]);
}

#[tokio::test]
async fn a_cluster_is_listed_across_every_primary() {
    let cluster = RedisCluster::start(3, 0);
    let client = cluster_client(&cluster, |c: ClientConfig| c).await;
    let mut guards = Vec::new();
    let mut primaries = std::collections::BTreeSet::new();
    for i in 0..30 {
        let name = format!("c:{i}");
        primaries.insert(cluster.primary_for_key(&name));
        guards.push(client.lock(&name).unwrap().acquire().await.unwrap());
    }
    assert_eq!(primaries.len(), 3, "the names spread over every primary");
    let locks = client.inspector().list(Some("c:*")).await.unwrap();
    assert_eq!(locks.len(), 30);
    assert!(locks
        .iter()
        .all(|l| l.holders[0].client_id.as_deref() == Some(client.id())));
    let shown = client.inspector().show("c:7").await.unwrap().unwrap();
    assert_eq!(shown.kind, InspectedKind::Reentrant);
    drop(guards);
}

/// Waits (bounded) for the next watch event.
async fn next_event(
    watch: &mut actix_distributed_lock::inspect::LockWatch,
) -> actix_distributed_lock::inspect::WatchEvent {
    tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("a watch event within 10 s")
        .expect("the watch goes on")
        .expect("no error")
}

#[tokio::test]
async fn a_watch_reports_grants_messages_and_releases_in_order_and_unsubscribes_when_dropped() {
    use actix_distributed_lock::inspect::Change;
    let server = RedisServer::start();
    let a = client(&server).await;
    let b = client(&server).await;
    let operator = client(&server).await;
    let mut watch = operator.inspector().watch("w:1").unwrap();
    let first = next_event(&mut watch).await;
    assert_eq!(first.lock, None, "the first event is the lock as found");
    assert!(first.changes.is_empty());
    server
        .wait_for_subscribers("redisson_rwlock:{w:1}", 1)
        .await;

    let mut held = Some(a.lock("w:1").unwrap().acquire().await.unwrap());
    let lock = b.lock("w:1").unwrap();
    let waiter = tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(20)).await });
    let mut seen = Vec::new();
    loop {
        let event = next_event(&mut watch).await;
        seen.extend(event.changes.into_iter().map(|c| match c {
            Change::Granted { holder } => format!("granted {}", holder.client_id.unwrap()),
            Change::Released { holder } => format!("released {}", holder.client_id.unwrap()),
            Change::Message { channel } => format!("message {channel}"),
            other => format!("{other:?}"),
        }));
        if let Some(guard) = held.take_if(|_| !seen.is_empty()) {
            // A holds it, seen: now let B have it.
            guard.unlock().await.unwrap();
        }
        if seen.iter().any(|s| s == &format!("granted {}", b.id())) {
            break;
        }
    }
    let at = |what: String| {
        seen.iter()
            .position(|s| *s == what)
            .unwrap_or_else(|| panic!("{what} missing from {seen:?}"))
    };
    let granted_a = at(format!("granted {}", a.id()));
    let released_a = at(format!("released {}", a.id()));
    let message = at("message redisson_lock__channel:{w:1}".to_string());
    let granted_b = at(format!("granted {}", b.id()));
    assert_eq!(granted_a, 0, "{seen:?}");
    assert!(released_a < granted_b && message < granted_b, "{seen:?}");
    drop(waiter.await.unwrap().unwrap());

    drop(watch);
    support::eventually("the watch unsubscribed", Duration::from_secs(10), || {
        let server = &server;
        async move { server.subscribers("redisson_rwlock:{w:1}").await == 0 }
    })
    .await;
}

#[tokio::test]
async fn sentinels_primary_is_inspected_and_force_unlocked() {
    let setup = support::topology::SentinelSetup::start();
    let holders =
        support::sentinel_client(&setup, |c| c.watchdog_timeout(Duration::from_secs(3))).await;
    let operator = support::sentinel_client(&setup, |c| c).await;
    let held = holders.lock("s:1").unwrap().acquire().await.unwrap();
    let locks = operator.inspector().list(None).await.unwrap();
    assert_eq!(locks.len(), 1, "{locks:#?}");
    assert_eq!(locks[0].holders[0].client_id.as_deref(), Some(holders.id()));
    operator
        .inspector()
        .force_unlock("s:1")
        .await
        .unwrap()
        .unwrap();
    hears_lost(held.lost(), "held").await;
    assert!(operator.inspector().list(None).await.unwrap().is_empty());
}

#[tokio::test]
async fn force_unlock_if_leaves_a_lock_that_changed_hands_alone() {
    let server = RedisServer::start();
    let operator = client(&server).await;
    let inspector = operator.inspector();
    let name = "cond:1";
    let holders = client_with(&server, |c| c.watchdog_timeout(Duration::from_secs(3))).await;
    let field = |guard: &actix_distributed_lock::LockGuard| {
        format!("{}:{}", holders.id(), guard.owner().id())
    };

    // Shown with holder A; A leaves, B takes the lock: the confirmation for A is refused.
    let a = holders.lock(name).unwrap().acquire().await.unwrap();
    let shown = inspector.show(name).await.unwrap().unwrap();
    let seen: Vec<String> = shown.holders.iter().map(|h| h.field.clone()).collect();
    assert_eq!(seen, [field(&a)]);
    a.unlock().await.unwrap();
    let b = holders.lock(name).unwrap().acquire().await.unwrap();
    let refused = inspector.force_unlock_if(name, &seen).await.unwrap_err();
    assert!(
        matches!(&refused, LockError::HolderChanged { name: n } if n == name),
        "{refused:?}"
    );
    assert!(!b.is_lost());
    assert_eq!(
        holders
            .lock(name)
            .unwrap()
            .hold_count(b.owner())
            .await
            .unwrap(),
        1
    );

    // A second reader joined: the readers shown are not all the holders any more.
    let rw = holders.read_write_lock("cond:rw").unwrap();
    let r1 = rw.read().acquire().await.unwrap();
    let seen = [field(&r1)];
    let r2 = rw.read().acquire().await.unwrap();
    let refused = inspector
        .force_unlock_if("cond:rw", &seen)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, LockError::HolderChanged { .. }),
        "{refused:?}"
    );
    assert!(!r1.is_lost() && !r2.is_lost());

    // The holders there now: released, and they hear of it.
    let done = inspector
        .force_unlock_if(name, &[field(&b)])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done.removed_keys, [name]);
    hears_lost(b.lost(), "b").await;
    let both = [field(&r1), field(&r2)];
    inspector
        .force_unlock_if("cond:rw", &both)
        .await
        .unwrap()
        .unwrap();
    hears_lost(r1.lost(), "r1").await;
    hears_lost(r2.lost(), "r2").await;
    assert_eq!(inspector.force_unlock_if(name, &[]).await.unwrap(), None);
    assert_eq!(server.keys().await, Vec::<String>::new());
}
