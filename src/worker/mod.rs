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

mod offload;
mod page;
pub mod pool;
pub mod progress;
mod revisit;
pub mod shared;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::downloader::Downloader;
use crate::frontier::admin::DupefilterMismatch;
use crate::frontier::hosts::Swept;
use crate::frontier::pickup::StartWatch;
use crate::frontier::wake::Wake;
use crate::frontier::{
    now_secs, Frontier, FrontierError, Heartbeat, Leased, RedisFrontier, RedisTarget, Refused,
    StartClaim,
};
use crate::metrics::Metrics;
use crate::settings::Settings;
use crate::spider::Spider;
use crate::stats::Tally;
use pool::Share;
use progress::Progress;
use shared::Shared;

pub use crate::frontier::outage::with_redis;

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

/// One spider in this worker.
pub struct SpiderRun {
    pub spider: Arc<Spider>,
    pub settings: Arc<Settings>,
    frontier: Frontier,
    /// The spider's downloader stage (HTTP client, politeness, robots.txt).
    downloader: Arc<Downloader>,
    /// The Redis its frontier uses (none in a local crawl).
    redis: Option<RedisTarget>,
    /// Ids of the requests this worker holds leases on.
    inflight: Arc<Mutex<HashSet<String>>>,
    /// What this worker did, for its progress lines and heartbeat.
    progress: Arc<Progress>,
    /// Where its metrics go, when they are served.
    metrics: Option<Metrics>,
    /// Its share of the worker's download slots.
    share: Arc<Share>,
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

/// Requests leased per download slot at most (the others wait for their
/// hosts' politeness slots).
const LEASES_PER_SLOT: usize = 4;

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
    /// Connects a spider to Redis, retrying while Redis is unreachable
    /// until `shutdown` fires; its work is also counted in the worker's
    /// metrics, its downloads take slots of the worker's pool, and it uses
    /// the Redis connections of the worker's other spiders on the same
    /// Redis.
    pub async fn connect(
        spider: Spider,
        settings: Settings,
        shared: &Shared,
        shutdown: &watch::Receiver<bool>,
    ) -> anyhow::Result<Option<SpiderRun>> {
        let worker = &shared.worker;
        let shown = settings.redis_url.to_string();
        if settings.redis_url.is_cluster() {
            crate::frontier::connection::check_one_slot(&spider.keys, &spider.handoffs)
                .map_err(|e| anyhow::anyhow!("spider `{}`: {e}", spider.name))?;
        }
        let redis = shared
            .redis(&settings.redis_url)
            .map_err(|e| anyhow::anyhow!("invalid Redis address {shown}: {e}"))?;
        let mut backoff = crate::backoff::Backoff::REDIS.attempts();
        let (mut attempts, mut said) = (0u32, None::<Instant>);
        // Connecting, checking the dupefilter and queueing the seeds all
        // ride out an outage (Redis may go away between any two of them).
        let (frontier, seeded) = loop {
            let started = async {
                let mut f = RedisFrontier::connect(&redis, spider.frontier_options(worker))
                    .await
                    .map_err(Ok)?;
                f.prepare_dupefilter().await.map_err(|e| match e {
                    DupefilterMismatch::Redis(e) => Ok(e),
                    mismatch => Err(format!("spider `{}`: {mismatch}", spider.name)),
                })?;
                if let Some(found) = f.sink_mismatch().await.map_err(Ok)? {
                    return Err(Err(sink_mismatch_message(&spider, &f, &found)));
                }
                let seeded = f.seed(&spider.start.seeds).await.map_err(Ok)?;
                Ok::<_, std::result::Result<FrontierError, String>>((f, seeded))
            };
            match started.await {
                Ok(done) => {
                    if attempts > 0 {
                        tracing::info!(redis = %shown, "Redis answers after {attempts} failed attempts; starting");
                    }
                    break done;
                }
                Err(Ok(e)) if e.is_outage() => {
                    attempts += 1;
                    // Said at once, then every half minute, not per attempt.
                    if said.is_none_or(|t| t.elapsed() >= Duration::from_secs(30)) {
                        tracing::warn!(
                            "cannot reach Redis at {shown} ({}); retrying every few seconds until it answers ({} so far). Is redis-server running there? The address comes from --redis, REDIS_URL or the redis_url setting",
                            e.cause,
                            crate::wording::count(attempts as usize, "attempt")
                        );
                        said = Some(Instant::now());
                    }
                    if crate::frontier::outage::sleep_or_shutdown(backoff.next_delay(), shutdown)
                        .await
                    {
                        return Ok(None);
                    }
                }
                Err(Ok(e)) => return Err(anyhow::anyhow!("cannot use Redis at {shown}: {e}")),
                Err(Err(message)) => return Err(anyhow::anyhow!("{message}")),
            }
        };
        if seeded > 0 {
            tracing::info!(spider = %spider.name, "queued {seeded} of the spider's sitemaps and feeds ([start] sitemap and feed)");
        }
        Self::assemble(spider, settings, shared, frontier.into(), Some(redis)).map(Some)
    }

