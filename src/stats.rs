//! Every stat the crawl counts, defined once: its name in the Redis stats
//! hash (Scrapy's, so an existing scrapy-redis dashboard reads them), how it
//! changes and what it means.
//!
//! The worker counts a page's stats into a [`Tally`] that travels with the
//! page to its commit. The frontier's Lua scripts count the rest (enqueued,
//! filtered, leases expired, …) through a table generated from [`ALL`]
//! (`STAT.SCHEDULER_ENQUEUED` in Lua is [`SCHEDULER_ENQUEUED`] here), so no
//! script spells a stat name; a test keeps it that way. Metrics will be fed
//! from the same list.

use std::borrow::Cow;
use std::fmt::Display;

/// How a stat changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// One stat of the hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The identifier scripts use (`STAT.<id>`).
    pub id: &'static str,
    /// The field in the stats hash.
    pub name: &'static str,
    pub kind: StatKind,
    pub help: &'static str,
}

/// A family of counters with one label (`downloader/response_status_count/200`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// The field prefix, without the trailing `/`.
    pub prefix: &'static str,
    /// What the last part of the field is (`status`, `method`, …).
    pub label: &'static str,
    pub help: &'static str,
}

impl Family {
    /// The field for one label value.
    pub fn field(&self, value: impl Display) -> String {
        format!("{}/{value}", self.prefix)
    }
}

