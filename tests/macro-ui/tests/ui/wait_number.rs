use actix_distributed_lock::{distributed_lock, LockClient, LockError};

#[distributed_lock("order:<id>", client = client, wait = 5)]
async fn pay(client: &LockClient, id: u64) -> Result<(), LockError> {
    let _ = (client, id);
    Ok(())
}

fn main() {}
