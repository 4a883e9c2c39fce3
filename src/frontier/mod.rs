//! The frontier: the only module that knows Redis key names and scripts.
//!
//! Every state change is one Lua script, so it happens whole or not at all:
//!
//! - [`Frontier::claim_start`] removes start entries and enqueues their
//!   requests in the same step (an entry another worker claimed first is
//!   skipped);
//! - [`Frontier::lease`] moves requests from the queue into the in-flight
//!   set with a deadline, after returning expired leases to the queue;
//! - [`Frontier::commit`] releases one page's lease and, only if the lease is
//!   still this worker's, enqueues its new requests through the dupefilter,
//!   pushes its items and counts its stats — so items are pushed exactly once
//!   even when workers die at any instant;
//! - [`Frontier::renew`] and [`Frontier::release`] extend leases and hand
//!   them back.
//!
//! Scripts live in `scripts/*.lua`, each prefixed with `prelude.lua`.

pub mod keys;
pub mod redis_url;
pub mod wake;

use std::sync::LazyLock;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::Script;
use serde_json::json;

pub use keys::Keys;

use crate::request::Request;
use crate::spider::{Spider, StartKind};

/// The largest request JSON the queue holds; larger ones are refused where
/// they are made and set aside where they are found.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// Priorities are clamped to this range so the queue score stays exact.
pub const MAX_PRIORITY: i64 = 4095;

/// Everything a dead-letter entry shows of the entry it sets aside.
const PREVIEW_BYTES: usize = 1024;

struct Scripts {
    lease: Script,
    commit: Script,
    claim_start: Script,
    renew: Script,
    release: Script,
    status: Script,
    push_start: Script,
    requeue_failed: Script,
    pace: Script,
}

fn script(body: &str) -> Script {
    Script::new(&format!("{}\n{body}", include_str!("scripts/prelude.lua")))
}

static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    lease: script(include_str!("scripts/lease.lua")),
    commit: script(include_str!("scripts/commit.lua")),
    claim_start: script(include_str!("scripts/claim_start.lua")),
    renew: script(include_str!("scripts/renew.lua")),
    release: script(include_str!("scripts/release.lua")),
    status: script(include_str!("scripts/status.lua")),
    push_start: script(include_str!("scripts/push_start.lua")),
    requeue_failed: script(include_str!("scripts/requeue_failed.lua")),
    pace: script(include_str!("scripts/pace.lua")),
});

/// A Redis operation that failed.
#[derive(Debug, thiserror::Error)]
#[error("Redis {op} on `{key}` failed: {source}")]
pub struct FrontierError {
    pub op: &'static str,
    pub key: String,
    #[source]
    pub source: redis::RedisError,
}

