//! Page size and the worker's memory: a 100 MB page stays within the
//! bound docs/memory.md states for one page, and downloads hold their
//! bodies in the worker's memory budget (`download_memory_budget`): a page
//! that does not fit beside the others waits until one is dropped, and a
//! page larger than the whole budget fails, counted, naming the budget; a
//! page's items and links hold the budget until the page is committed.

use std::time::Duration;

use redis::Commands;

use crawlworker_demo::Site;
use crawlworker_testkit::{
    eventually_async, push_urls, temp_dir, FixtureServer, RedisServer, Worker,
};

/// How long a condition may take before a test gives up on it.
const PATIENCE: Duration = Duration::from_secs(20);

/// The worker's peak resident memory so far (`VmHWM`), in MiB, or `None`
/// once it has exited.
fn peak_rss_mib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib >> 10)
}

/// A spider that extracts the title of every page and follows its links,
/// with `settings` added.
fn big_page_spider(dir: &std::path::Path, settings: &str) -> std::path::PathBuf {
    let path = dir.join("big.toml");
    std::fs::write(
        &path,
        format!(
            r#"
name = "big"

[settings]
allow_private_networks = true
retry_times = 0
{settings}

[items.page]
url = {{ page = "url" }}
title = {{ css = "title::text" }}

[[rules]]
name = "page"
match = '/fault/'
  [[rules.extract]]
  item = "page"
  [[rules.follow]]
  css = "a::attr(href)"
"#
        ),
    )
    .unwrap();
    path
}

/// A 100 MB page stays within the memory bound docs/memory.md states for
/// one page: the process, the body once and its parse. (It once made the
/// worker use 0.9 to 1.6 GB: the body grown by doubling, a decoded copy,
/// the parsed document.) The peak RSS is sampled from `/proc/<pid>/status`
/// while the worker crawls the page, served without Content-Length so the
/// body grows as it arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_mb_page_stays_within_its_memory_bound() {
    const PAGE: u64 = 100_000_000;
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("memory");
    // The bound is the point, not the time: a loaded machine may take over
    // the default extract_timeout (10 s) to parse 100 MB in a debug build.
    let spider = big_page_spider(
        dir.path(),
        "download_maxsize = \"128 MiB\"\nextract_timeout = \"5min\"",
    );
    // Without Content-Length: the body grows as it arrives.
    push_urls(
        &redis.url(),
        &spider,
        &[server.url(&format!("/fault/huge-chunked/{PAGE}"))],
    );
    let worker = Worker::spawn(&spider, &redis.url(), &["--until-drained"], &[]);
    let pid = worker.child.id();
    let mut peak = 0;
    let started = std::time::Instant::now();
    while let Some(now) = peak_rss_mib(pid) {
        peak = peak.max(now);
        if started.elapsed() > Duration::from_secs(300) {
            break;
        }
        // How often its memory is sampled, not a wait for an effect.
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, log) = worker.wait(Duration::from_secs(300));
    eprintln!(
        "peak RSS {peak} MiB for a page of {PAGE} bytes, in {:?}",
        started.elapsed()
    );
    assert!(status.success(), "{log}");
    let items: Vec<String> = redis.conn().lrange("big:items", 0, -1).unwrap();
    assert_eq!(items.len(), 1, "the page is extracted: {log}");
    assert!(peak > 0, "the worker's memory was never sampled");
    // docs/memory.md: the process (under 64 MiB), the body once and its
    // parse (about 12.5x for this markup): 1,312 MiB measured. Before,
    // the body was grown by doubling and copied again to be decoded.
    let bound = 64 + 15 * (PAGE >> 20);
    assert!(
        peak <= bound,
        "peak RSS {peak} MiB for a page of {PAGE} bytes, over its bound of {bound} MiB"
    );
    server.stop().await.unwrap();
}

/// Downloads hold their bodies in the worker's memory budget. Two 5 MB
/// pages fill a 12 MiB budget, so a third waits (it does not fail) until
/// one of them is dropped; a page larger than the whole budget is refused
/// and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_pages_wait_for_the_memory_budget() {
    use crawlworker::downloader::budget::Budget;
    use crawlworker::downloader::{FetchError, HttpClient};
    use crawlworker::request::Request;
    use crawlworker::settings::{Bytes, Settings};

    const PAGE: u64 = 5_000_000;
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let settings = Settings {
        allow_private_networks: true,
        download_maxsize: Bytes(40 << 20),
        ..Settings::default()
    };
    let budget = Budget::new(12 << 20);
    let client = HttpClient::within(&settings, budget.clone()).unwrap();
    let get = |path: String| {
        let client = client.clone();
        let request = Request::get(&server.url(&path));
        async move { client.fetch(&request).await }
    };
    // With and without Content-Length (a body of unknown length grows its
    // share as it arrives).
    let first = get(format!("/fault/huge/{PAGE}")).await.unwrap();
    let second = get(format!("/fault/huge-chunked/{PAGE}")).await.unwrap();
    assert_eq!(first.body.len() as u64, PAGE);
    assert_eq!(second.body.len() as u64, PAGE);
    assert!(budget.held() >= 2 * PAGE, "{budget:?}");
    let two = budget.held();
    let third = tokio::spawn(get(format!("/fault/huge-chunked/{}", PAGE + 1)));
    // The third has its response and reads its body into the budget. Its
    // body cannot fit in what the two leave (under 3 MB): from here only a
    // dropped page lets it finish.
    eventually_async("the third page holds part of the budget", PATIENCE, || {
        let grown = budget.held() > two;
        async move { grown.then_some(()) }
    })
    .await;
    assert!(
        !third.is_finished(),
        "a third page fitted beside two in the budget: {budget:?}"
    );
    assert!(budget.held() <= budget.total(), "{budget:?}");
    drop(first);
    let third = tokio::time::timeout(PATIENCE, third)
        .await
        .expect("the third page goes ahead once the first is dropped")
        .unwrap()
        .unwrap();
    assert_eq!(third.body.len() as u64, PAGE + 1);
    drop((second, third));
    assert_eq!(budget.held(), 0, "{budget:?}");

    let error = get(format!("/fault/huge/{}", 13 << 20)).await.unwrap_err();
    assert!(matches!(error, FetchError::OverBudget { .. }), "{error:?}");
    assert_eq!(error.kind(), "ResponseTooLarge");
    assert!(
        error.to_string().contains("download_memory_budget"),
        "{error}"
    );
    server.stop().await.unwrap();
}

