//! The reentrant lock against Redisson's protocol facts, checked with a hand-written
//! imitation of the other side. This is no evidence of interop with Redisson itself: that
//! is `tests/redisson_java.rs`, against the real Redisson jars. This file pins the facts
//! our scripts must keep, so a drift from them fails fast and without a JVM.
//!
//! The other side is simulated here from Redisson's protocol facts, with plain
//! `redis` commands and Lua scripts written in this file (deliberately not the library's
//! `.lua` files, so a drift in either is caught):
//!
//! - the lock is a hash `name`; the field `<java-uuid>:<thread-id>` holds the hold count;
//! - acquire increments the field and PEXPIREs the key, returning nil, or returns the PTTL
//!   when someone else holds it;
//! - unlock decrements; at 0 it DELs the key and PUBLISHes `0` on
//!   `redisson_lock__channel:{name}`.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{AcquireOptions, LockError, LockOwner, Released};
use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use support::client;
use support::RedisServer;

/// Redisson's default lease (`lockWatchdogTimeout`, 30 s).
const JAVA_LEASE: Duration = Duration::from_secs(30);
/// Bound for anything that should take milliseconds (a connection, a pub/sub round trip).
const PROMPT: Duration = Duration::from_secs(5);
/// How soon a wake-up by an unlock message must arrive: far under the 30 s lease.
const WAKE_BOUND: Duration = Duration::from_secs(2);

/// `RedissonLock.tryLockInnerAsync`, written from the protocol facts and deliberately not
/// from the library's script (a shared mistake would otherwise pass unseen): a fresh lock is
/// an HSET of 1, a re-entry an HINCRBY.
const JAVA_ACQUIRE: &str = r"
local fields = redis.call('hlen', KEYS[1])
if fields == 0 then
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
local mine = redis.call('hget', KEYS[1], ARGV[2])
if mine then
    redis.call('hset', KEYS[1], ARGV[2], tonumber(mine) + 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
";

/// `RedissonLock.unlockInnerAsync`, written the same way: read the count, then either write
/// it back lower or delete the lock and announce it.
const JAVA_UNLOCK: &str = r"
local mine = redis.call('hget', KEYS[1], ARGV[3])
if not mine then
    return nil
end
local left = tonumber(mine) - 1
if left >= 1 then
    redis.call('hset', KEYS[1], ARGV[3], left)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
";

/// Redisson's `LockPubSub.UNLOCK_MESSAGE`.
const JAVA_UNLOCK_MESSAGE: &str = "0";

/// `RedissonLock.getChannelName()`: `redisson_lock__channel:{name}`; a name with braces of
/// its own is not wrapped again (Redisson's `prefixName`), so its hash tag stays the tag.
fn java_channel(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_lock__channel:{name}")
    } else {
        format!("redisson_lock__channel:{{{name}}}")
    }
}

/// What a Redisson client does on the wire, with its own uuid (`ConnectionManager.getId()`).
struct JavaClient {
    uuid: String,
    conn: MultiplexedConnection,
}

impl JavaClient {
    async fn connect(server: &RedisServer) -> JavaClient {
        JavaClient {
            uuid: uuid::Uuid::new_v4().to_string(),
            conn: server.conn().await,
        }
    }

    /// `getLockName(threadId)`: `uuid:threadId`.
    fn field(&self, thread: u64) -> String {
        format!("{}:{}", self.uuid, thread)
    }

    /// One acquire attempt: `None` = acquired, `Some(pttl)` = held by someone else.
    async fn try_lock(&mut self, name: &str, thread: u64, lease: Duration) -> Option<i64> {
        redis::Script::new(JAVA_ACQUIRE)
            .key(name)
            .arg(lease.as_millis() as u64)
            .arg(self.field(thread))
            .invoke_async(&mut self.conn)
            .await
            .expect("java acquire script")
    }

