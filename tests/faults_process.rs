//! Fault tolerance against a holder in another process : the holder
//! is killed with SIGKILL, or frozen with SIGSTOP (a simulated GC pause) and resumed.
//!
//! The holder is the `lock_holder` example, run as a child process: it prints
//! `acquired <client-id> <owner-id>`, prints `lost` when its `lost()` fires, and answers a
//! stdin line `unlock` with `unlock <result>`.
//!
//! Not covered yet: a fenced holder whose write a token-checking store rejects after the
//! pause (fenced locks do not exist yet).

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{AcquireOptions, LockError, Released};
use redis::AsyncCommands;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use support::client;
use support::holder::{Holder, REPLY};
use support::RedisServer;

async fn fields(
    conn: &mut redis::aio::MultiplexedConnection,
    name: &str,
) -> HashMap<String, String> {
    conn.hgetall(name).await.expect("HGETALL")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holder_killed_frees_the_lock_within_the_watchdog_timeout() {
    let server = RedisServer::start();
    let watchdog = Duration::from_secs(1);
    let mut holder = Holder::start(&server, "killed", &["--watchdog-ms", "1000"]).await;
    let mut conn = server.conn().await;
    assert_eq!(
        fields(&mut conn, "killed").await,
        HashMap::from([(holder.field.clone(), "1".to_string())]),
        "the child holds the lock"
    );
    let other = client(&server).await;
    let lock = other.lock("killed").unwrap();

    let killed_at = Instant::now();
    holder.kill_and_reap();
    let guard = lock
        .acquire_timeout(Duration::from_secs(10))
        .await
        .expect("another client takes the lock of the killed holder");
    let took = killed_at.elapsed();
    assert!(
        took < watchdog + Duration::from_secs(1),
        "acquired {took:?} after the kill; the watchdog timeout is {watchdog:?}"
    );
    let mine = format!("{}:{}", other.id(), guard.owner().id());
    assert_eq!(
        fields(&mut conn, "killed").await,
        HashMap::from([(mine, "1".to_string())]),
        "held by the new owner alone"
    );
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_holder_loses_the_lock_and_cannot_unlock_the_new_holders() {
    const NAME: &str = "paused";
    const LEASE_MS: i64 = 10_000;
    /// Rounding between Redis' millisecond clock and ours.
    const SLACK_MS: i64 = 20;
    let server = RedisServer::start();
    let mut holder = Holder::start(&server, NAME, &["--watchdog-ms", "1000"]).await;
    let other = client(&server).await;
    let lock = other.lock(NAME).unwrap();

    // The pause: 2.5 s, well past the child's 1 s lease.
    let paused_at = Instant::now();
    holder.signal(libc::SIGSTOP);
    let acquire_started = Instant::now();
    let options = AcquireOptions::new()
        .wait(Duration::from_secs(5))
        .lease(Duration::from_millis(LEASE_MS as u64));
    let guard = lock
        .acquire_with(options)
        .await
        .expect("another client takes the lock while its holder is frozen");
    let acquired_at = Instant::now();
    let mine = format!("{}:{}", other.id(), guard.owner().id());
    tokio::time::sleep_until((paused_at + Duration::from_millis(2500)).into()).await;

    // From the resume on, watch the new holder's lease for a few of the child's renew
    // intervals (333 ms): a renewal by the child would set it back to 1 s or up.
    let mut conn = server.conn().await;
    holder.signal(libc::SIGCONT);
    let resumed_at = Instant::now();
    let sampler = tokio::spawn(async move {
        let mut samples = Vec::new();
        while resumed_at.elapsed() < Duration::from_millis(1500) {
            let before = Instant::now();
            let pttl: i64 = conn.pttl(NAME).await.expect("PTTL");
            samples.push((before, Instant::now(), pttl));
            // The sampling period, not a wait for anything.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        samples
    });

    let line = holder.expect_line(REPLY, "`lost`").await;
    let heard = resumed_at.elapsed();
    assert_eq!(line, "lost");
    assert!(
        heard < Duration::from_secs(2),
        "`lost` came {heard:?} after the resume"
    );

    holder.send("unlock");
    let line = holder.expect_line(REPLY, "the unlock's result").await;
    assert!(
        line.starts_with("unlock Err(NotOwner"),
        "the frozen holder's unlock must be refused, got `{line}`"
    );
    assert!(holder.exited(REPLY).await, "lock_holder exits after unlock");

    let samples = sampler.await.unwrap();
    assert!(samples.len() >= 10, "only {} PTTL samples", samples.len());
    // Redis set the new lease between `acquire_started` and `acquired_at`; from then on
    // its PTTL only falls, one ms per ms. A renewal by the child would lift it above the
    // ceiling, or cut it to the child's 1 s lease, below the floor.
    let mut previous = LEASE_MS;
    for (before, after, pttl) in &samples {
        let ceiling = LEASE_MS - before.duration_since(acquired_at).as_millis() as i64 + SLACK_MS;
        let floor = LEASE_MS - after.duration_since(acquire_started).as_millis() as i64 - SLACK_MS;
        assert!(
            (floor..=ceiling).contains(pttl) && *pttl <= previous,
            "the new holder's lease changed: pttl {pttl} ms, expected {floor}..={ceiling} and \
             at most the previous {previous}; samples (ms since resume, pttl): {:?}",
            samples
                .iter()
                .map(|(at, _, pttl)| (at.duration_since(resumed_at).as_millis(), *pttl))
                .collect::<Vec<_>>()
        );
        previous = *pttl;
    }

    let mut conn = server.conn().await;
    assert_eq!(
        fields(&mut conn, NAME).await,
        HashMap::from([(mine, "1".to_string())]),
        "the new holder's key is intact"
    );
    let pttl: i64 = conn.pttl(NAME).await.unwrap();
    assert!(pttl > 0 && pttl <= LEASE_MS, "pttl {pttl}");
    assert_eq!(guard.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(server.keys().await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_that_resumes_within_its_lease_keeps_the_lock() {
    const NAME: &str = "short-pause";
    let server = RedisServer::start();
    let mut holder = Holder::start(&server, NAME, &["--watchdog-ms", "2000"]).await;
    let other = client(&server).await;
    let lock = other.lock(NAME).unwrap();

    holder.signal(libc::SIGSTOP);
    // The pause itself: 0.4 s, a fifth of the lease.
    tokio::time::sleep(Duration::from_millis(400)).await;
    holder.signal(libc::SIGCONT);

    match holder.next_line(Duration::from_secs(1)).await {
        Err(_) => {} // silence: nothing was lost
        Ok(line) => panic!("expected no output after a short pause, got {line:?}"),
    }
    let taken = lock.try_acquire().await.expect("try_acquire");
    assert!(taken.is_none(), "the lock was free after a short pause");
    let mut conn = server.conn().await;
    assert_eq!(
        fields(&mut conn, NAME).await,
        HashMap::from([(holder.field.clone(), "1".to_string())]),
        "still the child's lock"
    );

    holder.send("unlock");
    let line = holder.expect_line(REPLY, "the unlock's result").await;
    assert_eq!(line, "unlock Ok(Unlocked)");
    assert!(holder.exited(REPLY).await, "lock_holder exits after unlock");
    assert_eq!(server.keys().await, Vec::<String>::new());
}

/// The error type the frozen holder's unlock reports, spelled as the child prints it.
#[test]
fn not_owner_prints_as_the_tests_expect() {
    let error: Result<Released, LockError> = Err(LockError::NotOwner { name: "x".into() });
    assert!(format!("unlock {error:?}").starts_with("unlock Err(NotOwner"));
    let ok: Result<Released, LockError> = Ok(Released::Unlocked);
    assert_eq!(format!("unlock {ok:?}"), "unlock Ok(Unlocked)");
}
