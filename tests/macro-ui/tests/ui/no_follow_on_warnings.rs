use actix_distributed_lock::{distributed_lock, LockClient, LockError};

// The body uses none of its parameters (the lock was the point): after the attribute's
// error, rustc must not add `unused variable` warnings about them.
#[distributed_lock("order:<idd>", client = client)]
async fn pay(client: &LockClient, id: u64) -> Result<(), LockError> {
    Ok(())
}

fn main() {}
