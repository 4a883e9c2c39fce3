//! Short reproductions of pinned bugs that belong to no behaviour's own
//! module, each named after what it pins (as ripgrep's `regression`
//! module). A bug found in a behaviour that has a module (`robots`,
//! `memory`, `wrong_type_keys`, `unreadable_entries`, …) is pinned there.

use std::time::Duration;

use redis::Commands;

use crawlworker_demo::Site;
use crawlworker_testkit::{
    push_urls, spider_for, temp_dir, DemoCrawl, FixtureServer, RedisServer, Worker,
};

use crate::expect::{assert_exact, expected, scraped};

/// A stats counter another tool left holding text counts from 0, and the
/// commit loses nothing: stats are added up in the commit script and
/// written in one HSET (a HINCRBY on such a field once failed at the end
/// of a commit whose other writes were done).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stat_holding_text_counts_from_zero_and_loses_nothing() {
    let crawl = DemoCrawl::start(Duration::from_millis(0)).await;
    let mut conn = crawl.redis.conn();
    let _: () = conn
        .hset("bbs:stats", "item_scraped_count", "not a number")
        .unwrap();
    let worker = Worker::spawn(&crawl.spider, &crawl.redis.url(), &["--until-drained"], &[]);
    let (status, log) = worker.wait(Duration::from_secs(120));
    assert!(status.success(), "{log}");
    let items = scraped(&crawl.redis);
    assert_exact(&items, &expected(&crawl.server.base_url()));
    let counted: u64 = conn.hget("bbs:stats", "item_scraped_count").unwrap();
    assert_eq!(counted, items.len() as u64);
    crawl.stop().await;
}

/// A command the Redis user may not run (an ACL) stops the worker, saying
/// which permission is missing, without its password; it once failed
/// inside a script and was retried every 5 s for ever, as if Redis were
/// down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_the_redis_user_may_not_run_is_fatal() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("regression");
    let spider = spider_for("bbs", &server.base_url(), dir.path());
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER", "crawler", "on", ">secret", "~*", "&*", "+@all", "-publish",
        ])
        .query(&mut redis.conn())
        .unwrap();
    push_urls(&redis.url(), &spider, &crawlworker_demo::demo_tasks()[..1]);
    let url = redis.url().replace("redis://", "redis://crawler:secret@");
    let worker = Worker::spawn(&spider, &url, &["--until-drained"], &[]);
    let (status, log) = worker.wait(Duration::from_secs(30));
    assert!(!status.success(), "{log}");
    assert!(log.contains("can't run this command"), "{log}");
    assert!(
        log.contains("the Redis user lacks a permission crawlworker needs"),
        "{log}"
    );
    assert!(!log.contains("secret"), "the password leaked: {log}");
    server.stop().await.unwrap();
}
