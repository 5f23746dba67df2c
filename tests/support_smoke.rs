//! Smoke test of the integration-test support code itself.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use std::time::Duration;

use support::RedisServer;

#[test]
fn parses_commandstats() {
    let info = "# Commandstats\r\n\
                cmdstat_set:calls=3,usec=10,usec_per_call=3.33,rejected_calls=0,failed_calls=0\r\n\
                cmdstat_client|kill:calls=1,usec=5,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n\
                cmdstat_setex:calls=7,usec=1\r\n";
    assert_eq!(support::parse_command_calls(info, "set"), 3);
    assert_eq!(support::parse_command_calls(info, "SET"), 3);
    assert_eq!(support::parse_command_calls(info, "setex"), 7);
    assert_eq!(support::parse_command_calls(info, "client|kill"), 1);
    assert_eq!(support::parse_command_calls(info, "get"), 0);
}

#[tokio::test]
async fn redis_server_lifecycle() {
    let mut server = RedisServer::start();
    let port = server.port();
    assert_ne!(port, 6379, "must never use the shared redis port");
    assert_eq!(server.url(), format!("redis://127.0.0.1:{port}/"));

    let mut conn = server.conn().await;
    let () = redis::cmd("SET")
        .arg("smoke:key")
        .arg("v")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(server.keys().await, vec!["smoke:key".to_string()]);
    assert_eq!(server.command_calls("set").await, 1);
    assert_eq!(server.command_calls("get").await, 0);

    // Paused: nothing is answered; resumed: the pending command completes.
    server.pause();
    let pending = tokio::time::timeout(
        Duration::from_millis(300),
        redis::cmd("GET")
            .arg("smoke:key")
            .query_async::<String>(&mut conn),
    )
    .await;
    assert!(pending.is_err(), "a paused server must not answer");
    server.resume();
    let v: String = tokio::time::timeout(
        Duration::from_secs(5),
        redis::cmd("GET").arg("smoke:key").query_async(&mut conn),
    )
    .await
    .expect("resumed server answers")
    .unwrap();
    assert_eq!(v, "v");

    server.reset_stats().await;
    assert_eq!(server.command_calls("set").await, 0);

    // Restart: same port, empty data set.
    server.restart();
    assert_eq!(server.port(), port);
    assert!(server.keys().await.is_empty());

    // Stop: process gone, port free; restart brings it back.
    let pid = server.pid().unwrap();
    server.stop();
    assert!(!server.is_running());
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    // SAFETY: signal 0 only checks whether the pid exists.
    assert_ne!(
        unsafe { libc::kill(pid as libc::pid_t, 0) },
        0,
        "process gone"
    );
    server.restart();
    assert!(server.keys().await.is_empty());

    // Drop kills a paused server and removes its directory.
    server.pause();
    let pid = server.pid().unwrap();
    drop(server);
    assert_ne!(
        unsafe { libc::kill(pid as libc::pid_t, 0) },
        0,
        "process gone"
    );
}

#[tokio::test]
async fn servers_are_independent() {
    let a = RedisServer::start();
    let b = RedisServer::start();
    assert_ne!(a.port(), b.port());
    let mut ca = a.conn().await;
    let () = redis::cmd("SET")
        .arg("only-a")
        .arg(1)
        .query_async(&mut ca)
        .await
        .unwrap();
    assert_eq!(a.keys().await, vec!["only-a".to_string()]);
    assert!(b.keys().await.is_empty());
}

/// The suites run against the server `LOCK_TEST_SERVER` names: Valkey's `INFO server`
/// says `server_name:valkey`; Redis 7's says no server name.
#[tokio::test]
async fn the_server_is_the_one_the_run_asks_for() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await
        .unwrap();
    let name = info
        .lines()
        .find_map(|line| line.strip_prefix("server_name:"))
        .map(str::trim);
    assert_eq!(name, support::test_server().info_name(), "{info}");
}
