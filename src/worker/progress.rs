//! What a running worker tells its operator: counters of its own pages,
//! items and errors, a progress line every `log_stats_interval` (Scrapy's
//! LogStats: pages and items with their rates, the cluster's queue), and a
//! summary when it stops.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::frontier::{Frontier, PageResult};
use crate::wording::plural;

/// This worker's counts for one spider; shared by its page tasks.
#[derive(Debug, Default)]
pub struct Progress {
    commits: AtomicU64,
    pages: AtomicU64,
    done: AtomicU64,
    items: AtomicU64,
    retries: AtomicU64,
    failed: AtomicU64,
    dead: AtomicU64,
}

/// A copy of the counts at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests committed: done, retried, failed or set aside.
    pub commits: u64,
    /// Pages: committed requests that got a response (of any status), as
    /// the cluster's `response_received_count` counts them; a request
    /// refused by the network and retried twice is three commits and no
    /// page.
    pub pages: u64,
    /// Requests done: committed with no failure, retry or dead letter.
    pub done: u64,
    pub items: u64,
    pub retries: u64,
    /// Requests that failed for good.
    pub failed: u64,
    /// Malformed requests set aside.
    pub dead: u64,
}

impl Progress {
    /// Counts one committed page.
    pub fn committed(&self, page: &PageResult) {
        self.commits.fetch_add(1, Ordering::Relaxed);
        let answered = page
            .stats
            .get(crate::stats::RESPONSE_RECEIVED_COUNT.name)
            .clamp(0, 1) as u64;
        self.pages.fetch_add(answered, Ordering::Relaxed);
        let done = page.failed.is_none() && page.retry.is_none() && page.dead.is_none();
        self.done.fetch_add(u64::from(done), Ordering::Relaxed);
        self.items
            .fetch_add(page.items.len() as u64, Ordering::Relaxed);
        self.retries
            .fetch_add(u64::from(page.retry.is_some()), Ordering::Relaxed);
        self.failed
            .fetch_add(u64::from(page.failed.is_some()), Ordering::Relaxed);
        self.dead
            .fetch_add(u64::from(page.dead.is_some()), Ordering::Relaxed);
    }

    pub fn counts(&self) -> Counts {
        Counts {
            commits: self.commits.load(Ordering::Relaxed),
            pages: self.pages.load(Ordering::Relaxed),
            done: self.done.load(Ordering::Relaxed),
            items: self.items.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            dead: self.dead.load(Ordering::Relaxed),
        }
    }
}

impl Counts {
    /// `103 pages, 243 items, 2 retries, 1 failed, 0 set aside`.
    pub fn describe(&self) -> String {
        format!(
            "{}, {}, {}, {} failed, {} set aside",
            plural(self.pages as usize, "page", "pages"),
            plural(self.items as usize, "item", "items"),
            plural(self.retries as usize, "retry", "retries"),
            self.failed,
            self.dead
        )
    }
}

/// Logs a progress line every `every` until aborted: this worker's pages
/// and items (with their rates over the interval, as Scrapy's LogStats)
/// and the cluster's queue, read once per line.
pub fn spawn_log_stats(
    spider: String,
    frontier: Frontier,
    progress: std::sync::Arc<Progress>,
    every: Duration,
) -> Option<tokio::task::JoinHandle<()>> {
    if every.is_zero() {
        return None;
    }
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        let mut last = progress.counts();
        let mut last_at = Instant::now();
        loop {
            tick.tick().await;
            let now = progress.counts();
            let minutes = last_at.elapsed().as_secs_f64() / 60.0;
            let rate = |a: u64, b: u64| (a.saturating_sub(b) as f64 / minutes.max(1e-9)).round();
            let queue = match frontier.status().await {
                Ok(q) => format!(
                    "cluster: {} queued, {} in flight, {} start entries, {} retries waiting{}",
                    q.queued,
                    q.inflight,
                    q.start,
                    q.delayed,
                    if q.items_backlog_full {
                        format!("; NOT LEASING: the consumers of {} lag by items_stream_max_backlog items or more", frontier.items_key())
                    } else {
                        String::new()
                    }
                ),
                Err(e) => format!("cluster queue unknown ({e})"),
            };
            tracing::info!(
                spider = %spider,
                "crawled {} (at {} pages/min), scraped {} (at {} items/min), {} failed, {} retries; {queue}",
                plural(now.pages as usize, "page", "pages"),
                rate(now.pages, last.pages),
                plural(now.items as usize, "item", "items"),
                rate(now.items, last.items),
                now.failed,
                now.retries,
            );
            last = now;
            last_at = Instant::now();
        }
    }))
}
