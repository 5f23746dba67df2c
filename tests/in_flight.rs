//! The windows between a request's send and its reply. The server is held still (SIGSTOP)
//! while a request is on its way, so what the client decides meanwhile (a force-unlock, a
//! hold's end, a dropped future) meets a reply that is not back yet:
//!
//! - a force-unlock of this client that runs after an acquire on its way: the acquire's
//!   hold is deleted with the rest, so its caller never counts on it unknowingly;
//! - a hold that ends while a re-entry of the same owner is on its way and lands on the old
//!   field: once every reply is in, Redis counts what the client counts;
//! - the operations documented to go on once polled (`unlock_as`, `extend`,
//!   `update_lease`) are carried out when their future is dropped after the first poll
//!   behind a busy mailbox.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::messages::GetState;
use actix_distributed_lock::{
    AcquireOptions, LockClient, LockError, LockGuard, LockOwner, PermitOptions,
};
use redis::AsyncCommands;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use support::RedisServer;

/// How long a reply may take on a loaded machine.
const BOUND: Duration = Duration::from_secs(10);

/// Never two holders while the earlier is not told: if `rival` can take the lock, `guard`
/// must already know it lost it.
async fn never_two_holders(rival: &LockClient, name: &str, guard: &LockGuard, what: &str) {
    let theirs = rival.lock(name).unwrap().try_acquire().await.unwrap();
    if theirs.is_some() {
        assert!(
            guard.is_lost(),
            "{what}: another client holds `{name}` while this guard counts on it and lost() \
             is silent"
        );
    }
}

/// Bytes sent to the server on `port` that it has not read yet: the receive queues of its
/// established sockets (`/proc/net/tcp`). While the server is stopped, a request sent to it
/// stays there, so the count grows with each one.
fn unread_by_server(port: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let queued = |line: &str| -> Option<u64> {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let local_port = u16::from_str_radix(cols.get(1)?.rsplit(':').next()?, 16).ok()?;
        let established = *cols.get(3)? == "01";
        let rx = u64::from_str_radix(cols.get(4)?.split(':').nth(1)?, 16).ok()?;
        (local_port == port && established).then_some(rx)
    };
    table.lines().skip(1).filter_map(queued).sum()
}

/// Waits until the stopped server on `port` has more unread bytes than `before` (a request
/// was sent to it); the new count.
async fn sent_to_stopped(port: u16, before: u64, what: &str) -> u64 {
    support::eventually(what, BOUND, || async { unread_by_server(port) > before }).await;
    unread_by_server(port)
}

/// With the server stopped: `first` is sent, then `second`; then the server runs both, in
/// that order. Their answers, each within the bound.
async fn run_in_order<A, B>(server: &mut RedisServer, first: A, second: B) -> (A::Output, B::Output)
where
    A: Future + Send + 'static,
    B: Future + Send + 'static,
    A::Output: Send + 'static,
    B::Output: Send + 'static,
{
    server.pause();
    let port = server.port();
    let before = unread_by_server(port);
    let first = tokio::spawn(first);
    let sent = sent_to_stopped(port, before, "the first request is on its way").await;
    let second = tokio::spawn(second);
    sent_to_stopped(port, sent, "the second request is on its way after it").await;
    server.resume();
    let first = tokio::time::timeout(BOUND, first).await;
    let second = tokio::time::timeout(BOUND, second).await;
    (
        first.expect("the first request is answered").unwrap(),
        second.expect("the second request is answered").unwrap(),
    )
}

/// With the server stopped: `acquire` is sent, then `force`; then the server runs both, in
/// that order. Both must succeed; the acquire's guard comes back.
async fn force_after_acquire_on_its_way<A, F>(
    server: &mut RedisServer,
    acquire: A,
    force: F,
) -> LockGuard
where
    A: Future<Output = Result<LockGuard, LockError>> + Send + 'static,
    F: Future<Output = Result<bool, LockError>> + Send + 'static,
{
    let (guard, forced) = run_in_order(server, acquire, force).await;
    forced.expect("the force-unlock succeeds");
    guard.expect("the acquire succeeds")
}

/// The server's keys but the fencing counters (kept by design).
async fn keys_but_tokens(server: &RedisServer) -> Vec<String> {
    let keys = server.keys().await.into_iter();
    keys.filter(|k| !k.starts_with("redisson_lock_token:"))
        .collect()
}

