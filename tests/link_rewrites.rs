//! A follow entry's `rewrite`: the links a forum engine writes with a
//! bookmark (`?page=2#unread`) and back to a first page (`?page=1`) are
//! followed as the thread's one URL, so the dupefilter sees one page;
//! `parse` shows each link before and after.

use std::process::Command;

use serde_json::Value;

use crawlworker_demo::Site;
use crawlworker_testkit::{binary, crawlworker, stderr, stdout, temp_dir, FixtureServer};

fn spider(rewrites: bool) -> String {
    let (unread, pager) = match rewrites {
        true => (
            "rewrite = { remove_query = [\"page\"] }",
            "rewrite = { remove_query = [\"page=1\"] }",
        ),
        false => ("", ""),
    };
    format!(
        r#"name = "threads"
[settings]
allow_private_networks = true
robotstxt_obey = false
[items.thread]
title = {{ css = "h1 ::text", join = "" }}
url = {{ page = "url" }}
[[rules]]
name = "index"
match = '/threads/$'
  [[rules.follow]]
  css = "a.unread::attr(href)"
  rule = "thread"
  {unread}
[[rules]]
name = "thread"
match = '/threads/\d+'
  [[rules.extract]]
  item = "thread"
  [[rules.follow]]
  css = "div.pager a::attr(href)"
  rule = "thread"
  {pager}
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewritten_links_are_one_page_to_the_dupefilter_and_parse_shows_them() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("rewrites");
    let path = dir.path().join("threads.toml");
    let threads = crawlworker_demo::threads::THREADS;

    // parse: each link as found and as followed.
    std::fs::write(&path, spider(true)).unwrap();
    let out = crawlworker(&["parse", path.to_str().unwrap(), &server.url("/threads/")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        v["rewritten"][0],
        serde_json::json!({
            "from": server.url("/threads/1?page=2"),
            "to": server.url("/threads/1"),
        }),
        "{v}"
    );
    assert_eq!(v["requests"][0]["url"], server.url("/threads/1"), "{v}");
    assert_eq!(v["requests"].as_array().unwrap().len(), threads, "{v}");

    // A crawl fetches each thread once, under its one URL.
    let crawl = |spider: &str| {
        std::fs::write(&path, spider).unwrap();
        let out = Command::new(binary())
            .args(["run", path.to_str().unwrap(), "--local", "--start"])
            .arg(server.url("/threads/"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out).lines().count()
    };
    assert_eq!(crawl(&spider(true)), threads);
    for n in 1..=threads {
        assert_eq!(
            server.hits(&format!("/threads/{n}")),
            1,
            "{:?}",
            server.hit_counts()
        );
        assert_eq!(server.hits(&format!("/threads/{n}?page=1")), 0);
    }
    // Without the rewrites, each thread is two pages to the dupefilter.
    assert_eq!(crawl(&spider(false)), 2 * threads);
    assert_eq!(
        server.hits("/threads/1?page=2"),
        1,
        "{:?}",
        server.hit_counts()
    );
}
