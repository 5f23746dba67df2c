#![cfg(feature = "metrics")]
// The futures of the support crate's async fns nest deeper than rustc's default query depth.
#![recursion_limit = "256"]
//! The metrics example (`examples/metrics_service.rs`), driven in-process through
//! `actix_web::test` against a real Redis: traffic on one order's lock, then `/metrics`
//! scraped and its figures checked (exact counts; timings only for being there).

#[path = "../examples/metrics_service.rs"]
mod metrics_service;

use actix_web::{http::StatusCode, test, web, App};
use metrics_service::order_service::Shop;
use std::time::Duration;
use support::RedisServer;

/// The value of series `name` with exactly `labels` on the page, if it is there.
fn figure(page: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut wanted: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    wanted.sort();
    page.lines().find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (series_name, rest) = series.split_once('{').unwrap_or((series, "}"));
        let mut found: Vec<String> = rest
            .trim_end_matches('}')
            .split(',')
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        found.sort();
        (series_name == name && found == wanted).then(|| value.parse().ok())?
    })
}

#[actix_web::test]
async fn metrics_page_counts_the_traffic_on_one_order_exactly() {
    let server = RedisServer::start();
    let prometheus = metrics_service::install_recorder().unwrap();
    let locks = support::client(&server).await;
    let shop = Shop::connect(&server.url(), Duration::from_millis(2))
        .await
        .unwrap();
    let app = test::init_service(
        App::new()
            .app_data(web::Data::new(shop))
            .app_data(web::Data::new(locks.clone()))
            .app_data(web::Data::new(prometheus))
            .configure(metrics_service::configure),
    )
    .await;
    let scrape = || async {
        let request = test::TestRequest::get().uri("/metrics").to_request();
        let body = test::call_and_read_body(&app, request).await;
        String::from_utf8(body.to_vec()).unwrap()
    };
    let request = test::TestRequest::post()
        .uri("/orders")
        .set_json(serde_json::json!({"sku": "w", "qty": 1, "amount_cents": 500}))
        .to_request();
    let body: serde_json::Value = test::call_and_read_body_json(&app, request).await;
    let id = body["id"].as_u64().unwrap();

    // Another process (a client of its own) holds the order's lock.
    let other = support::client(&server).await;
    let held = other
        .lock(&format!("order:{id}"))
        .unwrap()
        .acquire()
        .await
        .unwrap();
    // A pay-now finds it busy: 409, a timeout.
    let request = test::TestRequest::post()
        .uri(&format!("/orders/{id}/pay-now"))
        .to_request();
    assert_eq!(
        test::call_service(&app, request).await.status(),
        StatusCode::CONFLICT
    );
    // Five pays wait for it, in this process's queue.
    const PAYS: usize = 5;
    let pays = futures_util::future::join_all((0..PAYS).map(|_| {
        let request = test::TestRequest::post()
            .uri(&format!("/orders/{id}/pay"))
            .to_request();
        test::call_service(&app, request)
    }));
    let release = async {
        let waiters =
            |page: &str| figure(page, "distributed_lock_waiters", &[("kind", "reentrant")]);
        support::eventually("five queued pays", Duration::from_secs(10), || async {
            waiters(&scrape().await) == Some(PAYS as f64)
        })
        .await;
        held.unlock().await.unwrap();
    };
    let (responses, ()) = futures_util::join!(pays, release);
    assert!(responses.iter().all(|r| r.status() == StatusCode::OK));

    let page = scrape().await;
    let reentrant = [("kind", "reentrant")];
    let wait = "distributed_lock_acquire_wait_seconds_count";
    let acquired = [("kind", "reentrant"), ("outcome", "acquired")];
    let timed_out = [("kind", "reentrant"), ("outcome", "timeout")];
    // The other client's acquire and the five pays; the pay-now.
    assert_eq!(
        figure(&page, wait, &acquired),
        Some(1.0 + PAYS as f64),
        "{page}"
    );
    assert_eq!(figure(&page, wait, &timed_out), Some(1.0), "{page}");
    let timeouts = "distributed_lock_acquire_timeouts_total";
    assert_eq!(figure(&page, timeouts, &reentrant), Some(1.0), "{page}");
    // Every pay and the pay-now found the lock taken at first.
    let contended = "distributed_lock_contended_acquires_total";
    assert_eq!(
        figure(&page, contended, &reentrant),
        Some(1.0 + PAYS as f64),
        "{page}"
    );
    let holds = "distributed_lock_hold_seconds_count";
    assert_eq!(
        figure(&page, holds, &reentrant),
        Some(1.0 + PAYS as f64),
        "{page}"
    );
    assert_eq!(
        figure(&page, "distributed_lock_waiters", &reentrant),
        Some(0.0),
        "{page}"
    );
    // Histograms come with buckets, and the help text the client described.
    let le = [
        ("kind", "reentrant"),
        ("outcome", "acquired"),
        ("le", "+Inf"),
    ];
    let bucket = "distributed_lock_acquire_wait_seconds_bucket";
    assert_eq!(
        figure(&page, bucket, &le),
        Some(1.0 + PAYS as f64),
        "{page}"
    );
    assert!(
        page.contains("# HELP distributed_lock_acquire_wait_seconds"),
        "{page}"
    );
    // No lock names as labels unless asked for.
    assert!(!page.contains(&format!("order:{id}")), "{page}");
    locks.shutdown();
    other.shutdown();
}
