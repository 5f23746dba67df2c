//! How a spin lock's waiter spaces its tries: [`SpinBackoff`], Redisson's
//! `LockOptions.ExponentialBackOff` and `ConstantBackOff` rules, and [`SpinDelays`], the
//! pauses one waiter draws from it.
//!
//! Written here rather than with `backon` (which the crate uses for reconnects): Redisson's
//! jitter is a few milliseconds added before the cap, growing with every busy answer, and a
//! waiter at the cap waits exactly the cap; `backon`'s jitter adds up to the whole delay
//! again, past the cap. And a spin waiter's pauses are timers of its lock actor's wait queue,
//! not a retry loop, so `backon`'s executor has nothing to drive: what is left is the line
//! below that multiplies and caps.

use crate::error::LockError;
use std::time::Duration;

/// How a spin lock's waiter backs off between tries (see
/// [`LockClient::spin_lock_with`](crate::LockClient::spin_lock_with)).
///
/// The exponential backoff (the default, as Redisson's `LockOptions.defaults()`) waits
/// `initial_delay` after the first busy answer; each next pause is the previous one times
/// `multiplier`, plus a random jitter below `n × jitter` at the `n`-th busy answer, capped
/// at `max_delay`; once at the cap it stays there, without jitter. Redisson's defaults:
/// 1 ms, 128 ms, ×2, 1 ms. The constant backoff (Redisson's `ConstantBackOff`, 64 ms by
/// default) waits the same pause every time.
///
/// A waiter also never sleeps past the holder's remaining lease (it tries again as the key
/// expires) nor past its own wait.
///
/// The builder takes any value; [`LockClient::spin_lock_with`](crate::LockClient::spin_lock_with)
/// refuses a zero delay, an initial delay above the maximum and a multiplier below 1 (or
/// not a number) with [`LockError::InvalidConfig`].
///
/// # Example
///
/// ```
/// use actix_distributed_lock::SpinBackoff;
/// use std::time::Duration;
///
/// let redisson = SpinBackoff::exponential();
/// assert_eq!(redisson, SpinBackoff::default());
/// assert_eq!(redisson.get_max_delay(), Duration::from_millis(128));
///
/// let gentle = SpinBackoff::exponential()
///     .initial_delay(Duration::from_millis(5))
///     .max_delay(Duration::from_millis(500))
///     .multiplier(1.5)
///     .jitter(Duration::from_millis(2));
/// let steady = SpinBackoff::constant(Duration::from_millis(64));
/// assert!(gentle.check().is_ok() && steady.check().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpinBackoff {
    initial: Duration,
    max: Duration,
    multiplier: f64,
    jitter: Duration,
}

impl Default for SpinBackoff {
    /// [`SpinBackoff::exponential`], Redisson's default.
    fn default() -> Self {
        SpinBackoff::exponential()
    }
}

impl SpinBackoff {
    /// Redisson's exponential backoff with its defaults: 1 ms, doubling, a jitter of up to
    /// `n` ms at the `n`-th busy answer, at most 128 ms.
    ///
    /// ```
    /// # use actix_distributed_lock::SpinBackoff;
    /// # use std::time::Duration;
    /// assert_eq!(SpinBackoff::exponential().get_initial_delay(), Duration::from_millis(1));
    /// ```
    pub fn exponential() -> Self {
        SpinBackoff {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(128),
            multiplier: 2.0,
            jitter: Duration::from_millis(1),
        }
    }

    /// The same pause after every busy answer, without jitter (Redisson's
    /// `ConstantBackOff`, whose default is 64 ms).
    ///
    /// ```
    /// # use actix_distributed_lock::SpinBackoff;
    /// # use std::time::Duration;
    /// let steady = SpinBackoff::constant(Duration::from_millis(64));
    /// assert_eq!(steady.get_max_delay(), Duration::from_millis(64));
    /// ```
    pub fn constant(delay: Duration) -> Self {
        SpinBackoff {
            initial: delay,
            max: delay,
            multiplier: 1.0,
            jitter: Duration::ZERO,
        }
    }

