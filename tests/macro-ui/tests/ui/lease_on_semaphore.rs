use actix_distributed_lock::{distributed_lock, LockClient, LockError};

// A plain semaphore's permits are held until released: a lease is refused on `lease`.
#[distributed_lock("pool:<id>", client = client, kind = semaphore, lease = "5s")]
async fn work(client: &LockClient, id: u64) -> Result<(), LockError> {
    let _ = (client, id);
    Ok(())
}

fn main() {}
