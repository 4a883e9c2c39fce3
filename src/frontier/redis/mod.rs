//! The Redis frontier: the crawl a cluster shares, and the only code that
//! knows Redis key names and scripts. Every state change is one script
//! (see [`scripts`] and its typed [`protocol`]), so it happens whole or not
//! at all:
//!
//! - `claim_start` removes start entries and enqueues their requests in the
//!   same step (an entry another worker claimed first is skipped);
//! - `lease` moves requests from the queue into the in-flight set with a
//!   deadline, after returning expired leases to the queue;
//! - `commit` ([`commits`]) releases pages' leases and, only if each lease
//!   is still this worker's, enqueues its new requests through the
//!   dupefilter, pushes its items and counts its stats, in batches;
//! - `renew` and `release` extend leases and hand them back.
//!
//! Around the crawl: [`hosts`] keeps per-host state for the cluster
//! (politeness slots, robots.txt) and sweeps out what no longer matters,
//! [`admin`] serves the operator's commands (`push-urls`, `flush`,
//! `stats`), [`unreadable`] sets aside entries that are not UTF-8 text,
//! [`takeover`] moves a scrapy-redis queue aside and converts it
//! (`import-queue`), [`outbox`] hands requests between the shards of a
//! sharded spider.
//! Connections, each module using only those before it: [`url`] parses and
//! redacts Redis URLs, `link` holds one connection ([`Conn`]), [`wake`]
//! and [`pickup`] wake idle workers when work arrives (announced, or
//! pushed to a start key by any producer), and [`connection`] holds what a
//! crawl's users share ([`RedisTarget`]).

pub mod admin;
mod commits;
pub mod connection;
pub mod export;
pub mod handed;
pub mod hosts;
mod link;
pub mod outbox;
pub mod pickup;
mod protocol;
pub mod quota;
mod scripts;
mod session;
pub mod shard_count;
pub mod sharded;
pub mod takeover;
mod unreadable;
mod upstreams;
pub mod url;
pub mod wake;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;

pub use connection::RedisTarget;
pub use link::Conn;

use super::error::{err, Result};
use super::{
    now_secs, Backend, Claimed, Committed, DeadLetter, DueOnly, FailedRecord, FrontierError,
    Handoff, Heartbeat, HostOutcome, KeyGroup, Keys, Leased, Options, Pacing, PageResult,
    QueueStatus, Quota, Refused, Revisit, RobotsRecord, SinkOptions, StartClaim, StartKind, Swept,
    MAX_PRIORITY, MAX_REQUEST_BYTES,
};
use crate::frontier::outage::Fatal;
use crate::frontier::pipeline::{Found, Relation};
use crate::frontier::shards::ShardPlace;
use crate::frontier::{HandBack, Patience};
use crate::frontier::{SessionLock, SessionLogin, SessionRecord};
use crate::request::Request;
use crate::stats::{Stat, Tally};
use protocol::{ClaimArgs, ClaimRecord, LeaseArgs, ReleaseArgs, RenewArgs};
use scripts::SCRIPTS;

/// Who leases on a shard of a sharded spider (see `sharded`), as
/// `lease.lua` reads it (`A.visit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visit {
    /// A worker whose home it is (and any worker of an unsharded spider):
    /// one of its crew.
    Home,
    /// A worker whose home had nothing for it: it leases within a share
    /// as one more of the crew but does not join it (the shard's own
    /// workers keep their shares), and is noted as waiting for its work.
    Waits,
    /// A worker filling idle slots beside its home's work: not in the crew
    /// either, nor noted as waiting, so the shard's commits hand it
    /// nothing.
    Fills,
}

impl Visit {
    fn as_str(self) -> &'static str {
        match self {
            Visit::Home => "home",
            Visit::Waits => "waits",
            Visit::Fills => "fills",
        }
    }
}

