use actix_distributed_lock::{distributed_lock, LockClient, LockError};

// Several templates make a MultiLock, which is made of locks: not of semaphore permits.
#[distributed_lock("pool:<a>", "pool:<b>", client = client, kind = expirable_semaphore)]
async fn work(client: &LockClient, a: u64, b: u64) -> Result<(), LockError> {
    let _ = (client, a, b);
    Ok(())
}

fn main() {}
