//! One worker, many spiders (`crawlworker run DIR`): 51 generated spiders
//! share the worker's download slots fairly while one of them has a deep
//! backlog and 50 crawl seven pages one after another, and spider files added, changed, broken or removed are picked
//! up without a restart (by watching the directory, and on SIGHUP).

use std::path::Path;
use std::time::{Duration, Instant};

use redis::Commands;
use serde_json::Value;

use crawlworker_demo::Site;
use crawlworker_testkit::{eventually, temp_dir, FixtureServer, RedisServer, Worker};

use crate::expect::post_urls;

/// The top of every generated spider: its name, the fixture server's host,
/// 16 slots, and the rule its start requests go to.
fn header(name: &str, start_rule: &str) -> String {
    format!(
        r#"name = "{name}"
allowed_domains = ["127.0.0.1"]
[settings]
concurrent_requests = 16
robotstxt_obey = false
allow_private_networks = true
[start]
rule = "{start_rule}"
"#
    )
}

/// A small spider: each start URL is a post page, one item per page.
fn spider_text(name: &str, extra_field: &str) -> String {
    header(name, "post")
        + &format!(
            r#"[items.post]
title = {{ css = "h1.post-title::text", required = true }}
{extra_field}
[[rules]]
name = "post"
match = '/post/\d+$'
  [[rules.extract]]
  item = "post"
"#
        )
}

/// A small sequential spider: forum 00001's list pages 1 to `pages`, one
/// after the other (each page's next link is the only way on), one item
/// per page; so it never has more than one page in flight.
fn chain_text(name: &str, pages: usize) -> String {
    header(name, "list")
        + &format!(
            r#"[items.page]
url = {{ page = "url" }}
[[rules]]
name = "list"
match = '/list/'
  [[rules.extract]]
  item = "page"
  [[rules.follow]]
  css = "div.pager a.next::attr(href)"
  rule = "list"
  paginate = {{ page = '/list/\d+/(\d+)', max = {pages} }}
"#
        )
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(format!("{name}.toml")), text).unwrap();
}

