//! Lease arithmetic shared by locks and permits: what a renewal's answer is worth, and the
//! lease an owner's remaining holds need.

use std::time::{Duration, Instant};

/// How long a lock renewal whose script answered `answer` (the key's PTTL after it ran;
/// -1: no expiry; 0: the hold is gone) keeps a hold renewed to `lease`, from its send time.
pub(crate) fn renewed_for(answer: i64, lease: Duration) -> Option<Duration> {
    match answer {
        -1 => Some(lease),
        ms if ms > 0 => Some(lease.min(Duration::from_millis(ms as u64))),
        _ => None,
    }
}

/// The lease an owner's remaining holds need from `now`, set on the key when one of its
/// holds is released: the longest of what each fixed lease has left (`Some(until)`: when it
/// ends) and `watchdog` for a hold the watchdog keeps (`None`), at least 1 ms. `None` when
/// no hold remains.
pub(crate) fn kept_lease(
    holds: impl IntoIterator<Item = Option<Instant>>,
    now: Instant,
    watchdog: Duration,
) -> Option<Duration> {
    holds
        .into_iter()
        .map(|until| match until {
            Some(until) => until.saturating_duration_since(now),
            None => watchdog,
        })
        .max()
        .map(|left| left.max(Duration::from_millis(1)))
}