/// One spider's view of the shared crawl.
#[derive(Clone)]
pub struct RedisFrontier {
    conn: Conn,
    /// The Redis it was connected to: its wake-ups and start-key watches.
    target: RedisTarget,
    pub keys: Keys,
    kind: StartKind,
    /// This worker's id; lease ownership is checked against it.
    worker: String,
    lease: Duration,
    pacing: Pacing,
    /// What the scripts receive to deduplicate (see `dupefilter`).
    dupe_spec: String,
    /// The spiders pages hand links to.
    handoffs: Vec<Handoff>,
    /// The hand-offs of the spider's pipeline, recorded for the spiders
    /// they feed (see [`upstreams`]).
    relations: Vec<Relation>,
    /// The spiders upstream of this one, as the last status found them.
    upstreams_known: Arc<std::sync::Mutex<Vec<Found>>>,
    quota: Quota,
    sink: SinkOptions,
    /// When work nothing announces may be due, as the last lease saw.
    next_due: Arc<std::sync::Mutex<Option<Instant>>>,
    /// The requests in flight at any worker, as the last lease saw them.
    in_flight_seen: Arc<std::sync::Mutex<Option<u64>>>,
    /// The task that commits pages in batches (see [`commits`]).
    batcher: commits::Batcher,
    /// How long a finished page may wait for others to share its commit.
    commit_wait: Duration,
    /// Expiries of a request's lease that make it a dead letter (0: none).
    max_lease_expiries: u32,
    /// Whether its leases take only requests due now (see
    /// [`Backend::lease_due_only`]).
    due_only: DueOnly,
    /// The leases this worker holds, by its own count (its leases and
    /// commits add, its commits and hand-backs take away): the scripts
    /// lease at most its fair share less these.
    held: Arc<AtomicUsize>,
    /// Raised when a commit finds this worker over twice its fair share
    /// (see [`crate::frontier::HandBack`]), or a worker joining the crew
    /// does (see [`RedisFrontier::watch_crew`]).
    hand_back: HandBack,
    /// The subscription that watches the crew for it, from its first
    /// lease on.
    crew_watch: Arc<std::sync::OnceLock<wake::Wake>>,
    /// The first error of this spider's run that retrying cannot mend.
    pub fatal: Fatal,
    /// The last reason given that the Bloom chain cannot grow (said once).
    bloom_refusal_said: Arc<std::sync::Mutex<Option<String>>>,
    /// In a sharded spider, which shard this frontier is: its commits hand
    /// the requests of other shards to its outboxes (see [`outbox`]).
    shard: Option<ShardPlace>,
}

/// The request as the queue stores it.
fn encode(request: &Request) -> Option<String> {
    let json = serde_json::to_string(request).ok()?;
    (json.len() <= MAX_REQUEST_BYTES).then_some(json)
}

/// A record as JSON (records are plain data: encoding cannot fail).
fn to_json(record: &impl serde::Serialize) -> String {
    serde_json::to_string(record).unwrap_or_default()
}

/// A priority as the queue keeps it (see [`MAX_PRIORITY`]).
fn clamped(priority: i64) -> i64 {
    priority.clamp(-MAX_PRIORITY, MAX_PRIORITY)
}

/// Milliseconds, as a script argument.
fn ms(d: Duration) -> String {
    d.as_millis().to_string()
}

/// A flag, as a script argument.
fn flag(on: bool) -> String {
    u8::from(on).to_string()
}

fn fingerprint_arg(request: &Request) -> String {
    if request.dont_filter {
        String::new()
    } else {
        request.fingerprint()
    }
}

