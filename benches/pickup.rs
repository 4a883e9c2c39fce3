//! How fast an idle worker picks up new work, and what an idle worker costs
//! Redis. For each way of pushing a start entry, one idle `crawlworker run`
//! process (release build, default `idle_recheck` of 1 s) on a fresh
//! `redis-server`; each of 40 pushes is timed until the demo server sees
//! the request, and the median, 90th percentile and maximum are printed.
//! The producers:
//!
//! - `push-urls`: crawlworker's own push (the `push-urls` script, which
//!   publishes a wake-up), to a list;
//! - `RPUSH`: a plain redis client, as a scrapy-redis scheduler or
//!   `redis-cli` pushes, to a list (the worker's blocking `BLMOVE` wait);
//! - `SADD` / `ZADD`: a plain redis client, to a set / zset, with keyspace
//!   notifications on (`notify-keyspace-events Ks` / `Kz`) and off (the
//!   worker then finds the entry at its next `idle_recheck`).
//!
//! Then, for a list, a set with notifications and a set without, the Redis
//! commands one idle worker costs per second over 30 s of idleness: those
//! it sends (`redis-cli monitor`), and those Redis executes, counting the
//! ones inside its scripts (`INFO commandstats` before and after; the
//! benchmark's own `INFO` left out).
//!
//!     cargo bench --bench pickup        # needs redis-server; ~6 minutes
//!
//! `PICKUP_SAMPLES` changes the number of pushes, `PICKUP_IDLE_SECS` the
//! idle window.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use redis::AsyncCommands;

use crawlworker::frontier::RedisFrontier;
use crawlworker::spider::Spider;
use crawlworker_demo::Site;
use crawlworker_testkit::{FixtureServer, RedisServer, Worker};

/// How an entry reaches the start key.
#[derive(Clone, Copy, PartialEq)]
enum Producer {
    PushUrls,
    Rpush,
    Sadd,
    Zadd,
}

struct Scenario {
    label: &'static str,
    producer: Producer,
    /// `notify-keyspace-events` of the server ("" is Redis's default).
    notify: &'static str,
    /// Count the commands of the idle worker afterwards.
    idle_cost: bool,
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        label: "push-urls to a list (wake-up published)",
        producer: Producer::PushUrls,
        notify: "",
        idle_cost: false,
    },
    Scenario {
        label: "plain RPUSH to a list (BLMOVE wait)",
        producer: Producer::Rpush,
        notify: "",
        idle_cost: true,
    },
    Scenario {
        label: "plain SADD, keyspace notifications on (Ks)",
        producer: Producer::Sadd,
        notify: "Ks",
        idle_cost: true,
    },
    Scenario {
        label: "plain SADD, notifications off (idle_recheck 1 s)",
        producer: Producer::Sadd,
        notify: "",
        idle_cost: true,
    },
    Scenario {
        label: "plain ZADD, keyspace notifications on (Kz)",
        producer: Producer::Zadd,
        notify: "Kz",
        idle_cost: false,
    },
    Scenario {
        label: "plain ZADD, notifications off (idle_recheck 1 s)",
        producer: Producer::Zadd,
        notify: "",
        idle_cost: false,
    },
];

