//! The frontier contract: every promise a spider's run relies on, stated
//! once as the [`Backend`] trait. Two backends keep it: the Redis frontier
//! a cluster shares ([`super::RedisFrontier`]) and the in-memory one of a
//! local crawl ([`super::LocalFrontier`]). The worker, the downloader and
//! the page tasks hold a [`super::Frontier`] and never know which answers.
//!
//! One suite (`tests/frontier_contract.rs`) runs every promise against both
//! backends, as object_store's integration suite runs against every store.
//!
//! # Where the local backend differs on purpose
//!
//! A local crawl is one process with no one to share the crawl with, so:
//!
//! - it refuses spiders that hand links to other spiders (`to_spider`):
//!   [`super::LocalFrontier::refuse_handoffs`] says why (there is no other
//!   spider's start key to push to); so no spider is upstream of a local
//!   crawl either, and its [`Backend::status`] has no `upstreams`;
//! - heartbeats, the worker list and the sweep of per-host state do
//!   nothing (there are no other workers, and its per-host state ends with
//!   the crawl);
//! - its start entries, dead letters, failures and items live in memory
//!   (items go to a JSON Lines writer, so no item stream holds leases
//!   back), not in Redis keys;
//! - its dupefilter is exact whatever mode the spider asks for (the
//!   compact, Bloom and expiring modes bound what Redis keeps over months
//!   of crawling; a local crawl's fingerprints last as long as its run);
//! - it never has a fatal Redis error ([`Backend::fatal`] stays empty).
//!
//! Everything else (order, dupefilter, leases that expire and return,
//! commits that happen once, retries and revisits coming due, politeness
//! slots and the adaptive back-off rule, quotas, pause, the login session's
//! lock, generations and stale marks) is the same, and
//! the suite checks it on both.

use std::time::Duration;

use async_trait::async_trait;

use super::hand_back::HandBack;
use super::outage::Fatal;
use super::pickup::StartWatch;
use super::wake::Wake;
use super::{
    Claimed, Committed, DeadLetter, FailedRecord, Heartbeat, Keys, Leased, PageResult, Patience,
    QueueStatus, Result, RobotsRecord, SessionLock, SessionLogin, SessionRecord, StartClaim, Swept,
};
use crate::stats::{Stat, Tally};

/// What a spider's run asks of the crawl it shares. Each state change is
/// one atomic step: it happens whole or not at all, whatever else runs.
#[async_trait]
pub trait Backend: Send + Sync {
    /// The spider's key names (in a local crawl, the names its keys would
    /// have: they name the queue in messages).
    fn keys(&self) -> &Keys;

    /// This worker's id; lease ownership is checked against it.
    fn worker(&self) -> &str;

    /// Where items go: the key of the spider's sink (a local crawl writes
    /// them to its output instead, and names the list key here).
    fn items_key(&self) -> &str;

    /// Whether other processes share this crawl (Redis) or it is this
    /// process's alone (a local crawl).
    fn is_shared(&self) -> bool;

    /// Where the first error of the run that retrying cannot mend is kept.
    fn fatal(&self) -> Fatal;

    /// What wakes an idle spider when work is announced.
    fn wake(&self) -> Wake;

    /// A watch of the start key for entries that producers push without
    /// announcing them (none where every entry is announced).
    async fn watch_start(&self, recheck: Duration) -> StartWatch;

    // The queue.

    /// Leases up to `max` requests in queue order (higher priority first,
    /// then first in, first out) after putting work that came due back in
    /// the queue (expired leases, retries, revisits). Each lease reserves
    /// its host's next politeness slot; a request whose slot is further
    /// than half a lease away is parked (see [`super::parking`]). Nothing is leased while
    /// paused, beyond `max_pages`, or past a host's `max_pages_per_host`
    /// (such a request is dropped and counted). Nor beyond the worker's
    /// fair share (`fairness`): the requests queued or leased, divided
    /// among the workers that leased or committed within a lease, less the
    /// leases it holds; the same bound holds for a commit's `lease_next`.
    /// (On a sharded spider's shard, among the workers whose home it is:
    /// a worker leases elsewhere only for the slots its home leaves idle,
    /// see [`Backend::slots_idle`].)
    /// When fewer than `max` are leased (or none were asked for), also
    /// returns up to `peek` start entries, not yet claimed.
    async fn lease(&self, max: usize, peek: usize) -> Result<(Vec<Leased>, Vec<String>)>;

