//! `crawlworker export`'s series, served like a worker's on
//! `--metrics-addr`. Each carries the `spider` label and the `store` kind
//! (`postgres`, `sqlite`, `jsonl`, `csv`, `exec`).
//!
//! - **This exporter's counts** (`crawlworker_export_items_total`, `…_refused_total`,
//!   `…_taken_back_total`): each exporter counts what it did, so `sum by
//!   (spider)` over the exporters is the cluster's.
//! - **The export backlog** (`crawlworker_export_backlog_items`,
//!   `…_unacknowledged_items`, `…_oldest_unacknowledged_seconds`,
//!   `…_exporters_live`): read from Redis every few seconds by every
//!   exporter, the reading `crawlworker stats` shows in its `export` section;
//!   every exporter reports the same value, so aggregate with `max`.
//! - **`crawlworker_export_store_up`**: whether this exporter reaches its
//!   store (1) or not (0), as its last write or check found it.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::Labels;
use crate::frontier::redis::export::ExportBacklog;

/// The metric names of `crawlworker export` (after the `crawlworker_`
/// prefix; counters get `_total`).
pub mod names {
    pub const ITEMS: &str = "export_items";
    pub const REFUSED: &str = "export_items_refused";
    pub const TAKEN_BACK: &str = "export_items_taken_back";
    pub const BACKLOG: &str = "export_backlog_items";
    pub const UNACKNOWLEDGED: &str = "export_unacknowledged_items";
    pub const OLDEST_UNACKNOWLEDGED: &str = "export_oldest_unacknowledged_seconds";
    pub const EXPORTERS_LIVE: &str = "export_exporters_live";
    pub const STORE_UP: &str = "export_store_up";
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// The families of the export series.
#[derive(Debug)]
pub struct Export {
    items: Family<Labels, Counter>,
    refused: Family<Labels, Counter>,
    taken_back: Family<Labels, Counter>,
    backlog: Family<Labels, Gauge>,
    unacknowledged: Family<Labels, Gauge>,
    oldest: Family<Labels, FloatGauge>,
    exporters: Family<Labels, Gauge>,
    store_up: Family<Labels, Gauge>,
}

impl Export {
    /// The families, registered in `registry`.
    pub(super) fn register(registry: &mut Registry) -> Export {
        let export = Export {
            items: Family::default(),
            refused: Family::default(),
            taken_back: Family::default(),
            backlog: Family::default(),
            unacknowledged: Family::default(),
            oldest: Family::default(),
            exporters: Family::default(),
            store_up: Family::default(),
        };
        registry.register(
            names::ITEMS,
            "Items this exporter wrote to its store and acknowledged (the stat export/item_count)",
            export.items.clone(),
        );
        registry.register(
            names::REFUSED,
            "Items this exporter set aside in the export dead letters: refused by the store, fitting no item type, or refused by an exec: command after its retries (the stat export/refused_count)",
            export.refused.clone(),
        );
        registry.register(
            names::TAKEN_BACK,
            "Items of gone exporters this exporter took back: a list's put back for the others, a stream's claimed (XAUTOCLAIM)",
            export.taken_back.clone(),
        );
        registry.register(
            names::BACKLOG,
            "Items no exporter has taken yet, for the whole cluster (every exporter reports the same: aggregate with max)",
            export.backlog.clone(),
        );
        registry.register(
            names::UNACKNOWLEDGED,
            "Items taken by exporters and not acknowledged yet, for the whole cluster (aggregate with max)",
            export.unacknowledged.clone(),
        );
        registry.register(
            names::OLDEST_UNACKNOWLEDGED,
            "How long ago the oldest unacknowledged item was taken (list sink) or added (stream sink), 0 when none is; for the whole cluster (aggregate with max)",
            export.oldest.clone(),
        );
        registry.register(
            names::EXPORTERS_LIVE,
            "Exporters whose lease runs, for the whole cluster (aggregate with max)",
            export.exporters.clone(),
        );
        registry.register(
            names::STORE_UP,
            "1 while this exporter reaches its store, 0 while its writes or checks fail (it waits and tries again)",
            export.store_up.clone(),
        );
        export
    }

