//! Pages built by JavaScript, rendered in a real headless Chromium: the
//! demo forum's /js/ section (empty pages filled in from JSON, threads
//! that load on scroll) gives the HTML forum's items, with workers killed
//! by SIGKILL and with the browser itself killed mid-crawl; pages that
//! never settle, navigate away, make a thousand requests or reach for a
//! private address are bounded, reported, and the crawl goes on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use redis::Commands;
use serde_json::Value;

use crawlworker_demo::{self as demo, Site};
use crawlworker_testkit::{
    binary, crawlworker_with_redis, eventually, spider_for, stderr, stdout, temp_dir,
    FixtureServer, RedisServer, Worker,
};

use expect::{assert_exact, expected_for, scraped_from};

/// The suite's expected items, shared with the `tests` binary.
#[path = "../expect.rs"]
#[allow(dead_code)]
mod expect;

/// One of these tests at a time: each runs Chromium (three, in one), and
/// two together load a 2-core machine enough to stretch a render past
/// its test's bounds. (They are a binary of their own for the same
/// reason: beside the `tests` binary's timing tests.)
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Settings that make recovery fast enough for a test.
const FAST: &[(&str, &str)] = &[
    ("CRAWLWORKER_LEASE_TIMEOUT", "2s"),
    ("CRAWLWORKER_IDLE_RECHECK", "100ms"),
    ("CRAWLWORKER_RETRY_BACKOFF_BASE", "100ms"),
];

/// The rendered crawl's items with their post URLs as the HTML forum's
/// (`/js/post/N` → `/post/N`), canonical and sorted.
fn scraped_as_html(redis: &RedisServer) -> Vec<String> {
    let mut items: Vec<String> = scraped_from(&mut redis.conn(), "bbs-rendered:items")
        .iter()
        .map(|s| s.replace("/js/post/", "/post/"))
        .collect();
    items.sort();
    items
}

/// The Chromium started by the worker with process id `worker`: the
/// browser process, found by its profile folder.
fn browser_of(worker: u32) -> Option<u32> {
    let profile = format!("crawlworker-chromium-{worker}-");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline);
            cmdline.contains(&profile) && !cmdline.contains("--type=")
        })
}

/// Requests the server received whose target starts with `prefix`.
fn hits_prefixed(server: &FixtureServer, prefix: &str) -> u64 {
    server
        .hit_counts()
        .iter()
        .filter(|(target, _)| target.starts_with(prefix))
        .map(|(_, n)| n)
        .sum()
}

fn push(redis: &RedisServer, spider: &Path, tasks: &[String]) {
    let mut args = vec!["push-urls", spider.to_str().unwrap()];
    args.extend(tasks.iter().map(String::as_str));
    let out = crawlworker_with_redis(&redis.url(), &args);
    assert!(out.status.success(), "push-urls: {}", stderr(&out));
}

fn stats(redis: &RedisServer) -> BTreeMap<String, String> {
    redis.conn().hgetall("bbs-rendered:stats").unwrap()
}

