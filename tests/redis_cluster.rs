//! Crawls through a real Redis Cluster (3 masters, 3 replicas on loopback,
//! `crawlworker_testkit::RedisCluster`): the demo forum with exactly the
//! expected items while the master holding the spider's slot is failed
//! over mid-crawl, once as an operator does it (`CLUSTER FAILOVER`) and
//! once as a machine does it (SIGKILL); and a spider whose keys would span
//! slots is refused with what to write.

use std::time::Duration;

use redis::Commands;

use crawlworker::worker::StopRules;
use crawlworker_demo::{demo_tasks, Site};
use crawlworker_testkit::{
    crawlworker_with_redis, eventually, spider_for, stderr, temp_dir, FixtureServer, RedisCluster,
};

use crate::expect::{assert_exact, expected, scraped_from};
use crate::in_process::InProcess;

/// The demo spider in cluster key mode, with a short lease so that work a
/// killed master forgot comes back quickly.
fn cluster_spider(base: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let spider = spider_for("bbs", base, dir);
    let text = std::fs::read_to_string(&spider)
        .unwrap()
        .replace("[settings]\n", "[settings]\nlease_timeout = \"3s\"\n");
    std::fs::write(&spider, format!("{text}\n[keys]\nmode = \"cluster\"\n")).unwrap();
    spider
}

enum Failover {
    Graceful,
    Kill,
}

async fn crawl_through_a_failover(how: Failover) {
    let mut cluster = RedisCluster::start();
    let server = FixtureServer::start_with_latency(Site::demo(), Duration::from_millis(40))
        .await
        .unwrap();
    let dir = temp_dir("redis-cluster-crawl");
    let spider = cluster_spider(&server.base_url(), dir.path());
    let spider_arg = spider.to_str().unwrap();
    let mut args = vec!["push-urls".to_string(), spider_arg.to_string()];
    args.extend(demo_tasks());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = crawlworker_with_redis(&cluster.url(), &args);
    assert!(out.status.success(), "push-urls: {}", stderr(&out));

    let rules = StopRules {
        until_drained: true,
        ..StopRules::default()
    };
    let workers = [
        InProcess::start(&spider, &cluster.url(), &[], rules).await,
        InProcess::start(&spider, &cluster.url(), &[], rules).await,
    ];
    let items = "{bbs}:items";
    eventually("the crawl is under way", Duration::from_secs(30), || {
        let n: u64 = cluster.conn_for(items).llen(items).ok()?;
        (n >= 30).then_some(())
    });
    match how {
        Failover::Graceful => cluster.failover(items),
        Failover::Kill => {
            cluster.kill_master_of(items);
        }
    }
    for w in workers {
        w.wait(Duration::from_secs(120)).await;
    }
    let got = scraped_from(&mut cluster.conn_for(items), items);
    assert_exact(&got, &expected(&server.base_url()));
    if matches!(how, Failover::Graceful) {
        // Nothing was forgotten, so nothing was fetched twice.
        let twice: Vec<_> = server
            .hit_counts()
            .into_iter()
            .filter(|(path, n)| *n > 1 && !path.starts_with("/list/"))
            .collect();
        assert!(twice.is_empty(), "fetched twice: {twice:?}");
    }
    // The tools work through the cluster too.
    let stats = crate::expect::stats_json(&cluster.url(), spider_arg);
    assert_eq!(stats["queues"]["items"], got.len(), "{stats}");
    assert_eq!(stats["queues"]["queued"], 0, "{stats}");
    let _ = server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_rides_out_a_graceful_failover_with_exactly_the_expected_items() {
    crawl_through_a_failover(Failover::Graceful).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_rides_out_a_killed_master_with_exactly_the_expected_items() {
    crawl_through_a_failover(Failover::Kill).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spider_whose_keys_span_slots_is_refused_on_a_cluster() {
    let cluster = RedisCluster::start();
    let dir = temp_dir("redis-cluster-plain");
    let spider = spider_for("bbs", "http://127.0.0.1:9", dir.path());
    let out = crawlworker_with_redis(
        &cluster.url(),
        &[
            "push-urls",
            spider.to_str().unwrap(),
            r#"{"forum_id": "1", "max_page": 1}"#,
        ],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("add `[keys] mode = \"cluster\"`"),
        "{}",
        stderr(&out)
    );
    assert!(cluster.keys().is_empty(), "{:?}", cluster.keys());
}
