//! Pages built to hurt a parser, from the fixture server's
//! `/fault/nested/<n>`: `<div>`s nested 100,000 deep and more, and
//! `/fault/attributes/<n>`: one element of 100,000 attributes. Extraction
//! stops past `extract_max_depth` within a time bound and commits what it
//! read, stops before a tag of too many attributes, and a worker stopped
//! while it extracts such a page without limits still exits within its
//! grace period.

use std::time::Duration;

use redis::Commands;

use crawlworker_demo::Site;
use crawlworker_testkit::redis::free_port;
use crawlworker_testkit::{
    eventually, eventually_async, push_urls, temp_dir, FixtureServer, RedisServer, Worker,
};

/// How long a condition may take before a test gives up on it.
const PATIENCE: Duration = Duration::from_secs(20);

/// A spider that scrapes one item from each nested page, with `settings`.
fn nested_spider(dir: &std::path::Path, settings: &str) -> std::path::PathBuf {
    let path = dir.join("nested.toml");
    let text = format!(
        r#"
name = "nested"
allowed_domains = ["127.0.0.1"]

[settings]
allow_private_networks = true
{settings}

[items.page]
url = {{ page = "url" }}
deep = "p.deep a::attr(href)"
links = {{ css = "div a::attr(href)", all = true }}

[[rules]]
name = "page"
match = '/fault/nested/'

  [[rules.extract]]
  item = "page"
"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// A page of 100,000 (then 200,000) nested `<div>`s is extracted only down
/// to `extract_max_depth`: committed with what was read, counted, and
/// logged once with its URL, within a time bound. (The parser's cost is
/// quadratic in the nesting: such pages once took 26 s and over 100 s, on
/// the async runtime.) The bound is a safety net for a slow shared
/// machine, not a benchmark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_html_is_cut_short_within_a_time_bound() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("hostile-pages");
    let spider = nested_spider(dir.path(), "");
    let mut conn = redis.conn();
    for (i, n) in [100_000, 200_000].into_iter().enumerate() {
        let url = server.url(&format!("/fault/nested/{n}"));
        push_urls(&redis.url(), &spider, std::slice::from_ref(&url));
        let started = std::time::Instant::now();
        let worker = Worker::spawn(&spider, &redis.url(), &["--until-drained"], &[]);
        let (status, log) = worker.wait(Duration::from_secs(300));
        let took = started.elapsed();
        assert!(status.success(), "{log}");
        assert!(
            took < Duration::from_secs(10),
            "{n} nested divs took {took:?} to crawl:\n{log}"
        );
        let warned: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("page extracted only in part"))
            .collect();
        assert_eq!(warned.len(), 1, "{log}");
        assert!(
            warned[0].contains(&url) && warned[0].contains("extract_max_depth (512"),
            "{log}"
        );
        let stats: std::collections::HashMap<String, String> =
            conn.hgetall("nested:stats").unwrap();
        let done = (i + 1).to_string();
        for stat in [
            "extract/cut_short_count",
            "extract/cut_short_reason_count/depth",
            "item_scraped_count",
        ] {
            assert_eq!(stats.get(stat), Some(&done), "{stat}: {stats:?}");
        }
    }
    // Committed: nothing queued, leased, failed or set aside; one item per
    // page, without what lay past the cut.
    for key in ["nested:requests", "nested:inflight"] {
        assert_eq!(conn.zcard::<_, u64>(key).unwrap(), 0, "{key}");
    }
    for key in ["nested:failed", "nested:dead"] {
        assert_eq!(conn.llen::<_, u64>(key).unwrap(), 0, "{key}");
    }
    let items: Vec<String> = conn.lrange("nested:items", 0, -1).unwrap();
    assert_eq!(items.len(), 2, "{items:?}");
    for item in &items {
        let item: serde_json::Value = serde_json::from_str(item).unwrap();
        assert_eq!(item["deep"], serde_json::Value::Null, "{item}");
    }
    server.stop().await.unwrap();
}

