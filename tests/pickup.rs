//! Pickup of start entries pushed by producers that are not crawlworker:
//! a plain `RPUSH` to a list start key and a `SADD`/`ZADD` to a
//! set or zset start key (with keyspace notifications on) wake an idle
//! worker at once, not at its next `idle_recheck`, which these tests set to
//! 30 s so only the watch can explain a fetch. Each entry is fetched once
//! and none is lost, also when a worker blocked on the key is killed or
//! Redis restarts. Timings are the benchmark's (`benches/pickup.rs`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redis::Commands;

use crawlworker_demo::Site;
use crawlworker_testkit::{
    eventually, spider_for, temp_dir, FixtureServer, RedisCluster, RedisServer, TempDir, Worker,
};

/// Far longer than the tests wait: a fetch within [`SOON`] is the watch's.
const RECHECK: &str = "30s";
const SOON: Duration = Duration::from_secs(10);

fn task(forum: u32) -> String {
    format!(r#"{{"forum_id": "{forum:05}", "max_page": 1}}"#)
}

fn list_page(forum: u32) -> String {
    format!("/list/{forum:05}/1")
}

/// The bbs spider pointed at `server`, its start key of type `kind`.
fn spider(server: &FixtureServer, kind: &str) -> (TempDir, PathBuf) {
    let dir = temp_dir("pickup");
    let path = spider_for("bbs", &server.base_url(), dir.path());
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("type = \"list\"", &format!("type = \"{kind}\"")),
    )
    .unwrap();
    (dir, path)
}

fn worker(spider: &Path, redis: &RedisServer) -> Worker {
    Worker::spawn(
        spider,
        &redis.url(),
        &[],
        &[
            ("CRAWLWORKER_IDLE_RECHECK", RECHECK),
            ("CRAWLWORKER_LOG", "info"),
        ],
    )
}

/// Clients blocked in a command (here: workers waiting in BLMOVE).
fn blocked_clients(redis: &RedisServer) -> u64 {
    blocked_on(&mut redis.conn())
}

fn blocked_on(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("clients").query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Waits until `n` clients (idle workers) are blocked on the start key.
fn wait_blocked(redis: &RedisServer, n: u64) {
    eventually("workers blocked on the start key", SOON, || {
        (blocked_clients(redis) >= n).then_some(())
    });
}

fn wait_fetched(server: &FixtureServer, forum: u32, pushed: Instant, workers: &[&Worker]) {
    let path = list_page(forum);
    while server.hits(&path) == 0 {
        assert!(
            pushed.elapsed() < SOON,
            "{path} not fetched within {SOON:?} (idle_recheck is {RECHECK}); logs:\n{}",
            workers
                .iter()
                .map(|w| w.log())
                .collect::<Vec<_>>()
                .join("\n---\n")
        );
        // How often it is polled, not a wait for an effect.
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn claimed(redis: &RedisServer) -> u64 {
    redis
        .conn()
        .hget::<_, _, Option<u64>>("bbs:stats", "start_urls/claimed_count")
        .unwrap()
        .unwrap_or(0)
}

/// What Redis does with `BLMOVE key key LEFT LEFT`, which the list watch
/// relies on: every client blocked on the key is served when one entry
/// arrives, and the list keeps its entries in their order.
#[test]
fn blmove_to_the_same_key_wakes_every_blocked_client_and_leaves_the_list_as_it_was() {
    let redis = RedisServer::start();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let mut conn = redis.conn();
            std::thread::spawn(move || -> Option<String> {
                redis::cmd("BLMOVE")
                    .arg("k")
                    .arg("k")
                    .arg("LEFT")
                    .arg("LEFT")
                    .arg(10)
                    .query(&mut conn)
                    .unwrap()
            })
        })
        .collect();
    wait_blocked(&redis, 3);
    let _: () = redis::cmd("RPUSH")
        .arg("k")
        .arg(&["a", "b", "c"][..])
        .query(&mut redis.conn())
        .unwrap();
    for w in waiters {
        assert_eq!(w.join().unwrap().as_deref(), Some("a"));
    }
    let list: Vec<String> = redis.conn().lrange("k", 0, -1).unwrap();
    assert_eq!(list, ["a", "b", "c"]);
}

/// A plain RPUSH wakes idle workers blocked on the list; a worker killed
/// while blocked loses nothing; each entry is fetched exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_rpush_to_a_list_start_key_wakes_idle_workers_and_is_fetched_once() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let (_dir, spider) = spider(&server, "list");

    // Killed while blocked: the list is untouched.
    let doomed = worker(&spider, &redis);
    wait_blocked(&redis, 1);
    doomed.kill();
    let _: () = redis.conn().rpush("bbs:start_urls", task(1)).unwrap();
    let list: Vec<String> = redis.conn().lrange("bbs:start_urls", 0, -1).unwrap();
    assert_eq!(list, [task(1)]);

    let (a, b) = (worker(&spider, &redis), worker(&spider, &redis));
    let pushed = Instant::now();
    wait_fetched(&server, 1, pushed, &[&a, &b]);
    wait_blocked(&redis, 2);
    for forum in 2..=4 {
        let pushed = Instant::now();
        let _: () = redis.conn().rpush("bbs:start_urls", task(forum)).unwrap();
        wait_fetched(&server, forum, pushed, &[&a, &b]);
        wait_blocked(&redis, 2);
    }
    // LPUSH too, two at once.
    let _: () = redis
        .conn()
        .lpush("bbs:start_urls", vec![task(5), task(6)])
        .unwrap();
    let pushed = Instant::now();
    wait_fetched(&server, 5, pushed, &[&a, &b]);
    wait_fetched(&server, 6, pushed, &[&a, &b]);
    eventually("every entry claimed", SOON, || {
        (claimed(&redis) == 6).then_some(())
    });
    let left: u64 = redis.conn().llen("bbs:start_urls").unwrap();
    assert_eq!(left, 0);
    for forum in 1..=6 {
        assert_eq!(server.hits(&list_page(forum)), 1, "forum {forum}");
    }
    assert!(
        a.log().contains("worker started"),
        "the worker logs at info:\n{}",
        a.log()
    );
    let _ = server.stop().await;
}

