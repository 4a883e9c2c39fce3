//! `crawlworker run SPIDER --local`: a whole crawl in this process, with no
//! Redis, as `scrapy crawl x -o items.jsonl` runs one. The spider's rules,
//! priorities, dupefilter fingerprints, depth, politeness, retries,
//! redirects, robots.txt and SSRF guard are the cluster's (the worker loop
//! is the same; only its frontier is [`crate::frontier::LocalFrontier`]).
//! Start entries come from `--start`, `--start-file` (or standard input)
//! and the spider's `[start]` sitemaps and feeds; items go to `--output` as
//! JSON Lines (standard output by default); the crawl ends when nothing is
//! left, and the stats are logged then.

use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use tokio::sync::watch;

use super::tools::{entry_lines, valid_entries};
use super::{load_spider, status_line, InvalidInput};
use crate::config::Config;
use crate::frontier::local::{ItemWriter, LocalFrontier, WholeLines};
use crate::frontier::Backend;
use crate::settings::Overrides;
use crate::wording::plural;
use crate::worker::shared::Shared;
use crate::worker::{RunSummary, SpiderRun, StopRules};

/// What `run --local` was given besides the spider.
pub struct Local {
    pub start: Vec<String>,
    pub start_file: Option<PathBuf>,
    pub output: Option<PathBuf>,
    /// Exit with [`super::EXIT_REQUESTS_FAILED`] when any request failed
    /// (not only when all did).
    pub fail_on_failure: bool,
}

pub async fn run_local(
    config: &Config,
    path: &Path,
    cli: &Overrides,
    local: Local,
    status_line: bool,
) -> anyhow::Result<ExitCode> {
    let spider = load_spider(config, path, cli)?;
    let lines = if local.start.is_empty() && local.start_file.is_none() {
        Vec::new()
    } else {
        entry_lines(local.start, local.start_file.as_deref())?
    };
    let (entries, bad) = valid_entries(&spider, lines, "not crawled");
    if entries.is_empty() && spider.start.seeds.is_empty() {
        return Err(InvalidInput(format!(
            "{}: nothing to crawl: give start entries with --start URL (repeat it for more) or --start-file FILE (- for standard input), or a [start] sitemap or feed in the spider",
            path.display()
        ))
        .into());
    }
    let fail_on_failure = local.fail_on_failure;
    let (sink, items_to) = item_sink(local.output.as_deref())?;
    let (stop, shutdown) = watch::channel(false);
    super::signals::listen_for_signals(stop.clone(), super::signals::WORKER);
    let settings = spider.settings.clone();
    let shared = Shared::new(
        "local".to_string(),
        settings.concurrent_requests as usize,
        None,
    )
    .with_memory_budget(settings.download_memory_budget.0);
    let (run, store) = SpiderRun::local(spider, settings, &shared, entries, sink)?;
    stop_when_items_fail(store.clone(), stop);
    let run = match status_line.then(status_line::show).flatten() {
        Some(bar) => {
            let watched = vec![(run.spider.name.clone(), run.progress(), run.frontier())];
            tokio::spawn(super::run::update_status(bar, watched));
            run.without_progress_lines()
        }
        None => run,
    };
    let rules = StopRules {
        idle_exit: None,
        until_drained: true,
    };
    let summary = run.run(rules, shutdown).await?;
    if let Some(e) = store.sink_error() {
        anyhow::bail!("cannot write items to {items_to}: {e}; the crawl stopped (the file ends with the last item written whole)");
    }
    log_summary(&store, &summary, &items_to).await?;
    let failed = summary.failed_requests(fail_on_failure);
    if let Some(why) = &failed {
        tracing::error!("{why}; exit code {}", super::EXIT_REQUESTS_FAILED);
    }
    Ok(if bad > 0 {
        ExitCode::from(2)
    } else if failed.is_some() {
        ExitCode::from(super::EXIT_REQUESTS_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}

/// Where the items go (`--output`, standard output by default), and its
/// name for messages.
fn item_sink(output: Option<&Path>) -> anyhow::Result<(ItemWriter, String)> {
    Ok(match output {
        Some(p) if p.as_os_str() != "-" => {
            let file = std::fs::File::create(p)
                .map_err(|e| InvalidInput(format!("cannot write items to {}: {e}", p.display())))?;
            (Box::new(WholeLines::new(file)), p.display().to_string())
        }
        _ => (
            Box::new(BufWriter::new(std::io::stdout())),
            "standard output".to_string(),
        ),
    })
}

/// Items that cannot be written stop the crawl: nothing more is leased,
/// and the command fails.
fn stop_when_items_fail(store: LocalFrontier, stop: watch::Sender<bool>) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if store.sink_error().is_some() {
                let _ = stop.send(true);
                return;
            }
        }
    });
}

/// How the crawl ended: the items written, the requests that failed for
/// good (the first 20 of them by URL) and the entries set aside.
async fn log_summary(
    store: &LocalFrontier,
    summary: &RunSummary,
    items_to: &str,
) -> anyhow::Result<()> {
    let status = store.status().await?;
    let failed = store.failures(usize::MAX).await?;
    tracing::info!(
        spider = %summary.spider,
        "local crawl ended ({}): {} to {items_to}, {} failed for good, {} set aside as malformed",
        summary.reason,
        plural(status.items as usize, "item", "items"),
        plural(failed.len(), "request", "requests"),
        plural(status.dead as usize, "entry", "entries"),
    );
    for f in failed.iter().take(20) {
        tracing::warn!(url = %f.request.url, reason = %f.reason, "failed");
    }
    Ok(())
}