    /// One unlock: `None` = not the owner, `Some(0)` = still held, `Some(1)` = freed.
    async fn unlock(&mut self, name: &str, thread: u64, lease: Duration) -> Option<i64> {
        redis::Script::new(JAVA_UNLOCK)
            .key(name)
            .key(java_channel(name))
            .arg(JAVA_UNLOCK_MESSAGE)
            .arg(lease.as_millis() as u64)
            .arg(self.field(thread))
            .invoke_async(&mut self.conn)
            .await
            .expect("java unlock script")
    }
}

async fn hgetall(server: &RedisServer, key: &str) -> HashMap<String, String> {
    let mut conn = server.conn().await;
    redis::cmd("HGETALL")
        .arg(key)
        .query_async(&mut conn)
        .await
        .expect("HGETALL")
}

async fn pttl(server: &RedisServer, key: &str) -> i64 {
    let mut conn = server.conn().await;
    redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut conn)
        .await
        .expect("PTTL")
}

async fn assert_no_lock_left(server: &RedisServer) {
    assert_eq!(
        server.keys().await,
        Vec::<String>::new(),
        "no key may be left behind"
    );
}

/// A Redisson thread (a plain pub/sub connection) that waits for an unlock message.
async fn java_subscriber(server: &RedisServer, channel: &str) -> redis::aio::PubSub {
    let mut pubsub = server
        .client()
        .get_async_pubsub()
        .await
        .expect("pub/sub connection");
    pubsub.subscribe(channel).await.expect("SUBSCRIBE");
    pubsub
}

