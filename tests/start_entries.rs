//! What becomes of a start entry the spider cannot crawl: `push-urls`
//! refuses it, naming it (cut short when it is huge); pushed by another
//! producer, the worker sets it aside in the dead-letter key with the
//! reason and fetches nothing for it. A worker that finds nothing at all
//! to crawl names the empty start key. Entries that are not even text:
//! `unreadable_entries`.

use std::time::Duration;

use redis::Commands;

use crawlworker::worker::StopRules;
use crawlworker_demo::Site;
use crawlworker_testkit::{
    crawlworker_with_redis, spider_for, stderr, temp_dir, FixtureServer, RedisServer, Worker,
};

use crate::in_process::InProcess;

/// How long a condition may take before a test gives up on it.
const PATIENCE: Duration = Duration::from_secs(20);

/// A task lacking a field `start.task_fields` declares is refused by
/// `push-urls` with its line; from another producer it is set aside with
/// the reason, and nothing is crawled for it. (Such a task was once pushed,
/// and the crawl then ignored its pagination and dropped items, silently.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_lacking_a_declared_field_is_refused_and_set_aside() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("start-entries");
    let spider = spider_for("bbs", &server.base_url(), dir.path());
    let spider = spider.to_str().unwrap();
    let out = crawlworker_with_redis(
        &redis.url(),
        &["push-urls", spider, r#"{"forum_id": "00001"}"#],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("argument 1: not pushed: the task lacks `max_page`, which start.task_fields says every task has"),
        "{}",
        stderr(&out)
    );
    let mut conn = redis.conn();
    assert_eq!(conn.llen::<_, u64>("bbs:start_urls").unwrap(), 0);
    // Another producer pushes it anyway.
    let _: () = conn
        .rpush("bbs:start_urls", r#"{"forum_id": "00001"}"#)
        .unwrap();
    let rules = StopRules {
        until_drained: true,
        ..StopRules::default()
    };
    InProcess::start(std::path::Path::new(spider), &redis.url(), &[], rules)
        .await
        .wait(PATIENCE)
        .await;
    assert_eq!(server.total_hits(), 0, "nothing is crawled for it");
    let dead: Vec<String> = conn.lrange("bbs:dead", 0, -1).unwrap();
    assert_eq!(dead.len(), 1);
    assert!(dead[0].contains("the task lacks `max_page`"), "{dead:?}");
    server.stop().await.unwrap();
}

/// A start URL for a host outside `allowed_domains` is not fetched: it is
/// refused by `push-urls`, and set aside (counted as `offsite/filtered`)
/// when another producer pushes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_domains_apply_to_start_urls() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("start-entries");
    let spider = spider_for("news", &server.base_url(), dir.path());
    let spider = spider.to_str().unwrap();
    // The same server under another name: not in allowed_domains.
    let offsite = format!("http://localhost:{}/news/", server.addr().port());
    let out = crawlworker_with_redis(&redis.url(), &["push-urls", spider, &offsite]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("localhost is not in allowed_domains (127.0.0.1)"),
        "{}",
        stderr(&out)
    );
    let mut conn = redis.conn();
    let _: () = conn.sadd("news:start_urls", &offsite).unwrap();
    let rules = StopRules {
        until_drained: true,
        ..StopRules::default()
    };
    InProcess::start(std::path::Path::new(spider), &redis.url(), &[], rules)
        .await
        .wait(PATIENCE)
        .await;
    assert_eq!(server.total_hits(), 0, "the other host was not fetched");
    let stats: std::collections::HashMap<String, String> = conn.hgetall("news:stats").unwrap();
    assert_eq!(
        stats.get("offsite/filtered").map(String::as_str),
        Some("1"),
        "{stats:?}"
    );
    assert_eq!(
        stats.get("deadletter/count").map(String::as_str),
        Some("1"),
        "{stats:?}"
    );
    server.stop().await.unwrap();
}

/// A 5 MB bad start entry costs a capped log line, a capped `push-urls`
/// message and a capped dead letter, not its size again; and a worker that
/// finds nothing at all to crawl names the empty start key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_bad_entry_is_shown_cut_and_an_empty_start_key_is_named() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("start-entries");
    let spider = spider_for("news", &server.base_url(), dir.path());
    // An absolute URL whose 5 MB host is not in allowed_domains.
    let huge = format!("http://{}.example/", "x".repeat(5 << 20));
    let file = dir.path().join("entries.txt");
    std::fs::write(&file, format!("{huge}\n")).unwrap();
    let out = crawlworker_with_redis(
        &redis.url(),
        &[
            "push-urls",
            spider.to_str().unwrap(),
            "--file",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out).len());
    assert!(
        stderr(&out).len() < 4096,
        "push-urls wrote {} bytes",
        stderr(&out).len()
    );
    assert!(stderr(&out).contains("bytes in all"), "{}", stderr(&out));

    // A producer pushes it anyway: the worker sets it aside.
    redis
        .conn()
        .sadd::<_, _, ()>("news:start_urls", &huge)
        .unwrap();
    let worker = Worker::spawn(&spider, &redis.url(), &["--until-drained"], &[]);
    let (status, log) = worker.wait(Duration::from_secs(60));
    assert!(status.success(), "{}", &log[..log.len().min(4096)]);
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 4096, "a log line of {longest} bytes");
    let dead: Vec<String> = redis.conn().lrange("news:dead", 0, -1).unwrap();
    assert_eq!(dead.len(), 1);
    let record: serde_json::Value = serde_json::from_str(&dead[0]).unwrap();
    assert_eq!(record["bytes"], huge.len());
    assert!(
        dead[0].len() < 4096,
        "a dead letter of {} bytes",
        dead[0].len()
    );
    assert!(
        !log.contains("nothing to crawl"),
        "an entry was there, and was set aside: {}",
        &log[..log.len().min(4096)]
    );

    // A crawl nobody pushed anything to says which key it read.
    let empty = RedisServer::start();
    let bbs = spider_for("bbs", &server.base_url(), dir.path());
    let worker = Worker::spawn(&bbs, &empty.url(), &["--until-drained"], &[]);
    let (status, log) = worker.wait(Duration::from_secs(60));
    assert!(status.success(), "{log}");
    assert!(
        log.contains("nothing to crawl: the start key bbs:start_urls (list) is empty"),
        "{log}"
    );
    server.stop().await.unwrap();
}
