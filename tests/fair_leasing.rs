//! Many workers on one crawl share it: on a crawl of one paced host, whose
//! politeness slots are the whole cluster's, no worker holds more than
//! twice its fair share of the leases while another worker holds none
//! (for longer than a commit and a wake-up take), and every page is still
//! fetched once.
//!
//! The workers run in this process ([`InProcess`]); the leases they hold
//! are read from the lease owners hash while they crawl.

use std::collections::HashMap;
use std::time::Duration;

use redis::Commands;

use crawlworker::cli::load_spider;
use crawlworker::config::Config;
use crawlworker::frontier::{RedisFrontier, Refused, StartClaim};
use crawlworker::settings::Overrides;
use crawlworker::worker::StopRules;
use crawlworker_demo::Site;
use crawlworker_testkit::{
    eventually_async, fault_spider, push_urls, temp_dir, FixtureServer, RedisServer,
};

use crate::in_process::InProcess;

const WORKERS: usize = 3;
const PAGES: usize = 75;

/// How long a worker may hold over twice its share while another holds
/// none before that counts as holding the crawl back: a commit's leases
/// and an idle peer's wake-up are a few milliseconds apart (longer on a
/// loaded machine), and a sample between them is no lease held back.
const HELD_BACK: Duration = Duration::from_millis(250);

/// Leases per worker id, from the owners hash (its `~` note is no lease).
fn leases_by_worker(conn: &mut redis::Connection) -> HashMap<String, usize> {
    let owners: HashMap<String, String> = conn
        .hgetall("fair:inflight:owners")
        .unwrap_or_else(|e| panic!("HGETALL fair:inflight:owners: {e}"));
    let mut held = HashMap::new();
    for (id, owner) in owners {
        if id == "~" {
            continue;
        }
        let worker = owner.rsplit_once('|').map_or(owner.as_str(), |(w, _)| w);
        *held.entry(worker.to_string()).or_insert(0) += 1;
    }
    held
}

/// A sample that breaks the rule: a worker holds more than twice its fair
/// share (the leases over the workers) while another holds none. Samples
/// with fewer leases than workers (a share under one) are not judged.
fn unfair(held: &HashMap<String, usize>) -> Option<String> {
    let total: usize = held.values().sum();
    let most = held.values().copied().max().unwrap_or(0);
    let idle = WORKERS - held.values().filter(|n| **n > 0).count();
    (total >= WORKERS && idle > 0 && most * WORKERS > 2 * total)
        .then(|| format!("{held:?}: {most} of {total} leases while {idle} worker(s) hold none"))
}

/// Hands `sample` the leases by worker every 10 ms until the crawl has
/// scraped `pages` items (60 s at most).
async fn sample_until_done(
    conn: &mut redis::Connection,
    pages: usize,
    mut sample: impl FnMut(HashMap<String, usize>),
) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        sample(leases_by_worker(conn));
        let done: Option<usize> = conn
            .hget("fair:stats", "item_scraped_count")
            .unwrap_or(None);
        if done == Some(pages) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the crawl did not finish within 60 s ({done:?} items)"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Every one of the `pages` pages has its item, once.
