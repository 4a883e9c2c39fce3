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

/// How a dupefilter reads out, to spread it over the shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpreadKind {
    /// There is none.
    Empty,
    /// A set of hex fingerprints (`exact`, scrapy-redis's).
    Exact,
    /// A hash of packed fingerprints (`compact`).
    Compact,
    /// Another mode's keys (a Bloom filter cannot be read out; an
    /// expiring one would lose its ages), said as what it is.
    Other(String),
}

/// One window of a dupefilter read out to spread it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpreadWindow {
    /// The fingerprints, and the cursor to go on from (0: the end).
    Read(Vec<String>, u64),
    /// The dupefilter cannot be read out: what it is.
    Unreadable(String),
}

/// How many fingerprints one step of a spread reads and copies.
pub const SPREAD_WINDOW: usize = 2000;

/// The field of shard 0's control hash that counts the homes handed to a
/// sharded spider's workers (see [`RedisFrontier::home_ticket`]).
pub const HOMES_FIELD: &str = "homes";

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

    /// A ticket for a worker's home shard, from this (shard 0's) control
    /// hash: one more than the last worker's, so that workers joining a
    /// sharded crawl take the shards in turn (the ticket modulo the shard
    /// count), as many on each.
    pub async fn home_ticket(&self) -> Result<u64> {
        let control = &self.keys.control;
        redis::cmd("HINCRBY")
            .arg(control)
            .arg(HOMES_FIELD)
            .arg(1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("take a home shard's ticket in", control))
    }

    /// How this shard's dupefilter can be read out to spread it.
    pub async fn spread_kind(&self) -> Result<SpreadKind> {
        let (key, meta) = (&self.keys.dupefilter, &self.keys.dupefilter_meta);
        let (kind, mode): (String, Option<String>) = redis::pipe()
            .cmd("TYPE")
            .arg(key)
            .hget(meta, "mode")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read the type of", key))?;
        Ok(match (kind.as_str(), mode.as_deref()) {
            ("none", _) => SpreadKind::Empty,
            ("set", None | Some("exact")) => SpreadKind::Exact,
            ("hash", Some("compact")) => SpreadKind::Compact,
            (kind, mode) => SpreadKind::Other(match mode {
                Some(mode) => format!("{kind} of the `{mode}` mode"),
                None => kind.to_string(),
            }),
        })
    }

    /// One window of this shard's dupefilter, read from `cursor` (`SSCAN`
    /// of an exact one, `HSCAN` of a compact one, whose fingerprints are
    /// put together again; 0 starts): the fingerprints, and the cursor to
    /// go on from (0: the end). A dupefilter of another mode cannot be
    /// read out: what it is is said instead.
    pub async fn spread_window(&self, cursor: u64) -> Result<SpreadWindow> {
        let key = &self.keys.dupefilter;
        let scan = |command: &str| {
            let mut cmd = redis::cmd(command);
            cmd.arg(key).arg(cursor).arg("COUNT").arg(SPREAD_WINDOW);
            cmd
        };
        match self.spread_kind().await? {
            SpreadKind::Empty => Ok(SpreadWindow::Read(Vec::new(), 0)),
            SpreadKind::Other(what) => Ok(SpreadWindow::Unreadable(what)),
            SpreadKind::Exact => {
                let (next, fingerprints): (u64, Vec<String>) = scan("SSCAN")
                    .query_async(&mut self.conn.clone())
                    .await
                    .map_err(err("read the fingerprints of", key))?;
                Ok(SpreadWindow::Read(fingerprints, next))
            }
            SpreadKind::Compact => {
                let (next, pairs): (u64, Vec<Vec<u8>>) = scan("HSCAN")
                    .query_async(&mut self.conn.clone())
                    .await
                    .map_err(err("read the fingerprints of", key))?;
                Ok(SpreadWindow::Read(unpack_compact(&pairs), next))
            }
        }
    }

    /// What a spread would copy from this shard's dupefilter: how it reads
    /// out, and how many fingerprints it holds (`SCARD` of an exact one,
    /// the count a compact one keeps; 0 for any other).
    pub async fn fingerprints_to_spread(&self) -> Result<(SpreadKind, u64)> {
        let kind = self.spread_kind().await?;
        let mut cmd = match kind {
            SpreadKind::Exact => redis::cmd("SCARD"),
            SpreadKind::Compact => redis::cmd("HGET"),
            _ => return Ok((kind, 0)),
        };
        match kind {
            SpreadKind::Compact => cmd.arg(&self.keys.dupefilter_meta).arg("entries"),
            _ => cmd.arg(&self.keys.dupefilter),
        };
        let n: Option<u64> = cmd
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("count the fingerprints of", &self.keys.dupefilter))?;
        Ok((kind, n.unwrap_or(0)))
    }
}

/// The fingerprints of a compact dupefilter's `field, value, …` pairs
/// (`scripts/dupefilter.lua`): each field is a fingerprint's first 2
/// bytes, its value the other 18 bytes of each fingerprint of that
/// bucket, packed; as hex, as the dupefilter is given them.
fn unpack_compact(pairs: &[Vec<u8>]) -> Vec<String> {
    let hex = |bytes: &[u8]| -> String { bytes.iter().map(|b| format!("{b:02x}")).collect() };
    pairs
        .chunks(2)
        .filter(|pair| pair.len() == 2 && pair[0].len() == 2)
        .flat_map(|pair| {
            let head = hex(&pair[0]);
            pair[1]
                .chunks_exact(18)
                .map(move |rest| format!("{head}{}", hex(rest)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compact_buckets_fingerprints_are_put_together_again() {
        let pairs = vec![
            vec![0xab, 0x01],
            [vec![0u8; 18], vec![0xff; 18]].concat(),
            vec![0x00, 0x02],
            vec![0x11; 18],
        ];
        assert_eq!(
            unpack_compact(&pairs),
            vec![
                format!("ab01{}", "00".repeat(18)),
                format!("ab01{}", "ff".repeat(18)),
                format!("0002{}", "11".repeat(18)),
            ]
        );
    }
}
