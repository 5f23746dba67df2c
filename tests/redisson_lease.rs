//! One key, two clocks: a Redisson reader and a Rust reader share a read-write lock's hash,
//! whose one TTL both renew. Redisson's read renewal sets the hash (and every reader's
//! timeout key) to its own lease, which may be shorter than ours; our next renewal puts it
//! back (it never shortens, and answers the TTL it left). Judged by the one promise: while
//! our reader's `is_lost()` is false, no writer is granted, also after the Java process
//! died with the TTL it last set.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

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
