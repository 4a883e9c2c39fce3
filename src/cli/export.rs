//! `crawlworker export SPIDER --to URL`: reads where items go (refusing a
//! password written on the command line, which any user of the host can
//! read in the process list), connects to the spider's Redis, serves its
//! metrics (`--metrics-addr`) and runs an [`Exporter`] until it is drained
//! (`--until-drained`) or stopped.

use std::process::ExitCode;

use tokio::sync::watch;

use super::args::ExportArgs;
use super::{output, tools, InvalidInput};
use crate::export::sinks::{self, files::Rotation};
use crate::export::{Exporter, Gauges, Options, Schema, SinkOptions, Stopped, Store};
use crate::metrics::{self, Metrics};

pub async fn export(args: ExportArgs) -> anyhow::Result<ExitCode> {
    let store = store(&args)?;
    let (spider, shards) = tools::open_shards(&args.spider, &args.redis).await?;
    if spider.items.is_empty() {
        return Err(InvalidInput(format!(
            "{}: spider `{}` has no item types ([items.<name>]): nothing to export",
            args.spider.display(),
            spider.name
        ))
        .into());
    }
    let schema = Schema::of(&spider);
    if args.print_schema {
        let statements = sinks::schema_statements(&store, &schema);
        if statements.is_empty() {
            return Err(InvalidInput(format!(
                "{} has no tables to make: --print-schema is for postgres:// and sqlite:",
                store.shown()
            ))
            .into());
        }
        for s in statements {
            output::line(format!("{s};"))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    for frontier in &shards {
        if let Some(found) = frontier.sink_mismatch().await? {
            anyhow::bail!(
                "{}",
                crate::worker::sink_mismatch_message(&spider, frontier, &found)
            );
        }
    }
    // Bound before anything starts, so a taken port fails the command.
    let metrics = match args.metrics_addr {
        Some(addr) => Some(serve_metrics(addr).await?),
        None => None,
    };
    let options = Options {
        group: args.group.clone(),
        batch: args.batch as usize,
        claim_after: args.claim_after,
        until_drained: args.until_drained,
        create: args.create,
        idle_wait: std::time::Duration::from_millis(250),
    };
    let id = crate::worker::worker_id();
    let sink = sinks::open(
        &store,
        SinkOptions {
            rotation: Rotation {
                max_bytes: args.rotate_size,
                max_age: args.rotate_every,
                gzip: args.gzip,
            },
            exporter: id.clone(),
            exec_retries: args.exec_retries,
            exec_backoff: args.exec_retry_wait,
            exec_timeout: args.exec_timeout,
        },
    );
    tracing::info!(
        spider = %spider.name,
        items = %shards[0].items_key(),
        exporter = %id,
        "exporting to {}",
        store.shown()
    );
    let (stop, stopped) = watch::channel(false);
    super::signals::listen_for_signals(stop, super::signals::EXPORTER);
    let claim_after = options.claim_after;
    let mut exporter = Exporter::new(id, shards, schema, sink, store.shown(), options, stopped);
    if let Some(metrics) = &metrics {
        exporter = exporter.with_metrics(Gauges {
            series: metrics.export().series(&spider.name, store.kind()),
            // Unhealthy once silent as long as the others wait before
            // they count it gone.
            health: metrics.health().watch(
                &spider.name,
                claim_after.max(5 * crate::export::watch::READ_EVERY),
            ),
        });
    }
    let how = exporter.run().await?;
    let t = exporter.tally;
    let why = match how {
        Stopped::Drained => "the crawl is drained and every item exported",
        Stopped::Signal => "stopped",
    };
    tracing::info!(exported = t.exported, refused = t.refused, "{why}");
    Ok(ExitCode::SUCCESS)
}

/// Serves the exporter's metrics on `addr` until the process exits.
async fn serve_metrics(addr: std::net::SocketAddr) -> anyhow::Result<Metrics> {
    let listener = metrics::server::bind(addr).await?;
    let metrics = Metrics::new();
    tokio::spawn(metrics::server::serve(
        listener,
        metrics.clone(),
        std::future::pending(),
    ));
    tracing::info!("metrics on http://{addr}/metrics");
    Ok(metrics)
}

/// Where items go: `--to` (or `CRAWLWORKER_EXPORT_TO`), or the file
/// `--to-file` names.
fn store(args: &ExportArgs) -> anyhow::Result<Store> {
    let (to, from_flag) = match (&args.to, &args.to_file) {
        (_, Some(file)) => {
            let text = std::fs::read_to_string(file).map_err(|e| {
                InvalidInput(format!(
                    "cannot read the store's address from {}: {e}",
                    file.display()
                ))
            })?;
            (text.trim().to_string(), false)
        }
        (Some(to), None) => {
            let from_env = std::env::var("CRAWLWORKER_EXPORT_TO").is_ok_and(|v| &v == to);
            (to.clone(), !from_env)
        }
        (None, None) => {
            return Err(InvalidInput(
                "give the store with --to URL, CRAWLWORKER_EXPORT_TO or --to-file FILE".into(),
            )
            .into())
        }
    };
    let store = Store::parse(&to).map_err(InvalidInput)?;
    if from_flag && store.has_password() {
        return Err(InvalidInput(format!(
            "--to {}: a password on the command line is visible to every user of this host (ps); give the address in CRAWLWORKER_EXPORT_TO or a file (--to-file), or the password in PGPASSWORD",
            store.shown()
        ))
        .into());
    }
    Ok(store)
}
