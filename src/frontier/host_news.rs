//! A host's politeness numbers in the local frontier, and the adaptive
//! back-off rule that moves them: the same rule as `host_news` in
//! `scripts/commit.lua` (which keeps these numbers in Redis for a
//! cluster), so a local crawl slows a failing host exactly as a cluster
//! does. See that function for the reasoning; in short, a 429 or a 5xx
//! with Retry-After doubles the host's delay, and every response moves the
//! host's recent error share, whose delay climbs steeply once more than
//! one response in five fails.

use std::time::Duration;

use super::HostOutcome;

/// How far each response moves the error share (a tenth of the way).
const ERROR_WEIGHT: f64 = 0.1;
/// The error share (per mille) a host may have at full speed.
const ERROR_TOLERATED: u64 = 200;
const ERROR_STEEPNESS: f64 = 10.0;

/// One host's numbers (milliseconds, and per mille for the error share).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostState {
    /// When its next politeness slot is free (ms since the epoch).
    pub next_free: u64,
    /// Its robots.txt Crawl-delay.
    pub crawl_delay: u64,
    /// Its adaptive back-off delay.
    pub backoff: u64,
    /// Its recent error share.
    pub errors: u64,
}

/// Whether a response slowed its host down (counted as
/// `backoff/slowed_count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostNews {
    Slowed,
    Unchanged,
}

/// The delay an error share of `e` per mille calls for.
fn error_delay(e: u64, backoff_max: u64) -> u64 {
    if e <= ERROR_TOLERATED {
        return 0;
    }
    let u = (e - ERROR_TOLERATED) as f64 / (1000 - ERROR_TOLERATED) as f64;
    let curve = 2f64.powf(ERROR_STEEPNESS) - 1.0;
    (backoff_max as f64 * (2f64.powf(ERROR_STEEPNESS * u) - 1.0) / curve).floor() as u64
}

impl HostState {
    /// Reserves the host's next slot at `now` for a request paced at least
    /// `interval` ms (the spider's delay; the host's Crawl-delay and
    /// back-off apply if longer), as `reserve_slot` in the scripts does:
    /// the wait for the slot and the spacing applied.
    pub fn reserve(&mut self, now: u64, interval: u64) -> (Duration, Duration) {
        let interval = interval.max(self.crawl_delay).max(self.backoff);
        if interval == 0 && self.next_free <= now {
            return (Duration::ZERO, Duration::ZERO);
        }
        let slot = now.max(self.next_free);
        self.next_free = slot + interval;
        (
            Duration::from_millis(slot - now),
            Duration::from_millis(interval),
        )
    }

    /// Applies what a response said about the host at `now`.
    pub fn news(&mut self, outcome: HostOutcome, now: u64, backoff_max: u64) -> HostNews {
        let (failed, slow) = match outcome {
            HostOutcome::None => return HostNews::Unchanged,
            HostOutcome::Ok => (false, None),
            HostOutcome::Error => (true, None),
            HostOutcome::Slow { wait } => (true, Some(wait.as_millis() as u64)),
        };
        let (old, old_e) = (self.backoff, self.errors);
        let e = (old_e as f64 * (1.0 - ERROR_WEIGHT)
            + if failed { 1000.0 * ERROR_WEIGHT } else { 0.0 })
        .floor() as u64;
        let mut strict = if old > error_delay(old_e, backoff_max) {
            old
        } else {
            0
        };
        if let Some(wait) = slow {
            strict = (old * 2).max(1000).max(wait).min(backoff_max);
            self.next_free = self.next_free.max(now + wait);
        } else if !failed {
            strict = strict * 8 / 10;
            if strict < 50 {
                strict = 0;
            }
        }
        let new = strict.max(error_delay(e, backoff_max));
        self.backoff = new;
        // A share under 1 % is forgotten.
        self.errors = if e >= 10 { e } else { 0 };
        if slow.is_some() || (failed && new > 0) {
            HostNews::Slowed
        } else {
            HostNews::Unchanged
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sporadic_errors_cost_nothing_and_a_failing_host_backs_off_hard() {
        let max = 60_000;
        let mut h = HostState::default();
        // One failure in twenty: the share stays under a fifth.
        for i in 0..200 {
            let outcome = if i % 20 == 0 {
                HostOutcome::Error
            } else {
                HostOutcome::Ok
            };
            h.news(outcome, 0, max);
            assert_eq!(h.backoff, 0, "response {i}");
        }
        for _ in 0..60 {
            h.news(HostOutcome::Error, 0, max);
        }
        assert!(h.backoff > max / 2, "{h:?}");
        for _ in 0..60 {
            h.news(HostOutcome::Ok, 0, max);
        }
        assert_eq!(h.backoff, 0, "{h:?}");
        assert_eq!(h.errors, 0);
    }

    #[test]
    fn a_429_doubles_the_delay_and_holds_the_host_for_retry_after() {
        let mut h = HostState::default();
        let news = h.news(
            HostOutcome::Slow {
                wait: Duration::from_secs(3),
            },
            1_000,
            60_000,
        );
        assert_eq!(news, HostNews::Slowed);
        assert_eq!(h.backoff, 3_000);
        assert_eq!(h.next_free, 4_000);
        h.news(
            HostOutcome::Slow {
                wait: Duration::ZERO,
            },
            1_000,
            60_000,
        );
        assert_eq!(h.backoff, 6_000);
    }
}
