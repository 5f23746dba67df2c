//! A small actix-web shop whose state lives in Redis, locked with `#[distributed_lock]`.
//!
//! - `POST /orders` creates an order; `GET /orders/{id}` reads it.
//! - `POST /orders/{id}/pay` pays it, under lock `order:<id>`, waiting up to 5 s for it;
//!   `POST /orders/{id}/pay-now` does the same but answers 409 at once if the lock is busy.
//! - `PUT /stock/{sku}` sets a stock count; `POST /stock/{sku}/reserve` takes from it under
//!   lock `stock:<sku>`.
//!
//! - With the `inspector` feature, `/locks` is the inspector page: which locks are held,
//!   by whom, who waits (`INSPECTOR_FORCE_UNLOCK=1` also turns on its force-unlock button).
//!
//! Every read-modify-write here is two separate Redis commands: only the lock keeps two
//! requests from paying one order twice or selling stock that is gone.
//!
//! Run `cargo run --example order_service -- redis://127.0.0.1:6379/` to serve on
//! 127.0.0.1:8080 (or `$PORT`), or add `--demo` to fire a burst of requests at it and print
//! what happened (`scripts/demo` does that against a throwaway Redis).

use actix_distributed_lock::{distributed_lock, ClientConfig, LockClient};
use actix_web::{get, post, put, web, App, HttpResponse, HttpServer, ResponseError};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The shop's own Redis connection and settings (the lock client is separate app data).
pub struct Shop {
    redis: redis::aio::MultiplexedConnection,
    /// How long the (pretend) payment gateway takes; the lock is held meanwhile.
    gateway_delay: Duration,
}

impl Shop {
    pub async fn connect(url: &str, gateway_delay: Duration) -> redis::RedisResult<Shop> {
        let redis = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await?;
        Ok(Shop {
            redis,
            gateway_delay,
        })
    }
}

/// The shop's keys, built in one place.
pub mod keys {
    pub fn next_order_id() -> &'static str {
        "shop:next-order-id"
    }
    pub fn order(id: u64) -> String {
        format!("shop:order:{id}")
    }
    pub fn payments(id: u64) -> String {
        format!("shop:payments:{id}")
    }
    pub fn stock(sku: &str) -> String {
        format!("shop:stock:{sku}")
    }
}

#[derive(Debug)]
pub enum ShopError {
    NotFound(u64),
    Redis(redis::RedisError),
}

impl std::fmt::Display for ShopError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShopError::NotFound(id) => write!(f, "order {id} does not exist"),
            ShopError::Redis(e) => write!(f, "redis: {e}"),
        }
    }
}

impl From<redis::RedisError> for ShopError {
    fn from(e: redis::RedisError) -> Self {
        ShopError::Redis(e)
    }
}

