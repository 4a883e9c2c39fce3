//! How many pages per second one Redis instance sustains when many workers
//! commit at once: a load generator drives the real lease and commit
//! scripts (through [`RedisFrontier`], as a worker does) from many concurrent
//! connections, with synthetic pages and no HTTP. Each connection is one
//! "worker" with pages in flight; a page is committed as soon as it is
//! leased, with what a page of the demo forum adds on average (2–3 items,
//! one new link and one already seen, eight stat increments), and its commit
//! leases its replacement. Pages finished together share a commit, as in a
//! worker.
//!
//! Prints, per number of connections: pages/s, Redis CPU per page (INFO
//! `used_cpu_user + used_cpu_sys` over the run ÷ pages), the share of one
//! core Redis used, and the client round trips per page (script calls ÷
//! pages; every command the generator sends is one script call).
//!
//!     cargo bench --bench ceiling                       # needs redis-server
//!     CEILING_CONNECTIONS="1 8 32" CEILING_SECONDS=20 cargo bench --bench ceiling
//!
//! The generator runs on the same machine as Redis: when Redis's share of a
//! core stays well under 100 %, the generator (not Redis) was the limit,
//! and pages/s is a lower bound of the ceiling; Redis CPU per page is the
//! figure to extrapolate from (1 s ÷ it = one saturated core's pages/s).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlworker::frontier::{Committed, Leased, Options, PageResult, RedisFrontier, StartClaim};
use crawlworker::request::Request;
use crawlworker::spider::Spider;
use crawlworker::stats::{self, Tally};
use crawlworker_testkit::readings::{redis_cpu, script_calls, start_counting};
use crawlworker_testkit::RedisServer;
use serde_json::{Map, Value};
use tokio::task::JoinSet;

const SPIDER: &str = r#"
name = "ceiling"
[start]
url = "http://127.0.0.1/page/{n}"
[items.post]
n = { meta = "n" }
[[rules]]
name = "page"
match = '/page/'
  [[rules.extract]]
  item = "post"
"#;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// What one synthetic page adds: like an average page of the demo forum.
fn page_for(n: u64) -> PageResult {
    let item = |i: u64| -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("url".into(), format!("http://127.0.0.1/page/{n}").into());
        m.insert("title".into(), format!("Post {n} comment {i}").into());
        m.insert("author".into(), format!("user{}", n % 97).into());
        m.insert(
            "content".into(),
            "Lorem ipsum dolor sit amet, consectetur adipiscing elit. "
                .repeat(3)
                .into(),
        );
        m
    };
    let mut tally = Tally::default();
    tally.add(stats::DOWNLOADER_REQUEST_COUNT, 1);
    tally.add_in(stats::DOWNLOADER_REQUEST_METHOD, "GET", 1);
    tally.add(stats::DOWNLOADER_RESPONSE_COUNT, 1);
    tally.add_in(stats::DOWNLOADER_RESPONSE_STATUS, 200, 1);
    tally.add(stats::DOWNLOADER_RESPONSE_BYTES, 9000 + (n % 500) as i64);
    tally.add(stats::RESPONSE_RECEIVED_COUNT, 1);
    let items = 2 + n % 2;
    tally.add(stats::ITEM_SCRAPED_COUNT, items as i64);
    PageResult {
        requests: vec![
            // A new link, and one seen before (filtered).
            Request::get(&format!("http://127.0.0.1/page/{}", n + 1_000_000_000)),
            Request::get("http://127.0.0.1/page/seen"),
        ],
        items: (0..items).map(item).collect(),
        stats: tally,
        ..PageResult::default()
    }
}

