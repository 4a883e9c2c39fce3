//! robots.txt, obeyed by the whole cluster: fetched once per host and
//! shared through Redis, its rules and its Crawl-delay applied by every
//! worker, also while the sweep deletes an expired record. While it cannot
//! be fetched (an error status, a timeout, a proxy down, an address the
//! SSRF guard refuses) its host's requests are not forbidden: they wait in
//! Redis like retries and, past their retry budget, go into `:failed`,
//! where `push-urls --from-failed` finds them. A request whose politeness
//! slot passed while it waited for robots.txt takes a fresh one.
//!
//! Not here: a crawl over many hosts leaving no robots.txt fetch lock in a
//! worker (`per_host`), the sweep of expired records (`redis_hosts`), a
//! sitemap found through robots.txt (`sources`), what the fixture server's
//! `/robots.txt` answers (the test kit's own tests).

use std::time::Duration;

use redis::Commands;

use crawlworker::worker::StopRules;
use crawlworker_demo::Site;
use crawlworker_testkit::{
    assert_paced, crawlworker_with_redis, eventually, fault_spider, stderr, temp_dir,
    FixtureServer, RedisServer, Robots,
};

use crate::downloader::Env;
use crate::in_process::InProcess;

/// How long a condition may take before a test gives up on it.
const PATIENCE: Duration = Duration::from_secs(20);

/// robots.txt is fetched once for the whole cluster (three workers), and
/// a page it disallows is counted as forbidden, never fetched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robots_txt_is_fetched_once_for_the_cluster_and_obeyed() {
    let env = Env::new("robotstxt_obey = true").await;
    env.server.set_robots(Robots::Body(
        "User-agent: *\nDisallow: /fault/status/403\n".into(),
    ));
    env.push(&[
        "/fault/status/200?key=1",
        "/fault/status/200?key=2",
        "/fault/status/403?key=3",
        "/fault/status/200?key=4",
    ]);
    env.drain(3).await;
    assert_eq!(
        env.server.hits("/robots.txt"),
        1,
        "robots.txt is fetched once for the whole cluster"
    );
    assert_eq!(env.server.hits("/fault/status/403?key=3"), 0);
    assert_eq!(env.items().len(), 3);
    assert_eq!(env.stat("robotstxt/forbidden"), 1);
    env.finish().await;
}

/// robots.txt's Crawl-delay spaces its host's requests, and requests
/// waiting for it hold up no other host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawl_delay_paces_its_host_and_a_waiting_host_blocks_no_other() {
    // One download slot: if requests waiting for the slow host held it (or
    // filled the worker's leases), the other host's pages would wait
    // behind them.
    let env = Env::new("robotstxt_obey = true\nconcurrent_requests = 1").await;
    env.server
        .set_robots(Robots::Body("User-agent: *\nCrawl-delay: 0.5\n".into()));
    let other = FixtureServer::start(Site::demo()).await.unwrap();
    // Queued first: eight requests for the slow host (3.5 s of Crawl-delay).
    let slow: Vec<String> = (0..8)
        .map(|i| format!("/fault/status/200?key=slow{i}"))
        .collect();
    let refs: Vec<&str> = slow.iter().map(String::as_str).collect();
    env.push(&refs);
    let fast: Vec<String> = (0..4)
        .map(|i| other.url(&format!("/fault/status/200?key=fast{i}")))
        .collect();
    let mut args = vec!["push-urls", env.spider.to_str().unwrap()];
    args.extend(fast.iter().map(String::as_str));
    assert!(crawlworker_with_redis(&env.redis.url(), &args)
        .status
        .success());
    let started = std::time::Instant::now();
    env.drain(1).await;
    let slow_times = env.server.arrivals("/fault/status/");
    assert_eq!(slow_times.len(), 8);
    assert_paced(&slow_times, Duration::from_millis(500), "Crawl-delay 0.5 s");
    let fast_times = other.arrivals("/fault/status/");
    assert_eq!(fast_times.len(), 4);
    // The other host's pages went out while the slow host's waited, not
    // after them: before the slow host's last request.
    let fast_done = *fast_times.last().unwrap() - started;
    let slow_last = slow_times[7] - started;
    assert!(
        fast_done < slow_last,
        "the other host waited behind the slow one ({fast_done:?} vs {slow_last:?})"
    );
    other.stop().await.unwrap();
    env.finish().await;
}

