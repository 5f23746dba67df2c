//! The key's TTL is the truth: a lock's key in Redis has one TTL shared by every hold on it
//! (re-entries with their own leases, readers with fixed and watchdog leases), so no script
//! of ours may set it below what a hold it carries still has left, and a hold that is lost
//! while Redis may still count it is taken out. Each test judges the one promise that
//! matters: while a holder's `is_lost()` is false, nobody else is granted the lock.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::messages::Renew;
use actix_distributed_lock::{
    current, distributed_lock, AcquireOptions, Lock, LockClient, LockError, LockGuard, LockOwner,
    MultiLock,
};
use redis::AsyncCommands;
use std::time::{Duration, Instant};
use support::holder::Holder;
use support::proxy::TcpProxy;
use support::RedisServer;

/// The watchdog lease of these tests (renewed every third of it).
const WATCHDOG: Duration = Duration::from_secs(3);
/// A re-entry's short fixed lease: the key would be gone long before the checks below if
/// the re-entry set the key's TTL to it.
const SHORT: Duration = Duration::from_millis(100);
/// How long after the short lease the checks run: many times the short lease, well
/// within the watchdog lease.
const AFTER: Duration = Duration::from_millis(700);

async fn watchdog_client(server: &RedisServer) -> LockClient {
    support::client_with(server, |config| config.watchdog_timeout(WATCHDOG)).await
}

/// The kinds a re-entry can take, each as a handle on `name` from `client`.
fn handle(client: &LockClient, kind: &str, name: &str) -> Lock {
    match kind {
        "reentrant" => client.lock(name),
        "fenced" => client.fenced_lock(name),
        "fair" => client.fair_lock(name),
        "write" => client.read_write_lock(name).map(|rw| rw.write().clone()),
        other => panic!("no kind {other}"),
    }
    .unwrap()
}

/// Another client must not get `name` now, while `holder` says it holds it; and the key
/// must still carry more than `at_least` of TTL in Redis.
async fn nobody_else_gets_it(
    server: &RedisServer,
    other: &Lock,
    holder: &LockGuard,
    at_least: Duration,
) {
    let mut conn = server.conn().await;
    let pttl: i64 = conn.pttl(holder.key()).await.unwrap();
    assert!(!holder.is_lost(), "the holder was told it lost the lock");
    assert!(
        pttl > at_least.as_millis() as i64,
        "the key of `{}` has {pttl} ms left while its holder is not told of any loss",
        holder.name()
    );
    let second = other.try_acquire().await.unwrap();
    assert!(
        second.is_none(),
        "a second holder was granted `{}` while the first one's is_lost() is false",
        holder.name()
    );
    assert!(!holder.is_lost());
}

/// A watchdog hold re-entered with a short fixed lease keeps its key: the re-entry's lease
/// ends for its own accounting, not the key's. For every kind that re-enters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentry_with_a_shorter_lease_never_shortens_the_key() {
    let server = RedisServer::start();
    let client = watchdog_client(&server).await;
    let rival = watchdog_client(&server).await;
    for kind in ["reentrant", "fenced", "fair", "write"] {
        let name = format!("reentry:{kind}");
        let lock = handle(&client, kind, &name);
        let outer = lock.acquire().await.unwrap();
        let inner = lock
            .acquire_with(AcquireOptions::new().owner(outer.owner()).lease(SHORT))
            .await
            .unwrap();
        tokio::time::sleep(AFTER).await;
        let other = handle(&rival, kind, &name);
        nobody_else_gets_it(&server, &other, &outer, WATCHDOG / 2).await;
        drop(inner);
        outer.unlock().await.unwrap();
        let taken = other.try_acquire().await.unwrap();
        assert!(taken.is_some(), "{kind}: free once both holds are released");
    }
}

