//! Politeness inside one worker. The cluster-wide part, each host's next
//! free slot, is reserved by the frontier's lease scripts, which hand every
//! leased request its wait; here the request waits for that slot holding no
//! download slot, then takes one of its host's slots
//! (`concurrent_requests_per_domain`), one of the spider's
//! (`concurrent_requests`) and one of the worker process's, which its
//! spiders share (`worker::pool`).
//!
//! A host's slots exist only while a request for it is in the downloader
//! ([`InUse`]): a crawl over a million hosts keeps as many entries as it
//! has requests in progress, not one per host ever seen. No pacing state
//! lives here (the next slot is in Redis), so nothing the cluster needs is
//! lost when an entry goes.
//!
//! What the worker does remember is what its own responses said about a
//! host lately, by the cluster's back-off rule ([`HostState::news`]). A
//! request leased before its host began failing (or before the failure's
//! commit reached Redis) was given a slot at the old pace. Once the host
//! is slowed down well beyond that pace, such a request takes a fresh
//! slot of the cluster's pacing at the new spacing (as Scrapy applies a
//! slot's new delay to the requests already queued in it), or goes back to
//! the queue if a Retry-After holds the host for more than half a lease
//! ([`Turn::pace`]). Without this, every request a worker held for the
//! host (twice its download slots, see `worker::pool`) would reach it
//! before the first failure's back-off did.
//!
//! That news outlives the host's slots ([`Recent`]): a request leased
//! before the news may come to the downloader only after the request that
//! brought it has gone (its task not yet started, or its lease on the way
//! back from Redis). Only hosts that failed or were slowed have an entry,
//! and it goes once the host is back to normal, or a lease after its last
//! news (a request leased before it has come, gone back or expired by
//! then).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::in_use::{Held, InUse};
use crate::frontier::politeness::HostState;
use crate::frontier::HostOutcome;
use crate::settings::Settings;
use crate::worker::pool::Share;

/// A request whose slot was spaced from the one before by at least its
/// host's back-off divided by this goes on that slot. While a host
/// fails, its back-off climbs by up to about this much per response, and
/// the cluster's pacing follows a commit behind: requests leased a failure
/// or two behind the worker's news would each take a second slot, leaving
/// their first unused, and the host's schedule would fill with holes in
/// which nothing reaches it (measured: two seconds of nothing while a
/// failing host's back-off climbed).
const REPACE_FACTOR: u32 = 2;

/// The worker's download slots, per host and in all.
#[derive(Debug)]
pub struct Politeness {
    downloads: Arc<Semaphore>,
    /// The spider's share of the worker's slots.
    share: Arc<Share>,
    per_host: usize,
    /// Host → its slots in this worker, while a request uses them.
    hosts: InUse<Host>,
    /// What this worker's responses said lately about the hosts they
    /// slowed or found failing.
    recent: Mutex<Recent>,
    /// The clock of the hosts' news (ms since this instant).
    epoch: Instant,
    /// The back-off rule's longest delay (ms).
    backoff_max: u64,
    /// The longest wait a request holds its lease for.
    max_wait: Duration,
}

/// One host in this worker.
#[derive(Debug)]
struct Host {
    /// Its download slots (`concurrent_requests_per_domain`).
    slots: Arc<Semaphore>,
    /// This worker's requests waiting for one of them.
    waiting: AtomicUsize,
}

/// Counts a request waiting for its host's slot while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn on(count: &'a AtomicUsize) -> Waiting<'a> {
        count.fetch_add(1, Ordering::Relaxed);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Host → what this worker's own responses said about it lately, for the
/// hosts they slowed or found failing (see the module doc). Times are ms
/// on the politeness clock.
#[derive(Debug)]
struct Recent {
    hosts: HashMap<String, News>,
    /// How long news is kept after the last (ms): a lease.
    keep: u64,
    /// When stale entries are next looked for.
    next_sweep: u64,
}

/// What this worker's own responses from a host said lately.
#[derive(Debug, Default, Clone, Copy)]
struct News {
    /// The cluster's back-off numbers as these responses would set them.
    host: HostState,
    /// Until when a Retry-After holds the host.
    held_until: u64,
    /// When the last response came.
    heard: u64,
}

