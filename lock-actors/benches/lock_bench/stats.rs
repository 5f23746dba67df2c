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

/// One acquire and unlock of `lock`, for warm-ups.
pub(crate) async fn lock_unlock(lock: &actix_distributed_lock_actors::Lock) {
    lock.acquire()
        .await
        .expect("acquire")
        .unlock()
        .await
        .expect("unlock");
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

/// Slices a throughput round is cut into per side: a multiple of 6, so that a round is
/// whole cycles of [`turn`]. One slice per side, back to back, let a round's ratio swing from
/// 0.74 to 1.45 in one run; a fixed cyclic order (library, ceiling, ceiling again) put the
/// ceiling always after the library and the second ceiling always after the first, and the
/// A/A row read 1.03 to 1.05 in every run.
pub(crate) const SLICES: u32 = 12;

/// Which of `sides` sides takes turn `t` of one long sequence of turns. For three sides the
/// cycle is 0, 1, 2, 0, 2, 1: each side takes two turns of six and follows each other side
/// once, across the cycle's end too, so whatever one side leaves behind (work still running
/// when its turn ends) falls on the others alike. For four sides the cycle of twelve does
/// the same (each side three turns, following each other side once). For two sides, they
/// alternate.
pub(crate) fn turn(t: usize, sides: usize) -> usize {
    const THREE: [usize; 6] = [0, 1, 2, 0, 2, 1];
    const FOUR: [usize; 12] = [0, 1, 0, 2, 0, 3, 1, 2, 1, 3, 2, 3];
    match sides {
        3 => THREE[t % 6],
        4 => FOUR[t % 12],
        _ => t % sides,
    }
}

/// One round of `sides` sides, each run for `round` in total as [`SLICES`] slices, the
/// slices taking [`turn`]s; each side's pairs/s is the mean over its slices (all of equal
/// length). `run(side, slice)` runs one slice of a side.
pub(crate) async fn sliced_round(
    sides: usize,
    round: Duration,
    mut run: impl AsyncFnMut(usize, Duration) -> f64,
) -> Vec<f64> {
    let slice = round / SLICES;
    let mut sums = vec![0.0; sides];
    let mut taken = vec![0u32; sides];
    for t in 0..SLICES as usize * sides {
        let side = turn(t, sides);
        sums[side] += run(side, slice).await;
        taken[side] += 1;
    }
    sums.iter()
        .zip(&taken)
        .map(|(sum, n)| sum / f64::from(*n))
        .collect()
}

/// A ratio measured round by round: the median of the rounds' ratios, and the lowest and
/// highest round, so a reader sees how far one round can stray.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Spread {
    pub(crate) median: f64,
    pub(crate) low: f64,
    pub(crate) high: f64,
}

impl Spread {
    /// The spread of `ratios` (one per round).
    pub(crate) fn of(ratios: &[f64]) -> Spread {
        let mut sorted = ratios.to_vec();
        Spread {
            median: median(&mut sorted),
            low: sorted[0],
            high: sorted[sorted.len() - 1],
        }
    }

    /// The rounds' ratios of `a` over `b`, side by side.
    pub(crate) fn ratios(a: &[f64], b: &[f64]) -> Spread {
        let ratios: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
        Spread::of(&ratios)
    }

    /// `rounds 0.950..1.020`, for the table.
    pub(crate) fn label(&self) -> String {
        format!("rounds {:.3}..{:.3}", self.low, self.high)
    }

    pub(crate) fn json(&self) -> SpreadJson {
        SpreadJson {
            median: round3(self.median),
            low: round3(self.low),
            high: round3(self.high),
        }
    }
}

/// A [`Spread`] in the report's JSON.
#[derive(Serialize, Clone, Copy)]
pub(crate) struct SpreadJson {
    pub(crate) median: f64,
    pub(crate) low: f64,
    pub(crate) high: f64,
}

/// The band an A/A row (a reference measured against itself, interleaved exactly as the
/// library and the reference are) must stay in for the run's ratios to mean anything.
pub(crate) const AA_BAND: (f64, f64) = (0.97, 1.03);

/// The rows of an A/A ratio: its median (target: within [`AA_BAND`]) with its rounds.
pub(crate) fn aa_row(scenario: &'static str, what: &str, aa: Spread) -> Row {
    let within = aa.median >= AA_BAND.0 && aa.median <= AA_BAND.1;
    Row::new(
        scenario,
        &format!("A/A {what} ({})", aa.label()),
        Some(aa.median),
    )
    .target(&format!("{}..{}", AA_BAND.0, AA_BAND.1), Some(within))
}
