//! The spin lock against the real Redisson (`tests/redisson-peer`, both pinned versions):
//! a Java `RSpinLock` and our spin lock exclude each other and hand the lock over in both
//! directions, by polling alone; a Java `RLock` holder and our spin lock exclude each
//! other (the same hash), and our spin waiter takes the lock once the `RLock` is unlocked.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::messages::Release;
use actix_distributed_lock::{
    AcquireOptions, LockClient, LockError, LockGuard, LockOwner, Released,
};
use std::time::{Duration, Instant};
use support::java_peer::{JavaPeer, PeerOptions, Redisson, Target, PROMPT};
use support::{eventually, RedisServer};

/// How soon a polling waiter on either side notices an unlock: both back off to at most
/// 128 ms, so this leaves a loaded machine (and a JVM's reply) plenty.
const HAND_OVER_BOUND: Duration = Duration::from_secs(2);

/// A server, our client and a Java peer of `version` on it.
async fn setup(version: Redisson) -> (RedisServer, LockClient, JavaPeer) {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let target = Target::Single(&server.url());
    let peer = JavaPeer::start(version, target, PeerOptions::new()).await;
    (server, client, peer)
}

/// Java's slot `a` holds `name` (a `kind` lock, once): our spin waiter polls meanwhile and
/// is not let in; Java unlocks, and the waiter takes the lock within the bound.
async fn java_hands_over(
    server: &RedisServer,
    peer: &mut JavaPeer,
    client: &LockClient,
    kind: &str,
    name: &str,
) -> LockGuard {
    let lock = client.spin_lock(name).unwrap();
    let before = server.script_calls().await;
    let waiter = tokio::spawn(async move {
        let options = AcquireOptions::new().wait(Duration::from_secs(60));
        (lock.acquire_with(options).await, Instant::now())
    });
    // A few polls on the held lock (every try is a script call; Java, holding, makes none
    // but a renewal every 10 s).
    eventually("our waiter polls", PROMPT, || async {
        server.script_calls().await >= before + 3
    })
    .await;
    assert!(!waiter.is_finished(), "we got a lock Java's {kind} holds");
    let unlocked_at = Instant::now();
    peer.expect("a", &format!("unlock {kind} {name}"), "unlocked")
        .await;
    let (guard, granted_at) = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
    let guard = guard.expect("our waiter takes it after Java's unlock");
    let took = granted_at - unlocked_at;
    assert!(
        took < HAND_OVER_BOUND,
        "Java's {kind} -> our spin lock after {took:?}"
    );
    guard
}

/// Waits for the Java reply to the command `slot` has out; returns how long after `since`.
async fn java_granted(peer: &JavaPeer, slot: &str, since: Instant) -> Duration {
    let reply = peer.reply_within(slot, PROMPT).await;
    assert_eq!(reply, "locked", "{}", peer.transcript());
    since.elapsed()
}

/// Keys left, without Redisson's unlock latches (each with a short PX of its own).
async fn assert_clean(server: &RedisServer) {
    support::eventually("no lock key is left", PROMPT, || async {
        let keys = server.keys().await;
        keys.iter()
            .all(|key| key.starts_with("redisson_unlock_latch:"))
    })
    .await;
}

/// Java's `RSpinLock` and ours: each excludes the other, each waiter polls the other's
/// unlock, and an unlock by the other side is refused.
async fn spin_and_spin(version: Redisson) {
    let (server, client, mut peer) = setup(version).await;
    let name = "interop:spin";
    let lock = client.spin_lock(name).unwrap();

    // Java holds (twice): we are excluded and cannot unlock it; our waiter polls.
    peer.expect("a", &format!("lock spin {name}"), "locked")
        .await;
    peer.expect("a", &format!("lock spin {name}"), "locked")
        .await;
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "Java's hold is not ours"
    );
    let refused = lock
        .actor()
        .unwrap()
        .send(Release {
            owner: LockOwner::new(),
        })
        .await;
    assert!(
        matches!(refused, Ok(Err(LockError::NotOwner { .. }))),
        "{refused:?}"
    );
    peer.expect("a", &format!("unlock spin {name}"), "unlocked")
        .await;
    let guard = java_hands_over(&server, &mut peer, &client, "spin", name).await;

    // We hold: Java sees it as ours, is excluded, cannot unlock it; its waiter polls.
    let reply = peer.call("b", &format!("state spin {name}")).await;
    assert!(
        reply.starts_with("state locked=true mine=false count=0"),
        "{reply}"
    );
    assert_eq!(peer.call("b", &format!("try spin {name} 0")).await, "busy");
    let reply = peer.call("b", &format!("unlock spin {name}")).await;
    assert!(
        reply.starts_with("error IllegalMonitorStateException"),
        "{reply}"
    );
    let before = server.script_calls().await;
    peer.send("b", &format!("lock spin {name}")).await;
    eventually("Java's waiter polls", PROMPT, || async {
        server.script_calls().await >= before + 3
    })
    .await;
    let held_back = peer.try_reply_within("b", Duration::ZERO).await;
    assert_eq!(held_back, None, "Java got a lock we hold");
    let unlocked_at = Instant::now();
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    let took = java_granted(&peer, "b", unlocked_at).await;
    assert!(took < HAND_OVER_BOUND, "Rust -> Java after {took:?}");
    peer.expect("b", &format!("unlock spin {name}"), "unlocked")
        .await;
    assert_clean(&server).await;
}

/// Java's `RLock` and our spin lock: the same hash, so each excludes the other; our spin
/// waiter polls the `RLock`'s unlock.
async fn rlock_and_spin(version: Redisson) {
    let (server, client, mut peer) = setup(version).await;
    let name = "interop:rlock-spin";
    let lock = client.spin_lock(name).unwrap();

    peer.expect("a", &format!("lock lock {name}"), "locked")
        .await;
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "an RLock hold is not ours"
    );
    let guard = java_hands_over(&server, &mut peer, &client, "lock", name).await;

    // Our spin hold excludes Java's RLock; once we let go, it is Java's at once.
    assert_eq!(
        peer.call("b", &format!("try lock {name} 200")).await,
        "busy"
    );
    let reply = peer.call("b", &format!("state lock {name}")).await;
    assert!(
        reply.starts_with("state locked=true mine=false count=0"),
        "{reply}"
    );
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(
        peer.call("b", &format!("try lock {name} 0")).await,
        "acquired"
    );
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "Java's RLock holds it again"
    );
    peer.expect("b", &format!("unlock lock {name}"), "unlocked")
        .await;
    assert_clean(&server).await;
}

/// Runs each case against both Redisson versions, as two tests.
macro_rules! both_versions {
    ($($case:ident => $newest:ident, $legacy:ident;)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $newest() {
                $case(Redisson::Newest).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $legacy() {
                $case(Redisson::Legacy).await;
            }
        )*
    };
}

both_versions! {
    spin_and_spin => java_spin_and_rust_spin_exclude_and_hand_over_newest,
        java_spin_and_rust_spin_exclude_and_hand_over_legacy;
    rlock_and_spin => java_rlock_and_rust_spin_exclude_each_other_newest,
        java_rlock_and_rust_spin_exclude_each_other_legacy;
}