/// A Crawl-delay holds for the cluster while the sweep deletes its
/// expired robots.txt record (and the record is fetched again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawl_delay_holds_for_the_cluster_while_its_expired_robots_record_is_swept() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.expect("server");
    server.set_robots(Robots::Body("User-agent: *\nCrawl-delay: 0.4\n".into()));
    let dir = temp_dir("robots");
    // The record expires every second, and each worker sweeps every
    // second: through the crawl it is deleted and fetched again. One
    // slot per worker, so the workers lease (with the four leases a slot
    // held ahead) 8 of the 10 requests at first and the last ones after
    // the record expired.
    let settings = "allow_private_networks = true\nrobotstxt_obey = true\nrobotstxt_ttl = \"1s\"\nconcurrent_requests = 1";
    let spider = fault_spider(dir.path(), "paced", settings, "");
    let mut args = vec!["push-urls".to_string(), spider.display().to_string()];
    for i in 0..10 {
        args.push(server.url(&format!("/fault/status/200?key=cd{i}")));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let pushed = crawlworker_with_redis(&redis.url(), &args);
    assert!(pushed.status.success(), "{}", stderr(&pushed));
    let rules = StopRules {
        until_drained: true,
        ..StopRules::default()
    };
    let settings = [("CRAWLWORKER_IDLE_RECHECK", "100ms")];
    let a = InProcess::start(&spider, &redis.url(), &settings, rules).await;
    let b = InProcess::start(&spider, &redis.url(), &settings, rules).await;
    a.wait(Duration::from_secs(60)).await;
    b.wait(Duration::from_secs(60)).await;
    let times = server.arrivals("/fault/status/");
    assert_eq!(times.len(), 10);
    assert_paced(
        &times,
        Duration::from_millis(400),
        "Crawl-delay 0.4 s across a sweep",
    );
    assert!(
        server.hits("/robots.txt") >= 2,
        "the record never expired during the crawl: the test proves nothing"
    );
    let _ = server.stop().await;
}

/// A robots.txt that fails (503) disallows its host's requests for now,
/// not for good: they wait their retries for it, then fail where
/// `push-urls --from-failed` finds them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_robots_txt_disallows_for_now() {
    let env = Env::new("robotstxt_obey = true\nrobotstxt_failure_ttl = 0.1").await;
    env.server.set_robots(Robots::Status(503));
    env.push(&["/fault/status/200?key=1"]);
    env.drain(1).await;
    assert_eq!(env.server.hits("/fault/status/200?key=1"), 0);
    // Not forbidden: it waited twice (its retries) for robots.txt, which
    // was fetched again each time, then failed where --from-failed finds it.
    assert_eq!(env.stat("robotstxt/forbidden"), 0);
    assert_eq!(env.stat("robotstxt/unavailable"), 2);
    assert_eq!(env.stat("robotstxt/unavailable_failed"), 1);
    assert_eq!(env.stat("retry/reason_count/robotstxt_unavailable"), 2);
    assert_eq!(env.server.hits("/robots.txt"), 3);
    let failed = env.failed();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["kind"], "robotstxt_unavailable");
    assert_eq!(failed[0]["status"], 503);
    assert_eq!(
        failed[0]["reason"],
        format!(
            "robots.txt could not be fetched: robots.txt of {} answered HTTP 503 (gave up after 2 retries)",
            env.server.addr()
        )
    );
    env.finish().await;
}

