//! `crawlworker items`: the scraped items as JSON Lines on standard output,
//! oldest first, so nobody needs `redis-cli` to get them out. `--pop`
//! removes what it prints (each item reaches one consumer; an item popped
//! but not printed, because the reader went away, is put back), `--follow`
//! keeps printing new items until interrupted.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use super::{output, tools, RedisArgs};

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
    let (_, frontier) = tools::open(path, redis).await?;
    // From here Ctrl-C ends the loop between batches, so nothing popped is
    // lost half-printed.
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    let (mut printed, mut from) = (0u64, 0usize);
    loop {
        let want = match read.limit {
            Some(limit) if printed >= limit => break,
            Some(limit) => BATCH.min((limit - printed) as usize),
            None => BATCH,
        };
        let batch = if read.pop {
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
