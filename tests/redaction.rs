//! Passwords in Redis URLs never reach an error or a log line, whatever characters they
//! hold. The password here, `ab/cd+ef=`, has a `/` (which ends the authority of a URL
//! parsed by text), a `+` and a `=`: written raw the URL cannot be parsed at all, written
//! percent-encoded (`ab%2Fcd%2Bef%3D`) it is what the server wants.
//!
//! Every log line of the whole test binary is captured (one global subscriber at TRACE)
//! and searched, with every error's `Display` and `Debug`, for any piece of the password.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{redact_url, ClientConfig, LockClient, LockError};
use std::time::Duration;
use support::logs::{capture_logs, logs};
use support::RedisServer;

const PASSWORD: &str = "ab/cd+ef=";
const ENCODED: &str = "ab%2Fcd%2Bef%3D";
/// Pieces of the password, raw and encoded, none of which may show anywhere.
const PIECES: [&str; 6] = ["ab/cd", "cd+ef", "ab%2F", "cd%2B", "%2Bef", "b/c"];

#[track_caller]
fn assert_no_secret(what: &str, text: &str) {
    for piece in PIECES {
        assert!(
            !text.contains(piece),
            "{what} shows `{piece}` of the password: {text}"
        );
    }
}

#[track_caller]
fn assert_error_clean(what: &str, error: &LockError) {
    assert_no_secret(what, &error.to_string());
    assert_no_secret(what, &format!("{error:?}"));
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        assert_no_secret(what, &inner.to_string());
        source = inner.source();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn redact_url_hides_passwords_with_slashes() {
    for (url, shown) in [
        ("rediss://:ab/cd+ef=@host", "rediss://:***@host"),
        ("redis://:ab/cd+ef=@host:6379/2", "redis://:***@host:6379/2"),
        (
            "redis://app:ab/cd+ef=@host:6379/",
            "redis://app:***@host:6379/",
        ),
        ("redis://:ab%2Fcd%2Bef%3D@host/", "redis://:***@host/"),
        ("redis://:p@ss/w@rd@host/", "redis://:***@host/"),
        ("redis://host:6379/", "redis://host:6379/"),
    ] {
        assert_eq!(redact_url(url), shown, "{url}");
    }
}

/// URLs the redis crate cannot parse (the raw `/` ends the authority) are refused with an
/// error that names the URL without its password, and so is their config's `Debug`.
#[tokio::test]
async fn unparseable_urls_are_refused_without_showing_the_password() {
    capture_logs();
    let port = free_port();
    let raw = [
        format!("redis://:{PASSWORD}@127.0.0.1:{port}/"),
        format!("redis://app:{PASSWORD}@127.0.0.1:{port}/0"),
        format!("rediss://:{PASSWORD}@127.0.0.1:{port}"),
        format!("rediss://:{PASSWORD}@host"),
    ];
    for url in &raw {
        let configs = [
            ClientConfig::new(url.clone()).connect_timeout(Duration::from_millis(500)),
            ClientConfig::cluster([url.clone()]).connect_timeout(Duration::from_millis(500)),
            ClientConfig::sentinel([url.clone()], "mymaster")
                .with_node_url(url.clone())
                .connect_timeout(Duration::from_millis(500)),
        ];
        for config in configs {
            assert_no_secret("config Debug", &format!("{config:?}"));
            let error = LockClient::connect(config)
                .await
                .expect_err("the URL cannot be used");
            assert_error_clean(url, &error);
        }
    }
    assert_no_secret("the log", &logs());
}

/// A percent-encoded password works, and errors from a failed connect, a refused
/// password, and operations on a node that went away never show it; nor does any log line
/// (the watchdog's renewal failures and the subscription's reconnect attempts included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_and_logs_of_a_password_protected_node_never_show_the_password() {
    capture_logs();
    let mut server = RedisServer::start();
    let mut admin = server.conn().await;
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("requirepass")
        .arg(PASSWORD)
        .query_async(&mut admin)
        .await
        .unwrap();
    let url = format!("redis://:{ENCODED}@127.0.0.1:{}/", server.port());
    let config = ClientConfig::new(url.clone())
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_millis(300))
        .watchdog_timeout(Duration::from_millis(600));
    assert_no_secret("config Debug", &format!("{config:?}"));

    // Nothing listens there.
    let unreachable = format!("redis://:{ENCODED}@127.0.0.1:{}/", free_port());
    let error = LockClient::connect(config.clone().with_node_url(unreachable))
        .await
        .expect_err("nothing listens");
    assert!(error.is_unavailable(), "{error:?}");
    assert_error_clean("connect to a closed port", &error);

    // The wrong password.
    let wrong = format!("redis://:zz%2Fcd%2Bef%3D@127.0.0.1:{}/", server.port());
    let error =
        LockClient::connect(ClientConfig::new(wrong).connect_timeout(Duration::from_millis(500)))
            .await
            .expect_err("the password is wrong");
    assert_error_clean("wrong password", &error);

    // The right one works.
    let client = LockClient::connect(config)
        .await
        .expect("the encoded password works");
    let lock = client.lock("secret:1").unwrap();
    let guard = lock.acquire().await.expect("acquired");

    // The node goes away: the watchdog fails to renew, the guard is lost, and every
    // operation fails with an error that names the node without its password.
    server.stop();
    tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("the hold is lost once renewals fail");
    let error = guard.unlock().await.expect_err("the node is gone");
    assert_error_clean("unlock on a stopped node", &error);
    let error = lock
        .acquire_timeout(Duration::from_millis(500))
        .await
        .expect_err("the node is gone");
    assert_error_clean("acquire on a stopped node", &error);
    let error = lock.is_locked().await.expect_err("the node is gone");
    assert_error_clean("is_locked on a stopped node", &error);
    client.shutdown();

    let log = logs();
    assert!(
        log.contains(&format!("127.0.0.1:{}", server.port())),
        "the log names the node: {log}"
    );
    assert_no_secret("the log", &log);
}
