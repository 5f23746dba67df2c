//! Tests of the fault-injection proxy in `tests/support/proxy.rs`, against real
//! `redis-server`s, with plain `redis` multiplexed connections through the proxy.
//!
//! Every behaviour is a scenario function, run on its own under `#[tokio::test]`
//! (current-thread) and all together under a multi-thread tokio runtime and under
//! `#[actix_rt::test]`.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use std::future::Future;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError, RedisResult};
use tokio::time::timeout;

use support::proxy::TcpProxy;
use support::{eventually, RedisServer};

/// Bound for anything that must finish (successfully or with an error).
const STEP: Duration = Duration::from_secs(15);
/// How long a blackholed request must stay unanswered.
const SILENCE: Duration = Duration::from_millis(300);
/// Bound for the proxy's asynchronous bookkeeping to catch up.
const SETTLE: Duration = Duration::from_secs(10);

/// Long timeouts: the outer [`STEP`] bounds the tests, and a blackholed request must be
/// able to wait for the blackhole to be lifted.
fn config() -> AsyncConnectionConfig {
    AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(10)))
        .set_response_timeout(Some(Duration::from_secs(10)))
}

/// Connects through `proxy` (not bounded: callers bound it).
fn connect_unbounded(
    proxy: &TcpProxy,
) -> impl Future<Output = RedisResult<MultiplexedConnection>> + 'static {
    let client = redis::Client::open(proxy.url()).expect("valid proxy url");
    async move {
        client
            .get_multiplexed_async_connection_with_config(&config())
            .await
    }
}

/// Connects through `proxy`, bounded by [`STEP`].
async fn try_connect(proxy: &TcpProxy) -> RedisResult<MultiplexedConnection> {
    timeout(STEP, connect_unbounded(proxy))
        .await
        .unwrap_or_else(|_| panic!("connecting through the proxy took more than {STEP:?}"))
}

async fn connect(proxy: &TcpProxy) -> MultiplexedConnection {
    try_connect(proxy)
        .await
        .unwrap_or_else(|e| panic!("connect through proxy on port {}: {e}", proxy.port()))
}

/// PING, bounded by [`STEP`]: the result, or a panic if nothing came back in time.
async fn ping(conn: &mut MultiplexedConnection) -> RedisResult<String> {
    timeout(STEP, redis::cmd("PING").query_async(conn))
        .await
        .unwrap_or_else(|_| panic!("PING neither answered nor failed within {STEP:?}"))
}

async fn assert_pong(conn: &mut MultiplexedConnection, what: &str) {
    match ping(conn).await {
        Ok(pong) => assert_eq!(pong, "PONG", "{what}"),
        Err(e) => panic!("{what}: PING failed: {e:?}"),
    }
}

/// The error must say the connection is gone (not a timeout, not a server error).
fn assert_dropped(err: &RedisError, what: &str) {
    assert!(
        err.is_io_error() && err.is_connection_dropped() && !err.is_timeout(),
        "{what}: expected a dropped-connection I/O error, got {err:?}"
    );
}

