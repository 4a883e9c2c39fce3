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
//! A download takes a worker slot after its host's turn has come (see
//! `downloader::politeness`), so requests waiting for a slow host hold none.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::downloader::budget::{Budget, ParseGate};

/// One worker's download slots.
#[derive(Debug)]
pub struct Pool {
    slots: Arc<Semaphore>,
    total: usize,
    /// Spiders that have work now.
    active: AtomicUsize,
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
            budget: (budget > 0).then(|| Budget::new(budget)),
            parsing: (budget > 0).then(|| ParseGate::new(budget)),
        })
    }

    pub fn total(&self) -> usize {
        self.total
    }

    /// A spider's place in the pool; `own` is its `concurrent_requests`.
    pub fn share(self: &Arc<Pool>, own: usize) -> Share {
        Share {
            pool: self.clone(),
            own: own.max(1),
            active: AtomicBool::new(false),
            pages: AtomicUsize::new(0),
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

    /// Whether a finishing page may lease its replacement in its commit:
    /// only while the spider is within its share.
    pub fn may_replace(&self) -> bool {
        self.pages.load(Ordering::Relaxed) <= self.limit()
    }

    /// The worker's memory budget for response bodies, if it has one.
    pub fn budget(&self) -> Option<Arc<Budget>> {
        self.pool.budget.clone()
    }

    /// Waits until a page with a body of `bytes` may be parsed (see
    /// [`ParseGate`]); it may while the permit lives.
    pub async fn parsing(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        match &self.pool.parsing {
            Some(gate) => gate.enter(bytes).await,
            None => None,
        }
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
        deep.started(5);
        assert!(deep.may_replace());
        deep.started(1);
        assert!(!deep.may_replace());
    }
}
