//! The `Retry-After` of the 409 an annotated handler answers a busy lock with: a watchdog
//! lock's TTL stays near its whole lease however short its holds are, so the handler
//! answers what its own holds typically last (capped by the TTL); `retry_after = "…"` on
//! the attribute sets it outright.

// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]

use actix_distributed_lock::distributed_lock;
use actix_web::{http::StatusCode, post, test, web, App, HttpResponse};
use std::time::Duration;
use support::RedisServer;

/// How long a `slow` hold lasts: a little over 2 s, so its hint rounds up to 3 s.
const HOLD: Duration = Duration::from_millis(2_200);

#[post("/slow/{id}")]
#[distributed_lock("slow:<id>", wait = "0s")]
async fn slow(id: web::Path<u32>) -> HttpResponse {
    let _ = id;
    tokio::time::sleep(HOLD).await;
    HttpResponse::Ok().finish()
}

#[post("/told/{id}")]
#[distributed_lock("told:<id>", wait = "0s", retry_after = "7s")]
async fn told(id: web::Path<u32>) -> HttpResponse {
    let _ = id;
    HttpResponse::Ok().finish()
}

fn retry_after(response: &actix_web::dev::ServiceResponse) -> u64 {
    let value = response.headers().get("retry-after");
    let value = value.expect("a 409 has Retry-After").to_str().unwrap();
    value.parse().unwrap()
}

#[actix_web::test]
async fn a_watchdog_lock_busy_with_short_holds_answers_the_typical_hold_not_its_lease() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let app = test::init_service(
        App::new()
            .app_data(web::Data::new(client.clone()))
            .service(slow),
    )
    .await;
    // No hold of this handler seen yet: the holder's TTL, near the 30 s watchdog lease.
    let holder = client.lock("slow:1").unwrap().acquire().await.unwrap();
    let request = test::TestRequest::post().uri("/slow/1").to_request();
    let response = test::call_service(&app, request).await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let first = retry_after(&response);
    assert!((20..=30).contains(&first), "Retry-After {first}");
    holder.unlock().await.unwrap();

    // One hold of 2.2 s seen: a busy lock is worth trying again in about that.
    let request = test::TestRequest::post().uri("/slow/1").to_request();
    assert_eq!(
        test::call_service(&app, request).await.status(),
        StatusCode::OK
    );
    let holder = client.lock("slow:2").unwrap().acquire().await.unwrap();
    let request = test::TestRequest::post().uri("/slow/2").to_request();
    let response = test::call_service(&app, request).await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    // 2.2 s and the acquire and release around it, rounded up to whole seconds.
    let hinted = retry_after(&response);
    assert!((3..=5).contains(&hinted), "Retry-After {hinted}");
    holder.unlock().await.unwrap();
    client.close().await;
}

#[actix_web::test]
async fn retry_after_on_the_attribute_is_sent_as_is() {
    let server = RedisServer::start();
    let client = support::client(&server).await;
    let app = test::init_service(
        App::new()
            .app_data(web::Data::new(client.clone()))
            .service(told),
    )
    .await;
    let holder = client.lock("told:1").unwrap().acquire().await.unwrap();
    let request = test::TestRequest::post().uri("/told/1").to_request();
    let response = test::call_service(&app, request).await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    assert_eq!(retry_after(&response), 7);
    holder.unlock().await.unwrap();
    client.close().await;
}
