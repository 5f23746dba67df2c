//! The mistakes a newcomer makes first get an error that says what happened and what to do,
//! never a silent wrong lock, a misleading outage, or something lost without a word.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{ClientConfig, LockClient, LockError};
use std::io::{Read, Write};
use std::time::Duration;
use support::logs::{capture_logs, logs};
use support::{client, eventually, RedisServer};

const SHORT_WAIT: Duration = Duration::from_millis(200);

/// A second acquire in the same task is a fresh owner: it waits for the first hold. When
/// the wait runs out, the error says the holder is an owner of this same client and points
/// to re-entry; a holder in another client gets the plain message.
#[tokio::test]
async fn a_second_acquire_by_an_owner_of_this_client_is_told_about_reentry() {
    let server = RedisServer::start();
    let client = client(&server).await;
    for (kind, lock) in [
        ("reentrant", client.lock("self:reentrant").unwrap()),
        ("fast", client.fast_lock("self:fast").unwrap()),
    ] {
        let first = lock.acquire().await.unwrap();
        let error = lock
            .acquire_timeout(SHORT_WAIT)
            .await
            .expect_err("held by the first acquire");
        assert!(error.is_timeout(), "{kind}: {error:?}");
        let text = error.to_string();
        assert!(
            text.contains("by another owner of this same client")
                && text.contains("guard.reenter(wait)")
                && text.contains("AcquireOptions::new().owner(owner)"),
            "{kind}: {text}"
        );
        assert_eq!(
            lock.try_acquire().await.unwrap().map(|_| ()),
            None,
            "{kind}: try_acquire still answers a busy lock with None"
        );
        first.unlock().await.unwrap();
    }

    let other = support::client(&server).await;
    let held = other
        .lock("self:reentrant")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let error = client
        .lock("self:reentrant")
        .unwrap()
        .acquire_timeout(SHORT_WAIT)
        .await
        .expect_err("held by the other client");
    let text = error.to_string();
    assert!(
        text.starts_with("lock `self:reentrant` is still held by another owner after waiting")
            && !text.contains("this same client"),
        "{text}"
    );
    held.unlock().await.unwrap();
    client.close().await;
    other.close().await;
}

/// Telling whether the holder is an owner of this client takes one read of Redis, made when
/// the wait has run out: it never holds the caller long past its wait. Here the server stops
/// answering (SIGSTOP) while the waiter waits, and stays still until the caller has its
/// answer: the timeout comes soon after the wait (with the plain message, as nothing could
/// be read), not at the read's response timeout (3 s) or when the server answers again. The
/// spin lock's waiter polls, so a poll of its own is on its way when the wait ends; the fair
/// lock's waiter stands in the queue in Redis.
#[tokio::test]
async fn a_timeout_is_told_at_the_end_of_the_wait_even_when_redis_is_silent() {
    let mut server = RedisServer::start();
    let waiter = client(&server).await;
    let holder = client(&server).await;
    let locks = |client: &LockClient, kind: &str| match kind {
        "reentrant" => client.lock("self:silent"),
        "fast" => client.fast_lock("self:silent-fast"),
        "spin" => client.spin_lock("self:silent-spin"),
        _ => client.fair_lock("self:silent-fair"),
    };
    for kind in ["reentrant", "fast", "spin", "fair"] {
        let held = locks(&holder, kind).unwrap().acquire().await.unwrap();
        let lock = locks(&waiter, kind).unwrap();
        let scripts_run = server.command_calls("evalsha").await;
        let started = std::time::Instant::now();
        let waiting = tokio::spawn(async move { lock.acquire_timeout(SHORT_WAIT * 2).await });
        // The waiter's first script try has run (and its busy answer is on its way back)
        // before the server goes still: what follows is a wait, not an unanswered first try.
        eventually(
            "the waiter's first try ran",
            Duration::from_secs(5),
            || async { server.command_calls("evalsha").await > scripts_run },
        )
        .await;
        server.pause();
        let error = waiting
            .await
            .unwrap()
            .expect_err("held by the other client");
        let took = started.elapsed();
        server.resume();
        assert!(error.is_timeout(), "{kind}: {error:?}");
        // Generous for a loaded machine, and well under the time the server stays still.
        assert!(
            took < SHORT_WAIT * 2 + Duration::from_millis(1500),
            "{kind}: the timeout came {took:?} after the acquire (wait {:?}): it waited \
             for a silent server",
            SHORT_WAIT * 2
        );
        held.unlock().await.unwrap();
    }
    waiter.close().await;
    holder.close().await;
}

/// A wrong password is a configuration error, not an outage: it is not retried.
#[tokio::test]
async fn a_wrong_password_is_invalid_config_not_unavailable() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg("right-one")
        .query_async(&mut admin)
        .await
        .unwrap();
    let port = server.port();
    for (url, connects) in [
        (format!("redis://:wrong-one@127.0.0.1:{port}/"), false),
        (
            format!("redis://default:wrong-one@127.0.0.1:{port}/"),
            false,
        ),
        // No password at all, on a server that wants one: connecting sends no command that
        // needs one, the first lock does.
        (format!("redis://127.0.0.1:{port}/"), true),
    ] {
        let connected = LockClient::connect(ClientConfig::new(&url)).await;
        assert_eq!(connected.is_ok(), connects, "{url}: {connected:?}");
        let error = match connected {
            Ok(client) => client
                .lock("a")
                .unwrap()
                .acquire()
                .await
                .expect_err("no password"),
            Err(error) => error,
        };
        assert!(
            matches!(error, LockError::InvalidConfig { .. }),
            "{url}: {error:?}"
        );
        assert!(!error.is_transient(), "{url}: {error:?}");
        let text = error.to_string();
        assert!(
            text.contains("refused the user and password of the Redis URL")
                && text.contains("check them")
                && !text.contains("wrong-one"),
            "{url}: {text}"
        );
    }
}