fn pages(conn: &mut redis::Connection, spider: &str) -> u64 {
    conn.hget::<_, _, Option<u64>>(format!("{spider}:stats"), "downloader/response_count")
        .unwrap()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_spiders_share_a_worker_fairly_while_one_has_a_deep_backlog() {
    const SMALL: usize = 50;
    const EACH: usize = 7;
    const DEEP: usize = 1000;
    let redis = RedisServer::start();
    let server = FixtureServer::start_with_latency(Site::demo(), Duration::from_millis(30))
        .await
        .unwrap();
    let base = server.base_url();
    let posts = post_urls(&base);
    let dir = temp_dir("many-spiders");
    let mut conn = redis.conn();
    // Start requests skip the dupefilter (as scrapy-redis's do), so the
    // deep spider may fetch the same posts again and again.
    write(dir.path(), "deep", &spider_text("deep", ""));
    let backlog: Vec<&String> = posts.iter().cycle().take(DEEP).collect();
    let _: () = conn.rpush("deep:start_urls", backlog).unwrap();
    let small: Vec<String> = (0..SMALL).map(|i| format!("small{i:02}")).collect();
    for name in &small {
        write(dir.path(), name, &chain_text(name, EACH));
        let _: () = conn
            .rpush(format!("{name}:start_urls"), format!("{base}/list/00001/1"))
            .unwrap();
    }

    let worker = Worker::spawn(dir.path(), &redis.url(), &["--until-drained"], &[]);
    // Every small spider's pages are done long before the deep backlog;
    // the deep spider's count at that moment is its share.
    let started = Instant::now();
    let deep_then = eventually(
        "the small spiders are done",
        Duration::from_secs(120),
        || {
            let mut pipe = redis::pipe();
            for name in &small {
                pipe.hget(format!("{name}:stats"), "downloader/response_count");
            }
            let done: Vec<Option<u64>> = pipe.query(&mut conn).ok()?;
            done.iter()
                .all(|n| n.unwrap_or(0) >= EACH as u64)
                .then(|| pages(&mut conn, "deep"))
        },
    );
    let small_took = started.elapsed();
    // 16 slots, 51 spiders with work: each gets one slot's worth (16 / 51,
    // at least 1) until it runs out. The deep spider starts with all 16
    // (it may lease them before the others have looked at their keys) and
    // gains slots as the small ones finish. Without sharing it would keep
    // 16 pages waiting for slots against the small spiders' one each, and
    // take a large part of the worker (measured on a 2-core machine: 7 to 22
    // pages with sharing, 56 to 60 without).
    let bound = 16 + 2 * EACH as u64;
    assert!(
        deep_then <= bound,
        "while 50 spiders fetched {EACH} pages each ({small_took:?}), the deep one fetched {deep_then} (bound {bound})"
    );
    // The 51 spiders share one command connection and one wake-up
    // subscription (this test's own connection is the third).
    let info: String = redis::cmd("INFO").arg("clients").query(&mut conn).unwrap();
    let clients: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    let pubsub: u64 = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg("deep:wake")
        .query::<(String, u64)>(&mut conn)
        .unwrap()
        .1;
    assert_eq!((clients, pubsub), (3, 1), "{info}");
    let (status, log) = worker.wait(Duration::from_secs(180));
    assert!(status.success(), "{log}");
    assert_eq!(pages(&mut conn, "deep"), DEEP as u64, "{log}");
    for name in &small {
        let items: u64 = conn.llen(format!("{name}:items")).unwrap();
        assert_eq!(items, EACH as u64, "{name}: {log}");
    }
    eprintln!(
        "fairness: 50 × {EACH} small pages in {small_took:?}; the deep spider fetched {deep_then} meanwhile (bound {bound})"
    );
    let _ = server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spider_files_added_changed_broken_and_removed_are_picked_up_without_a_restart() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let posts = post_urls(&server.base_url());
    let dir = temp_dir("hot-reload");
    let mut conn = redis.conn();
    write(dir.path(), "alpha", &spider_text("alpha", ""));
    write(dir.path(), "beta", &spider_text("beta", ""));
    let worker = Worker::spawn(
        dir.path(),
        &redis.url(),
        &[],
        &[("CRAWLWORKER_LOG", "info")],
    );
    let push = |conn: &mut redis::Connection, spider: &str, n: usize| {
        let urls: Vec<&String> = posts.iter().take(n).collect();
        let _: () = conn.rpush(format!("{spider}:start_urls"), urls).unwrap();
    };
    let items = |conn: &mut redis::Connection, spider: &str| -> Vec<Value> {
        let raw: Vec<String> = conn.lrange(format!("{spider}:items"), 0, -1).unwrap();
        raw.iter()
            .map(|s| serde_json::from_str(s).unwrap())
            .collect()
    };
    push(&mut conn, "alpha", 2);
    eventually("alpha crawls", Duration::from_secs(30), || {
        (items(&mut conn, "alpha").len() == 2).then_some(())
    });

    // A broken file is reported (file, line, fix) and the running version
    // goes on.
    write(dir.path(), "alpha", "name = \"alpha\"\n[start]\nrule = 7\n");
    eventually(
        "the broken file is reported",
        Duration::from_secs(20),
        || {
            let log = worker.log();
            (log.contains("alpha.toml") && log.contains("keeps running its previous version"))
                .then_some(())
        },
    );
    push(&mut conn, "alpha", 3);
    eventually("alpha still crawls", Duration::from_secs(30), || {
        (items(&mut conn, "alpha").len() == 5).then_some(())
    });

    // A new file starts a new spider.
    write(dir.path(), "gamma", &spider_text("gamma", ""));
    push(&mut conn, "gamma", 2);
    eventually("gamma starts", Duration::from_secs(30), || {
        (items(&mut conn, "gamma").len() == 2).then_some(())
    });

    // A changed file replaces the running version (here: a new field), and
    // SIGHUP makes the worker look at once.
    write(
        dir.path(),
        "beta",
        &spider_text("beta", r#"version = { const = "2" }"#),
    );
    worker.signal("HUP");
    eventually("beta is reloaded", Duration::from_secs(20), || {
        worker
            .log()
            .contains("the running version finishes its pages in flight, then the new one starts")
            .then_some(())
    });
    push(&mut conn, "beta", 2);
    eventually("beta's new version crawls", Duration::from_secs(30), || {
        let got = items(&mut conn, "beta");
        (got.len() == 2 && got.iter().all(|i| i["version"] == "2")).then_some(())
    });
    assert!(worker.log().contains("SIGHUP: reloading spider files"));

    // A removed file stops its spider.
    std::fs::remove_file(dir.path().join("gamma.toml")).unwrap();
    eventually("gamma stops", Duration::from_secs(20), || {
        worker
            .log()
            .contains("spider `gamma` stopped")
            .then_some(())
    });
    // Its wake-ups are unsubscribed; the others' stay.
    let subscribers = |conn: &mut redis::Connection, spider: &str| -> u64 {
        redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(format!("{spider}:wake"))
            .query::<(String, u64)>(conn)
            .unwrap()
            .1
    };
    eventually("gamma's wake-ups end", Duration::from_secs(5), || {
        (subscribers(&mut conn, "gamma") == 0).then_some(())
    });
    assert_eq!(subscribers(&mut conn, "alpha"), 1);
    push(&mut conn, "gamma", 1);
    // A spider still running is pushed an entry after gamma's, the same
    // way: once it has crawled it, the worker has had its chance to crawl
    // gamma's.
    let crawled = items(&mut conn, "beta").len();
    push(&mut conn, "beta", 1);
    eventually(
        "beta crawls an entry pushed after gamma's",
        Duration::from_secs(30),
        || (items(&mut conn, "beta").len() == crawled + 1).then_some(()),
    );
    assert_eq!(
        items(&mut conn, "gamma").len(),
        2,
        "gamma crawled after its file was removed"
    );

    worker.terminate();
    let (status, log) = worker.wait(Duration::from_secs(30));
    assert!(status.success(), "{log}");
    let _ = server.stop().await;
}