/// A worker blocked on its list start key stops at once on SIGTERM, and
/// one whose Redis restarts waits on the key again when it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_worker_stops_promptly_and_rides_out_a_redis_restart() {
    let mut redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let (_dir, spider) = spider(&server, "list");

    let w = worker(&spider, &redis);
    wait_blocked(&redis, 1);
    redis.restart(Duration::from_millis(500));
    wait_blocked(&redis, 1);
    let pushed = Instant::now();
    let _: () = redis.conn().rpush("bbs:start_urls", task(7)).unwrap();
    wait_fetched(&server, 7, pushed, &[&w]);
    wait_blocked(&redis, 1);

    w.terminate();
    let (status, log) = w.wait(Duration::from_secs(10));
    assert!(status.success(), "{log}");
    eventually("the blocked connection closed", SOON, || {
        (blocked_clients(&redis) == 0).then_some(())
    });
    let _ = server.stop().await;
}

/// SADD and ZADD wake an idle worker through keyspace notifications. With
/// them off, the worker says at start that such pushes wait for
/// `idle_recheck` and how to turn them on; it listens anyway, so turning
/// them on takes effect at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sadd_and_zadd_wake_an_idle_worker_through_keyspace_notifications() {
    for (kind, forum) in [("set", 11), ("zset", 12)] {
        let redis = RedisServer::start();
        let server = FixtureServer::start(Site::demo()).await.unwrap();
        let (_dir, spider) = spider(&server, kind);
        let w = worker(&spider, &redis);
        let channel = "__keyspace@0__:bbs:start_urls";
        eventually("the keyspace channel subscribed", SOON, || {
            let subs: (String, u64) = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(channel)
                .query(&mut redis.conn())
                .unwrap();
            (subs.1 == 1).then_some(())
        });
        let log = w.log();
        assert!(
            log.contains("does not publish keyspace notifications")
                && log.contains("within idle_recheck (30")
                && log.contains("CONFIG SET notify-keyspace-events"),
            "{log}"
        );
        let flags = if kind == "set" { "Ks" } else { "Kz" };
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg(flags)
            .query(&mut redis.conn())
            .unwrap();
        // Past the worker's first look at the key: it is idle. That look is
        // the lease script's read of the start key (SRANDMEMBER for a set,
        // ZRANGE for a zset), which INFO commandstats counts.
        let look = if kind == "set" {
            "srandmember"
        } else {
            "zrange"
        };
        eventually("the worker's first look at the start key", SOON, || {
            (redis.command_calls(look) > 0).then_some(())
        });
        let pushed = Instant::now();
        if kind == "set" {
            let _: () = redis.conn().sadd("bbs:start_urls", task(forum)).unwrap();
        } else {
            let _: () = redis.conn().zadd("bbs:start_urls", task(forum), 1).unwrap();
        }
        wait_fetched(&server, forum, pushed, &[&w]);
        eventually("the entry claimed", SOON, || {
            (claimed(&redis) == 1).then_some(())
        });
        assert_eq!(server.hits(&list_page(forum)), 1);
        let _ = server.stop().await;
    }
}

/// On a Redis Cluster the blocking wait goes to the node holding the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_rpush_on_a_redis_cluster_wakes_the_worker_blocked_on_the_keys_node() {
    let cluster = RedisCluster::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let (_dir, spider) = spider(&server, "list");
    let text = std::fs::read_to_string(&spider).unwrap();
    std::fs::write(&spider, format!("{text}\n[keys]\nmode = \"cluster\"\n")).unwrap();
    let key = "{bbs}:start_urls";
    let w = Worker::spawn(
        &spider,
        &cluster.url(),
        &[],
        &[("CRAWLWORKER_IDLE_RECHECK", RECHECK)],
    );
    eventually("the worker blocked on the key's node", SOON, || {
        (blocked_on(&mut cluster.conn_for(key)) == 1).then_some(())
    });
    let pushed = Instant::now();
    let _: () = cluster.conn_for(key).rpush(key, task(8)).unwrap();
    wait_fetched(&server, 8, pushed, &[&w]);
    let _ = server.stop().await;
}
