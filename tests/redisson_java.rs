//! Interoperability with the real Redisson: a Java process (`tests/redisson-peer`, built
//! against released Redisson versions from Maven Central) and this crate lock the same
//! resources on the same Redis, in both directions.
//!
//! Every case runs against both Redisson versions of [`Redisson`]: the newest release and
//! an older 3.x line. The Java side is a separate JVM driven over its stdin/stdout line
//! protocol (see `support/java_peer.rs`); its lock owner is `<redisson-id>:<thread-id>`,
//! one thread per protocol slot.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::messages::Release;
use actix_distributed_lock::{
    AcquireOptions, ClientConfig, Lock, LockClient, LockError, LockOwner, Released,
    ShardedSubscriptionMode,
};
use std::time::{Duration, Instant};
use support::java_peer::{JavaPeer, PeerOptions, Redisson, Target, PROMPT};
use support::topology::RedisCluster;
use support::RedisServer;

/// How soon an unlock on one side must wake a waiter on the other: the lease is 30 s, so
/// only a pub/sub wake-up meets it. (1 s was exceeded twice in 4 runs on the 2-core CI
/// machine at load average 11-15, a JVM reply taking 1.5 s; the bench measures the real
/// figure.)
const WAKE_BOUND: Duration = Duration::from_secs(2);
/// The watchdog lease of the watchdog cases, on both sides (renewed every third of it).
/// Under CI load (load average 11-15 on 2 cores) a 1 s lease lapsed once on the Java side
/// and a 2 s lease once on ours (fair_watchdog_newest, 2 of 10 runs), so 3 s.
const SHORT_WATCHDOG: Duration = Duration::from_secs(3);

/// The lock kinds that exclude like a mutex, on both sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `RLock` / [`LockClient::lock`].
    Lock,
    /// `RFairLock` / [`LockClient::fair_lock`].
    Fair,
    /// `RReadWriteLock.writeLock()` / `read_write_lock(..).write()`.
    Write,
    /// `RFencedLock` / [`LockClient::fenced_lock`].
    Fenced,
}

impl Kind {
    /// The peer's name for it.
    fn java(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Fair => "fair",
            Kind::Write => "write",
            Kind::Fenced => "fenced",
        }
    }

    fn rust(self, client: &LockClient, name: &str) -> Lock {
        match self {
            Kind::Lock => client.lock(name),
            Kind::Fair => client.fair_lock(name),
            Kind::Write => client.read_write_lock(name).map(|rw| rw.write().clone()),
            Kind::Fenced => client.fenced_lock(name),
        }
        .expect("a valid lock name")
    }

    /// The reply of a granted Java `lock`/`try` (`locked`/`acquired`, plus a token for
    /// the fenced lock).
    fn granted(self, reply: &str, word: &str) -> bool {
        match self {
            Kind::Fenced => reply
                .strip_prefix(word)
                .and_then(|rest| rest.trim().parse::<u64>().ok())
                .is_some(),
            _ => reply == word,
        }
    }

    /// The channel a waiter of this kind listens on; for the fair lock, the waiter's own.
    fn channel(self, name: &str, waiter_field: &str) -> String {
        match self {
            Kind::Lock | Kind::Fenced => format!("redisson_lock__channel:{{{name}}}"),
            Kind::Write => format!("redisson_rwlock:{{{name}}}"),
            Kind::Fair => format!("redisson_lock__channel:{{{name}}}:{waiter_field}"),
        }
    }
}

async fn connect(server: &RedisServer, watchdog: Option<Duration>) -> LockClient {
    support::client_with(server, |config| match watchdog {
        Some(lease) => config.watchdog_timeout(lease),
        None => config,
    })
    .await
}

async fn java(server: &RedisServer, version: Redisson, options: PeerOptions) -> JavaPeer {
    JavaPeer::start(version, Target::Single(&server.url()), options).await
}

/// The field our client writes for `owner`.
fn field(client: &LockClient, owner: LockOwner) -> String {
    format!("{}:{}", client.id(), owner.id())
}

/// Keys left in Redis, without Redisson's unlock latches (`redisson_unlock_latch:*`, which
/// newer Redisson leaves behind on purpose, each with a short PX of its own) and fencing
/// counters (which must outlive every hold).
async fn lock_keys_left(server: &RedisServer) -> Vec<String> {
    server
        .keys()
        .await
        .into_iter()
        .filter(|k| {
            !k.starts_with("redisson_unlock_latch:") && !k.starts_with("redisson_lock_token:")
        })
        .collect()
}

async fn assert_clean(server: &RedisServer) {
    support::eventually("no lock key is left", PROMPT, || async {
        lock_keys_left(server).await.is_empty()
    })
    .await;
}

async fn java_lock(peer: &mut JavaPeer, slot: &str, kind: Kind, name: &str) {
    let reply = peer
        .call(slot, &format!("lock {} {name}", kind.java()))
        .await;
    assert!(kind.granted(&reply, "locked"), "java lock: {reply}");
}

async fn java_try(peer: &mut JavaPeer, slot: &str, kind: Kind, name: &str, wait_ms: u64) -> bool {
    let reply = peer
        .call(slot, &format!("try {} {name} {wait_ms}", kind.java()))
        .await;
    if reply == "busy" {
        return false;
    }
    assert!(kind.granted(&reply, "acquired"), "java try: {reply}");
    true
}

async fn java_unlock(peer: &mut JavaPeer, slot: &str, kind: Kind, name: &str) {
    peer.expect(slot, &format!("unlock {} {name}", kind.java()), "unlocked")
        .await;
}

/// `(locked, held by this slot, hold count)` as Java sees it.
async fn java_state(peer: &mut JavaPeer, slot: &str, kind: Kind, name: &str) -> (bool, bool, u32) {
    let reply = peer
        .call(slot, &format!("state {} {name}", kind.java()))
        .await;
    let mut locked = None;
    let mut mine = None;
    let mut count = None;
    for word in reply.split_whitespace() {
        if let Some(v) = word.strip_prefix("locked=") {
            locked = v.parse().ok();
        } else if let Some(v) = word.strip_prefix("mine=") {
            mine = v.parse().ok();
        } else if let Some(v) = word.strip_prefix("count=") {
            count = v.parse().ok();
        }
    }
    match (locked, mine, count) {
        (Some(l), Some(m), Some(c)) => (l, m, c),
        _ => panic!("java state reply: {reply}"),
    }
}

