//! MultiLock against real redis-server processes: all or none across nodes and kinds, the
//! canonical order (no deadlock between overlapping sets), release at once on failure,
//! `lost()` of any member, fixed leases, and the attribute's several-template form.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{
    distributed_lock, AcquireOptions, ClientConfig, Lock, LockClient, LockError, LockOwner,
    MultiLock,
};
use actix_web::{http::StatusCode, post, test, web, App, HttpResponse};
use redis::AsyncCommands;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::client;
use support::{eventually, RedisServer};
use tokio::time::timeout;

const NONE: Vec<String> = Vec::new();

fn names(multi: &MultiLock) -> Vec<String> {
    multi.locks().map(|lock| lock.name().to_string()).collect()
}

#[tokio::test]
async fn all_of_several_kinds_on_two_nodes_then_none_and_no_key_left() {
    let (node_a, node_b) = (RedisServer::start(), RedisServer::start());
    let (a, b) = (client(&node_a).await, client(&node_b).await);
    let doc = a.read_write_lock("set:doc").unwrap();
    let multi = MultiLock::new([
        b.fair_lock("set:queue").unwrap(),
        doc.write().clone(),
        a.lock("set:order").unwrap(),
        b.fast_lock("set:hot").unwrap(),
    ])
    .unwrap();
    assert_eq!(multi.len(), 4);

    let me = LockOwner::new();
    let guard = multi
        .acquire_with(AcquireOptions::new().owner(me).wait(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(guard.guards().len(), 4);
    for lock in multi.locks() {
        assert!(lock.is_locked().await.unwrap(), "{} is held", lock.name());
    }
    // Another owner gets none of them, and is left holding none.
    let other = multi.try_acquire().await.unwrap();
    assert!(other.is_none());

    // Re-entry: the reentrant members count two holds; the fast member refuses, so the
    // whole re-entry fails and gives back what it took.
    let again = guard.reenter(Duration::ZERO).await;
    assert!(
        matches!(again, Err(LockError::AlreadyHeld { ref name }) if name == "set:hot"),
        "{again:?}"
    );
    assert_eq!(
        a.lock("set:order").unwrap().hold_count(me).await.unwrap(),
        1
    );

    guard.unlock().await.unwrap();
    assert_eq!(node_a.keys().await, NONE);
    assert_eq!(node_b.keys().await, NONE);
}

#[tokio::test]
async fn reentrant_members_reenter_and_free_after_the_last_release() {
    let (node_a, node_b) = (RedisServer::start(), RedisServer::start());
    let (a, b) = (client(&node_a).await, client(&node_b).await);
    let multi = MultiLock::new([a.lock("re:1").unwrap(), b.lock("re:2").unwrap()]).unwrap();
    let outer = multi.acquire().await.unwrap();
    let inner = outer.reenter(Duration::ZERO).await.unwrap();
    let me = outer.owner();
    for lock in multi.locks() {
        assert_eq!(lock.hold_count(me).await.unwrap(), 2);
    }
    inner.unlock().await.unwrap();
    for lock in multi.locks() {
        assert_eq!(lock.hold_count(me).await.unwrap(), 1);
    }
    outer.unlock().await.unwrap();
    assert_eq!(node_a.keys().await, NONE);
    assert_eq!(node_b.keys().await, NONE);
}

#[tokio::test]
async fn the_order_is_canonical_whatever_order_the_locks_come_in() {
    let (node_a, node_b) = (RedisServer::start(), RedisServer::start());
    let (a, b) = (client(&node_a).await, client(&node_b).await);
    let forward = [
        a.lock("o:x").unwrap(),
        b.lock("o:y").unwrap(),
        a.lock("o:z").unwrap(),
    ];
    let mut backward = forward.clone();
    backward.reverse();
    let (forward, backward) = (
        MultiLock::new(forward).unwrap(),
        MultiLock::new(backward).unwrap(),
    );
    assert_eq!(names(&forward), names(&backward));
    // Grouped by node: both locks of one node are next to each other.
    let order = names(&forward);
    assert_eq!(
        order.iter().position(|n| n == "o:y").map(|p| p % 2),
        Some(0)
    );

    // The write side comes before the read side of the same name, so a writer's own read
    // hold (the downgrade) never waits for itself; a lock named twice is taken once.
    let doc = a.read_write_lock("o:doc").unwrap();
    let multi = MultiLock::new([
        doc.read().clone(),
        doc.write().clone(),
        a.lock("o:x").unwrap(),
    ])
    .unwrap();
    let kinds: Vec<&str> = multi.locks().map(|l| l.kind().as_str()).collect();
    assert_eq!(kinds, ["write", "read", "reentrant"]);
    let guard = multi
        .try_acquire()
        .await
        .unwrap()
        .expect("a writer may read");
    guard.unlock().await.unwrap();
    assert_eq!(
        MultiLock::new([a.lock("d").unwrap(), a.lock("d").unwrap()])
            .unwrap()
            .len(),
        1
    );
    assert!(matches!(
        MultiLock::new(Vec::<Lock>::new()),
        Err(LockError::InvalidConfig { .. })
    ));
}

/// Three names on two nodes, two processes (two clients per node), many
/// tasks each taking overlapping sets given in opposite orders. A deadlock would show as a
/// timeout; exclusion is checked with a per-name occupancy count.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn overlapping_sets_in_opposite_order_never_deadlock() {
    let (node_a, node_b) = (RedisServer::start(), RedisServer::start());
    let processes = [
        (client(&node_a).await, client(&node_b).await),
        (client(&node_a).await, client(&node_b).await),
    ];
    let occupancy: Arc<HashMap<&'static str, AtomicUsize>> = Arc::new(
        ["dl:x", "dl:y", "dl:z"]
            .into_iter()
            .map(|name| (name, AtomicUsize::new(0)))
            .collect(),
    );
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (p, (a, b)) in processes.iter().enumerate() {
        for t in 0..6 {
            let (a, b) = (a.clone(), b.clone());
            let (occupancy, done) = (occupancy.clone(), done.clone());
            tasks.push(tokio::spawn(async move {
                for round in 0..50 {
                    // Alternate between all three and two overlapping pairs, forwards and
                    // backwards: x, y on A/B, z on A.
                    let mut set: Vec<(&'static str, Lock)> = match (p + t + round) % 3 {
                        0 => vec![
                            ("dl:x", a.lock("dl:x").unwrap()),
                            ("dl:y", b.lock("dl:y").unwrap()),
                            ("dl:z", a.lock("dl:z").unwrap()),
                        ],
                        1 => vec![
                            ("dl:y", b.lock("dl:y").unwrap()),
                            ("dl:z", a.lock("dl:z").unwrap()),
                        ],
                        _ => vec![
                            ("dl:z", a.lock("dl:z").unwrap()),
                            ("dl:x", a.lock("dl:x").unwrap()),
                        ],
                    };
                    if (p + round) % 2 == 1 {
                        set.reverse();
                    }
                    let names: Vec<&'static str> = set.iter().map(|(n, _)| *n).collect();
                    let multi = MultiLock::new(set.into_iter().map(|(_, l)| l)).unwrap();
                    let guard = multi
                        .acquire_timeout(Duration::from_secs(10))
                        .await
                        .expect("overlapping MultiLocks must not deadlock");
                    for name in &names {
                        assert_eq!(occupancy[name].fetch_add(1, Ordering::SeqCst), 0);
                    }
                    tokio::task::yield_now().await;
                    for name in &names {
                        occupancy[name].fetch_sub(1, Ordering::SeqCst);
                    }
                    guard.unlock().await.unwrap();
                }
                done.fetch_add(1, Ordering::SeqCst);
            }));
        }
    }
    let all = futures_util::future::join_all(tasks);
    for result in timeout(Duration::from_secs(25), all)
        .await
        .expect("every task finishes")
    {
        result.unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 12);
    assert_eq!(node_a.keys().await, NONE);
    assert_eq!(node_b.keys().await, NONE);
}

