//! Poison pages: pages that once crashed every worker that fetched them,
//! and pages that still kill their worker (a test standing in for any
//! crash: it SIGKILLs whichever worker holds the page's lease). Three
//! workers crawl good pages beside them: the crawl drains, every good page
//! gives its item, the page nested too deep gives its item without the
//! value (counted, with its reason), and the page that kills is fetched at
//! most `max_lease_expiries` + 1 times, then set aside in the dead letters
//! with its reason.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redis::Commands;

use crawlworker::frontier::records::lease_expiries_reason;
use crawlworker::frontier::DeadLetter;
use crawlworker_demo::Site;
use crawlworker_testkit::{push_urls, temp_dir, FixtureServer, RedisServer, Worker};

/// How long the whole crawl may take before the test gives up on it.
const PATIENCE: Duration = Duration::from_secs(120);

/// How long a worker holds the killing page's lease before it "crashes":
/// long enough that the other pages it leased with it are committed.
const CRASH_AFTER: Duration = Duration::from_millis(700);

/// The default `max_lease_expiries`.
const MAX_EXPIRIES: u32 = 3;

/// A spider taking one item from every `/fault/` page, reading the page's
/// `<script>` as JSON.
fn poison_spider(dir: &Path) -> PathBuf {
    let path = dir.join("poison.toml");
    let text = r#"
name = "poison"
allowed_domains = ["127.0.0.1"]

[settings]
allow_private_networks = true
lease_timeout = "2s"

[items.page]
url = { page = "url" }
data = { css = "script::text", transform = 'fromjson' }

[[rules]]
name = "page"
match = '/fault/'

  [[rules.extract]]
  item = "page"
"#;
    std::fs::write(&path, text).unwrap();
    path
}

/// The worker id (`<host>:<pid>:<nonce>`) holding each lease whose
/// request's URL contains `part`, by request id.
fn holders(conn: &mut redis::Connection, part: &str) -> HashMap<String, u32> {
    let owners: HashMap<String, String> = conn.hgetall("poison:inflight:owners").unwrap();
    let mut out = HashMap::new();
    for (id, owner) in owners {
        let json: Option<String> = conn.hget("poison:requests:data", &id).unwrap();
        if !json.is_some_and(|j| j.contains(part)) {
            continue;
        }
        let worker = owner.split('|').next().unwrap_or("");
        let pid = worker.rsplit(':').nth(1).and_then(|p| p.parse().ok());
        if let Some(pid) = pid {
            out.insert(format!("{id} {owner}"), pid);
        }
    }
    out
}

/// Runs the crawl with three workers, SIGKILLing (and replacing, as a
/// restart policy would) each worker that has held a lease on a URL
/// containing `killing` for [`CRASH_AFTER`]. Returns the kills and every
/// worker's log (a killed one's up to its death).
fn crawl_killing(spider: &Path, redis: &RedisServer, killing: &str) -> (u32, Vec<String>) {
    let spawn = || Worker::spawn(spider, &redis.url(), &["--until-drained"], &[]);
    let mut workers: Vec<Worker> = (0..3).map(|_| spawn()).collect();
    let mut conn = redis.conn();
    let (mut kills, mut logs) = (0, Vec::new());
    let mut seen: HashMap<String, Instant> = HashMap::new();
    let started = Instant::now();
    while !workers.is_empty() {
        assert!(started.elapsed() < PATIENCE, "the crawl did not drain");
        for (lease, pid) in holders(&mut conn, killing) {
            let since = *seen.entry(lease).or_insert_with(Instant::now);
            let at = workers.iter().position(|w| w.child.id() == pid);
            if let (true, Some(at)) = (since.elapsed() >= CRASH_AFTER, at) {
                let worker = workers.remove(at);
                logs.push(worker.log());
                worker.kill();
                kills += 1;
                workers.push(spawn());
            }
        }
        let mut i = 0;
        while i < workers.len() {
            if workers[i].child.try_wait().unwrap().is_some() {
                let (status, log) = workers.remove(i).wait(Duration::from_secs(5));
                assert!(status.success(), "a worker failed: {status}\n{log}");
                logs.push(log);
            } else {
                i += 1;
            }
        }
        // How often the leases are looked at, not a wait for an effect.
        std::thread::sleep(Duration::from_millis(50));
    }
    (kills, logs)
}

/// The done-when test of poison pages: a page whose `<script>` nests
/// 3,000 arrays (it once aborted every worker reading it with `fromjson`)
/// and a page that kills the worker holding it, among good pages, with
/// three workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_page_ends_in_the_dead_letters_and_the_crawl_drains() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("poison-pages");
    let spider = poison_spider(dir.path());
    let good: Vec<String> = (0..6)
        .map(|i| server.url(&format!("/fault/status/200?key=good{i}")))
        .collect();
    let nested = server.url("/fault/nested-json/3000");
    let killing = server.url("/fault/hang?key=poison");
    let mut pushed = good.clone();
    pushed.extend([nested.clone(), killing.clone()]);
    push_urls(&redis.url(), &spider, &pushed);

    // The test's own thread: the fixture server runs on the runtime's.
    let (kills, logs) = crawl_killing(&spider, &redis, "/fault/hang");
    assert!(
        (MAX_EXPIRIES..=MAX_EXPIRIES + 1).contains(&kills),
        "the killing page was fetched by {kills} workers"
    );
    let all_logs = logs.join("\n");
    for crash in ["overflow", "panicked", "aborting"] {
        assert!(!all_logs.contains(crash), "{all_logs}");
    }

    // Every page but the killing one gave its item, once; the nested page's
    // without its value, which is counted and warned about with its reason.
    let mut conn = redis.conn();
    let items: Vec<String> = conn.lrange("poison:items", 0, -1).unwrap();
    let items: Vec<serde_json::Value> = items
        .iter()
        .map(|i| serde_json::from_str(i).unwrap())
        .collect();
    let urls: BTreeSet<&str> = items.iter().filter_map(|i| i["url"].as_str()).collect();
    let mut expected: BTreeSet<&str> = good.iter().map(String::as_str).collect();
    expected.insert(&nested);
    assert_eq!(urls, expected, "{items:?}");
    assert_eq!(items.len(), expected.len(), "{items:?}");
    for item in &items {
        assert_eq!(item["data"], serde_json::Value::Null, "{item}");
    }
    assert!(
        all_logs.contains("deeper than 64") && all_logs.contains(&nested),
        "{all_logs}"
    );

    // The killing page is in the dead letters with its reason; nothing is
    // left queued or leased.
    let dead: Vec<String> = conn.lrange("poison:dead", 0, -1).unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    let letter: DeadLetter = serde_json::from_str(&dead[0]).unwrap();
    assert_eq!(
        letter.reason,
        lease_expiries_reason(MAX_EXPIRIES, MAX_EXPIRIES)
    );
    assert!(letter.entry.contains(&killing), "{letter:?}");
    let stats: HashMap<String, String> = conn.hgetall("poison:stats").unwrap();
    for (stat, n) in [
        ("lease/expired_dead_count", "1"),
        ("deadletter/count", "1"),
        ("extract/unconverted_count", "1"),
    ] {
        assert_eq!(
            stats.get(stat).map(String::as_str),
            Some(n),
            "{stat}: {stats:?}"
        );
    }
    for key in ["poison:requests", "poison:inflight"] {
        assert_eq!(conn.zcard::<_, u64>(key).unwrap(), 0, "{key}");
    }
    assert_eq!(conn.hlen::<_, u64>("poison:requests:data").unwrap(), 0);
    server.stop().await.unwrap();
}
