//! The download slots of one worker process, shared fairly by the spiders it
//! runs. A worker running many spiders (`crawlworker run spiders/news/`)
//! has `total` slots in all; each spider with work gets an equal share
//! (`total` / spiders with work, at least 1, never above its own
//! `concurrent_requests`), so a spider with a deep backlog cannot take the
//! slots of one that has a few pages to fetch, and a spider with nothing to
//! do takes no share at all. Within its share a spider keeps its usual
//! pipeline (commits lease the next request); beyond it, a finishing page
//! leases no replacement, and the slots go round.
//!
//! A spider holds leases on up to four times its share of pages when it
//! is the worker's only spider, and twice when it shares the worker
//! ([`Share::lease_limit`]): one per slot, and more waiting for one. A
//! finished page's slot then goes at once to a request already here, so
//! the page's commit may wait a few milliseconds for others to share its
//! Redis script call without leaving a slot idle (see
//! `frontier::commits`); the more held ahead, the longer it may wait and
//! the more pages share a call (four rather than two halved a one-worker
//! crawl's script calls per page: BENCHMARKS.md). But a request held
//! ahead takes the next free slot of the worker's, whichever spider's
//! share it is in: with other spiders in the worker, a spider that
//! leased four times its share while it was alone would keep their slots
//! for as long as its surplus lasts, so there it holds twice. Every
//! spider of a worker holds the same multiple of its share, so the slots
//! still go round fairly. A page that queues nothing may wait
//! too while nothing is queued for the spider to fetch in its place (its
//! last lease came back short, [`Share::leased`]) and another of its pages
//! is in progress: its slot would idle all the same.
//!
//! A download takes a worker slot after its host's turn has come (see
//! `downloader::politeness`), so requests waiting for a slow host hold none.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::downloader::budget::{Budget, ParseGate, Reservation};
use crate::frontier::Patience;

/// Leases a spider holds per download slot of its share, as the worker's
/// only spider…
const LEASES_AHEAD_ALONE: usize = 4;
/// …and when it shares the worker with others (see the module docs).
const LEASES_AHEAD_SHARED: usize = 2;

/// One worker's download slots.
#[derive(Debug)]
pub struct Pool {
    slots: Arc<Semaphore>,
    total: usize,
    /// Spiders that have work now.
    active: AtomicUsize,
    /// Spiders the worker runs (their shares alive), with work or not.
    spiders: AtomicUsize,
    /// The bytes of response bodies all its downloads may hold at once
    /// (`download_memory_budget`); none: no bound.
    budget: Option<Arc<Budget>>,
    /// The parses its pages may run at once, by their estimated memory
    /// (as large as `budget`); none: no bound.
    parsing: Option<ParseGate>,
}

impl Pool {
    pub fn new(total: usize) -> Arc<Pool> {
        Pool::with_budget(total, 0)
    }

    /// A pool whose downloads hold at most `budget` bytes of bodies at
    /// once (0: no bound).
    pub fn with_budget(total: usize, budget: u64) -> Arc<Pool> {
        let total = total.max(1);
        Arc::new(Pool {
            slots: Arc::new(Semaphore::new(total)),
            total,
            active: AtomicUsize::new(0),
            spiders: AtomicUsize::new(0),
            budget: (budget > 0).then(|| Budget::new(budget)),
            parsing: (budget > 0).then(|| ParseGate::new(budget)),
        })
    }

    pub fn total(&self) -> usize {
        self.total
    }

    /// Its memory budget, if it has one.
    pub fn budget(&self) -> Option<Arc<Budget>> {
        self.budget.clone()
    }

    /// A spider's place in the pool; `own` is its `concurrent_requests`.
    pub fn share(self: &Arc<Pool>, own: usize) -> Share {
        self.spiders.fetch_add(1, Ordering::Relaxed);
        Share {
            pool: self.clone(),
            own: own.max(1),
            active: AtomicBool::new(false),
            pages: AtomicUsize::new(0),
            committing: AtomicUsize::new(0),
            asked: AtomicUsize::new(0),
            finishing: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            dry: AtomicBool::new(false),
        }
    }
}

