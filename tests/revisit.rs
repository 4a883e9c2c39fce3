//! Recurring crawls: a rule's `revisit` fetches a page again on
//! its schedule, kept in Redis, exactly once per due time across a cluster
//! of workers (one of them killed and replaced on the way), while the posts
//! it links to are crawled once.

use std::time::{Duration, Instant};

use redis::Commands;
use serde_json::Value;

use crate::expect::stats_json;

use crawlworker_demo::Site;
use crawlworker_testkit::{
    crawlworker_with_redis, eventually, stderr, temp_dir, FixtureServer, RedisServer, Worker,
};

/// Forum 00001's first list page, revisited every `every`; its posts once.
fn spider(every: &str) -> String {
    format!(
        r#"name = "news"
allowed_domains = ["127.0.0.1"]
[settings]
allow_private_networks = true
lease_timeout = "2s"
[start]
rule = "list"
[items.post]
title = {{ css = "h1.post-title::text", required = true }}
[[rules]]
name = "list"
match = '/list/'
revisit = "{every}"
  [[rules.follow]]
  css = "ul.threads a.title::attr(href)"
  rule = "post"
[[rules]]
name = "post"
match = '/post/\d+$'
  [[rules.extract]]
  item = "post"
"#
    )
}

fn stats(redis: &RedisServer, spider: &std::path::Path) -> Value {
    stats_json(&redis.url(), &spider.display().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revisited_page_is_fetched_once_per_due_time_by_a_cluster() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("revisit");
    let path = dir.path().join("news.toml");
    std::fs::write(&path, spider("1s")).unwrap();
    let list = "/list/00001/1";
    let mut conn = redis.conn();
    let _: () = conn.rpush("news:start_urls", server.url(list)).unwrap();
    let mut workers: Vec<Worker> = (0..3)
        .map(|_| Worker::spawn(&path, &redis.url(), &[], &[]))
        .collect();
    let started = Instant::now();
    // The first fetch, then one per second; a worker killed on the way and
    // one started in its place change nothing (a revisit the dead worker
    // held comes back when its lease expires).
    eventually("two revisits", Duration::from_secs(30), || {
        (server.arrivals(list).len() >= 3).then_some(())
    });
    workers.remove(0).kill();
    workers.push(Worker::spawn(&path, &redis.url(), &[], &[]));
    eventually("six revisits", Duration::from_secs(30), || {
        (server.arrivals(list).len() >= 7).then_some(())
    });
    let elapsed = started.elapsed();
    for w in &workers {
        w.terminate();
    }
    let logs: Vec<String> = workers
        .into_iter()
        .map(|w| {
            let (status, log) = w.wait(Duration::from_secs(30));
            assert!(status.success(), "{log}");
            log
        })
        .collect();
    let arrivals = server.arrivals(list);
    // Never two fetches for one due time: each comes about a second after
    // the one before (the schedule is kept from the commit, in Redis, and
    // idle workers wake when it is due: never early).
    let gaps: Vec<u128> = arrivals
        .windows(2)
        .map(|p| (p[1] - p[0]).as_millis())
        .collect();
    eprintln!("revisit gaps (ms): {gaps:?}");
    for pair in arrivals.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= Duration::from_millis(950),
            "two fetches of the list page {gap:?} apart: {arrivals:?}\n{logs:?}"
        );
    }
    assert!(
        arrivals.len() as f64 <= 2.0 + elapsed.as_secs_f64(),
        "{} fetches in {elapsed:?}",
        arrivals.len()
    );
    // The posts it links to were crawled once each, however often the list
    // page was.
    let items: Vec<String> = conn.lrange("news:items", 0, -1).unwrap();
    let posts: Vec<String> = server
        .hit_counts()
        .into_iter()
        .filter(|(path, _)| path.starts_with("/post/"))
        .map(|(path, n)| {
            assert_eq!(n, 1, "{path} fetched {n} times");
            path
        })
        .collect();
    assert!(!posts.is_empty());
    assert_eq!(items.len(), posts.len());
    let s = stats(&redis, &path);
    assert_eq!(s["queues"]["scheduled"], 1, "{s}");
    // Six revisits came due: each was queued from the schedule, or (one
    // the killed worker held) came back when its lease expired.
    let queued = s["stats"]["revisit/queued"].as_u64().unwrap_or(0);
    let expired = s["stats"]["lease/expired_count"].as_u64().unwrap_or(0);
    assert!(queued + expired >= 6 && queued >= 5, "{s}");
    let _ = server.stop().await;

    // `flush --schedule` forgets it.
    let out = crawlworker_with_redis(
        &redis.url(),
        &["flush", &path.display().to_string(), "--schedule", "--yes"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let left: Vec<String> = redis
        .keys()
        .into_iter()
        .filter(|k| k.starts_with("news:schedule"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Conditional requests, change detection and adaptive intervals, against
/// `/fault/changing` pages (see the test kit): one that never changes and
/// has an ETag, one with Last-Modified, one without validators that
/// changes on every fetch, one that changes every third fetch whose items
/// are pushed only when they changed, and one that is gone (410) on its
/// third visit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisits_ask_conditionally_adapt_their_interval_and_emit_only_changes() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("revisit-changes");
    let path = dir.path().join("pages.toml");
    let adaptive = r#"revisit = { min = "300ms", max = "2s" }"#;
    std::fs::write(
        &path,
        format!(
            r#"name = "pages"
[settings]
allow_private_networks = true
[items.page]
url = {{ page = "url" }}
version = {{ css = "p.version::text" }}
stable = {{ css = "p.stable::text" }}
[items.para]
url = {{ page = "url" }}
text = {{ css = "::text" }}
[[rules]]
name = "paras"
match = 'key=paras'
revisit = "300ms"
emit = "changed"
  [[rules.extract]]
  item = "para"
  each = "p"
[[rules]]
name = "views"
match = 'key=views'
revisit = "300ms"
emit = "changed"
change_fields = ["stable"]
  [[rules.extract]]
  item = "page"
[[rules]]
name = "emit"
match = 'key=emit'
revisit = "300ms"
emit = "changed"
  [[rules.extract]]
  item = "page"
[[rules]]
name = "others"
match = '/fault/changing'
{adaptive}
  [[rules.extract]]
  item = "page"
"#
        ),
    )
    .unwrap();
    let page = |q: &str| format!("/fault/changing?{q}");
    let same = page("every=0&validators=etag&key=same");
    let dated = page("every=0&validators=last-modified&key=dated");
    let moving = page("every=1&validators=none&key=moving");
    let emit = page("every=3&validators=none&key=emit");
    let gone = page("every=0&validators=none&key=gone&gone_after=2");
    let views = page("every=1&validators=none&key=views");
    let paras = page("every=1&validators=none&key=paras");
    let steps = page("every=4&validators=none&key=steps");
    let mut conn = redis.conn();
    for p in [&same, &dated, &moving, &emit, &gone, &views, &paras, &steps] {
        let _: () = conn.rpush("pages:start_urls", server.url(p)).unwrap();
    }
    let idle = [("CRAWLWORKER_IDLE_RECHECK", "50ms")];
    let workers: Vec<Worker> = (0..2)
        .map(|_| Worker::spawn(&path, &redis.url(), &[], &idle))
        .collect();
    eventually(
        "eight visits of the emit page",
        Duration::from_secs(30),
        || {
            (server.hits(&emit) >= 8 && server.hits(&same) >= 4 && server.hits(&steps) >= 6)
                .then_some(())
        },
    );
    for w in &workers {
        w.terminate();
    }
    for w in workers {
        let (status, log) = w.wait(Duration::from_secs(30));
        assert!(status.success(), "{log}");
    }
    let s = stats(&redis, &path);
    let stat = |name: &str| s["stats"][name].as_u64().unwrap_or(0);
    // Every visit of the two pages with validators after the first was a
    // 304, counted and not parsed (their items came once).
    let validated = server.hits(&same) + server.hits(&dated) - 2;
    assert_eq!(stat("revisit/not_modified"), validated, "{s}");
    assert_eq!(
        stat("downloader/response_status_count/304"),
        validated,
        "{s}"
    );
    let items: Vec<Value> = conn
        .lrange::<_, Vec<String>>("pages:items", 0, -1)
        .unwrap()
        .iter()
        .map(|i| serde_json::from_str(i).unwrap())
        .collect();
    let of = |p: &str| -> Vec<String> {
        items
            .iter()
            .filter(|i| i["url"] == server.url(p))
            .map(|i| i["version"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(of(&same), ["0"]);
    assert_eq!(of(&dated), ["0"]);
    // The page that changes on every visit gave an item each time.
    assert_eq!(of(&moving).len() as u64, server.hits(&moving));
    // emit = "changed": one item per version, the first visit of each.
    let versions = (server.hits(&emit) - 1) / 3 + 1;
    let expected: Vec<String> = (0..versions).map(|v| v.to_string()).collect();
    assert_eq!(of(&emit), expected, "{s}");
    // change_fields = ["stable"]: a page whose only change is a field
    // left out (a view counter) gave its item once.
    assert_eq!(of(&views), ["0"]);
    assert!(server.hits(&views) >= 3);
    // Per item: of a page with a changing and an unchanged paragraph, the
    // unchanged one was pushed once, the changing one at every visit.
    let texts: Vec<&str> = items
        .iter()
        .filter(|i| i["url"] == server.url(&paras))
        .filter_map(|i| i["text"].as_str())
        .collect();
    let hits = server.hits(&paras);
    assert_eq!(
        texts.iter().filter(|t| **t == "unchanged").count(),
        1,
        "{texts:?}"
    );
    assert_eq!(texts.len() as u64, hits + 1, "{texts:?}");
    assert_eq!(
        stat("revisit/items_unchanged"),
        server.hits(&emit) - versions + server.hits(&views) - 1 + hits - 1,
        "{s}"
    );
    // The page that went away (410 on its third visit) left the schedule.
    assert_eq!(server.hits(&gone), 3);
    assert_eq!(stat("revisit/dropped"), 1, "{s}");
    assert_eq!(s["queues"]["scheduled"], 7, "{s}");
    // The unchanged pages' intervals grew from 300 ms; the changing one's
    // stayed at the minimum.
    let mut interval = |p: &str| -> u64 {
        let fp = crawlworker::request::Request::get(&server.url(p)).fingerprint();
        let json: String = conn.hget("pages:schedule:data", fp).unwrap();
        let request: Value = serde_json::from_str(&json).unwrap();
        request["revisit"]["interval_ms"].as_u64().unwrap()
    };
    let (a, b, c) = (interval(&same), interval(&dated), interval(&moving));
    assert!(a > 500 && b > 500 && c == 300, "{a} {b} {c}");
    // A page that changes on every fourth visit: its interval grew three
    // visits long (x1.4), then shrank (x0.8) when it changed, and so on;
    // worked out from its visits as the worker does.
    let visits = server.hits(&steps);
    assert!(visits >= 6, "{visits}");
    let (min, max) = (Duration::from_millis(300), Duration::from_secs(2));
    let mut ms = 300u64;
    let mut shrank = false;
    for visit in 2..=visits {
        let changed = (visit - 1) / 4 != (visit - 2) / 4;
        let rate = if changed { 0.8 } else { 1.4 };
        let next = Duration::from_millis(ms)
            .mul_f64(rate)
            .clamp(min, max)
            .as_millis() as u64;
        shrank |= next < ms;
        ms = next;
    }
    assert!(shrank);
    assert_eq!(interval(&steps), ms, "after {visits} visits");
    let _ = server.stop().await;
}
