//! Per-host state the whole cluster shares: politeness slots and the
//! robots.txt cache with its fetch locks. The downloader decides what to do
//! with them; this module only reads and writes them, each change one step.

use std::time::Duration;

use super::scripts::SCRIPTS;
use super::{err, to_json, RedisFrontier, Result, RobotsRecord};

impl RedisFrontier {
    /// Reserves another politeness slot for `host` (a request leased before
    /// the host's Crawl-delay was known); returns how long to wait for it.
    pub async fn reserve_slot(&self, host: &str) -> Result<Duration> {
        let ms: u64 = SCRIPTS
            .pace
            .key(&self.keys.pace)
            .key(&self.keys.host_delay)
            .key(&self.keys.backoff)
            .arg(host)
            .arg(self.pacing.interval.as_millis() as u64)
            .arg(u8::from(self.pacing.jitter))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("reserve a politeness slot in", &self.keys.pace))?;
        Ok(Duration::from_millis(ms))
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

    /// Stores `host`'s robots.txt record and its Crawl-delay (0: none), in
    /// one step.
    pub async fn robots_store(
        &self,
        host: &str,
        record: &RobotsRecord,
        crawl_delay: Duration,
    ) -> Result<()> {
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hset(&self.keys.robots, host, to_json(record))
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
        let taken: u8 = SCRIPTS
            .robots_lock
            .key(&self.keys.robots_locks)
            .arg(host)
            .arg(ttl.as_millis().max(1) as u64)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("lock robots.txt fetch", &self.keys.robots_locks))?;
        Ok(taken == 1)
    }
}
