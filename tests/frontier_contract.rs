//! The frontier contract suite: every promise of the frontier contract
//! (`crawlworker::frontier::Backend`), written once as a function that
//! takes a [`Harness`], and run against both backends (the Redis frontier
//! on a real redis-server, and the in-memory one of a local crawl), as
//! object_store's integration suite runs against every store. The
//! `promises!` list at the end makes one test per promise per backend:
//! `frontier_contract::redis::<promise>` and
//! `frontier_contract::local::<promise>`.
//!
//! What only one backend does is not here: the Redis frontier's own
//! behaviour (commit batches, pickup, what its scripts write in Redis) is
//! in `frontier.rs`; the one difference on purpose this file checks is
//! that a local crawl refuses a spider that hands links to another.
//!
//! Time passes only where a promise is about time (a lease expiring, a
//! retry or revisit coming due, a lock running out), and then the test
//! waits for the condition with a deadline rather than sleeping.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use ::redis::Commands;

use crawlworker::frontier::politeness::golden;
use crawlworker::frontier::redis::shard_count::HOMES_FIELD;
use crawlworker::frontier::shards::{shard_keys, shard_of_host};
use crawlworker::frontier::KeyMode;
use crawlworker::frontier::{
    Claimed, Committed, DeadLetter, FailedRecord, Frontier, Heartbeat, HostOutcome, Leased,
    LocalFrontier, Options, Pacing, PageResult, Quota, RedisFrontier, Refused, Retry, Revisit,
    RobotsError, RobotsRecord, SessionLock, SessionLogin, ShardedFrontier, StartClaim, Swept,
};
use crawlworker::request::Request;
use crawlworker::spider::session::SecretText;
use crawlworker::spider::Spider;
use crawlworker::stats::{self, Tally};
use crawlworker_testkit::{eventually_async, temp_dir, RedisServer};

/// The longest a condition that needs time may take before the test
/// fails; a passing run takes as long as the condition needs.
const LIMIT: Duration = Duration::from_secs(10);

/// What a promise needs of a backend: frontiers on one crawl, and the
/// few numbers the contract does not expose.
trait Harness {
    /// A frontier of spider `q` on this backend's crawl, as `options` say
    /// (its worker id, lease, pacing, quotas): every frontier one harness
    /// gives shares the one crawl, as workers share a Redis.
    async fn frontier(&self, options: Options) -> Frontier;

    /// `host`'s adaptive back-off delay (ms) and recent error share (per
    /// mille), 0 when the crawl keeps none.
    async fn backoff(&self, host: &str) -> (u64, u64);

    /// The redis-server, on the Redis backend (for what only its keys show).
    fn redis(&self) -> Option<&RedisServer>;

    /// How many shards the crawl is spread over (1: not sharded).
    fn shards(&self) -> usize {
        1
    }
}

/// The Redis frontier, on a redis-server of its own.
struct OnRedis {
    server: RedisServer,
}

impl OnRedis {
    fn start() -> OnRedis {
        OnRedis {
            server: RedisServer::start(),
        }
    }
}

impl Harness for OnRedis {
    async fn frontier(&self, options: Options) -> Frontier {
        let client = ::redis::Client::open(self.server.url())
            .unwrap_or_else(|e| panic!("{}: {e}", self.server.url()));
        RedisFrontier::connect(&client.into(), options)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", self.server.url()))
            .into()
    }

    async fn backoff(&self, host: &str) -> (u64, u64) {
        let keys = spider().keys;
        let mut conn = self.server.conn();
        let mut number = |key: &str| {
            conn.hget::<_, _, Option<u64>>(key, host)
                .unwrap_or_else(|e| panic!("HGET {key} {host}: {e}"))
                .unwrap_or(0)
        };
        (number(&keys.backoff), number(&keys.backoff_errors))
    }

    fn redis(&self) -> Option<&RedisServer> {
        Some(&self.server)
    }
}

/// A sharded spider's frontier: three shards on one redis-server (see
/// `docs/scaling.md`). The promises' URLs are all on one host, so their
/// requests live on one shard, and start entries, claimed on shard 0,
/// reach it through shard 0's outbox. Every worker here has that shard
/// for its home: a shard's crew, among whom its fair share is divided, is
/// the workers whose home it is. How a worker leases away from home is
/// `shard_handoff::a_worker_holds_ahead_from_home_and_fills_idle_slots_elsewhere`.
struct OnShards {
    server: RedisServer,
}

/// The shards of the sharded backend.
const SHARDS: usize = 3;

/// The one host of the promises' URLs (see [`SPIDER`]).
const PROMISES_HOST: &str = "127.0.0.1:8700";

impl Harness for OnShards {
    fn shards(&self) -> usize {
        SHARDS
    }

    async fn frontier(&self, options: Options) -> Frontier {
        let client = ::redis::Client::open(self.server.url())
            .unwrap_or_else(|e| panic!("{}: {e}", self.server.url()));
        // The next home ticket (the count plus one, modulo the shards) is
        // the promises' host's shard.
        let control = shard_keys("q", KeyMode::Plain, &[], None, 0, SHARDS).control;
        let at_home = shard_of_host(PROMISES_HOST, SHARDS) + SHARDS - 1;
        let _: () = self
            .server
            .conn()
            .hset(&control, HOMES_FIELD, at_home)
            .unwrap_or_else(|e| panic!("HSET {control}: {e}"));
        let frontier = ShardedFrontier::connect(&client.into(), options, SHARDS, |i| {
            shard_keys("q", KeyMode::Plain, &[], None, i, SHARDS)
        })
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", self.server.url()));
        assert_eq!(
            frontier.home_shard().await,
            shard_of_host(PROMISES_HOST, SHARDS)
        );
        frontier.into()
    }

    async fn backoff(&self, host: &str) -> (u64, u64) {
        let keys = shard_keys(
            "q",
            KeyMode::Plain,
            &[],
            None,
            shard_of_host(host, SHARDS),
            SHARDS,
        );
        let mut conn = self.server.conn();
        let mut number = |key: &str| {
            conn.hget::<_, _, Option<u64>>(key, host)
                .unwrap_or_else(|e| panic!("HGET {key} {host}: {e}"))
                .unwrap_or(0)
        };
        (number(&keys.backoff), number(&keys.backoff_errors))
    }

    /// Its keys are not the unsharded spider's.
    fn redis(&self) -> Option<&RedisServer> {
        None
    }
}

/// A local crawl: made by the first frontier asked for, every later one
/// another worker's handle on it.
#[derive(Default)]
struct OnLocal {
    crawl: Mutex<Option<LocalFrontier>>,
}

