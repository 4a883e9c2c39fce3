//! `crawlworker stats`: a crawl's progress read from Redis in one look (the
//! queues, the dupefilter, live and gone workers, the stats hash), printed
//! as text or as one JSON object. `stats --watch` is [`super::watch`]'s.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use serde::Serialize;
use serde_json::Value;

use super::tools::open_shards;
use super::{output, RedisArgs};
use crate::downloader::session::view::SessionView;
use crate::frontier::admin::DupefilterInfo;
use crate::frontier::redis::export::ExportBacklog;
use crate::frontier::redis::sharded;
use crate::frontier::{now_secs, Heartbeat, QueueStatus, RedisFrontier};
use crate::spider::Spider;
use crate::wording::count;

/// A worker as `stats` shows it.
#[derive(Debug, Serialize)]
struct LiveWorker {
    id: String,
    #[serde(flatten)]
    beat: Heartbeat,
    seen_seconds_ago: f64,
    /// In-flight pages it holds leases on.
    leased: u64,
}

/// A worker that stopped beating (killed, or cut off from Redis) while
/// holding leases, or whose heartbeat is older than a lease.
#[derive(Debug, Serialize)]
struct GoneWorker {
    id: String,
    /// Seconds since its last heartbeat, if it left one.
    seen_seconds_ago: Option<f64>,
    /// Pages waiting for its leases to expire.
    leased: u64,
    /// When the last of them is back in the queue, at the latest.
    back_within_seconds: f64,
}

/// What `stats --json` prints.
#[derive(Debug, Serialize)]
struct StatsReport<'a> {
    spider: &'a str,
    redis: String,
    queues: QueueStatus,
    dupefilter: DupefilterInfo,
    /// Key kind → key name.
    keys: BTreeMap<&'static str, &'a str>,
    workers: Vec<LiveWorker>,
    gone: Vec<GoneWorker>,
    /// The stats hash, numbers as numbers.
    stats: serde_json::Map<String, Value>,
    /// The login session, for a spider with `[session]` (never its
    /// cookies).
    #[serde(skip_serializing_if = "Option::is_none")]
    session: Option<SessionView>,
    /// `crawlworker export`'s backlog, once an exporter has run.
    #[serde(skip_serializing_if = "Option::is_none")]
    export: Option<ExportBacklog>,
}

/// What `stats` read from Redis.
struct Reading {
    status: QueueStatus,
    dupefilter: DupefilterInfo,
    /// The stats hash, sorted by field.
    stats: Vec<(String, String)>,
    workers: Vec<LiveWorker>,
    gone: Vec<GoneWorker>,
    session: Option<SessionView>,
    export: Option<ExportBacklog>,
}

