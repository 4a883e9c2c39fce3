//! The frontier: the only module that knows Redis key names and scripts.
//!
//! Every state change is one Lua script, so it happens whole or not at all:
//!
//! - [`RedisFrontier::claim_start`] removes start entries and enqueues their
//!   requests in the same step (an entry another worker claimed first is
//!   skipped);
//! - [`RedisFrontier::lease`] moves requests from the queue into the in-flight
//!   set with a deadline, after returning expired leases to the queue;
//! - [`RedisFrontier::commit`] releases one page's lease and, only if the lease is
//!   still this worker's, enqueues its new requests through the dupefilter,
//!   pushes its items and counts its stats — so items are pushed exactly once
//!   even when workers die at any instant;
//! - [`RedisFrontier::renew`] and [`RedisFrontier::release`] extend leases and hand
//!   them back.
//!
//! Around the crawl: [`hosts`] keeps per-host state for the cluster
//! (politeness slots, robots.txt) and sweeps out what no longer matters, [`admin`] serves the operator's commands
//! (`push-urls`, `flush`, `stats`), [`outage`] lets callers ride out a
//! Redis outage, and [`wake`] and [`pickup`] wake idle workers when work
//! arrives (announced, or pushed to a start key by any producer). [`keys`] names every key, [`records`]
//! defines every JSON record besides requests and items, and [`scripts`]
//! loads the Lua scripts of `scripts/*.lua`.

pub mod admin;
mod commits;
pub mod connection;
mod dispatch;
pub mod dupefilter;
pub mod host_news;
pub mod hosts;
pub mod keys;
pub mod local;
pub mod outage;
pub mod pickup;
pub mod records;
pub mod redis_url;
mod scripts;
mod unreadable;
pub mod wake;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

pub use connection::{Conn, RedisTarget};
pub use dispatch::Frontier;
pub use dupefilter::{bloom_chain, bloom_plan, BloomPlan, Dupefilter};
pub use keys::{ItemSink, KeyGroup, KeyKind, KeyMode, Keys, StartKind};
pub use local::LocalFrontier;
pub use records::{now_secs, DeadLetter, FailedRecord, Heartbeat, RobotsError, RobotsRecord};

use crate::request::{Request, Task};
use crate::stats::{Stat, Tally};
use scripts::SCRIPTS;

/// The largest request JSON the queue holds; larger ones are refused where
/// they are made and set aside where they are found.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// Priorities are clamped to this range so the queue score stays exact.
pub const MAX_PRIORITY: i64 = 4095;

/// A Redis operation that failed: what was done, on which key, and what
/// Redis said (part of the message, so one line tells it all).
#[derive(Debug, thiserror::Error)]
#[error("Redis {op} on `{key}` failed: {cause}")]
pub struct FrontierError {
    pub op: &'static str,
    pub key: String,
    pub cause: redis::RedisError,
}

impl FrontierError {
    /// Whether the error is Redis being unreachable (retry later) rather
    /// than a mistake (report it).
    pub fn is_outage(&self) -> bool {
        let e = &self.cause;
        e.is_io_error()
            || e.is_connection_refusal()
            || e.is_connection_dropped()
            || e.is_timeout()
            || matches!(
                e.kind(),
                redis::ErrorKind::BusyLoadingError
                    | redis::ErrorKind::TryAgain
                    | redis::ErrorKind::ClusterDown
            )
    }
}

impl FrontierError {
    /// Whether the error will not heal by retrying: a key of the wrong
    /// type (made by another tool), a missing or wrong password, an ACL
    /// permission missing. A person must act; the worker stops.
    pub fn is_fatal(&self) -> bool {
        self.fatal_kind().is_some()
    }