/// One spider's share of its worker's pool.
#[derive(Debug)]
pub struct Share {
    pool: Arc<Pool>,
    own: usize,
    active: AtomicBool,
    /// Its pages in flight in this worker (leased, not yet committed).
    pages: AtomicUsize,
    /// Those of its pages being committed.
    committing: AtomicUsize,
    /// The requests their commits lease (to replace them, or to fill the
    /// leases held ahead).
    asked: AtomicUsize,
    /// Its pages downloaded and not yet being committed (parsing).
    finishing: AtomicUsize,
    /// Its pages waiting for their host's politeness slot: they hold no
    /// download slot, and are not in progress for the commit's rules.
    waiting: AtomicUsize,
    /// Whether its last lease (a commit's, the turn loop's, or leases
    /// handed to it) came back short of what it asked: nothing more was
    /// queued for this worker (see [`Share::leased`]).
    dry: AtomicBool,
}

/// A page downloaded and not yet being committed, while it lives (see
/// [`Share::finishing`]), and how many requests were waiting when its
/// host slot went straight to one of them (0: it did not).
pub struct Finishing<'a>(&'a Share, usize);

impl Finishing<'_> {
    /// How many of the spider's requests were waiting for the page's host
    /// slot when it went straight to one of them, 0 when it did not (see
    /// [`Share::commit`]).
    pub fn host_waiting(&self) -> usize {
        self.1
    }
}

impl Drop for Finishing<'_> {
    fn drop(&mut self) {
        self.0.finishing.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Leases one commit asks for at most: its page's replacement, and one
/// towards the leases held ahead.
const MAX_LEASE_NEXT: usize = 2;

/// A page being committed, while it lives (see [`Share::commit`]).
pub struct Commit<'a> {
    share: &'a Share,
    /// Requests its commit leases.
    pub lease_next: usize,
    /// How long its commit may wait for other pages to share the script
    /// call (see `frontier::patience`).
    pub patience: Patience,
}

impl Drop for Commit<'_> {
    fn drop(&mut self) {
        self.share.committing.fetch_sub(1, Ordering::Relaxed);
        self.share
            .asked
            .fetch_sub(self.lease_next, Ordering::Relaxed);
    }
}

impl Share {
    /// How many pages the spider may have in flight now.
    pub fn limit(&self) -> usize {
        let active = self.pool.active.load(Ordering::Relaxed).max(1);
        (self.pool.total / active).clamp(1, self.own)
    }

    /// Marks the spider as having work (or not); only spiders with work
    /// divide the pool.
    pub fn set_active(&self, active: bool) {
        if self.active.swap(active, Ordering::Relaxed) != active {
            if active {
                self.pool.active.fetch_add(1, Ordering::Relaxed);
            } else {
                self.pool.active.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Counts pages leased into this worker, or finished.
    pub fn started(&self, n: usize) {
        self.pages.fetch_add(n, Ordering::Relaxed);
    }

    pub fn finished(&self) {
        let _ = self
            .pages
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| p.checked_sub(1));
    }

    /// How many pages the spider may hold leases on now: its share of the
    /// slots, and three times as many waiting for one as the worker's only
    /// spider, as many again beside others (see the module docs).
    pub fn lease_limit(&self) -> usize {
        let ahead = match self.pool.spiders.load(Ordering::Relaxed) {
            0 | 1 => LEASES_AHEAD_ALONE,
            _ => LEASES_AHEAD_SHARED,
        };
        ahead * self.limit()
    }

    /// A finished page's commit, counted while the guard lives: with
    /// `replace`, it leases what keeps the spider at its lease limit once
    /// the commits in flight are done (its replacement, one more if the
    /// spider is short, none if it is over: its share shrank). It may wait
    /// for others to share the script call while the spider still has a
    /// page in progress (leased and not being committed) for each slot of
    /// its share: thanks to the leases held ahead, the wait leaves no slot
    /// idle. Or while another of its pages is downloaded and about to be
    /// committed (see [`Share::finishing`]). Or, for a page that `queues`
    /// nothing (no links, no tasks, so no other worker waits for it),
    /// while the spider's last lease came back short and another of its
    /// pages is in progress: nothing is queued for this worker to fetch in
    /// the page's slot, which would idle all the same (see
    /// [`Share::leased`]), and the page in progress may join the call. The
    /// last page in flight (the tail of a crawl) never waits.
    ///
    /// And while the page's host slot went straight to another of the
    /// spider's requests waiting for one (`host_waiting` of them): a crawl
    /// of few hosts is bound by their slots (`concurrent_requests_per_domain`)
    /// before its share of the worker's, and the requests it holds ahead
    /// wait for those.
    ///
    /// How long it may wait is the pages' time its slots stay busy: the
    /// requests beyond the slots and the one that took its slot, or those
    /// waiting for its host's slot, whichever is more (see
    /// `frontier::patience`).
    pub fn commit(&self, replace: bool, queues: bool, host_waiting: usize) -> Commit<'_> {
        let committing = self.committing.fetch_add(1, Ordering::Relaxed) + 1;
        let in_progress = self
            .pages
            .load(Ordering::Relaxed)
            .saturating_sub(committing + self.waiting());
        let lease_next = if replace {
            let held = in_progress + self.asked.load(Ordering::Relaxed);
            self.lease_limit().saturating_sub(held).min(MAX_LEASE_NEXT)
        } else {
            0
        };
        self.asked.fetch_add(lease_next, Ordering::Relaxed);
        let may_wait = in_progress >= self.limit()
            || host_waiting > 0
            || self.finishing.load(Ordering::Relaxed) > 0
            || (!queues && in_progress > 0 && self.dry.load(Ordering::Relaxed));
        let ahead = (in_progress + 1)
            .saturating_sub(self.limit())
            .max(host_waiting)
            .max(1);
        Commit {
            share: self,
            lease_next,
            patience: match may_wait {
                true => Patience::Ahead(ahead),
                false => Patience::Now,
            },
        }
    }

    /// Counts a page downloaded until the guard is dropped, just before its
    /// commit: while one is, a commit may wait the moment it takes for
    /// that page to share its script call (pages leased together finish
    /// together). The wait is `commit_wait` at most, and ends when the last
    /// such page joins (its own commit may not wait for another).
    pub fn finishing(&self, host_waiting: usize) -> Finishing<'_> {
        self.finishing.fetch_add(1, Ordering::Relaxed);
        Finishing(self, host_waiting)
    }

