//! Sitemaps and feeds as sources: a crawl from a sitemap index
//! (one of its sitemaps gzip-compressed), an RSS feed and an Atom feed
//! reaches exactly the posts they list; a revisited sitemap skips entries
//! not modified since its last visit and fetches modified ones again.

use std::time::Duration;

use redis::Commands;
use serde_json::Value;

use crawlworker_demo::Site;
use crawlworker_testkit::{eventually, temp_dir, FixtureServer, RedisServer, Robots, Worker};

use crate::expect::{post_urls, stats_json};

const SPIDER: &str = r#"name = "sources"
[settings]
allow_private_networks = true
[items.post]
url = { page = "url" }
title = { css = "h1.post-title::text", required = true }
[[rules]]
name = "sitemap"
match = '/fault/sitemap'
revisit = "300ms"
  [[rules.follow]]
  sitemap = true
  rule = "post"
[[rules]]
name = "feed"
match = '/fault/feed/'
  [[rules.follow]]
  feed = true
  rule = "post"
[[rules]]
name = "post"
match = '/post/\d+$'
  [[rules.extract]]
  item = "post"
"#;

/// `url` percent-encoded as one query value.
fn encoded(url: &str) -> String {
    url::form_urlencoded::byte_serialize(url.as_bytes()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_starts_from_a_sitemap_index_and_from_rss_and_atom_feeds() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("sources");
    let path = dir.path().join("sources.toml");
    std::fs::write(&path, SPIDER).unwrap();
    let posts: Vec<String> = post_urls(&server.base_url()).into_iter().take(14).collect();
    let list = |urls: &[String]| urls.join("+");
    // A gzip sitemap, one whose pages were last modified long ago, one
    // whose page is always newer than the last visit.
    let gzip = server.url(&format!("/fault/sitemap?to={}&gzip=1", list(&posts[0..4])));
    let old = server.url(&format!(
        "/fault/sitemap?to={}&lastmod=2020-01-01",
        list(&posts[4..6])
    ));
    let fresh = server.url(&format!(
        "/fault/sitemap?to={}&lastmod=2999-01-01T00:00:00Z",
        list(&posts[6..7])
    ));
    let index = server.url(&format!(
        "/fault/sitemap-index?to={}+{}+{}",
        encoded(&gzip),
        encoded(&old),
        encoded(&fresh)
    ));
    let rss = server.url(&format!("/fault/feed/rss?to={}", list(&posts[7..10])));
    let atom = server.url(&format!("/fault/feed/atom?to={}", list(&posts[10..14])));
    let mut conn = redis.conn();
    let _: () = conn
        .rpush("sources:start_urls", vec![&index, &rss, &atom])
        .unwrap();
    let worker = Worker::spawn(
        &path,
        &redis.url(),
        &[],
        &[("CRAWLWORKER_IDLE_RECHECK", "50ms")],
    );
    let path_of = |url: &str| url.trim_start_matches(&server.base_url()).to_string();
    // Every listed post, and the always-modified one three times over.
    eventually(
        "every post, one of them again",
        Duration::from_secs(30),
        || {
            (posts.iter().all(|p| server.hits(&path_of(p)) >= 1)
                && server.hits(&path_of(&posts[6])) >= 3)
                .then_some(())
        },
    );
    worker.terminate();
    let (status, log) = worker.wait(Duration::from_secs(30));
    assert!(status.success(), "{log}");
    let items: Vec<Value> = conn
        .lrange::<_, Vec<String>>("sources:items", 0, -1)
        .unwrap()
        .iter()
        .map(|i| serde_json::from_str(i).unwrap())
        .collect();
    let mut got: Vec<String> = items
        .iter()
        .map(|i| i["url"].as_str().unwrap().to_string())
        .filter(|u| u != &posts[6])
        .collect();
    got.sort();
    let mut want: Vec<String> = posts.clone();
    want.retain(|u| u != &posts[6]);
    want.sort();
    // Once each: a sitemap revisited every 300 ms skips what it listed
    // before (the dupefilter, and lastmod older than its last visit).
    assert_eq!(got, want);
    for p in posts.iter().filter(|p| *p != &posts[6]) {
        assert_eq!(server.hits(&path_of(p)), 1, "{p}");
    }
    let s = stats_json(&redis.url(), &path.display().to_string());
    assert!(
        s["stats"]["follow/filtered/not_modified"]
            .as_u64()
            .unwrap_or(0)
            >= 2,
        "{s}"
    );
    let _ = server.stop().await;
}

/// `[start] sitemap` and `feed` are queued once per crawl, whichever worker
/// starts first, with the rule that reads them: no start entry is pushed.
/// The sitemap seed is a robots.txt, whose `Sitemap:` line leads on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_sitemaps_and_feeds_are_seeded_once_per_crawl() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("seeds");
    let posts: Vec<String> = post_urls(&server.base_url()).into_iter().take(6).collect();
    let sitemap = server.url(&format!("/fault/sitemap?to={}", posts[0..3].join("+")));
    let feed = server.url(&format!("/fault/feed/atom?to={}", posts[3..6].join("+")));
    // The sitemap is found through robots.txt's `Sitemap:` line.
    server.set_robots(Robots::Body(format!(
        "User-agent: *\nDisallow: /private/\nSitemap: {sitemap}\n"
    )));
    let robots = server.url("/robots.txt");
    let path = dir.path().join("sources.toml");
    std::fs::write(
        &path,
        // Without the revisit, so each source is fetched at its seeding only.
        SPIDER.replace("revisit = \"300ms\"\n", "").replace(
            "[settings]",
            &format!("[start]\nsitemap = \"{robots}\"\nfeed = [\"{feed}\"]\n[settings]"),
        ),
    )
    .unwrap();
    let workers: Vec<Worker> = (0..2)
        .map(|_| Worker::spawn(&path, &redis.url(), &["--until-drained"], &[]))
        .collect();
    for w in workers {
        let (status, log) = w.wait(Duration::from_secs(30));
        assert!(status.success(), "{log}");
    }
    let path_of = |url: &str| url.trim_start_matches(&server.base_url()).to_string();
    assert_eq!(server.hits("/robots.txt"), 1);
    assert_eq!(server.hits(&path_of(&sitemap)), 1);
    assert_eq!(server.hits(&path_of(&feed)), 1);
    let mut conn = redis.conn();
    let mut got: Vec<String> = conn
        .lrange::<_, Vec<String>>("sources:items", 0, -1)
        .unwrap()
        .iter()
        .map(|i| {
            serde_json::from_str::<Value>(i).unwrap()["url"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    got.sort();
    let mut want = posts.clone();
    want.sort();
    assert_eq!(got, want);
    let seeds: u64 = conn.hlen("sources:schedule:seeds").unwrap();
    assert_eq!(seeds, 2);
    let _ = server.stop().await;
}

/// Reads sitemaps and feeds within 64 KiB, each to the posts it lists.
const SMALL: &str = r#"name = "small"
[settings]
allow_private_networks = true
download_maxsize = 65536
[items.post]
url = { page = "url" }
[[rules]]
name = "sitemap"
match = '/fault/sitemap'
  [[rules.follow]]
  sitemap = true
  rule = "post"
[[rules]]
name = "feed"
match = '/fault/(feed/|links)'
  [[rules.follow]]
  feed = true
  rule = "post"
[[rules]]
name = "post"
match = '/post/\d+$'
  [[rules.extract]]
  item = "post"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_too_large_or_malformed_is_a_failure_with_its_reason() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("broken-sources");
    let path = dir.path().join("small.toml");
    std::fs::write(&path, SMALL).unwrap();
    let posts: Vec<String> = post_urls(&server.base_url()).into_iter().take(4).collect();
    // A gzip sitemap of a few hundred bytes that unpacks to 200 KB; a
    // sitemap cut off inside its second entry; a feed cut off; a page
    // where a feed should be.
    let bomb = server.url(&format!("/fault/sitemap?to={}&gzip=1&pad=200000", posts[0]));
    let head = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n";
    let first = format!("<url><loc>{}</loc></url>\n", posts[1]);
    let cut = head.len() + first.len() + 15;
    let sitemap = server.url(&format!(
        "/fault/sitemap?to={}+{}&cut={cut}",
        posts[1], posts[2]
    ));
    let feed = server.url(&format!("/fault/feed/rss?to={}&cut=150", posts[3]));
    let page = server.url(&format!("/fault/links?to={}", posts[3]));
    let sources = [&bomb, &sitemap, &feed, &page];
    let mut conn = redis.conn();
    let _: () = conn.rpush("small:start_urls", &sources).unwrap();
    let worker = Worker::spawn(&path, &redis.url(), &["--until-drained"], &[]);
    let (status, log) = worker.wait(Duration::from_secs(60));
    assert!(status.success(), "{log}");

    // What came before the cut is crawled; nothing else.
    let items: Vec<String> = conn.lrange("small:items", 0, -1).unwrap();
    assert_eq!(items.len(), 1, "{items:?}");
    assert!(items[0].contains(&posts[1]), "{items:?}");
    let failed: Vec<Value> = conn
        .lrange::<_, Vec<String>>("small:failed", 0, -1)
        .unwrap()
        .iter()
        .map(|f| serde_json::from_str(f).unwrap())
        .collect();
    let reason = |url: &str| {
        let f = failed.iter().find(|f| f["url"] == url);
        let f = f.unwrap_or_else(|| panic!("{url} not in failed: {failed:?}"));
        f["reason"].as_str().unwrap_or_default().to_string()
    };
    assert_eq!(failed.len(), 4, "{failed:?}");
    assert!(reason(&bomb).contains("more than download_maxsize (65536 bytes)"));
    assert!(reason(&sitemap).contains("ends before </urlset> closes"));
    assert!(reason(&sitemap).contains("1 entry read before"));
    assert!(reason(&feed).starts_with("the response is not a readable feed"));
    assert!(reason(&page).starts_with("the response is not a readable feed"));
    for url in sources {
        assert!(
            log.contains(&format!("url={url}")),
            "no log line for {url}: {log}"
        );
    }
    let s = stats_json(&redis.url(), &path.display().to_string());
    assert_eq!(s["stats"]["extract/unreadable_count"], 4, "{s}");
    assert_eq!(
        s["stats"]["extract/unreadable_kind_count/too_large"], 1,
        "{s}"
    );
    assert_eq!(s["stats"]["failed/count"], 4, "{s}");

    // `parse` says the same.
    let out = crawlworker_testkit::crawlworker(&["parse", path.to_str().unwrap(), &bomb]);
    assert!(
        out.status.success(),
        "{}",
        crawlworker_testkit::stderr(&out)
    );
    let out: Value = serde_json::from_str(&crawlworker_testkit::stdout(&out)).unwrap();
    assert_eq!(out["unreadable"]["kind"], "too_large", "{out}");
    let note = out["note"].as_str().unwrap_or_default();
    assert!(note.contains("more than download_maxsize"), "{out}");
    assert!(note.contains("records this page as failed"), "{out}");
    server.stop().await.unwrap();
}
