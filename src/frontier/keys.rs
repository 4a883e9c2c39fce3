//! Every Redis key name of a spider, in one place. Defaults are
//! scrapy-redis's (`<name>:requests`, `<name>:dupefilter`, `<name>:items`,
//! `<name>:stats`, `<name>:start_urls`) plus crawlworker's own; each can be
//! renamed in the spider's `[keys]` table with a `{name}` template. In
//! cluster mode every key carries the hash tag `{<name>}` so all keys of a
//! spider share one Redis Cluster slot and multi-key scripts work.

use crate::spider::{KeyMode, Spider};

/// The key kinds, their default templates and what each holds.
pub const KEY_KINDS: &[(&str, &str, &str)] = &[
    (
        "requests",
        "{name}:requests",
        "sorted set of queued request ids, by priority then FIFO",
    ),
    (
        "request_data",
        "{name}:requests:data",
        "hash: request id -> request JSON",
    ),
    (
        "inflight",
        "{name}:inflight",
        "sorted set: leased request id -> lease deadline (ms)",
    ),
    (
        "leases",
        "{name}:inflight:owners",
        "hash: leased request id -> worker and queue score",
    ),
    (
        "sequence",
        "{name}:requests:seq",
        "counter giving FIFO order and request ids",
    ),
    (
        "delayed",
        "{name}:delayed",
        "sorted set: request id waiting to be retried -> due time (ms)",
    ),
    (
        "delayed_scores",
        "{name}:delayed:scores",
        "hash: delayed request id -> its queue score",
    ),
    (
        "pace",
        "{name}:pace",
        "hash: host -> next free politeness slot (ms)",
    ),
    (
        "host_delay",
        "{name}:pace:delay",
        "hash: host -> Crawl-delay from its robots.txt (ms)",
    ),
    (
        "backoff",
        "{name}:pace:backoff",
        "hash: host -> adaptive back-off delay (ms) after 429/503",
    ),
    (
        "robots",
        "{name}:robots",
        "hash: host -> cached robots.txt (JSON: status, body, fetch time)",
    ),
    (
        "dupefilter",
        "{name}:dupefilter",
        "set of request fingerprints (scrapy-redis compatible)",
    ),
    ("items", "{name}:items", "list of scraped items as JSON"),
    ("stats", "{name}:stats", "hash of Scrapy-named counters"),
    (
        "dead",
        "{name}:dead",
        "list of malformed entries set aside, as JSON",
    ),
    (
        "failed",
        "{name}:failed",
        "list of requests that failed for good, as JSON",
    ),
    (
        "workers",
        "{name}:workers",
        "hash: worker id -> heartbeat JSON",
    ),
    (
        "wake",
        "{name}:wake",
        "pub/sub channel announcing new work to idle workers",
    ),
];

/// The key names of one spider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    pub start: String,
    pub requests: String,
    pub request_data: String,
    pub inflight: String,
    pub leases: String,
    pub sequence: String,
    pub delayed: String,
    pub delayed_scores: String,
    pub pace: String,
    pub host_delay: String,
    pub backoff: String,
    pub robots: String,
    pub dupefilter: String,
    pub items: String,
    pub stats: String,
    pub dead: String,
    pub failed: String,
    pub workers: String,
    pub wake: String,
}

impl Keys {
    /// The keys of `spider`: its `[keys]` templates, else the defaults.
    pub fn of(spider: &Spider) -> Keys {
        let name = match spider.keys.mode {
            KeyMode::Plain => spider.name.clone(),
            KeyMode::Cluster => format!("{{{}}}", spider.name),
        };
        let key = |kind: &str| {
            let template = spider
                .keys
                .templates
                .iter()
                .find(|(k, _)| k == kind)
                .map(|(_, t)| t.as_str())
                .or_else(|| {
                    KEY_KINDS
                        .iter()
                        .find(|(k, _, _)| *k == kind)
                        .map(|(_, t, _)| *t)
                })
                .unwrap_or("{name}:unknown");
            template.replace("{name}", &name)
        };
        Keys {
            start: spider.start.key.clone(),
            requests: key("requests"),
            request_data: key("request_data"),
            inflight: key("inflight"),
            leases: key("leases"),
            sequence: key("sequence"),
            delayed: key("delayed"),
            delayed_scores: key("delayed_scores"),
            pace: key("pace"),
            host_delay: key("host_delay"),
            backoff: key("backoff"),
            robots: key("robots"),
            dupefilter: key("dupefilter"),
            items: key("items"),
            stats: key("stats"),
            dead: key("dead"),
            failed: key("failed"),
            workers: key("workers"),
            wake: key("wake"),
        }
    }

    /// Every key holding crawl state, with its kind, for `flush` and `stats`.
    pub fn all(&self) -> Vec<(&'static str, &str)> {
        vec![
            ("start_urls", &self.start),
            ("requests", &self.requests),
            ("request_data", &self.request_data),
            ("inflight", &self.inflight),
            ("leases", &self.leases),
            ("sequence", &self.sequence),
            ("delayed", &self.delayed),
            ("delayed_scores", &self.delayed_scores),
            ("pace", &self.pace),
            ("host_delay", &self.host_delay),
            ("backoff", &self.backoff),
            ("robots", &self.robots),
            ("dupefilter", &self.dupefilter),
            ("items", &self.items),
            ("stats", &self.stats),
            ("dead", &self.dead),
            ("failed", &self.failed),
            ("workers", &self.workers),
        ]
    }
}