impl ResponseError for ShopError {
    fn error_response(&self) -> HttpResponse {
        match self {
            ShopError::NotFound(id) => HttpResponse::NotFound()
                .json(serde_json::json!({"error": "not_found", "order": id})),
            ShopError::Redis(_) => HttpResponse::InternalServerError()
                .json(serde_json::json!({"error": "storage", "message": self.to_string()})),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct NewOrder {
    pub sku: String,
    pub qty: u32,
    pub amount_cents: u64,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Quantity {
    pub qty: i64,
}

#[post("/orders")]
pub async fn create_order(
    shop: web::Data<Shop>,
    order: web::Json<NewOrder>,
) -> Result<HttpResponse, ShopError> {
    let mut redis = shop.redis.clone();
    let id: u64 = redis.incr(keys::next_order_id(), 1).await?;
    let fields = [
        ("status", "created".to_string()),
        ("sku", order.sku.clone()),
        ("qty", order.qty.to_string()),
        ("amount_cents", order.amount_cents.to_string()),
    ];
    redis
        .hset_multiple::<_, _, _, ()>(keys::order(id), &fields)
        .await?;
    Ok(HttpResponse::Created().json(serde_json::json!({"id": id})))
}

#[get("/orders/{id}")]
pub async fn get_order(
    shop: web::Data<Shop>,
    id: web::Path<u64>,
) -> Result<HttpResponse, ShopError> {
    let mut redis = shop.redis.clone();
    let order: std::collections::HashMap<String, String> = redis.hgetall(keys::order(*id)).await?;
    if order.is_empty() {
        return Err(ShopError::NotFound(*id));
    }
    let payments: u64 = redis.get(keys::payments(*id)).await.unwrap_or(0);
    Ok(HttpResponse::Ok()
        .json(serde_json::json!({"id": *id, "order": order, "payments": payments})))
}

/// Waits its turn (up to 5 s) for the order's lock.
#[post("/orders/{id}/pay")]
#[distributed_lock("order:<id>", wait = "5s")]
pub async fn pay(shop: web::Data<Shop>, id: web::Path<u64>) -> Result<HttpResponse, ShopError> {
    pay_once(&shop, *id).await
}

/// Refuses at once (409) when another request holds the order's lock.
#[post("/orders/{id}/pay-now")]
#[distributed_lock("order:<id>", wait = "0s")]
pub async fn pay_now(shop: web::Data<Shop>, id: web::Path<u64>) -> Result<HttpResponse, ShopError> {
    pay_once(&shop, *id).await
}

/// Read the status, call the gateway, write the status: safe only under the order's lock.
async fn pay_once(shop: &Shop, id: u64) -> Result<HttpResponse, ShopError> {
    let mut redis = shop.redis.clone();
    let status: Option<String> = redis.hget(keys::order(id), "status").await?;
    match status.as_deref() {
        None => Err(ShopError::NotFound(id)),
        Some("paid") => {
            Ok(HttpResponse::Ok().json(serde_json::json!({"id": id, "status": "already_paid"})))
        }
        Some(_) => {
            tokio::time::sleep(shop.gateway_delay).await; // the payment gateway
            redis
                .hset::<_, _, _, ()>(keys::order(id), "status", "paid")
                .await?;
            redis.incr::<_, _, ()>(keys::payments(id), 1).await?;
            Ok(HttpResponse::Ok().json(serde_json::json!({"id": id, "status": "paid"})))
        }
    }
}

#[put("/stock/{sku}")]
pub async fn set_stock(
    shop: web::Data<Shop>,
    sku: web::Path<String>,
    body: web::Json<Quantity>,
) -> Result<HttpResponse, ShopError> {
    let mut redis = shop.redis.clone();
    redis.set::<_, _, ()>(keys::stock(&sku), body.qty).await?;
    Ok(HttpResponse::NoContent().finish())
}

#[post("/stock/{sku}/reserve")]
#[distributed_lock("stock:<sku>", wait = "5s")]
pub async fn reserve(
    shop: web::Data<Shop>,
    sku: web::Path<String>,
    body: web::Json<Quantity>,
) -> Result<HttpResponse, ShopError> {
    let mut redis = shop.redis.clone();
    let left: i64 = redis
        .get::<_, Option<i64>>(keys::stock(&sku))
        .await?
        .unwrap_or(0);
    if left < body.qty {
        return Ok(HttpResponse::Conflict()
            .json(serde_json::json!({"error": "insufficient_stock", "sku": *sku, "left": left})));
    }
    redis
        .set::<_, _, ()>(keys::stock(&sku), left - body.qty)
        .await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({"sku": *sku, "left": left - body.qty})))
}

/// Registers the shop's routes; the app must also carry `Data<Shop>` and `Data<LockClient>`.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(create_order)
        .service(get_order)
        .service(pay)
        .service(pay_now)
        .service(set_stock)
        .service(reserve);
}

/// The inspector page at `/locks` (feature `inspector`). Force-unlock releases a lock
/// whoever holds it, so it is off unless asked for; this shop reads the switch from
/// `INSPECTOR_FORCE_UNLOCK=1`. A real app mounts the page behind its own authentication
/// (an admin-only scope, a guard, a middleware): the page checks no credentials itself.
#[cfg(feature = "inspector")]
pub fn inspector_page(allow_force_unlock: bool) -> actix_web::Scope {
    actix_distributed_lock::inspect::page::InspectorPage::new()
        .allow_force_unlock(allow_force_unlock)
        .scope("/locks")
}

#[actix_web::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".into());
    let demo = args.any(|a| a == "--demo");
    let locks = LockClient::connect(ClientConfig::new(&url)).await?;
    let shop = web::Data::new(Shop::connect(&url, Duration::from_millis(5)).await?);
    let lock_data = web::Data::new(locks.clone());
    #[cfg(feature = "inspector")]
    let force_unlock = std::env::var("INSPECTOR_FORCE_UNLOCK").is_ok_and(|v| v == "1");
    let server = HttpServer::new(move || {
        let app = App::new()
            .app_data(shop.clone())
            .app_data(lock_data.clone())
            .configure(configure);
        #[cfg(feature = "inspector")]
        let app = app.service(inspector_page(force_unlock));
        app
    })
    .workers(2);
    if !demo {
        let port = std::env::var("PORT").unwrap_or_else(|_| "8080".into());
        println!("order service on http://127.0.0.1:{port}");
        #[cfg(feature = "inspector")]
        println!("inspector page on http://127.0.0.1:{port}/locks");
        server.bind(("127.0.0.1", port.parse()?))?.run().await?;
        // The server has stopped: releases of guards dropped on the way reach Redis.
        locks.close().await;
        return Ok(());
    }
    let server = server.bind(("127.0.0.1", 0))?;
    let addr = server.addrs()[0];
    let running = server.run();
    let handle = running.handle();
    actix_web::rt::spawn(running);
    let outcome = demo::burst(&format!("http://{addr}")).await;
    handle.stop(true).await;
    locks.close().await;
    outcome
}

