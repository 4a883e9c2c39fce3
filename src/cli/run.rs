//! `crawlworker run`: one worker for one or more spiders. The first SIGINT
//! or SIGTERM stops leasing, lets pages in flight finish within
//! `shutdown_grace` and hands the rest back; a second one exits at once.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use tokio::sync::watch;

use super::{load_spider, InvalidInput};
use crate::config::Config;
use crate::metrics::{self, Metrics};
use crate::settings::Overrides;
use crate::worker::{worker_id, SpiderRun, StopRules};

pub async fn run(
    config: &Config,
    paths: &[PathBuf],
    cli: &Overrides,
    rules: StopRules,
    metrics_addr: Option<SocketAddr>,
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
    let mut tasks = tokio::task::JoinSet::new();
    for run in runs {
        tasks.spawn(run.run(rules, shutdown.clone()));
    }
    let mut failed = false;
    while let Some(done) = tasks.join_next().await {
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
