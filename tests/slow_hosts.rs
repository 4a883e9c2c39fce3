//! A host's pace holds back only that host: a start page pushed while the
//! crawl works through another host's paced backlog is fetched, and its
//! links crawled, at its own host's pace, not after that backlog.
//!
//! Two fixture servers are two hosts (a host is its name and port). Host A
//! queues a backlog of pages at the spider's pace (300 pages, 30 s); host
//! B's start page, pushed once A's crawl has begun, leads to 10 pages
//! (1 s). The test looks at what the servers saw, not at a clock: when B's
//! last page arrived, A had been sent only a few of its pages (before the
//! fix, B's start page was claimed only once A's backlog had been leased
//! and worked off, nearly all of it). Also with two workers, with A
//! failing every second page (backed off) and with A's robots.txt asking a
//! Crawl-delay.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crawlworker::worker::StopRules;
use crawlworker_demo::Site;
use crawlworker_testkit::{
    eventually_async, push_urls, temp_dir, FixtureServer, RedisServer, Robots,
};

use crate::in_process::InProcess;

/// Host A's backlog, and host B's pages.
const BACKLOG: usize = 300;
const B_PAGES: usize = 10;

/// At most this many of A's pages may reach A before B's last page reaches
/// B (about 12 at the two hosts' equal pace; most of the 300 before the
/// fix).
const A_BEFORE_B_DONE: usize = 60;

fn spider(dir: &Path, settings: &str) -> PathBuf {
    let path = dir.join("hosts.toml");
    let text = format!(
        r#"
name = "hosts"

[settings]
allow_private_networks = true
download_delay = 0.1
{settings}

[items.page]
url = {{ page = "url" }}

[[rules]]
name = "links"
match = '/fault/links'
  [[rules.follow]]
  css = "a::attr(href)"
  rule = "page"

[[rules]]
name = "page"
match = '/fault/'
  [[rules.extract]]
  item = "page"
"#
    );
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    path
}

/// A start page on `server` linking to `paths` (on the same host).
fn links_page(server: &FixtureServer, paths: &[String]) -> String {
    let to: Vec<String> = paths
        .iter()
        .map(|p| {
            p.replace('?', "%3F")
                .replace('=', "%3D")
                .replace('&', "%26")
        })
        .collect();
    server.url(&format!("/fault/links?to={}", to.join(",")))
}

/// The case: how many workers, host A's pages, what A's robots.txt says.
struct Case {
    workers: usize,
    a_page: fn(usize) -> String,
    a_robots: Option<&'static str>,
}

fn plain_page(i: usize) -> String {
    format!("/fault/status/200?key=a{i}")
}

/// Every second page of A fails (503, retried, and A is backed off).
fn half_failing_page(i: usize) -> String {
    if i % 2 == 1 {
        format!("/fault/status/503?key=a{i}")
    } else {
        plain_page(i)
    }
}

/// Runs `case`; returns how many of A's pages A had received when B's
/// last page reached B.
async fn a_pages_before_b_is_done(case: Case) -> usize {
    let redis = RedisServer::start();
    let a = FixtureServer::start(Site::demo()).await.expect("server A");
    let b = FixtureServer::start(Site::demo()).await.expect("server B");
    let dir = temp_dir("slow-hosts");
    let obey = if let Some(robots) = case.a_robots {
        a.set_robots(Robots::Body(robots.to_string()));
        "robotstxt_obey = true"
    } else {
        ""
    };
    let path = spider(dir.path(), obey);
    let a_pages: Vec<String> = (0..BACKLOG).map(case.a_page).collect();
    let b_pages: Vec<String> = (0..B_PAGES)
        .map(|i| format!("/fault/status/200?key=b{i}"))
        .collect();
    push_urls(&redis.url(), &path, &[links_page(&a, &a_pages)]);
    let rules = StopRules::default();
    let mut workers = Vec::new();
    for _ in 0..case.workers {
        workers.push(InProcess::start(&path, &redis.url(), &[], rules).await);
    }
    // A's backlog is queued and its crawl has begun.
    eventually_async("host A's crawl begins", Duration::from_secs(30), || async {
        (a.arrivals("/fault/status/").len() >= 2).then_some(())
    })
    .await;
    push_urls(&redis.url(), &path, &[links_page(&b, &b_pages)]);
    eventually_async(
        "host B's pages are all fetched",
        Duration::from_secs(60),
        || async { (b.arrivals("/fault/status/200?key=b").len() >= B_PAGES).then_some(()) },
    )
    .await;
    let b_done = *b
        .arrivals("/fault/status/200?key=b")
        .last()
        .expect("B's last page");
    let a_before = a
        .arrivals("/fault/status/")
        .iter()
        .filter(|at| **at <= b_done)
        .count();
    for w in workers {
        w.stop().await;
    }
    a_before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paced_backlog_does_not_hold_back_another_hosts_new_work() {
    let a_before = a_pages_before_b_is_done(Case {
        workers: 1,
        a_page: plain_page,
        a_robots: None,
    })
    .await;
    assert!(
        a_before <= A_BEFORE_B_DONE,
        "{a_before} of A's {BACKLOG} pages went before B's {B_PAGES} were done"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paced_backlog_does_not_hold_back_another_hosts_new_work_with_two_workers() {
    let a_before = a_pages_before_b_is_done(Case {
        workers: 2,
        a_page: plain_page,
        a_robots: None,
    })
    .await;
    assert!(
        a_before <= A_BEFORE_B_DONE,
        "{a_before} of A's {BACKLOG} pages went before B's {B_PAGES} were done"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backed_off_hosts_backlog_does_not_hold_back_another_hosts_new_work() {
    let a_before = a_pages_before_b_is_done(Case {
        workers: 2,
        a_page: half_failing_page,
        a_robots: None,
    })
    .await;
    assert!(
        a_before <= A_BEFORE_B_DONE,
        "{a_before} of A's requests went before B's {B_PAGES} pages were done"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_delayed_hosts_backlog_does_not_hold_back_another_hosts_new_work() {
    let a_before = a_pages_before_b_is_done(Case {
        workers: 2,
        a_page: plain_page,
        a_robots: Some("User-agent: *\nCrawl-delay: 0.3\n"),
    })
    .await;
    assert!(
        a_before <= A_BEFORE_B_DONE,
        "{a_before} of A's {BACKLOG} pages went before B's {B_PAGES} were done"
    );
}
