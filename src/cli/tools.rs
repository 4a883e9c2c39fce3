//! The Redis tools around a crawl: `push-urls`, `flush` and `stats`
//! (`items` has a module of its own).

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;
use serde_json::Value;

use super::{load_spider, output, InvalidInput, RedisArgs};
use crate::frontier::admin::{DupefilterInfo, HeldLeases};
use crate::frontier::{now_secs, Heartbeat, KeyGroup, QueueStatus, RedisFrontier};
use crate::request::Request;
use crate::settings::Overrides;
use crate::spider::{Spider, StartKind};
use crate::wording::{count, plural};

/// Loads the spider (with the configuration `redis` names) and connects to
/// its Redis, failing at once with what to do when Redis does not answer.
pub(super) async fn open(
    path: &Path,
    redis: &RedisArgs,
) -> anyhow::Result<(Spider, RedisFrontier)> {
    let config = super::load_config(&redis.config)?;
    let cli = Overrides {
        redis_url: redis.redis.clone(),
        ..Overrides::default()
    };
    let spider = load_spider(&config, path, &cli)?;
    let url = &spider.settings.redis_url;
    if url.is_cluster() {
        crate::frontier::connection::check_one_slot(&spider.keys, &spider.handoffs)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    let target = crate::frontier::RedisTarget::open(url)
        .map_err(|e| anyhow::anyhow!("invalid Redis address {url}: {e}"))?;
    let options = spider.frontier_options("tool");
    let frontier = RedisFrontier::connect(&target, options)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot reach Redis at {url}: {}; start redis-server there, or give the address with --redis or REDIS_URL",
                e.cause
            )
        })?;
    Ok((spider, frontier))
}

/// What `push-urls` pushes, and how.
#[derive(Debug, Clone)]
pub struct Push {
    /// Entries given as arguments.
    pub entries: Vec<String>,
    /// Or a file of them ("-": standard input).
    pub file: Option<PathBuf>,
    /// Their score in a zset start key.
    pub priority: Option<f64>,
    /// Push only while the start key holds fewer.
    pub max_queue: Option<u64>,
}

/// `crawlworker pause` (`pause`) and `resume`.
pub async fn pause(path: &Path, redis: &RedisArgs, pause: bool) -> anyhow::Result<ExitCode> {
    let (spider, frontier) = open(path, redis).await?;
    let name = &spider.name;
    let changed = if pause {
        frontier.pause().await?
    } else {
        frontier.resume().await?
    };
    println!(
        "{}",
        match (pause, changed) {
            (true, true) => format!("paused {name}: no worker leases a request until `crawlworker resume` (pages in flight finish)"),
            (true, false) => format!("{name} was already paused"),
            (false, true) => format!("resumed {name}: workers lease again"),
            (false, false) => format!("{name} was not paused"),
        }
    );
    Ok(ExitCode::SUCCESS)
}