impl RedisFrontier {
    /// Connects to Redis for one spider. It fails within about a second
    /// when Redis does not answer: a worker retries on its own schedule (and
    /// says so), a command reports it at once. Once connected, a lost
    /// connection is re-made when next used.
    pub async fn connect(target: &RedisTarget, options: Options) -> Result<RedisFrontier> {
        let conn = target
            .connect()
            .await
            .map_err(err("connect", &options.keys.requests))?;
        Ok(RedisFrontier {
            conn,
            target: target.clone(),
            keys: options.keys,
            kind: options.start_kind,
            worker: options.worker,
            lease: options.lease,
            pacing: options.pacing,
            dupe_spec: options.dupefilter.spec(),
            handoffs: options.handoffs,
            relations: options.relations,
            upstreams_known: Arc::default(),
            quota: options.quota,
            sink: options.sink,
            next_due: Arc::default(),
            in_flight_seen: Arc::default(),
            batcher: commits::Batcher::default(),
            commit_wait: options.commit_wait,
            max_lease_expiries: options.max_lease_expiries,
            due_only: DueOnly::default(),
            held: Arc::default(),
            hand_back: HandBack::default(),
            crew_watch: Arc::default(),
            fatal: Fatal::default(),
            bloom_refusal_said: Arc::default(),
            shard: None,
        })
    }

    /// This frontier as shard `place` of a sharded spider (its keys must
    /// be that shard's, see [`crate::frontier::shards::shard_keys`]).
    pub fn in_shard(mut self, place: ShardPlace) -> RedisFrontier {
        self.shard = Some(place);
        self
    }

    /// Which shard this frontier is, in a sharded spider.
    pub fn shard(&self) -> Option<ShardPlace> {
        self.shard
    }

    /// The `quota_shard` argument of the scripts that lease: in a sharded
    /// spider with `max_pages`, this shard's place (`<index>:<count>`),
    /// whose cap of the limit its leases keep (`page_cap` in
    /// `lib/leasing.lua`); '' otherwise (the limit itself).
    fn quota_shard(&self) -> String {
        match self.shard {
            Some(p) if self.quota.max_pages > 0 => format!("{}:{}", p.index, p.count),
            _ => String::new(),
        }
    }

    /// How far ahead its leases may reserve a host's slot (ms).
    fn max_wait_ms(&self) -> u64 {
        self.due_only.reach(self.lease).as_millis() as u64
    }

    /// Where the spider's items go.
    pub fn sink(&self) -> super::ItemSink {
        self.sink.sink
    }

    /// The key items go to: the list, or the stream (`[items] sink`).
    pub fn items_key(&self) -> &str {
        self.keys.get(self.sink.sink.key_kind())
    }

    /// Leases up to `max` requests; when fewer are queued, also returns up
    /// to `peek` start entries (not yet claimed) to convert and claim.
    pub async fn lease(&self, max: usize, peek: usize) -> Result<(Vec<Leased>, Vec<String>)> {
        self.lease_as(max, peek, Visit::Home).await
    }

