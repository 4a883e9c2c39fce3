//! The crawl cluster: several `crawlworker run` processes on one real Redis
//! and the demo forum served on loopback. The promises: the item set is
//! exactly the expected one (none missing, none twice) even when workers
//! are killed with SIGKILL or Redis restarts; malformed entries end in the
//! dead-letter key; the queue is FIFO within a priority.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use redis::Commands;
use serde_json::Value;

use crawlworker_demo::{self as demo, Site};
use crawlworker_testkit::FixtureServer;

use crawlworker::worker::StopRules;
use crawlworker_testkit::{
    crawlworker_with_redis, eventually, spider_for, stderr, temp_dir, RedisServer, TempDir, Worker,
};

use crate::expect::{assert_exact, expected, scraped};
use crate::in_process::InProcess;

struct Crawl {
    redis: RedisServer,
    server: FixtureServer,
    spider: PathBuf,
    /// Holds the spider copy; removed when the test ends.
    _dir: TempDir,
}

impl Crawl {
    async fn new(redis: RedisServer, latency: Duration) -> Crawl {
        let server = FixtureServer::start_with_latency(Site::demo(), latency)
            .await
            .unwrap();
        let dir = temp_dir("cluster");
        let spider = spider_for("bbs", &server.base_url(), dir.path());
        Crawl {
            redis,
            server,
            spider,
            _dir: dir,
        }
    }

    fn spider(&self) -> &str {
        self.spider.to_str().unwrap()
    }

    fn push_demo_tasks(&self) {
        let tasks: Vec<String> = demo::demo_tasks();
        let mut args = vec!["push-urls", self.spider()];
        args.extend(tasks.iter().map(String::as_str));
        let out = crawlworker_with_redis(&self.redis.url(), &args);
        assert!(out.status.success(), "push-urls failed: {}", stderr(&out));
    }

    fn worker(&self, args: &[&str], env: &[(&str, &str)]) -> Worker {
        Worker::spawn(&self.spider, &self.redis.url(), args, env)
    }
}

impl Crawl {
    /// Stops the fixture server.
    async fn finish(self) {
        self.server.stop().await.unwrap();
    }
}