#[tokio::test]
async fn a_force_unlock_after_a_direct_acquire_on_its_way_leaves_no_second_holder() {
    let mut server = RedisServer::start();
    let client = support::client(&server).await;
    let rival = support::client(&server).await;
    let name = "in-flight:force";
    let lock = client.lock(name).unwrap();
    // The handle's actor and the scripts are warm: the next acquire goes straight to Redis.
    lock.acquire().await.unwrap().unlock().await.unwrap();

    let (acquire, force) = (lock.clone(), lock.clone());
    let guard = force_after_acquire_on_its_way(
        &mut server,
        async move { acquire.acquire().await },
        async move { force.force_unlock().await },
    )
    .await;
    never_two_holders(&rival, name, &guard, "a direct acquire before the force").await;
    if !guard.is_lost() {
        guard.unlock().await.expect("a live guard unlocks");
    }
    assert_eq!(server.keys().await, Vec::<String>::new(), "nothing is left");
}

#[tokio::test]
async fn a_force_unlock_through_the_write_side_after_a_read_acquire_on_its_way() {
    let mut server = RedisServer::start();
    let client = support::client(&server).await;
    let rival = support::client(&server).await;
    let name = "in-flight:force-rw";
    let rw = client.read_write_lock(name).unwrap();
    rw.read().acquire().await.unwrap().unlock().await.unwrap();
    rw.write().acquire().await.unwrap().unlock().await.unwrap();

    let (acquire, force) = (rw.clone(), rw.clone());
    let guard = force_after_acquire_on_its_way(
        &mut server,
        async move { acquire.read().acquire().await },
        async move { force.write().force_unlock().await },
    )
    .await;
    // A writer excludes the reader.
    let theirs = rival
        .read_write_lock(name)
        .unwrap()
        .write()
        .try_acquire()
        .await
        .unwrap();
    if theirs.is_some() {
        assert!(
            guard.is_lost(),
            "a writer of another client holds `{name}` while this reader counts on it and \
             lost() is silent"
        );
    }
    drop(theirs);
    if !guard.is_lost() {
        guard.unlock().await.expect("a live guard unlocks");
    }
}

/// A hold with a fixed lease ends (by the client's reckoning, a drift allowance before the
/// key) while a re-entry of the same owner is on its way; the re-entry runs in that
/// allowance and lands on the old field. Once its reply is in, Redis must count what the
/// client counts: the re-entry's unlock frees the key.
#[tokio::test]
async fn a_loss_while_a_reentry_is_on_its_way_leaves_redis_counting_what_the_client_counts() {
    // The drift allowance of this lease is 102 ms: the window the re-entry lands in.
    const LEASE: Duration = Duration::from_secs(10);
    const DRIFT: Duration = Duration::from_millis(102);
    let mut server = RedisServer::start();
    let client = support::client(&server).await;
    let name = "in-flight:reentry";
    let lock = client.lock(name).unwrap();
    let owner = LockOwner::new();
    let options = AcquireOptions::new().owner(owner);
    lock.acquire_with(options.lease(LEASE))
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();

    let sent = Instant::now();
    let first = lock.acquire_with(options.lease(LEASE)).await.unwrap();
    // Held still from before the client's end of the first hold until half-way through
    // the drift allowance (the key lives another half).
    let end = sent + LEASE - DRIFT;
    tokio::time::sleep_until((end - Duration::from_millis(400)).into()).await;
    server.pause();
    let reentering = tokio::spawn({
        let lock = lock.clone();
        async move {
            lock.acquire_with(options.lease(Duration::from_secs(30)))
                .await
        }
    });
    tokio::time::sleep_until((end + DRIFT / 2).into()).await;
    assert!(
        first.is_lost(),
        "the first hold has ended by the client's reckoning"
    );
    server.resume();

    let second = tokio::time::timeout(BOUND, reentering)
        .await
        .expect("the re-entry is answered")
        .unwrap()
        .expect("the re-entry succeeds");
    drop(first);
    second.unlock().await.expect("the re-entry unlocks");
    let left: Vec<String> = server.keys().await;
    assert_eq!(
        left,
        Vec::<String>::new(),
        "the client counted one hold and released it; Redis must not keep another"
    );
}