    /// A spider crawled in this process alone, with a local frontier (`run
    /// --local`): its start entries are `start`, its items go to `sink`.
    pub fn local(
        spider: Spider,
        settings: Settings,
        shared: &Shared,
        start: Vec<String>,
        sink: crate::frontier::local::ItemWriter,
    ) -> anyhow::Result<SpiderRun> {
        if let Some(h) = spider.handoffs.first() {
            anyhow::bail!(
                "spider `{}` hands links to spider `{}` (to_spider), which a local crawl cannot reach: run it on a Redis cluster, or remove to_spider",
                spider.name,
                h.spider
            );
        }
        let local = crate::frontier::LocalFrontier::new(
            spider.frontier_options(&shared.worker),
            start,
            sink,
        );
        local.seed(&spider.start.seeds);
        Self::assemble(
            spider,
            settings,
            shared,
            Frontier::Local(Arc::new(local)),
            None,
        )
    }

    fn assemble(
        spider: Spider,
        settings: Settings,
        shared: &Shared,
        frontier: Frontier,
        redis: Option<RedisTarget>,
    ) -> anyhow::Result<SpiderRun> {
        let (metrics, pool) = (shared.metrics.clone(), &shared.pool);
        let share = Arc::new(pool.share(settings.concurrent_requests as usize));
        let settings = Arc::new(settings);
        let spider = Arc::new(spider);
        let downloader = Downloader::new(
            spider.clone(),
            settings.clone(),
            frontier.clone(),
            metrics.clone(),
            share.clone(),
        )?;
        Ok(SpiderRun {
            spider,
            settings,
            frontier,
            downloader: Arc::new(downloader),
            redis,
            inflight: Arc::new(Mutex::new(HashSet::new())),
            progress: Arc::default(),
            metrics,
            share,
        })
    }

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
        mut shutdown: watch::Receiver<bool>,
    ) -> anyhow::Result<RunSummary> {
        let name = self.spider.name.clone();
        let clock = Instant::now();
        let started = now_rfc3339();
        let nothing = Tally::default();
        let fatal = self.frontier.fatal();
        with_redis("record start time", &shutdown, &fatal, || {
            self.frontier.add_stats(&nothing, Some(&started))
        })
        .await;
        let (wake, start_watch) = match (&self.redis, self.frontier.local()) {
            (Some(redis), _) => (
                redis.wake(&self.frontier.keys().wake),
                // Entries other producers push publish no wake-up: watched apart.
                redis
                    .watch_start(
                        &self.frontier.keys().start_urls,
                        self.spider.start.kind,
                        self.settings.idle_recheck,
                    )
                    .await,
            ),
            (None, Some(local)) => (Wake::local(local.wake()), StartWatch::none()),
            (None, None) => (Wake::local(Arc::default()), StartWatch::none()),
        };
        let upkeep = self.spawn_upkeep();
        let sweep = self.spawn_sweep();
        let log_stats = progress::spawn_log_stats(
            name.clone(),
            self.frontier.clone(),
            self.progress.clone(),
            self.settings.log_stats_interval,
        );
        let batch = self.spider.start.batch_size;
        // Each page task returns the requests its commit leased to replace it.
        let mut tasks: JoinSet<Vec<Leased>> = JoinSet::new();
        let mut idle_since = Instant::now();
        // When this worker last said it waits for other workers' leases.
        let mut said_waiting: Option<Instant> = None;
        let redis = match &self.redis {
            Some(_) => self.settings.redis_url.to_string(),
            None => "none (a local crawl, in memory)".to_string(),
        };
        tracing::info!(spider = %name, worker = %self.frontier.worker(), redis = %redis, concurrency = self.share.limit(), "worker started");

        let reason = loop {
            // A fatal Redis error (see outage::fatal) ends the loop as a
            // stop does; what follows tells them apart.
            if *shutdown.borrow() || fatal.get().is_some() {
                break StopReason::Shutdown;
            }
            // This spider's share of the worker's slots, which changes as
            // the worker's other spiders get work or run out of it.
            let concurrency = self.share.limit();
            let max_tasks = concurrency * LEASES_PER_SLOT;
            // Room: pages not waiting for their host's turn take a download
            // slot, or wait for one (see pool::Share::lease_limit); the
            // leases held stay within a bound. (Free semaphore permits
            // would overcount: a replacement page just spawned has not taken
            // its permit yet.)
            // While commits in flight lease, they also fill the leases
            // held ahead; the loop leases only for idle slots then, not
            // on every wake-up a commit's new links publish.
            let leases = if self.share.leasing() {
                concurrency
            } else {
                self.share.lease_limit()
            };
            let room = leases
                .saturating_sub(self.busy(&tasks))
                .min(max_tasks.saturating_sub(tasks.len()));
            let mut got = 0;
            // The last look found no start entry: the watch may wait for one.
            let mut start_empty = false;
            if room > 0 {
                let peek = batch.min(room);
                let asked = Instant::now();
                let Some((leased, start)) = with_redis("lease requests", &shutdown, &fatal, || {
                    self.frontier.lease(room, peek)
                })
                .await
                else {
                    continue;
                };
                got = leased.len();
                if let Some(m) = &self.metrics {
                    m.observe_redis(&name, "lease", asked.elapsed().as_secs_f64());
                    let mut t = Tally::default();
                    t.add(crate::stats::SCHEDULER_DEQUEUED, got as i64);
                    m.count(&name, &t);
                }
                self.spawn_pages(&mut tasks, leased, &shutdown);
                start_empty = start.is_empty();
                if got < room && !start.is_empty() && self.claim_start(start, &shutdown).await > 0 {
                    idle_since = Instant::now();
                    continue;
                }
            }
            if got > 0 || !tasks.is_empty() {
                idle_since = Instant::now();
                self.share.set_active(true);
                start_watch.disarm();
            }
            if tasks.is_empty() && got == 0 {
                self.share.set_active(false);
                if rules.until_drained {
                    if let Some(status) = with_redis("read queue status", &shutdown, &fatal, || {
                        self.frontier.status()
                    })
                    .await
                    {
                        if status.drained() {
                            break StopReason::Drained;
                        }
                        if status.page_limit_reached && status.inflight == 0 {
                            break StopReason::PageLimit;
                        }
                        // Only other workers' leases keep the crawl open: a
                        // dead worker's come back when they expire.
                        let only_leases = status.queued == 0
                            && status.start == 0
                            && status.delayed == 0
                            && self.inflight_ids().is_empty();
                        if only_leases
                            && said_waiting.is_none_or(|t| t.elapsed() >= Duration::from_secs(15))
                        {
                            tracing::info!(
                                spider = %name,
                                "waiting for {} leased by other workers; a stopped worker's leases return to the queue within {}",
                                crate::wording::count(status.inflight as usize, "page"),
                                humantime::format_duration(self.settings.lease_timeout)
                            );
                            said_waiting = Some(Instant::now());
                        }
                    }
                }
                if rules.idle_exit.is_some_and(|d| idle_since.elapsed() >= d) {
                    break StopReason::Idle;
                }
                if start_empty {
                    start_watch.arm();
                }
                // Work that announces itself comes with a wake-up; the
                // rest is polled for every `idle_recheck`, unless the start
                // key's watch sees it all (then only as a safety net).
                let mut wait = self.settings.idle_recheck;
                if start_watch.covers() && wake.live() {
                    wait = wait.max(QUIET_RECHECK);
                }
                // Retries, expired leases, revisits and politeness slots
                // coming due: be there when they do.
                if let Some(due) = self.frontier.next_due_in() {
                    wait = wait.min(due + Duration::from_millis(1));
                }
                if let Some(d) = rules.idle_exit {
                    wait = wait.min(
                        d.saturating_sub(idle_since.elapsed())
                            .max(Duration::from_millis(10)),
                    );
                }
                tokio::select! {
                    _ = wake.wait(wait) => {}
                    _ = start_watch.changed() => {}
                    _ = shutdown.changed() => {}
                    _ = fatal.raised() => {}
                }
                continue;
            }
            // Busy: wait for a page to finish, or for new work if there is room.
            tokio::select! {
                Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                    if let Ok(next) = done {
                        self.spawn_pages(&mut tasks, next, &shutdown);
                    }
                }
                _ = wake.wait(self.settings.idle_recheck), if tasks.len() < max_tasks && self.busy(&tasks) < leases => {}
                // Another spider's share changed the room.
                _ = tokio::time::sleep(Duration::from_millis(250)), if self.share.limit() != concurrency => {}
                _ = shutdown.changed() => {}
                _ = fatal.raised() => {}
            }
        };

        // Its blocking wait, if any, ends now (its connection is free for
        // the next spider, e.g. this one's reloaded version).
        drop(start_watch);
        let fatal = fatal.get();
        if fatal.is_some() {
            // Pages cannot be committed: stopped at once, their leases
            // handed back (a commit that failed wrote nothing).
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
            self.hand_back().await;
        } else if reason == StopReason::Shutdown {
            self.drain(&mut tasks).await;
        }
        self.share.set_active(false);
        upkeep.abort();
        sweep.abort();
        if let Some(task) = log_stats {
            task.abort();
        }
        let _ = self.frontier.unregister().await;
        if let Err(e) = self.frontier.record_finish(reason.finish_reason()).await {
            tracing::warn!(error = %e, "could not record finish_time in the stats");
        }
        if let Some(message) = fatal {
            return Err(anyhow::anyhow!("{message}"));
        }
        let counts = self.progress.counts();
        let elapsed = clock.elapsed();
        tracing::info!(spider = %name, "worker stopped ({reason}) after {:.1} s: {}", elapsed.as_secs_f64(), counts.describe());
        if reason == StopReason::Drained && counts.pages == 0 && self.redis.is_some() {
            // Nothing anywhere, ever: most often entries pushed to another
            // key (a spider name or [keys] that does not match).
            let mut ever = 0;
            for stat in [
                crate::stats::RESPONSE_RECEIVED_COUNT,
                crate::stats::START_URLS_CLAIMED,
            ] {
                ever += self.frontier.stat(stat).await.unwrap_or(1);
            }
            if ever == 0 {
                tracing::warn!(
                    spider = %name,
                    "nothing to crawl: the start key {} ({}) is empty and nothing is queued. Push start entries with `crawlworker push-urls SPIDER ENTRY…`, or check that the producer pushes to this key (the spider's name and [keys] name it)",
                    self.frontier.keys().start_urls,
                    self.spider.start.kind.as_str()
                );
            }
        }
        if let Ok(mut stats) = self.frontier.stats().await {
            stats.sort();
            let lines: Vec<String> = stats.iter().map(|(k, v)| format!("  {k}: {v}")).collect();
            let whose = if self.redis.is_some() {
                "cluster stats"
            } else {
                "stats"
            };
            tracing::info!(spider = %name, "{whose}:\n{}", lines.join("\n"));
        }
        Ok(RunSummary {
            spider: name,
            counts,
            reason,
            elapsed,
        })
    }

    /// Pages in flight that hold, wait for or are about to take a download
    /// slot, or are being committed (not waiting for their host's turn).
    fn busy(&self, tasks: &JoinSet<Vec<Leased>>) -> usize {
        tasks
            .len()
            .saturating_sub(self.downloader.politeness().waiting())
    }

    fn spawn_pages(
        &self,
        tasks: &mut JoinSet<Vec<Leased>>,
        leased: Vec<Leased>,
        shutdown: &watch::Receiver<bool>,
    ) {
        self.share.started(leased.len());
        for l in leased {
            if let Ok(mut set) = self.inflight.lock() {
                set.insert(l.id.clone());
            }
            // Only a request that will wait for its slot (a dead letter
            // does not) is counted as waiting.
            if l.request.is_ok() && !l.wait.is_zero() {
                self.downloader.politeness().will_wait();
            }
            // Page tasks log inside the spider's span (spider, worker).
            tasks.spawn(page::crawl(self.page_context(shutdown), l).in_current_span());
        }
    }

    /// Lets pages in flight finish within the grace period, then hands the
    /// leases of the unfinished ones (and of any request leased meanwhile)
    /// back to the queue at once.
    async fn drain(&self, tasks: &mut JoinSet<Vec<Leased>>) {
        let grace = self.settings.shutdown_grace;
        if !tasks.is_empty() {
            tracing::info!(
                pages = tasks.len(),
                "stopping: letting downloads in progress finish (up to {}); requests not yet started go back to the queue",
                crate::wording::duration(grace)
            );
        }
        let finished =
            tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
        if finished.is_err() {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
        self.hand_back().await;
    }

    /// Hands the leases of the pages not finished back to the queue.
    async fn hand_back(&self) {
        let left = self.inflight_ids();
        if !left.is_empty() {
            match self.frontier.release(&left).await {
                Ok(n) => {
                    tracing::info!(handed_back = n, "unfinished pages handed back to the queue")
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not hand pages back; their leases expire and other workers take them")
                }
            }
        }
    }

    /// Converts and claims start entries; returns how many were claimed.
    async fn claim_start(&self, entries: Vec<String>, shutdown: &watch::Receiver<bool>) -> u64 {
        let claims: Vec<StartClaim> = entries
            .into_iter()
            .map(|entry| {
                let outcome = self.spider.start_request(&entry).map_err(Refused::from);
                if let Err(refused) = &outcome {
                    tracing::warn!(key = %self.frontier.keys().start_urls, entry = %preview(&entry), reason = %preview(&refused.reason), "start entry set aside in the dead-letter key");
                }
                StartClaim { entry, outcome }
            })
            .collect();
        match with_redis(
            "claim start entries",
            shutdown,
            &self.frontier.fatal(),
            || self.frontier.claim_start(&claims),
        )
        .await
        {
            Some(c) => {
                if let Some(m) = &self.metrics {
                    let mut t = Tally::default();
                    t.add(crate::stats::SCHEDULER_ENQUEUED, c.enqueued as i64);
                    t.add(crate::stats::DUPEFILTER_FILTERED, c.filtered as i64);
                    t.add(crate::stats::DEADLETTER_COUNT, c.dead as i64);
                    m.count(&self.spider.name, &t);
                }
                tracing::debug!(
                    claimed = c.claimed,
                    enqueued = c.enqueued,
                    filtered = c.filtered,
                    dead = c.dead,
                    "start entries claimed"
                );
                // Entries claimed but filtered or dead still mean progress.
                c.enqueued + c.filtered + c.dead
            }
            None => 0,
        }
    }

    fn page_context(&self, shutdown: &watch::Receiver<bool>) -> page::Context {
        page::Context {
            shutdown: shutdown.clone(),
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

    /// Deletes per-host entries that can no longer matter from Redis, every
    /// [`SWEEP_EVERY`], a budget in proportion to the pages committed.
    fn spawn_sweep(&self) -> tokio::task::JoinHandle<()> {
        let frontier = self.frontier.clone();
        let progress = self.progress.clone();
        let robots_ttl = self.settings.robotstxt_ttl;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SWEEP_EVERY);
            let mut pages = progress.counts().pages;
            // Steps skipped while the spider is idle and the last step
            // found nothing to delete, so an idle worker costs Redis little
            // (one step per SWEEP_IDLE_EVERY).
            let mut skip = 0u32;
            loop {
                tick.tick().await;
                let now = progress.counts().pages;
                let worked = now > pages;
                if !worked && skip > 0 {
                    skip -= 1;
                    continue;
                }
                let budget = sweep_budget(now.saturating_sub(pages));
                pages = now;
                match frontier.sweep(budget, robots_ttl).await {
                    Ok(swept) => {
                        tracing::trace!(?swept, "swept per-host entries");
                        if !worked && swept == Swept::default() {
                            skip = (SWEEP_IDLE_EVERY.as_secs() / SWEEP_EVERY.as_secs().max(1))
                                .saturating_sub(1) as u32;
                        }
                    }
                    // Nothing is lost: the next step goes on from the same place.
                    Err(e) => {
                        tracing::debug!(error = %e, "sweeping per-host entries failed; retrying")
                    }
                }
            }
        })
    }

    /// Renews leases and records the heartbeat, every [`Heartbeat::EVERY`]
    /// (or a third of the lease timeout, when that is shorter).
    fn spawn_upkeep(&self) -> tokio::task::JoinHandle<()> {
        let frontier = self.frontier.clone();
        let inflight = self.inflight.clone();
        let progress = self.progress.clone();
        let metrics = self.metrics.clone();
        let spider = self.spider.name.clone();
        let lease = self.settings.lease_timeout;
        // Leases are renewed well before they expire, and the heartbeat is
        // fresh enough for `stats` to show live numbers.
        let every = (self.settings.lease_timeout / 3)
            .min(Heartbeat::EVERY)
            .max(Duration::from_millis(100));
        let started = now_rfc3339();
        let host = hostname();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let ids: Vec<String> = inflight
                    .lock()
                    .map(|s| s.iter().cloned().collect())
                    .unwrap_or_default();
                match frontier.renew(&ids).await {
                    Ok(lost) if !lost.is_empty() => tracing::warn!(count = lost.len(), "leases lost (expired while Redis was away?); those pages will not be committed by this worker"),
                    Ok(_) => {}
                    Err(e) => tracing::debug!(error = %e, "lease renewal failed; retrying"),
                }
                let beat = Heartbeat {
                    host: host.clone(),
                    pid: std::process::id(),
                    started: started.clone(),
                    pages: progress.counts().pages,
                    heartbeat: now_secs(),
                    version: env!("CARGO_PKG_VERSION").to_string(),
                };
                let _ = frontier.heartbeat(&beat).await;
                if let Some(m) = &metrics {
                    m.set_in_flight(&spider, ids.len());
                    if let Some(cluster) = read_cluster(&frontier, lease).await {
                        m.set_cluster(&spider, cluster);
                    }
                }
            }
        })
    }
}

