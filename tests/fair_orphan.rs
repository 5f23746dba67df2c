//! A fair waiter that gives up while Redis is out of reach must not block the fair lock
//! for everyone once the link is back: found by the nemesis suite (a partitioned worker's
//! fair wait left its entry at the head of the queue, and every other fair acquire on the
//! lock timed out until that entry's deadline: the wait allowance, 5 min by default).

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use std::time::Duration;
use support::clients::client_at;
use support::proxy::TcpProxy;
use support::{client, RedisServer};

async fn queue(server: &RedisServer, name: &str) -> Vec<String> {
    use redis::AsyncCommands;
    let mut conn = server.conn().await;
    conn.lrange(format!("redisson_lock_queue:{{{name}}}"), 0, -1)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_waiter_cut_off_while_giving_up_leaves_the_queue_once_the_link_is_back() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.port()).await;
    let holder = client(&server).await;
    let cut_off = client_at(&proxy.url(), |config| {
        config
            .response_timeout(Duration::from_millis(300))
            .fair_wait_timeout(Duration::from_secs(60))
    })
    .await;
    let other = client(&server).await;
    let name = "orphan";
    let held = holder.fair_lock(name).unwrap().acquire().await.unwrap();

    // The cut-off client waits in the queue, then loses the link and gives up.
    let lock = cut_off.fair_lock(name).unwrap();
    let waiter = tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(1)).await });
    support::eventually("the waiter queued", Duration::from_secs(5), || async {
        queue(&server, name).await.len() == 1
    })
    .await;
    proxy.blackhole(true);
    let gave_up = waiter.await.unwrap();
    assert!(gave_up.is_err(), "the waiter could not have been granted");
    // The link comes back; the process lives on.
    proxy.cut();
    proxy.blackhole(false);
    held.unlock().await.unwrap();

    // Nobody waits any more: another client gets the free lock at once.
    let taken = other
        .fair_lock(name)
        .unwrap()
        .acquire_timeout(Duration::from_secs(3))
        .await;
    assert!(
        taken.is_ok(),
        "the fair lock stayed blocked by the queue entry of a waiter that gave up: {:?}, \
         queue {:?}",
        taken.err(),
        queue(&server, name).await
    );
}
