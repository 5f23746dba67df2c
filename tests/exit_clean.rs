//! A process that closes its client before it exits leaves nothing behind in Redis.
//!
//! The processes are the `exit_after` example: it connects, does one thing (drops a guard
//! of some kind, drops permits, times out or gives up on a busy fair lock), calls
//! `LockClient::close` and returns from `main`. Each test runs it and then looks at Redis:
//! the state is checked exactly, the moment the process has exited. The tests at the end
//! pin what `close` does inside one process: it refuses later calls, fails waiters, leaves
//! live guards' holds alone and can be called again.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{AcquireOptions, LockError, Released};
use redis::AsyncCommands;
use std::process::Stdio;
use std::time::Duration;
use support::java_peer::{JavaPeer, PeerOptions, Redisson, Target, PROMPT};
use support::{client, eventually, RedisServer};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// Bound for the process to start, connect, do its step, close and exit (its own wait
/// aside): generous, the machine may be loaded.
const RUN_BOUND: Duration = Duration::from_secs(30);

/// What the process printed, once it has exited with success.
async fn exit_after(server: &RedisServer, name: &str, step: &[&str]) -> Vec<String> {
    let mut child = Command::new(support::exit_after_binary())
        .arg(server.url())
        .arg(name)
        .args(step)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn exit_after");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut printed = Vec::new();
    let reading = async {
        while let Some(line) = lines.next_line().await.expect("read stdout") {
            printed.push(line);
        }
        child.wait().await.expect("wait for exit_after")
    };
    let status = tokio::time::timeout(RUN_BOUND, reading)
        .await
        .unwrap_or_else(|_| panic!("exit_after {step:?} did not exit within {RUN_BOUND:?}"));
    assert!(status.success(), "exit_after {step:?} failed: {status}");
    printed
}

/// The uuid the process's client printed (`client <id>`).
fn client_id(printed: &[String]) -> &str {
    printed
        .first()
        .and_then(|line| line.strip_prefix("client "))
        .unwrap_or_else(|| panic!("no `client <id>` line in {printed:?}"))
}

/// Keys left in Redis, without fencing counters (which must outlive every hold).
async fn keys_left(server: &RedisServer) -> Vec<String> {
    let mut keys: Vec<String> = server
        .keys()
        .await
        .into_iter()
        .filter(|key| !key.starts_with("redisson_lock_token:"))
        .collect();
    keys.sort();
    keys
}

/// Runs of each scenario: whether a release in the background made it out before the
/// process ended, without `close`, is a matter of timing (it often does not).
const ROUNDS: usize = 3;

async fn drop_then_close(kind: &str) {
    let server = RedisServer::start();
    let name = format!("exit:{kind}");
    for round in 1..=ROUNDS {
        let printed = exit_after(&server, &name, &["drop", kind]).await;
        assert_eq!(printed[1..], ["dropped", "closed"]);
        assert_eq!(
            keys_left(&server).await,
            Vec::<String>::new(),
            "run {round}: a {kind} guard dropped before close is released by the time the \
             process exits"
        );
    }
}

macro_rules! drop_then_close {
    ($($test:ident: $kind:literal;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            drop_then_close($kind).await;
        }
    )*};
}

drop_then_close! {
    a_dropped_reentrant_guard_is_released_before_exit: "reentrant";
    a_dropped_fenced_guard_is_released_before_exit: "fenced";
    a_dropped_fast_guard_is_released_before_exit: "fast";
    a_dropped_read_guard_is_released_before_exit: "read";
    a_dropped_write_guard_is_released_before_exit: "write";
    a_dropped_fair_guard_is_released_before_exit: "fair";
}

/// An `unlock()` started and dropped unfinished (a task aborted mid-release, as a worker's
/// tasks are at an exit), then `close()`: the release goes through, and `close` waits for it.
async fn abandoned_unlock_then_close(kind: &str) {
    let server = RedisServer::start();
    let name = format!("exit:abandon:{kind}");
    for polls in ["0", "1"] {
        let printed = exit_after(&server, &name, &["abandon-unlock", kind, polls]).await;
        // Polled once, it may be done already when this machine is loaded.
        let done_at_once = polls != "0" && printed[1] == "finished";
        assert!(printed[1] == "abandoned" || done_at_once, "{printed:?}");
        assert_eq!(printed[2..], ["closed"]);
        assert_eq!(
            keys_left(&server).await,
            Vec::<String>::new(),
            "a {kind} unlock polled {polls} times and dropped before close left the lock"
        );
    }
}

macro_rules! abandoned_unlock_then_close {
    ($($test:ident: $kind:literal;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            abandoned_unlock_then_close($kind).await;
        }
    )*};
}

