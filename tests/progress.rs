//! What a running worker tells its operator: a progress line
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
    // The summary once (a log line), not again as a plain line.
    assert_eq!(
        log.matches("stopped (the crawl is drained) after").count(),
        1,
        "one summary:\n{log}"
    );
    assert!(
        log.contains("spider `bbs` stopped (the crawl is drained) after"),
        "{log}"
    );
    assert!(log.contains("cluster stats of spider `bbs`:"), "{log}");
    // Each stat on its own line, nothing glued to the last value.
    let glued: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("  ") && l.contains('='))
        .collect();
    assert!(glued.is_empty(), "{glued:?}");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_the_spider_worker_and_url_and_quiet_is_quiet() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("progress");
    let spider = spider_for("bbs", &server.base_url(), dir.path());
    let task = r#"{"forum_id": "00001", "max_page": 1}"#;
    let out = crawlworker_with_redis(&redis.url(), &["push-urls", spider.to_str().unwrap(), task]);
    assert!(out.status.success(), "{}", stderr(&out));
    let worker = Worker::spawn(
        &spider,
        &redis.url(),
        &["--until-drained", "--log-format", "json", "-v"],
        &[],
    );
    let (status, log) = worker.wait(Duration::from_secs(60));
    assert!(status.success(), "{log}");
    // Every line, the summary too: a log shipper reads them all.
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let page = lines
        .iter()
        .find(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("fetched 200"))
        })
        .unwrap_or_else(|| panic!("no per-page line:\n{log}"));
    assert!(
        page["fields"]["url"]
            .as_str()
            .is_some_and(|u| u.starts_with("http://127.0.0.1:")),
        "{page}"
    );
    assert_eq!(page["span"]["spider"], "bbs", "{page}");
    assert!(page["span"]["worker"].as_str().is_some(), "{page}");
    assert!(lines.iter().all(|l| l["level"].is_string()), "{log}");
    let summaries = lines
        .iter()
        .filter(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("spider `bbs` stopped ("))
        })
        .count();
    assert_eq!(summaries, 1, "{log}");

    let out = crawlworker_with_redis(&redis.url(), &["push-urls", spider.to_str().unwrap(), task]);
    assert!(out.status.success());
    let quiet = Worker::spawn(
        &spider,
        &redis.url(),
        &["--until-drained", "--quiet"],
        &[("CRAWLWORKER_LOG", "debug")],
    );
    let (status, log) = quiet.wait(Duration::from_secs(60));
    assert!(status.success(), "{log}");
    assert!(
        !log.contains("INFO") && !log.contains("DEBUG"),
        "--quiet logs only problems:\n{log}"
    );
    server.stop().await.unwrap();
}
