//! A Sentinel-managed primary against real processes: 1 primary, 1 replica and
//! 3 sentinels. A failover while a lock is held and another client waits for it: the
//! waiter acquires on the new primary and does not hang.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{Deployment, LockClient};
use std::time::Duration;
use support::eventually;
use support::sentinel_client;
use support::topology::SentinelSetup;

/// Until a call through `locks` reaches a primary again (each failed call makes the client
/// ask the sentinels anew).
async fn until_reachable(locks: &LockClient) {
    eventually(
        "the client reaches the new primary",
        Duration::from_secs(20),
        || async { locks.lock("probe").unwrap().is_locked().await.is_ok() },
    )
    .await;
}

#[actix_rt::test]
async fn a_waiter_acquires_on_the_new_primary_after_a_failover() {
    let mut setup = SentinelSetup::start();
    let holder = sentinel_client(&setup, |c| {
        c.sync_replicas(1, Duration::from_secs(1))
            .watchdog_timeout(Duration::from_secs(9))
    })
    .await;
    assert!(matches!(
        holder.config().deployment(),
        Deployment::Sentinel { .. }
    ));
    let other = sentinel_client(&setup, |c| c).await;
    let guard = holder
        .lock("job:nightly")
        .unwrap()
        .acquire()
        .await
        .expect("acquire");
    let waiter = tokio::spawn(async move {
        let guard = other
            .lock("job:nightly")
            .unwrap()
            .acquire_timeout(Duration::from_secs(60))
            .await?;
        guard.unlock().await.map(|_| ())
    });
    // The waiter is parked once it listens on the lock's unlock channel.
    let primary = setup.primary_port();
    eventually(
        "the waiter subscribed",
        Duration::from_secs(10),
        || async move {
            let mut conn = redis::Client::open(format!("redis://127.0.0.1:{primary}/"))
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            let (_, n): (String, i64) = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg("redisson_lock__channel:{job:nightly}")
                .query_async(&mut conn)
                .await
                .unwrap();
            n >= 1
        },
    )
    .await;

    let old = setup.kill_primary();
    let new = setup
        .wait_for_failover_async(old, Duration::from_secs(40))
        .await;
    assert_ne!(old, new);

    // The replica confirmed the lock before acquire returned, so the new primary has it.
    let field = format!("{}:{}", holder.id(), guard.owner().id());
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{new}/"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let count: Option<u32> = redis::cmd("HGET")
        .arg("job:nightly")
        .arg(&field)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        count,
        Some(1),
        "the promoted replica does not have the lock"
    );

    until_reachable(&holder).await;
    assert!(!guard.is_lost());
    guard.unlock().await.expect("unlock on the new primary");
    tokio::time::timeout(Duration::from_secs(30), waiter)
        .await
        .expect("the waiter hung after the failover")
        .unwrap()
        .expect("the waiter acquired on the new primary");
    let left: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[actix_rt::test]
async fn a_client_follows_the_primary_and_refuses_unreplicated_grants() {
    let mut setup = SentinelSetup::start();
    let locks = sentinel_client(&setup, |c| c.sync_replicas(1, Duration::from_millis(300))).await;
    let guard = locks
        .lock("a")
        .unwrap()
        .acquire()
        .await
        .expect("replicated acquire");
    guard.unlock().await.unwrap();

    let old = setup.kill_primary();
    setup
        .wait_for_failover_async(old, Duration::from_secs(40))
        .await;
    until_reachable(&locks).await;
    // The new primary has no replica left (the old primary is dead): grants are refused
    // and given back.
    let result = locks.lock("b").unwrap().acquire().await;
    assert!(
        matches!(
            result,
            Err(actix_distributed_lock::LockError::NotReplicated { confirmed: 0, .. })
        ),
        "{result:?}"
    );
    eventually(
        "the refused grant is given back",
        Duration::from_secs(5),
        || async { !locks.lock("b").unwrap().is_locked().await.unwrap_or(true) },
    )
    .await;
}

/// The id of the primary's client connection whose last command was a script call (the
/// client's command connection; its subscription connection subscribes).
async fn command_connection(primary: u16) -> u64 {
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{primary}/"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut conn)
        .await
        .unwrap();
    let ids: Vec<u64> = list
        .lines()
        .filter(|line| line.split(' ').any(|field| field == "cmd=evalsha"))
        .filter_map(|line| line.strip_prefix("id=")?.split(' ').next()?.parse().ok())
        .collect();
    assert_eq!(ids.len(), 1, "one command connection: {list}");
    ids[0]
}

/// The local ends (`address:port`, as the kernel lists them) of this process's
/// established TCP connections to `port` (a paused server's kernel still accepts new
/// ones). Other processes' connections (the sentinels', the replica's) are left out.
fn connections_to(port: u16) -> std::collections::BTreeSet<String> {
    let ours: std::collections::BTreeSet<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().into_owned();
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_string(),
            )
        })
        .collect();
    let remote = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                .filter_map(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    let wanted = fields.len() > 9
                        && fields[2].ends_with(&remote)
                        && fields[3] == "01"
                        && ours.contains(fields[9]);
                    wanted.then(|| fields[1].to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A request that gets no answer makes the client ask the sentinels again. While they
/// still name the same primary, the client keeps its connection: the request may still be
/// on its way there, and a reconcile sent on a second connection could run before it (then
/// settle against a state the late request changes afterwards). On one connection the
/// server runs them in order.
#[actix_rt::test]
async fn a_request_without_answer_keeps_the_connection_while_the_primary_stays() {
    let mut setup = SentinelSetup::start();
    const RESPONSE: Duration = Duration::from_millis(200);
    let locks = sentinel_client(&setup, |c| c.response_timeout(RESPONSE)).await;
    let lock = locks.lock("order:1").unwrap();
    lock.acquire().await.unwrap().unlock().await.unwrap();
    let primary = setup.primary_port();
    let before = command_connection(primary).await;
    // The client's two connections (commands, subscriptions; the latter may still be
    // connecting) and nothing else of ours.
    eventually(
        "the client's connections are up",
        Duration::from_secs(10),
        || async { connections_to(primary).len() == 2 },
    )
    .await;

    let connected = connections_to(primary);
    let paused = setup.pause_primary();
    let sent = std::time::Instant::now();
    // The request times out unanswered; asking the sentinels again then connects to the
    // primary they name to check its role, which the paused primary's kernel accepts.
    let resume = async {
        eventually(
            "the client asks the sentinels again",
            Duration::from_secs(10),
            || async {
                sent.elapsed() > RESPONSE && !connections_to(primary).is_subset(&connected)
            },
        )
        .await;
        setup.resume(paused);
    };
    let (answer, ()) = tokio::join!(lock.is_locked(), resume);
    assert!(
        matches!(
            answer,
            Err(actix_distributed_lock::LockError::Unavailable { .. })
        ),
        "{answer:?}"
    );
    assert_eq!(setup.primary_port(), primary, "no failover happened");

    // The next calls go over the same connection.
    until_reachable(&locks).await;
    lock.acquire().await.unwrap().unlock().await.unwrap();
    assert_eq!(
        command_connection(primary).await,
        before,
        "the client moved to a second connection to the same primary"
    );
}
