//! What Redis holds for permit-expirable semaphores, read straight from the keys.

use super::RedisServer;
use redis::AsyncCommands;

/// Milliseconds the permit `id` (32 hex digits) of semaphore `name` has left, by the
/// server's clock; `None` when it is not in the semaphore's timeout zset.
pub async fn permit_left(server: &RedisServer, name: &str, id: &str) -> Option<i64> {
    let mut conn = server.conn().await;
    let raw: Vec<u8> = (0..id.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&id[i..i + 2], 16).unwrap())
        .collect();
    let score: Option<f64> = conn
        .zscore(format!("{{{name}}}:timeout"), raw)
        .await
        .unwrap();
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    score.map(|expiry| expiry as i64 - (secs * 1000 + micros / 1000))
}
