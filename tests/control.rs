//! Crawl control: `pause` and `resume` a running cluster, and the
//! cluster-wide quotas `max_pages` and `max_pages_per_host`.

use std::time::{Duration, Instant};

use serde_json::Value;

use crawlworker_testkit::{crawlworker_with_redis, eventually, stderr, stdout, DemoCrawl, Worker};

use crate::expect::{assert_exact, expected, scraped, stats_json};
use crate::heartbeats;

fn stats(crawl: &DemoCrawl) -> Value {
    stats_json(&crawl.redis.url(), crawl.spider_arg())
}

fn run(crawl: &DemoCrawl, command: &str) -> String {
    let out = crawlworker_with_redis(&crawl.redis.url(), &[command, crawl.spider_arg()]);
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

/// Pages the server answered (robots.txt aside).
fn pages(crawl: &DemoCrawl) -> u64 {
    crawl
        .server
        .hit_counts()
        .iter()
        .filter(|(path, _)| !path.starts_with("/robots.txt"))
        .map(|(_, n)| n)
        .sum()
}

/// Rewrites the crawl's spider: `settings` at the top of its
/// `[settings]`, and `shards` in a `[keys]` table when over 1.
fn set_spider(crawl: &DemoCrawl, settings: &str, shards: usize) {
    let mut text = std::fs::read_to_string(&crawl.spider)
        .unwrap()
        .replace("[settings]\n", &format!("[settings]\n{settings}\n"));
    if shards > 1 {
        text = text.replacen(
            "[start]\n",
            &format!("[keys]\nshards = {shards}\n\n[start]\n"),
            1,
        );
    }
    std::fs::write(&crawl.spider, text).unwrap();
}

/// Waits for `workers` to exit, each successfully.
fn all_succeed(workers: Vec<Worker>) {
    for w in workers {
        let (status, log) = w.wait(Duration::from_secs(60));
        assert!(status.success(), "{log}");
    }
}

/// Three `--until-drained` workers on the crawl, run to their end.
fn three_workers_until_drained(crawl: &DemoCrawl) {
    all_succeed(
        (0..3)
            .map(|_| Worker::spawn(&crawl.spider, &crawl.redis.url(), &["--until-drained"], &[]))
            .collect(),
    );
}

/// A paused cluster leases nothing (its pages in flight finish), says so in
/// `stats`, and a resumed one finishes the crawl with exactly the expected
/// items.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_cluster_stops_leasing_and_resumes_where_it_was() {
    let crawl = DemoCrawl::start(Duration::from_millis(20)).await;
    let workers: Vec<Worker> = (0..3)
        .map(|_| Worker::spawn(&crawl.spider, &crawl.redis.url(), &["--until-drained"], &[]))
        .collect();
    eventually("some items", Duration::from_secs(30), || {
        (scraped(&crawl.redis).len() >= 20).then_some(())
    });
    assert!(run(&crawl, "pause").contains("paused bbs"));
    eventually("pages in flight finish", Duration::from_secs(30), || {
        (stats(&crawl)["queues"]["inflight"] == 0).then_some(())
    });
    let s = stats(&crawl);
    assert_eq!(s["queues"]["paused"], true, "{s}");
    let (fetched, items) = (pages(&crawl), scraped(&crawl.redis).len());
    assert!(items < 243, "the crawl finished before the pause");
    // Every worker has run an idle_recheck (1 s: the longest an idle worker
    // waits before it looks for work again) past this moment, so each has
    // looked for work while paused.
    let mut conn = crawl.redis.conn();
    heartbeats::wait_all_beaten_after(&mut conn, "bbs", 3, heartbeats::now() + 1.0);
    assert_eq!(pages(&crawl), fetched, "pages were fetched while paused");
    assert_eq!(scraped(&crawl.redis).len(), items);
    assert!(run(&crawl, "pause").contains("already paused"));

    assert!(run(&crawl, "resume").contains("resumed bbs"));
    for w in workers {
        let (status, log) = w.wait(Duration::from_secs(60));
        assert!(status.success(), "{log}");
    }
    assert_exact(&scraped(&crawl.redis), &expected(&crawl.server.base_url()));
    assert_eq!(stats(&crawl)["queues"]["paused"], false);
    crawl.stop().await;
}

