//! The count-down latch shared with the real Redisson (`RCountDownLatch`, both pinned
//! versions, driven as a separate JVM): a count set on one side is seen on the other, a
//! Java `countDown` opens our waiters and ours open Java's `await`, on one server and on a
//! Redis Cluster (sharded pub/sub with Redisson 4.x, classic with 3.21), and deleting on
//! either side opens the other's waiters.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{ClientConfig, CountDownLatch, LockClient, ShardedSubscriptionMode};
use std::time::{Duration, Instant};
use support::java_peer::{JavaPeer, PeerOptions, Redisson, Target, PROMPT};
use support::topology::RedisCluster;
use support::RedisServer;
use tokio::task::JoinHandle;

/// How soon a message opens a waiter on the other side, with room for a loaded machine
/// (below our 5 s fallback, so only the message can make it).
const WAKE_BOUND: Duration = Duration::from_secs(3);

fn channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

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
    java_counts_down_and_opens_our_waiter =>
        java_count_down_opens_a_rust_wait_newest, java_count_down_opens_a_rust_wait_legacy;
    we_count_down_and_open_javas_await =>
        rust_count_down_opens_a_java_await_newest, rust_count_down_opens_a_java_await_legacy;
    a_delete_on_either_side_opens_the_others_waiter =>
        a_delete_opens_the_other_sides_waiter_newest, a_delete_opens_the_other_sides_waiter_legacy;
    on_a_cluster_each_side_opens_the_other =>
        cluster_count_downs_open_the_other_side_newest, cluster_count_downs_open_the_other_side_legacy;
}

/// Our waiter opened, soon enough after `since` that only a message (`by`) made it.
async fn assert_opened_promptly(waiting: JoinHandle<(bool, Instant)>, since: Instant, by: &str) {
    let (opened, at) = tokio::time::timeout(PROMPT, waiting)
        .await
        .unwrap()
        .unwrap();
    assert!(opened, "{by} did not open us");
    assert!(
        at - since < WAKE_BOUND,
        "{by} opened us after {:?}",
        at - since
    );
}

/// Our count-down of the last count opens Java's waiter on slot `w`, through the channel.
async fn last_count_down_opens_java(latch: &CountDownLatch, peer: &JavaPeer) {
    let counted_at = Instant::now();
    assert_eq!(latch.count_down().await.unwrap(), 0);
    assert_eq!(peer.reply_within("w", PROMPT).await, "opened");
    assert!(
        counted_at.elapsed() < WAKE_BOUND,
        "our count-down opened Java after {:?}",
        counted_at.elapsed()
    );
}

/// The latch every case here shares.
const NAME: &str = "interop:latch";

/// A server, a client of ours and a Java peer on it.
async fn one_server(version: Redisson) -> (RedisServer, LockClient, JavaPeer) {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let peer = JavaPeer::start(version, Target::Single(&server.url()), PeerOptions::new()).await;
    (server, client, peer)
}

