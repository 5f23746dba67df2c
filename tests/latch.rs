//! The count-down latch against a real redis-server: setting and counting down, waiters in
//! one process opened by a count-down in another through the latch's channel (on the
//! node's one subscription connection), bounded and cancelled waits that leave nothing
//! behind, the timed fallback when no message comes, deleting, bad input and closing.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{LockClient, LockError};
use redis::AsyncCommands;
use std::time::{Duration, Instant};
use support::{client, eventually, RedisServer};
use tokio::task::JoinHandle;

/// The longest a waiter sleeps without news before it reads the count again.
const FALLBACK: Duration = Duration::from_secs(5);
/// How soon a message wakes a waiter, with room for a loaded machine (well below the
/// fallback, so only the message can make it).
const WAKE_BOUND: Duration = Duration::from_secs(3);
/// Long enough for a waiter to notice anything it could notice.
const PROMPT: Duration = Duration::from_secs(10);

fn channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

async fn get(server: &RedisServer, key: &str) -> Option<String> {
    server.conn().await.get(key).await.unwrap()
}

/// A waiter of latch `name` on `client` without bound, in a task: its answer and when.
fn waiter(client: &LockClient, name: &str) -> JoinHandle<(Result<(), LockError>, Instant)> {
    let latch = client.count_down_latch(name).unwrap();
    tokio::spawn(async move { (latch.wait().await, Instant::now()) })
}

