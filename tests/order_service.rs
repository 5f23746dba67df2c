//! The example shop, driven in-process through `actix_web::test` against a real Redis.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

#[allow(dead_code)]
#[path = "../examples/order_service.rs"]
mod order_service;

use actix_distributed_lock::{distributed_lock, LockClient};
use actix_web::{http::StatusCode, post, test, web, App, HttpResponse};
use futures_util::FutureExt;
use order_service::{keys, Shop, ShopError};
use redis::AsyncCommands;
use std::time::{Duration, Instant};
use support::RedisServer;

/// The shop app with a lock client and the given gateway delay, plus any extra services.
macro_rules! shop_app {
    ($server:expr, $delay:expr $(, $extra:expr)*) => {{
        let locks = support::client(&$server).await;
        let shop = Shop::connect(&$server.url(), $delay).await.unwrap();
        let app = test::init_service(
            App::new()
                .app_data(web::Data::new(shop))
                .app_data(web::Data::new(locks.clone()))
                .configure(order_service::configure)
                $(.service($extra))*,
        )
        .await;
        (app, locks)
    }};
}

async fn create_order(
    app: &impl actix_web::dev::Service<
        actix_http::Request,
        Response = actix_web::dev::ServiceResponse,
        Error = actix_web::Error,
    >,
) -> u64 {
    let request = test::TestRequest::post()
        .uri("/orders")
        .set_json(serde_json::json!({"sku": "w", "qty": 1, "amount_cents": 500}))
        .to_request();
    let body: serde_json::Value = test::call_and_read_body_json(app, request).await;
    body["id"].as_u64().unwrap()
}

async fn payments(server: &RedisServer, id: u64) -> u64 {
    let mut conn = server.conn().await;
    conn.get::<_, Option<u64>>(keys::payments(id))
        .await
        .unwrap()
        .unwrap_or(0)
}

fn pay(id: u64, route: &str) -> actix_http::Request {
    test::TestRequest::post()
        .uri(&format!("/orders/{id}/{route}"))
        .to_request()
}

#[actix_web::test]
async fn two_hundred_waiting_pays_of_one_order_pay_it_exactly_once() {
    let server = RedisServer::start();
    let (app, _locks) = shop_app!(server, Duration::from_millis(2));
    let id = create_order(&app).await;
    let responses =
        futures_util::future::join_all((0..200).map(|_| test::call_service(&app, pay(id, "pay"))))
            .await;
    let mut statuses = Vec::new();
    for response in responses {
        assert_eq!(response.status(), StatusCode::OK);
        let body: serde_json::Value = test::read_body_json(response).await;
        statuses.push(body["status"].as_str().unwrap().to_string());
    }
    assert_eq!(statuses.iter().filter(|s| *s == "paid").count(), 1);
    assert_eq!(
        statuses.iter().filter(|s| *s == "already_paid").count(),
        199
    );
    assert_eq!(payments(&server, id).await, 1);
}

#[actix_web::test]
async fn two_hundred_pay_now_requests_pay_once_and_the_rest_get_409() {
    let server = RedisServer::start();
    let (app, _locks) = shop_app!(server, Duration::from_millis(200));
    let id = create_order(&app).await;
    // Four waves of 50, 40 ms apart: all inside the first payment's 200 ms, so later waves
    // find the lock held by a body that is still running.
    let waves = (0..200).map(|i| {
        let app = &app;
        async move {
            tokio::time::sleep(Duration::from_millis(40) * (i / 50)).await;
            test::call_service(app, pay(id, "pay-now")).await
        }
    });
    let responses = futures_util::future::join_all(waves).await;
    let conflicts = responses
        .iter()
        .filter(|r| r.status() == StatusCode::CONFLICT)
        .count();
    let ok = responses
        .iter()
        .filter(|r| r.status() == StatusCode::OK)
        .count();
    assert_eq!(ok + conflicts, 200, "only 200 and 409 answers");
    assert!(
        conflicts >= 100,
        "the 200 ms payment should turn most away, got {conflicts} x 409"
    );
    assert_eq!(payments(&server, id).await, 1);
}