    /// Counts a page that will wait for its host's politeness slot, from
    /// when it is leased until [`Share::waited`].
    pub fn will_wait(&self) {
        self.waiting.fetch_add(1, Ordering::Relaxed);
    }

    /// A page's wait for its host's slot ended (or was abandoned).
    pub fn waited(&self) {
        let _ = self
            .waiting
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| w.checked_sub(1));
    }

    /// Its pages waiting for their host's politeness slot.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Records what a lease for the spider (a commit's, the turn loop's,
    /// or one handed to it) brought: `got` of the `asked`. Fewer means
    /// nothing more is queued for this worker now (see [`Share::commit`]).
    pub fn leased(&self, asked: usize, got: usize) {
        if asked > 0 {
            self.dry.store(got < asked, Ordering::Relaxed);
        }
    }

    /// Whether commits in flight lease requests for the spider.
    pub fn leasing(&self) -> bool {
        self.asked.load(Ordering::Relaxed) > 0
    }

    /// The worker's memory budget for response bodies, if it has one.
    pub fn budget(&self) -> Option<Arc<Budget>> {
        self.pool.budget.clone()
    }

    /// Waits until a page with a body of `bytes` may be parsed (see
    /// [`ParseGate`]), and the memory budget is within its total (no
    /// output charged past it waits for its commit); it may while the
    /// permit lives.
    pub async fn parsing(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let permit = match &self.pool.parsing {
            Some(gate) => gate.enter(bytes).await,
            None => None,
        };
        if let Some(budget) = &self.pool.budget {
            budget.within().await;
        }
        permit
    }

    /// Charges a page's output of `bytes` to the worker's memory budget
    /// until the returned reservation is dropped (see [`Budget::charge`]);
    /// none when the worker has no budget.
    pub fn charge_output(&self, bytes: u64) -> Option<Reservation> {
        self.pool.budget.as_ref().map(|b| b.charge(bytes))
    }

    /// Waits for one of the worker's download slots.
    pub async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        // The semaphore is never closed, so acquiring cannot fail.
        self.pool.slots.clone().acquire_owned().await.ok()
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        self.set_active(false);
        self.pool.spiders.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spiders_with_work_divide_the_pool_and_idle_ones_take_nothing() {
        let pool = Pool::new(16);
        let deep = pool.share(16);
        let small: Vec<Share> = (0..3).map(|_| pool.share(16)).collect();
        deep.set_active(true);
        assert_eq!(deep.limit(), 16, "alone, a spider may use every slot");
        for s in &small {
            s.set_active(true);
        }
        assert_eq!(deep.limit(), 4);
        small[0].set_active(false);
        small[0].set_active(false);
        assert_eq!(deep.limit(), 5);
        // Never above its own concurrent_requests, never below 1.
        assert_eq!(pool.share(2).limit(), 2);
        let many: Vec<Share> = (0..40).map(|_| pool.share(16)).collect();
        many.iter().for_each(|s| s.set_active(true));
        assert_eq!(deep.limit(), 1);
        drop(many);
        assert_eq!(deep.limit(), 5);
        // Leases beside other spiders: one per slot of its share, and one
        // more waiting for it.
        assert_eq!(deep.lease_limit(), 10);
        deep.started(10);
        {
            // The spider at its lease limit: a page is replaced, and may
            // wait 5 pages' time (the 4 beyond its 5 slots, and the one
            // that took its slot).
            let first = deep.commit(true, true, 0);
            assert_eq!((first.lease_next, first.patience), (1, Patience::Ahead(5)));
            let later: Vec<Commit> = (0..5).map(|_| deep.commit(true, true, 0)).collect();
            assert!(later.iter().all(|c| c.lease_next == 1));
            assert!(later[..4].iter().all(|c| c.patience != Patience::Now));
            assert!(
                later[4].patience == Patience::Now,
                "a slot would idle: 6 committing, 4 in progress"
            );
            assert!(deep.leasing());
            assert_eq!(
                deep.commit(false, true, 0).lease_next,
                0,
                "no replacement when stopping"
            );
        }
        assert!(!deep.leasing());
        // Over its limit (its share shrank): no replacement; short of it:
        // one more than the page.
        deep.started(1);
        assert_eq!(deep.commit(true, true, 0).lease_next, 0);
        (0..4).for_each(|_| deep.finished());
        assert_eq!(deep.commit(true, true, 0).lease_next, MAX_LEASE_NEXT);
    }

    #[test]
    fn the_only_spider_of_a_worker_holds_four_leases_a_slot_and_two_beside_others() {
        let pool = Pool::new(16);
        let only = pool.share(16);
        only.set_active(true);
        assert_eq!(only.lease_limit(), 64);
        // Another spider in the worker, even one without work yet: the
        // leases held ahead would take its slots.
        let other = pool.share(16);
        assert_eq!(only.lease_limit(), 32);
        other.set_active(true);
        assert_eq!(only.lease_limit(), 16);
        drop(other);
        assert_eq!(only.lease_limit(), 64);
    }

    #[test]
    fn a_page_that_queues_nothing_waits_while_nothing_is_queued_for_the_worker() {
        let pool = Pool::new(4);
        let share = pool.share(4);
        share.set_active(true);
        share.started(2);
        // Two of four slots busy: a page's slot would go to its
        // replacement, so it may not wait, until a lease comes back short.
        assert_eq!(share.commit(true, false, 0).patience, Patience::Now);
        share.leased(3, 3);
        assert_eq!(share.commit(true, false, 0).patience, Patience::Now);
        share.leased(3, 1);
        assert_ne!(share.commit(true, false, 0).patience, Patience::Now);
        assert!(
            share.commit(true, true, 0).patience == Patience::Now,
            "a page whose links others may wait for goes at once"
        );
        // A lease that asked for nothing says nothing; one that got all it
        // asked (or leases handed to the worker) ends the drought.
        share.leased(0, 0);
        assert_ne!(share.commit(true, false, 0).patience, Patience::Now);
        share.leased(2, 2);
        assert_eq!(share.commit(true, false, 0).patience, Patience::Now);
        // The last page in flight has no company to wait for.
        share.leased(3, 1);
        share.finished();
        assert!(
            share.commit(true, false, 0).patience == Patience::Now,
            "the tail of a crawl is committed at once"
        );
    }

    #[test]
    fn a_page_whose_host_slot_went_to_a_waiting_request_may_wait() {
        // A one-host crawl: 4 slots of the worker's, but the host's 2 bind,
        // and the requests held ahead wait for those.
        let pool = Pool::new(4);
        let share = pool.share(4);
        share.set_active(true);
        share.started(3);
        assert_eq!(share.commit(true, true, 0).patience, Patience::Now);
        assert!(
            share.commit(true, true, 1).patience != Patience::Now,
            "its slot is busy again: waiting leaves none idle"
        );
        assert_eq!(
            share.commit(true, true, 6).patience,
            Patience::Ahead(6),
            "as long as the 6 waiting for the host's slots keep them busy"
        );
    }
}
