// A fn that is not an actix-web handler answers a lock it cannot take with `Err(…)`: it
// must return a `Result`.
use actix_distributed_lock::{distributed_lock, LockClient};

#[distributed_lock("order:<id>", client = client)]
async fn count(client: &LockClient, id: u64) -> u32 {
    let _ = (client, id);
    1
}

#[distributed_lock("order:<id>", client = client)]
async fn nothing(client: &LockClient, id: u64) {
    let _ = (client, id);
}

fn main() {}
