//! Waits between attempts to reach something that is away (an adb server
//! that will not start, a broker that drops the connection): doubling from
//! a first wait up to a cap, optionally with jitter so that many clients
//! do not retry in lockstep. One implementation for every retry loop of
//! the daemon's transports.

use std::time::Duration;

/// Exponential backoff: `first`, `2 × first`, `4 × first` … at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait before the first retry.
    pub first: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Backoff {
    /// The wait before retry `attempt` (0 is the first retry).
    pub fn delay(&self, attempt: u32) -> Duration {
        // 2^20 × any first wait is past every cap we use.
        self.first
            .saturating_mul(1u32 << attempt.min(20))
            .min(self.max)
    }

    /// [`Backoff::delay`] plus up to a quarter more, chosen by `seed` (any
    /// number that differs between processes and attempts, such as the
    /// clock's nanoseconds).
    pub fn delay_with_jitter(&self, attempt: u32, seed: u32) -> Duration {
        let base = self.delay(attempt);
        base + base.mul_f64(f64::from(seed % 250) / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_jitters_by_at_most_a_quarter() {
        let b = Backoff {
            first: Duration::from_millis(100),
            max: Duration::from_secs(10),
        };
        let waits: Vec<u64> = (0..9).map(|a| b.delay(a).as_millis() as u64).collect();
        assert_eq!(
            waits,
            [100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]
        );
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(10));
        assert_eq!(b.delay_with_jitter(0, 0), Duration::from_millis(100));
        assert_eq!(b.delay_with_jitter(0, 249), Duration::from_micros(124_900));
        assert!(b.delay_with_jitter(7, u32::MAX) <= Duration::from_millis(12_500));
    }
}