    /// WRONGTYPE, NOPERM or NOAUTH for an error that will not heal. A
    /// script's command refused by an ACL answers ERR, not NOPERM.
    fn fatal_kind(&self) -> Option<&'static str> {
        let e = &self.cause;
        match e.code() {
            Some("WRONGTYPE") => Some("WRONGTYPE"),
            Some("NOPERM") => Some("NOPERM"),
            Some("NOAUTH" | "WRONGPASS") => Some("NOAUTH"),
            Some("ERR")
                if e.detail()
                    .is_some_and(|d| d.starts_with("The user executing the script can't")) =>
            {
                Some("NOPERM")
            }
            _ if e.kind() == redis::ErrorKind::AuthenticationFailed => Some("NOAUTH"),
            _ => None,
        }
    }

    /// The key of a WRONGTYPE error: the one a script's check names
    /// ("… key <name> … nothing was written"), else the operation's.
    fn wrong_key(&self) -> &str {
        self.cause
            .detail()
            .filter(|d| d.contains("nothing was"))
            .and_then(|d| d.split("key ").nth(1))
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or(&self.key)
    }

    /// What to do about a fatal error (see [`FrontierError::is_fatal`]).
    pub fn remedy(&self) -> String {
        match self.fatal_kind() {
            Some("WRONGTYPE") => format!(
                "a key holds another type than crawlworker keeps there (made by another tool, or by a spider whose [keys] name the same key?): delete or rename it (e.g. `redis-cli RENAME {key} {key}.bak`), then start the worker again. Nothing of the failed step was written; the pages in flight go back to the queue",
                key = self.wrong_key()
            ),
            Some("NOPERM") => "the Redis user lacks a permission crawlworker needs (ACL): allow it the commands and keys of the spider (e.g. `ACL SETUSER <user> +@all ~<spider>:*` and `&*` for its channels), then start the worker again".to_string(),
            _ => "Redis refused the password (or wants one): put the user and password in the Redis URL (redis://user:password@host:port, or REDIS_URL), then start the worker again".to_string(),
        }
    }
}

type Result<T> = std::result::Result<T, FrontierError>;

fn err<'a>(op: &'static str, key: &'a str) -> impl FnOnce(redis::RedisError) -> FrontierError + 'a {
    move |cause| FrontierError {
        op,
        key: key.to_string(),
        cause,
    }
}

/// One leased request: its id, the request (or, when its JSON was
/// unusable, the dead letter to commit instead) and how long to wait for
/// its host's politeness slot.
#[derive(Debug, Clone)]
pub struct Leased {
    pub id: String,
    pub request: std::result::Result<Request, DeadLetter>,
    pub wait: Duration,
    /// The spacing its slot was reserved with (to know whether a Crawl-delay
    /// learnt later was applied).
    pub paced_with: Duration,
}

/// A retry to schedule: the request (its `retry_times` already counted)
/// returns to the queue after `delay`, waiting in Redis, not in a worker.
#[derive(Debug, Clone)]
pub struct Retry {
    pub request: Request,
    pub delay: Duration,
}

/// The longest politeness wait worth holding a lease for: half a lease
/// (`lease_timeout`), at least a second, so a waiting request never needs
/// more than a couple of renewals and a slow host's requests stay queued
/// for whoever's turn comes.
pub fn max_wait(lease: Duration) -> Duration {
    (lease / 2).max(Duration::from_secs(1))
}

/// What a response says about its host's load, for adaptive back-off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HostOutcome {
    /// Nothing to learn (no response, or back-off is off).
    #[default]
    None,
    /// A 429, or a 5xx with Retry-After: slow the host down at once, for
    /// at least `wait` (its Retry-After) for the whole cluster.
    Slow { wait: Duration },
    /// Another 5xx: counts towards the host's recent error share, which
    /// slows it only once it is high (see `host_news` in commit.lua).
    Error,
    /// A good response: let the host recover.
    Ok,
}

/// The spider's politeness, applied by the leasing scripts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pacing {
    /// Minimum time between two requests to one host (0: none).
    pub interval: Duration,
    /// Randomise it 0.5x-1.5x, as Scrapy's RANDOMIZE_DOWNLOAD_DELAY.
    pub jitter: bool,
    /// The slowest pace adaptive back-off imposes.
    pub backoff_max: Duration,
}

