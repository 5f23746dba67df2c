//! Every log line of a test binary, captured for a test to search: one global subscriber at
//! TRACE (the client's actors log from their own thread, so a thread-local subscriber would
//! miss them).

use std::io::Write;
use std::sync::{Mutex, OnceLock};

static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());

struct Capture;

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOG.lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the capturing subscriber, once per test binary.
pub fn capture_logs() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(|| Capture)
            .with_ansi(false)
            .init();
    });
}

/// Everything logged since [`capture_logs`].
pub fn logs() -> String {
    String::from_utf8_lossy(&LOG.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
}