fn stat(stats: &BTreeMap<String, String>, name: &str) -> u64 {
    stats.get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_javascript_forum_crawled_by_three_workers_one_killed_gives_the_html_forums_items() {
    let _one = ONE_AT_A_TIME.lock().await;
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("rendering");
    let spider = spider_for("bbs-rendered", &server.base_url(), dir.path());
    push(&redis, &spider, &demo::demo_tasks());
    let args = ["--until-drained", "--concurrency", "3"];
    // The workers' own temporary folder, to see what they leave there.
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let env: Vec<(&str, &str)> = FAST
        .iter()
        .copied()
        .chain([("TMPDIR", tmp.to_str().unwrap())])
        .collect();
    let mut workers: Vec<Worker> = (0..3)
        .map(|_| Worker::spawn(&spider, &redis.url(), &args, &env))
        .collect();
    let mut conn = redis.conn();
    eventually("the crawl is under way", Duration::from_secs(60), || {
        let n: u64 = conn.llen("bbs-rendered:items").unwrap();
        (n >= 40).then_some(())
    });
    let victim = workers.remove(0);
    let pid = victim.child.id();
    let browser = browser_of(pid).expect("the worker has no Chromium while it renders");
    victim.kill();
    // Its browser dies with it (PR_SET_PDEATHSIG), leaving nothing behind.
    eventually(
        "the killed worker's Chromium is gone",
        Duration::from_secs(10),
        || (!Path::new(&format!("/proc/{browser}")).exists()).then_some(()),
    );
    workers.push(Worker::spawn(&spider, &redis.url(), &args, &env));
    for w in workers {
        let (status, log) = w.wait(Duration::from_secs(180));
        assert!(status.success(), "worker failed:\n{log}");
    }
    // No browser's singleton socket folder is left behind in the
    // temporary folder, though every browser was killed (a worker's stop
    // kills it, and so did the SIGKILL of its worker): each is removed
    // with its profile. Profiles of exited workers may be left (the
    // killed worker's, or one a browser still exiting wrote into after
    // its worker removed it), with their socket folders: the next browser
    // started on the machine sweeps both.
    let left: Vec<String> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let swept_later: Vec<String> = left
        .iter()
        .filter(|name| name.starts_with("crawlworker-chromium-"))
        .filter_map(|profile| std::fs::read_link(tmp.join(profile).join("SingletonSocket")).ok())
        .filter_map(|socket| Some(socket.parent()?.file_name()?.to_string_lossy().into_owned()))
        .collect();
    let orphans: Vec<&String> = left
        .iter()
        .filter(|name| name.starts_with("org.chromium.") && !swept_later.contains(name))
        .collect();
    assert!(
        orphans.is_empty(),
        "socket folders left in the workers' TMPDIR with no profile: {orphans:?} (all: {left:?})"
    );
    let base = server.base_url();
    assert_exact(
        &scraped_as_html(&redis),
        &expected_for(&demo::demo_forum_tasks(), &base),
    );
    let stats = stats(&redis);
    assert!(stat(&stats, "render/page_count") >= 103, "{stats:?}");
    assert!(stat(&stats, "render/subrequest_count") > 0, "{stats:?}");
    let _ = server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_killed_mid_crawl_is_restarted_and_the_crawl_finishes_exactly() {
    let _one = ONE_AT_A_TIME.lock().await;
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("rendering");
    let spider = spider_for("bbs-rendered", &server.base_url(), dir.path());
    let tasks = vec![demo::demo_forum_tasks().remove(0)];
    let pushed: Vec<String> = tasks
        .iter()
        .map(|t| serde_json::json!({"forum_id": t.forum_id, "max_page": t.max_page}).to_string())
        .collect();
    push(&redis, &spider, &pushed);
    let worker = Worker::spawn(&spider, &redis.url(), &["--until-drained"], FAST);
    let pid = worker.child.id();
    let mut conn = redis.conn();
    let browser = eventually("the worker renders", Duration::from_secs(60), || {
        let n: u64 = conn.llen("bbs-rendered:items").unwrap();
        (n >= 10).then(|| browser_of(pid)).flatten()
    });
    let killed = Command::new("kill")
        .args(["-KILL", &browser.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let (status, log) = worker.wait(Duration::from_secs(180));
    assert!(status.success(), "worker failed:\n{log}");
    let base = server.base_url();
    assert_exact(&scraped_as_html(&redis), &expected_for(&tasks, &base));
    let stats = stats(&redis);
    assert!(stat(&stats, "render/browser_restarts") >= 1, "{stats:?}");
    let _ = server.stop().await;
}

/// A spider that renders /js/ pages and takes their heading, giving the
/// page that never settles 3 s, with the settings given.
fn hostile_spider(dir: &Path, base: &str, settings: &str) -> PathBuf {
    let path = dir.join("hostile.toml");
    let text = format!(
        r#"
name = "hostile"
allowed_domains = ["127.0.0.1"]

[settings]
{settings}
retry_times = 1
retry_backoff_base = "100ms"
render_max_subrequests = 100

[start]
type = "set"

[items.page]
title = {{ css = "h1.post-title::text", required = true }}
url = {{ page = "url" }}

[[rules]]
name = "never"
match = '/never-settles'
render = {{ timeout = "3s" }}

  [[rules.extract]]
  item = "page"

[[rules]]
name = "page"
match = '/js/'
render = {{ timeout = "20s" }}

  [[rules.extract]]
  item = "page"
"#
    );
    std::fs::write(&path, text.replace("http://127.0.0.1:8700", base)).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_pages_are_bounded_reported_and_the_crawl_goes_on() {
    let _one = ONE_AT_A_TIME.lock().await;
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let base = server.base_url();
    let dir = temp_dir("rendering");
    let spider = hostile_spider(dir.path(), &base, "allow_private_networks = true");
    let pages = ["never-settles", "navigates-away", "many-requests"];
    let mut cmd = Command::new(binary());
    cmd.args(["run", spider.to_str().unwrap(), "--local", "-o", "-"]);
    for page in pages {
        cmd.args(["--start", &format!("{base}/js/hostile/{page}")]);
    }
    cmd.args(["--start", &format!("{base}/js/post/1001")]);
    let started = Instant::now();
    let out = cmd.output().unwrap();
    let log = stderr(&out);
    // Two tries of the page that never settles, 3 s each: bounded.
    assert!(started.elapsed() < Duration::from_secs(90), "{log}");
    let titles: Vec<String> = stdout(&out)
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["title"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    // The page that navigates away is taken as it was, once.
    let mut titles = titles;
    titles.sort();
    assert_eq!(titles.len(), 3, "{titles:?}\n{log}");
    assert!(titles.iter().any(|t| t == "many requests"), "{titles:?}");
    // Never settled: retried, then failed for good with the reason.
    assert!(log.contains("hostile/never-settles"), "{log}");
    assert!(log.contains("timed out after 3s"), "{log}");
    assert!(
        log.contains("1 request failed for good") || log.contains("failed/count: 1"),
        "{log}"
    );
    // A thousand requests: cut at render_max_subrequests.
    let pings = hits_prefixed(&server, "/js/data/ping?n=");
    assert!(pings <= 100, "{pings} pings reached the site");
    assert!(log.contains("render/subrequests_cut"), "{log}");
    assert!(log.contains("render/navigation_blocked_count"), "{log}");
    // The navigation itself was blocked: the page it went to was never fetched.
    assert_eq!(server.hits("/js/hostile/elsewhere"), 0);
    let _ = server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rendered_pages_request_to_a_private_address_is_refused_by_the_guard() {
    let _one = ONE_AT_A_TIME.lock().await;
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let base = server.base_url();
    let dir = temp_dir("rendering");
    // A spider that does not allow private networks, and a saved page whose
    // script fetches from one (the demo server, on loopback).
    let spider = hostile_spider(dir.path(), &base, "");
    let page = dir.path().join("page.html");
    std::fs::write(
        &page,
        format!(
            r#"<html><body><h1 class="post-title">waiting</h1><script>
fetch("{base}/js/data/ping?from=guarded").then(
  () => {{ document.querySelector("h1").textContent = "reached"; }},
  () => {{ document.querySelector("h1").textContent = "refused"; }});
</script></body></html>"#
        ),
    )
    .unwrap();
    let out = Command::new(binary())
        .args(["parse", spider.to_str().unwrap(), page.to_str().unwrap()])
        .args(["--url", "https://forum.example/js/post/1"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(report["items"][0]["fields"]["title"], "refused", "{report}");
    assert_eq!(report["render"]["failed"], 1, "{report}");
    let refused = report["render"]["refused"].as_str().unwrap_or_default();
    assert!(refused.contains("loopback"), "{report}");
    assert_eq!(hits_prefixed(&server, "/js/data/ping"), 0);
    let _ = server.stop().await;
}

/// `crawlworker parse SPIDER URL --meta META`'s output.
fn parse(spider: &Path, url: &str, meta: &str) -> Value {
    let out = Command::new(binary())
        .args(["parse", spider.to_str().unwrap(), url, "--meta", meta])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rendered_gbk_page_gives_the_links_and_items_its_html_gives() {
    let _one = ONE_AT_A_TIME.lock().await;
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let base = server.base_url();
    let dir = temp_dir("rendering");
    let plain = spider_for("bbs", &base, dir.path());
    // The same spider, rendering every page.
    let text = std::fs::read_to_string(&plain).unwrap();
    let text = text.replace("\nmatch = '", "\nrender = true\nmatch = '");
    let rendered = dir.path().join("bbs-render-all.toml");
    std::fs::write(&rendered, text).unwrap();
    let meta = r#"{"forum_id": "00002", "max_page": 3}"#;
    // A GBK list page whose next link has a raw Chinese query: the
    // rendered page resolves it in GBK, as the browser did.
    for path in ["/list/00002/2", "/post/1035", "/comment/1035/1"] {
        let url = format!("{base}{path}");
        let (a, b) = (parse(&plain, &url, meta), parse(&rendered, &url, meta));
        assert!(b["render"].is_object(), "{b}");
        assert_eq!(a["requests"], b["requests"], "{path}");
        assert_eq!(a["items"], b["items"], "{path}");
        assert_eq!(a["encoding"], b["encoding"], "{path}");
    }
    let _ = server.stop().await;
}