abandoned_unlock_then_close! {
    an_abandoned_reentrant_unlock_completes_before_exit: "reentrant";
    an_abandoned_fenced_unlock_completes_before_exit: "fenced";
    an_abandoned_fast_unlock_completes_before_exit: "fast";
    an_abandoned_read_unlock_completes_before_exit: "read";
    an_abandoned_write_unlock_completes_before_exit: "write";
    an_abandoned_fair_unlock_completes_before_exit: "fair";
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_plain_permits_come_back_exactly_before_exit() {
    let server = RedisServer::start();
    let observer = client(&server).await;
    let semaphore = observer.semaphore("exit:permits").unwrap();
    assert!(semaphore.try_set_permits(2).await.unwrap());
    for run in 1..=3 {
        let printed = exit_after(&server, "exit:permits", &["drop-permits"]).await;
        assert_eq!(printed[1..], ["dropped", "closed"]);
        assert_eq!(
            semaphore.available_permits().await.unwrap(),
            2,
            "after run {run} every permit is back"
        );
    }
    observer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_expirable_permits_are_released_before_exit() {
    let server = RedisServer::start();
    let observer = client(&server).await;
    let slots = observer.expirable_semaphore("exit:slots").unwrap();
    assert!(slots.try_set_permits(2).await.unwrap());
    let printed = exit_after(&server, "exit:slots", &["drop-expirable"]).await;
    assert_eq!(printed[1..], ["dropped", "closed"]);
    let mut conn = server.conn().await;
    let leased: i64 = conn.zcard("{exit:slots}:timeout").await.unwrap();
    assert_eq!(leased, 0, "no permit lease is left");
    assert_eq!(slots.available_permits().await.unwrap(), 2);
    observer.close().await;
}

fn fair_queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

fn fair_timeout_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

/// The fair lock's queue and the deadlines of its waiters, as Redis has them.
async fn fair_queue(server: &RedisServer, name: &str) -> (Vec<String>, Vec<String>) {
    let mut conn = server.conn().await;
    let queue: Vec<String> = conn.lrange(fair_queue_key(name), 0, -1).await.unwrap();
    let deadlines: Vec<String> = conn.zrange(fair_timeout_key(name), 0, -1).await.unwrap();
    (queue, deadlines)
}

/// A fair waiter that gives up (`step`: times out, or drops its acquire) and exits at once
/// leaves no entry in the queue. Ten runs: without `close`, a timed-out waiter's withdraw
/// got out before the exit in about half the runs.
async fn fair_waiter_leaves_no_ghost(step: &[&str], said: &str) {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let name = "exit:fair-queue";
    let held = holder.fair_lock(name).unwrap().acquire().await.unwrap();
    for round in 1..=10 {
        let printed = exit_after(&server, name, step).await;
        assert_eq!(printed[1..], [said, "closed"]);
        assert_eq!(
            fair_queue(&server, name).await,
            (Vec::new(), Vec::new()),
            "run {round}: the waiter of client {} left the queue before its process exited",
            client_id(&printed)
        );
    }
    assert_eq!(held.unlock().await.unwrap(), Released::Unlocked);
    assert_eq!(keys_left(&server).await, Vec::<String>::new());
    holder.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_waiter_that_times_out_leaves_the_queue_before_exit() {
    fair_waiter_leaves_no_ghost(&["timeout-fair", "200"], "timed out").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_waiter_given_up_leaves_the_queue_before_exit() {
    fair_waiter_leaves_no_ghost(&["cancel-fair", "200"], "gave up").await;
}

/// Runs `exit_after <step>` on fair lock `name` as a process; resolves to whether it
/// exited with success within its wait and [`RUN_BOUND`].
fn fair_process(
    server: &RedisServer,
    name: &str,
    step: [&str; 2],
) -> tokio::task::JoinHandle<bool> {
    let mut child = Command::new(support::exit_after_binary())
        .arg(server.url())
        .arg(name)
        .args(step)
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn exit_after");
    tokio::spawn(async move {
        let status = tokio::time::timeout(RUN_BOUND, child.wait()).await;
        matches!(status, Ok(Ok(status)) if status.success())
    })
}

/// A Redisson fair waiter queued behind two Rust waiters whose processes time out and give
/// up, and exit, is granted at the holder's unlock, not when a gone waiter's deadline (5
/// minutes at the defaults) passes.
async fn redisson_waiter_behind_exited_ones(version: Redisson) {
    // Built (if need be) before the queue forms, not while the waiters must queue.
    let _ = support::exit_after_binary();
    let server = RedisServer::start();
    let holder = client(&server).await;
    let mut peer =
        JavaPeer::start(version, Target::Single(&server.url()), PeerOptions::new()).await;
    let java = peer.owner("j").await;
    let name = "exit:fair-java";
    let held = holder.fair_lock(name).unwrap().acquire().await.unwrap();

    // The Rust waiters queue first; their waits leave time for Java to queue behind them.
    let timing_out = fair_process(&server, name, ["timeout-fair", "6000"]);
    eventually("the first Rust process queues", PROMPT, || async {
        fair_queue(&server, name).await.0.len() == 1
    })
    .await;
    let giving_up = fair_process(&server, name, ["cancel-fair", "6000"]);
    eventually("the second Rust process queues", PROMPT, || async {
        fair_queue(&server, name).await.0.len() == 2
    })
    .await;
    let rust = fair_queue(&server, name).await.0;
    peer.send("j", &format!("lock fair {name}")).await;
    eventually("the Java waiter queues behind them", PROMPT, || async {
        fair_queue(&server, name).await.0 == [&rust[..], std::slice::from_ref(&java)].concat()
    })
    .await;
    assert!(timing_out.await.unwrap(), "exit_after timed out and exited");
    assert!(giving_up.await.unwrap(), "exit_after gave up and exited");
    assert_eq!(
        fair_queue(&server, name).await.0,
        std::slice::from_ref(&java),
        "the exited waiters left the queue"
    );

    assert_eq!(held.unlock().await.unwrap(), Released::Unlocked);
    let reply = peer.try_reply_within("j", PROMPT).await;
    assert_eq!(
        reply.as_deref(),
        Some("locked"),
        "the Java waiter is granted at the unlock; the peer said:\n{}",
        peer.transcript()
    );
    peer.expect("j", &format!("unlock fair {name}"), "unlocked")
        .await;
    holder.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_waiter_behind_exited_rust_waiters_is_granted_at_unlock_newest() {
    redisson_waiter_behind_exited_ones(Redisson::Newest).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_waiter_behind_exited_rust_waiters_is_granted_at_unlock_legacy() {
    redisson_waiter_behind_exited_ones(Redisson::Legacy).await;
}

// ---------------------------------------------------------------------------------------
// close() inside one process
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_close_every_clone_is_refused_and_closing_again_returns() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let clone = client.clone();
    let lock = client.lock("exit:refused").unwrap();
    // The handle's cached fast path is warm: it must refuse too.
    lock.acquire().await.unwrap().unlock().await.unwrap();
    clone.close().await;
    assert!(matches!(lock.acquire().await, Err(LockError::Shutdown)));
    assert!(client.lock("exit:other").is_ok(), "a handle is only a name");
    assert!(matches!(
        client.lock("exit:other").unwrap().try_acquire().await,
        Err(LockError::Shutdown)
    ));
    assert!(matches!(
        client.semaphore("exit:sem").unwrap().acquire(1).await,
        Err(LockError::Shutdown)
    ));
    tokio::time::timeout(Duration::from_secs(5), client.close())
        .await
        .expect("closing again returns");
    client.shutdown();
    tokio::time::timeout(Duration::from_secs(5), clone.close())
        .await
        .expect("closing after a shutdown returns");
    assert_eq!(keys_left(&server).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_leaves_a_live_guards_hold_alone() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "exit:live";
    let guard = client.lock(name).unwrap().acquire().await.unwrap();
    client.close().await;
    let mut conn = server.conn().await;
    let pttl: i64 = conn.pttl(name).await.unwrap();
    assert!(
        pttl > 0,
        "the live guard's hold is still in Redis (PTTL {pttl})"
    );
    assert!(matches!(guard.unlock().await, Err(LockError::Shutdown)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_fails_waiting_acquires_and_takes_a_fair_waiter_out_of_the_queue() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let client = client(&server).await;
    let name = "exit:waiting";
    let held = holder.fair_lock(name).unwrap().acquire().await.unwrap();
    let lock = client.fair_lock(name).unwrap();
    let waiting = tokio::spawn(async move { lock.acquire_timeout(Duration::from_secs(60)).await });
    eventually("the waiter queues", PROMPT, || async {
        fair_queue(&server, name).await.0.len() == 1
    })
    .await;
    tokio::time::timeout(Duration::from_secs(10), client.close())
        .await
        .expect("close returns within the response timeout");
    assert_eq!(fair_queue(&server, name).await, (Vec::new(), Vec::new()));
    let answer = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiter is answered")
        .unwrap();
    assert!(matches!(answer, Err(LockError::Shutdown)), "{answer:?}");
    assert_eq!(held.unlock().await.unwrap(), Released::Unlocked);
    holder.close().await;
}

/// The last clone of a client dropped while a guard lives is a shutdown, whatever the
/// kind and the timing: the guard's unlock says `Shutdown` (and sends nothing), every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_clone_while_a_guard_lives_is_always_a_shutdown() {
    let server = RedisServer::start();
    let kinds = [
        "reentrant",
        "fenced",
        "fast",
        "fair",
        "read",
        "write",
        "fixed",
    ];
    for round in 0..10 {
        for kind in kinds {
            let client = client(&server).await;
            let name = format!("exit:last-clone:{kind}:{round}");
            let lock = match kind {
                "fenced" => client.fenced_lock(&name),
                "fast" => client.fast_lock(&name),
                "fair" => client.fair_lock(&name),
                "read" => client.read_write_lock(&name).map(|rw| rw.read().clone()),
                "write" => client.read_write_lock(&name).map(|rw| rw.write().clone()),
                _ => client.lock(&name),
            }
            .unwrap();
            let options = match kind {
                "fixed" => AcquireOptions::new().lease(Duration::from_secs(30)),
                _ => AcquireOptions::new(),
            };
            let guard = lock.acquire_with(options).await.unwrap();
            drop((lock, client));
            let unlocked = guard.unlock().await;
            assert!(
                matches!(unlocked, Err(LockError::Shutdown)),
                "{kind}, round {round}: {unlocked:?}"
            );
        }
    }
}
