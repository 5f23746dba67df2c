//! Replica sync by default (Redisson's `checkLockSyncedSlaves`): on a primary with a
//! replica, an acquire is handed out once the replica confirmed it; a grant no replica
//! confirms is given back and tried again 3 times, 1.5 s apart, then fails with
//! `NotReplicated`; a primary without replicas is sent nothing more; `no_replica_sync()`
//! opts out.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::redis::{self, AsyncCommands};
use actix_distributed_lock::{ClientConfig, LockClient, LockError};
use std::time::{Duration, Instant};
use support::RedisServer;

/// A primary and a replica of it, the replica's link up.
async fn primary_and_replica() -> (RedisServer, RedisServer) {
    let primary = RedisServer::start();
    let replica = RedisServer::start();
    replica.replicate(&primary).await;
    (primary, replica)
}

async fn has_key(server: &RedisServer, key: &str) -> bool {
    let mut conn = server.conn().await;
    conn.exists::<_, bool>(key).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_client_hands_out_a_lock_once_the_replica_has_it() {
    let (primary, replica) = primary_and_replica().await;
    let client = LockClient::connect(ClientConfig::new(primary.url()))
        .await
        .unwrap();
    for name in ["order:1", "order:2"] {
        let guard = client.lock(name).unwrap().acquire().await.unwrap();
        // Confirmed before it was handed out: the replica has it now, not eventually.
        assert!(
            has_key(&replica, name).await,
            "{name} is not on the replica"
        );
        guard.unlock().await.unwrap();
    }
    let fast = client
        .fast_lock("order:3")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    assert!(has_key(&replica, "order:3").await);
    fast.unlock().await.unwrap();
    let waits = primary.command_calls("wait").await;
    // One per acquire, unless the replica took longer than a slice (10 ms) to answer.
    assert!(waits >= 3, "a WAIT per acquire: {waits}");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_without_replicas_is_sent_nothing_more() {
    let server = RedisServer::start();
    let client = LockClient::connect(ClientConfig::new(server.url()))
        .await
        .unwrap();
    for name in ["order:1", "order:2"] {
        let guard = client.lock(name).unwrap().acquire().await.unwrap();
        guard.unlock().await.unwrap();
    }
    assert_eq!(server.command_calls("wait").await, 0);
    client.close().await;
}

/// The replica frozen: every grant goes unconfirmed. As Redisson does, the hold is given
/// back and the acquire tried 3 times more, 1.5 s apart, then it fails; nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_replica_frozen_an_acquire_is_given_back_and_retried_then_refused() {
    let (primary, mut replica) = primary_and_replica().await;
    let config = ClientConfig::new(primary.url()).replica_sync_timeout(Duration::from_millis(200));
    let client = LockClient::connect(config).await.unwrap();
    replica.pause();
    let started = Instant::now();
    let answer = client
        .lock("order:9")
        .unwrap()
        .acquire_timeout(Duration::from_secs(60))
        .await;
    let took = started.elapsed();
    replica.resume();
    match answer {
        Err(LockError::NotReplicated {
            wanted: 1,
            confirmed: 0,
            ..
        }) => {}
        other => panic!("expected NotReplicated, got {other:?}"),
    }
    assert!(
        took >= Duration::from_millis(3 * 1500),
        "the retries were 1.5 s apart: {took:?}"
    );
    assert!(took < Duration::from_secs(30), "{took:?}");
    support::eventually("every grant was given back", Duration::from_secs(5), || {
        let primary = &primary;
        async move { !has_key(primary, "order:9").await }
    })
    .await;
    // The key gone, the last grant's give-back ran: no script is on its way.
    assert_eq!(
        primary.command_calls("evalsha").await,
        8,
        "a try and 3 retries, each grant given back"
    );
    client.close().await;
}

/// The replica frozen, then thawed during the retries: the next try is confirmed, and the
/// caller gets the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_is_granted_once_the_replica_answers_again() {
    let (primary, mut replica) = primary_and_replica().await;
    let config = ClientConfig::new(primary.url()).replica_sync_timeout(Duration::from_millis(200));
    let client = LockClient::connect(config).await.unwrap();
    replica.pause();
    let lock = client.lock("order:10").unwrap();
    let acquire = tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(60)).await });
    support::eventually(
        "a grant went unconfirmed",
        Duration::from_secs(10),
        || async { primary.command_calls("wait").await >= 1 },
    )
    .await;
    replica.resume();
    let guard = acquire.await.unwrap().unwrap();
    assert!(has_key(&replica, "order:10").await);
    guard.unlock().await.unwrap();
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_replica_sync_hands_out_the_lock_without_waiting() {
    let (primary, mut replica) = primary_and_replica().await;
    let client = LockClient::connect(ClientConfig::new(primary.url()).no_replica_sync())
        .await
        .unwrap();
    replica.pause();
    let guard = client.lock("order:11").unwrap().acquire().await.unwrap();
    guard.unlock().await.unwrap();
    replica.resume();
    assert_eq!(primary.command_calls("wait").await, 0);
    client.close().await;
}