    /// The series of one exporter of `spider` writing to a `store` (its
    /// kind: `postgres`, `jsonl`, …).
    pub fn series(&self, spider: &str, store: &str) -> ExportSeries {
        let labels: Labels = vec![
            ("spider".to_string(), spider.to_string()),
            ("store".to_string(), store.to_string()),
        ];
        ExportSeries {
            items: self.items.get_or_create(&labels).clone(),
            refused: self.refused.get_or_create(&labels).clone(),
            taken_back: self.taken_back.get_or_create(&labels).clone(),
            backlog: self.backlog.get_or_create(&labels).clone(),
            unacknowledged: self.unacknowledged.get_or_create(&labels).clone(),
            oldest: self.oldest.get_or_create(&labels).clone(),
            exporters: self.exporters.get_or_create(&labels).clone(),
            store_up: self.store_up.get_or_create(&labels).clone(),
        }
    }
}

/// One exporter's series; cheap to clone (each shares its value).
#[derive(Debug, Clone)]
pub struct ExportSeries {
    items: Counter,
    refused: Counter,
    taken_back: Counter,
    backlog: Gauge,
    unacknowledged: Gauge,
    oldest: FloatGauge,
    exporters: Gauge,
    store_up: Gauge,
}

impl ExportSeries {
    /// Items acknowledged: `exported` written, `refused` dead-lettered.
    pub fn acknowledged(&self, exported: u64, refused: u64) {
        self.items.inc_by(exported);
        self.refused.inc_by(refused);
    }

    /// Items of gone exporters taken back.
    pub fn taken_back(&self, n: u64) {
        self.taken_back.inc_by(n);
    }

    /// The backlog as just read from Redis.
    pub fn backlog(&self, b: &ExportBacklog) {
        let oldest = b
            .oldest_unacked_ms
            .map_or(Duration::ZERO, Duration::from_millis);
        self.backlog.set(gauge(b.waiting));
        self.unacknowledged.set(gauge(b.unacked));
        self.oldest.set(oldest.as_secs_f64());
        self.exporters.set(gauge(b.exporters));
    }

    /// Whether the store was just reached.
    pub fn store_up(&self, up: bool) {
        self.store_up.set(i64::from(up));
    }
}

fn gauge(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::super::Metrics;
    use super::*;

    #[test]
    fn export_series_carry_the_spider_and_the_store_kind() {
        let m = Metrics::new();
        let s = m.export().series("bbs", "postgres");
        s.acknowledged(5, 1);
        s.taken_back(2);
        s.backlog(&ExportBacklog {
            waiting: 7,
            unacked: 3,
            oldest_unacked_ms: Some(2500),
            exporters: 2,
        });
        s.store_up(true);
        let text = m.encode();
        for line in [
            "crawlworker_export_items_total{spider=\"bbs\",store=\"postgres\"} 5",
            "crawlworker_export_items_refused_total{spider=\"bbs\",store=\"postgres\"} 1",
            "crawlworker_export_items_taken_back_total{spider=\"bbs\",store=\"postgres\"} 2",
            "crawlworker_export_backlog_items{spider=\"bbs\",store=\"postgres\"} 7",
            "crawlworker_export_unacknowledged_items{spider=\"bbs\",store=\"postgres\"} 3",
            "crawlworker_export_oldest_unacknowledged_seconds{spider=\"bbs\",store=\"postgres\"} 2.5",
            "crawlworker_export_exporters_live{spider=\"bbs\",store=\"postgres\"} 2",
            "crawlworker_export_store_up{spider=\"bbs\",store=\"postgres\"} 1",
        ] {
            assert!(text.contains(line), "{line}\n{text}");
        }
        s.backlog(&ExportBacklog::default());
        s.store_up(false);
        let text = m.encode();
        assert!(
            text.contains("crawlworker_export_oldest_unacknowledged_seconds{spider=\"bbs\",store=\"postgres\"} 0.0"),
            "{text}"
        );
        assert!(
            text.contains("crawlworker_export_store_up{spider=\"bbs\",store=\"postgres\"} 0"),
            "{text}"
        );
    }
}
