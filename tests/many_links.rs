//! A page with more links than one script call carries (a sitemap of
//! 20,000 URLs): its links go to Redis in parts, each a bounded script
//! call, ahead of the page's commit; every link is queued once and
//! counted once; and a worker killed between two parts loses and doubles
//! nothing (the page is fetched again, and the dupefilter filters what
//! the first parts queued).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use redis::Commands;

use crawlworker::stats::{self, Stat};
use crawlworker_demo::Site;
use crawlworker_testkit::{eventually, temp_dir, FixtureServer, RedisServer, Worker};

/// The sitemap's size: five parts of at most 4,096 links.
const URLS: usize = 20_000;
/// At most this many links go in one script call (`MAX_LINKS` in
/// `frontier/redis/commits.rs`): three arguments each.
const LINKS_PER_CALL: usize = 4096;

/// A spider that follows a sitemap's entries and leases only one page in
/// all (`max_pages` counts the pages in flight and those answered), so
/// the entries stay queued to be counted. A sitemap whose worker died
/// uncommitted was never answered for the count: it is leased again.
fn spider(dir: &Path) -> PathBuf {
    let path = dir.join("bigmap.toml");
    let text = r#"
name = "bigmap"
allowed_domains = ["127.0.0.1"]

[settings]
allow_private_networks = true
robotstxt_obey = false
max_pages = 1

[[rules]]
name = "sitemap"
match = '/fault/sitemap'
  [[rules.follow]]
  sitemap = true
  rule = "page"

[items.page]
url = { page = "url" }

[[rules]]
name = "page"
match = '/p/'
  [[rules.extract]]
  item = "page"
"#;
    std::fs::write(&path, text).unwrap();
    path
}

/// The sitemap's URL: entries `/p/0` … `/p/19999`.
fn sitemap(server: &FixtureServer) -> String {
    let prefix: String =
        url::form_urlencoded::byte_serialize(server.url("/p/").as_bytes()).collect();
    server.url(&format!("/fault/sitemap?many={URLS}&prefix={prefix}"))
}

/// The URLs of the requests queued, each as often as it is queued.
fn queued_urls(conn: &mut redis::Connection) -> Vec<String> {
    let ids: Vec<String> = conn.zrange("bigmap:requests", 0, -1).unwrap();
    ids.iter()
        .map(|id| {
            let json: String = conn.hget("bigmap:requests:data", id).unwrap();
            let request: serde_json::Value = serde_json::from_str(&json).unwrap();
            request["url"].as_str().unwrap().to_string()
        })
        .collect()
}

/// Every sitemap entry is queued exactly once.
fn assert_each_queued_once(conn: &mut redis::Connection, server: &FixtureServer) {
    let urls = queued_urls(conn);
    let distinct: BTreeSet<&String> = urls.iter().collect();
    assert_eq!(urls.len(), distinct.len(), "a URL was queued twice");
    let want: BTreeSet<String> = (0..URLS).map(|i| server.url(&format!("/p/{i}"))).collect();
    assert_eq!(distinct.into_iter().cloned().collect::<BTreeSet<_>>(), want);
}

fn stat(conn: &mut redis::Connection, stat: Stat) -> u64 {
    conn.hget::<_, _, Option<u64>>("bigmap:stats", stat.name)
        .unwrap()
        .unwrap_or(0)
}

