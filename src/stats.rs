//! Every stat the crawl counts, defined once: its name in the Redis stats
//! hash (Scrapy's, so an existing scrapy-redis dashboard reads them), how it
//! changes and what it means.
//!
//! The worker counts a page's stats into a [`Tally`] that travels with the
//! page to its commit. The frontier's Lua scripts count the rest (enqueued,
//! filtered, leases expired, …) through a table generated from [`ALL`]
//! (`STAT.SCHEDULER_ENQUEUED` in Lua is [`SCHEDULER_ENQUEUED`] here), so no
//! script spells a stat name; a test keeps it that way.
//!
//! A stat that is also a Prometheus counter says so here ([`Metric`]):
//! `crawlworker_<name>_total`, with a `spider` label, the family's label,
//! and for some a fixed label (`links_filtered{reason="offsite"}`). The
//! metrics module builds its counters from these definitions.

use std::borrow::Cow;
use std::fmt::Display;

/// How a stat changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatKind {
    /// Only ever incremented.
    Counter,
    /// The largest value seen.
    Max,
    /// A time (RFC 3339).
    Time,
    /// A word (`finish_reason`).
    Text,
    /// A duration in seconds, written as a number.
    Seconds,
}

/// The Prometheus counter a stat is also counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Metric {
    /// `crawlworker_<name>_total`.
    pub name: &'static str,
    /// A label every increment of this stat carries (`reason="offsite"`).
    pub label: Option<(&'static str, &'static str)>,
}

/// One stat of the hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stat {
    /// The identifier scripts use (`STAT.<id>`).
    pub id: &'static str,
    /// The field in the stats hash.
    pub name: &'static str,
    pub kind: StatKind,
    pub help: &'static str,
    pub metric: Option<Metric>,
}

/// A family of counters with one label (`downloader/response_status_count/200`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Family {
    /// The field prefix, without the trailing `/`.
    pub prefix: &'static str,
    /// What the last part of the field is (`status`, `method`, …).
    pub label: &'static str,
    pub help: &'static str,
    /// The counter it is also counted in, labelled with [`Family::label`].
    pub metric: Option<&'static str>,
}

impl Family {
    /// The field for one label value.
    pub fn field(&self, value: impl Display) -> String {
        format!("{}/{value}", self.prefix)
    }
}