    /// A lease (see [`RedisFrontier::lease`]) by a worker of a sharded
    /// spider, on its home shard or visiting another (see [`Visit`]).
    pub async fn lease_as(
        &self,
        max: usize,
        peek: usize,
        visit: Visit,
    ) -> Result<(Vec<Leased>, Vec<String>)> {
        self.watch_crew();
        let args = LeaseArgs {
            worker: self.worker.clone(),
            wake: self.keys.wake.clone(),
            lease_ms: ms(self.lease),
            max: max.to_string(),
            start_kind: self.kind.as_str().to_string(),
            peek: peek.to_string(),
            interval_ms: ms(self.pacing.interval),
            jitter: flag(self.pacing.jitter),
            max_wait_ms: self.max_wait_ms().to_string(),
            max_pages: self.quota.max_pages.to_string(),
            quota_shard: self.quota_shard(),
            max_per_host: self.quota.max_pages_per_host.to_string(),
            max_lease_expiries: self.max_lease_expiries.to_string(),
            sink: self.sink.arg(),
            held: self.held.load(Ordering::Relaxed).to_string(),
            // Leases handed in a wake-up reach it only once Redis has
            // confirmed its subscription (see `handed`).
            takes_handed: flag(self.target.listens(&self.keys.worker_wake(&self.worker))),
            visit: visit.as_str().to_string(),
        };
        let inv = SCRIPTS.lease.call(&self.keys, self.sink.sink, args);
        // Start entries as bytes: one that is not UTF-8 text must not make
        // the whole reply unreadable (see `unreadable`).
        let (leases, start, next_due, in_flight): (Vec<redis::Value>, Vec<Vec<u8>>, i64, u64) = inv
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("lease", &self.keys.requests))?;
        if let Ok(mut seen) = self.in_flight_seen.lock() {
            *seen = Some(in_flight);
        }
        if let Ok(mut due) = self.next_due.lock() {
            *due = u64::try_from(next_due)
                .ok()
                .map(|ms| Instant::now() + Duration::from_millis(ms));
        }
        let leased = self.decode_leases(leases.into_iter());
        self.held.fetch_add(leased.len(), Ordering::Relaxed);
        Ok((leased, self.readable_start(start).await))
    }

    /// From its first lease on, this frontier hands back what it cannot
    /// start as soon as a worker joining the crew finds it over twice its
    /// new share (see [`crate::frontier::fairness::CrewGrew`]), not only
    /// at its next commit. Started then rather than when connected: a
    /// sharded spider's shards get their shared hand-back signal after.
    fn watch_crew(&self) {
        self.crew_watch.get_or_init(|| {
            self.target.watch_crew(
                &self.keys.wake,
                wake::CrewWatch {
                    queue: self.keys.requests.clone(),
                    held: self.held.clone(),
                    hand_back: self.hand_back.clone(),
                },
            )
        });
    }

    /// The leases commits handed to this worker in its wake-ups and it has
    /// not taken yet (see [`handed`]). A shard's are taken by its sharded
    /// frontier, which reads the one wake channel its shards share.
    pub fn take_handed(&self) -> Vec<Leased> {
        if self.shard.is_some() {
            return Vec::new();
        }
        self.handed_messages()
            .into_iter()
            .filter(|h| h.queue == self.keys.requests)
            .flat_map(|h| self.adopt(h.fields))
            .collect()
    }

    /// The handed-leases messages that came on this worker's channel.
    pub(super) fn handed_messages(&self) -> Vec<handed::Handed> {
        let channel = self.keys.worker_wake(&self.worker);
        self.target
            .take_handed(&channel)
            .into_iter()
            .filter_map(|raw| {
                let parsed = handed::parse(&raw);
                if parsed.is_none() {
                    tracing::warn!(channel = %channel, "a wake-up's handed leases cannot be read; they expire and go back to the queue");
                }
                parsed
            })
            .collect()
    }

    /// Leases handed to this worker (`id, JSON, wait, interval` groups),
    /// now its own.
    pub(super) fn adopt(&self, fields: Vec<Vec<u8>>) -> Vec<Leased> {
        let leased = self.decode_leases(fields.into_iter().map(redis::Value::BulkString));
        self.held.fetch_add(leased.len(), Ordering::Relaxed);
        leased
    }

    /// Forgets `n` leases of this worker's count (committed, lost or
    /// handed back).
    fn let_go(&self, n: usize) {
        let _ = self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
                Some(h.saturating_sub(n))
            });
    }

    /// How long until work nothing announces may be due, as of the last
    /// lease: the next scheduled revisit, retry or lease expiry, or the
    /// slot a request left queued waits for. An idle worker wakes then.
    pub fn next_due_in(&self) -> Option<Duration> {
        let due = (*self.next_due.lock().ok()?)?;
        Some(due.saturating_duration_since(Instant::now()))
    }

    /// Parses `id, JSON, wait, interval` groups; a request whose JSON is unusable
    /// (or not UTF-8 text) becomes a dead letter to commit. A request whose
    /// id is not UTF-8 text cannot be committed by id: it is set aside by a
    /// task of its own (see `unreadable`).
    fn decode_leases(&self, mut values: impl Iterator<Item = redis::Value>) -> Vec<Leased> {
        let mut out = Vec::new();
        let mut bad_ids = Vec::new();
        let bytes = |v: redis::Value| redis::from_redis_value::<Vec<u8>>(&v).ok();
        let ms = |v: redis::Value| {
            Duration::from_millis(redis::from_redis_value::<u64>(&v).unwrap_or(0))
        };
        while let (Some(id), Some(json), Some(wait), Some(interval)) =
            (values.next(), values.next(), values.next(), values.next())
        {
            let (Some(id), Some(json)) = (bytes(id), bytes(json)) else {
                continue;
            };
            let id = match String::from_utf8(id) {
                Ok(id) => id,
                Err(e) => {
                    bad_ids.push(e.into_bytes());
                    continue;
                }
            };
            let json = match String::from_utf8(json) {
                Ok(json) => json,
                Err(e) => {
                    out.push(Leased {
                        id,
                        request: Err(DeadLetter::not_utf8(
                            &self.keys.requests,
                            e.as_bytes(),
                            "request record",
                        )),
                        wait: ms(wait),
                        paced_with: ms(interval),
                    });
                    continue;
                }
            };
            // With room for the count of lease expiries a request may lead
            // with (`{"lease_expiries":3,`, see `requeue_expired`).
            let request = if json.len() > MAX_REQUEST_BYTES + 32 {
                Err(format!(
                    "request is {} bytes, over the {MAX_REQUEST_BYTES}-byte limit",
                    json.len()
                ))
            } else {
                serde_json::from_str::<Request>(&json)
                    .map_err(|e| format!("request is not valid JSON: {e}"))
            };
            let request =
                request.map_err(|reason| DeadLetter::new(&self.keys.requests, &json, &reason));
            out.push(Leased {
                id,
                request,
                wait: ms(wait),
                paced_with: ms(interval),
            });
        }
        if !bad_ids.is_empty() {
            let frontier = self.clone();
            tokio::spawn(async move {
                if let Err(e) = frontier.set_aside_leases(&bad_ids).await {
                    tracing::warn!(error = %e, "cannot set aside leased requests whose id is not UTF-8 text; their leases expire and the next lease tries again");
                }
            });
        }
        out
    }

    /// Extends this worker's leases on `ids`; returns the ids it lost.
    pub async fn renew(&self, ids: &[String]) -> Result<Vec<String>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let args = RenewArgs {
            worker: self.worker.clone(),
            lease_ms: ms(self.lease),
        };
        SCRIPTS
            .renew
            .call(&self.keys, self.sink.sink, args)
            .values(ids)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("renew", &self.keys.inflight))
    }

    /// Hands this worker's leases on `ids` back to the queue.
    pub async fn release(&self, ids: &[String]) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        self.let_go(ids.len());
        let args = ReleaseArgs {
            worker: self.worker.clone(),
            wake: self.keys.wake.clone(),
        };
        SCRIPTS
            .release
            .call(&self.keys, self.sink.sink, args)
            .values(ids)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("release", &self.keys.inflight))
    }

    /// Claims start entries (see `scripts/claim_start.lua`).
    pub async fn claim_start(&self, claims: &[StartClaim]) -> Result<Claimed> {
        if claims.is_empty() {
            return Ok(Claimed::default());
        }
        let k = &self.keys;
        let args = ClaimArgs {
            start_kind: self.kind.as_str().to_string(),
            wake: k.wake.clone(),
            dupe_spec: self.dupe_spec.clone(),
        };
        let mut invocation = SCRIPTS.claim_start.call(k, self.sink.sink, args);
        for to in self.shard.iter().flat_map(|place| place.others()) {
            invocation.more_key(&k.outbox(to));
        }
        for c in claims {
            invocation.record(self.claim_record(c));
        }
        let (claimed, enqueued, filtered, dead): (u64, u64, u64, u64) = invocation
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("claim start entries from", &k.start_urls))?;
        Ok(Claimed {
            claimed,
            enqueued,
            filtered,
            dead,
        })
    }

    /// A start entry's record for `claim_start.lua`: its request, or its
    /// dead letter when it cannot become one.
    fn claim_record(&self, c: &StartClaim) -> ClaimRecord {
        let outcome = c.outcome.as_ref().map_err(|e| e.clone()).and_then(|r| {
            encode(r).map(|json| (r, json)).ok_or_else(|| {
                Refused::from(format!(
                    "request is over the {MAX_REQUEST_BYTES}-byte limit"
                ))
            })
        });
        match outcome {
            Ok((r, json)) => {
                let to = self.shard.and_then(|p| Some((p, p.elsewhere(r)?)));
                ClaimRecord {
                    entry: c.entry.clone(),
                    outcome: match to {
                        Some((place, to)) => (place.position_of(to) + 1).to_string(),
                        None => "req".to_string(),
                    },
                    token: if to.is_some() && r.dont_filter {
                        outbox::hand_token(&self.worker)
                    } else {
                        String::new()
                    },
                    fingerprint_or_stat: fingerprint_arg(r),
                    priority: clamped(r.priority).to_string(),
                    json,
                }
            }
            Err(refused) => ClaimRecord {
                entry: c.entry.clone(),
                outcome: "dead".to_string(),
                fingerprint_or_stat: refused.stat.map_or("", |s| s.name).to_string(),
                priority: "0".to_string(),
                json: to_json(&DeadLetter::new(
                    &self.keys.start_urls,
                    &c.entry,
                    &refused.reason,
                )),
                token: String::new(),
            },
        }
    }

    /// The queue sizes, read in one step, with those of the spiders that
    /// hand this one work (see [`upstreams`]).
    pub async fn status(&self) -> Result<QueueStatus> {
        self.status_with_upstreams().await
    }
}