/// Settings that make recovery fast enough for a test.
const FAST: &[(&str, &str)] = &[
    ("CRAWLWORKER_LEASE_TIMEOUT", "1s"),
    ("CRAWLWORKER_IDLE_RECHECK", "100ms"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_crawl_the_demo_forum_exactly() {
    let crawl = Crawl::new(RedisServer::start(), Duration::ZERO).await;
    crawl.push_demo_tasks();
    // Three workers in this process, each with its own frontier, client and
    // leases, sharing the crawl only through Redis as processes would.
    let rules = StopRules {
        until_drained: true,
        ..StopRules::default()
    };
    let mut workers = Vec::new();
    for _ in 0..3 {
        workers.push(InProcess::start(&crawl.spider, &crawl.redis.url(), FAST, rules).await);
    }
    for w in workers {
        w.wait(Duration::from_secs(60)).await;
    }
    assert_exact(&scraped(&crawl.redis), &expected(&crawl.server.base_url()));
    // Nothing was fetched twice: every post and comment page exactly once.
    let hits = crawl.server.hit_counts();
    let twice: Vec<_> = hits.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "pages fetched more than once: {twice:?}");
    // 103 pages, and robots.txt once for the whole cluster (bbs obeys it).
    assert_eq!(crawl.server.hits("/robots.txt"), 1);
    assert_eq!(crawl.server.total_hits(), 104);
    let mut conn = crawl.redis.conn();
    let stats: BTreeMap<String, String> = conn.hgetall("bbs:stats").unwrap();
    assert_eq!(
        stats.get("item_scraped_count").map(String::as_str),
        Some("243")
    );
    assert_eq!(
        stats
            .get("downloader/response_status_count/200")
            .map(String::as_str),
        Some("103")
    );
    assert_eq!(
        stats.get("scheduler/enqueued/redis").map(String::as_str),
        Some("103")
    );
    assert!(stats.contains_key("start_time"));
    // Crawl state is kept when workers close (scrapy-redis's default wipes it).
    assert_eq!(conn.scard::<_, u64>("bbs:dupefilter").unwrap(), 93);
    assert_eq!(conn.zcard::<_, u64>("bbs:inflight").unwrap(), 0);
    crawl.finish().await;
}

/// A small deterministic generator, seeded from the clock and printed, so a
/// failing run can be replayed.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_killed_at_random_moments_lose_and_double_nothing() {
    let crawl = Crawl::new(RedisServer::start(), Duration::from_millis(60)).await;
    crawl.push_demo_tasks();
    let seed = std::env::var("CRAWLWORKER_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(7, |d| d.as_nanos() as u64)
        });
    eprintln!("kill schedule seed: {seed} (set CRAWLWORKER_TEST_SEED to replay)");
    let mut rng = Lcg(seed);
    let args = ["--until-drained", "--concurrency", "3"];
    let mut workers: Vec<Worker> = (0..3).map(|_| crawl.worker(&args, FAST)).collect();
    let mut kills = 0;
    let started = Instant::now();
    while kills < 6 && started.elapsed() < Duration::from_secs(20) {
        // Kills at moments of the seed's choosing: the time is the point.
        tokio::time::sleep(Duration::from_millis(150 + rng.next(350))).await;
        let items: u64 = crawl.redis.conn().llen("bbs:items").unwrap();
        if items >= 243 {
            break;
        }
        let victim = rng.next(workers.len() as u64) as usize;
        workers.remove(victim).kill();
        kills += 1;
        workers.push(crawl.worker(&args, FAST));
    }
    assert!(
        kills >= 3,
        "the crawl ended before enough kills ({kills}); slow the demo server down"
    );
    for w in workers {
        let (status, log) = w.wait(Duration::from_secs(90));
        assert!(status.success(), "worker failed:\n{log}");
    }
    assert_exact(&scraped(&crawl.redis), &expected(&crawl.server.base_url()));
    crawl.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_mid_crawl_loses_nothing() {
    let redis = RedisServer::start_with(&[
        "--save",
        "",
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ]);
    let mut crawl = Crawl::new(redis, Duration::from_millis(40)).await;
    crawl.push_demo_tasks();
    let args = ["--until-drained", "--concurrency", "4"];
    let workers: Vec<Worker> = (0..3).map(|_| crawl.worker(&args, FAST)).collect();
    let mut conn = crawl.redis.conn();
    let before: u64 = eventually("the crawl is under way", Duration::from_secs(20), || {
        let n: u64 = conn.llen("bbs:items").unwrap();
        (n > 0).then_some(n)
    });
    assert!(
        before < 243,
        "the crawl finished before Redis could be restarted"
    );
    crawl.redis.restart(Duration::from_millis(1500));
    for w in workers {
        let (status, log) = w.wait(Duration::from_secs(90));
        assert!(status.success(), "worker failed:\n{log}");
    }
    assert_exact(&scraped(&crawl.redis), &expected(&crawl.server.base_url()));
    crawl.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_entries_are_set_aside_and_the_crawl_goes_on() {
    let crawl = Crawl::new(RedisServer::start(), Duration::ZERO).await;
    let mut conn = crawl.redis.conn();
    let _: () = conn.rpush("bbs:start_urls", "{not json").unwrap();
    let _: () = conn.rpush("bbs:start_urls", r#"{"max_page": 2}"#).unwrap();
    // A queue member with no request behind it, and one whose JSON is broken.
    let _: () = conn.zadd("bbs:requests", "no-such-id", 0).unwrap();
    let _: () = conn.hset("bbs:requests:data", "999999", "{broken").unwrap();
    let _: () = conn.zadd("bbs:requests", "999999", 0).unwrap();
    crawl.push_demo_tasks();
    let (status, log) = crawl
        .worker(&["--until-drained"], FAST)
        .wait(Duration::from_secs(60));
    assert!(status.success(), "worker failed:\n{log}");
    assert_exact(&scraped(&crawl.redis), &expected(&crawl.server.base_url()));
    let dead: Vec<String> = conn.lrange("bbs:dead", 0, -1).unwrap();
    assert_eq!(dead.len(), 4, "{dead:#?}");
    let dead: Vec<Value> = dead
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let find = |entry: &str| {
        dead.iter()
            .find(|d| d["entry"] == entry)
            .unwrap_or_else(|| panic!("{entry} is not in the dead letters: {dead:#?}"))
    };
    assert_eq!(find("{not json")["key"], "bbs:start_urls");
    assert!(find("{not json")["reason"]
        .as_str()
        .unwrap()
        .contains("not valid JSON"));
    assert!(find(r#"{"max_page": 2}"#)["reason"]
        .as_str()
        .unwrap()
        .contains("lacks field `forum_id`"));
    assert_eq!(find("no-such-id")["key"], "bbs:requests");
    assert!(find("{broken")["reason"]
        .as_str()
        .unwrap()
        .contains("not valid JSON"));
    let stats: BTreeMap<String, String> = conn.hgetall("bbs:stats").unwrap();
    assert_eq!(stats.get("deadletter/count").map(String::as_str), Some("4"));
    assert!(
        log.contains("dead-letter"),
        "the worker should say where the entry went:\n{log}"
    );
    crawl.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_or_hands_back_pages_and_a_second_worker_completes() {
    let crawl = Crawl::new(RedisServer::start(), Duration::from_millis(200)).await;
    crawl.push_demo_tasks();
    let env = [
        ("CRAWLWORKER_LEASE_TIMEOUT", "60s"),
        ("CRAWLWORKER_SHUTDOWN_GRACE", "50ms"),
    ];
    let w = crawl.worker(&[], &env);
    let mut conn = crawl.redis.conn();
    let started = Instant::now();
    while conn.zcard::<_, u64>("bbs:inflight").unwrap() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the worker never leased anything:\n{}",
            w.log()
        );
        // How often it is polled, not a wait for an effect.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    w.terminate();
    let (status, log) = w.wait(Duration::from_secs(10));
    assert!(status.success(), "a graceful stop exits 0:\n{log}");
    // With a 60 s lease, only an explicit hand-back empties the in-flight set.
    assert_eq!(
        conn.zcard::<_, u64>("bbs:inflight").unwrap(),
        0,
        "leases were not handed back:\n{log}"
    );
    assert_eq!(
        conn.hlen::<_, u64>("bbs:workers").unwrap(),
        0,
        "the worker did not unregister"
    );
    let (status, log) = crawl
        .worker(&["--until-drained", "--concurrency", "16"], &[])
        .wait(Duration::from_secs(60));
    assert!(status.success(), "{log}");
    assert_exact(&scraped(&crawl.redis), &expected(&crawl.server.base_url()));
    crawl.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_exit_stops_a_worker_with_nothing_to_do() {
    let crawl = Crawl::new(RedisServer::start(), Duration::ZERO).await;
    let started = Instant::now();
    let (status, log) = crawl
        .worker(&["--idle-exit", "300ms"], &[])
        .wait(Duration::from_secs(10));
    assert!(status.success(), "{log}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    crawl.finish().await;
}

/// A worker that died holding leases shows as gone in `stats`, with the
/// pages waiting for it and when they return; a surviving worker says what
/// it is waiting for, and finishes the crawl once the leases expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_workers_leases_are_shown_and_waited_for() {
    let crawl = Crawl::new(RedisServer::start(), Duration::ZERO).await;
    let text = std::fs::read_to_string(&crawl.spider)
        .unwrap()
        .replace("[settings]\n", "[settings]\nlease_timeout = \"4s\"\n");
    std::fs::write(&crawl.spider, text).unwrap();
    // A "worker" leases the two start pages and is never heard from again.
    let spider = crawlworker::spider::Spider::load(&crawl.spider).unwrap();
    let client = redis::Client::open(crawl.redis.url()).unwrap();
    let ghost = crawlworker::frontier::RedisFrontier::connect(
        &client.clone().into(),
        spider.frontier_options("ghost"),
    )
    .await
    .unwrap();
    let tasks = [
        r#"{"forum_id": "00001", "max_page": 1}"#.to_string(),
        r#"{"forum_id": "00002", "max_page": 1}"#.to_string(),
    ];
    ghost.push_start(&tasks, 0.0, None).await.unwrap();
    let (_, entries) = ghost.lease(0, 10).await.unwrap();
    let claims: Vec<crawlworker::frontier::StartClaim> = entries
        .into_iter()
        .map(|entry| crawlworker::frontier::StartClaim {
            outcome: spider
                .start_request(&entry)
                .map_err(crawlworker::frontier::Refused::from),
            entry,
        })
        .collect();
    ghost.claim_start(&claims).await.unwrap();
    assert_eq!(ghost.lease(10, 0).await.unwrap().0.len(), 2);

    let out = crawlworker_with_redis(&crawl.redis.url(), &["stats", crawl.spider()]);
    let text = stderr(&out) + &crawlworker_testkit::stdout(&out);
    assert!(text.contains("workers (0 live, 1 gone)"), "{text}");
    assert!(
        text.contains("ghost  gone (no heartbeat): 2 pages waiting for its expired leases (back in the queue within"),
        "{text}"
    );

    let survivor = crawl.worker(&["--until-drained"], &[("CRAWLWORKER_LOG", "info")]);
    let (status, log) = survivor.wait(Duration::from_secs(60));
    assert!(status.success(), "{log}");
    assert!(
        log.contains("waiting for 2 pages leased by a worker that stopped without handing them back (no heartbeat); they return to the queue when its leases expire, within 4s"),
        "{log}"
    );
    let items: u64 = crawl.redis.conn().llen("bbs:items").unwrap();
    assert!(
        items > 0,
        "the survivor crawled the pages once the leases expired"
    );
    crawl.finish().await;
}

/// At a healthy start, a worker that finds only pages in flight at
/// another live worker says so, and suggests nothing stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_in_flight_elsewhere_are_not_called_a_stopped_workers() {
    // Slow pages: the first worker still holds the start page when the
    // second looks.
    let crawl = Crawl::new(RedisServer::start(), Duration::from_millis(1500)).await;
    let task = r#"{"forum_id": "00001", "max_page": 1}"#;
    let out = crawlworker_with_redis(&crawl.redis.url(), &["push-urls", crawl.spider(), task]);
    assert!(out.status.success(), "{}", stderr(&out));
    let info = [("CRAWLWORKER_LOG", "info")];
    let first = crawl.worker(&["--until-drained"], &info);
    let mut conn = crawl.redis.conn();
    eventually(
        "the first worker leases the start page",
        Duration::from_secs(20),
        || {
            let n: u64 = conn.zcard("bbs:inflight").ok()?;
            (n > 0).then_some(())
        },
    );
    let second = crawl.worker(&["--until-drained"], &info);
    let (status, log) = second.wait(Duration::from_secs(90));
    assert!(status.success(), "{log}");
    let (first_status, first_log) = first.wait(Duration::from_secs(90));
    assert!(first_status.success(), "{first_log}");
    assert!(
        log.contains("nothing to lease yet: 1 page in flight at 1 other worker; waiting for the links they find"),
        "{log}"
    );
    for log in [&log, &first_log] {
        assert!(!log.contains("stopped without"), "{log}");
        assert!(!log.contains("a stopped worker"), "{log}");
    }
    crawl.finish().await;
}
