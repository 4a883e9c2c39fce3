//! XPath and structured-data spiders end to end: a real Redis,
//! the demo site on a loopback fixture server, workers draining the crawl.
//!
//! - `spiders/bbs-xpath.toml`, the forum spider written in XPath, crawls
//!   the same items as `spiders/bbs.toml` (its CSS twin) and the model;
//! - `spiders/news-metadata.toml` reads every article from the page's
//!   JSON-LD and OpenGraph properties, compared with the news model;
//! - `crawlworker parse` shows what XPath fields matched.

use std::time::Duration;

use redis::Commands;
use serde_json::{json, Value};

use crawlworker::worker::StopRules;
use crawlworker_demo::{demo_tasks, News, Site};
use crawlworker_testkit::{
    crawlworker, crawlworker_with_redis, spider_for, stderr, stdout, temp_dir, FixtureServer,
    RedisServer,
};

use crate::expect::{assert_exact, expected, scraped_from};
use crate::in_process::InProcess;

/// Pushes `entries` to the spider's start key and runs one in-process
/// worker until the crawl is drained.
async fn crawl(spider: &std::path::Path, redis: &RedisServer, entries: &[String]) {
    let mut args = vec!["push-urls".to_string(), spider.display().to_string()];
    args.extend(entries.iter().cloned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = crawlworker_with_redis(&redis.url(), &args);
    assert!(out.status.success(), "push-urls: {}", stderr(&out));
    let rules = StopRules {
        until_drained: true,
        ..StopRules::default()
    };
    InProcess::start(spider, &redis.url(), &[], rules)
        .await
        .wait(Duration::from_secs(90))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xpath_spider_crawls_the_same_items_as_the_css_spider() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo())
        .await
        .unwrap_or_else(|e| panic!("cannot start the fixture server: {e}"));
    let base = server.base_url();
    let dir = temp_dir("xpath");
    let mut items = Vec::new();
    for name in ["bbs", "bbs-xpath"] {
        let spider = spider_for(name, &base, dir.path());
        crawl(&spider, &redis, &demo_tasks()).await;
        items.push(scraped_from(&mut redis.conn(), &format!("{name}:items")));
    }
    let expected = expected(&base);
    assert!(!expected.is_empty());
    assert_exact(&items[1], &expected);
    assert_eq!(items[0], items[1], "the CSS and XPath spiders differ");
    // The same requests were made: the same dupefilter fingerprints.
    let mut conn = redis.conn();
    let mut seen: Vec<Vec<String>> = Vec::new();
    for name in ["bbs", "bbs-xpath"] {
        let mut fps: Vec<String> = conn.smembers(format!("{name}:dupefilter")).unwrap();
        fps.sort();
        seen.push(fps);
    }
    assert!(!seen[0].is_empty());
    assert_eq!(seen[0], seen[1]);
    let _ = server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_spider_reads_articles_from_json_ld_and_open_graph() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo())
        .await
        .unwrap_or_else(|e| panic!("cannot start the fixture server: {e}"));
    let base = server.base_url();
    let dir = temp_dir("metadata");
    let spider = spider_for("news-metadata", &base, dir.path());
    crawl(&spider, &redis, &[format!("{base}/news/")]).await;

    let mut scraped = scraped_from(&mut redis.conn(), "news-metadata:items");
    let news = News::demo();
    let mut expected: Vec<String> = news
        .articles
        .iter()
        .map(|a| {
            crate::expect::canonical(&json!({
                "kind": "article",
                "slug": a.slug,
                "headline": a.headline,
                "summary": a.summary,
                "published": a.published,
                "section": a.section,
                "authors": a.authors(),
                "image": a.image_path().map(|p| format!("{base}{p}")),
                "tags": a.tags,
                "og_title": a.headline,
                "og_published": a.published,
                "url": format!("{base}{}", a.path()),
            }))
        })
        .collect();
    expected.sort();
    scraped.dedup();
    assert_eq!(scraped.len(), news.articles.len(), "{scraped:#?}");
    assert_exact(&scraped, &expected);
    // An article with two authors gives both, in order.
    assert!(news.articles.iter().any(|a| a.authors().len() == 2));
    let _ = server.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn parse_shows_what_xpath_fields_matched() {
    let server = FixtureServer::start(Site::demo())
        .await
        .unwrap_or_else(|e| panic!("cannot start the fixture server: {e}"));
    let site = Site::demo();
    let post = site.forum("00001").unwrap().page(1).unwrap()[0];
    let path = format!("/comment/{post}/1");
    let out = crawlworker(&[
        "parse",
        "spiders/bbs-xpath.toml",
        &server.url(&path),
        "--meta",
        r#"{"forum_id": "00001"}"#,
    ]);
    assert!(out.status.success(), "parse failed: {}", stderr(&out));
    let out: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(out["rule"], "comment");
    let comments = &site.post(post).unwrap().comments;
    let items = out["items"].as_array().unwrap();
    assert!(!items.is_empty());
    for (item, comment) in items.iter().zip(comments) {
        assert_eq!(item["fields"]["comment_id"], comment.id.to_string());
        assert_eq!(item["fields"]["forum_id"], "00001");
    }
    let _ = server.stop().await;
}
