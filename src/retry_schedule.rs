//! The retry schedule: exponential backoff, the one schedule every "try
//! again later" in the crawler uses (not to be confused with a host's
//! adaptive back-off, which paces a slowed host: see
//! [`crate::frontier::politeness`]): HTTP retries (their attempt number travels with the
//! request, so the delay is a function of it, not of state kept here), and
//! riding out Redis outages and lost subscriptions (an [`Attempts`]
//! iterator).
//!
//! Written here rather than taken from a backoff crate because the retry
//! delay must be computable from an attempt number alone (retries wait in
//! Redis and are fetched again by any worker) with Scrapy-style symmetric
//! jitter around the doubled base; the crates we looked at (`backon`,
//! `backoff`, `exponential-backoff`) offer stateful iterators with
//! one-sided or full jitter instead.

use std::time::Duration;

/// Delays of `base × 2^(attempt-1)`, capped at `max`, each randomised
/// within `±spread` of itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetrySchedule {
    pub base: Duration,
    pub max: Duration,
    /// 0.5 spreads delays over 0.5×–1.5×; 0 gives exact delays.
    pub spread: f64,
}

impl RetrySchedule {
    /// Riding out a Redis outage or a lost subscription: 100 ms doubling to
    /// 5 s, ±25 %.
    pub const REDIS: RetrySchedule = RetrySchedule {
        base: Duration::from_millis(100),
        max: Duration::from_secs(5),
        spread: 0.25,
    };

    /// The wait before attempt `attempt` (1 for the first retry).
    pub fn delay(&self, attempt: u32) -> Duration {
        let doubled = self.base.as_secs_f64() * 2f64.powi(attempt.saturating_sub(1).min(30) as i32);
        let factor = 1.0 + self.spread * (2.0 * fastrand::f64() - 1.0);
        Duration::try_from_secs_f64(doubled * factor)
            .unwrap_or(self.max)
            .min(self.max)
    }

    /// Successive delays, for a loop that keeps trying.
    pub fn attempts(self) -> Attempts {
        Attempts {
            schedule: self,
            attempt: 0,
        }
    }
}

/// The delays of one run of attempts (see [`RetrySchedule::attempts`]).
#[derive(Debug, Clone)]
pub struct Attempts {
    schedule: RetrySchedule,
    attempt: u32,
}

impl Attempts {
    /// The wait before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        self.attempt = self.attempt.saturating_add(1);
        self.schedule.delay(self.attempt)
    }

    /// Starts over (after a success).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_within_the_spread_and_stops_at_the_cap() {
        let b = RetrySchedule {
            base: Duration::from_secs(1),
            max: Duration::from_secs(300),
            spread: 0.5,
        };
        for _ in 0..50 {
            let first = b.delay(1);
            assert!(first >= Duration::from_millis(500) && first <= Duration::from_millis(1500));
            let third = b.delay(3);
            assert!(third >= Duration::from_secs(2) && third <= Duration::from_secs(6));
        }
        assert_eq!(b.delay(40), b.max);
        let mut a = RetrySchedule::REDIS.attempts();
        let first = a.next_delay();
        assert!(first <= Duration::from_millis(125), "{first:?}");
        for _ in 0..20 {
            a.next_delay();
        }
        assert!(a.next_delay() <= RetrySchedule::REDIS.max);
        a.reset();
        assert!(a.next_delay() <= Duration::from_millis(125));
    }
}
