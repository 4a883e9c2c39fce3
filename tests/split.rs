//! Split pipelines: `spiders/bbs-list.toml` scans list pages and hands each
//! thread to `spiders/bbs-detail.toml` (`to_spider`), which crawls posts
//! and comments. Run side by side, the pair gives exactly the items of
//! `spiders/bbs.toml`, fetches each post once, and a thread can be crawled
//! again by pushing its task by hand. `check` refuses hand-offs that could
//! not work.

use std::time::Duration;

use redis::Commands;

use crawlworker::worker::StopRules;
use crawlworker_demo::{demo_tasks, Site};
use crawlworker_testkit::{
    crawlworker, crawlworker_with_redis, eventually, spider_for, stderr, temp_dir, FixtureServer,
    RedisServer,
};

use crate::expect::{assert_exact, expected, scraped_from};
use crate::in_process::InProcess;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_spider_feeding_a_detail_spider_gives_the_items_of_the_single_spider() {
    let redis = RedisServer::start();
    let server = FixtureServer::start_with_latency(Site::demo(), Duration::from_millis(10))
        .await
        .unwrap();
    let dir = temp_dir("split");
    let list = spider_for("bbs-list", &server.base_url(), dir.path());
    let detail = spider_for("bbs-detail", &server.base_url(), dir.path());
    let mut args = vec!["push-urls".to_string(), list.display().to_string()];
    args.extend(demo_tasks());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = crawlworker_with_redis(&redis.url(), &args);
    assert!(out.status.success(), "push-urls: {}", stderr(&out));

    // The detail worker runs until the test stops it (with
    // `--until-drained` it would stop once the list spider is drained too:
    // `split_drain.rs`).
    let detail_worker = InProcess::start(&detail, &redis.url(), &[], StopRules::default()).await;
    let drained = StopRules {
        until_drained: true,
        ..StopRules::default()
    };
    let list_worker = InProcess::start(&list, &redis.url(), &[], drained).await;
    list_worker.wait(Duration::from_secs(120)).await;
    let mut conn = redis.conn();
    eventually(
        "bbs-detail has done every task",
        Duration::from_secs(120),
        || {
            let waiting: u64 = conn.llen("bbs-detail:start_urls").ok()?;
            let queued: u64 = conn.zcard("bbs-detail:requests").ok()?;
            let leased: u64 = conn.zcard("bbs-detail:inflight").ok()?;
            (waiting + queued + leased == 0).then_some(())
        },
    );
    detail_worker.stop().await;

    let got = scraped_from(&mut conn, "bbs-detail:items");
    assert_exact(&got, &expected(&server.base_url()));
    let list_items: u64 = conn.llen("bbs-list:items").unwrap();
    assert_eq!(list_items, 0, "the list spider extracts nothing");
    // Every thread was handed over once, though its list page may be
    // scanned again: the list spider's dupefilter let each through once.
    let posts = got
        .iter()
        .filter(|i| i.contains(r#""kind":"post""#))
        .count();
    let handed: u64 = conn.hget("bbs-list:stats", "scheduler/handed_off").unwrap();
    assert_eq!(handed as usize, posts);
    let twice: Vec<_> = server
        .hit_counts()
        .into_iter()
        // Each spider reads robots.txt for itself.
        .filter(|(path, n)| *n > 1 && !path.starts_with("/list/") && path != "/robots.txt")
        .collect();
    assert!(twice.is_empty(), "fetched twice: {twice:?}");

    // Detail work is re-triggered by pushing its task by hand.
    let post = serde_json::from_str::<serde_json::Value>(
        got.iter().find(|i| i.contains(r#""kind":"post""#)).unwrap(),
    )
    .unwrap();
    let task = serde_json::json!({"url": post["url"], "meta": {"forum_id": post["forum_id"]}});
    let out = crawlworker_with_redis(
        &redis.url(),
        &["push-urls", detail.to_str().unwrap(), &task.to_string()],
    );
    assert!(out.status.success(), "push-urls: {}", stderr(&out));
    let before = got.len();
    let again = InProcess::start(
        &detail,
        &redis.url(),
        &[],
        StopRules {
            until_drained: true,
            ..StopRules::default()
        },
    )
    .await;
    again.wait(Duration::from_secs(60)).await;
    let after: u64 = conn.llen("bbs-detail:items").unwrap();
    assert_eq!(
        after as usize,
        before + 1,
        "the post was crawled again (its comments were seen)"
    );
    let _ = server.stop().await;
}

/// Writes `text` as `<dir>/<name>.toml`.
fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

const LIST: &str = r#"
name = "list"
[start]
task_fields = ["forum_id"]
url = "http://127.0.0.1:9/list/{forum_id}"
rule = "list"
[keys]
mode = "cluster"
[[rules]]
name = "list"
  [[rules.follow]]
  css = "a::attr(href)"
  to_spider = "detail"
  META
"#;

const DETAIL: &str = r#"
name = "detail"
[start]
task_fields = ["forum_id"]
rule = "post"
[keys]
mode = "cluster"
TAG
[[rules]]
name = "post"
  [[rules.extract]]
  item = "post"
[items.post]
title = "h1::text"
"#;

#[test]
fn check_refuses_hand_offs_that_could_not_work() {
    let dir = temp_dir("split-check");
    let list = write(
        dir.path(),
        "list",
        &LIST.replace("META", r#"meta = ["forum_id"]"#),
    );
    let check = |path: &std::path::Path| crawlworker(&["check", path.to_str().unwrap()]);

    // No detail.toml beside it.
    let out = check(&list);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("put the `detail` spider file beside this one"),
        "{}",
        stderr(&out)
    );

    // In cluster mode the two must share a hash tag.
    write(dir.path(), "detail", &DETAIL.replace("TAG", ""));
    let out = check(&list);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(r#"hash_tag = "list""#),
        "{}",
        stderr(&out)
    );
    write(
        dir.path(),
        "detail",
        &DETAIL.replace("TAG", r#"hash_tag = "list""#),
    );
    let out = check(&list);
    assert!(out.status.success(), "{}", stderr(&out));

    // The task fields the detail spider requires must be passed on.
    write(dir.path(), "list", &LIST.replace("META", ""));
    let out = check(&list);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(r#"carry them: meta = ["forum_id"]"#),
        "{}",
        stderr(&out)
    );
}