/// Runs each named case against both Redisson versions, as two tests.
macro_rules! both_versions {
    ($($case:ident($($arg:expr),*) => $newest:ident, $legacy:ident;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $newest() {
                $case(Redisson::Newest, $($arg),*).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $legacy() {
                $case(Redisson::Legacy, $($arg),*).await;
            }
        )*
    };
}

// ---------------------------------------------------------------------------------------
// Exclusion, wake-up, ownership, watchdog: every mutex-like kind, both directions
// ---------------------------------------------------------------------------------------

/// Java holds: our try fails; we hold: Java's try fails; each side gets it once the other
/// lets go.
async fn exclusion(version: Redisson, kind: Kind) {
    let server = RedisServer::start();
    let client = connect(&server, None).await;
    let mut peer = java(&server, version, PeerOptions::new()).await;
    let name = "interop:exclusion";
    let lock = kind.rust(&client, name);

    java_lock(&mut peer, "a", kind, name).await;
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "{kind:?}: a lock Java holds must not be ours"
    );
    assert!(lock.is_locked().await.unwrap());
    assert!(
        !java_try(&mut peer, "b", kind, name, 0).await,
        "another Java thread is excluded too"
    );
    java_unlock(&mut peer, "a", kind, name).await;

    let guard = lock
        .try_acquire()
        .await
        .unwrap()
        .expect("free once Java unlocked");
    assert!(
        !java_try(&mut peer, "b", kind, name, 0).await,
        "{kind:?}: a lock we hold must not be Java's"
    );
    let (locked, mine, count) = java_state(&mut peer, "b", kind, name).await;
    assert_eq!(
        (locked, mine, count),
        (true, false, 0),
        "Java sees our hold"
    );
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    assert!(java_try(&mut peer, "b", kind, name, 0).await);
    java_unlock(&mut peer, "b", kind, name).await;
    assert_clean(&server).await;
}

/// An unlock on one side wakes a waiter on the other through pub/sub, far before the 30 s
/// lease: Java → Rust, then Rust → Java.
async fn wake_up(version: Redisson, kind: Kind) {
    let server = RedisServer::start();
    let client = connect(&server, None).await;
    let mut peer = java(&server, version, PeerOptions::new()).await;
    let name = "interop:wake";
    let lock = kind.rust(&client, name);

    // Java holds, we wait.
    java_lock(&mut peer, "a", kind, name).await;
    let owner = LockOwner::new();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let guard = lock
                .acquire_with(
                    AcquireOptions::new()
                        .owner(owner)
                        .wait(Duration::from_secs(60)),
                )
                .await;
            (guard, Instant::now())
        })
    };
    server
        .wait_for_subscribers(&kind.channel(name, &field(&client, owner)), 1)
        .await;
    let unlocked_at = Instant::now();
    java_unlock(&mut peer, "a", kind, name).await;
    let (guard, granted_at) = tokio::time::timeout(PROMPT, waiter)
        .await
        .expect("our waiter is woken")
        .unwrap();
    let guard = guard.expect("our waiter gets the lock");
    let woke = granted_at - unlocked_at;
    assert!(
        woke < WAKE_BOUND,
        "{kind:?}: Java's unlock woke us after {woke:?}"
    );

    // We hold, Java waits.
    let java_field = peer.owner("b").await;
    peer.send("b", &format!("lock {} {name}", kind.java()))
        .await;
    server
        .wait_for_subscribers(&kind.channel(name, &java_field), 1)
        .await;
    let unlocked_at = Instant::now();
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    let reply = peer.reply_within("b", PROMPT).await;
    let woke = unlocked_at.elapsed();
    assert!(kind.granted(&reply, "locked"), "java lock: {reply}");
    assert!(
        woke < WAKE_BOUND,
        "{kind:?}: our unlock woke Java after {woke:?}"
    );
    java_unlock(&mut peer, "b", kind, name).await;
    assert_clean(&server).await;
}

/// Re-entry does not cross languages, and an unlock by the other side is refused and
/// changes nothing: Rust's is `NotOwner`, Java's `IllegalMonitorStateException`.
async fn ownership(version: Redisson, kind: Kind) {
    let server = RedisServer::start();
    let client = connect(&server, None).await;
    let mut peer = java(&server, version, PeerOptions::new()).await;
    let name = "interop:owner";
    let lock = kind.rust(&client, name);

    // Java holds twice.
    java_lock(&mut peer, "a", kind, name).await;
    java_lock(&mut peer, "a", kind, name).await;
    let refused = lock
        .actor()
        .unwrap()
        .send(Release {
            owner: LockOwner::new(),
        })
        .await
        .expect("the lock actor answers");
    assert!(
        matches!(refused, Err(LockError::NotOwner { .. })),
        "{kind:?}: our unlock of Java's hold: {refused:?}"
    );
    assert_eq!(
        java_state(&mut peer, "a", kind, name).await,
        (true, true, 2),
        "Java's hold count is as it was"
    );
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "no Rust owner re-enters Java's hold"
    );
    java_unlock(&mut peer, "a", kind, name).await;
    java_unlock(&mut peer, "a", kind, name).await;

    // We hold twice.
    let guard = lock.try_acquire().await.unwrap().expect("free");
    let owner = guard.owner();
    let again = guard
        .reenter(PROMPT)
        .await
        .expect("we re-enter our own hold");
    let reply = peer
        .call("a", &format!("unlock {} {name}", kind.java()))
        .await;
    assert!(
        reply.starts_with("error IllegalMonitorStateException"),
        "{kind:?}: Java's unlock of our hold: {reply}"
    );
    assert_eq!(
        lock.hold_count(owner).await.unwrap(),
        2,
        "our holds are as they were"
    );
    assert!(
        !java_try(&mut peer, "a", kind, name, 0).await,
        "no Java thread re-enters our hold"
    );
    assert_eq!(
        java_state(&mut peer, "a", kind, name).await,
        (true, false, 0)
    );
    assert_eq!(
        again.unlock().await.unwrap(),
        Released::StillHeld { holds: 1 }
    );
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    assert_clean(&server).await;
}

