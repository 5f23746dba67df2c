use actix_distributed_lock::{distributed_lock, LockClient, LockError};

// No `kind` is the reentrant lock, which has one holder: `permits` is refused on `permits`.
#[distributed_lock("order:<id>", client = client, permits = 3)]
async fn work(client: &LockClient, id: u64) -> Result<(), LockError> {
    let _ = (client, id);
    Ok(())
}

fn main() {}