/// A replica that attaches after the client connected is waited for once the client
/// has read the primary's replicas again (every second).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_added_later_is_waited_for() {
    let primary = RedisServer::start();
    let replica = RedisServer::start();
    let client = LockClient::connect(ClientConfig::new(primary.url()))
        .await
        .unwrap();
    let guard = client.lock("order:12").unwrap().acquire().await.unwrap();
    guard.unlock().await.unwrap();
    assert_eq!(primary.command_calls("wait").await, 0);
    replica.replicate(&primary).await;
    let lock = client.lock("order:12").unwrap();
    support::eventually(
        "an acquire waits for the replica",
        Duration::from_secs(10),
        || {
            let (lock, primary) = (lock.clone(), &primary);
            async move {
                let guard = lock.acquire().await.unwrap();
                guard.unlock().await.unwrap();
                primary.command_calls("wait").await > 0
            }
        },
    )
    .await;
    client.close().await;
}

/// The script and its `WAIT` go in one flight; a server that lost its script cache answers
/// the first with `NOSCRIPT`, and the acquire then takes the long way: the script loaded,
/// sent again, and waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_after_the_script_cache_was_flushed_is_still_confirmed() {
    let (primary, replica) = primary_and_replica().await;
    let client = LockClient::connect(ClientConfig::new(primary.url()))
        .await
        .unwrap();
    let mut conn = primary.conn().await;
    let () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    let guard = client.lock("order:13").unwrap().acquire().await.unwrap();
    assert!(has_key(&replica, "order:13").await);
    assert!(
        primary.command_calls("wait").await >= 2,
        "the WAIT of the flight refused, and the one after the script loaded"
    );
    guard.unlock().await.unwrap();
    client.close().await;
}

/// `WAIT` holds up every later request of the connection while it blocks. With the replica
/// frozen, eight acquires at once must each get the replicas' answer (`NotReplicated`), not
/// a response timeout from waiting behind the others' `WAIT`s (one whole second each, they
/// did); and a lock on the same primary is released meanwhile without delay worth a timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_replica_frozen_concurrent_acquires_each_get_the_replicas_answer() {
    let (primary, mut replica) = primary_and_replica().await;
    let client = LockClient::connect(ClientConfig::new(primary.url()))
        .await
        .unwrap();
    let held = client.lock("order:held").unwrap().acquire().await.unwrap();
    replica.pause();
    let tries: Vec<_> = (0..8)
        .map(|i| {
            let lock = client.lock(&format!("order:frozen:{i}")).unwrap();
            tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(4)).await })
        })
        .collect();
    // The unlock goes out while a WAIT blocks the connection.
    support::eventually("a WAIT blocks", Duration::from_secs(10), || async {
        let mut conn = primary.conn().await;
        let info: String = redis::cmd("INFO")
            .arg("clients")
            .query_async(&mut conn)
            .await
            .unwrap();
        !info.contains("blocked_clients:0\r")
    })
    .await;
    let unlocked = tokio::time::timeout(Duration::from_secs(2), held.unlock()).await;
    for t in tries {
        match t.await.unwrap() {
            Err(LockError::NotReplicated { confirmed: 0, .. }) => {}
            other => panic!("expected NotReplicated, got {other:?}"),
        }
    }
    replica.resume();
    unlocked
        .expect("an unlock on the primary was held up behind the WAITs")
        .unwrap();
    support::eventually("every grant was given back", Duration::from_secs(5), || {
        let primary = &primary;
        async move { primary.keys().await.is_empty() }
    })
    .await;
    client.close().await;
}

