//! The values that cross the frontier contract (see [`super::Backend`]):
//! what a lease hands a worker, what a page's commit carries back, what a
//! start claim is made of, the queue sizes, and what a frontier is told of
//! its spider. Both backends take and give exactly these.

use std::time::Duration;

use serde_json::{Map, Value};

use super::pipeline::{Relation, UpstreamStatus};
use super::{DeadLetter, Dupefilter, FailedRecord, ItemSink, Keys, StartKind};
use crate::request::{Request, Task};
use crate::stats::{Stat, Tally};

/// The largest request JSON the queue holds; larger ones are refused where
/// they are made and set aside where they are found.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// Priorities are clamped to this range so the queue score stays exact.
pub const MAX_PRIORITY: i64 = 4095;
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

/// Whether a worker's leases (its own and its commits') take only
/// requests whose host's politeness slot is free now: set while the worker
/// holds as many requests waiting for their slots as it will (see
/// [`super::Backend::lease_due_only`]). Shared by a frontier's clones.
#[derive(Debug, Clone, Default)]
pub struct DueOnly(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl DueOnly {
    pub fn set(&self, on: bool) {
        self.0.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// How far ahead a lease may reserve a host's slot: [`max_wait`], or
    /// nothing while only due requests are leased.
    pub fn reach(&self, lease: Duration) -> Duration {
        if self.0.load(std::sync::atomic::Ordering::Relaxed) {
            Duration::ZERO
        } else {
            max_wait(lease)
        }
    }
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

/// Sizes of a crawl's queues, read in one step (with those of the spiders
/// that hand it work).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueStatus {
    pub start: u64,
    pub queued: u64,
    /// Of `queued`, what waits in a sharded spider's outboxes for a mover:
    /// links on their way to another shard, tasks to another spider.
    /// Movers deliver them whatever the page limit says.
    pub outboxed: u64,
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
    /// The spiders that hand work to this one (`to_spider`), directly or
    /// through others, read in the same step (see [`super::pipeline`]).
    pub upstreams: Vec<UpstreamStatus>,
}

impl QueueStatus {
    /// Nothing left to do anywhere in the cluster, and nothing more to
    /// come: no spider that hands work to this one may still hand some.
    pub fn drained(&self) -> bool {
        self.own_drained() && self.producing().next().is_none()
    }

    /// Nothing left in this spider's own queues.
    pub fn own_drained(&self) -> bool {
        self.start == 0 && self.queued == 0 && self.inflight == 0 && self.delayed == 0
    }

    /// The upstreams that may still hand work to this spider.
    pub fn producing(&self) -> impl Iterator<Item = &UpstreamStatus> {
        self.upstreams.iter().filter(|u| u.producing)
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
    /// Its wake channel: a commit that hands it tasks wakes its waiting
    /// workers on their own channels (`<wake>:<worker>`), as many as the
    /// tasks can use.
    pub wake: String,
    /// Its waiting workers' hash (see `hand_waiting` in
    /// `redis/scripts/lib/leasing.lua`).
    pub waiting: String,
    /// The task fields it requires (checked against `meta` when loading).
    pub task_fields: Vec<String>,
    /// Its `upstreams` hash, where this spider's side records that it
    /// hands it work (see [`super::pipeline`]).
    pub upstreams: String,
    /// Its inbox (the tokens of the tasks a sharded spider's movers
    /// delivered to it), its control hash (whose `handoffs_in` counts
    /// those deliveries), its dead letters and its stats: the keys a
    /// delivery from a hand-off outbox writes beside its start key.
    pub inbox: String,
    pub control: String,
    pub dead: String,
    pub stats: String,
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
    /// The hand-offs of its pipeline, recorded for the spiders they feed.
    pub relations: Vec<Relation>,
    pub quota: Quota,
    /// Where items go, and the stream's back-pressure bound.
    pub sink: SinkOptions,
    /// How long a finished page that may wait (see [`commits`]) waits for
    /// others to share its commit's script call (0: only pages finished
    /// while the previous commit was on its way share it).
    pub commit_wait: Duration,
    /// How many times a request's lease may expire (its worker died or
    /// vanished holding it) before it is a dead letter rather than queued
    /// again (0: no limit).
    pub max_lease_expiries: u32,
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
    /// (0: no bound). See `items_backlog` in `redis/scripts/lib/sinks.lua`.
    pub max_backlog: u64,
}

impl SinkOptions {
    /// The commit and lease scripts' argument: `list`, or
    /// `stream:<max backlog>`.
    pub(crate) fn arg(&self) -> String {
        match self.sink {
            ItemSink::List => "list".to_string(),
            ItemSink::Stream => format!("stream:{}", self.max_backlog),
        }
    }
}

/// What one sweep step deleted, and how many workers share the sweeping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Politeness slots in the past.
    pub slots: u64,
    /// Back-off states of hosts left alone.
    pub backoffs: u64,
    /// Expired (or unreadable) robots.txt records, with their Crawl-delays.
    pub robots: u64,
    /// robots.txt fetch locks that had run out.
    pub locks: u64,
    /// Heartbeats of workers long gone.
    pub workers: u64,
    /// Hand-off relations nobody renewed for an hour.
    pub upstreams: u64,
    /// The workers crawling now (that leased or committed within a
    /// lease), the sweeping one included; 0 where nobody shares the crawl.
    /// They sweep in turn, each every `crew` steps' time.
    pub crew: u64,
}

impl Swept {
    /// Whether the step deleted nothing.
    pub fn is_empty(&self) -> bool {
        Swept { crew: 0, ..*self } == Swept::default()
    }
}
