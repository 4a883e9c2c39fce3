//! A sharded spider's `import-queue`, before the queue: brings the crawl
//! it takes over onto the spider's shards (see
//! `frontier::redis::shard_count`). A scrapy-redis crawl's fingerprints
//! do not tell their host, so shard 0's are copied to every other shard,
//! a window at a time; then the shard count is recorded, after which
//! workers may start. Stopped part-way, it is run again and copies again
//! (a copy adds nothing twice); until it is done, workers refuse the
//! crawl. A crawl already recorded over the spider's shards needs none.

use crate::frontier::admin::DupefilterMismatch;
use crate::frontier::redis::shard_count::{Recorder, ShardCount, SpreadKind, SpreadWindow};
use crate::frontier::RedisFrontier;
use crate::spider::Spider;
use crate::wording::plural;
use crate::worker::{shard_count_mismatch, unsharded_crawl_message};

/// Refuses what no import takes over (a count recorded otherwise, or an
/// unsharded crawlworker crawl's requests); unless the crawl is recorded
/// over the spider's shards already, copies shard 0's fingerprints to the
/// others and records the count. A dry run says what it would copy.
pub(super) async fn onto_shards(
    spider: &Spider,
    shards: &mut [RedisFrontier],
    dry_run: bool,
) -> anyhow::Result<()> {
    if shards.len() <= 1 || !needs_spreading(spider, &shards[0], Recorder::Probe).await? {
        return Ok(());
    }
    let zero = &shards[0];
    let (kind, held) = zero.fingerprints_to_spread().await?;
    if let SpreadKind::Other(what) = kind {
        anyhow::bail!(not_a_set(spider, zero, &what));
    }
    if dry_run {
        eprintln!(
            "would copy {} of {} to the dupefilters of the other {} shards (dry run: nothing changed)",
            plural(held as usize, "fingerprint", "fingerprints"),
            zero.keys.dupefilter,
            shards.len() - 1
        );
        return Ok(());
    }
    for shard in shards.iter_mut() {
        shard.prepare_dupefilter().await.map_err(|e| match e {
            DupefilterMismatch::Redis(e) => anyhow::Error::from(e),
            mismatch => anyhow::anyhow!("spider `{}`: {mismatch}", spider.name),
        })?;
    }
    let copied = spread(spider, shards).await?;
    if needs_spreading(spider, &shards[0], Recorder::Takeover).await? {
        anyhow::bail!(
            "the shard count of spider `{}` could not be recorded in {}; run import-queue again",
            spider.name,
            shards[0].keys.control
        );
    }
    eprintln!(
        "copied {} of {} to the other {} shards; the crawl is over {} shards from now on (recorded in {})",
        plural(copied as usize, "fingerprint", "fingerprints"),
        shards[0].keys.dupefilter,
        shards.len() - 1,
        shards.len(),
        shards[0].keys.control
    );
    Ok(())
}

/// Whether the crawl still has to be brought onto the shards (none is
/// recorded), as `by` records; refuses what no import takes over.
async fn needs_spreading(
    spider: &Spider,
    zero: &RedisFrontier,
    by: Recorder,
) -> anyhow::Result<bool> {
    let shards = spider.shards.len();
    match zero.record_shards(shards, by).await? {
        ShardCount::Recorded(n) if n == shards as u64 => Ok(false),
        ShardCount::Recorded(n) => {
            anyhow::bail!(shard_count_mismatch(spider, &zero.keys.control, n))
        }
        ShardCount::Unsharded(key) => anyhow::bail!(
            "{}\n`import-queue` cannot take over that crawl: `{key}` holds the requests, leases, retries or revisits of a crawlworker crawl that began without shards, and an import hands on only a scrapy-redis queue. Let it drain with `[keys] shards` removed (`crawlworker run {} --until-drained`), then run import-queue again",
            unsharded_crawl_message(spider, &key),
            spider.source.display()
        ),
        ShardCount::Free => Ok(true),
    }
}

/// Copies shard 0's fingerprints to every other shard; returns how many
/// were read (a fingerprint read twice by the scan counts twice).
async fn spread(spider: &Spider, shards: &[RedisFrontier]) -> anyhow::Result<u64> {
    let (zero, others) = (&shards[0], &shards[1..]);
    let (mut cursor, mut copied, mut said) = (0, 0u64, 0u64);
    loop {
        let (fingerprints, next) = match zero.spread_window(cursor).await? {
            SpreadWindow::Read(fingerprints, next) => (fingerprints, next),
            SpreadWindow::Unreadable(kind) => anyhow::bail!(not_a_set(spider, zero, &kind)),
        };
        let window: Vec<&str> = fingerprints.iter().map(String::as_str).collect();
        for shard in others {
            shard.mark_seen(&window).await?;
        }
        copied += window.len() as u64;
        if copied / 1_000_000 > said {
            said = copied / 1_000_000;
            eprintln!("… {copied} fingerprints copied so far");
        }
        if next == 0 {
            return Ok(copied);
        }
        cursor = next;
    }
}

/// Why a dupefilter that cannot be read out (`what` it is) cannot be
/// spread.
fn not_a_set(spider: &Spider, zero: &RedisFrontier, what: &str) -> String {
    format!(
        "spider `{}`: the dupefilter {} is a {what}, whose fingerprints cannot be read out and copied to the other shards; only an `exact` (scrapy-redis's) or `compact` dupefilter can be spread. Start a new crawl, or remove `[keys] shards`",
        spider.name, zero.keys.dupefilter
    )
}