/// One member is held elsewhere; the acquire times out within its wait
/// and the members it had taken are free the moment it returns.
#[tokio::test]
async fn a_member_held_elsewhere_times_out_and_the_others_are_free_at_once() {
    let (node_a, node_b) = (RedisServer::start(), RedisServer::start());
    let (a, b) = (client(&node_a).await, client(&node_b).await);
    let multi = MultiLock::new([
        a.lock("pf:1").unwrap(),
        b.lock("pf:2").unwrap(),
        a.lock("pf:3").unwrap(),
    ])
    .unwrap();
    // Hold the member taken last, so every other one is taken before the wait starts.
    let order = names(&multi);
    let last = multi.locks().last().unwrap().clone();
    let elsewhere = LockClient::from_url(&if order[2] == "pf:2" {
        node_b.url()
    } else {
        node_a.url()
    })
    .await
    .unwrap();
    let blocker = elsewhere
        .lock(last.name())
        .unwrap()
        .acquire()
        .await
        .unwrap();

    let wait = Duration::from_millis(400);
    let started = Instant::now();
    let failed = multi.acquire_timeout(wait).await;
    let elapsed = started.elapsed();
    match &failed {
        Err(LockError::Timeout { name, waited, .. }) => {
            assert_eq!(name, last.name());
            assert!(*waited >= wait, "{waited:?}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(elapsed < wait + Duration::from_secs(2), "{elapsed:?}");

    // At once: only the blocker's key is left, and another owner takes the others.
    let mut keys = node_a.keys().await;
    keys.extend(node_b.keys().await);
    assert_eq!(keys, [last.name().to_string()]);
    let others = MultiLock::new(multi.locks().take(2).cloned()).unwrap();
    let taken = others.try_acquire().await.unwrap();
    assert!(taken.is_some(), "the other members were free at once");
    taken.unwrap().unlock().await.unwrap();
    blocker.unlock().await.unwrap();
    assert_eq!(node_a.keys().await, NONE);
    assert_eq!(node_b.keys().await, NONE);
}

#[tokio::test]
async fn lost_fires_when_one_member_is_deleted_behind_its_back() {
    let (node_a, node_b) = (RedisServer::start(), RedisServer::start());
    let tune = |server: &RedisServer| {
        ClientConfig::new(server.url()).watchdog_timeout(Duration::from_millis(1500))
    };
    let a = LockClient::connect(tune(&node_a)).await.unwrap();
    let b = LockClient::connect(tune(&node_b)).await.unwrap();
    let multi = MultiLock::new([a.lock("lost:1").unwrap(), b.lock("lost:2").unwrap()]).unwrap();
    let guard = multi.acquire().await.unwrap();
    let lost = guard.lost();
    assert!(!guard.is_lost());

    let mut conn = node_b.conn().await;
    let deleted: u32 = conn.del("lost:2").await.unwrap();
    assert_eq!(deleted, 1);
    let started = Instant::now();
    timeout(Duration::from_secs(3), lost)
        .await
        .expect("lost() fires within a renewal interval or two");
    assert!(guard.is_lost());
    assert!(started.elapsed() < Duration::from_secs(3));

    // The other member is still held until the guard goes; its unlock reports the loss.
    assert!(a.lock("lost:1").unwrap().is_locked().await.unwrap());
    let released = guard.unlock().await;
    assert!(
        matches!(released, Err(LockError::NotOwner { .. })),
        "{released:?}"
    );
    assert_eq!(node_a.keys().await, NONE);
    assert_eq!(node_b.keys().await, NONE);
}

#[tokio::test]
async fn a_fixed_lease_starts_when_the_whole_set_is_held() {
    let (node_a, node_b) = (RedisServer::start(), RedisServer::start());
    let (a, b) = (client(&node_a).await, client(&node_b).await);
    let multi = MultiLock::new([a.lock("fl:1").unwrap(), b.lock("fl:2").unwrap()]).unwrap();
    let blocker = multi
        .locks()
        .last()
        .unwrap()
        .acquire()
        .await
        .expect("another owner holds the member taken last");
    let hold = Duration::from_millis(600);
    let release_later = tokio::spawn(async move {
        tokio::time::sleep(hold).await; // the other owner's work
        blocker.unlock().await.unwrap();
    });

    let lease = Duration::from_secs(2);
    let started = Instant::now();
    let guard = multi
        .acquire_with(
            AcquireOptions::new()
                .wait(Duration::from_secs(5))
                .lease(lease),
        )
        .await
        .unwrap();
    assert!(started.elapsed() >= hold);
    release_later.await.unwrap();
    // Every member now has (at most) the lease asked for, from when the set was complete,
    // not the lease plus the wait it was taken with.
    for lock in multi.locks() {
        let ttl = lock.remaining_ttl().await.unwrap().expect("held");
        assert!(ttl <= lease, "{}: {ttl:?}", lock.name());
        assert!(
            ttl > lease - Duration::from_millis(500),
            "{}: {ttl:?}",
            lock.name()
        );
    }
    guard.unlock().await.unwrap();
    assert_eq!(node_a.keys().await, NONE);
    assert_eq!(node_b.keys().await, NONE);
}

#[tokio::test]
async fn dropping_the_guard_or_the_acquire_leaves_nothing_behind() {
    let (node_a, node_b) = (RedisServer::start(), RedisServer::start());
    let (a, b) = (client(&node_a).await, client(&node_b).await);
    let multi = MultiLock::new([a.lock("dr:1").unwrap(), b.lock("dr:2").unwrap()]).unwrap();
    drop(multi.acquire().await.unwrap());
    eventually(
        "a dropped guard releases every member",
        Duration::from_secs(5),
        || async { node_a.keys().await.is_empty() && node_b.keys().await.is_empty() },
    )
    .await;

    // An acquire dropped while it waits for the second member gives back the first.
    let order = names(&multi);
    let blocker = multi.locks().last().unwrap().acquire().await.unwrap();
    let waiting = timeout(
        Duration::from_millis(200),
        multi.acquire_timeout(Duration::from_secs(10)),
    )
    .await;
    assert!(waiting.is_err(), "still waiting when dropped");
    blocker.unlock().await.unwrap();
    eventually(
        "the dropped acquire leaves no key",
        Duration::from_secs(5),
        || async { node_a.keys().await.is_empty() && node_b.keys().await.is_empty() },
    )
    .await;
    assert_eq!(order.len(), 2);
}

// ----- the attribute's several-template form -----

#[distributed_lock("order:<id>", "stock:<sku>", client = client, wait = "0s")]
async fn reserve(client: &LockClient, id: u64, sku: &str) -> Result<(u32, u32), LockError> {
    let owner = LockOwner::current().expect("task owner");
    let order = client
        .lock(&format!("order:{id}"))?
        .hold_count(owner)
        .await?;
    let stock = client
        .lock(&format!("stock:{sku}"))?
        .hold_count(owner)
        .await?;
    Ok((order, stock))
}

#[tokio::test]
async fn several_templates_take_every_lock_for_the_body_and_release_all() {
    let server = RedisServer::start();
    let client = client(&server).await;
    assert_eq!(reserve(&client, 7, "sku-1").await.unwrap(), (1, 1));
    assert_eq!(server.keys().await, NONE);

    // One member busy: the body does not run, the error names it, nothing else is held.
    let other = support::client(&server).await;
    let blocker = other.lock("stock:sku-1").unwrap().acquire().await.unwrap();
    let failed = reserve(&client, 7, "sku-1").await;
    assert!(
        matches!(&failed, Err(LockError::Timeout { name, .. }) if name == "stock:sku-1"),
        "{failed:?}"
    );
    assert_eq!(server.keys().await, ["stock:sku-1"]);
    blocker.unlock().await.unwrap();
}

#[derive(serde::Deserialize)]
struct Shipment {
    id: u64,
    sku: String,
}

#[post("/orders/{id}/ship/{sku}")]
#[distributed_lock("order:<path.id>", "stock:<path.sku>", wait = "0s")]
async fn ship(path: web::Path<Shipment>) -> HttpResponse {
    HttpResponse::Ok().body(format!("shipped {} of order {}", path.sku, path.id))
}

#[actix_web::test]
async fn in_a_handler_a_busy_member_is_a_409_naming_that_lock() {
    let server = RedisServer::start();
    let locks = support::client(&server).await;
    let app = test::init_service(
        App::new()
            .app_data(web::Data::new(locks.clone()))
            .service(ship),
    )
    .await;
    let request = || {
        test::TestRequest::post()
            .uri("/orders/9/ship/sku-2")
            .to_request()
    };
    let ok = test::call_service(&app, request()).await;
    assert_eq!(ok.status(), StatusCode::OK);

    let other = support::client(&server).await;
    let blocker = other.lock("stock:sku-2").unwrap().acquire().await.unwrap();
    let busy = test::call_service(&app, request()).await;
    assert_eq!(busy.status(), StatusCode::CONFLICT);
    let body: serde_json::Value = test::read_body_json(busy).await;
    assert_eq!(body["lock"], "stock:sku-2");
    assert_eq!(server.keys().await, ["stock:sku-2"]);
    blocker.unlock().await.unwrap();
}

/// Locks reached through two clients of one server, under different URL spellings, are on
/// one node: the server's `run_id` says so. The same name there is one lock, taken once (two
/// clients are two owners in Redis, so taking it through both would wait on itself), and
/// another database of the same server is another keyspace, so its lock stays a member.
#[tokio::test]
async fn one_server_under_two_spellings_is_one_node() {
    let server = RedisServer::start();
    let port = server.port();
    let a = LockClient::from_url(&format!("redis://127.0.0.1:{port}/"))
        .await
        .unwrap();
    let b = LockClient::from_url(&format!("redis://localhost:{port}"))
        .await
        .unwrap();
    let db3 = LockClient::from_url(&format!("redis://localhost:{port}/3"))
        .await
        .unwrap();
    let multi = MultiLock::new([
        b.lock("same").unwrap(),
        a.lock("same").unwrap(),
        b.lock("b-only").unwrap(),
        db3.lock("same").unwrap(),
    ])
    .unwrap();
    assert_eq!(multi.len(), 3, "{multi:?}");
    let guard = timeout(
        Duration::from_secs(5),
        multi.acquire_timeout(Duration::from_secs(2)),
    )
    .await
    .expect("answers within its wait")
    .expect("one server's lock is taken once, not waited on by its own second client");
    let mut conn = server.conn().await;
    let holders: HashMap<String, i64> = conn.hgetall("same").await.unwrap();
    assert_eq!(holders.len(), 1, "one owner holds `same`: {holders:?}");
    guard.unlock().await.unwrap();
    assert_eq!(server.keys().await, NONE);
}
