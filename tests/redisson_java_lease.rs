//! Leases set again, and owners known by id, against the real Redisson (both pinned
//! versions, each direction): a permit's lease updated on one side is what the other side
//! sees (`updateLeaseTime`); a read hold extended here keeps the hash alive through a Java
//! reader's unlock (which sets the hash's TTL from the readers' timeout keys); a hold taken
//! for a thread id (`lockAsync(leaseTime, unit, threadId)`) is released by the other side
//! knowing that id, with a Rust client configured with the Java client's id.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{
    AcquireOptions, LockClient, LockError, LockOwner, PermitOptions, Released,
};
use redis::AsyncCommands;
use std::time::{Duration, Instant};
use support::java_peer::{JavaPeer, PeerOptions, Redisson, Target};
use support::permits::permit_left;
use support::RedisServer;

const FIRST: Duration = Duration::from_millis(1000);
const LONGER: Duration = Duration::from_secs(4);

/// Runs each named case against both Redisson versions, as two tests.
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
    permit_lease_updates => permit_lease_updates_newest, permit_lease_updates_legacy;
    extended_reader_outlives_a_java_readers_unlock
        => extended_reader_newest, extended_reader_legacy;
    owners_by_thread_id => owners_by_thread_id_newest, owners_by_thread_id_legacy;
}

async fn java(server: &RedisServer, version: Redisson) -> JavaPeer {
    JavaPeer::start(version, Target::Single(&server.url()), PeerOptions::new()).await
}

/// A permit's lease updated by us is what Java sees (still out past the old lease, released
/// by Java as live); one updated by Java is what we see, and we may update Java's by id.
async fn permit_lease_updates(version: Redisson) {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let mut peer = java(&server, version).await;
    let slots = client.expirable_semaphore("slots").unwrap();
    assert!(slots.try_set_permits(1).await.unwrap());
    let fixed = |lease| PermitOptions::new().lease(lease).wait(Duration::ZERO);

    // Ours, updated here: Java finds it out past its first lease, and releases it live.
    let taken = Instant::now();
    let guard = slots.acquire_with(fixed(FIRST)).await.unwrap();
    guard.update_lease(LONGER).await.unwrap();
    tokio::time::sleep_until((taken + FIRST + FIRST / 2).into()).await;
    peer.expect("a", "psem_try slots 0 1000", "busy").await;
    let release = format!("psem_try_release slots {}", guard.permit_id());
    peer.expect("a", &release, "released true").await;
    let error = guard.update_lease(LONGER).await.unwrap_err();
    assert!(matches!(error, LockError::Lost { .. }), "{error}");

    // Java's, updated by Java: we find it out past its first lease.
    let reply = peer.call("a", "psem_acquire slots 1000").await;
    let id = reply
        .strip_prefix("permit ")
        .expect("a permit id")
        .to_string();
    let taken = Instant::now();
    peer.expect("a", &format!("psem_update slots {id} 4000"), "updated true")
        .await;
    let left = permit_left(&server, "slots", &id).await.unwrap();
    assert!(left > 3000, "Java's permit has {left} ms after its update");
    tokio::time::sleep_until((taken + FIRST + FIRST / 2).into()).await;
    assert!(
        slots.try_acquire(1).await.unwrap().is_none(),
        "Java's permit came back early"
    );
    // Cut back here, by id: it comes back to us, and Java's update then finds it gone.
    assert!(slots
        .update_lease(&id, Duration::from_millis(200))
        .await
        .unwrap());
    support::eventually("Java's permit comes back", Duration::from_secs(3), || {
        let slots = slots.clone();
        async move { slots.try_acquire(1).await.unwrap().is_some() }
    })
    .await;
    peer.expect(
        "a",
        &format!("psem_update slots {id} 4000"),
        "updated false",
    )
    .await;

    // Ours, updated by Java: Redis has Java's lease; our guard keeps counting on its own.
    let options = fixed(FIRST).wait(Duration::from_secs(3));
    let guard = slots.acquire_with(options).await.unwrap();
    let update = format!("psem_update slots {} 4000", guard.permit_id());
    peer.expect("a", &update, "updated true").await;
    let left = permit_left(&server, "slots", guard.permit_id())
        .await
        .unwrap();
    assert!(left > 3000, "our permit has {left} ms after Java's update");
    assert!(guard.remaining_lease() <= FIRST);
    guard.release().await.unwrap();
    peer.exit().await;
}

