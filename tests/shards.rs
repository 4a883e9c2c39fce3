//! A spider over several shards (`[keys] shards`, see `docs/scaling.md`)
//! crawled by `crawlworker run` processes on a real Redis: the item set is
//! exactly the expected one with workers SIGKILLed mid-crawl (and, on a
//! real 3-master Redis Cluster, a shard's master SIGKILLed), and a spider
//! whose shard count changed is refused.

use std::time::{Duration, Instant};

use redis::Commands;

use crawlworker::frontier::shards::shard_name;
use crawlworker_demo::Site;
use crawlworker_testkit::{
    crawlworker_with_redis, eventually, spider_for, stderr, temp_dir, FixtureServer, RedisCluster,
    RedisServer, Worker,
};

use crate::expect::{assert_exact, canonical, expected, scraped_from};

/// Settings that make recovery fast enough for a test.
const FAST: &[(&str, &str)] = &[
    ("CRAWLWORKER_LEASE_TIMEOUT", "1s"),
    ("CRAWLWORKER_IDLE_RECHECK", "100ms"),
];

/// The bbs spider over `shards` shards, for the demo forum at `base`.
fn sharded_spider(base: &str, dir: &std::path::Path, shards: usize) -> std::path::PathBuf {
    let path = spider_for("bbs", base, dir);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
    let text = text.replacen(
        "[start]\n",
        &format!("[keys]\nshards = {shards}\n\n[start]\n"),
        1,
    );
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    path
}

/// Every shard's items, canonical and sorted.
fn items_of_shards(redis: &RedisServer, shards: usize) -> Vec<String> {
    let mut conn = redis.conn();
    let mut items: Vec<String> = (0..shards)
        .flat_map(|i| {
            let key = format!("{}:items", shard_name("bbs", i, shards));
            scraped_from(&mut conn, &key)
        })
        .collect();
    items.sort();
    items
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_spider_crawls_the_demo_forum_exactly_with_workers_killed() {
    let redis = RedisServer::start();
    let server = FixtureServer::start_with_latency(Site::demo(), Duration::from_millis(120))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = temp_dir("shards");
    let spider = sharded_spider(&server.base_url(), dir.path(), 3);
    let tasks = crawlworker_demo::demo_tasks();
    let mut args = vec!["push-urls", spider.to_str().unwrap_or_default()];
    args.extend(tasks.iter().map(String::as_str));
    let out = crawlworker_with_redis(&redis.url(), &args);
    assert!(out.status.success(), "push-urls failed: {}", stderr(&out));

    let run = ["--until-drained", "--concurrency", "3"];
    let mut workers: Vec<Worker> = (0..3)
        .map(|_| Worker::spawn(&spider, &redis.url(), &run, FAST))
        .collect();
    let (mut kills, started) = (0, Instant::now());
    while kills < 4 && started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let items: usize = items_of_shards(&redis, 3).len();
        if items >= 200 {
            break;
        }
        workers.remove(kills % workers.len()).kill();
        kills += 1;
        workers.push(Worker::spawn(&spider, &redis.url(), &run, FAST));
    }
    assert!(kills >= 2, "the crawl ended before enough kills ({kills})");
    for w in workers {
        let (status, log) = w.wait(Duration::from_secs(90));
        assert!(status.success(), "worker failed:\n{log}");
    }
    assert_exact(&items_of_shards(&redis, 3), &expected(&server.base_url()));
    let recorded: Option<u64> = redis
        .conn()
        .hget("bbs:control", "shards")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        recorded,
        Some(3),
        "the first worker records the shard count"
    );

    // The same crawl with another shard count is refused, naming both.
    let other = sharded_spider(&server.base_url(), &dir.path().join("two"), 2);
    let (status, log) =
        Worker::spawn(&other, &redis.url(), &run, FAST).wait(Duration::from_secs(30));
    assert!(!status.success(), "{log}");
    assert!(
        log.contains("`[keys] shards = 3`") && log.contains("now says 2"),
        "{log}"
    );
    // The dashboard shows the crawl summed over its shards.
    let dashboard = crate::expect::Dashboard::spawn(&spider, &redis.url());
    let want = items_of_shards(&redis, 3).len() as u64;
    crawlworker_testkit::eventually_async(
        "the dashboard shows every shard's items",
        Duration::from_secs(20),
        || async {
            let state = dashboard.state().await?;
            (state["spiders"][0]["items"].as_u64() == Some(want)).then_some(())
        },
    )
    .await;
    tools_work_across_the_shards(&redis, &spider);
    server.stop().await.unwrap_or_else(|e| panic!("{e}"));
}

