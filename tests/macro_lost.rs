//! A `#[distributed_lock]` body and its hold: `current()` inside handlers and plain fns
//! (the innermost call's, `None` outside); a lost lock seen by a body that keeps running
//! (the default) and a body dropped on the loss (`on_lost = stop`: `LockError::Lost` from a
//! plain fn, 503 naming the lock from a handler); `Retry-After` from the holder's TTL.
//!
//! Losses are real, as in tests/lost_timing.rs: the holder's client reaches Redis through a
//! proxy the test stalls, so renewals stop and the key expires in Redis.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::{
    current, distributed_lock, fencing_token, AcquireOptions, LockClient, LockError,
};
use actix_web::{get, http::StatusCode, post, test, web, App, HttpResponse};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::proxy::TcpProxy;
use support::RedisServer;
use tokio::sync::Notify;
use tokio::time::timeout;

/// The watchdog lease of the stalled clients: short, so a stall loses the lock soon.
const LEASE: Duration = Duration::from_millis(1500);
/// How long a loss may take to be seen after the stall starts: the lease plus slack for a
/// loaded machine.
const LOSS_BOUND: Duration = Duration::from_secs(10);

/// A client reaching `server` through a proxy the test can stall (as in lost_timing.rs).
async fn stallable_client(server: &RedisServer) -> (TcpProxy, LockClient) {
    let proxy = TcpProxy::start(server.port()).await;
    let client = support::client_at(&proxy.url(), |config| {
        config
            .watchdog_timeout(LEASE)
            .renew_every(Duration::from_millis(600))
            .response_timeout(LEASE * 2)
            .connect_timeout(Duration::from_millis(700))
    })
    .await;
    (proxy, client)
}

/// What a body did: that it started (it holds the lock, and its caller knows: a key seen
/// in Redis is not enough, the acquire's reply may still be on its way), a step it takes
/// only after it has seen the loss, and whether its future was dropped (a value living in
/// it was dropped, at its end or where it was cancelled).
#[derive(Clone, Default)]
struct Probe {
    started: Arc<Notify>,
    after_loss: Arc<AtomicBool>,
    dropped: Arc<AtomicBool>,
}

