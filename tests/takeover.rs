//! Taking over a scrapy-redis crawl mid-way (`crawlworker import-queue`):
//! the Redis state a real scrapy-redis 0.9.1 crawl of the demo forum left
//! when it was stopped with SIGTERM (`tests/fixtures/scrapy_redis/
//! stopped_*.json`, made by `gen_stopped_crawl.py`) — its queue of
//! pickles, dupefilter, items and start key — is loaded into a fresh
//! redis-server; crawlworker imports the queue and finishes the crawl, and
//! the items of both together are exactly the site's. Hostile pickles in
//! the queue are set aside and do nothing. The import is resumable, a dry
//! run changes nothing, and a worker will not start on a queue still in
//! scrapy-redis's form.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use redis::Commands;
use serde_json::Value;

use crawlworker::frontier::shards::shard_name;
use crawlworker::worker::StopRules;
use crawlworker_demo::Site;
use crawlworker_testkit::{
    crawlworker_with_redis, root, spider_for, stderr, stdout, temp_dir, FixtureServer, KillOnDrop,
    RedisServer,
};

use crate::expect::{assert_exact, expected, scraped};
use crate::in_process::InProcess;

/// Where the fixtures' crawl ran: their URLs and items name it.
const ADDR: &str = "127.0.0.1:47124";
const BASE: &str = "http://127.0.0.1:47124";

/// What the hostile pickles would do if they were run.
const RAN: &str = "/tmp/crawlworker-hostile-pickle-ran";
const FETCHED: &str = "/hostile-pickle-fetched";

const TABLE: &str = r#"
[scrapy_redis]
callbacks = { parse_list = "list", parse_post = "post", parse_comments = "comment" }
"#;

fn fixture(name: &str) -> Value {
    let path = root().join("tests/fixtures/scrapy_redis").join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn b64(v: &Value) -> Vec<u8> {
    use base64_engine::decode;
    decode(v.as_str().expect("base64 text"))
}

/// The standard base64 alphabet, decoded (the fixtures' entries).
mod base64_engine {
    pub fn decode(s: &str) -> Vec<u8> {
        let value = |c: u8| -> u32 {
            match c {
                b'A'..=b'Z' => u32::from(c - b'A'),
                b'a'..=b'z' => u32::from(c - b'a') + 26,
                b'0'..=b'9' => u32::from(c - b'0') + 52,
                b'+' => 62,
                b'/' => 63,
                _ => panic!("not base64: {c}"),
            }
        };
        let mut out = Vec::new();
        for chunk in s.as_bytes().chunks(4) {
            let digits: Vec<u8> = chunk.iter().copied().filter(|c| *c != b'=').collect();
            let n =
                digits.iter().fold(0u32, |n, c| (n << 6) | value(*c)) << (6 * (4 - digits.len()));
            let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            out.extend_from_slice(&bytes[..digits.len().saturating_sub(1)]);
        }
        out
    }
}

/// Loads a stopped crawl's keys as scrapy-redis left them.
fn load_state(conn: &mut redis::Connection, state: &Value) {
    for (key, k) in state["keys"].as_object().unwrap() {
        let entries = k["entries"].as_array().unwrap();
        for e in entries {
            let _: () = match k["type"].as_str().unwrap() {
                "zset" => conn.zadd(key, b64(&e[0]), e[1].as_f64().unwrap()).unwrap(),
                "list" => conn.rpush(key, b64(e)).unwrap(),
                "set" => conn.sadd(key, b64(e)).unwrap(),
                "none" => (),
                other => panic!("{key}: {other}"),
            };
        }
    }
}

/// The hostile pickles of the fixtures, and the two too big to keep
/// there: a list nested 100,000 deep is in them; a 50 MB bytes object is
/// built here, byte for byte as Python writes it.
fn hostile() -> Vec<(String, Vec<u8>)> {
    let f = fixture("queue.json");
    let mut out: Vec<(String, Vec<u8>)> = f["hostile"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["name"].as_str().unwrap().to_string(), b64(&h["pickle"])))
        .collect();
    let mut big = vec![0x80, 5, b'B'];
    big.extend_from_slice(&50_000_000u32.to_le_bytes());
    big.resize(big.len() + 50_000_000, 0);
    big.extend_from_slice(&[0x94, b'.']);
    out.push(("50 MB of bytes".into(), big));
    out
}

