//! How fast an idle worker picks up new work: push one start task to an
//! idle cluster (one `crawlworker run` process, release build) and time
//! until the demo server sees the request. Prints the median, 90th
//! percentile and maximum over 40 pushes.
//!
//!     cargo bench --bench pickup        # needs redis-server

use std::time::{Duration, Instant};

use redis::Commands;

use crawlworker::frontier::Frontier;
use crawlworker::spider::Spider;
use crawlworker_demo::Site;
use crawlworker_testkit::FixtureServer;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if !crawlworker_testkit::benchmarking() {
        return;
    }
    let redis = crawlworker_testkit::RedisServer::start();
    let server = FixtureServer::start(Site::demo())
        .await
        .expect("demo server");
    let dir = crawlworker_testkit::temp_dir("pickup-bench");
    let spider_path = crawlworker_testkit::spider_for("bbs", &server.base_url(), dir.path());
    let worker = crawlworker_testkit::Worker::spawn(
        &spider_path,
        &redis.url(),
        &[],
        &[("CRAWLWORKER_IDLE_RECHECK", "60s")],
    );
    let mut conn = redis.conn();
    while conn.hlen::<_, u64>("bbs:workers").unwrap_or(0) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let spider = Spider::load(&spider_path).expect("spider");
    let client = redis::Client::open(redis.url()).expect("redis url");
    let producer = Frontier::connect(&client.clone().into(), spider.frontier_options("bench"))
        .await
        .expect("connect");
    let target = "/list/00001/1";
    let task = r#"{"forum_id": "00001", "max_page": 1}"#.to_string();
    let mut samples = Vec::new();
    for _ in 0..40 {
        // Let the worker go idle (its previous pages committed).
        tokio::time::sleep(Duration::from_millis(150)).await;
        let before = server.hits(target);
        let pushed = Instant::now();
        producer
            .push_start(std::slice::from_ref(&task), 0.0, None)
            .await
            .expect("push");
        while server.hits(target) == before {
            assert!(
                pushed.elapsed() < Duration::from_secs(5),
                "not picked up:\n{}",
                worker.log()
            );
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        samples.push(pushed.elapsed());
    }
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    println!(
        "pickup latency over {} pushes: median {:.2} ms, p90 {:.2} ms, max {:.2} ms",
        samples.len(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.9).as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3
    );
    drop(worker);
    let _ = server.stop().await;
}
