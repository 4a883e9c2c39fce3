//! Prometheus metrics of one worker process, served by [`server`] on
//! `--metrics-addr`. Every series has a `spider` label.
//!
//! Two kinds of series, and how to sum them over a cluster:
//!
//! - **This worker's counts** (`crawlworker_responses_total`,
//!   `crawlworker_items_scraped_total`, …, the download and Redis latency
//!   histograms, `crawlworker_requests_in_flight`): each worker counts what
//!   it did, so `sum by (spider)` over the workers is the cluster's.
//!   The counters that mirror a stat of the stats hash are defined with that
//!   stat in [`crate::stats`] and counted from the same [`Tally`].
//! - **The cluster's state** (`crawlworker_queue_entries`,
//!   `crawlworker_workers_live`, `crawlworker_cluster_leases_expired_total`),
//!   read from Redis every few seconds by every worker, never per request:
//!   every worker reports the same value, so aggregate with `max by
//!   (spider)`, never `sum`.
//!
//! `crawlworker export` serves the same endpoint with its own series
//! ([`export`]).

pub mod export;
pub mod health;
pub mod server;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::frontier::QueueStatus;
use crate::stats::{self, Counted, Tally};

/// Every metric name starts with this.
pub const PREFIX: &str = "crawlworker";

/// A label set: (name, value) pairs, `spider` first.
type Labels = Vec<(String, String)>;

/// The metric names defined here (the others come from [`crate::stats`]).
pub mod names {
    pub const DOWNLOAD_DURATION: &str = "download_duration_seconds";
    pub const RENDER_DURATION: &str = "render_duration_seconds";
    pub const REDIS_DURATION: &str = "redis_duration_seconds";
    pub const REQUESTS_IN_FLIGHT: &str = "requests_in_flight";
    pub const FAILURES: &str = "failures";
    pub const QUEUE_ENTRIES: &str = "queue_entries";
    pub const WORKERS_LIVE: &str = "workers_live";
    pub const DUPEFILTER_ENTRIES: &str = "dupefilter_entries";
    pub const CLUSTER_LEASES_EXPIRED: &str = "cluster_leases_expired";
    pub const HOSTS_BACKED_OFF: &str = "hosts_backed_off";
    pub const PAUSED: &str = "paused";
    pub const ITEMS_BACKLOG_FULL: &str = "items_backlog_full";
    pub const BUILD_INFO: &str = "build_info";
}

/// The cluster's state as last read from Redis, per spider.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    pub queues: QueueStatus,
    pub workers_live: u64,
    pub leases_expired: u64,
    /// Hosts slowed down by adaptive back-off (after 429s or 5xx) right now.
    pub hosts_backed_off: u64,
}