/// A fixed-lease hold re-entered with a shorter fixed lease lasts its own lease: the key is
/// not cut to the re-entry's, and the outer hold is neither lost early nor late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_lease_reentries_keep_the_longest_lease() {
    let server = RedisServer::start();
    let client = watchdog_client(&server).await;
    let rival = watchdog_client(&server).await;
    let lease = Duration::from_secs(3);
    let lock = client.lock("reentry:fixed").unwrap();
    let outer = lock
        .acquire_with(AcquireOptions::new().lease(lease))
        .await
        .unwrap();
    let taken = Instant::now();
    let inner = lock
        .acquire_with(AcquireOptions::new().owner(outer.owner()).lease(SHORT))
        .await
        .unwrap();
    tokio::time::sleep(AFTER).await;
    let other = rival.lock("reentry:fixed").unwrap();
    nobody_else_gets_it(&server, &other, &outer, lease / 3).await;
    // Releasing the short hold leaves the key what the outer hold has left.
    drop(inner);
    support::eventually("the inner hold is released", Duration::from_secs(5), || {
        let lock = lock.clone();
        let owner = outer.owner();
        async move { lock.hold_count(owner).await.unwrap() == 1 }
    })
    .await;
    nobody_else_gets_it(&server, &other, &outer, lease / 3).await;
    // The outer hold ends at its own lease: lost() then, and the key goes with it.
    tokio::time::timeout(lease * 3, outer.lost())
        .await
        .expect("lost() fires when the outer lease runs out");
    assert!(
        taken.elapsed() + Duration::from_millis(50) >= lease - lease / 100,
        "lost() fired {:?} after the acquire, before the {lease:?} lease",
        taken.elapsed()
    );
    let second = other
        .acquire_timeout(Duration::from_secs(5))
        .await
        .expect("free once the outer lease ran out");
    second.unlock().await.unwrap();
}

/// A `Renew` with a shorter lease than the watchdog's does not cut the key under the
/// watchdog hold (it only ever extends).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renew_with_a_shorter_lease_never_shortens_the_key() {
    let server = RedisServer::start();
    let client = watchdog_client(&server).await;
    let rival = watchdog_client(&server).await;
    for (kind, lock) in [
        ("reentrant", client.lock("renew:reentrant").unwrap()),
        ("fast", client.fast_lock("renew:fast").unwrap()),
    ] {
        let guard = lock.acquire().await.unwrap();
        let renewed = lock
            .actor()
            .unwrap()
            .send(Renew {
                owner: guard.owner(),
                lease: SHORT,
            })
            .await
            .unwrap()
            .unwrap();
        assert!(renewed, "{kind}: the hold is there to renew");
        tokio::time::sleep(AFTER).await;
        let other = match kind {
            "fast" => rival.fast_lock(lock.name()).unwrap(),
            _ => rival.lock(lock.name()).unwrap(),
        };
        nobody_else_gets_it(&server, &other, &guard, WATCHDOG / 2).await;
        guard.unlock().await.unwrap();
    }
}

/// A reader with a fixed 20 s lease and a watchdog reader in another process share the
/// hash: the watchdog reader's renewal must not cut the hash to its own lease. Once that
/// process is killed, a writer waits for the fixed reader, who is not told of any loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watchdog_readers_renewal_keeps_a_longer_fixed_read_lease() {
    // Built before the clock starts: a build takes longer than the lease.
    support::lock_holder_binary();
    let server = RedisServer::start();
    let client = watchdog_client(&server).await;
    let writer_client = watchdog_client(&server).await;
    let lease = Duration::from_secs(20);
    let rw = client.read_write_lock("report").unwrap();
    let reader = rw
        .read()
        .acquire_with(AcquireOptions::new().lease(lease))
        .await
        .unwrap();
    let mut watchdog_reader = Holder::start(
        &server,
        "report",
        &["--kind", "read", "--watchdog-ms", "1500"],
    )
    .await;
    // Its renewals come every 500 ms: wait for two of them (its timeout key's TTL rises).
    let mut conn = server.conn().await;
    let timeout_key = format!("{{report}}:{}:rwlock_timeout:1", watchdog_reader.field);
    let mut rises = 0;
    let mut last: i64 = conn.pttl(&timeout_key).await.unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while rises < 2 {
        assert!(Instant::now() < until, "the watchdog reader never renewed");
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now: i64 = conn.pttl(&timeout_key).await.unwrap();
        rises += usize::from(now > last + 100);
        last = now;
    }
    let pttl: i64 = conn.pttl("report").await.unwrap();
    assert!(
        pttl > 15_000,
        "a reader's renewal cut the shared hash to {pttl} ms under a 20 s read hold"
    );
    watchdog_reader.kill_and_reap();
    let writer = writer_client.read_write_lock("report").unwrap();
    let attempt = writer.write().acquire_timeout(Duration::from_secs(4)).await;
    assert!(
        matches!(attempt, Err(LockError::Timeout { .. })),
        "a writer was granted the lock while a reader's is_lost() is {}: {attempt:?}",
        reader.is_lost()
    );
    assert!(!reader.is_lost());
    reader.unlock().await.unwrap();
    let write = writer
        .write()
        .acquire_timeout(Duration::from_secs(20))
        .await
        .expect("the writer gets it once the readers are gone");
    write.unlock().await.unwrap();
}

