//! The model's clock as the library's instants: a model keeps `now` at 0 and every instant
//! in its state relative to it, in milliseconds; the library's rules take `Instant`s.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Model milliseconds (relative to `now`, which the model keeps at 0) as the library's
/// instants, and back in microseconds (the drift allowance is not a whole number of
/// milliseconds).
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    // An hour after the first call: model instants up to an hour in the past are valid.
    *ORIGIN.get_or_init(|| Instant::now() + Duration::from_secs(3_600))
}

pub(super) fn at(ms: i64) -> Instant {
    let offset = Duration::from_millis(ms.unsigned_abs());
    if ms < 0 {
        origin() - offset
    } else {
        origin() + offset
    }
}

pub(super) fn micros(instant: Instant) -> i64 {
    match instant.checked_duration_since(origin()) {
        Some(after) => after.as_micros() as i64,
        None => -(origin().duration_since(instant).as_micros() as i64),
    }
}
