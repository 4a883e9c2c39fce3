//! The downloader against the fixture server's fault routes (`/fault/…`,
//! see `crates/testkit/src/faults.rs`), with real workers and a real Redis:
//! retries that land (and survive a worker crash while they wait), the
//! failed key and `push-urls --from-failed`, redirects as new requests with
//! chain limits and loop detection, size and time limits, the SSRF guard,
//! and politeness measured at the server. robots.txt has its own module,
//! `robots`, which runs some of its crawls on this module's [`Env`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use redis::Commands;
use serde_json::Value;

use crawlworker_demo::Site;
use crawlworker_testkit::FixtureServer;

use crawlworker::worker::StopRules;
use crawlworker_testkit::{
    crawlworker_with_redis, eventually, peak, push_urls, stderr, temp_dir, RedisServer, Worker,
};

use crate::in_process::InProcess;

/// How long a condition may take before a test gives up on it.
const PATIENCE: Duration = Duration::from_secs(20);

/// A spider that scrapes one item from every fault page it is given.
fn spider_text(extra_settings: &str) -> String {
    format!(
        r#"
name = "faults"
allowed_domains = ["127.0.0.1"]

[settings]
allow_private_networks = true
retry_backoff_base = 0.05
retry_backoff_max = "5s"
download_timeout = "2s"
{extra_settings}

[items.page]
url = {{ page = "url" }}
status = {{ page = "status" }}

[[rules]]
name = "page"
match = '/fault/'

  [[rules.extract]]
  item = "page"
"#
    )
}

/// A spider over the fault pages of its own fixture server, with a Redis.
pub(crate) struct Env {
    pub(crate) redis: RedisServer,
    pub(crate) server: FixtureServer,
    pub(crate) spider: PathBuf,
    /// Holds the spider file; removed when the test ends.
    _dir: crawlworker_testkit::TempDir,
}

/// The settings every worker of these tests runs with.
const SETTINGS: &[(&str, &str)] = &[
    ("CRAWLWORKER_IDLE_RECHECK", "100ms"),
    ("CRAWLWORKER_LEASE_TIMEOUT", "2s"),
];

impl Env {
    pub(crate) async fn new(extra_settings: &str) -> Env {
        let redis = RedisServer::start();
        let server = FixtureServer::start(Site::demo()).await.unwrap();
        let dir = temp_dir("downloader");
        let spider = dir.path().join("faults.toml");
        std::fs::write(&spider, spider_text(extra_settings)).unwrap();
        Env {
            redis,
            server,
            spider,
            _dir: dir,
        }
    }

    pub(crate) fn push(&self, paths: &[&str]) {
        let urls: Vec<String> = paths.iter().map(|p| self.server.url(p)).collect();
        push_urls(&self.redis.url(), &self.spider, &urls);
    }

    /// A `crawlworker run` process, for the tests that kill one.
    fn process(&self, args: &[&str]) -> Worker {
        Worker::spawn(&self.spider, &self.redis.url(), args, SETTINGS)
    }

    /// A worker in this process that runs until stopped.
    async fn worker(&self) -> InProcess {
        InProcess::start(
            &self.spider,
            &self.redis.url(),
            SETTINGS,
            StopRules::default(),
        )
        .await
    }

    /// Runs `workers` workers (in this process) until the crawl is drained.
    pub(crate) async fn drain(&self, workers: usize) {
        let mut running = Vec::new();
        for _ in 0..workers {
            let rules = StopRules {
                until_drained: true,
                ..StopRules::default()
            };
            running.push(InProcess::start(&self.spider, &self.redis.url(), SETTINGS, rules).await);
        }
        for w in running {
            w.wait(Duration::from_secs(60)).await;
        }
    }

    fn stats(&self) -> BTreeMap<String, String> {
        self.redis.conn().hgetall("faults:stats").unwrap()
    }

