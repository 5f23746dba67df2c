use actix_distributed_lock::{distributed_lock, LockClient, LockError};

#[distributed_lock("order:<id>", "stock:<sku>", client = client)]
async fn pay(client: &LockClient, id: u64, sku: &str) -> Result<(), LockError> {
    let _ = (client, id, sku);
    Ok(())
}

fn main() {}