/// Semaphores are synced as locks are (Redisson syncs `RSemaphore` and
/// `RPermitExpirableSemaphore` too): with the replica frozen, permits taken are given back
/// and the acquire fails after its retries, leaving every permit; thawed, the permits are
/// handed out once the replica has them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_permits_are_handed_out_once_the_replica_has_them() {
    let (primary, mut replica) = primary_and_replica().await;
    let config = ClientConfig::new(primary.url()).replica_sync_timeout(Duration::from_millis(200));
    let client = LockClient::connect(config).await.unwrap();
    let plain = client.semaphore("pool").unwrap();
    let expirable = client.expirable_semaphore("slots").unwrap();
    assert!(plain.try_set_permits(3).await.unwrap());
    assert!(expirable.try_set_permits(3).await.unwrap());

    replica.pause();
    let started = Instant::now();
    let (taken, leased) = tokio::join!(
        plain.acquire_timeout(2, Duration::from_secs(60)),
        expirable.acquire_timeout(2, Duration::from_secs(60))
    );
    let took = started.elapsed();
    replica.resume();
    for answer in [taken.map(drop), leased.map(drop)] {
        assert!(
            matches!(answer, Err(LockError::NotReplicated { confirmed: 0, .. })),
            "{answer:?}"
        );
    }
    assert!(took >= Duration::from_millis(3 * 1500), "{took:?}");
    support::eventually(
        "every permit was given back",
        Duration::from_secs(5),
        || async {
            plain.available_permits().await.unwrap() == 3
                && expirable.available_permits().await.unwrap() == 3
        },
    )
    .await;

    let permits = plain.acquire(2).await.unwrap();
    let leased = expirable.acquire(1).await.unwrap();
    // Confirmed before they were handed out: the replica counts them taken now.
    let mut conn = replica.conn().await;
    let left: i64 = conn.get("pool").await.unwrap();
    assert_eq!(left, 1, "the replica does not count the permits taken");
    let leases: i64 = conn.zcard("{slots}:timeout").await.unwrap();
    assert_eq!(leases, 1, "the replica does not have the leased permit");
    permits.release().await.unwrap();
    leased.release().await.unwrap();
    client.close().await;
}

/// Whether `server` knows `WAITAOF` (Redis 7.2+, Valkey).
async fn offers_waitaof(server: &RedisServer) -> bool {
    let mut conn = server.conn().await;
    let info: Vec<redis::Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("WAITAOF")
        .query_async(&mut conn)
        .await
        .unwrap();
    info.first().is_some_and(|i| *i != redis::Value::Nil)
}

/// `sync_replicas_aof`: a grant counts once the replica wrote it to its append-only file.
/// A replica without one never confirms; with one, the lock is on it when handed out. A
/// server without `WAITAOF` (Redis before 7.2) is refused at connect, with a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_replicas_aof_waits_for_the_replicas_append_only_file() {
    let (primary, replica) = primary_and_replica().await;
    let config =
        || ClientConfig::new(primary.url()).sync_replicas_aof(1, Duration::from_millis(300));
    if !offers_waitaof(&primary).await {
        let refused = LockClient::connect(config()).await;
        assert!(
            matches!(&refused, Err(LockError::InvalidConfig { reason }) if reason.contains("WAITAOF")),
            "{:?}",
            refused.err()
        );
        return;
    }
    let client = LockClient::connect(config()).await.unwrap();
    // The replica writes no append-only file: it never confirms.
    let refused = client
        .lock("order:aof")
        .unwrap()
        .acquire_timeout(Duration::from_secs(2))
        .await;
    assert!(
        matches!(refused, Err(LockError::NotReplicated { confirmed: 0, .. })),
        "{refused:?}"
    );
    support::eventually("the grant was given back", Duration::from_secs(5), || {
        let primary = &primary;
        async move { !has_key(primary, "order:aof").await }
    })
    .await;

    let mut conn = replica.conn().await;
    let () = redis::cmd("CONFIG")
        .arg(&["SET", "appendonly", "yes"])
        .query_async(&mut conn)
        .await
        .unwrap();
    support::eventually(
        "the replica writes its append-only file",
        Duration::from_secs(20),
        || async {
            let mut conn = replica.conn().await;
            let info: String = redis::cmd("INFO")
                .arg("persistence")
                .query_async(&mut conn)
                .await
                .unwrap();
            info.contains("aof_enabled:1") && info.contains("aof_rewrite_in_progress:0")
        },
    )
    .await;
    let guard = client
        .lock("order:aof")
        .unwrap()
        .acquire_timeout(Duration::from_secs(30))
        .await
        .unwrap();
    assert!(has_key(&replica, "order:aof").await);
    assert!(primary.command_calls("waitaof").await >= 1);
    guard.unlock().await.unwrap();
    client.close().await;
}
