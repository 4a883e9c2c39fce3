//! The JSON records the crawl keeps in Redis besides requests and items,
//! each defined once and used by whoever writes it and whoever reads it:
//!
//! - [`DeadLetter`]: a malformed entry set aside in `<name>:dead` (written
//!   by the worker, and by the lease script for a queue member without a
//!   request; a test checks the script's record parses as this one);
//! - [`FailedRecord`]: a request that failed for good, in `<name>:failed`
//!   (read back by `push-urls --from-failed`);
//! - [`Heartbeat`]: a live worker, in `<name>:workers` (read by `stats`);
//! - [`ExportDeadLetter`]: an item `crawlworker export` could not store, in
//!   `<name>:items:dead`, whole;
//! - [`ExporterLease`]: a live (or gone) exporter, in
//!   `<name>:items:exporters` (written by the export scripts);
//! - [`RobotsRecord`]: a host's robots.txt fetch, in `<name>:robots`
//!   (with a [`RobotsError`] when the fetch got no answer).

use serde::{Deserialize, Serialize};

use crate::request::Request;

/// Everything a dead letter shows of the entry it sets aside.
pub const PREVIEW_BYTES: usize = 1024;

/// Seconds since the epoch, for records a person reads.
pub fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A malformed entry set aside: what, from where, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// The key it was found in.
    pub key: String,
    /// The entry, cut to [`PREVIEW_BYTES`].
    pub entry: String,
    /// The entry's whole length.
    pub bytes: usize,
    pub reason: String,
    /// When it was set aside (seconds since the epoch).
    pub time: f64,
    /// The whole entry, base64 (it may be binary, as a pickle is), for a
    /// refusal that may be fixed: a scrapy-redis request the spider does
    /// not map yet, brought back by `import-queue --retry-dead`. Only for
    /// entries within the size an entry is read at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original: Option<String>,
}

impl DeadLetter {
    pub fn new(key: &str, entry: &str, reason: &str) -> DeadLetter {
        let mut end = entry.len().min(PREVIEW_BYTES);
        while !entry.is_char_boundary(end) {
            end -= 1;
        }
        DeadLetter {
            key: key.to_string(),
            entry: entry[..end].to_string(),
            bytes: entry.len(),
            reason: crate::wording::cut(reason, PREVIEW_BYTES).into_owned(),
            time: now_secs(),
            original: None,
        }
    }

    /// This letter, keeping `entry` whole (see [`DeadLetter::original`]).
    pub fn keeping(self, entry: &[u8]) -> DeadLetter {
        use base64::Engine;
        DeadLetter {
            original: Some(base64::engine::general_purpose::STANDARD.encode(entry)),
            ..self
        }
    }

    /// The entry the letter kept whole, if any.
    pub fn original_entry(&self) -> Option<Vec<u8>> {
        use base64::Engine;
        let text = self.original.as_deref()?;
        base64::engine::general_purpose::STANDARD.decode(text).ok()
    }

    /// The dead letter of an entry that is not UTF-8 text: its bytes shown
    /// escaped (`caf\xe9`, see [`crate::wording::escaped`]), `bytes` its
    /// length as stored.
    pub fn not_utf8(key: &str, entry: &[u8], what: &str) -> DeadLetter {
        // Escaping at most quadruples a byte: no need to escape more.
        let shown = crate::wording::escaped(&entry[..entry.len().min(PREVIEW_BYTES)]);
        DeadLetter {
            bytes: entry.len(),
            ..DeadLetter::new(key, &shown, &not_utf8_reason(what))
        }
    }
}

/// Why an entry that is not UTF-8 text is set aside (`what`: "start
/// entry", "request record", ...).
pub fn not_utf8_reason(what: &str) -> String {
    format!("{what} is not UTF-8 text (crawlworker reads only UTF-8; written by another tool?)")
}

/// Why a request whose lease expired `n` times is set aside, with the
/// limit `max` it reached (`max_lease_expiries`; the lease scripts write
/// the same words: `requeue_expired` in `scripts/lib/queue.lua`).
pub fn lease_expiries_reason(n: u32, max: u32) -> String {
    format!(
        "its lease expired {n} times (max_lease_expiries = {max}): each worker that took it died or vanished before committing it, as a page that crashes workers makes them; set aside rather than leased again"
    )
}

/// A request that failed for good: it gave no page to extract (retries
/// used up, refused, or answered with a status the rules do not handle,
/// such as 404).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedRecord {
    pub url: String,
    /// For people: what happened.
    pub reason: String,
    /// For machines: the status, the error kind or the redirect problem.
    pub kind: String,
    pub status: Option<u16>,
    pub retry_times: u32,
    /// When it failed (seconds since the epoch).
    pub time: f64,
    /// The spider's rule for its URL, if one matches (records written
    /// before rules were recorded have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The request, to queue it again.
    pub request: Request,
}

