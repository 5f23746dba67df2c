//! Fenced acquisition: tokens strictly increase per lock name, whatever path takes the
//! lock, and a token-checking store refuses a holder that lost its lock during a pause.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::messages::AcquireFenced;
use actix_distributed_lock::{distributed_lock, AcquireOptions, LockClient, LockError, LockOwner};
use redis::AsyncCommands;
use std::time::Duration;
use support::RedisServer;

#[distributed_lock("ledger", client = client, kind = fenced)]
async fn through_the_attribute(client: &LockClient) -> Result<Option<u64>, LockError> {
    Ok(actix_distributed_lock::fencing_token())
}

#[tokio::test]
async fn tokens_count_up_by_one_whatever_path_takes_the_lock() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let lock = client.fenced_lock("ledger").unwrap();
    let mut tokens = Vec::new();

    let guard = lock.acquire().await.unwrap();
    tokens.push(guard.fencing_token());
    guard.unlock().await.unwrap();

    let guard = lock.try_acquire().await.unwrap().unwrap();
    tokens.push(guard.fencing_token());
    guard.unlock().await.unwrap();

    let options = AcquireOptions::new().lease(Duration::from_secs(5));
    let guard = lock.acquire_with(options).await.unwrap();
    tokens.push(guard.fencing_token());
    guard.unlock().await.unwrap();

    let request = AcquireFenced {
        owner: LockOwner::new(),
        lease: None,
        wait: Duration::ZERO,
    };
    let guard = client
        .lock_actor("ledger")
        .unwrap()
        .send(request)
        .await
        .unwrap()
        .unwrap();
    tokens.push(guard.fencing_token());
    guard.unlock().await.unwrap();

    tokens.push(through_the_attribute(&client).await.unwrap());
    assert_eq!(
        actix_distributed_lock::fencing_token(),
        None,
        "only inside the call"
    );
    let mut conn = server.conn().await;
    let counter: u64 = conn.get("redisson_lock_token:{ledger}").await.unwrap();
    assert_eq!(tokens, [Some(1), Some(2), Some(3), Some(4), Some(5)]);
    assert_eq!(counter, 5);

    // A plain (unfenced) handle on the same lock draws none.
    let plain = client.lock("ledger").unwrap().acquire().await.unwrap();
    assert_eq!(plain.fencing_token(), None);
    plain.unlock().await.unwrap();
    assert_eq!(server.keys().await, ["redisson_lock_token:{ledger}"]);
}

/// Writes `value` only if `token` is at least the highest token seen: the store's side of
/// fencing. Returns whether the write was accepted.
async fn fenced_write(
    conn: &mut redis::aio::MultiplexedConnection,
    token: u64,
    value: &str,
) -> bool {
    let script = redis::Script::new(
        "local seen = tonumber(redis.call('get', KEYS[2]) or '0') \
         if tonumber(ARGV[1]) < seen then return 0 end \
         redis.call('set', KEYS[2], ARGV[1]) redis.call('set', KEYS[1], ARGV[2]) return 1",
    );
    let accepted: i64 = script
        .key("store:balance")
        .key("store:highest-token")
        .arg(token)
        .arg(value)
        .invoke_async(conn)
        .await
        .unwrap();
    accepted == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_paused_past_its_lease_is_refused_by_a_token_checking_store() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let slow = support::client(&server).await;
    let fast = support::client(&server).await;

    let lease = Duration::from_millis(800);
    let first = slow
        .fenced_lock("account:7")
        .unwrap()
        .acquire_with(AcquireOptions::new().lease(lease))
        .await
        .unwrap();
    let stale_token = first.fencing_token().unwrap();

    // The first holder stalls (a GC pause, a slow disk) past its lease; meanwhile the
    // second takes the lock and writes.
    let second = fast
        .fenced_lock("account:7")
        .unwrap()
        .acquire_timeout(Duration::from_secs(5))
        .await
        .unwrap();
    let fresh_token = second.fencing_token().unwrap();
    assert!(fresh_token > stale_token);
    assert!(fenced_write(&mut conn, fresh_token, "second").await);

    // The first holder wakes up and writes as if it still held the lock: refused.
    assert!(!fenced_write(&mut conn, stale_token, "first").await);
    assert_eq!(
        conn.get::<_, String>("store:balance").await.unwrap(),
        "second"
    );
    assert!(first.is_lost(), "its fixed lease ran out");
    assert!(matches!(
        first.unlock().await,
        Err(LockError::NotOwner { .. })
    ));
    second.unlock().await.unwrap();
}

/// A token counter that holds something other than an integer makes the fenced acquire
/// fail with `WrongType`, and nothing is written: no hold is left in the lock's hash (a hold
/// nobody knows of would block everyone until its lease ran out, and every retry would
/// stack one more), the counter is untouched, and the lock is free for an unfenced handle.
#[tokio::test]
async fn a_token_key_of_the_wrong_type_writes_nothing_and_retries_stack_nothing() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let mut conn = server.conn().await;
    let lock = client.fenced_lock("vault").unwrap();
    let prompt = Duration::from_secs(5);

    for (planted, kind) in [("hash", "hash"), ("not-a-number", "string")] {
        let _: () = conn.del("redisson_lock_token:{vault}").await.unwrap();
        if kind == "hash" {
            let _: () = conn
                .hset("redisson_lock_token:{vault}", "field", planted)
                .await
                .unwrap();
        } else {
            let _: () = conn
                .set("redisson_lock_token:{vault}", planted)
                .await
                .unwrap();
        }
        let owner = LockOwner::new();
        // Several paths and retries: acquire (30 s default wait), try_acquire, a fixed
        // lease, and the same owner again, each must fail at once and leave nothing.
        for attempt in 0..3 {
            let result = tokio::time::timeout(
                prompt,
                lock.acquire_with(AcquireOptions::new().owner(owner)),
            )
            .await
            .expect("a wrong type is reported at once");
            assert!(
                matches!(result, Err(LockError::WrongType { .. })),
                "{kind} counter, attempt {attempt}: {result:?}"
            );
            let result = tokio::time::timeout(prompt, lock.try_acquire())
                .await
                .expect("answers at once");
            assert!(
                matches!(result, Err(LockError::WrongType { .. })),
                "{result:?}"
            );
            let result = tokio::time::timeout(
                prompt,
                lock.acquire_with(AcquireOptions::new().lease(Duration::from_secs(5))),
            )
            .await
            .expect("answers at once");
            assert!(
                matches!(result, Err(LockError::WrongType { .. })),
                "{result:?}"
            );
            assert_eq!(
                server.keys().await,
                ["redisson_lock_token:{vault}"],
                "{kind} counter, attempt {attempt}: no hold written"
            );
        }
        let kept: String = redis::cmd("TYPE")
            .arg("redisson_lock_token:{vault}")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(kept, kind, "the counter was left as it was");
        // The lock itself is free: an unfenced handle takes it at once.
        let plain = client.lock("vault").unwrap().try_acquire().await.unwrap();
        let plain = plain.expect("no orphan hold blocks the lock");
        plain.unlock().await.unwrap();
    }
}
