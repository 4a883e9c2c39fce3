//! Politeness inside one worker. The cluster-wide part, each host's next
//! free slot, is reserved by the frontier's lease scripts, which hand every
//! leased request its wait; here the request waits for that slot holding no
//! download slot, then takes one of its host's slots
//! (`concurrent_requests_per_domain`), one of the spider's
//! (`concurrent_requests`) and one of the worker process's, which its
//! spiders share (`worker::pool`).
//!
//! A host's entry exists only while a request for it is in the downloader
//! ([`InUse`]): a crawl over a million hosts keeps as many entries as it
//! has requests in progress, not one per host ever seen. No pacing state
//! lives here (the next slot is in Redis), so nothing the cluster needs is
//! lost when an entry goes.
//!
//! What an entry does remember is what this worker's own responses said
//! about the host lately, by the cluster's back-off rule
//! ([`HostState::news`]). A request leased before its host began failing
//! (or before the failure's commit reached Redis) was given a slot at the
//! old pace. Once the host is slowed down by more than that pace, such a
//! request takes a fresh slot of the cluster's pacing at the new spacing
//! (as Scrapy applies a slot's new delay to the requests already queued
//! in it), or goes back to the queue if a Retry-After holds the host for
//! more than half a lease ([`Turn::pace`]). Without this, every request
//! a worker held for the host (twice its download slots, see
//! `worker::pool`) would reach it before the first failure's back-off
//! did.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::in_use::{Held, InUse};
use crate::frontier::host_news::HostState;
use crate::frontier::HostOutcome;
use crate::settings::Settings;
use crate::worker::pool::Share;

/// The worker's download slots, per host and in all.
#[derive(Debug)]
pub struct Politeness {
    downloads: Arc<Semaphore>,
    /// The spider's share of the worker's slots.
    share: Arc<Share>,
    per_host: usize,
    /// Host → its slots and recent news in this worker, while a request
    /// uses them.
    hosts: InUse<Host>,
    /// The clock of the hosts' news (ms since this instant).
    epoch: Instant,
    /// The back-off rule's longest delay (ms).
    backoff_max: u64,
    /// The longest wait a request holds its lease for.
    max_wait: Duration,
    /// Requests waiting for their host's slot: they hold no download slot,
    /// so the worker does not count them as busy.
    waiting: AtomicUsize,
}

/// One host in this worker.
#[derive(Debug)]
struct Host {
    /// Its download slots (`concurrent_requests_per_domain`).
    slots: Arc<Semaphore>,
    news: Mutex<News>,
}

/// What this worker's own responses from a host said lately (ms on the
/// politeness clock).
#[derive(Debug, Default)]
struct News {
    /// The cluster's back-off numbers as these responses would set them.
    host: HostState,
    /// Until when a Retry-After holds the host.
    held_until: u64,
}

/// A request's place with its host, from when it comes to the downloader
/// until its download ends (it keeps the host's entry).
#[derive(Debug)]
pub struct Turn<'a> {
    politeness: &'a Politeness,
    host: Held<Host>,
}

/// Whether a request may go now (see [`Turn::pace`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    Go,
    /// Slowed down since its slot was reserved: take a fresh slot of the
    /// cluster's pacing of the host, at least `spacing` after the one
    /// before, and wait at least `hold` (a Retry-After still in force).
    Repace {
        spacing: Duration,
        hold: Duration,
    },
    /// Held by a Retry-After for longer than a lease is worth holding:
    /// back to the queue, to be leased again when the host's turn comes.
    Requeue,
}

/// The slots a download holds while it runs (give them back before the
/// [`Turn`], which may remove the host's entry).
#[derive(Debug)]
pub struct Slots {
    _host: Option<OwnedSemaphorePermit>,
    _download: Option<OwnedSemaphorePermit>,
    _worker: Option<OwnedSemaphorePermit>,
}

impl Politeness {
    pub fn new(settings: &Settings, share: Arc<Share>) -> Politeness {
        Politeness {
            downloads: Arc::new(Semaphore::new(settings.concurrent_requests.max(1) as usize)),
            share,
            per_host: settings.concurrent_requests_per_domain.max(1) as usize,
            hosts: InUse::default(),
            epoch: Instant::now(),
            backoff_max: settings.adaptive_backoff_max_delay.as_millis() as u64,
            max_wait: crate::frontier::max_wait(settings.lease_timeout),
            waiting: AtomicUsize::new(0),
        }
    }

    /// A request for `host` comes to the downloader.
    pub fn join(&self, host: &str) -> Turn<'_> {
        Turn {
            politeness: self,
            host: self.hosts.hold(host, || Host {
                slots: Arc::new(Semaphore::new(self.per_host)),
                news: Mutex::default(),
            }),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The longest politeness wait worth holding a lease for.
    pub fn max_wait(&self) -> Duration {
        self.max_wait
    }

    /// Counts a request that will wait for its host's slot, as soon as it
    /// is leased (so the worker's room is right before it starts).
    pub fn will_wait(&self) {
        self.waiting.fetch_add(1, Ordering::Relaxed);
    }

    /// Hosts with a request in the downloader right now.
    pub fn hosts_in_use(&self) -> usize {
        self.hosts.len()
    }

    /// Requests waiting for their host's slot.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Waits for the host's turn (a request counted by [`Self::will_wait`]);
    /// it stops counting as waiting when the wait ends or is abandoned.
    pub async fn wait_turn(&self, wait: Duration) {
        struct Counted<'a>(&'a AtomicUsize);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let _counted = Counted(&self.waiting);
        tokio::time::sleep(wait).await;
    }
}

