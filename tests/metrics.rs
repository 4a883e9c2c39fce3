//! Prometheus metrics of a running worker: scraped during and
//! after a crawl, its counters agree with the stats hash and the items
//! list, and the cluster gauges with the queues.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use redis::Commands;

use crawlworker_testkit::redis::free_port;
use crawlworker_testkit::{eventually, eventually_async, stderr, DemoCrawl, Worker};

/// Samples of one scrape: series (name and labels, as written) → value.
fn parse(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_string(), value.parse().ok()?))
        })
        .collect()
}

async fn scrape(addr: &str) -> Option<String> {
    let response = reqwest::get(format!("http://{addr}/metrics")).await.ok()?;
    response.text().await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_agree_with_the_stats_hash_and_the_items() {
    let crawl = DemoCrawl::start(Duration::from_millis(10)).await;
    let (redis, spider) = (&crawl.redis, &crawl.spider);
    let addr = format!("127.0.0.1:{}", free_port());
    let worker = Worker::spawn(
        spider,
        &redis.url(),
        &["--metrics-addr", &addr, "--concurrency", "4"],
        &[("CRAWLWORKER_IDLE_RECHECK", "100ms")],
    );
    let patience = Duration::from_secs(60);

    // During the crawl.
    let during = eventually_async("metrics during the crawl", patience, || async {
        let text = scrape(&addr).await?;
        let samples = parse(&text);
        let fetched = samples
            .get("crawlworker_responses_total{spider=\"bbs\",status=\"200\"}")
            .copied()
            .unwrap_or(0.0);
        (fetched > 0.0).then_some(text)
    })
    .await;
    assert!(
        during.contains("crawlworker_requests_in_flight{spider=\"bbs\"}"),
        "{during}"
    );
    assert!(
        during.contains("crawlworker_download_duration_seconds_bucket"),
        "{during}"
    );
    assert!(
        during.contains("crawlworker_redis_duration_seconds_bucket"),
        "{during}"
    );

    // After it: the counters agree with what Redis says.
    let mut conn = redis.conn();
    let after = eventually_async(
        "the crawl drains and the metrics catch up",
        patience,
        || {
            let addr = addr.clone();
            // Items first: once all are there, every commit that pushed
            // them (and counted them, in the same step) is in the stats.
            let items: u64 = conn.llen("bbs:items").unwrap();
            let stats: HashMap<String, String> = conn.hgetall("bbs:stats").unwrap();
            async move {
                let text = scrape(&addr).await?;
                let samples = parse(&text);
                let queued =
                    samples.get("crawlworker_queue_entries{spider=\"bbs\",queue=\"queued\"}");
                let inflight =
                    samples.get("crawlworker_queue_entries{spider=\"bbs\",queue=\"inflight\"}");
                let scraped = samples.get("crawlworker_items_scraped_total{spider=\"bbs\"}");
                (items == 243
                    && scraped == Some(&243.0)
                    && queued == Some(&0.0)
                    && inflight == Some(&0.0))
                .then_some((text, stats))
            }
        },
    )
    .await;
    let (text, stats) = after;
    let samples = parse(&text);
    let stat = |name: &str| {
        stats
            .get(name)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let metric = |series: &str| samples.get(series).copied().unwrap_or(0.0);
    for (series, field) in [
        (
            "crawlworker_items_scraped_total{spider=\"bbs\"}",
            "item_scraped_count",
        ),
        (
            "crawlworker_responses_total{spider=\"bbs\",status=\"200\"}",
            "downloader/response_status_count/200",
        ),
        (
            "crawlworker_requests_total{spider=\"bbs\"}",
            "downloader/request_count",
        ),
        (
            "crawlworker_response_bytes_total{spider=\"bbs\"}",
            "downloader/response_bytes",
        ),
        (
            "crawlworker_requests_enqueued_total{spider=\"bbs\"}",
            "scheduler/enqueued/redis",
        ),
        (
            "crawlworker_requests_leased_total{spider=\"bbs\"}",
            "scheduler/dequeued/redis",
        ),
        (
            "crawlworker_dupefilter_filtered_total{spider=\"bbs\"}",
            "dupefilter/filtered",
        ),
        (
            "crawlworker_links_filtered_total{spider=\"bbs\",reason=\"pagination\"}",
            "follow/filtered/pagination",
        ),
    ] {
        assert_eq!(metric(series), stat(field), "{series} vs {field}\n{text}");
    }
    assert_eq!(
        metric("crawlworker_workers_live{spider=\"bbs\"}"),
        1.0,
        "{text}"
    );

    // The health check a container runs.
    let out = crawlworker_testkit::crawlworker(&["health", "--metrics-addr", &addr]);
    assert!(out.status.success(), "{}", stderr(&out));
    drop(worker);
    let out = crawlworker_testkit::crawlworker(&["health", "--metrics-addr", &addr]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a stopped worker is not healthy"
    );
    assert!(
        stderr(&out).contains("no worker answers at"),
        "{}",
        stderr(&out)
    );
    crawl.stop().await;
}

/// The health check a container runs fails while the worker's Redis is
/// down (after as long as the cluster waits for a heartbeat, here the
/// 3 s lease), saying why, and passes again once Redis is back: a worker
/// that stays up retrying answers its scrapes but does no work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_check_fails_while_redis_is_down_and_passes_once_it_is_back() {
    let mut crawl = DemoCrawl::start(Duration::from_millis(10)).await;
    let addr = format!("127.0.0.1:{}", free_port());
    let worker = Worker::spawn(
        &crawl.spider,
        &crawl.redis.url(),
        &["--metrics-addr", &addr],
        &[("CRAWLWORKER_LEASE_TIMEOUT", "3s")],
    );
    let health = || crawlworker_testkit::crawlworker(&["health", "--metrics-addr", &addr]);
    let patience = Duration::from_secs(30);
    eventually("the worker is healthy", patience, || {
        health().status.success().then_some(())
    });
    // Redis stays down until the check has said so: a fixed outage is a
    // window a loaded machine can miss between two checks.
    crawl.redis.stop();
    let said = eventually("unhealthy while Redis is down", patience, || {
        let out = health();
        (!out.status.success()).then(|| stderr(&out))
    });
    assert!(
        said.contains("spider `bbs` has not reached Redis for"),
        "{said}\nthe worker's log:\n{}",
        worker.log()
    );
    crawl.redis.start_again();
    eventually("healthy again once Redis is back", patience, || {
        health().status.success().then_some(())
    });
    drop(worker);
    crawl.stop().await;
}