/// One "worker": keeps `inflight` pages committing until `until`.
async fn drive(f: RedisFrontier, inflight: usize, until: Instant, pages: Arc<AtomicU64>) {
    let mut tasks: JoinSet<Vec<Leased>> = JoinSet::new();
    let spawn = |tasks: &mut JoinSet<Vec<Leased>>, leased: Vec<Leased>| {
        for l in leased {
            let f = f.clone();
            let pages = pages.clone();
            tasks.spawn(async move {
                let n = l
                    .request
                    .as_ref()
                    .ok()
                    .and_then(|r| r.url.rsplit('/').next()?.parse::<u64>().ok())
                    .unwrap_or(0);
                let next = if Instant::now() < until { 1 } else { 0 };
                match f.commit(&l, &page_for(n), next, false.into()).await {
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
        let next = done.expect("page task");
        spawn(&mut tasks, next);
    }
}

/// One run with `connections` workers: (pages/s, Redis µs per page, Redis
/// share of a core, script calls per page).
async fn run(connections: usize, inflight: usize, seconds: u64) -> (f64, f64, f64, f64) {
    let redis = RedisServer::start();
    let spider = Spider::from_str("ceiling.toml".as_ref(), SPIDER).expect("spider");
    let mut frontiers = Vec::new();
    for i in 0..connections {
        let client = redis::Client::open(redis.url()).expect("client");
        let options = Options {
            lease: Duration::from_secs(600),
            ..spider.frontier_options(&format!("load-{i}"))
        };
        frontiers.push(
            RedisFrontier::connect(&client.into(), options)
                .await
                .expect("connect"),
        );
    }
    // Enough queued requests for every page in flight; each page queues
    // one new one, so the queue keeps its length.
    let seeds = connections * inflight;
    let entries: Vec<String> = (0..seeds).map(|n| format!(r#"{{"n": {n}}}"#)).collect();
    for chunk in entries.chunks(1000) {
        frontiers[0]
            .push_start(chunk, 0.0, None)
            .await
            .expect("push");
        let claims: Vec<StartClaim> = chunk
            .iter()
            .map(|entry| StartClaim {
                outcome: spider
                    .start_request(entry)
                    .map_err(crawlworker::frontier::Refused::from),
                entry: entry.clone(),
            })
            .collect();
        let claimed = frontiers[0].claim_start(&claims).await.expect("seed");
        assert_eq!(claimed.enqueued, chunk.len() as u64, "seeds not queued");
    }
    let mut conn = redis.conn();
    let cpu0 = start_counting(&mut conn);
    let pages = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let mut workers = JoinSet::new();
    for f in frontiers {
        workers.spawn(drive(f, inflight, until, pages.clone()));
    }
    while workers.join_next().await.is_some() {}
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = redis_cpu(&mut conn) - cpu0;
    let calls = script_calls(&mut conn);
    let pages = pages.load(Ordering::Relaxed) as f64;
    (
        pages / elapsed,
        cpu / pages * 1e6,
        cpu / elapsed,
        calls / pages,
    )
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if !crawlworker_testkit::benchmarking() {
        return;
    }
    let connections: Vec<usize> = std::env::var("CEILING_CONNECTIONS")
        .unwrap_or_else(|_| "1 4 16 64".into())
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    let inflight = env_or("CEILING_INFLIGHT", 32usize);
    let seconds = env_or("CEILING_SECONDS", 10u64);
    let reps = env_or("CEILING_REPS", 3usize);
    println!(
        "| connections | pages in flight | pages/s | Redis CPU per page | Redis CPU (share of a core) | script calls (round trips) per page |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for &c in &connections {
        let mut runs = Vec::new();
        for _ in 0..reps {
            runs.push(run(c, inflight, seconds).await);
        }
        let median = |pick: fn(&(f64, f64, f64, f64)) -> f64| {
            let mut v: Vec<f64> = runs.iter().map(pick).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        println!(
            "| {c} | {} | {:.0} | {:.1} µs | {:.0} % | {:.2} |",
            c * inflight,
            median(|r| r.0),
            median(|r| r.1),
            median(|r| r.2) * 100.0,
            median(|r| r.3),
        );
    }
    println!(
        "(medians of {reps} runs of {seconds} s each; {inflight} pages in flight per connection)"
    );
}