impl Turn<'_> {
    /// Takes a slot of the host, a download slot of the spider and one of
    /// the worker, waiting for them.
    pub async fn slots(&self) -> Slots {
        // The semaphores are never closed, so acquiring cannot fail.
        let host = Arc::clone(&self.host.slots).acquire_owned().await.ok();
        let download = self.politeness.downloads.clone().acquire_owned().await.ok();
        let worker = self.politeness.share.slot().await;
        Slots {
            _host: host,
            _download: download,
            _worker: worker,
        }
    }

    /// Whether the request may go now, its slot having been reserved with
    /// spacing `paced_with`: yes, unless this worker's own responses have
    /// slowed the host down since (a request leased before the host began
    /// failing, or before the cluster heard of it): by a back-off longer
    /// than that spacing, or by a Retry-After still in force.
    pub fn pace(&self, paced_with: Duration) -> Pace {
        let news = self
            .host
            .news
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let hold = Duration::from_millis(news.held_until.saturating_sub(self.politeness.now_ms()));
        let backoff = Duration::from_millis(news.host.backoff);
        if hold.is_zero() && backoff <= paced_with {
            Pace::Go
        } else if hold > self.politeness.max_wait {
            Pace::Requeue
        } else {
            Pace::Repace {
                spacing: backoff.max(paced_with),
                hold,
            }
        }
    }

    /// Learns what a response said about the host (before its slots are
    /// given back, so the next request for the host knows).
    pub fn news(&self, outcome: HostOutcome) {
        let mut news = self
            .host
            .news
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let now = self.politeness.now_ms();
        if let HostOutcome::Slow { wait } = outcome {
            news.held_until = news.held_until.max(now + wait.as_millis() as u64);
        }
        news.host.news(outcome, now, self.politeness.backoff_max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::pool::Pool;

    fn politeness(per_host: u32) -> Politeness {
        let settings = Settings {
            concurrent_requests: 64,
            concurrent_requests_per_domain: per_host,
            ..Settings::default()
        };
        Politeness::new(&settings, Arc::new(Pool::new(64).share(64)))
    }

    #[tokio::test]
    async fn a_host_entry_lives_while_its_slots_are_held_or_awaited() {
        let p = politeness(2);
        let (ta1, ta2, tb, ta3) = (
            p.join("a.test"),
            p.join("a.test"),
            p.join("b.test"),
            p.join("a.test"),
        );
        let a1 = ta1.slots().await;
        let a2 = ta2.slots().await;
        let b = tb.slots().await;
        assert_eq!(p.hosts_in_use(), 2);
        // A third request for a.test waits: the host's limit still holds.
        let mut third = Box::pin(ta3.slots());
        assert!(futures_util::poll!(third.as_mut()).is_pending());
        drop(a1);
        let a3 = third.await;
        drop((a2, b, ta1, ta2, tb));
        assert_eq!(p.hosts_in_use(), 1, "a.test is still held");
        drop(a3);
        drop(ta3);
        assert_eq!(p.hosts_in_use(), 0);
    }

    #[tokio::test]
    async fn a_request_that_gives_up_waiting_lets_go_of_its_host() {
        let p = politeness(1);
        let holder = p.join("a.test");
        let held = holder.slots().await;
        {
            let waiter = p.join("a.test");
            let waiting = tokio::time::timeout(Duration::from_millis(10), waiter.slots()).await;
            assert!(waiting.is_err(), "the host's only slot is taken");
        }
        drop(held);
        drop(holder);
        assert_eq!(p.hosts_in_use(), 0);
    }

    #[test]
    fn requests_paced_before_their_host_was_slowed_are_paced_again() {
        let p = politeness(8);
        let turn = p.join("a.test");
        let other_host = p.join("b.test");
        let ms = Duration::from_millis;
        // Sporadic failures do not slow the host (the cluster's rule).
        turn.news(HostOutcome::Error);
        turn.news(HostOutcome::Ok);
        turn.news(HostOutcome::Error);
        assert_eq!(turn.pace(ms(0)), Pace::Go);
        // Most requests failing does: a request paced before that takes a
        // fresh slot at the new spacing; one already paced as slowly goes.
        for _ in 0..8 {
            turn.news(HostOutcome::Error);
        }
        let Pace::Repace { spacing, hold } = turn.pace(ms(0)) else {
            panic!("not paced again");
        };
        assert!(spacing > ms(0) && hold.is_zero(), "{spacing:?} {hold:?}");
        assert_eq!(turn.pace(spacing), Pace::Go);
        assert_eq!(other_host.pace(ms(0)), Pace::Go);
        // A Retry-After holds even requests paced slowly enough.
        turn.news(HostOutcome::Slow {
            wait: Duration::from_secs(1),
        });
        let Pace::Repace { spacing, hold } = turn.pace(ms(60_000)) else {
            panic!("not held for Retry-After");
        };
        assert!(
            hold >= ms(900) && spacing >= ms(1000),
            "{spacing:?} {hold:?}"
        );
        // One longer than a lease is worth waiting for: back to the queue
        // (half of the default 30 s lease).
        turn.news(HostOutcome::Slow {
            wait: Duration::from_secs(20),
        });
        assert_eq!(turn.pace(ms(60_000)), Pace::Requeue);
        drop(turn);
        drop(other_host);
        assert_eq!(p.hosts_in_use(), 0, "what was learnt goes with the entry");
    }

    #[tokio::test]
    async fn many_hosts_one_after_another_leave_no_entries() {
        let p = politeness(8);
        for i in 0..10_000 {
            let turn = p.join(&format!("h{i}.test"));
            let _slots = turn.slots().await;
        }
        assert_eq!(p.hosts_in_use(), 0);
    }
}