/// A worker whose memory budget holds two of six 3 MB pages crawls them
/// all, a few at a time, and fails the page larger than its whole budget
/// into the failed key, counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_crawls_pages_beyond_its_budget_one_share_at_a_time() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("memory");
    let spider = big_page_spider(
        dir.path(),
        "download_maxsize = \"16 MiB\"\ndownload_memory_budget = \"7 MiB\"",
    );
    let mut urls: Vec<String> = (0..6)
        .map(|i| server.url(&format!("/fault/huge-chunked/{}", 3_000_000 + i)))
        .collect();
    urls.push(server.url(&format!("/fault/huge/{}", 8 << 20)));
    push_urls(&redis.url(), &spider, &urls);
    let worker = Worker::spawn(&spider, &redis.url(), &["--until-drained"], &[]);
    let (status, log) = worker.wait(Duration::from_secs(120));
    assert!(status.success(), "{log}");
    let items: Vec<String> = redis.conn().lrange("big:items", 0, -1).unwrap();
    assert_eq!(items.len(), 6, "{log}");
    let failed: Vec<String> = redis.conn().lrange("big:failed", 0, -1).unwrap();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].contains("download_memory_budget") && failed[0].contains("ResponseTooLarge"),
        "{}",
        failed[0]
    );
    let too_large: i64 = redis
        .conn()
        .hget(
            "big:stats",
            "downloader/exception_type_count/ResponseTooLarge",
        )
        .unwrap();
    assert_eq!(too_large, 1);
    server.stop().await.unwrap();
}

/// A page's output (its items and links) is counted in the worker's memory
/// budget from its extraction until its commit. While Redis refuses writes
/// (CLIENT PAUSE WRITE, as a busy Redis does), a page whose items hold its
/// text twice and its markup once waits for its commit holding the budget
/// for them: more than its whole 1 MiB, since an output larger than the
/// budget still goes through (alone). Once committed, it gives it all back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pages_output_holds_the_memory_budget_until_its_commit() {
    use crate::in_process::InProcess;
    use crawlworker::worker::StopRules;

    const PAGE: u64 = 300_000;
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("memory");
    let spider = dir.path().join("output.toml");
    std::fs::write(
        &spider,
        r#"
name = "output"

[settings]
allow_private_networks = true
download_memory_budget = "1 MiB"

[items.page]
url = { page = "url" }
text = { css = "body ::text", join = "" }
spaced = { css = "body ::text", join = " " }
markup = { css = "body" }

[[rules]]
name = "page"
match = '/fault/huge/'
  [[rules.extract]]
  item = "page"
"#,
    )
    .unwrap();
    // The page starts after 3 s, time to pause Redis once it is leased.
    let url = server.url(&format!("/fault/huge/{PAGE}?delay_ms=3000"));
    push_urls(&redis.url(), &spider, std::slice::from_ref(&url));
    let worker = InProcess::start(&spider, &redis.url(), &[], StopRules::default()).await;
    let budget = worker.budget();
    let mut conn = redis.conn();
    eventually_async("the worker leases the page", PATIENCE, || {
        let leased = conn.zcard::<_, u64>("output:inflight").unwrap() == 1;
        async move { leased.then_some(()) }
    })
    .await;
    let _: () = redis::cmd("CLIENT")
        .arg(&["PAUSE", "60000", "WRITE"])
        .query(&mut conn)
        .unwrap();
    // Its body alone holds at most PAGE bytes.
    let waiting = eventually_async("the page's output holds the budget", PATIENCE, || {
        let held = budget.held();
        async move { (held >= 2 * PAGE).then_some(held) }
    })
    .await;
    assert!(waiting > budget.total(), "{budget:?}");
    assert_eq!(conn.llen::<_, u64>("output:items").unwrap(), 0);
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut conn)
        .unwrap();
    eventually_async("the page is committed", PATIENCE, || {
        let committed = conn.llen::<_, u64>("output:items").unwrap() == 1;
        async move { committed.then_some(()) }
    })
    .await;
    eventually_async("its output is given back", PATIENCE, || {
        let held = budget.held();
        async move { (held == 0).then_some(()) }
    })
    .await;
    worker.stop().await;
    server.stop().await.unwrap();
}