#[actix_web::test]
async fn different_orders_are_paid_in_parallel_not_under_one_global_lock() {
    let server = RedisServer::start();
    let delay = Duration::from_millis(200);
    let (app, _locks) = shop_app!(server, delay);
    let mut ids = Vec::new();
    for _ in 0..10 {
        ids.push(create_order(&app).await);
    }
    let started = Instant::now();
    let responses = futures_util::future::join_all(
        ids.iter()
            .map(|id| test::call_service(&app, pay(*id, "pay"))),
    )
    .await;
    let wall = started.elapsed();
    assert!(responses.iter().all(|r| r.status() == StatusCode::OK));
    let serial = delay * ids.len() as u32;
    assert!(
        wall < serial / 2,
        "10 payments took {wall:?}; one after another would be {serial:?}"
    );
    for id in ids {
        assert_eq!(payments(&server, id).await, 1);
    }
}

#[post("/fail/{id}")]
#[distributed_lock("order:<id>")]
async fn fails_with_question_mark(id: web::Path<u64>) -> Result<HttpResponse, ShopError> {
    Err(ShopError::NotFound(*id))?;
    Ok(HttpResponse::Ok().finish())
}

#[post("/panic/{id}")]
#[distributed_lock("order:<id>")]
async fn panics(id: web::Path<u64>) -> HttpResponse {
    panic!("handler for order {id} blew up");
}

#[post("/slow/{id}")]
#[distributed_lock("order:<id>")]
async fn slow(id: web::Path<u64>) -> HttpResponse {
    tokio::time::sleep(Duration::from_secs(30)).await;
    HttpResponse::Ok().body(id.to_string())
}

#[actix_web::test]
async fn question_mark_panic_and_dropped_requests_all_release_the_lock() {
    let server = RedisServer::start();
    let (app, locks) = shop_app!(
        server,
        Duration::ZERO,
        fails_with_question_mark,
        panics,
        slow
    );
    let lock = locks.lock("order:9").unwrap();

    let response =
        test::call_service(&app, test::TestRequest::post().uri("/fail/9").to_request()).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert!(
        !lock.is_locked().await.unwrap(),
        "released before the response"
    );

    let request = test::TestRequest::post().uri("/panic/9").to_request();
    let outcome = std::panic::AssertUnwindSafe(test::call_service(&app, request))
        .catch_unwind()
        .await;
    assert!(outcome.is_err(), "the handler panicked");
    support::eventually(
        "the panicked handler's lock is released",
        Duration::from_secs(5),
        || async { !lock.is_locked().await.unwrap() },
    )
    .await;

    let request = test::TestRequest::post().uri("/slow/9").to_request();
    let call = test::call_service(&app, request);
    assert!(tokio::time::timeout(Duration::from_millis(300), call)
        .await
        .is_err());
    support::eventually(
        "the dropped request's lock is released",
        Duration::from_secs(5),
        || async { !lock.is_locked().await.unwrap() },
    )
    .await;
    assert_eq!(locks.watched_holds(), 0);
}

#[distributed_lock("order:<id>", client = locks)]
async fn hold_count_inside(
    locks: &web::Data<LockClient>,
    id: u64,
) -> Result<u32, actix_distributed_lock::LockError> {
    let owner = actix_distributed_lock::LockOwner::current().unwrap();
    locks.lock(&format!("order:{id}"))?.hold_count(owner).await
}

#[post("/nested/{id}")]
#[distributed_lock("order:<id>")]
async fn nested(locks: web::Data<LockClient>, id: web::Path<u64>) -> HttpResponse {
    match hold_count_inside(&locks, *id).await {
        Ok(holds) => HttpResponse::Ok().json(holds),
        Err(e) => HttpResponse::InternalServerError().body(e.to_string()),
    }
}

#[actix_web::test]
async fn a_nested_annotated_call_reenters_the_handlers_lock() {
    let server = RedisServer::start();
    let (app, _locks) = shop_app!(server, Duration::ZERO, nested);
    let request = test::TestRequest::post().uri("/nested/5").to_request();
    let call = test::call_and_read_body_json(&app, request);
    let holds: u32 = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("the nested call deadlocked");
    assert_eq!(holds, 2);
    assert_eq!(
        server
            .keys()
            .await
            .iter()
            .filter(|k| k.starts_with("order:"))
            .count(),
        0
    );
}