impl OnLocal {
    fn crawl(&self) -> std::sync::MutexGuard<'_, Option<LocalFrontier>> {
        self.crawl.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Harness for OnLocal {
    async fn frontier(&self, options: Options) -> Frontier {
        let mut crawl = self.crawl();
        let handle = match crawl.as_ref() {
            Some(crawl) => crawl.handle(options),
            None => {
                let first = LocalFrontier::new(options, Vec::new(), Box::new(std::io::sink()));
                *crawl = Some(first.clone());
                first
            }
        };
        handle.into()
    }

    async fn backoff(&self, host: &str) -> (u64, u64) {
        self.crawl()
            .as_ref()
            .and_then(|crawl| crawl.host_state(host))
            .map_or((0, 0), |h| (h.backoff, h.errors))
    }

    fn redis(&self) -> Option<&RedisServer> {
        None
    }
}

pub(crate) const SPIDER: &str = r#"
name = "q"
[start]
url = "http://127.0.0.1:8700/list/{n}/1"
priority = "{p}"
[items.x]
n = { meta = "n" }
[[rules]]
name = "list"
match = '/list/'
  [[rules.extract]]
  item = "x"
"#;

pub(crate) fn spider() -> Spider {
    Spider::from_str("q.toml".as_ref(), SPIDER).unwrap_or_else(|e| panic!("{e}"))
}

/// Spider `q`'s frontier options for `worker`, with a lease of `lease`.
fn options(worker: &str, lease: Duration) -> Options {
    Options {
        lease,
        ..spider().frontier_options(worker)
    }
}

/// Spider `q`'s options for `worker`, with a lease of a minute.
fn worker(worker: &str) -> Options {
    options(worker, Duration::from_secs(60))
}

/// Pacing of `interval` between two requests to one host, without jitter.
fn paced(interval: Duration) -> Pacing {
    Pacing {
        interval,
        jitter: false,
        backoff_max: Duration::from_secs(60),
    }
}

/// Pushes tasks (n, priority) and claims them all into the queue, in order.
pub(crate) async fn enqueue(f: &Frontier, tasks: &[(u32, i64)]) {
    let spider = spider();
    let entries: Vec<String> = tasks
        .iter()
        .map(|(n, p)| format!(r#"{{"n": {n}, "p": {p}}}"#))
        .collect();
    let pushed = f.push_start(&entries).await.unwrap();
    assert_eq!(pushed, entries.len() as u64);
    let (_, read) = f.lease(0, entries.len()).await.unwrap();
    let claims: Vec<StartClaim> = read
        .into_iter()
        .map(|entry| StartClaim {
            outcome: spider.start_request(&entry).map_err(Refused::from),
            entry,
        })
        .collect();
    let c = f.claim_start(&claims).await.unwrap();
    assert_eq!(c.enqueued, tasks.len() as u64);
}

/// Queues `requests` in order, each as a start entry claimed with it.
pub(crate) async fn queue(f: &Frontier, requests: &[Request]) {
    let entries: Vec<String> = requests
        .iter()
        .map(|r| serde_json::to_string(r).unwrap())
        .collect();
    assert_eq!(f.push_start(&entries).await.unwrap(), entries.len() as u64);
    let claims: Vec<StartClaim> = entries
        .into_iter()
        .zip(requests)
        .map(|(entry, r)| StartClaim {
            entry,
            outcome: Ok(r.clone()),
        })
        .collect();
    let c = f.claim_start(&claims).await.unwrap();
    assert_eq!(c.enqueued, requests.len() as u64, "{c:?}");
}

/// A request for `url` that the dupefilter lets through every time.
fn unfiltered(url: &str) -> Request {
    Request {
        dont_filter: true,
        ..Request::get(url)
    }
}

/// The `n` of leased start requests, in lease order.
pub(crate) fn order(leased: &[Leased]) -> Vec<u64> {
    leased
        .iter()
        .map(|l| l.request.as_ref().unwrap().meta["n"].as_u64().unwrap())
        .collect()
}

/// The URLs of leased requests, in lease order.
fn urls(leased: &[Leased]) -> Vec<&str> {
    leased
        .iter()
        .map(|l| l.request.as_ref().unwrap().url.as_str())
        .collect()
}

fn ids(leased: &[Leased]) -> Vec<String> {
    leased.iter().map(|l| l.id.clone()).collect()
}

async fn lease(f: &Frontier, max: usize) -> Vec<Leased> {
    f.lease(max, 0).await.unwrap().0
}

async fn commit(f: &Frontier, leased: &Leased, page: &PageResult) -> Committed {
    f.commit(leased, page, 0, false.into()).await.unwrap().0
}

/// A page with one item `{"n": n}`.
fn page_with_item(n: u32) -> PageResult {
    PageResult {
        items: vec![serde_json::from_str(&format!(r#"{{"n": {n}}}"#)).unwrap()],
        ..PageResult::default()
    }
}

/// Waits until `queued` requests are queued, leasing none meanwhile
/// (leasing puts expired leases, due retries and revisits back first).
async fn until_queued(f: &Frontier, queued: u64) {
    eventually_async(
        "the work that came due is back in the queue",
        LIMIT,
        || async {
            f.lease(0, 0).await.unwrap();
            (f.status().await.unwrap().queued == queued).then_some(())
        },
    )
    .await
}

/// Leases one request as soon as one may be leased; with how long after
/// `since` it was.
async fn lease_when_due(f: &Frontier, since: Instant) -> (Leased, Duration) {
    eventually_async("a request comes due", LIMIT, || async {
        let mut leased = lease(f, 1).await;
        leased.pop().map(|l| (l, since.elapsed()))
    })
    .await
}

/// Backends count time in whole milliseconds: a deadline may be met up to
/// this much early by another clock.
const MS_ROUNDING: Duration = Duration::from_millis(2);

// The promises.

async fn equal_priorities_come_out_fifo_and_higher_priorities_first(h: &impl Harness) {
    let f = h.frontier(worker("w1")).await;
    enqueue(
        &f,
        &[
            (1, 0),
            (2, 0),
            (3, 5),
            (4, -1),
            (5, 0),
            (6, 5),
            (7, 4095),
            (8, -9999),
        ],
    )
    .await;
    let leased = lease(&f, 100).await;
    // Priorities beyond ±4095 are clamped (8 sorts with -4095, last).
    assert_eq!(order(&leased), vec![7, 3, 6, 1, 2, 5, 4, 8]);
    // FIFO also across separate enqueues.
    enqueue(&f, &[(10, 0), (11, 0)]).await;
    enqueue(&f, &[(12, 0)]).await;
    assert_eq!(order(&lease(&f, 10).await), vec![10, 11, 12]);
    // Clamped on both sides: 9999 sorts with 4095, before it by arrival.
    enqueue(&f, &[(20, 4095), (21, 9999), (22, -4095)]).await;
    assert_eq!(order(&lease(&f, 10).await), vec![20, 21, 22]);
}

async fn a_start_entry_is_claimed_once_and_a_refused_one_becomes_a_dead_letter(h: &impl Harness) {
    let a = h.frontier(worker("worker-a")).await;
    let b = h.frontier(worker("worker-b")).await;
    let (good, bad) = (r#"{"n": 1, "p": 0}"#, "not a task");
    assert_eq!(
        a.push_start(&[good.to_string(), bad.to_string()])
            .await
            .unwrap(),
        2
    );
    let (leased, read) = a.lease(5, 10).await.unwrap();
    assert!(leased.is_empty());
    assert_eq!(read, vec![good, bad], "start entries are peeked, in order");
    let claims = [
        StartClaim {
            entry: good.to_string(),
            outcome: spider().start_request(good).map_err(Refused::from),
        },
        StartClaim {
            entry: bad.to_string(),
            outcome: Err(Refused {
                reason: "not a task: no JSON object".to_string(),
                stat: Some(&stats::OFFSITE_FILTERED),
            }),
        },
    ];
    assert_eq!(
        a.claim_start(&claims).await.unwrap(),
        Claimed {
            claimed: 2,
            enqueued: 1,
            filtered: 0,
            dead: 1
        }
    );
    // Another worker that read the same entries finds them claimed.
    assert_eq!(b.claim_start(&claims).await.unwrap(), Claimed::default());
    let status = a.status().await.unwrap();
    assert_eq!(
        (status.start, status.queued, status.dead),
        (0, 1, 1),
        "{status:?}"
    );
    let dead = a.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(
        (
            dead[0].key.as_str(),
            dead[0].entry.as_str(),
            dead[0].reason.as_str(),
            dead[0].bytes
        ),
        (
            a.keys().start_urls.as_str(),
            bad,
            "not a task: no JSON object",
            bad.len()
        )
    );
    for (stat, n) in [
        (stats::DEADLETTER_COUNT, 1),
        (stats::OFFSITE_FILTERED, 1),
        (stats::START_URLS_CLAIMED, 2),
        (stats::SCHEDULER_ENQUEUED, 1),
    ] {
        assert_eq!(a.stat(stat).await.unwrap(), n, "{}", stat.name);
    }
    assert_eq!(order(&lease(&b, 5).await), vec![1]);
}

async fn the_dupefilter_filters_unless_dont_filter(h: &impl Harness) {
    let f = h.frontier(worker("w1")).await;
    enqueue(&f, &[(1, 0)]).await;
    let leased = lease(&f, 1).await;
    let follow = |url: &str, dont_filter: bool| Request {
        dont_filter,
        ..Request::get(url)
    };
    let page = PageResult {
        requests: vec![
            follow("http://127.0.0.1:8700/a", false),
            follow("http://127.0.0.1:8700/a", false),
            follow("http://127.0.0.1:8700/a", true),
        ],
        ..PageResult::default()
    };
    assert_eq!(
        commit(&f, &leased[0], &page).await,
        Committed::Done {
            enqueued: 2,
            filtered: 1
        }
    );
    // Filtered the same way from then on.
    let again = PageResult {
        requests: vec![follow("http://127.0.0.1:8700/a", false)],
        ..PageResult::default()
    };
    let next = lease(&f, 1).await;
    assert_eq!(
        commit(&f, &next[0], &again).await,
        Committed::Done {
            enqueued: 0,
            filtered: 1
        }
    );
    // The link's fingerprint (start requests are not filtered).
    assert_eq!(f.status().await.unwrap().dupefilter, 1);
    assert_eq!(f.stat(stats::DUPEFILTER_FILTERED).await.unwrap(), 2);
    if let Some(redis) = h.redis() {
        let fp = Request::get("http://127.0.0.1:8700/a").fingerprint();
        assert!(redis
            .conn()
            .sismember::<_, _, bool>("q:dupefilter", &fp)
            .unwrap());
    }
}

/// A page of `n` links to distinct URLs, then `unfiltered` links that
/// are not filtered, and one item.
fn page_of_links(n: usize, unfiltered_links: usize) -> PageResult {
    let mut requests: Vec<Request> = (0..n)
        .map(|i| Request::get(&format!("http://127.0.0.1:8700/p/{i}")))
        .collect();
    requests.extend((0..unfiltered_links).map(|_| unfiltered("http://127.0.0.1:8700/again")));
    PageResult {
        requests,
        ..page_with_item(1)
    }
}

async fn a_page_of_many_links_queues_each_once_or_nothing_once_its_lease_is_lost(h: &impl Harness) {
    // More links than one script call carries: the Redis frontier sends
    // them in parts, each only while the lease is its worker's.
    const LINKS: usize = 10_000;
    let a = h
        .frontier(options("worker-a", Duration::from_millis(200)))
        .await;
    let b = h.frontier(worker("worker-b")).await;
    enqueue(&a, &[(1, 0)]).await;
    let first = lease(&a, 1).await;
    let page = page_of_links(LINKS, 3);
    // Worker a's lease runs out and b takes the page: a's commit writes
    // nothing, not even its first links.
    until_queued(&b, 1).await;
    let again = lease(&b, 1).await;
    assert_eq!(commit(&a, &first[0], &page).await, Committed::LeaseLost);
    let status = b.status().await.unwrap();
    assert_eq!((status.queued, status.items), (0, 0));
    assert_eq!(
        commit(&b, &again[0], &page).await,
        Committed::Done {
            enqueued: LINKS as u64 + 3,
            filtered: 0
        }
    );
    let status = b.status().await.unwrap();
    assert_eq!((status.queued, status.items), (LINKS as u64 + 3, 1));
    assert_eq!(status.dupefilter, LINKS as u64);
    assert_eq!(
        b.stat(stats::SCHEDULER_ENQUEUED).await.unwrap(),
        1 + LINKS as u64 + 3
    );
    // The same links again are all filtered.
    enqueue(&b, &[(2, 0)]).await;
    let leased = lease(&b, 3).await;
    assert_eq!(
        urls(&leased),
        [
            "http://127.0.0.1:8700/p/0",
            "http://127.0.0.1:8700/p/1",
            "http://127.0.0.1:8700/p/2"
        ]
    );
    assert_eq!(
        commit(&b, &leased[0], &page_of_links(LINKS, 0)).await,
        Committed::Done {
            enqueued: 0,
            filtered: LINKS as u64
        }
    );
}

async fn an_expired_lease_returns_to_its_place_and_its_old_holder_cannot_commit(h: &impl Harness) {
    let a = h
        .frontier(options("worker-a", Duration::from_millis(200)))
        .await;
    let b = h.frontier(worker("worker-b")).await;
    enqueue(&a, &[(1, 0), (2, 0)]).await;
    let first = lease(&a, 1).await;
    assert_eq!(order(&first), vec![1]);
    let due = a.next_due_in().expect("the lease's expiry is known");
    assert!(due <= Duration::from_millis(200), "{due:?}");
    // Worker a "died": its lease expires (by the backend's clock), and the
    // next lease returns it to the queue, at its place.
    until_queued(&b, 2).await;
    assert_eq!(order(&lease(&b, 10).await), vec![1, 2]);
    assert_eq!(b.stat(stats::LEASE_EXPIRED).await.unwrap(), 1);
    let page = page_with_item(1);
    assert_eq!(commit(&a, &first[0], &page).await, Committed::LeaseLost);
    assert_eq!(
        a.status().await.unwrap().items,
        0,
        "a lost lease must not push items"
    );
    assert!(matches!(
        commit(&b, &first[0], &page).await,
        Committed::Done { .. }
    ));
    // A second commit of the same page (a retry after a lost reply) is refused.
    assert_eq!(commit(&b, &first[0], &page).await, Committed::LeaseLost);
    assert_eq!(b.status().await.unwrap().items, 1);
}

/// A request whose lease expired `max_lease_expiries` times (each worker
/// that took it died or vanished holding it: a page that crashes workers)
/// becomes a dead letter with that reason instead of being leased again,
/// counted. Until then it goes back to its place; a hand-back is no
/// expiry; a committed request's count goes with it.
async fn a_request_whose_lease_keeps_expiring_becomes_a_dead_letter(h: &impl Harness) {
    let dies = |id| Options {
        max_lease_expiries: 2,
        ..options(id, Duration::from_millis(150))
    };
    let a = h.frontier(dies("worker-a")).await;
    let b = h
        .frontier(Options {
            max_lease_expiries: 2,
            ..worker("worker-b")
        })
        .await;
    enqueue(&a, &[(1, 0), (2, 0), (3, 0)]).await;
    // The first expiry: back at its place, ahead of 2 and 3.
    assert_eq!(order(&lease(&a, 1).await), vec![1]);
    until_queued(&b, 3).await;
    // Handed back once (a worker stopping): not an expiry.
    let held = lease(&b, 1).await;
    assert_eq!(order(&held), vec![1]);
    assert_eq!(b.release(&ids(&held)).await.unwrap(), 1);
    // The second expiry of 1 sets it aside; 2 expires for the first time.
    let d = h.frontier(dies("worker-d")).await;
    assert_eq!(order(&lease(&a, 1).await), vec![1]);
    assert_eq!(order(&lease(&d, 1).await), vec![2]);
    // (2 was leased after 1, so its lease may expire a moment later.)
    eventually_async(
        "the second expiry sets 1 aside and 2 expires",
        LIMIT,
        || async {
            b.lease(0, 0).await.unwrap();
            let s = b.status().await.unwrap();
            (s.dead == 1 && s.inflight == 0).then_some(())
        },
    )
    .await;
    let status = b.status().await.unwrap();
    assert_eq!((status.queued, status.inflight), (2, 0), "{status:?}");
    let dead = b.dead_letters(10).await.unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(
        dead[0].reason,
        crawlworker::frontier::records::lease_expiries_reason(2, 2)
    );
    let request: Request = serde_json::from_str(&dead[0].entry).unwrap();
    assert_eq!(request.meta["n"], 1, "{dead:?}");
    assert_eq!(dead[0].bytes, dead[0].entry.len());
    for (stat, n) in [
        (stats::LEASE_EXPIRED, 3),
        (stats::LEASE_EXPIRED_DEAD, 1),
        (stats::DEADLETTER_COUNT, 1),
    ] {
        assert_eq!(b.stat(stat).await.unwrap(), n, "{}", stat.name);
    }
    // 2, its one expiry counted, is committed; 3 is as it was.
    let rest = lease(&b, 10).await;
    assert_eq!(order(&rest), vec![2, 3]);
    for leased in &rest {
        assert!(matches!(
            commit(&b, leased, &PageResult::default()).await,
            Committed::Done { .. }
        ));
    }
    let status = b.status().await.unwrap();
    assert_eq!((status.queued, status.inflight, status.dead), (0, 0, 1));
    if let Some(redis) = h.redis() {
        let keys = spider().keys;
        let mut conn = redis.conn();
        let data: u64 = conn.hlen(&keys.request_data).unwrap();
        assert_eq!(data, 0, "nothing of the requests is left behind");
    }
}

async fn a_renewed_lease_is_kept_and_a_lost_one_is_named(h: &impl Harness) {
    let a = h
        .frontier(options("worker-a", Duration::from_secs(1)))
        .await;
    let b = h.frontier(worker("worker-b")).await;
    enqueue(&a, &[(1, 0), (2, 0)]).await;
    let held = lease(&a, 2).await;
    let (one, two) = (held[0].id.clone(), held[1].id.clone());
    assert_eq!(
        a.renew(std::slice::from_ref(&one)).await.unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        b.renew(std::slice::from_ref(&one)).await.unwrap(),
        vec![one.clone()],
        "another worker's lease is not renewed"
    );
    // Renewed all along, the first lease outlives the second.
    eventually_async("the lease not renewed expires", LIMIT, || async {
        assert_eq!(
            a.renew(std::slice::from_ref(&one)).await.unwrap(),
            Vec::<String>::new()
        );
        a.lease(0, 0).await.unwrap();
        (a.status().await.unwrap().queued == 1).then_some(())
    })
    .await;
    assert_eq!(a.status().await.unwrap().inflight, 1);
    assert_eq!(order(&lease(&b, 10).await), vec![2]);
    assert_eq!(
        a.renew(std::slice::from_ref(&two)).await.unwrap(),
        vec![two]
    );
    assert!(matches!(
        commit(&a, &held[0], &PageResult::default()).await,
        Committed::Done { .. }
    ));
    assert_eq!(
        commit(&a, &held[1], &PageResult::default()).await,
        Committed::LeaseLost
    );
}

/// A worker whose lease on a page expired (its commit stuck behind a Redis
/// outage) may lease the page again and fetch it while the first commit
/// still waits: both commits may then meet in one batch, each finding the
/// lease the worker's. One of them is committed, not both.
async fn the_same_page_twice_in_one_batch_is_committed_once(h: &impl Harness) {
    let short = h
        .frontier(options("worker-a", Duration::from_millis(200)))
        .await;
    // The same worker's frontier, whose commits wait for pages to share
    // a batch (Redis).
    let a = h
        .frontier(Options {
            commit_wait: Duration::from_millis(300),
            ..worker("worker-a")
        })
        .await;
    enqueue(&a, &[(1, 0)]).await;
    let first = lease(&short, 1).await;
    until_queued(&a, 1).await;
    let again = lease(&a, 1).await;
    assert_eq!(order(&again), vec![1], "leased again by the same worker");
    assert_eq!(first[0].id, again[0].id);
    let page = page_with_item(1);
    let (r1, r2) = tokio::join!(
        a.commit(&first[0], &page, 0, true.into()),
        a.commit(&again[0], &page, 0, true.into()),
    );
    let mut results = [r1.unwrap().0, r2.unwrap().0];
    results.sort_by_key(|r| matches!(r, Committed::Done { .. }));
    assert!(
        matches!(results, [Committed::LeaseLost, Committed::Done { .. }]),
        "{results:?}"
    );
    let status = a.status().await.unwrap();
    assert_eq!(status.items, 1, "one item");
    assert_eq!(status.inflight, 0);
    // And once more, alone: nothing more is written.
    assert_eq!(commit(&a, &again[0], &page).await, Committed::LeaseLost);
    assert_eq!(a.status().await.unwrap().items, 1);
}

async fn a_commit_leases_the_pages_replacements(h: &impl Harness) {
    let f = h.frontier(worker("w1")).await;
    enqueue(&f, &[(1, 0), (2, 0), (3, 0), (4, 0)]).await;
    let first = lease(&f, 1).await;
    let page = PageResult {
        requests: vec![Request::get("http://127.0.0.1:8700/list/5/1")],
        ..PageResult::default()
    };
    let (done, next) = f.commit(&first[0], &page, 2, false.into()).await.unwrap();
    assert_eq!(
        done,
        Committed::Done {
            enqueued: 1,
            filtered: 0
        }
    );
    assert_eq!(order(&next), vec![2, 3], "in queue order");
    // Replacements are leases like any other: this worker's to commit.
    assert!(matches!(
        commit(&f, &next[0], &PageResult::default()).await,
        Committed::Done { .. }
    ));
    let status = f.status().await.unwrap();
    assert_eq!((status.queued, status.inflight), (2, 1), "{status:?}");
    // A lost lease's commit leases nothing either.
    let (lost, none) = f.commit(&first[0], &page, 2, false.into()).await.unwrap();
    assert_eq!((lost, none.len()), (Committed::LeaseLost, 0));
}

async fn a_released_lease_returns_to_its_place(h: &impl Harness) {
    let a = h.frontier(worker("worker-a")).await;
    let b = h.frontier(worker("worker-b")).await;
    enqueue(&a, &[(1, 0), (2, 0), (3, 0)]).await;
    let held = lease(&a, 2).await;
    assert_eq!(order(&held), vec![1, 2]);
    let first = ids(&held[..1]);
    assert_eq!(b.release(&first).await.unwrap(), 0, "not b's to release");
    assert_eq!(a.release(&first).await.unwrap(), 1);
    assert_eq!(a.release(&first).await.unwrap(), 0, "released already");
    let status = a.status().await.unwrap();
    assert_eq!((status.queued, status.inflight), (2, 1), "{status:?}");
    assert_eq!(order(&lease(&b, 10).await), vec![1, 3]);
    assert_eq!(
        commit(&a, &held[0], &PageResult::default()).await,
        Committed::LeaseLost
    );
}

/// Workers share what the crawl has out: none leases beyond its fair
/// share (the queue and the leases divided among the workers that lease),
/// less what it holds, so the first to ask does not take what its idle
/// peers could fetch; a commit's replacements keep to the share too, and
/// a worker that stops leaves its share to the others.
async fn a_worker_leases_no_more_than_its_fair_share(h: &impl Harness) {
    let a = h.frontier(worker("worker-a")).await;
    let b = h.frontier(worker("worker-b")).await;
    let c = h.frontier(worker("worker-c")).await;
    // b and c ask for work and find none: they are in the crew.
    assert!(lease(&b, 16).await.is_empty());
    assert!(lease(&c, 16).await.is_empty());
    let tasks: Vec<(u32, i64)> = (1..=75).map(|n| (n, 0)).collect();
    enqueue(&a, &tasks).await;
    let held = lease(&a, 64).await;
    assert_eq!(held.len(), 25, "a third of 75");
    assert!(lease(&a, 64).await.is_empty(), "a holds its share");
    // A page done: 24 held, 50 queued, 74 out; a third is 25: one more.
    let (_, next) = a
        .commit(&held[0], &PageResult::default(), 2, false.into())
        .await
        .unwrap();
    assert_eq!(next.len(), 1, "a commit's replacements keep to the share");
    assert_eq!(lease(&b, 64).await.len(), 25);
    // c stops: a and b share what is left, 24 queued of 74 out.
    c.unregister().await.unwrap();
    assert_eq!(lease(&b, 64).await.len(), 12);
    assert_eq!(lease(&a, 64).await.len(), 12);
}

/// A worker that leased while it was alone, and holds over twice its fair
/// share once its peers have joined, is asked by its next commit to hand
/// back what it cannot start (its hand-back signal); what it hands back
/// is its peers' to lease. A worker within its share is not asked.
async fn a_worker_over_twice_its_share_is_asked_to_hand_back(h: &impl Harness) {
    let a = h.frontier(worker("worker-a")).await;
    let tasks: Vec<(u32, i64)> = (1..=30).map(|n| (n, 0)).collect();
    enqueue(&a, &tasks).await;
    let held = lease(&a, 64).await;
    assert_eq!(held.len(), 30, "alone, a may take everything");
    let b = h.frontier(worker("worker-b")).await;
    let c = h.frontier(worker("worker-c")).await;
    assert!(lease(&b, 16).await.is_empty());
    assert!(lease(&c, 16).await.is_empty());
    // A page done: 29 out among three, a share of 10; a holds 29.
    let asked = a.hand_back().asked();
    let (_, next) = a
        .commit(&held[0], &PageResult::default(), 1, false.into())
        .await
        .unwrap();
    assert!(next.is_empty(), "a is over its share: no replacement");
    tokio::time::timeout(LIMIT, asked)
        .await
        .expect("a was not asked to hand back");
    // a hands back all but its share; b leases its share of 29 out.
    assert_eq!(a.release(&ids(&held[10..])).await.unwrap(), 20);
    let b_held = lease(&b, 64).await;
    assert_eq!(b_held.len(), 10);
    let b_asked = b.hand_back().asked();
    let (_, next) = b
        .commit(&b_held[0], &PageResult::default(), 1, false.into())
        .await
        .unwrap();
    assert_eq!(next.len(), 1, "b is within its share");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), b_asked)
            .await
            .is_err(),
        "b, within its share, was asked to hand back"
    );
}

/// A worker that leased while it was alone is asked to hand back what it
/// cannot start as soon as a peer joining the crew finds nothing to lease,
/// not a response later at its next commit: the joining lease tells the
/// crew it grew. Not while it is within twice its new share.
async fn a_worker_joining_the_crew_asks_one_over_its_share_to_hand_back(h: &impl Harness) {
    let a = h.frontier(worker("worker-a")).await;
    let tasks: Vec<(u32, i64)> = (1..=30).map(|n| (n, 0)).collect();
    enqueue(&a, &tasks).await;
    assert_eq!(
        lease(&a, 64).await.len(),
        30,
        "alone, a may take everything"
    );
    hears_its_crew(h, &a).await;
    let mut asked = Box::pin(a.hand_back().asked());
    // b joins: a share of 15 among two, and a holds twice that.
    let b = h.frontier(worker("worker-b")).await;
    assert!(lease(&b, 16).await.is_empty());
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut asked)
            .await
            .is_err(),
        "a, within twice its share, was asked to hand back"
    );
    // c joins: a share of 10, and a holds 30.
    let c = h.frontier(worker("worker-c")).await;
    assert!(lease(&c, 16).await.is_empty());
    tokio::time::timeout(LIMIT, asked)
        .await
        .expect("a was not asked to hand back when c joined");
}

/// Waits until `f` hears what the other workers' leases say on its
/// spider's wake channel (on Redis, once its subscription is up).
async fn hears_its_crew(h: &impl Harness, f: &Frontier) {
    let Some(server) = h.redis() else {
        return;
    };
    let channel = f.keys().wake.clone();
    eventually_async("the frontier subscribed to its wake channel", LIMIT, || {
        let mut conn = server.conn();
        let channel = channel.clone();
        async move {
            let counts: Vec<(String, u64)> = ::redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(&channel)
                .query(&mut conn)
                .unwrap_or_else(|e| panic!("PUBSUB NUMSUB {channel}: {e}"));
            counts.iter().any(|(_, n)| *n > 0).then_some(())
        }
    })
    .await;
}

async fn a_retry_waits_its_delay(h: &impl Harness) {
    const DELAY: Duration = Duration::from_millis(400);
    let f = h.frontier(worker("w1")).await;
    enqueue(&f, &[(1, 0)]).await;
    let leased = lease(&f, 1).await;
    let retried = Request {
        retry_times: 1,
        ..leased[0].request.clone().unwrap()
    };
    let page = PageResult {
        retry: Some(Retry {
            request: retried.clone(),
            delay: DELAY,
        }),
        ..PageResult::default()
    };
    let committed = Instant::now();
    assert_eq!(
        commit(&f, &leased[0], &page).await,
        Committed::Done {
            enqueued: 0,
            filtered: 0
        }
    );
    let status = f.status().await.unwrap();
    assert_eq!(
        (status.delayed, status.queued, status.inflight),
        (1, 0, 0),
        "{status:?}"
    );
    assert!(!status.drained(), "a retry waiting is work left");
    let early = lease(&f, 1).await;
    assert!(
        early.is_empty() || committed.elapsed() >= DELAY,
        "leased before its delay"
    );
    let due = f.next_due_in().expect("the retry's time is known");
    assert!(due <= DELAY, "{due:?}");
    let (back, after) = match early.into_iter().next() {
        Some(l) => (l, committed.elapsed()),
        None => lease_when_due(&f, committed).await,
    };
    assert!(after + MS_ROUNDING >= DELAY, "leased {after:?} after");
    assert_eq!(back.request.as_ref().unwrap(), &retried);
    assert_eq!(f.status().await.unwrap().delayed, 0);
}

async fn a_retry_after_holds_its_host(h: &impl Harness) {
    const RETRY_AFTER: Duration = Duration::from_secs(2);
    let f = h
        .frontier(Options {
            pacing: paced(Duration::ZERO),
            ..worker("w1")
        })
        .await;
    queue(&f, &[Request::get("http://slow.example/a")]).await;
    let leased = lease(&f, 1).await;
    let page = PageResult {
        host: HostOutcome::Slow { wait: RETRY_AFTER },
        requests: vec![Request::get("http://slow.example/b")],
        ..PageResult::default()
    };
    let committed = Instant::now();
    commit(&f, &leased[0], &page).await;
    let next = lease(&f, 1).await;
    assert_eq!(urls(&next), vec!["http://slow.example/b"]);
    // The host's next slot is the Retry-After away, for every worker.
    assert!(next[0].wait <= RETRY_AFTER, "{:?}", next[0].wait);
    assert!(
        next[0].wait + committed.elapsed() + MS_ROUNDING >= RETRY_AFTER,
        "waits {:?}",
        next[0].wait
    );
    // The back-off (at least the Retry-After) spaces its slots.
    assert_eq!(next[0].paced_with, RETRY_AFTER);
    assert_eq!(f.hosts_backed_off().await.unwrap(), 1);
    assert_eq!(f.stat(stats::BACKOFF_SLOWED).await.unwrap(), 1);
}

async fn slots_are_spaced_by_the_delay_and_by_a_crawl_delay(h: &impl Harness) {
    let f = h
        .frontier(Options {
            pacing: paced(Duration::from_secs(1)),
            ..worker("w1")
        })
        .await;
    let ms =
        |ms: &[u64]| -> Vec<Duration> { ms.iter().map(|&m| Duration::from_millis(m)).collect() };
    queue(
        &f,
        &[
            Request::get("http://paced.example/a"),
            Request::get("http://paced.example/b"),
            Request::get("http://paced.example/c"),
        ],
    )
    .await;
    let leased = lease(&f, 3).await;
    assert_eq!(
        leased.iter().map(|l| l.wait).collect::<Vec<_>>(),
        ms(&[0, 1000, 2000])
    );
    assert!(leased
        .iter()
        .all(|l| l.paced_with == Duration::from_secs(1)));
    // A longer Crawl-delay stored with the host's robots.txt wins.
    let record = RobotsRecord {
        status: Some(200),
        body: "User-agent: *\nCrawl-delay: 1.5\n".to_string(),
        fetched_at: 1_700_000_000.5,
        error: None,
    };
    f.robots_store(
        "delayed.example",
        &record,
        Duration::from_millis(1500),
        Duration::from_secs(3600),
    )
    .await
    .unwrap();
    queue(
        &f,
        &[
            Request::get("http://delayed.example/a"),
            Request::get("http://delayed.example/b"),
        ],
    )
    .await;
    let leased = lease(&f, 2).await;
    assert_eq!(
        leased.iter().map(|l| l.wait).collect::<Vec<_>>(),
        ms(&[0, 1500])
    );
    assert!(leased
        .iter()
        .all(|l| l.paced_with == Duration::from_millis(1500)));
}

async fn jittered_slots_stay_between_half_and_one_and_a_half_the_delay(h: &impl Harness) {
    const DELAY: Duration = Duration::from_secs(1);
    let f = h
        .frontier(Options {
            pacing: Pacing {
                jitter: true,
                ..paced(DELAY)
            },
            ..worker("w1")
        })
        .await;
    let requests: Vec<Request> = (0..12)
        .map(|i| Request::get(&format!("http://jitter.example/{i}")))
        .collect();
    queue(&f, &requests).await;
    let leased = lease(&f, 12).await;
    assert_eq!(leased.len(), 12);
    let mut slot = Duration::ZERO;
    for l in &leased {
        assert!(
            l.paced_with >= DELAY / 2 && l.paced_with < DELAY * 3 / 2,
            "{:?}",
            l.paced_with
        );
        // Each slot is the one before it plus that one's spacing.
        assert_eq!(l.wait, slot);
        slot += l.paced_with;
    }
    let mut spacings: Vec<Duration> = leased.iter().map(|l| l.paced_with).collect();
    spacings.dedup();
    assert!(spacings.len() > 1, "not randomised: {spacings:?}");
}

async fn a_slot_reserved_later_keeps_the_spacing_and_the_hold(h: &impl Harness) {
    let f = h
        .frontier(Options {
            pacing: paced(Duration::from_millis(100)),
            ..worker("w1")
        })
        .await;
    let host = "held.example";
    let ms = Duration::from_millis;
    // A free host: the slot is now, or at the hold.
    assert_eq!(
        f.reserve_slot(host, ms(300), Duration::ZERO, None)
            .await
            .unwrap(),
        Some(Duration::ZERO)
    );
    // The next is the spacing asked for after it (larger than the
    // spider's delay); none past the limit, which reserves nothing.
    let second = f
        .reserve_slot(host, ms(300), Duration::ZERO, None)
        .await
        .unwrap();
    assert!(
        second.is_some_and(|w| w <= ms(300) && w + ms(50) >= ms(300)),
        "{second:?}"
    );
    assert_eq!(
        f.reserve_slot(host, ms(300), Duration::ZERO, Some(ms(100)))
            .await
            .unwrap(),
        None
    );
    let third = f
        .reserve_slot(host, ms(300), Duration::ZERO, None)
        .await
        .unwrap();
    assert!(
        third.is_some_and(|w| w <= ms(600) && w + ms(50) >= ms(600)),
        "{third:?}"
    );
    // A hold (a Retry-After heard before the commit) beyond the slots.
    let other = "hold.example";
    let held = f
        .reserve_slot(other, ms(100), ms(2000), None)
        .await
        .unwrap();
    assert_eq!(held, Some(ms(2000)));
    assert_eq!(
        f.reserve_slot(other, ms(100), ms(500), Some(ms(1000)))
            .await
            .unwrap(),
        None,
        "the host's next slot is 2.1 s away"
    );
    // A lease of that host waits for the slot after it.
    queue(&f, &[Request::get("http://hold.example/a")]).await;
    let leased = lease(&f, 1).await;
    assert!(
        leased[0].wait <= ms(2100) && leased[0].wait + ms(50) >= ms(2100),
        "{:?}",
        leased[0].wait
    );
}

async fn a_request_whose_slot_is_beyond_half_a_lease_is_parked_until_in_reach(h: &impl Harness) {
    // Half a lease (and at least a second): waits up to 1 s are worth a lease.
    let f = h
        .frontier(Options {
            pacing: paced(Duration::from_millis(800)),
            ..options("w1", Duration::from_secs(2))
        })
        .await;
    queue(
        &f,
        &[
            Request::get("http://far.example/a"),
            Request::get("http://far.example/b"),
            Request::get("http://far.example/c"),
        ],
    )
    .await;
    let leased_at = Instant::now();
    let leased = lease(&f, 3).await;
    // Slots at 0 and 800 ms; the third, at 1600 ms, is too far: it is
    // parked, still queued, and the crawl is not over.
    assert_eq!(
        urls(&leased),
        vec!["http://far.example/a", "http://far.example/b"]
    );
    let status = f.status().await.unwrap();
    assert_eq!((status.queued, status.delayed), (1, 0), "{status:?}");
    assert!(!status.drained());
    assert_eq!(f.stat(stats::SCHEDULER_PARKED).await.unwrap(), 1);
    // It may be leased once its slot is within 1 s: 600 ms from the lease.
    let due = f.next_due_in().expect("the parked request's time is known");
    assert!(
        due <= Duration::from_millis(600)
            && due + leased_at.elapsed() + MS_ROUNDING >= Duration::from_millis(600),
        "due in {due:?}"
    );
    let (third, after) = lease_when_due(&f, leased_at).await;
    assert_eq!(third.request.as_ref().unwrap().url, "http://far.example/c");
    assert!(
        after + MS_ROUNDING >= Duration::from_millis(600),
        "{after:?}"
    );
    assert!(third.wait <= Duration::from_secs(1), "{:?}", third.wait);
}

async fn a_slow_hosts_backlog_never_hides_other_hosts_requests(h: &impl Harness) {
    // A lease of 4 scans 16 entries deep, and parks what it passes.
    const BACKLOG: usize = 200;
    let f = h
        .frontier(Options {
            pacing: paced(Duration::from_secs(1)),
            ..options("w1", Duration::from_secs(2))
        })
        .await;
    let mut requests: Vec<Request> = (0..BACKLOG)
        .map(|i| Request::get(&format!("http://slow.example/{i}")))
        .collect();
    requests.extend((0..3).map(|i| Request::get(&format!("http://other.example/{i}"))));
    queue(&f, &requests).await;
    let leased_at = Instant::now();
    let leased = lease(&f, 4).await;
    // Each host's slots within 1 s (half the lease): 0 and 1000 ms (a
    // sharded spider's hosts are in different shards: in any order).
    let mut got = urls(&leased);
    got.sort_unstable();
    assert_eq!(
        got,
        vec![
            "http://other.example/0",
            "http://other.example/1",
            "http://slow.example/0",
            "http://slow.example/1"
        ]
    );
    // What the lease passed of the slow host is parked, still queued (in
    // one queue, the whole backlog; a sharded spider's other shard was not
    // passed).
    let status = f.status().await.unwrap();
    assert_eq!(
        (status.queued, status.delayed),
        (BACKLOG as u64 - 1, 0),
        "{status:?}"
    );
    let parked = f.stat(stats::SCHEDULER_PARKED).await.unwrap();
    assert!(
        (1..=BACKLOG as u64 - 2).contains(&parked),
        "{parked} parked"
    );
    // Parked requests keep their queue place: the slow host's next is the
    // one after those leased.
    let next = loop {
        let (next, _) = lease_when_due(&f, leased_at).await;
        let url = next.request.as_ref().unwrap().url.clone();
        if url.starts_with("http://slow.example/") {
            break url;
        }
    };
    assert_eq!(next, "http://slow.example/2");
}

async fn a_worker_leasing_due_only_parks_what_would_wait(h: &impl Harness) {
    let f = h
        .frontier(Options {
            pacing: paced(Duration::from_secs(1)),
            ..worker("w1")
        })
        .await;
    queue(
        &f,
        &[
            Request::get("http://paced.example/a"),
            Request::get("http://paced.example/b"),
            Request::get("http://paced.example/c"),
            Request::get("http://other.example/a"),
        ],
    )
    .await;
    // A worker holding its fill of requests waiting for their slots.
    f.lease_due_only(true);
    let leased = lease(&f, 4).await;
    let mut got = urls(&leased);
    got.sort_unstable();
    assert_eq!(
        got,
        vec!["http://other.example/a", "http://paced.example/a"]
    );
    assert!(leased.iter().all(|l| l.wait.is_zero()), "{leased:?}");
    assert_eq!(f.status().await.unwrap().queued, 2);
    assert_eq!(f.stat(stats::SCHEDULER_PARKED).await.unwrap(), 2);
    // Once it has room again, the host's next request comes back at the
    // host's turn, with its wait.
    f.lease_due_only(false);
    let (next, _) = lease_when_due(&f, Instant::now()).await;
    assert_eq!(next.request.as_ref().unwrap().url, "http://paced.example/b");
}

async fn revisits_come_due_and_leave_the_schedule(h: &impl Harness) {
    const AFTER: Duration = Duration::from_millis(400);
    let f = h.frontier(worker("w1")).await;
    let revisited = Request::get("http://news.example/front");
    queue(
        &f,
        &[revisited.clone(), Request::get("http://news.example/other")],
    )
    .await;
    let leased = lease(&f, 2).await;
    let at = |after: Duration| PageResult {
        revisit: Some(Revisit::At {
            request: revisited.clone(),
            after,
        }),
        ..PageResult::default()
    };
    let committed = Instant::now();
    commit(&f, &leased[0], &at(AFTER)).await;
    let status = f.status().await.unwrap();
    assert_eq!((status.scheduled, status.overdue), (1, 0), "{status:?}");
    let early = lease(&f, 1).await;
    assert!(
        early.is_empty() || committed.elapsed() >= AFTER,
        "leased before its time"
    );
    let (again, after) = match early.into_iter().next() {
        Some(l) => (l, committed.elapsed()),
        None => lease_when_due(&f, committed).await,
    };
    assert!(after + MS_ROUNDING >= AFTER, "{after:?}");
    assert_eq!(again.request.as_ref().unwrap(), &revisited);
    // Leased and not committed yet: still scheduled, and overdue.
    let status = f.status().await.unwrap();
    assert_eq!((status.scheduled, status.overdue), (1, 1), "{status:?}");
    assert_eq!(f.stat(stats::REVISIT_QUEUED).await.unwrap(), 1);
    commit(&f, &again, &at(Duration::from_secs(3600))).await;
    let status = f.status().await.unwrap();
    assert_eq!((status.scheduled, status.overdue), (1, 0), "{status:?}");
    // Taken off the schedule (by any page's commit: it answered 404).
    let drop = PageResult {
        revisit: Some(Revisit::Drop {
            request: revisited.clone(),
        }),
        ..PageResult::default()
    };
    commit(&f, &leased[1], &drop).await;
    let status = f.status().await.unwrap();
    assert_eq!((status.scheduled, status.overdue), (0, 0), "{status:?}");
    assert_eq!(f.stat(stats::REVISIT_DROPPED).await.unwrap(), 1);
}

/// A retry comes back at the place its commit gave it (its priority, then
/// its commit's turn), a revisit at its priority when it comes due (its
/// turn then). Priorities beyond ±4095 are clamped there as everywhere:
/// a request may carry one (a task's `{p}` renders into a start request
/// unchecked), and the queue's order is exact only within the range.
async fn work_that_comes_back_takes_its_priority_place(h: &impl Harness) {
    const DUE: Duration = Duration::from_millis(200);
    let f = h.frontier(worker("w1")).await;
    let at = |url: &str, priority: i64| Request {
        priority,
        ..unfiltered(url)
    };
    queue(
        &f,
        &[
            at("http://back.example/retried", 0),
            at("http://back.example/revisited", 9999),
        ],
    )
    .await;
    let leased = lease(&f, 2).await;
    // A retry at priority 10, and a revisit at a priority beyond the range.
    let retry = PageResult {
        retry: Some(Retry {
            request: at("http://back.example/retried", 10),
            delay: DUE,
        }),
        ..PageResult::default()
    };
    let revisit = PageResult {
        revisit: Some(Revisit::At {
            request: at("http://back.example/revisited", 9999),
            after: DUE,
        }),
        ..PageResult::default()
    };
    commit(&f, &leased[0], &retry).await;
    commit(&f, &leased[1], &revisit).await;
    queue(
        &f,
        &[
            at("http://back.example/low", 0),
            at("http://back.example/high", 4095),
            at("http://back.example/middle", 10),
        ],
    )
    .await;
    until_queued(&f, 5).await;
    assert_eq!(
        urls(&lease(&f, 10).await),
        vec![
            "http://back.example/high",
            // Clamped to 4095, and queued after `high` when it came due.
            "http://back.example/revisited",
            // Placed by its commit, before `middle` was queued.
            "http://back.example/retried",
            "http://back.example/middle",
            "http://back.example/low",
        ]
    );
}

async fn leases_stop_at_max_pages_until_the_limit_is_raised(h: &impl Harness) {
    let quota = |max_pages| Options {
        quota: Quota {
            max_pages,
            max_pages_per_host: 0,
        },
        ..worker("w1")
    };
    let f = h.frontier(quota(2)).await;
    enqueue(&f, &[(1, 0), (2, 0), (3, 0), (4, 0)]).await;
    // Responses received plus requests in flight count.
    let leased = lease(&f, 10).await;
    assert_eq!(order(&leased), vec![1, 2]);
    if h.shards() == 1 {
        // Reached once a lease is refused. (Over shards, a shard whose
        // cap of the limit ran out may refuse one in this very lease.)
        assert!(!f.status().await.unwrap().page_limit_reached);
    }
    assert!(lease(&f, 10).await.is_empty());
    assert!(f.status().await.unwrap().page_limit_reached);
    let received = PageResult {
        stats: {
            let mut t = Tally::default();
            t.add(stats::RESPONSE_RECEIVED_COUNT, 1);
            t
        },
        ..PageResult::default()
    };
    for l in &leased {
        commit(&f, l, &received).await;
    }
    assert!(lease(&f, 10).await.is_empty());
    assert!(f.status().await.unwrap().page_limit_reached);
    // Counted once (over shards, once per shard whose cap ran out).
    let counted = f.stat(stats::QUOTA_MAX_PAGES_REACHED).await.unwrap();
    assert!((1..=h.shards() as u64).contains(&counted), "{counted}");
    // A worker with a higher limit leases again, up to it.
    let raised = h.frontier(quota(3)).await;
    assert_eq!(order(&lease(&raised, 10).await), vec![3]);
    if h.shards() == 1 {
        assert!(!raised.status().await.unwrap().page_limit_reached);
    }
    assert!(lease(&raised, 10).await.is_empty());
    assert!(raised.status().await.unwrap().page_limit_reached);
}

async fn max_pages_per_host_counts_what_a_release_gives_back(h: &impl Harness) {
    let f = h
        .frontier(Options {
            quota: Quota {
                max_pages: 0,
                max_pages_per_host: 2,
            },
            ..worker("w1")
        })
        .await;
    queue(
        &f,
        &[
            Request::get("http://quota.example/1"),
            Request::get("http://quota.example/2"),
        ],
    )
    .await;
    let one = lease(&f, 1).await;
    let two = lease(&f, 1).await;
    assert_eq!(urls(&two), vec!["http://quota.example/2"]);
    // Handed back, its page is not counted: leased again, it is the second.
    assert_eq!(f.release(&ids(&two)).await.unwrap(), 1);
    assert_eq!(urls(&lease(&f, 10).await), vec!["http://quota.example/2"]);
    // A third page of the host is dropped, and counted.
    let page = PageResult {
        requests: vec![Request::get("http://quota.example/3")],
        ..PageResult::default()
    };
    commit(&f, &one[0], &page).await;
    assert!(lease(&f, 10).await.is_empty());
    assert_eq!(f.status().await.unwrap().queued, 0);
    assert_eq!(f.stat(stats::QUOTA_HOST_DROPPED).await.unwrap(), 1);
}

async fn nothing_is_leased_while_paused(h: &impl Harness) {
    let f = h.frontier(worker("w1")).await;
    let other = h.frontier(worker("w2")).await;
    enqueue(&f, &[(1, 0), (2, 0), (3, 0)]).await;
    let first = lease(&f, 1).await;
    assert!(f.pause().await.unwrap());
    assert!(!other.pause().await.unwrap(), "paused already");
    assert!(other.status().await.unwrap().paused);
    assert!(
        other.paused().await.unwrap(),
        "every worker reads the pause"
    );
    assert!(lease(&f, 10).await.is_empty());
    assert!(lease(&other, 10).await.is_empty());
    // A page in flight is committed, and leases no replacement.
    let (done, next) = f
        .commit(&first[0], &PageResult::default(), 5, false.into())
        .await
        .unwrap();
    assert!(matches!(done, Committed::Done { .. }), "{done:?}");
    assert!(next.is_empty(), "leased while paused");
    assert!(other.resume().await.unwrap());
    assert!(!f.resume().await.unwrap(), "not paused any more");
    assert!(!f.status().await.unwrap().paused);
    assert!(!other.paused().await.unwrap());
    // Each worker leases its share again.
    assert_eq!(order(&lease(&other, 10).await), vec![2]);
    assert_eq!(order(&lease(&f, 10).await), vec![3]);
}

async fn failures_and_dead_letters_are_listed_oldest_first(h: &impl Harness) {
    let f = h.frontier(worker("w1")).await;
    enqueue(&f, &[(1, 0), (2, 0), (3, 0)]).await;
    let leased = lease(&f, 3).await;
    let (leased, last) = leased.split_at(2);
    for (i, l) in leased.iter().enumerate() {
        let request = l.request.as_ref().unwrap();
        let page = PageResult {
            failed: Some(FailedRecord::new(
                request,
                &format!("HTTP 50{i}"),
                "http_status",
                Some(500 + i as u16),
            )),
            ..PageResult::default()
        };
        commit(&f, l, &page).await;
    }
    let shown = |records: Vec<FailedRecord>| -> Vec<(String, String, String, Option<u16>)> {
        records
            .into_iter()
            .map(|r| (r.url, r.reason, r.kind, r.status))
            .collect()
    };
    let url = |n: u32| format!("http://127.0.0.1:8700/list/{n}/1");
    let failures = f.failures(10).await.unwrap();
    assert_eq!(failures[1].request, *leased[1].request.as_ref().unwrap());
    assert_eq!(
        shown(failures),
        vec![
            (url(1), "HTTP 500".into(), "http_status".into(), Some(500)),
            (url(2), "HTTP 501".into(), "http_status".into(), Some(501)),
        ]
    );
    assert_eq!(
        shown(f.failures(1).await.unwrap()),
        vec![(url(2), "HTTP 501".into(), "http_status".into(), Some(501))],
        "the last ones"
    );
    assert_eq!(f.status().await.unwrap().failed, 2);
    assert_eq!(f.stat(stats::FAILED_COUNT).await.unwrap(), 2);
    // A page set aside as malformed: its dead letter, listed and counted.
    let dead = DeadLetter::new(&f.keys().requests, "{broken", "request is not valid JSON");
    let page = PageResult {
        dead: Some(dead.clone()),
        ..PageResult::default()
    };
    commit(&f, &last[0], &page).await;
    let listed = f.dead_letters(10).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (
            &listed[0].key,
            &listed[0].entry,
            &listed[0].reason,
            listed[0].bytes
        ),
        (&dead.key, &dead.entry, &dead.reason, dead.bytes)
    );
    assert_eq!(f.status().await.unwrap().dead, 1);
    assert_eq!(f.stat(stats::DEADLETTER_COUNT).await.unwrap(), 1);
}

async fn a_robots_record_is_kept_with_its_error(h: &impl Harness) {
    let f = h.frontier(worker("w1")).await;
    assert_eq!(f.robots_cached("down.example").await.unwrap(), None);
    let record = RobotsRecord {
        status: None,
        body: String::new(),
        fetched_at: 1_700_000_000.25,
        error: Some(RobotsError {
            reason: "http://down.example/robots.txt: connection refused".to_string(),
            kind: "ConnectionError".to_string(),
            retryable: true,
        }),
    };
    f.robots_store(
        "down.example",
        &record,
        Duration::ZERO,
        Duration::from_secs(3600),
    )
    .await
    .unwrap();
    assert_eq!(f.robots_cached("down.example").await.unwrap(), Some(record));
    assert_eq!(f.robots_cached("other.example").await.unwrap(), None);
}

async fn the_robots_lock_is_held_until_stored_or_run_out(h: &impl Harness) {
    let a = h.frontier(worker("worker-a")).await;
    let b = h.frontier(worker("worker-b")).await;
    let long = Duration::from_secs(60);
    assert!(a.robots_lock("site.example", long).await.unwrap());
    assert!(!b.robots_lock("site.example", long).await.unwrap());
    assert!(!a.robots_lock("site.example", long).await.unwrap());
    assert!(
        b.robots_lock("other.example", long).await.unwrap(),
        "per host"
    );
    // Storing the record frees the lock.
    let record = RobotsRecord {
        status: Some(404),
        body: String::new(),
        fetched_at: 1_700_000_000.0,
        error: None,
    };
    a.robots_store("site.example", &record, Duration::ZERO, long)
        .await
        .unwrap();
    assert!(b.robots_lock("site.example", long).await.unwrap());
    // A lock nobody frees runs out.
    let short = Duration::from_millis(200);
    let taken = Instant::now();
    assert!(a.robots_lock("gone.example", short).await.unwrap());
    assert!(
        !b.robots_lock("gone.example", short).await.unwrap()
            || taken.elapsed() + MS_ROUNDING >= short,
        "taken before it ran out"
    );
    eventually_async("the robots.txt lock runs out", LIMIT, || async {
        b.robots_lock("gone.example", short)
            .await
            .unwrap()
            .then_some(())
    })
    .await;
    assert!(
        taken.elapsed() + MS_ROUNDING >= short,
        "{:?}",
        taken.elapsed()
    );
}

fn login(cookie: &str, account: &str) -> SessionLogin {
    SessionLogin {
        cookie: Some(SecretText::new(cookie.into())),
        account: account.into(),
        accounts: format!("{{\"{account}\": 1}}"),
        ..SessionLogin::default()
    }
}

async fn one_worker_logs_in_and_the_others_get_its_session(h: &impl Harness) {
    let a = h.frontier(worker("worker-a")).await;
    let b = h.frontier(worker("worker-b")).await;
    let long = Duration::from_secs(60);
    assert_eq!(a.session().await.unwrap().generation, 0);
    assert_eq!(
        a.session_lock(0, "a", long).await.unwrap(),
        SessionLock::Taken
    );
    assert_eq!(
        b.session_lock(0, "b", long).await.unwrap(),
        SessionLock::Busy
    );
    // Only the holder writes the history (a login that did not hold the
    // lock keeps only its session, as a late one: see below).
    let history = SessionLogin {
        accounts: "{\"x\": 1}".into(),
        ..SessionLogin::default()
    };
    assert!(!b.session_store("b", &history).await.unwrap());
    assert_eq!(a.session().await.unwrap().accounts, "");
    assert!(a
        .session_store("a", &login("sid=a", "alice"))
        .await
        .unwrap());
    let SessionLock::Fresh(got) = b.session_lock(0, "b", long).await.unwrap() else {
        panic!("the session a stored is not given to b");
    };
    assert_eq!(
        (
            got.generation,
            got.cookie.expose(),
            got.account.as_str(),
            got.logins
        ),
        (1, "sid=a", "alice", 1)
    );
    assert!(got.created_ms > 0 && !got.stale);
    assert_eq!(got.accounts, "{\"alice\": 1}");
    // A login that failed frees the lock and keeps only the history.
    assert_eq!(
        b.session_lock(1, "b", long).await.unwrap(),
        SessionLock::Taken
    );
    let failed = SessionLogin {
        account: "bob".into(),
        accounts: "{\"bob\": \"retired\"}".into(),
        ..SessionLogin::default()
    };
    assert!(b.session_store("b", &failed).await.unwrap());
    let after = a.session().await.unwrap();
    assert_eq!((after.generation, after.cookie.expose()), (1, "sid=a"));
    assert_eq!(after.accounts, failed.accounts);
}

async fn a_stale_session_is_marked_once_and_logged_in_again_once(h: &impl Harness) {
    let a = h.frontier(worker("worker-a")).await;
    let b = h.frontier(worker("worker-b")).await;
    let long = Duration::from_secs(60);
    assert_eq!(
        a.session_lock(0, "a", long).await.unwrap(),
        SessionLock::Taken
    );
    assert!(a
        .session_store("a", &login("sid=1", "alice"))
        .await
        .unwrap());
    // Both saw generation 1 logged out: one mark, one login.
    assert!(a.session_stale(1).await.unwrap());
    assert!(!b.session_stale(1).await.unwrap());
    assert!(a.session().await.unwrap().stale);
    assert_eq!(
        a.session_lock(1, "a", long).await.unwrap(),
        SessionLock::Taken
    );
    assert_eq!(
        b.session_lock(1, "b", long).await.unwrap(),
        SessionLock::Busy
    );
    assert!(a
        .session_store("a", &login("sid=2", "alice"))
        .await
        .unwrap());
    let SessionLock::Fresh(got) = b.session_lock(1, "b", long).await.unwrap() else {
        panic!("b does not get the new session");
    };
    assert_eq!(
        (got.generation, got.cookie.expose(), got.logins),
        (2, "sid=2", 2)
    );
    // News of an older generation marks nothing.
    assert!(!b.session_stale(1).await.unwrap());
    assert!(!b.session().await.unwrap().stale);
}

async fn a_login_lock_nobody_frees_runs_out(h: &impl Harness) {
    let a = h.frontier(worker("worker-a")).await;
    let b = h.frontier(worker("worker-b")).await;
    let short = Duration::from_millis(200);
    let taken = Instant::now();
    assert_eq!(
        a.session_lock(0, "a", short).await.unwrap(),
        SessionLock::Taken
    );
    eventually_async("the login lock runs out", LIMIT, || async {
        let long = Duration::from_secs(60);
        (b.session_lock(0, "b", long).await.unwrap() == SessionLock::Taken).then_some(())
    })
    .await;
    assert!(
        taken.elapsed() + MS_ROUNDING >= short,
        "{:?}",
        taken.elapsed()
    );
    // The holder that outlived its deadline counted its attempt while it
    // held the lock; late, it writes no history, but its session is kept
    // while none newer was stored.
    let note = SessionLogin {
        accounts: "{\"alice\": 1}".into(),
        keep_lock: true,
        ..SessionLogin::default()
    };
    assert!(!a.session_store("a", &note).await.unwrap());
    assert!(a
        .session_store("a", &login("sid=late", "alice"))
        .await
        .unwrap());
    let kept = a.session().await.unwrap();
    assert_eq!((kept.generation, kept.cookie.expose()), (1, "sid=late"));
    assert_eq!(kept.accounts, "");
    // The lock's holder counts its attempt and keeps the lock ...
    let note = SessionLogin {
        accounts: "{\"bob\": 1}".into(),
        keep_lock: true,
        ..SessionLogin::default()
    };
    assert!(b.session_store("b", &note).await.unwrap());
    assert_eq!(b.session().await.unwrap().accounts, note.accounts);
    assert_eq!(
        a.session_lock(1, "a", short).await.unwrap(),
        SessionLock::Busy
    );
    // ... and stores its login after the late one (it replaced generation
    // 0 too: it is still the lock's holder).
    assert!(b.session_store("b", &login("sid=b", "bob")).await.unwrap());
    let now = a.session().await.unwrap();
    assert_eq!((now.generation, now.cookie.expose()), (2, "sid=b"));
    // A late login older than the stored session is not kept.
    assert!(!a
        .session_store("a", &login("sid=older", "alice"))
        .await
        .unwrap());
    assert_eq!(a.session().await.unwrap().cookie.expose(), "sid=b");
}

async fn stats_add_up_and_the_finish_is_recorded(h: &impl Harness) {
    let a = h.frontier(worker("worker-a")).await;
    let b = h.frontier(worker("worker-b")).await;
    let started =
        humantime::format_rfc3339_seconds(std::time::SystemTime::now() - Duration::from_secs(60))
            .to_string();
    let tally = |n| {
        let mut t = Tally::default();
        t.add(stats::ITEM_SCRAPED_COUNT, n);
        t.add_in(stats::DOWNLOADER_RESPONSE_STATUS, 200, n);
        t
    };
    assert_eq!(a.stat(stats::ITEM_SCRAPED_COUNT).await.unwrap(), 0);
    a.add_stats(&tally(2), Some(&started)).await.unwrap();
    b.add_stats(&tally(3), Some("2001-01-01T00:00:00Z"))
        .await
        .unwrap();
    assert_eq!(b.stat(stats::ITEM_SCRAPED_COUNT).await.unwrap(), 5);
    b.record_finish("finished").await.unwrap();
    let all = a.stats().await.unwrap();
    let field = |name: &str| -> String {
        all.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {name} in {all:?}"))
    };
    assert_eq!(field(stats::START_TIME.name), started, "set once");
    assert_eq!(field("downloader/response_status_count/200"), "5");
    assert_eq!(field(stats::FINISH_REASON.name), "finished");
    humantime::parse_rfc3339(&field(stats::FINISH_TIME.name))
        .unwrap_or_else(|e| panic!("finish_time: {e}"));
    let elapsed: f64 = field(stats::ELAPSED_TIME_SECONDS.name).parse().unwrap();
    assert!((59.0..600.0).contains(&elapsed), "{elapsed}");
}

async fn a_small_crawl_drains(h: &impl Harness) {
    let f = h.frontier(worker("w1")).await;
    assert!(f.status().await.unwrap().drained(), "nothing to do yet");
    enqueue(&f, &[(1, 0), (2, 0)]).await;
    assert!(!f.status().await.unwrap().drained());
    let leased = lease(&f, 10).await;
    let status = f.status().await.unwrap();
    assert_eq!(status.inflight, 2);
    assert!(!status.drained());
    // The first page links to a third; the second has an item.
    commit(
        &f,
        &leased[0],
        &PageResult {
            requests: vec![Request::get("http://127.0.0.1:8700/list/3/1")],
            ..PageResult::default()
        },
    )
    .await;
    commit(&f, &leased[1], &page_with_item(2)).await;
    assert!(!f.status().await.unwrap().drained());
    let last = lease(&f, 10).await;
    commit(&f, &last[0], &page_with_item(3)).await;
    let status = f.status().await.unwrap();
    assert!(status.drained(), "{status:?}");
    assert_eq!((status.items, status.dupefilter), (2, 1), "{status:?}");
    assert!(lease(&f, 10).await.is_empty());
    assert_eq!(f.next_due_in(), None, "nothing will come due");
}

/// The adaptive back-off rule (`politeness.rs` in Rust, `host_news` in the
/// commit script) gives the golden table's numbers after every response,
/// each reported through a page's commit.
async fn the_back_off_rule_gives_the_golden_tables_numbers(h: &impl Harness) {
    for (i, case) in golden::cases().iter().enumerate() {
        let host = format!("case{i}.example");
        // A lease long enough that no back-off makes a slot too far.
        let f = h
            .frontier(Options {
                pacing: Pacing {
                    interval: Duration::ZERO,
                    jitter: false,
                    backoff_max: Duration::from_millis(case.backoff_max_ms),
                },
                ..options(&format!("golden-{i}"), Duration::from_secs(24 * 3600))
            })
            .await;
        let url = format!("http://{host}/page");
        queue(&f, &[unfiltered(&url)]).await;
        for (step_no, step) in case.steps.iter().enumerate() {
            let leased = lease(&f, 1).await;
            assert_eq!(
                urls(&leased),
                vec![url.as_str()],
                "case `{}`, step {step_no}",
                case.name
            );
            let page = PageResult {
                host: step.outcome(),
                // The next step's request (none after the last).
                requests: case.steps[step_no + 1..]
                    .iter()
                    .take(1)
                    .map(|_| unfiltered(&url))
                    .collect(),
                ..PageResult::default()
            };
            assert!(matches!(
                commit(&f, &leased[0], &page).await,
                Committed::Done { .. }
            ));
            assert_eq!(
                h.backoff(&host).await,
                (step.backoff, step.errors),
                "case `{}`, step {step_no} ({})",
                case.name,
                step.outcome
            );
        }
        // The next case's worker crawls alone (a paced host's slots are
        // not shared with workers gone).
        f.unregister().await.unwrap();
    }
}

/// One test per promise per backend.
macro_rules! promises {
    ($($promise:ident),+ $(,)?) => {
        /// Every promise against the Redis frontier, each on a
        /// redis-server of its own.
        mod redis {
            $(
                #[tokio::test]
                async fn $promise() {
                    super::$promise(&super::OnRedis::start()).await;
                }
            )+
        }

        /// Every promise against a sharded spider's frontier, each on a
        /// redis-server of its own.
        mod sharded {
            $(
                #[tokio::test]
                async fn $promise() {
                    super::$promise(&super::OnShards { server: super::RedisServer::start() }).await;
                }
            )+
        }

        /// Every promise against a local crawl's frontier.
        mod local {
            $(
                #[tokio::test]
                async fn $promise() {
                    super::$promise(&super::OnLocal::default()).await;
                }
            )+
        }
    };
}

promises!(
    equal_priorities_come_out_fifo_and_higher_priorities_first,
    a_start_entry_is_claimed_once_and_a_refused_one_becomes_a_dead_letter,
    the_dupefilter_filters_unless_dont_filter,
    a_page_of_many_links_queues_each_once_or_nothing_once_its_lease_is_lost,
    an_expired_lease_returns_to_its_place_and_its_old_holder_cannot_commit,
    a_renewed_lease_is_kept_and_a_lost_one_is_named,
    a_request_whose_lease_keeps_expiring_becomes_a_dead_letter,
    the_same_page_twice_in_one_batch_is_committed_once,
    a_commit_leases_the_pages_replacements,
    a_released_lease_returns_to_its_place,
    a_worker_leases_no_more_than_its_fair_share,
    a_worker_over_twice_its_share_is_asked_to_hand_back,
    a_worker_joining_the_crew_asks_one_over_its_share_to_hand_back,
    a_retry_waits_its_delay,
    a_retry_after_holds_its_host,
    slots_are_spaced_by_the_delay_and_by_a_crawl_delay,
    jittered_slots_stay_between_half_and_one_and_a_half_the_delay,
    a_slot_reserved_later_keeps_the_spacing_and_the_hold,
    a_request_whose_slot_is_beyond_half_a_lease_is_parked_until_in_reach,
    a_slow_hosts_backlog_never_hides_other_hosts_requests,
    a_worker_leasing_due_only_parks_what_would_wait,
    revisits_come_due_and_leave_the_schedule,
    work_that_comes_back_takes_its_priority_place,
    leases_stop_at_max_pages_until_the_limit_is_raised,
    max_pages_per_host_counts_what_a_release_gives_back,
    nothing_is_leased_while_paused,
    failures_and_dead_letters_are_listed_oldest_first,
    a_robots_record_is_kept_with_its_error,
    the_robots_lock_is_held_until_stored_or_run_out,
    stats_add_up_and_the_finish_is_recorded,
    one_worker_logs_in_and_the_others_get_its_session,
    a_stale_session_is_marked_once_and_logged_in_again_once,
    a_login_lock_nobody_frees_runs_out,
    a_small_crawl_drains,
    the_back_off_rule_gives_the_golden_tables_numbers,
);

// Where the local backend differs on purpose.

const LIST: &str = r#"
name = "list"
[start]
task_fields = ["forum_id"]
url = "http://127.0.0.1:9/list/{forum_id}"
rule = "list"
[[rules]]
name = "list"
  [[rules.follow]]
  css = "a::attr(href)"
  to_spider = "detail"
  meta = ["forum_id"]
"#;

const DETAIL: &str = r#"
name = "detail"
[start]
task_fields = ["forum_id"]
rule = "post"
[[rules]]
name = "post"
  [[rules.extract]]
  item = "post"
[items.post]
title = "h1::text"
"#;

/// A local crawl has no other spider's start key to hand links to: a
/// spider with a `to_spider` follow is refused, naming both spiders.
#[tokio::test]
async fn a_local_crawl_refuses_a_spider_that_hands_links_to_another() {
    let dir = temp_dir("contract-handoff");
    let list = dir.path().join("list.toml");
    std::fs::write(&list, LIST).unwrap();
    std::fs::write(dir.path().join("detail.toml"), DETAIL).unwrap();
    let spider = Spider::load(&list).unwrap_or_else(|e| panic!("{e}"));
    let refused = LocalFrontier::refuse_handoffs(&spider.name, &spider.handoffs)
        .expect_err("a spider that hands links on is refused");
    assert!(
        refused.contains("spider `list` hands links to spider `detail`"),
        "{refused}"
    );
    let settings = spider.settings.clone();
    let shared = crawlworker::worker::shared::Shared::new("local".to_string(), 1, None);
    match crawlworker::worker::SpiderRun::local(
        spider,
        settings,
        &shared,
        Vec::new(),
        Box::new(std::io::sink()),
    ) {
        Ok(_) => panic!("a local run of a spider that hands links on started"),
        Err(e) => assert_eq!(e.to_string(), refused),
    }
    // Without handoffs, nothing is refused.
    assert_eq!(LocalFrontier::refuse_handoffs("detail", &[]), Ok(()));
}

/// A local crawl is this process's alone: it keeps no worker list (a
/// heartbeat is read by no one), has no per-host state to sweep (it ends
/// with the crawl), and never has a fatal Redis error.
#[tokio::test]
async fn a_local_crawl_keeps_no_workers_and_sweeps_nothing() {
    let h = OnLocal::default();
    let f = h.frontier(worker("local")).await;
    assert!(!f.is_shared());
    let beat = Heartbeat {
        host: "here".to_string(),
        pid: std::process::id(),
        started: "2026-01-01T00:00:00Z".to_string(),
        pages: 0,
        heartbeat: 1_700_000_000.0,
        version: String::new(),
    };
    f.heartbeat(&beat).await.unwrap();
    assert!(f.workers().await.unwrap().is_empty());
    f.unregister().await.unwrap();
    // Per-host state stays for the crawl's length.
    f.robots_store(
        "kept.example",
        &RobotsRecord {
            status: Some(404),
            body: String::new(),
            fetched_at: 0.0,
            error: None,
        },
        Duration::ZERO,
        Duration::from_millis(1),
    )
    .await
    .unwrap();
    assert_eq!(
        f.sweep(100, Duration::from_millis(1)).await.unwrap(),
        Swept::default()
    );
    assert!(f.robots_cached("kept.example").await.unwrap().is_some());
    assert!(f.fatal().get().is_none());
}
