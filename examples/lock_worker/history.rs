//! What the worker writes down: the history file (the side connection that reads Redis
//! `TIME` and writes to the fenced store is `target.rs`'s `Probe`).

use serde_json::{json, Value};
use std::fs::File;
use std::io::Write;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

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
