//! The per-host politeness rule, one reference for both backends: when a
//! host's next request may go (slot spacing, jitter, Crawl-delay) and how
//! its responses slow it down (adaptive back-off from 429s, Retry-After
//! and the recent share of errors).
//!
//! The local frontier runs this code; the Redis scripts run the same rule
//! in Lua (`reserve_slot` in `redis/scripts/lib/politeness.lua`, `host_news`
//! beside it), with the constants below generated into them
//! ([`lua_constants`]). A golden table (`tests/fixtures/backoff_golden.json`)
//! pins the rule's numbers: the unit test here and the contract suite,
//! through the commit script, both replay it.
//!
//! The back-off rule, in short: a 429 or a 5xx with Retry-After ("slow")
//! doubles the host's delay (at least 1 s and the Retry-After, at most the
//! longest back-off) and keeps everyone away until the Retry-After has
//! passed; each good response takes a fifth off again. Every response also
//! moves the host's recent error share a tenth of the way to all-failed or
//! all-good (an average over about the last ten responses); up to one
//! error in five costs nothing, above it the delay climbs exponentially to
//! the longest back-off. The delay kept is the larger of the two; whatever
//! of it the error share does not explain is the strict part, so no third
//! number is kept.

use std::time::Duration;

use super::HostOutcome;

/// How far each response moves the error share (a tenth of the way).
pub const ERROR_WEIGHT: f64 = 0.1;
/// The error share (per mille) a host may have at full speed.
pub const ERROR_TOLERATED: u64 = 200;
/// How steeply the delay climbs above the tolerated share.
pub const ERROR_STEEPNESS: f64 = 10.0;
/// An error share under this (per mille) is forgotten.
pub const ERROR_FORGOTTEN: u64 = 10;
/// The least delay (ms) a "slow" response sets.
pub const SLOW_MIN_MS: u64 = 1000;
/// What a good response leaves of the strict delay…
pub const RECOVERY: f64 = 0.8;
/// …which is dropped once under this (ms).
pub const STRICT_FORGOTTEN_MS: u64 = 50;
/// The primes mixing a jitter seed and a per-call salt into one of 1000
/// steps between 0.5x and 1.5x the spider's delay.
pub const JITTER_SEED_PRIME: u64 = 7919;
pub const JITTER_SALT_PRIME: u64 = 104_729;

/// The rule's constants as Lua locals, for the scripts (generated, so the
/// two never disagree).
pub fn lua_constants() -> String {
    format!(
        "local ERROR_WEIGHT, ERROR_TOLERATED, ERROR_STEEPNESS, ERROR_FORGOTTEN = {ERROR_WEIGHT:?}, {ERROR_TOLERATED}, {ERROR_STEEPNESS:?}, {ERROR_FORGOTTEN}\n\
         local SLOW_MIN_MS, RECOVERY, STRICT_FORGOTTEN_MS = {SLOW_MIN_MS}, {RECOVERY:?}, {STRICT_FORGOTTEN_MS}\n\
         local JITTER_SEED_PRIME, JITTER_SALT_PRIME = {JITTER_SEED_PRIME}, {JITTER_SALT_PRIME}\n"
    )
}

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

/// The spider's delay `base` ms randomised between 0.5x and 1.5x (as
/// Scrapy's RANDOMIZE_DOWNLOAD_DELAY), from a `seed` (the scripts use the
/// microseconds of Redis's clock) and a `salt` that differs per slot.
pub fn jittered(base: u64, seed: u64, salt: u64) -> u64 {
    let step = (seed.wrapping_mul(JITTER_SEED_PRIME) + salt.wrapping_mul(JITTER_SALT_PRIME)) % 1000;
    (base as f64 * (0.5 + step as f64 / 1000.0)).floor() as u64
}

/// The delay an error share of `e` per mille calls for.
pub fn error_delay(e: u64, backoff_max: u64) -> u64 {
    if e <= ERROR_TOLERATED {
        return 0;
    }
    let u = (e - ERROR_TOLERATED) as f64 / (1000 - ERROR_TOLERATED) as f64;
    let curve = 2f64.powf(ERROR_STEEPNESS) - 1.0;
    (backoff_max as f64 * (2f64.powf(ERROR_STEEPNESS * u) - 1.0) / curve).floor() as u64
}

