//! JSON APIs: `spiders/bbs-api.toml` crawls the demo forum's JSON API end
//! to end (thread lists by page counter until `has_more` is false, comments
//! through their `next` links until null), `parse` shows what JSONPath
//! found, and follow entries POST form bodies, deduplicated by method, URL
//! and body as Scrapy fingerprints them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{json, Value};

use crawlworker::worker::StopRules;
use crawlworker_demo::api::{api_comment_pages, search, API_RESULTS_PER_PAGE};
use crawlworker_demo::Site;
use crawlworker_testkit::{
    crawlworker, crawlworker_with_redis, spider_for, stderr, stdout, temp_dir, FixtureServer,
    RedisServer,
};

use crate::expect::{assert_exact, canonical, scraped_from};
use crate::in_process::InProcess;

fn normalized(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every item a crawl of `forums` through the API gives, from the model.
fn expected_api_items(site: &Site, forums: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for forum in forums.iter().filter_map(|f| site.forum(f)) {
        for post in site.posts_of(forum) {
            out.push(json!({
                "kind": "thread",
                "thread_id": post.id,
                "forum_id": forum.id,
                "title": post.title.trim(),
                "author": post.author.trim(),
                "comments": post.comments.len(),
            }));
            for c in &post.comments {
                out.push(json!({
                    "kind": "comment",
                    "comment_id": c.id,
                    "thread_id": post.id,
                    "forum_id": forum.id,
                    "user": c.user.trim(),
                    "floor": c.floor,
                    "text": normalized(&c.text),
                }));
            }
        }
    }
    let mut out: Vec<String> = out.iter().map(canonical).collect();
    out.sort();
    out
}

fn push(redis: &RedisServer, spider: &std::path::Path, tasks: &[&str]) {
    let mut args = vec!["push-urls".to_string(), spider.display().to_string()];
    args.extend(tasks.iter().map(|t| t.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = crawlworker_with_redis(&redis.url(), &args);
    assert!(out.status.success(), "push-urls: {}", stderr(&out));
}

async fn crawl_until_drained(spider: &std::path::Path, redis: &RedisServer) {
    let drained = StopRules {
        until_drained: true,
        ..StopRules::default()
    };
    InProcess::start(spider, &redis.url(), &[], drained)
        .await
        .wait(Duration::from_secs(120))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_spider_crawls_every_page_and_stops_at_the_end() {
    let site = Site::demo();
    let redis = RedisServer::start();
    let server = FixtureServer::start(site.clone()).await.unwrap();
    let dir = temp_dir("json-api");
    let spider = spider_for("bbs-api", &server.base_url(), dir.path());
    let forums = ["00001", "00002", "00003"];
    let tasks: Vec<String> = forums
        .iter()
        .map(|f| json!({ "forum_id": f }).to_string())
        .collect();
    push(
        &redis,
        &spider,
        &tasks.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    crawl_until_drained(&spider, &redis).await;

    let got = scraped_from(&mut redis.conn(), "bbs-api:items");
    assert_exact(&got, &expected_api_items(&site, &forums));

    // Every list page once, up to the last, and not one past it.
    for forum in forums.iter().filter_map(|f| site.forum(f)) {
        let path = |n: usize| format!("/api/forums/{}/threads?page={n}", forum.id);
        for n in 1..=forum.page_count() {
            assert_eq!(server.hits(&path(n)), 1, "{}", path(n));
        }
        assert_eq!(server.hits(&path(forum.page_count() + 1)), 0);
    }
    // Every comment page once through `next`, none past the last, none
    // for a thread without comments.
    for post in site.posts.values() {
        let first = format!("/api/threads/{}/comments", post.id);
        let pages = api_comment_pages(post);
        assert_eq!(server.hits(&first), u64::from(pages > 0), "{first}");
        for n in 2..=pages + 1 {
            let want = u64::from(n <= pages);
            assert_eq!(
                server.hits(&format!("{first}?page={n}")),
                want,
                "{first}?page={n}"
            );
        }
    }
    let hits_beyond: Vec<(String, u64)> = server
        .hit_counts()
        .into_iter()
        .filter(|(p, _)| !p.starts_with("/api/") && p != "/robots.txt")
        .collect();
    assert!(
        hits_beyond.is_empty(),
        "fetched outside the API: {hits_beyond:?}"
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn parse_shows_what_jsonpath_found() {
    let site = Site::demo();
    let server = FixtureServer::start(site.clone()).await.unwrap();
    let out = crawlworker(&[
        "parse",
        "spiders/bbs-api.toml",
        &server.url("/api/forums/00003/threads?page=1"),
        "--meta",
        r#"{"forum_id": "00003"}"#,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["rule"], "threads");
    let forum = site.forum("00003").unwrap();
    let posts: Vec<_> = forum
        .page(1)
        .unwrap()
        .iter()
        .filter_map(|id| site.post(*id))
        .collect();
    let items: Vec<&Value> = v["items"].as_array().unwrap().iter().collect();
    assert_eq!(items.len(), posts.len());
    assert_eq!(
        items[0],
        &json!({"item": "thread", "fields": {
            "kind": "thread",
            "thread_id": posts[0].id,
            "forum_id": "00003",
            "title": posts[0].title.trim(),
            "author": posts[0].author.trim(),
            "comments": posts[0].comments.len(),
        }})
    );
    // The counted next page first (it carries its number), then each
    // thread with comments.
    let requests = v["requests"].as_array().unwrap();
    assert_eq!(
        requests[0],
        json!({
            "url": server.url("/api/forums/00003/threads?page=2"),
            "priority": 0,
            "depth": 1,
            "rule": "threads",
            "meta": {"forum_id": "00003", "page": 2},
        })
    );
    let commented: Vec<Value> = posts
        .iter()
        .filter(|p| !p.comments.is_empty())
        .map(|p| json!(server.url(&format!("/api/threads/{}/comments", p.id))))
        .collect();
    let urls: Vec<Value> = requests[1..].iter().map(|r| r["url"].clone()).collect();
    assert_eq!(urls, commented);
    assert_eq!(
        requests[1]["meta"]["thread_id"],
        json!(posts.iter().find(|p| !p.comments.is_empty()).unwrap().id)
    );

    // The last page: no next page, counted as the end of the pagination.
    let out = crawlworker(&[
        "parse",
        "spiders/bbs-api.toml",
        &server.url("/api/forums/00003/threads?page=2"),
        "--meta",
        r#"{"forum_id": "00003", "page": 2}"#,
    ]);
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["filtered"]["pagination"], 1);
    assert!(v["requests"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["rule"] == "comments"));

    // A page that is not JSON says so.
    let out = crawlworker(&[
        "parse",
        "spiders/bbs-api.toml",
        &server.url("/list/00001/1"),
        "--rule",
        "threads",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(
        v["json_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("the response is not JSON")),
        "{v}"
    );
    assert_eq!(v["items"], json!([]));
    server.stop().await.unwrap();
}

/// A spider that searches each author of a forum's first thread page by a
/// POST form, and pages through the results by POSTing the next page
/// number to the same URL.
fn search_spider(base: &str) -> String {
    format!(
        r#"
name = "search"
allowed_domains = ["127.0.0.1"]

[settings]
allow_private_networks = true

[start]
task_fields = ["forum_id"]
url = "{base}/api/forums/{{forum_id}}/threads?page=1"
rule = "threads"

[items.hit]
author = {{ meta = "author", required = true }}
thread_id = {{ json = "$.thread_id", type = "int", required = true }}
title = {{ json = "$.title" }}

[[rules]]
name = "threads"

  [[rules.follow]]
  each = "$.threads[*]"
  url = "/api/search"
  form = {{ author = "{{author}}" }}
  rule = "search"
  meta = ["author"]

[[rules]]
name = "search"

  [[rules.extract]]
  item = "hit"
  each = "$.results[*]"

  [[rules.follow]]
  url = "/api/search"
  form = {{ author = "{{author}}", page = "{{page}}" }}
  counter = "page"
  until = {{ last = "$.total_pages" }}
  rule = "search"
  meta = ["author"]
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_bodies_reach_the_server_and_only_identical_ones_are_deduplicated() {
    let site = Site::demo();
    let redis = RedisServer::start();
    let server = FixtureServer::start(site.clone()).await.unwrap();
    let dir = temp_dir("json-post");
    let spider = dir.path().join("search.toml");
    std::fs::write(&spider, search_spider(&server.base_url())).unwrap();
    // The same list page twice (start requests skip the dupefilter): its
    // POSTs are made twice, and the second time they are duplicates.
    push(
        &redis,
        &spider,
        &[
            r#"{"forum_id": "00001"}"#,
            r#"{"forum_id": "00001", "again": true}"#,
        ],
    );
    crawl_until_drained(&spider, &redis).await;
    assert_eq!(server.hits("/api/forums/00001/threads?page=1"), 2);

    let forum = site.forum("00001").unwrap();
    let authors: BTreeSet<String> = forum
        .page(1)
        .unwrap()
        .iter()
        .filter_map(|id| site.post(*id))
        .map(|p| p.author.trim().to_string())
        .collect();
    let form = |author: &str, page: Option<usize>| {
        let mut f = url::form_urlencoded::Serializer::new(String::new());
        f.append_pair("author", author);
        if let Some(n) = page {
            f.append_pair("page", &n.to_string());
        }
        f.finish()
    };
    let mut want_bodies = Vec::new();
    let mut want_items = Vec::new();
    let mut pages_of: BTreeMap<&str, usize> = BTreeMap::new();
    for author in &authors {
        let found = search(&site, author);
        let pages = found.len().div_ceil(API_RESULTS_PER_PAGE);
        pages_of.insert(author, pages);
        want_bodies.push(form(author, None));
        want_bodies.extend((2..=pages).map(|n| form(author, Some(n))));
        want_items.extend(found.iter().map(|p| {
            canonical(&json!({"author": author, "thread_id": p.id, "title": p.title.trim()}))
        }));
    }
    assert!(
        pages_of.values().any(|n| *n > 1),
        "the demo needs an author with more than one page of results: {pages_of:?}"
    );
    want_bodies.sort();
    want_items.sort();

    // Each distinct body reached the server exactly once: page 2 of a
    // search (same URL, another body) was fetched, the second list page's
    // identical POSTs were not.
    let mut bodies: Vec<String> = server
        .bodies("/api/search")
        .into_iter()
        .map(|b| String::from_utf8(b).unwrap())
        .collect();
    bodies.sort();
    assert_eq!(bodies, want_bodies);
    assert_exact(
        &scraped_from(&mut redis.conn(), "search:items"),
        &want_items,
    );
    server.stop().await.unwrap();
}
