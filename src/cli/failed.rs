//! `crawlworker failed`: the requests of a spider that failed for good
//! (retries used up, refused, a redirect not followed, or answered with a
//! status no rule handles, such as 404), read from its failed key, so
//! "which threads were deleted" needs no `redis-cli`. The newest `-n`
//! are printed, oldest first: time, kind (the status, or the error's
//! kind), rule, URL and reason, or with `--json` each record as a JSON
//! line. `--kind` keeps one kind. It only reads; `push-urls --from-failed`
//! queues them again.

use std::path::Path;
use std::process::ExitCode;

use super::{output, tools, RedisArgs};
use crate::frontier::{FailedRecord, RedisFrontier};

/// Entries read in one round trip, from the newest back.
const BATCH: usize = 500;

/// What `failed` prints.
#[derive(Debug, Clone)]
pub struct List {
    /// The newest this many (that match `kind`).
    pub limit: usize,
    /// Only records of this kind (`404`, `timeout`, …).
    pub kind: Option<String>,
    /// JSON Lines instead of text.
    pub json: bool,
}

pub async fn failed(path: &Path, redis: &RedisArgs, list: List) -> anyhow::Result<ExitCode> {
    let (spider, shards) = tools::open_shards(path, redis).await?;
    // A sharded spider's failures are on its shards: the newest of each,
    // merged by time.
    let (mut total, mut records) = (0, Vec::new());
    for shard in &shards {
        let failed = shard.status().await?.failed as usize;
        records.extend(newest(shard, failed, &list).await?);
        total += failed;
    }
    let records = crate::frontier::redis::sharded::newest(records, list.limit, |r| r.time);
    let frontier = &shards[0];
    if list.json {
        for r in &records {
            output::line(serde_json::to_string(r)?)?;
        }
    } else {
        output::print(table(&records))?;
    }
    let key = match shards.len() {
        1 => frontier.keys.failed.clone(),
        n => format!(
            "{} and the failed keys of its other {} shards",
            frontier.keys.failed,
            n - 1
        ),
    };
    eprintln!("{}", footer(&spider.name, &key, total, &records, &list));
    Ok(ExitCode::SUCCESS)
}

/// What the listing was, on standard error (standard output stays the
/// records alone).
fn footer(spider: &str, key: &str, total: usize, records: &[FailedRecord], list: &List) -> String {
    if total == 0 {
        return format!("nothing failed for spider `{spider}` ({key} is empty)");
    }
    let kind = list
        .kind
        .as_deref()
        .map(|k| format!(" of kind {k}"))
        .unwrap_or_default();
    let more = if records.len() == list.limit && total > list.limit {
        format!("; -n {} shows more", list.limit * 10)
    } else {
        String::new()
    };
    format!(
        "{}{kind}, newest last, of {total} in {key}{more}",
        crate::wording::count(records.len(), "failed request"),
    )
}

/// The newest `list.limit` records of `list.kind`, oldest first.
async fn newest(
    frontier: &RedisFrontier,
    total: usize,
    list: &List,
) -> anyhow::Result<Vec<FailedRecord>> {
    let mut found = Vec::new();
    let mut end = total;
    while end > 0 && found.len() < list.limit {
        let start = end.saturating_sub(BATCH);
        let entries = frontier.failed_entries(start, end - start).await?;
        for entry in entries.into_iter().rev() {
            let Some(record) = entry.record else {
                continue;
            };
            if list.kind.as_deref().is_none_or(|k| record.kind == k) {
                found.push(record);
                if found.len() == list.limit {
                    break;
                }
            }
        }
        end = start;
    }
    found.reverse();
    Ok(found)
}

/// One line per record: time, kind, rule, URL, reason.
fn table(records: &[FailedRecord]) -> String {
    let kind_width = records
        .iter()
        .map(|r| r.kind.len())
        .chain([4])
        .max()
        .unwrap_or(4);
    let rule_width = records
        .iter()
        .map(|r| r.rule.as_deref().map_or(1, str::len))
        .chain([4])
        .max()
        .unwrap_or(4);
    let mut out = String::new();
    if !records.is_empty() {
        out += &format!(
            "{:<20}  {:<kind_width$}  {:<rule_width$}  URL  REASON\n",
            "TIME", "KIND", "RULE"
        );
    }
    for r in records {
        out += &format!(
            "{:<20}  {:<kind_width$}  {:<rule_width$}  {}  {}\n",
            time(r.time),
            r.kind,
            r.rule.as_deref().unwrap_or("-"),
            r.url,
            r.reason,
        );
    }
    out
}

/// Seconds since the epoch in RFC 3339, to the second.
fn time(secs: f64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(secs.max(0.0));
    humantime::format_rfc3339_seconds(at).to_string()
}