impl HostState {
    /// Reserves the host's next slot at `now` for a request paced at least
    /// `interval` ms (the spider's delay, jittered; the host's Crawl-delay
    /// and back-off apply if longer): the wait for the slot and the spacing
    /// applied. With no spacing at all and the slot free, nothing changes.
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
            strict = (old * 2).max(SLOW_MIN_MS).max(wait).min(backoff_max);
            self.next_free = self.next_free.max(now + wait);
        } else if !failed {
            strict = (strict as f64 * RECOVERY).floor() as u64;
            if strict < STRICT_FORGOTTEN_MS {
                strict = 0;
            }
        }
        let new = strict.max(error_delay(e, backoff_max));
        self.backoff = new;
        self.errors = if e >= ERROR_FORGOTTEN { e } else { 0 };
        if slow.is_some() || (failed && new > 0) {
            HostNews::Slowed
        } else {
            HostNews::Unchanged
        }
    }
}

/// The golden table of the back-off rule: cases of outcomes, each step
/// with the delay and error share it must leave (`tests/fixtures/
/// backoff_golden.json`, replayed by both backends).
pub mod golden {
    use std::time::Duration;

    use serde::Deserialize;

    use super::super::HostOutcome;

    /// One case: a host's longest back-off, and its responses in turn.
    #[derive(Debug, Deserialize)]
    pub struct Case {
        pub name: String,
        pub backoff_max_ms: u64,
        pub steps: Vec<Step>,
    }

    /// One response and what the host's numbers must be after it.
    #[derive(Debug, Deserialize)]
    pub struct Step {
        /// `ok`, `error` or `slow`.
        pub outcome: String,
        /// For `slow`: the Retry-After (ms).
        #[serde(default)]
        pub wait_ms: u64,
        pub backoff: u64,
        pub errors: u64,
    }

    impl Step {
        pub fn outcome(&self) -> HostOutcome {
            match self.outcome.as_str() {
                "ok" => HostOutcome::Ok,
                "error" => HostOutcome::Error,
                _ => HostOutcome::Slow {
                    wait: Duration::from_millis(self.wait_ms),
                },
            }
        }
    }

    /// The table's text.
    pub const TABLE: &str = include_str!("../../tests/fixtures/backoff_golden.json");

    /// The table's cases.
    pub fn cases() -> Vec<Case> {
        serde_json::from_str(TABLE).unwrap_or_else(|e| panic!("backoff_golden.json: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rust_rule_gives_the_golden_tables_numbers() {
        for case in golden::cases() {
            let mut h = HostState::default();
            for (i, step) in case.steps.iter().enumerate() {
                h.news(step.outcome(), 1_000_000, case.backoff_max_ms);
                assert_eq!(
                    (h.backoff, h.errors),
                    (step.backoff, step.errors),
                    "case `{}`, step {i} ({})",
                    case.name,
                    step.outcome
                );
            }
        }
    }

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

    #[test]
    fn jitter_stays_between_half_and_one_and_a_half_the_delay() {
        for seed in 0..2000 {
            let j = jittered(1000, seed, seed / 3);
            assert!((500..1500).contains(&j), "{j}");
        }
        assert_eq!(jittered(0, 5, 5), 0);
    }

    #[test]
    fn slots_are_spaced_by_the_largest_of_delay_crawl_delay_and_back_off() {
        let mut h = HostState {
            crawl_delay: 300,
            ..HostState::default()
        };
        assert_eq!(h.reserve(1000, 100).0, Duration::ZERO);
        assert_eq!(
            h.reserve(1000, 100),
            (Duration::from_millis(300), Duration::from_millis(300))
        );
        h.backoff = 2000;
        assert_eq!(h.reserve(1000, 100).0, Duration::from_millis(600));
        assert_eq!(h.next_free, 3600);
        let mut free = HostState::default();
        assert_eq!(free.reserve(5, 0), (Duration::ZERO, Duration::ZERO));
        assert_eq!(free, HostState::default());
    }
}