/// Until no latch actor of `client` is left and nothing listens on `name`'s channel.
async fn until_nothing_waits(server: &RedisServer, client: &LockClient, name: &str) {
    let channel = channel(name);
    eventually(
        "no latch actor and no subscriber is left",
        PROMPT,
        || async { client.active_latches() == 0 && server.subscribers(&channel).await == 0 },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_is_set_once_counted_down_to_zero_and_then_gone() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let latch = client.count_down_latch("latch:set").unwrap();
    assert_eq!(latch.name(), "latch:set");
    assert_eq!(latch.count().await.unwrap(), 0, "never set: open");

    assert!(latch.try_set_count(3).await.unwrap());
    assert!(!latch.try_set_count(5).await.unwrap(), "set already");
    assert_eq!(get(&server, "latch:set").await.as_deref(), Some("3"));
    assert_eq!(latch.count().await.unwrap(), 3);

    assert_eq!(latch.count_down().await.unwrap(), 2);
    assert_eq!(get(&server, "latch:set").await.as_deref(), Some("2"));
    assert_eq!(latch.count_down().await.unwrap(), 1);
    assert_eq!(latch.count_down().await.unwrap(), 0);
    assert_eq!(
        server.keys().await,
        Vec::<String>::new(),
        "the key goes at zero"
    );
    assert_eq!(latch.count().await.unwrap(), 0);

    // Counting down an open latch writes nothing.
    assert_eq!(latch.count_down().await.unwrap(), 0);
    assert_eq!(server.keys().await, Vec::<String>::new());
    // Open, it can be set again.
    assert!(latch.try_set_count(1).await.unwrap());
    assert_eq!(latch.count().await.unwrap(), 1);
    assert!(latch
        .wait_timeout(Duration::ZERO)
        .await
        .is_ok_and(|open| !open));
    assert_eq!(latch.count_down().await.unwrap(), 0);
    assert!(latch.wait_timeout(Duration::ZERO).await.unwrap(), "open");
    latch.wait().await.unwrap();
    client.close().await;
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_opened_by_another_clients_count_down_through_the_channel() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let name = "latch:open";
    assert!(b
        .count_down_latch(name)
        .unwrap()
        .try_set_count(2)
        .await
        .unwrap());
    let waiters: Vec<_> = (0..3).map(|_| waiter(&a, name)).collect();
    // Waiters of two other latches, to show the connections do not grow with latches.
    assert!(b
        .count_down_latch("latch:other")
        .unwrap()
        .try_set_count(1)
        .await
        .unwrap());
    let others: Vec<_> = (0..2).map(|_| waiter(&a, "latch:other")).collect();
    server.wait_for_subscribers(&channel(name), 1).await;
    server
        .wait_for_subscribers(&channel("latch:other"), 1)
        .await;
    assert_eq!(
        server.subscribers(&channel(name)).await,
        1,
        "three waiters, one subscription"
    );
    assert_eq!(a.active_latches(), 2);
    assert_eq!(
        server.connections().await,
        4,
        "two clients, a command and a subscription connection each"
    );

    // A count-down that leaves the count above zero opens nothing.
    let latch = b.count_down_latch(name).unwrap();
    assert_eq!(latch.count_down().await.unwrap(), 1);
    let watch = a.count_down_latch(name).unwrap();
    assert!(!watch
        .wait_timeout(Duration::from_millis(300))
        .await
        .unwrap());
    assert!(waiters.iter().all(|w| !w.is_finished()));

    let counted_at = Instant::now();
    assert_eq!(latch.count_down().await.unwrap(), 0);
    for waiter in waiters {
        let (result, opened_at) = tokio::time::timeout(PROMPT, waiter).await.unwrap().unwrap();
        result.expect("opened");
        assert!(
            opened_at - counted_at < WAKE_BOUND,
            "opened {:?} after the count-down: not by the message",
            opened_at - counted_at
        );
    }
    // The other latch's waiters still wait, and the subscription of the open one is gone.
    assert!(others.iter().all(|w| !w.is_finished()));
    eventually(
        "the open latch's subscription is dropped",
        PROMPT,
        || async { server.subscribers(&channel(name)).await == 0 },
    )
    .await;
    assert_eq!(
        b.count_down_latch("latch:other")
            .unwrap()
            .count_down()
            .await
            .unwrap(),
        0
    );
    for other in others {
        let (result, _) = tokio::time::timeout(PROMPT, other).await.unwrap().unwrap();
        result.expect("opened");
    }
    until_nothing_waits(&server, &a, "latch:other").await;
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_messages_are_redissons_one_for_a_new_count_zero_when_it_reaches_zero() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "latch:messages";
    let mut listener = server.client().get_async_pubsub().await.unwrap();
    listener.subscribe(channel(name)).await.unwrap();
    let latch = client.count_down_latch(name).unwrap();
    assert!(latch.try_set_count(2).await.unwrap());
    assert!(!latch.try_set_count(2).await.unwrap());
    latch.count_down().await.unwrap();
    latch.count_down().await.unwrap();
    latch.count_down().await.unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    assert!(latch.delete().await.unwrap());
    assert!(!latch.delete().await.unwrap());
    // A marker of our own: every message before it has arrived once it does.
    server
        .conn()
        .await
        .publish::<_, _, ()>(channel(name), "end")
        .await
        .unwrap();
    let mut messages = Vec::new();
    let mut stream = listener.on_message();
    use futures_util::StreamExt;
    while let Some(message) = tokio::time::timeout(PROMPT, stream.next()).await.unwrap() {
        let payload: String = message.get_payload().unwrap();
        if payload == "end" {
            break;
        }
        messages.push(payload);
    }
    // Set (1), reached zero (0), set again (1), deleted (0); nothing for the refused set,
    // the count-down that left 1, the count-down of an open latch, the second delete.
    assert_eq!(messages, ["1", "0", "1", "0"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_wait_times_out_and_leaves_nothing_behind() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "latch:bounded";
    let latch = client.count_down_latch(name).unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    let started = Instant::now();
    assert!(!latch
        .wait_timeout(Duration::from_millis(400))
        .await
        .unwrap());
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(400) && waited < PROMPT,
        "gave up after {waited:?}"
    );
    until_nothing_waits(&server, &client, name).await;
    assert_eq!(server.keys().await, [name], "only the count");
    assert_eq!(get(&server, name).await.as_deref(), Some("1"), "untouched");
    // A zero wait reads once and does not subscribe.
    server.reset_stats().await;
    assert!(!latch.wait_timeout(Duration::ZERO).await.unwrap());
    assert_eq!(server.command_calls("subscribe").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_wait_leaves_no_subscription_and_no_actor() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "latch:cancelled";
    let latch = client.count_down_latch(name).unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    let waiting = waiter(&client, name);
    server.wait_for_subscribers(&channel(name), 1).await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    until_nothing_waits(&server, &client, name).await;
    // A future dropped by a timeout of the caller's own likewise.
    let dropped = tokio::time::timeout(Duration::from_millis(300), latch.wait()).await;
    assert!(dropped.is_err(), "still counting");
    until_nothing_waits(&server, &client, name).await;
    assert_eq!(get(&server, name).await.as_deref(), Some("1"), "untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_message_the_timed_fallback_reads_the_count_again() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "latch:fallback";
    assert!(client
        .count_down_latch(name)
        .unwrap()
        .try_set_count(1)
        .await
        .unwrap());
    let waiting = waiter(&client, name);
    server.wait_for_subscribers(&channel(name), 1).await;
    // The count goes without a message (deleted by hand): only the fallback can see it.
    let deleted_at = Instant::now();
    let _: () = server.conn().await.del(name).await.unwrap();
    let (result, opened_at) = tokio::time::timeout(FALLBACK + PROMPT, waiting)
        .await
        .unwrap()
        .unwrap();
    result.expect("opened");
    assert!(
        opened_at - deleted_at <= FALLBACK + Duration::from_secs(2),
        "opened {:?} after the count went",
        opened_at - deleted_at
    );
    until_nothing_waits(&server, &client, name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_latch_opens_its_waiters() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let name = "latch:deleted";
    let latch = b.count_down_latch(name).unwrap();
    assert!(!latch.delete().await.unwrap(), "nothing to delete");
    assert!(latch.try_set_count(5).await.unwrap());
    let waiting = waiter(&a, name);
    server.wait_for_subscribers(&channel(name), 1).await;
    let deleted_at = Instant::now();
    assert!(latch.delete().await.unwrap());
    let (result, opened_at) = tokio::time::timeout(PROMPT, waiting)
        .await
        .unwrap()
        .unwrap();
    result.expect("opened");
    assert!(opened_at - deleted_at < WAKE_BOUND);
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_and_other_data_left_untouched() {
    let server = RedisServer::start();
    let client = client(&server).await;
    for bad in ["", "a\nb"] {
        assert!(
            matches!(
                client.count_down_latch(bad),
                Err(LockError::InvalidName { .. })
            ),
            "{bad:?} accepted"
        );
    }
    let latch = client.count_down_latch("latch:bad").unwrap();
    for count in [0, u64::MAX, i64::MAX as u64 + 1] {
        assert!(
            matches!(
                latch.try_set_count(count).await,
                Err(LockError::InvalidConfig { .. })
            ),
            "count {count} accepted"
        );
    }
    assert_eq!(server.keys().await, Vec::<String>::new());
    assert!(latch.try_set_count(i64::MAX as u64).await.unwrap());
    assert_eq!(
        latch.count().await.unwrap(),
        i64::MAX as u64,
        "every digit kept"
    );
    assert_eq!(latch.count_down().await.unwrap(), i64::MAX as u64 - 1);
    assert!(latch.delete().await.unwrap());

    // Keys that hold something else: refused with WrongType, never written.
    let mut conn = server.conn().await;
    let _: () = conn.hset("latch:hash", "field", "1").await.unwrap();
    let _: () = conn.set("latch:text", "hello").await.unwrap();
    for key in ["latch:hash", "latch:text"] {
        let latch = client.count_down_latch(key).unwrap();
        let wrong = |r: Result<_, LockError>, what: &str| {
            assert!(
                matches!(r, Err(LockError::WrongType { ref name }) if name == key),
                "{what} on {key}"
            );
        };
        wrong(latch.count().await.map(|_| ()), "count");
        wrong(latch.count_down().await.map(|_| ()), "count_down");
        wrong(latch.try_set_count(1).await.map(|_| ()), "try_set_count");
        wrong(latch.delete().await.map(|_| ()), "delete");
        wrong(latch.wait_timeout(PROMPT).await.map(|_| ()), "wait_timeout");
        wrong(latch.wait().await, "wait");
    }
    let fields: Vec<(String, String)> = conn.hgetall("latch:hash").await.unwrap();
    assert_eq!(fields, [("field".to_string(), "1".to_string())]);
    assert_eq!(get(&server, "latch:text").await.as_deref(), Some("hello"));
    until_nothing_waits(&server, &client, "latch:hash").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_fails_waiters_and_leaves_nothing_behind() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "latch:close";
    let latch = client.count_down_latch(name).unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    let waiting = waiter(&client, name);
    server.wait_for_subscribers(&channel(name), 1).await;
    tokio::time::timeout(PROMPT, client.close()).await.unwrap();
    let (result, _) = tokio::time::timeout(PROMPT, waiting)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(result, Err(LockError::Shutdown)), "{result:?}");
    assert!(matches!(latch.count_down().await, Err(LockError::Shutdown)));
    assert!(matches!(latch.wait().await, Err(LockError::Shutdown)));
    eventually("the client's subscription is gone", PROMPT, || async {
        server.subscribers(&channel(name)).await == 0 && server.connections().await == 0
    })
    .await;
    assert_eq!(get(&server, name).await.as_deref(), Some("1"), "untouched");
}