/// Each side holds with no lease for 3× its watchdog timeout while the other waits: neither
/// waiter gets its lock (the watchdogs keep renewing); after each unlock the waiter does,
/// promptly. The two directions share one window, on two locks.
async fn watchdog(version: Redisson, kind: Kind) {
    let server = RedisServer::start();
    let client = connect(&server, Some(SHORT_WATCHDOG)).await;
    let mut peer = java(
        &server,
        version,
        PeerOptions::new().watchdog(SHORT_WATCHDOG),
    )
    .await;
    let java_held = "interop:watchdog:java";
    let rust_held = "interop:watchdog:rust";

    // Java holds one lock on its watchdog, we hold the other on ours, each side waits for
    // the lock the other holds.
    java_lock(&mut peer, "a", kind, java_held).await;
    let guard = kind.rust(&client, rust_held).acquire().await.unwrap();
    let waiter = {
        let lock = kind.rust(&client, java_held);
        tokio::spawn(async move {
            let guard = lock.acquire_timeout(Duration::from_secs(60)).await;
            (guard, Instant::now())
        })
    };
    peer.send("b", &format!("lock {} {rust_held}", kind.java()))
        .await;
    tokio::time::sleep(3 * SHORT_WATCHDOG).await; // the span the watchdogs must cover

    if waiter.is_finished() {
        let (outcome, _) = waiter.await.unwrap();
        panic!(
            "{kind:?}: our waiter ended while Java's watchdog keeps the lock: {:?}",
            outcome.map(|guard| guard.owner())
        );
    }
    assert!(
        !peer.has_reply("b"),
        "{kind:?}: Java got a lock our watchdog keeps: {:?}",
        peer.try_reply_within("b", Duration::ZERO).await
    );
    assert!(!guard.is_lost());
    assert_eq!(
        java_state(&mut peer, "a", kind, java_held).await,
        (true, true, 1)
    );

    // Java's unlock wakes our waiter.
    let unlocked_at = Instant::now();
    java_unlock(&mut peer, "a", kind, java_held).await;
    let (granted, granted_at) = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    let granted = granted.expect("we get it after Java's unlock");
    assert!(granted_at - unlocked_at < WAKE_BOUND);

    // Ours wakes Java's.
    let unlocked_at = Instant::now();
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    let reply = peer.reply_within("b", PROMPT).await;
    assert!(kind.granted(&reply, "locked"), "java lock: {reply}");
    assert!(unlocked_at.elapsed() < WAKE_BOUND);

    java_unlock(&mut peer, "b", kind, rust_held).await;
    assert_eq!(granted.unlock().await.unwrap(), Released::Unlocked);
    assert_clean(&server).await;
}

both_versions! {
    exclusion(Kind::Lock) => lock_exclusion_newest, lock_exclusion_legacy;
    wake_up(Kind::Lock) => lock_wake_up_newest, lock_wake_up_legacy;
    ownership(Kind::Lock) => lock_ownership_newest, lock_ownership_legacy;
    watchdog(Kind::Lock) => lock_watchdog_newest, lock_watchdog_legacy;
    exclusion(Kind::Fair) => fair_exclusion_newest, fair_exclusion_legacy;
    wake_up(Kind::Fair) => fair_wake_up_newest, fair_wake_up_legacy;
    ownership(Kind::Fair) => fair_ownership_newest, fair_ownership_legacy;
    watchdog(Kind::Fair) => fair_watchdog_newest, fair_watchdog_legacy;
    exclusion(Kind::Write) => write_exclusion_newest, write_exclusion_legacy;
    wake_up(Kind::Write) => write_wake_up_newest, write_wake_up_legacy;
    ownership(Kind::Write) => write_ownership_newest, write_ownership_legacy;
    watchdog(Kind::Write) => write_watchdog_newest, write_watchdog_legacy;
    exclusion(Kind::Fenced) => fenced_exclusion_newest, fenced_exclusion_legacy;
    wake_up(Kind::Fenced) => fenced_wake_up_newest, fenced_wake_up_legacy;
    ownership(Kind::Fenced) => fenced_ownership_newest, fenced_ownership_legacy;
    watchdog(Kind::Fenced) => fenced_watchdog_newest, fenced_watchdog_legacy;
}

// ---------------------------------------------------------------------------------------
// Fair lock: one queue for both languages
// ---------------------------------------------------------------------------------------

fn fair_queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

fn fair_timeout_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

async fn fair_queue(server: &RedisServer, name: &str) -> Vec<String> {
    let mut conn = server.conn().await;
    redis::cmd("LRANGE")
        .arg(fair_queue_key(name))
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .expect("LRANGE")
}

async fn pttl_of(server: &RedisServer, key: &str) -> i64 {
    let mut conn = server.conn().await;
    redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut conn)
        .await
        .expect("PTTL")
}

/// The owner fields holding `name` (HKEYS of the lock's hash).
async fn holders(server: &RedisServer, name: &str) -> Vec<String> {
    let mut conn = server.conn().await;
    redis::cmd("HKEYS")
        .arg(name)
        .query_async(&mut conn)
        .await
        .expect("HKEYS")
}

/// The fair lock's queue, deadlines, Redis' clock and holders, for failure messages.
async fn fair_state(server: &RedisServer, name: &str) -> String {
    let mut conn = server.conn().await;
    let deadlines: Vec<(String, i64)> = redis::cmd("ZRANGE")
        .arg(fair_timeout_key(name))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(&mut conn)
        .await
        .expect("ZRANGE");
    format!(
        "queue {:?}, deadlines {deadlines:?}, now {}, holders {:?}",
        fair_queue(server, name).await,
        redis_now_ms(server).await,
        holders(server, name).await
    )
}

