//! A worker's memory on a crawl that touches many distinct hosts: the
//! per-host state (download slots, robots.txt policies, cookie jars, idle
//! connections) must not grow with the hosts a crawl has ever seen.
//!
//! For each host count it starts a fresh `redis-server` and one loopback
//! HTTP server, pushes one start URL per host and runs one release
//! `crawlworker run --until-drained` process with `robotstxt_obey` and
//! `cookies_enabled` on, so every host costs a robots.txt fetch, a page and
//! a cookie. It samples the worker's `/proc/<pid>/status` (VmRSS, VmHWM)
//! and its open file descriptors every 250 ms and prints the peak RSS, the
//! RSS at each quarter of the crawl and the peak of open descriptors.
//!
//! Many host names, loopback only: each host is an IPv4 literal in
//! 127.0.0.0/8 (`http://127.A.B.C/`), and the spider sends everything
//! through one HTTP proxy, the test server on 127.0.0.1, which answers any
//! host. Nothing is resolved and nothing leaves the machine (a request
//! that skipped the proxy would still go to a loopback address). The
//! worker keeps its state per target host as it would without a proxy:
//! the connection pool, cookies, robots.txt and slots are keyed by the
//! URL's host.
//!
//!     cargo bench --bench many_hosts                        # 1k, 10k, 100k hosts (~5 min)
//!     MANY_HOSTS=1000,10000 cargo bench --bench many_hosts  # some sizes only
//!     CRAWLWORKER_BIN=/tmp/old/crawlworker cargo bench --bench many_hosts   # another build

use std::io::Write as _;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlworker_demo::server::{full, Connection, Reply, Routes, ServeOptions};
use crawlworker_demo::{DemoServer, Site};
use crawlworker_testkit::{crawlworker_with_redis, temp_dir, RedisServer, Worker};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE, SET_COOKIE};
use hyper::{Request, Response};

/// Host counts crawled unless `MANY_HOSTS` says otherwise.
const SIZES: &[usize] = &[1_000, 10_000, 100_000];
/// How often the worker's memory is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// Answers every host: a robots.txt that allows all but `/private/`, and a
/// small page that sets a cookie.
struct AnyHost;

impl Routes for AnyHost {
    fn route(&self, _conn: &Connection, request: &Request<Incoming>) -> Option<Reply> {
        let host = request.uri().host().unwrap_or("unknown").to_string();
        let (body, content_type, cookie) = if request.uri().path() == "/robots.txt" {
            (
                "User-agent: *\nDisallow: /private/\n".to_string(),
                "text/plain",
                None,
            )
        } else {
            (
                format!("<!doctype html><html><head><title>{host}</title></head><body><p>{host}</p></body></html>"),
                "text/html; charset=utf-8",
                Some(format!("session={host}; Path=/; Max-Age=86400")),
            )
        };
        let mut response = Response::new(full(Bytes::from(body)));
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        if let Some(cookie) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
            response.headers_mut().insert(SET_COOKIE, cookie);
        }
        Some(Reply::Now(response))
    }
}

/// The `i`-th host: 127.A.B.C with A ≥ 1, so never 127.0.0.1 itself.
fn host(i: usize) -> Ipv4Addr {
    let n = u32::try_from(i).expect("host index") + (1 << 16);
    Ipv4Addr::from(0x7f00_0000 | n)
}

/// One sample of the worker process.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Duration,
    rss_kib: u64,
    hwm_kib: u64,
    fds: usize,
}

