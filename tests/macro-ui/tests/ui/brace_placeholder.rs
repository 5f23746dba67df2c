use actix_distributed_lock::{distributed_lock, LockClient, LockError};

// `{id}` is a hash tag, not a placeholder: it would lock the text `order:{id}` for every id.
#[distributed_lock("order:{id}", client = client)]
async fn pay(client: &LockClient, id: u64) -> Result<(), LockError> {
    let _ = (client, id);
    Ok(())
}

fn main() {}
