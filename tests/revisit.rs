//! Recurring crawls (issue 11): a rule's `revisit` fetches a page again on
//! its schedule, kept in Redis, exactly once per due time across a cluster
//! of workers (one of them killed and replaced on the way), while the posts
//! it links to are crawled once.

use std::time::{Duration, Instant};

use redis::Commands;
use serde_json::Value;

use crawlworker_demo::Site;
use crawlworker_testkit::{
    crawlworker_with_redis, eventually, stderr, stdout, temp_dir, FixtureServer, RedisServer,
    Worker,
};

/// Forum 00001's first list page, revisited every `every`; its posts once.
fn spider(every: &str) -> String {
    format!(
        r#"name = "news"
allowed_domains = ["127.0.0.1"]
[settings]
allow_private_networks = true
lease_timeout = "2s"
[start]
rule = "list"
[items.post]
title = {{ css = "h1.post-title::text", required = true }}
[[rules]]
name = "list"
match = '/list/'
revisit = "{every}"
  [[rules.follow]]
  css = "ul.threads a.title::attr(href)"
  rule = "post"
[[rules]]
name = "post"
match = '/post/\d+$'
  [[rules.extract]]
  item = "post"
"#
    )
}

fn stats(redis: &RedisServer, spider: &std::path::Path) -> Value {
    let out = crawlworker_with_redis(
        &redis.url(),
        &["stats", &spider.display().to_string(), "--json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revisited_page_is_fetched_once_per_due_time_by_a_cluster() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("revisit");
    let path = dir.path().join("news.toml");
    std::fs::write(&path, spider("1s")).unwrap();
    let list = "/list/00001/1";
    let mut conn = redis.conn();
    let _: () = conn.rpush("news:start_urls", server.url(list)).unwrap();
    let mut workers: Vec<Worker> = (0..3)
        .map(|_| Worker::spawn(&path, &redis.url(), &[], &[]))
        .collect();
    let started = Instant::now();
    // The first fetch, then one per second; a worker killed on the way and
    // one started in its place change nothing (a revisit the dead worker
    // held comes back when its lease expires).
    eventually("two revisits", Duration::from_secs(30), || {
        (server.arrivals(list).len() >= 3).then_some(())
    });
    workers.remove(0).kill();
    workers.push(Worker::spawn(&path, &redis.url(), &[], &[]));
    eventually("six revisits", Duration::from_secs(30), || {
        (server.arrivals(list).len() >= 7).then_some(())
    });
    let elapsed = started.elapsed();
    for w in &workers {
        w.terminate();
    }
    let logs: Vec<String> = workers
        .into_iter()
        .map(|w| {
            let (status, log) = w.wait(Duration::from_secs(30));
            assert!(status.success(), "{log}");
            log
        })
        .collect();
    let arrivals = server.arrivals(list);
    // Never two fetches for one due time: each comes about a second after
    // the one before (the schedule is kept from the commit, in Redis; an
    // idle worker looks every `idle_recheck`, 1 s, so a revisit may come up
    // to that much late, never early).
    for pair in arrivals.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= Duration::from_millis(950),
            "two fetches of the list page {gap:?} apart: {arrivals:?}\n{logs:?}"
        );
    }
    assert!(
        arrivals.len() as f64 <= 2.0 + elapsed.as_secs_f64(),
        "{} fetches in {elapsed:?}",
        arrivals.len()
    );
    // The posts it links to were crawled once each, however often the list
    // page was.
    let items: Vec<String> = conn.lrange("news:items", 0, -1).unwrap();
    let posts: Vec<String> = server
        .hit_counts()
        .into_iter()
        .filter(|(path, _)| path.starts_with("/post/"))
        .map(|(path, n)| {
            assert_eq!(n, 1, "{path} fetched {n} times");
            path
        })
        .collect();
    assert!(!posts.is_empty());
    assert_eq!(items.len(), posts.len());
    let s = stats(&redis, &path);
    assert_eq!(s["queues"]["scheduled"], 1, "{s}");
    assert!(
        s["stats"]["revisit/queued"].as_u64().unwrap_or(0) >= 6,
        "{s}"
    );
    let _ = server.stop().await;

    // `flush --schedule` forgets it.
    let out = crawlworker_with_redis(
        &redis.url(),
        &["flush", &path.display().to_string(), "--schedule", "--yes"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let left: Vec<String> = redis
        .keys()
        .into_iter()
        .filter(|k| k.starts_with("news:schedule"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