pub async fn stats(path: &Path, redis: &RedisArgs, as_json: bool) -> anyhow::Result<ExitCode> {
    let (spider, shards) = open_shards(path, redis).await?;
    let reading = read(&spider, &shards).await?;
    let frontier = &shards[0];
    if as_json {
        let report = json_report(&spider, frontier, reading);
        output::line(serde_json::to_string_pretty(&report)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    output::print(render(&spider, frontier, &reading))?;
    Ok(ExitCode::SUCCESS)
}

/// Rounds seconds to a tenth.
fn round(s: f64) -> f64 {
    (s * 10.0).round() / 10.0
}

/// What `stats` shows, read from each of the spider's shards (one for a
/// spider that is not sharded) and summed: a sharded crawl reads as one.
async fn read(spider: &Spider, shards: &[RedisFrontier]) -> anyhow::Result<Reading> {
    let frontier = &shards[0];
    let sharded::CrawlReading {
        status,
        mut stats,
        mut leases,
    } = sharded::read_crawl(shards).await?;
    let mut dupefilters = Vec::new();
    for shard in shards {
        dupefilters.push(shard.dupefilter_info().await?);
    }
    let dupefilter = sharded::sum_dupefilters(dupefilters);
    stats.sort();
    let now = now_secs();
    // A worker that missed three heartbeats (or a lease's time) is gone:
    // its leases are lost, or will be soon.
    let live_within = Heartbeat::gone_after(spider.settings.lease_timeout).as_secs_f64();
    let (mut workers, mut gone) = (Vec::new(), Vec::new());
    for (id, beat) in frontier.workers().await? {
        let age = (now - beat.heartbeat).max(0.0);
        let held = leases.remove(&id);
        if age <= live_within {
            workers.push(LiveWorker {
                leased: held.map_or(0, |h| h.count),
                id,
                beat,
                seen_seconds_ago: round(age),
            });
        } else if let Some(held) = held {
            gone.push(GoneWorker {
                id,
                seen_seconds_ago: Some(round(age)),
                leased: held.count,
                back_within_seconds: round(held.expire_within.as_secs_f64()),
            });
        }
    }
    // Leases of workers that left no heartbeat at all.
    gone.extend(leases.into_values().map(|held| GoneWorker {
        id: held.worker,
        seen_seconds_ago: None,
        leased: held.count,
        back_within_seconds: round(held.expire_within.as_secs_f64()),
    }));
    let session = match &spider.session {
        Some(config) => Some(read_session(frontier, config, &stats, now).await?),
        None => None,
    };
    let export = read_export(shards).await?;
    Ok(Reading {
        status,
        dupefilter,
        stats,
        workers,
        gone,
        session,
        export,
    })
}

/// The export backlog summed over the shards, once an exporter has
/// registered (read for the default consumer group).
async fn read_export(shards: &[RedisFrontier]) -> anyhow::Result<Option<ExportBacklog>> {
    Ok(crate::export::backlog(shards, crate::export::DEFAULT_GROUP).await?)
}

fn render_export(o: &mut String, b: &ExportBacklog) {
    let oldest = b.oldest_unacked_ms.map_or(String::new(), |ms| {
        format!(" (the oldest for {:.1} s)", ms as f64 / 1000.0)
    });
    *o += &format!(
        "
export
  waiting        {:>10}
  unacknowledged {:>10}{oldest}
  exporters      {:>10}
",
        b.waiting, b.unacked, b.exporters
    );
}

async fn read_session(
    frontier: &RedisFrontier,
    config: &crate::spider::session::Session,
    stats: &[(String, String)],
    now: f64,
) -> anyhow::Result<SessionView> {
    let record = crate::frontier::Backend::session(frontier).await?;
    let uses = stats
        .iter()
        .find(|(f, _)| f == crate::stats::SESSION_REQUEST_COUNT.name)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    Ok(SessionView::of(config, record, uses, now))
}

fn render_session(o: &mut String, session: &SessionView) {
    let age = session.age_seconds.map_or("none yet".to_string(), |a| {
        format!(
            "logged in {} ago",
            crate::wording::duration(std::time::Duration::from_secs_f64(a))
        )
    });
    *o +=
        &format!(
        "\nsession: {age} as `{}`{}\n  uses {}  logins {}  generation {}  accounts retired {}\n",
        session.account,
        if session.stale { " (logged out; a worker logs in again)" } else { "" },
        session.uses,
        session.logins,
        session.generation,
        session.accounts_retired,
    );
    let states: Vec<String> = session
        .accounts
        .iter()
        .map(|a| match a.rests_for_seconds {
            Some(s) => format!(
                "{} resting ({} left)",
                a.name,
                crate::wording::duration(std::time::Duration::from_secs_f64(s))
            ),
            None => format!("{} {}", a.name, a.state),
        })
        .collect();
    *o += &format!("  accounts: {}\n", states.join(", "));
    for a in &session.accounts {
        if let Some(why) = &a.reason {
            *o += &format!("    {} {}: {why}\n", a.name, a.state);
        }
    }
}

fn json_report<'a>(
    spider: &'a Spider,
    frontier: &'a RedisFrontier,
    reading: Reading,
) -> StatsReport<'a> {
    StatsReport {
        spider: &spider.name,
        redis: spider.settings.redis_url.to_string(),
        queues: reading.status,
        dupefilter: reading.dupefilter,
        keys: frontier
            .keys
            .all()
            .map(|(kind, key)| (kind.name(), key))
            .collect(),
        workers: reading.workers,
        gone: reading.gone,
        session: reading.session,
        export: reading.export,
        stats: reading
            .stats
            .into_iter()
            .map(|(f, v)| {
                let value = v.parse::<i64>().map_or(Value::String(v), Value::from);
                (f, value)
            })
            .collect(),
    }
}

