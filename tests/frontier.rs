//! The Redis frontier's own behaviour, beyond the contract both backends
//! keep (that is `frontier_contract.rs`): pages committed in batches, each
//! only while its lease holds; a page that may not wait sends its batch at
//! once; the fast pickup of new work by an idle worker; and the dead letter
//! the lease script writes for a queue member without a request.

use std::time::Duration;

use redis::Commands;

use crawlworker::frontier::{Backend, Committed, DeadLetter, Options, PageResult, RedisFrontier};
use crawlworker::spider::Spider;
use crawlworker_demo::Site;
use crawlworker_testkit::FixtureServer;

use crawlworker::worker::StopRules;
use crawlworker_testkit::{eventually, eventually_async, spider_for, temp_dir, RedisServer};

use crate::frontier_contract::{enqueue, order, spider};
use crate::in_process::InProcess;

async fn frontier(redis: &RedisServer, worker: &str, lease: Duration) -> (Spider, RedisFrontier) {
    let spider = spider();
    let client = redis::Client::open(redis.url()).unwrap();
    let options = Options {
        lease,
        ..spider.frontier_options(worker)
    };
    let f = RedisFrontier::connect(&client.clone().into(), options)
        .await
        .unwrap();
    (spider, f)
}

/// Worker a's frontier with a lease of a minute, whose commits wait up to
/// `commit_wait` for other pages to share their batch.
async fn batching(redis: &RedisServer, spider: &Spider, commit_wait: Duration) -> RedisFrontier {
    let client = redis::Client::open(redis.url()).unwrap();
    RedisFrontier::connect(
        &client.into(),
        Options {
            lease: Duration::from_secs(60),
            commit_wait,
            ..spider.frontier_options("worker-a")
        },
    )
    .await
    .unwrap()
}