impl FrontierError {
    /// Whether the error is Redis being unreachable (retry later) rather
    /// than a mistake (report it).
    pub fn is_outage(&self) -> bool {
        let e = &self.source;
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

type Result<T> = std::result::Result<T, FrontierError>;

fn err<'a>(op: &'static str, key: &'a str) -> impl FnOnce(redis::RedisError) -> FrontierError + 'a {
    move |source| FrontierError {
        op,
        key: key.to_string(),
        source,
    }
}

/// One leased request: its id, the request (or why its JSON was unusable)
/// and how long to wait for its host's politeness slot.
#[derive(Debug, Clone)]
pub struct Leased {
    pub id: String,
    pub request: std::result::Result<Request, String>,
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

/// What a response says about its host's load, for adaptive back-off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HostOutcome {
    /// Nothing to learn (no response, or back-off is off).
    #[default]
    None,
    /// A 429 or 503: slow the host down; `wait` is its Retry-After.
    Slow { wait: Duration },
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

impl Pacing {
    /// From the settings: the larger of `download_delay` and the interval
    /// `max_requests_per_second` implies.
    pub fn from_settings(s: &crate::settings::Settings) -> Pacing {
        let rate = if s.max_requests_per_second > 0.0 {
            Duration::from_secs_f64(1.0 / s.max_requests_per_second)
        } else {
            Duration::ZERO
        };
        let delay = s.download_delay;
        // With both set, randomisation must not go below the rate's interval.
        let (interval, jitter) = if rate > delay {
            (rate, false)
        } else {
            (delay, s.randomize_download_delay)
        };
        Pacing {
            interval,
            jitter,
            backoff_max: s.adaptive_backoff_max_delay,
        }
    }
}

/// What one page adds to the crawl, committed in one step.
#[derive(Debug, Clone, Default)]
pub struct PageResult {
    pub requests: Vec<Request>,
    /// Items as JSON objects.
    pub items: Vec<String>,
    /// Stats increments (Scrapy names).
    pub stats: Vec<(String, i64)>,
    /// Set aside as malformed (dead-letter JSON).
    pub dead: Option<String>,
    /// Failed for good (failed-key JSON).
    pub failed: Option<String>,
    /// Try the request again later.
    pub retry: Option<Retry>,
    /// Adaptive back-off news about the request's host.
    pub host: HostOutcome,
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

/// A start entry as read, and what it becomes.
#[derive(Debug, Clone)]
pub struct StartClaim {
    pub entry: String,
    pub outcome: std::result::Result<Request, String>,
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
}

impl QueueStatus {
    /// Nothing left to do anywhere in the cluster.
    pub fn drained(&self) -> bool {
        self.start == 0 && self.queued == 0 && self.inflight == 0 && self.delayed == 0
    }
}

/// A dead-letter entry: what was set aside, from where, and why.
pub fn dead_letter(key: &str, entry: &str, reason: &str) -> String {
    let mut end = entry.len().min(PREVIEW_BYTES);
    while !entry.is_char_boundary(end) {
        end -= 1;
    }
    json!({
        "key": key,
        "entry": &entry[..end],
        "bytes": entry.len(),
        "reason": reason,
        "time": now_secs(),
    })
    .to_string()
}

/// Seconds since the epoch, for records a person reads.
pub fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One spider's view of the shared crawl.
#[derive(Clone)]
pub struct Frontier {
    conn: ConnectionManager,
    pub keys: Keys,
    kind: StartKind,
    /// This worker's id; lease ownership is checked against it.
    worker: String,
    lease: Duration,
    pacing: Pacing,
}

/// The request as the queue stores it.
fn encode(request: &Request) -> Option<String> {
    let json = serde_json::to_string(request).ok()?;
    (json.len() <= MAX_REQUEST_BYTES).then_some(json)
}

fn fingerprint_arg(request: &Request) -> String {
    if request.dont_filter {
        String::new()
    } else {
        request.fingerprint()
    }
}

impl Frontier {
    /// Connects to Redis for `spider` as worker `worker`.
    pub async fn connect(
        client: &redis::Client,
        spider: &Spider,
        worker: &str,
        lease: Duration,
    ) -> Result<Frontier> {
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Duration::from_secs(5))
            .set_response_timeout(Duration::from_secs(30))
            .set_number_of_retries(2)
            .set_max_delay(2000);
        let keys = Keys::of(spider);
        let conn = ConnectionManager::new_with_config(client.clone(), config)
            .await
            .map_err(err("connect", &keys.requests))?;
        Ok(Frontier {
            conn,
            keys,
            kind: spider.start.kind,
            worker: worker.to_string(),
            lease,
            pacing: Pacing::default(),
        })
    }

    /// Applies the spider's politeness to every request this frontier leases.
    pub fn with_pacing(mut self, pacing: Pacing) -> Frontier {
        self.pacing = pacing;
        self
    }

    /// The longest politeness wait worth taking a lease for: half a lease,
    /// so a waiting request never needs more than a couple of renewals and
    /// a slow host's requests stay queued for whoever's turn comes.
    fn max_wait_ms(&self) -> u64 {
        (self.lease.as_millis() as u64 / 2).max(1000)
    }

    /// The keys every leasing script takes first (see `scripts/lease.lua`).
    fn shared_keys<'a>(&'a self, inv: &mut redis::ScriptInvocation<'a>) {
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
            .key(&k.backoff);
    }

    pub fn worker(&self) -> &str {
        &self.worker
    }

    /// Leases up to `max` requests; when fewer are queued, also returns up
    /// to `peek` start entries (not yet claimed) to convert and claim.
    pub async fn lease(&self, max: usize, peek: usize) -> Result<(Vec<Leased>, Vec<String>)> {
        let k = &self.keys;
        let mut inv = SCRIPTS.lease.prepare_invoke();
        self.shared_keys(&mut inv);
        inv.key(&k.start)
            .arg(&self.worker)
            .arg(self.lease.as_millis() as u64)
            .arg(max)
            .arg(self.kind.as_str())
            .arg(peek)
            .arg(self.pacing.interval.as_millis() as u64)
            .arg(u8::from(self.pacing.jitter))
            .arg(self.max_wait_ms());
        let (leases, start): (Vec<redis::Value>, Vec<String>) = inv
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("lease", &k.requests))?;
        Ok((self.decode_leases(leases.into_iter()), start))
    }

    /// Parses `id, JSON, wait, interval` groups; a request whose JSON is unusable
    /// becomes a dead letter to commit.
    fn decode_leases(&self, mut values: impl Iterator<Item = redis::Value>) -> Vec<Leased> {
        let mut out = Vec::new();
        let text = |v: redis::Value| redis::from_redis_value::<String>(&v).ok();
        let ms = |v: redis::Value| {
            Duration::from_millis(redis::from_redis_value::<u64>(&v).unwrap_or(0))
        };
        while let (Some(id), Some(json), Some(wait), Some(interval)) =
            (values.next(), values.next(), values.next(), values.next())
        {
            let (Some(id), Some(json)) = (text(id), text(json)) else {
                continue;
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
                request.map_err(|reason| dead_letter(&self.keys.requests, &json, &reason));
            out.push(Leased {
                id,
                request,
                wait: ms(wait),
                paced_with: ms(interval),
            });
        }
        out
    }

    /// Commits one page (see the module docs), then leases up to
    /// `lease_next` requests to replace it.
    pub async fn commit(
        &self,
        id: &str,
        page: &PageResult,
        lease_next: usize,
    ) -> Result<(Committed, Vec<Leased>)> {
        let k = &self.keys;
        let requests: Vec<(String, i64, String)> = page
            .requests
            .iter()
            .filter_map(|r| {
                let json = encode(r)?;
                Some((
                    fingerprint_arg(r),
                    r.priority.clamp(-MAX_PRIORITY, MAX_PRIORITY),
                    json,
                ))
            })
            .collect();
        let depth = page.requests.iter().map(|r| r.depth).max().unwrap_or(0);
        // Requests over the size bound are not queued; say so and count them.
        let oversized = page.requests.len() - requests.len();
        let extra: Option<(String, i64)> =
            (oversized > 0).then(|| ("scheduler/request_too_large".to_string(), oversized as i64));
        if oversized > 0 {
            tracing::warn!(
                id,
                count = oversized,
                "follow-up requests over {MAX_REQUEST_BYTES} bytes were not queued"
            );
        }
        let (retry_ms, retry_json, retry_priority) = match &page.retry {
            Some(r) => (
                r.delay.as_millis() as i64,
                encode(&r.request).unwrap_or_default(),
                r.request.priority.clamp(-MAX_PRIORITY, MAX_PRIORITY),
            ),
            None => (-1, String::new(), 0),
        };
        let (outcome, slow_ms) = match page.host {
            HostOutcome::None => ("", 0),
            HostOutcome::Slow { wait } => ("slow", wait.as_millis() as u64),
            HostOutcome::Ok => ("ok", 0),
        };
        let mut invocation = SCRIPTS.commit.prepare_invoke();
        self.shared_keys(&mut invocation);
        invocation
            .key(&k.dupefilter)
            .key(&k.sequence)
            .key(&k.items)
            .key(&k.failed)
            .arg(&self.worker)
            .arg(id)
            .arg(&k.wake)
            .arg(requests.len())
            .arg(page.items.len())
            .arg(page.stats.len() + usize::from(extra.is_some()))
            .arg(depth)
            .arg(page.dead.as_deref().unwrap_or(""))
            .arg(page.failed.as_deref().unwrap_or(""))
            .arg(lease_next)
            .arg(self.lease.as_millis() as u64)
            .arg(self.pacing.interval.as_millis() as u64)
            .arg(u8::from(self.pacing.jitter))
            .arg(retry_ms)
            .arg(retry_json)
            .arg(retry_priority)
            .arg(outcome)
            .arg(slow_ms)
            .arg(self.pacing.backoff_max.as_millis() as u64)
            .arg(self.max_wait_ms());
        for (fp, priority, json) in &requests {
            invocation.arg(fp).arg(priority).arg(json);
        }
        for item in &page.items {
            invocation.arg(item);
        }
        for (field, delta) in page.stats.iter().chain(&extra) {
            invocation.arg(field).arg(delta);
        }
        let reply: Vec<redis::Value> = invocation
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("commit", &k.requests))?;
        let mut reply = reply.into_iter();
        let mut number = || {
            reply
                .next()
                .and_then(|v| redis::from_redis_value::<i64>(&v).ok())
                .unwrap_or(-1)
        };
        let (enqueued, filtered) = (number(), number());
        if enqueued < 0 {
            return Ok((Committed::LeaseLost, Vec::new()));
        }
        Ok((
            Committed::Done {
                enqueued: enqueued as u64,
                filtered: filtered as u64,
            },
            self.decode_leases(reply),
        ))
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
            .key(&k.start)
            .key(&k.requests)
            .key(&k.request_data)
            .key(&k.dupefilter)
            .key(&k.sequence)
            .key(&k.dead)
            .key(&k.stats)
            .arg(self.kind.as_str())
            .arg(&k.wake);
        for c in claims {
            let outcome = c.outcome.as_ref().map_err(|e| e.clone()).and_then(|r| {
                encode(r)
                    .map(|json| (r, json))
                    .ok_or_else(|| format!("request is over the {MAX_REQUEST_BYTES}-byte limit"))
            });
            match outcome {
                Ok((r, json)) => invocation
                    .arg(&c.entry)
                    .arg("req")
                    .arg(fingerprint_arg(r))
                    .arg(r.priority.clamp(-MAX_PRIORITY, MAX_PRIORITY))
                    .arg(json),
                Err(reason) => invocation
                    .arg(&c.entry)
                    .arg("dead")
                    .arg("")
                    .arg(0)
                    .arg(dead_letter(&k.start, &c.entry, &reason)),
            };
        }
        let (claimed, enqueued, filtered, dead): (u64, u64, u64, u64) = invocation
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("claim start entries from", &k.start))?;
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
            .key(&k.start)
            .key(&k.requests)
            .key(&k.inflight)
            .key(&k.dead)
            .key(&k.failed)
            .key(&k.dupefilter)
            .key(&k.items)
            .key(&k.delayed)
            .arg(self.kind.as_str())
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
        })
    }

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
        SCRIPTS
            .push_start
            .key(&self.keys.start)
            .arg(self.kind.as_str())
            .arg(limit.map_or(-1, |l| l as i64))
            .arg(score)
            .arg(&self.keys.wake)
            .arg(entries)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("push start entries to", &self.keys.start))
    }

    /// Up to `n` entries of the failed list, oldest first.
    pub async fn failed_entries(&self, n: usize) -> Result<Vec<String>> {
        redis::cmd("LRANGE")
            .arg(&self.keys.failed)
            .arg(0)
            .arg(n.max(1) - 1)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read", &self.keys.failed))
    }

    /// Moves failed entries back into the queue as `requests` (one per
    /// entry, same order); returns how many moved.
    pub async fn requeue_failed(&self, entries: &[(String, Request)]) -> Result<u64> {
        if entries.is_empty() {
            return Ok(0);
        }
        let k = &self.keys;
        let mut inv = SCRIPTS.requeue_failed.prepare_invoke();
        inv.key(&k.failed)
            .key(&k.requests)
            .key(&k.request_data)
            .key(&k.dupefilter)
            .key(&k.sequence)
            .key(&k.stats)
            .arg(&k.wake);
        for (entry, request) in entries {
            inv.arg(entry)
                .arg(request.priority.clamp(-MAX_PRIORITY, MAX_PRIORITY))
                .arg(encode(request).unwrap_or_default());
        }
        inv.invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("re-queue failed requests from", &k.failed))
    }

    /// Adds stats increments and sets `start_time` if no worker has yet.
    pub async fn add_stats(&self, stats: &[(String, i64)], start_time: Option<&str>) -> Result<()> {
        let mut pipe = redis::pipe();
        pipe.atomic();
        for (field, delta) in stats {
            pipe.hincr(&self.keys.stats, field, *delta).ignore();
        }
        if let Some(t) = start_time {
            pipe.hset_nx(&self.keys.stats, "start_time", t).ignore();
        }
        pipe.query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(err("update stats in", &self.keys.stats))
    }

    /// Records this worker's heartbeat.
    pub async fn heartbeat(&self, info: &str) -> Result<()> {
        redis::cmd("HSET")
            .arg(&self.keys.workers)
            .arg(&self.worker)
            .arg(info)
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(err("record heartbeat in", &self.keys.workers))
    }

    /// Removes this worker from the live list.
    pub async fn unregister(&self) -> Result<()> {
        redis::cmd("HDEL")
            .arg(&self.keys.workers)
            .arg(&self.worker)
            .query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(err("unregister from", &self.keys.workers))
    }

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

    /// The cached robots.txt record of `host`, if any.
    pub async fn robots_cached(&self, host: &str) -> Result<Option<String>> {
        redis::cmd("HGET")
            .arg(&self.keys.robots)
            .arg(host)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read robots.txt cache", &self.keys.robots))
    }

    /// Stores `host`'s robots.txt record and its Crawl-delay (0: none), in
    /// one step.
    pub async fn robots_store(
        &self,
        host: &str,
        record: &str,
        crawl_delay: Duration,
    ) -> Result<()> {
        let mut pipe = redis::pipe();
        pipe.atomic().hset(&self.keys.robots, host, record).ignore();
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
        let key = format!("{}:lock:{host}", self.keys.robots);
        let got: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(&self.worker)
            .arg("NX")
            .arg("PX")
            .arg(ttl.as_millis().max(1) as u64)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("lock robots.txt fetch", &key))?;
        Ok(got.is_some())
    }

    /// How many entries `key` holds, whatever its type (0 when absent).
    pub async fn size_of(&self, key: &str) -> Result<u64> {
        let mut conn = self.conn.clone();
        let kind: String = redis::cmd("TYPE")
            .arg(key)
            .query_async(&mut conn)
            .await
            .map_err(err("read the type of", key))?;
        let cmd = match kind.as_str() {
            "list" => "LLEN",
            "set" => "SCARD",
            "zset" => "ZCARD",
            "hash" => "HLEN",
            "string" => return Ok(1),
            _ => return Ok(0),
        };
        redis::cmd(cmd)
            .arg(key)
            .query_async(&mut conn)
            .await
            .map_err(err("count the entries of", key))
    }

    /// Deletes `keys`; returns how many existed.
    pub async fn delete(&self, keys: &[&str]) -> Result<u64> {
        redis::cmd("DEL")
            .arg(keys)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("delete", keys.first().copied().unwrap_or("")))
    }

    /// Removes one fingerprint from the dupefilter; true if it was there.
    pub async fn forget_fingerprint(&self, fingerprint: &str) -> Result<bool> {
        let n: u64 = redis::cmd("SREM")
            .arg(&self.keys.dupefilter)
            .arg(fingerprint)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("remove a fingerprint from", &self.keys.dupefilter))?;
        Ok(n > 0)
    }

    /// The stats hash.
    pub async fn stats(&self) -> Result<Vec<(String, String)>> {
        redis::cmd("HGETALL")
            .arg(&self.keys.stats)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read", &self.keys.stats))
    }

    /// The workers' heartbeats (worker id, JSON).
    pub async fn workers(&self) -> Result<Vec<(String, String)>> {
        redis::cmd("HGETALL")
            .arg(&self.keys.workers)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(err("read", &self.keys.workers))
    }
}
