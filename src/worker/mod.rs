//! The worker: one process's share of the crawl. For each spider it holds a
//! [`SpiderRun`] (its frontier, HTTP client, settings and counters — nothing
//! process-wide), and runs the loop:
//!
//! 1. lease as many requests as there is room for (concurrency minus pages
//!    in flight); when the queue cannot fill the room, claim start entries;
//! 2. each leased request becomes a page task: download → extract → commit
//!    (one atomic step, see [`crate::frontier`]);
//! 3. with nothing to do, wait for a wake-up from Redis (pub/sub, or the
//!    start key's watch for producers that publish none: see
//!    [`crate::frontier::pickup`]), not a poll; `--idle-exit` and
//!    `--until-drained` end the loop.
//!
//! A background task renews the leases of pages in flight and records the
//! worker's heartbeat; another sweeps stale per-host entries out of Redis
//! (see [`Frontier::sweep`]). Redis outages are retried with backoff: the worker
//! pauses, says so, and resumes when Redis returns, losing nothing (a page
//! whose lease expired meanwhile is committed by nobody twice: the commit
//! checks the lease).

pub mod failures;
mod offload;
mod output;
mod page;
mod pause;
pub mod pool;
pub mod progress;
mod revisit;
pub mod shared;
mod start;
mod stop;
mod turns;
mod upkeep;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::downloader::Downloader;
use crate::frontier::{Frontier, RedisFrontier};
use crate::metrics::Metrics;
use crate::settings::Settings;
use crate::spider::Spider;
use crate::stats::Tally;
use pool::Share;
use progress::Progress;
use turns::Turns;

pub use crate::frontier::outage::with_redis;
pub(crate) use start::{shard_count_mismatch, unsharded_crawl_message};

/// How a worker decides to stop on its own.
#[derive(Debug, Clone, Copy, Default)]
pub struct StopRules {
    /// Exit after this long without work (scrapy-redis's
    /// MAX_IDLE_TIME_BEFORE_CLOSE).
    pub idle_exit: Option<Duration>,
    /// Exit when the whole crawl is finished: nothing queued, nothing in
    /// flight in any worker, no start entries.
    pub until_drained: bool,
}

/// Why the worker stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// A signal (or the caller) asked it to.
    Shutdown,
    /// `--idle-exit`: nothing to do for that long.
    Idle,
    /// `--until-drained`: the whole crawl is finished.
    Drained,
    /// `--until-drained`: the cluster has fetched `max_pages`.
    PageLimit,
}

impl StopReason {
    /// Scrapy's `finish_reason` for it.
    pub fn finish_reason(self) -> &'static str {
        match self {
            StopReason::Shutdown => "shutdown",
            StopReason::Idle => "idle",
            StopReason::Drained => "finished",
            StopReason::PageLimit => "closespider_pagecount",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopReason::Shutdown => "asked to stop",
            StopReason::Idle => "idle",
            StopReason::Drained => "the crawl is drained",
            StopReason::PageLimit => "max_pages reached",
        })
    }
}

/// What one spider's loop did.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub spider: String,
    /// This worker's counts.
    pub counts: progress::Counts,
    pub reason: StopReason,
    pub elapsed: Duration,
}

impl RunSummary {
    /// Why a run that ended on its own (drained, idle, `max_pages`: a
    /// local crawl, `--until-drained`, `--idle-exit`) failed: every one of
    /// its requests failed for good (`any`: at least one did). None for a
    /// run that was stopped, or whose requests did not fail so.
    pub fn failed_requests(&self, any: bool) -> Option<String> {
        let c = &self.counts;
        if self.reason == StopReason::Shutdown || c.failed == 0 || (c.done > 0 && !any) {
            return None;
        }
        let what = if c.done == 0 {
            format!(
                "every request failed for good ({})",
                crate::wording::count(c.failed as usize, "request")
            )
        } else {
            format!(
                "{} failed for good (--fail-on-failure), {} done",
                crate::wording::count(c.failed as usize, "request"),
                c.done
            )
        };
        Some(format!("spider `{}`: {what}", self.spider))
    }
}

/// One spider in this worker.
pub struct SpiderRun {
    pub spider: Arc<Spider>,
    pub settings: Arc<Settings>,
    frontier: Frontier,
    /// The spider's downloader stage (HTTP client, politeness, robots.txt).
    downloader: Arc<Downloader>,
    /// Ids of the requests this worker holds leases on.
    inflight: Arc<Mutex<HashSet<String>>>,
    /// What this worker did, for its progress lines and heartbeat.
    progress: Arc<Progress>,
    /// Where its metrics go, when they are served.
    metrics: Option<Metrics>,
    /// Its share of the worker's download slots.
    share: Arc<Share>,
    /// Whether this worker knows the spider is paused (see [`pause`]).
    paused: Arc<watch::Sender<bool>>,
    /// What it says about requests that gave no page.
    failures: Arc<failures::FailureLog>,
}

impl SpiderRun {
    /// The spider's downloader, to see what it keeps per host.
    pub fn downloader(&self) -> Arc<Downloader> {
        Arc::clone(&self.downloader)
    }
}

