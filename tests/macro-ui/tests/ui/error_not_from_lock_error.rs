// The error type of an annotated fn that is not a handler must be made from a `LockError`
// (or `on_fail = …` makes it).
use actix_distributed_lock::{distributed_lock, LockClient};

#[derive(Debug)]
struct PayError;

#[distributed_lock("order:<id>", client = client)]
async fn pay(client: &LockClient, id: u64) -> Result<u64, PayError> {
    let _ = client;
    Ok(id)
}

fn main() {}
