//! Errors the Redis server answers with are reported as what they are, named by their
//! code, and not retried as if Redis were away: a missing ACL permission (`NOPERM`), a
//! full memory under `noeviction` (`OOM`), a read-only replica (`READONLY`). Each fails
//! fast, well inside the wait, and leaves nothing behind.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{ClientConfig, LockClient, LockError, RedLock};
use std::error::Error as _;
use std::time::{Duration, Instant};
use support::{eventually, RedisServer};

/// Every acquire below may wait this long: a server error must come back well before it.
const WAIT: Duration = Duration::from_secs(10);
/// What "at once" means under CI load.
const PROMPT: Duration = Duration::from_secs(3);

async fn admin(server: &RedisServer, args: &[&str]) {
    let mut conn = server.conn().await;
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    let _: redis::Value = cmd.query_async(&mut conn).await.unwrap();
}

fn client_config(url: String) -> ClientConfig {
    ClientConfig::new(url).default_wait(WAIT)
}

/// Checks `error` is the server's refusal with `code`, names `naming` in its text, keeps
/// the redis crate's error as its source, and is not transient.
#[track_caller]
fn assert_server_error(error: &LockError, code: &str, naming: &[&str]) {
    let LockError::Server {
        code: got, message, ..
    } = error
    else {
        panic!("expected LockError::Server with {code}, got {error:?}");
    };
    assert_eq!(got, code, "{error}");
    assert!(!message.is_empty(), "{error:?}");
    let text = error.to_string();
    for word in naming {
        assert!(text.contains(word), "the message names `{word}`: {text}");
    }
    assert!(!error.is_transient(), "{code} is not retried: {error:?}");
    assert!(
        !error.is_unavailable(),
        "{code} is not an outage: {error:?}"
    );
    let source = error
        .source()
        .expect("the server's error is kept as the source");
    assert!(
        source.to_string().contains(code) || format!("{source:?}").contains(code),
        "{source:?}"
    );
}

/// Checks `error` is the ACL's refusal of `command`, names `naming` in its text, keeps
/// the redis crate's error as its source, and is not transient.
#[track_caller]
fn assert_denied(error: &LockError, command: &str, naming: &[&str]) {
    let LockError::Denied { command: got, .. } = error else {
        panic!("expected LockError::Denied of {command}, got {error:?}");
    };
    assert_eq!(got, command, "{error}");
    let text = error.to_string();
    for word in naming {
        assert!(text.contains(word), "the message names `{word}`: {text}");
    }
    assert!(
        !error.is_transient() && !error.is_unavailable(),
        "{error:?}"
    );
    let source = error
        .source()
        .expect("the server's error is kept as the source");
    assert!(
        format!("{source:?}").contains("permission") || source.to_string().contains("can't"),
        "{source:?}"
    );
}

/// Times `acquire` of `name` with the whole `WAIT`, returns its error and how long it took.
async fn failing_acquire(client: &LockClient, name: &str) -> (LockError, Duration) {
    let lock = client.lock(name).unwrap();
    let started = Instant::now();
    let result = tokio::time::timeout(WAIT * 2, lock.acquire())
        .await
        .expect("the acquire ends within its wait");
    let error = result.expect_err("the acquire is refused");
    (error, started.elapsed())
}

/// An ACL user who may not touch the lock's key is denied EVALSHA on that key, at once;
/// one who may not publish on the lock's channel is denied PUBLISH on the channel when the
/// unlock publishes (tests/acl.rs has the rest).
#[tokio::test]
async fn an_acl_user_without_the_key_or_the_channel_is_told_what_is_missing() {
    let server = RedisServer::start();
    // May use every command, every channel, and the `orders:*` locks (their scripts name
    // the unlock channel as a key too, as Redisson's do), but no other key.
    admin(
        &server,
        &[
            "ACL",
            "SETUSER",
            "keys-only",
            "on",
            ">pw",
            "~orders:*",
            "~redisson_lock__channel:{orders:*}",
            "&*",
            "+@all",
        ],
    )
    .await;
    // May use every key and command, but no channel.
    admin(
        &server,
        &[
            "ACL",
            "SETUSER",
            "no-channels",
            "on",
            ">pw",
            "~*",
            "resetchannels",
            "+@all",
        ],
    )
    .await;
    let port = server.port();

    let keys_only = LockClient::connect(client_config(format!(
        "redis://keys-only:pw@127.0.0.1:{port}/"
    )))
    .await
    .expect("connects: the user may use every command");
    let (error, took) = failing_acquire(&keys_only, "vault:1").await;
    assert_denied(&error, "EVALSHA", &["EVALSHA", "key `vault:1`", "ACL"]);
    assert!(
        took < PROMPT,
        "refused at once, not after retries: {took:?}"
    );
    // Its own keys work.
    let guard = keys_only.lock("orders:1").unwrap().acquire().await.unwrap();
    guard.unlock().await.unwrap();

    let no_channels = LockClient::connect(client_config(format!(
        "redis://no-channels:pw@127.0.0.1:{port}/"
    )))
    .await
    .expect("connects");
    let lock = no_channels.lock("orders:2").unwrap();
    let guard = lock
        .acquire()
        .await
        .expect("an uncontended acquire publishes nothing");
    let started = Instant::now();
    let error = tokio::time::timeout(WAIT, guard.unlock())
        .await
        .expect("the unlock answers")
        .expect_err("the unlock cannot publish on the channel");
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
    // Redis 7.0 answers a script's refused PUBLISH with `ERR ... can't publish to the
    // channel`, naming neither: our scripts name both. Not retried.
    assert_denied(
        &error,
        "PUBLISH",
        &[
            "PUBLISH",
            "channel `redisson_lock__channel:{orders:2}`",
            "ACL",
        ],
    );
    // A refused unlock changes nothing: the hold is still there (it expires at its lease).
    let mut admin = server.conn().await;
    let holds: std::collections::HashMap<String, i64> =
        redis::AsyncCommands::hgetall(&mut admin, "orders:2")
            .await
            .unwrap();
    assert_eq!(
        holds.values().copied().collect::<Vec<_>>(),
        vec![1],
        "{holds:?}"
    );
}

