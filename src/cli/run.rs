//! `crawlworker run`: one worker for one or more spiders (files, or every
//! `*.toml` of a directory), sharing the worker's download slots fairly
//! (`worker::pool`). Spider files are reloaded on SIGHUP and when they
//! change (looked at every 2 s), each checked first. The first SIGINT or
//! SIGTERM stops leasing, lets pages in flight finish within
//! `shutdown_grace` and hands the rest back; a second one exits at once.
//! With `--until-drained` the worker exits once all its spiders read
//! drained: one that stopped before the others finished is looked at again
//! first, and started again if it has work.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::Instrument;

use super::{load_spider, status_line, InvalidInput};
use crate::config::Config;
use crate::frontier::Frontier;
use crate::metrics::{self, Metrics};
use crate::settings::Overrides;
use crate::spider::Spider;
use crate::wording::plural;
use crate::worker::progress::Progress;
use crate::worker::shared::Shared;
use crate::worker::{worker_id, RunSummary, SpiderRun, StopReason, StopRules};

/// How often spider files are looked at for changes (besides SIGHUP).
const WATCH_EVERY: Duration = Duration::from_secs(2);

/// How the worker runs, besides its spiders.
pub struct How {
    pub rules: StopRules,
    /// Where to serve metrics, if anywhere.
    pub metrics_addr: Option<SocketAddr>,
    /// Whether to show a live status line.
    pub status_line: bool,
    /// Exit with [`super::EXIT_REQUESTS_FAILED`] when any request failed
    /// (not only when all did).
    pub fail_on_failure: bool,
}