impl Probe {
    /// Waits until the body runs.
    async fn started(&self) {
        timeout(Duration::from_secs(10), self.started.notified())
            .await
            .expect("the body started");
    }
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The body both loss tests run: it waits for the loss, then takes one more step.
async fn work_until_lost(probe: Probe) -> bool {
    let _alive = SetOnDrop(probe.dropped.clone());
    let hold = current().expect("inside an annotated body");
    assert!(!hold.is_lost());
    probe.started.notify_one();
    hold.lost().await;
    probe.after_loss.store(true, Ordering::SeqCst);
    hold.is_lost()
}

#[distributed_lock("body:<id>", client = client)]
async fn keeps_running(client: LockClient, id: u32, probe: Probe) -> Result<bool, LockError> {
    Ok(work_until_lost(probe).await)
}

#[distributed_lock("body:<id>", client = client, on_lost = stop)]
async fn stops(client: LockClient, id: u32, probe: Probe) -> Result<bool, LockError> {
    Ok(work_until_lost(probe).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_body_keeps_running_and_sees_the_loss_through_current() {
    let server = RedisServer::start();
    let (proxy, client) = stallable_client(&server).await;
    let probe = Probe::default();
    let call = tokio::spawn(keeps_running(client, 1, probe.clone()));
    probe.started().await;
    proxy.blackhole(true);
    let seen_lost = timeout(LOSS_BOUND, call)
        .await
        .expect("the body saw the loss")
        .unwrap()
        .expect("the call returns the body's result");
    assert!(seen_lost, "is_lost() after lost() resolved");
    assert!(probe.after_loss.load(Ordering::SeqCst), "the body ran on");
    assert!(probe.dropped.load(Ordering::SeqCst));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_lost_stop_drops_the_body_and_returns_lost() {
    let server = RedisServer::start();
    let (proxy, client) = stallable_client(&server).await;
    let probe = Probe::default();
    let call = tokio::spawn(stops(client, 2, probe.clone()));
    probe.started().await;
    proxy.blackhole(true);
    let result = timeout(LOSS_BOUND, call)
        .await
        .expect("the call ends on the loss")
        .unwrap();
    assert_eq!(
        result,
        Err(LockError::Lost {
            name: "body:2".into()
        })
    );
    assert!(
        !probe.after_loss.load(Ordering::SeqCst),
        "the body took a step after the loss"
    );
    assert!(
        probe.dropped.load(Ordering::SeqCst),
        "the body's future was dropped"
    );
}

#[post("/stop/{id}")]
#[distributed_lock("handler:<id>", on_lost = stop)]
async fn stopping_handler(id: web::Path<u32>, probe: web::Data<Probe>) -> HttpResponse {
    let _ = id;
    work_until_lost(probe.get_ref().clone()).await;
    HttpResponse::Ok().finish()
}

#[actix_web::test]
async fn on_lost_stop_in_a_handler_answers_503_naming_the_lock() {
    let server = RedisServer::start();
    let (proxy, client) = stallable_client(&server).await;
    let probe = Probe::default();
    let app = test::init_service(
        App::new()
            .app_data(web::Data::new(client))
            .app_data(web::Data::new(probe.clone()))
            .service(stopping_handler),
    )
    .await;
    let request = test::TestRequest::post().uri("/stop/3").to_request();
    let call = test::call_service(&app, request);
    let stall = async {
        probe.started().await;
        proxy.blackhole(true);
    };
    let (response, ()) = timeout(LOSS_BOUND, async { tokio::join!(call, stall) })
        .await
        .expect("the handler answers on the loss");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        response.headers().get("content-type").unwrap(),
        "application/json"
    );
    let body: serde_json::Value = test::read_body_json(response).await;
    let mut keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(keys, ["error", "lock", "message"]);
    assert_eq!(body["error"], "lock_lost");
    assert_eq!(body["lock"], "handler:3");
    assert!(
        body["message"].as_str().unwrap().contains("handler:3"),
        "{body}"
    );
    assert!(!probe.after_loss.load(Ordering::SeqCst));
    assert!(probe.dropped.load(Ordering::SeqCst));
}

#[distributed_lock("inner:<id>", client = client, kind = fenced)]
async fn inner(client: &LockClient, id: u32) -> Result<(String, Option<u64>), LockError> {
    let hold = current().expect("inside the inner body");
    assert_eq!(fencing_token(), hold.fencing_token());
    Ok((hold.name().to_string(), hold.fencing_token()))
}

#[distributed_lock("outer:<id>", client = client)]
async fn outer(client: &LockClient, id: u32) -> Result<Vec<String>, LockError> {
    let before = current().expect("inside the outer body");
    let (inner_name, token) = inner(client, id).await?;
    assert!(token.is_some(), "the inner call is fenced");
    let after = current().expect("still inside the outer body");
    assert_eq!(after.fencing_token(), None, "the outer lock is not fenced");
    // A spawned task starts without the task-local.
    let spawned = tokio::spawn(async { current().is_none() }).await.unwrap();
    assert!(spawned);
    Ok(vec![
        before.name().to_string(),
        inner_name,
        after.name().to_string(),
    ])
}

#[distributed_lock("order:<id>", "stock:<sku>", client = client)]
async fn both(client: &LockClient, id: u32, sku: &str) -> Result<(String, Vec<String>), LockError> {
    let hold = current().expect("inside the MultiLock body");
    assert!(!hold.is_lost());
    Ok((hold.name().to_string(), hold.names().to_vec()))
}

#[tokio::test]
async fn current_is_the_innermost_hold_in_plain_fns_and_none_outside() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    assert!(current().is_none());
    assert!(fencing_token().is_none());
    let names = outer(&client, 7).await.unwrap();
    assert_eq!(names, ["outer:7", "inner:7", "outer:7"]);
    let (name, names) = both(&client, 8, "w").await.unwrap();
    assert_eq!(name, "order:8, stock:w");
    assert_eq!(names, ["order:8", "stock:w"]);
    assert!(current().is_none());
}

#[get("/current/{id}")]
#[distributed_lock("ledger:<id>", kind = fenced)]
async fn current_in_handler(id: web::Path<u32>) -> HttpResponse {
    let _ = id;
    let hold = current().expect("inside the handler body");
    HttpResponse::Ok().json(serde_json::json!({
        "name": hold.name(),
        "token": hold.fencing_token(),
        "lost": hold.is_lost(),
    }))
}

#[actix_web::test]
async fn current_is_reachable_in_a_handler() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let app = test::init_service(
        App::new()
            .app_data(web::Data::new(client))
            .service(current_in_handler),
    )
    .await;
    let mut tokens = Vec::new();
    for _ in 0..2 {
        let request = test::TestRequest::get().uri("/current/9").to_request();
        let body: serde_json::Value = test::call_and_read_body_json(&app, request).await;
        assert_eq!(body["name"], "ledger:9");
        assert_eq!(body["lost"], false);
        tokens.push(body["token"].as_u64().expect("a fenced hold has a token"));
    }
    assert!(tokens[1] > tokens[0], "{tokens:?}");
    assert!(current().is_none());
}

#[post("/busy/{id}")]
#[distributed_lock("busy:<id>", wait = "0s")]
async fn busy(id: web::Path<u32>) -> HttpResponse {
    let _ = id;
    HttpResponse::Ok().finish()
}

#[post("/permits")]
#[distributed_lock("permits:busy", kind = semaphore, wait = "0s")]
async fn busy_permits() -> HttpResponse {
    HttpResponse::Ok().finish()
}

fn retry_after(response: &actix_web::dev::ServiceResponse) -> u64 {
    response
        .headers()
        .get("retry-after")
        .expect("a 409 has Retry-After")
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[actix_web::test]
async fn retry_after_on_a_409_is_the_holders_remaining_ttl_rounded_up() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let app = test::init_service(
        App::new()
            .app_data(web::Data::new(client.clone()))
            .service(busy)
            .service(busy_permits),
    )
    .await;
    for lease_ms in [7_000u64, 2_500] {
        let lease = Duration::from_millis(lease_ms);
        let name = format!("busy:{lease_ms}");
        let started = Instant::now();
        let holder = client
            .lock(&name)
            .unwrap()
            .acquire_with(AcquireOptions::new().lease(lease))
            .await
            .unwrap();
        let request = test::TestRequest::post()
            .uri(&format!("/busy/{lease_ms}"))
            .to_request();
        let response = test::call_service(&app, request).await;
        let elapsed = started.elapsed().as_millis() as u64;
        assert_eq!(response.status(), StatusCode::CONFLICT);
        // The TTL read lies between the lease less the time since the acquire and the lease.
        let highest = lease_ms.div_ceil(1000);
        let lowest = lease_ms.saturating_sub(elapsed).div_ceil(1000).max(1);
        let seconds = retry_after(&response);
        assert!(
            (lowest..=highest).contains(&seconds),
            "lease {lease_ms} ms, {elapsed} ms later: Retry-After {seconds}, not in {lowest}..={highest}"
        );
        holder.unlock().await.unwrap();
    }
    // Permits have no TTL to read: Retry-After stays 1.
    let semaphore = client.semaphore("permits:busy").unwrap();
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let taken = semaphore.acquire(1).await.unwrap();
    let request = test::TestRequest::post().uri("/permits").to_request();
    let response = test::call_service(&app, request).await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    assert_eq!(retry_after(&response), 1);
    taken.release().await.unwrap();
}