    /// The pause after the first busy answer (at least 1 ms).
    ///
    /// ```
    /// # use actix_distributed_lock::SpinBackoff;
    /// # use std::time::Duration;
    /// let backoff = SpinBackoff::exponential().initial_delay(Duration::from_millis(4));
    /// ```
    pub fn initial_delay(mut self, delay: Duration) -> Self {
        self.initial = delay;
        self
    }

    /// The longest pause (at least the initial delay).
    ///
    /// ```
    /// # use actix_distributed_lock::SpinBackoff;
    /// # use std::time::Duration;
    /// let backoff = SpinBackoff::exponential().max_delay(Duration::from_millis(50));
    /// ```
    pub fn max_delay(mut self, delay: Duration) -> Self {
        self.max = delay;
        self
    }

    /// How much each pause grows over the previous one (at least 1; 1 keeps it constant).
    ///
    /// ```
    /// # use actix_distributed_lock::SpinBackoff;
    /// let backoff = SpinBackoff::exponential().multiplier(3.0);
    /// ```
    pub fn multiplier(mut self, multiplier: f64) -> Self {
        self.multiplier = multiplier;
        self
    }

    /// The jitter's step: at the `n`-th busy answer a random pause below `n × jitter` is
    /// added to the next pause (before the cap). `Duration::ZERO` turns it off.
    ///
    /// ```
    /// # use actix_distributed_lock::SpinBackoff;
    /// # use std::time::Duration;
    /// let exact = SpinBackoff::exponential().jitter(Duration::ZERO);
    /// ```
    pub fn jitter(mut self, step: Duration) -> Self {
        self.jitter = step;
        self
    }

    /// The pause after the first busy answer.
    ///
    /// ```
    /// # use actix_distributed_lock::SpinBackoff;
    /// # use std::time::Duration;
    /// assert_eq!(SpinBackoff::constant(Duration::from_millis(9)).get_initial_delay(), Duration::from_millis(9));
    /// ```
    pub fn get_initial_delay(&self) -> Duration {
        self.initial
    }

    /// The longest pause.
    ///
    /// ```
    /// # use actix_distributed_lock::SpinBackoff;
    /// # use std::time::Duration;
    /// assert_eq!(SpinBackoff::exponential().get_max_delay(), Duration::from_millis(128));
    /// ```
    pub fn get_max_delay(&self) -> Duration {
        self.max
    }

    /// Whether a lock may wait by it; the error says which setting is wrong.
    ///
    /// ```
    /// # use actix_distributed_lock::SpinBackoff;
    /// # use std::time::Duration;
    /// let upside_down = SpinBackoff::exponential()
    ///     .initial_delay(Duration::from_secs(1))
    ///     .max_delay(Duration::from_millis(10));
    /// assert!(upside_down.check().unwrap_err().to_string().contains("must not exceed"));
    /// ```
    pub fn check(&self) -> Result<(), LockError> {
        let refuse = |reason: String| Err(LockError::invalid_config(reason));
        if self.initial.is_zero() {
            return refuse("a spin lock's initial backoff delay must be positive (got 0)".into());
        }
        if self.max.is_zero() {
            return refuse("a spin lock's maximum backoff delay must be positive (got 0)".into());
        }
        if self.initial > self.max {
            return refuse(format!(
                "a spin lock's initial backoff delay ({:?}) must not exceed its maximum delay ({:?})",
                self.initial, self.max
            ));
        }
        if !(self.multiplier.is_finite() && self.multiplier >= 1.0) {
            return refuse(format!(
                "a spin lock's backoff multiplier must be a number of at least 1 (got {})",
                self.multiplier
            ));
        }
        Ok(())
    }

    /// The pauses of one waiter, from the first.
    pub(crate) fn delays(self) -> SpinDelays {
        SpinDelays {
            next: self.initial,
            fails: 0,
            backoff: self,
        }
    }
}

