//! A primary and its replica listed by address, with no Sentinel (a managed Redis such as
//! ElastiCache or Azure Cache without cluster mode): the client finds the primary by role
//! and follows a promoted replica as it follows a Sentinel failover. Holders keep their
//! locks, waiters are woken on the new primary, and the load goes on there.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::redis::{self, AsyncCommands};
use actix_distributed_lock::{ClientConfig, Deployment, LockClient, LockError};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{eventually, RedisServer};

async fn primary_and_replica() -> (RedisServer, RedisServer) {
    let primary = RedisServer::start();
    let replica = RedisServer::start();
    replica.replicate(&primary).await;
    (primary, replica)
}

async fn command(server: &RedisServer, args: &[&str]) {
    let mut conn = server.conn().await;
    let _: redis::Value = redis::cmd(args[0])
        .arg(&args[1..])
        .query_async(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{args:?} on {}: {e}", server.port()));
}

async fn subscribers(server: &RedisServer, channel: &str) -> i64 {
    let mut conn = server.conn().await;
    let (_, n): (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(&mut conn)
        .await
        .unwrap();
    n
}

/// A waiter on `client` for lock `name` (held by someone else), parked once it listens on
/// the lock's channel on `primary`; resolves to when it acquired (it then unlocks and
/// closes its client). Also returns the lock's channel.
async fn park_waiter(
    client: LockClient,
    name: &'static str,
    primary: &RedisServer,
) -> (tokio::task::JoinHandle<Result<Instant, LockError>>, String) {
    let waiter = tokio::spawn(async move {
        let guard = client
            .lock(name)
            .unwrap()
            .acquire_timeout(Duration::from_secs(60))
            .await?;
        let acquired = Instant::now();
        guard.unlock().await?;
        client.close().await;
        Ok(acquired)
    });
    let channel = format!("redisson_lock__channel:{{{name}}}");
    eventually("the waiter subscribed", Duration::from_secs(10), || async {
        subscribers(primary, &channel).await >= 1
    })
    .await;
    (waiter, channel)
}

/// When a load task held the lock, and whether it was told it lost it meanwhile.
#[derive(Debug, Clone, Copy)]
struct Span {
    entered: Instant,
    left: Instant,
    lost: bool,
}

/// Promotes `replica` and makes `primary` its replica, as a managed service's failover
/// does: writes held on the old primary meanwhile (`CLIENT PAUSE WRITE`), so nothing is
/// written there once the replica has been promoted.
async fn promote(replica: &RedisServer, primary: &RedisServer) {
    command(primary, &["CLIENT", "PAUSE", "10000", "WRITE"]).await;
    command(replica, &["REPLICAOF", "NO", "ONE"]).await;
    command(
        primary,
        &["REPLICAOF", "127.0.0.1", &replica.port().to_string()],
    )
    .await;
    command(primary, &["CLIENT", "UNPAUSE"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_uses_whichever_listed_node_is_the_primary() {
    let (primary, replica) = primary_and_replica().await;
    let dead = RedisServer::start();
    let dead_url = dead.url();
    drop(dead);
    // Listed replica first, and a node that does not answer: the primary is found by role.
    let config = ClientConfig::replicated([replica.url(), dead_url, primary.url()]);
    assert!(matches!(
        config.deployment(),
        Deployment::Replicated { nodes } if nodes.len() == 3
    ));
    let client = LockClient::connect(config).await.unwrap();
    let guard = client.lock("order:1").unwrap().acquire().await.unwrap();
    let mut conn = primary.conn().await;
    assert!(conn.exists::<_, bool>("order:1").await.unwrap());
    guard.unlock().await.unwrap();
    client.close().await;

    // No listed node is a primary: a clear error, not a hang.
    let started = Instant::now();
    let config = ClientConfig::replicated([replica.url()]).connect_timeout(Duration::from_secs(2));
    let refused = LockClient::connect(config).await;
    assert!(
        matches!(&refused, Err(LockError::Unavailable { reason, .. }) if reason.contains("primary")),
        "{:?}",
        refused.err()
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// A replica promoted under load: the holder keeps its lock (the replica confirmed it
/// before it was handed out) and releases it on the new primary, the waiter is woken there
/// at once (its subscription moved with the primary: the holder's lease would otherwise keep
/// it waiting for up to 30 s), the load goes on on the new primary, and no two holders of
/// one lock ever overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_replica_is_followed_under_load() {
    let (primary, replica) = primary_and_replica().await;
    let nodes = [primary.url(), replica.url()];
    let connect = || async {
        LockClient::connect(
            ClientConfig::replicated(nodes.clone()).watchdog_timeout(Duration::from_secs(6)),
        )
        .await
        .unwrap()
    };
    let holder = LockClient::connect(ClientConfig::replicated(nodes.clone()))
        .await
        .unwrap();
    let (other, loaders) = (connect().await, [connect().await, connect().await]);

    let guard = holder.lock("job:nightly").unwrap().acquire().await.unwrap();
    let (waiter, channel) = park_waiter(other, "job:nightly", &primary).await;

    // The load: tasks of two clients take turns on one lock; each hold's span is kept.
    let spans = Arc::new(std::sync::Mutex::new(Vec::<Span>::new()));
    let granted = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = Vec::new();
    for client in &loaders {
        for _ in 0..2 {
            let client = client.clone();
            let (spans, granted, stop) = (spans.clone(), granted.clone(), stop.clone());
            load.push(tokio::spawn(async move {
                let mut errors = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    let lock = client.lock("stock").unwrap();
                    match lock.acquire_timeout(Duration::from_secs(5)).await {
                        Ok(guard) => {
                            let entered = Instant::now();
                            // The hold lasts a moment (the time passing is the point): a
                            // second holder at once would overlap its span.
                            tokio::time::sleep(Duration::from_millis(2)).await;
                            let span = Span {
                                entered,
                                left: Instant::now(),
                                lost: guard.is_lost(),
                            };
                            spans.lock().unwrap().push(span);
                            granted.fetch_add(1, Ordering::SeqCst);
                            if let Err(e) = guard.unlock().await {
                                errors.push(e);
                            }
                        }
                        Err(e) => errors.push(e),
                    }
                }
                errors
            }));
        }
    }
    eventually("the load runs", Duration::from_secs(20), || async {
        granted.load(Ordering::SeqCst) >= 20
    })
    .await;

    promote(&replica, &primary).await;
    let promoted = granted.load(Ordering::SeqCst);

    // The waiter's subscription moves to the new primary, and the load goes on there.
    eventually(
        "the waiter subscribed on the new primary",
        Duration::from_secs(20),
        || async { subscribers(&replica, &channel).await >= 1 },
    )
    .await;
    eventually(
        "the load goes on on the new primary",
        Duration::from_secs(20),
        || async { granted.load(Ordering::SeqCst) >= promoted + 20 },
    )
    .await;
    stop.store(true, Ordering::SeqCst);
    let mut errors = Vec::new();
    for task in load {
        errors.extend(task.await.unwrap());
    }
    // Two holds overlap only where the earlier holder was told its lock was lost.
    let mut spans = spans.lock().unwrap().clone();
    spans.sort_by_key(|span| span.entered);
    for pair in spans.windows(2) {
        assert!(
            pair[0].left <= pair[1].entered || pair[0].lost,
            "two holders at once, the first not told it lost the lock: {pair:?}"
        );
    }
    // Only what a failover explains: a request to the demoted primary or without answer, a
    // grant the promoted replica no longer confirmed, a wait for a lock whose release failed.
    for error in &errors {
        assert!(
            matches!(
                error,
                LockError::Unavailable { .. }
                    | LockError::Timeout { .. }
                    | LockError::NotReplicated { .. }
            ),
            "{error:?}"
        );
    }

    // The holder's lock is on the new primary, and still the holder's.
    let mut conn = replica.conn().await;
    let field = format!("{}:{}", holder.id(), guard.owner().id());
    let count: Option<u32> = conn.hget("job:nightly", &field).await.unwrap();
    assert_eq!(
        count,
        Some(1),
        "the promoted replica does not have the lock"
    );
    assert!(!guard.is_lost());
    let released = Instant::now();
    guard.unlock().await.expect("unlock on the new primary");
    let acquired = tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("the waiter hung after the promotion")
        .unwrap()
        .expect("the waiter acquired on the new primary");
    let woken_after = acquired.saturating_duration_since(released);
    assert!(
        woken_after < Duration::from_secs(5),
        "the waiter was not woken by the unlock on the new primary: it acquired {woken_after:?} after"
    );
    holder.close().await;
    for client in loaders {
        client.close().await;
    }
    let left = replica.keys().await;
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// With no request in flight, the roles read every second still see the promotion: the
/// waiter's subscription moves to the new primary well before the holder's next renewal
/// (every 10 s) could have failed on the demoted one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promotion_is_seen_without_any_request_failing() {
    let (primary, replica) = primary_and_replica().await;
    let nodes = [primary.url(), replica.url()];
    let holder = LockClient::connect(ClientConfig::replicated(nodes.clone()))
        .await
        .unwrap();
    let other = LockClient::connect(ClientConfig::replicated(nodes))
        .await
        .unwrap();
    let guard = holder.lock("job:idle").unwrap().acquire().await.unwrap();
    let (waiter, channel) = park_waiter(other, "job:idle", &primary).await;

    let promoted = Instant::now();
    promote(&replica, &primary).await;
    eventually(
        "the waiter subscribed on the new primary",
        Duration::from_secs(20),
        || async { subscribers(&replica, &channel).await >= 1 },
    )
    .await;
    let moved_after = promoted.elapsed();
    assert!(
        moved_after < Duration::from_secs(8),
        "the promotion was seen only after {moved_after:?}"
    );
    assert!(!guard.is_lost());
    guard.unlock().await.expect("unlock on the new primary");
    tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter hung after the promotion")
        .unwrap()
        .expect("the waiter acquired on the new primary");
    holder.close().await;
}

/// The replica confirmation of a grant is asked of the server that made the grant. Here
/// the grant's reply (and the first `WAIT`'s) is held back while that primary is demoted
/// and the client moves to another: a `WAIT` sent to the new primary would confirm nothing
/// of a grant the old one made (and lost with its data), so the acquire must not count it.
/// It is given back and tried again on the new primary, where the lock then is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_is_confirmed_by_the_server_that_made_it() {
    let (old, mut frozen) = primary_and_replica().await;
    let new = RedisServer::start();
    let proxy = support::proxy::TcpProxy::start(old.port()).await;
    let config = ClientConfig::replicated([proxy.url(), new.url()])
        .response_timeout(Duration::from_secs(10))
        .replica_sync_timeout(Duration::from_secs(10));
    let client = LockClient::connect(config).await.unwrap();
    // No replica confirms a grant on the old primary now.
    frozen.pause();
    let (evalsha_before, wait_before) = (
        old.command_calls("evalsha").await,
        old.command_calls("wait").await,
    );
    proxy.hold_replies(true);
    let acquiring = {
        let client = client.clone();
        tokio::spawn(async move {
            let guard = client
                .lock("order:1")
                .unwrap()
                .acquire_timeout(Duration::from_secs(30))
                .await?;
            Ok::<_, LockError>((guard, client))
        })
    };
    // The grant made, and its first WAIT over (it answered 0: the replica is frozen); both
    // replies held back.
    eventually(
        "the grant was made on the old primary and its first WAIT answered",
        Duration::from_secs(10),
        || async {
            let mut conn = old.conn().await;
            let clients: String = redis::cmd("INFO")
                .arg("clients")
                .query_async(&mut conn)
                .await
                .unwrap();
            old.command_calls("evalsha").await > evalsha_before
                && old.command_calls("wait").await > wait_before
                && clients.contains("blocked_clients:0\r")
        },
    )
    .await;
    command(&old, &["REPLICAOF", "127.0.0.1", &new.port().to_string()]).await;
    // The client moves: its command and subscription connections to the new primary.
    eventually(
        "the client moved to the new primary",
        Duration::from_secs(20),
        || async { new.connections().await >= 3 },
    )
    .await;
    proxy.hold_replies(false);

    let (guard, client) = acquiring
        .await
        .unwrap()
        .expect("acquired on the new primary");
    let mut conn = new.conn().await;
    let field = format!("{}:{}", client.id(), guard.owner().id());
    let count: Option<u32> = conn.hget("order:1", &field).await.unwrap();
    assert_eq!(
        count,
        Some(1),
        "the lock was handed out, but the primary does not have it"
    );
    frozen.resume();
    guard.unlock().await.unwrap();
    client.close().await;
    let left = new.keys().await;
    assert!(left.is_empty(), "left behind: {left:?}");
}
