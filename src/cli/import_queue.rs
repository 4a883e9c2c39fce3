//! `crawlworker import-queue`: take over the request queue a scrapy-redis
//! crawl left. The queue is set aside, then converted a window at a time
//! (see `frontier::takeover`): each pickle read as plain data and mapped
//! by the spider's `[scrapy_redis]` table (see `crate::scrapy_redis`)
//! becomes a queued request, or a dead letter with its reason. Stopped and
//! run again, it goes on where it was. `--dry-run` reads the whole queue
//! and says what would happen, changing nothing. A refused entry's dead
//! letter keeps it whole; `--retry-dead` brings back those the spider maps
//! now, and imports them.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

use super::{output, tools, RedisArgs};
use crate::frontier::takeover::{ForeignQueue, Import, Where};
use crate::frontier::{DeadLetter, RedisFrontier, ShardedFrontier};
use crate::scrapy_redis::{convert, Converted, Takeover};
use crate::wording::plural;

/// Entries read and converted in one step.
const WINDOW: usize = 500;

/// What an import did, or a dry run would do.
#[derive(Debug, Default)]
struct Tally {
    queued: u64,
    dead: u64,
    /// Why entries were set aside, with how many each.
    reasons: BTreeMap<String, u64>,
}

pub async fn import_queue(
    path: &Path,
    redis: &RedisArgs,
    dry_run: bool,
    retry_dead: bool,
) -> anyhow::Result<ExitCode> {
    let (spider, mut shards) = tools::open_shards(path, redis).await?;
    super::onto_shards::onto_shards(&spider, &mut shards, dry_run).await?;
    let crawl = ShardedFrontier::new(shards);
    let frontier = crawl.shard(0);
    let takeover = Takeover { spider: &spider };
    if retry_dead {
        retry_refused(frontier, &takeover).await?;
    }
    let tally = if dry_run {
        survey(frontier, &takeover).await?
    } else {
        let (kind, moved) = frontier.stage_scrapy_queue().await?;
        let Some(kind) = kind else {
            output::line(format_args!(
                "nothing to import: {} holds no scrapy-redis queue",
                frontier.keys.requests
            ))?;
            return Ok(ExitCode::SUCCESS);
        };
        if moved > 0 {
            eprintln!(
                "set aside {} of scrapy-redis's queue from {} in {}; converting",
                plural(moved as usize, "request", "requests"),
                frontier.keys.requests,
                frontier.keys.scrapy_queue
            );
        }
        let tally = import(&crawl, &takeover, kind).await?;
        if moved == 0 && tally.queued + tally.dead == 0 {
            output::line(format_args!(
                "nothing to import: no scrapy-redis request is left in {} or {}",
                frontier.keys.requests, frontier.keys.scrapy_queue
            ))?;
            return Ok(ExitCode::SUCCESS);
        }
        tally
    };
    report(&crawl, &tally, dry_run)?;
    Ok(if tally.dead > 0 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// Converts what was set aside until nothing is left.
async fn import(
    crawl: &ShardedFrontier,
    takeover: &Takeover<'_>,
    kind: ForeignQueue,
) -> anyhow::Result<Tally> {
    let frontier = crawl.shard(0);
    let mut tally = Tally::default();
    let mut said = 0;
    loop {
        let entries = frontier.scrapy_entries(kind, WINDOW).await?;
        if entries.is_empty() {
            return Ok(tally);
        }
        let mut reasons = Vec::new();
        let imports: Vec<Import> = entries
            .into_iter()
            .map(|entry| {
                let outcome = letter_or_request(frontier, &entry, takeover);
                if let Err(letter) = &outcome {
                    reasons.push(letter.reason.clone());
                }
                Import { entry, outcome }
            })
            .collect();
        let imported = crawl.import_scrapy_entries(kind, imports).await?;
        let dead = imported.dead;
        tally.queued += imported.queued + imported.handed;
        tally.dead += dead;
        // Another import may have taken some: reasons are counted as seen.
        for reason in reasons.into_iter().take(dead as usize) {
            *tally.reasons.entry(reason).or_default() += 1;
        }
        if tally.queued / 100_000 > said {
            said = tally.queued / 100_000;
            eprintln!("… {} imported so far", tally.queued);
        }
    }
}

/// Brings back the refused imports the spider maps now, among the entries
/// set aside (the import that follows queues them); says how many, and
/// how many are still refused.
async fn retry_refused(frontier: &RedisFrontier, takeover: &Takeover<'_>) -> anyhow::Result<()> {
    let (mut back, mut still) = (0usize, 0usize);
    for (stored, _, entry) in frontier.refused_imports().await? {
        match convert(&entry, takeover) {
            Converted::Request(_) => {
                if frontier.retry_refused_import(&stored, &entry).await? {
                    back += 1;
                }
            }
            Converted::Refused { .. } => still += 1,
        }
    }
    eprintln!(
        "brought back {} the spider maps now from {}{}",
        plural(back, "refused entry", "refused entries"),
        frontier.keys.dead,
        if still > 0 {
            format!(
                "; {} still refused stay there",
                plural(still, "entry", "entries")
            )
        } else {
            String::new()
        }
    );
    Ok(())
}

/// A dry run: every entry where it is, set aside or still in the queue.
async fn survey(frontier: &RedisFrontier, takeover: &Takeover<'_>) -> anyhow::Result<Tally> {
    let mut tally = Tally::default();
    for at in [Where::SetAside, Where::InQueue] {
        let mut from = 0;
        loop {
            let (entries, covered) = frontier.peek_scrapy_entries(at, from, WINDOW).await?;
            if covered == 0 {
                break;
            }
            from += covered;
            for entry in entries {
                match letter_or_request(frontier, &entry, takeover) {
                    Ok(_) => tally.queued += 1,
                    Err(letter) => {
                        tally.dead += 1;
                        *tally.reasons.entry(letter.reason).or_default() += 1;
                    }
                }
            }
        }
    }
    Ok(tally)
}

/// What an entry becomes: its request, or its dead letter.
fn letter_or_request(
    frontier: &RedisFrontier,
    entry: &[u8],
    takeover: &Takeover<'_>,
) -> Result<crate::request::Request, DeadLetter> {
    match convert(entry, takeover) {
        Converted::Request(r) => Ok(*r),
        Converted::Refused { reason, shown } => {
            let letter = DeadLetter {
                bytes: entry.len(),
                ..DeadLetter::new(&frontier.keys.requests, &shown, &reason)
            };
            // Kept whole when it was read at all: a refusal the spider may
            // fix (`--retry-dead`).
            let readable = entry.len() <= crate::scrapy_redis::pickle::REQUEST_LIMITS.max_bytes;
            Err(if readable {
                letter.keeping(entry)
            } else {
                letter
            })
        }
    }
}

/// The summary: how many were (or would be) queued, how many set aside
/// and why, the most frequent reasons first.
fn report(crawl: &ShardedFrontier, tally: &Tally, dry_run: bool) -> anyhow::Result<()> {
    let frontier = crawl.shard(0);
    let others = match crawl.shards().len() {
        1 => String::new(),
        n => format!(" and the queues of its other {} shards", n - 1),
    };
    let (queue, set_aside) = if dry_run {
        ("would queue", "would set aside")
    } else {
        ("queued", "set aside")
    };
    output::line(format_args!(
        "{queue} {} scrapy-redis queued, in {}{others}{}",
        plural(tally.queued as usize, "request", "requests"),
        frontier.keys.requests,
        if dry_run {
            " (dry run: nothing changed)"
        } else {
            ""
        }
    ))?;
    if tally.dead == 0 {
        return Ok(());
    }
    output::line(format_args!(
        "{set_aside} {} in {}:",
        plural(tally.dead as usize, "entry", "entries"),
        frontier.keys.dead
    ))?;
    let mut reasons: Vec<(&String, &u64)> = tally.reasons.iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(a.1));
    for (reason, n) in reasons.iter().take(10) {
        output::line(format_args!("  {n} × {reason}"))?;
    }
    if reasons.len() > 10 {
        output::line(format_args!(
            "  … and {} other reasons (crawlworker stats shows the dead letters)",
            reasons.len() - 10
        ))?;
    }
    Ok(())
}