/// `maxmemory` reached under `noeviction`: the acquire gets `OOM` at once, and only one
/// script call was sent (no retry loop until the wait ends).
#[tokio::test]
async fn out_of_memory_is_reported_at_once_not_retried() {
    let server = RedisServer::start();
    let client = LockClient::connect(client_config(server.url()))
        .await
        .unwrap();
    // Warm up (loads the scripts, starts the actors) before memory runs out.
    let guard = client.lock("warm").unwrap().acquire().await.unwrap();
    guard.unlock().await.unwrap();
    let semaphore = client.semaphore("pool").unwrap();
    semaphore.set_permits(1).await.unwrap();
    semaphore.acquire(1).await.unwrap().release().await.unwrap();
    admin(
        &server,
        &["CONFIG", "SET", "maxmemory-policy", "noeviction"],
    )
    .await;
    admin(&server, &["CONFIG", "SET", "maxmemory", "1"]).await;
    server.reset_stats().await;

    let (error, took) = failing_acquire(&client, "stock:9").await;
    assert_server_error(&error, "OOM", &["OOM", "maxmemory"]);
    assert!(
        took < PROMPT,
        "refused at once, not after retries: {took:?}"
    );
    let scripts = server.command_calls("evalsha").await;
    assert_eq!(scripts, 1, "one try, no retry loop");

    let started = Instant::now();
    let error = tokio::time::timeout(WAIT * 2, semaphore.acquire(1))
        .await
        .expect("the semaphore's acquire ends within its wait")
        .expect_err("refused");
    assert_server_error(&error, "OOM", &["OOM", "maxmemory"]);
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());

    admin(&server, &["CONFIG", "SET", "maxmemory", "0"]).await;
    let guard = client.lock("stock:9").unwrap().acquire().await.unwrap();
    guard.unlock().await.unwrap();
    semaphore.acquire(1).await.unwrap().release().await.unwrap();
    assert_eq!(server.keys().await, ["pool"]);
}

/// A RedLock whose nodes are out of memory cannot win a quorum by trying again: it
/// reports `OOM` after the first attempt instead of retrying for its whole wait.
#[tokio::test]
async fn a_redlock_refused_by_a_majority_stops_at_once() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let mut clients = Vec::new();
    for server in &servers {
        clients.push(
            LockClient::connect(client_config(server.url()))
                .await
                .unwrap(),
        );
    }
    // Node timeouts long enough for a loaded machine: this is about what the nodes answer.
    let lock = RedLock::new(&clients, "payout")
        .unwrap()
        .node_timeout(Duration::from_secs(2));
    let guard = lock.acquire().await.unwrap();
    guard.unlock().await.unwrap();
    for server in &servers[..2] {
        admin(server, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]).await;
        admin(server, &["CONFIG", "SET", "maxmemory", "1"]).await;
    }
    let started = Instant::now();
    let error = tokio::time::timeout(WAIT * 2, lock.acquire_timeout(WAIT))
        .await
        .expect("ends within its wait")
        .expect_err("two of three nodes refuse");
    assert_server_error(&error, "OOM", &["OOM", "maxmemory"]);
    assert!(started.elapsed() < PROMPT, "{:?}", started.elapsed());
    for server in &servers {
        assert!(
            server.keys().await.is_empty(),
            "the third node's grant was given back"
        );
    }
}

/// A client pointed at a replica gets `READONLY`, named as a replica, at once.
#[tokio::test]
async fn a_replica_is_reported_as_read_only() {
    let primary = RedisServer::start();
    let replica = RedisServer::start();
    admin(
        &replica,
        &["REPLICAOF", "127.0.0.1", &primary.port().to_string()],
    )
    .await;
    eventually(
        "the replica has synced",
        Duration::from_secs(10),
        || async {
            let mut conn = replica.conn().await;
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query_async(&mut conn)
                .await
                .unwrap();
            info.contains("master_link_status:up")
        },
    )
    .await;

    let client = LockClient::connect(client_config(replica.url()))
        .await
        .expect("a replica accepts connections");
    let (error, took) = failing_acquire(&client, "ledger:3").await;
    assert_server_error(&error, "READONLY", &["READONLY", "replica"]);
    assert!(
        took < PROMPT,
        "refused at once, not after retries: {took:?}"
    );
    assert!(primary.keys().await.is_empty());
}