    pub(crate) fn stat(&self, name: &str) -> i64 {
        self.stats()
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    pub(crate) fn items(&self) -> Vec<Value> {
        let raw: Vec<String> = self.redis.conn().lrange("faults:items", 0, -1).unwrap();
        raw.iter()
            .map(|s| serde_json::from_str(s).unwrap())
            .collect()
    }

    pub(crate) fn failed(&self) -> Vec<Value> {
        let raw: Vec<String> = self.redis.conn().lrange("faults:failed", 0, -1).unwrap();
        raw.iter()
            .map(|s| serde_json::from_str(s).unwrap())
            .collect()
    }

    pub(crate) async fn finish(self) {
        self.server.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_then_success_are_retried_until_they_land() {
    let env = Env::new("").await;
    let flaky = "/fault/status/503?times=2&key=a";
    let timeout_then_ok = "/fault/status/408?times=1&key=b";
    env.push(&[flaky, timeout_then_ok]);
    env.drain(2).await;
    assert_eq!(env.server.hits(flaky), 3, "two failures, then success");
    assert_eq!(env.server.hits(timeout_then_ok), 2);
    let items = env.items();
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(items.iter().all(|i| i["status"] == 200));
    assert_eq!(env.stat("retry/count"), 3);
    assert_eq!(env.stat("retry/reason_count/503"), 2);
    assert_eq!(env.stat("retry/reason_count/408"), 1);
    assert!(env.failed().is_empty());
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_retries_are_recorded_and_can_be_requeued() {
    let env = Env::new("").await;
    let broken = "/fault/status/500?times=5&key=c";
    env.push(&[broken]);
    env.drain(1).await;
    assert_eq!(
        env.server.hits(broken),
        3,
        "first try and retry_times = 2 retries"
    );
    assert!(env.items().is_empty());
    let failed = env.failed();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["url"], env.server.url(broken));
    assert_eq!(failed[0]["status"], 500);
    assert!(
        failed[0]["reason"]
            .as_str()
            .unwrap()
            .contains("gave up after 2 retries"),
        "{failed:?}"
    );
    assert_eq!(env.stat("retry/max_reached"), 1);
    let out = crawlworker_with_redis(
        &env.redis.url(),
        &["stats", env.spider.to_str().unwrap(), "--json"],
    );
    let stats: Value = serde_json::from_str(&crawlworker_testkit::stdout(&out)).unwrap();
    assert_eq!(stats["queues"]["failed"], 1);

    // scrapy-redis would never try this URL again; here it is re-queued.
    let out = crawlworker_with_redis(
        &env.redis.url(),
        &["push-urls", env.spider.to_str().unwrap(), "--from-failed"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("re-queued 1 failed request"),
        "{}",
        stderr(&out)
    );
    assert!(env.failed().is_empty());
    env.drain(1).await;
    // Attempts 4 and 5 fail, the 6th gets the 200.
    assert_eq!(env.server.hits(broken), 6);
    assert_eq!(env.items().len(), 1);
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_is_honoured_and_a_waiting_retry_survives_a_crash() {
    let env = Env::new("").await;
    let limited = "/fault/retry-after/2?times=1&key=d";
    env.push(&[limited]);
    let w = env.process(&[]);
    // Once the 429 is committed, the retry waits in Redis, not in the
    // worker: then kill the worker.
    let mut conn = env.redis.conn();
    eventually("the retry waits in the delayed set", PATIENCE, || {
        (conn.zcard::<_, u64>("faults:delayed").unwrap() == 1).then_some(())
    });
    w.kill();
    env.drain(1).await;
    let arrivals = env.server.arrivals("/fault/retry-after/");
    assert_eq!(arrivals.len(), 2);
    let gap = arrivals[1] - arrivals[0];
    assert!(
        gap >= Duration::from_millis(1900),
        "retried after {gap:?}, before Retry-After"
    );
    assert_eq!(env.items().len(), 1);
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_become_new_requests_with_limits_and_loop_detection() {
    let env = Env::new("redirect_max_times = 4").await;
    env.push(&[
        "/fault/redirect/3",
        "/fault/redirect/9",
        "/fault/loop/a",
        "/fault/redirect-to?url=http%3A%2F%2Fads.demo.invalid%2F",
    ]);
    env.drain(2).await;
    for hop in [
        "/fault/redirect/3",
        "/fault/redirect/2",
        "/fault/redirect/1",
        "/fault/redirect/0",
    ] {
        assert_eq!(env.server.hits(hop), 1, "{hop} fetched once");
    }
    let items = env.items();
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["url"], env.server.url("/fault/redirect/0"));
    let failed = env.failed();
    let reasons: Vec<&str> = failed
        .iter()
        .map(|f| f["reason"].as_str().unwrap())
        .collect();
    assert_eq!(failed.len(), 2, "{reasons:?}");
    assert!(
        reasons.iter().any(|r| r.contains("redirect loop")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("redirect chain longer than redirect_max_times (4)")),
        "{reasons:?}"
    );
    // Every record in the failed key is counted (the queue once said 3
    // while failed/count said 2).
    assert_eq!(env.stat("failed/count"), 2);
    assert_eq!(env.server.hits("/fault/loop/a"), 1);
    assert_eq!(env.server.hits("/fault/loop/b"), 1);
    // The off-site hop is dropped, never fetched (the .invalid host cannot be).
    assert_eq!(env.stat("offsite/filtered"), 1);
    assert_eq!(env.stat("redirect/count"), 3 + 4 + 1);
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_endless_slow_and_silent_responses_end_in_counted_failures() {
    let env = Env::new("download_maxsize = \"1 MiB\"\nretry_times = 0").await;
    env.push(&[
        "/fault/huge/20000000",
        "/fault/huge-chunked/20000000",
        "/fault/endless",
        "/fault/trickle?bytes_per_sec=20",
        "/fault/hang",
        "/fault/huge/1000",
    ]);
    // A response that held the worker would make the drain time out.
    env.drain(1).await;
    let items = env.items();
    assert_eq!(
        items.len(),
        1,
        "only the small page gives an item: {items:?}"
    );
    let failed = env.failed();
    let kinds: Vec<&str> = failed.iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert_eq!(failed.len(), 5, "{failed:#?}");
    assert_eq!(
        kinds.iter().filter(|k| **k == "ResponseTooLarge").count(),
        3,
        "{kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| **k == "TimeoutError").count(),
        2,
        "{kinds:?}"
    );
    assert_eq!(env.stat("downloader/exception_count"), 5);
    // The server is not left streaming to anyone.
    eventually("no fault response in progress", PATIENCE, || {
        (env.server.faults_in_progress() == 0).then_some(())
    });
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_addresses_are_refused_unless_allowed() {
    let env = Env::new("").await;
    let text = std::fs::read_to_string(&env.spider).unwrap().replace(
        "allow_private_networks = true",
        "allow_private_networks = false",
    );
    std::fs::write(&env.spider, text).unwrap();
    env.push(&["/fault/status/200?key=ssrf"]);
    env.drain(1).await;
    assert_eq!(
        env.server.total_hits(),
        0,
        "nothing may reach a loopback address"
    );
    let failed = env.failed();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["kind"], "ForbiddenAddress", "{failed:?}");
    env.finish().await;
}

/// The rate and the busiest second of 16 requests to one host, limited to
/// 5 a second, crawled by `workers` workers; `more` is added to the
/// spider's settings (or tables after them). With the shard count the
/// crawl recorded (none for a spider that is not sharded).
async fn measured_rate(workers: usize, more: &str) -> (f64, usize, Option<u64>) {
    let env = Env::new(&format!(
        "max_requests_per_second = 5\nconcurrent_requests = 8\n{more}"
    ))
    .await;
    let paths: Vec<String> = (0..16)
        .map(|i| format!("/fault/status/200?key=rate{i}"))
        .collect();
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    env.push(&refs);
    env.drain(workers).await;
    let arrivals = env.server.arrivals("/fault/status/");
    assert_eq!(arrivals.len(), 16);
    let span = (*arrivals.last().unwrap() - arrivals[0]).as_secs_f64();
    let rate = (arrivals.len() - 1) as f64 / span;
    let p = peak(&arrivals, Duration::from_secs(1));
    let shards: Option<u64> = env.redis.conn().hget("faults:control", "shards").unwrap();
    env.finish().await;
    (rate, p, shards)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_rate_limit_holds_for_the_whole_cluster() {
    for workers in [1, 4] {
        let (rate, peak, _) = measured_rate(workers, "").await;
        assert!(
            rate <= 5.25,
            "{workers} workers: {rate:.2} requests/s over a 5/s limit"
        );
        // The fencepost of 200 ms spacing allows six in one second. How
        // close to the limit a crawl gets is measured by
        // `cargo bench --bench politeness`, not asserted here.
        assert!(
            peak <= 6,
            "{workers} workers: {peak} requests in one second"
        );
    }
}

/// A sharded spider's workers lease from every shard in turn, and a
/// host's politeness slot is on its home shard: the rate still holds for
/// the cluster (its start entries reach that shard through shard 0's
/// outbox when it is another).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_rate_limit_holds_for_a_sharded_spiders_workers() {
    let (rate, peak, shards) = measured_rate(4, "\n[keys]\nshards = 3").await;
    assert_eq!(shards, Some(3), "the crawl ran over three shards");
    assert!(rate <= 5.25, "{rate:.2} requests/s over a 5/s limit");
    assert!(peak <= 6, "{peak} requests in one second");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_slows_the_host_down_for_every_worker() {
    held_off_for_retry_after(
        "/fault/retry-after/1?times=1&key=slow",
        "/fault/retry-after/",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_with_retry_after_is_as_strict_as_a_429() {
    held_off_for_retry_after(
        "/fault/503-retry-after/1?times=1&key=slow",
        "/fault/503-retry-after/",
    )
    .await;
}

/// `first` answers once with Retry-After: 1 (`prefix` its route): no
/// request of the cluster reaches the host for a second after it, however
/// healthy the host otherwise is.
async fn held_off_for_retry_after(first: &str, prefix: &str) {
    let env = Env::new("concurrent_requests = 4").await;
    let mut paths = vec![first.to_string()];
    paths.extend((0..6).map(|i| format!("/fault/status/200?key=after{i}")));
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    // The 429 goes first; the others are queued behind it.
    env.push(&refs[..1]);
    let first = env.worker().await;
    // Once the 429 is committed, its host is backed off for the cluster.
    let mut conn = env.redis.conn();
    eventually("the host is backed off", PATIENCE, || {
        (conn.hlen::<_, u64>("faults:pace:backoff").unwrap() == 1).then_some(())
    });
    env.push(&refs[1..]);
    let t429 = env.server.arrivals(prefix)[0];
    env.drain(1).await;
    first.stop().await;
    let after = env.server.arrivals("/fault/status/");
    assert_eq!(after.len(), 6);
    let earliest = after.iter().map(|t| *t - t429).min().unwrap();
    assert!(
        earliest >= Duration::from_millis(900),
        "a request reached the host {earliest:?} after its 429 (Retry-After: 1)"
    );
    assert_eq!(env.stat("backoff/slowed_count"), 1);
    env.finish().await;
}

/// A worker leases ahead of its download slots, so requests for a host are
/// often leased, and paced, before an answer slows that host. A 429 with
/// Retry-After still holds back every one of them, not only those leased
/// after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_holds_back_the_requests_already_leased_for_its_host() {
    let env = Env::new("concurrent_requests = 4\nconcurrent_requests_per_domain = 1").await;
    let mut paths = vec!["/fault/retry-after/1?times=1&key=slow".to_string()];
    paths.extend((0..6).map(|i| format!("/fault/status/200?key=after{i}")));
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    // Everything is queued before the worker starts: it leases the 429 and
    // the pages behind it in one go, while the host is still unslowed. On
    // a busy machine some of them come to the downloader only after the
    // 429's download has ended: what it said must still hold them.
    env.push(&refs);
    env.drain(1).await;
    assert_eq!(env.items().len(), 7, "every page arrives");
    let t429 = env.server.arrivals("/fault/retry-after/")[0];
    let after = env.server.arrivals("/fault/status/");
    assert_eq!(after.len(), 6);
    // Pages that went before the 429 are fine; none may follow it sooner
    // than its Retry-After.
    let too_soon: Vec<Duration> = after
        .iter()
        .filter(|t| **t > t429)
        .map(|t| *t - t429)
        .filter(|d| *d < Duration::from_millis(900))
        .collect();
    assert!(
        too_soon.is_empty(),
        "requests reached the host {too_soon:?} after its 429 (Retry-After: 1)"
    );
    // Nor do they all go when it ends: the back-off it set (1 s, easing
    // by a fifth with each good response) spaces them.
    let mut later: Vec<_> = after.iter().filter(|t| **t > t429).collect();
    later.sort();
    let gaps: Vec<Duration> = later.windows(2).map(|w| *w[1] - *w[0]).collect();
    assert!(
        gaps.iter().all(|g| *g >= Duration::from_millis(200)),
        "requests after the 429 {gaps:?} apart"
    );
    assert_eq!(env.stat("backoff/slowed_count"), 1);
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sporadic_503s_leave_their_host_at_full_speed() {
    let env = Env::new("").await;
    // One page in twenty answers 503 once (a busy but healthy server).
    let paths: Vec<String> = (0..100)
        .map(|i| match i % 20 {
            10 => format!("/fault/status/503?times=1&key=busy{i}"),
            _ => format!("/fault/status/200?key=fine{i}"),
        })
        .collect();
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    env.push(&refs);
    env.drain(1).await;
    let items = env.items();
    assert_eq!(items.len(), 100, "every page arrives");
    assert!(items.iter().all(|i| i["status"] == 200));
    assert_eq!(env.stat("retry/reason_count/503"), 5);
    assert_eq!(
        env.stat("backoff/slowed_count"),
        0,
        "no 503 slowed the host"
    );
    let mut conn = env.redis.conn();
    let host = env.server.base_url().replace("http://", "");
    let delay: Option<u64> = conn.hget("faults:pace:backoff", &host).unwrap();
    assert_eq!(delay, None, "no back-off left");
    let share: Option<u64> = conn.hget("faults:pace:errors", &host).unwrap();
    assert!(
        share.unwrap_or(0) <= 200,
        "error share {share:?} per mille, at most the tolerated one in five"
    );
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_failing_everything_backs_off_hard_then_recovers() {
    let env = Env::new(r#"adaptive_backoff_max_delay = "2s""#).await;
    let host = env.server.base_url().replace("http://", "");
    let mut conn = env.redis.conn();
    // 503 to everything for 8 s from the first request. The delay climbs
    // with each failure, so a fourth of the longest back-off takes a few
    // seconds of failures.
    let down: Vec<String> = (0..40)
        .map(|i| format!("/fault/outage/503?ms=8000&key=down&page={i}"))
        .collect();
    let refs: Vec<&str> = down.iter().map(String::as_str).collect();
    env.push(&refs);
    let first = env.worker().await;
    let peak = eventually("the host is backed off hard", PATIENCE, || {
        let ms: Option<u64> = conn.hget("faults:pace:backoff", &host).unwrap();
        ms.filter(|&ms| ms >= 500)
    });
    assert!(peak <= 2000, "{peak} ms, over adaptive_backoff_max_delay");
    // The outage ends by the fault server's clock, 8 s after its first
    // request: waiting it out is the scenario, not a guess.
    let outage_over = env.server.arrivals("/fault/outage/")[0] + Duration::from_secs(8);
    tokio::time::sleep_until(outage_over.into()).await;
    // Healthy again: its good responses bring the pace back.
    let healthy: Vec<String> = (0..30)
        .map(|i| format!("/fault/status/200?key=healthy{i}"))
        .collect();
    let refs: Vec<&str> = healthy.iter().map(String::as_str).collect();
    env.push(&refs);
    env.drain(1).await;
    first.stop().await;
    let items = env.items();
    assert_eq!(
        items.len() + env.failed().len(),
        70,
        "each page arrives or fails for good after its retries"
    );
    let arrived = |prefix: &str| {
        items
            .iter()
            .filter(|i| i["url"].as_str().unwrap().contains(prefix))
            .count()
    };
    assert_eq!(arrived("/fault/status/200"), 30);
    assert!(env.stat("backoff/slowed_count") > 0);
    let delay: Option<u64> = conn.hget("faults:pace:backoff", &host).unwrap();
    assert_eq!(delay, None, "recovered: no back-off left");
    let share: Option<u64> = conn.hget("faults:pace:errors", &host).unwrap();
    assert!(
        share.unwrap_or(0) <= 200,
        "recovered: error share {share:?} per mille"
    );
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_worker_hands_back_requests_still_waiting_for_their_turn() {
    // One request a second: most leased requests wait for their host's
    // slot. On SIGTERM they go back to the queue at once; only a download
    // in progress may use the (long) grace period. Those handed back no
    // longer count against their host's page quota.
    let env = Env::new("max_requests_per_second = 1\nmax_pages_per_host = 40").await;
    let paths: Vec<String> = (0..40)
        .map(|i| format!("/fault/status/200?key=stop{i}"))
        .collect();
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    env.push(&refs);
    let w = Worker::spawn(
        &env.spider,
        &env.redis.url(),
        &[],
        &[
            ("CRAWLWORKER_IDLE_RECHECK", "100ms"),
            ("CRAWLWORKER_SHUTDOWN_GRACE", "60s"),
            // Leases long enough for all 40 to wait for their turn at once.
            ("CRAWLWORKER_LEASE_TIMEOUT", "120s"),
        ],
    );
    let mut conn = env.redis.conn();
    eventually("requests wait for their turn", PATIENCE, || {
        let leased: u64 = conn.zcard("faults:inflight").unwrap();
        (env.server.total_hits() >= 1 && leased >= 20).then_some(())
    });
    w.terminate();
    // Well within the 60 s grace: nothing in progress holds it.
    let (status, log) = w.wait(Duration::from_secs(15));
    assert!(status.success(), "{log}");
    assert_eq!(conn.zcard::<_, u64>("faults:inflight").unwrap(), 0, "{log}");
    let fetched = env.server.total_hits() as u64;
    let queued: u64 = conn.zcard("faults:requests").unwrap();
    let done: u64 = conn.llen("faults:items").unwrap();
    assert_eq!(
        queued + done,
        40,
        "every request is either done or queued again"
    );
    assert!(done <= fetched);
    let host = env.server.base_url().replace("http://", "");
    let counted: u64 = conn.hget("faults:control:hosts", &host).unwrap();
    assert_eq!(
        counted, done,
        "only the pages fetched count against max_pages_per_host"
    );
    env.finish().await;
}
