//! The `Retry-After` of a 409: how long a client turned away should wait before trying the
//! lock again.
//!
//! A lock's remaining TTL is the latest the lock can still be held by its current hold, and
//! with a fixed lease that is a fair hint. A watchdog keeps the TTL near its whole lease
//! (30 s by default) however short the holds are, so a TTL alone tells a client to wait 30 s
//! for a lock that is free again in milliseconds. The attribute therefore keeps, for each
//! annotated handler, the typical time its own holds last in this process, and answers the
//! shorter of that and the TTL; or the value the attribute sets with `retry_after = "…"`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How the attribute picks a 409's `Retry-After` (see the module docs). Not a public API.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub enum RetryHint {
    /// `retry_after = "…"` on the attribute: always this.
    Fixed(Duration),
    /// The shorter of the lock's remaining TTL and the typical hold of this handler, when
    /// one has been seen; the TTL otherwise.
    Observed(&'static HoldTimes),
}

/// The typical time one annotated fn's holds last in this process: a running average of
/// the holds it completed, the latest weighing an eighth. Not a public API.
///
/// ```
/// use actix_distributed_lock::web::__HoldTimes as HoldTimes;
/// use std::time::Duration;
///
/// static HOLDS: HoldTimes = HoldTimes::new();
/// assert_eq!(HOLDS.typical(), None);
/// HOLDS.record(Duration::from_millis(80));
/// assert_eq!(HOLDS.typical(), Some(Duration::from_millis(80)));
/// ```
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct HoldTimes {
    /// The average in microseconds, plus one (0: no hold seen yet).
    average: AtomicU64,
}

impl HoldTimes {
    /// No hold seen yet.
    pub const fn new() -> Self {
        HoldTimes {
            average: AtomicU64::new(0),
        }
    }

    /// Counts one hold that lasted `held`.
    pub fn record(&self, held: Duration) {
        let sample = u64::try_from(held.as_micros()).unwrap_or(u64::MAX / 8);
        let sample = sample.min(u64::MAX / 8);
        // An update lost to a racing one costs one sample of an estimate: fine for a hint.
        let _ = self
            .average
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |stored| {
                Some(match stored {
                    0 => sample + 1,
                    stored => ((stored - 1) * 7 + sample) / 8 + 1,
                })
            });
    }

    /// The typical hold, once one hold was counted.
    pub fn typical(&self) -> Option<Duration> {
        match self.average.load(Ordering::Relaxed) {
            0 => None,
            stored => Some(Duration::from_micros(stored - 1)),
        }
    }
}

impl RetryHint {
    /// The wait to answer, from the lock's remaining TTL (`None` when it has none, or for
    /// permits) and this hint; `None` leaves the default of one second.
    pub(crate) fn wait(self, ttl: Option<Duration>) -> Option<Duration> {
        match self {
            RetryHint::Fixed(wait) => Some(wait),
            RetryHint::Observed(holds) => match (ttl, holds.typical()) {
                (Some(ttl), Some(typical)) => Some(ttl.min(typical)),
                (ttl, typical) => ttl.or(typical),
            },
        }
    }

    /// Whether the answer depends on the lock's TTL (a read worth making).
    pub(crate) fn reads_ttl(self) -> bool {
        matches!(self, RetryHint::Observed(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_average_follows_the_holds_an_eighth_at_a_time() {
        let holds = HoldTimes::new();
        holds.record(Duration::from_millis(800));
        // One step keeps 7/8 of the distance to 8 ms: 792 ms · (7/8)^60 is under 0.3 ms.
        for _ in 0..60 {
            holds.record(Duration::from_millis(8));
        }
        let typical = holds.typical().unwrap();
        assert!(typical < Duration::from_micros(8_300), "{typical:?}");
        assert!(typical >= Duration::from_millis(8), "{typical:?}");
    }

    #[test]
    fn the_hint_is_the_shorter_of_the_ttl_and_the_typical_hold() {
        static HOLDS: HoldTimes = HoldTimes::new();
        let ttl = Some(Duration::from_secs(29));
        let observed = RetryHint::Observed(&HOLDS);
        assert_eq!(observed.wait(ttl), ttl);
        assert_eq!(observed.wait(None), None);
        HOLDS.record(Duration::from_millis(40));
        assert_eq!(observed.wait(ttl), Some(Duration::from_millis(40)));
        assert_eq!(
            observed.wait(Some(Duration::from_millis(5))),
            Some(Duration::from_millis(5))
        );
        assert_eq!(observed.wait(None), Some(Duration::from_millis(40)));
        let fixed = RetryHint::Fixed(Duration::from_secs(3));
        assert_eq!(fixed.wait(ttl), Some(Duration::from_secs(3)));
    }
}