impl Heartbeat {
    /// How often a worker records it (more often when its leases are
    /// shorter than three of these).
    pub const EVERY: std::time::Duration = std::time::Duration::from_secs(5);

    /// How long without a heartbeat means a worker is gone: three missed
    /// beats, or its lease time if that is shorter.
    pub fn gone_after(lease: std::time::Duration) -> std::time::Duration {
        (Heartbeat::EVERY * 3).min(lease)
    }

    /// How long a gone worker's last heartbeat is kept (for `stats`) before
    /// the sweep deletes it: an hour, and long after its leases expired.
    pub fn forgotten_after(lease: std::time::Duration) -> std::time::Duration {
        (lease * 2).max(std::time::Duration::from_secs(3600))
    }
}

impl FailedRecord {
    pub fn new(request: &Request, reason: &str, kind: &str, status: Option<u16>) -> FailedRecord {
        FailedRecord {
            url: request.url.clone(),
            reason: crate::wording::cut(reason, PREVIEW_BYTES).into_owned(),
            kind: kind.to_string(),
            status,
            retry_times: request.retry_times,
            time: now_secs(),
            rule: None,
            request: request.clone(),
        }
    }
}

/// A worker's heartbeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub host: String,
    pub pid: u32,
    /// When the worker started (RFC 3339).
    pub started: String,
    /// Pages this worker committed.
    pub pages: u64,
    /// When it last beat (seconds since the epoch).
    pub heartbeat: f64,
    /// The crawlworker version it runs (older workers did not say).
    #[serde(default)]
    pub version: String,
}

/// What one fetch of a host's robots.txt gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RobotsRecord {
    /// HTTP status, or none when the fetch failed on the network.
    pub status: Option<u16>,
    pub body: String,
    /// When it was fetched (seconds since the epoch).
    pub fetched_at: f64,
    /// Why it gave no HTTP answer, when it did not (absent in the records
    /// of older versions): what the requests that waited for it say when
    /// they fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RobotsError>,
}

/// Why a robots.txt fetch gave no HTTP answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RobotsError {
    /// For people: the error, with the robots.txt URL.
    pub reason: String,
    /// For machines: the error kind (`TimeoutError`, `ForbiddenAddress`).
    pub kind: String,
    /// Whether fetching it again may help (a network error), as opposed to
    /// a refusal that will repeat (a forbidden address).
    pub retryable: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_letter_keeps_a_bounded_preview_on_a_char_boundary() {
        let entry = "é".repeat(PREVIEW_BYTES);
        let d = DeadLetter::new("k", &entry, "why");
        assert!(d.entry.len() <= PREVIEW_BYTES);
        assert_eq!(d.bytes, entry.len());
    }

    #[test]
    fn a_non_utf8_dead_letter_shows_its_bytes_escaped_and_counts_them_all() {
        let d = DeadLetter::not_utf8("k", b"caf\xe9", "start entry");
        assert_eq!(d.entry, r"caf\xe9");
        assert_eq!(d.bytes, 4);
        assert!(d.reason.contains("not UTF-8"), "{}", d.reason);
        let huge = vec![0xe9u8; 5 << 20];
        let d = DeadLetter::not_utf8("k", &huge, "start entry");
        assert!(d.entry.len() <= PREVIEW_BYTES);
        assert_eq!(d.bytes, huge.len());
    }
}

/// An item `crawlworker export` could not store, set aside whole (never
/// cut: it is the item's only copy), with why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportDeadLetter {
    /// The item, as it was in Redis.
    pub item: String,
    /// The store's message (a constraint, a value its column refuses), or
    /// why no table fits it.
    pub reason: String,
    /// The table (or file, or command) it was for, if one was found.
    pub table: Option<String>,
    /// The store, without credentials (`postgres://host:port/db`).
    pub store: String,
    /// The exporter that set it aside.
    pub exporter: String,
    /// When (seconds since the epoch).
    pub time: f64,
}

/// An exporter's lease in `<name>:items:exporters`, as the export scripts
/// write it (milliseconds of the Redis clock).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExporterLease {
    /// Alive until then, unless renewed.
    #[serde(default)]
    pub until_ms: Option<f64>,
    /// When the oldest item it has not acknowledged was taken (0: none).
    #[serde(default)]
    pub since_ms: Option<f64>,
    /// Found gone then: its items were taken back.
    #[serde(default)]
    pub lost_ms: Option<f64>,
}
