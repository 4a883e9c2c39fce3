//! The operator's side of the frontier: pushing start entries, re-queueing
//! failed requests, flushing a spider's keys, and reading its stats and live
//! workers. `push-urls`, `flush` and `stats` come through here and never
//! name a key themselves.

use super::protocol::{
    BloomGrowArgs, DupeArgs, DupeBulkArgs, FlushArgs, NoArgs, PushArgs, RequeueArgs, RequeueRecord,
    SeedArgs, SeedRecord,
};
use super::scripts::SCRIPTS;
use super::{
    clamped, encode, err, to_json, DeadLetter, FailedRecord, Heartbeat, KeyGroup, RedisFrontier,
    Result,
};
use crate::request::Request;
use crate::stats::{self, Tally};

/// The share (per mille) of Redis's maxmemory (or of its machine's memory)
/// its used memory may reach when a Bloom filter is made: the rest is for
/// the crawl's other keys and for every other client of that Redis.
const BLOOM_HEADROOM_PERMILLE: u32 = 900;

/// What `stats` shows of the dupefilter.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DupefilterInfo {
    pub mode: String,
    pub entries: u64,
    /// What Redis spends on it (`MEMORY USAGE` of its keys).
    pub bytes: u64,
    /// For a Bloom filter: the entries the newest filter of its chain is
    /// sized for.
    pub capacity: u64,
    /// For a Bloom filter: how many filters follow each other.
    pub filters: u64,
    /// For a Bloom filter: the entries in the newest filter.
    pub newest_entries: u64,
}

/// Why a spider's dupefilter cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DupefilterMismatch {
    #[error("the dupefilter {key} was made in mode `{found}`, but the spider's dupefilter setting is `{wanted}`: set dupefilter = \"{found}\", or delete the old one first (crawlworker flush SPIDER --dupefilter; every URL is then crawled again)")]
    Mode {
        key: String,
        found: String,
        wanted: String,
    },
    #[error("the Bloom dupefilter {key} cannot be made: {reason}. Nothing was allocated. Lower dupefilter_capacity (a full filter is followed by a larger one, so the chain can start small) or dupefilter_error_rate's precision, give Redis more memory (maxmemory), or use dupefilter = \"compact\"")]
    NoRoom { key: String, reason: String },
    #[error(transparent)]
    Redis(super::FrontierError),
}

/// What making room in a Bloom chain did (see `bloom_grow.lua`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grown {
    /// Every filter needed now is made: this many.
    Ready(u64),
    /// The next filter does not fit in Redis's memory: this many are made.
    Refused { ready: u64, reason: String },
}

/// The in-flight leases one worker holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldLeases {
    pub worker: String,
    pub count: u64,
    /// How long until the last of them expires (zero: already expired).
    pub expire_within: std::time::Duration,
}

/// A failed-key entry as read: the raw entry (to remove exactly it) and its
/// record, if it is one.
#[derive(Debug, Clone)]
pub struct FailedEntry {
    pub raw: String,
    pub record: Option<FailedRecord>,
}