/// The worker's metrics; cheap to share.
#[derive(Debug, Clone)]
pub struct Metrics(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    registry: Registry,
    /// Counters defined in `stats`, by metric name.
    counters: HashMap<&'static str, Family<Labels, Counter>>,
    failures: Family<Labels, Counter>,
    download: Family<Labels, Histogram>,
    render: Family<Labels, Histogram>,
    redis: Family<Labels, Histogram>,
    in_flight: Family<Labels, Gauge>,
    cluster: Arc<ClusterState>,
    /// Each spider's last contact with Redis, for `/healthz`.
    health: health::Health,
    /// `crawlworker export`'s series.
    export: export::Export,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix(PREFIX);
        let mut counters: HashMap<&'static str, Family<Labels, Counter>> = HashMap::new();
        let stat_metrics = stats::ALL
            .iter()
            .filter_map(|s| s.metric.map(|m| (m.name, s.help)))
            .chain(
                stats::FAMILIES
                    .iter()
                    .filter_map(|f| f.metric.map(|m| (m, f.help))),
            );
        for (name, help) in stat_metrics {
            counters.entry(name).or_insert_with(|| {
                let family = Family::<Labels, Counter>::default();
                // The registry ends a help with a full stop of its own; a
                // stat's help is a sentence with one already.
                registry.register(name, help.trim().trim_end_matches('.'), family.clone());
                family
            });
        }
        let failures = Family::<Labels, Counter>::default();
        registry.register(
            names::FAILURES,
            "Requests that failed for good (recorded in the failed key), by reason",
            failures.clone(),
        );
        // 5 ms to ~80 s.
        let download = Family::<Labels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.005, 2.0, 15))
        });
        registry.register(
            names::DOWNLOAD_DURATION,
            "Time from sending a request to having its whole response",
            download.clone(),
        );
        // 10 ms to ~80 s.
        let render = Family::<Labels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.01, 2.0, 14))
        });
        registry.register(
            names::RENDER_DURATION,
            "Time a page rendered in headless Chromium took, from the wait for a tab to its DOM (rules with `render`)",
            render.clone(),
        );
        // 0.1 ms to ~3 s.
        let redis = Family::<Labels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.0001, 2.0, 15))
        });
        registry.register(
            names::REDIS_DURATION,
            "Round-trip time of the frontier's Redis steps, by operation (a commit's includes its wait for other pages to share the script call, see commit_wait)",
            redis.clone(),
        );
        let in_flight = Family::<Labels, Gauge>::default();
        registry.register(
            names::REQUESTS_IN_FLIGHT,
            "Requests this worker holds leases on",
            in_flight.clone(),
        );
        let cluster = Arc::new(ClusterState::default());
        registry.register_collector(Box::new(cluster.clone()));
        let export = export::Export::register(registry);
        Metrics(Arc::new(Inner {
            registry: root,
            counters,
            failures,
            download,
            render,
            redis,
            in_flight,
            cluster,
            health: health::Health::default(),
            export,
        }))
    }

    fn labels(spider: &str, extra: Option<(&str, &str)>) -> Labels {
        let mut labels = vec![("spider".to_string(), spider.to_string())];
        if let Some((k, v)) = extra {
            labels.push((k.to_string(), v.to_string()));
        }
        labels
    }

    /// Counts what a page's tally counts, for the stats that are metrics.
    pub fn count(&self, spider: &str, tally: &Tally) {
        for (counted, n) in tally.counted() {
            let (name, labels) = match counted {
                Counted::Stat(stat) => match stat.metric {
                    Some(m) => (m.name, Self::labels(spider, m.label)),
                    None => continue,
                },
                Counted::In(family, value) => match family.metric {
                    Some(m) => (m, Self::labels(spider, Some((family.label, value)))),
                    None => continue,
                },
            };
            if let Some(counter) = self.0.counters.get(name) {
                counter.get_or_create(&labels).inc_by(n.max(0) as u64);
            }
        }
    }

    /// Counts one request that failed for good.
    pub fn failed(&self, spider: &str, reason: &str) {
        self.0
            .failures
            .get_or_create(&Self::labels(spider, Some(("reason", reason))))
            .inc();
    }

    pub fn observe_download(&self, spider: &str, seconds: f64) {
        self.0
            .download
            .get_or_create(&Self::labels(spider, None))
            .observe(seconds);
    }

    pub fn observe_render(&self, spider: &str, seconds: f64) {
        self.0
            .render
            .get_or_create(&Self::labels(spider, None))
            .observe(seconds);
    }

    /// A Redis round trip of `op` (`lease`, `commit`, `claim`).
    pub fn observe_redis(&self, spider: &str, op: &str, seconds: f64) {
        self.0
            .redis
            .get_or_create(&Self::labels(spider, Some(("op", op))))
            .observe(seconds);
    }

    pub fn set_in_flight(&self, spider: &str, n: usize) {
        self.0
            .in_flight
            .get_or_create(&Self::labels(spider, None))
            .set(n as i64);
    }

    /// The cluster's state for `spider`, as just read from Redis.
    pub fn set_cluster(&self, spider: &str, cluster: Cluster) {
        self.0
            .cluster
            .spiders
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(spider.to_string(), cluster);
    }

    /// Whether the worker is healthy, as `/healthz` answers.
    pub fn health(&self) -> &health::Health {
        &self.0.health
    }

    /// `crawlworker export`'s series.
    pub fn export(&self) -> &export::Export {
        &self.0.export
    }

    /// The text exposition (OpenMetrics, which Prometheus reads).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.0.registry);
        out
    }
}

/// The cluster series, encoded from the last reading at each scrape.
#[derive(Debug, Default)]
struct ClusterState {
    spiders: Mutex<HashMap<String, Cluster>>,
}

impl Collector for ClusterState {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let spiders = self
            .spiders
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        encode_queues(&mut encoder, &spiders)?;
        encode_cluster_gauges(&mut encoder, &spiders)?;
        encode_leases_expired(&mut encoder, &spiders)?;
        encode_build_info(&mut encoder)
    }
}

