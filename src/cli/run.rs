//! `crawlworker run`: one worker for one or more spiders. The first SIGINT
//! or SIGTERM stops leasing, lets pages in flight finish within
//! `shutdown_grace` and hands the rest back; a second one exits at once.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tracing::Instrument;

use super::{load_spider, status_line, InvalidInput};
use crate::config::Config;
use crate::metrics::{self, Metrics};
use crate::settings::Overrides;
use crate::wording::plural;
use crate::worker::progress::Progress;
use crate::worker::{worker_id, SpiderRun, StopRules};

pub async fn run(
    config: &Config,
    paths: &[PathBuf],
    cli: &Overrides,
    rules: StopRules,
    metrics_addr: Option<SocketAddr>,
    status_line: bool,
) -> anyhow::Result<ExitCode> {
    // Every broken spider is reported, not only the first.
    let mut spiders = Vec::new();
    let mut invalid = Vec::new();
    for path in paths {
        match load_spider(config, path, cli) {
            Ok(s) => spiders.push(s),
            Err(e) => invalid.push(e.to_string()),
        }
    }
    if !invalid.is_empty() {
        return Err(InvalidInput(invalid.join("\n")).into());
    }
    let (stop, shutdown) = watch::channel(false);
    tokio::spawn(signals(stop));
    // Bound before anything starts, so a taken port fails the command.
    let metrics = match metrics_addr {
        Some(addr) => {
            let listener = metrics::server::bind(addr).await?;
            let metrics = Metrics::new();
            let mut stopping = shutdown.clone();
            tokio::spawn(metrics::server::serve(
                listener,
                metrics.clone(),
                async move {
                    let _ = stopping.wait_for(|stop| *stop).await;
                },
            ));
            tracing::info!("metrics on http://{addr}/metrics");
            Some(metrics)
        }
        None => None,
    };
    let worker = worker_id();
    let mut runs = Vec::new();
    for spider in spiders {
        let settings = spider.settings.clone();
        match SpiderRun::connect(spider, settings, &worker, metrics.clone(), &shutdown).await? {
            Some(run) => runs.push(run),
            None => return Ok(ExitCode::SUCCESS),
        }
    }
    // On a terminal a live status line replaces the periodic progress
    // lines.
    let status = if status_line {
        status_line::show()
    } else {
        None
    };
    if let Some(bar) = status {
        runs = runs
            .into_iter()
            .map(SpiderRun::without_progress_lines)
            .collect();
        let watched: Vec<_> = runs
            .iter()
            .map(|r| (r.spider.name.clone(), r.progress(), r.frontier()))
            .collect();
        tokio::spawn(update_status(bar, watched));
    }
    let mut tasks = tokio::task::JoinSet::new();
    for run in runs {
        let span = tracing::info_span!("crawl", spider = %run.spider.name, worker = %worker);
        tasks.spawn(run.run(rules, shutdown.clone()).instrument(span));
    }
    let mut failed = false;
    while let Some(done) = tasks.join_next().await {
        if tasks.is_empty() {
            status_line::hide();
        }
        match done {
            Ok(Ok(summary)) => {
                eprintln!(
                    "crawlworker: spider `{}` stopped ({}) after {:.1} s: {}",
                    summary.spider,
                    summary.reason,
                    summary.elapsed.as_secs_f64(),
                    summary.counts.describe()
                );
            }
            Ok(Err(e)) => {
                eprintln!("crawlworker: {e:#}");
                failed = true;
            }
            Err(e) => {
                eprintln!("crawlworker: a spider's loop crashed: {e}");
                failed = true;
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Redraws the status line: each spider's pages (and their rate), items,
/// queue, pages in flight and failures; the queue is read from Redis every
/// few seconds, the rest is this worker's own counts.
async fn update_status(
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
            let queue = queues[i].map_or("queue ?".to_string(), |q| {
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

/// First signal: graceful stop. Second: exit now.
async fn signals(stop: watch::Sender<bool>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::warn!("cannot listen for signals; stop the worker with SIGKILL (nothing is lost)");
        return;
    };
    for n in 0.. {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        if n == 0 {
            tracing::info!("stopping: finishing pages in flight (signal again to exit at once)");
            let _ = stop.send(true);
        } else {
            tracing::warn!("second signal: exiting now; unfinished pages return to the queue when their leases expire");
            std::process::exit(130);
        }
    }
}
