//! A big queue in one Redis: millions of queued requests over many hosts.
//! What a queued request costs Redis's memory (beside a scrapy-redis
//! pickled entry of the same request), what a lease and a commit cost at
//! that depth (the real scripts, driven through [`RedisFrontier`] as in
//! `benches/ceiling.rs`: synthetic pages, no HTTP), and how long one paced
//! host's backlog at the head of the queue takes to move out of the way
//! (parking, see `src/frontier/parking.rs`) before another host's request
//! is leased.
//!
//! Each part on a fresh `redis-server` (the test kit's, on loopback):
//!
//! 1. **Fill**: `BIG_QUEUE_REQUESTS` requests (10 million) over
//!    `BIG_QUEUE_HOSTS` hosts (100,000), queued through the claim script
//!    (start entries in a set, claimed in batches), as a crawl queues them.
//!    Redis memory per queued request: `used_memory` before and after, and
//!    `MEMORY USAGE` of the queue, the request data and the dupefilter.
//! 2. **scrapy-redis**: the same requests as scrapy-redis 0.9.1 queues
//!    them, a pickle (protocol 4) of Scrapy's `request_to_dict` in a zset,
//!    made by python3 for `BIG_QUEUE_PICKLES` (100,000) of the URLs.
//! 3. **Lease and commit at depth**: 16 connections with 32 pages in
//!    flight each, for 10 s, at the full queue and at a queue of 10,000:
//!    pages/s, Redis CPU per page, script calls per page.
//! 4. **A paced host at the head**: `BIG_QUEUE_PACED` requests (1 million)
//!    of one host paced at a second, then the rest of the 10 million over
//!    the other hosts; an idle worker's leases until the first request of
//!    another host: how many calls, how long, Redis CPU.
//!
//! Run it with:
//!
//! ```text
//! cargo bench --bench big_queue                     # ~5 GB of Redis memory
//! BIG_QUEUE_REQUESTS=1000000 BIG_QUEUE_PACED=100000 cargo bench --bench big_queue
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlworker::frontier::{
    Committed, Leased, Options, PageResult, RedisFrontier, Refused, StartClaim,
};
use crawlworker::request::Request;
use crawlworker::spider::Spider;
use crawlworker_testkit::readings::{
    info_number, memory_usage, redis_cpu, script_calls, start_counting,
};
use crawlworker_testkit::RedisServer;
use tokio::task::JoinSet;

fn spider_text(delay: &str) -> String {
    format!(
        r#"
name = "big"
[settings]
download_delay = {delay}
randomize_download_delay = false
[start]
type = "set"
url = "http://{{host}}/p/{{n}}"
[items.page]
n = {{ meta = "n" }}
[[rules]]
name = "page"
match = '/p/'
  [[rules.extract]]
  item = "page"
"#
    )
}