pub async fn run(
    config: &Config,
    paths: &[PathBuf],
    cli: &Overrides,
    how: How,
) -> anyhow::Result<ExitCode> {
    let spiders = load_all(config, paths, cli)?;
    let (stop, shutdown) = watch::channel(false);
    super::signals::listen_for_signals(stop, super::signals::WORKER);
    // Bound before anything starts, so a taken port fails the command.
    let metrics = match how.metrics_addr {
        Some(addr) => Some(serve_metrics(addr, shutdown.clone()).await?),
        None => None,
    };
    let total = download_slots(&spiders);
    let budget = memory_budget(&spiders);
    let shared = Shared::new(worker_id(), total, metrics).with_memory_budget(budget);
    let mut sup = Supervisor::new(config, paths, cli, how.rules, shared, shutdown.clone());
    sup.fail_on_failure = how.fail_on_failure;
    if spiders.len() > 1 {
        tracing::info!(
            spiders = spiders.len(),
            slots = total,
            "one worker for {} spiders, sharing {total} download slots",
            spiders.len()
        );
    }
    let mut runs = Vec::new();
    for (path, spider) in spiders {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let settings = spider.settings.clone();
        match SpiderRun::connect(spider, settings, &sup.shared, &shutdown).await? {
            Some(run) => runs.push((path, text, run)),
            None => return Ok(ExitCode::SUCCESS),
        }
    }
    if how.status_line {
        runs = with_status_line(runs);
    }
    for (path, text, run) in runs {
        sup.spawn(path, text, Starting::Connected(Box::new(run)));
    }
    sup.supervise().await;
    Ok(if sup.failed {
        ExitCode::FAILURE
    } else if sup.requests_failed {
        ExitCode::from(super::EXIT_REQUESTS_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Loads every spider file `paths` name; every broken spider is reported,
/// not only the first, and so is a spider two files define.
fn load_all(
    config: &Config,
    paths: &[PathBuf],
    cli: &Overrides,
) -> anyhow::Result<Vec<(PathBuf, Spider)>> {
    let files = super::spider_files(paths);
    if files.is_empty() {
        return Err(InvalidInput(format!(
            "no spider files (*.toml) in {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into());
    }
    let mut spiders = Vec::new();
    let mut invalid = Vec::new();
    for path in &files {
        match load_spider(config, path, cli) {
            Ok(s) => spiders.push((path.clone(), s)),
            Err(e) => invalid.push(e.to_string()),
        }
    }
    for (path, s) in &spiders {
        if !s.settings.httpcache_dir.is_empty() {
            invalid.push(format!(
                "{}: spider `{}` has httpcache_dir = {:?}: the page cache is for developing spiders with `parse` and `run --local`, not for crawls on Redis (every worker would replay its own old copy of a page); unset it for this crawl",
                path.display(),
                s.name,
                s.settings.httpcache_dir
            ));
        }
    }
    for (i, (path, s)) in spiders.iter().enumerate() {
        if let Some((other, _)) = spiders[..i].iter().find(|(_, o)| o.name == s.name) {
            invalid.push(format!(
                "{}: spider `{}` is also defined in {}; one worker runs a spider once (rename one of them)",
                path.display(),
                s.name,
                other.display()
            ));
        }
    }
    if !invalid.is_empty() {
        return Err(InvalidInput(invalid.join("\n")).into());
    }
    Ok(spiders)
}

/// Serves the metrics on `addr` until the worker stops.
async fn serve_metrics(
    addr: SocketAddr,
    mut stopping: watch::Receiver<bool>,
) -> anyhow::Result<Metrics> {
    let listener = metrics::server::bind(addr).await?;
    let metrics = Metrics::new();
    tokio::spawn(metrics::server::serve(
        listener,
        metrics.clone(),
        async move {
            let _ = stopping.wait_for(|stop| *stop).await;
        },
    ));
    tracing::info!("metrics on http://{addr}/metrics");
    Ok(metrics)
}

/// The worker's download slots: as many as its most eager spider asks
/// for, shared fairly among the spiders that have work.
fn download_slots(spiders: &[(PathBuf, Spider)]) -> usize {
    spiders
        .iter()
        .map(|(_, s)| s.settings.concurrent_requests as usize)
        .max()
        .unwrap_or(1)
}

/// The worker's memory budget for response bodies: the largest its
/// spiders ask for (0, no bound, is the largest of all).
fn memory_budget(spiders: &[(PathBuf, Spider)]) -> u64 {
    spiders
        .iter()
        .map(|(_, s)| match s.settings.download_memory_budget.0 {
            0 => u64::MAX,
            bytes => bytes,
        })
        .max()
        .filter(|&b| b != u64::MAX)
        .unwrap_or(0)
}

/// On a terminal a live status line replaces the periodic progress lines
/// (for the spiders started now; one loaded later logs them).
fn with_status_line(runs: Vec<(PathBuf, String, SpiderRun)>) -> Vec<(PathBuf, String, SpiderRun)> {
    let Some(bar) = status_line::show() else {
        return runs;
    };
    let runs: Vec<_> = runs
        .into_iter()
        .map(|(p, t, r)| (p, t, r.without_progress_lines()))
        .collect();
    let watched: Vec<_> = runs
        .iter()
        .map(|(_, _, r)| (r.spider.name.clone(), r.progress(), r.frontier()))
        .collect();
    tokio::spawn(update_status(bar, watched));
    runs
}

/// A spider run the supervisor started.
struct Running {
    name: String,
    /// The file's text it was loaded from, to see changes.
    text: String,
    stop: watch::Sender<bool>,
}

/// A spider to start: already connected, or loaded and to be connected.
enum Starting {
    Connected(Box<SpiderRun>),
    Loaded(Box<Spider>),
}

/// Runs the worker's spiders, and reloads their files: on SIGHUP, and when
/// a file changes, appears in or leaves a watched directory. A file is
/// checked before anything stops: a broken one is reported and the running
/// version goes on; a changed one replaces the running version once that
/// has finished its pages in flight (as a graceful stop does).
struct Supervisor {
    config: Config,
    paths: Vec<PathBuf>,
    cli: Overrides,
    rules: StopRules,
    shared: Shared,
    shutdown: watch::Receiver<bool>,
    /// By file.
    running: HashMap<PathBuf, Running>,
    /// New versions waiting for the old one to stop.
    pending: HashMap<PathBuf, (String, Spider)>,
    /// Files not to start until their text changes: a broken or clashing
    /// version (reported once), or a spider that stopped on its own
    /// (drained, idle).
    left_alone: HashMap<PathBuf, String>,
    /// With `--until-drained`, the spiders that stopped drained, looked at
    /// again before the worker exits.
    drained: HashMap<PathBuf, Frontier>,
    tasks: JoinSet<Ended>,
    failed: bool,
    /// Exit code 3 when any request failed, not only when all did.
    fail_on_failure: bool,
    /// A spider's run ended on its own with its requests failed.
    requests_failed: bool,
}

/// A spider run that ended: its file, how it ended, and its frontier when
/// it ran.
type Ended = (PathBuf, anyhow::Result<RunSummary>, Option<Frontier>);

impl Supervisor {
    fn new(
        config: &Config,
        paths: &[PathBuf],
        cli: &Overrides,
        rules: StopRules,
        shared: Shared,
        shutdown: watch::Receiver<bool>,
    ) -> Supervisor {
        Supervisor {
            config: config.clone(),
            paths: paths.to_vec(),
            cli: cli.clone(),
            rules,
            shared,
            shutdown,
            running: HashMap::new(),
            pending: HashMap::new(),
            left_alone: HashMap::new(),
            drained: HashMap::new(),
            tasks: JoinSet::new(),
            failed: false,
            fail_on_failure: false,
            requests_failed: false,
        }
    }

    fn spawn(&mut self, path: PathBuf, text: String, start: Starting) {
        let (stop, stopped) = watch::channel(false);
        let name = match &start {
            Starting::Connected(run) => run.spider.name.clone(),
            Starting::Loaded(spider) => spider.name.clone(),
        };
        let span = tracing::info_span!("crawl", spider = %name, worker = %self.shared.worker);
        let (shared, rules) = (self.shared.clone(), self.rules);
        let key = path.clone();
        self.drained.remove(&path);
        self.tasks.spawn(
            async move {
                let run = match start {
                    Starting::Connected(run) => *run,
                    Starting::Loaded(spider) => {
                        let settings = spider.settings.clone();
                        match SpiderRun::connect(*spider, settings, &shared, &stopped).await {
                            Ok(Some(run)) => run,
                            Ok(None) => {
                                let e = anyhow::anyhow!("stopped before it started");
                                return (key, Err(e), None);
                            }
                            Err(e) => return (key, Err(e), None),
                        }
                    }
                };
                let frontier = run.frontier();
                (key, run.run(rules, stopped).await, Some(frontier))
            }
            .instrument(span),
        );
        self.running.insert(path, Running { name, text, stop });
    }

    async fn supervise(&mut self) {
        let mut hangup =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        let mut tick = tokio::time::interval(WATCH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut stopping = false;
        loop {
            if self.tasks.is_empty() && (stopping || self.pending.is_empty()) {
                if !stopping && self.restart_undrained().await {
                    continue;
                }
                break;
            }
            tokio::select! {
                Some(done) = self.tasks.join_next() => self.finished(done, stopping),
                _ = self.shutdown.changed(), if !stopping => {
                    stopping = true;
                    self.pending.clear();
                    for r in self.running.values() {
                        let _ = r.stop.send(true);
                    }
                }
                Some(()) = async { hangup.as_mut()?.recv().await }, if !stopping => {
                    tracing::info!("SIGHUP: reloading spider files");
                    self.reload();
                }
                _ = tick.tick(), if !stopping => self.reload(),
            }
        }
        status_line::hide();
    }

    /// One spider's loop ended.
    fn finished(&mut self, done: Result<Ended, tokio::task::JoinError>, stopping: bool) {
        let path = match done {
            // The run logged its summary itself.
            Ok((path, Ok(summary), frontier)) => {
                if let Some(why) = summary.failed_requests(self.fail_on_failure) {
                    tracing::error!("{why}; exit code {}", super::EXIT_REQUESTS_FAILED);
                    self.requests_failed = true;
                }
                if let Some(f) = frontier.filter(|_| summary.reason == StopReason::Drained) {
                    self.drained.insert(path.clone(), f);
                }
                path
            }
            Ok((path, Err(e), _)) => {
                tracing::error!(file = %path.display(), "{e:#}");
                self.failed = true;
                path
            }
            Err(e) => {
                tracing::error!("a spider's loop crashed: {e}");
                self.failed = true;
                return;
            }
        };
        let ended = self.running.remove(&path);
        if stopping {
            return;
        }
        if let Some((text, spider)) = self.pending.remove(&path) {
            tracing::info!(file = %path.display(), spider = %spider.name, "starting the new version");
            self.spawn(path, text, Starting::Loaded(Box::new(spider)));
        } else if let Some(r) = ended {
            // Ended on its own (drained, idle): not restarted until its
            // file changes.
            self.left_alone.insert(path, r.text);
        }
    }

    /// Before the worker exits on `--until-drained`: looks again at every
    /// spider that stopped drained, and starts again those that have work
    /// (handed to them after they stopped, or pushed meanwhile), so that
    /// the worker exits only once all its spiders read drained. Returns
    /// whether any was started again.
    async fn restart_undrained(&mut self) -> bool {
        if !self.rules.until_drained {
            return false;
        }
        let mut again = Vec::new();
        for (path, frontier) in &self.drained {
            let status = crate::worker::with_redis(
                "read queue status",
                &self.shutdown,
                &frontier.fatal(),
                || frontier.status(),
            )
            .await;
            match status {
                Some(status) if !status.drained() => again.push(path.clone()),
                Some(_) => {}
                None => return false,
            }
        }
        let mut started = false;
        for path in again {
            self.drained.remove(&path);
            let Some(text) = self.left_alone.remove(&path) else {
                continue;
            };
            match load_spider(&self.config, &path, &self.cli) {
                Ok(spider) => {
                    tracing::info!(file = %path.display(), spider = %spider.name, "the spider has work again (it stopped drained before the worker's other spiders finished): starting it again");
                    self.spawn(path, text, Starting::Loaded(Box::new(spider)));
                    started = true;
                }
                Err(e) => tracing::error!(
                    "{}: has work again, but cannot be loaded, so it is not started again:\n{e}",
                    path.display()
                ),
            }
        }
        started
    }

    /// Looks at the spider files again and applies what changed.
    fn reload(&mut self) {
        let files = super::spider_files(&self.paths);
        let gone: Vec<PathBuf> = self
            .running
            .keys()
            .filter(|p| !files.contains(p))
            .cloned()
            .collect();
        for path in gone {
            if let Some(r) = self.running.get(&path) {
                if !*r.stop.borrow() {
                    tracing::info!(file = %path.display(), spider = %r.name, "spider file removed: stopping the spider (pages in flight finish)");
                    let _ = r.stop.send(true);
                }
            }
            self.pending.remove(&path);
        }
        for path in files {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue; // removed meanwhile, or unreadable: the next look decides
            };
            let same = |t: &String| *t == text;
            if self.running.get(&path).is_some_and(|r| same(&r.text))
                || self.left_alone.get(&path).is_some_and(same)
                || self.pending.get(&path).is_some_and(|(t, _)| same(t))
            {
                continue;
            }
            let spider = match load_spider(&self.config, &path, &self.cli) {
                Ok(spider) => spider,
                Err(e) => {
                    let keeps = match self.running.get(&path) {
                        Some(r) => {
                            format!("spider `{}` keeps running its previous version", r.name)
                        }
                        None => "it is not started".to_string(),
                    };
                    tracing::error!("{}: not loaded ({keeps}):\n{e}", path.display());
                    self.left_alone.insert(path, text);
                    continue;
                }
            };
            let clash = self
                .running
                .iter()
                .find(|(p, r)| **p != path && r.name == spider.name);
            if let Some((other, _)) = clash {
                tracing::error!(
                    "{}: not loaded: spider `{}` already runs from {}",
                    path.display(),
                    spider.name,
                    other.display()
                );
                self.left_alone.insert(path, text);
                continue;
            }
            self.left_alone.remove(&path);
            match self.running.get(&path) {
                Some(r) => {
                    tracing::info!(file = %path.display(), spider = %r.name, "spider file changed: the running version finishes its pages in flight, then the new one starts");
                    let _ = r.stop.send(true);
                    self.pending.insert(path, (text, spider));
                }
                None => {
                    tracing::info!(file = %path.display(), spider = %spider.name, "new spider file: starting it");
                    self.spawn(path, text, Starting::Loaded(Box::new(spider)));
                }
            }
        }
    }
}

/// Redraws the status line: each spider's pages (and their rate), items,
/// queue, pages in flight and failures; the queue is read from Redis every
/// few seconds, the rest is this worker's own counts.
pub(super) async fn update_status(
    bar: &'static indicatif::ProgressBar,
    spiders: Vec<(String, Arc<Progress>, crate::frontier::Frontier)>,
) {
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let mut queues: Vec<Option<crate::frontier::QueueStatus>> = vec![None; spiders.len()];
    let mut last: Vec<(Instant, u64)> = vec![(Instant::now(), 0); spiders.len()];
    let mut rates = vec![0.0f64; spiders.len()];
    for round in 0u64.. {
        tick.tick().await;
        let mut parts = Vec::new();
        for (i, (name, progress, frontier)) in spiders.iter().enumerate() {
            if round % 4 == 0 {
                queues[i] = frontier.status().await.ok();
            }
            let c = progress.counts();
            let (at, pages) = last[i];
            let seconds = at.elapsed().as_secs_f64();
            if seconds >= 2.0 {
                rates[i] = c.pages.saturating_sub(pages) as f64 / seconds;
                last[i] = (Instant::now(), c.pages);
            }
            let queue = queues[i].as_ref().map_or("queue ?".to_string(), |q| {
                format!(
                    "queue {} · in flight {}",
                    q.queued + q.start + q.delayed,
                    q.inflight
                )
            });
            parts.push(format!(
                "{name}: {} ({:.1}/s) · {} · {queue} · {} failed",
                plural(c.pages as usize, "page", "pages"),
                rates[i],
                plural(c.items as usize, "item", "items"),
                c.failed
            ));
        }
        bar.set_message(parts.join(" | "));
    }
}
