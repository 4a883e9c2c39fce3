//! The frontier's queue semantics against a real Redis, driven through the
//! library: priority order, FIFO within a priority, leases that expire and
//! return, commits that happen once; and the fast pickup of new work.

use std::time::{Duration, Instant};

use redis::Commands;

use crawlworker::frontier::{Committed, Frontier, Options, PageResult, StartClaim};
use crawlworker::spider::Spider;
use crawlworker_demo::Site;
use crawlworker_testkit::FixtureServer;

use crawlworker_testkit::{spider_for, RedisServer, Worker};

const SPIDER: &str = r#"
name = "q"
[start]
url = "http://127.0.0.1:8700/list/{n}/1"
priority = "{p}"
[items.x]
n = { meta = "n" }
[[rules]]
name = "list"
match = '/list/'
  [[rules.extract]]
  item = "x"
"#;

async fn frontier(redis: &RedisServer, worker: &str, lease: Duration) -> (Spider, Frontier) {
    let spider = Spider::from_str("q.toml".as_ref(), SPIDER).unwrap_or_else(|e| panic!("{e}"));
    let client = redis::Client::open(redis.url()).unwrap();
    let options = Options {
        lease,
        ..spider.frontier_options(worker)
    };
    let f = Frontier::connect(&client, options).await.unwrap();
    (spider, f)
}

/// Pushes tasks (n, priority) and claims them all into the queue, in order.
async fn enqueue(spider: &Spider, f: &Frontier, tasks: &[(u32, i64)]) {
    let entries: Vec<String> = tasks
        .iter()
        .map(|(n, p)| format!(r#"{{"n": {n}, "p": {p}}}"#))
        .collect();
    assert_eq!(
        f.push_start(&entries, 0.0, None).await.unwrap(),
        entries.len() as u64
    );
    let (_, read) = f.lease(0, entries.len()).await.unwrap();
    let claims: Vec<StartClaim> = read
        .into_iter()
        .map(|entry| StartClaim {
            outcome: spider.start_request(&entry).map_err(|e| e.to_string()),
            entry,
        })
        .collect();
    let c = f.claim_start(&claims).await.unwrap();
    assert_eq!(c.enqueued, tasks.len() as u64);
}

fn order(leased: &[crawlworker::frontier::Leased]) -> Vec<u64> {
    leased
        .iter()
        .map(|l| l.request.as_ref().unwrap().meta["n"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn equal_priorities_come_out_fifo_and_higher_priorities_first() {
    let redis = RedisServer::start();
    let (spider, f) = frontier(&redis, "w1", Duration::from_secs(60)).await;
    enqueue(
        &spider,
        &f,
        &[
            (1, 0),
            (2, 0),
            (3, 5),
            (4, -1),
            (5, 0),
            (6, 5),
            (7, 4095),
            (8, -9999),
        ],
    )
    .await;
    let leased = f.lease(100, 0).await.unwrap().0;
    // Priorities beyond ±4095 are clamped (8 sorts with -4095, last).
    assert_eq!(order(&leased), vec![7, 3, 6, 1, 2, 5, 4, 8]);
    // FIFO also across separate enqueues.
    enqueue(&spider, &f, &[(10, 0), (11, 0)]).await;
    enqueue(&spider, &f, &[(12, 0)]).await;
    assert_eq!(order(&f.lease(10, 0).await.unwrap().0), vec![10, 11, 12]);
}

#[tokio::test]
async fn an_expired_lease_returns_to_its_place_and_its_old_holder_cannot_commit() {
    let redis = RedisServer::start();
    let (spider, a) = frontier(&redis, "worker-a", Duration::from_millis(200)).await;
    let (_, b) = frontier(&redis, "worker-b", Duration::from_secs(60)).await;
    enqueue(&spider, &a, &[(1, 0), (2, 0)]).await;
    let first = a.lease(1, 0).await.unwrap().0;
    assert_eq!(order(&first), vec![1]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Worker a "died": b's next lease returns the expired one, at its place.
    assert_eq!(order(&b.lease(10, 0).await.unwrap().0), vec![1, 2]);
    let page = PageResult {
        items: vec![serde_json::from_str(r#"{"n": 1}"#).unwrap()],
        ..PageResult::default()
    };
    assert_eq!(
        a.commit(&first[0].id, &page, 0).await.unwrap().0,
        Committed::LeaseLost
    );
    let mut conn = redis.conn();
    assert_eq!(
        conn.llen::<_, u64>("q:items").unwrap(),
        0,
        "a lost lease must not push items"
    );
    assert!(matches!(
        b.commit(&first[0].id, &page, 0).await.unwrap().0,
        Committed::Done { .. }
    ));
    // A second commit of the same page (a retry after a lost reply) is refused.
    assert_eq!(
        b.commit(&first[0].id, &page, 0).await.unwrap().0,
        Committed::LeaseLost
    );
    assert_eq!(conn.llen::<_, u64>("q:items").unwrap(), 1);
}

#[tokio::test]
async fn the_dupefilter_filters_unless_dont_filter() {
    let redis = RedisServer::start();
    let (spider, f) = frontier(&redis, "w", Duration::from_secs(60)).await;
    enqueue(&spider, &f, &[(1, 0)]).await;
    let leased = f.lease(1, 0).await.unwrap().0;
    let follow = |url: &str, dont_filter: bool| crawlworker::request::Request {
        dont_filter,
        ..crawlworker::request::Request::get(url)
    };
    let page = PageResult {
        requests: vec![
            follow("http://127.0.0.1:8700/a", false),
            follow("http://127.0.0.1:8700/a", false),
            follow("http://127.0.0.1:8700/a", true),
        ],
        ..PageResult::default()
    };
    assert_eq!(
        f.commit(&leased[0].id, &page, 0).await.unwrap().0,
        Committed::Done {
            enqueued: 2,
            filtered: 1
        }
    );
    let mut conn = redis.conn();
    let fp = crawlworker::request::Request::get("http://127.0.0.1:8700/a").fingerprint();
    assert!(conn.sismember::<_, _, bool>("q:dupefilter", &fp).unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_pushed_to_an_idle_worker_is_fetched_within_100ms() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = std::env::temp_dir().join(format!("crawlworker-pickup-{}", std::process::id()));
    let spider_path = spider_for("bbs", &server.base_url(), &dir);
    // A long recheck interval: only the wake-up can explain a fast pickup.
    let worker = Worker::spawn(
        &spider_path,
        &redis.url(),
        &[],
        &[("CRAWLWORKER_IDLE_RECHECK", "60s")],
    );
    let mut conn = redis.conn();
    let started = Instant::now();
    while conn.hlen::<_, u64>("bbs:workers").unwrap() == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the worker never started:\n{}",
            worker.log()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // now idle, waiting
    let spider = Spider::load(&spider_path).unwrap();
    let client = redis::Client::open(redis.url()).unwrap();
    let producer = Frontier::connect(&client, spider.frontier_options("producer"))
        .await
        .unwrap();
    let target = "/list/00001/1";
    let pushed = Instant::now();
    producer
        .push_start(
            &[r#"{"forum_id": "00001", "max_page": 1}"#.to_string()],
            0.0,
            None,
        )
        .await
        .unwrap();
    while server.hits(target) == 0 {
        assert!(
            pushed.elapsed() < Duration::from_secs(5),
            "never fetched:\n{}",
            worker.log()
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let took = pushed.elapsed();
    assert!(took < Duration::from_millis(100), "pickup took {took:?}");
    drop(worker);
    let _ = std::fs::remove_dir_all(&dir);
    server.stop().await.unwrap();
}