fn assert_each_page_once(conn: &mut redis::Connection, pages: usize) {
    let items: Vec<String> = conn.lrange("fair:items", 0, -1).unwrap();
    let mut urls: Vec<String> = items
        .iter()
        .map(|i| serde_json::from_str::<serde_json::Value>(i).unwrap()["url"].to_string())
        .collect();
    urls.sort();
    urls.dedup();
    assert_eq!((items.len(), urls.len()), (pages, pages), "each page once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_on_one_paced_host_each_hold_about_their_share() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.expect("server");
    let dir = temp_dir("fair-leasing");
    let spider = fault_spider(
        dir.path(),
        "fair",
        "allow_private_networks = true\nrobotstxt_obey = false\ndownload_delay = 0.04\nrandomize_download_delay = false\nconcurrent_requests = 16",
        "[start]\nbatch_size = 100",
    );
    let loaded = load_spider(&Config::default(), &spider, &Overrides::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let client = redis::Client::open(redis.url()).expect("redis url");
    let control = RedisFrontier::connect(&client.into(), loaded.frontier_options("test"))
        .await
        .expect("connect");
    // The requests are all queued before anyone may lease: the first
    // worker to lease could take them all.
    control.pause().await.expect("pause");
    let mut workers = Vec::new();
    for _ in 0..WORKERS {
        workers.push(InProcess::start(&spider, &redis.url(), &[], StopRules::default()).await);
    }
    let urls: Vec<String> = (0..PAGES)
        .map(|i| format!("http://{}/fault/status/200?key=p{i}", server.addr()))
        .collect();
    push_urls(&redis.url(), &spider, &urls);
    // Paused workers claim nothing: the requests are queued here.
    let (_, entries) = control.lease(0, PAGES).await.expect("peek");
    let claims: Vec<StartClaim> = entries
        .into_iter()
        .map(|entry| StartClaim {
            outcome: loaded.start_request(&entry).map_err(Refused::from),
            entry,
        })
        .collect();
    control.claim_start(&claims).await.expect("claim");
    // The test's own frontier is no worker of the crawl.
    control.unregister().await.expect("unregister");
    let mut conn = redis.conn();
    let queued: usize = conn.zcard("fair:requests").unwrap_or(0);
    assert_eq!(queued, PAGES, "every request queued");
    // Every worker has been one of the crawl's while paused.
    eventually_async("three workers in the crew", Duration::from_secs(20), || {
        let crew: usize = conn.zcard("fair:inflight:workers").unwrap_or(0);
        async move { (crew == WORKERS).then_some(()) }
    })
    .await;
    control.resume().await.expect("resume");

    let mut broken = Vec::new();
    let mut unfair_since = None;
    sample_until_done(&mut conn, PAGES, |held| match unfair(&held) {
        Some(why) => {
            let since = *unfair_since.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() >= HELD_BACK {
                broken.push(why);
            }
        }
        None => unfair_since = None,
    })
    .await;
    for w in workers {
        w.stop().await;
    }
    assert_each_page_once(&mut conn, PAGES);
    assert!(
        broken.is_empty(),
        "{} samples broke the fair share, the first: {}",
        broken.len(),
        broken[0]
    );
}

/// The first worker of a crawl leases every start page before its peers
/// have joined, more than it can download at once from the one host. As
/// soon as they join (their first leases find nothing and tell the crew
/// it grew), it is over twice its fair share, and the requests it holds
/// waiting for its own download slots go back to the queue, waking its
/// idle peers, which lease and fetch them: before its first page is
/// committed, not a response later. Without that they would sit idle
/// until the first worker had fetched everything (none of its leases
/// could expire: it renews them). Every page is still fetched once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_worker_hands_back_what_it_cannot_start_once_its_peers_join() {
    const HELD: usize = 24;
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.expect("server");
    let dir = temp_dir("fair-hand-back");
    let spider = fault_spider(
        dir.path(),
        "fair",
        "allow_private_networks = true\nrobotstxt_obey = false\ndownload_delay = 0\n\
         concurrent_requests = 16\nconcurrent_requests_per_domain = 4",
        "[start]\nbatch_size = 100",
    );
    let urls: Vec<String> = (0..HELD)
        .map(|i| format!("http://{}/fault/delay/3000?key=h{i}", server.addr()))
        .collect();
    push_urls(&redis.url(), &spider, &urls);
    let mut conn = redis.conn();
    let first = InProcess::start(&spider, &redis.url(), &[], StopRules::default()).await;
    // Alone, it leases every page: 4 downloading, 20 waiting for its slots.
    let owner = eventually_async(
        "the first worker holds every page",
        Duration::from_secs(20),
        || {
            let held = leases_by_worker(&mut conn);
            async move {
                (held.len() == 1 && held.values().sum::<usize>() == HELD)
                    .then(|| held.into_keys().next().unwrap_or_default())
            }
        },
    )
    .await;
    let mut workers = vec![first];
    for _ in 1..WORKERS {
        workers.push(InProcess::start(&spider, &redis.url(), &[], StopRules::default()).await);
    }
    eventually_async("a peer holds a lease", Duration::from_secs(20), || {
        let held = leases_by_worker(&mut conn);
        let owner = owner.clone();
        async move { held.keys().any(|w| *w != owner).then_some(()) }
    })
    .await;
    let scraped: Option<usize> = conn
        .hget("fair:stats", "item_scraped_count")
        .unwrap_or(None);
    assert_eq!(
        scraped.unwrap_or(0),
        0,
        "the peers got work only once the first worker committed (its pages take 3 s)"
    );
    // Each peer holds leases at some point while the crawl runs.
    let mut peers_seen = std::collections::HashSet::new();
    sample_until_done(&mut conn, HELD, |held| {
        peers_seen.extend(held.into_keys().filter(|worker| *worker != owner));
    })
    .await;
    for w in workers {
        w.stop().await;
    }
    assert_each_page_once(&mut conn, HELD);
    assert_eq!(
        peers_seen.len(),
        WORKERS - 1,
        "only {peers_seen:?} of the first worker's peers ever held a lease: it kept what it could not start"
    );
}