/// The number of arguments of every script call in the slow log (each
/// call is logged with its first 31 arguments and "... (N more
/// arguments)"), with the script's function name.
fn script_calls(conn: &mut redis::Connection) -> Vec<(String, usize)> {
    let log: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query(conn)
        .unwrap();
    let text = |v: &redis::Value| -> String {
        match v {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            redis::Value::SimpleString(s) => s.clone(),
            _ => String::new(),
        }
    };
    let mut calls = Vec::new();
    for entry in log {
        let redis::Value::Array(fields) = entry else {
            continue;
        };
        let Some(redis::Value::Array(args)) = fields.get(3) else {
            continue;
        };
        let args: Vec<String> = args.iter().map(text).collect();
        if !matches!(
            args.first().map(|a| a.to_uppercase()).as_deref(),
            Some("FCALL" | "EVALSHA")
        ) {
            continue;
        }
        let more = args
            .last()
            .and_then(|a| a.strip_prefix("... ("))
            .and_then(|a| a.split(' ').next())
            .and_then(|n| n.parse::<usize>().ok());
        let count = match more {
            Some(n) => args.len() - 1 + n,
            None => args.len(),
        };
        calls.push((args.get(1).cloned().unwrap_or_default(), count));
    }
    calls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_sitemaps_links_go_to_redis_in_bounded_parts_each_queued_once() {
    let redis = RedisServer::start_with(&[
        "--slowlog-log-slower-than",
        "0",
        "--slowlog-max-len",
        "100000",
    ]);
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("many-links");
    let path = spider(dir.path());
    let mut conn = redis.conn();
    let _: () = conn.rpush("bigmap:start_urls", sitemap(&server)).unwrap();
    let worker = Worker::spawn(&path, &redis.url(), &[], &[]);
    eventually("the sitemap is committed", Duration::from_secs(60), || {
        let queued: usize = conn.zcard("bigmap:requests").unwrap();
        let inflight: u64 = conn.zcard("bigmap:inflight").unwrap();
        (queued == URLS && inflight == 0).then_some(())
    });
    worker.kill();
    assert_each_queued_once(&mut conn, &server);
    assert_eq!(stat(&mut conn, stats::DUPEFILTER_FILTERED), 0);
    // The sitemap's start request, and its entries.
    assert_eq!(
        stat(&mut conn, stats::SCHEDULER_ENQUEUED) as usize,
        1 + URLS
    );
    let calls = script_calls(&mut conn);
    let largest = calls.iter().map(|(_, n)| *n).max().unwrap_or(0);
    assert!(
        largest <= 3 * LINKS_PER_CALL + 100,
        "a script call carried {largest} arguments: more than {LINKS_PER_CALL} links"
    );
    let parts = calls
        .iter()
        .filter(|(f, _)| f.contains("links_ahead"))
        .count();
    assert!(
        parts >= (URLS - LINKS_PER_CALL).div_ceil(LINKS_PER_CALL),
        "{parts} parts sent ahead of the commit: {calls:?}"
    );
    server.stop().await.unwrap();
}

/// Starts a worker on the sitemap and stops it (SIGSTOP) between two of
/// its parts: once some links are queued and the sitemap is not
/// committed. `None` if the sitemap was committed before it could be
/// stopped (the caller tries again on a fresh Redis).
async fn stopped_between_parts(
    redis: &RedisServer,
    server: &FixtureServer,
    spider: &Path,
) -> Option<Worker> {
    let mut conn = redis.conn();
    let _: () = conn.rpush("bigmap:start_urls", sitemap(server)).unwrap();
    let worker = Worker::spawn(
        spider,
        &redis.url(),
        &[],
        &[("CRAWLWORKER_LEASE_TIMEOUT", "2s")],
    );
    eventually("a first part is queued", Duration::from_secs(60), || {
        (conn.zcard::<_, u64>("bigmap:requests").unwrap() > 0).then_some(())
    });
    worker.signal("STOP");
    let queued: usize = conn.zcard("bigmap:requests").unwrap();
    let leased: u64 = conn.zcard("bigmap:inflight").unwrap();
    // The queue held the sitemap itself before it was leased: stopped
    // between the two, no part is queued yet, and the next worker's fetch
    // has nothing to filter. Then this try does not count.
    if queued > 0 && queued < URLS && leased == 1 {
        return Some(worker);
    }
    worker.kill();
    let _: () = redis::cmd("FLUSHALL").query(&mut conn).unwrap();
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_between_two_parts_of_a_pages_links_loses_and_doubles_nothing() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("many-links-kill");
    let path = spider(dir.path());
    let mut stopped = None;
    for _ in 0..5 {
        stopped = stopped_between_parts(&redis, &server, &path).await;
        if stopped.is_some() {
            break;
        }
    }
    let stopped =
        stopped.expect("the worker committed the sitemap before it could be stopped, five times");
    let stopped_log = stopped.log();
    stopped.kill();
    // Fetched once by each try (a try whose worker committed the sitemap
    // before it could be stopped counts too).
    let sitemap_path = sitemap(&server)
        .trim_start_matches(&server.base_url())
        .to_string();
    let fetched = server.hits(&sitemap_path);
    // Another worker takes the sitemap again when its lease runs out (it
    // comes back first in the queue) and commits it. A worker slowed down
    // enough to lose its lease fetches it once more: no loss and no
    // double either, which the queue and the dupefilter below show.
    let worker = Worker::spawn(
        &path,
        &redis.url(),
        &[],
        &[("CRAWLWORKER_IDLE_RECHECK", "100ms")],
    );
    let mut conn = redis.conn();
    let committed = || {
        let mut conn = redis.conn();
        let inflight: u64 = conn.zcard("bigmap:inflight").unwrap();
        server.hits(&sitemap_path) > fetched
            && inflight == 0
            && stat(&mut conn, stats::DUPEFILTER_FILTERED) > 0
    };
    let limit = Duration::from_secs(90);
    let start = std::time::Instant::now();
    while !committed() {
        assert!(
            start.elapsed() < limit,
            "the sitemap was not fetched again and committed within {limit:?}: \
             fetched {} times (before: {fetched}), stats {:?}, {} dead letters {:?}, \
             the stopped worker logged:\n{stopped_log}\nthe new worker logged:\n{}",
            server.hits(&sitemap_path),
            conn.hgetall::<_, Vec<(String, String)>>("bigmap:stats")
                .unwrap(),
            conn.llen::<_, usize>("bigmap:dead").unwrap(),
            conn.lrange::<_, Vec<String>>("bigmap:dead", 0, 2).unwrap(),
            worker.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    worker.kill();
    assert_each_queued_once(&mut conn, &server);
    assert_eq!(
        conn.scard::<_, usize>("bigmap:dupefilter").unwrap(),
        URLS,
        "the dupefilter holds each entry once"
    );
    server.stop().await.unwrap();
}
