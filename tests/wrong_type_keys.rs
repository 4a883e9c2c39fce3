//! Keys another tool made with the wrong type: a worker stops on the
//! first one it meets (the start key at its first lease, the others at the
//! first commit that touches them), naming the key, both types and what to
//! do, having written nothing of that commit; with the key put right, a
//! second run brings exactly the expected items. The stream sink's items
//! key: `sinks`.

use std::time::Duration;

use redis::Commands;

use crawlworker_demo::Site;
use crawlworker_testkit::{
    eventually, spider_for, temp_dir, DemoCrawl, FixtureServer, RedisServer, Worker,
};

use crate::expect::{assert_exact, expected, scraped};

/// How long a condition may take before a test gives up on it.
const PATIENCE: Duration = Duration::from_secs(20);

/// A key another tool made with the wrong type, mid-crawl. The real key
/// is renamed away and a `wrong` one put in its place in one MULTI; the
/// worker must stop on its first commit that touches it, with the key and
/// both types named, having written nothing of that commit; once the real
/// key is back, a second run brings exactly the expected items.
async fn wrong_type_mid_crawl_is_fatal_and_loses_nothing(key: &str, wrong: &str) {
    let crawl = DemoCrawl::start(Duration::from_millis(20)).await;
    let env = [
        ("CRAWLWORKER_CONCURRENT_REQUESTS", "2"),
        ("CRAWLWORKER_LEASE_TIMEOUT", "2s"),
    ];
    let worker = Worker::spawn(
        &crawl.spider,
        &crawl.redis.url(),
        &["--until-drained"],
        &env,
    );
    let mut conn = crawl.redis.conn();
    eventually("the crawl has scraped some items", PATIENCE, || {
        let n: u64 = conn.llen("bbs:items").unwrap();
        (n >= 10).then_some(())
    });
    let aside = format!("{key}.aside");
    // A key the crawl has not made (yet) is only put there.
    let existed: bool = conn.exists(key).unwrap();
    let mut clobber = redis::pipe();
    clobber.atomic();
    if existed {
        clobber.rename(key, &aside).ignore();
    }
    match wrong {
        "hash" => clobber.hset(key, "made", "by another tool").ignore(),
        _ => clobber.rpush(key, "made by another tool").ignore(),
    };
    let _: () = clobber.query(&mut conn).unwrap();
    let (status, log) = worker.wait(Duration::from_secs(60));
    assert!(!status.success(), "the worker went on: {log}");
    assert!(
        log.contains(&format!("key {key} ([keys] "))
            && log.contains(&format!("is a {wrong}, not "))
            && log.contains(&format!("RENAME {key} {key}.bak")),
        "{log}"
    );
    assert!(log.contains("delete or rename it"), "{log}");
    assert!(log.contains("nothing was written"), "{log}");
    // The wrong key is as the other tool left it.
    let kind: String = redis::cmd("TYPE").arg(key).query(&mut conn).unwrap();
    assert_eq!(kind, wrong);
    let mut restore = redis::pipe();
    restore.atomic().del(key).ignore();
    if existed {
        restore.rename(&aside, key).ignore();
    }
    let _: () = restore.query(&mut conn).unwrap();
    let again = Worker::spawn(&crawl.spider, &crawl.redis.url(), &["--until-drained"], &[]);
    let (status, log) = again.wait(Duration::from_secs(120));
    assert!(status.success(), "{log}");
    assert_exact(&scraped(&crawl.redis), &expected(&crawl.server.base_url()));
    crawl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_type_items_key_commits_nothing_and_is_fatal() {
    wrong_type_mid_crawl_is_fatal_and_loses_nothing("bbs:items", "hash").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_type_dupefilter_key_commits_nothing_and_is_fatal() {
    wrong_type_mid_crawl_is_fatal_and_loses_nothing("bbs:dupefilter", "list").await;
}

/// A commit proves most of its keys by the reads it needs anyway (the
/// stats' HMGET, a host's politeness slot) or by its first write (the
/// sequence's INCRBY), not by a TYPE each. Each must still name a wrong
/// key with nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_type_stats_key_proved_by_a_read_commits_nothing_and_is_fatal() {
    wrong_type_mid_crawl_is_fatal_and_loses_nothing("bbs:stats", "list").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_type_pace_key_commits_nothing_and_is_fatal() {
    wrong_type_mid_crawl_is_fatal_and_loses_nothing("bbs:pace", "list").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_type_sequence_key_commits_nothing_and_is_fatal() {
    wrong_type_mid_crawl_is_fatal_and_loses_nothing("bbs:requests:seq", "hash").await;
}

/// The queue is proved by the size a commit reads for its fair share,
/// before its first write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_type_queue_key_proved_by_its_size_commits_nothing_and_is_fatal() {
    wrong_type_mid_crawl_is_fatal_and_loses_nothing("bbs:requests", "hash").await;
}

/// The waiting workers' hash is not proved by a commit (a TYPE every
/// call): a commit that meets it wakes nobody and commits whole, and the
/// worker's next lease, which writes it, stops on it with its name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_type_waiting_key_is_fatal_at_the_next_lease_and_loses_nothing() {
    wrong_type_mid_crawl_is_fatal_and_loses_nothing("bbs:inflight:waiting", "list").await;
}

/// A start key or in-flight set of the wrong type stops the worker at
/// its first lease with the key's name
/// (every lease once failed on it, retried every 5 s for ever), and the
/// key is left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_type_start_or_inflight_key_is_fatal_with_its_name() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("wrong-type");
    let spider = spider_for("bbs", &server.base_url(), dir.path());
    for (key, kind) in [
        ("bbs:start_urls", "start_urls"),
        ("bbs:inflight", "inflight"),
    ] {
        let mut conn = redis.conn();
        let _: () = redis::cmd("FLUSHALL").query(&mut conn).unwrap();
        let _: () = conn.hset(key, "url", "not a list").unwrap();
        let worker = Worker::spawn(&spider, &redis.url(), &["--until-drained"], &[]);
        let (status, log) = worker.wait(Duration::from_secs(30));
        assert!(!status.success(), "{log}");
        // The in-flight set is read first (expired leases go back before
        // anything is leased): its name, not the queue's.
        let want = if kind == "start_urls" { "list" } else { "zset" };
        assert!(
            log.contains(&format!(
                "key {key} ([keys] {kind}) is a hash, not a {want}"
            )),
            "{log}"
        );
        assert!(log.contains(&format!("RENAME {key} {key}.bak")), "{log}");
        let kept: String = conn.hget(key, "url").unwrap();
        assert_eq!(kept, "not a list");
    }
    server.stop().await.unwrap();
}
