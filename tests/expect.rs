//! What a crawl of the demo forum must give: the expected items, computed
//! from the demo site's model, and a comparison that says what is missing
//! and what is doubled; and what a crawl reports (`stats --json`).

use std::collections::BTreeMap;

use redis::Commands;
use serde_json::Value;

use crawlworker_demo::{self as demo, Site};
use crawlworker_testkit::RedisServer;

/// A value with object keys sorted, as text: equal items compare equal
/// whatever the key order.
pub fn canonical(v: &Value) -> String {
    fn sort(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let sorted: BTreeMap<&String, Value> =
                    m.iter().map(|(k, v)| (k, sort(v))).collect();
                serde_json::to_value(sorted).unwrap_or(Value::Null)
            }
            Value::Array(a) => Value::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(v).to_string()
}

pub fn scraped(redis: &RedisServer) -> Vec<String> {
    scraped_from(&mut redis.conn(), "bbs:items")
}

/// The items in list `key`, canonical and sorted.
pub fn scraped_from(conn: &mut redis::Connection, key: &str) -> Vec<String> {
    let raw: Vec<String> = conn.lrange(key, 0, -1).unwrap();
    let mut items: Vec<String> = raw
        .iter()
        .map(|s| {
            canonical(
                &serde_json::from_str(s).unwrap_or_else(|e| panic!("item is not JSON ({e}): {s}")),
            )
        })
        .collect();
    items.sort();
    items
}

/// The demo forum's items, canonical and sorted.
pub fn expected(base: &str) -> Vec<String> {
    expected_for(&demo::demo_forum_tasks(), base)
}

/// The HTML forum's items for `tasks`, canonical and sorted.
pub fn expected_for(tasks: &[demo::ForumTask], base: &str) -> Vec<String> {
    let mut items: Vec<String> = demo::expected::bbs_items(&Site::demo(), tasks, base)
        .iter()
        .map(|s| canonical(&serde_json::from_str(s).unwrap()))
        .collect();
    items.sort();
    items
}

/// `crawlworker stats SPIDER --json` against `redis`, which must succeed.
pub fn stats_json(redis: &str, spider: &str) -> Value {
    let out = crawlworker_testkit::crawlworker_with_redis(redis, &["stats", spider, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        crawlworker_testkit::stderr(&out)
    );
    serde_json::from_str(&crawlworker_testkit::stdout(&out)).unwrap()
}

/// The demo forum's post URLs, in the order of its expected items.
pub fn post_urls(base: &str) -> Vec<String> {
    expected(base)
        .iter()
        .filter_map(|i| serde_json::from_str::<serde_json::Value>(i).ok())
        .filter(|i| i["kind"] == "post")
        .filter_map(|i| i["url"].as_str().map(str::to_string))
        .collect()
}

/// Compares item multisets and says what is missing and what is doubled.
pub fn assert_exact(got: &[String], want: &[String]) {
    if got == want {
        return;
    }
    let count = |v: &[String]| {
        let mut m: BTreeMap<String, i64> = BTreeMap::new();
        for s in v {
            *m.entry(s.clone()).or_default() += 1;
        }
        m
    };
    let (g, w) = (count(got), count(want));
    let missing: Vec<_> = w
        .iter()
        .filter(|(k, n)| g.get(*k).copied().unwrap_or(0) < **n)
        .map(|(k, _)| k)
        .take(5)
        .collect();
    let extra: Vec<_> = g
        .iter()
        .filter(|(k, n)| w.get(*k).copied().unwrap_or(0) < **n)
        .map(|(k, _)| k)
        .take(5)
        .collect();
    panic!(
        "items differ: got {}, expected {}\nmissing (first 5): {missing:#?}\nextra or doubled (first 5): {extra:#?}",
        got.len(),
        want.len()
    );
}

/// `crawlworker dashboard` of one spider on a free loopback port, run
/// from the repository root; stopped when dropped.
pub struct Dashboard {
    pub process: crawlworker_testkit::KillOnDrop,
    /// Its address, `127.0.0.1:port`.
    pub listen: String,
}

impl Dashboard {
    pub fn spawn(spider: &std::path::Path, redis: &str) -> Dashboard {
        let listen = format!("127.0.0.1:{}", crawlworker_testkit::redis::free_port());
        let process = crawlworker_testkit::KillOnDrop::spawn(
            std::process::Command::new(crawlworker_testkit::process::binary())
                .arg("dashboard")
                .arg(spider)
                .args(["--listen", &listen, "--redis", redis])
                .current_dir(crawlworker_testkit::root())
                .stderr(std::process::Stdio::null()),
        )
        .unwrap_or_else(|e| panic!("cannot start crawlworker dashboard: {e}"));
        Dashboard { process, listen }
    }

    /// Its `/api/state`, once it answers.
    pub async fn state(&self) -> Option<Value> {
        let api = format!("http://{}/api/state", self.listen);
        let text = reqwest::get(&api).await.ok()?.text().await.ok()?;
        serde_json::from_str(&text).ok()
    }
}