/// One owner reads twice, with the watchdog and then with a longer fixed lease, and lets
/// the watchdog hold go first. A read unlock removes the reader's last timeout key (they are
/// numbered by count), not the released hold's: the key left must still carry the fixed
/// hold's lease, and the hash with it, so no writer gets in while that hold is not lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_unlock_out_of_order_keeps_the_longer_lease_left() {
    let server = RedisServer::start();
    let client = watchdog_client(&server).await;
    let writer_client = watchdog_client(&server).await;
    let rw = client.read_write_lock("ledger").unwrap();
    let me = LockOwner::new();
    let watched = rw
        .read()
        .acquire_with(AcquireOptions::new().owner(me))
        .await
        .unwrap();
    let fixed = rw
        .read()
        .acquire_with(
            AcquireOptions::new()
                .owner(me)
                .lease(Duration::from_secs(20)),
        )
        .await
        .unwrap();
    watched.unlock().await.unwrap();
    let writer = writer_client.read_write_lock("ledger").unwrap();
    nobody_else_gets_it(&server, writer.write(), &fixed, Duration::from_secs(15)).await;
    fixed.unlock().await.unwrap();
}

/// A renewal whose reply comes after the hold's deadline has already extended the key in
/// Redis: the holder is told of the loss at its deadline, and the key it kept is taken out
/// at once, not left to block everyone else for up to a lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_lost_unconfirmed_leaves_no_key_behind() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.port()).await;
    let lease = Duration::from_secs(3);
    let client = support::client_at(&proxy.url(), |config| {
        config
            .watchdog_timeout(lease)
            .renew_every(Duration::from_secs(1))
            .response_timeout(lease * 4)
    })
    .await;
    let guard = client.lock("late").unwrap().acquire().await.unwrap();
    // Renewals still reach Redis (and extend the key), their replies do not come back.
    proxy.hold_replies(true);
    let held_from = Instant::now();
    tokio::time::timeout(lease * 3, guard.lost())
        .await
        .expect("lost() fires when no renewal is confirmed within the lease");
    let lost_at = Instant::now();
    assert!(held_from.elapsed() < lease + Duration::from_millis(500));
    // Replies flow again: what the lost hold's clean-up sent is answered.
    proxy.hold_replies(false);
    let mut conn = server.conn().await;
    let deadline = lost_at + Duration::from_millis(900);
    loop {
        let exists: bool = conn.exists("late").await.unwrap();
        if !exists {
            break;
        }
        let pttl: i64 = conn.pttl("late").await.unwrap();
        assert!(
            Instant::now() < deadline,
            "the lost hold's key is still there {:?} after lost(), with {pttl} ms left",
            lost_at.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(guard);
}

/// A fixed-lease hold re-entered under the watchdog keeps its fixed lease when no renewal
/// is confirmed: the key lasts to that lease's end whatever the renewals do, so the hold is
/// not given up (nor its key taken out) at the watchdog's end, only at the fixed one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_outlives_a_watchdog_reentry_whose_renewals_go_unanswered() {
    let server = RedisServer::start();
    let proxy = TcpProxy::start(server.port()).await;
    let watchdog = Duration::from_secs(1);
    let lease = Duration::from_secs(4);
    let client = support::client_at(&proxy.url(), |config| {
        config
            .watchdog_timeout(watchdog)
            .response_timeout(lease * 4)
    })
    .await;
    let rival = watchdog_client(&server).await;
    let lock = client.lock("fixed-under-watchdog").unwrap();
    let outer = lock
        .acquire_with(AcquireOptions::new().lease(lease))
        .await
        .unwrap();
    let taken = Instant::now();
    let inner = lock
        .acquire_with(AcquireOptions::new().owner(outer.owner()))
        .await
        .unwrap();
    // Renewals still reach Redis, their replies never come back: none is confirmed.
    proxy.hold_replies(true);
    // Twice the watchdog lease: past it, well within the fixed one.
    tokio::time::sleep(watchdog * 2).await;
    let other = rival.lock("fixed-under-watchdog").unwrap();
    nobody_else_gets_it(&server, &other, &outer, lease / 4).await;
    assert!(!inner.is_lost(), "the re-entry was told it lost the lock");
    // The hold ends at the fixed lease's end: lost() then, and the key goes with it.
    tokio::time::timeout(lease * 2, outer.lost())
        .await
        .expect("lost() fires when the fixed lease runs out");
    let lost_after = taken.elapsed();
    assert!(
        lost_after + Duration::from_millis(50) >= lease - lease / 100,
        "lost() fired {lost_after:?} after the acquire, before the {lease:?} lease"
    );
    assert!(inner.is_lost());
    proxy.hold_replies(false);
    let second = other
        .acquire_timeout(Duration::from_secs(5))
        .await
        .expect("free once the fixed lease ran out");
    second.unlock().await.unwrap();
}