/// What one page adds to the crawl, committed in one step.
#[derive(Debug, Clone, Default)]
pub struct PageResult {
    pub requests: Vec<Request>,
    /// Links handed to other spiders, pushed to their start keys.
    pub tasks: Vec<Task>,
    pub items: Vec<Map<String, Value>>,
    /// Stats increments.
    pub stats: Tally,
    /// Set aside as malformed.
    pub dead: Option<DeadLetter>,
    /// Failed for good.
    pub failed: Option<FailedRecord>,
    /// Try the request again later.
    pub retry: Option<Retry>,
    /// Adaptive back-off news about the request's host.
    pub host: HostOutcome,
    /// For a page a `revisit` rule fetched: when to fetch it again, or to
    /// take it off the schedule.
    pub revisit: Option<Revisit>,
}

/// What a page's commit does to the revisit schedule. A page is scheduled
/// by its request's fingerprint, so one page is scheduled once however
/// many ways it was reached.
#[derive(Debug, Clone)]
pub enum Revisit {
    /// Fetch `request` again `after` this long (replacing an earlier
    /// schedule of the same page).
    At { request: Request, after: Duration },
    /// Take the page off the schedule (it answered 404 or 410).
    Drop { request: Request },
}

/// What a commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Committed {
    Done {
        enqueued: u64,
        filtered: u64,
    },
    /// The lease had expired and another worker holds (or finished) the
    /// request: nothing was written.
    LeaseLost,
}

/// A start entry as read, and what it becomes (or why it cannot).
#[derive(Debug, Clone)]
pub struct StartClaim {
    pub entry: String,
    pub outcome: std::result::Result<Request, Refused>,
}

/// Why a start entry cannot become a request: it is set aside in the
/// dead-letter key with `reason`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub reason: String,
    /// Counted besides `deadletter/count` (e.g. `offsite/filtered`).
    pub stat: Option<&'static Stat>,
}

impl From<String> for Refused {
    fn from(reason: String) -> Refused {
        Refused { reason, stat: None }
    }
}

/// What claiming start entries did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Claimed {
    pub claimed: u64,
    pub enqueued: u64,
    pub filtered: u64,
    pub dead: u64,
}

/// Sizes of a crawl's queues, read in one step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueStatus {
    pub start: u64,
    pub queued: u64,
    pub inflight: u64,
    pub dead: u64,
    pub failed: u64,
    pub dupefilter: u64,
    pub items: u64,
    /// Retries waiting for their time.
    pub delayed: u64,
    /// Pages a `revisit` rule will fetch again.
    pub scheduled: u64,
    /// Scheduled pages whose time has passed and that are not fetched
    /// yet: near zero in a cluster that keeps up.
    pub overdue: u64,
    /// `crawlworker pause`: no worker leases until `resume`.
    pub paused: bool,
    /// The cluster has received `max_pages` responses and leases no more.
    pub page_limit_reached: bool,
    /// The item stream's consumers lag by `items_stream_max_backlog`
    /// items: no worker leases until they catch up.
    pub items_backlog_full: bool,
}

impl QueueStatus {
    /// Nothing left to do anywhere in the cluster.
    pub fn drained(&self) -> bool {
        self.start == 0 && self.queued == 0 && self.inflight == 0 && self.delayed == 0
    }
}

/// Another spider a follow entry hands its links to: each link becomes a
/// scrapy-redis task (`{"url": …, "meta": {…}}`) pushed to its start key
/// in the page's commit, after this spider's dupefilter let it through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    pub spider: String,
    pub start_key: String,
    pub kind: StartKind,
    /// Its wake channel, so its idle workers start at once.
    pub wake: String,
    /// The task fields it requires (checked against `meta` when loading).
    pub task_fields: Vec<String>,
}

/// What a frontier needs to know of its spider and its worker.
#[derive(Debug, Clone)]
pub struct Options {
    pub keys: Keys,
    pub start_kind: StartKind,
    /// This worker's id; lease ownership is checked against it.
    pub worker: String,
    /// How long a lease lasts unless renewed.
    pub lease: Duration,
    pub pacing: Pacing,
    pub dupefilter: Dupefilter,
    /// The spiders its pages hand links to, by index (see [`Task`]).
    pub handoffs: Vec<Handoff>,
    pub quota: Quota,
    /// Where items go, and the stream's back-pressure bound.
    pub sink: SinkOptions,
    /// How long a finished page that may wait (see [`commits`]) waits for
    /// others to share its commit's script call (0: only pages finished
    /// while the previous commit was on its way share it).
    pub commit_wait: Duration,
}

