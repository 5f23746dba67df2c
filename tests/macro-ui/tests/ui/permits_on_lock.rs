use actix_distributed_lock::{distributed_lock, LockClient, LockError};

// A lock has one holder: `permits` is refused on `permits`.
#[distributed_lock("queue:<id>", client = client, kind = fair, permits = 2)]
async fn work(client: &LockClient, id: u64) -> Result<(), LockError> {
    let _ = (client, id);
    Ok(())
}

fn main() {}
