//! Workers run inside the test process, as mini-redis's tests start its
//! server: the same engine `crawlworker run` drives (spider loaded and
//! layered as the command does, [`SpiderRun`] connected and run), without a
//! process per worker. For the tests where no signal is the point; those
//! where SIGKILL or SIGTERM is the point start `crawlworker run` processes
//! (`crawlworker_testkit::Worker`).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crawlworker::cli::load_spider;
use crawlworker::config::Config;
use crawlworker::downloader::budget::Budget;
use crawlworker::downloader::Downloader;
use crawlworker::settings::{Overrides, RedisUrl};
use crawlworker::worker::shared::Shared;
use crawlworker::worker::{RunSummary, SpiderRun, StopRules};

static SEQ: AtomicU64 = AtomicU64::new(0);

/// One worker running in this process.
pub struct InProcess {
    task: JoinHandle<anyhow::Result<RunSummary>>,
    stop: watch::Sender<bool>,
    /// Its spider's downloader, to look at what it keeps.
    downloader: std::sync::Arc<Downloader>,
    /// Its memory budget (`download_memory_budget`), if it has one.
    budget: Option<std::sync::Arc<Budget>>,
}

impl InProcess {
    /// Starts a worker of `spider` on `redis`; `settings` are given as the
    /// `CRAWLWORKER_*` variables a `crawlworker run` process would read.
    pub async fn start(
        spider: &Path,
        redis: &str,
        settings: &[(&str, &str)],
        rules: StopRules,
    ) -> InProcess {
        let mut cli = Overrides::from_env(|var| {
            settings
                .iter()
                .find(|(k, _)| *k == var)
                .map(|(_, v)| v.to_string())
        })
        .unwrap_or_else(|e| panic!("bad test settings: {e}"));
        cli.redis_url = Some(RedisUrl::parse(redis).unwrap_or_else(|e| panic!("{e}")));
        let spider =
            load_spider(&Config::default(), spider, &cli).unwrap_or_else(|e| panic!("{e}"));
        let settings = spider.settings.clone();
        let (stop, shutdown) = watch::channel(false);
        let id = format!("in-process-{}", SEQ.fetch_add(1, Ordering::Relaxed));
        let shared = Shared::new(id, settings.concurrent_requests as usize, None)
            .with_memory_budget(settings.download_memory_budget.0);
        let budget = shared.pool.budget();
        let run = SpiderRun::connect(spider, settings, &shared, &shutdown)
            .await
            .unwrap_or_else(|e| panic!("cannot start an in-process worker: {e:#}"))
            .unwrap_or_else(|| panic!("the in-process worker stopped before it started"));
        let downloader = run.downloader();
        InProcess {
            task: tokio::spawn(run.run(rules, shutdown)),
            stop,
            downloader,
            budget,
        }
    }

    /// Its memory budget, to look at what it holds.
    pub fn budget(&self) -> std::sync::Arc<Budget> {
        self.budget
            .clone()
            .unwrap_or_else(|| panic!("the in-process worker has no memory budget"))
    }

    /// The running spider's downloader.
    pub fn downloader(&self) -> std::sync::Arc<Downloader> {
        std::sync::Arc::clone(&self.downloader)
    }

    /// Waits up to `limit` for the worker to stop on its own.
    pub async fn wait(self, limit: Duration) -> RunSummary {
        match tokio::time::timeout(limit, self.task).await {
            Ok(Ok(Ok(summary))) => summary,
            Ok(Ok(Err(e))) => panic!("the in-process worker failed: {e:#}"),
            Ok(Err(e)) => panic!("the in-process worker crashed: {e}"),
            Err(_) => panic!("the in-process worker did not stop within {limit:?}"),
        }
    }

    /// Stops the worker as a first SIGTERM would, and waits for it.
    pub async fn stop(self) -> RunSummary {
        let _ = self.stop.send(true);
        self.wait(Duration::from_secs(60)).await
    }
}
