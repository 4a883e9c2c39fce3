//! Per-element and nested fields, dates and transforms on the demo's
//! thread pages, crawled through Redis: tags with markup inside give one
//! text each, posts one object each with their quoted replies nested as
//! the page nests them, dates absolute in several formats and relative in
//! English and Chinese come out in RFC 3339, and a jq transform turns
//! "1,234 views" into 1234. `parse` shows the same structure.

use std::time::Duration;

use chrono::{DateTime, FixedOffset, Utc};
use redis::Commands;
use serde_json::{json, Value};

use crawlworker_demo::threads::Thread;
use crawlworker_demo::Site;
use crawlworker_testkit::{
    crawlworker, stderr, stdout, temp_dir, FixtureServer, RedisServer, Worker,
};

/// The issue's own shapes: `each`, `fields`, `type = "datetime"` with
/// formats and a time zone, a jq `transform`.
const SPIDER: &str = r#"name = "threads"
[settings]
allow_private_networks = true
robotstxt_obey = false
[items.thread]
url = { page = "url" }
title = { css = "h1 ::text", join = "" }
tags = { each = "ul.tags li", css = " ::text", join = "" }
posts = { each = "div.post", fields = { author = "span.author::text", text = { css = "div.body > p ::text", join = " ", whitespace = "normalize" }, quotes = { each = "blockquote", css = " ::text", join = "", whitespace = "normalize" }, posted = { css = "span.date::text", type = "datetime", formats = ["%Y-%m-%d %H:%M", "%b %d, %Y %I:%M %p"], timezone = "Asia/Shanghai" }, views = { css = "span.views::text", transform = 'gsub("[^0-9]"; "") | tonumber' } } }
[[rules]]
name = "index"
match = '/threads/$'
  [[rules.follow]]
  css = "a.thread::attr(href)"
[[rules]]
name = "thread"
match = '/threads/\d+$'
  [[rules.extract]]
  item = "thread"
"#;

/// A relative date read at a time between `from` and `to`.
fn relative(posted: &Value, from: DateTime<Utc>, to: DateTime<Utc>, back: chrono::Duration) {
    let at = posted
        .as_str()
        .unwrap_or_else(|| panic!("no date: {posted}"));
    let at: DateTime<FixedOffset> = DateTime::parse_from_rfc3339(at).unwrap();
    let slack = chrono::Duration::minutes(1);
    assert!(
        at >= from - back - slack && at <= to - back + slack,
        "{at} not {back} before {from}..{to}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_pages_give_per_element_nested_dated_and_transformed_fields() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("threads");
    let path = dir.path().join("threads.toml");
    std::fs::write(&path, SPIDER).unwrap();
    let mut conn = redis.conn();
    let _: () = conn
        .rpush("threads:start_urls", server.url("/threads/"))
        .unwrap();
    let from = Utc::now();
    let worker = Worker::spawn(&path, &redis.url(), &["--until-drained"], &[]);
    let (status, log) = worker.wait(Duration::from_secs(60));
    assert!(status.success(), "{log}");
    let to = Utc::now();
    let mut items: Vec<Value> = conn
        .lrange::<_, Vec<String>>("threads:items", 0, -1)
        .unwrap()
        .iter()
        .map(|i| serde_json::from_str(i).unwrap())
        .collect();
    items.sort_by_key(|i| i["url"].as_str().unwrap_or_default().to_string());
    assert_eq!(items.len(), Thread::all().len(), "{items:?}");
    for (item, thread) in items.iter().zip(Thread::all()) {
        assert_eq!(item["title"], thread.title, "{item}");
        let tags = item.get("tags").cloned().unwrap_or(Value::Null);
        match thread.tags {
            [] => assert!(tags.is_null() || tags == json!([]), "{item}"),
            want => assert_eq!(tags, json!(want), "{item}"),
        }
        let posts = item["posts"].as_array().unwrap_or_else(|| panic!("{item}"));
        assert_eq!(posts.len(), thread.posts.len(), "{item}");
        for (got, want) in posts.iter().zip(thread.posts) {
            assert_eq!(got["author"], want.author, "{got}");
            assert_eq!(got["text"], want.text, "{got}");
            assert_eq!(got["views"], want.views, "{got}");
            let quotes = got.get("quotes").cloned().unwrap_or(Value::Null);
            match want.quotes {
                [] => assert!(quotes.is_null() || quotes == json!([]), "{got}"),
                q => assert_eq!(quotes, json!(q), "{got}"),
            }
            match want.posted {
                Some(date) => assert_eq!(got["posted"], date, "{got}"),
                None if want.date == "3 hours ago" => {
                    relative(&got["posted"], from, to, chrono::Duration::hours(3))
                }
                None => {
                    // 昨天 14:02: the day before the fetch, in UTC+8.
                    let at = got["posted"].as_str().unwrap_or_else(|| panic!("{got}"));
                    let at = DateTime::parse_from_rfc3339(at).unwrap();
                    let shanghai = FixedOffset::east_opt(8 * 3600).unwrap();
                    let today = to.with_timezone(&shanghai).date_naive();
                    assert_eq!(
                        at.with_timezone(&shanghai).date_naive(),
                        today.pred_opt().unwrap(),
                        "{got}"
                    );
                    assert_eq!(
                        at.with_timezone(&shanghai).format("%H:%M").to_string(),
                        "14:02"
                    );
                }
            }
        }
    }

    // `parse` shows the same structure.
    let out = crawlworker(&["parse", path.to_str().unwrap(), &server.url("/threads/2")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let post = &out["items"][0]["fields"]["posts"][0];
    assert_eq!(
        post["quotes"],
        json!(["outer reply inner reply", "inner reply"]),
        "{out}"
    );
    assert_eq!(post["views"], 1_000_000, "{out}");
    server.stop().await.unwrap();
}
