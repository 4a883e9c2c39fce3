//! The frontier a spider runs with, chosen at start: the Redis frontier a
//! cluster shares ([`RedisFrontier`]) or a local crawl's, in memory
//! ([`LocalFrontier`], `run --local`). The worker, the downloader and the
//! page tasks call these methods and do not know which one answers. The
//! operator's commands (`push-urls`, `stats`, `flush`, …) work on a cluster
//! and use [`RedisFrontier`] directly.

use std::sync::Arc;
use std::time::Duration;

use super::hosts::Swept;
use super::local::LocalFrontier;
use super::{
    Claimed, Committed, Heartbeat, Keys, Leased, PageResult, QueueStatus, RedisFrontier, Result,
    RobotsRecord, StartClaim,
};
use crate::stats::{Stat, Tally};

/// One spider's frontier.
#[derive(Clone)]
pub enum Frontier {
    Redis(Arc<RedisFrontier>),
    Local(Arc<LocalFrontier>),
}

impl From<RedisFrontier> for Frontier {
    fn from(f: RedisFrontier) -> Frontier {
        Frontier::Redis(Arc::new(f))
    }
}

impl Frontier {
    /// The spider's key names (in a local crawl, the names its keys would
    /// have: they name the queue in messages).
    pub fn keys(&self) -> &Keys {
        match self {
            Frontier::Redis(f) => &f.keys,
            Frontier::Local(f) => &f.options().keys,
        }
    }

    pub fn worker(&self) -> &str {
        match self {
            Frontier::Redis(f) => f.worker(),
            Frontier::Local(f) => &f.options().worker,
        }
    }

    /// Where items go: the key of the spider's sink (a local crawl writes
    /// them to its output instead, and names the list key here).
    pub fn items_key(&self) -> &str {
        match self {
            Frontier::Redis(f) => f.items_key(),
            Frontier::Local(f) => &f.options().keys.items,
        }
    }

    /// Where a fatal Redis error of the spider's run is kept (a local
    /// crawl has none).
    pub fn fatal(&self) -> super::outage::Fatal {
        match self {
            Frontier::Redis(f) => f.fatal.clone(),
            Frontier::Local(_) => super::outage::Fatal::default(),
        }
    }

    /// The local frontier, in a local crawl.
    pub fn local(&self) -> Option<&Arc<LocalFrontier>> {
        match self {
            Frontier::Local(f) => Some(f),
            Frontier::Redis(_) => None,
        }
    }

    pub async fn lease(&self, max: usize, peek: usize) -> Result<(Vec<Leased>, Vec<String>)> {
        match self {
            Frontier::Redis(f) => f.lease(max, peek).await,
            Frontier::Local(f) => Ok(f.lease(max, peek)),
        }
    }

    pub fn next_due_in(&self) -> Option<Duration> {
        match self {
            Frontier::Redis(f) => f.next_due_in(),
            Frontier::Local(f) => f.next_due_in(),
        }
    }

    pub async fn commit(
        &self,
        leased: &Leased,
        page: &PageResult,
        lease_next: usize,
        may_wait: bool,
    ) -> Result<(Committed, Vec<Leased>)> {
        match self {
            Frontier::Redis(f) => f.commit(leased, page, lease_next, may_wait).await,
            Frontier::Local(f) => Ok(f.commit(leased, page, lease_next)),
        }
    }

    /// Extends this worker's leases; returns the ids it lost (a local crawl
    /// never loses one: nothing else can take it).
    pub async fn renew(&self, ids: &[String]) -> Result<Vec<String>> {
        match self {
            Frontier::Redis(f) => f.renew(ids).await,
            Frontier::Local(_) => Ok(Vec::new()),
        }
    }

    pub async fn release(&self, ids: &[String]) -> Result<u64> {
        match self {
            Frontier::Redis(f) => f.release(ids).await,
            Frontier::Local(f) => Ok(f.release(ids)),
        }
    }

    pub async fn claim_start(&self, claims: &[StartClaim]) -> Result<Claimed> {
        match self {
            Frontier::Redis(f) => f.claim_start(claims).await,
            Frontier::Local(f) => Ok(f.claim_start(claims)),
        }
    }

    pub async fn status(&self) -> Result<QueueStatus> {
        match self {
            Frontier::Redis(f) => f.status().await,
            Frontier::Local(f) => Ok(f.status()),
        }
    }