/// A crawl of fault pages with `robotstxt_obey = true` and small retry and
/// back-off settings, for the tests of a robots.txt that cannot be fetched.
struct RobotsCrawl {
    redis: RedisServer,
    server: FixtureServer,
    spider: std::path::PathBuf,
    _dir: crawlworker_testkit::TempDir,
}

/// What the robots.txt tests add to their spiders: waits of tenths of a
/// second, a robots.txt failure trusted for a tenth of one.
const ROBOTS_SETTINGS: &str = r#"
robotstxt_obey = true
robotstxt_failure_ttl = 0.1
retry_backoff_base = 0.05
retry_backoff_max = 0.3
download_timeout = "1s"
"#;

impl RobotsCrawl {
    /// `settings` go into the spider's `[settings]`, after
    /// [`ROBOTS_SETTINGS`]; they say whether private networks (the fixture
    /// server's loopback address) are allowed.
    async fn new(settings: &str) -> RobotsCrawl {
        let redis = RedisServer::start();
        let server = FixtureServer::start(Site::demo()).await.unwrap();
        let dir = temp_dir("robots");
        let spider = fault_spider(
            dir.path(),
            "robots",
            &format!("{ROBOTS_SETTINGS}\n{settings}"),
            "",
        );
        RobotsCrawl {
            redis,
            server,
            spider,
            _dir: dir,
        }
    }

    /// Pushes `n` fault pages of the fixture server; their paths.
    fn push(&self, n: usize) -> Vec<String> {
        let paths: Vec<String> = (0..n)
            .map(|i| format!("/fault/status/200?key=r{i}"))
            .collect();
        let urls = paths.iter().map(|p| self.server.url(p)).collect::<Vec<_>>();
        crawlworker_testkit::push_urls(&self.redis.url(), &self.spider, &urls);
        paths
    }

    async fn drain(&self) {
        let rules = StopRules {
            until_drained: true,
            ..StopRules::default()
        };
        InProcess::start(&self.spider, &self.redis.url(), ROBOTS_ENV, rules)
            .await
            .wait(Duration::from_secs(60))
            .await;
    }

    fn stat(&self, name: &str) -> i64 {
        let v: Option<i64> = self.redis.conn().hget("robots:stats", name).unwrap();
        v.unwrap_or(0)
    }

    fn list(&self, key: &str) -> Vec<serde_json::Value> {
        let raw: Vec<String> = self.redis.conn().lrange(key, 0, -1).unwrap();
        raw.iter()
            .map(|s| serde_json::from_str(s).unwrap())
            .collect()
    }

    /// `push-urls --from-failed`, which must re-queue `n` requests.
    fn requeue_failed(&self, n: usize) {
        let out = crawlworker_with_redis(
            &self.redis.url(),
            &["push-urls", self.spider.to_str().unwrap(), "--from-failed"],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("re-queued {n} failed request")),
            "{}",
            stderr(&out)
        );
    }

    /// Every request went into `:failed` with a reason naming robots.txt
    /// and `error`; none was counted as forbidden.
    fn assert_failed_for_robots(&self, n: usize, error: &str) {
        let failed = self.list("robots:failed");
        assert_eq!(failed.len(), n, "{failed:?}");
        for f in &failed {
            let reason = f["reason"].as_str().unwrap();
            assert!(
                reason.contains("robots.txt") && reason.contains(error),
                "{reason}"
            );
        }
        assert_eq!(self.stat("robotstxt/forbidden"), 0);
        assert!(self.list("robots:dead").is_empty());
    }
}

/// The worker settings of the robots.txt tests.
const ROBOTS_ENV: &[(&str, &str)] = &[
    ("CRAWLWORKER_IDLE_RECHECK", "100ms"),
    ("CRAWLWORKER_LEASE_TIMEOUT", "5s"),
];

