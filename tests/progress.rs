//! What a running worker tells its operator (issue 8): a progress line
//! every `log_stats_interval`, a per-page line at debug level without the
//! HTML parser's noise, a summary when it stops, no colour codes off a
//! terminal, and Scrapy's finish stats in the hash.

use std::collections::HashMap;
use std::time::Duration;

use redis::Commands;

use crawlworker_demo::Site;
use crawlworker_testkit::{
    crawlworker_with_redis, spider_for, stderr, temp_dir, FixtureServer, RedisServer, Worker,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_logs_progress_pages_and_a_summary() {
    let redis = RedisServer::start();
    // Slow enough for a few progress lines.
    let server = FixtureServer::start_with_latency(Site::demo(), Duration::from_millis(20))
        .await
        .unwrap();
    let dir = temp_dir("progress");
    let spider = spider_for("bbs", &server.base_url(), dir.path());
    let task = r#"{"forum_id": "00001", "max_page": 2}"#;
    let out = crawlworker_with_redis(&redis.url(), &["push-urls", spider.to_str().unwrap(), task]);
    assert!(out.status.success(), "{}", stderr(&out));
    let worker = Worker::spawn(
        &spider,
        &redis.url(),
        &["--until-drained", "--concurrency", "1"],
        &[
            ("CRAWLWORKER_LOG", "debug"),
            ("CRAWLWORKER_LOG_STATS_INTERVAL", "100ms"),
        ],
    );
    let (status, log) = worker.wait(Duration::from_secs(60));
    assert!(status.success(), "{log}");
    assert!(log.contains("pages/min"), "no progress line:\n{log}");
    assert!(log.contains("items/min"), "{log}");
    assert!(
        log.contains("fetched 200 GET http://127.0.0.1:"),
        "no per-page line:\n{log}"
    );
    assert!(log.contains("(rule list, "), "{log}");
    assert!(
        !log.contains("html5ever") && !log.contains("selectors::"),
        "a bare level must not turn on the parser's debug lines:\n{log}"
    );
    assert!(
        !log.contains('\u{1b}'),
        "colour codes in a log file:\n{log}"
    );
    assert!(
        log.contains("worker stopped (the crawl is drained)"),
        "no summary:\n{log}"
    );
    assert!(log.contains("cluster stats:"), "{log}");
    let stats: HashMap<String, String> = redis.conn().hgetall("bbs:stats").unwrap();
    assert_eq!(
        stats.get("finish_reason").map(String::as_str),
        Some("finished")
    );
    assert!(stats.contains_key("finish_time"), "{stats:?}");
    let elapsed: f64 = stats["elapsed_time_seconds"].parse().unwrap();
    assert!(elapsed > 0.0, "{stats:?}");
    server.stop().await.unwrap();
}