    /// From now on, whether this worker's leases (and its commits')
    /// take only requests whose host's politeness slot is free now, parking
    /// the others (see [`super::parking`]): set while the worker holds as
    /// many requests waiting for their hosts' slots as it will, so that it
    /// keeps leasing other hosts' work and claiming start entries.
    fn lease_due_only(&self, due_only: bool);

    /// How many of the worker's download slots stand idle now, as of its
    /// turn. A sharded frontier leases its worker's requests held ahead
    /// from the worker's home shard, and only this many from the others
    /// (see `redis::sharded`); other frontiers have one queue and need
    /// not know.
    fn slots_idle(&self, _idle: usize) {}

    /// How long until work nothing announces may be due, as of the last
    /// lease: the next retry, revisit or lease expiry, or the slot a
    /// request left queued waits for.
    fn next_due_in(&self) -> Option<Duration>;

    /// Leases other workers' commits handed to this worker in its wake-ups
    /// and it has not taken: now its own, to start (a worker looks here
    /// before it asks for a lease) or, when it stops, to hand back. A
    /// backend whose commits hand nothing has none.
    fn take_handed(&self) -> Vec<Leased> {
        Vec::new()
    }

    /// The requests in flight at any worker as the last lease that asked
    /// the backend saw them (none: not known). While some are, the crawl
    /// is not drained, and an idle worker need not read the status to
    /// know it.
    fn in_flight_seen(&self) -> Option<u64> {
        None
    }

    /// The signal this worker's commits raise when it holds over twice
    /// its fair share of the crawl's leases: its requests waiting for a
    /// download slot then go back (see [`HandBack`]). A worker alone in
    /// its crawl, as a local one is, never holds over its share.
    fn hand_back(&self) -> HandBack {
        HandBack::default()
    }

    /// Commits one page in one step, only while its lease is this
    /// worker's: releases the lease, queues its new requests through the
    /// dupefilter, writes its items, dead letter, failure, retry and
    /// revisit, and applies its host's news. A page is committed once:
    /// a second commit of the same lease writes nothing. Then leases up to
    /// `lease_next` requests to replace it. Its `patience` says how long
    /// the commit may wait for other pages to share its step (see
    /// [`super::patience`]).
    ///
    /// A page of more links than one step should carry may queue those
    /// with a fingerprint ahead, in steps of their own, each only while
    /// the lease is this worker's. If the lease is lost between them,
    /// what they queued stays (the dupefilter filters it when the page is
    /// fetched again) and the commit writes nothing more.
    async fn commit(
        &self,
        leased: &Leased,
        page: &PageResult,
        lease_next: usize,
        patience: Patience,
    ) -> Result<(Committed, Vec<Leased>)>;

    /// Extends this worker's leases on `ids`; returns the ids it no longer
    /// holds.
    async fn renew(&self, ids: &[String]) -> Result<Vec<String>>;

    /// Hands this worker's leases on `ids` back to the queue, at their old
    /// places, giving back their hosts' `max_pages_per_host` counts.
    async fn release(&self, ids: &[String]) -> Result<u64>;

    /// Claims start entries: each leaves the start entries only in the
    /// step that queues its request or sets it aside; one claimed by
    /// another worker first is skipped.
    async fn claim_start(&self, claims: &[StartClaim]) -> Result<Claimed>;

    /// The queue sizes, read in one step, with those of every spider that
    /// hands this one work (directly or through others), read in the same
    /// step: [`QueueStatus::drained`] is true only when all are empty at
    /// once (see [`super::pipeline`]).
    async fn status(&self) -> Result<QueueStatus>;

    // Hosts: politeness slots, back-off and robots.txt.

    /// Reserves another politeness slot for `host` for a request leased
    /// before its host was slowed down: at least `spacing` after the slot
    /// before (and at least the host's own spacing), no sooner than `hold`
    /// from now. Returns how long to wait for it, or `None`, reserving
    /// nothing, when that is longer than `limit`.
    async fn reserve_slot(
        &self,
        host: &str,
        spacing: Duration,
        hold: Duration,
        limit: Option<Duration>,
    ) -> Result<Option<Duration>>;

    /// How many hosts adaptive back-off slows right now.
    async fn hosts_backed_off(&self) -> Result<u64>;