impl News {
    /// Nothing a request of the host must wait for.
    fn normal(&self, now: u64) -> bool {
        self.host.backoff == 0 && self.host.errors == 0 && self.held_until <= now
    }

    /// Heard of more than `keep` ago, and holding nothing any more.
    fn stale(&self, now: u64, keep: u64) -> bool {
        self.held_until <= now && self.heard.saturating_add(keep) <= now
    }
}

impl Recent {
    fn new(keep: u64) -> Recent {
        Recent {
            hosts: HashMap::new(),
            keep,
            next_sweep: 0,
        }
    }

    /// The host's news at `now`, unless forgotten.
    fn get(&mut self, host: &str, now: u64) -> Option<News> {
        self.sweep(now);
        let keep = self.keep;
        self.hosts
            .get(host)
            .filter(|news| !news.stale(now, keep))
            .copied()
    }

    /// Learns what a response from `host` said at `now`.
    fn hear(&mut self, host: &str, outcome: HostOutcome, now: u64, backoff_max: u64) {
        self.sweep(now);
        let mut news = match self.hosts.get(host) {
            Some(news) if !news.stale(now, self.keep) => *news,
            // Nothing to forget for a host at full speed: no entry.
            _ if matches!(outcome, HostOutcome::Ok | HostOutcome::None) => {
                self.hosts.remove(host);
                return;
            }
            _ => News::default(),
        };
        if let HostOutcome::Slow { wait } = outcome {
            news.held_until = news.held_until.max(now + wait.as_millis() as u64);
        }
        news.host.news(outcome, now, backoff_max);
        news.heard = now;
        if news.normal(now) {
            self.hosts.remove(host);
        } else {
            self.hosts.insert(host.to_string(), news);
        }
    }

    /// Hosts remembered at `now`.
    fn len(&mut self, now: u64) -> usize {
        self.forget_stale(now);
        self.hosts.len()
    }

    /// Forgets stale entries, at most every quarter of a lease.
    fn sweep(&mut self, now: u64) {
        if now >= self.next_sweep {
            self.forget_stale(now);
        }
    }

    fn forget_stale(&mut self, now: u64) {
        let keep = self.keep;
        self.hosts.retain(|_, news| !news.stale(now, keep));
        self.next_sweep = now + (keep / 4).max(1);
    }
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
            recent: Mutex::new(Recent::new(settings.lease_timeout.as_millis() as u64)),
            epoch: Instant::now(),
            backoff_max: settings.adaptive_backoff_max_delay.as_millis() as u64,
            max_wait: crate::frontier::max_wait(settings.lease_timeout),
        }
    }

    /// A request for `host` comes to the downloader.
    pub fn join(&self, host: &str) -> Turn<'_> {
        Turn {
            politeness: self,
            host: self.hosts.hold(host, || Host {
                slots: Arc::new(Semaphore::new(self.per_host)),
                waiting: AtomicUsize::new(0),
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
        self.share.will_wait();
    }

    /// Hosts with a request in the downloader right now.
    pub fn hosts_in_use(&self) -> usize {
        self.hosts.len()
    }

    /// Hosts whose recent news this worker remembers (they failed or were
    /// slowed within a lease).
    pub fn hosts_remembered(&self) -> usize {
        self.recent().len(self.now_ms())
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.recent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Requests waiting for their host's slot: they hold no download
    /// slot, so the worker does not count them as busy.
    pub fn waiting(&self) -> usize {
        self.share.waiting()
    }

    /// Waits for the host's turn (a request counted by [`Self::will_wait`]);
    /// it stops counting as waiting when the wait ends or is abandoned.
    pub async fn wait_turn(&self, wait: Duration) {
        struct Counted<'a>(&'a Share);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.waited();
            }
        }
        let _counted = Counted(&self.share);
        tokio::time::sleep(wait).await;
    }
}