impl RedisFrontier {
    /// Pushes start entries (a zset scores them `score`), stopping once the
    /// start key holds `limit` entries; returns how many were pushed.
    pub async fn push_start(
        &self,
        entries: &[String],
        score: f64,
        limit: Option<u64>,
    ) -> Result<u64> {
        if entries.is_empty() {
            return Ok(0);
        }
        let args = PushArgs {
            start_kind: self.kind.as_str().to_string(),
            limit: limit.map_or(-1, |l| l as i64).to_string(),
            score: score.to_string(),
            wake: self.keys.wake.clone(),
        };
        SCRIPTS
            .push_start
            .call(&self.keys, self.sink.sink, args)
            .values(entries)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("push start entries to", &self.keys.start_urls))
    }

    /// Up to `n` entries of the failed list from position `from`, oldest
    /// first.
    /// An entry that is not UTF-8 text (written by another tool) is
    /// unreadable: its `raw` shows its bytes escaped, and it stays.
    pub async fn failed_entries(&self, from: usize, n: usize) -> Result<Vec<FailedEntry>> {
        let raw: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(&self.keys.failed)
            .arg(from)
            .arg(from + n.max(1) - 1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read", &self.keys.failed))?;
        Ok(raw
            .into_iter()
            .map(|raw| match String::from_utf8(raw) {
                Ok(raw) => FailedEntry {
                    record: serde_json::from_str(&raw).ok(),
                    raw,
                },
                Err(e) => FailedEntry {
                    record: None,
                    raw: crate::wording::escaped(e.as_bytes()).into_owned(),
                },
            })
            .collect())
    }

    /// The last `n` failed requests, oldest first (unreadable entries are
    /// left out).
    pub async fn recent_failures(&self, n: usize) -> Result<Vec<FailedRecord>> {
        self.last_records(&self.keys.failed, n).await
    }

    /// The last `n` dead letters, oldest first (unreadable entries are left
    /// out).
    pub async fn recent_dead_letters(&self, n: usize) -> Result<Vec<DeadLetter>> {
        self.last_records(&self.keys.dead, n).await
    }

    /// The last `n` JSON records of the list `key` that parse as `T`.
    async fn last_records<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
        n: usize,
    ) -> Result<Vec<T>> {
        let raw: Vec<Vec<u8>> = redis::cmd("LRANGE")
            .arg(key)
            .arg(-(n.max(1) as i64))
            .arg(-1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read", key))?;
        Ok(raw
            .iter()
            .filter_map(|r| serde_json::from_slice(r).ok())
            .collect())
    }

    /// Moves failed entries back into the queue as `requests` (one per
    /// entry, same order); returns how many moved.
    pub async fn requeue_failed(&self, entries: &[(String, Request)]) -> Result<u64> {
        if entries.is_empty() {
            return Ok(0);
        }
        let k = &self.keys;
        let args = RequeueArgs {
            wake: k.wake.clone(),
        };
        let mut inv = SCRIPTS.requeue_failed.call(k, self.sink.sink, args);
        for (entry, request) in entries {
            inv.record(RequeueRecord {
                entry: entry.clone(),
                priority: clamped(request.priority).to_string(),
                json: encode(request).unwrap_or_default(),
            });
        }
        inv.invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("re-queue failed requests from", &k.failed))
    }

    /// The keys of `groups`: the spider's (see [`Keys::in_groups`]), and
    /// with the requests a shard's outboxes and their movers' locks.
    pub fn keys_in_groups(&self, groups: &[KeyGroup]) -> Vec<String> {
        let mut keys: Vec<String> = self
            .keys
            .in_groups(groups)
            .into_iter()
            .map(String::from)
            .collect();
        if groups.contains(&KeyGroup::Requests) {
            for to in self.shard.iter().flat_map(|place| place.others()) {
                keys.push(self.keys.outbox(to));
                keys.push(self.keys.outbox_lock(to));
            }
        }
        keys
    }

    /// Deletes the keys of `groups` in one step; returns each key deleted
    /// with the entries it held (0 for keys that did not exist).
    pub async fn flush(&self, groups: &[KeyGroup]) -> Result<Vec<(String, u64)>> {
        let mut keys = self.keys_in_groups(groups);
        if groups.contains(&KeyGroup::Items) {
            // The items `crawlworker export` holds, by the exporters that
            // hold them (see `export.rs`).
            for (exporter, _) in self.exporters().await? {
                keys.push(self.keys.exporting(&exporter));
            }
            keys.push(self.keys.export_renames());
        }
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let args = FlushArgs {
            dupefilter: self.keys.dupefilter.clone(),
            dupefilter_meta: self.keys.dupefilter_meta.clone(),
        };
        let mut inv = SCRIPTS.flush.call(&self.keys, self.sink.sink, args);
        for key in &keys {
            inv.more_key(key);
        }
        let flat: Vec<redis::Value> = inv
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("flush", &keys[0]))?;
        let mut out = Vec::new();
        let mut values = flat.into_iter();
        while let (Some(key), Some(n)) = (values.next(), values.next()) {
            out.push((
                redis::from_redis_value::<String>(&key).unwrap_or_default(),
                redis::from_redis_value::<u64>(&n).unwrap_or(0),
            ));
        }
        Ok(out)
    }

    /// Up to `n` items from position `from`, oldest first.
    pub async fn items_from(&self, from: usize, n: usize) -> Result<Vec<String>> {
        redis::cmd("LRANGE")
            .arg(&self.keys.items)
            .arg(from)
            .arg(from + n.max(1) - 1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read", &self.keys.items))
    }

    /// Removes and returns up to `n` of the oldest items, in one step (each
    /// item goes to one consumer).
    pub async fn pop_items(&self, n: usize) -> Result<Vec<String>> {
        let popped: Option<Vec<String>> = redis::cmd("LPOP")
            .arg(&self.keys.items)
            .arg(n.max(1))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("pop items from", &self.keys.items))?;
        Ok(popped.unwrap_or_default())
    }

    /// Puts popped items that were not delivered back at the head, in
    /// their order.
    pub async fn unpop_items(&self, items: &[String]) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        redis::cmd("LPUSH")
            .arg(&self.keys.items)
            .arg(items.iter().rev().collect::<Vec<_>>())
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(err("return items to", &self.keys.items))
    }

    /// Up to `n` items of the item stream after entry `after` (from the
    /// first when `None`), oldest first, with the id of the last one read.
    /// Entries without an `item` field (not written by crawlworker) are
    /// skipped.
    pub async fn stream_items_after(
        &self,
        after: Option<&str>,
        n: usize,
    ) -> Result<(Vec<String>, Option<String>)> {
        let key = &self.keys.item_stream;
        let start = after.map_or("-".to_string(), |id| format!("({id}"));
        let entries: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
            .arg(key)
            .arg(start)
            .arg("+")
            .arg("COUNT")
            .arg(n.max(1))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read", key))?;
        let last = entries.last().map(|(id, _)| id.clone());
        let items = entries
            .into_iter()
            .filter_map(|(_, fields)| {
                fields
                    .chunks_exact(2)
                    .find(|pair| pair[0] == "item")
                    .map(|pair| pair[1].clone())
            })
            .collect();
        Ok((items, last))
    }

    /// The Redis type of the items key when it is not the one the sink
    /// writes (`None`: it is, or the key does not exist yet). Workers
    /// refuse to start on a mismatch: the commit script would refuse every
    /// page.
    pub async fn sink_mismatch(&self) -> Result<Option<String>> {
        let key = self.items_key();
        let found: String = redis::cmd("TYPE")
            .arg(key)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read the type of", key))?;
        let wanted = self.sink().as_str();
        Ok((found != "none" && found != wanted).then_some(found))
    }

    /// Runs `op` (`add`, `check` or `forget`) on `fingerprints` in the
    /// dupefilter's mode, in one step (see `scripts/dupe_bulk.lua`).
    async fn dupe_bulk(&self, op: &str, fingerprints: &[&str]) -> Result<i64> {
        let args = DupeBulkArgs {
            dupe_spec: self.dupe_spec.clone(),
            op: op.to_string(),
        };
        SCRIPTS
            .dupe_bulk
            .call(&self.keys, self.sink.sink, args)
            .values(fingerprints)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("use", &self.keys.dupefilter))
    }

    /// Removes one fingerprint from the dupefilter: `Some(true)` if it was
    /// there, `Some(false)` if not, `None` when the mode cannot forget one
    /// entry (a Bloom filter).
    pub async fn forget_fingerprint(&self, fingerprint: &str) -> Result<Option<bool>> {
        let n = self.dupe_bulk("forget", &[fingerprint]).await?;
        Ok((n >= 0).then_some(n > 0))
    }

    /// Records fingerprints as seen, as a page's commit would (to seed a
    /// dupefilter, and for the memory benchmark); returns how many were new.
    pub async fn mark_seen(&self, fingerprints: &[&str]) -> Result<u64> {
        Ok(self.dupe_bulk("add", fingerprints).await?.max(0) as u64)
    }

    /// How many of `fingerprints` the dupefilter says it has seen, changing
    /// nothing (a Bloom filter's false positives count as seen).
    pub async fn count_seen(&self, fingerprints: &[&str]) -> Result<u64> {
        Ok(self.dupe_bulk("check", fingerprints).await?.max(0) as u64)
    }

    /// The dupefilter scripts' arguments.
    fn dupe_args(&self) -> DupeArgs {
        DupeArgs {
            dupe_spec: self.dupe_spec.clone(),
        }
    }

    /// What the dupefilter is and holds.
    pub async fn dupefilter_info(&self) -> Result<DupefilterInfo> {
        let (mode, entries, bytes, capacity, filters, newest_entries): (
            String,
            u64,
            u64,
            u64,
            u64,
            u64,
        ) = SCRIPTS
            .dupe_info
            .call(&self.keys, self.sink.sink, self.dupe_args())
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("read", &self.keys.dupefilter))?;
        Ok(DupefilterInfo {
            mode,
            entries,
            bytes,
            capacity,
            filters,
            newest_entries,
        })
    }

    /// Records the dupefilter's mode when it is made, and checks that an
    /// existing one was made in this spider's mode. A Bloom filter keeps
    /// the size it was made with (a changed capacity is reported). The
    /// frontier then uses the filter's own spec.
    pub async fn prepare_dupefilter(&mut self) -> std::result::Result<(), DupefilterMismatch> {
        let (mode, spec): (String, String) = SCRIPTS
            .dupe_prepare
            .call(&self.keys, self.sink.sink, self.dupe_args())
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| DupefilterMismatch::Redis(err("prepare", &self.keys.dupefilter)(e)))?;
        let wanted = self
            .dupe_spec
            .split(':')
            .next()
            .unwrap_or_default()
            .to_string();
        if mode != wanted {
            return Err(DupefilterMismatch::Mode {
                key: self.keys.dupefilter.clone(),
                found: mode,
                wanted,
            });
        }
        if !spec.is_empty() && spec != self.dupe_spec {
            tracing::warn!(
                key = %self.keys.dupefilter,
                "the dupefilter was made as `{spec}`; the spider's settings say `{}`, and the filter keeps its own",
                self.dupe_spec
            );
            self.dupe_spec = spec;
        }
        match self
            .grow_dupefilter()
            .await
            .map_err(DupefilterMismatch::Redis)?
        {
            Grown::Refused { ready: 0, reason } => Err(DupefilterMismatch::NoRoom {
                key: self.keys.dupefilter.clone(),
                reason,
            }),
            Grown::Refused { reason, .. } => {
                self.say_no_room(&reason);
                Ok(())
            }
            Grown::Ready(_) => Ok(()),
        }
    }

    /// Makes the Bloom filters the dupefilter needs now (the one its chain
    /// is on, and the next once that is half full), a piece per script
    /// call and only where Redis's memory has room (`bloom_grow.lua`). Any
    /// other mode needs nothing.
    pub async fn grow_dupefilter(&self) -> Result<Grown> {
        if !self.dupe_spec.starts_with("bloom") {
            return Ok(Grown::Ready(0));
        }
        let args = || BloomGrowArgs {
            dupe_spec: self.dupe_spec.clone(),
            headroom_permille: BLOOM_HEADROOM_PERMILLE.to_string(),
        };
        loop {
            let (ready, state): (u64, String) = SCRIPTS
                .bloom_grow
                .call(&self.keys, self.sink.sink, args())
                .invoke_async(&mut self.conn.clone())
                .await
                .map_err(err("make the Bloom filter of", &self.keys.dupefilter))?;
            match state.as_str() {
                "" => return Ok(Grown::Ready(ready)),
                "more" => continue,
                _ => {
                    return Ok(Grown::Refused {
                        ready,
                        reason: state,
                    })
                }
            }
        }
    }

    /// Says (once per worker and filter count) that the Bloom chain cannot
    /// grow: its newest filter takes more entries than planned meanwhile.
    pub(super) fn say_no_room(&self, reason: &str) {
        let mut said = self
            .bloom_refusal_said
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if said.as_deref() != Some(reason) {
            tracing::warn!(
                key = %self.keys.dupefilter,
                "the Bloom dupefilter cannot grow: {reason}; its newest filter takes new entries beyond its capacity meanwhile (its false-positive rate rises: `crawlworker stats` shows it). Give Redis more memory, or plan a larger dupefilter_capacity for the next crawl"
            );
            *said = Some(reason.to_string());
        }
    }

    /// Queues the spider's seeds (`[start] sitemap` and `feed`) that this
    /// crawl has not queued yet; returns how many were.
    pub async fn seed(&self, seeds: &[Request]) -> Result<u64> {
        if seeds.is_empty() {
            return Ok(0);
        }
        let args = SeedArgs {
            wake: self.keys.wake.clone(),
        };
        let mut inv = SCRIPTS.seed.call(&self.keys, self.sink.sink, args);
        for s in seeds {
            inv.record(SeedRecord {
                url: s.url.clone(),
                json: encode(s).unwrap_or_default(),
            });
        }
        inv.invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("seed", &self.keys.seeds))
    }

    /// Pauses the spider for the whole cluster: no worker leases a request
    /// until [`RedisFrontier::resume`]; the workers, told on the wake
    /// channel, hand back the requests they have not started downloading
    /// (downloads in progress finish and commit). False if it was paused
    /// already.
    pub async fn pause(&self) -> Result<bool> {
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("HSETNX")
            .arg(&self.keys.control)
            .arg("paused")
            .arg((super::now_secs() * 1000.0) as u64)
            .publish(&self.keys.wake, super::wake::CONTROL)
            .ignore();
        let (set,): (bool,) = pipe
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("pause", &self.keys.control))?;
        Ok(set)
    }

    /// Whether the spider is paused (`crawlworker pause`).
    pub async fn paused(&self) -> Result<bool> {
        redis::cmd("HEXISTS")
            .arg(&self.keys.control)
            .arg("paused")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read", &self.keys.control))
    }

    /// Ends a pause and wakes the workers; false if it was not paused.
    pub async fn resume(&self) -> Result<bool> {
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hdel(&self.keys.control, "paused")
            .publish(&self.keys.wake, super::wake::CONTROL)
            .ignore();
        let (removed,): (u64,) = pipe
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("resume", &self.keys.control))?;
        Ok(removed > 0)
    }

    /// Since when the spider is paused (seconds since the epoch), if it is.
    pub async fn paused_since(&self) -> Result<Option<f64>> {
        let ms: Option<u64> = redis::cmd("HGET")
            .arg(&self.keys.control)
            .arg("paused")
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read", &self.keys.control))?;
        Ok(ms.map(|ms| ms as f64 / 1000.0))
    }

    /// Adds stats increments and sets `start_time` if no worker has yet.
    pub async fn add_stats(&self, tally: &Tally, start_time: Option<&str>) -> Result<()> {
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (field, delta) in tally.iter() {
            pipe.hincr(&self.keys.stats, field, delta).ignore();
        }
        if let Some(t) = start_time {
            pipe.hset_nx(&self.keys.stats, stats::START_TIME.name, t)
                .ignore();
        }
        pipe.query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(err("update stats in", &self.keys.stats))
    }

    /// Records that a worker stopped, as Scrapy records a spider closing:
    /// `finish_time`, `finish_reason` and `elapsed_time_seconds` since the
    /// crawl's `start_time`. The last worker to stop leaves the crawl's.
    pub async fn record_finish(&self, reason: &str) -> Result<()> {
        let start: Option<String> = redis::cmd("HGET")
            .arg(&self.keys.stats)
            .arg(stats::START_TIME.name)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read", &self.keys.stats))?;
        let now = std::time::SystemTime::now();
        let elapsed = start
            .and_then(|s| humantime::parse_rfc3339(&s).ok())
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default();
        let finish = humantime::format_rfc3339_millis(now).to_string();
        redis::pipe()
            .atomic()
            .hset(&self.keys.stats, stats::FINISH_TIME.name, finish)
            .ignore()
            .hset(&self.keys.stats, stats::FINISH_REASON.name, reason)
            .ignore()
            .hset(
                &self.keys.stats,
                stats::ELAPSED_TIME_SECONDS.name,
                format!("{:.3}", elapsed.as_secs_f64()),
            )
            .ignore()
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(err("record the finish in", &self.keys.stats))
    }

    /// One stat of the hash, as a number (0 when absent).
    pub async fn stat(&self, stat: stats::Stat) -> Result<u64> {
        let value: Option<String> = redis::cmd("HGET")
            .arg(&self.keys.stats)
            .arg(stat.name)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read", &self.keys.stats))?;
        Ok(value.and_then(|v| v.parse().ok()).unwrap_or(0))
    }

    /// The stats hash.
    pub async fn stats(&self) -> Result<Vec<(String, String)>> {
        redis::cmd("HGETALL")
            .arg(&self.keys.stats)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read", &self.keys.stats))
    }

    /// Records this worker's heartbeat, and says again that the spider
    /// hands work on (its relations, see [`super::upstreams`]).
    pub async fn heartbeat(&self, beat: &Heartbeat) -> Result<()> {
        let mut pipe = redis::pipe();
        pipe.hset(&self.keys.workers, &self.worker, to_json(beat))
            .ignore();
        self.add_relations(&mut pipe);
        pipe.query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(err("record heartbeat in", &self.keys.workers))?;
        if self.shard.is_some() {
            self.record_relations_apart().await?;
        }
        Ok(())
    }

    /// Removes this worker from the list of workers, and from the crew
    /// the fair share of leases is divided among (and the workers waiting
    /// for work), so its peers' shares grow at once.
    pub async fn unregister(&self) -> Result<()> {
        let mut pipe = redis::pipe();
        pipe.hdel(&self.keys.workers, &self.worker)
            .ignore()
            .zrem(&self.keys.crew, &self.worker)
            .ignore()
            .hdel(&self.keys.waiting, &self.worker)
            .ignore();
        pipe.query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(err("unregister from", &self.keys.workers))
    }

    /// Takes this worker off the workers waiting for work (see
    /// [`super::handed`]).
    pub async fn stop_waiting(&self) -> Result<()> {
        redis::cmd("HDEL")
            .arg(&self.keys.waiting)
            .arg(&self.worker)
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(err("stop waiting in", &self.keys.waiting))
    }

    /// Who holds the in-flight leases, per worker.
    pub async fn leases(&self) -> Result<Vec<HeldLeases>> {
        let raw: Vec<redis::Value> = SCRIPTS
            .leases
            .call(&self.keys, self.sink.sink, NoArgs {})
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("read the leases in", &self.keys.leases))?;
        let mut values = raw.into_iter();
        let number = |v: Option<redis::Value>| {
            v.and_then(|v| redis::from_redis_value::<u64>(&v).ok())
                .unwrap_or(0)
        };
        let now = number(values.next());
        let mut out = Vec::new();
        while let Some(worker) = values.next() {
            let worker = redis::from_redis_value::<String>(&worker).unwrap_or_default();
            let count = number(values.next());
            let last = number(values.next());
            out.push(HeldLeases {
                worker,
                count,
                expire_within: std::time::Duration::from_millis(last.saturating_sub(now)),
            });
        }
        Ok(out)
    }

    /// Every worker's last heartbeat, by worker id (unreadable entries are
    /// left out).
    pub async fn workers(&self) -> Result<Vec<(String, Heartbeat)>> {
        let raw: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(&self.keys.workers)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read", &self.keys.workers))?;
        Ok(raw
            .into_iter()
            .filter_map(|(id, json)| Some((id, serde_json::from_str(&json).ok()?)))
            .collect())
    }
}