    /// The cached robots.txt record of `host`, if any.
    async fn robots_cached(&self, host: &str) -> Result<Option<RobotsRecord>>;

    /// Stores `host`'s robots.txt record (used for `ttl` after its fetch)
    /// and its Crawl-delay (0: none), and frees the host's fetch lock.
    async fn robots_store(
        &self,
        host: &str,
        record: &RobotsRecord,
        crawl_delay: Duration,
        ttl: Duration,
    ) -> Result<()>;

    /// Takes the right to fetch `host`'s robots.txt for `ttl`; false while
    /// another holds it.
    async fn robots_lock(&self, host: &str, ttl: Duration) -> Result<bool>;

    /// Deletes per-host state that can no longer matter, a bounded step.
    async fn sweep(&self, budget: usize, robots_ttl: Duration) -> Result<Swept>;

    /// Makes room ahead of need in a dupefilter that grows in steps (a
    /// Bloom chain's next filter, once the newest is half full), within
    /// what the server can hold; says so when it cannot. A dupefilter that
    /// grows by itself needs nothing.
    async fn grow_dupefilter(&self) -> Result<()>;

    // The login session (`[session]`): one login for the crawl.

    /// The session as stored (a default record before the first login).
    async fn session(&self) -> Result<SessionRecord>;

    /// Takes the login lock for `ttl` as `holder`, unless the session is
    /// newer than generation `seen` and not stale (then returns it), or
    /// another holds the lock. The lock ends by itself at its deadline.
    async fn session_lock(&self, seen: u64, holder: &str, ttl: Duration) -> Result<SessionLock>;

    /// Stores what `holder`'s login gave and frees the lock, while the lock
    /// is still `holder`'s (with `keep_lock`, writes only the history and
    /// keeps it). A login that outlived the lock stores its session, not
    /// its history, when no session newer than its `seen` was stored;
    /// false when nothing was stored.
    async fn session_store(&self, holder: &str, login: &SessionLogin) -> Result<bool>;

    /// Marks generation `generation` stale, once; false when it was
    /// already, or is not the current one.
    async fn session_stale(&self, generation: u64) -> Result<bool>;

    // Stats and records.

    /// Adds stats increments; sets `start_time` once.
    async fn add_stats(&self, tally: &Tally, start_time: Option<&str>) -> Result<()>;

    /// Records the finish as Scrapy does (`finish_time`, `finish_reason`,
    /// `elapsed_time_seconds`).
    async fn record_finish(&self, reason: &str) -> Result<()>;

    /// One counter of the stats (0 when missing or not a number).
    async fn stat(&self, stat: Stat) -> Result<u64>;

    /// Every field of the stats.
    async fn stats(&self) -> Result<Vec<(String, String)>>;

    /// Up to `n` of the requests that failed for good, oldest first.
    async fn failures(&self, n: usize) -> Result<Vec<FailedRecord>>;

    /// Up to `n` of the entries set aside as malformed, oldest first.
    async fn dead_letters(&self, n: usize) -> Result<Vec<DeadLetter>>;

    // The operator's controls and the workers.

    /// Adds start entries after those waiting; returns how many.
    async fn push_start(&self, entries: &[String]) -> Result<u64>;

    /// Stops every worker leasing until [`Backend::resume`]; false if it
    /// was paused already.
    async fn pause(&self) -> Result<bool>;

    /// Lets workers lease again; false if it was not paused.
    async fn resume(&self) -> Result<bool>;

    /// Whether the spider is paused; a worker reads it when its wake
    /// channel says the control changed ([`Wake::control`]).
    async fn paused(&self) -> Result<bool>;

    /// Records this worker's heartbeat.
    async fn heartbeat(&self, beat: &Heartbeat) -> Result<()>;

    /// Takes this worker's heartbeat away (it stopped), and its place in
    /// the crew the fair share of leases is divided among.
    async fn unregister(&self) -> Result<()>;

    /// Says this worker waits for no more work (it stops): no commit
    /// hands it leases from now on. A backend whose commits hand nothing
    /// has nothing to do.
    async fn stop_waiting(&self) -> Result<()> {
        Ok(())
    }

    /// The workers of the crawl, with their heartbeats.
    async fn workers(&self) -> Result<Vec<(String, Heartbeat)>>;
}