/// The text `stats` prints: what holds the crawl back, the crawl itself,
/// the queues, the dupefilter, the workers and the stats hash.
fn render(spider: &Spider, frontier: &RedisFrontier, reading: &Reading) -> String {
    let mut o = String::new();
    o += &format!("spider {} at {}\n", spider.name, spider.settings.redis_url);
    if spider.shards.len() > 1 {
        let tags: Vec<&str> = spider
            .shards
            .iter()
            .map(|k| crate::frontier::connection::hash_tag(&k.requests))
            .collect();
        o += &format!(
            "over {} shards ({}), read and summed as one crawl\n",
            tags.len(),
            tags.join(", ")
        );
    }
    render_holds(&mut o, spider, frontier, &reading.status);
    render_crawl(&mut o, &reading.stats, reading.workers.is_empty());
    render_queues(&mut o, frontier, &reading.status);
    render_upstreams(&mut o, &reading.status);
    render_dupefilter(&mut o, &reading.dupefilter);
    render_workers(&mut o, &reading.workers, &reading.gone);
    if let Some(session) = &reading.session {
        render_session(&mut o, session);
    }
    if let Some(export) = &reading.export {
        render_export(&mut o, export);
    }
    o += "\nstats\n";
    for (f, v) in &reading.stats {
        o += &format!("  {f:<48} {v}\n");
    }
    o
}

/// Why no worker leases a request, if none does.
fn render_holds(o: &mut String, spider: &Spider, frontier: &RedisFrontier, status: &QueueStatus) {
    if status.paused {
        *o += "  PAUSED: no worker leases a request until `crawlworker resume`\n";
    }
    if status.page_limit_reached && spider.settings.max_pages > 0 {
        *o += &format!(
            "  max_pages ({}) reached: no worker leases a request; the rest stays queued\n",
            spider.settings.max_pages
        );
    }
    if status.items_backlog_full {
        *o += &format!(
            "  ITEM BACKLOG FULL: consumers of {} lag by {} items or more (items_stream_max_backlog); no worker leases a request until they catch up\n",
            frontier.items_key(),
            spider.settings.items_stream_max_backlog,
        );
    }
}

/// The crawl itself: when it started, what it did, how it ended.
fn render_crawl(o: &mut String, stats: &[(String, String)], no_workers: bool) {
    let stat = |name: &str| {
        stats
            .iter()
            .find(|(f, _)| f == name)
            .map(|(_, v)| v.as_str())
    };
    let Some(started) = stat(crate::stats::START_TIME.name) else {
        return;
    };
    *o += &format!(
        "\ncrawl\n  started        {started}\n  pages          {}  items {}\n",
        stat(crate::stats::RESPONSE_RECEIVED_COUNT.name).unwrap_or("0"),
        stat(crate::stats::ITEM_SCRAPED_COUNT.name).unwrap_or("0"),
    );
    // When no worker runs: how the last one stopped.
    if let Some(at) = stat(crate::stats::FINISH_TIME.name).filter(|_| no_workers) {
        let reason = stat(crate::stats::FINISH_REASON.name).unwrap_or("");
        *o += &match reason {
            "finished" => format!("  drained        {at}\n"),
            "closespider_pagecount" => {
                format!("  max_pages      reached; last worker stopped {at}\n")
            }
            _ => format!("  last stop      {at} ({reason})\n"),
        };
    }
}