/// How often a worker sweeps stale per-host entries out of Redis…
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// …or this often while the spider is idle and finds nothing to delete…
const SWEEP_IDLE_EVERY: Duration = QUIET_RECHECK;
/// …looking at this many entries of each per-host key when idle…
const SWEEP_BASE: usize = 256;
/// …plus this many per page it committed since the last sweep (a page
/// brings at most one new host, so the sweep outpaces new hosts: the keys
/// hold about twice the hosts of the last stretch of activity at most)…
const SWEEP_PER_PAGE: usize = 2;
/// …but at most this many, so one step stays short.
const SWEEP_MAX: usize = 2048;

/// The sweep's budget after `pages` committed since the last one.
fn sweep_budget(pages: u64) -> usize {
    (SWEEP_BASE + SWEEP_PER_PAGE * pages.min(SWEEP_MAX as u64) as usize).min(SWEEP_MAX)
}

/// The cluster's state for the metrics, read in a few round trips every
/// heartbeat (never per request).
async fn read_cluster(frontier: &Frontier, lease: Duration) -> Option<crate::metrics::Cluster> {
    let queues = frontier.status().await.ok()?;
    let now = now_secs();
    let live_within = Heartbeat::gone_after(lease).as_secs_f64();
    let workers_live = frontier
        .workers()
        .await
        .ok()?
        .iter()
        .filter(|(_, beat)| now - beat.heartbeat <= live_within)
        .count() as u64;
    let leases_expired = frontier.stat(crate::stats::LEASE_EXPIRED).await.ok()?;
    let hosts_backed_off = frontier.hosts_backed_off().await.ok()?;
    Some(crate::metrics::Cluster {
        queues,
        workers_live,
        leases_expired,
        hosts_backed_off,
    })
}

/// At most 200 bytes of an entry or a reason, for logs (see [`crate::wording::cut`]).
pub fn preview(s: &str) -> String {
    crate::wording::cut(s, 200).into_owned()
}

/// UTC now in RFC 3339 (`2026-11-22T02:50:00Z`), for `start_time`.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
