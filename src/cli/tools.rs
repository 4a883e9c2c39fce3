//! The Redis tools around a crawl: `push-urls`, `pause`/`resume` and
//! `flush`, and opening a spider's Redis for every tool (`stats` and
//! `items` have modules of their own).

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use super::{load_spider, output, InvalidInput, RedisArgs};
use crate::frontier::shards::ShardPlace;
use crate::frontier::{KeyGroup, RedisFrontier};
use crate::request::Request;
use crate::settings::Overrides;
use crate::spider::{Spider, StartKind};
use crate::wording::plural;

/// Loads the spider (with the configuration `redis` names) and connects to
/// its Redis, failing at once with what to do when Redis does not answer.
/// For a sharded spider this is shard 0, which holds the start key, the
/// workers and the session (see [`open_shards`] for every shard).
pub(super) async fn open(
    path: &Path,
    redis: &RedisArgs,
) -> anyhow::Result<(Spider, RedisFrontier)> {
    let (spider, mut shards) = open_shards(path, redis).await?;
    let zero = shards.swap_remove(0);
    Ok((spider, zero))
}

/// [`open`], with a frontier for each of the spider's shards (one for a
/// spider that is not sharded), shard 0's first.
pub(super) async fn open_shards(
    path: &Path,
    redis: &RedisArgs,
) -> anyhow::Result<(Spider, Vec<RedisFrontier>)> {
    let config = super::load_config(&redis.config)?;
    let cli = Overrides {
        redis_url: redis.redis.clone(),
        ..Overrides::default()
    };
    let spider = load_spider(&config, path, &cli)?;
    let url = &spider.settings.redis_url;
    if url.is_cluster() {
        crate::frontier::connection::check_spider_slots(&spider.shards, &spider.handoffs)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    let target = crate::frontier::RedisTarget::open(url)
        .map_err(|e| anyhow::anyhow!("invalid Redis address {url}: {e}"))?;
    let count = spider.shards.len();
    let mut shards = Vec::with_capacity(count);
    for (index, keys) in spider.shards.iter().enumerate() {
        let options = crate::frontier::Options {
            keys: keys.clone(),
            ..spider.frontier_options("tool")
        };
        let frontier = RedisFrontier::connect(&target, options)
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot reach Redis at {url}: {}; start redis-server there, or give the address with --redis or REDIS_URL",
                    e.said()
                )
            })?;
        shards.push(if count > 1 {
            frontier.in_shard(ShardPlace { index, count })
        } else {
            frontier
        });
    }
    Ok((spider, shards))
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
    let (spider, shards) = open_shards(path, redis).await?;
    let name = &spider.name;
    // Every shard's leases read its own control hash.
    let mut changed = false;
    for frontier in &shards {
        changed |= if pause {
            frontier.pause().await?
        } else {
            frontier.resume().await?
        };
    }
    println!(
        "{}",
        match (pause, changed) {
            (true, true) => format!("paused {name}: workers hand back the requests not yet downloading and lease nothing until `crawlworker resume`; downloads in progress finish"),
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
    // Before the work it hands on exists: a spider it feeds, started
    // alone, then waits for it (see frontier::pipeline).
    frontier.record_relations().await?;
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
    let (_, shards) = open_shards(path, redis).await?;
    shards[0].record_relations().await?;
    // A sharded spider's failed requests go back to the queue of the shard
    // they failed on: their host's.
    for frontier in &shards {
        requeue_failed_of(frontier).await?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Re-queues the failed requests of one frontier (one shard's).
async fn requeue_failed_of(frontier: &RedisFrontier) -> anyhow::Result<()> {
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
    Ok(())
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
    let (spider, shards) = open_shards(path, redis).await?;
    let keys: Vec<String> = shards
        .iter()
        .flat_map(|f| f.keys_in_groups(groups))
        .collect();
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
    let mut deleted: Vec<(String, u64)> = Vec::new();
    for frontier in &shards {
        deleted.extend(
            frontier
                .flush(groups)
                .await?
                .into_iter()
                .filter(|(_, n)| *n > 0),
        );
    }
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
        // The fingerprint's home is its host's shard.
        let frontier = &shards[crate::frontier::shards::shard_of(&url, shards.len())];
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