fn render_queues(o: &mut String, frontier: &RedisFrontier, status: &QueueStatus) {
    let k = &frontier.keys;
    *o += "\nqueues\n";
    for (label, n, key) in [
        ("start entries", status.start, k.start_urls.as_str()),
        ("queued", status.queued, &k.requests),
        ("in flight", status.inflight, &k.inflight),
        ("dead letters", status.dead, &k.dead),
        ("failed", status.failed, &k.failed),
        ("delayed", status.delayed, &k.delayed),
        ("scheduled", status.scheduled, &k.schedule),
        ("overdue", status.overdue, &k.schedule_due),
        ("dupefilter", status.dupefilter, &k.dupefilter),
        ("items", status.items, frontier.items_key()),
    ] {
        *o += &format!("  {label:<14} {n:>10}  {key}\n");
    }
}

/// The spiders that hand work to this one, and whether they still may
/// (`--until-drained` waits for them).
fn render_upstreams(o: &mut String, status: &QueueStatus) {
    if status.upstreams.is_empty() {
        return;
    }
    *o += "\nupstreams (spiders that hand work to this one)\n";
    for u in &status.upstreams {
        let through = u
            .hands_to
            .as_ref()
            .map_or(String::new(), |to| format!(" (through {to})"));
        let state = if u.producing { "producing" } else { "finished" };
        *o += &format!("  {:<14} {state:<10} {}{through}\n", u.spider, u.describe());
    }
}

fn render_dupefilter(o: &mut String, dupefilter: &DupefilterInfo) {
    *o += &format!(
        "\ndupefilter ({})\n  {:<14} {:>10}  {} of Redis memory ({:.1} B per entry)\n",
        dupefilter.mode,
        "entries",
        dupefilter.entries,
        bytesize::ByteSize(dupefilter.bytes).display().iec(),
        dupefilter.bytes as f64 / dupefilter.entries.max(1) as f64,
    );
    if dupefilter.mode == "bloom" && dupefilter.capacity > 0 {
        // Filters before the newest are full; the newest takes new entries.
        let filled = dupefilter.newest_entries as f64 / dupefilter.capacity as f64;
        *o += &format!(
            "  Redis bitmaps: {}; the newest holds {} of its {} entries ({:.0} % full)\n",
            count(dupefilter.filters.max(1) as usize, "filter"),
            dupefilter.newest_entries,
            dupefilter.capacity,
            filled * 100.0
        );
        if filled > 1.0 {
            *o += "  warning: the newest Bloom filter holds more than it was sized for: its next filter did not fit in Redis's memory (the workers said why), so its false-positive rate rises above dupefilter_error_rate. Give Redis more memory (maxmemory): the workers make the next filter as soon as it fits.\n";
        } else if filled >= 0.9 {
            *o += "  warning: the Bloom filter is nearly full. When it is, the next filter of its chain follows it, with twice its entries at half its error rate, made ahead of need by the workers within Redis's memory (no filter is overfilled while it fits, and the chain's false-positive rate stays under twice dupefilter_error_rate; every lookup reads one more bitmap). To size it for the crawl instead, raise dupefilter_capacity and start a new filter (flush --dupefilter; every URL is then crawled again).\n";
        }
    }
}

fn render_workers(o: &mut String, workers: &[LiveWorker], gone: &[GoneWorker]) {
    *o += &format!("\nworkers ({} live", workers.len());
    if !gone.is_empty() {
        *o += &format!(", {} gone", gone.len());
    }
    *o += ")\n";
    for w in workers {
        *o += &format!(
            "  {}  pages {}  leased {}  started {}  seen {}s ago\n",
            w.id, w.beat.pages, w.leased, w.beat.started, w.seen_seconds_ago
        );
    }
    for g in gone {
        let seen = g.seen_seconds_ago.map_or("no heartbeat".to_string(), |s| {
            format!("last seen {s}s ago")
        });
        *o += &format!(
            "  {}  gone ({seen}): {} waiting for its expired leases (back in the queue within {}s)\n",
            g.id,
            count(g.leased as usize, "page"),
            g.back_within_seconds
        );
    }
}
