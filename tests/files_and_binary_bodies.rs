//! Links to files, and responses that are files. A crawl follows links as
//! Scrapy's link extractor does: not to a PDF, an archive, an image or a
//! script by default, to everything with `deny_extensions = []`. A binary
//! body is never read as a page: it gives no item and is counted, `parse`
//! says why, and a rule that asks for such responses (`binary = true`)
//! takes each as an item of its URL, status and headers.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use redis::Commands;
use serde_json::Value;

use crawlworker_demo::Site;
use crawlworker_testkit::{
    crawlworker, stderr, stdout, temp_dir, FixtureServer, RedisServer, TempDir, Worker, DOWNLOADS,
};

use crate::expect::stats_json;

/// Every page's URL, status, headers and text; links by `a::attr(href)`.
/// `{binary}` and `{follow}` are lines added to the rule and its follow
/// entry.
const SPIDER: &str = r#"name = "{name}"
[settings]
allow_private_networks = true
[items.page]
url = { page = "url" }
status = { page = "status" }
headers = { page = "headers" }
text = { css = "body ::text", join = " ", whitespace = "normalize" }
[[rules]]
name = "any"
match = '/fault/'
{binary}
  [[rules.extract]]
  item = "page"
  [[rules.follow]]
  css = "a::attr(href)"
  {follow}
"#;

/// Writes spider `name` into `dir`, with `binary` and `follow` lines.
fn spider(dir: &TempDir, name: &str, binary: &str, follow: &str) -> PathBuf {
    let path = dir.path().join(format!("{name}.toml"));
    let text = SPIDER
        .replace("{name}", name)
        .replace("{binary}", binary)
        .replace("{follow}", follow);
    std::fs::write(&path, text).unwrap();
    path
}

/// What one crawl gave: its items by URL, and its stats.
struct Crawled {
    items: Vec<Value>,
    stats: Value,
}

impl Crawled {
    fn urls(&self) -> BTreeSet<&str> {
        self.items
            .iter()
            .filter_map(|i| i["url"].as_str())
            .collect()
    }

    fn stat(&self, name: &str) -> u64 {
        self.stats["stats"][name].as_u64().unwrap_or(0)
    }

    fn item(&self, url: &str) -> &Value {
        let found = self.items.iter().find(|i| i["url"] == url);
        found.unwrap_or_else(|| panic!("no item for {url} in {:?}", self.items))
    }
}

/// Crawls from `start` with the spider at `path` until the crawl is
/// drained.
fn crawl(redis: &RedisServer, path: &Path, name: &str, start: &[String]) -> Crawled {
    let mut conn = redis.conn();
    let _: () = conn.rpush(format!("{name}:start_urls"), start).unwrap();
    let worker = Worker::spawn(path, &redis.url(), &["--until-drained"], &[]);
    let (status, log) = worker.wait(Duration::from_secs(60));
    assert!(status.success(), "{log}");
    let items = conn
        .lrange::<_, Vec<String>>(format!("{name}:items"), 0, -1)
        .unwrap()
        .iter()
        .map(|i| serde_json::from_str(i).unwrap())
        .collect();
    let stats = stats_json(&redis.url(), &path.display().to_string());
    Crawled { items, stats }
}

/// The paths and queries the server answered, robots.txt left out.
fn fetched(server: &FixtureServer) -> BTreeSet<String> {
    server
        .hit_counts()
        .into_keys()
        .filter(|p| !p.starts_with("/robots.txt"))
        .collect()
}

