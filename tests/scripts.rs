//! How a worker runs its Lua scripts on Redis: as Redis Functions (one
//! library, `FCALL`), which a `FUNCTION FLUSH` mid-crawl does not break;
//! with `EVALSHA` on a Redis without Functions; and with the commits of
//! several pages sharing one script call while the leases held ahead keep
//! the download slots busy. Each crawl ends with exactly the expected
//! items. `INFO commandstats` tells which calls Redis ran.

use std::time::Duration;

use redis::Commands;

use crawlworker_testkit::{eventually, DemoCrawl, RedisServer, Worker};

use crate::expect::{assert_exact, expected, scraped};

/// How long a condition may take before a test gives up on it.
const PATIENCE: Duration = Duration::from_secs(20);

/// The scripts run as Redis Functions (one library loaded once, `FCALL`),
/// not `EVALSHA`. A `FUNCTION FLUSH` mid-crawl (as a failover to a node
/// that never had the library looks) costs nothing: the worker loads the
/// library again and the crawl ends with every item once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_run_as_functions_and_survive_a_function_flush() {
    let crawl = DemoCrawl::start(Duration::from_millis(5)).await;
    let mut conn = crawl.redis.conn();
    let worker = Worker::spawn(&crawl.spider, &crawl.redis.url(), &["--until-drained"], &[]);
    eventually("the crawl has scraped some items", PATIENCE, || {
        let n: u64 = conn.llen("bbs:items").unwrap();
        (n > 20).then_some(())
    });
    let _: () = redis::cmd("FUNCTION")
        .arg("FLUSH")
        .query(&mut conn)
        .unwrap();
    let (status, log) = worker.wait(Duration::from_secs(120));
    assert!(status.success(), "{log}");
    assert_exact(&scraped(&crawl.redis), &expected(&crawl.server.base_url()));
    assert!(crawl.redis.command_calls("fcall") > 0);
    assert_eq!(crawl.redis.command_calls("evalsha"), 0);
    assert!(crawl.redis.command_calls("function|load") >= 2);
    let libraries: Vec<redis::Value> = redis::cmd("FUNCTION").arg("LIST").query(&mut conn).unwrap();
    assert_eq!(libraries.len(), 1, "{libraries:?}");
    crawl.stop().await;
}

/// Workers starting together on a new server find the library missing
/// together. One compiles it; the others' loads find it there (Redis
/// answers that it exists, before compiling anything) instead of
/// compiling it again, as a `REPLACE` would, some milliseconds of Redis
/// CPU per worker. Every load but one is such an answer, and the crawl
/// ends with every item once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_starting_together_compile_the_library_once() {
    let crawl = DemoCrawl::start(Duration::from_millis(5)).await;
    let workers: Vec<Worker> = (0..4)
        .map(|_| Worker::spawn(&crawl.spider, &crawl.redis.url(), &["--until-drained"], &[]))
        .collect();
    for worker in workers {
        let (status, log) = worker.wait(Duration::from_secs(120));
        assert!(status.success(), "{log}");
    }
    assert_exact(&scraped(&crawl.redis), &expected(&crawl.server.base_url()));
    let loads = crawl.redis.command_calls("function|load");
    let existed = crawl.redis.command_stat("function|load", "failed_calls");
    assert!(loads >= 1, "the library was never loaded");
    assert_eq!(
        loads - existed,
        1,
        "{loads} loads, {existed} of them refused: the library was compiled more than once"
    );
    crawl.stop().await;
}

/// A worker holds leases ahead of its download slots, so a finished page
/// whose slot another request takes at once may wait for other pages to
/// share its commit's script call (`commit_wait`), and a page whose slot
/// would idle (the tail of the crawl, the last page) is committed at once.
/// With a `commit_wait` of ten minutes the crawl still ends within two,
/// its commits carry several pages each, and every item is there once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_wait_for_others_only_while_leases_ahead_keep_the_slots_busy() {
    let crawl = DemoCrawl::start(Duration::from_millis(5)).await;
    let worker = Worker::spawn(
        &crawl.spider,
        &crawl.redis.url(),
        &["--until-drained"],
        &[
            ("CRAWLWORKER_COMMIT_WAIT", "10m"),
            ("CRAWLWORKER_CONCURRENT_REQUESTS", "2"),
        ],
    );
    let (status, log) = worker.wait(Duration::from_secs(120));
    assert!(status.success(), "{log}");
    assert_exact(&scraped(&crawl.redis), &expected(&crawl.server.base_url()));
    let mut conn = crawl.redis.conn();
    let pages: u64 = conn.hget("bbs:stats", "response_received_count").unwrap();
    let calls = crawl.redis.command_calls("fcall");
    assert!(
        calls < pages,
        "{calls} script calls for {pages} pages: commits did not share calls"
    );
    crawl.stop().await;
}

/// A Redis without Functions (before 7.0, or `FCALL` renamed away, as
/// here) gets the same scripts with `EVALSHA`, and the crawl is the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_without_functions_runs_the_scripts_with_evalsha() {
    let redis = RedisServer::start_with(&["--rename-command", "FCALL", ""]);
    let crawl = DemoCrawl::start_on(redis, Duration::from_millis(0)).await;
    let worker = Worker::spawn(&crawl.spider, &crawl.redis.url(), &["--until-drained"], &[]);
    let (status, log) = worker.wait(Duration::from_secs(120));
    assert!(status.success(), "{log}");
    assert_exact(&scraped(&crawl.redis), &expected(&crawl.server.base_url()));
    let mut conn = crawl.redis.conn();
    assert!(crawl.redis.command_calls("evalsha") > 0);
    let counted: u64 = conn.hget("bbs:stats", "item_scraped_count").unwrap();
    assert_eq!(counted, scraped(&crawl.redis).len() as u64);
    crawl.stop().await;
}
