//! Taking a crawl over from scrapy-redis: a start key and a
//! dupefilter left the scrapy-redis way, with fingerprints computed by the
//! real scrapy-redis 0.9.1 (`tests/fixtures/scrapy_redis/`), are used as
//! they are: what scrapy-redis had seen is not fetched again.

use std::net::SocketAddr;
use std::time::Duration;

use redis::Commands;
use serde_json::Value;

use crawlworker::worker::StopRules;
use crawlworker_demo::Site;
use crawlworker_testkit::{root, spider_for, temp_dir, FixtureServer, RedisServer};

use crate::in_process::InProcess;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_left_by_scrapy_redis_is_taken_over_without_refetching() {
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/scrapy_redis/state.json")).unwrap(),
    )
    .unwrap();
    // The fingerprints name this address: the server must be on it.
    let addr: SocketAddr = "127.0.0.1:47123".parse().unwrap();
    let server = FixtureServer::start_on(Site::demo(), addr, Duration::ZERO)
        .await
        .unwrap_or_else(|e| panic!("the fixture needs {addr} free: {e}"));
    let redis = RedisServer::start();
    let mut conn = redis.conn();
    let seen: Vec<(String, String)> = state["seen"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["url"].as_str().unwrap().to_string(),
                s["fingerprint"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (_, fingerprint) in &seen {
        let _: () = conn
            .sadd(state["dupefilter_key"].as_str().unwrap(), fingerprint)
            .unwrap();
    }
    for entry in state["start_entries"].as_array().unwrap() {
        let _: () = conn
            .rpush(
                state["start_key"].as_str().unwrap(),
                entry.as_str().unwrap(),
            )
            .unwrap();
    }

    let dir = temp_dir("migration");
    let spider = spider_for("bbs", &server.base_url(), dir.path());
    let rules = StopRules {
        until_drained: true,
        ..StopRules::default()
    };
    InProcess::start(&spider, &redis.url(), &[], rules)
        .await
        .wait(Duration::from_secs(60))
        .await;

    for (url, _) in &seen {
        let path = url.trim_start_matches(&server.base_url());
        assert_eq!(
            server.hits(path),
            0,
            "{url} was seen by scrapy-redis, yet fetched"
        );
    }
    // The forum's first page has four posts: the fourth is new.
    assert_eq!(server.hits("/post/1004"), 1);
    let stats: std::collections::HashMap<String, String> = conn.hgetall("bbs:stats").unwrap();
    let filtered: usize = stats["dupefilter/filtered"].parse().unwrap();
    assert!(filtered >= seen.len(), "{stats:?}");
    server.stop().await.unwrap();
}
