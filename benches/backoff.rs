//! Adaptive back-off on the fixture server's fault routes: how long one
//! `crawlworker run --until-drained` worker takes to crawl one host when
//!
//! - **sporadic**: 400 pages, one in twenty answers 503 once (a busy but
//!   healthy server; each is retried and lands), and
//! - **outage**: 200 pages on a host that answers 503 to everything for
//!   30 s from the first request, then recovers (pages whose retries all
//!   fall inside the outage fail for good, as they should).
//!
//! Prints, per scenario, the crawl time, items and failures, the requests
//! the host received (during the outage: how hard it was hit while down),
//! and for the outage how long the crawl went on after the host was
//! healthy again. Default settings otherwise (concurrency 16, 8 per host,
//! retries after 1 s and 2 s, back-off up to 60 s). Loopback only.
//!
//!     cargo bench --bench backoff                     # needs redis-server
//!     CRAWLWORKER_BIN=/path/to/other/crawlworker cargo bench --bench backoff
//!
//! The second form measures another build (e.g. an older commit) with the
//! same harness. The numbers are wall-clock time spent waiting on
//! politeness, not CPU, so a debug build of the worker measures the same
//! thing.

use std::time::{Duration, Instant};

use redis::Commands;

use crawlworker_demo::Site;
use crawlworker_testkit::{crawlworker_with_redis, temp_dir, FixtureServer, RedisServer, Worker};

const SPIDER: &str = r#"
name = "backoff"
allowed_domains = ["127.0.0.1"]

[settings]
allow_private_networks = true

[items.page]
url = { page = "url" }

[[rules]]
name = "page"
match = '/fault/'
  [[rules.extract]]
  item = "page"
"#;

/// How long the host of the outage scenario answers 503.
const OUTAGE: Duration = Duration::from_secs(30);

struct Run {
    elapsed: Duration,
    items: u64,
    failed: u64,
    hits: usize,
    /// Requests that arrived while the host was down (outage only).
    hits_down: usize,
    /// From the end of the outage to the crawl's last request (outage only).
    tail: Option<Duration>,
    slowed: u64,
}

async fn run(paths: &[String], outage: bool) -> Run {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.expect("server");
    let dir = temp_dir("backoff-bench");
    let spider = dir.path().join("backoff.toml");
    std::fs::write(&spider, SPIDER).expect("spider");
    let mut args = vec!["push-urls".to_string(), spider.display().to_string()];
    args.extend(paths.iter().map(|p| server.url(p)));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    assert!(crawlworker_with_redis(&redis.url(), &args).status.success());
    let started = Instant::now();
    let worker = Worker::spawn(
        &spider,
        &redis.url(),
        &["--until-drained"],
        &[("CRAWLWORKER_IDLE_RECHECK", "100ms")],
    );
    let (status, log) = worker.wait(Duration::from_secs(1800));
    assert!(status.success(), "{log}");
    let elapsed = started.elapsed();
    let arrivals = server.arrivals("/fault/");
    let (hits_down, tail) = match (outage, arrivals.first(), arrivals.last()) {
        (true, Some(&first), Some(&last)) => {
            let healthy = first + OUTAGE;
            let down = arrivals.iter().filter(|&&t| t < healthy).count();
            (down, Some(last.saturating_duration_since(healthy)))
        }
        _ => (0, None),
    };
    let mut conn = redis.conn();
    let stat = |conn: &mut redis::Connection, name: &str| -> u64 {
        conn.hget::<_, _, Option<u64>>("backoff:stats", name)
            .ok()
            .flatten()
            .unwrap_or(0)
    };
    let result = Run {
        elapsed,
        items: conn.llen("backoff:items").unwrap_or(0),
        failed: conn.llen("backoff:failed").unwrap_or(0),
        hits: arrivals.len(),
        hits_down,
        tail,
        slowed: stat(&mut conn, "backoff/slowed_count"),
    };
    let _ = server.stop().await;
    result
}

fn report(name: &str, r: &Run) {
    let mut line = format!(
        "{name}: {:.1} s, {} items, {} failed, {} requests",
        r.elapsed.as_secs_f64(),
        r.items,
        r.failed,
        r.hits
    );
    if let Some(tail) = r.tail {
        line.push_str(&format!(
            " ({} while down), crawl went on {:.1} s after recovery",
            r.hits_down,
            tail.as_secs_f64()
        ));
    }
    line.push_str(&format!(", backoff/slowed_count {}", r.slowed));
    println!("{line}");
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !crawlworker_testkit::benchmarking() {
        return;
    }
    let sporadic: Vec<String> = (0..400)
        .map(|i| match i % 20 {
            10 => format!("/fault/status/503?times=1&key=busy{i}"),
            _ => format!("/fault/status/200?key=fine{i}"),
        })
        .collect();
    report(
        "sporadic 503 (20 of 400 pages, once each)",
        &run(&sporadic, false).await,
    );
    let outage: Vec<String> = (0..200)
        .map(|i| {
            format!(
                "/fault/outage/503?ms={}&key=down&page={i}",
                OUTAGE.as_millis()
            )
        })
        .collect();
    report(
        "outage (200 pages, 503 to everything for 30 s)",
        &run(&outage, true).await,
    );
}