/// Pages finished together are committed in one script call: each still
/// only while its lease is the worker's. A batch holding a lost page is
/// written without it (nothing of it: items, links, stats), and the other
/// pages' links, items and stats all land; duplicates across the batch's
/// pages are filtered as if committed one by one.
#[tokio::test]
async fn a_batch_of_pages_commits_each_page_whose_lease_holds_and_no_other() {
    let redis = RedisServer::start();
    let (spider, short) = frontier(&redis, "worker-a", Duration::from_millis(200)).await;
    let (_, other) = frontier(&redis, "worker-b", Duration::from_secs(60)).await;
    // Worker a's frontier waits for pages to share a commit.
    let a = batching(&redis, &spider, Duration::from_millis(300)).await;
    enqueue(&a.clone().into(), &[(1, 0), (2, 0), (3, 0)]).await;
    // Request 1 is leased by a with a short lease, which expires and goes
    // to b; 2 and 3 are a's for a minute.
    let lost = short.lease(1, 0).await.unwrap().0;
    // Its lease expires by Redis's clock; a lease of none puts it back.
    eventually_async(
        "the short lease expires",
        Duration::from_secs(10),
        || async {
            other.lease(0, 0).await.unwrap();
            (other.status().await.unwrap().queued == 3).then_some(())
        },
    )
    .await;
    assert_eq!(order(&other.lease(1, 0).await.unwrap().0), vec![1]);
    let held = a.lease(2, 0).await.unwrap().0;
    assert_eq!(order(&held), vec![2, 3]);
    let page = |n: u32, link: &str| PageResult {
        items: vec![serde_json::from_str(&format!(r#"{{"n": {n}}}"#)).unwrap()],
        requests: vec![crawlworker::request::Request::get(link)],
        stats: {
            let mut t = crawlworker::stats::Tally::default();
            t.add(crawlworker::stats::ITEM_SCRAPED_COUNT, 1);
            t
        },
        ..PageResult::default()
    };
    // Page 1 says it is a's (it is not any more), 2 and 3 share a link.
    let (p1, p2, p3) = (
        page(1, "http://127.0.0.1:8700/lost"),
        page(2, "http://127.0.0.1:8700/shared"),
        page(3, "http://127.0.0.1:8700/shared"),
    );
    let (r1, r2, r3) = tokio::join!(
        a.commit(&lost[0], &p1, 0, true.into()),
        a.commit(&held[0], &p2, 0, true.into()),
        a.commit(&held[1], &p3, 0, true.into()),
    );
    assert_eq!(r1.unwrap().0, Committed::LeaseLost);
    let (r2, r3) = (r2.unwrap().0, r3.unwrap().0);
    assert_eq!(
        (r2, r3),
        (
            Committed::Done {
                enqueued: 1,
                filtered: 0
            },
            Committed::Done {
                enqueued: 0,
                filtered: 1
            }
        )
    );
    let mut conn = redis.conn();
    let mut items: Vec<String> = conn.lrange("q:items", 0, -1).unwrap();
    items.sort();
    assert_eq!(items, vec![r#"{"n":2}"#, r#"{"n":3}"#]);
    let mut stat = |field: &str| -> i64 {
        conn.hget::<_, _, Option<i64>>("q:stats", field)
            .unwrap()
            .unwrap_or(0)
    };
    assert_eq!(stat("item_scraped_count"), 2);
    assert_eq!(stat("dupefilter/filtered"), 1);
    let lost_fp = crawlworker::request::Request::get("http://127.0.0.1:8700/lost").fingerprint();
    let mut conn = redis.conn();
    assert!(!conn
        .sismember::<_, _, bool>("q:dupefilter", &lost_fp)
        .unwrap());
    // The lost page is still b's to commit.
    assert!(matches!(
        other
            .commit(&lost[0], &p1, 0, false.into())
            .await
            .unwrap()
            .0,
        Committed::Done { .. }
    ));
    assert_eq!(conn.llen::<_, u64>("q:items").unwrap(), 3);
}

/// A page that may not wait (its download slot would idle until its
/// replacement comes) sends its batch at once, with the pages already
/// waiting in it, however long `commit_wait` is.
#[tokio::test]
async fn a_page_that_may_not_wait_sends_its_batch_at_once() {
    let redis = RedisServer::start();
    let (spider, _) = frontier(&redis, "worker-a", Duration::from_secs(60)).await;
    let a = batching(&redis, &spider, Duration::from_secs(600)).await;
    enqueue(&a.clone().into(), &[(1, 0), (2, 0)]).await;
    let held = a.lease(2, 0).await.unwrap().0;
    let page = PageResult::default();
    let (first, second) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(a.commit(&held[0], &page, 0, true.into()), async {
            // The second page finishes later, while the first waits in
            // its batch: the scenario, not a wait for something to happen.
            tokio::time::sleep(Duration::from_millis(200)).await;
            a.commit(&held[1], &page, 0, false.into()).await
        })
    })
    .await
    .expect("the batch waited for commit_wait although a page in it may not wait");
    assert!(matches!(first.unwrap().0, Committed::Done { .. }));
    assert!(matches!(second.unwrap().0, Committed::Done { .. }));
}

/// How long a picked-up URL may take: far below the idle recheck (60 s),
/// so only the wake-up explains it. How fast pickup is, is measured by
/// `cargo bench --bench pickup`.
const NO_POLL: Duration = Duration::from_secs(10);

/// Leases nothing for `f` (worker `name`) until its lease notes it as
/// waiting and taking handed leases: Redis has confirmed its wake-up
/// subscription.
async fn wait_listening(redis: &RedisServer, spider: &Spider, f: &RedisFrontier, name: &str) {
    eventually_async(
        "the worker's wake-up subscription is confirmed",
        NO_POLL,
        || async {
            assert!(f.lease(4, 0).await.unwrap().0.is_empty());
            let note: Option<String> = redis.conn().hget(&spider.keys.waiting, name).unwrap();
            note.is_some_and(|n| n.ends_with("|h")).then_some(())
        },
    )
    .await;
}

/// A commit that queues work gives it to the workers waiting for work,
/// as many as its new requests can use, not to every worker. One whose
/// wake-up subscription Redis has confirmed is leased its share in the
/// commit itself and handed the leases in its wake-up: its next lease
/// takes them without a script call. One that does not take handed leases
/// (a worker of an older version) is woken to lease, as before.
#[tokio::test]
async fn a_commit_hands_its_new_work_to_as_many_waiting_workers_as_can_use_it() {
    let redis = RedisServer::start();
    let (spider, a) = frontier(&redis, "worker-a", Duration::from_secs(60)).await;
    let (_, b) = frontier(&redis, "worker-b", Duration::from_secs(60)).await;
    let (_, c) = frontier(&redis, "worker-c", Duration::from_secs(60)).await;
    let (_, d) = frontier(&redis, "worker-d", Duration::from_secs(60)).await;
    let (_, e) = frontier(&redis, "worker-e", Duration::from_secs(60)).await;
    let wakes = [&b, &c, &d, &e].map(Backend::wake);
    enqueue(&a.clone().into(), &[(1, 0)]).await;
    let held = a.lease(1, 0).await.unwrap().0;
    for (f, name) in [
        (&b, "worker-b"),
        (&c, "worker-c"),
        (&d, "worker-d"),
        (&e, "worker-e"),
    ] {
        wait_listening(&redis, &spider, f, name).await;
    }
    let mut conn = redis.conn();
    let _: () = conn.hset(&spider.keys.waiting, "worker-c", "4").unwrap();
    let page = PageResult {
        requests: (1..=3)
            .map(|i| {
                crawlworker::request::Request::get(&format!("http://127.0.0.1:8700/list/9/{i}"))
            })
            .collect(),
        ..PageResult::default()
    };
    let (done, _) = a.commit(&held[0], &page, 0, false.into()).await.unwrap();
    assert!(
        matches!(done, Committed::Done { enqueued: 3, .. }),
        "{done:?}"
    );
    // The fair share: 3 requests out among 5 workers, 1 each, to b, c
    // (woken) and d, in the order they said they wait.
    let calls = redis.command_calls("fcall");
    for (f, name) in [(&b, "b"), (&d, "d")] {
        let handed = eventually_async("the handed lease arrives", NO_POLL, || async {
            let got = Backend::take_handed(f);
            (!got.is_empty()).then_some(got)
        })
        .await;
        assert_eq!(handed.len(), 1, "{name}: {handed:?}");
    }
    assert_eq!(redis.command_calls("fcall"), calls, "taken with no call");
    assert!(wakes[1].wait(Duration::from_secs(10)).await, "c is woken");
    assert_eq!(c.lease(4, 0).await.unwrap().0.len(), 1, "and leases one");
    // A worker that takes handed leases waits for its fair share at most
    // (1 here, of 1 request out among 5 workers when it leased): b and d
    // got it and are no longer noted; e, not needed, still waits.
    let waiting: std::collections::HashMap<String, String> =
        conn.hgetall(&spider.keys.waiting).unwrap();
    assert_eq!(waiting.get("worker-b"), None, "{waiting:?}");
    assert_eq!(waiting.get("worker-d"), None, "{waiting:?}");
    assert_eq!(waiting.get("worker-e").map(String::as_str), Some("1|h"));
    let queued: u64 = conn.zcard(&spider.keys.requests).unwrap();
    assert_eq!(queued, 0);
}

/// A worker stopping hands back the leases other workers' commits handed
/// it and it never started: they are queued again at once, not left to
/// expire.
#[tokio::test]
async fn leases_handed_to_a_worker_that_stops_go_back_to_the_queue_at_once() {
    let redis = RedisServer::start();
    let (spider, a) = frontier(&redis, "worker-a", Duration::from_secs(60)).await;
    let (_, b) = frontier(&redis, "worker-b", Duration::from_secs(60)).await;
    let wake = Backend::wake(&b);
    enqueue(&a.clone().into(), &[(1, 0)]).await;
    let held = a.lease(1, 0).await.unwrap().0;
    wait_listening(&redis, &spider, &b, "worker-b").await;
    let page = PageResult {
        requests: vec![crawlworker::request::Request::get(
            "http://127.0.0.1:8700/list/9/1",
        )],
        ..PageResult::default()
    };
    a.commit(&held[0], &page, 0, false.into()).await.unwrap();
    assert!(wake.wait(Duration::from_secs(10)).await);
    let mut conn = redis.conn();
    let inflight: u64 = conn.zcard(&spider.keys.inflight).unwrap();
    assert_eq!(inflight, 1, "leased to b in the commit");
    Backend::stop_waiting(&b).await.unwrap();
    let handed = eventually_async("b's handed lease arrives", NO_POLL, || async {
        let got = Backend::take_handed(&b);
        (!got.is_empty()).then_some(got)
    })
    .await;
    let ids: Vec<String> = handed.into_iter().map(|l| l.id).collect();
    assert_eq!(b.release(&ids).await.unwrap(), 1);
    let waiting: Vec<String> = conn.hkeys(&spider.keys.waiting).unwrap();
    assert!(!waiting.contains(&"worker-b".to_string()), "{waiting:?}");
    assert_eq!(a.lease(4, 0).await.unwrap().0.len(), 1, "queued again");
}

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
    let producer =
        RedisFrontier::connect(&client.clone().into(), spider.frontier_options("producer"))
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

/// The crew (the workers that leased or committed within a lease): a
/// worker's place is renewed once it has run down by a tenth, not on
/// every call, and a lease forgets the workers gone for a lease, with
/// what they waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_forgets_gone_workers_and_keeps_a_fresh_place() {
    let redis = RedisServer::start();
    let (_, gone) = frontier(&redis, "worker-gone", Duration::from_millis(300)).await;
    let (_, b) = frontier(&redis, "worker-b", Duration::from_secs(60)).await;
    let mut conn = redis.conn();
    let place = |conn: &mut redis::Connection, worker: &str| -> Option<f64> {
        conn.zscore("q:inflight:workers", worker).unwrap()
    };
    // Nothing is queued: both wait for work.
    gone.lease(2, 0).await.unwrap();
    b.lease(2, 0).await.unwrap();
    let first = place(&mut conn, "worker-b");
    assert!(first.is_some());
    let waits: bool = conn.hexists("q:inflight:waiting", "worker-gone").unwrap();
    assert!(waits, "the worker that found nothing waits for work");
    tokio::time::sleep(Duration::from_millis(400)).await;
    b.lease(2, 0).await.unwrap();
    assert_eq!(
        place(&mut conn, "worker-b"),
        first,
        "most of a lease to run: kept"
    );
    assert_eq!(
        place(&mut conn, "worker-gone"),
        None,
        "gone for a lease: forgotten"
    );
    let waits: bool = conn.hexists("q:inflight:waiting", "worker-gone").unwrap();
    assert!(!waits, "with what it waited for");
}

/// A queue member with no request behind it while the dead list is a key
/// another tool made: its dead letter cannot be written, so it stays
/// queued rather than vanish, and the lease goes on to the request after
/// it. The call is whole and the other tool's key untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_without_data_stays_queued_while_the_dead_list_is_another_type() {
    let redis = RedisServer::start();
    let (_, f) = frontier(&redis, "worker-a", Duration::from_secs(60)).await;
    enqueue(&f.clone().into(), &[(1, 0)]).await;
    let mut conn = redis.conn();
    // Ahead of the queued request: a lower score is leased first.
    let _: () = conn.zadd("q:requests", "orphan", -1).unwrap();
    let _: () = conn.set("q:dead", "made by another tool").unwrap();
    let (leased, _) = f.lease(5, 0).await.unwrap();
    assert_eq!(leased.len(), 1, "the request after the orphan: {leased:?}");
    let queued: Vec<String> = conn.zrange("q:requests", 0, -1).unwrap();
    assert_eq!(queued, vec!["orphan".to_string()]);
    let dead: String = conn.get("q:dead").unwrap();
    assert_eq!(dead, "made by another tool");
}
