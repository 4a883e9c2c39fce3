//! A sharded spider's crawl and the crawl it may begin from (see
//! `docs/scaling.md`, "One spider over N nodes"). The shard count is
//! recorded once, in shard 0's control hash (`scripts/record_shards.lua`),
//! and never over what a crawl that began without shards left in shard
//! 0's keys: a sharded spider looks for a host's requests and fingerprints
//! on its host's shard only, so it would crawl again what that crawl saw.
//!
//! `crawlworker import-queue` takes a scrapy-redis crawl over all the
//! same: its fingerprints, which do not tell their host, are copied from
//! shard 0's set to every other shard ([`RedisFrontier::spread_window`]),
//! then the count is recorded, then the queue is imported with each
//! request handed to its host's shard.

use super::protocol::RecordShardsArgs;
use super::{err, RedisFrontier, Result, SCRIPTS};

/// What shard 0's control hash says of the crawl's shard count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardCount {
    /// The crawl runs over this many shards (recorded now or before).
    Recorded(u64),
    /// None is recorded and nothing is in the way of recording one (a
    /// probe, which records nothing).
    Free,
    /// None is recorded, and this key of shard 0 holds what a crawl that
    /// began without shards left.
    Unsharded(String),
}

/// Who records the shard count (`A.mode` of `record_shards.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorder {
    /// A worker starting: not over any request or fingerprint of an
    /// unsharded crawl.
    Join,
    /// `import-queue` before it spreads the fingerprints: records nothing,
    /// and finds only what no import takes over (a crawlworker crawl's
    /// requests, leases, retries and revisits).
    Probe,
    /// `import-queue` once the fingerprints are spread.
    Takeover,
}

impl Recorder {
    fn as_str(self) -> &'static str {
        match self {
            Recorder::Join => "join",
            Recorder::Probe => "probe",
            Recorder::Takeover => "takeover",
        }
    }
}

/// One window of a dupefilter read out to spread it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpreadWindow {
    /// The fingerprints, and the cursor to go on from (0: the end).
    Read(Vec<String>, u64),
    /// The dupefilter is not a set but this type of key.
    NotASet(String),
}

/// How many fingerprints one step of a spread reads and copies.
pub const SPREAD_WINDOW: usize = 2000;

impl RedisFrontier {
    /// Records in this (shard 0's) control hash that the crawl runs over
    /// `shards` shards, as `by` may (see [`Recorder`]), unless a number is
    /// recorded already. A spider of one shard only reads what is
    /// recorded.
    pub async fn record_shards(&self, shards: usize, by: Recorder) -> Result<ShardCount> {
        let control = &self.keys.control;
        if shards <= 1 {
            let recorded: Option<u64> = redis::cmd("HGET")
                .arg(control)
                .arg("shards")
                .query_async(&mut self.conn.clone())
                .await
                .map_err(err("read the shard count in", control))?;
            return Ok(recorded.map_or(ShardCount::Free, ShardCount::Recorded));
        }
        let args = RecordShardsArgs {
            shards: shards.to_string(),
            mode: by.as_str().to_string(),
        };
        let (recorded, in_the_way): (u64, String) = SCRIPTS
            .record_shards
            .call(&self.keys, self.sink.sink, args)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("record the shard count in", control))?;
        Ok(match (recorded, in_the_way) {
            (0, key) if key.is_empty() => ShardCount::Free,
            (0, key) => ShardCount::Unsharded(key),
            (n, _) => ShardCount::Recorded(n),
        })
    }

    /// One window of this shard's dupefilter, read from `cursor` (`SSCAN`;
    /// 0 starts). A dupefilter that is not a set of fingerprints (a mode
    /// other than `exact`) cannot be read out: its type is said instead.
    pub async fn spread_window(&self, cursor: u64) -> Result<SpreadWindow> {
        let key = &self.keys.dupefilter;
        let kind: String = redis::cmd("TYPE")
            .arg(key)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read the type of", key))?;
        match kind.as_str() {
            "none" => return Ok(SpreadWindow::Read(Vec::new(), 0)),
            "set" => (),
            _ => return Ok(SpreadWindow::NotASet(kind)),
        }
        let (next, fingerprints): (u64, Vec<String>) = redis::cmd("SSCAN")
            .arg(key)
            .arg(cursor)
            .arg("COUNT")
            .arg(SPREAD_WINDOW)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read the fingerprints of", key))?;
        Ok(SpreadWindow::Read(fingerprints, next))
    }

    /// What a spread would copy from this shard's dupefilter: its type,
    /// and for a set how many fingerprints it holds (`SCARD`; 0 for any
    /// other type, which cannot be spread: see
    /// [`RedisFrontier::spread_window`]).
    pub async fn fingerprints_to_spread(&self) -> Result<(String, u64)> {
        let key = &self.keys.dupefilter;
        let mut conn = self.conn.clone();
        let kind: String = redis::cmd("TYPE")
            .arg(key)
            .query_async(&mut conn)
            .await
            .map_err(err("read the type of", key))?;
        if kind != "set" {
            return Ok((kind, 0));
        }
        let n: u64 = redis::cmd("SCARD")
            .arg(key)
            .query_async(&mut conn)
            .await
            .map_err(err("count the fingerprints of", key))?;
        Ok((kind, n))
    }
}