/// The shipped forum spider on the fixtures' address, with the table
/// that maps the scrapy-redis spider's callbacks.
fn spider(dir: &Path) -> PathBuf {
    let path = spider_for("bbs", BASE, dir);
    let text = std::fs::read_to_string(&path).unwrap() + TABLE;
    std::fs::write(&path, text).unwrap();
    path
}

/// The tests that serve the forum on the fixtures' address take turns:
/// the turn is held until the test ends, so one test's slow crawl never
/// counts against another's wait for the port.
static FIXED_ADDRESS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The demo forum on the fixtures' own address, with this test's turn at
/// it (keep the guard alive until the server stops). The port is in the
/// kernel's ephemeral range, so another test's socket may hold it for a
/// moment: it is tried again for a minute before the test fails.
async fn forum() -> (FixtureServer, tokio::sync::MutexGuard<'static, ()>) {
    let turn = FIXED_ADDRESS.lock().await;
    let addr: SocketAddr = ADDR.parse().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        match FixtureServer::start_on(Site::demo(), addr, Duration::ZERO).await {
            Ok(server) => return (server, turn),
            Err(e) if std::time::Instant::now() < deadline => {
                eprintln!("{addr} is busy ({e}); trying again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("the fixtures need {addr} free, and it stayed busy for a minute: {e}"),
        }
    }
}

/// One in-process worker on `spider`, run until the crawl is drained.
async fn drain_in_process(spider: &Path, redis: &RedisServer) {
    let rules = StopRules {
        until_drained: true,
        ..StopRules::default()
    };
    InProcess::start(spider, &redis.url(), &[], rules)
        .await
        .wait(Duration::from_secs(60))
        .await;
}

fn import(redis: &RedisServer, spider: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["import-queue", spider.to_str().unwrap()];
    all.extend_from_slice(args);
    crawlworker_with_redis(&redis.url(), &all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrapy_redis_crawl_stopped_midway_is_finished_with_every_item_once() {
    let _ = std::fs::remove_file(RAN);
    let (server, _turn) = forum().await;
    let dir = temp_dir("takeover");
    let spider = spider(dir.path());
    for class in ["PriorityQueue", "FifoQueue"] {
        let state = fixture(&format!("stopped_{class}.json"));
        let redis = RedisServer::start();
        let mut conn = redis.conn();
        load_state(&mut conn, &state);
        let scrapy_items: usize = conn.llen("bbs:items").unwrap();
        // Hostile entries among the real ones.
        for (_, pickle) in hostile() {
            let _: () = match class {
                "PriorityQueue" => conn.zadd("bbs:requests", pickle, 0).unwrap(),
                _ => conn.lpush("bbs:requests", pickle).unwrap(),
            };
        }

        let out = import(&redis, &spider, &[]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}{}",
            stdout(&out),
            stderr(&out)
        );
        let said = stdout(&out);
        assert!(said.contains("set aside 8 entries in bbs:dead"), "{said}");

        drain_in_process(&spider, &redis).await;

        assert_exact(&scraped(&redis), &expected(BASE));
        assert!(
            scrapy_items > 0,
            "{class}: the stopped crawl had scraped items"
        );
        let dead: Vec<String> = conn.lrange("bbs:dead", 0, -1).unwrap();
        assert_eq!(dead.len(), 8, "{class}: {dead:#?}");
        for letter in &dead {
            let letter: Value = serde_json::from_str(letter).unwrap();
            let reason = letter["reason"].as_str().unwrap();
            assert!(
                reason.starts_with("scrapy-redis request not read"),
                "{reason}"
            );
        }
        let stats: std::collections::HashMap<String, String> = conn.hgetall("bbs:stats").unwrap();
        assert_eq!(stats["scrapy_redis/imported_count"], "8", "{class}");
        assert_eq!(stats["deadletter/count"], "8", "{class}");
    }
    assert!(!Path::new(RAN).exists(), "a hostile pickle ran a command");
    assert_eq!(server.hits(FETCHED), 0, "a hostile pickle fetched a URL");
    server.stop().await.unwrap();
}

/// The forum spider over `shards` shards (the fixtures' one host is on
/// shard 2 of 4, so its requests are handed on and its fingerprints must
/// be found on a shard that is not shard 0).
fn sharded(dir: &Path, shards: usize) -> PathBuf {
    let path = spider(dir);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, with_shards(&text, shards)).unwrap();
    path
}

/// A spider file's `text` with `[keys] shards = shards`.
fn with_shards(text: &str, shards: usize) -> String {
    text.replacen(
        "[start]\n",
        &format!("[keys]\nshards = {shards}\n\n[start]\n"),
        1,
    )
}

/// The demo crawl's spider with `setting` added, crawled unsharded until
/// drained; returns the spider's text.
fn crawl_unsharded(crawl: &crawlworker_testkit::DemoCrawl, setting: &str) -> String {
    let text = std::fs::read_to_string(&crawl.spider)
        .unwrap()
        .replace("[settings]\n", &format!("[settings]\n{setting}\n"));
    std::fs::write(&crawl.spider, &text).unwrap();
    let out = crawlworker_with_redis(
        &crawl.redis.url(),
        &["run", crawl.spider_arg(), "--until-drained"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    text
}

/// `text` written as a spider file of its own beside the demo crawl's.
fn beside(crawl: &crawlworker_testkit::DemoCrawl, text: &str) -> PathBuf {
    let dir = crawl.dir.path().join("sharded");
    std::fs::create_dir_all(&dir).unwrap();
    let spider = dir.join("bbs.toml");
    std::fs::write(&spider, text).unwrap();
    spider
}

/// Every shard's items (scrapy-redis's are shard 0's), canonical, sorted.
fn items_of_shards(conn: &mut redis::Connection, shards: usize) -> Vec<String> {
    let mut items: Vec<String> = (0..shards)
        .flat_map(|i| {
            let key = format!("{}:items", shard_name("bbs", i, shards));
            crate::expect::scraped_from(conn, &key)
        })
        .collect();
    items.sort();
    items
}

/// A sharded spider takes over the stopped scrapy-redis crawl: a worker
/// refuses it until `import-queue` has copied the fingerprints to every
/// shard and handed each request to its host's shard, after which the
/// crawl finishes with every item once, none crawled again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_spider_takes_over_a_scrapy_redis_crawl_with_every_item_once() {
    let (server, _turn) = forum().await;
    let dir = temp_dir("takeover-shards");
    let spider = sharded(dir.path(), 4);
    let home = crawlworker::frontier::shards::shard_of(BASE, 4);
    assert_eq!(home, 2, "the fixtures' host is on a shard other than 0");
    let state = fixture("stopped_PriorityQueue.json");
    let redis = RedisServer::start();
    let mut conn = redis.conn();
    load_state(&mut conn, &state);
    let fingerprints: usize = conn.scard("bbs:dupefilter").unwrap();
    assert!(fingerprints > 0);

    // A worker will not start on a crawl that began without shards.
    let out = crawlworker_with_redis(
        &redis.url(),
        &["run", spider.to_str().unwrap(), "--until-drained"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("began without") && said.contains("import-queue"),
        "{said}"
    );
    let recorded: Option<u64> = conn.hget("bbs:control", "shards").unwrap();
    assert_eq!(recorded, None, "nothing recorded over the unsharded crawl");

    let out = import(&redis, &spider, &["--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("would copy {fingerprints} fingerprints")),
        "{}",
        stderr(&out)
    );
    let out = import(&redis, &spider, &[]);
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains(&format!("copied {fingerprints} fingerprints")),
        "{}",
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("and the queues of its other 3 shards"),
        "{}",
        stdout(&out)
    );
    let recorded: Option<u64> = conn.hget("bbs:control", "shards").unwrap();
    assert_eq!(recorded, Some(4));
    let home_keys = shard_name("bbs", home, 4);
    let copied: usize = conn.scard(format!("{home_keys}:dupefilter")).unwrap();
    assert_eq!(
        copied, fingerprints,
        "the host's shard has every fingerprint"
    );
    let queued: usize = conn.zcard(format!("{home_keys}:requests")).unwrap();
    assert!(queued > 0, "the requests are on their host's shard");
    let on_zero: usize = conn.zcard("bbs:requests").unwrap();
    assert_eq!(on_zero, 0, "none is left on shard 0");
    // A producer pushes again the task of the forum scrapy-redis crawled
    // first: its host's shard has the fingerprints of its pages, so none
    // is crawled (and scraped) twice.
    let task = r#"{"forum_id":"00001","max_page":5}"#;
    let out = crawlworker_with_redis(&redis.url(), &["push-urls", spider.to_str().unwrap(), task]);
    assert!(out.status.success(), "{}", stderr(&out));

    drain_in_process(&spider, &redis).await;
    assert_exact(&items_of_shards(&mut conn, 4), &expected(BASE));
    // Run again on the crawl now sharded: nothing left to import or copy.
    let out = import(&redis, &spider, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("nothing to import"),
        "{}",
        stdout(&out)
    );
    assert!(!stderr(&out).contains("copied"), "{}", stderr(&out));
    server.stop().await.unwrap();
}

/// A scrapy-redis queue of `n` requests for distinct posts, as entries of
/// its `class` (the fixture's post request, its post number changed).
fn many(class: &str, n: usize) -> Vec<Vec<u8>> {
    let f = fixture("queue.json");
    let entry = f["queues"][class]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["request"] == "post")
        .map(|e| b64(&e["entry"]))
        .unwrap();
    let at = entry.windows(4).position(|w| w == b"1001").unwrap();
    (0..n)
        .map(|i| {
            let mut e = entry.clone();
            e[at..at + 4].copy_from_slice(format!("{i:04}").as_bytes());
            e
        })
        .collect()
}

/// The post numbers of the requests queued, each as often as it is.
fn queued_posts(conn: &mut redis::Connection) -> Vec<String> {
    let data: Vec<String> = conn.hvals("bbs:requests:data").unwrap();
    let mut posts: Vec<String> = data
        .iter()
        .map(|json| {
            let r: Value = serde_json::from_str(json).unwrap();
            r["url"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    posts.sort();
    posts
}

#[test]
fn an_import_killed_at_any_point_and_run_again_loses_and_doubles_nothing() {
    let dir = temp_dir("takeover-kill");
    let spider = spider(dir.path());
    for class in ["PriorityQueue", "FifoQueue"] {
        let redis = RedisServer::start();
        let mut conn = redis.conn();
        let entries = many(class, 10_000);
        for chunk in entries.chunks(1000) {
            let _: () = match class {
                "PriorityQueue" => conn
                    .zadd_multiple(
                        "bbs:requests",
                        &chunk.iter().map(|e| (0, e.clone())).collect::<Vec<_>>(),
                    )
                    .unwrap(),
                _ => conn.lpush("bbs:requests", chunk).unwrap(),
            };
        }
        // Killed a few times part-way, wherever it is.
        for delay in [5, 60, 250, 500, 900] {
            let mut cmd = std::process::Command::new(crawlworker_testkit::binary());
            cmd.args([
                "import-queue",
                spider.to_str().unwrap(),
                "--redis",
                &redis.url(),
                "-q",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
            let mut child = KillOnDrop::spawn(&mut cmd).unwrap();
            std::thread::sleep(Duration::from_millis(delay));
            child.kill_now();
        }
        let out = import(&redis, &spider, &[]);
        assert!(out.status.success(), "{}", stderr(&out));
        let posts = queued_posts(&mut conn);
        let want: Vec<String> = (0..10_000).map(|i| format!("{i:04}")).collect();
        assert_eq!(posts.len(), want.len(), "{class}: requests queued");
        assert_eq!(posts, want, "{class}: each post once");
        let left: bool = conn.exists("bbs:requests:scrapy_redis").unwrap();
        assert!(!left, "{class}: entries left behind");
        let queued: usize = conn.zcard("bbs:requests").unwrap();
        assert_eq!(queued, 10_000);
    }
}

#[test]
fn pickles_pushed_after_an_import_are_imported_beside_crawlworkers_requests() {
    let dir = temp_dir("takeover-more");
    let spider = spider(dir.path());
    let redis = RedisServer::start();
    let mut conn = redis.conn();
    let entries = many("PriorityQueue", 30);
    for e in &entries[..20] {
        let _: () = conn.zadd("bbs:requests", e, 0).unwrap();
    }
    assert!(import(&redis, &spider, &[]).status.success());
    // The queue is crawlworker's now; ten more pickles land in it.
    for e in &entries[20..] {
        let _: () = conn.zadd("bbs:requests", e, -10).unwrap();
    }
    let out = import(&redis, &spider, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let want: Vec<String> = (0..30).map(|i| format!("{i:04}")).collect();
    assert_eq!(queued_posts(&mut conn), want);
    let members: usize = conn.zcard("bbs:requests").unwrap();
    assert_eq!(
        members, 30,
        "only crawlworker's requests are left in the queue"
    );
    let again = import(&redis, &spider, &[]);
    assert!(
        stdout(&again).contains("nothing to import"),
        "{}",
        stdout(&again)
    );
}

#[test]
fn a_dry_run_says_what_would_happen_and_changes_nothing() {
    let dir = temp_dir("takeover-dry");
    let spider = spider(dir.path());
    let redis = RedisServer::start();
    let mut conn = redis.conn();
    let f = fixture("queue.json");
    for e in f["queues"]["FifoQueue"]["entries"].as_array().unwrap() {
        let _: () = conn.rpush("bbs:requests", b64(&e["entry"])).unwrap();
    }
    let before: Vec<Vec<u8>> = conn.lrange("bbs:requests", 0, -1).unwrap();
    let out = import(&redis, &spider, &["--dry-run"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let said = stdout(&out);
    // The table above maps neither parse_search, parse (no callback),
    // a CrawlSpider's rule nor parse_user; and an Item in meta is refused.
    assert!(said.contains("would queue 4 requests"), "{said}");
    assert!(said.contains("would set aside 6 entries"), "{said}");
    assert!(
        said.contains("callback `parse_user` maps to no rule"),
        "{said}"
    );
    assert!(said.contains("(dry run: nothing changed)"), "{said}");
    let after: Vec<Vec<u8>> = conn.lrange("bbs:requests", 0, -1).unwrap();
    assert_eq!(before, after);
    assert_eq!(redis.keys(), vec!["bbs:requests".to_string()]);
}

#[test]
fn a_worker_will_not_start_on_a_queue_scrapy_redis_left() {
    let dir = temp_dir("takeover-refuse");
    let spider = spider(dir.path());
    let f = fixture("queue.json");
    for class in ["PriorityQueue", "FifoQueue"] {
        let redis = RedisServer::start();
        let mut conn = redis.conn();
        for e in f["queues"][class]["entries"].as_array().unwrap() {
            let entry = b64(&e["entry"]);
            let _: () = match class {
                "PriorityQueue" => conn
                    .zadd("bbs:requests", entry, e["score"].as_f64().unwrap())
                    .unwrap(),
                _ => conn.rpush("bbs:requests", entry).unwrap(),
            };
        }
        let out = crawlworker_with_redis(
            &redis.url(),
            &["run", spider.to_str().unwrap(), "--until-drained"],
        );
        assert_eq!(out.status.code(), Some(1), "{class}");
        let said = stderr(&out);
        assert!(said.contains("crawlworker import-queue"), "{class}: {said}");
        let dead: usize = conn.llen("bbs:dead").unwrap();
        assert_eq!(dead, 0, "{class}: nothing was set aside");
    }
}

/// A crawlworker crawl that began without shards, stopped with requests
/// still queued (its `max_pages` reached), is refused by a sharded
/// spider's worker and by its `import-queue`, each saying why and what to
/// do, and nothing is recorded or copied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_spider_refuses_a_crawlworker_crawl_begun_without_shards() {
    let crawl = crawlworker_testkit::DemoCrawl::start(Duration::ZERO).await;
    let text = crawl_unsharded(&crawl, "max_pages = 5");
    let mut conn = crawl.redis.conn();
    let queued: usize = conn.zcard("bbs:requests").unwrap();
    assert!(queued > 0, "the stopped crawl left requests queued");

    let spider = beside(
        &crawl,
        &with_shards(&text.replace("max_pages = 5\n", ""), 3),
    );
    let out = import(&crawl.redis, &spider, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("`bbs:requests:data`") && said.contains("--until-drained"),
        "{said}"
    );
    let out = crawlworker_with_redis(
        &crawl.redis.url(),
        &["run", spider.to_str().unwrap(), "--until-drained"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`bbs:requests` holds"),
        "{}",
        stderr(&out)
    );
    let recorded: Option<u64> = conn.hget("bbs:control", "shards").unwrap();
    assert_eq!(recorded, None);
    let copies: Vec<String> = conn.keys(format!("{}*", shard_name("bbs", 1, 3))).unwrap();
    assert!(copies.is_empty(), "nothing written on shard 1: {copies:?}");
    crawl.stop().await;
}

/// A crawlworker crawl in the `compact` dupefilter mode, drained to its
/// dupefilter, taken over by a spider over shards: `import-queue` copies
/// its fingerprints (put together again from the compact buckets) to
/// every shard, and the crawl's tasks pushed again fetch no post twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_compact_crawl_is_taken_over_by_a_sharded_spider() {
    let crawl = crawlworker_testkit::DemoCrawl::start(Duration::ZERO).await;
    let text = crawl_unsharded(&crawl, "dupefilter = \"compact\"");
    let before = crawl.server.hit_counts();
    let mut conn = crawl.redis.conn();
    let items: usize = conn.llen("bbs:items").unwrap();
    // A shard count that puts the forum's host on a shard other than 0.
    let base = crawl.server.base_url();
    let shards = (2..=16)
        .find(|&n| crawlworker::frontier::shards::shard_of(&base, n) != 0)
        .unwrap();
    let spider = beside(&crawl, &with_shards(&text, shards));
    let out = import(&crawl.redis, &spider, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("copied"), "{}", stderr(&out));
    let args: Vec<String> = ["push-urls".to_string(), spider.display().to_string()]
        .into_iter()
        .chain(crawlworker_demo::demo_tasks())
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = crawlworker_with_redis(&crawl.redis.url(), &args);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = crawlworker_with_redis(
        &crawl.redis.url(),
        &["run", spider.to_str().unwrap(), "--until-drained"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // The forum's list pages are `dont_filter` (fetched again by design)
    // and robots.txt is cached on the host's shard; no post or comment
    // page is fetched twice.
    let again: Vec<(String, u64)> = crawl
        .server
        .hit_counts()
        .into_iter()
        .filter(|(path, n)| before.get(path) != Some(n))
        .collect();
    assert!(
        again
            .iter()
            .all(|(path, _)| path.starts_with("/list/") || path == "/robots.txt"),
        "fetched again: {again:?}"
    );
    assert!(before.keys().any(|p| p.starts_with("/post/")));
    let scraped: usize = (0..shards)
        .map(|i| {
            let key = format!("{}:items", shard_name("bbs", i, shards));
            conn.llen::<_, usize>(key).unwrap()
        })
        .sum();
    assert_eq!(scraped, items, "nothing scraped twice");
    crawl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_import_is_kept_whole_and_brought_back_once_the_spider_maps_it() {
    let dir = temp_dir("takeover-retry-dead");
    // The shipped spider without the table: `parse_post` maps to no rule.
    let unmapped = spider_for("bbs", BASE, dir.path());
    let redis = RedisServer::start();
    let mut conn = redis.conn();
    let entry = many("PriorityQueue", 1002).pop().unwrap();
    let _: () = conn.zadd("bbs:requests", &entry, 0).unwrap();
    let out = import(&redis, &unmapped, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let dead: Vec<String> = conn.lrange("bbs:dead", 0, -1).unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    let letter: Value = serde_json::from_str(&dead[0]).unwrap();
    assert!(
        letter["reason"]
            .as_str()
            .unwrap()
            .contains("callback `parse_post` maps to no rule"),
        "{letter}"
    );
    // The letter keeps the whole entry, not a preview.
    assert_eq!(b64(&letter["original"]), entry, "{letter}");

    // Still unmapped: it stays where it is.
    let out = import(&redis, &unmapped, &["--retry-dead"]);
    assert!(
        stderr(&out).contains("brought back 0 refused entries"),
        "{}",
        stderr(&out)
    );
    assert_eq!(conn.llen::<_, usize>("bbs:dead").unwrap(), 1);

    // The spider maps it now: it comes back, once, and is crawled once.
    let mapped = {
        let path = dir.path().join("mapped.toml");
        let text = std::fs::read_to_string(&unmapped).unwrap() + TABLE;
        std::fs::write(&path, text).unwrap();
        path
    };
    for _ in 0..2 {
        let out = import(&redis, &mapped, &["--retry-dead"]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert_eq!(conn.llen::<_, usize>("bbs:dead").unwrap(), 0);
    assert_eq!(queued_posts(&mut conn), ["1001"]);
    let (server, _turn) = forum().await;
    drain_in_process(&mapped, &redis).await;
    assert_eq!(server.hits("/post/1001"), 1, "{:?}", server.hit_counts());
}

#[test]
fn a_requests_key_of_another_type_is_refused_in_words_not_script_places() {
    let dir = temp_dir("takeover-wrong-type");
    let spider = spider(dir.path());
    let redis = RedisServer::start();
    let _: () = redis.conn().hset("bbs:requests", "a", "b").unwrap();
    let out = import(&redis, &spider, &[]);
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(
        said.contains("Redis could not set aside the scrapy-redis queue in `bbs:requests`")
            && said.contains("is a hash")
            && said.contains("nothing was moved"),
        "{said}"
    );
    assert!(
        !said.contains("user_script")
            && !said.contains("user_function")
            && !said.contains(" script: "),
        "{said}"
    );
}
