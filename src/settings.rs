//! Every worker setting, defined once: its name, type, default and meaning.
//!
//! The names are Scrapy's, lower-cased (`concurrent_requests`,
//! `download_delay`, …) so a Scrapy user finds what they know. Values are
//! layered, each layer overriding the one before: built-in defaults <
//! the `config/` file < the spider's `[settings]` < environment variables
//! (`CRAWLWORKER_<NAME>`) < the command line. As in Scrapy, what a spider
//! says for itself beats the project-wide file; the environment and the
//! command line, set for one run or one deployment, beat both.
//! [`effective`] says which layer each value came from. This module owns
//! the one table of settings, their defaults and the layering; each stage
//! reads only the finished [`Settings`]. The kinds of value a setting may have
//! (how each is read, parsed and shown) are in `values`, the proxy
//! settings' in [`proxy`].

pub mod effective;
pub mod proxy;
mod values;

use std::collections::BTreeMap;
use std::time::Duration;

pub use crate::frontier::redis_url::RedisUrl;
use crate::reader::TableReader;
pub use proxy::ProxyMode;
pub(crate) use values::SettingValue;
pub use values::{
    parse_duration, Bytes, Capacity, DupefilterMode, HeaderText, Headers, Rate, MAX_DURATION,
};

macro_rules! settings {
    ($( $(#[doc = $doc:literal])+ $name:ident : $ty:ty = $default:expr; )+) => {
        /// The finished settings one spider runs with.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Settings {
            $( $(#[doc = $doc])+ pub $name: $ty, )+
        }

        impl Default for Settings {
            fn default() -> Self {
                Settings { $( $name: $default, )+ }
            }
        }

        /// One layer of settings: only what that layer sets.
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct Overrides {
            $( pub $name: Option<$ty>, )+
        }

        impl Overrides {
            /// Reads a `[settings]` table; unknown names are reported by the
            /// caller's `finish`.
            pub(crate) fn read(table: &TableReader<'_>) -> Overrides {
                let o = Overrides { $( $name: <$ty as SettingValue>::read(table, stringify!($name)), )+ };
                for (name, problem, hint) in o.unusable() {
                    if let Some((_, loc)) = table.node(name) {
                        table.reader().problem(&loc, problem, Some(hint));
                    }
                }
                o
            }

            /// Reads the `[settings]` table of a file, if it has one.
            pub(crate) fn read_section(parent: &TableReader<'_>) -> Overrides {
                match parent.table("settings") {
                    Some(t) => {
                        let o = Overrides::read(&t);
                        t.finish();
                        o
                    }
                    None => Overrides::default(),
                }
            }

            /// Reads `CRAWLWORKER_<NAME>` variables through `lookup`.
            pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Overrides, String> {
                let mut o = Overrides::default();
                $(
                    let var = concat!("CRAWLWORKER_", stringify!($name)).to_ascii_uppercase();
                    if let Some(raw) = lookup(&var) {
                        o.$name = Some(<$ty as SettingValue>::parse_str(&raw)
                            .map_err(|e| format!("{var}={}: {e}; expected {}", <$ty as SettingValue>::shown_raw(&raw), <$ty as SettingValue>::EXPECTED))?);
                    }
                )+
                if let Some((name, problem, hint)) = o.unusable().into_iter().next() {
                    return Err(format!("CRAWLWORKER_{}: {problem}; {hint}", name.to_ascii_uppercase()));
                }
                Ok(o)
            }
        }

        impl Settings {
            /// Applies one layer on top of these settings.
            pub fn apply(&mut self, layer: &Overrides) {
                $( if let Some(v) = &layer.$name { self.$name = v.clone(); } )+
            }

            /// Every setting's value as the catalogue shows it, in its
            /// order (secrets are hidden by [`effective`], not here).
            fn shown(&self) -> Vec<(&'static str, String)> {
                vec![ $( (stringify!($name), SettingValue::show(&self.$name)), )+ ]
            }
        }

        impl Overrides {
            /// The settings this layer sets, with their values shown.
            fn shown(&self) -> Vec<(&'static str, String)> {
                let mut out = Vec::new();
                $( if let Some(v) = &self.$name { out.push((stringify!($name), SettingValue::show(v))); } )+
                out
            }
        }

        /// Every setting: name, meaning and default, for `--help` and docs.
        pub fn catalogue() -> Vec<SettingDoc> {
            let d = Settings::default();
            vec![ $( SettingDoc {
                name: stringify!($name),
                doc: concat!($($doc, "\n"),+).trim(),
                default: SettingValue::show(&d.$name),
                expected: <$ty as SettingValue>::EXPECTED,
            }, )+ ]
        }
    };
}

impl Overrides {
    /// Values of the right type that a worker cannot run with (it would
    /// hang, fail every request or overflow): `(setting, problem, fix)`.
    /// Checked wherever a layer is read, so `check` and `run` refuse the
    /// same files.
    fn unusable(&self) -> Vec<(&'static str, String, String)> {
        let mut out = Vec::new();
        let mut at_least_one = |name: &'static str, v: Option<u32>, why: &str| {
            if v == Some(0) {
                out.push((name, format!("0 {why}"), "use 1 or more".to_string()));
            }
        };
        at_least_one(
            "concurrent_requests",
            self.concurrent_requests,
            "would never download anything",
        );
        at_least_one(
            "concurrent_requests_per_domain",
            self.concurrent_requests_per_domain,
            "would never download anything",
        );
        at_least_one(
            "render_pages",
            self.render_pages,
            "would never render a page",
        );
        for (name, v, why) in [
            (
                "download_timeout",
                self.download_timeout,
                "would fail every download",
            ),
            (
                "connect_timeout",
                self.connect_timeout,
                "would fail every connection",
            ),
            (
                "lease_timeout",
                self.lease_timeout,
                "would hand every page to another worker while it is downloaded",
            ),
        ] {
            if v.is_some_and(|d| d < Duration::from_millis(100)) {
                out.push((
                    name,
                    format!("a duration under 100ms {why}"),
                    format!("use 100ms or more, e.g. `{name} = \"30s\"`"),
                ));
            }
        }
        if self
            .dupefilter_ttl
            .is_some_and(|d| d < Duration::from_secs(1))
        {
            out.push((
                "dupefilter_ttl",
                "a TTL under 1s forgets a page before its links come back: the crawl would fetch the same pages again and again".to_string(),
                "use the time after which a page may be crawled again, e.g. `dupefilter_ttl = \"7d\"`".to_string(),
            ));
        }
        if self
            .download_memory_budget
            .is_some_and(|b| b.0 > 0 && b.0 < 1 << 20)
        {
            out.push((
                "download_memory_budget",
                "a budget under 1 MiB fails nearly every response as too large".to_string(),
                "use 1 MiB or more (the default is 256 MiB), or 0 for no bound".to_string(),
            ));
        }
        if let Some(p) = self.depth_priority.filter(|p| {
            !(-crate::frontier::MAX_PRIORITY..=crate::frontier::MAX_PRIORITY).contains(p)
        }) {
            out.push((
                "depth_priority",
                format!("{p} is out of range"),
                format!(
                    "use a whole number from {} to {} (priorities themselves stay within that range)",
                    -crate::frontier::MAX_PRIORITY,
                    crate::frontier::MAX_PRIORITY
                ),
            ));
        }
        for raw in self.proxies.iter().flatten() {
            if let Err(e) = proxy::ProxyUrl::parse(raw) {
                out.push((
                    "proxies",
                    e.to_string(),
                    "write each proxy as `http://host:port`, `http://user:pass@host:port` or `socks5://host:port`".to_string(),
                ));
            }
        }
        out
    }
}

/// One line of the settings catalogue.
#[derive(Debug, Clone)]
pub struct SettingDoc {
    pub name: &'static str,
    pub doc: &'static str,
    pub default: String,
    pub expected: &'static str,
}

/// Scrapy's `DEFAULT_REQUEST_HEADERS`.
fn default_headers() -> Headers {
    Headers(BTreeMap::from([
        (
            "Accept".to_string(),
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8".to_string(),
        ),
        ("Accept-Language".to_string(), "en".to_string()),
    ]))
}

/// The User-Agent sent unless a spider sets its own.
pub const DEFAULT_USER_AGENT: &str = concat!("crawlworker/", env!("CARGO_PKG_VERSION"));

settings! {
    /// Requests one worker downloads at once.
    concurrent_requests: u32 = 16;
    /// Requests one worker sends to a single host at once.
    concurrent_requests_per_domain: u32 = 8;
    /// Minimum time between two requests to the same host, for the whole cluster.
    download_delay: Duration = Duration::ZERO;
    /// Wait 0.5× to 1.5× `download_delay` instead of exactly it, as Scrapy does.
    randomize_download_delay: bool = true;
    /// Upper bound on requests per second to one host, for the whole cluster (0 = no bound).
    max_requests_per_second: f64 = 0.0;
    /// How seen requests are remembered: "exact" (scrapy-redis's SET, ~85 B per entry), "compact" (exact, ~20 B), "bloom" (~2 B, rare false positives that skip a URL), or "expiring" (forgotten after dupefilter_ttl).
    dupefilter: DupefilterMode = DupefilterMode::Exact;
    /// For "bloom": the entries the first filter is sized for (about 1.8 bytes each at 0.001, made when the first worker starts, within Redis's memory; a full filter is followed by a larger one). At most 10 billion; raised to the least that keeps the error rate (78 at 0.001).
    dupefilter_capacity: Capacity = Capacity(100_000_000);
    /// For "bloom": the share of never-seen URLs the filter wrongly says it has seen.
    dupefilter_error_rate: Rate = Rate(0.001);
    /// For "expiring": how long a seen request is remembered.
    dupefilter_ttl: Duration = Duration::from_secs(7 * 24 * 3600);
    /// For "expiring": remember a request again for a whole TTL each time it is seen (links that keep appearing stay remembered).
    dupefilter_refresh: bool = true;
    /// Deepest request followed (0 = no limit); start requests have depth 0.
    depth_limit: u32 = 0;
    /// Scrapy's DEPTH_PRIORITY: a request's priority is lowered by depth × this (negative favours depth).
    depth_priority: i64 = 0;
    /// Retry failed downloads.
    retry_enabled: bool = true;
    /// Retries after the first attempt.
    retry_times: u32 = 2;
    /// Wait before the first retry; each further retry waits twice as long (with ±50 % jitter), unless the server's Retry-After says longer.
    retry_backoff_base: Duration = Duration::from_secs(1);
    /// Longest wait before a retry (a longer Retry-After is capped to this).
    retry_backoff_max: Duration = Duration::from_secs(300);
    /// Response statuses that are retried.
    retry_http_codes: Vec<u16> = vec![500, 502, 503, 504, 522, 524, 408, 429];
    /// Stop leasing once the whole cluster has received this many responses (0 = no limit; Scrapy's CLOSESPIDER_PAGECOUNT). The rest stays queued; `--until-drained` workers then stop. Over `[keys] shards`, each shard leases under a cap of it that moves to where the work is (docs/scaling.md).
    max_pages: u32 = 0;
    /// Fetch at most this many pages of one host, for the whole cluster (0 = no limit); further requests to it are dropped and counted (`quota/host_dropped`).
    max_pages_per_host: u32 = 0;
    /// With `[items] sink = "stream"`: stop leasing pages, for the whole cluster, while this many of the stream's items are not yet acknowledged by its slowest consumer group (without consumer groups: while the stream holds this many); pages in flight still commit theirs. Entries every group has acknowledged are trimmed (0 = no bound, nothing trimmed).
    items_stream_max_backlog: u32 = 100_000;
    /// Statuses that take a page off the revisit schedule (a rule's `revisit`): it is gone.
    revisit_drop_status: Vec<u16> = vec![404, 410];
    /// Non-2xx statuses whose pages are still extracted (Scrapy's HTTPERROR_ALLOWED_CODES).
    httperror_allowed_codes: Vec<u16> = Vec::new();
    /// The User-Agent header.
    user_agent: HeaderText = HeaderText(DEFAULT_USER_AGENT.to_string());
    /// Headers sent with every request unless the request sets them.
    default_request_headers: Headers = default_headers();
    /// Fetch and obey each host's robots.txt.
    robotstxt_obey: bool = false;
    /// How long a host's robots.txt is trusted before it is fetched again (once for the whole cluster).
    robotstxt_ttl: Duration = Duration::from_secs(3600);
    /// How long a robots.txt that could not be fetched (5xx, 429, timeout, network error) holds its host's requests before it is fetched again (once for the whole cluster). The requests wait in Redis meanwhile, like retries; after `retry_times` such waits they go into the failed key. Keep it under `retry_backoff_max`.
    robotstxt_failure_ttl: Duration = Duration::from_secs(60);
    /// Slow hosts down for the whole cluster: a 429 (or a 5xx with Retry-After) at once, other 5xx in proportion to the host's recent share of them (none while under one in five, up to `adaptive_backoff_max_delay` when all fail), recovering with good responses.
    adaptive_backoff: bool = true;
    /// The slowest pace adaptive back-off imposes on a host (delay between requests).
    adaptive_backoff_max_delay: Duration = Duration::from_secs(60);
    /// Longest a whole download may take.
    download_timeout: Duration = Duration::from_secs(180);
    /// Longest a connection may take to open.
    connect_timeout: Duration = Duration::from_secs(10);
    /// Most connections one spider keeps open, idle keep-alive ones included, besides one per request in progress (each costs the worker about 20 KiB); 0 keeps none once its response has arrived.
    max_open_connections: u32 = 1024;
    /// Responses larger than this are cut off and fail into the failed key (0: no limit). Scrapy's 1 GiB would let a few large pages exhaust a worker: a page costs its size while downloaded and 3.5 to 13 times more while parsed (docs/memory.md).
    download_maxsize: Bytes = Bytes(32 << 20);
    /// Bytes of response bodies, and of the items and links extracted from them, one worker holds at once, its spiders together: a body from its download until its page is extracted, what the page gave until it is committed; a download waits for room (0: no bound). A response larger than all of it fails as too large.
    download_memory_budget: Bytes = Bytes(256 << 20);
    /// Responses larger than this are logged as a warning (0: no warning).
    download_warnsize: Bytes = Bytes(32 << 20);
    /// Deepest element of a page the HTML parser builds (0: no limit): past it, the parse stops and the page is extracted as far as it was read (counted in `extract/cut_short_count`). Nesting costs the parser time in proportion to depth × elements; browsers stop nesting at 512 too.
    extract_max_depth: u32 = 512;
    /// Most nodes (elements, text, comments) of a page the HTML parser builds (0: no limit): past it, the parse stops and the page is extracted as far as it was read (counted in `extract/cut_short_count`).
    extract_max_nodes: u32 = 1_000_000;
    /// Longest a page's parse and extraction may take (0: no limit): then it stops, and what was extracted so far is committed (counted in `extract/cut_short_count`).
    extract_timeout: Duration = Duration::from_secs(10);
    /// Follow redirects (each hop is a new request through the dupefilter and domain checks).
    redirect_enabled: bool = true;
    /// Longest redirect chain followed.
    redirect_max_times: u32 = 20;
    /// Keep a cookie jar per worker.
    cookies_enabled: bool = false;
    /// A page cache for developing spiders (Scrapy's HTTPCACHE_DIR, on when set; `--http-cache DIR` sets it for `parse` and `run --local`): responses are stored here by request fingerprint and replayed by the next run instead of being fetched. Not for crawls on Redis, which refuse it (empty: off).
    httpcache_dir: String = String::new();
    /// How long a page in the page cache (`httpcache_dir`) is replayed before it is fetched again (0: for ever).
    httpcache_expiration_secs: Duration = Duration::ZERO;
    /// Proxy URLs for this spider (`http://user:pass@host:port`, `socks5://…`); empty uses HTTP(S)_PROXY from the environment, if set. Credentials are never logged.
    proxies: Vec<String> = Vec::new();
    /// How requests are spread over `proxies`: "round_robin", or "sticky" (one proxy per host).
    proxy_mode: ProxyMode = ProxyMode::RoundRobin;
    /// Offer HTTP/2 to https servers (ALPN); servers without it get HTTP/1.1.
    http2: bool = true;
    /// Allow requests to loopback, private and link-local addresses (the demo forum needs it).
    allow_private_networks: bool = false;
    /// The Chromium (or Chrome) binary that renders the pages of rules with `render`; empty: `chromium`, `chromium-browser`, `google-chrome` or `google-chrome-stable`, the first found on PATH. It is started when the first such page comes, never downloaded.
    chromium: String = String::new();
    /// Pages one worker renders at once in its Chromium (each a tab, tens of MB of the browser's memory).
    render_pages: u32 = 4;
    /// Most requests a rendered page may make besides its own (scripts, styles, what its scripts fetch): past it they fail, the page is taken as it is and counted in `render/subrequests_cut`.
    render_max_subrequests: u32 = 500;
    /// Chromium is restarted after rendering this many pages (0: never), and whenever its processes together use more than `render_max_rss`: a browser's memory grows with the pages it has served.
    render_restart_pages: u32 = 1000;
    /// Most memory the worker's Chromium may use, all its processes together, before it is restarted between pages (0: no bound).
    render_max_rss: Bytes = Bytes(2 << 30);
    /// What one open rendered page counts against the worker's `download_memory_budget` while it renders (besides its HTML, counted as any body).
    render_page_memory: Bytes = Bytes(8 << 20);
    /// The Redis holding the crawl (`redis://`, or `rediss://` for TLS; `REDIS_URL` is read too). Its password is never logged.
    redis_url: RedisUrl = RedisUrl::local();
    /// How long a leased request stays with a worker that stops renewing it (a dead worker's requests return to the queue after this).
    lease_timeout: Duration = Duration::from_secs(30);
    /// How many times a request's lease may expire (each worker that took it died or vanished holding it: a crash, a kill, a lost host) before the request goes to the dead letters, with that reason, instead of back to the queue: the redrive limit of SQS and Sidekiq, so a page that crashes every worker that fetches it is fetched this many times, not forever (0 = no limit). A hand-back (a worker stopping, or over its share) is no expiry; a commit forgets the count.
    max_lease_expiries: u32 = 3;
    /// How long a finished page may wait at most for others to share its commit (one Redis script call for several pages costs Redis far less than one each): only as long as the requests the worker holds ahead keep its slots busy (at the pace it finishes pages, less a call's round trip, so a worker of fast pages does not wait), while its download slot (or its host's, `concurrent_requests_per_domain`) has gone to a request leased ahead, or (for a page that queues no links, while another is in progress) nothing is queued for the worker to fetch in its place, so the wait leaves no slot idle; pages finished while the previous commit is on its way always share the next (0: no extra wait).
    commit_wait: Duration = Duration::from_millis(20);
    /// How often an idle worker looks for start entries nothing announces: those its start-key watch cannot see (a set or zset without keyspace notifications, a list beyond the worker's 16 blocking waits). When the watch sees them all, it looks only every 30 s (or this, if longer), as a safety net. Retries, expired leases, revisits and politeness slots wake it when they come due, whatever this says.
    idle_recheck: Duration = Duration::from_secs(1);
    /// How often a worker logs its progress (pages and items with their rates, the cluster's queue), as Scrapy's LogStats (0: never).
    log_stats_interval: Duration = Duration::from_secs(60);
    /// How long a stopping worker lets downloads in progress finish before handing them back to the queue (requests not yet downloading go back at once).
    shutdown_grace: Duration = Duration::from_secs(30);
}

/// Builds the settings for one spider from its layers, lowest first.
pub fn layered(layers: &[&Overrides]) -> Settings {
    let mut s = Settings::default();
    for layer in layers {
        s.apply(layer);
    }
    s
}

/// The book's table of settings (docs/settings.md, kept in sync by a test):
/// every setting of [`catalogue`] with its default and meaning.
pub fn markdown_table() -> String {
    let mut out = String::from("| setting | default | meaning |\n|---|---|---|\n");
    for s in catalogue() {
        // A `|` inside a cell would end it (a default such as a header value).
        out.push_str(&format!(
            "| `{}` | `{}` | {} |\n",
            s.name,
            s.default.replace('|', "\\|"),
            s.doc
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_layer_parses_and_names_the_variable_on_error() {
        let o = Overrides::from_env(|k| match k {
            "CRAWLWORKER_DOWNLOAD_DELAY" => Some("250ms".into()),
            "CRAWLWORKER_RETRY_HTTP_CODES" => Some("500, 503".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(o.download_delay, Some(Duration::from_millis(250)));
        assert_eq!(o.retry_http_codes, Some(vec![500, 503]));
        let err = Overrides::from_env(|k| (k == "CRAWLWORKER_RETRY_TIMES").then(|| "many".into()))
            .unwrap_err();
        assert!(err.contains("CRAWLWORKER_RETRY_TIMES"), "{err}");
    }

    #[test]
    fn values_are_checked_when_the_settings_are_built() {
        let refused = |var: &str, value: &str| {
            Overrides::from_env(|k| (k == var).then(|| value.to_string())).unwrap_err()
        };
        let e = refused("CRAWLWORKER_PROXY_MODE", "random");
        assert!(
            e.contains("CRAWLWORKER_PROXY_MODE") && e.contains("round_robin"),
            "{e}"
        );
        let e = refused(
            "CRAWLWORKER_DEFAULT_REQUEST_HEADERS",
            r#"{"Bad Header": "x"}"#,
        );
        assert!(e.contains("`Bad Header` is not a valid header name"), "{e}");
        let e = refused("CRAWLWORKER_USER_AGENT", "bad\nagent");
        assert!(e.contains("cannot be sent in an HTTP header"), "{e}");
        let e = refused("CRAWLWORKER_REDIS_URL", "http://:hunter2@127.0.0.1:6379");
        assert!(
            e.contains("not a Redis address") && !e.contains("hunter2"),
            "{e}"
        );
        let ok = Overrides::from_env(|k| (k == "CRAWLWORKER_PROXY_MODE").then(|| "sticky".into()));
        assert_eq!(ok.unwrap().proxy_mode, Some(ProxyMode::Sticky));
    }

    #[test]
    fn later_layers_win() {
        let a = Overrides {
            retry_times: Some(5),
            ..Default::default()
        };
        let b = Overrides {
            retry_times: Some(1),
            ..Default::default()
        };
        assert_eq!(layered(&[&a, &b]).retry_times, 1);
        assert_eq!(layered(&[&a]).concurrent_requests, 16);
    }

    #[test]
    fn catalogue_lists_every_setting_with_its_default() {
        let c = catalogue();
        let delay = c.iter().find(|d| d.name == "download_timeout").unwrap();
        assert_eq!(delay.default, "3m");
        assert!(c.iter().all(|d| !d.doc.is_empty()));
    }
}