    /// Reserves another politeness slot for `host` for a request leased
    /// before its host was slowed down (a Crawl-delay learnt since, or an
    /// adaptive back-off): at least `spacing` after the slot before, and
    /// at least the host's own spacing, and no sooner than `hold` from now
    /// (a Retry-After its worker heard before the cluster did). Returns how
    /// long to wait for it, or `None` when that would be longer than
    /// `limit`: nothing is reserved then, so the request can go back to the
    /// queue without leaving a slot nobody takes.
    pub async fn reserve_slot(
        &self,
        host: &str,
        spacing: Duration,
        hold: Duration,
        limit: Option<Duration>,
    ) -> Result<Option<Duration>> {
        match self {
            Frontier::Redis(f) => f.reserve_slot(host, spacing, hold, limit).await,
            Frontier::Local(f) => Ok(f.reserve_slot(host, spacing, hold, limit)),
        }
    }

    pub async fn hosts_backed_off(&self) -> Result<u64> {
        match self {
            Frontier::Redis(f) => f.hosts_backed_off().await,
            Frontier::Local(f) => Ok(f.hosts_backed_off()),
        }
    }

    pub async fn robots_cached(&self, host: &str) -> Result<Option<RobotsRecord>> {
        match self {
            Frontier::Redis(f) => f.robots_cached(host).await,
            Frontier::Local(f) => Ok(f.robots_cached(host)),
        }
    }

    pub async fn robots_store(
        &self,
        host: &str,
        record: &RobotsRecord,
        crawl_delay: Duration,
        ttl: Duration,
    ) -> Result<()> {
        match self {
            Frontier::Redis(f) => f.robots_store(host, record, crawl_delay, ttl).await,
            Frontier::Local(f) => {
                f.robots_store(host, record, crawl_delay);
                Ok(())
            }
        }
    }

    /// The right to fetch `host`'s robots.txt (a local crawl's one process
    /// always has it; its downloader fetches each host's once at a time).
    pub async fn robots_lock(&self, host: &str, ttl: Duration) -> Result<bool> {
        match self {
            Frontier::Redis(f) => f.robots_lock(host, ttl).await,
            Frontier::Local(_) => Ok(true),
        }
    }

    /// Deletes per-host state that can no longer matter (a local crawl's
    /// lives as long as the crawl, which ends).
    pub async fn sweep(&self, budget: usize, robots_ttl: Duration) -> Result<Swept> {
        match self {
            Frontier::Redis(f) => f.sweep(budget, robots_ttl).await,
            Frontier::Local(_) => Ok(Swept::default()),
        }
    }

    pub async fn add_stats(&self, tally: &Tally, start_time: Option<&str>) -> Result<()> {
        match self {
            Frontier::Redis(f) => f.add_stats(tally, start_time).await,
            Frontier::Local(f) => {
                f.add_stats(tally, start_time);
                Ok(())
            }
        }
    }

    pub async fn record_finish(&self, reason: &str) -> Result<()> {
        match self {
            Frontier::Redis(f) => f.record_finish(reason).await,
            Frontier::Local(f) => {
                f.record_finish(reason);
                Ok(())
            }
        }
    }

    pub async fn stat(&self, stat: Stat) -> Result<u64> {
        match self {
            Frontier::Redis(f) => f.stat(stat).await,
            Frontier::Local(f) => Ok(f.stat(stat.name)),
        }
    }

    pub async fn stats(&self) -> Result<Vec<(String, String)>> {
        match self {
            Frontier::Redis(f) => f.stats().await,
            Frontier::Local(f) => Ok(f.stats()),
        }
    }

    /// Records this worker's heartbeat (a local crawl has no one to tell).
    pub async fn heartbeat(&self, beat: &Heartbeat) -> Result<()> {
        match self {
            Frontier::Redis(f) => f.heartbeat(beat).await,
            Frontier::Local(_) => Ok(()),
        }
    }

    pub async fn unregister(&self) -> Result<()> {
        match self {
            Frontier::Redis(f) => f.unregister().await,
            Frontier::Local(_) => Ok(()),
        }
    }

    /// The workers of the cluster (a local crawl has no other).
    pub async fn workers(&self) -> Result<Vec<(String, Heartbeat)>> {
        match self {
            Frontier::Redis(f) => f.workers().await,
            Frontier::Local(_) => Ok(Vec::new()),
        }
    }
}
