//! Starting a spider's run: connecting its frontier to Redis (riding out
//! an outage until Redis answers, checking the dupefilter, the item sink
//! and that the queue is not one scrapy-redis left, recording the spiders
//! it hands work to, queueing the seeds), or making a local crawl's
//! frontier, then
//! assembling the run's stages around it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::shared::Shared;
use super::{sink_mismatch_message, SpiderRun};
use crate::downloader::Downloader;
use crate::frontier::admin::DupefilterMismatch;
use crate::frontier::redis::shard_count::{Recorder, ShardCount};
use crate::frontier::{Frontier, FrontierError, LocalFrontier, RedisFrontier, ShardedFrontier};
use crate::settings::Settings;
use crate::spider::Spider;

/// Why a spider's frontier cannot start: Redis (`Ok`, ridden out when it
/// is an outage) or what the spider or its keys hold (`Err`, a message).
type Refusal = std::result::Result<FrontierError, String>;

/// The checks a frontier (or a shard's) passes before a crawl uses it: the
/// dupefilter's mode, the item sink, and no scrapy-redis queue left in it.
async fn check_frontier(spider: &Spider, f: &mut RedisFrontier) -> Result<(), Refusal> {
    f.prepare_dupefilter().await.map_err(|e| match e {
        DupefilterMismatch::Redis(e) => Ok(e),
        mismatch => Err(format!("spider `{}`: {mismatch}", spider.name)),
    })?;
    if let Some(found) = f.sink_mismatch().await.map_err(Ok)? {
        return Err(Err(sink_mismatch_message(spider, f, &found)));
    }
    if f.holds_scrapy_queue().await.map_err(Ok)? {
        return Err(Err(format!(
            "spider `{}`: the request queue `{}` holds requests a scrapy-redis crawl queued (pickles), which a worker cannot lease; nothing was crawled. Convert them first: crawlworker import-queue {}",
            spider.name,
            f.keys.requests,
            spider.source.display()
        )));
    }
    Ok(())
}

/// Refuses a spider whose `[keys] shards` is not the number its crawl
/// was started with (recorded by its first worker): its requests and
/// fingerprints are where that number put them.
async fn check_shard_count(spider: &Spider, zero: &RedisFrontier) -> Result<(), Refusal> {
    let shards = spider.shards.len();
    match zero
        .record_shards(shards, Recorder::Join)
        .await
        .map_err(Ok)?
    {
        ShardCount::Recorded(recorded) if recorded != shards as u64 => Err(Err(
            shard_count_mismatch(spider, &zero.keys.control, recorded),
        )),
        ShardCount::Unsharded(key) => Err(Err(unsharded_crawl_message(spider, &key))),
        _ => Ok(()),
    }
}

/// Why a spider will not work on a crawl recorded (in `control`) as over
/// another number of shards.
pub(crate) fn shard_count_mismatch(spider: &Spider, control: &str, recorded: u64) -> String {
    format!(
        "spider `{}`: its crawl in Redis was started with `[keys] shards = {recorded}` (recorded in `{control}`), and the spider now says {}; each request and fingerprint is on the shard that number chose. Set `shards = {recorded}` again, or start a new crawl (`crawlworker flush {} --all`)",
        spider.name,
        spider.shards.len(),
        spider.source.display()
    )
}

/// Why a sharded spider will not start on a crawl that began without
/// shards, whose `key` is in the way, and what to do.
pub(crate) fn unsharded_crawl_message(spider: &Spider, key: &str) -> String {
    format!(
        "spider `{}` is over {} shards, but its crawl in Redis began without: `{key}` holds its requests or fingerprints, where a sharded spider would look for only shard 0's hosts and crawl the others' again; nothing was crawled. For a scrapy-redis crawl, or a crawlworker crawl drained to its dupefilter, run `crawlworker import-queue {}` (it copies the fingerprints to every shard and imports a scrapy-redis queue); otherwise remove `[keys] shards` until the crawl is drained, or start a new crawl (`crawlworker flush {} --all`)",
        spider.name,
        spider.shards.len(),
        spider.source.display(),
        spider.source.display()
    )
}