/// Waits until `waiter` is the `len`-th entry of the queue.
async fn wait_for_queue(server: &RedisServer, name: &str, waiter: &str, len: usize) {
    let deadline = Instant::now() + PROMPT;
    loop {
        let queue = fair_queue(server, name).await;
        if queue.len() == len && queue.last().map(String::as_str) == Some(waiter) {
            return;
        }
        if Instant::now() > deadline {
            panic!(
                "{waiter} did not join the queue of {name} as entry {len}: {}",
                fair_state(server, name).await
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A waiter in the mixed fair queue.
enum FairWaiter {
    Java {
        slot: String,
    },
    Rust {
        release: tokio::sync::oneshot::Sender<()>,
        done: tokio::task::JoinHandle<()>,
    },
}

/// A Rust fair waiter that acquires for `owner`, then holds until told to let go.
fn rust_fair_waiter(lock: Lock, owner: LockOwner) -> FairWaiter {
    let (release, released) = tokio::sync::oneshot::channel();
    let done = tokio::spawn(async move {
        let guard = lock
            .acquire_with(
                AcquireOptions::new()
                    .owner(owner)
                    .wait(Duration::from_secs(120)),
            )
            .await
            .expect("the Rust waiter gets its turn");
        let _ = released.await;
        guard.unlock().await.expect("the Rust waiter unlocks");
    });
    FairWaiter::Rust { release, done }
}

/// 3 Java and 3 Rust waiters join in a known, alternating order behind a holder on
/// `holder_side`; every grant goes to exactly the next one in that order, and while Java
/// waiters wait the queue keys carry no TTL (nothing may expire a Java waiter's place).
async fn fair_mixed_fifo(version: Redisson, java_holds_first: bool) {
    let server = RedisServer::start();
    let client = connect(&server, None).await;
    let mut peer = java(&server, version, PeerOptions::new()).await;
    let name = "interop:fifo";
    let lock = Kind::Fair.rust(&client, name);

    let rust_holder = if java_holds_first {
        java_lock(&mut peer, "holder", Kind::Fair, name).await;
        None
    } else {
        Some(lock.try_acquire().await.unwrap().expect("free"))
    };
    let mut order: Vec<(String, FairWaiter)> = Vec::new();
    for i in 0..6 {
        if i % 2 == 0 {
            let slot = format!("j{i}");
            let field = peer.owner(&slot).await;
            peer.send(&slot, &format!("lock fair {name}")).await;
            wait_for_queue(&server, name, &field, i + 1).await;
            order.push((field, FairWaiter::Java { slot }));
        } else {
            let owner = LockOwner::new();
            let field = field(&client, owner);
            let waiter = rust_fair_waiter(lock.clone(), owner);
            wait_for_queue(&server, name, &field, i + 1).await;
            order.push((field, waiter));
        }
    }
    assert_eq!(
        pttl_of(&server, &fair_queue_key(name)).await,
        -1,
        "the queue must not expire under the Java waiters"
    );
    assert_eq!(pttl_of(&server, &fair_timeout_key(name)).await, -1);

    match rust_holder {
        Some(guard) => assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked),
        None => java_unlock(&mut peer, "holder", Kind::Fair, name).await,
    }
    let expected: Vec<String> = order.iter().map(|(field, _)| field.clone()).collect();
    let mut granted = Vec::new();
    for (field, waiter) in order {
        let what = format!("the lock goes to the next in line, {field}");
        support::eventually(&what, PROMPT, || async {
            !holders(&server, name).await.is_empty()
        })
        .await;
        granted.push(holders(&server, name).await.join(","));
        assert_eq!(
            granted.last(),
            Some(&field),
            "grants so far {granted:?}, queue order {expected:?}"
        );
        match waiter {
            FairWaiter::Java { slot } => {
                let reply = peer.reply_within(&slot, PROMPT).await;
                assert_eq!(reply, "locked");
                java_unlock(&mut peer, &slot, Kind::Fair, name).await;
            }
            FairWaiter::Rust { release, done } => {
                let _ = release.send(());
                done.await.unwrap();
            }
        }
    }
    assert_eq!(granted, expected);
    assert_clean(&server).await;
}

both_versions! {
    fair_mixed_fifo(false) => fair_fifo_behind_rust_newest, fair_fifo_behind_rust_legacy;
    fair_mixed_fifo(true) => fair_fifo_behind_java_newest, fair_fifo_behind_java_legacy;
}

async fn zscore(server: &RedisServer, key: &str, member: &str) -> Option<i64> {
    let mut conn = server.conn().await;
    redis::cmd("ZSCORE")
        .arg(key)
        .arg(member)
        .query_async::<Option<f64>>(&mut conn)
        .await
        .expect("ZSCORE")
        .map(|score| score as i64)
}

/// Redis' clock in milliseconds (the clock of the deadlines).
async fn redis_now_ms(server: &RedisServer) -> i64 {
    let mut conn = server.conn().await;
    let (secs, micros): (i64, i64) = redis::cmd("TIME")
        .query_async(&mut conn)
        .await
        .expect("TIME");
    secs * 1000 + micros / 1000
}

/// Waits until `field` holds the fair lock `name`.
async fn wait_for_holder(server: &RedisServer, name: &str, field: &str) {
    let what = format!("{field} holds {name}");
    support::eventually(&what, Duration::from_secs(20), || async {
        holders(server, name).await == [field.to_string()]
    })
    .await;
}

/// A waiter dies mid-queue (a Java or a Rust process, SIGKILLed): the live waiters keep their order, the one behind the dead is held up no longer
/// than the dead one's deadline (Redisson's rule), and no Rust call moves a live Java
/// waiter's deadline by anything but the allowance Redisson's rule takes off at a grant.
async fn fair_dead_waiter(version: Redisson, java_dies: bool) {
    let allowance = Duration::from_secs(3);
    let allowance_ms = allowance.as_millis() as i64;
    // Built (if need be) before the queue forms, not while the holder must renew.
    let _ = support::lock_holder_binary();
    let server = RedisServer::start();
    let tune = |c: ClientConfig| {
        c.fair_wait_timeout(allowance)
            .watchdog_timeout(SHORT_WATCHDOG)
    };
    let client = support::client_with(&server, tune).await;
    let options = || PeerOptions::new().fair_wait(allowance);
    let mut peer = java(&server, version, options()).await;
    let mut dying_peer = java(&server, version, options()).await;
    let name = "interop:dead";
    let lock = Kind::Fair.rust(&client, name);
    let holder = lock.try_acquire().await.unwrap().expect("free");

    // The queue: R1, D (the one that dies), J2, R2.
    let r1 = LockOwner::new();
    let r1_field = field(&client, r1);
    let r1_waiter = rust_fair_waiter(lock.clone(), r1);
    wait_for_queue(&server, name, &r1_field, 1).await;
    let mut dying_process = None;
    let dead_field = if java_dies {
        let field = dying_peer.owner("d").await;
        dying_peer.send("d", &format!("lock fair {name}")).await;
        field
    } else {
        // Another process (the `lock_holder` example) waits in the queue, to be SIGKILLed.
        let child = tokio::process::Command::new(support::lock_holder_binary())
            .arg(server.url())
            .arg(name)
            .args(["--kind", "fair", "--fair-wait-ms"])
            .arg(allowance.as_millis().to_string())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn lock_holder");
        dying_process = Some(child);
        let what = "the lock_holder process joins the queue";
        support::eventually(what, PROMPT, || async {
            fair_queue(&server, name).await.len() == 2
        })
        .await;
        fair_queue(&server, name).await[1].clone()
    };
    wait_for_queue(&server, name, &dead_field, 2).await;
    let j2_field = peer.owner("j2").await;
    peer.send("j2", &format!("lock fair {name}")).await;
    wait_for_queue(&server, name, &j2_field, 3).await;
    let j2_deadline = zscore(&server, &fair_timeout_key(name), &j2_field).await;
    let r2 = LockOwner::new();
    let r2_field = field(&client, r2);
    let r2_waiter = rust_fair_waiter(lock.clone(), r2);
    wait_for_queue(&server, name, &r2_field, 4).await;
    assert_eq!(
        zscore(&server, &fair_timeout_key(name), &j2_field).await,
        j2_deadline,
        "a Rust waiter joining behind moves no Java deadline"
    );

    if java_dies {
        dying_peer.kill().await;
    } else if let Some(mut process) = dying_process.take() {
        process.kill().await.expect("SIGKILL lock_holder");
    }
    assert_eq!(
        fair_queue(&server, name).await,
        [
            r1_field.clone(),
            dead_field.clone(),
            j2_field.clone(),
            r2_field.clone()
        ],
        "the dead waiter keeps its place until its deadline"
    );
    assert_eq!(holder.unlock().await.unwrap(), Released::Unlocked);
    wait_for_holder(&server, name, &r1_field).await;
    assert_eq!(
        zscore(&server, &fair_timeout_key(name), &j2_field).await,
        j2_deadline.map(|d| d - allowance_ms),
        "a Rust grant takes exactly one allowance off a Java waiter's deadline, as Redisson's does"
    );
    // The dead waiter is next: its deadline bounds how long J2 waits behind it.
    let dead_deadline = zscore(&server, &fair_timeout_key(name), &dead_field)
        .await
        .expect("the dead waiter is still queued");
    let dead_in =
        Duration::from_millis((dead_deadline - redis_now_ms(&server).await).max(0) as u64);
    let released_at = Instant::now();
    let FairWaiter::Rust { release, done } = r1_waiter else {
        unreachable!()
    };
    let _ = release.send(());
    done.await.unwrap();
    let Some(reply) = peer.try_reply_within("j2", dead_in + PROMPT).await else {
        panic!(
            "J2 never got the lock: {}; the peer said:\n{}",
            fair_state(&server, name).await,
            peer.transcript()
        );
    };
    assert_eq!(reply, "locked");
    let waited = released_at.elapsed();
    assert!(
        waited < dead_in + Duration::from_millis(1500),
        "J2 waited {waited:?} behind a dead waiter whose deadline was {dead_in:?} away"
    );
    assert_eq!(holders(&server, name).await, [j2_field.as_str()]);
    assert!(
        !fair_queue(&server, name).await.contains(&dead_field),
        "the dead waiter is gone"
    );
    java_unlock(&mut peer, "j2", Kind::Fair, name).await;
    wait_for_holder(&server, name, &r2_field).await;
    let FairWaiter::Rust { release, done } = r2_waiter else {
        unreachable!()
    };
    let _ = release.send(());
    done.await.unwrap();
    assert_clean(&server).await;
}

both_versions! {
    fair_dead_waiter(true) => fair_dead_java_waiter_newest, fair_dead_java_waiter_legacy;
    fair_dead_waiter(false) => fair_dead_rust_waiter_newest, fair_dead_rust_waiter_legacy;
}

// ---------------------------------------------------------------------------------------
// Read-write lock
// ---------------------------------------------------------------------------------------

/// A Java reader and a Rust reader hold together; a writer on either side excludes both.
async fn rwlock_sharing(version: Redisson) {
    let server = RedisServer::start();
    let client = connect(&server, None).await;
    let mut peer = java(&server, version, PeerOptions::new()).await;
    let name = "interop:rw";
    let rw = client.read_write_lock(name).unwrap();

    peer.expect("r", &format!("lock read {name}"), "locked")
        .await;
    let ours = rw
        .read()
        .try_acquire()
        .await
        .unwrap()
        .expect("readers share");
    assert!(
        rw.write().try_acquire().await.unwrap().is_none(),
        "our writer waits for both readers"
    );
    assert_eq!(peer.call("w", &format!("try write {name} 0")).await, "busy");
    peer.expect("r", &format!("unlock read {name}"), "unlocked")
        .await;
    assert_eq!(
        peer.call("w", &format!("try write {name} 0")).await,
        "busy",
        "our reader still reads"
    );
    ours.unlock().await.unwrap();

    // A Java writer excludes our reader and writer; ours excludes Java's.
    peer.expect("w", &format!("lock write {name}"), "locked")
        .await;
    assert!(rw.read().try_acquire().await.unwrap().is_none());
    assert!(rw.write().try_acquire().await.unwrap().is_none());
    peer.expect("w", &format!("unlock write {name}"), "unlocked")
        .await;
    let writer = rw.write().try_acquire().await.unwrap().expect("free");
    assert_eq!(peer.call("r", &format!("try read {name} 0")).await, "busy");
    assert_eq!(peer.call("w", &format!("try write {name} 0")).await, "busy");
    writer.unlock().await.unwrap();
    assert_clean(&server).await;
}

/// The last reader's unlock on one side wakes a writer on the other, promptly.
async fn rwlock_last_reader_wakes_writer(version: Redisson) {
    let server = RedisServer::start();
    let client = connect(&server, None).await;
    let mut peer = java(&server, version, PeerOptions::new()).await;
    let name = "interop:rw-wake";
    let rw = client.read_write_lock(name).unwrap();
    let channel = format!("redisson_rwlock:{{{name}}}");

    // Java reads last; our writer waits.
    peer.expect("r", &format!("lock read {name}"), "locked")
        .await;
    let ours = rw
        .read()
        .try_acquire()
        .await
        .unwrap()
        .expect("readers share");
    let writer = {
        let write = rw.write().clone();
        tokio::spawn(async move {
            (
                write.acquire_timeout(Duration::from_secs(60)).await,
                Instant::now(),
            )
        })
    };
    server.wait_for_subscribers(&channel, 1).await;
    ours.unlock().await.unwrap();
    assert!(!writer.is_finished(), "Java still reads");
    let unlocked_at = Instant::now();
    peer.expect("r", &format!("unlock read {name}"), "unlocked")
        .await;
    let (guard, granted_at) = tokio::time::timeout(PROMPT, writer).await.unwrap().unwrap();
    let guard = guard.expect("our writer gets it");
    assert!(
        granted_at - unlocked_at < WAKE_BOUND,
        "Java's last read unlock woke our writer after {:?}",
        granted_at - unlocked_at
    );
    guard.unlock().await.unwrap();

    // We read last; the Java writer waits.
    peer.expect("r", &format!("lock read {name}"), "locked")
        .await;
    let ours = rw
        .read()
        .try_acquire()
        .await
        .unwrap()
        .expect("readers share");
    peer.send("w", &format!("lock write {name}")).await;
    server.wait_for_subscribers(&channel, 1).await;
    peer.expect("r", &format!("unlock read {name}"), "unlocked")
        .await;
    assert_eq!(
        peer.try_reply_within("w", Duration::from_millis(200)).await,
        None,
        "we still read"
    );
    let unlocked_at = Instant::now();
    ours.unlock().await.unwrap();
    assert_eq!(peer.reply_within("w", PROMPT).await, "locked");
    assert!(
        unlocked_at.elapsed() < WAKE_BOUND,
        "our last read unlock woke Java's writer after {:?}",
        unlocked_at.elapsed()
    );
    peer.expect("w", &format!("unlock write {name}"), "unlocked")
        .await;
    assert_clean(&server).await;
}

// ---------------------------------------------------------------------------------------
// Fenced lock
// ---------------------------------------------------------------------------------------

/// Tokens strictly increase across interleaved Java and Rust grants of one name.
async fn fenced_tokens_increase(version: Redisson) {
    let server = RedisServer::start();
    let client = connect(&server, None).await;
    let mut peer = java(&server, version, PeerOptions::new()).await;
    let name = "interop:fence";
    let lock = Kind::Fenced.rust(&client, name);
    let mut tokens = Vec::new();
    for round in 0..6 {
        if round % 2 == 0 {
            let reply = peer.call("a", &format!("lock fenced {name}")).await;
            let token: u64 = reply
                .strip_prefix("locked ")
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("java fenced lock: {reply}"));
            tokens.push(("java", token));
            java_unlock(&mut peer, "a", Kind::Fenced, name).await;
        } else {
            let guard = lock.acquire_timeout(PROMPT).await.unwrap();
            tokens.push((
                "rust",
                guard.fencing_token().expect("a fenced guard has a token"),
            ));
            guard.unlock().await.unwrap();
        }
    }
    for pair in tokens.windows(2) {
        assert!(
            pair[0].1 < pair[1].1,
            "tokens must strictly increase: {tokens:?}"
        );
    }
    assert_clean(&server).await;
}

// ---------------------------------------------------------------------------------------
// Semaphores
// ---------------------------------------------------------------------------------------

async fn java_available(peer: &mut JavaPeer, command: &str) -> i64 {
    let reply = peer.call("s", command).await;
    reply
        .strip_prefix("available ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("java {command}: {reply}"))
}

/// Permits set on one side are seen on the other; mixed acquires never exceed them; a
/// release on one side wakes a waiter on the other.
async fn semaphore_shared(version: Redisson) {
    let server = RedisServer::start();
    let client = connect(&server, None).await;
    let mut peer = java(&server, version, PeerOptions::new()).await;
    let name = "interop:sem";
    let sem = client.semaphore(name).unwrap();
    let channel = format!("redisson_sc:{{{name}}}");

    peer.expect("s", &format!("sem_try_set {name} 2"), "set true")
        .await;
    assert_eq!(
        sem.available_permits().await.unwrap(),
        2,
        "Java's permits, seen by us"
    );
    assert!(!sem.try_set_permits(5).await.unwrap(), "already set");
    let ours = sem.try_acquire(1).await.unwrap().expect("a permit is free");
    peer.expect("a", &format!("sem_try {name} 1 0"), "acquired")
        .await;
    assert!(
        sem.try_acquire(1).await.unwrap().is_none(),
        "never more than 2 in all"
    );
    assert_eq!(peer.call("a", &format!("sem_try {name} 1 0")).await, "busy");
    assert_eq!(
        java_available(&mut peer, &format!("sem_available {name}")).await,
        0
    );

    // Our release wakes a Java waiter.
    peer.send("b", &format!("sem_acquire {name} 1")).await;
    server.wait_for_subscribers(&channel, 1).await;
    let released_at = Instant::now();
    ours.release().await.unwrap();
    assert_eq!(peer.reply_within("b", PROMPT).await, "acquired");
    assert!(
        released_at.elapsed() < WAKE_BOUND,
        "our release woke Java after {:?}",
        released_at.elapsed()
    );

    // Java's release wakes ours.
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move {
            (
                sem.acquire_timeout(1, Duration::from_secs(60)).await,
                Instant::now(),
            )
        })
    };
    server.wait_for_subscribers(&channel, 1).await;
    let released_at = Instant::now();
    peer.expect("b", &format!("sem_release {name} 1"), "released")
        .await;
    let (permit, granted_at) = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    let permit = permit.expect("our waiter gets the permit");
    assert!(
        granted_at - released_at < WAKE_BOUND,
        "Java's release woke us after {:?}",
        granted_at - released_at
    );
    permit.release().await.unwrap();
    peer.expect("a", &format!("sem_release {name} 1"), "released")
        .await;
    assert_eq!(sem.available_permits().await.unwrap(), 2);
    assert_eq!(
        java_available(&mut peer, &format!("sem_available {name}")).await,
        2
    );
}

/// Permit ids cross languages: permits set here are Java's to take; a Java permit with a
/// lease expires and comes back to us, ours to Java the same way; a release by id works
/// from the other side; a release on one side wakes a waiter on the other.
async fn expirable_semaphore_shared(version: Redisson) {
    let server = RedisServer::start();
    let client = connect(&server, None).await;
    let mut peer = java(&server, version, PeerOptions::new()).await;
    let name = "interop:psem";
    let sem = client.expirable_semaphore(name).unwrap();
    let lease = Duration::from_millis(1000);

    assert!(sem.try_set_permits(1).await.unwrap());
    assert_eq!(
        java_available(&mut peer, &format!("psem_available {name}")).await,
        1
    );
    // A Java permit with a lease: we wait, and get it when it expires.
    let asked_at = Instant::now();
    let reply = peer
        .call("a", &format!("psem_acquire {name} {}", lease.as_millis()))
        .await;
    assert!(reply.starts_with("permit "), "java psem_acquire: {reply}");
    let taken_at = Instant::now();
    assert!(sem.try_acquire(1).await.unwrap().is_none());
    let ours = sem
        .acquire_with(
            actix_distributed_lock::PermitOptions::new()
                .wait(Duration::from_secs(10))
                .lease(lease),
        )
        .await
        .expect("the Java permit expires and comes back");
    // The lease runs from Java's call (its clock), between these two instants.
    let (since_ask, since_reply) = (asked_at.elapsed(), taken_at.elapsed());
    assert!(
        since_ask >= lease - Duration::from_millis(50)
            && since_reply < lease + Duration::from_millis(1500),
        "got it {since_ask:?} after asking Java, {since_reply:?} after Java had it"
    );
    // Ours expires the same way for Java.
    assert_eq!(peer.call("a", &format!("psem_try {name} 0")).await, "busy");
    let reply = peer.call("a", &format!("psem_try {name} 10000")).await;
    assert!(reply.starts_with("permit "), "java psem_try: {reply}");
    drop(ours); // already expired in Redis
    let java_id = reply.trim_start_matches("permit ").to_string();
    // A release by id from our side frees Java's permit.
    sem.release(&java_id)
        .await
        .expect("we release Java's permit by its id");
    assert_eq!(
        java_available(&mut peer, &format!("psem_available {name}")).await,
        1
    );

    // Our release wakes a Java waiter, and Java's wakes ours.
    let ours = sem.try_acquire(1).await.unwrap().expect("free");
    peer.send("b", &format!("psem_acquire {name}")).await;
    server
        .wait_for_subscribers(&format!("redisson_sc:{{{name}}}"), 1)
        .await;
    let released_at = Instant::now();
    ours.release().await.unwrap();
    let reply = peer.reply_within("b", PROMPT).await;
    assert!(reply.starts_with("permit "), "java psem_acquire: {reply}");
    assert!(
        released_at.elapsed() < WAKE_BOUND,
        "our release woke Java after {:?}",
        released_at.elapsed()
    );
    let java_id = reply.trim_start_matches("permit ").to_string();
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move {
            (
                sem.acquire_timeout(1, Duration::from_secs(60)).await,
                Instant::now(),
            )
        })
    };
    server
        .wait_for_subscribers(&format!("redisson_sc:{{{name}}}"), 1)
        .await;
    let released_at = Instant::now();
    peer.expect("b", &format!("psem_release {name} {java_id}"), "released")
        .await;
    let (permit, granted_at) = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    assert!(
        granted_at - released_at < WAKE_BOUND,
        "Java's release woke us after {:?}",
        granted_at - released_at
    );
    permit
        .expect("our waiter gets the permit")
        .release()
        .await
        .unwrap();
    assert_eq!(
        java_available(&mut peer, &format!("psem_available {name}")).await,
        1
    );
}

