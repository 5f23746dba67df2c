//! Why the nemesis suite's Redisson workers run with no command retries: Redisson resends a
//! command whose reply did not come within its timeout exactly as it was, and its
//! permit-expirable semaphore's acquire is not idempotent. When the first send did run (only
//! its reply was late), the resend takes a second permit under the same permit id: the
//! sorted set holds one entry, the count lost two, and one permit is gone for good.
//!
//! This pins the behaviour of the Redisson versions the suite runs against: the 3.21 line
//! leaks the permit; the newest release does not (in this set-up).

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use redis::AsyncCommands;
use std::time::Duration;
use support::java_peer::{JavaPeer, PeerOptions, Redisson, Target};
use support::proxy::TcpProxy;
use support::RedisServer;

const PERMITS: i64 = 2;

async fn a_resent_permit_acquire(version: Redisson) {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.port()).await;
    let mut peer = JavaPeer::start(
        version,
        Target::Single(&proxy.url()),
        PeerOptions::new()
            .timeout(Duration::from_millis(1_500))
            .retries(1, Duration::from_millis(200)),
    )
    .await;
    let name = "retry:psem";
    peer.expect("s", &format!("psem_try_set {name} {PERMITS}"), "set true")
        .await;
    // The request reaches the server; its reply waits past the timeout and the resend
    // interval, so Redisson resends (the resend reaches the server too).
    proxy.hold_replies(true);
    peer.send("s", &format!("psem_try {name} 0 60000")).await;
    tokio::time::sleep(Duration::from_millis(4_000)).await;
    proxy.hold_replies(false);
    let reply = peer.reply_within("s", Duration::from_secs(10)).await;
    let mut conn = server.conn().await;
    let available: i64 = conn.get(name).await.unwrap();
    let held: i64 = conn.zcard(format!("{{{name}}}:timeout")).await.unwrap();
    match version {
        // 3.21 resends the script as it was: the count lost two permits, the set holds one.
        Redisson::Legacy => assert_eq!(
            (available, held),
            (0, 1),
            "Redisson {}'s resent acquire (reply `{reply}`)",
            version.version()
        ),
        // The newest release does not leak a permit this way.
        Redisson::Newest => assert_eq!(
            available + held,
            PERMITS,
            "Redisson {}'s resent acquire: {available} available, {held} held (reply `{reply}`)",
            version.version()
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_permit_acquire_keeps_the_count_newest() {
    a_resent_permit_acquire(Redisson::Newest).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resent_permit_acquire_takes_two_permits_legacy() {
    a_resent_permit_acquire(Redisson::Legacy).await;
}