/// A pause stops the traffic, not only the leasing. With a download delay
/// of 1 s, three workers hold requests leased ahead, each waiting for its
/// host's politeness slot; after `pause`, none of them reaches the server
/// (they go back to the queue at once), each worker says it paused, and
/// after `resume` the crawl goes on and each worker says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_hands_back_the_requests_not_yet_downloading() {
    let crawl = DemoCrawl::start(Duration::ZERO).await;
    let text = std::fs::read_to_string(&crawl.spider)
        .unwrap()
        .replace("download_delay = 0\n", "download_delay = 1\n");
    std::fs::write(&crawl.spider, text).unwrap();
    let env = [("CRAWLWORKER_LOG", "info")];
    let workers: Vec<Worker> = (0..3)
        .map(|_| Worker::spawn(&crawl.spider, &crawl.redis.url(), &[], &env))
        .collect();
    eventually("requests leased ahead", Duration::from_secs(30), || {
        let inflight = stats(&crawl)["queues"]["inflight"].as_u64()?;
        (pages(&crawl) >= 2 && inflight >= 3).then_some(())
    });
    assert!(run(&crawl, "pause").contains("paused bbs"));
    let paused = Instant::now();
    // Back in the queue, not downloaded: the cluster holds no lease, so
    // nothing more can reach the server until the resume.
    eventually("no request leased", Duration::from_secs(10), || {
        (stats(&crawl)["queues"]["inflight"] == 0).then_some(())
    });
    let late = crawl
        .server
        .arrivals("")
        .into_iter()
        .filter(|t| *t > paused)
        .count();
    assert_eq!(late, 0, "requests reached the server after the pause");
    let s = stats(&crawl);
    assert!(s["queues"]["queued"].as_u64().unwrap_or(0) > 0, "{s}");
    for w in &workers {
        eventually("the worker says it paused", Duration::from_secs(10), || {
            w.log().contains("paused (crawlworker pause)").then_some(())
        });
    }

    let fetched = pages(&crawl);
    assert!(run(&crawl, "resume").contains("resumed bbs"));
    for w in &workers {
        eventually(
            "the worker says it resumed",
            Duration::from_secs(10),
            || {
                w.log()
                    .contains("resumed (crawlworker resume)")
                    .then_some(())
            },
        );
    }
    eventually("the crawl goes on", Duration::from_secs(30), || {
        (pages(&crawl) > fetched).then_some(())
    });
    for w in workers {
        w.terminate();
        let (status, log) = w.wait(Duration::from_secs(60));
        assert!(status.success(), "{log}");
    }
    crawl.stop().await;
}