/// A port where something else than Redis answers (here an HTTP server) is told as such,
/// in one line.
#[tokio::test]
async fn a_port_that_is_not_redis_is_told_as_a_wrong_port() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let url = format!("redis://127.0.0.1:{port}/");
    let error = LockClient::connect(ClientConfig::new(&url))
        .await
        .expect_err("an HTTP server is not Redis");
    assert!(
        matches!(error, LockError::InvalidConfig { .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "invalid configuration: Redis node redis://127.0.0.1:{port} did not answer as \
             Redis — wrong port? (its reply is not the Redis protocol)"
        )
    );
}

/// The URL messages: one space between words, and a Redis scheme missing its `//` is told
/// so rather than "no scheme".
#[tokio::test]
async fn url_mistakes_are_told_plainly() {
    for (url, problem) in [
        (
            "redis:/127.0.0.1:6379/",
            "its scheme redis: is not followed by `//` (write redis://host:port/)",
        ),
        (
            "redis:127.0.0.1",
            "its scheme redis: is not followed by `//` (write redis://host:port/)",
        ),
        (
            "127.0.0.1:6379",
            "it has no scheme (write redis://host:port/)",
        ),
        (
            "http://127.0.0.1:6379/",
            "the scheme http:// is not a Redis scheme",
        ),
    ] {
        let error = LockClient::connect(ClientConfig::new(url))
            .await
            .expect_err("a bad URL");
        let text = error.to_string();
        assert!(
            matches!(error, LockError::InvalidConfig { .. }),
            "{url}: {error:?}"
        );
        assert!(
            text.starts_with(&format!(
                "invalid configuration: cannot use Redis URL {url}: {problem}; accepted: \
                 redis://[user:password@]host[:port][/db], rediss://"
            )),
            "{url}: {text}"
        );
        assert!(!text.contains("  "), "{url}: a run of spaces: {text:?}");
    }
}

/// A name whose braces are not one non-empty hash tag is refused by every kind on a single
/// server too, with the same error as on a cluster: code that works locally works there.
#[tokio::test]
async fn unbalanced_braces_are_refused_on_a_single_server_by_every_kind() {
    let server = RedisServer::start();
    let client = client(&server).await;
    for name in ["a{b", "x{}y", "a}b"] {
        let expected = LockError::InvalidName {
            reason: format!(
                "`{name}` has braces that are not one non-empty hash tag, so on a Redis Cluster \
                 its key and its channel would land in different slots; use balanced braces \
                 around a non-empty tag (`order:{{42}}`) or none"
            ),
        };
        let refusals = [
            ("lock", client.lock(name).err()),
            ("fenced_lock", client.fenced_lock(name).err()),
            ("fast_lock", client.fast_lock(name).err()),
            ("fair_lock", client.fair_lock(name).err()),
            ("spin_lock", client.spin_lock(name).err()),
            ("read_write_lock", client.read_write_lock(name).err()),
            ("semaphore", client.semaphore(name).err()),
            (
                "expirable_semaphore",
                client.expirable_semaphore(name).err(),
            ),
            ("count_down_latch", client.count_down_latch(name).err()),
        ];
        for (kind, refusal) in refusals {
            assert_eq!(refusal.as_ref(), Some(&expected), "{kind}({name:?})");
        }
    }
    // Balanced braces are a hash tag, and fine.
    let guard = client
        .lock("order:{42}:pay")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    guard.unlock().await.unwrap();
    assert!(server.keys().await.is_empty());
    client.close().await;
}

/// The last clone of a client dropped without `close()`: the permits given back just before
/// still reach Redis (the drop does not wait for them), and a warning says what was in
/// flight. A client dropped with nothing in flight says nothing.
#[tokio::test]
async fn a_client_dropped_without_close_flushes_in_the_background_and_warns() {
    capture_logs();
    let server = RedisServer::start();
    let conn = server.conn().await;

    let quiet = client(&server).await;
    let quiet_id = quiet.id().to_string();
    drop(quiet);

    let client = client(&server).await;
    let id = client.id().to_string();
    let pool = client.semaphore("pool").unwrap();
    assert!(pool.try_set_permits(2).await.unwrap());
    let permit = pool.acquire(1).await.unwrap();
    let permits = || {
        let mut conn = conn.clone();
        async move {
            let value: Option<String> = redis::cmd("GET")
                .arg("pool")
                .query_async(&mut conn)
                .await
                .unwrap();
            value
        }
    };
    assert_eq!(permits().await.as_deref(), Some("1"));

    let dropping = std::time::Instant::now();
    drop(permit);
    drop(pool);
    drop(client);
    assert!(
        dropping.elapsed() < Duration::from_millis(500),
        "the drop does not wait for Redis: {:?}",
        dropping.elapsed()
    );
    eventually(
        "the dropped permit is back",
        Duration::from_secs(10),
        || async { permits().await.as_deref() == Some("2") },
    )
    .await;

    let log = logs();
    let warnings: Vec<&str> = log.lines().filter(|line| line.contains(" WARN ")).collect();
    let warning = warnings
        .iter()
        .find(|line| line.contains(&id))
        .unwrap_or_else(|| panic!("no warning names the client {id}: {log}"));
    assert!(
        warning.contains("lock client dropped without close()")
            && warning.contains("still on their way to Redis")
            && warning.contains("client.close().await"),
        "{warning}"
    );
    assert!(
        !warnings.iter().any(|line| line.contains(&quiet_id)),
        "a client dropped with nothing in flight warns: {warnings:?}"
    );
}