/// Why a spider cannot start when its items key holds another type than
/// its sink writes, and what to do about it.
pub fn sink_mismatch_message(spider: &Spider, frontier: &RedisFrontier, found: &str) -> String {
    let sink = frontier.sink();
    format!(
        "spider `{}`: the items key `{}` is a {found}, but `[items] sink = \"{}\"` writes a {}; nothing was crawled. Name another key in [keys] ({} = \"…\"), or delete this one once its items are consumed (crawlworker flush {} --items)",
        spider.name,
        frontier.items_key(),
        sink.as_str(),
        sink.as_str(),
        sink.key_kind().name(),
        spider.source.display(),
    )
}

/// Requests leased per download slot at most, not counting those waiting
/// for their host's politeness slot (which hold no download slot).
const LEASES_PER_SLOT: usize = 4;

/// Requests waiting for their host's politeness slot, per download slot at
/// most: a paced host's requests leased ahead (up to `max_wait`, half a
/// lease) hold no download slot and never keep the worker from leasing
/// other hosts' work or claiming start entries, up to this bound on what
/// it holds in memory.
const WAITING_PER_SLOT: usize = 16;

/// How often an idle spider looks for work when nothing can arrive
/// unannounced (its start key watched, its wake-ups subscribed, the next
/// retry, lease expiry, revisit or politeness slot known): a safety net,
/// not the way work is found.
const QUIET_RECHECK: Duration = Duration::from_secs(30);

/// The unique id of this worker process, as it appears in `stats`.
pub fn worker_id() -> String {
    let host = hostname();
    let nonce: u32 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host}:{}:{nonce:08x}", std::process::id())
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_string())
}

impl SpiderRun {
    /// What this worker did so far (for a status line).
    pub fn progress(&self) -> Arc<Progress> {
        self.progress.clone()
    }

    /// The spider's frontier (for a status line's queue sizes).
    pub fn frontier(&self) -> Frontier {
        self.frontier.clone()
    }

    /// Turns the periodic progress line off (a live status line shows it).
    pub fn without_progress_lines(mut self) -> SpiderRun {
        let mut settings = (*self.settings).clone();
        settings.log_stats_interval = Duration::ZERO;
        self.settings = Arc::new(settings);
        self
    }

    fn inflight_ids(&self) -> Vec<String> {
        self.inflight
            .lock()
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Runs the spider until a stop rule or `shutdown` ends it.
    pub async fn run(
        self,
        rules: StopRules,
        shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<RunSummary> {
        let clock = Instant::now();
        self.record_start(&shutdown).await;
        let background = self.spawn_background();
        self.say_started();
        let mut turns = Turns::new(&self, rules, shutdown).await;
        let reason = turns.run().await;
        // No commit hands it work from now on; what was handed before
        // still arrives on its wake-up subscription, kept until handed back.
        if let Err(e) = self.frontier.stop_waiting().await {
            tracing::debug!(error = %e, "cannot say this worker waits for no more work; leases other workers hand it expire and go back to the queue");
        }
        // Its blocking wait, if any, ends now (its connection is free for
        // the next spider, e.g. this one's reloaded version).
        let Turns {
            mut tasks, wake, ..
        } = turns;
        let fatal = self.frontier.fatal().get();
        self.stop_pages(&mut tasks, fatal.is_some(), reason).await;
        self.hand_back_handed().await;
        drop(wake);
        self.share.set_active(false);
        background.stop();
        self.record_stop(reason).await;
        if let Some(message) = fatal {
            return Err(anyhow::anyhow!("{message}"));
        }
        Ok(self.report(reason, clock.elapsed()).await)
    }

    /// Sets the crawl's `start_time` if no worker has yet.
    async fn record_start(&self, shutdown: &watch::Receiver<bool>) {
        let started = now_rfc3339_millis();
        let nothing = Tally::default();
        with_redis(
            "record start time",
            shutdown,
            &self.frontier.fatal(),
            || self.frontier.add_stats(&nothing, Some(&started)),
        )
        .await;
    }

    fn say_started(&self) {
        let redis = if self.frontier.is_shared() {
            self.settings.redis_url.to_string()
        } else {
            "none (a local crawl, in memory)".to_string()
        };
        tracing::info!(spider = %self.spider.name, worker = %self.frontier.worker(), redis = %redis, concurrency = self.share.limit(), "worker started");
        let changed = &self.spider.settings_changed;
        if !changed.is_empty() {
            tracing::info!(spider = %self.spider.name, "settings not at their default: {}", changed.join(", "));
        }
    }

    fn page_context(&self, shutdown: &watch::Receiver<bool>) -> page::Context {
        page::Context {
            shutdown: shutdown.clone(),
            paused: self.paused(),
            failures: self.failures.clone(),
            spider: self.spider.clone(),
            settings: self.settings.clone(),
            frontier: self.frontier.clone(),
            downloader: self.downloader.clone(),
            inflight: self.inflight.clone(),
            progress: self.progress.clone(),
            metrics: self.metrics.clone(),
            share: self.share.clone(),
        }
    }
}

/// At most 200 bytes of an entry or a reason, for logs (see [`crate::wording::cut`]).
pub fn preview(s: &str) -> String {
    crate::wording::cut(s, 200).into_owned()
}

/// UTC now in RFC 3339 (`2026-11-22T02:50:00Z`), for a heartbeat's start.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// UTC now in RFC 3339 with milliseconds (`2026-11-22T02:50:00.123Z`), for
/// `start_time` and `finish_time`: `elapsed_time_seconds` is measured
/// between them, and whole seconds would add up to one to a short crawl.
pub fn now_rfc3339_millis() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}
