//! A slow host's backlog and another host's new work: how long after its
//! push host B's start page is fetched, and its 30 pages done, while host A
//! works through a paced backlog (the spider's `download_delay = 0.2`:
//! each host 5 pages/s). Timed at the servers: two fixture servers on
//! loopback, two hosts (a host is its name and port), a fresh
//! `redis-server` per row and release `crawlworker run` processes.
//!
//! | row | setup |
//! |---|---|
//! | together | A's and B's start pages pushed together, 1 worker |
//! | backlog | A's 300 pages queued, B's start page pushed 2 s later, 1 worker |
//! | backlog, 2 workers | the same with 2 workers |
//! | backed off | the same, A answering 503 to every second page (retried, and A backed off) |
//! | Crawl-delay | 2 workers, A's robots.txt asking `Crawl-delay: 1` (60 pages), B pushed 2 s later |
//!
//!     cargo bench --bench slow_hosts
//!     CRAWLWORKER_BIN=/tmp/old/crawlworker cargo bench --bench slow_hosts   # another build
//!     SLOW_HOSTS_ROWS=backlog cargo bench --bench slow_hosts                # some rows only

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crawlworker_demo::Site;
use crawlworker_testkit::{push_urls, temp_dir, FixtureServer, RedisServer, Robots, Worker};

/// Host B's pages: its start page and the pages it links to.
const B_PAGES: usize = 30;
/// How long a row may take at most.
const LIMIT: Duration = Duration::from_secs(300);

/// One row of the table.
struct Row {
    name: &'static str,
    workers: usize,
    /// Host A's pages.
    backlog: usize,
    /// Every second page of A answers 503.
    failing: bool,
    /// A's robots.txt.
    robots: Option<&'static str>,
    /// How long after A's start page B's is pushed.
    later: Duration,
}

const ROWS: &[Row] = &[
    Row {
        name: "together",
        workers: 1,
        backlog: 300,
        failing: false,
        robots: None,
        later: Duration::ZERO,
    },
    Row {
        name: "backlog",
        workers: 1,
        backlog: 300,
        failing: false,
        robots: None,
        later: Duration::from_secs(2),
    },
    Row {
        name: "backlog, 2 workers",
        workers: 2,
        backlog: 300,
        failing: false,
        robots: None,
        later: Duration::from_secs(2),
    },
    Row {
        name: "backed off",
        workers: 2,
        backlog: 300,
        failing: true,
        robots: None,
        later: Duration::from_secs(2),
    },
    Row {
        name: "Crawl-delay",
        workers: 2,
        backlog: 60,
        failing: false,
        robots: Some("User-agent: *\nCrawl-delay: 1\n"),
        later: Duration::from_secs(2),
    },
];

fn spider(dir: &Path) -> PathBuf {
    let path = dir.join("hosts.toml");
    let text = r#"
name = "hosts"

[settings]
allow_private_networks = true
robotstxt_obey = true
download_delay = 0.2

[items.page]
url = { page = "url" }

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
"#;
    std::fs::write(&path, text).expect("spider");
    path
}

/// A start page on `server` linking to `paths`.
fn links_page(server: &FixtureServer, paths: &[String]) -> String {
    let to: Vec<String> = paths
        .iter()
        .map(|p| p.replace('?', "%3F").replace('=', "%3D"))
        .collect();
    server.url(&format!("/fault/links?to={}", to.join(",")))
}

/// What a row measured, in seconds after B's push.
struct Measured {
    b_start: f64,
    b_done: f64,
    a_done_then: usize,
}

async fn run(row: &Row) -> Option<Measured> {
    let redis = RedisServer::start();
    let a = FixtureServer::start(Site::demo()).await.expect("server A");
    let b = FixtureServer::start(Site::demo()).await.expect("server B");
    if let Some(robots) = row.robots {
        a.set_robots(Robots::Body(robots.to_string()));
    }
    let dir = temp_dir("slow-hosts-bench");
    let path = spider(dir.path());
    let a_pages: Vec<String> = (0..row.backlog)
        .map(|i| {
            let status = if row.failing && i % 2 == 1 { 503 } else { 200 };
            format!("/fault/status/{status}?key=a{i}")
        })
        .collect();
    let b_pages: Vec<String> = (1..B_PAGES)
        .map(|i| format!("/fault/status/200?key=b{i}"))
        .collect();
    let a_start = links_page(&a, &a_pages);
    let b_start = links_page(&b, &b_pages);
    if row.later.is_zero() {
        push_urls(&redis.url(), &path, &[a_start, b_start.clone()]);
    } else {
        push_urls(&redis.url(), &path, &[a_start]);
    }
    let workers: Vec<Worker> = (0..row.workers)
        .map(|_| Worker::spawn(&path, &redis.url(), &[], &[]))
        .collect();
    tokio::time::sleep(row.later).await;
    let pushed = Instant::now();
    if !row.later.is_zero() {
        push_urls(&redis.url(), &path, &[b_start]);
    }
    let measured = loop {
        let done = b.arrivals("/fault/status/200?key=b");
        if done.len() >= B_PAGES - 1 {
            let start = b.arrivals("/fault/links");
            let last = *done.last().expect("B's last page");
            break Some(Measured {
                b_start: start.first().map_or(f64::NAN, |t| secs_after(*t, pushed)),
                b_done: secs_after(last, pushed),
                a_done_then: a
                    .arrivals("/fault/status/")
                    .iter()
                    .filter(|t| **t <= last)
                    .count(),
            });
        }
        if pushed.elapsed() > LIMIT {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    for w in &workers {
        w.terminate();
    }
    for w in workers {
        let _ = tokio::task::spawn_blocking(move || w.wait(Duration::from_secs(60))).await;
    }
    measured
}

fn secs_after(t: Instant, since: Instant) -> f64 {
    t.checked_duration_since(since)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !crawlworker_testkit::benchmarking() {
        return;
    }
    let only = std::env::var("SLOW_HOSTS_ROWS").ok();
    println!("worker: {}", crawlworker_testkit::binary().display());
    println!("| setup | B's start page fetched after its push | B's {B_PAGES} pages done | A's requests sent by then |");
    println!("|---|---:|---:|---:|");
    for row in ROWS {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|n| n == row.name))
        {
            continue;
        }
        match run(row).await {
            Some(m) => println!(
                "| {} | {:.1} s | {:.1} s | {} of {} |",
                row.name, m.b_start, m.b_done, m.a_done_then, row.backlog
            ),
            None => println!("| {} | - | over {} s | - |", row.name, LIMIT.as_secs()),
        }
    }
}