both_versions! {
    rwlock_sharing() => rwlock_readers_share_writers_exclude_newest, rwlock_readers_share_writers_exclude_legacy;
    rwlock_last_reader_wakes_writer() => rwlock_last_reader_wakes_writer_newest, rwlock_last_reader_wakes_writer_legacy;
    fenced_tokens_increase() => fenced_tokens_increase_newest, fenced_tokens_increase_legacy;
    semaphore_shared() => semaphore_shared_newest, semaphore_shared_legacy;
    expirable_semaphore_shared() => expirable_semaphore_shared_newest, expirable_semaphore_shared_legacy;
}

// ---------------------------------------------------------------------------------------
// Stress: 2 Java and 2 Rust processes, 500 increments each under one lock
// ---------------------------------------------------------------------------------------

/// How many increments each of the four processes makes.
const INCREMENTS: u64 = 500;
/// Bound for a whole counter loop, on a busy 2-core machine.
const STRESS_BOUND: Duration = Duration::from_secs(300);

impl Kind {
    /// `lock_holder --kind` for it.
    fn holder_kind(self) -> &'static str {
        match self {
            Kind::Lock => "reentrant",
            Kind::Fair => "fair",
            Kind::Write => "write",
            Kind::Fenced => "fenced",
        }
    }
}

