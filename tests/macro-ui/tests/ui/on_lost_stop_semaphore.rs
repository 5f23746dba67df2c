use actix_distributed_lock::{distributed_lock, LockClient, LockError};

#[distributed_lock("uploads", client = client, kind = semaphore, on_lost = stop)]
async fn upload(client: &LockClient) -> Result<(), LockError> {
    let _ = client;
    Ok(())
}

fn main() {}