/// The operator's tools on the sharded crawl just done: `items` prints
/// every shard's, `pause` pauses every shard, `import-queue` finds nothing
/// to do, and `flush --all` leaves no key.
fn tools_work_across_the_shards(redis: &RedisServer, spider: &std::path::Path) {
    let spider = spider.to_str().unwrap_or_default();
    let out = crawlworker_with_redis(&redis.url(), &["items", spider]);
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = String::from_utf8_lossy(&out.stdout).lines().count();
    assert_eq!(printed, items_of_shards(redis, 3).len());

    let out = crawlworker_with_redis(&redis.url(), &["pause", spider]);
    assert!(out.status.success(), "{}", stderr(&out));
    for shard in 0..3 {
        let control = format!("{}:control", shard_name("bbs", shard, 3));
        let paused: bool = redis
            .conn()
            .hexists(&control, "paused")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(paused, "{control} says paused");
    }

    // `stats` sums the shards: every item counted (by the commits that
    // pushed them), nothing left queued.
    let stats = crate::expect::stats_json(&redis.url(), spider);
    let counted = &stats["stats"][crawlworker::stats::ITEM_SCRAPED_COUNT.name];
    assert_eq!(counted.as_u64(), Some(printed as u64), "{stats}");
    assert_eq!(
        stats["queues"]["items"].as_u64(),
        Some(printed as u64),
        "{stats}"
    );
    assert_eq!(stats["queues"]["queued"], 0, "{stats}");
    assert_eq!(stats["queues"]["inflight"], 0, "{stats}");
    let out = crawlworker_with_redis(&redis.url(), &["failed", spider]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("nothing failed"), "{}", stderr(&out));
    // The crawl is recorded over its shards: an import has nothing to
    // copy, and no scrapy-redis queue to import.
    let out = crawlworker_with_redis(&redis.url(), &["import-queue", spider]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("nothing to import"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("copied"), "{}", stderr(&out));

    let out = crawlworker_with_redis(&redis.url(), &["flush", spider, "--all", "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let left: Vec<String> = redis.conn().keys("bbs*").unwrap_or_else(|e| panic!("{e}"));
    assert!(left.is_empty(), "flush --all left {left:?}");
}

/// The demo forum served three times, on three ports (three hosts, so
/// three homes among the shards), each crawled for one of the demo's
/// forum tasks, by a spider over three shards on a real 3-master Redis
/// Cluster, one shard per master; a worker is SIGKILLed mid-crawl. The
/// items of all shards are exactly those of the three sites.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_spider_crawls_three_sites_through_a_three_master_cluster_exactly() {
    crawl_three_sites_on_the_cluster(false).await;
}

/// The same crawl, with the master of a shard whose hosts' pages (and
/// the other shards' hand-offs to it) are in flight SIGKILLed mid-crawl
/// as well, and its replica promoted: every item once all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_spider_rides_out_a_killed_master_with_exactly_the_expected_items() {
    crawl_three_sites_on_the_cluster(true).await;
}

/// The three-site crawl of the tests above; with `kill`, a shard's master
/// is SIGKILLed once the crawl is under way.
async fn crawl_three_sites_on_the_cluster(kill: bool) {
    let mut cluster = RedisCluster::start();
    let masters: std::collections::HashSet<u16> = (0..3)
        .map(|s| cluster.master_of(&format!("{{{}}}:requests", shard_name("bbs", s, 3))))
        .collect();
    assert_eq!(masters.len(), 3, "one shard per master");
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(
            FixtureServer::start_with_latency(Site::demo(), Duration::from_millis(60))
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        );
    }
    let dir = temp_dir("shards-cluster");
    let spider = dir.path().join("bbs.toml");
    let text = std::fs::read_to_string(crawlworker_testkit::root().join("spiders/bbs.toml"))
        .unwrap_or_else(|e| panic!("{e}"))
        .replace(
            "http://127.0.0.1:8700/list/{forum_id}/1",
            "http://127.0.0.1:{port}/list/{forum_id}/1",
        )
        .replace(
            r#"task_fields = ["forum_id", "max_page"]"#,
            r#"task_fields = ["forum_id", "max_page", "port"]"#,
        )
        .replacen(
            "[start]\n",
            "[keys]\nmode = \"cluster\"\nshards = 3\n\n[start]\n",
            1,
        )
        // Work a killed master forgot comes back soon.
        .replace("[settings]\n", "[settings]\nlease_timeout = \"3s\"\n");
    std::fs::write(&spider, text).unwrap_or_else(|e| panic!("{e}"));
    let forums = crawlworker_demo::demo_forum_tasks();
    let tasks: Vec<String> = forums
        .iter()
        .zip(&servers)
        .map(|(task, server)| {
            let port = server
                .base_url()
                .rsplit(':')
                .next()
                .unwrap_or_default()
                .to_string();
            serde_json::json!({"forum_id": task.forum_id, "max_page": task.max_page, "port": port})
                .to_string()
        })
        .collect();
    let mut args = vec!["push-urls", spider.to_str().unwrap_or_default()];
    args.extend(tasks.iter().map(String::as_str));
    let out = crawlworker_with_redis(&cluster.url(), &args);
    assert!(out.status.success(), "push-urls failed: {}", stderr(&out));

    let run = ["--until-drained", "--concurrency", "3"];
    let mut workers: Vec<Worker> = (0..3)
        .map(|_| Worker::spawn(&spider, &cluster.url(), &run, FAST))
        .collect();
    tokio::time::sleep(Duration::from_millis(700)).await;
    workers.remove(0).kill();
    workers.push(Worker::spawn(&spider, &cluster.url(), &run, FAST));
    if kill {
        // The hosts' ports decide their shards: the master killed is that
        // of the first shard with pages committed.
        let items = eventually(
            "a shard's crawl is under way",
            Duration::from_secs(60),
            || {
                (0..3).find_map(|s| {
                    let key = format!("{{{}}}:items", shard_name("bbs", s, 3));
                    let n: u64 = cluster.conn_for(&key).llen(&key).ok()?;
                    (n >= 5).then_some(key)
                })
            },
        );
        cluster.kill_master_of(&items);
    }
    for w in workers {
        let (status, log) = w.wait(Duration::from_secs(120));
        assert!(status.success(), "worker failed:\n{log}");
    }
    let mut got: Vec<String> = (0..3)
        .flat_map(|s| {
            let key = format!("{{{}}}:items", shard_name("bbs", s, 3));
            scraped_from(&mut cluster.conn_for(&key), &key)
        })
        .collect();
    got.sort();
    let mut want: Vec<String> = forums
        .iter()
        .zip(&servers)
        .flat_map(|(task, server)| {
            crawlworker_demo::expected::bbs_items(
                &Site::demo(),
                std::slice::from_ref(task),
                &server.base_url(),
            )
        })
        .map(|s| canonical(&serde_json::from_str(&s).unwrap_or_default()))
        .collect();
    want.sort();
    assert_exact(&got, &want);
    for server in servers {
        server.stop().await.unwrap_or_else(|e| panic!("{e}"));
    }
}