#[actix_web::test]
async fn a_busy_lock_is_409_with_an_exact_json_body_and_retry_after() {
    let server = RedisServer::start();
    let (app, locks) = shop_app!(server, Duration::ZERO);
    let id = create_order(&app).await;
    let held = locks
        .lock(&format!("order:{id}"))
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let response = test::call_service(&app, pay(id, "pay-now")).await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    // Retry-After is the holder's remaining watchdog lease (30 s by default), rounded up.
    let retry_after: u64 = response
        .headers()
        .get("retry-after")
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((2..=30).contains(&retry_after), "Retry-After {retry_after}");
    assert_eq!(
        response.headers().get("content-type").unwrap(),
        "application/json"
    );
    let body: serde_json::Value = test::read_body_json(response).await;
    let object = body.as_object().unwrap();
    let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["error", "lock", "waited_ms"]);
    assert_eq!(body["error"], "lock_timeout");
    assert_eq!(body["lock"], format!("order:{id}"));
    assert!(body["waited_ms"].as_u64().unwrap() < 1000);
    held.unlock().await.unwrap();
    assert_eq!(payments(&server, id).await, 0);
}

#[actix_web::test]
async fn a_missing_lock_client_is_a_clear_500() {
    let server = RedisServer::start();
    let shop = Shop::connect(&server.url(), Duration::ZERO).await.unwrap();
    let app = test::init_service(
        App::new()
            .app_data(web::Data::new(shop))
            .configure(order_service::configure),
    )
    .await;
    let response = test::call_service(&app, pay(1, "pay")).await;
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let body: serde_json::Value = test::read_body_json(response).await;
    assert_eq!(body["error"], "lock_client_missing");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("app_data(web::Data::new("),
        "{body}"
    );
}

#[actix_web::test]
async fn redis_unreachable_is_503() {
    let mut server = RedisServer::start();
    let locks = LockClient::connect(
        actix_distributed_lock::ClientConfig::new(server.url())
            .response_timeout(Duration::from_millis(500))
            .connect_timeout(Duration::from_millis(500)),
    )
    .await
    .unwrap();
    let shop = Shop::connect(&server.url(), Duration::ZERO).await.unwrap();
    let app = test::init_service(
        App::new()
            .app_data(web::Data::new(shop))
            .app_data(web::Data::new(locks))
            .configure(order_service::configure),
    )
    .await;
    server.stop();
    let started = Instant::now();
    let response = test::call_service(&app, pay(1, "pay")).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(started.elapsed() < Duration::from_secs(3));
    let body: serde_json::Value = test::read_body_json(response).await;
    assert_eq!(body["error"], "lock_unavailable");
    assert_eq!(body["lock"], "order:1");
}

#[derive(serde::Deserialize)]
struct Line {
    sku: String,
}

/// Which lock the handler holds, as its own lock client sees it.
async fn held_names(locks: &LockClient, names: &[&str]) -> Vec<String> {
    let mut held = Vec::new();
    for name in names {
        if locks.lock(name).unwrap().is_locked().await.unwrap() {
            held.push(name.to_string());
        }
    }
    held
}

#[post("/json")]
#[distributed_lock("stock:<line.sku>")]
async fn locks_a_json_field(
    locks: web::Data<LockClient>,
    web::Json(line): web::Json<Line>,
) -> HttpResponse {
    HttpResponse::Ok().json(held_names(&locks, &["stock:A-7"]).await)
}

#[post("/shops/{shop}/orders/{id}")]
#[distributed_lock("{<path.0>}:order:<path.1>")]
async fn locks_destructured_path(
    locks: web::Data<LockClient>,
    path: web::Path<(String, u64)>,
) -> HttpResponse {
    let name = format!("{{{}}}:order:{}", path.0, path.1);
    HttpResponse::Ok().json(held_names(&locks, &[name.as_str()]).await)
}

#[actix_web::test]
async fn templates_reach_destructured_json_and_path_tuple_fields() {
    let server = RedisServer::start();
    let (app, _locks) = shop_app!(
        server,
        Duration::ZERO,
        locks_a_json_field,
        locks_destructured_path
    );
    let request = test::TestRequest::post()
        .uri("/json")
        .set_json(serde_json::json!({"sku": "A-7"}))
        .to_request();
    let held: Vec<String> = test::call_and_read_body_json(&app, request).await;
    assert_eq!(held, ["stock:A-7"]);
    let request = test::TestRequest::post()
        .uri("/shops/east/orders/3")
        .to_request();
    let held: Vec<String> = test::call_and_read_body_json(&app, request).await;
    assert_eq!(held, ["{east}:order:3"]);
    assert_eq!(
        server
            .keys()
            .await
            .iter()
            .filter(|k| !k.starts_with("shop:"))
            .count(),
        0
    );
}