/// Owner A holds, owner B waits in the same client; another client force-unlocks, then A
/// unlocks and hears `NotOwner`: B is woken at once, not after A's lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_waiter_is_woken_when_an_unlock_finds_the_lock_gone() {
    let server = RedisServer::start();
    let client = watchdog_client(&server).await;
    let other = watchdog_client(&server).await;
    let lock = client.lock("gone").unwrap();
    let a = lock.acquire().await.unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(30)).await })
    };
    // Time for B's acquire to reach the lock's actor and queue behind A (were it not
    // queued yet, it would simply find the lock free later: the test cannot pass wrongly).
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished());
    assert!(other.lock("gone").unwrap().force_unlock().await.unwrap());
    let unlocked = Instant::now();
    assert!(matches!(a.unlock().await, Err(LockError::NotOwner { .. })));
    let b = tokio::time::timeout(WATCHDOG / 2, waiter)
        .await
        .expect("B is granted well before A's lease would have run out")
        .unwrap()
        .unwrap();
    assert!(unlocked.elapsed() < WATCHDOG / 2);
    b.unlock().await.unwrap();
}

/// A `MultiLock` whose owner already holds one member with the watchdog re-takes it with a
/// short fixed lease: the member's key is not cut under the watchdog hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multilock_retaking_a_held_member_never_shortens_it() {
    let server = RedisServer::start();
    let client = watchdog_client(&server).await;
    let rival = watchdog_client(&server).await;
    let member = client.lock("multi:a").unwrap();
    let outer = member.acquire().await.unwrap();
    let multi = MultiLock::new([member.clone(), client.lock("multi:b").unwrap()]).unwrap();
    let both = multi
        .acquire_with(AcquireOptions::new().owner(outer.owner()).lease(SHORT))
        .await
        .unwrap();
    tokio::time::sleep(AFTER).await;
    let other = rival.lock("multi:a").unwrap();
    nobody_else_gets_it(&server, &other, &outer, WATCHDOG / 2).await;
    drop(both);
    outer.unlock().await.unwrap();
}

/// The inner call of two nested annotated calls on one lock: a fixed lease re-entered
/// under the outer call's watchdog hold.
#[distributed_lock("nested:<id>", client = client, lease = "100ms")]
async fn inner_step(client: LockClient, id: u32) -> Result<(), LockError> {
    Ok(())
}

/// The outer call: holds with the watchdog, runs the inner call, then checks from inside
/// that nobody else can take the lock while its hold is not lost.
#[distributed_lock("nested:<id>", client = client)]
async fn outer_job(
    client: LockClient,
    id: u32,
    server_port: u16,
    rival: LockClient,
) -> Result<(), LockError> {
    inner_step(client.clone(), id).await?;
    tokio::time::sleep(AFTER).await;
    let hold = current().expect("inside an annotated call");
    let mut conn = support::helper_client(server_port)
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let pttl: i64 = conn.pttl(format!("nested:{id}")).await.unwrap();
    assert!(!hold.is_lost());
    assert!(
        pttl > (WATCHDOG / 2).as_millis() as i64,
        "the nested call's 100 ms lease cut the outer call's key to {pttl} ms"
    );
    let second = rival
        .lock(&format!("nested:{id}"))
        .unwrap()
        .try_acquire()
        .await?;
    assert!(second.is_none(), "a second holder inside the outer call");
    Ok(())
}

/// A nested `#[distributed_lock(.., lease = "100ms")]` inside a watchdog-held call does not
/// cut the outer call's key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_annotated_call_with_a_lease_never_shortens_the_outer_hold() {
    let server = RedisServer::start();
    let client = watchdog_client(&server).await;
    let rival = watchdog_client(&server).await;
    outer_job(client, 7, server.port(), rival).await.unwrap();
}
