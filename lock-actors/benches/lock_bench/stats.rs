//! Small helpers: connections, RSS, percentiles, rounding.

use super::*;

pub(crate) async fn connect(config: ClientConfig) -> LockClient {
    LockClient::connect(config)
        .await
        .expect("lock client connects")
}

pub(crate) async fn plain_connection(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .expect("valid url")
        .get_multiplexed_async_connection()
        .await
        .expect("plain redis connection")
}

/// Resident set size of this process, from /proc/self/statm.
pub(crate) fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages in /proc/self/statm");
    // SAFETY: sysconf only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

pub(crate) fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Nearest-rank percentile; sorts `samples`.
pub(crate) fn percentile(samples: &mut [f64], p: f64) -> f64 {
    assert!(!samples.is_empty(), "no samples");
    samples.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

pub(crate) fn median(values: &mut [f64]) -> f64 {
    assert!(!values.is_empty(), "no rounds");
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

pub(crate) fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

pub(crate) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
