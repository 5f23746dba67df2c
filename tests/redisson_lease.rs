//! One key, two clocks: a Redisson reader and a Rust reader share a read-write lock's hash,
//! whose one TTL both renew. Redisson's read renewal sets the hash (and every reader's
//! timeout key) to its own lease, which may be shorter than ours; our next renewal puts it
//! back (it never shortens, and answers the TTL it left). Judged by the one promise: while
//! our reader's `is_lost()` is false, no writer is granted, also after the Java process
//! died with the TTL it last set.

mod support;

use actix_distributed_lock::{LockClient, LockError};
use redis::AsyncCommands;
use std::time::{Duration, Instant};
use support::java_peer::{JavaPeer, PeerOptions, Redisson, Target};
use support::RedisServer;

/// Our watchdog lease, renewed every third of it.
const OURS: Duration = Duration::from_secs(6);
/// Redisson's `lockWatchdogTimeout`: shorter than ours, longer than our renew interval.
const JAVAS: Duration = Duration::from_secs(3);

async fn client(server: &RedisServer) -> LockClient {
    support::client_with(server, |config| config.watchdog_timeout(OURS)).await
}

/// Waits until the hash's TTL is seen below `below` (Redisson renewed) and then above
/// `above` (we renewed after it).
async fn cut_then_restored(server: &RedisServer, name: &str, below: i64, above: i64) {
    let mut conn = server.conn().await;
    let until = Instant::now() + Duration::from_secs(20);
    let mut cut = false;
    loop {
        assert!(
            Instant::now() < until,
            "no Java renewal then Rust renewal seen"
        );
        let pttl: i64 = conn.pttl(name).await.unwrap();
        if pttl > 0 && pttl < below {
            cut = true;
        } else if cut && pttl > above {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn java_reader_shortens_the_shared_ttl(version: Redisson) {
    let server = RedisServer::start();
    let ours = client(&server).await;
    let writers = client(&server).await;
    let name = "interop:lease";
    let mut peer = JavaPeer::start(
        version,
        Target::Single(&server.url()),
        PeerOptions::new().watchdog(JAVAS),
    )
    .await;
    let reader = ours
        .read_write_lock(name)
        .unwrap()
        .read()
        .acquire()
        .await
        .unwrap();
    peer.expect("r", &format!("lock read {name}"), "locked")
        .await;
    // Redisson's renewal sets the hash to its 3 s; ours sets it back to at least 6 s.
    cut_then_restored(&server, name, JAVAS.as_millis() as i64, 4_000).await;
    // The Java process dies with the TTL it last set still on the hash.
    peer.kill().await;
    let writer = writers.read_write_lock(name).unwrap();
    let attempt = writer.write().acquire_timeout(JAVAS * 2).await;
    assert!(
        matches!(attempt, Err(LockError::Timeout { .. })),
        "a writer was granted the lock while our reader's is_lost() is {}: {attempt:?}",
        reader.is_lost()
    );
    assert!(!reader.is_lost());
    reader.unlock().await.unwrap();
    // The dead Java reader's field keeps the hash only as long as its timeout key.
    let write = writer
        .write()
        .acquire_timeout(Duration::from_secs(20))
        .await
        .expect("the writer gets it once both readers are gone");
    write.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_readers_short_renewal_never_frees_our_read_hold_newest() {
    java_reader_shortens_the_shared_ttl(Redisson::Newest).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_readers_short_renewal_never_frees_our_read_hold_legacy() {
    java_reader_shortens_the_shared_ttl(Redisson::Legacy).await;
}

/// Our reader's fixed lease: longer than Redisson's watchdog lease, so a Redisson read
/// renewal cuts the hash (and our reader's timeout key) below what our reader was promised.
const OUR_FIXED: Duration = Duration::from_secs(8);

/// A fixed-lease reader is never renewed, so nothing of ours puts the cut TTL back: when the
/// Java process dies after its renewal, the hash expires at Redisson's lease. The promise
/// still holds only if our reader knows: no writer may be granted while its `is_lost()` is
/// false.
async fn java_reader_cuts_a_fixed_lease_reader(version: Redisson) {
    let server = RedisServer::start();
    let ours = client(&server).await;
    let writers = client(&server).await;
    let name = "interop:fixed-lease";
    let mut peer = JavaPeer::start(
        version,
        Target::Single(&server.url()),
        PeerOptions::new().watchdog(JAVAS),
    )
    .await;
    let reader = ours
        .read_write_lock(name)
        .unwrap()
        .read()
        .acquire_with(actix_distributed_lock::AcquireOptions::new().lease(OUR_FIXED))
        .await
        .unwrap();
    let acquired = Instant::now();
    peer.expect("r", &format!("lock read {name}"), "locked")
        .await;
    // Redisson's renewal (a third of its lease after its grant) sets the hash to its 3 s.
    let mut conn = server.conn().await;
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let pttl: i64 = conn.pttl(name).await.unwrap();
        if pttl > 0 && pttl < (OUR_FIXED - acquired.elapsed()).as_millis() as i64 - 1_000 {
            break;
        }
        assert!(
            Instant::now() < until,
            "no Redisson renewal cut the hash's TTL"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    peer.kill().await;
    let writer = writers.read_write_lock(name).unwrap();
    let left = OUR_FIXED.saturating_sub(acquired.elapsed()) - Duration::from_millis(500);
    let attempt = writer.write().acquire_timeout(left).await;
    let lost = reader.is_lost();
    let granted_after = acquired.elapsed();
    assert!(
        matches!(attempt, Err(LockError::Timeout { .. })) || lost,
        "a writer was granted the lock {granted_after:?} into our reader's {OUR_FIXED:?} \
         fixed lease while its is_lost() was false: {attempt:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_readers_renewal_never_frees_our_fixed_lease_reader_newest() {
    java_reader_cuts_a_fixed_lease_reader(Redisson::Newest).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_readers_renewal_never_frees_our_fixed_lease_reader_legacy() {
    java_reader_cuts_a_fixed_lease_reader(Redisson::Legacy).await;
}