/// One element of 100,000 distinct attributes (a tag whose parse costs n²
/// steps: once 10 s for this 1 MB page) stops the parse before its tag:
/// what came before it is extracted and committed, the cut is counted by
/// reason, and `parse` shows it. An element of 500 attributes is read
/// whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_element_with_too_many_attributes_stops_the_parse_before_it() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("hostile-pages");
    let spider = dir.path().join("attributes.toml");
    std::fs::write(
        &spider,
        r#"
name = "attributes"

[settings]
allow_private_networks = true

[items.page]
url = { page = "url" }
before = "p.before::text"
after = "p.after::text"

[[rules]]
name = "page"
match = '/fault/attributes/'
  [[rules.extract]]
  item = "page"
"#,
    )
    .unwrap();
    let (crowded, within) = (
        server.url("/fault/attributes/100000"),
        server.url("/fault/attributes/500"),
    );
    let out = crawlworker_testkit::crawlworker(&["parse", spider.to_str().unwrap(), &crowded]);
    let parsed: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", crawlworker_testkit::stderr(&out)));
    assert_eq!(parsed["cut_short"], "attributes", "{parsed}");
    assert_eq!(parsed["items"][0]["fields"]["before"], "before", "{parsed}");
    assert_eq!(
        parsed["items"][0]["fields"]["after"],
        serde_json::Value::Null
    );

    push_urls(&redis.url(), &spider, &[crowded.clone(), within.clone()]);
    let worker = Worker::spawn(&spider, &redis.url(), &["--until-drained"], &[]);
    let (status, log) = worker.wait(Duration::from_secs(120));
    assert!(status.success(), "{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("page extracted only in part")
                && l.contains(&crowded)
                && l.contains("more than 1024 attributes")),
        "{log}"
    );
    let mut conn = redis.conn();
    let stats: std::collections::HashMap<String, String> =
        conn.hgetall("attributes:stats").unwrap();
    for (stat, n) in [
        ("extract/cut_short_count", "1"),
        ("extract/cut_short_reason_count/attributes", "1"),
        ("item_scraped_count", "2"),
    ] {
        assert_eq!(
            stats.get(stat).map(String::as_str),
            Some(n),
            "{stat}: {stats:?}"
        );
    }
    let items: Vec<String> = conn.lrange("attributes:items", 0, -1).unwrap();
    let items: Vec<serde_json::Value> = items
        .iter()
        .map(|i| serde_json::from_str(i).unwrap())
        .collect();
    let item = |url: &str| {
        items
            .iter()
            .find(|i| i["url"] == url)
            .unwrap_or_else(|| panic!("no item of {url}: {items:?}"))
            .clone()
    };
    assert_eq!(item(&crowded)["before"], "before");
    assert_eq!(item(&crowded)["after"], serde_json::Value::Null);
    assert_eq!(item(&within)["before"], "before");
    assert_eq!(
        item(&within)["after"],
        "after",
        "500 attributes are read whole"
    );
    server.stop().await.unwrap();
}

/// The pages the worker serving metrics at `addr` has downloaded for
/// `spider`, once it has downloaded any.
async fn downloads(addr: &str, spider: &str) -> Option<u64> {
    let text = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let series = format!("crawlworker_download_duration_seconds_count{{spider=\"{spider}\"}} ");
    let n: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix(&series))?
        .parse()
        .ok()?;
    (n > 0).then_some(n)
}

/// SIGTERM while a worker extracts a deeply nested page ends the worker
/// within its grace period: the extraction does not block the runtime, so
/// the grace period's timer fires (a 5 s grace once took 22 s). Here the
/// spider lifts every limit, so the extraction would run for many minutes:
/// the worker still exits within its grace, hands the page back, and
/// another worker (with the default limits) commits it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_huge_page_exits_within_grace() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("hostile-pages");
    let unbounded = "extract_max_depth = 0\nextract_max_nodes = 0\nextract_timeout = 0";
    let spider = nested_spider(dir.path(), unbounded);
    let url = server.url("/fault/nested/200000");
    push_urls(&redis.url(), &spider, std::slice::from_ref(&url));
    let grace = Duration::from_secs(2);
    let env = [
        ("CRAWLWORKER_SHUTDOWN_GRACE", "2s"),
        ("CRAWLWORKER_LEASE_TIMEOUT", "60s"),
        ("CRAWLWORKER_LOG", "info"),
    ];
    // Its metrics say when the page is downloaded.
    let metrics = format!("127.0.0.1:{}", free_port());
    let worker = Worker::spawn(&spider, &redis.url(), &["--metrics-addr", &metrics], &env);
    let mut conn = redis.conn();
    eventually("the worker leases the page", PATIENCE, || {
        (conn.zcard::<_, u64>("nested:inflight").unwrap() == 1).then_some(())
    });
    // The 2 MB page arrives within milliseconds on loopback, and its parse
    // starts as soon as its download is counted; unbounded, it would then
    // take many minutes.
    eventually_async("the worker has downloaded the page", PATIENCE, || {
        downloads(&metrics, "nested")
    })
    .await;
    let stopped = std::time::Instant::now();
    worker.terminate();
    let (status, log) = worker.wait(Duration::from_secs(120));
    let took = stopped.elapsed();
    assert!(status.success(), "a graceful stop exits 0:\n{log}");
    assert!(
        took < grace + Duration::from_secs(3),
        "the worker took {took:?} to stop with a grace of {grace:?}:\n{log}"
    );
    assert!(log.contains("handed_back=1"), "{log}");
    assert_eq!(conn.zcard::<_, u64>("nested:inflight").unwrap(), 0);
    assert_eq!(conn.zcard::<_, u64>("nested:requests").unwrap(), 1);
    assert_eq!(conn.llen::<_, u64>("nested:items").unwrap(), 0);

    // Nothing lost: with the default limits, another worker commits it.
    let spider = nested_spider(dir.path(), "");
    let (status, log) = Worker::spawn(&spider, &redis.url(), &["--until-drained"], &[])
        .wait(Duration::from_secs(60));
    assert!(status.success(), "{log}");
    assert_eq!(conn.llen::<_, u64>("nested:items").unwrap(), 1, "{log}");
    let cut: Option<String> = conn
        .hget("nested:stats", "extract/cut_short_count")
        .unwrap();
    assert_eq!(cut.as_deref(), Some("1"));
    server.stop().await.unwrap();
}
