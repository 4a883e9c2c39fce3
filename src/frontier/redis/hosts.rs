//! Per-host state the whole cluster shares: politeness slots and the
//! robots.txt cache with its fetch locks. The downloader decides what to do
//! with them; this module only reads and writes them, each change one step.
//!
//! What Redis keeps per host is bounded by recent activity, not by the
//! hosts a crawl has seen: [`Frontier::sweep`], which the crawl's workers
//! call in turns, about once a second between them, deletes entries that can no longer matter (slots
//! in the past, back-off of hosts left alone, expired robots.txt records
//! with their Crawl-delays, run-out locks), a bounded number per call.

use std::time::Duration;

use super::protocol::{PaceArgs, RobotsLockArgs, SweepArgs};
use super::scripts::SCRIPTS;
use super::{err, flag, ms, to_json, Heartbeat, RedisFrontier, Result, RobotsRecord, Swept};

impl RedisFrontier {
    /// Reserves another politeness slot for `host`, at least `spacing`
    /// after its last one and no sooner than `hold`, unless more than
    /// `limit` away (see [`super::Frontier::reserve_slot`]).
    pub async fn reserve_slot(
        &self,
        host: &str,
        spacing: Duration,
        hold: Duration,
        limit: Option<Duration>,
    ) -> Result<Option<Duration>> {
        let args = PaceArgs {
            host: host.to_string(),
            interval_ms: ms(self.pacing.interval),
            jitter: flag(self.pacing.jitter),
            spacing_ms: ms(spacing),
            hold_ms: ms(hold),
            limit_ms: limit.map_or(-1, |l| l.as_millis() as i64).to_string(),
        };
        let wait: i64 = SCRIPTS
            .pace
            .call(&self.keys, self.sink.sink, args)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("reserve a politeness slot in", &self.keys.pace))?;
        Ok(u64::try_from(wait).ok().map(Duration::from_millis))
    }

    /// How many hosts are slowed down by adaptive back-off right now.
    pub async fn hosts_backed_off(&self) -> Result<u64> {
        redis::cmd("HLEN")
            .arg(&self.keys.backoff)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("count the hosts in", &self.keys.backoff))
    }

    /// The cached robots.txt record of `host`, if any (an unreadable one
    /// counts as none: it is fetched again).
    pub async fn robots_cached(&self, host: &str) -> Result<Option<RobotsRecord>> {
        let json: Option<String> = redis::cmd("HGET")
            .arg(&self.keys.robots)
            .arg(host)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read robots.txt cache", &self.keys.robots))?;
        Ok(json.and_then(|j| serde_json::from_str(&j).ok()))
    }

    /// Stores `host`'s robots.txt record, which workers use for `ttl` after
    /// its fetch, and its Crawl-delay (0: none), and frees the host's fetch
    /// lock, in one step. The sweep deletes the record and the Crawl-delay
    /// once the record has expired. (A lock left to run out would make the
    /// next fetch, once the record expires, wait for it.)
    pub async fn robots_store(
        &self,
        host: &str,
        record: &RobotsRecord,
        crawl_delay: Duration,
        ttl: Duration,
    ) -> Result<()> {
        let expires_ms = (record.fetched_at * 1000.0) as u64 + ttl.as_millis() as u64;
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hset(&self.keys.robots, host, to_json(record))
            .ignore()
            .zadd(&self.keys.robots_expiry, host, expires_ms)
            .ignore()
            .zrem(&self.keys.robots_locks, host)
            .ignore();
        if crawl_delay.is_zero() {
            pipe.hdel(&self.keys.host_delay, host).ignore();
        } else {
            pipe.hset(&self.keys.host_delay, host, crawl_delay.as_millis() as u64)
                .ignore();
        }
        pipe.query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(err("store robots.txt in", &self.keys.robots))
    }

    /// Takes the cluster-wide right to fetch `host`'s robots.txt for `ttl`;
    /// false when another worker holds it.
    pub async fn robots_lock(&self, host: &str, ttl: Duration) -> Result<bool> {
        let args = RobotsLockArgs {
            host: host.to_string(),
            ttl_ms: ttl.as_millis().max(1).to_string(),
        };
        let taken: u8 = SCRIPTS
            .robots_lock
            .call(&self.keys, self.sink.sink, args)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("lock robots.txt fetch", &self.keys.robots_locks))?;
        Ok(taken == 1)
    }

    /// One step of the sweep of per-host state (see `scripts/sweep.lua`):
    /// looks at up to `budget` entries of each per-host key and deletes
    /// those that can no longer matter. Robots.txt records written without
    /// an expiry (by older versions) expire `robots_ttl` after their fetch.
    pub async fn sweep(&self, budget: usize, robots_ttl: Duration) -> Result<Swept> {
        let k = &self.keys;
        let args = SweepArgs {
            budget: budget.max(1).to_string(),
            backoff_idle_ms: ms(self.backoff_forgotten_after()),
            robots_ttl_ms: ms(robots_ttl),
            workers_keep_ms: ms(Heartbeat::forgotten_after(self.lease)),
        };
        let reply: Vec<u64> = SCRIPTS
            .sweep
            .call(k, self.sink.sink, args)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("sweep stale per-host entries from", &k.pace))?;
        let at = |i: usize| reply.get(i).copied().unwrap_or(0);
        Ok(Swept {
            slots: at(0),
            backoffs: at(1),
            robots: at(2),
            locks: at(3),
            workers: at(4),
            upstreams: at(5),
            crew: at(6),
        })
    }

    /// How long a host must be left alone (no politeness slot taken, no
    /// response) before its adaptive back-off is forgotten: ten turns at
    /// the slowest pace back-off imposes (ten minutes by default). A host
    /// the crawl comes back to after that starts afresh, as a new one.
    pub fn backoff_forgotten_after(&self) -> Duration {
        (self.pacing.backoff_max * 10).max(Duration::from_secs(1))
    }
}
