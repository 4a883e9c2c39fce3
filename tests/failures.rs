//! Failures an operator can see: a response the rules do not handle (a
//! 404) is logged at INFO with its URL and rule, kept with the failed
//! requests, listed by `crawlworker failed` (text, `--kind`, `--json`),
//! shown among the dashboard's recent failures, and explained by `parse`;
//! a run that ends on its own with every request failed exits with code 3.

use crate::expect::Dashboard;
use std::time::Duration;

use serde_json::Value;

use crawlworker_demo::Site;
use crawlworker_testkit::{
    crawlworker, crawlworker_with_redis, eventually_async, push_urls, spider_for, stderr, stdout,
    temp_dir, FixtureServer, RedisServer, Worker,
};

/// A forum the demo site does not have: its list page is a 404.
const GONE: &str = r#"{"forum_id": "99999", "max_page": 1}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_404_is_logged_listed_shown_and_explained() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("failures");
    let spider = spider_for("bbs", &server.base_url(), dir.path());
    let spider_arg = spider.to_str().unwrap();
    push_urls(&redis.url(), &spider, &[GONE.to_string()]);
    let gone = server.url("/list/99999/1");

    let worker = Worker::spawn(
        &spider,
        &redis.url(),
        &["--until-drained"],
        &[("CRAWLWORKER_LOG", "info")],
    );
    let (status, log) = worker.wait(Duration::from_secs(60));
    // Its one request failed: a scheduler sees it in the exit code.
    assert_eq!(status.code(), Some(3), "{log}");
    assert!(
        log.contains("spider `bbs`: every request failed for good (1 request); exit code 3"),
        "{log}"
    );
    assert!(
        log.contains(&format!("ignored response 404 {gone} (rule list)")),
        "the 404 is not logged at INFO with its URL and rule:\n{log}"
    );

    // Listed: as text, by kind, and as JSON.
    let out = crawlworker_with_redis(&redis.url(), &["failed", spider_arg]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.contains(&gone))
        .unwrap_or_else(|| panic!("`failed` does not list {gone}:\n{text}"));
    let columns: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&columns[1..4], ["404", "list", gone.as_str()], "{line}");
    assert!(line.contains("HTTP 404"), "{line}");
    assert!(stderr(&out).contains("1 failed request, newest last, of 1 in bbs:failed"));
    let none = crawlworker_with_redis(&redis.url(), &["failed", spider_arg, "--kind", "timeout"]);
    assert!(!stdout(&none).contains(&gone), "{}", stdout(&none));
    let json = crawlworker_with_redis(&redis.url(), &["failed", spider_arg, "--json", "-n", "5"]);
    let records: Vec<Value> = stdout(&json)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 1, "{}", stdout(&json));
    let r = &records[0];
    assert_eq!(
        (&r["url"], &r["kind"], &r["status"], &r["rule"]),
        (
            &Value::from(gone.clone()),
            &Value::from("404"),
            &Value::from(404),
            &Value::from("list")
        ),
        "{r}"
    );
    assert!(r["time"].as_f64().is_some_and(|t| t > 1e9), "{r}");

    // Shown among the dashboard's recent failures.
    let dashboard = Dashboard::spawn(spider_arg.as_ref(), &redis.url());
    eventually_async(
        "the dashboard shows the 404",
        Duration::from_secs(30),
        || async {
            let state = dashboard.state().await?;
            let recent = state["spiders"][0]["recent_failures"].as_array()?;
            recent
                .iter()
                .any(|f| f["url"] == gone.as_str() && f["rule"] == "list")
                .then_some(())
        },
    )
    .await;
    // A pause shows there too.
    let out = crawlworker_with_redis(&redis.url(), &["pause", spider_arg]);
    assert!(out.status.success(), "{}", stderr(&out));
    eventually_async(
        "the dashboard shows the pause",
        Duration::from_secs(30),
        || async {
            let state = dashboard.state().await?;
            (state["spiders"][0]["queues"]["paused"] == true).then_some(())
        },
    )
    .await;

    // Explained by parse: the status, and what a crawl does with it.
    let out = crawlworker(&["parse", spider_arg, &gone]);
    assert!(out.status.success(), "{}", stderr(&out));
    let parsed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(parsed["status"], 404);
    assert_eq!(parsed["rule"], "list");
    let note = parsed["note"].as_str().unwrap_or_default();
    assert!(
        note.starts_with("HTTP 404: not handled") && note.contains("rule `list` extracts nothing"),
        "{note}"
    );
    assert!(!note.contains("no rule"), "{note}");
    let _ = server.stop().await;
}