/// Polls `future` once (the request is sent) and drops it.
fn poll_once_and_drop<F: Future>(future: F) {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    assert!(
        matches!(future.as_mut().poll(&mut cx), Poll::Pending),
        "the request is still on its way after one poll"
    );
}

/// Fills `name`'s lock actor's mailbox, so a message sent now is handled well after.
async fn busy_lock_mailbox(client: &LockClient, name: &str) {
    let actor = client.lock_actor(name).unwrap();
    for _ in 0..20_000 {
        actor.do_send(GetState { owner: None });
    }
}

#[tokio::test]
async fn unlock_as_goes_on_when_its_future_is_dropped_after_the_first_poll() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let name = "in-flight:unlock-as";
    let lock = client.lock(name).unwrap();
    let owner = LockOwner::new();
    let guard = lock
        .acquire_with(AcquireOptions::new().owner(owner))
        .await
        .unwrap();

    busy_lock_mailbox(&client, name).await;
    poll_once_and_drop(lock.unlock_as(owner));

    support::eventually("the dropped unlock_as released the lock", BOUND, || async {
        server.keys().await.is_empty()
    })
    .await;
    drop(guard);
}

#[tokio::test]
async fn extend_goes_on_when_its_future_is_dropped_after_the_first_poll() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let name = "in-flight:extend";
    let lock = client.lock(name).unwrap();
    let guard = lock
        .acquire_with(AcquireOptions::new().lease(Duration::from_secs(5)))
        .await
        .unwrap();

    busy_lock_mailbox(&client, name).await;
    poll_once_and_drop(guard.extend(Duration::from_secs(60)));

    support::eventually("the dropped extend reached Redis", BOUND, || async {
        let pttl: i64 = server.conn().await.pttl(name).await.unwrap();
        pttl > 30_000
    })
    .await;
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn update_lease_goes_on_when_its_future_is_dropped_after_the_first_poll() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let name = "in-flight:update-lease";
    let semaphore = client.expirable_semaphore(name).unwrap();
    semaphore.try_set_permits(1).await.unwrap();
    let permit = semaphore
        .acquire_with(PermitOptions::new().lease(Duration::from_secs(5)))
        .await
        .unwrap();

    let actor = semaphore.actor().unwrap();
    // Fewer than for a lock: the actor polls each of these answers on its own context, so
    // thousands cost it seconds on a loaded machine; a few hundred hold the update back
    // well past the drop.
    for _ in 0..300 {
        actor.do_send(actix_distributed_lock::messages::AvailablePermits);
    }
    poll_once_and_drop(permit.update_lease(Duration::from_secs(60)));

    // The permit's expiry lives in the semaphore's timeout zset, in Redis's clock (ms).
    let timeouts = format!("{{{name}}}:timeout");
    support::eventually("the dropped update_lease reached Redis", BOUND, || async {
        let mut conn = server.conn().await;
        let time: (String, String) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
        let now_ms = time.0.parse::<i64>().unwrap() * 1000;
        let scores: Vec<(Vec<u8>, f64)> = conn.zrange_withscores(&timeouts, 0, -1).await.unwrap();
        scores
            .iter()
            .any(|(_, expiry)| *expiry as i64 > now_ms + 30_000)
    })
    .await;
    permit.release().await.unwrap();
}

#[tokio::test]
async fn semaphore_and_latch_changes_go_on_when_their_future_is_dropped_after_the_first_poll() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let semaphore = client.semaphore("in-flight:permits").unwrap();
    let actor = semaphore.actor().unwrap();
    for _ in 0..300 {
        actor.do_send(actix_distributed_lock::messages::AvailablePermits);
    }
    poll_once_and_drop(semaphore.add_permits(5));
    support::eventually("the dropped add_permits reached Redis", BOUND, || async {
        semaphore.available_permits().await.unwrap() == 5
    })
    .await;

    let latch = client.count_down_latch("in-flight:latch").unwrap();
    let actor = latch.actor().unwrap();
    for _ in 0..300 {
        actor.do_send(actix_distributed_lock::messages::GetCount);
    }
    poll_once_and_drop(latch.try_set_count(2));
    support::eventually("the dropped try_set_count reached Redis", BOUND, || async {
        latch.count().await.unwrap() == 2
    })
    .await;
}

