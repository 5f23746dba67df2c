//! Semaphores against real redis-server processes: the permit bound under contention, dead
//! holders' expirable permits coming back, bounded waits, atomic permit setting, pub/sub
//! wake-ups, cancelled acquires, bad input and the keys left behind.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::messages::{
    AcquireExpirablePermits, AcquirePermits, ReleasePermit, ReleasePermits,
};
use actix_distributed_lock::{ClientConfig, LockClient, LockError, PermitOptions};
use redis::AsyncCommands;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::proxy::TcpProxy;
use support::{client, client_with};
use support::{eventually, RedisServer};
use tokio::time::timeout;

/// The longest a waiter sleeps without news (the actor's fallback poll).
const FALLBACK: Duration = Duration::from_secs(5);

/// Permit ids as Redisson stores them in the zset: the raw bytes of the hex id.
fn raw_id(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex id"))
        .collect()
}

async fn redis_now_ms(server: &RedisServer) -> u64 {
    let mut conn = server.conn().await;
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    secs * 1000 + micros / 1000
}

async fn score(server: &RedisServer, zset: &str, hex: &str) -> Option<f64> {
    let mut conn = server.conn().await;
    conn.zscore(zset, raw_id(hex)).await.unwrap()
}

async fn wait_for_no_actors(client: &LockClient) {
    let idle = client.clone();
    eventually(
        "every semaphore actor stops",
        Duration::from_secs(10),
        || {
            let idle = idle.clone();
            async move { idle.active_semaphores() == 0 }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn plain_permits_in_use_never_exceed_the_count_under_64_tasks() {
    const PERMITS: i64 = 5;
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(client(&server).await);
    }
    assert!(clients[0]
        .semaphore("pool")
        .unwrap()
        .try_set_permits(PERMITS as u32)
        .await
        .unwrap());
    let in_use = Arc::new(AtomicI64::new(0));
    let most = Arc::new(AtomicI64::new(0));
    let mut tasks = Vec::new();
    for task in 0..64 {
        let semaphore = clients[task % clients.len()].semaphore("pool").unwrap();
        let (in_use, most) = (in_use.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..8 {
                let wanted = 1 + ((task + round) % 2) as u32;
                let permits = semaphore
                    .acquire_timeout(wanted, Duration::from_secs(60))
                    .await
                    .unwrap();
                let now = in_use.fetch_add(i64::from(wanted), Ordering::SeqCst) + i64::from(wanted);
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1)).await; // the guarded work
                in_use.fetch_sub(i64::from(wanted), Ordering::SeqCst);
                if round % 2 == 0 {
                    permits.release().await.unwrap();
                } else {
                    drop(permits); // given back in the background
                }
            }
        }));
    }
    for task in tasks {
        timeout(Duration::from_secs(120), task)
            .await
            .expect("every task finishes")
            .unwrap();
    }
    let most = most.load(Ordering::SeqCst);
    assert!(
        most <= PERMITS,
        "{most} permits were out at once; the count is {PERMITS}"
    );
    assert!(most >= 2, "no contention happened (at most {most} at once)");
    let semaphore = clients[0].semaphore("pool").unwrap();
    eventually("every permit is back", Duration::from_secs(10), || {
        let semaphore = semaphore.clone();
        async move { semaphore.available_permits().await.unwrap() == PERMITS }
    })
    .await;
    assert_eq!(semaphore.available_permits().await.unwrap(), PERMITS);
    assert_eq!(server.keys().await, vec!["pool".to_string()]);
    drop(semaphore);
    for client in &clients {
        wait_for_no_actors(client).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn expirable_holders_never_exceed_the_count_under_64_tasks() {
    const PERMITS: usize = 3;
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(client(&server).await);
    }
    let first = clients[0].expirable_semaphore("slots").unwrap();
    assert!(first.try_set_permits(PERMITS as u32).await.unwrap());
    let holders = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for task in 0..64 {
        let semaphore = clients[task % clients.len()]
            .expirable_semaphore("slots")
            .unwrap();
        let (holders, most) = (holders.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..4 {
                let guard = semaphore
                    .acquire_timeout(1, Duration::from_secs(60))
                    .await
                    .unwrap();
                assert_eq!(guard.permit_id().len(), 32);
                let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1)).await;
                holders.fetch_sub(1, Ordering::SeqCst);
                if round % 2 == 0 {
                    guard.release().await.unwrap();
                } else {
                    drop(guard);
                }
            }
        }));
    }
    for task in tasks {
        timeout(Duration::from_secs(120), task)
            .await
            .expect("every task finishes")
            .unwrap();
    }
    let most = most.load(Ordering::SeqCst);
    assert!(
        most <= PERMITS,
        "{most} holders at once; the count is {PERMITS}"
    );
    eventually("every permit is back", Duration::from_secs(10), || {
        let first = first.clone();
        async move { first.available_permits().await.unwrap() == PERMITS as i64 }
    })
    .await;
    // The zset of leases is gone once empty: only the count is left.
    assert_eq!(server.keys().await, vec!["slots".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_holders_permit_returns_within_its_lease_and_is_never_renewed_after() {
    let lease = Duration::from_millis(1500);
    let server = RedisServer::start();
    let dying = client_with(&server, |c| c.watchdog_timeout(lease)).await;
    let survivor = client(&server).await;
    let theirs = dying.expirable_semaphore("jobs").unwrap();
    assert!(theirs.try_set_permits(1).await.unwrap());
    let held = theirs.acquire(1).await.unwrap();
    let id = held.permit_id().to_string();

    // Renewal works while the holder lives: the expiry moves forward.
    let first = score(&server, "{jobs}:timeout", &id)
        .await
        .expect("recorded");
    eventually(
        "a renewal extends the lease",
        Duration::from_secs(5),
        || {
            let (server, id) = (&server, &id);
            async move { score(server, "{jobs}:timeout", id).await.unwrap_or(0.0) > first }
        },
    )
    .await;

    let ours = survivor.expirable_semaphore("jobs").unwrap();
    let waiting = tokio::spawn(async move {
        let guard = ours.acquire_timeout(1, Duration::from_secs(30)).await;
        (Instant::now(), guard)
    });
    server.wait_for_subscribers("redisson_sc:{jobs}", 1).await;

    // The holder's process dies without releasing.
    dying.shutdown();
    let died_at = Instant::now();
    let died_at_ms = redis_now_ms(&server).await;
    let latest_expiry = (died_at_ms + lease.as_millis() as u64 + 100) as f64;
    loop {
        match score(&server, "{jobs}:timeout", &id).await {
            // A renewal after the death would push the expiry past this bound.
            Some(expiry) => assert!(
                expiry <= latest_expiry,
                "the dead holder's permit was renewed after shutdown: {expiry} > {latest_expiry}"
            ),
            None => break,
        }
        assert!(
            died_at.elapsed() < lease + Duration::from_secs(3),
            "the dead holder's permit was never taken back"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (acquired_at, guard) = waiting.await.unwrap();
    let guard = guard.expect("the waiter gets the dead holder's permit");
    let after_death = acquired_at - died_at;
    assert!(
        after_death <= lease + Duration::from_secs(1),
        "the permit came back {after_death:?} after the holder died; its lease is {lease:?}"
    );
    assert!(
        held.is_lost(),
        "the dead client's guard knows nothing renews it"
    );
    assert!(score(&server, "{jobs}:timeout", &id).await.is_none());
    drop(held);
    guard.release().await.unwrap();
    assert_eq!(
        survivor
            .expirable_semaphore("jobs")
            .unwrap()
            .available_permits()
            .await
            .unwrap(),
        1
    );
    assert_eq!(server.keys().await, vec!["jobs".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_lease_permit_is_never_renewed_and_reports_lost_at_its_lease() {
    let server = RedisServer::start();
    // A short watchdog would renew within the test if it wrongly watched this permit.
    let client = client_with(&server, |c| c.watchdog_timeout(Duration::from_millis(300))).await;
    let semaphore = client.expirable_semaphore("leased").unwrap();
    semaphore.set_permits(1).await.unwrap();
    let started = Instant::now();
    let guard = semaphore
        .acquire_with(PermitOptions::new().lease(Duration::from_secs(1)))
        .await
        .unwrap();
    assert_eq!(guard.lease(), Some(Duration::from_secs(1)));
    let id = guard.permit_id().to_string();
    let expiry = score(&server, "{leased}:timeout", &id)
        .await
        .expect("recorded");

    timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost() fires at the lease");
    let lived = started.elapsed();
    assert!(lived >= Duration::from_millis(900), "lost early: {lived:?}");
    assert!(guard.is_lost());
    assert_eq!(
        score(&server, "{leased}:timeout", &id).await,
        Some(expiry),
        "nothing renewed it"
    );
    // lost() fires on this process's clock, counted from before the acquire was sent, so
    // it can come a little before the server's expiry: never late, sometimes early. Once
    // the server's clock passes the expiry, the permit goes back on the next look, and its
    // late release is refused.
    eventually("the expired permit is back", Duration::from_secs(2), || {
        let semaphore = semaphore.clone();
        async move { semaphore.available_permits().await.unwrap() == 1 }
    })
    .await;
    assert!(matches!(
        guard.release().await,
        Err(LockError::NotOwner { .. })
    ));
    assert_eq!(server.keys().await, vec!["leased".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_that_finds_the_permit_gone_resolves_lost() {
    let server = RedisServer::start();
    let client = client_with(&server, |c| c.watchdog_timeout(Duration::from_millis(900))).await;
    let semaphore = client.expirable_semaphore("fragile").unwrap();
    semaphore.set_permits(2).await.unwrap();
    let guard = semaphore
        .acquire_with(PermitOptions::new().permits(2))
        .await
        .unwrap();
    assert_eq!(guard.permit_ids().len(), 2);
    assert!(!guard.is_lost());
    let mut conn = server.conn().await;
    let removed: i64 = conn
        .zrem("{fragile}:timeout", raw_id(&guard.permit_ids()[0]))
        .await
        .unwrap();
    assert_eq!(removed, 1);
    timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("the next renewal reports the loss");
    // The other permit of the same acquire was given back with the loss.
    eventually(
        "the surviving permit is given back",
        Duration::from_secs(5),
        || {
            let semaphore = semaphore.clone();
            async move { semaphore.available_permits().await.unwrap() == 1 }
        },
    )
    .await;
    assert!(matches!(
        guard.release().await,
        Err(LockError::NotOwner { .. })
    ));
    assert_eq!(server.keys().await, vec!["fragile".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_and_release_n_and_bounded_waits_time_out() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let other = client_with(&server, |c| c.default_wait(Duration::from_millis(300))).await;
    let semaphore = client.semaphore("counted").unwrap();
    assert_eq!(semaphore.set_permits(3).await.unwrap(), 3);
    let two = semaphore.acquire(2).await.unwrap();
    assert_eq!(two.permits(), 2);
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);

    let theirs = other.semaphore("counted").unwrap();
    assert!(theirs.try_acquire(2).await.unwrap().is_none());
    let started = Instant::now();
    let error = theirs
        .acquire_timeout(2, Duration::from_millis(500))
        .await
        .unwrap_err();
    let waited = started.elapsed();
    assert!(
        matches!(error, LockError::Timeout { ref name, .. } if name == "counted"),
        "{error}"
    );
    assert!(
        waited >= Duration::from_millis(500),
        "gave up early: {waited:?}"
    );
    assert!(waited < Duration::from_secs(3), "gave up late: {waited:?}");
    // The default wait (300 ms here) bounds `acquire` too.
    let started = Instant::now();
    assert!(theirs.acquire(3).await.unwrap_err().is_timeout());
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        1,
        "failed waits took nothing"
    );

    let one = theirs.try_acquire(1).await.unwrap().expect("one is free");
    assert_eq!(semaphore.available_permits().await.unwrap(), 0);
    two.release().await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    // Forgotten permits stay taken until anyone releases that many.
    assert_eq!(one.forget(), 1);
    assert_eq!(semaphore.available_permits().await.unwrap(), 2);
    theirs.release(1).await.unwrap();
    assert_eq!(semaphore.available_permits().await.unwrap(), 3);

    // The permit-expirable kind times out the same way.
    let slots = client.expirable_semaphore("slot").unwrap();
    slots.set_permits(1).await.unwrap();
    let held = slots.acquire(1).await.unwrap();
    let started = Instant::now();
    let error = other
        .expirable_semaphore("slot")
        .unwrap()
        .acquire_timeout(1, Duration::from_millis(400))
        .await
        .unwrap_err();
    assert!(error.is_timeout(), "{error}");
    assert!(started.elapsed() >= Duration::from_millis(400));
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(other
        .expirable_semaphore("slot")
        .unwrap()
        .try_acquire(1)
        .await
        .unwrap()
        .is_none());
    held.release().await.unwrap();
    assert_eq!(slots.available_permits().await.unwrap(), 1);
    let mut keys = server.keys().await;
    keys.sort();
    assert_eq!(keys, vec!["counted".to_string(), "slot".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn permits_are_set_atomically() {
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(client(&server).await);
    }
    let mut tries = Vec::new();
    for i in 0..32u32 {
        let semaphore = clients[i as usize % 4].semaphore("starting").unwrap();
        tries.push(tokio::spawn(async move {
            (i + 1, semaphore.try_set_permits(i + 1).await.unwrap())
        }));
    }
    let mut winners = Vec::new();
    for attempt in tries {
        let (value, set) = attempt.await.unwrap();
        if set {
            winners.push(value);
        }
    }
    assert_eq!(
        winners.len(),
        1,
        "exactly one process sets the permits: {winners:?}"
    );
    let semaphore = clients[0].semaphore("starting").unwrap();
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        i64::from(winners[0])
    );
    assert!(!semaphore.try_set_permits(99).await.unwrap());
    assert_eq!(
        semaphore.available_permits().await.unwrap(),
        i64::from(winners[0])
    );

    assert_eq!(semaphore.set_permits(2).await.unwrap(), 2);
    assert_eq!(semaphore.add_permits(3).await.unwrap(), 5);
    assert_eq!(semaphore.add_permits(-6).await.unwrap(), -1);
    assert!(semaphore.try_acquire(1).await.unwrap().is_none());
    assert_eq!(semaphore.add_permits(1).await.unwrap(), 0);

    // Concurrent adds are never lost.
    let mut adds = Vec::new();
    for i in 0..40usize {
        let semaphore = clients[i % 4].semaphore("starting").unwrap();
        adds.push(tokio::spawn(async move {
            semaphore.add_permits(1).await.unwrap()
        }));
    }
    for add in adds {
        add.await.unwrap();
    }
    assert_eq!(semaphore.available_permits().await.unwrap(), 40);

    // A permit-expirable semaphore sets its total: held permits count against it.
    let slots = clients[0].expirable_semaphore("total").unwrap();
    assert!(slots.try_set_permits(4).await.unwrap());
    let held = slots
        .acquire_with(PermitOptions::new().permits(2))
        .await
        .unwrap();
    assert_eq!(slots.set_permits(3).await.unwrap(), 1);
    assert_eq!(slots.available_permits().await.unwrap(), 1);
    held.release().await.unwrap();
    assert_eq!(slots.available_permits().await.unwrap(), 3);
    assert!(!slots.try_set_permits(10).await.unwrap());
    assert_eq!(slots.add_permits(2).await.unwrap(), 5);
}

/// Waits until `channel` has a subscriber and the waiter made its second try (each try
/// reads the count with one GET): from then on only a wake-up or its timer moves it.
async fn wait_until_parked(server: &RedisServer, channel: &str, gets_before: u64) {
    eventually("the waiter is parked", Duration::from_secs(10), || async {
        server.subscribers(channel).await >= 1
            && server.command_calls("get").await >= gets_before + 2
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_by_pubsub_long_before_the_fallback() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let waiter = client(&server).await;

    // Plain semaphore, released through this crate.
    let semaphore = holder.semaphore("handoff").unwrap();
    semaphore.set_permits(1).await.unwrap();
    let held = semaphore.acquire(1).await.unwrap();
    let gets = server.command_calls("get").await;
    let theirs = waiter.semaphore("handoff").unwrap();
    let waiting = tokio::spawn(async move {
        let permits = theirs.acquire_timeout(1, Duration::from_secs(30)).await;
        (Instant::now(), permits)
    });
    wait_until_parked(&server, "redisson_sc:{handoff}", gets).await;
    let released_at = Instant::now();
    held.release().await.unwrap();
    let (acquired_at, permits) = waiting.await.unwrap();
    let permits = permits.expect("the waiter acquires");
    let handoff = acquired_at - released_at;
    assert!(
        handoff < FALLBACK / 5,
        "hand-off took {handoff:?}; the fallback is {FALLBACK:?}"
    );

    // Released the way Redisson's RSemaphore does (INCRBY, then PUBLISH the new count).
    let _kept = permits.forget();
    let gets = server.command_calls("get").await;
    let theirs = waiter.semaphore("handoff").unwrap();
    let waiting = tokio::spawn(async move {
        let permits = theirs.acquire_timeout(1, Duration::from_secs(30)).await;
        (Instant::now(), permits)
    });
    wait_until_parked(&server, "redisson_sc:{handoff}", gets).await;
    let mut conn = server.conn().await;
    let released_at = Instant::now();
    let () = redis::Script::new(
        "local v = redis.call('incrby', KEYS[1], 1); redis.call('publish', KEYS[2], v)",
    )
    .key("handoff")
    .key("redisson_sc:{handoff}")
    .invoke_async(&mut conn)
    .await
    .unwrap();
    let (acquired_at, permits) = waiting.await.unwrap();
    permits
        .expect("a Redisson-style release wakes our waiter")
        .release()
        .await
        .unwrap();
    let handoff = acquired_at - released_at;
    assert!(handoff < FALLBACK / 5, "hand-off took {handoff:?}");

    // Permit-expirable semaphore: its waiter sleeps until the next expiry at most (30 s
    // here) or the fallback, yet the release wakes it at once.
    let slots = holder.expirable_semaphore("slot-handoff").unwrap();
    slots.set_permits(1).await.unwrap();
    let held = slots.acquire(1).await.unwrap();
    let gets = server.command_calls("get").await;
    let theirs = waiter.expirable_semaphore("slot-handoff").unwrap();
    let waiting = tokio::spawn(async move {
        let guard = theirs.acquire_timeout(1, Duration::from_secs(30)).await;
        (Instant::now(), guard)
    });
    wait_until_parked(&server, "redisson_sc:{slot-handoff}", gets).await;
    let released_at = Instant::now();
    held.release().await.unwrap();
    let (acquired_at, guard) = waiting.await.unwrap();
    guard.expect("the waiter acquires").release().await.unwrap();
    let handoff = acquired_at - released_at;
    assert!(handoff < FALLBACK / 5, "hand-off took {handoff:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_head_of_the_local_queue_asks_redis() {
    const WAITERS: usize = 30;
    let server = RedisServer::start();
    let holder = client(&server).await;
    let local = client(&server).await;
    let semaphore = holder.semaphore("queue").unwrap();
    semaphore.set_permits(1).await.unwrap();
    let held = semaphore.acquire(1).await.unwrap();
    let gets = server.command_calls("get").await;
    let mut tasks = Vec::new();
    for _ in 0..WAITERS {
        let theirs = local.semaphore("queue").unwrap();
        tasks.push(tokio::spawn(async move {
            let permits = theirs
                .acquire_timeout(1, Duration::from_secs(60))
                .await
                .unwrap();
            tokio::task::yield_now().await;
            permits.release().await.unwrap();
        }));
    }
    wait_until_parked(&server, "redisson_sc:{queue}", gets).await;
    assert_eq!(
        server.command_calls("get").await,
        gets + 2,
        "only the head of the queue tries (once, then once more after subscribing)"
    );
    held.release().await.unwrap();
    for task in tasks {
        timeout(Duration::from_secs(60), task)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(semaphore.available_permits().await.unwrap(), 1);
}

/// A head whose caller gave up leaves the queue at once, not when its sleep ends: the
/// waiter behind it, which one free permit would do for, gets it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_head_gives_its_place_up_at_once() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let local = client(&server).await;
    let name = "head-left";
    let semaphore = holder.semaphore(name).unwrap();
    semaphore.set_permits(2).await.unwrap();
    let _held = semaphore.acquire(1).await.unwrap();
    // The head wants both permits: it finds one, and sleeps (no release comes).
    let gets = server.command_calls("get").await;
    let theirs = local.semaphore(name).unwrap();
    let head =
        tokio::spawn(async move { theirs.acquire_timeout(2, Duration::from_secs(60)).await });
    wait_until_parked(&server, "redisson_sc:{head-left}", gets).await;
    // One permit would do for the next, but it queues behind the head (FIFO). Its message
    // is in the actor's mailbox before the next one's, so it is queued once that returns:
    // a `try_set_permits` that changes nothing (a count read would wake the head, whose
    // try would then find it gone).
    let local_semaphore = local.semaphore(name).unwrap();
    let next = local_semaphore.actor().unwrap().send(AcquirePermits {
        permits: 1,
        wait: Duration::from_secs(60),
    });
    assert!(!local_semaphore.try_set_permits(2).await.unwrap());

    let cancelled_at = Instant::now();
    head.abort();
    assert!(head.await.unwrap_err().is_cancelled());
    let permits = timeout(FALLBACK, next)
        .await
        .expect("the next waiter is answered")
        .unwrap()
        .unwrap();
    let waited = cancelled_at.elapsed();
    assert!(
        waited < FALLBACK / 5,
        "the next waiter got its permit {waited:?} after the head left"
    );
    permits.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_acquire_leaves_no_permit_taken() {
    let mut server = RedisServer::start();
    let holder = client(&server).await;
    let waiter = client(&server).await;

    // Cancelled while queued: the release that follows goes to nobody.
    let semaphore = holder.semaphore("cancel").unwrap();
    semaphore.set_permits(1).await.unwrap();
    let held = semaphore.acquire(1).await.unwrap();
    let gets = server.command_calls("get").await;
    let theirs = waiter.semaphore("cancel").unwrap();
    let waiting =
        tokio::spawn(async move { theirs.acquire_timeout(1, Duration::from_secs(30)).await });
    wait_until_parked(&server, "redisson_sc:{cancel}", gets).await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    held.release().await.unwrap();
    eventually("the permit is back", Duration::from_secs(5), || {
        let semaphore = semaphore.clone();
        async move { semaphore.available_permits().await.unwrap() == 1 }
    })
    .await;
    let again = semaphore
        .try_acquire(1)
        .await
        .unwrap()
        .expect("the permit is free");
    again.release().await.unwrap();

    // Cancelled while its try is in flight: Redis (paused) holds the try until the caller
    // has left, then grants it; the grant is given back.
    let proxy = TcpProxy::start(server.port()).await;
    let late = LockClient::connect(ClientConfig::new(proxy.url()))
        .await
        .unwrap();
    let plain = late.semaphore("race").unwrap();
    let slots = late.expirable_semaphore("race-slots").unwrap();
    plain.set_permits(1).await.unwrap();
    slots.set_permits(1).await.unwrap();
    // Load the scripts first, so the try below is one request.
    plain
        .try_acquire(1)
        .await
        .unwrap()
        .expect("free")
        .release()
        .await
        .unwrap();
    slots
        .try_acquire(1)
        .await
        .unwrap()
        .expect("free")
        .release()
        .await
        .unwrap();
    for expirable in [false, true] {
        server.pause();
        let sent_before = proxy.bytes_up();
        let (plain, slots) = (plain.clone(), slots.clone());
        let acquiring = tokio::spawn(async move {
            if expirable {
                slots
                    .acquire_timeout(1, Duration::from_secs(30))
                    .await
                    .map(drop)
            } else {
                plain
                    .acquire_timeout(1, Duration::from_secs(30))
                    .await
                    .map(drop)
            }
        });
        eventually("the try reaches Redis", Duration::from_secs(5), || async {
            proxy.bytes_up() > sent_before
        })
        .await;
        acquiring.abort();
        assert!(acquiring.await.unwrap_err().is_cancelled());
        server.resume();
    }
    eventually(
        "every late grant is given back",
        Duration::from_secs(10),
        || {
            let (plain, slots) = (plain.clone(), slots.clone());
            async move {
                plain.available_permits().await.unwrap() == 1
                    && slots.available_permits().await.unwrap() == 1
            }
        },
    )
    .await;
    let mut keys = server.keys().await;
    keys.sort();
    assert_eq!(
        keys,
        vec!["cancel", "race", "race-slots"],
        "no lease was left behind"
    );
    drop((plain, slots, semaphore));
    wait_for_no_actors(&waiter).await;
    wait_for_no_actors(&late).await;
}

fn expect_invalid_config<T: std::fmt::Debug>(result: Result<T, LockError>, what: &str) -> String {
    match result {
        Err(LockError::InvalidConfig { reason }) => reason,
        other => panic!("{what}: expected InvalidConfig, got {other:?}"),
    }
}

fn expect_wrong_type<T: std::fmt::Debug>(result: Result<T, LockError>, name: &str, what: &str) {
    match result {
        Err(LockError::WrongType { name: ref n }) => assert_eq!(n, name, "{what}"),
        other => panic!("{what}: expected WrongType, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_input_is_refused_with_clear_errors() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let semaphore = client.semaphore("bad").unwrap();
    let slots = client.expirable_semaphore("bad-slots").unwrap();

    let reason = expect_invalid_config(semaphore.acquire(0).await, "acquire(0)");
    assert!(
        reason.contains("bad") && reason.contains("at least 1"),
        "{reason}"
    );
    expect_invalid_config(semaphore.try_acquire(0).await, "try_acquire(0)");
    expect_invalid_config(semaphore.release(0).await, "release(0)");
    expect_invalid_config(semaphore.try_set_permits(0).await, "try_set_permits(0)");
    expect_invalid_config(
        semaphore.add_permits(i64::MAX).await,
        "add_permits(i64::MAX)",
    );
    expect_invalid_config(
        slots.acquire_with(PermitOptions::new().permits(0)).await,
        "expirable permits(0)",
    );
    let reason = expect_invalid_config(
        slots
            .acquire_with(PermitOptions::new().lease(Duration::ZERO))
            .await,
        "zero lease",
    );
    assert!(reason.contains("lease"), "{reason}");
    expect_invalid_config(
        slots
            .acquire_with(PermitOptions::new().lease(Duration::from_micros(300)))
            .await,
        "sub-millisecond lease",
    );
    assert!(matches!(
        client.semaphore(""),
        Err(LockError::InvalidName { .. })
    ));
    assert!(matches!(
        client.expirable_semaphore("a\nb"),
        Err(LockError::InvalidName { .. })
    ));
    // A message for the other kind says which one to send.
    let plain_actor = semaphore.actor().unwrap();
    let reason = expect_invalid_config(
        plain_actor
            .send(AcquireExpirablePermits {
                permits: 1,
                wait: Duration::ZERO,
                lease: None,
            })
            .await
            .unwrap(),
        "expirable acquire to a plain semaphore",
    );
    assert!(reason.contains("AcquirePermits"), "{reason}");
    let slots_actor = slots.actor().unwrap();
    expect_invalid_config(
        slots_actor
            .send(AcquirePermits {
                permits: 1,
                wait: Duration::ZERO,
            })
            .await
            .unwrap(),
        "plain acquire to an expirable semaphore",
    );
    expect_invalid_config(
        slots_actor
            .send(ReleasePermits { permits: 1 })
            .await
            .unwrap(),
        "anonymous release to an expirable semaphore",
    );
    // Unknown and malformed permit ids are not ours to release.
    slots.set_permits(1).await.unwrap();
    for id in ["00112233445566778899aabbccddeeff", "not hex", ""] {
        let refused = slots_actor
            .send(ReleasePermit {
                permit_id: id.into(),
            })
            .await
            .unwrap();
        assert!(
            matches!(refused, Err(LockError::NotOwner { .. })),
            "{id}: {refused:?}"
        );
    }
    assert_eq!(
        slots.available_permits().await.unwrap(),
        1,
        "refused releases add nothing"
    );
    // Releasing twice: the second is refused and adds nothing.
    let guard = slots.acquire(1).await.unwrap();
    let id = guard.permit_id().to_string();
    slots.release(&id).await.unwrap();
    assert!(
        !guard.is_lost(),
        "released by id: its guard stops renewing, nothing was lost"
    );
    assert!(matches!(
        slots.release(&id).await,
        Err(LockError::NotOwner { .. })
    ));
    assert!(matches!(
        guard.release().await,
        Err(LockError::NotOwner { .. })
    ));
    assert_eq!(slots.available_permits().await.unwrap(), 1);

    // Keys holding other data are refused and left untouched.
    let mut conn = server.conn().await;
    let _: () = conn.rpush("listed", &["a", "b"]).await.unwrap();
    let _: () = conn.set("worded", "hello").await.unwrap();
    let _: () = conn.set("{tagged}:timeout", "not a zset").await.unwrap();
    for name in ["listed", "worded"] {
        let plain = client.semaphore(name).unwrap();
        expect_wrong_type(
            plain.acquire_timeout(1, Duration::from_secs(5)).await,
            name,
            "acquire",
        );
        expect_wrong_type(plain.try_acquire(1).await, name, "try_acquire");
        expect_wrong_type(plain.release(1).await, name, "release");
        expect_wrong_type(plain.available_permits().await, name, "available");
        expect_wrong_type(plain.set_permits(1).await, name, "set");
        expect_wrong_type(plain.try_set_permits(1).await, name, "try_set");
        expect_wrong_type(plain.add_permits(1).await, name, "add");
        let expirable = client.expirable_semaphore(name).unwrap();
        expect_wrong_type(expirable.acquire(1).await, name, "expirable acquire");
        expect_wrong_type(
            expirable.available_permits().await,
            name,
            "expirable available",
        );
    }
    let _: () = conn.set("tagged", 1).await.unwrap();
    let tagged = client.expirable_semaphore("tagged").unwrap();
    expect_wrong_type(
        tagged.acquire(1).await,
        "tagged",
        "a timeout key that is no zset",
    );
    expect_wrong_type(
        tagged.set_permits(3).await,
        "tagged",
        "set with a bad timeout key",
    );
    let list: Vec<String> = conn.lrange("listed", 0, -1).await.unwrap();
    assert_eq!(list, vec!["a", "b"]);
    let word: String = conn.get("worded").await.unwrap();
    assert_eq!(word, "hello");
    let count: i64 = conn.get("tagged").await.unwrap();
    assert_eq!(count, 1);
    let timeouts: String = conn.get("{tagged}:timeout").await.unwrap();
    assert_eq!(timeouts, "not a zset");
}

#[tokio::test]
async fn names_with_braces_keep_their_own_hash_tag() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let slots = client.expirable_semaphore("{tenant-7}:exports").unwrap();
    slots.set_permits(2).await.unwrap();
    let guard = slots.acquire(1).await.unwrap();
    let mut keys = server.keys().await;
    keys.sort();
    assert_eq!(
        keys,
        vec!["{tenant-7}:exports", "{tenant-7}:exports:timeout"]
    );
    guard.release().await.unwrap();
    assert_eq!(server.keys().await, vec!["{tenant-7}:exports"]);
}

#[test]
fn public_semaphore_types_keep_their_bounds() {
    fn send_sync_static<T: Send + Sync + 'static>() {}
    fn send_static<T: Send + 'static>() {}
    send_sync_static::<actix_distributed_lock::Semaphore>();
    send_sync_static::<actix_distributed_lock::PermitExpirableSemaphore>();
    send_sync_static::<actix_distributed_lock::PermitGuard>();
    send_sync_static::<actix_distributed_lock::SemaphoreGuard>();
    send_static::<actix::Addr<actix_distributed_lock::SemaphoreActor>>();
}

/// The permit count of plain semaphore `name`, read straight from Redis.
async fn count_of(server: &RedisServer, name: &str) -> Option<i64> {
    let mut conn = server.conn().await;
    conn.get(name).await.unwrap()
}

/// A client on `server` behind a proxy that can hold replies back, with short timeouts.
async fn behind_proxy(server: &RedisServer) -> (TcpProxy, LockClient) {
    let proxy = TcpProxy::start(server.port()).await;
    let client = support::client_at(&proxy.url(), |c| {
        c.response_timeout(Duration::from_millis(500))
            .connect_timeout(Duration::from_millis(500))
    })
    .await;
    (proxy, client)
}

/// Loses the reply of the acquire `acquiring` sends through `proxy` (which holds replies
/// back): once `ran` says it ran in Redis, the connection is cut. Returns how the acquire
/// ended (granted by a later try, or unavailable).
async fn lose_the_reply<T: std::fmt::Debug, F, Fut>(
    proxy: &TcpProxy,
    acquiring: tokio::task::JoinHandle<Result<T, LockError>>,
    ran: F,
) -> Result<T, LockError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    eventually("the acquire ran in Redis", Duration::from_secs(10), ran).await;
    proxy.cut();
    proxy.hold_replies(false);
    let acquired = timeout(Duration::from_secs(30), acquiring)
        .await
        .expect("the acquire ends within its wait")
        .unwrap();
    assert!(
        matches!(acquired, Ok(_) | Err(LockError::Unavailable { .. })),
        "{acquired:?}"
    );
    acquired
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_acquire_whose_reply_is_lost_is_settled_and_the_count_stays_exact() {
    const PERMITS: i64 = 3;
    let server = RedisServer::start();
    let (proxy, client) = behind_proxy(&server).await;
    let semaphore = client.semaphore("settled").unwrap();
    semaphore.set_permits(PERMITS as u32).await.unwrap();
    // Once first, so the server has the scripts (a NOSCRIPT reply would be held too).
    semaphore.acquire(1).await.unwrap().release().await.unwrap();

    // The acquire runs in Redis, its reply is held back past the response timeout, then
    // the connection is cut: the reply is lost.
    proxy.hold_replies(true);
    let taking = semaphore.clone();
    let acquiring =
        tokio::spawn(async move { taking.acquire_timeout(1, Duration::from_secs(10)).await });
    let acquired = lose_the_reply(&proxy, acquiring, || async {
        count_of(&server, "settled").await == Some(PERMITS - 1)
    })
    .await;

    // Redis counts exactly the permits a guard holds: the lost acquire's are back.
    let held = acquired
        .as_ref()
        .map_or(0, |guard| i64::from(guard.permits()));
    eventually(
        "the lost acquire is settled",
        Duration::from_secs(10),
        || async { count_of(&server, "settled").await == Some(PERMITS - held) },
    )
    .await;
    drop(acquired);
    eventually("every permit is back", Duration::from_secs(10), || async {
        count_of(&server, "settled").await == Some(PERMITS)
    })
    .await;
    assert_eq!(semaphore.available_permits().await.unwrap(), PERMITS);
    // A settlement that found nothing taken leaves a marker that refuses a late copy of the
    // acquire until it expires; nothing else is left.
    let mut conn = server.conn().await;
    for key in server.keys().await {
        if key == "settled" {
            continue;
        }
        assert!(
            key.starts_with("{settled}:semaphore_acquire:"),
            "left behind: {key}"
        );
        let value: String = conn.get(&key).await.unwrap();
        assert_eq!(value, "settled", "{key} still counts as taken");
        let ttl: i64 = conn.pttl(&key).await.unwrap();
        assert!(ttl > 0, "{key} never expires");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_expirable_acquire_whose_reply_is_lost_is_settled_by_id_and_marked() {
    const PERMITS: i64 = 2;
    let server = RedisServer::start();
    let (proxy, client) = behind_proxy(&server).await;
    let semaphore = client.expirable_semaphore("marked").unwrap();
    semaphore.set_permits(PERMITS as u32).await.unwrap();
    // Once first, so the server has the scripts (a NOSCRIPT reply would be held too).
    semaphore.acquire(1).await.unwrap().release().await.unwrap();

    // The acquire runs in Redis, its reply is held back past the response timeout, then
    // the connection is cut: the reply is lost.
    proxy.hold_replies(true);
    let taking = semaphore.clone();
    let acquiring = tokio::spawn(async move {
        let options = PermitOptions::new()
            .wait(Duration::from_secs(10))
            .lease(Duration::from_secs(60));
        taking.acquire_with(options).await
    });
    let held_in_redis = || async {
        let mut conn = server.conn().await;
        let out: i64 = conn.zcard("{marked}:timeout").await.unwrap();
        out
    };
    let acquired = lose_the_reply(&proxy, acquiring, || async { held_in_redis().await == 1 }).await;
    // Redis holds exactly the permits a guard holds: the lost acquire's id went back.
    let held = acquired.as_ref().map_or(0, |guard| guard.permits() as i64);
    eventually(
        "the lost acquire is settled",
        Duration::from_secs(10),
        || async { held_in_redis().await == held },
    )
    .await;
    drop(acquired);
    eventually("every permit is back", Duration::from_secs(10), || async {
        held_in_redis().await == 0 && count_of(&server, "marked").await == Some(PERMITS)
    })
    .await;
    // The settlement left a marker that refuses a late copy of the acquire until it
    // expires; nothing else is left but the semaphore's own keys.
    let mut conn = server.conn().await;
    let mut markers = 0;
    for key in server.keys().await {
        if key == "marked" || key == "{marked}:timeout" {
            continue;
        }
        assert!(
            key.starts_with("{marked}:semaphore_acquire:"),
            "left behind: {key}"
        );
        let value: String = conn.get(&key).await.unwrap();
        assert_eq!(value, "settled");
        let ttl: i64 = conn.pttl(&key).await.unwrap();
        assert!(ttl > 0, "{key} never expires");
        markers += 1;
    }
    assert!(
        markers >= 1,
        "the lost acquire was not settled with a marker"
    );
}

/// A semaphore whose permits were never set: a bounded wait ends naming the cause and the
/// call that fixes it (not "held by another owner"), for both kinds; once set, it works.
#[tokio::test]
async fn a_semaphore_never_set_says_so_and_names_try_set_permits() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let plain = client.semaphore("unset-plain").unwrap();
    let error = plain
        .acquire_timeout(1, Duration::from_millis(300))
        .await
        .expect_err("no permits were ever set");
    assert!(
        matches!(&error, LockError::NoPermitsSet { name, .. } if name == "unset-plain"),
        "{error:?}"
    );
    assert!(error.to_string().contains("try_set_permits"), "{error}");
    assert!(!error.is_timeout());

    let expirable = client.expirable_semaphore("unset-expirable").unwrap();
    let options = PermitOptions::new().wait(Duration::from_millis(300));
    let error = expirable
        .acquire_with(options)
        .await
        .expect_err("no permits were ever set");
    assert!(
        matches!(&error, LockError::NoPermitsSet { name, .. } if name == "unset-expirable"),
        "{error:?}"
    );
    // Nothing was written by the failed waits.
    assert!(server.keys().await.is_empty(), "{:?}", server.keys().await);

    // Set, then taken; a set semaphore with no permit free is a plain timeout.
    assert!(plain.try_set_permits(1).await.unwrap());
    let held = plain.acquire(1).await.unwrap();
    let busy = plain
        .acquire_timeout(1, Duration::from_millis(300))
        .await
        .expect_err("the one permit is held");
    assert!(busy.is_timeout(), "{busy:?}");
    held.release().await.unwrap();
    assert!(expirable.try_set_permits(1).await.unwrap());
    expirable
        .acquire_with(options)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}
