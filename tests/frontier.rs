//! The frontier's queue semantics against a real Redis, driven through the
//! library: priority order, FIFO within a priority, leases that expire and
//! return, commits that happen once; and the fast pickup of new work.

use std::time::Duration;

use redis::Commands;

use crawlworker::frontier::{
    Committed, DeadLetter, Frontier, Options, PageResult, Refused, StartClaim,
};
use crawlworker::spider::Spider;
use crawlworker_demo::Site;
use crawlworker_testkit::FixtureServer;

use crawlworker::worker::StopRules;
use crawlworker_testkit::{eventually, eventually_async, spider_for, temp_dir, RedisServer};

use crate::in_process::InProcess;

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
    let f = Frontier::connect(&client.clone().into(), options)
        .await
        .unwrap();
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
            outcome: spider.start_request(&entry).map_err(Refused::from),
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
    // Time must pass for the lease to expire (by Redis's clock); polling
    // would lease the other request meanwhile.
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

/// How long a picked-up URL may take: far below the idle recheck (60 s),
/// so only the wake-up explains it. How fast pickup is, is measured by
/// `cargo bench --bench pickup`.
const NO_POLL: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_pushed_to_an_idle_worker_is_fetched_without_waiting_for_a_poll() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("pickup");
    let spider_path = spider_for("bbs", &server.base_url(), dir.path());
    // A long recheck interval: only the wake-up can explain a pickup.
    let worker = InProcess::start(
        &spider_path,
        &redis.url(),
        &[("CRAWLWORKER_IDLE_RECHECK", "60s")],
        StopRules::default(),
    )
    .await;
    // Idle: it has found nothing to do and listens for wake-ups.
    let mut conn = redis.conn();
    eventually("the worker listens for wake-ups", NO_POLL, || {
        let (_, listeners): (String, u64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg("bbs:wake")
            .query(&mut conn)
            .unwrap();
        (listeners > 0).then_some(())
    });
    let spider = Spider::load(&spider_path).unwrap();
    let client = redis::Client::open(redis.url()).unwrap();
    let producer = Frontier::connect(&client.clone().into(), spider.frontier_options("producer"))
        .await
        .unwrap();
    producer
        .push_start(
            &[r#"{"forum_id": "00001", "max_page": 1}"#.to_string()],
            0.0,
            None,
        )
        .await
        .unwrap();
    eventually_async("the pushed URL is fetched", NO_POLL, || async {
        (server.hits("/list/00001/1") > 0).then_some(())
    })
    .await;
    worker.stop().await;
    server.stop().await.unwrap();
}

/// The lease script sets aside a queue member that has no request behind
/// it; its dead letter is the same record the worker writes (one type,
/// `frontier::DeadLetter`, with the same fields).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_written_by_a_script_is_the_same_record() {
    let redis = RedisServer::start();
    let (_, f) = frontier(&redis, "worker-a", Duration::from_secs(60)).await;
    let mut conn = redis.conn();
    let _: () = conn.zadd("q:requests", "orphan", 0).unwrap();
    let (leased, _) = f.lease(5, 0).await.unwrap();
    assert!(leased.is_empty());
    let raw: Vec<String> = conn.lrange("q:dead", 0, -1).unwrap();
    assert_eq!(raw.len(), 1, "{raw:?}");
    let record: DeadLetter = serde_json::from_str(&raw[0]).unwrap();
    assert_eq!(
        (record.key.as_str(), record.entry.as_str()),
        ("q:requests", "orphan")
    );
    let written: serde_json::Value = serde_json::from_str(&raw[0]).unwrap();
    assert_eq!(
        written,
        serde_json::to_value(&record).unwrap(),
        "the script writes exactly the fields of DeadLetter"
    );
}