const TASK: &str = r#"{"forum_id": "00001", "max_page": 1}"#;
const TARGET: &str = "/list/00001/1";

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !crawlworker_testkit::benchmarking() {
        return;
    }
    let samples = env_number("PICKUP_SAMPLES", 40) as usize;
    let idle = Duration::from_secs(env_number("PICKUP_IDLE_SECS", 30));
    let server = FixtureServer::start(Site::demo())
        .await
        .expect("demo server");
    let dir = crawlworker_testkit::temp_dir("pickup-bench");
    let mut costs = Vec::new();
    for s in SCENARIOS {
        let kind = match s.producer {
            Producer::PushUrls | Producer::Rpush => "list",
            Producer::Sadd => "set",
            Producer::Zadd => "zset",
        };
        let spider_path = spider(kind, &server, &dir.path().join(kind));
        let redis = RedisServer::start();
        let client = redis::Client::open(redis.url()).expect("redis url");
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg(s.notify)
            .query_async(&mut conn)
            .await
            .expect("CONFIG SET");
        let worker = Worker::spawn(&spider_path, &redis.url(), &[], &[]);
        while conn.hlen::<_, u64>("bbs:workers").await.unwrap_or(0) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let spider = Spider::load(&spider_path).expect("spider");
        let frontier =
            RedisFrontier::connect(&client.clone().into(), spider.frontier_options("bench"))
                .await
                .expect("connect");
        let mut times = Vec::new();
        for i in 0..samples {
            // Let the worker go idle (its previous pages committed).
            tokio::time::sleep(Duration::from_millis(150)).await;
            let before = server.hits(TARGET);
            let pushed = Instant::now();
            match s.producer {
                Producer::PushUrls => {
                    frontier
                        .push_start(&[TASK.to_string()], 0.0, None)
                        .await
                        .expect("push");
                }
                Producer::Rpush => conn
                    .rpush::<_, _, ()>("bbs:start_urls", TASK)
                    .await
                    .expect("RPUSH"),
                Producer::Sadd => conn
                    .sadd::<_, _, ()>("bbs:start_urls", TASK)
                    .await
                    .expect("SADD"),
                Producer::Zadd => conn
                    .zadd::<_, _, _, ()>("bbs:start_urls", TASK, i as f64)
                    .await
                    .expect("ZADD"),
            }
            while server.hits(TARGET) == before {
                assert!(
                    pushed.elapsed() < Duration::from_secs(5),
                    "not picked up:\n{}",
                    worker.log()
                );
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
            times.push(pushed.elapsed());
        }
        times.sort();
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "{:<52} over {} pushes: median {:7.2} ms, p90 {:7.2} ms, max {:7.2} ms",
            s.label,
            times.len(),
            ms(at(0.5)),
            ms(at(0.9)),
            ms(times[times.len() - 1]),
        );
        if s.idle_cost {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let before = command_stats(&mut conn).await;
            let monitor = Monitor::start(&redis.url());
            tokio::time::sleep(idle).await;
            let (sent, in_scripts) = monitor.stop();
            let mut after = command_stats(&mut conn).await;
            // The benchmark's own INFO.
            if let Some(n) = after.get_mut("info") {
                *n = n.saturating_sub(1);
            }
            let delta: BTreeMap<String, u64> = after
                .into_iter()
                .map(|(c, n)| (c.clone(), n - before.get(&c).copied().unwrap_or(0)))
                .filter(|(_, n)| *n > 0)
                .collect();
            costs.push((s.label, delta, sent, in_scripts));
        }
        drop(worker);
    }
    println!();
    let secs = idle.as_secs_f64();
    for (label, delta, sent, in_scripts) in costs {
        let total: u64 = delta.values().sum();
        let each: Vec<String> = delta.iter().map(|(c, n)| format!("{c} {n}")).collect();
        let sent_each: Vec<String> = sent.iter().map(|(c, n)| format!("{c} {n}")).collect();
        println!(
            "idle worker, {label}, over {} s: sent {:.2} commands/s ({}); executed {:.2} commands/s with those inside scripts ({} of them; INFO commandstats: {})",
            idle.as_secs(),
            sent.values().sum::<u64>() as f64 / secs,
            sent_each.join(", "),
            total as f64 / secs,
            in_scripts,
            each.join(", ")
        );
    }
    let _ = server.stop().await;
}

/// The bbs spider pointed at `server`, with a start key of `kind`.
fn spider(kind: &str, server: &FixtureServer, dir: &Path) -> std::path::PathBuf {
    let path = crawlworker_testkit::spider_for("bbs", &server.base_url(), dir);
    let text = std::fs::read_to_string(&path).expect("spider file");
    std::fs::write(
        &path,
        text.replace("type = \"list\"", &format!("type = \"{kind}\"")),
    )
    .expect("spider file");
    path
}

/// Calls per command so far (`INFO commandstats`).
async fn command_stats(conn: &mut redis::aio::MultiplexedConnection) -> BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO commandstats");
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_string(), calls))
        })
        .collect()
}

/// `redis-cli monitor` in the background: which commands clients send
/// (scripts' own commands are shown as `[0 lua]`).
struct Monitor {
    child: std::process::Child,
    out: crawlworker_testkit::TempDir,
}

impl Monitor {
    fn start(url: &str) -> Monitor {
        let out = crawlworker_testkit::temp_dir("pickup-monitor");
        let file = std::fs::File::create(out.path().join("monitor.txt")).expect("monitor file");
        let child = std::process::Command::new("redis-cli")
            .args(["-u", url, "monitor"])
            .stdout(file)
            .spawn()
            .expect("redis-cli monitor (from the redis-tools package)");
        std::thread::sleep(Duration::from_millis(200));
        Monitor { child, out }
    }

    /// Commands sent by clients, by name (the benchmark's INFO left out),
    /// and how many ran inside scripts.
    fn stop(mut self) -> (BTreeMap<String, u64>, u64) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let text = std::fs::read_to_string(self.out.path().join("monitor.txt")).unwrap_or_default();
        let (mut sent, mut in_scripts) = (BTreeMap::new(), 0);
        for line in text.lines() {
            let Some((source, command)) = line.split_once("] ") else {
                continue;
            };
            let command = command
                .split(' ')
                .next()
                .unwrap_or("")
                .trim_matches('"')
                .to_lowercase();
            if source.ends_with(" lua") {
                in_scripts += 1;
            } else if command != "info" && !command.is_empty() {
                *sent.entry(command).or_insert(0) += 1;
            }
        }
        (sent, in_scripts)
    }
}