/// A robots.txt answering 503 forbids nothing (every request of its host
/// was once counted as `robotstxt/forbidden` and dropped): the requests
/// wait in Redis, like retries, and are crawled once robots.txt answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robots_503_then_200_the_requests_wait_and_are_crawled() {
    let crawl = RobotsCrawl::new("allow_private_networks = true\nretry_times = 20").await;
    crawl.server.set_robots(Robots::Status(503));
    let paths = crawl.push(5);
    let worker = InProcess::start(
        &crawl.spider,
        &crawl.redis.url(),
        ROBOTS_ENV,
        StopRules {
            until_drained: true,
            ..StopRules::default()
        },
    )
    .await;
    // robots.txt is tried again (after its failure's short TTL) while the
    // requests wait.
    eventually("robots.txt fetched again", PATIENCE, || {
        (crawl.server.hits("/robots.txt") >= 3).then_some(())
    });
    assert_eq!(crawl.stat("robotstxt/forbidden"), 0);
    crawl
        .server
        .set_robots(Robots::Body("User-agent: *\nAllow: /\n".into()));
    worker.wait(Duration::from_secs(60)).await;
    for p in &paths {
        assert_eq!(crawl.server.hits(p), 1, "{p}");
    }
    assert_eq!(crawl.list("robots:items").len(), 5);
    assert!(crawl.list("robots:failed").is_empty());
    assert_eq!(crawl.stat("robotstxt/forbidden"), 0);
    assert!(crawl.stat("robotstxt/unavailable") >= 5);
    // Several requests waiting, one fetch per failure TTL: not one per
    // request and retry.
    let fetches = crawl.server.hits("/robots.txt");
    assert!(
        fetches < 5 * 20,
        "{fetches} robots.txt fetches for 5 waiting requests"
    );
    crawl.server.stop().await.unwrap();
}

/// Past their retry budget, requests whose robots.txt still fails go into
/// `:failed` (not lost as forbidden), and `push-urls --from-failed` brings
/// them back. A robots.txt that times out counts as failing too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robots_failing_for_good_sends_the_requests_to_failed() {
    let crawl = RobotsCrawl::new("allow_private_networks = true\nretry_times = 2").await;
    crawl.server.set_robots(Robots::Status(503));
    let paths = crawl.push(3);
    crawl.drain().await;
    crawl.assert_failed_for_robots(3, "503 (gave up after 2 retries)");
    assert_eq!(crawl.stat("robotstxt/unavailable_failed"), 3);
    assert_eq!(crawl.stat("retry/max_reached"), 3);
    assert_eq!(crawl.list("robots:items").len(), 0);
    for p in &paths {
        assert_eq!(crawl.server.hits(p), 0, "{p}");
    }

    // Timing out (past download_timeout) fails them the same way.
    crawl.requeue_failed(3);
    crawl.server.set_robots(Robots::Slow(
        Duration::from_secs(3),
        Box::new(Robots::Body("User-agent: *\nAllow: /\n".into())),
    ));
    crawl.drain().await;
    crawl.assert_failed_for_robots(3, "timed out");

    // Once robots.txt answers, the re-queued requests are crawled.
    crawl.requeue_failed(3);
    crawl.server.set_robots(Robots::Missing);
    crawl.drain().await;
    assert_eq!(crawl.list("robots:items").len(), 3);
    assert!(crawl.list("robots:failed").is_empty());
    for p in &paths {
        assert_eq!(crawl.server.hits(p), 1, "{p}");
    }
    crawl.server.stop().await.unwrap();
}