/// How much the whole cluster may fetch, enforced where requests are
/// leased (0: no limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quota {
    /// Responses received, in all.
    pub max_pages: u64,
    /// Pages leased per host.
    pub max_pages_per_host: u64,
}

/// Where a spider's items go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SinkOptions {
    pub sink: ItemSink,
    /// For a stream: no leases while this many items are not acknowledged
    /// (0: no bound). See `items_backlog` in `scripts/prelude.lua`.
    pub max_backlog: u64,
}

impl SinkOptions {
    /// The commit and lease scripts' argument: `list`, or
    /// `stream:<max backlog>`.
    fn arg(&self) -> String {
        match self.sink {
            ItemSink::List => "list".to_string(),
            ItemSink::Stream => format!("stream:{}", self.max_backlog),
        }
    }
}

/// One spider's view of the shared crawl.
#[derive(Clone)]
pub struct RedisFrontier {
    conn: Conn,
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
    quota: Quota,
    sink: SinkOptions,
    /// When work nothing announces may be due, as the last lease saw.
    next_due: Arc<std::sync::Mutex<Option<Instant>>>,
    /// The task that commits pages in batches (see [`commits`]).
    batcher: commits::Batcher,
    /// How long a finished page may wait for others to share its commit.
    commit_wait: Duration,
    /// The first error of this spider's run that retrying cannot mend.
    pub fatal: outage::Fatal,
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
            keys: options.keys,
            kind: options.start_kind,
            worker: options.worker,
            lease: options.lease,
            pacing: options.pacing,
            dupe_spec: options.dupefilter.spec(),
            handoffs: options.handoffs,
            quota: options.quota,
            sink: options.sink,
            next_due: Arc::default(),
            batcher: commits::Batcher::default(),
            commit_wait: options.commit_wait,
            fatal: outage::Fatal::default(),
        })
    }

    fn max_wait_ms(&self) -> u64 {
        max_wait(self.lease).as_millis() as u64
    }

    /// The keys every leasing script takes first (see `scripts/lease.lua`).
    fn shared_keys<'a>(&'a self, inv: &mut scripts::Invocation<'a>) {
        let k = &self.keys;
        inv.key(&k.requests)
            .key(&k.request_data)
            .key(&k.inflight)
            .key(&k.leases)
            .key(&k.dead)
            .key(&k.stats)
            .key(&k.delayed)
            .key(&k.delayed_scores)
            .key(&k.pace)
            .key(&k.host_delay)
            .key(&k.backoff)
            .key(&k.sequence)
            .key(&k.schedule)
            .key(&k.schedule_data)
            .key(&k.schedule_due)
            .key(&k.control)
            .key(&k.host_pages);
    }

    pub fn worker(&self) -> &str {
        &self.worker
    }

    /// Where this spider's items go.
    pub fn sink(&self) -> ItemSink {
        self.sink.sink
    }

    /// The key items go to: the list, or the stream (`[items] sink`).
    pub fn items_key(&self) -> &str {
        self.keys.get(self.sink.sink.key_kind())
    }

    /// Leases up to `max` requests; when fewer are queued, also returns up
    /// to `peek` start entries (not yet claimed) to convert and claim.
    pub async fn lease(&self, max: usize, peek: usize) -> Result<(Vec<Leased>, Vec<String>)> {
        let k = &self.keys;
        let mut inv = SCRIPTS.lease.prepare_invoke();
        self.shared_keys(&mut inv);
        inv.key(&k.start_urls)
            .key(self.items_key())
            .arg(&self.worker)
            .arg(self.lease.as_millis() as u64)
            .arg(max)
            .arg(self.kind.as_str())
            .arg(peek)
            .arg(self.pacing.interval.as_millis() as u64)
            .arg(u8::from(self.pacing.jitter))
            .arg(self.max_wait_ms())
            .arg(self.quota.max_pages)
            .arg(self.quota.max_pages_per_host)
            .arg(self.sink.arg());
        // Start entries as bytes: one that is not UTF-8 text must not make
        // the whole reply unreadable (see `unreadable`).
        let (leases, start, next_due): (Vec<redis::Value>, Vec<Vec<u8>>, i64) = inv
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("lease", &k.requests))?;
        if let Ok(mut due) = self.next_due.lock() {
            *due = u64::try_from(next_due)
                .ok()
                .map(|ms| Instant::now() + Duration::from_millis(ms));
        }
        let leased = self.decode_leases(leases.into_iter());
        Ok((leased, self.readable_start(start).await))
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
            let request = if json.len() > MAX_REQUEST_BYTES {
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
        SCRIPTS
            .renew
            .key(&self.keys.inflight)
            .key(&self.keys.leases)
            .arg(&self.worker)
            .arg(self.lease.as_millis() as u64)
            .arg(ids)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("renew", &self.keys.inflight))
    }

    /// Hands this worker's leases on `ids` back to the queue.
    pub async fn release(&self, ids: &[String]) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        SCRIPTS
            .release
            .key(&self.keys.requests)
            .key(&self.keys.inflight)
            .key(&self.keys.leases)
            .key(&self.keys.request_data)
            .key(&self.keys.host_pages)
            .arg(&self.worker)
            .arg(ids)
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
        let mut invocation = SCRIPTS.claim_start.prepare_invoke();
        invocation
            .key(&k.start_urls)
            .key(&k.requests)
            .key(&k.request_data)
            .key(&k.dupefilter)
            .key(&k.sequence)
            .key(&k.dead)
            .key(&k.stats)
            .key(&k.dupefilter_meta)
            .arg(self.kind.as_str())
            .arg(&k.wake)
            .arg(&self.dupe_spec);
        for c in claims {
            let outcome = c.outcome.as_ref().map_err(|e| e.clone()).and_then(|r| {
                encode(r).map(|json| (r, json)).ok_or_else(|| {
                    Refused::from(format!(
                        "request is over the {MAX_REQUEST_BYTES}-byte limit"
                    ))
                })
            });
            match outcome {
                Ok((r, json)) => invocation
                    .arg(&c.entry)
                    .arg("req")
                    .arg(fingerprint_arg(r))
                    .arg(r.priority.clamp(-MAX_PRIORITY, MAX_PRIORITY))
                    .arg(json),
                Err(refused) => invocation
                    .arg(&c.entry)
                    .arg("dead")
                    .arg(refused.stat.map_or("", |s| s.name))
                    .arg(0)
                    .arg(to_json(&DeadLetter::new(
                        &k.start_urls,
                        &c.entry,
                        &refused.reason,
                    ))),
            };
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

    /// The queue sizes, read in one step.
    pub async fn status(&self) -> Result<QueueStatus> {
        let k = &self.keys;
        let v: Vec<u64> = SCRIPTS
            .status
            .key(&k.start_urls)
            .key(&k.requests)
            .key(&k.inflight)
            .key(&k.dead)
            .key(&k.failed)
            .key(&k.dupefilter)
            .key(self.items_key())
            .key(&k.delayed)
            .key(&k.dupefilter_meta)
            .key(&k.schedule)
            .key(&k.schedule_due)
            .key(&k.control)
            .arg(self.kind.as_str())
            .arg(&self.dupe_spec)
            .arg(self.sink.sink.as_str())
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("read the status of", &k.requests))?;
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        Ok(QueueStatus {
            start: at(0),
            queued: at(1),
            inflight: at(2),
            dead: at(3),
            failed: at(4),
            dupefilter: at(5),
            items: at(6),
            delayed: at(7),
            scheduled: at(8),
            overdue: at(9),
            paused: at(10) == 1,
            page_limit_reached: at(11) == 1,
            items_backlog_full: at(12) == 1,
        })
    }
}
