//! The order service of `order_service.rs`, with its lock metrics on `GET /metrics` in the
//! Prometheus text format (the `metrics` feature records; `metrics-exporter-prometheus`
//! renders; actix-web serves the page itself, so the exporter needs no HTTP listener).
//!
//! Run `cargo run --features metrics --example metrics_service -- redis://127.0.0.1:6379/`
//! to serve on 127.0.0.1:8080 (or `$PORT`), pay an order a few times, then
//! `curl http://127.0.0.1:8080/metrics`:
//!
//! ```text
//! distributed_lock_acquire_wait_seconds_count{kind="reentrant",outcome="acquired"} 3
//! distributed_lock_hold_seconds_count{kind="reentrant"} 3
//! distributed_lock_waiters{kind="reentrant"} 0
//! ```

#[allow(dead_code)]
#[path = "order_service.rs"]
pub mod order_service;

use actix_distributed_lock::{ClientConfig, LockClient};
use actix_web::{get, web, App, HttpResponse, HttpServer};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use order_service::Shop;
use std::time::Duration;

/// Buckets of every `_seconds` histogram: from 1 ms (an uncontended acquire) to 30 s (the
/// default wait).
const BUCKETS: &[f64] = &[0.001, 0.005, 0.025, 0.1, 0.5, 2.5, 10.0, 30.0];

/// Installs the process's Prometheus recorder, before the lock client starts (the client
/// describes its metrics to the recorder installed then). Call it once.
pub fn install_recorder() -> Result<PrometheusHandle, BuildError> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS)?
        .install_recorder()
}

/// The metrics page: everything recorded so far, in the Prometheus text format.
#[get("/metrics")]
pub async fn metrics(prometheus: web::Data<PrometheusHandle>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(prometheus.render())
}

/// The shop's routes and the metrics page (app data: `Shop`, `LockClient`,
/// `PrometheusHandle`).
pub fn configure(cfg: &mut web::ServiceConfig) {
    order_service::configure(cfg);
    cfg.service(metrics);
}

#[actix_web::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".into());
    let prometheus = web::Data::new(install_recorder()?);
    let locks = web::Data::new(LockClient::connect(ClientConfig::new(&url)).await?);
    let shop = web::Data::new(Shop::connect(&url, Duration::from_millis(5)).await?);
    let port = std::env::var("PORT").unwrap_or_else(|_| "8080".into());
    println!("order service with /metrics on http://127.0.0.1:{port}");
    let client = locks.clone();
    HttpServer::new(move || {
        App::new()
            .app_data(shop.clone())
            .app_data(locks.clone())
            .app_data(prometheus.clone())
            .configure(configure)
    })
    .workers(2)
    .bind(("127.0.0.1", port.parse()?))?
    .run()
    .await?;
    // The server has stopped: releases of guards dropped on the way reach Redis.
    client.close().await;
    Ok(())
}
