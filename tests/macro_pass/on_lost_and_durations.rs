// `on_lost` takes `stop` or `keep_running`, on every form (one lock, a MultiLock, permits
// that can be lost, a handler); durations are humantime's (`"1m 30s"`, `"1.5s"`,
// `"5 seconds"`).
use actix_distributed_lock::{distributed_lock, LockClient, LockError};
use actix_web::{web, HttpResponse};

#[distributed_lock("order:<id>", client = client, on_lost = stop, wait = "1m 30s")]
async fn stop(client: &LockClient, id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[distributed_lock("order:<id>", client = client, on_lost = keep_running, lease = "1.5s")]
async fn keep_running(client: &LockClient, id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[distributed_lock("order:<id>", "stock:<sku>", client = client, on_lost = stop, wait = "5 seconds")]
async fn both(client: &LockClient, id: u64, sku: &str) -> Result<u64, LockError> {
    Ok(id + sku.len() as u64)
}

#[distributed_lock("uploads", client = client, kind = expirable_semaphore, on_lost = stop)]
async fn upload(client: &LockClient) -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock("order:<id>", on_lost = stop)]
async fn handler(id: web::Path<u64>) -> HttpResponse {
    HttpResponse::Ok().body(id.to_string())
}

#[distributed_lock("order:<id>", "stock:<sku>", on_lost = stop)]
async fn multi_handler(id: web::Path<u64>, sku: web::Query<String>) -> HttpResponse {
    HttpResponse::Ok().body(format!("{id} {sku}"))
}

pub fn check() {
    // Compiling is the check; nothing needs to run.
    let _ = (stop, keep_running, both, upload, handler, multi_handler);
}