pub async fn push_urls(path: &Path, redis: &RedisArgs, push: Push) -> anyhow::Result<ExitCode> {
    if !push.entries.is_empty() && push.file.is_some() {
        return Err(
            InvalidInput("give entries as arguments or with --file, not both".into()).into(),
        );
    }
    let lines = entry_lines(push.entries, push.file.as_deref())?;
    let (spider, frontier) = open(path, redis).await?;
    if push.priority.is_some() && spider.start.kind != StartKind::Zset {
        return Err(InvalidInput(format!(
            "--priority scores entries of a zset start key, but {} is a {}: leave --priority out, or set [start] type = \"zset\"",
            frontier.keys.start_urls,
            spider.start.kind.as_str()
        ))
        .into());
    }
    let (good, bad) = valid_entries(&spider, lines, "not pushed");
    let pushed = frontier
        .push_start(&good, push.priority.unwrap_or(0.0), push.max_queue)
        .await? as usize;
    let left = &good[pushed..];
    eprintln!(
        "pushed {} to {} ({}){}{}",
        plural(pushed, "entry", "entries"),
        frontier.keys.start_urls,
        spider.start.kind.as_str(),
        if left.is_empty() {
            String::new()
        } else {
            format!(
                "; {} left over (the start key holds --max-queue entries); printed on stdout",
                left.len()
            )
        },
        if bad > 0 {
            format!(
                "; {} not pushed",
                plural(bad, "invalid entry", "invalid entries")
            )
        } else {
            String::new()
        },
    );
    for entry in left {
        output::line(entry)?;
    }
    Ok(if bad > 0 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// One line of entries: its text, or its bytes when it is not UTF-8 text
/// (refused by [`valid_entries`], the other lines go on).
pub(super) type Line = std::result::Result<String, Vec<u8>>;

/// Start entries given as arguments, or else read from `file` ("-" or
/// none: standard input), one per line, each with where it came from as
/// messages name it: `argument 2`, `tasks.txt:4`, `<stdin>:4` (lines
/// count from 1).
pub(super) fn entry_lines(
    entries: Vec<String>,
    file: Option<&Path>,
) -> anyhow::Result<Vec<(String, Line)>> {
    if !entries.is_empty() {
        return Ok(entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| (format!("argument {}", i + 1), Ok(e)))
            .collect());
    }
    let (name, reader): (String, Box<dyn BufRead>) = match file {
        Some(p) if p.as_os_str() != "-" => (
            p.display().to_string(),
            Box::new(std::io::BufReader::new(std::fs::File::open(p).map_err(
                |e| InvalidInput(format!("cannot read entries from {}: {e}", p.display())),
            )?)),
        ),
        _ => ("<stdin>".to_string(), Box::new(std::io::stdin().lock())),
    };
    let mut out = Vec::new();
    // Split as bytes, as `lines` does (`\n` or `\r\n`), so that a line
    // that is not UTF-8 text costs that line only.
    for (i, line) in reader.split(b'\n').enumerate() {
        let mut line = line.with_context(|| format!("cannot read {name}:{}", i + 1))?;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        let line = String::from_utf8(line).map_err(|e| e.into_bytes());
        out.push((format!("{name}:{}", i + 1), line));
    }
    Ok(out)
}

/// The entries `spider` can start from, trimmed, without blank lines and
/// `#` comments; each other one is reported with its place and counted.
/// `refused` says what happens to a bad one ("not pushed").
pub(super) fn valid_entries(
    spider: &Spider,
    lines: Vec<(String, Line)>,
    refused: &str,
) -> (Vec<String>, usize) {
    let mut good = Vec::new();
    let mut bad = 0;
    for (place, entry) in lines {
        let entry = match entry {
            Ok(entry) => entry.trim().to_string(),
            Err(bytes) => {
                bad += 1;
                eprintln!(
                    "{place}: {refused}: not UTF-8 text: {}",
                    crate::wording::cut(&crate::wording::escaped(&bytes), 400)
                );
                continue;
            }
        };
        if entry.is_empty() || entry.starts_with('#') {
            continue;
        }
        match spider.start_request(&entry) {
            Ok(_) => good.push(entry),
            Err(e) => {
                bad += 1;
                eprintln!(
                    "{place}: {refused}: {}",
                    crate::wording::cut(&e.to_string(), 400)
                );
            }
        }
    }
    (good, bad)
}

/// `push-urls --from-failed`: failed requests back into the queue.
pub async fn requeue_failed(path: &Path, redis: &RedisArgs) -> anyhow::Result<ExitCode> {
    let (_, frontier) = open(path, redis).await?;
    let (mut moved, mut unreadable) = (0u64, 0usize);
    loop {
        // Unreadable entries stay at the head of the list; read past them.
        let entries = frontier.failed_entries(unreadable, 500).await?;
        if entries.is_empty() {
            break;
        }
        let mut batch = Vec::new();
        for entry in entries {
            match entry.record {
                Some(record) => batch.push((
                    entry.raw,
                    Request {
                        retry_times: 0,
                        redirect_urls: Vec::new(),
                        dont_filter: true,
                        ..record.request
                    },
                )),
                None => {
                    unreadable += 1;
                    eprintln!(
                        "not re-queued (not a failed-request record): {}",
                        crate::worker::preview(&entry.raw)
                    );
                }
            }
        }
        if batch.is_empty() {
            continue;
        }
        let n = frontier.requeue_failed(&batch).await?;
        moved += n;
        if n == 0 {
            break;
        }
    }
    eprintln!(
        "re-queued {moved} failed request{} from {}{}",
        if moved == 1 { "" } else { "s" },
        frontier.keys.failed,
        if unreadable > 0 {
            format!("; {unreadable} unreadable entries left there")
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}

pub async fn flush(
    path: &Path,
    redis: &RedisArgs,
    groups: &[KeyGroup],
    fingerprint: Option<String>,
    yes: bool,
) -> anyhow::Result<ExitCode> {
    if groups.is_empty() && fingerprint.is_none() {
        return Err(InvalidInput("say what to delete: --start-urls, --requests, --dupefilter, --items, --stats, --dead, --politeness, --all, or --fingerprint URL".into()).into());
    }
    let (spider, frontier) = open(path, redis).await?;
    let keys = frontier.keys.in_groups(groups);
    if !yes && !keys.is_empty() {
        if !std::io::stdin().is_terminal() {
            return Err(InvalidInput(
                "flush deletes crawl state; pass --yes to confirm when not on a terminal".into(),
            )
            .into());
        }
        eprint!(
            "Delete {} of spider `{}` in {}? [y/N] ",
            keys.join(", "),
            spider.name,
            spider.settings.redis_url
        );
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            eprintln!("nothing deleted");
            return Ok(ExitCode::SUCCESS);
        }
    }
    // A key that does not exist held nothing: only the deleted are named.
    let deleted: Vec<(String, u64)> = frontier
        .flush(groups)
        .await?
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect();
    for (key, n) in &deleted {
        output::line(format_args!(
            "deleted {key} ({})",
            plural(*n as usize, "entry", "entries")
        ))?;
    }
    if deleted.is_empty() && !groups.is_empty() {
        output::line("nothing to delete: none of those keys exists")?;
    }
    if let Some(url) = fingerprint {
        let fp = Request::get(&url).fingerprint();
        let dupefilter = &frontier.keys.dupefilter;
        match frontier.forget_fingerprint(&fp).await? {
            Some(true) => output::line(format_args!(
                "removed fingerprint {fp} of {url} from {dupefilter}"
            ))?,
            Some(false) => output::line(format_args!(
                "fingerprint {fp} of {url} was not in {dupefilter}"
            ))?,
            None => {
                return Err(InvalidInput(format!(
                    "{dupefilter} is a Bloom filter, which cannot forget one URL; push the URL with dont_filter, or flush --dupefilter to forget every URL"
                ))
                .into())
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

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
}

pub async fn stats(path: &Path, redis: &RedisArgs, as_json: bool) -> anyhow::Result<ExitCode> {
    let (spider, frontier) = open(path, redis).await?;
    let status = frontier.status().await?;
    let dupefilter = frontier.dupefilter_info().await?;
    let mut stats = frontier.stats().await?;
    stats.sort();
    let now = now_secs();
    // A worker that missed three heartbeats (or a lease's time) is gone:
    // its leases are lost, or will be soon.
    let live_within = Heartbeat::gone_after(spider.settings.lease_timeout).as_secs_f64();
    let mut leases: BTreeMap<String, HeldLeases> = frontier
        .leases()
        .await?
        .into_iter()
        .map(|l| (l.worker.clone(), l))
        .collect();
    let round = |s: f64| (s * 10.0).round() / 10.0;
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
    let k = &frontier.keys;
    if as_json {
        let report = StatsReport {
            spider: &spider.name,
            redis: spider.settings.redis_url.to_string(),
            queues: status,
            dupefilter: dupefilter.clone(),
            keys: k.all().map(|(kind, key)| (kind.name(), key)).collect(),
            workers,
            gone,
            stats: stats
                .into_iter()
                .map(|(f, v)| {
                    let value = v.parse::<i64>().map_or(Value::String(v), Value::from);
                    (f, value)
                })
                .collect(),
        };
        output::line(serde_json::to_string_pretty(&report)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut o = String::new();
    o += &format!("spider {} at {}\n", spider.name, spider.settings.redis_url);
    if status.paused {
        o += "  PAUSED: no worker leases a request until `crawlworker resume`\n";
    }
    if status.page_limit_reached && spider.settings.max_pages > 0 {
        o += &format!(
            "  max_pages ({}) reached: no worker leases a request; the rest stays queued\n",
            spider.settings.max_pages
        );
    }
    if status.items_backlog_full {
        o += &format!(
            "  ITEM BACKLOG FULL: consumers of {} lag by {} items or more (items_stream_max_backlog); no worker leases a request until they catch up\n",
            frontier.items_key(),
            spider.settings.items_stream_max_backlog,
        );
    }
    // The crawl itself: when it started, what it did, how it ended.
    let stat = |name: &str| {
        stats
            .iter()
            .find(|(f, _)| f == name)
            .map(|(_, v)| v.as_str())
    };
    if let Some(started) = stat(crate::stats::START_TIME.name) {
        o += &format!(
            "\ncrawl\n  started        {started}\n  pages          {}  items {}\n",
            stat(crate::stats::RESPONSE_RECEIVED_COUNT.name).unwrap_or("0"),
            stat(crate::stats::ITEM_SCRAPED_COUNT.name).unwrap_or("0"),
        );
        // When no worker runs: how the last one stopped.
        if let Some(at) = stat(crate::stats::FINISH_TIME.name).filter(|_| workers.is_empty()) {
            let reason = stat(crate::stats::FINISH_REASON.name).unwrap_or("");
            o += &match reason {
                "finished" => format!("  drained        {at}\n"),
                "closespider_pagecount" => {
                    format!("  max_pages      reached; last worker stopped {at}\n")
                }
                _ => format!("  last stop      {at} ({reason})\n"),
            };
        }
    }
    o += "\nqueues\n";
    for (label, n, key) in [
        ("start entries", status.start, k.start_urls.as_str()),
        ("queued", status.queued, &k.requests),
        ("in flight", status.inflight, &k.inflight),
        ("dead letters", status.dead, &k.dead),
        ("failed", status.failed, &k.failed),
        ("retry waiting", status.delayed, &k.delayed),
        ("scheduled", status.scheduled, &k.schedule),
        ("overdue", status.overdue, &k.schedule_due),
        ("dupefilter", status.dupefilter, &k.dupefilter),
        ("items", status.items, frontier.items_key()),
    ] {
        o += &format!("  {label:<14} {n:>10}  {key}\n");
    }
    o += &format!(
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
        o += &format!(
            "  Redis bitmaps: {}; the newest holds {} of its {} entries ({:.0} % full)\n",
            crate::wording::count(dupefilter.filters.max(1) as usize, "filter"),
            dupefilter.newest_entries,
            dupefilter.capacity,
            filled * 100.0
        );
        if filled >= 0.9 {
            o += "  warning: the Bloom filter is nearly full. When it is, the next filter of its chain follows it, with twice its entries at half its error rate, allocated whole at once (no filter is overfilled, and the chain's false-positive rate stays under twice dupefilter_error_rate; every lookup reads one more bitmap). To size it for the crawl instead, raise dupefilter_capacity and start a new filter (flush --dupefilter; every URL is then crawled again).\n";
        }
    }
    o += &format!("\nworkers ({} live", workers.len());
    if !gone.is_empty() {
        o += &format!(", {} gone", gone.len());
    }
    o += ")\n";
    for w in &workers {
        o += &format!(
            "  {}  pages {}  leased {}  started {}  seen {}s ago\n",
            w.id, w.beat.pages, w.leased, w.beat.started, w.seen_seconds_ago
        );
    }
    for g in &gone {
        let seen = g.seen_seconds_ago.map_or("no heartbeat".to_string(), |s| {
            format!("last seen {s}s ago")
        });
        o += &format!(
            "  {}  gone ({seen}): {} waiting for its expired leases (back in the queue within {}s)\n",
            g.id,
            count(g.leased as usize, "page"),
            g.back_within_seconds
        );
    }
    o += "\nstats\n";
    for (f, v) in &stats {
        o += &format!("  {f:<48} {v}\n");
    }
    output::print(o)?;
    Ok(ExitCode::SUCCESS)
}
