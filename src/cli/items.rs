//! `crawlworker items`: the scraped items as JSON Lines on standard output,
//! oldest first, so nobody needs `redis-cli` to get them out. `--pop`
//! removes what it prints (each item reaches one consumer; an item popped
//! but not printed, because the reader went away, is put back), `--follow`
//! keeps printing new items until interrupted. With `[items] sink =
//! "stream"` it prints the stream's items (the `item` field of each entry)
//! and refuses `--pop`: a stream's consumers read it through consumer
//! groups.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use super::{output, tools, RedisArgs};
use crate::frontier::ItemSink;

/// Items read in one round trip.
const BATCH: usize = 500;

/// How often `--follow` looks for new items.
const FOLLOW_EVERY: Duration = Duration::from_millis(500);

/// How `items` reads.
#[derive(Debug, Clone, Copy)]
pub struct Read {
    /// At most this many.
    pub limit: Option<u64>,
    /// Keep waiting for new items.
    pub follow: bool,
    /// Remove what is printed.
    pub pop: bool,
}

pub async fn items(path: &Path, redis: &RedisArgs, read: Read) -> anyhow::Result<ExitCode> {
    let (spider, frontier) = tools::open(path, redis).await?;
    if let Some(found) = frontier.sink_mismatch().await? {
        anyhow::bail!(
            "{}",
            crate::worker::sink_mismatch_message(&spider, &frontier, &found)
        );
    }
    if frontier.sink() == ItemSink::Stream && read.pop {
        anyhow::bail!(
            "spider `{}` sends its items to the stream `{}` ([items] sink = \"stream\"), and --pop works with the list sink only: read the stream with a consumer group (redis-cli XREADGROUP GROUP <group> <consumer> COUNT 100 STREAMS {} '>' , then XACK), or print its items without --pop",
            spider.name,
            frontier.items_key(),
            frontier.items_key(),
        );
    }
    // From here Ctrl-C ends the loop between batches, so nothing popped is
    // lost half-printed.
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    let (mut printed, mut from) = (0u64, 0usize);
    // Where a stream was read up to (its last entry's id).
    let mut after: Option<String> = None;
    loop {
        let want = match read.limit {
            Some(limit) if printed >= limit => break,
            Some(limit) => BATCH.min((limit - printed) as usize),
            None => BATCH,
        };
        let batch = if frontier.sink() == ItemSink::Stream {
            let (items, last) = frontier.stream_items_after(after.as_deref(), want).await?;
            if items.is_empty() && last.is_some() {
                // Only entries crawlworker did not write: read on.
                after = last;
                continue;
            }
            if last.is_some() {
                after = last;
            }
            items
        } else if read.pop {
            frontier.pop_items(want).await?
        } else {
            frontier.items_from(from, want).await?
        };
        if batch.is_empty() {
            if !read.follow {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(FOLLOW_EVERY) => continue,
                _ = &mut interrupted => break,
            }
        }
        for (i, item) in batch.iter().enumerate() {
            if let Err(e) = output::line(item) {
                if read.pop {
                    frontier.unpop_items(&batch[i..]).await?;
                }
                return Err(e.into());
            }
        }
        printed += batch.len() as u64;
        from += batch.len();
    }
    Ok(ExitCode::SUCCESS)
}