/// A Redis that never snapshots: a fork of gigabytes would double its
/// memory and eat the CPU being measured.
fn big_redis() -> RedisServer {
    RedisServer::start_with(&["--save", "", "--appendonly", "no"])
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The `i`-th host's name: under `.localhost`, so even a request that did
/// leave the bench would stay on this machine (none does: no HTTP here).
fn host(i: u64) -> String {
    format!("h{i}.localhost")
}

/// The paced host of part 4.
const SLOW_HOST: &str = "slow.localhost";

async fn frontier(redis: &RedisServer, spider: &Spider, worker: &str) -> RedisFrontier {
    let client = redis::Client::open(redis.url()).expect("client");
    RedisFrontier::connect(&client.into(), spider.frontier_options(worker))
        .await
        .expect("connect")
}

/// Queues the requests `task(i)` makes for i in `range`, in claim batches.
async fn fill(
    f: &RedisFrontier,
    spider: &Spider,
    range: std::ops::Range<u64>,
    task: impl Fn(u64) -> String,
) {
    let mut at = range.start;
    while at < range.end {
        let end = (at + 2000).min(range.end);
        let entries: Vec<String> = (at..end).map(&task).collect();
        f.push_start(&entries, 0.0, None).await.expect("push");
        let claims: Vec<StartClaim> = entries
            .into_iter()
            .map(|entry| StartClaim {
                outcome: spider.start_request(&entry).map_err(Refused::from),
                entry,
            })
            .collect();
        let claimed = f.claim_start(&claims).await.expect("claim");
        assert_eq!(claimed.enqueued, end - at, "not every request queued");
        at = end;
    }
}

fn spread_task(hosts: u64) -> impl Fn(u64) -> String {
    move |i| format!(r#"{{"host": "{}", "n": {i}}}"#, host(i % hosts))
}

/// Part 1: fills a Redis with `requests` over `hosts`; prints the memory.
async fn filled(requests: u64, hosts: u64) -> (RedisServer, Spider) {
    let redis = big_redis();
    let spider = Spider::from_str("big.toml".as_ref(), &spider_text("0")).expect("spider");
    let f = frontier(&redis, &spider, "filler").await;
    let mut conn = redis.conn();
    let before = info_number(&mut conn, "memory", "used_memory");
    let started = Instant::now();
    fill(&f, &spider, 0..requests, spread_task(hosts)).await;
    let took = started.elapsed().as_secs_f64();
    let after = info_number(&mut conn, "memory", "used_memory");
    let n = requests as f64;
    let k = &spider.keys;
    println!(
        "fill: {requests} requests over {hosts} hosts in {took:.0} s ({:.0} requests/s through the claim script)",
        n / took
    );
    println!(
        "memory per queued request: {:.0} B in all (used_memory), of which the queue {:.0} B, the request data {:.0} B, the dupefilter {:.0} B",
        (after - before) / n,
        memory_usage(&mut conn, &k.requests) / n,
        memory_usage(&mut conn, &k.request_data) / n,
        memory_usage(&mut conn, &k.dupefilter) / n,
    );
    (redis, spider)
}

/// Part 2: a scrapy-redis zset of pickled requests for `n` of the URLs.
fn scrapy_redis_entries(n: u64, hosts: u64) {
    let program = format!(
        r#"
import pickle, sys
out = sys.stdout
for i in range({n}):
    d = {{"url": "http://h%d.localhost/p/%d" % (i % {hosts}, i), "callback": None, "errback": None,
         "headers": {{}}, "method": "GET", "body": b"", "cookies": {{}}, "meta": {{"depth": 0}},
         "_encoding": "utf-8", "priority": 0, "dont_filter": False, "flags": [], "cb_kwargs": {{}}}}
    out.write(pickle.dumps(d, protocol=4).hex() + "\n")
"#
    );
    let output = std::process::Command::new("python3")
        .args(["-c", &program])
        .output();
    let output = output
        .ok()
        .filter(|o| o.status.success())
        .unwrap_or_else(|| panic!("python3 is needed to make scrapy-redis's pickles"));
    let pickles: Vec<Vec<u8>> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| hex::decode(l).ok())
        .collect();
    let redis = big_redis();
    let mut conn = redis.conn();
    let before = info_number(&mut conn, "memory", "used_memory");
    for chunk in pickles.chunks(1000) {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg("big:requests");
        for p in chunk {
            cmd.arg(0).arg(p.as_slice());
        }
        let _: i64 = cmd.query(&mut conn).expect("ZADD");
    }
    let after = info_number(&mut conn, "memory", "used_memory");
    let mean = pickles.iter().map(Vec::len).sum::<usize>() as f64 / pickles.len().max(1) as f64;
    println!(
        "scrapy-redis: a pickled request is {mean:.0} B; its zset holds {:.0} B per request (used_memory over {} entries; its dupefilter set comes on top)",
        (after - before) / pickles.len().max(1) as f64,
        pickles.len()
    );
}

/// A page that queues one new link of its own host, and commits.
fn page_for(l: &Leased) -> PageResult {
    let url = l
        .request
        .as_ref()
        .map(|r| r.url.clone())
        .unwrap_or_default();
    PageResult {
        requests: vec![Request::get(&format!("{url}/next"))],
        ..PageResult::default()
    }
}

async fn drive(f: RedisFrontier, inflight: usize, until: Instant, pages: Arc<AtomicU64>) {
    let mut tasks: JoinSet<Vec<Leased>> = JoinSet::new();
    let spawn = |tasks: &mut JoinSet<Vec<Leased>>, leased: Vec<Leased>| {
        for l in leased {
            let f = f.clone();
            let pages = pages.clone();
            tasks.spawn(async move {
                let next = usize::from(Instant::now() < until);
                match f.commit(&l, &page_for(&l), next, false.into()).await {
                    Ok((Committed::Done { .. }, next)) => {
                        pages.fetch_add(1, Ordering::Relaxed);
                        next
                    }
                    Ok((Committed::LeaseLost, _)) => Vec::new(),
                    Err(e) => panic!("commit failed: {e}"),
                }
            });
        }
    };
    let (first, _) = f.lease(inflight, 0).await.expect("lease");
    spawn(&mut tasks, first);
    while let Some(done) = tasks.join_next().await {
        spawn(&mut tasks, done.expect("page task"));
    }
}

/// Part 3: 16 connections × 32 pages for `seconds` on `redis`.
async fn lease_and_commit(redis: &RedisServer, spider: &Spider, what: &str, seconds: u64) {
    let mut conn = redis.conn();
    let cpu0 = start_counting(&mut conn);
    let pages = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let mut workers = JoinSet::new();
    for i in 0..16 {
        let options = Options {
            lease: Duration::from_secs(600),
            ..spider.frontier_options(&format!("load-{i}"))
        };
        let client = redis::Client::open(redis.url()).expect("client");
        let f = RedisFrontier::connect(&client.into(), options)
            .await
            .expect("connect");
        workers.spawn(drive(f, 32, until, pages.clone()));
    }
    while workers.join_next().await.is_some() {}
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = redis_cpu(&mut conn) - cpu0;
    let calls = script_calls(&mut conn);
    let pages = pages.load(Ordering::Relaxed) as f64;
    println!(
        "lease and commit, {what}: {:.0} pages/s, {:.1} µs of Redis CPU per page, {:.2} script calls per page",
        pages / elapsed,
        cpu / pages * 1e6,
        calls / pages
    );
}

/// Part 4: `paced` requests of one host paced at a second at the head,
/// then `behind` of other hosts; an idle worker leases until it gets one
/// of another host.
async fn paced_head(paced: u64, behind: u64, hosts: u64) {
    let redis = big_redis();
    let spider = Spider::from_str("big.toml".as_ref(), &spider_text("1")).expect("spider");
    let f = frontier(&redis, &spider, "worker").await;
    fill(&f, &spider, 0..paced, |i| {
        format!(r#"{{"host": "{SLOW_HOST}", "n": {i}}}"#)
    })
    .await;
    fill(&f, &spider, paced..paced + behind, spread_task(hosts)).await;
    let mut conn = redis.conn();
    let cpu0 = start_counting(&mut conn);
    let started = Instant::now();
    let mut calls = 0;
    let mut held = 0;
    let other = loop {
        let (leased, _) = f.lease(16, 0).await.expect("lease");
        calls += 1;
        held += leased.len();
        if let Some(l) = leased
            .iter()
            .find(|l| l.request.as_ref().is_ok_and(|r| !r.url.contains(SLOW_HOST)))
        {
            break l
                .request
                .as_ref()
                .map(|r| r.url.clone())
                .unwrap_or_default();
        }
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "no other host's request within 30 minutes"
        );
    };
    let took = started.elapsed().as_secs_f64();
    let cpu = redis_cpu(&mut conn) - cpu0;
    println!(
        "a paced host's {paced} requests at the head: another host's request ({other}) leased after {calls} lease calls, {took:.1} s, {cpu:.1} s of Redis CPU ({:.1} µs per request moved); the slow host's requests leased meanwhile: {held}",
        cpu / paced as f64 * 1e6
    );
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if !crawlworker_testkit::benchmarking() {
        return;
    }
    let requests = env_or("BIG_QUEUE_REQUESTS", 10_000_000u64);
    let hosts = env_or("BIG_QUEUE_HOSTS", 100_000u64);
    let pickles = env_or("BIG_QUEUE_PICKLES", 100_000u64);
    let paced = env_or("BIG_QUEUE_PACED", 1_000_000u64);
    let seconds = env_or("BIG_QUEUE_SECONDS", 10u64);
    let (redis, spider) = filled(requests, hosts).await;
    scrapy_redis_entries(pickles, hosts);
    lease_and_commit(&redis, &spider, &format!("{requests} queued"), seconds).await;
    drop(redis);
    let (small, spider) = filled(10_000, 1_000).await;
    lease_and_commit(&small, &spider, "10,000 queued", seconds).await;
    drop(small);
    paced_head(paced, requests.saturating_sub(paced).max(1000), hosts).await;
}
