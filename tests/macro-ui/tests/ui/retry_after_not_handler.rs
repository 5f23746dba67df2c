use actix_distributed_lock::{distributed_lock, LockError};

#[distributed_lock("job:<id>", retry_after = "2s")]
async fn job(id: u32) -> Result<u32, LockError> {
    Ok(id)
}

fn main() {}
