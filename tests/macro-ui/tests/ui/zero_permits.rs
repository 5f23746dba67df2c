use actix_distributed_lock::{distributed_lock, LockClient, LockError};

#[distributed_lock("pool:<id>", client = client, kind = expirable_semaphore, permits = 0)]
async fn work(client: &LockClient, id: u64) -> Result<(), LockError> {
    let _ = (client, id);
    Ok(())
}

fn main() {}