/// A hold the server forgot without a word (a failover to a replica that never saw the
/// grant: no unlock message, no expiry) meets a re-entry of its owner before the watchdog
/// renews. The re-entry finds no hold of its owner and takes the lock afresh: Redis counts
/// one hold where the client would count two. The outer hold is lost, and must say so, or
/// the re-entry's unlock frees the key while the outer guard still counts on it.
#[tokio::test]
async fn a_reentry_that_finds_the_hold_forgotten_tells_the_outer_hold_it_is_lost() {
    for kind in ["reentrant", "fenced", "spin", "fair", "read", "write"] {
        let server = RedisServer::start();
        let client = support::client(&server).await;
        let rival = support::client(&server).await;
        let name = format!("in-flight:forgotten-{kind}");
        // The kind's lock, and a handle of another client that excludes it.
        let (lock, theirs) = match kind {
            "reentrant" => (client.lock(&name), rival.lock(&name)),
            "fenced" => (client.fenced_lock(&name), rival.lock(&name)),
            "spin" => (client.spin_lock(&name), rival.spin_lock(&name)),
            "fair" => (client.fair_lock(&name), rival.fair_lock(&name)),
            "read" => (
                Ok(client.read_write_lock(&name).unwrap().read().clone()),
                Ok(rival.read_write_lock(&name).unwrap().write().clone()),
            ),
            _ => (
                Ok(client.read_write_lock(&name).unwrap().write().clone()),
                Ok(rival.read_write_lock(&name).unwrap().write().clone()),
            ),
        };
        let (lock, theirs) = (lock.unwrap(), theirs.unwrap());
        let outer = lock.acquire().await.unwrap();
        // The promoted replica never saw the grant: the keys are simply gone.
        let mut conn = server.conn().await;
        let () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
        let inner = outer
            .reenter(Duration::ZERO)
            .await
            .expect("the lock is free: the re-entry takes it");
        assert!(
            outer.is_lost(),
            "{kind}: the re-entry found no hold of its owner: the outer hold was lost"
        );
        assert!(!inner.is_lost(), "{kind}: the re-entry holds the lock");
        inner.unlock().await.expect("the re-entry unlocks");
        // The lock is free: another client takes it, and the outer guard knows it lost.
        let taken = theirs.try_acquire().await.unwrap();
        let taken = taken.expect("the re-entry's unlock freed the lock");
        assert!(outer.is_lost(), "{kind}: two holders, lost() silent");
        taken.unlock().await.expect("the other client unlocks");
        drop(outer);
        let left = keys_but_tokens(&server).await;
        assert_eq!(left, Vec::<String>::new(), "{kind}: nothing left");
    }
}

/// Redis forgot the owner's hold; a re-entry is sent, and the outer guard's unlock after
/// it: the server runs the re-entry (Redis's first hold of the owner), then the unlock, which
/// frees that new hold. The re-entry must not come back as a hold Redis does not have.
#[tokio::test]
async fn an_unlock_sent_after_a_reentry_on_a_forgotten_hold_never_leaves_it_holding_nothing() {
    let mut server = RedisServer::start();
    let client = support::client(&server).await;
    let rival = support::client(&server).await;
    let name = "in-flight:forgotten-then-unlocked";
    let lock = client.lock(name).unwrap();
    let options = AcquireOptions::new().owner(LockOwner::new());
    lock.acquire().await.unwrap().unlock().await.unwrap();
    let outer = lock.acquire_with(options).await.unwrap();
    // The promoted replica never saw the grant.
    let mut conn = server.conn().await;
    let () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();

    let reentry = {
        let lock = lock.clone();
        async move { lock.acquire_with(options).await }
    };
    // The unlock's own answer may say the lock was lost or freed: either is true.
    let (inner, _) = run_in_order(&mut server, reentry, outer.unlock()).await;
    let inner = inner.expect("the lock is free: the re-entry takes it");
    never_two_holders(&rival, name, &inner, "the unlock ran after the re-entry").await;
    if !inner.is_lost() {
        inner.unlock().await.expect("a live guard unlocks");
    }
    assert_eq!(
        keys_but_tokens(&server).await,
        Vec::<String>::new(),
        "nothing left"
    );
}
