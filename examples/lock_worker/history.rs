//! What the worker writes down: the history file, and the side connection that reads Redis
//! `TIME` and writes to the fenced store.

use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;
use serde_json::{json, Value};
use std::fs::File;
use std::io::Write;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// The fenced store: accept `ARGV[1]` (a token) when it is at least the highest accepted.
pub const STORE_SCRIPT: &str = r"
-- | KEYS[1] | the store hash: `token` = highest accepted token, `by` = its writer |
-- | ARGV[1] | the writer's fencing token | ARGV[2] | who writes                 |
-- | returns | {accepted 1/0, TIME seconds, TIME microseconds, highest before}   |
local max = tonumber(redis.call('hget', KEYS[1], 'token') or '0')
local t = redis.call('time')
if tonumber(ARGV[1]) >= max then
    redis.call('hset', KEYS[1], 'token', ARGV[1], 'by', ARGV[2])
    return {1, tonumber(t[1]), tonumber(t[2]), max}
end
return {0, tonumber(t[1]), tonumber(t[2]), max}
";

/// Microseconds since the Unix epoch on this process' wall clock.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// The history file: one JSON object per line, each written with a single `write(2)`.
pub struct History {
    pub file: Mutex<File>,
    pub worker: u64,
}

impl History {
    pub fn log(&self, task: usize, event: &str, mut fields: Value) {
        if let Value::Object(map) = &mut fields {
            map.insert("ev".into(), json!(event));
            map.insert("worker".into(), json!(self.worker));
            map.insert("task".into(), json!(task));
        }
        let mut line = fields.to_string();
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        // A history that cannot be written makes the run worthless: say so loudly.
        if let Err(e) = file.write_all(line.as_bytes()) {
            eprintln!("lock_worker: cannot write history: {e}");
        }
    }
}

/// A side connection for `TIME` and the store, reconnected after any failure.
pub struct Probe {
    pub client: redis::Client,
    pub config: AsyncConnectionConfig,
    pub conn: tokio::sync::Mutex<Option<MultiplexedConnection>>,
    pub store: redis::Script,
}

/// Redis `TIME` with the local wall-clock times just before sending and just after the
/// reply: the checker verifies `l_send <= t <= l_recv`, i.e. that Redis and this process
/// read one clock.
#[derive(Clone, Copy)]
pub struct Stamp {
    pub t: u64,
    pub l_send: u64,
    pub l_recv: u64,
}

impl Stamp {
    pub fn json(stamp: Option<Stamp>) -> Value {
        match stamp {
            Some(s) => json!({"t": s.t, "l_send": s.l_send, "l_recv": s.l_recv}),
            None => Value::Null,
        }
    }
}

impl Probe {
    async fn connection(&self) -> Option<MultiplexedConnection> {
        let mut slot = self.conn.lock().await;
        if slot.is_none() {
            *slot = self
                .client
                .get_multiplexed_async_connection_with_config(&self.config)
                .await
                .ok();
        }
        slot.clone()
    }

    async fn forget(&self) {
        *self.conn.lock().await = None;
    }

    pub async fn time(&self) -> Option<Stamp> {
        let mut conn = self.connection().await?;
        let l_send = now_us();
        let reply: redis::RedisResult<(u64, u64)> = redis::cmd("TIME").query_async(&mut conn).await;
        let l_recv = now_us();
        match reply {
            Ok((secs, micros)) => Some(Stamp {
                t: secs * 1_000_000 + micros,
                l_send,
                l_recv,
            }),
            Err(_) => {
                self.forget().await;
                None
            }
        }
    }

    /// One store write: `Ok((accepted, redis time, highest token before))`.
    pub async fn write(
        &self,
        lock: &str,
        token: u64,
        by: &str,
    ) -> Result<(bool, u64, u64), String> {
        let Some(mut conn) = self.connection().await else {
            return Err("no connection".into());
        };
        let reply: redis::RedisResult<(i64, u64, u64, u64)> = self
            .store
            .key(format!("nemesis:store:{lock}"))
            .arg(token)
            .arg(by)
            .invoke_async(&mut conn)
            .await;
        match reply {
            Ok((accepted, secs, micros, max)) => {
                Ok((accepted == 1, secs * 1_000_000 + micros, max))
            }
            Err(e) => {
                self.forget().await;
                Err(e.to_string())
            }
        }
    }
}
