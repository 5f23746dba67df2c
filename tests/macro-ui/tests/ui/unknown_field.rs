// A field of a parameter misspelled in the template: the error points at the template.
use actix_distributed_lock::{distributed_lock, LockClient, LockError};

struct Order {
    id: u64,
    sku: String,
}

#[distributed_lock("order:<order.id>:<order.skuu>", client = client)]
async fn pay(client: &LockClient, order: &Order) -> Result<(), LockError> {
    let _ = (client, &order.sku);
    Ok(())
}

fn main() {}