fn file(name: &str) -> String {
    format!("/fault/file/{name}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_follows_links_as_scrapys_link_extractor_does() {
    let redis = RedisServer::start();
    let dir = temp_dir("files");

    // By default: the page among the files, none of the files.
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let path = spider(&dir, "files", "", "");
    let got = crawl(&redis, &path, "files", &[server.url("/fault/downloads")]);
    let want: BTreeSet<String> = ["/fault/downloads".to_string(), file("notes.html")].into();
    assert_eq!(fetched(&server), want);
    assert_eq!(got.stat("follow/filtered/extension"), 4, "{}", got.stats);
    assert_eq!(got.urls().len(), 2);
    server.stop().await.unwrap();

    // With `deny_extensions = []`: every link; the PDF, the archive and
    // the image are fetched but not read, the Python file is text.
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let path = spider(&dir, "files-all", "", "deny_extensions = []");
    let got = crawl(
        &redis,
        &path,
        "files-all",
        &[server.url("/fault/downloads")],
    );
    let mut want: BTreeSet<String> = DOWNLOADS.iter().map(|f| file(f)).collect();
    want.insert("/fault/downloads".to_string());
    assert_eq!(fetched(&server), want);
    assert_eq!(got.stat("follow/filtered/extension"), 0);
    assert_eq!(got.stat("extract/binary_ignored_count"), 3, "{}", got.stats);
    let text_pages: BTreeSet<String> = [
        "/fault/downloads",
        "/fault/file/notes.html",
        "/fault/file/example.py",
    ]
    .iter()
    .map(|p| server.url(p))
    .collect();
    assert_eq!(
        got.urls(),
        text_pages
            .iter()
            .map(String::as_str)
            .collect::<BTreeSet<_>>()
    );
    let python = got.item(&server.url(&file("example.py")));
    assert_eq!(python["text"], "print('hello')");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binary_body_gives_no_item_unless_its_rule_takes_binary_responses() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("binary");
    // Bytes 0–255 as application/octet-stream, a PNG as image/png and
    // without a Content-Type, a page declared image/png; then a page.
    let binary = [
        file("blob"),
        file("logo.png"),
        file("logo.png?type=none"),
        file("notes.html?type=image/png"),
    ];
    let start: Vec<String> = binary
        .iter()
        .chain(&[file("notes.html")])
        .map(|p| server.url(p))
        .collect();

    let path = spider(&dir, "binary", "", "");
    let got = crawl(&redis, &path, "binary", &start);
    assert_eq!(got.urls(), [start[4].as_str()].into());
    assert_eq!(got.stat("extract/binary_ignored_count"), 4, "{}", got.stats);

    let path = spider(&dir, "binary-taken", "binary = true", "");
    let got = crawl(&redis, &path, "binary-taken", &start);
    assert_eq!(got.stat("extract/binary_ignored_count"), 0);
    assert_eq!(got.items.len(), 5, "{:?}", got.items);
    for (url, content_type) in [
        (&start[0], Some("application/octet-stream")),
        (&start[1], Some("image/png")),
        (&start[2], None),
        (&start[3], Some("image/png")),
    ] {
        let item = got.item(url);
        assert_eq!(item["status"], 200, "{item}");
        assert_eq!(item["headers"]["content-type"].as_str(), content_type);
        assert!(item["headers"]["content-length"].is_string(), "{item}");
        assert!(item["text"].is_null(), "nothing read from {url}: {item}");
    }
    assert_eq!(
        got.item(&start[4])["text"],
        "A file A page among the files."
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parse_says_why_a_binary_body_gives_nothing_and_which_links_it_skipped() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("parse-binary");
    let path = spider(&dir, "files", "", "");
    let parse = |args: &[&str]| {
        let out = crawlworker(&[&["parse", path.to_str().unwrap()], args].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_str::<Value>(&stdout(&out)).unwrap()
    };

    let out = parse(&[&server.url(&file("logo.png"))]);
    assert_eq!(out["binary"]["content_type"], "image/png");
    assert_eq!(out["items"], Value::Array(Vec::new()));
    let note = out["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("its Content-Type is image/png") && note.contains("binary = true"),
        "{out}"
    );

    // A saved file has no headers: its bytes tell.
    let saved = dir.path().join("logo.png");
    std::fs::write(&saved, b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    let as_if = server.url(&file("logo.png"));
    let out = parse(&[saved.to_str().unwrap(), "--url", &as_if]);
    let note = out["note"].as_str().unwrap_or_default();
    assert!(note.contains("it has no Content-Type"), "{out}");

    let out = parse(&[&server.url("/fault/downloads")]);
    assert_eq!(out["filtered"]["extension"], 4, "{out}");
    let followed: Vec<&str> = out["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["url"].as_str())
        .collect();
    assert_eq!(followed, [server.url(&file("notes.html"))]);
    server.stop().await.unwrap();
}