/// The pauses one spin waiter draws, one per busy answer (Redisson makes a policy like it
/// for every acquire).
#[derive(Debug, Clone)]
pub(crate) struct SpinDelays {
    backoff: SpinBackoff,
    next: Duration,
    fails: u32,
}

impl SpinDelays {
    /// The pause after this busy answer, with `draw` picking the jitter below its argument
    /// (a random draw; tests and the model pass their own).
    pub(crate) fn next_with(&mut self, draw: impl FnOnce(Duration) -> Duration) -> Duration {
        let max = self.backoff.max;
        let pause = self.next.min(max);
        if pause == max {
            return max;
        }
        self.fails = self.fails.saturating_add(1);
        let grown = pause.mul_f64(self.backoff.multiplier);
        let bound = self.backoff.jitter.saturating_mul(self.fails);
        let jitter = if bound.is_zero() {
            Duration::ZERO
        } else {
            draw(bound)
        };
        self.next = grown.saturating_add(jitter).min(max);
        pause
    }

    /// The pause after this busy answer, with a random jitter.
    pub(crate) fn next(&mut self) -> Duration {
        self.next_with(|bound| {
            let nanos = u64::try_from(bound.as_nanos()).unwrap_or(u64::MAX);
            Duration::from_nanos(rand::random_range(0..nanos))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_default_doubles_from_1_ms_to_128_ms_as_redisson_does() {
        let mut delays = SpinBackoff::default().delays();
        let lowest: Vec<_> = (0..10)
            .map(|_| delays.next_with(|_| Duration::ZERO))
            .collect();
        let expected = [1, 2, 4, 8, 16, 32, 64, 128, 128, 128].map(ms);
        assert_eq!(lowest, expected);
    }

    #[test]
    fn jitter_grows_with_each_busy_answer_and_stops_at_the_cap() {
        let mut delays = SpinBackoff::default().delays();
        let mut bounds = Vec::new();
        let mut pauses = Vec::new();
        for _ in 0..9 {
            pauses.push(delays.next_with(|bound| {
                bounds.push(bound);
                bound - Duration::from_nanos(1) // the highest draw
            }));
        }
        // Draws below 1 ms, 2 ms, ... at the 1st, 2nd, ... busy answer; none at the cap.
        assert_eq!(bounds, (1..=6).map(ms).collect::<Vec<_>>());
        assert!(pauses.windows(2).all(|pair| pair[0] <= pair[1]));
        assert_eq!(pauses[1], ms(3) - Duration::from_nanos(1));
        assert_eq!(pauses[6..], [ms(128); 3]);
        let mut random = SpinBackoff::default().delays();
        for _ in 0..50 {
            assert!(random.next() <= ms(128));
        }
    }

    #[test]
    fn constant_waits_the_same_every_time() {
        let mut delays = SpinBackoff::constant(ms(64)).delays();
        assert!((0..5).all(|_| delays.next() == ms(64)));
    }

    #[test]
    fn bad_settings_are_refused_with_the_setting_named() {
        let zero = SpinBackoff::exponential().initial_delay(Duration::ZERO);
        assert!(zero.check().unwrap_err().to_string().contains("initial"));
        let no_max = SpinBackoff::exponential().max_delay(Duration::ZERO);
        assert!(no_max.check().unwrap_err().to_string().contains("maximum"));
        let above = SpinBackoff::exponential().initial_delay(ms(200));
        assert!(above
            .check()
            .unwrap_err()
            .to_string()
            .contains("must not exceed"));
        for multiplier in [0.0, 0.5, -2.0, f64::NAN, f64::INFINITY] {
            let error = SpinBackoff::exponential().multiplier(multiplier).check();
            assert!(
                error.unwrap_err().to_string().contains("multiplier"),
                "{multiplier}"
            );
        }
        assert!(SpinBackoff::constant(Duration::ZERO).check().is_err());
    }
}