/// With the spider's proxy down, robots.txt cannot be fetched: the
/// requests wait, then fail into `:failed`; once the proxy is up,
/// `push-urls --from-failed` brings them back and they are crawled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robots_through_a_down_proxy_does_not_drop_requests() {
    let redis = RedisServer::start();
    let dir = temp_dir("robots");
    let port = crawlworker_testkit::redis::free_port();
    let proxy_addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let spider = crawlworker_testkit::proxied_spider(
        dir.path(),
        proxy_addr,
        &format!("{ROBOTS_SETTINGS}\nretry_times = 2"),
    );
    let urls: Vec<String> = (0..3)
        .map(|i| {
            format!(
                "http://{}/fault/status/200?key=p{i}",
                crawlworker_testkit::loopback_host(9, i + 1)
            )
        })
        .collect();
    crawlworker_testkit::push_urls(&redis.url(), &spider, &urls);
    let rules = || StopRules {
        until_drained: true,
        ..StopRules::default()
    };
    InProcess::start(&spider, &redis.url(), ROBOTS_ENV, rules())
        .await
        .wait(Duration::from_secs(60))
        .await;
    let failed: Vec<String> = redis.conn().lrange("hosts:failed", 0, -1).unwrap();
    assert_eq!(failed.len(), 3, "{failed:?}");
    for f in &failed {
        let record: serde_json::Value = serde_json::from_str(f).unwrap();
        let reason = record["reason"].as_str().unwrap();
        // It waited its retries first: a proxy down can come back.
        assert!(
            reason.starts_with("robots.txt could not be fetched")
                && reason.contains(&proxy_addr.to_string())
                && reason.ends_with("(gave up after 2 retries)"),
            "{f}"
        );
    }
    let forbidden: Option<i64> = redis
        .conn()
        .hget("hosts:stats", "robotstxt/forbidden")
        .unwrap();
    assert_eq!(forbidden, None);

    // The proxy comes up: the failed requests are crawled.
    let proxy = FixtureServer::start_on(Site::demo(), proxy_addr, Duration::ZERO)
        .await
        .unwrap();
    let out = crawlworker_with_redis(
        &redis.url(),
        &["push-urls", spider.to_str().unwrap(), "--from-failed"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    InProcess::start(&spider, &redis.url(), ROBOTS_ENV, rules())
        .await
        .wait(Duration::from_secs(60))
        .await;
    let items: Vec<String> = redis.conn().lrange("hosts:items", 0, -1).unwrap();
    assert_eq!(items.len(), 3, "{items:?}");
    proxy.stop().await.unwrap();
}

/// A request the SSRF guard refuses (a loopback host, and a spider that
/// does not allow private networks) reaches `:failed` with its reason; on
/// the robots.txt path it was once lost as `robotstxt/forbidden`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssrf_refused_with_robots_obey_reaches_failed() {
    let crawl = RobotsCrawl::new("allow_private_networks = false").await;
    crawl
        .server
        .set_robots(Robots::Body("User-agent: *\nAllow: /\n".into()));
    crawl.push(2);
    crawl.drain().await;
    assert_eq!(crawl.server.total_hits(), 0);
    crawl.assert_failed_for_robots(2, "private");
    for f in crawl.list("robots:failed") {
        assert_eq!(f["kind"], "ForbiddenAddress", "{f}");
    }
    crawl.server.stop().await.unwrap();
}

/// A request whose politeness slot passed while its robots.txt was being
/// fetched takes a fresh one. (Slots were once reserved before the check,
/// so the requests waiting for a slow robots.txt all went out together
/// when it came.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_robots_txt_does_not_unspace_the_requests_waiting_for_it() {
    let crawl = RobotsCrawl::new(
        "allow_private_networks = true\ndownload_delay = 0.3\nrandomize_download_delay = false",
    )
    .await;
    crawl.server.set_robots(Robots::Slow(
        Duration::from_millis(800),
        Box::new(Robots::Body("User-agent: *\nAllow: /\n".into())),
    ));
    crawl.push(5);
    crawl.drain().await;
    assert_eq!(crawl.list("robots:items").len(), 5);
    let arrivals = crawl.server.arrivals("/fault/status/");
    assert_eq!(arrivals.len(), 5);
    assert_paced(
        &arrivals,
        Duration::from_millis(300),
        "download_delay 0.3 s after robots.txt came",
    );
    crawl.server.stop().await.unwrap();
}