async fn wait_connections(proxy: &TcpProxy, n: usize) {
    let deadline = tokio::time::Instant::now() + SETTLE;
    while proxy.connections() != n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {SETTLE:?} waiting for proxy.connections() == {n}; it is {}",
            proxy.connections()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn ping_scenario(server: &RedisServer) {
    let proxy = TcpProxy::start(server.port()).await;
    assert_ne!(proxy.port(), server.port());
    assert_eq!(proxy.upstream_port(), server.port());
    assert_eq!(proxy.url(), format!("redis://127.0.0.1:{}/", proxy.port()));

    let mut conn = connect(&proxy).await;
    assert_pong(&mut conn, "PING through the proxy").await;
    let () = redis::cmd("SET")
        .arg("proxy:ping")
        .arg("through")
        .query_async(&mut conn)
        .await
        .expect("SET through the proxy");
    // The value really reached the server behind the proxy.
    let mut direct = server.conn().await;
    let v: String = redis::cmd("GET")
        .arg("proxy:ping")
        .query_async(&mut direct)
        .await
        .expect("GET directly");
    assert_eq!(v, "through");
}

async fn cut_scenario(server: &RedisServer) {
    let proxy = TcpProxy::start(server.port()).await;
    let mut old = connect(&proxy).await;
    assert_pong(&mut old, "before cut").await;
    assert_eq!(proxy.connections(), 1);

    proxy.cut();
    let err = ping(&mut old)
        .await
        .expect_err("a command on a cut connection must fail");
    assert_dropped(&err, "command after cut()");
    wait_connections(&proxy, 0).await;

    // A blip, not an outage: new connections work at once.
    let mut fresh = connect(&proxy).await;
    assert_pong(&mut fresh, "new connection after cut").await;
    assert_eq!(proxy.connections(), 1);
    // The old connection stays dead.
    assert_dropped(
        &ping(&mut old).await.expect_err("old connection stays dead"),
        "old connection after cut()",
    );
}

async fn blackhole_scenario(server: &RedisServer) {
    let proxy = TcpProxy::start(server.port()).await;
    let mut conn = connect(&proxy).await;
    assert_pong(&mut conn, "before blackhole").await;

    proxy.blackhole(true);
    let (up, down) = (proxy.bytes_up(), proxy.bytes_down());

    // A live connection: the PING is sent but neither it nor an answer gets through.
    let mut stalled = conn.clone();
    let ping_cmd = redis::cmd("PING");
    let pending = ping_cmd.query_async::<String>(&mut stalled);
    tokio::pin!(pending);
    assert!(
        timeout(SILENCE, &mut pending).await.is_err(),
        "a blackholed PING must get no answer within {SILENCE:?}"
    );

    // A new connection is accepted (and counted) but its handshake gets no answer.
    let handshake = connect_unbounded(&proxy);
    tokio::pin!(handshake);
    assert!(
        timeout(SILENCE, &mut handshake).await.is_err(),
        "a connection made while blackholed must not complete its handshake"
    );
    wait_connections(&proxy, 2).await;
    assert_eq!(
        (proxy.bytes_up(), proxy.bytes_down()),
        (up, down),
        "nothing is forwarded while blackholed"
    );

    // Lifted: the held-back bytes go through, so the same PING completes.
    proxy.blackhole(false);
    let pong = timeout(STEP, &mut pending)
        .await
        .expect("the held-back PING completes after blackhole(false)")
        .expect("held-back PING succeeds");
    assert_eq!(pong, "PONG");
    let mut late = timeout(STEP, &mut handshake)
        .await
        .expect("the held-back handshake completes after blackhole(false)")
        .expect("held-back handshake succeeds");
    assert_pong(&mut late, "connection made while blackholed").await;
    assert_pong(&mut conn, "old connection after blackhole(false)").await;
    assert!(proxy.bytes_up() > up && proxy.bytes_down() > down);
    assert_eq!(proxy.connections(), 2);
}

async fn hold_replies_scenario(server: &RedisServer) {
    let proxy = TcpProxy::start(server.port()).await;
    let mut conn = connect(&proxy).await;
    assert_pong(&mut conn, "before hold_replies").await;
    let mut direct = server.conn().await;

    // The request reaches the server and runs; its reply is held back.
    proxy.hold_replies(true);
    let mut held = conn.clone();
    let incr = redis::cmd("INCR").arg("held:counter").clone();
    let pending = incr.query_async::<i64>(&mut held);
    tokio::pin!(pending);
    assert!(
        timeout(SILENCE, &mut pending).await.is_err(),
        "a reply must be held back while hold_replies is on"
    );
    let ran: Option<i64> = redis::cmd("GET")
        .arg("held:counter")
        .query_async(&mut direct)
        .await
        .expect("GET");
    assert_eq!(ran, Some(1), "the request ran on the server");

    // Lifted: the held reply arrives.
    proxy.hold_replies(false);
    let reply = timeout(STEP, &mut pending)
        .await
        .expect("the held reply arrives after hold_replies(false)")
        .expect("INCR succeeds");
    assert_eq!(reply, 1);

    // Held, then cut: the request ran, its reply is lost.
    proxy.hold_replies(true);
    let mut again = conn.clone();
    let again_incr = incr.clone();
    let lost = tokio::spawn(async move { again_incr.query_async::<i64>(&mut again).await });
    eventually("the second INCR ran", SETTLE, || {
        let mut direct = direct.clone();
        async move {
            let now: Option<i64> = redis::cmd("GET")
                .arg("held:counter")
                .query_async(&mut direct)
                .await
                .expect("GET");
            now == Some(2)
        }
    })
    .await;
    proxy.cut();
    proxy.hold_replies(false);
    timeout(STEP, lost)
        .await
        .expect("a cut connection fails its pending request")
        .expect("the request's task")
        .expect_err("the reply was lost");
    let _: () = redis::cmd("DEL")
        .arg("held:counter")
        .query_async(&mut direct)
        .await
        .expect("DEL");
}

async fn refuse_scenario(server: &RedisServer) {
    let proxy = TcpProxy::start(server.port()).await;
    let mut live = connect(&proxy).await;
    assert_pong(&mut live, "before refuse").await;

    proxy.refuse(true);
    assert_dropped(
        &ping(&mut live)
            .await
            .expect_err("a live connection is cut by refuse(true)"),
        "live connection after refuse(true)",
    );
    wait_connections(&proxy, 0).await;

    // New connections are closed at once: the handshake or the first command fails.
    let up = proxy.bytes_up();
    for attempt in 0..3 {
        match try_connect(&proxy).await {
            Err(e) => assert!(
                e.is_io_error() && !e.is_timeout(),
                "connect #{attempt} while refusing: expected an I/O error, got {e:?}"
            ),
            Ok(mut conn) => assert_dropped(
                &ping(&mut conn)
                    .await
                    .expect_err("first command on a refused connection must fail"),
                "first command while refusing",
            ),
        }
    }
    assert_eq!(proxy.connections(), 0);
    assert_eq!(proxy.bytes_up(), up, "nothing is forwarded while refusing");

    proxy.refuse(false);
    let mut fresh = connect(&proxy).await;
    assert_pong(&mut fresh, "new connection after refuse(false)").await;
    assert_eq!(proxy.connections(), 1);
}

async fn counters_scenario(server: &RedisServer) {
    let proxy = TcpProxy::start(server.port()).await;
    assert_eq!(
        (proxy.connections(), proxy.bytes_up(), proxy.bytes_down()),
        (0, 0, 0)
    );

    let mut a = connect(&proxy).await;
    assert_pong(&mut a, "first connection").await;
    let mut b = connect(&proxy).await;
    assert_pong(&mut b, "second connection").await;
    assert_eq!(proxy.connections(), 2);
    let (up, down) = (proxy.bytes_up(), proxy.bytes_down());
    assert!(
        up > 0 && down > 0,
        "handshakes and PINGs counted: {up}/{down}"
    );

    let big = "x".repeat(64 * 1024);
    let () = redis::cmd("SET")
        .arg("proxy:big")
        .arg(&big)
        .query_async(&mut a)
        .await
        .expect("SET big value");
    assert!(
        proxy.bytes_up() >= up + big.len() as u64,
        "the SET's payload went up"
    );
    let got: String = redis::cmd("GET")
        .arg("proxy:big")
        .query_async(&mut b)
        .await
        .expect("GET big value");
    assert_eq!(got.len(), big.len());
    assert!(
        proxy.bytes_down() >= down + big.len() as u64,
        "the GET's payload came down"
    );

    // A client closing its connection ends the proxied one.
    drop(a);
    wait_connections(&proxy, 1).await;
    assert_pong(&mut b, "the other connection is unaffected").await;
    drop(b);
    wait_connections(&proxy, 0).await;
}

async fn drop_scenario(server: &RedisServer) {
    let metrics = tokio::runtime::Handle::current().metrics();
    let tasks_before = metrics.num_alive_tasks();

    let proxy = TcpProxy::start(server.port()).await;
    let mut conn = connect(&proxy).await;
    assert_pong(&mut conn, "before drop").await;
    let mut idle = connect(&proxy).await;
    assert_pong(&mut idle, "second connection before drop").await;
    assert_eq!(proxy.connections(), 2);
    assert!(metrics.num_alive_tasks() > tasks_before);

    drop(proxy);
    assert_dropped(
        &ping(&mut conn)
            .await
            .expect_err("a connection through a dropped proxy must fail"),
        "command after dropping the proxy",
    );
    assert_dropped(
        &ping(&mut idle)
            .await
            .expect_err("every connection through a dropped proxy fails"),
        "second connection after dropping the proxy",
    );

    // No task outlives the proxy: once the clients are gone too, the runtime is back to
    // the tasks it had before.
    drop((conn, idle));
    eventually("all proxy (and client) tasks ended", SETTLE, || async {
        metrics.num_alive_tasks() <= tasks_before
    })
    .await;
}

#[tokio::test]
async fn ping_through_proxy() {
    ping_scenario(&RedisServer::start()).await;
}

#[tokio::test]
async fn cut_closes_live_connections_and_accepts_new_ones() {
    cut_scenario(&RedisServer::start()).await;
}

#[tokio::test]
async fn blackhole_holds_bytes_back_until_lifted() {
    blackhole_scenario(&RedisServer::start()).await;
}

#[tokio::test]
async fn hold_replies_lets_requests_run_and_holds_their_replies_back() {
    hold_replies_scenario(&RedisServer::start()).await;
}

#[tokio::test]
async fn refuse_closes_live_and_new_connections() {
    refuse_scenario(&RedisServer::start()).await;
}

#[tokio::test]
async fn counts_connections_and_bytes() {
    counters_scenario(&RedisServer::start()).await;
}

#[tokio::test]
async fn drop_closes_connections_and_ends_tasks() {
    drop_scenario(&RedisServer::start()).await;
}

async fn all_scenarios() {
    let server = RedisServer::start();
    // First, while the runtime has no leftover tasks from the other scenarios.
    drop_scenario(&server).await;
    ping_scenario(&server).await;
    cut_scenario(&server).await;
    blackhole_scenario(&server).await;
    hold_replies_scenario(&server).await;
    refuse_scenario(&server).await;
    counters_scenario(&server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_behaviours_on_multi_thread_runtime() {
    all_scenarios().await;
}

#[actix_rt::test]
async fn all_behaviours_under_actix_rt() {
    all_scenarios().await;
}
