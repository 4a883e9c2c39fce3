//! Pinned bugs, each test named after the issue that found it.

use std::time::Duration;

use redis::Commands;

use crawlworker::frontier::{Heartbeat, KeyGroup, KeyKind, RedisFrontier, Refused, StartClaim};
use crawlworker::spider::Spider;
use crawlworker::worker::StopRules;
use crawlworker_demo::Site;
use crawlworker_testkit::{
    crawlworker, crawlworker_with_redis, eventually, spider_for, stderr, temp_dir, FixtureServer,
    RedisServer, Robots, Worker,
};

use crate::in_process::InProcess;

/// How long a condition may take before a test gives up on it.
const PATIENCE: Duration = Duration::from_secs(20);

/// Issue 7: `flush --all --yes` left `<name>:delayed`, the politeness,
/// back-off and robots keys behind (retries then still showed as waiting
/// after a "full" flush). Every kind of key is made to exist first, so a
/// kind added later without a flush group fails here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_7_flush_all_leaves_no_key_of_the_spider() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.set_robots(Robots::Body("User-agent: *\nCrawl-delay: 0.01\n".into()));
    let dir = temp_dir("regression");
    let path = dir.path().join("every.toml");
    std::fs::write(
        &path,
        r#"
name = "every"

[settings]
allow_private_networks = true
robotstxt_obey = true
download_delay = 0.01
retry_backoff_max = "1h"
max_pages_per_host = 1000

[items.page]
url = { page = "url" }

[[rules]]
name = "links"
match = '/fault/links'
  [[rules.follow]]
  css = "a::attr(href)"
  rule = "page"

[[rules]]
name = "hourly"
match = 'key=hourly'
revisit = "1h"
  [[rules.extract]]
  item = "page"

[[rules]]
name = "often"
match = 'key=often'
revisit = "100ms"
  [[rules.extract]]
  item = "page"

[[rules]]
name = "page"
match = '/fault/'
  [[rules.extract]]
  item = "page"
"#,
    )
    .unwrap();
    let push = |paths: &[&str]| {
        let urls: Vec<String> = paths.iter().map(|p| server.url(p)).collect();
        let mut args = vec!["push-urls", path.to_str().unwrap()];
        args.extend(urls.iter().map(String::as_str));
        crawlworker_with_redis(&redis.url(), &args)
    };
    // A page (items, stats), a link (dupefilter), a loop (failed), a
    // 429 whose retry waits an hour (delayed, back-off); robots.txt with a
    // Crawl-delay (robots, its lock, host delay) and a download delay (pace).
    // The 429 is for another host name of the server, so that its hour of
    // back-off holds up none of the others. Pages revisited hourly (the
    // schedule) and every 100 ms (a revisit queued and not fetched yet, once
    // the lease below has put it in the queue).
    let out = push(&[
        "/fault/status/200?key=hourly",
        "/fault/status/200?key=often",
        "/fault/status/200?key=page",
        "/fault/links?to=/fault/status/200%3Fkey%3Dlinked",
        "/fault/loop/a",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let port = server.addr().port();
    let later = format!("http://localhost:{port}/fault/retry-after/3600?times=1&key=later");
    let out = crawlworker_with_redis(&redis.url(), &["push-urls", path.to_str().unwrap(), &later]);
    assert!(out.status.success(), "{}", stderr(&out));
    let worker = InProcess::start(
        &path,
        &redis.url(),
        &[("CRAWLWORKER_IDLE_RECHECK", "100ms")],
        StopRules::default(),
    )
    .await;
    let mut conn = redis.conn();
    eventually("the crawl reaches its waiting retry", PATIENCE, || {
        let delayed: u64 = conn.zcard("every:delayed").unwrap();
        let failed: u64 = conn.llen("every:failed").unwrap();
        let items: u64 = conn.llen("every:items").unwrap();
        (delayed == 1 && failed == 1 && items >= 2).then_some(())
    });
    worker.stop().await;

    // What is left to make: a dead letter, queued and leased requests,
    // start entries, a live worker.
    let bad = crawlworker_with_redis(
        &redis.url(),
        &["push-urls", path.to_str().unwrap(), "not a url"],
    );
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    let _: () = conn.rpush("every:start_urls", "not a url either").unwrap();
    let spider = Spider::load(&path).unwrap();
    let client = redis::Client::open(redis.url()).unwrap();
    let f = RedisFrontier::connect(
        &client.clone().into(),
        spider.frontier_options("regression"),
    )
    .await
    .unwrap();
    claim_all(&spider, &f).await;
    // A host nothing waits for (these are leased, never fetched).
    let other = format!("http://127.0.0.2:{port}");
    let more: Vec<String> = ["/fault/status/200?key=q1", "/fault/status/200?key=q2"]
        .iter()
        .map(|p| format!("{other}{p}"))
        .collect();
    f.push_start(&more, 0.0, None).await.unwrap();
    claim_all(&spider, &f).await;
    // The page revisited every 100 ms is due by now: this lease queues it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (leased, _) = f.lease(1, 0).await.unwrap();
    assert_eq!(leased.len(), 1);
    f.push_start(&[server.url("/fault/status/200?key=start")], 0.0, None)
        .await
        .unwrap();
    // Crawl control: a pause (the pages per host are counted above), and
    // a seed queued once (as `[start] sitemap` does).
    assert!(f.pause().await.unwrap());
    let seed = crawlworker::request::Request::get(&server.url("/fault/sitemap"));
    assert_eq!(f.seed(std::slice::from_ref(&seed)).await.unwrap(), 1);
    assert_eq!(f.seed(&[seed]).await.unwrap(), 0);
    // A robots.txt fetch lock held (storing a record frees its own), and a
    // sweep stopped partway through a large hash of slots to come (its
    // cursor). Before the heartbeat, which is older than the sweep keeps.
    assert!(f
        .robots_lock("127.0.0.3", Duration::from_secs(60))
        .await
        .unwrap());
    let slots: Vec<(String, u64)> = (0..600)
        .map(|i| (format!("127.0.1.{i}"), 4_000_000_000_000))
        .collect();
    let _: () = conn.hset_multiple("every:pace", &slots).unwrap();
    f.sweep(1, Duration::from_secs(3600)).await.unwrap();
    f.heartbeat(&Heartbeat {
        host: "h".into(),
        pid: 1,
        started: "2026-11-23T00:00:00Z".into(),
        pages: 0,
        heartbeat: 0.0,
        version: String::new(),
    })
    .await
    .unwrap();

    let keys = &spider.keys;
    // The item stream belongs to the stream sink, which this spider (on
    // the list sink) never writes: made by hand.
    let _: String = redis::cmd("XADD")
        .arg(&keys.item_stream)
        .arg(&["*", "item", "{}"])
        .query(&mut conn)
        .unwrap();
    let missing: Vec<&str> = KeyKind::ALL
        .iter()
        .filter(|k| k.group() != KeyGroup::Channel)
        .map(|k| keys.get(*k))
        .filter(|key| !conn.exists::<_, bool>(*key).unwrap())
        .collect();
    assert!(missing.is_empty(), "the test did not make {missing:?}");

    let out = crawlworker_with_redis(
        &redis.url(),
        &["flush", path.to_str().unwrap(), "--all", "--yes"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(redis.keys(), Vec::<String>::new(), "flush --all left keys");
    server.stop().await.unwrap();
}

/// Claims every start entry into the queue, as a worker would.
async fn claim_all(spider: &Spider, f: &RedisFrontier) {
    let (_, entries) = f.lease(0, 10).await.unwrap();
    let claims: Vec<StartClaim> = entries
        .into_iter()
        .map(|entry| StartClaim {
            outcome: spider.start_request(&entry).map_err(Refused::from),
            entry,
        })
        .collect();
    f.claim_start(&claims).await.unwrap();
}

/// Issue 8: a task without a field `start.task_fields` declares was
/// pushed, and the crawl then ignored its pagination and dropped items,
/// silently. `push-urls` refuses it with its line; from another producer
/// it is set aside with the reason, and nothing is crawled for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_8_a_task_lacking_a_declared_field_is_refused_and_set_aside() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("regression");
    let spider = spider_for("bbs", &server.base_url(), dir.path());
    let spider = spider.to_str().unwrap();
    let out = crawlworker_with_redis(
        &redis.url(),
        &["push-urls", spider, r#"{"forum_id": "00001"}"#],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("argument 1: not pushed: the task lacks `max_page`, which start.task_fields says every task has"),
        "{}",
        stderr(&out)
    );
    let mut conn = redis.conn();
    assert_eq!(conn.llen::<_, u64>("bbs:start_urls").unwrap(), 0);
    // Another producer pushes it anyway.
    let _: () = conn
        .rpush("bbs:start_urls", r#"{"forum_id": "00001"}"#)
        .unwrap();
    let rules = StopRules {
        until_drained: true,
        ..StopRules::default()
    };
    InProcess::start(std::path::Path::new(spider), &redis.url(), &[], rules)
        .await
        .wait(PATIENCE)
        .await;
    assert_eq!(server.total_hits(), 0, "nothing is crawled for it");
    let dead: Vec<String> = conn.lrange("bbs:dead", 0, -1).unwrap();
    assert_eq!(dead.len(), 1);
    assert!(dead[0].contains("the task lacks `max_page`"), "{dead:?}");
    server.stop().await.unwrap();
}

/// Issue 8: a start URL for a host outside `allowed_domains` was fetched.
/// It is refused by `push-urls`, and set aside (counted as
/// `offsite/filtered`) when another producer pushes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_8_allowed_domains_apply_to_start_urls() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("regression");
    let spider = spider_for("news", &server.base_url(), dir.path());
    let spider = spider.to_str().unwrap();
    // The same server under another name: not in allowed_domains.
    let offsite = format!("http://localhost:{}/news/", server.addr().port());
    let out = crawlworker_with_redis(&redis.url(), &["push-urls", spider, &offsite]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("localhost is not in allowed_domains (127.0.0.1)"),
        "{}",
        stderr(&out)
    );
    let mut conn = redis.conn();
    let _: () = conn.sadd("news:start_urls", &offsite).unwrap();
    let rules = StopRules {
        until_drained: true,
        ..StopRules::default()
    };
    InProcess::start(std::path::Path::new(spider), &redis.url(), &[], rules)
        .await
        .wait(PATIENCE)
        .await;
    assert_eq!(server.total_hits(), 0, "the other host was not fetched");
    let stats: std::collections::HashMap<String, String> = conn.hgetall("news:stats").unwrap();
    assert_eq!(
        stats.get("offsite/filtered").map(String::as_str),
        Some("1"),
        "{stats:?}"
    );
    assert_eq!(
        stats.get("deadletter/count").map(String::as_str),
        Some("1"),
        "{stats:?}"
    );
    server.stop().await.unwrap();
}

/// Issue 8: `spiders/bbs.toml` named its start key `bbs:start_urls`, so a
/// copy renamed `bigbbs` pushed into the original's queue, and `flush
/// --all` of the copy deleted it. Shipped spiders use the `{name}` default,
/// and `check` warns about a start key without the spider's name.
#[test]
fn issue_8_a_copy_of_a_spider_has_its_own_start_key() {
    let redis = RedisServer::start();
    let dir = temp_dir("regression");
    let text = std::fs::read_to_string(crawlworker_testkit::root().join("spiders/bbs.toml"))
        .unwrap()
        .replace("name = \"bbs\"", "name = \"bigbbs\"");
    let copy = dir.path().join("bigbbs.toml");
    std::fs::write(&copy, &text).unwrap();
    let copy = copy.to_str().unwrap();
    let task = r#"{"forum_id": "00001", "max_page": 1}"#;
    for spider in ["spiders/bbs.toml", copy] {
        let out = crawlworker_with_redis(&redis.url(), &["push-urls", spider, task]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let out = crawlworker_with_redis(&redis.url(), &["flush", copy, "--all", "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut conn = redis.conn();
    assert_eq!(
        conn.llen::<_, u64>("bbs:start_urls").unwrap(),
        1,
        "the original keeps its task"
    );
    assert_eq!(conn.llen::<_, u64>("bigbbs:start_urls").unwrap(), 0);

    let named = dir.path().join("named.toml");
    std::fs::write(
        &named,
        text.replace("[start]\n", "[start]\nkey = \"bbs:start_urls\"\n"),
    )
    .unwrap();
    let out = crawlworker(&["check", named.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "a warning is not an error: {}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("warning: start.key: the start key `bbs:start_urls` does not contain the spider's name `bigbbs`"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("help: leave `key` out to use the default `bigbbs:start_urls`"),
        "{}",
        stderr(&out)
    );
}

/// Issue 14: a 5 MB bad start entry costs a capped log line, a capped
/// `push-urls` message and a capped dead letter, not its size again; and a
/// worker that finds nothing at all to crawl names the empty start key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_14_a_huge_bad_entry_is_shown_cut_and_an_empty_start_key_is_named() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("regression");
    let spider = spider_for("news", &server.base_url(), dir.path());
    // An absolute URL whose 5 MB host is not in allowed_domains.
    let huge = format!("http://{}.example/", "x".repeat(5 << 20));
    let file = dir.path().join("entries.txt");
    std::fs::write(&file, format!("{huge}\n")).unwrap();
    let out = crawlworker_with_redis(
        &redis.url(),
        &[
            "push-urls",
            spider.to_str().unwrap(),
            "--file",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out).len());
    assert!(
        stderr(&out).len() < 4096,
        "push-urls wrote {} bytes",
        stderr(&out).len()
    );
    assert!(stderr(&out).contains("bytes in all"), "{}", stderr(&out));

    // A producer pushes it anyway: the worker sets it aside.
    redis
        .conn()
        .sadd::<_, _, ()>("news:start_urls", &huge)
        .unwrap();
    let worker = Worker::spawn(&spider, &redis.url(), &["--until-drained"], &[]);
    let (status, log) = worker.wait(Duration::from_secs(60));
    assert!(status.success(), "{}", &log[..log.len().min(4096)]);
    let longest = log.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 4096, "a log line of {longest} bytes");
    let dead: Vec<String> = redis.conn().lrange("news:dead", 0, -1).unwrap();
    assert_eq!(dead.len(), 1);
    let record: serde_json::Value = serde_json::from_str(&dead[0]).unwrap();
    assert_eq!(record["bytes"], huge.len());
    assert!(
        dead[0].len() < 4096,
        "a dead letter of {} bytes",
        dead[0].len()
    );
    assert!(
        !log.contains("nothing to crawl"),
        "an entry was there, and was set aside: {}",
        &log[..log.len().min(4096)]
    );

    // A crawl nobody pushed anything to says which key it read.
    let empty = RedisServer::start();
    let bbs = spider_for("bbs", &server.base_url(), dir.path());
    let worker = Worker::spawn(&bbs, &empty.url(), &["--until-drained"], &[]);
    let (status, log) = worker.wait(Duration::from_secs(60));
    assert!(status.success(), "{log}");
    assert!(
        log.contains("nothing to crawl: the start key bbs:start_urls (list) is empty"),
        "{log}"
    );
    server.stop().await.unwrap();
}

/// Issue 14: `check` and `run` accept exactly the same files (25 invalid
/// spiders passed `check`, then were refused by `run`, failed every
/// request or hung the worker). The mutation family is in
/// `check_agreement`.
#[test]
fn issue_14_check_and_run_accept_the_same_spider_files() {
    crate::check_agreement::check_and_run_agree();
}

/// Issue 14: CSS with 3000 nested `:not(` made `check` abort with a stack
/// overflow (exit 134, no message). Nesting is measured before any parser
/// sees the text, for CSS, JSONPath and XPath alike.
#[test]
fn issue_14_check_refuses_deeply_nested_selectors_with_a_message() {
    let dir = temp_dir("nesting");
    let deep = [
        (
            "css",
            format!("{}a{}", ":not(".repeat(3000), ")".repeat(3000)),
        ),
        (
            "json",
            format!("${}", "[?(@.a".repeat(2000) + &")]".repeat(2000)),
        ),
        (
            "xpath",
            format!("{}1{}", "(".repeat(1500), ")".repeat(1500)),
        ),
    ];
    for (lang, selector) in deep {
        let path = dir.path().join(format!("deep-{lang}.toml"));
        std::fs::write(
            &path,
            format!(
                "name = \"deep\"\n[items.i]\nf = {{ {lang} = \"{selector}\" }}\n\n[[rules]]\nname = \"r\"\nmatch = 'x'\n  [[rules.extract]]\n  item = \"i\"\n"
            ),
        )
        .unwrap();
        let out = crawlworker(&["check", path.to_str().unwrap()]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{lang}: {err}");
        assert!(
            err.contains(&format!("deep-{lang}.toml:3:"))
                && err.contains("items.i.f")
                && (err.contains("deep; at most 32") || err.contains("deeper than 64")),
            "{lang}: {err}"
        );
        // The message names the limit, not the 15 KB selector.
        assert!(err.len() < 2000, "{lang}: a {} byte message", err.len());
    }
}

/// Issue 14: a 50 MB file with 4.2M `deny` patterns took 72 s and 13.5 GB
/// in `check`. A file over the size limit is refused before it is read,
/// one under it with too many patterns is refused after parsing, and
/// neither takes long or much memory.
#[test]
fn issue_14_check_on_a_huge_deny_list_fails_fast() {
    let dir = temp_dir("huge");
    let spider = |patterns: usize| {
        let mut s = String::from("name = \"huge\"\ndeny = [\n");
        for i in 0..patterns {
            s.push_str(&format!("'/p{i}',\n"));
        }
        s.push_str("]\n[[rules]]\nname = \"r\"\nmatch = 'x'\n  [[rules.follow]]\n  css = \"a::attr(href)\"\n");
        s
    };
    for (name, patterns, says) in [
        (
            "big.toml",
            4_200_000,
            "a spider file may have at most 4194304",
        ),
        (
            "many.toml",
            300_000,
            "more than the 10000 a list or table may have",
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, spider(patterns)).unwrap();
        let started = std::time::Instant::now();
        let mut child = std::process::Command::new(crawlworker_testkit::binary())
            .args(["check", path.to_str().unwrap()])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Its peak memory, read while it runs.
        let mut peak_kib = 0u64;
        let status = loop {
            if let Ok(s) = std::fs::read_to_string(format!("/proc/{}/status", child.id())) {
                if let Some(kib) = s
                    .lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
                {
                    peak_kib = peak_kib.max(kib);
                }
            }
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{name}: check still running after 10 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
        assert!(
            peak_kib < 1024 * 1024,
            "{name}: check peaked at {peak_kib} KiB"
        );
    }
}
