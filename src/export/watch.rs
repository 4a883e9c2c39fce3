//! What an exporter shows from outside besides its log: the export backlog
//! ([`backlog`], the reading `crawlworker stats` shows in its `export`
//! section), read every [`READ_EVERY`] into the exporter's metrics while
//! it serves them ([`Gauges`]), and whether it reaches Redis, for
//! `/healthz`. The counts and the store's reachability are set by the
//! exporter's loop itself (`super::consumer`).

use std::time::Duration;

use crate::frontier::redis::export::ExportBacklog;
use crate::frontier::{FrontierError, RedisFrontier};
use crate::metrics::export::ExportSeries;
use crate::metrics::health::RedisWatch;

/// How often the backlog is read for the metrics.
pub const READ_EVERY: Duration = Duration::from_secs(2);

/// The export backlog of a spider, summed over its shards, once an
/// exporter has registered (`None` before: nothing was ever exported), for
/// consumer group `group` of a stream sink.
pub async fn backlog(
    shards: &[RedisFrontier],
    group: &str,
) -> Result<Option<ExportBacklog>, FrontierError> {
    let mut sum: Option<ExportBacklog> = None;
    for shard in shards {
        if shard.exporters().await?.is_empty() {
            continue;
        }
        let b = shard.export_backlog(group).await?;
        let s = sum.get_or_insert_with(ExportBacklog::default);
        s.waiting += b.waiting;
        s.unacked += b.unacked;
        s.exporters += b.exporters;
        s.oldest_unacked_ms = s.oldest_unacked_ms.max(b.oldest_unacked_ms);
    }
    Ok(sum)
}

/// An exporter's metrics: its series, and its watch for `/healthz`.
pub struct Gauges {
    pub series: ExportSeries,
    /// Told each time Redis answers; the exporter is unhealthy once it
    /// has not for its limit.
    pub health: RedisWatch,
}

impl Gauges {
    /// Reads the backlog into the gauges every [`READ_EVERY`] until the
    /// task is aborted.
    pub fn spawn(self, shards: Vec<RedisFrontier>, group: String) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                match backlog(&shards, &group).await {
                    Ok(b) => {
                        self.series.backlog(&b.unwrap_or_default());
                        self.health.reached();
                    }
                    Err(e) => tracing::debug!("cannot read the export backlog: {e}"),
                }
                tokio::time::sleep(READ_EVERY).await;
            }
        })
    }
}