macro_rules! stats {
    ($( $(#[doc = $doc:literal])+ $id:ident = $name:literal, $kind:ident
        $(=> $metric:literal $(($lk:literal = $lv:literal))?)?; )+) => {
        $(
            $(#[doc = $doc])+
            pub const $id: Stat = Stat {
                id: stringify!($id),
                name: $name,
                kind: StatKind::$kind,
                help: concat!($($doc),+),
                metric: metric!($($metric $(($lk, $lv))?)?),
            };
        )+
        /// Every single stat.
        pub const ALL: &[Stat] = &[$($id),+];
    };
}

macro_rules! metric {
    () => {
        None
    };
    ($name:literal) => {
        Some(Metric {
            name: $name,
            label: None,
        })
    };
    ($name:literal ($k:literal, $v:literal)) => {
        Some(Metric {
            name: $name,
            label: Some(($k, $v)),
        })
    };
}

macro_rules! families {
    ($( $(#[doc = $doc:literal])+ $id:ident = $prefix:literal / $label:literal $(=> $metric:literal)?; )+) => {
        $(
            $(#[doc = $doc])+
            pub const $id: Family = Family {
                prefix: $prefix,
                label: $label,
                help: concat!($($doc),+),
                metric: family_metric!($($metric)?),
            };
        )+
        /// Every family of labelled counters.
        pub const FAMILIES: &[Family] = &[$($id),+];
    };
}

macro_rules! family_metric {
    () => {
        None
    };
    ($name:literal) => {
        Some($name)
    };
}

stats! {
    /// When the crawl first started (set by the first worker).
    START_TIME = "start_time", Time;
    /// When a worker last stopped (the last one to stop sets the crawl's).
    FINISH_TIME = "finish_time", Time;
    /// Why it stopped: `finished` (drained), `idle` or `shutdown`.
    FINISH_REASON = "finish_reason", Text;
    /// Seconds from `start_time` to `finish_time`.
    ELAPSED_TIME_SECONDS = "elapsed_time_seconds", Seconds;
    /// Requests sent.
    DOWNLOADER_REQUEST_COUNT = "downloader/request_count", Counter => "requests";
    /// Downloads that failed on the network (DNS, connection, timeout, size).
    DOWNLOADER_EXCEPTION_COUNT = "downloader/exception_count", Counter;
    /// Responses received.
    DOWNLOADER_RESPONSE_COUNT = "downloader/response_count", Counter;
    /// Bytes of response bodies, decoded.
    DOWNLOADER_RESPONSE_BYTES = "downloader/response_bytes", Counter => "response_bytes";
    /// Responses received (Scrapy counts them twice, so do we).
    RESPONSE_RECEIVED_COUNT = "response_received_count", Counter;
    /// Non-2xx responses not extracted (Scrapy's HttpError).
    HTTPERROR_RESPONSE_IGNORED_COUNT = "httperror/response_ignored_count", Counter;
    /// Items pushed.
    ITEM_SCRAPED_COUNT = "item_scraped_count", Counter => "items_scraped";
    /// Items dropped (a required field missing, or a field failing its checks: `item_dropped_reasons_count/<reason>`).
    ITEM_DROPPED_COUNT = "item_dropped_count", Counter;
    /// Times leasing stopped because the item stream's consumers lagged by `items_stream_max_backlog` items.
    ITEMS_BACKLOG_FULL = "items/backlog_full_count", Counter;
    /// Items `crawlworker export` wrote to its store and acknowledged.
    EXPORT_ITEM_COUNT = "export/item_count", Counter;
    /// Items `crawlworker export` set aside in the export dead letters: refused by the store (a constraint, a value that does not fit its column), fitting no item type, or refused by an `exec:` command after its retries.
    EXPORT_REFUSED_COUNT = "export/refused_count", Counter;
    /// Items an exporter had taken and not acknowledged when it was found gone, put back for the others (list sink; a stream's are claimed with `XAUTOCLAIM`).
    EXPORT_TAKEN_BACK_COUNT = "export/taken_back_count", Counter;
    /// Links or redirects to hosts outside `allowed_domains`.
    OFFSITE_FILTERED = "offsite/filtered", Counter => "links_filtered"("reason" = "offsite");
    /// Links that are not http(s).
    FOLLOW_FILTERED_SCHEME = "follow/filtered/scheme", Counter => "links_filtered"("reason" = "scheme");
    /// Links that only point into the same page.
    FOLLOW_FILTERED_FRAGMENT = "follow/filtered/fragment", Counter => "links_filtered"("reason" = "fragment");
    /// Links or redirects matching a deny pattern.
    FOLLOW_FILTERED_DENIED = "follow/filtered/denied", Counter => "links_filtered"("reason" = "denied");
    /// Links whose path ends with an extension their follow entry does not follow (`deny_extensions`; Scrapy's list by default: images, archives, office documents, `pdf`, `js`, `py`, …).
    FOLLOW_FILTERED_EXTENSION = "follow/filtered/extension", Counter => "links_filtered"("reason" = "extension");
    /// Links their follow entry's `rewrite` could not rewrite (its `jq` failed or gave `null`, or it made no http(s) URL).
    FOLLOW_FILTERED_REWRITE = "follow/filtered/rewrite", Counter => "links_filtered"("reason" = "rewrite");
    /// Links deeper than the depth limit.
    FOLLOW_FILTERED_DEPTH = "follow/filtered/depth", Counter => "links_filtered"("reason" = "depth");
    /// Links past the last page a task asks for.
    FOLLOW_FILTERED_PAGINATION = "follow/filtered/pagination", Counter => "links_filtered"("reason" = "pagination");
    /// Sitemap or feed entries not modified since the source's last visit (their `lastmod`).
    FOLLOW_FILTERED_NOT_MODIFIED = "follow/filtered/not_modified", Counter => "links_filtered"("reason" = "not_modified");
    /// Pages extracted only in part: deeper or larger than `extract_max_depth` or `extract_max_nodes`, an element with more than 1,024 attributes, or slower than `extract_timeout` (`extract/cut_short_reason_count/<reason>`).
    EXTRACT_CUT_SHORT = "extract/cut_short_count", Counter => "pages_cut_short";
    /// Values fields could not convert to their `type` (a date in no form `type = "datetime"` reads, `12a` for an `int`), or whose `prepare` or `transform` failed: the field went without the value (`extract/unconverted_field_count/<item>.<field>`). Each field's first is logged as a warning with the value, and `crawlworker parse` lists them.
    EXTRACT_UNCONVERTED = "extract/unconverted_count", Counter;
    /// Responses with a binary body (by their Content-Type, or by their first bytes without one) not extracted: their rule neither takes binary responses (`binary = true`) nor reads sitemaps or feeds.
    EXTRACT_BINARY_IGNORED = "extract/binary_ignored_count", Counter => "binary_responses_ignored";
    /// Sources that gave nothing, or not all they hold, because they are too large or malformed: JSON that does not parse for a JSON rule, a sitemap or feed that is not one, is cut off, or unpacks past `download_maxsize` (`extract/unreadable_kind_count/<kind>`). Each is recorded as failed, with its reason.
    EXTRACT_UNREADABLE = "extract/unreadable_count", Counter => "sources_unreadable";
    /// Pages rendered in headless Chromium (rules with `render`).
    RENDER_PAGE_COUNT = "render/page_count", Counter => "pages_rendered";
    /// Milliseconds spent rendering pages, from the wait for a tab to its DOM (divide by `render/page_count` for the mean).
    RENDER_MILLISECONDS = "render/milliseconds", Counter;
    /// Requests rendered pages made (scripts, styles, what their scripts fetch), each answered through the worker's HTTP client.
    RENDER_SUBREQUEST_COUNT = "render/subrequest_count", Counter => "render_subrequests";
    /// Requests of rendered pages for kinds of resource their rule blocks (`block`), and favicons.
    RENDER_BLOCKED_COUNT = "render/blocked_count", Counter;
    /// Requests of rendered pages that failed or were refused (the private-network guard among them); the page is rendered without them.
    RENDER_SUBREQUEST_FAILED_COUNT = "render/subrequest_failed_count", Counter;
    /// Requests of rendered pages past `render_max_subrequests`, refused.
    RENDER_SUBREQUESTS_CUT = "render/subrequests_cut", Counter;
    /// Rendered pages' attempts to navigate away from the page, blocked.
    RENDER_NAVIGATION_BLOCKED_COUNT = "render/navigation_blocked_count", Counter;
    /// Times a worker's Chromium was restarted: it died or stopped answering, served `render_restart_pages` pages, or grew past `render_max_rss`.
    RENDER_BROWSER_RESTARTS = "render/browser_restarts", Counter => "browser_restarts";
    /// Requests robots.txt forbids.
    ROBOTSTXT_FORBIDDEN = "robotstxt/forbidden", Counter => "robotstxt_forbidden";
    /// Requests put off because their host's robots.txt could not be fetched (5xx, 429, timeout, network error): each waits in Redis like a retry, until robots.txt is fetched again.
    ROBOTSTXT_UNAVAILABLE = "robotstxt/unavailable", Counter => "robotstxt_unavailable";
    /// Requests recorded in the failed key because their host's robots.txt could not be fetched: still failing after their retries, or refused (e.g. by the private-network guard).
    ROBOTSTXT_UNAVAILABLE_FAILED = "robotstxt/unavailable_failed", Counter => "robotstxt_unavailable_failed";
    /// Malformed entries set aside in the dead-letter key.
    DEADLETTER_COUNT = "deadletter/count", Counter => "dead_letters";
    /// Retries scheduled.
    RETRY_COUNT = "retry/count", Counter;
    /// Requests that failed after their last retry.
    RETRY_MAX_REACHED = "retry/max_reached", Counter => "retries_exhausted";
    /// Requests recorded in the failed key.
    FAILED_COUNT = "failed/count", Counter;
    /// Failed requests moved back into the queue (`push-urls --from-failed`).
    FAILED_REQUEUED_COUNT = "failed/requeued_count", Counter;
    /// Requests a scrapy-redis crawl had queued, queued as crawlworker's (`import-queue`).
    SCRAPY_REDIS_IMPORTED = "scrapy_redis/imported_count", Counter;
    /// Redirects followed.
    REDIRECT_COUNT = "redirect/count", Counter => "redirects";
    /// Follow-up requests over the size bound, not queued.
    SCHEDULER_REQUEST_TOO_LARGE = "scheduler/request_too_large", Counter;
    /// Requests put in the queue (`scheduler/enqueued/memory` in a local crawl, as Scrapy names its memory queue).
    SCHEDULER_ENQUEUED = "scheduler/enqueued/redis", Counter => "requests_enqueued";
    /// Links handed to another spider as tasks on its start key (`to_spider`).
    SCHEDULER_HANDED_OFF = "scheduler/handed_off", Counter => "tasks_handed_off";
    /// Requests taken from the queue (`scheduler/dequeued/memory` in a local crawl).
    SCHEDULER_DEQUEUED = "scheduler/dequeued/redis", Counter => "requests_leased";
    /// Requests moved out of the queue's way to wait in `delayed` for their host's politeness slot (a slow or backed-off host's backlog), each until its slot comes within reach.
    SCHEDULER_PARKED = "scheduler/parked", Counter;
    /// Requests the dupefilter had seen.
    DUPEFILTER_FILTERED = "dupefilter/filtered", Counter => "dupefilter_filtered";
    /// Start entries claimed.
    START_URLS_CLAIMED = "start_urls/claimed_count", Counter;
    /// Leases that expired (a worker died or stalled): back to the queue, or to the dead letters at `max_lease_expiries`.
    LEASE_EXPIRED = "lease/expired_count", Counter;
    /// Requests set aside in the dead-letter key because their lease expired `max_lease_expiries` times: each worker that took them died or vanished holding them (a page that crashes workers), so they go no more to the queue. Counted in `deadletter/count` too.
    LEASE_EXPIRED_DEAD = "lease/expired_dead_count", Counter;
    /// Responses that slowed their host down: a 429, a 5xx with Retry-After, or a 5xx while the host's recent error share is high.
    BACKOFF_SLOWED = "backoff/slowed_count", Counter => "hosts_slowed";
    /// Revisits (pages a `revisit` rule scheduled) put in the queue when due.
    REVISIT_QUEUED = "revisit/queued", Counter => "revisits_queued";
    /// Revisits the server answered 304 Not Modified (nothing parsed).
    REVISIT_NOT_MODIFIED = "revisit/not_modified", Counter => "revisits_not_modified";
    /// Revisits whose page changed since the last visit (by `change`).
    REVISIT_CHANGED = "revisit/changed", Counter => "revisits_changed";
    /// Revisits whose page had not changed (a 304, or the same digest).
    REVISIT_UNCHANGED = "revisit/unchanged", Counter => "revisits_unchanged";
    /// Items of revisits not pushed because the last visit had them (`emit = "changed"`).
    REVISIT_ITEMS_UNCHANGED = "revisit/items_unchanged", Counter;
    /// Scheduled pages dropped from the schedule (a 404 or 410, `revisit_drop_status`).
    REVISIT_DROPPED = "revisit/dropped", Counter => "revisits_dropped";
    /// Requests dropped because their host had its `max_pages_per_host` pages.
    QUOTA_HOST_DROPPED = "quota/host_dropped", Counter => "quota_host_dropped";
    /// Times the cluster reached `max_pages` and stopped leasing (over shards, times a shard's cap of it ran out).
    QUOTA_MAX_PAGES_REACHED = "quota/max_pages_reached", Counter => "quota_max_pages_reached";
    /// Logins that made a new session for the cluster (`[session]`).
    SESSION_LOGIN_COUNT = "session/login_count", Counter => "session_logins";
    /// Logins that failed: refused (the account is retired) or not possible (the site down, the form gone).
    SESSION_LOGIN_FAILED = "session/login_failed_count", Counter => "session_logins_failed";
    /// Accounts that rest after a refused login (a wrong password, "too many attempts"): for the site's Retry-After or `login_cooldown`, then they are tried once more.
    SESSION_ACCOUNT_RESTED = "session/account_rested_count", Counter => "session_accounts_rested";
    /// Accounts retired because their login was refused again after their rest (in a local crawl: at once); they are not used again.
    SESSION_ACCOUNT_RETIRED = "session/account_retired_count", Counter => "session_accounts_retired";
    /// Logins put off because every account left had its `max_logins_per_hour`; the requests waited.
    SESSION_LOGIN_DEFERRED = "session/login_deferred_count", Counter => "session_logins_deferred";
    /// Responses that showed the session logged out (`logged_out`); each request was sent again with the new session, not counted as a page.
    SESSION_LOGGED_OUT = "session/logged_out_count", Counter => "session_logged_out";
    /// Requests sent with the session's cookies (its uses).
    SESSION_REQUEST_COUNT = "session/request_count", Counter;
    /// Responses replayed from the page cache (`httpcache_dir`), not fetched.
    HTTPCACHE_HIT = "httpcache/hit", Counter;
    /// Requests the page cache did not hold (or held expired), fetched.
    HTTPCACHE_MISS = "httpcache/miss", Counter;
    /// Responses stored in the page cache.
    HTTPCACHE_STORE = "httpcache/store", Counter;
    /// The deepest request queued.
    REQUEST_DEPTH_MAX = "request_depth_max", Max;
}

families! {
    /// Requests sent, by method.
    DOWNLOADER_REQUEST_METHOD = "downloader/request_method_count" / "method";
    /// Failed downloads, by kind of error.
    DOWNLOADER_EXCEPTION_TYPE = "downloader/exception_type_count" / "kind" => "download_errors";
    /// Responses, by status.
    DOWNLOADER_RESPONSE_STATUS = "downloader/response_status_count" / "status" => "responses";
    /// Non-2xx responses not extracted, by status.
    HTTPERROR_RESPONSE_IGNORED_STATUS = "httperror/response_ignored_status_count" / "status" => "responses_ignored";
    /// Items dropped, by reason.
    ITEM_DROPPED_REASONS = "item_dropped_reasons_count" / "reason" => "items_dropped";
    /// Pages extracted only in part, by reason: `depth`, `nodes`, `attributes` or `time`.
    EXTRACT_CUT_SHORT_REASON = "extract/cut_short_reason_count" / "reason";
    /// Values fields could not convert, by item type and field (`comment.created`).
    EXTRACT_UNCONVERTED_FIELD = "extract/unconverted_field_count" / "field" => "values_unconverted";
    /// Sources that gave nothing or not all they hold, by kind: `too_large`, `broken_gzip`, `malformed`, `not_a_sitemap`, `not_a_feed` or `not_json`.
    EXTRACT_UNREADABLE_KIND = "extract/unreadable_kind_count" / "kind";
    /// Retries scheduled, by reason.
    RETRY_REASON = "retry/reason_count" / "reason" => "retries";
    /// Redirects not followed, by reason.
    REDIRECT_FAILED = "redirect/failed" / "reason" => "redirects_failed";
}

/// What one increment counts: a stat, or one counter of a family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counted {
    Stat(Stat),
    In(Family, String),
}

impl Counted {
    /// The field in the stats hash.
    pub fn field(&self) -> Cow<'static, str> {
        match self {
            Counted::Stat(s) => Cow::Borrowed(s.name),
            Counted::In(f, value) => Cow::Owned(f.field(value)),
        }
    }
}

/// Stats increments counted for one page (or one step), in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally(Vec<(Counted, i64)>);

impl Tally {
    /// Adds `n` to `stat` (nothing when `n` is 0).
    pub fn add(&mut self, stat: Stat, n: i64) {
        if n != 0 {
            self.0.push((Counted::Stat(stat), n));
        }
    }

    /// Adds `n` to the counter of `family` labelled `value`.
    pub fn add_in(&mut self, family: Family, value: impl Display, n: i64) {
        if n != 0 {
            self.0.push((Counted::In(family, value.to_string()), n));
        }
    }

    /// The increments, as (field, delta).
    pub fn iter(&self) -> impl Iterator<Item = (Cow<'static, str>, i64)> + '_ {
        self.0.iter().map(|(c, n)| (c.field(), *n))
    }

    /// The increments, typed.
    pub fn counted(&self) -> impl Iterator<Item = (&Counted, i64)> + '_ {
        self.0.iter().map(|(c, n)| (c, *n))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The increment of one field, summed (for tests and logs).
    pub fn get(&self, field: &str) -> i64 {
        self.iter()
            .filter(|(f, _)| f == field)
            .map(|(_, n)| n)
            .sum()
    }
}

/// The README's table of stats (kept in sync by a test).
pub fn markdown_table() -> String {
    let mut out = String::from("| stat | kind | meaning | Prometheus |\n|---|---|---|---|\n");
    let metric = |name: Option<&str>, label: Option<String>| match name {
        Some(n) => format!(
            "`crawlworker_{n}_total`{}",
            label.map_or(String::new(), |l| format!(" `{{{l}}}`"))
        ),
        None => String::new(),
    };
    for s in ALL {
        let kind = match s.kind {
            StatKind::Counter => "counter",
            StatKind::Max => "maximum",
            StatKind::Time => "time",
            StatKind::Text => "text",
            StatKind::Seconds => "seconds",
        };
        out.push_str(&format!(
            "| `{}` | {kind} | {} | {} |\n",
            s.name,
            s.help.trim(),
            metric(
                s.metric.map(|m| m.name),
                s.metric
                    .and_then(|m| m.label)
                    .map(|(k, v)| format!("{k}=\"{v}\""))
            )
        ));
    }
    for f in FAMILIES {
        out.push_str(&format!(
            "| `{}/<{}>` | counter | {} | {} |\n",
            f.prefix,
            f.label,
            f.help.trim(),
            metric(f.metric, Some(f.label.to_string()))
        ));
    }
    out
}

/// The Lua table a script reads stat names from: `local STAT = {ID =
/// 'name', …}`, with the stats `script` names as `STAT.ID` only (Redis
/// builds the table on every call of the script: a hundred entries cost
/// microseconds each time).
pub fn lua_table(script: &str) -> String {
    // One pass over the script for the names it uses: scanning it once per
    // stat cost a worker about 20 ms of CPU at start, over its 25 scripts.
    let used: std::collections::HashSet<&str> = script
        .split("STAT.")
        .skip(1)
        .map(|rest| {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect();
    let mut out = String::from("local STAT = {\n");
    for s in ALL.iter().filter(|s| used.contains(s.id)) {
        out.push_str(&format!("  {} = '{}',\n", s.id, s.name));
    }
    out.push_str("}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_families_do_not_shadow_stats() {
        let mut seen = std::collections::HashSet::new();
        for s in ALL {
            assert!(seen.insert(s.name), "{} twice", s.name);
            assert!(!s.help.is_empty());
        }
        for f in FAMILIES {
            assert!(
                ALL.iter()
                    .all(|s| !s.name.starts_with(&format!("{}/", f.prefix))),
                "{} overlaps a stat",
                f.prefix
            );
        }
    }

    #[test]
    fn a_scripts_stat_table_names_exactly_the_stats_it_uses() {
        let table = lua_table("x(STAT.ITEM_SCRAPED_COUNT) y(STAT.ITEM_SCRAPED_COUNTS, STAT.)");
        assert_eq!(
            table,
            "local STAT = {\n  ITEM_SCRAPED_COUNT = 'item_scraped_count',\n}\n"
        );
        assert_eq!(lua_table("no stats here"), "local STAT = {\n}\n");
    }

    #[test]
    fn a_tally_keeps_order_and_skips_zeroes() {
        let mut t = Tally::default();
        t.add(ITEM_SCRAPED_COUNT, 3);
        t.add(ITEM_DROPPED_COUNT, 0);
        t.add_in(DOWNLOADER_RESPONSE_STATUS, 200, 1);
        let v: Vec<(String, i64)> = t.iter().map(|(f, n)| (f.into_owned(), n)).collect();
        assert_eq!(
            v,
            vec![
                ("item_scraped_count".to_string(), 3),
                ("downloader/response_status_count/200".to_string(), 1)
            ]
        );
    }
}