fn sample(pid: u32, at: Duration) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        line.split_whitespace().nth(1)?.parse().ok()
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some(Sample {
        at,
        rss_kib: field("VmRSS:")?,
        hwm_kib: field("VmHWM:")?,
        fds,
    })
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Crawls `hosts` hosts with one worker and prints what it used.
async fn run(hosts: usize) {
    let redis = RedisServer::start();
    let options = ServeOptions {
        latency: Duration::ZERO,
        routes: Some(Arc::new(AnyHost)),
        ..ServeOptions::default()
    };
    let server = DemoServer::start_with(Site::demo(), options)
        .await
        .expect("server");
    let dir = temp_dir("many-hosts-bench");
    let spider = dir.path().join("hosts.toml");
    std::fs::write(
        &spider,
        format!(
            r#"
name = "hosts"

[settings]
allow_private_networks = true
robotstxt_obey = true
cookies_enabled = true
proxies = ["http://{}"]

[items.page]
title = "title::text"

[[rules]]
name = "page"
match = '^http://127\.'
  [[rules.extract]]
  item = "page"
"#,
            server.addr()
        ),
    )
    .expect("spider");
    let urls = dir.path().join("urls.txt");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&urls).expect("urls"));
        for i in 0..hosts {
            writeln!(f, "http://{}/", host(i)).expect("write urls");
        }
    }
    let pushed = crawlworker_with_redis(
        &redis.url(),
        &[
            "push-urls",
            &spider.display().to_string(),
            "--file",
            &urls.display().to_string(),
        ],
    );
    assert!(
        pushed.status.success(),
        "{}",
        String::from_utf8_lossy(&pushed.stderr)
    );

    let started = Instant::now();
    let worker = Worker::spawn(
        &spider,
        &redis.url(),
        &["--until-drained"],
        &[("CRAWLWORKER_IDLE_RECHECK", "100ms")],
    );
    let pid = worker.child.id();
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !done.load(Ordering::Relaxed) {
                if let Some(s) = sample(pid, started.elapsed()) {
                    samples.push(s);
                }
                std::thread::sleep(SAMPLE_EVERY);
            }
            samples
        })
    };
    let (status, log) = tokio::task::spawn_blocking(move || worker.wait(Duration::from_secs(1800)))
        .await
        .expect("wait");
    let took = started.elapsed();
    done.store(true, Ordering::Relaxed);
    let samples = sampler.join().expect("sampler");
    assert!(status.success(), "worker failed:\n{log}");

    let mut conn = redis.conn();
    let items: u64 = redis::cmd("LLEN")
        .arg("hosts:items")
        .query(&mut conn)
        .expect("LLEN");
    let peak = samples.iter().map(|s| s.hwm_kib).max().unwrap_or(0);
    let peak_fds = samples.iter().map(|s| s.fds).max().unwrap_or(0);
    let quarter = |q: u32| -> String {
        let at = took * q / 4;
        samples
            .iter()
            .rev()
            .find(|s| s.at <= at)
            .map_or("-".into(), |s| format!("{:.1}", mib(s.rss_kib)))
    };
    println!(
        "{hosts} hosts: {items} items in {:.1} s; peak RSS {:.1} MiB; RSS at 25/50/75/100 % of the crawl: {} / {} / {} / {} MiB; peak open fds {peak_fds}",
        took.as_secs_f64(),
        mib(peak),
        quarter(1),
        quarter(2),
        quarter(3),
        quarter(4),
    );
    if std::env::var_os("MANY_HOSTS_SERIES").is_some() {
        for s in &samples {
            println!(
                "  t={:7.2}s rss={:7.1} MiB fds={}",
                s.at.as_secs_f64(),
                mib(s.rss_kib),
                s.fds
            );
        }
    }
    if !log.trim().is_empty() {
        let lines: Vec<&str> = log.lines().collect();
        println!(
            "  worker log: {} lines, the last: {}",
            lines.len(),
            lines.last().unwrap_or(&"")
        );
    }
    let _ = server.stop().await;
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !crawlworker_testkit::benchmarking() {
        return;
    }
    let sizes: Vec<usize> = match std::env::var("MANY_HOSTS") {
        Ok(list) => list
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .expect("MANY_HOSTS: comma-separated numbers")
            })
            .collect(),
        Err(_) => SIZES.to_vec(),
    };
    println!(
        "worker: {}",
        crawlworker_testkit::process::binary().display()
    );
    for hosts in sizes {
        run(hosts).await;
    }
}
