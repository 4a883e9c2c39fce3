//! How close a crawl limited to `max_requests_per_second = 5` on one host
//! comes to that rate, as the server sees it, with 1 and 4 workers (release
//! `crawlworker run` processes sharing one Redis). The tests check the limit
//! is never exceeded; this measures how much of it is used. Prints, per
//! worker count, the median over 3 runs of the rate (16 requests) and the
//! most requests seen in any 1 s window.
//!
//!     cargo bench --bench politeness        # needs redis-server

use std::time::Duration;

use crawlworker_demo::Site;
use crawlworker_testkit::{
    crawlworker_with_redis, peak, temp_dir, FixtureServer, RedisServer, Worker,
};

const SPIDER: &str = r#"
name = "rate"
allowed_domains = ["127.0.0.1"]

[settings]
allow_private_networks = true
max_requests_per_second = 5
concurrent_requests = 8

[items.page]
url = { page = "url" }

[[rules]]
name = "page"
match = '/fault/'
  [[rules.extract]]
  item = "page"
"#;

/// One crawl of 16 pages by `workers` workers: (requests/s, peak in 1 s).
async fn run(workers: usize) -> (f64, usize) {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.expect("server");
    let dir = temp_dir("politeness-bench");
    let spider = dir.path().join("rate.toml");
    std::fs::write(&spider, SPIDER).expect("spider");
    let mut args = vec!["push-urls".to_string(), spider.display().to_string()];
    args.extend((0..16).map(|i| server.url(&format!("/fault/status/200?key=rate{i}"))));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert!(crawlworker_with_redis(&redis.url(), &args).status.success());
    let running: Vec<Worker> = (0..workers)
        .map(|_| {
            Worker::spawn(
                &spider,
                &redis.url(),
                &["--until-drained"],
                &[("CRAWLWORKER_IDLE_RECHECK", "100ms")],
            )
        })
        .collect();
    for w in running {
        let (status, log) = w.wait(Duration::from_secs(60));
        assert!(status.success(), "{log}");
    }
    let arrivals = server.arrivals("/fault/status/");
    assert_eq!(arrivals.len(), 16);
    let span = (*arrivals.last().expect("arrivals") - arrivals[0]).as_secs_f64();
    let result = (15.0 / span, peak(&arrivals, Duration::from_secs(1)));
    let _ = server.stop().await;
    result
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !crawlworker_testkit::benchmarking() {
        return;
    }
    for workers in [1, 4] {
        let mut runs = Vec::new();
        for _ in 0..3 {
            runs.push(run(workers).await);
        }
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (rate, _) = runs[1];
        let peak = runs.iter().map(|r| r.1).max().unwrap_or(0);
        println!(
            "{workers} worker(s): median {rate:.2} requests/s (limit 5/s), at most {peak} in any 1 s window over 3 runs"
        );
    }
}
