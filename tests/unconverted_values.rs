//! No silent nulls: a value a field cannot convert to its `type` is
//! counted per item type and field (`extract/unconverted_field_count/…`),
//! warned about once per field with the value, and listed by `parse`.

use std::time::Duration;

use serde_json::Value;

use crawlworker_demo::Site;
use crawlworker_testkit::{
    crawlworker, crawlworker_with_redis, push_urls, spider_for, stderr, stdout, temp_dir,
    FixtureServer, RedisServer, Worker,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unconverted_value_is_counted_per_field_warned_once_and_listed_by_parse() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("unconverted");
    let spider = spider_for("bbs", &server.base_url(), dir.path());
    // An author's name is no whole number.
    let text = std::fs::read_to_string(&spider).unwrap().replace(
        "author = \"div.meta span.author::text\"",
        "author = { css = \"div.meta span.author::text\", type = \"int\" }",
    );
    std::fs::write(&spider, text).unwrap();
    push_urls(
        &redis.url(),
        &spider,
        &[r#"{"forum_id": "00001", "max_page": 1}"#.to_string()],
    );
    let worker = Worker::spawn(&spider, &redis.url(), &["--until-drained"], &[]);
    let (status, log) = worker.wait(Duration::from_secs(60));
    assert!(status.success(), "{log}");

    let out = crawlworker_with_redis(&redis.url(), &["stats", spider.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stats: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let count = |name: &str| {
        let v = &stats["stats"][name];
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    };
    let posts = crawlworker_demo::POSTS_PER_LIST_PAGE as u64;
    assert_eq!(
        count("extract/unconverted_field_count/post.author"),
        Some(posts),
        "{stats}"
    );
    assert_eq!(count("extract/unconverted_count"), Some(posts), "{stats}");
    // The items are pushed, without the author.
    assert!(count("item_scraped_count").unwrap_or(0) >= posts, "{stats}");
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("field `author` of item `post` went without a value"))
        .collect();
    assert_eq!(warned.len(), 1, "{log}");
    assert!(
        warned[0].contains("is not a whole number")
            && warned[0].contains("extract/unconverted_field_count/post.author"),
        "{}",
        warned[0]
    );

    let post = Site::demo().forum("00001").unwrap().page(1).unwrap()[0];
    let out = crawlworker(&[
        "parse",
        spider.to_str().unwrap(),
        &server.url(&format!("/post/{post}")),
        "--meta",
        r#"{"forum_id": "00001"}"#,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let parsed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let listed = &parsed["unconverted"][0];
    assert_eq!(
        (&listed["item"], &listed["field"]),
        (&Value::from("post"), &Value::from("author")),
        "{parsed}"
    );
    assert!(
        listed["reason"]
            .as_str()
            .unwrap()
            .ends_with("is not a whole number"),
        "{parsed}"
    );
}