/// Our reader extends its lease; a Java reader comes and goes. Redisson's read unlock sets
/// the hash's TTL to the longest reader timeout key it finds, so ours must carry the new
/// lease: the hash outlives our first lease and no Java writer gets in meanwhile.
async fn extended_reader_outlives_a_java_readers_unlock(version: Redisson) {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let mut peer = java(&server, version).await;
    let taken = Instant::now();
    let ours = client
        .read_write_lock("doc")
        .unwrap()
        .read()
        .acquire_with(AcquireOptions::new().lease(FIRST))
        .await
        .unwrap();
    ours.extend(LONGER).await.unwrap();
    peer.expect("r", "lock read doc 1000", "locked").await;
    peer.expect("r", "unlock read doc", "unlocked").await;
    let left: i64 = server.conn().await.pttl("doc").await.unwrap();
    assert!(
        left > 3000,
        "the hash has {left} ms after the Java reader's unlock"
    );
    tokio::time::sleep_until((taken + FIRST + FIRST / 2).into()).await;
    assert!(
        !ours.is_lost(),
        "our reader was told it lost the lock at its old end"
    );
    peer.expect("w", "try write doc 0", "busy").await;
    ours.unlock().await.unwrap();
    peer.expect("w", "try write doc 0", "acquired").await;
    peer.expect("w", "unlock write doc", "unlocked").await;
    peer.exit().await;
}

/// With a client configured with the Java client's id, a thread id is an owner on both
/// sides: a Java hold for thread 501 is checked and released here, and our hold for owner
/// 777 is checked and released by Java.
async fn owners_by_thread_id(version: Redisson) {
    let server = RedisServer::start();
    let mut peer = java(&server, version).await;
    let java_id = peer.id.clone();
    let client: LockClient = support::client_with(&server, |c| c.client_id(java_id.as_str())).await;
    let lock = client.lock("jobs").unwrap();

    // Java's hold, for thread 501: ours to check and release.
    peer.expect("a", "lock_as lock jobs 501 10000", "locked")
        .await;
    let held: bool = server
        .conn()
        .await
        .hexists("jobs", format!("{java_id}:501"))
        .await
        .unwrap();
    assert!(held);
    assert!(lock.is_held_by(LockOwner::from_id(501)).await.unwrap());
    assert!(!lock.is_held_by(LockOwner::from_id(502)).await.unwrap());
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "a new() owner met thread 501"
    );
    assert_eq!(
        lock.unlock_as(LockOwner::from_id(501)).await.unwrap(),
        Released::Unlocked
    );
    peer.expect("a", "held_by lock jobs 501", "held false")
        .await;

    // Ours, for owner 777: Java's to check and release.
    let guard = lock
        .acquire_with(
            AcquireOptions::new()
                .owner(LockOwner::from_id(777))
                .lease(Duration::from_secs(10)),
        )
        .await
        .unwrap();
    peer.expect("a", "held_by lock jobs 777", "held true").await;
    peer.expect("a", "held_by lock jobs 778", "held false")
        .await;
    peer.expect("b", "unlock_as lock jobs 777", "unlocked")
        .await;
    assert!(!lock.is_locked().await.unwrap());
    let error = guard.extend(Duration::from_secs(10)).await.unwrap_err();
    assert!(matches!(error, LockError::Lost { .. }), "{error}");
    peer.exit().await;
}
