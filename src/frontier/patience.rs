//! How long a finished page's commit may wait for other pages to share its
//! script call: only as long as the wait costs the worker nothing.
//!
//! A batch of pages in one call costs Redis far less per page than a call
//! each, which is what lets one Redis serve many workers. But a page's
//! commit also leases its replacement, and a worker's download slots keep
//! busy meanwhile only on the requests it holds ahead. A worker that
//! finishes a page every 20 ms holds 20 ms of work per request ahead; one
//! that finishes a page every 50 µs (a fast site, a many-core machine)
//! holds 50 µs: waiting 20 ms for company there left its slots idle and
//! cost a single worker a third of its pages per second, with no gain, as
//! its own call is Redis's only work.
//!
//! So a page says how many pages' time its worker's slots stay busy while
//! it waits ([`Patience`]), and the commit task turns that into time with
//! what it measures ([`Pace`]): the mean time between pages reaching it,
//! and a commit call's round trip, which the replacement takes on top. A
//! batch waits until the first of its pages' deadlines, never past
//! `commit_wait`. Pages finished while the previous call is on its way
//! always share the next one, waiting or not.

use std::time::Duration;

/// How long a page's commit may wait for others (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patience {
    /// Not at all: a slot waits for what the commit leases (the tail of a
    /// crawl, or a page whose links idle workers wait for).
    Now,
    /// While this many pages' time goes by at the worker's pace: its
    /// slots are busy with requests it holds ahead until then.
    Ahead(usize),
    /// Up to `commit_wait`, whatever the pace.
    Free,
}

impl From<bool> for Patience {
    /// `true`: [`Patience::Free`]; `false`: [`Patience::Now`].
    fn from(may_wait: bool) -> Patience {
        if may_wait {
            Patience::Free
        } else {
            Patience::Now
        }
    }
}

/// How much of the running average a new reading moves.
const WEIGHT: f64 = 0.125;

/// A commit task's readings: the mean time between pages reaching it and
/// a call's round trip.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pace {
    /// Seconds between pages, averaged; 0 until the second page.
    gap: f64,
    /// Seconds a call takes, averaged; 0 until the first returns.
    round_trip: f64,
    /// When the last page reached the task, if one has.
    last: Option<std::time::Instant>,
}

impl Pace {
    /// Notes a page reaching the commit task at `now`. A gap longer than
    /// `cap` (an idle spell) counts as `cap`: past it, the wait is
    /// `commit_wait` anyway.
    pub fn arrived(&mut self, now: std::time::Instant, cap: Duration) {
        if let Some(last) = self.last {
            let gap = now.saturating_duration_since(last).min(cap).as_secs_f64();
            self.gap = average(self.gap, gap);
        }
        self.last = Some(now);
    }

    /// Notes a call that took `took`.
    pub fn called(&mut self, took: Duration) {
        let took = took.as_secs_f64();
        self.round_trip = if self.round_trip == 0.0 {
            took
        } else {
            average(self.round_trip, took)
        };
    }

    /// How long a page of `patience` may wait from its arrival, at most
    /// `limit`.
    pub fn wait(&self, patience: Patience, limit: Duration) -> Duration {
        match patience {
            Patience::Now => Duration::ZERO,
            Patience::Free => limit,
            Patience::Ahead(pages) => {
                let busy = pages as f64 * self.gap - self.round_trip;
                Duration::try_from_secs_f64(busy.max(0.0))
                    .unwrap_or(limit)
                    .min(limit)
            }
        }
    }
}

fn average(mean: f64, reading: f64) -> f64 {
    mean + WEIGHT * (reading - mean)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn paced(gap: Duration, round_trip: Duration) -> Pace {
        let mut pace = Pace::default();
        let start = Instant::now();
        for i in 0..200 {
            pace.arrived(start + gap * i, Duration::from_secs(1));
        }
        pace.called(round_trip);
        pace
    }

    const LIMIT: Duration = Duration::from_millis(20);

    #[test]
    fn a_fast_worker_waits_for_nobody() {
        // A page every 50 µs, a 1 ms call: 16 pages ahead last 0.8 ms,
        // less than the replacement takes to come.
        let pace = paced(Duration::from_micros(50), Duration::from_millis(1));
        assert_eq!(pace.wait(Patience::Ahead(16), LIMIT), Duration::ZERO);
    }

    #[test]
    fn a_slow_worker_waits_while_its_requests_ahead_last() {
        // A page every 2 ms: 4 ahead last 8 ms, of which the call takes 1.
        let pace = paced(Duration::from_millis(2), Duration::from_millis(1));
        let wait = pace.wait(Patience::Ahead(4), LIMIT);
        assert!(
            (Duration::from_micros(6900)..Duration::from_micros(7100)).contains(&wait),
            "{wait:?}"
        );
        assert_eq!(
            pace.wait(Patience::Ahead(40), LIMIT),
            LIMIT,
            "never past the limit"
        );
    }

    #[test]
    fn free_and_now_ignore_the_pace() {
        let pace = Pace::default();
        assert_eq!(pace.wait(Patience::Free, LIMIT), LIMIT);
        assert_eq!(pace.wait(Patience::Now, LIMIT), Duration::ZERO);
        assert_eq!(
            pace.wait(Patience::Ahead(8), LIMIT),
            Duration::ZERO,
            "no reading yet: no wait"
        );
    }

    #[test]
    fn an_idle_spell_counts_as_the_cap() {
        let mut pace = Pace::default();
        let start = Instant::now();
        pace.arrived(start, LIMIT);
        pace.arrived(start + Duration::from_secs(3600), LIMIT);
        assert!(pace.gap <= LIMIT.as_secs_f64());
    }
}
