//! Item sinks and item checks: `[items] sink = "stream"` delivers every
//! item once to a consumer group (XREADGROUP + XACK) even when workers are
//! killed with SIGKILL mid-crawl; a lagging stream stops leasing until its
//! consumers catch up, losing nothing, and what every group acknowledged is
//! trimmed; items failing their field checks are dropped and counted by
//! reason. A real redis-server and the demo forum on 127.0.0.1.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::Commands;
use serde_json::Value;

use crawlworker::frontier::{Committed, PageResult, RedisFrontier, Refused, StartClaim};
use crawlworker::spider::Spider;
use crawlworker::worker::StopRules;
use crawlworker_demo::{self as demo, Site};
use crawlworker_testkit::{
    crawlworker_with_redis, eventually, eventually_async, spider_for, stderr, stdout, temp_dir,
    FixtureServer, RedisServer, Worker,
};

use crate::expect::{assert_exact, canonical, expected, scraped, stats_json};
use crate::in_process::InProcess;

const STREAM: &str = "bbs:items:stream";
const GROUP: &str = "readers";

/// Settings that make recovery fast enough for a test.
const FAST: &[(&str, &str)] = &[
    ("CRAWLWORKER_LEASE_TIMEOUT", "1s"),
    ("CRAWLWORKER_IDLE_RECHECK", "100ms"),
];

/// The bbs spider in `dir`, its items going to the stream.
fn stream_spider(base: &str, dir: &Path) -> PathBuf {
    let path = spider_for("bbs", base, dir);
    crawlworker_testkit::items_to_stream(&path);
    path
}

fn push_demo_tasks(redis: &str, spider: &Path) {
    let tasks: Vec<String> = demo::demo_tasks();
    let mut args = vec!["push-urls", spider.to_str().unwrap()];
    args.extend(tasks.iter().map(String::as_str));
    let out = crawlworker_with_redis(redis, &args);
    assert!(out.status.success(), "push-urls failed: {}", stderr(&out));
}

/// One consumer of the group, on a thread of its own: reads new entries
/// with XREADGROUP, records each item, then acknowledges it.
struct Consumer {
    items: Arc<Mutex<Vec<String>>>,
    read: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

type Entries = Vec<(String, Vec<(String, Vec<String>)>)>;

impl Consumer {
    fn start(redis: &RedisServer) -> Consumer {
        let mut conn = redis.conn();
        let items = Arc::new(Mutex::new(Vec::new()));
        let read = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (items2, read2, stop2) = (items.clone(), read.clone(), stop.clone());
        let thread = std::thread::spawn(move || loop {
            let stopping = stop2.load(Ordering::SeqCst);
            let reply: Option<Entries> = redis::cmd("XREADGROUP")
                .arg(&["GROUP", GROUP, "c1", "COUNT", "25", "BLOCK", "100"])
                .arg(&["STREAMS", STREAM, ">"])
                .query(&mut conn)
                .unwrap_or_else(|e| panic!("XREADGROUP failed: {e}"));
            let entries: Vec<(String, Vec<String>)> = reply
                .unwrap_or_default()
                .into_iter()
                .flat_map(|(_, entries)| entries)
                .collect();
            if entries.is_empty() && stopping {
                return;
            }
            for (id, fields) in entries {
                assert_eq!(fields.len(), 2, "entry {id} has fields {fields:?}");
                assert_eq!(fields[0], "item", "entry {id}");
                items2.lock().unwrap().push(fields[1].clone());
                let acked: u64 = redis::cmd("XACK")
                    .arg(STREAM)
                    .arg(GROUP)
                    .arg(&id)
                    .query(&mut conn)
                    .unwrap();
                assert_eq!(acked, 1, "entry {id} acknowledged twice");
                read2.fetch_add(1, Ordering::SeqCst);
            }
        });
        Consumer {
            items,
            read,
            stop,
            thread,
        }
    }

    fn read(&self) -> usize {
        self.read.load(Ordering::SeqCst)
    }

    /// Reads what is left, stops, and returns every item read, canonical
    /// and sorted.
    fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the consumer thread panicked");
        let raw = self.items.lock().unwrap().clone();
        let mut items: Vec<String> = raw
            .iter()
            .map(|s| canonical(&serde_json::from_str(s).unwrap()))
            .collect();
        items.sort();
        items
    }
}

fn create_group(redis: &RedisServer) {
    let _: () = redis::cmd("XGROUP")
        .arg(&["CREATE", STREAM, GROUP, "0", "MKSTREAM"])
        .query(&mut redis.conn())
        .unwrap();
}

