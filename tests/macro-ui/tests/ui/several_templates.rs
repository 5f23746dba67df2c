use actix_distributed_lock::{distributed_lock, LockClient, LockError};

// Several templates make a MultiLock; a fenced one would have one token per member, which
// the single `fencing_token()` cannot return.
#[distributed_lock("order:<id>", "stock:<sku>", client = client, kind = fenced)]
async fn pay(client: &LockClient, id: u64, sku: &str) -> Result<(), LockError> {
    let _ = (client, id, sku);
    Ok(())
}

fn main() {}