macro_rules! stats {
    ($( $(#[doc = $doc:literal])+ $id:ident = $name:literal, $kind:ident; )+) => {
        $(
            $(#[doc = $doc])+
            pub const $id: Stat = Stat {
                id: stringify!($id),
                name: $name,
                kind: StatKind::$kind,
                help: concat!($($doc),+),
            };
        )+
        /// Every single stat.
        pub const ALL: &[Stat] = &[$($id),+];
    };
}

macro_rules! families {
    ($( $(#[doc = $doc:literal])+ $id:ident = $prefix:literal / $label:literal; )+) => {
        $(
            $(#[doc = $doc])+
            pub const $id: Family = Family {
                prefix: $prefix,
                label: $label,
                help: concat!($($doc),+),
            };
        )+
        /// Every family of labelled counters.
        pub const FAMILIES: &[Family] = &[$($id),+];
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
    DOWNLOADER_REQUEST_COUNT = "downloader/request_count", Counter;
    /// Downloads that failed on the network (DNS, connection, timeout, size).
    DOWNLOADER_EXCEPTION_COUNT = "downloader/exception_count", Counter;
    /// Responses received.
    DOWNLOADER_RESPONSE_COUNT = "downloader/response_count", Counter;
    /// Bytes of response bodies, decoded.
    DOWNLOADER_RESPONSE_BYTES = "downloader/response_bytes", Counter;
    /// Responses received (Scrapy counts them twice, so do we).
    RESPONSE_RECEIVED_COUNT = "response_received_count", Counter;
    /// Non-2xx responses not extracted (Scrapy's HttpError).
    HTTPERROR_RESPONSE_IGNORED_COUNT = "httperror/response_ignored_count", Counter;
    /// Items pushed.
    ITEM_SCRAPED_COUNT = "item_scraped_count", Counter;
    /// Items dropped (a required field was missing).
    ITEM_DROPPED_COUNT = "item_dropped_count", Counter;
    /// Links or redirects to hosts outside `allowed_domains`.
    OFFSITE_FILTERED = "offsite/filtered", Counter;
    /// Links that are not http(s).
    FOLLOW_FILTERED_SCHEME = "follow/filtered/scheme", Counter;
    /// Links that only point into the same page.
    FOLLOW_FILTERED_FRAGMENT = "follow/filtered/fragment", Counter;
    /// Links or redirects matching a deny pattern.
    FOLLOW_FILTERED_DENIED = "follow/filtered/denied", Counter;
    /// Links deeper than the depth limit.
    FOLLOW_FILTERED_DEPTH = "follow/filtered/depth", Counter;
    /// Links past the last page a task asks for.
    FOLLOW_FILTERED_PAGINATION = "follow/filtered/pagination", Counter;
    /// Requests robots.txt forbids.
    ROBOTSTXT_FORBIDDEN = "robotstxt/forbidden", Counter;
    /// Malformed entries set aside in the dead-letter key.
    DEADLETTER_COUNT = "deadletter/count", Counter;
    /// Retries scheduled.
    RETRY_COUNT = "retry/count", Counter;
    /// Requests that failed after their last retry.
    RETRY_MAX_REACHED = "retry/max_reached", Counter;
    /// Requests recorded in the failed key.
    FAILED_COUNT = "failed/count", Counter;
    /// Failed requests moved back into the queue (`push-urls --from-failed`).
    FAILED_REQUEUED_COUNT = "failed/requeued_count", Counter;
    /// Redirects followed.
    REDIRECT_COUNT = "redirect/count", Counter;
    /// Follow-up requests over the size bound, not queued.
    SCHEDULER_REQUEST_TOO_LARGE = "scheduler/request_too_large", Counter;
    /// Requests put in the queue.
    SCHEDULER_ENQUEUED = "scheduler/enqueued/redis", Counter;
    /// Requests taken from the queue.
    SCHEDULER_DEQUEUED = "scheduler/dequeued/redis", Counter;
    /// Requests the dupefilter had seen.
    DUPEFILTER_FILTERED = "dupefilter/filtered", Counter;
    /// Start entries claimed.
    START_URLS_CLAIMED = "start_urls/claimed_count", Counter;
    /// Leases that expired (a worker died or stalled) and went back to the queue.
    LEASE_EXPIRED = "lease/expired_count", Counter;
    /// Hosts slowed down after a 429 or 503.
    BACKOFF_SLOWED = "backoff/slowed_count", Counter;
    /// The deepest request queued.
    REQUEST_DEPTH_MAX = "request_depth_max", Max;
}

families! {
    /// Requests sent, by method.
    DOWNLOADER_REQUEST_METHOD = "downloader/request_method_count" / "method";
    /// Failed downloads, by kind of error.
    DOWNLOADER_EXCEPTION_TYPE = "downloader/exception_type_count" / "kind";
    /// Responses, by status.
    DOWNLOADER_RESPONSE_STATUS = "downloader/response_status_count" / "status";
    /// Non-2xx responses not extracted, by status.
    HTTPERROR_RESPONSE_IGNORED_STATUS = "httperror/response_ignored_status_count" / "status";
    /// Items dropped, by reason.
    ITEM_DROPPED_REASONS = "item_dropped_reasons_count" / "reason";
    /// Retries scheduled, by reason.
    RETRY_REASON = "retry/reason_count" / "reason";
    /// Redirects not followed, by reason.
    REDIRECT_FAILED = "redirect/failed" / "reason";
}

/// Stats increments counted for one page (or one step), in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally(Vec<(Cow<'static, str>, i64)>);

impl Tally {
    /// Adds `n` to `stat` (nothing when `n` is 0).
    pub fn add(&mut self, stat: Stat, n: i64) {
        if n != 0 {
            self.0.push((Cow::Borrowed(stat.name), n));
        }
    }

    /// Adds `n` to the counter of `family` labelled `value`.
    pub fn add_in(&mut self, family: Family, value: impl Display, n: i64) {
        if n != 0 {
            self.0.push((Cow::Owned(family.field(value)), n));
        }
    }

    /// The increments, as (field, delta).
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> + '_ {
        self.0.iter().map(|(f, n)| (f.as_ref(), *n))
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
            .filter(|(f, _)| *f == field)
            .map(|(_, n)| n)
            .sum()
    }
}

/// The Lua table scripts read stat names from: `local STAT = {ID = 'name', …}`.
pub fn lua_table() -> String {
    let mut out = String::from("local STAT = {\n");
    for s in ALL {
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
    fn a_tally_keeps_order_and_skips_zeroes() {
        let mut t = Tally::default();
        t.add(ITEM_SCRAPED_COUNT, 3);
        t.add(ITEM_DROPPED_COUNT, 0);
        t.add_in(DOWNLOADER_RESPONSE_STATUS, 200, 1);
        let v: Vec<_> = t.iter().collect();
        assert_eq!(
            v,
            vec![
                ("item_scraped_count", 3),
                ("downloader/response_status_count/200", 1)
            ]
        );
    }
}
