//! What each dupefilter mode costs in Redis memory, and how often a Bloom
//! filter is wrong. For each mode and size (1 million and 10 million
//! entries by default), on a fresh `redis-server`: FLUSHALL, read
//! `used_memory` (INFO memory), add the fingerprints through the mode's own
//! script (the code a page's commit runs), read `used_memory` again. Prints
//! bytes per entry from the `used_memory` delta and from `MEMORY USAGE` of
//! the filter's keys, and for `bloom` (sized for the entries, 0.001) the
//! share of 1 million never-added fingerprints it says it has seen. Then,
//! for `bloom`, what a filter costs per entry of its capacity over a sweep
//! of capacities from 100,000 to 400 million (a filter is allocated whole when it
//! is made, so one entry shows its full cost).
//!
//!     cargo bench --bench dupefilter                      # ~10 minutes, ~2 GB of Redis
//!     DUPEFILTER_SIZES=100000 cargo bench --bench dupefilter   # a quick look
//!     DUPEFILTER_MODES=bloom,expiring cargo bench --bench dupefilter   # some modes only

use std::time::{Duration, Instant};

use crawlworker::frontier::{Dupefilter, Options, RedisFrontier};
use crawlworker::spider::Spider;

/// The fingerprint of the `i`-th page of a made-up site (scrapy-redis's
/// fingerprint, as a crawl would store it).
fn fingerprint(i: u64) -> String {
    scrapy_url::request_fingerprint("GET", &format!("http://127.0.0.1/page/{i}"), b"")
}

fn used_memory(conn: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("memory").query(conn).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO memory")
}

const SPIDER: &str = r#"
name = "mem"
[start]
url = "http://127.0.0.1/{n}"
[items.x]
n = { meta = "n" }
[[rules]]
name = "all"
match = '/'
  [[rules.extract]]
  item = "x"
"#;

struct Row {
    mode: &'static str,
    entries: u64,
    delta: u64,
    usage: u64,
    seconds: f64,
    false_positive: Option<f64>,
}

async fn measure(redis_url: &str, mode: Dupefilter, entries: u64, probe: bool) -> Row {
    let client = redis::Client::open(redis_url).expect("redis url");
    let mut conn = client.get_connection().expect("connect");
    redis::cmd("FLUSHALL")
        .query::<()>(&mut conn)
        .expect("FLUSHALL");
    let _: redis::RedisResult<()> = redis::cmd("MEMORY").arg("PURGE").query(&mut conn);
    let spider = Spider::from_str("mem.toml".as_ref(), SPIDER).expect("spider");
    let mut f = RedisFrontier::connect(
        &client.clone().into(),
        Options {
            dupefilter: mode,
            ..spider.frontier_options("bench")
        },
    )
    .await
    .expect("frontier");
    f.prepare_dupefilter().await.expect("prepare");
    let before = used_memory(&mut conn);
    let started = Instant::now();
    const BATCH: u64 = 20_000;
    let mut i = 0;
    while i < entries {
        let batch: Vec<String> = (i..(i + BATCH).min(entries)).map(fingerprint).collect();
        let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
        f.mark_seen(&refs).await.expect("add");
        i += BATCH;
    }
    let seconds = started.elapsed().as_secs_f64();
    let after = used_memory(&mut conn);
    let info = f.dupefilter_info().await.expect("info");
    let false_positive = if probe && matches!(mode, Dupefilter::Bloom { .. }) {
        let probes = 1_000_000u64;
        let mut seen = 0;
        let mut j = 0;
        while j < probes {
            let batch: Vec<String> = (j..(j + BATCH).min(probes))
                .map(|k| fingerprint(u64::MAX - k))
                .collect();
            let refs: Vec<&str> = batch.iter().map(String::as_str).collect();
            seen += f.count_seen(&refs).await.expect("check");
            j += BATCH;
        }
        Some(seen as f64 / probes as f64)
    } else {
        None
    };
    Row {
        mode: mode.mode(),
        entries: info.entries,
        delta: after.saturating_sub(before),
        usage: info.bytes,
        seconds,
        false_positive,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !crawlworker_testkit::benchmarking() {
        return;
    }
    let sizes: Vec<u64> = std::env::var("DUPEFILTER_SIZES")
        .unwrap_or_else(|_| "1000000,10000000".into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .expect("DUPEFILTER_SIZES: numbers separated by commas")
        })
        .collect();
    let modes: Option<Vec<String>> = std::env::var("DUPEFILTER_MODES")
        .ok()
        .map(|m| m.split(',').map(|s| s.trim().to_string()).collect());
    let redis = crawlworker_testkit::RedisServer::start();
    let version: String = {
        let mut c = redis.conn();
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut c)
            .expect("INFO");
        info.lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("?")
            .trim()
            .to_string()
    };
    println!("redis-server {version}; bytes per entry = used_memory delta / entries (MEMORY USAGE of the filter's keys / entries)\n");
    println!("| mode | entries | bytes per entry (used_memory) | bytes per entry (MEMORY USAGE) | Redis memory | insert time | false positives |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for &n in &sizes {
        for mode in [
            Dupefilter::Exact,
            Dupefilter::Compact,
            Dupefilter::Bloom {
                capacity: n,
                error_rate: 0.001,
            },
            Dupefilter::Bloom {
                capacity: 100_000_000,
                error_rate: 0.001,
            },
            Dupefilter::Expiring {
                ttl: Duration::from_secs(7 * 24 * 3600),
                refresh: true,
            },
        ] {
            if modes
                .as_ref()
                .is_some_and(|m| !m.iter().any(|name| name == mode.mode()))
            {
                continue;
            }
            let row = measure(&redis.url(), mode, n, true).await;
            let label = match mode {
                Dupefilter::Bloom { capacity, .. } if capacity == n => {
                    "bloom (capacity = entries, 0.001)".to_string()
                }
                Dupefilter::Bloom { capacity, .. } => {
                    format!("bloom (default capacity {capacity}, 0.001)")
                }
                _ => row.mode.to_string(),
            };
            println!(
                "| {label} | {} | {:.1} | {:.1} | {:.1} MiB | {:.1} s | {} |",
                row.entries,
                row.delta as f64 / row.entries as f64,
                row.usage as f64 / row.entries as f64,
                row.delta as f64 / (1 << 20) as f64,
                row.seconds,
                row.false_positive
                    .map(|p| format!("{:.4} %", p * 100.0))
                    .unwrap_or_else(|| "none (exact)".into()),
            );
        }
    }
    if modes
        .as_ref()
        .is_some_and(|m| !m.iter().any(|name| name == "bloom"))
    {
        return;
    }
    println!("\nA Bloom filter at 0.001 costs, per entry of its capacity (MEMORY USAGE and used_memory delta of a new filter ÷ capacity):\n");
    println!("| capacity | bitmap (bits ÷ 8 ÷ capacity) | used_memory | MEMORY USAGE |");
    println!("|---:|---:|---:|---:|");
    let mut capacity = 100_000f64;
    while capacity <= 400_000_000.0 {
        let n = capacity as u64;
        let row = measure(
            &redis.url(),
            Dupefilter::Bloom {
                capacity: n,
                error_rate: 0.001,
            },
            1,
            false,
        )
        .await;
        let plan = crawlworker::frontier::bloom_plan(n, 0.001);
        println!(
            "| {n} | {:.3} | {:.3} | {:.3} |",
            (plan.piece_bits * plan.pieces) as f64 / 8.0 / n as f64,
            row.delta as f64 / n as f64,
            row.usage as f64 / n as f64,
        );
        capacity *= 1.37;
    }
}