/// The entries of each spider's queues, one series per queue.
fn encode_queues(
    encoder: &mut DescriptorEncoder,
    spiders: &HashMap<String, Cluster>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(
        names::QUEUE_ENTRIES,
        "Entries in the spider's queues, for the whole cluster (every worker reports the same: aggregate with max)",
        None,
        ConstGauge::new(0i64).metric_type(),
    )?;
    for (spider, c) in spiders {
        let q = &c.queues;
        for (queue, n) in [
            ("start", q.start),
            ("queued", q.queued),
            ("inflight", q.inflight),
            ("delayed", q.delayed),
            ("scheduled", q.scheduled),
            ("overdue", q.overdue),
            ("failed", q.failed),
            ("dead", q.dead),
        ] {
            let labels: Labels = vec![
                ("spider".into(), spider.clone()),
                ("queue".into(), queue.into()),
            ];
            ConstGauge::new(n as i64).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

/// The cluster's gauges with one series per spider.
fn encode_cluster_gauges(
    encoder: &mut DescriptorEncoder,
    spiders: &HashMap<String, Cluster>,
) -> Result<(), std::fmt::Error> {
    for (name, help, value) in [
        (
            names::DUPEFILTER_ENTRIES,
            "Fingerprints the spider's dupefilter holds, for the whole cluster (aggregate with max)",
            (|c| c.queues.dupefilter) as fn(&Cluster) -> u64,
        ),
        (
            names::WORKERS_LIVE,
            "Workers whose heartbeat is fresh, for the whole cluster (aggregate with max)",
            |c| c.workers_live,
        ),
        (
            names::HOSTS_BACKED_OFF,
            "Hosts the cluster has slowed down after 429 or 5xx responses, right now (aggregate with max)",
            |c| c.hosts_backed_off,
        ),
        (
            names::PAUSED,
            "1 while the spider is paused (crawlworker pause), for the whole cluster (aggregate with max)",
            |c| u64::from(c.queues.paused),
        ),
        (
            names::ITEMS_BACKLOG_FULL,
            "1 while the item stream's consumers lag by items_stream_max_backlog items and no page is leased, for the whole cluster (aggregate with max)",
            |c| u64::from(c.queues.items_backlog_full),
        ),
    ] {
        let gauge = ConstGauge::new(0i64);
        let mut family = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
        for (spider, c) in spiders {
            let labels: Labels = vec![("spider".into(), spider.clone())];
            ConstGauge::new(value(c) as i64).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

/// The leases that expired in the whole cluster, a counter per spider.
fn encode_leases_expired(
    encoder: &mut DescriptorEncoder,
    spiders: &HashMap<String, Cluster>,
) -> Result<(), std::fmt::Error> {
    let counter = ConstCounter::new(0u64);
    let mut family = encoder.encode_descriptor(
        names::CLUSTER_LEASES_EXPIRED,
        "Leases that expired (a worker died or stalled) and went back to the queue, for the whole cluster (aggregate with max)",
        None,
        counter.metric_type(),
    )?;
    for (spider, c) in spiders {
        let labels: Labels = vec![("spider".into(), spider.clone())];
        ConstCounter::new(c.leases_expired).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

/// The version this worker runs, as a label of a constant 1.
fn encode_build_info(encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(
        names::BUILD_INFO,
        "The crawlworker version this worker runs (always 1)",
        None,
        ConstGauge::new(0i64).metric_type(),
    )?;
    let labels: Labels = vec![("version".into(), crate::version::LONG.to_string())];
    ConstGauge::new(1i64).encode(family.encode_family(&labels)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_help_line_ends_with_two_full_stops() {
        let m = Metrics::new();
        let mut t = Tally::default();
        for stat in stats::ALL {
            t.add(*stat, 1);
        }
        m.count("bbs", &t);
        m.set_cluster("bbs", Cluster::default());
        let text = m.encode();
        let helps: Vec<&str> = text.lines().filter(|l| l.starts_with("# HELP")).collect();
        assert!(helps.len() > 20, "{text}");
        for line in helps {
            assert!(!line.ends_with(".."), "{line}");
        }
    }

    #[test]
    fn stats_become_prefixed_counters_with_the_spider_label() {
        let m = Metrics::new();
        let mut t = Tally::default();
        t.add(stats::ITEM_SCRAPED_COUNT, 3);
        t.add(stats::OFFSITE_FILTERED, 2);
        t.add_in(stats::DOWNLOADER_RESPONSE_STATUS, 200, 1);
        t.add(stats::DOWNLOADER_RESPONSE_COUNT, 1);
        m.count("bbs", &t);
        m.set_cluster("bbs", Cluster::default());
        let text = m.encode();
        assert!(
            text.contains("crawlworker_items_scraped_total{spider=\"bbs\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("crawlworker_links_filtered_total{spider=\"bbs\",reason=\"offsite\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("crawlworker_responses_total{spider=\"bbs\",status=\"200\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("crawlworker_queue_entries{spider=\"bbs\",queue=\"queued\"} 0"),
            "{text}"
        );
    }
}
