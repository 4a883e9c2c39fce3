//! `crawlworker items`: the scraped items as JSON Lines on standard output,
//! oldest first, so nobody needs `redis-cli` to get them out. `--pop`
//! removes what it prints (each item reaches one consumer; an item popped
//! but not printed, because the reader went away, is put back), `--follow`
//! keeps printing new items until interrupted. With `[items] sink =
//! "stream"` it prints the stream's items (the `item` field of each entry)
//! and refuses `--pop`: a stream's consumers read it through consumer
//! groups. A sharded spider's items are read from every shard in turn.

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
    let (spider, shards) = tools::open_shards(path, redis).await?;
    let zero = &shards[0];
    for frontier in &shards {
        if let Some(found) = frontier.sink_mismatch().await? {
            anyhow::bail!(
                "{}",
                crate::worker::sink_mismatch_message(&spider, frontier, &found)
            );
        }
    }
    if zero.sink() == ItemSink::Stream && read.pop {
        anyhow::bail!(
            "spider `{}` sends its items to the stream `{}` ([items] sink = \"stream\"), and --pop works with the list sink only: read the stream with a consumer group (redis-cli XREADGROUP GROUP <group> <consumer> COUNT 100 STREAMS {} '>' , then XACK), or print its items without --pop",
            spider.name,
            zero.items_key(),
            zero.items_key(),
        );
    }
    // From here Ctrl-C ends the loop between batches, so nothing popped is
    // lost half-printed.
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    let mut printed = 0u64;
    // Where each shard's items were read up to.
    let mut cursors = vec![Cursor::default(); shards.len()];
    loop {
        // A round over the shards (one for a spider that is not sharded).
        let mut round = 0;
        for (frontier, cursor) in shards.iter().zip(&mut cursors) {
            let want = match read.limit {
                Some(limit) if printed >= limit => return Ok(ExitCode::SUCCESS),
                Some(limit) => BATCH.min((limit - printed) as usize),
                None => BATCH,
            };
            let batch = next_batch(frontier, cursor, read, want).await?;
            for (i, item) in batch.iter().enumerate() {
                if let Err(e) = output::line(item) {
                    if read.pop {
                        frontier.unpop_items(&batch[i..]).await?;
                    }
                    return Err(e.into());
                }
            }
            printed += batch.len() as u64;
            round += batch.len();
        }
        if round == 0 {
            if !read.follow {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(FOLLOW_EVERY) => continue,
                _ = &mut interrupted => break,
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Where one items key was read up to.
#[derive(Debug, Clone, Default)]
struct Cursor {
    /// The list's next index (when items are not popped).
    from: usize,
    /// The stream's last entry read.
    after: Option<String>,
}

/// The next items of `frontier`'s items key, at most `want`, from
/// `cursor` on (which moves past them).
async fn next_batch(
    frontier: &crate::frontier::RedisFrontier,
    cursor: &mut Cursor,
    read: Read,
    want: usize,
) -> anyhow::Result<Vec<String>> {
    if frontier.sink() == ItemSink::Stream {
        loop {
            let (items, last) = frontier
                .stream_items_after(cursor.after.as_deref(), want)
                .await?;
            let only_foreign = items.is_empty() && last.is_some();
            if last.is_some() {
                cursor.after = last;
            }
            // Only entries crawlworker did not write: read on.
            if !only_foreign {
                return Ok(items);
            }
        }
    }
    let batch = if read.pop {
        frontier.pop_items(want).await?
    } else {
        frontier.items_from(cursor.from, want).await?
    };
    cursor.from += batch.len();
    Ok(batch)
}