async fn next_message(pubsub: &mut redis::aio::PubSub) -> (String, String) {
    let msg = tokio::time::timeout(PROMPT, pubsub.on_message().next())
        .await
        .expect("an unlock message within the bound")
        .expect("the pub/sub stream stays open");
    let payload: String = msg.get_payload().expect("text payload");
    (msg.get_channel_name().to_string(), payload)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_held_by_java_blocks_ours() {
    let server = RedisServer::start();
    let mut java = JavaClient::connect(&server).await;
    let client = client(&server).await;
    let name = "inventory:sku-7";

    assert_eq!(java.try_lock(name, 1, JAVA_LEASE).await, None);
    let java_view = hgetall(&server, name).await;

    let lock = client.lock(name).unwrap();
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "a lock held by Java must not be ours"
    );
    assert!(lock.is_locked().await.unwrap());
    let ttl = lock
        .remaining_ttl()
        .await
        .unwrap()
        .expect("a held lock has a ttl");
    assert!(ttl > Duration::ZERO && ttl <= JAVA_LEASE, "ttl {ttl:?}");

    // A short bounded wait times out and names the lock.
    match lock.acquire_timeout(Duration::from_millis(300)).await {
        Err(LockError::Timeout { name: n, .. }) => assert_eq!(n, name),
        other => panic!("expected a timeout, got {other:?}"),
    }

    // Our attempts wrote nothing into Java's hold.
    assert_eq!(hgetall(&server, name).await, java_view);
    assert_eq!(java_view, HashMap::from([(java.field(1), "1".to_string())]));

    assert_eq!(java.unlock(name, 1, JAVA_LEASE).await, Some(1));
    assert_no_lock_left(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_unlock_publish_wakes_our_waiter_well_before_the_ttl() {
    let server = RedisServer::start();
    let mut java = JavaClient::connect(&server).await;
    let client = client(&server).await;
    let name = "invoice:1001";

    assert_eq!(java.try_lock(name, 1, JAVA_LEASE).await, None);

    let owner = LockOwner::new();
    let lock = client.lock(name).unwrap();
    let waiter = tokio::spawn(async move {
        let options = AcquireOptions::new()
            .owner(owner)
            .wait(Duration::from_secs(10));
        let guard = lock.acquire_with(options).await;
        (guard, Instant::now())
    });

    server.wait_until_parked(&java_channel(name), 1).await;
    assert!(!waiter.is_finished(), "Java still holds the lock");

    let unlocked_at = Instant::now();
    assert_eq!(java.unlock(name, 1, JAVA_LEASE).await, Some(1));
    let (guard, acquired_at) = tokio::time::timeout(PROMPT, waiter)
        .await
        .expect("our waiter wakes on Java's unlock message, not at the 30 s ttl")
        .expect("waiter task");
    let guard = guard.expect("our waiter gets the lock");
    let woke_after = acquired_at.duration_since(unlocked_at);
    assert!(
        woke_after < WAKE_BOUND,
        "woke {woke_after:?} after Java's unlock"
    );

    assert_eq!(
        hgetall(&server, name).await,
        HashMap::from([(format!("{}:{}", client.id(), owner.id()), "1".to_string())])
    );
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    assert_no_lock_left(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_held_lock_is_seen_as_held_by_the_java_script() {
    let server = RedisServer::start();
    let mut java = JavaClient::connect(&server).await;
    let client = client(&server).await;
    let name = "payment:77";

    let owner = LockOwner::new();
    let lock = client.lock(name).unwrap();
    let guard = lock
        .acquire_with(AcquireOptions::new().owner(owner))
        .await
        .unwrap();

    // The exact field Redisson would write for `uuid:threadId`.
    let ours = HashMap::from([(format!("{}:{}", client.id(), owner.id()), "1".to_string())]);
    assert_eq!(hgetall(&server, name).await, ours);
    let key_ttl = pttl(&server, name).await;
    assert!(
        key_ttl > 0 && key_ttl <= 30_000,
        "our hold carries the watchdog lease, got PTTL {key_ttl}"
    );

    let pttl = java
        .try_lock(name, 1, JAVA_LEASE)
        .await
        .expect("Java must see the lock as held");
    assert!(
        pttl > 0 && pttl <= 30_000,
        "Java is told to wait the remaining lease, got {pttl}"
    );
    // Java is not the owner: its unlock is refused and changes nothing.
    assert_eq!(java.unlock(name, 1, JAVA_LEASE).await, None);
    assert_eq!(hgetall(&server, name).await, ours);

    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    assert_no_lock_left(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_unlock_wakes_a_java_waiter_subscribed_to_the_channel() {
    let server = RedisServer::start();
    let mut java = JavaClient::connect(&server).await;
    let client = client(&server).await;
    let name = "shipment:9";

    let guard = client.lock(name).unwrap().acquire().await.unwrap();

    // Redisson's waiter: try, subscribe, try again, then wait for the message (or the ttl).
    assert!(java.try_lock(name, 7, JAVA_LEASE).await.is_some());
    let mut pubsub = java_subscriber(&server, &java_channel(name)).await;
    let pttl = java
        .try_lock(name, 7, JAVA_LEASE)
        .await
        .expect("still held by us");
    assert!(pttl > 0, "pttl {pttl}");

    let unlocked_at = Instant::now();
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    let (channel, payload) = next_message(&mut pubsub).await;
    let woke_after = unlocked_at.elapsed();
    assert_eq!(channel, java_channel(name));
    assert_eq!(payload, JAVA_UNLOCK_MESSAGE);
    assert!(
        woke_after < WAKE_BOUND,
        "woke {woke_after:?} after our unlock"
    );

    // Woken, the Java thread takes the lock at once.
    assert_eq!(java.try_lock(name, 7, JAVA_LEASE).await, None);
    assert_eq!(
        hgetall(&server, name).await,
        HashMap::from([(java.field(7), "1".to_string())])
    );
    assert_eq!(java.unlock(name, 7, JAVA_LEASE).await, Some(1));
    assert_no_lock_left(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_reentrant_double_hold_is_hold_count_two_in_the_hash_field() {
    let server = RedisServer::start();
    let mut java = JavaClient::connect(&server).await;
    let client = client(&server).await;
    let name = "ledger:2024";

    let owner = LockOwner::new();
    let field = format!("{}:{}", client.id(), owner.id());
    let lock = client.lock(name).unwrap();
    let outer = lock
        .acquire_with(AcquireOptions::new().owner(owner))
        .await
        .unwrap();
    let inner = lock
        .acquire_with(AcquireOptions::new().owner(owner).wait(Duration::ZERO))
        .await
        .unwrap();

    assert_eq!(
        hgetall(&server, name).await,
        HashMap::from([(field.clone(), "2".to_string())])
    );
    assert_eq!(lock.hold_count(owner).await.unwrap(), 2);
    assert!(java.try_lock(name, 1, JAVA_LEASE).await.is_some());

    assert_eq!(
        inner.unlock().await.unwrap(),
        Released::StillHeld { holds: 1 }
    );
    assert_eq!(
        hgetall(&server, name).await,
        HashMap::from([(field, "1".to_string())])
    );
    assert!(
        java.try_lock(name, 1, JAVA_LEASE).await.is_some(),
        "one hold left: still held"
    );

    assert_eq!(outer.unlock().await.unwrap(), Released::Unlocked);
    assert_no_lock_left(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_reentrant_double_hold_needs_two_java_unlocks_before_we_get_it() {
    let server = RedisServer::start();
    let mut java = JavaClient::connect(&server).await;
    let client = client(&server).await;
    let name = "batch:nightly";

    assert_eq!(java.try_lock(name, 3, JAVA_LEASE).await, None);
    assert_eq!(java.try_lock(name, 3, JAVA_LEASE).await, None);
    assert_eq!(
        hgetall(&server, name).await,
        HashMap::from([(java.field(3), "2".to_string())])
    );

    let lock = client.lock(name).unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(10)).await })
    };
    server.wait_until_parked(&java_channel(name), 1).await;

    // The first Java unlock only re-enters down to one hold: no message, still held.
    assert_eq!(java.unlock(name, 3, JAVA_LEASE).await, Some(0));
    assert!(lock.is_locked().await.unwrap());
    assert!(!waiter.is_finished());

    assert_eq!(java.unlock(name, 3, JAVA_LEASE).await, Some(1));
    let guard = tokio::time::timeout(PROMPT, waiter)
        .await
        .expect("woken by the second unlock")
        .expect("waiter task")
        .expect("our waiter gets the lock");
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    assert_no_lock_left(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_with_braces_use_the_braced_channel() {
    let server = RedisServer::start();
    let mut java = JavaClient::connect(&server).await;
    let client = client(&server).await;
    let name = "{order}:42";
    let channel = "redisson_lock__channel:{order}:42";
    assert_eq!(java_channel(name), channel);

    // Java holds, we wait on the braced channel, Java's unlock there wakes us.
    assert_eq!(java.try_lock(name, 1, JAVA_LEASE).await, None);
    let lock = client.lock(name).unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let guard = lock.acquire_timeout(Duration::from_secs(10)).await;
            (guard, Instant::now())
        })
    };
    server.wait_until_parked(channel, 1).await;
    let unlocked_at = Instant::now();
    assert_eq!(java.unlock(name, 1, JAVA_LEASE).await, Some(1));
    let (guard, acquired_at) = tokio::time::timeout(PROMPT, waiter)
        .await
        .expect("woken on the braced channel")
        .expect("waiter task");
    let guard = guard.expect("our waiter gets the lock");
    assert!(acquired_at.duration_since(unlocked_at) < WAKE_BOUND);

    // The key is the name exactly as written, braces included.
    assert_eq!(server.keys().await, vec![name.to_string()]);

    // Our unlock publishes on the same braced channel.
    let mut pubsub = java_subscriber(&server, channel).await;
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    let (got_channel, payload) = next_message(&mut pubsub).await;
    assert_eq!(got_channel, channel);
    assert_eq!(payload, JAVA_UNLOCK_MESSAGE);

    assert_no_lock_left(&server).await;
}