async fn java_count(peer: &mut JavaPeer, name: &str) -> u64 {
    let reply = peer.call("s", &format!("latch_count {name}")).await;
    reply
        .strip_prefix("count ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("java latch_count: {reply}"))
}

/// A bounded wait of ours in a task: whether it opened, and when.
fn rust_waiter(client: &LockClient, name: &str) -> JoinHandle<(bool, Instant)> {
    let latch = client.count_down_latch(name).unwrap();
    tokio::spawn(async move {
        let opened = latch.wait_timeout(Duration::from_secs(60)).await.unwrap();
        (opened, Instant::now())
    })
}

/// Our count, set on our side, is Java's; Java's count-downs open our waiter, the last one
/// through the channel.
async fn java_counts_down_and_opens_our_waiter(version: Redisson) {
    let (server, client, mut peer) = one_server(version).await;
    let latch = client.count_down_latch(NAME).unwrap();
    let name = NAME;
    assert!(latch.try_set_count(2).await.unwrap());
    assert_eq!(
        java_count(&mut peer, name).await,
        2,
        "our count, seen by Java"
    );
    peer.expect("s", &format!("latch_try_set {name} 7"), "set false")
        .await;

    let waiting = rust_waiter(&client, name);
    server.wait_for_subscribers(&channel(name), 1).await;
    peer.expect("s", &format!("latch_count_down {name}"), "counted")
        .await;
    assert_eq!(latch.count().await.unwrap(), 1);
    assert!(
        !latch
            .wait_timeout(Duration::from_millis(300))
            .await
            .unwrap(),
        "one to go"
    );
    assert!(!waiting.is_finished());
    let counted_at = Instant::now();
    peer.expect("s", &format!("latch_count_down {name}"), "counted")
        .await;
    assert_opened_promptly(waiting, counted_at, "Java's count-down").await;
    assert_eq!(server.keys().await, Vec::<String>::new());
    peer.exit().await;
}

/// Java's count, set on its side, is ours; our count-downs open Java's `await()` (no
/// bound), the last one through the channel.
async fn we_count_down_and_open_javas_await(version: Redisson) {
    let (server, client, mut peer) = one_server(version).await;
    let latch = client.count_down_latch(NAME).unwrap();
    let name = NAME;
    peer.expect("s", &format!("latch_try_set {name} 2"), "set true")
        .await;
    assert_eq!(latch.count().await.unwrap(), 2, "Java's count, seen by us");
    assert!(!latch.try_set_count(7).await.unwrap());

    peer.send("w", &format!("latch_await {name}")).await;
    server.wait_for_subscribers(&channel(name), 1).await;
    assert_eq!(latch.count_down().await.unwrap(), 1);
    assert_eq!(java_count(&mut peer, name).await, 1);
    peer.expect("t", &format!("latch_await {name} 300"), "timeout")
        .await;
    assert!(!peer.has_reply("w"));
    last_count_down_opens_java(&latch, &peer).await;
    assert_eq!(java_count(&mut peer, name).await, 0);
    assert_eq!(server.keys().await, Vec::<String>::new());
    peer.exit().await;
}

/// Until the waiter before has dropped its subscription, so the next one is seen.
async fn until_nobody_listens(server: &RedisServer, name: &str) {
    support::eventually("no subscriber on the latch's channel", PROMPT, || async {
        server.subscribers(&channel(name)).await == 0
    })
    .await;
}

/// Our delete publishes `0`, which opens Java's untimed `await()`; Java's delete publishes
/// `1`, on which our waiter reads the count again and finds the latch open.
async fn a_delete_on_either_side_opens_the_others_waiter(version: Redisson) {
    let (server, client, mut peer) = one_server(version).await;
    let latch = client.count_down_latch(NAME).unwrap();
    let name = NAME;

    assert!(latch.try_set_count(3).await.unwrap());
    peer.send("w", &format!("latch_await {name}")).await;
    server.wait_for_subscribers(&channel(name), 1).await;
    let deleted_at = Instant::now();
    assert!(latch.delete().await.unwrap());
    assert_eq!(peer.reply_within("w", PROMPT).await, "opened");
    assert!(deleted_at.elapsed() < WAKE_BOUND);

    peer.expect("s", &format!("latch_try_set {name} 3"), "set true")
        .await;
    until_nobody_listens(&server, name).await;
    let waiting = rust_waiter(&client, name);
    server.wait_for_subscribers(&channel(name), 1).await;
    let deleted_at = Instant::now();
    peer.expect("s", &format!("latch_delete {name}"), "deleted true")
        .await;
    assert_opened_promptly(waiting, deleted_at, "Java's delete").await;
    assert_eq!(server.keys().await, Vec::<String>::new());
    peer.exit().await;
}

async fn until_subscribed(cluster: &RedisCluster, channel: &str) {
    support::eventually("a subscriber on the latch's channel", PROMPT, || {
        std::future::ready(cluster.subscribers_anywhere(channel) >= 1)
    })
    .await;
}

/// On a cluster, with the pub/sub flavour each Redisson uses (sharded in 4.x, classic in
/// 3.21): Java's count-down opens our waiter and ours opens Java's.
async fn on_a_cluster_each_side_opens_the_other(version: Redisson) {
    let cluster = RedisCluster::start(3, 0);
    let pubsub = match version {
        Redisson::Newest => ShardedSubscriptionMode::Auto,
        Redisson::Legacy => ShardedSubscriptionMode::Off,
    };
    let config = ClientConfig::cluster(cluster.primary_urls()).sharded_subscription(pubsub);
    let client = support::clients::connect(config, "the cluster").await;
    let urls = cluster.primary_urls();
    let mut peer = JavaPeer::start(version, Target::Cluster(&urls), PeerOptions::new()).await;
    let name = NAME;
    let latch = client.count_down_latch(name).unwrap();

    assert!(latch.try_set_count(1).await.unwrap());
    assert_eq!(java_count(&mut peer, name).await, 1);
    let waiting = rust_waiter(&client, name);
    until_subscribed(&cluster, &channel(name)).await;
    let counted_at = Instant::now();
    peer.expect("s", &format!("latch_count_down {name}"), "counted")
        .await;
    assert_opened_promptly(waiting, counted_at, "Java's count-down").await;

    peer.expect("s", &format!("latch_try_set {name} 1"), "set true")
        .await;
    assert_eq!(latch.count().await.unwrap(), 1);
    support::eventually("our waiter's subscription is dropped", PROMPT, || {
        std::future::ready(cluster.subscribers_anywhere(&channel(name)) == 0)
    })
    .await;
    peer.send("w", &format!("latch_await {name} 60000")).await;
    until_subscribed(&cluster, &channel(name)).await;
    last_count_down_opens_java(&latch, &peer).await;
    let keys = cluster.keys_on_all();
    assert!(keys.is_empty(), "left behind: {keys:?}");
    peer.exit().await;
}