/// A `lock_holder --count` process: its counter loop's outcome.
async fn rust_counter(urls: &str, kind: Kind, name: &str, counter: &str) -> Result<(), String> {
    rust_counter_with(urls, kind, name, counter, &[]).await
}

async fn rust_counter_with(
    urls: &str,
    kind: Kind,
    name: &str,
    counter: &str,
    extra: &[&str],
) -> Result<(), String> {
    let output = tokio::process::Command::new(support::lock_holder_binary())
        .args([urls, name, "--kind", kind.holder_kind(), "--count"])
        .arg(INCREMENTS.to_string())
        .args(["--counter", counter])
        .args(extra)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(STRESS_BOUND, output)
        .await
        .map_err(|_| format!("a Rust counter loop took over {STRESS_BOUND:?}"))?
        .map_err(|e| format!("run lock_holder: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if output.status.success() && stdout.trim() == format!("counted {INCREMENTS}") {
        Ok(())
    } else {
        Err(format!(
            "lock_holder --count: {}; stdout {stdout}; stderr {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

async fn get_counter(conn: &mut impl redis::aio::ConnectionLike, counter: &str) -> Option<u64> {
    redis::cmd("GET")
        .arg(counter)
        .query_async(conn)
        .await
        .expect("GET counter")
}

/// Four processes, two of each language, increment one counter under one lock: the count
/// is exact and no lock key is left.
async fn stress(version: Redisson, kind: Kind) {
    let server = RedisServer::start();
    let name = "interop:stress";
    let counter = "interop:stress:counter";
    let mut peers = Vec::new();
    for _ in 0..2 {
        peers.push(java(&server, version, PeerOptions::new()).await);
    }
    let url = server.url();
    let rust = [
        rust_counter(&url, kind, name, counter),
        rust_counter(&url, kind, name, counter),
    ];
    let command = format!("count {} {name} {counter} {INCREMENTS}", kind.java());
    for peer in &mut peers {
        peer.send("c", &command).await;
    }
    let java = async {
        for peer in &peers {
            assert_eq!(
                peer.reply_within("c", STRESS_BOUND).await,
                format!("counted {INCREMENTS}")
            );
        }
    };
    let (rust, ()) = tokio::join!(futures_util::future::join_all(rust), java);
    for outcome in rust {
        outcome.unwrap();
    }
    let mut conn = server.conn().await;
    assert_eq!(get_counter(&mut conn, counter).await, Some(4 * INCREMENTS));
    let () = redis::cmd("DEL")
        .arg(counter)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_clean(&server).await;
}

both_versions! {
    stress(Kind::Lock) => lock_stress_newest, lock_stress_legacy;
    stress(Kind::Fair) => fair_stress_newest, fair_stress_legacy;
    stress(Kind::Write) => write_stress_newest, write_stress_legacy;
    stress(Kind::Fenced) => fenced_stress_newest, fenced_stress_legacy;
}

// ---------------------------------------------------------------------------------------
// Redis Cluster (3 primaries): exclusion, wake-up, stress
// ---------------------------------------------------------------------------------------

/// Our pub/sub flavour for a cluster shared with `version`: Redisson 4.x uses sharded pub/sub
/// on Redis 7+ (its default `shardedSubscriptionMode` AUTO), like ours; Redisson 3.21 only
/// has classic pub/sub, so a Rust service beside it must be set to classic too.
fn cluster_pubsub(version: Redisson) -> ShardedSubscriptionMode {
    match version {
        Redisson::Newest => ShardedSubscriptionMode::Auto,
        Redisson::Legacy => ShardedSubscriptionMode::Off,
    }
}

async fn cluster_client(cluster: &RedisCluster, version: Redisson) -> LockClient {
    let config =
        ClientConfig::cluster(cluster.primary_urls()).sharded_subscription(cluster_pubsub(version));
    tokio::time::timeout(PROMPT, LockClient::connect(config))
        .await
        .expect("the client connects promptly")
        .expect("the client connects")
}

/// Subscribers of `channel` anywhere in the cluster, sharded or classic.
async fn cluster_subscribers(cluster: &RedisCluster, channel: &str) -> i64 {
    let mut total = cluster.sharded_subscribers(channel);
    for port in cluster.live_ports() {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(channel)
            .query_async(&mut conn)
            .await
            .unwrap();
        total += counts.first().map_or(0, |(_, n)| *n);
    }
    total
}

async fn wait_for_cluster_subscriber(cluster: &RedisCluster, channel: &str) {
    let what = format!("a subscriber on {channel}");
    support::eventually(&what, PROMPT, || async {
        cluster_subscribers(cluster, channel).await >= 1
    })
    .await;
}

async fn assert_cluster_clean(cluster: &RedisCluster) {
    support::eventually("no lock key is left in the cluster", PROMPT, || async {
        cluster.keys_on_all().iter().all(|k| {
            k.starts_with("redisson_unlock_latch:") || k.starts_with("redisson_lock_token:")
        })
    })
    .await;
}

/// On the cluster: each side's hold excludes the other, and each side's unlock wakes the
/// other's waiter promptly (on the pub/sub flavour both sides use).
async fn cluster_exclusion_and_wake_up(version: Redisson, kind: Kind) {
    let cluster = RedisCluster::start(3, 0);
    let client = cluster_client(&cluster, version).await;
    let urls = cluster.primary_urls();
    let mut peer = JavaPeer::start(version, Target::Cluster(&urls), PeerOptions::new()).await;
    let name = "interop:cluster";
    let lock = kind.rust(&client, name);

    // Java holds: excluded, then woken.
    java_lock(&mut peer, "a", kind, name).await;
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "{kind:?}: Java holds it"
    );
    let owner = LockOwner::new();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let guard = lock
                .acquire_with(
                    AcquireOptions::new()
                        .owner(owner)
                        .wait(Duration::from_secs(60)),
                )
                .await;
            (guard, Instant::now())
        })
    };
    wait_for_cluster_subscriber(&cluster, &kind.channel(name, &field(&client, owner))).await;
    let unlocked_at = Instant::now();
    java_unlock(&mut peer, "a", kind, name).await;
    let (guard, granted_at) = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    let guard = guard.expect("our waiter gets the lock");
    assert!(
        granted_at - unlocked_at < WAKE_BOUND,
        "{kind:?}: Java's unlock woke us after {:?}",
        granted_at - unlocked_at
    );

    // We hold: excluded, then woken.
    assert!(
        !java_try(&mut peer, "b", kind, name, 0).await,
        "{kind:?}: we hold it"
    );
    let java_field = peer.owner("b").await;
    peer.send("b", &format!("lock {} {name}", kind.java()))
        .await;
    wait_for_cluster_subscriber(&cluster, &kind.channel(name, &java_field)).await;
    let unlocked_at = Instant::now();
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    let reply = peer.reply_within("b", PROMPT).await;
    assert!(kind.granted(&reply, "locked"), "java lock: {reply}");
    assert!(
        unlocked_at.elapsed() < WAKE_BOUND,
        "{kind:?}: our unlock woke Java after {:?}",
        unlocked_at.elapsed()
    );
    java_unlock(&mut peer, "b", kind, name).await;
    assert_cluster_clean(&cluster).await;
}

/// The stress case on the cluster: 2 JVMs and 2 Rust processes, one counter, exact.
async fn cluster_stress(version: Redisson, kind: Kind) {
    let cluster = RedisCluster::start(3, 0);
    let urls = cluster.primary_urls();
    let name = "interop:cluster-stress";
    let counter = "interop:cluster-stress:counter";
    let mut peers = Vec::new();
    for _ in 0..2 {
        peers.push(JavaPeer::start(version, Target::Cluster(&urls), PeerOptions::new()).await);
    }
    let joined = urls.join(",");
    let pubsub = match cluster_pubsub(version) {
        ShardedSubscriptionMode::Off => "classic",
        _ => "auto",
    };
    let extra = ["--pubsub", pubsub];
    let rust = [
        rust_counter_with(&joined, kind, name, counter, &extra),
        rust_counter_with(&joined, kind, name, counter, &extra),
    ];
    let command = format!("count {} {name} {counter} {INCREMENTS}", kind.java());
    for peer in &mut peers {
        peer.send("c", &command).await;
    }
    let java = async {
        for peer in &peers {
            assert_eq!(
                peer.reply_within("c", STRESS_BOUND).await,
                format!("counted {INCREMENTS}")
            );
        }
    };
    let (rust, ()) = tokio::join!(futures_util::future::join_all(rust), java);
    for outcome in rust {
        outcome.unwrap();
    }
    let mut conn = cluster.client().get_async_connection().await.unwrap();
    assert_eq!(get_counter(&mut conn, counter).await, Some(4 * INCREMENTS));
    let () = redis::cmd("DEL")
        .arg(counter)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_cluster_clean(&cluster).await;
}

both_versions! {
    cluster_exclusion_and_wake_up(Kind::Lock) => cluster_lock_newest, cluster_lock_legacy;
    cluster_exclusion_and_wake_up(Kind::Fair) => cluster_fair_newest, cluster_fair_legacy;
    cluster_exclusion_and_wake_up(Kind::Write) => cluster_write_newest, cluster_write_legacy;
    cluster_exclusion_and_wake_up(Kind::Fenced) => cluster_fenced_newest, cluster_fenced_legacy;
    cluster_stress(Kind::Lock) => cluster_lock_stress_newest, cluster_lock_stress_legacy;
}