/// The contract, kept by the inherent methods of this module and of
/// [`commits`], [`hosts`] and [`admin`] (each does its work in one script
/// or one atomic pipeline).
#[async_trait]
impl Backend for RedisFrontier {
    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn worker(&self) -> &str {
        &self.worker
    }

    fn items_key(&self) -> &str {
        RedisFrontier::items_key(self)
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn fatal(&self) -> Fatal {
        self.fatal.clone()
    }

    fn wake(&self) -> wake::Wake {
        let own = self.keys.worker_wake(&self.worker);
        self.target.wake_for(&self.keys.wake, Some(&own))
    }

    async fn watch_start(&self, recheck: Duration) -> pickup::StartWatch {
        self.target
            .watch_start(&self.keys.start_urls, self.kind, recheck)
            .await
    }

    async fn lease(&self, max: usize, peek: usize) -> Result<(Vec<Leased>, Vec<String>)> {
        RedisFrontier::lease(self, max, peek).await
    }

    fn lease_due_only(&self, due_only: bool) {
        self.due_only.set(due_only);
    }

    fn next_due_in(&self) -> Option<Duration> {
        RedisFrontier::next_due_in(self)
    }

    fn take_handed(&self) -> Vec<Leased> {
        RedisFrontier::take_handed(self)
    }

    fn hand_back(&self) -> HandBack {
        self.hand_back.clone()
    }

    fn in_flight_seen(&self) -> Option<u64> {
        *self.in_flight_seen.lock().ok()?
    }

    async fn commit(
        &self,
        leased: &Leased,
        page: &PageResult,
        lease_next: usize,
        patience: Patience,
    ) -> Result<(Committed, Vec<Leased>)> {
        RedisFrontier::commit(self, leased, page, lease_next, patience).await
    }

    async fn renew(&self, ids: &[String]) -> Result<Vec<String>> {
        RedisFrontier::renew(self, ids).await
    }

    async fn release(&self, ids: &[String]) -> Result<u64> {
        RedisFrontier::release(self, ids).await
    }

    async fn claim_start(&self, claims: &[StartClaim]) -> Result<Claimed> {
        RedisFrontier::claim_start(self, claims).await
    }

    async fn status(&self) -> Result<QueueStatus> {
        RedisFrontier::status(self).await
    }

    async fn reserve_slot(
        &self,
        host: &str,
        spacing: Duration,
        hold: Duration,
        limit: Option<Duration>,
    ) -> Result<Option<Duration>> {
        RedisFrontier::reserve_slot(self, host, spacing, hold, limit).await
    }

    async fn hosts_backed_off(&self) -> Result<u64> {
        RedisFrontier::hosts_backed_off(self).await
    }

    async fn robots_cached(&self, host: &str) -> Result<Option<RobotsRecord>> {
        RedisFrontier::robots_cached(self, host).await
    }

    async fn robots_store(
        &self,
        host: &str,
        record: &RobotsRecord,
        crawl_delay: Duration,
        ttl: Duration,
    ) -> Result<()> {
        RedisFrontier::robots_store(self, host, record, crawl_delay, ttl).await
    }

    async fn robots_lock(&self, host: &str, ttl: Duration) -> Result<bool> {
        RedisFrontier::robots_lock(self, host, ttl).await
    }

    async fn sweep(&self, budget: usize, robots_ttl: Duration) -> Result<Swept> {
        RedisFrontier::sweep(self, budget, robots_ttl).await
    }

    async fn session(&self) -> Result<SessionRecord> {
        self.read_session().await
    }

    async fn session_lock(&self, seen: u64, holder: &str, ttl: Duration) -> Result<SessionLock> {
        self.lock_session(seen, holder, ttl).await
    }

    async fn session_store(&self, holder: &str, login: &SessionLogin) -> Result<bool> {
        self.store_session(holder, login).await
    }

    async fn session_stale(&self, generation: u64) -> Result<bool> {
        self.mark_session_stale(generation).await
    }

    async fn grow_dupefilter(&self) -> Result<()> {
        if let admin::Grown::Refused { reason, .. } = RedisFrontier::grow_dupefilter(self).await? {
            self.say_no_room(&reason);
        }
        Ok(())
    }

    async fn add_stats(&self, tally: &Tally, start_time: Option<&str>) -> Result<()> {
        RedisFrontier::add_stats(self, tally, start_time).await
    }

    async fn record_finish(&self, reason: &str) -> Result<()> {
        RedisFrontier::record_finish(self, reason).await
    }

    async fn stat(&self, stat: Stat) -> Result<u64> {
        RedisFrontier::stat(self, stat).await
    }

    async fn stats(&self) -> Result<Vec<(String, String)>> {
        RedisFrontier::stats(self).await
    }

    async fn failures(&self, n: usize) -> Result<Vec<FailedRecord>> {
        self.recent_failures(n).await
    }

    async fn dead_letters(&self, n: usize) -> Result<Vec<DeadLetter>> {
        self.recent_dead_letters(n).await
    }

    async fn push_start(&self, entries: &[String]) -> Result<u64> {
        RedisFrontier::push_start(self, entries, 0.0, None).await
    }

    async fn pause(&self) -> Result<bool> {
        RedisFrontier::pause(self).await
    }

    async fn paused(&self) -> Result<bool> {
        RedisFrontier::paused(self).await
    }

    async fn resume(&self) -> Result<bool> {
        RedisFrontier::resume(self).await
    }

    async fn heartbeat(&self, beat: &Heartbeat) -> Result<()> {
        RedisFrontier::heartbeat(self, beat).await
    }

    async fn unregister(&self) -> Result<()> {
        RedisFrontier::unregister(self).await
    }

    async fn stop_waiting(&self) -> Result<()> {
        RedisFrontier::stop_waiting(self).await
    }

    async fn workers(&self) -> Result<Vec<(String, Heartbeat)>> {
        RedisFrontier::workers(self).await
    }
}