/// The burst `--demo` fires: 200 concurrent pays of one order, and mixed traffic.
mod demo {
    use super::{NewOrder, Quantity};
    use std::time::{Duration, Instant};

    const ORDERS: u64 = 20;
    const HOT_PAYS: usize = 200;
    const STOCK: i64 = 100;
    const RESERVES: usize = 120;

    pub async fn burst(base: &str) -> Result<(), Box<dyn std::error::Error>> {
        let http = awc::Client::builder()
            .timeout(Duration::from_secs(30))
            .finish();
        let sku = format!("widget-{}", std::process::id());
        http.put(format!("{base}/stock/{sku}"))
            .send_json(&Quantity { qty: STOCK })
            .await?;
        let mut ids = Vec::new();
        for _ in 0..ORDERS {
            let order = NewOrder {
                sku: sku.clone(),
                qty: 1,
                amount_cents: 1999,
            };
            let mut created = http
                .post(format!("{base}/orders"))
                .send_json(&order)
                .await?;
            let body: serde_json::Value = created.json().await?;
            ids.push(body["id"].as_u64().ok_or("no order id")?);
        }
        println!("created {ORDERS} orders and {STOCK} units of {sku}");
        println!("firing {HOT_PAYS} concurrent pay-now for order {}, 5 pays for each other order, {RESERVES} reserves of 1 unit, and reads", ids[0]);

        let mut requests = Vec::new();
        for _ in 0..HOT_PAYS {
            requests.push(("pay-now", format!("{base}/orders/{}/pay-now", ids[0]), None));
        }
        for id in &ids[1..] {
            for _ in 0..5 {
                requests.push(("pay", format!("{base}/orders/{id}/pay"), None));
            }
        }
        for _ in 0..RESERVES {
            requests.push((
                "reserve",
                format!("{base}/stock/{sku}/reserve"),
                Some(Quantity { qty: 1 }),
            ));
        }
        for id in &ids {
            requests.push(("get", format!("{base}/orders/{id}"), None));
        }
        let started = Instant::now();
        let results =
            futures_util::future::join_all(requests.into_iter().map(|(what, url, body)| {
                let http = http.clone();
                async move {
                    let sent = Instant::now();
                    let status = match (what, body) {
                        ("get", _) => http.get(url).send().await.map(|r| r.status().as_u16()),
                        (_, Some(body)) => http
                            .post(url)
                            .send_json(&body)
                            .await
                            .map(|r| r.status().as_u16()),
                        (_, None) => http.post(url).send().await.map(|r| r.status().as_u16()),
                    };
                    (what, status.unwrap_or(0), sent.elapsed())
                }
            }))
            .await;
        let wall = started.elapsed();

        let count = |what: &str, status: u16| {
            results
                .iter()
                .filter(|(w, s, _)| *w == what && *s == status)
                .count()
        };
        let mut latencies: Vec<Duration> = results.iter().map(|(_, _, d)| *d).collect();
        latencies.sort();
        let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize];
        println!(
            "{} requests in {wall:.2?}; latency p50 {:.1?}, p99 {:.1?}",
            results.len(),
            pct(0.50),
            pct(0.99)
        );
        println!(
            "pay-now on the hot order: {} x 200, {} x 409 lock busy (lock_timeout)",
            count("pay-now", 200),
            count("pay-now", 409)
        );
        println!("pay (waits its turn): {} x 200", count("pay", 200));
        println!(
            "reserve: {} x 200, {} x 409 insufficient stock",
            count("reserve", 200),
            count("reserve", 409)
        );

        let mut paid_once = 0;
        for id in &ids {
            let mut response = http.get(format!("{base}/orders/{id}")).send().await?;
            let body: serde_json::Value = response.json().await?;
            if body["payments"].as_u64() == Some(1) && body["order"]["status"] == "paid" {
                paid_once += 1;
            } else {
                println!("order {id} is wrong: {body}");
            }
        }
        println!("orders paid exactly once: {paid_once} of {ORDERS}");
        let reserved = count("reserve", 200) as i64;
        let failures = results
            .iter()
            .filter(|(_, s, _)| *s == 0 || *s >= 500)
            .count();
        if paid_once != ORDERS || reserved != STOCK || failures > 0 {
            return Err(format!(
                "invariant broken: paid once {paid_once}/{ORDERS}, reserved {reserved}/{STOCK}, {failures} failed requests"
            )
            .into());
        }
        println!("ok: every order paid once, stock never oversold, no request failed");
        Ok(())
    }
}