fn xlen(conn: &mut redis::Connection) -> u64 {
    redis::cmd("XLEN").arg(STREAM).query(conn).unwrap()
}

fn pending(redis: &RedisServer) -> u64 {
    let v: redis::Value = redis::cmd("XPENDING")
        .arg(STREAM)
        .arg(GROUP)
        .query(&mut redis.conn())
        .unwrap();
    let redis::Value::Array(parts) = v else {
        panic!("XPENDING answered {v:?}")
    };
    redis::from_redis_value(&parts[0]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_sink_gives_a_consumer_group_every_item_once_through_sigkills() {
    // Small stream nodes, so trimming what the group acknowledged happens
    // during this small crawl.
    let redis = RedisServer::start_with(&["--stream-node-max-entries", "8"]);
    let server = FixtureServer::start_with_latency(Site::demo(), Duration::from_millis(60))
        .await
        .unwrap();
    let dir = temp_dir("sinks");
    let spider = stream_spider(&server.base_url(), dir.path());
    create_group(&redis);
    push_demo_tasks(&redis.url(), &spider);
    let consumer = Consumer::start(&redis);
    // A tight bound too: leasing stops and resumes many times meanwhile.
    let env: Vec<(&str, &str)> = FAST
        .iter()
        .copied()
        .chain([("CRAWLWORKER_ITEMS_STREAM_MAX_BACKLOG", "40")])
        .collect();
    let args = ["--until-drained", "--concurrency", "3"];
    let worker = || Worker::spawn(&spider, &redis.url(), &args, &env);
    let mut workers: Vec<Worker> = (0..3).map(|_| worker()).collect();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.subsec_nanos() as usize);
    eprintln!("kill schedule seed: {seed}");
    let (mut kills, started) = (0, Instant::now());
    while kills < 5 && started.elapsed() < Duration::from_secs(20) {
        let step = (seed.wrapping_mul(kills + 7)) % 300;
        // Kills at moments of the seed's choosing: the time is the point.
        tokio::time::sleep(Duration::from_millis(150 + step as u64)).await;
        if consumer.read() >= 243 {
            break;
        }
        workers.remove((seed + kills) % workers.len()).kill();
        kills += 1;
        workers.push(worker());
    }
    assert!(
        kills >= 3,
        "the crawl ended before enough kills ({kills}); slow the demo server down"
    );
    for w in workers {
        let (status, log) = w.wait(Duration::from_secs(90));
        assert!(status.success(), "worker failed:\n{log}");
    }
    let got = consumer.finish();
    assert_exact(&got, &expected(&server.base_url()));
    assert_eq!(pending(&redis), 0, "entries left unacknowledged");
    let mut conn = redis.conn();
    // Nothing went to the list; the stream's acknowledged entries were
    // trimmed as the crawl went.
    let list: u64 = conn.llen("bbs:items").unwrap();
    assert_eq!(list, 0);
    let left: u64 = xlen(&mut conn);
    assert!(left < 243, "nothing was trimmed: {left} entries");
    let stats: BTreeMap<String, String> = conn.hgetall("bbs:stats").unwrap();
    assert_eq!(
        stats.get("item_scraped_count").map(String::as_str),
        Some("243")
    );
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_stream_stops_leasing_until_its_consumers_catch_up() {
    let redis = RedisServer::start_with(&["--stream-node-max-entries", "4"]);
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("sinks");
    let spider = stream_spider(&server.base_url(), dir.path());
    let spider_arg = spider.to_str().unwrap();
    push_demo_tasks(&redis.url(), &spider);
    let env: Vec<(&str, &str)> = FAST
        .iter()
        .copied()
        .chain([("CRAWLWORKER_ITEMS_STREAM_MAX_BACKLOG", "20")])
        .collect();
    let worker = Worker::spawn(&spider, &redis.url(), &["--until-drained"], &env);
    let mut conn = redis.conn();
    // No consumer group yet: every entry is unread, the bound is reached
    // and leasing stops for the whole cluster.
    eventually(
        "leasing stops at the bound",
        Duration::from_secs(30),
        || {
            let full: bool = conn.hexists("bbs:control", "items_backlog_full").unwrap();
            full.then_some(())
        },
    );
    // Pages in flight commit theirs; then the stream stops growing: only
    // a commit adds to it, and only a leased page commits.
    let held = eventually(
        "the pages in flight are committed",
        Duration::from_secs(20),
        || {
            let inflight: u64 = conn.zcard("bbs:inflight").unwrap();
            (inflight == 0).then(|| xlen(&mut conn))
        },
    );
    assert!((20..243).contains(&held), "{held} items held");
    let report = stats_json(&redis.url(), spider_arg);
    assert_eq!(report["queues"]["items_backlog_full"], true, "{report:#}");
    assert_eq!(report["queues"]["items"], held, "{report:#}");
    assert_eq!(report["stats"]["items/backlog_full_count"], 1, "{report:#}");
    let text = crawlworker_with_redis(&redis.url(), &["stats", spider_arg]);
    assert!(
        stdout(&text).contains("ITEM BACKLOG FULL"),
        "{}",
        stdout(&text)
    );
    // `items` reads the stream without consuming it; --pop is refused.
    let out = crawlworker_with_redis(&redis.url(), &["items", spider_arg, "-n", "5"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 5);
    for line in stdout(&out).lines() {
        let item: Value = serde_json::from_str(line).unwrap();
        assert!(item["kind"].is_string(), "{line}");
    }
    let out = crawlworker_with_redis(&redis.url(), &["items", spider_arg, "--pop"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("XREADGROUP"), "{}", stderr(&out));
    // A consumer group from the first entry: the crawl resumes as it
    // acknowledges, and gets every item once.
    create_group(&redis);
    let consumer = Consumer::start(&redis);
    let (status, log) = worker.wait(Duration::from_secs(90));
    assert!(status.success(), "worker failed:\n{log}");
    let got = consumer.finish();
    assert_exact(&got, &expected(&server.base_url()));
    let full: bool = conn.hexists("bbs:control", "items_backlog_full").unwrap();
    assert!(!full, "the backlog is still marked full");
    let left: u64 = xlen(&mut conn);
    assert!(left < 243, "nothing was trimmed: {left} entries");
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_refuses_an_items_key_of_the_wrong_type() {
    let redis = RedisServer::start();
    let dir = temp_dir("sinks");
    let spider = stream_spider("http://127.0.0.1:9", dir.path());
    let _: () = redis.conn().rpush(STREAM, "{}").unwrap();
    let out = crawlworker_with_redis(
        &redis.url(),
        &["run", spider.to_str().unwrap(), "--until-drained"],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("the items key `bbs:items:stream` is a list")
            && err.contains("[items] sink = \"stream\"")
            && err.contains("--items"),
        "{err}"
    );
    // `items` says the same.
    let out = crawlworker_with_redis(&redis.url(), &["items", spider.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("is a list"), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_failing_their_field_checks_are_dropped_and_counted_by_reason() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("sinks");
    let spider = spider_for("bbs", &server.base_url(), dir.path());
    let text = std::fs::read_to_string(&spider).unwrap();
    let checked = text
        .replace(
            r#"floor = { css = "span.floor::text", re = '(\d+)', type = "int" }"#,
            r#"floor = { css = "span.floor::text", re = '(\d+)', type = "int", min = 2 }"#,
        )
        .replace(
            r#"title = { css = "h1.post-title::text", required = true }"#,
            r#"title = { css = "h1.post-title::text", required = true, max_length = 24 }"#,
        );
    assert_ne!(text, checked, "spiders/bbs.toml changed: update this test");
    std::fs::write(&spider, checked).unwrap();
    push_demo_tasks(&redis.url(), &spider);
    let rules = StopRules {
        until_drained: true,
        ..StopRules::default()
    };
    InProcess::start(&spider, &redis.url(), FAST, rules)
        .await
        .wait(Duration::from_secs(60))
        .await;
    // What the checks keep, and drop, of the expected items.
    let (mut kept, mut low_floor, mut long_title) = (Vec::new(), 0, 0);
    for item in expected(&server.base_url()) {
        let v: Value = serde_json::from_str(&item).unwrap();
        if v["floor"].as_i64().is_some_and(|f| f < 2) {
            low_floor += 1;
        } else if v["title"].as_str().is_some_and(|t| t.chars().count() > 24) {
            long_title += 1;
        } else {
            kept.push(item);
        }
    }
    assert!(
        low_floor > 0 && long_title > 0,
        "the checks drop nothing: {low_floor} {long_title}"
    );
    assert_exact(&scraped(&redis), &kept);
    let stats: BTreeMap<String, String> = redis.conn().hgetall("bbs:stats").unwrap();
    let stat = |name: &str| stats.get(name).cloned().unwrap_or_default();
    assert_eq!(
        stat("item_dropped_count"),
        (low_floor + long_title).to_string()
    );
    assert_eq!(
        stat("item_dropped_reasons_count/OutOfRange"),
        low_floor.to_string()
    );
    assert_eq!(
        stat("item_dropped_reasons_count/BadLength"),
        long_title.to_string()
    );
    assert_eq!(stat("item_dropped_reasons_count/MissingRequiredField"), "");
    server.stop().await.unwrap();
}

const SPIDER: &str = r#"
name = "q"
[start]
url = "http://127.0.0.1:8700/list/{n}/1"
[items]
sink = "stream"
[items.x]
n = { meta = "n" }
[[rules]]
name = "list"
match = '/list/'
  [[rules.extract]]
  item = "x"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_refuses_an_items_key_that_changed_type_and_writes_nothing() {
    let redis = RedisServer::start();
    let spider = Spider::from_str("q.toml".as_ref(), SPIDER).unwrap_or_else(|e| panic!("{e}"));
    let client = redis::Client::open(redis.url()).unwrap();
    let f = RedisFrontier::connect(&client.into(), spider.frontier_options("w1"))
        .await
        .unwrap();
    assert_eq!(
        f.push_start(&[r#"{"n": 1}"#.to_string()], 0.0, None)
            .await
            .unwrap(),
        1
    );
    let (_, read) = f.lease(0, 1).await.unwrap();
    let claims: Vec<StartClaim> = read
        .into_iter()
        .map(|entry| StartClaim {
            outcome: spider.start_request(&entry).map_err(Refused::from),
            entry,
        })
        .collect();
    assert_eq!(f.claim_start(&claims).await.unwrap().enqueued, 1);
    let leased = f.lease(1, 0).await.unwrap().0;
    assert_eq!(leased.len(), 1);
    let page = PageResult {
        items: vec![serde_json::json!({"n": 1}).as_object().unwrap().clone()],
        ..PageResult::default()
    };
    let mut conn = redis.conn();
    let _: () = conn.set("q:items:stream", "not a stream").unwrap();
    // The commit is refused before it writes anything, and not retried:
    // the error will not heal, so it is the spider's fatal error (its loop
    // stops on it and hands the lease back; here the lease stays).
    let again = f.clone();
    let commit = {
        let (leased, page) = (leased.clone(), page.clone());
        tokio::spawn(async move { f.commit(&leased[0], &page, 0, false.into()).await })
    };
    let fatal = eventually_async("the commit's fatal error", Duration::from_secs(20), || {
        let fatal = again.fatal.get();
        async move { fatal }
    })
    .await;
    assert!(
        fatal.contains("key q:items:stream ([keys] items) is a string, not the stream")
            && fatal.contains("nothing was written")
            && fatal.contains("RENAME q:items:stream q:items:stream.bak"),
        "{fatal}"
    );
    // No event marks a future that stays pending: this is a window to see
    // a wrong return in, far longer than the step from raising the error
    // to returning would take.
    std::thread::sleep(Duration::from_millis(300));
    assert!(!commit.is_finished(), "a fatal commit returned");
    commit.abort();
    let inflight: u64 = conn.zcard("q:inflight").unwrap();
    assert_eq!(inflight, 1, "the lease was released");
    let kind: String = redis::cmd("TYPE")
        .arg("q:items:stream")
        .query(&mut conn)
        .unwrap();
    assert_eq!(kind, "string");
    // Fixed, the same page commits whole (once), here by the same worker
    // started again before its lease expired.
    drop(again);
    let _: () = conn.del("q:items:stream").unwrap();
    let client = redis::Client::open(redis.url()).unwrap();
    let restarted = RedisFrontier::connect(&client.into(), spider.frontier_options("w1"))
        .await
        .unwrap();
    let (committed, _) = tokio::time::timeout(
        Duration::from_secs(20),
        restarted.commit(&leased[0], &page, 0, false.into()),
    )
    .await
    .expect("the commit after the fix did not finish")
    .unwrap();
    assert!(matches!(committed, Committed::Done { .. }), "{committed:?}");
    let inflight: u64 = conn.zcard("q:inflight").unwrap();
    assert_eq!(inflight, 0);
    let entries: Vec<(String, Vec<String>)> = redis::cmd("XRANGE")
        .arg(&["q:items:stream", "-", "+"])
        .query(&mut conn)
        .unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        entries[0].1,
        vec!["item".to_string(), r#"{"n":1}"#.to_string()]
    );
}
