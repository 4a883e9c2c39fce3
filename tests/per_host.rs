//! What a worker keeps per host stays bounded by the requests it has in
//! progress, not by the hosts a crawl has seen: a crawl over many distinct
//! hosts ends with no host's download slots or robots.txt fetch lock left
//! in the worker, while robots.txt is still obeyed on every host.
//!
//! Many hosts on loopback only: each host is an IPv4 literal in
//! 127.0.0.0/8, and the spider sends every request through one HTTP proxy,
//! the fixture server on 127.0.0.1, which answers any host by path. Nothing
//! is resolved; the worker keys its state by the URL's host as usual.

use std::time::Duration;

use redis::Commands;

use crawlworker::worker::StopRules;
use crawlworker_demo::Site;
use crawlworker_testkit::{
    loopback_host, proxied_spider, push_urls, temp_dir, FixtureServer, RedisServer, Robots,
};

use crate::in_process::InProcess;

/// Distinct hosts crawled.
const HOSTS: usize = 300;
/// Every this many hosts, one also gets a page its robots.txt forbids.
const FORBIDDEN_EVERY: usize = 10;

fn host(i: usize) -> String {
    loopback_host(1, i)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_over_many_hosts_leaves_no_per_host_slots_or_locks_behind() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.expect("server");
    server.set_robots(Robots::Body(
        "User-agent: *\nDisallow: /fault/status/404\n".into(),
    ));
    let dir = temp_dir("per-host");
    let spider = proxied_spider(
        dir.path(),
        server.addr(),
        "robotstxt_obey = true\ncookies_enabled = true\nconcurrent_requests = 8\nconcurrent_requests_per_domain = 2",
    );
    let mut urls = Vec::new();
    for i in 0..HOSTS {
        urls.push(format!("http://{}/fault/status/200?key=h{i}", host(i)));
        if i % FORBIDDEN_EVERY == 0 {
            urls.push(format!("http://{}/fault/status/404?key=h{i}", host(i)));
        }
    }
    push_urls(&redis.url(), &spider, &urls);

    let rules = StopRules {
        until_drained: true,
        ..StopRules::default()
    };
    let worker = InProcess::start(&spider, &redis.url(), &[], rules).await;
    let downloader = worker.downloader();
    let watcher = tokio::spawn(async move {
        let mut most = 0;
        loop {
            most = most.max(downloader.per_host().slots);
            if downloader.per_host().robots_cached >= HOSTS {
                return most;
            }
            // How often it is sampled, not a wait for an effect.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let downloader = worker.downloader();
    worker.wait(Duration::from_secs(120)).await;
    let most_slots = tokio::time::timeout(Duration::from_secs(5), watcher)
        .await
        .expect("every host's robots.txt was cached")
        .expect("watcher");

    // Slots exist only for requests in progress: at most the leases a
    // worker of 8 download slots may hold, never one per host seen.
    assert!(most_slots <= 8 * 4, "{most_slots} hosts held slots at once");
    let left = downloader.per_host();
    assert_eq!(left.slots, 0, "no request is in progress: {left:?}");
    assert_eq!(left.robots_fetching, 0, "no robots.txt fetch: {left:?}");
    assert_eq!(left.slowed, 0, "no host failed: {left:?}");
    assert_eq!(left.robots_cached, HOSTS, "{left:?}");

    // Every host's page was crawled, and every forbidden one left alone.
    let items: usize = redis.conn().llen("hosts:items").expect("LLEN");
    assert_eq!(items, HOSTS);
    let forbidden: Option<i64> = redis
        .conn()
        .hget("hosts:stats", "robotstxt/forbidden")
        .expect("HGET");
    assert_eq!(forbidden, Some((HOSTS / FORBIDDEN_EVERY) as i64));
    for i in (0..HOSTS).step_by(FORBIDDEN_EVERY) {
        assert_eq!(server.hits(&format!("/fault/status/404?key=h{i}")), 0);
    }
    assert_eq!(server.hits("/robots.txt"), HOSTS as u64, "once per host");
    let _ = server.stop().await;
}