/// `max_pages` holds for the whole cluster: three workers fetch exactly
/// that many pages between them, then stop (`--until-drained`) with
/// Scrapy's `closespider_pagecount`; the rest stays queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_pages_holds_across_three_workers() {
    let crawl = DemoCrawl::start(Duration::from_millis(5)).await;
    set_spider(&crawl, "max_pages = 25", 1);
    three_workers_until_drained(&crawl);
    assert_eq!(pages(&crawl), 25);
    let s = stats(&crawl);
    assert_eq!(s["stats"]["response_received_count"], 25, "{s}");
    assert_eq!(s["stats"]["finish_reason"], "closespider_pagecount", "{s}");
    assert_eq!(s["stats"]["quota/max_pages_reached"], 1, "{s}");
    assert!(s["queues"]["queued"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(s["queues"]["page_limit_reached"], true, "{s}");
    // The crawl's identity, in `stats`: started, pages, how it ended.
    let text = run(&crawl, "stats");
    assert!(text.contains("\ncrawl\n  started        20"), "{text}");
    assert!(text.contains("  pages          25  items "), "{text}");
    assert!(
        text.contains("  max_pages      reached; last worker stopped 20"),
        "{text}"
    );
    assert!(text.contains("max_pages (25) reached"), "{text}");
    crawl.stop().await;
}

/// `max_pages` holds for a spider over three shards too: the demo forum's
/// one host puts the whole crawl on one shard, whose cap (a third of the
/// limit to begin with) grows by what the other shards cannot use, so
/// three workers fetch exactly the limit between them, then stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_pages_holds_across_three_workers_over_three_shards() {
    let crawl = DemoCrawl::start(Duration::from_millis(5)).await;
    set_spider(&crawl, "max_pages = 25", 3);
    three_workers_until_drained(&crawl);
    assert_eq!(pages(&crawl), 25);
    let s = stats(&crawl);
    assert_eq!(s["stats"]["response_received_count"], 25, "{s}");
    assert_eq!(s["stats"]["finish_reason"], "closespider_pagecount", "{s}");
    assert!(s["queues"]["queued"].as_u64().unwrap() > 0, "{s}");
    assert_eq!(s["queues"]["page_limit_reached"], true, "{s}");
    // The caps add up to the limit, every move finished.
    let mut conn = crawl.redis.conn();
    let mut caps = 0;
    for shard in 0..3 {
        let name = crawlworker::frontier::shards::shard_name("bbs", shard, 3);
        let control: std::collections::HashMap<String, String> =
            redis::Commands::hgetall(&mut conn, format!("{name}:control")).unwrap();
        caps += control
            .get("quota_cap")
            .map_or(0, |c| c.parse::<i64>().unwrap());
        assert!(
            !control.keys().any(|k| k.starts_with("quota_out:")),
            "{control:?}"
        );
    }
    assert_eq!(caps, 25);
    crawl.stop().await;
}

/// `max_pages` over three shards with a worker SIGKILLed mid-crawl: the
/// pages it held come back after their lease, and the crawl still counts
/// exactly the limit of responses, never more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_pages_over_shards_holds_with_a_worker_killed() {
    let crawl = DemoCrawl::start(Duration::from_millis(150)).await;
    set_spider(&crawl, "max_pages = 30", 3);
    let fast = [
        ("CRAWLWORKER_LEASE_TIMEOUT", "1s"),
        ("CRAWLWORKER_IDLE_RECHECK", "100ms"),
    ];
    let spawn = || {
        Worker::spawn(
            &crawl.spider,
            &crawl.redis.url(),
            &["--until-drained"],
            &fast,
        )
    };
    let mut workers: Vec<Worker> = (0..3).map(|_| spawn()).collect();
    eventually("a few pages are fetched", Duration::from_secs(30), || {
        (pages(&crawl) >= 8).then_some(())
    });
    workers.remove(0).kill();
    let at_kill = pages(&crawl);
    workers.push(spawn());
    all_succeed(workers);
    assert!(at_kill < 30, "killed mid-crawl ({at_kill} pages fetched)");
    let s = stats(&crawl);
    assert_eq!(s["stats"]["response_received_count"], 30, "{s}");
    assert_eq!(s["stats"]["finish_reason"], "closespider_pagecount", "{s}");
    assert_eq!(s["queues"]["inflight"], 0, "{s}");
    crawl.stop().await;
}

/// `max_pages_per_host`: the demo forum's one host gets that many pages;
/// the requests beyond are dropped and counted, so the crawl drains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_pages_per_host_drops_and_counts_the_rest() {
    let crawl = DemoCrawl::start(Duration::ZERO).await;
    let text = std::fs::read_to_string(&crawl.spider)
        .unwrap()
        .replace("[settings]\n", "[settings]\nmax_pages_per_host = 12\n");
    std::fs::write(&crawl.spider, text).unwrap();
    let workers: Vec<Worker> = (0..2)
        .map(|_| Worker::spawn(&crawl.spider, &crawl.redis.url(), &["--until-drained"], &[]))
        .collect();
    for w in workers {
        let (status, log) = w.wait(Duration::from_secs(60));
        assert!(status.success(), "{log}");
    }
    assert_eq!(pages(&crawl), 12);
    let s = stats(&crawl);
    assert!(
        s["stats"]["quota/host_dropped"].as_u64().unwrap_or(0) > 0,
        "{s}"
    );
    assert_eq!(s["queues"]["queued"], 0, "{s}");
    crawl.stop().await;
}