impl Turn<'_> {
    /// Takes a slot of the host, a download slot of the spider and one of
    /// the worker, waiting for them.
    pub async fn slots(&self) -> Slots {
        // The semaphores are never closed, so acquiring cannot fail.
        let waiting = Waiting::on(&self.host.waiting);
        let host = Arc::clone(&self.host.slots).acquire_owned().await.ok();
        drop(waiting);
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
    /// failing, or before the cluster heard of it): by a back-off over
    /// [`REPACE_FACTOR`] times that spacing, or by a Retry-After still in
    /// force.
    pub fn pace(&self, paced_with: Duration) -> Pace {
        let p = self.politeness;
        let now = p.now_ms();
        let Some(news) = p.recent().get(self.host.key(), now) else {
            return Pace::Go;
        };
        let hold = Duration::from_millis(news.held_until.saturating_sub(now));
        let backoff = Duration::from_millis(news.host.backoff);
        if hold.is_zero() && backoff <= paced_with * REPACE_FACTOR {
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

    /// Whether the host's slot a download gave back just now went straight
    /// to another of this worker's requests waiting for one (a semaphore
    /// hands a permit given back to a waiter at once, so then none is
    /// free), and if so how many were waiting: 0 when it did not. The
    /// host's slots stay busy about that many pages' time, and the page's
    /// commit may wait for others that long without leaving one idle (see
    /// `worker::pool::Share::commit`).
    pub fn waiting_for_slot(&self) -> usize {
        if self.host.slots.available_permits() > 0 {
            return 0;
        }
        self.host.waiting.load(Ordering::Relaxed).max(1)
    }

    /// Learns what a response said about the host (before its slots are
    /// given back, so the next request for the host knows).
    pub fn news(&self, outcome: HostOutcome) {
        let p = self.politeness;
        p.recent()
            .hear(self.host.key(), outcome, p.now_ms(), p.backoff_max);
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
    async fn a_slot_given_back_goes_on_only_to_a_request_waiting_for_it() {
        let p = politeness(1);
        let first = p.join("a.test");
        let held = first.slots().await;
        drop(held);
        assert_eq!(
            first.waiting_for_slot(),
            0,
            "nobody waits: the slot is free"
        );
        let held = first.slots().await;
        let second = p.join("a.test");
        let mut waiting = Box::pin(second.slots());
        assert!(
            tokio::time::timeout(Duration::from_millis(10), &mut waiting)
                .await
                .is_err(),
            "the host's only slot is taken"
        );
        drop(held);
        assert_eq!(first.waiting_for_slot(), 1, "handed to the request waiting");
        let _now_held = waiting.await;
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
        // Paced a step of the climb behind (a commit behind) still goes.
        assert_eq!(turn.pace(spacing / 2), Pace::Go);
        assert!(matches!(turn.pace(spacing / 3), Pace::Repace { .. }));
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
        assert_eq!(p.hosts_in_use(), 0);
        // What was learnt outlives the slots: a request leased before the
        // news comes to the downloader after the one that brought it.
        assert_eq!(p.join("a.test").pace(ms(60_000)), Pace::Requeue);
        assert_eq!(p.hosts_remembered(), 1);
    }

    #[test]
    fn news_is_kept_only_for_hosts_in_trouble_and_for_a_lease() {
        let (keep, max) = (30_000, 60_000);
        let mut recent = Recent::new(keep);
        // Healthy hosts leave nothing behind.
        for i in 0..1000 {
            recent.hear(&format!("h{i}.test"), HostOutcome::Ok, 0, max);
        }
        assert_eq!(recent.len(0), 0);
        // A failure is remembered until good responses wear it off...
        recent.hear("a.test", HostOutcome::Error, 0, max);
        assert_eq!(recent.len(0), 1);
        let mut now = 0;
        while recent.get("a.test", now).is_some() {
            now += 1;
            recent.hear("a.test", HostOutcome::Ok, now, max);
            assert!(now < 100, "never forgotten");
        }
        assert_eq!(recent.len(now), 0);
        // ...or a lease passes without news: a Retry-After in force is
        // kept until it is over.
        recent.hear("b.test", HostOutcome::Error, 0, max);
        let slow = HostOutcome::Slow {
            wait: Duration::from_millis(50_000),
        };
        recent.hear("c.test", slow, 0, max);
        assert!(recent.get("b.test", keep - 1).is_some());
        assert!(recent.get("b.test", keep).is_none());
        assert!(recent.get("c.test", keep).is_some());
        assert_eq!(recent.len(keep), 1);
        assert_eq!(recent.len(50_000), 0);
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