/// A sharded spider's frontier: every shard checked, the shard count
/// recorded, the seeds queued on their hosts' shards.
async fn connect_shards(
    spider: &Spider,
    redis: &crate::frontier::RedisTarget,
    worker: &str,
) -> Result<(Frontier, u64), Refusal> {
    let keys = |i: usize| spider.shards[i].clone();
    let options = spider.frontier_options(worker);
    let mut shards = ShardedFrontier::connect_each(redis, options, spider.shards.len(), keys)
        .await
        .map_err(Ok)?;
    check_shard_count(spider, &shards[0]).await?;
    for shard in &mut shards {
        check_frontier(spider, shard).await?;
    }
    // Before any spider it feeds looks whether it is drained.
    shards[0].record_relations().await.map_err(Ok)?;
    let sharded = ShardedFrontier::new(shards);
    let seeded = sharded.seed(&spider.start.seeds).await.map_err(Ok)?;
    Ok((sharded.into(), seeded))
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
            crate::frontier::connection::check_spider_slots(&spider.shards, &spider.handoffs)
                .map_err(|e| anyhow::anyhow!("spider `{}`: {e}", spider.name))?;
        }
        let redis = shared
            .redis(&settings.redis_url)
            .map_err(|e| anyhow::anyhow!("invalid Redis address {shown}: {e}"))?;
        let mut backoff = crate::retry_schedule::RetrySchedule::REDIS.attempts();
        let (mut attempts, mut said) = (0u32, None::<Instant>);
        // Connecting, checking the dupefilter and queueing the seeds all
        // ride out an outage (Redis may go away between any two of them).
        let (frontier, seeded) = loop {
            let started = async {
                let (frontier, seeded) = if spider.shards.len() > 1 {
                    connect_shards(&spider, &redis, worker).await?
                } else {
                    let mut f = RedisFrontier::connect(&redis, spider.frontier_options(worker))
                        .await
                        .map_err(Ok)?;
                    check_shard_count(&spider, &f).await?;
                    check_frontier(&spider, &mut f).await?;
                    // Before any spider it feeds looks whether it is drained.
                    f.record_relations().await.map_err(Ok)?;
                    let seeded = f.seed(&spider.start.seeds).await.map_err(Ok)?;
                    (Frontier::from(f), seeded)
                };
                Ok::<_, Refusal>((frontier, seeded))
            };
            match started.await {
                Ok(done) => {
                    if attempts > 0 {
                        tracing::info!(redis = %shown, "Redis answers after {attempts} failed attempts; starting");
                    }
                    break done;
                }
                Err(Ok(e)) if e.is_outage() || (redis.is_cluster() && e.is_redirect()) => {
                    attempts += 1;
                    // Said at once, then every half minute, not per attempt.
                    if said.is_none_or(|t| t.elapsed() >= Duration::from_secs(30)) {
                        tracing::warn!(
                            "cannot reach Redis at {shown} ({}: {}); retrying every few seconds until it answers ({} so far). Is redis-server running there? The address comes from --redis, REDIS_URL or the redis_url setting",
                            e.outage(),
                            e.said(),
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
        Self::assemble(spider, settings, shared, frontier).map(Some)
    }

    /// A spider crawled in this process alone, with a local frontier (`run
    /// --local`): its start entries are `start`, its items go to `sink`.
    /// Returns the run and the crawl's frontier, for what the command
    /// reports at the end.
    pub fn local(
        spider: Spider,
        settings: Settings,
        shared: &Shared,
        start: Vec<String>,
        sink: crate::frontier::local::ItemWriter,
    ) -> anyhow::Result<(SpiderRun, LocalFrontier)> {
        LocalFrontier::refuse_handoffs(&spider.name, &spider.handoffs)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let local = LocalFrontier::new(spider.frontier_options(&shared.worker), start, sink);
        local.seed(&spider.start.seeds);
        let run = Self::assemble(spider, settings, shared, local.clone().into())?;
        Ok((run, local))
    }

    fn assemble(
        spider: Spider,
        settings: Settings,
        shared: &Shared,
        frontier: Frontier,
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
        let failures = Arc::new(super::failures::FailureLog::new(
            &spider,
            frontier.is_shared(),
            &frontier.keys().failed,
        ));
        Ok(SpiderRun {
            spider,
            settings,
            frontier,
            downloader: Arc::new(downloader),
            inflight: Arc::new(Mutex::new(HashSet::new())),
            progress: Arc::default(),
            metrics,
            share,
            paused: Arc::new(tokio::sync::watch::channel(false).0),
            failures,
        })
    }
}
