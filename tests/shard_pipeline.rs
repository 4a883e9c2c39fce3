//! A sharded spider hands links to another spider (`to_spider`; see
//! `docs/scaling.md`, "Hand-offs to another spider"): each shard's
//! commits push their tasks to its hand-off outbox for the other spider,
//! a mover delivers them to that spider's start key (its inbox skipping a
//! second delivery), and the other spider's `--until-drained` reads the
//! shards one step each, taken again until nothing moved between two
//! readings. The shipped pair with `bbs-list` over three shards gives
//! exactly `bbs.toml`'s items, each thread handed on once, with a list
//! worker killed mid-scan, on one Redis and through a 3-master cluster;
//! tasks reach the other spider once each through their hosts' shards,
//! and a chain of them never reads drained before its end.

use std::path::Path;
use std::time::Duration;

use redis::Commands;

use crawlworker::frontier::shards::shard_keys;
use crawlworker::frontier::{
    Committed, Frontier, Handoff, KeyMode, PageResult, RedisFrontier, ShardedFrontier, StartClaim,
    StartKind,
};
use crawlworker::request::{Request, Task};
use crawlworker_demo::{demo_tasks, Site};
use crawlworker_testkit::{
    eventually, push_urls, spider_for, temp_dir, FixtureServer, RedisCluster, RedisServer, Worker,
};

use crate::expect::{assert_exact, expected, scraped_from};
// Spider `q` of the frontier contract suite.
use crate::frontier_contract::spider;

/// Leases that expire fast (a killed worker's come back within a second),
/// an idle worker that looks again every 100 ms, and a log that says what
/// a worker waits for.
const FAST: &[(&str, &str)] = &[
    ("CRAWLWORKER_LEASE_TIMEOUT", "1s"),
    ("CRAWLWORKER_IDLE_RECHECK", "100ms"),
    ("CRAWLWORKER_LOG", "info"),
];

/// Adds `lines` as the spider file's `[keys]` table.
fn with_keys(path: &Path, lines: &str) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(path, format!("{text}\n[keys]\n{lines}\n")).unwrap_or_else(|e| panic!("{e}"));
}

/// `crawlworker run PATH --until-drained` on `redis`, with leases that
/// expire fast.
fn worker(path: &Path, redis: &str) -> Worker {
    Worker::spawn(path, redis, &["--until-drained"], FAST)
}

fn exits_ok(worker: Worker, what: &str) {
    let (status, log) = worker.wait(Duration::from_secs(120));
    assert!(status.success(), "{what} failed: {status}\n{log}");
}

/// Each thread of the forum reached the detail spider once: it claimed
/// as many start entries as the forum has posts.
fn assert_each_thread_once(got: &[String], claimed: u64) {
    let posts = got
        .iter()
        .filter(|i| i.contains(r#""kind":"post""#))
        .count();
    assert_eq!(claimed as usize, posts, "each thread handed over once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_spider_over_three_shards_hands_each_thread_once_with_a_worker_killed() {
    let server = FixtureServer::start_with_latency(Site::demo(), Duration::from_millis(150))
        .await
        .unwrap_or_else(|e| panic!("cannot start the fixture server: {e}"));
    let redis = RedisServer::start();
    let dir = temp_dir("shard-pipeline");
    let list = spider_for("bbs-list", &server.base_url(), dir.path());
    let detail = spider_for("bbs-detail", &server.base_url(), dir.path());
    with_keys(&list, "shards = 3");
    push_urls(&redis.url(), &list, &demo_tasks());
    // The detail worker starts first: it must wait for the list scan
    // rather than read its upstream drained.
    let detail_worker = worker(&detail, &redis.url());
    let first = worker(&list, &redis.url());
    let mut conn = redis.conn();
    eventually(
        "the list scan is under way",
        Duration::from_secs(30),
        || {
            let claimed: Option<u64> = conn
                .hget("bbs-detail:stats", "start_urls/claimed_count")
                .ok()?;
            (claimed.unwrap_or(0) > 0).then_some(())
        },
    );
    first.kill();
    let second = worker(&list, &redis.url());
    exits_ok(second, "the second list worker");
    exits_ok(detail_worker, "the detail worker");
    let got = scraped_from(&mut conn, "bbs-detail:items");
    assert_exact(&got, &expected(&server.base_url()));
    let claimed: u64 = conn
        .hget("bbs-detail:stats", "start_urls/claimed_count")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_each_thread_once(&got, claimed);
    let _ = server.stop().await;
}

/// Both spiders sharded: the detail spider's tasks land on its shard 0's
/// start key, and its claims hand each to its host's shard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_spiders_over_three_shards_give_every_item() {
    let server = FixtureServer::start_with_latency(Site::demo(), Duration::from_millis(20))
        .await
        .unwrap_or_else(|e| panic!("cannot start the fixture server: {e}"));
    let redis = RedisServer::start();
    let dir = temp_dir("shard-pipeline-both");
    let list = spider_for("bbs-list", &server.base_url(), dir.path());
    let detail = spider_for("bbs-detail", &server.base_url(), dir.path());
    with_keys(&list, "shards = 3");
    with_keys(&detail, "shards = 3");
    push_urls(&redis.url(), &list, &demo_tasks());
    let detail_worker = worker(&detail, &redis.url());
    let list_worker = worker(&list, &redis.url());
    exits_ok(list_worker, "the list worker");
    exits_ok(detail_worker, "the detail worker");
    let mut conn = redis.conn();
    let mut got: Vec<String> = (0..3)
        .flat_map(|i| {
            let name = crawlworker::frontier::shards::shard_name("bbs-detail", i, 3);
            scraped_from(&mut conn, &format!("{name}:items"))
        })
        .collect();
    got.sort();
    assert_exact(&got, &expected(&server.base_url()));
    let _ = server.stop().await;
}

/// Through a 3-master cluster: the list spider's shards on three masters,
/// the detail spider in a slot of its own, a list worker killed mid-scan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_spider_over_three_shards_of_a_cluster_hands_each_thread_once() {
    let cluster = RedisCluster::start();
    let server = FixtureServer::start_with_latency(Site::demo(), Duration::from_millis(150))
        .await
        .unwrap_or_else(|e| panic!("cannot start the fixture server: {e}"));
    let dir = temp_dir("shard-pipeline-cluster");
    let list = spider_for("bbs-list", &server.base_url(), dir.path());
    let detail = spider_for("bbs-detail", &server.base_url(), dir.path());
    with_keys(&list, "mode = \"cluster\"\nshards = 3");
    with_keys(&detail, "mode = \"cluster\"");
    push_urls(&cluster.url(), &list, &demo_tasks());
    let detail_worker = worker(&detail, &cluster.url());
    let first = worker(&list, &cluster.url());
    let stats = "{bbs-detail}:stats";
    let mut conn = cluster.conn_for(stats);
    eventually(
        "the list scan is under way",
        Duration::from_secs(30),
        || {
            let claimed: Option<u64> = conn.hget(stats, "start_urls/claimed_count").ok()?;
            (claimed.unwrap_or(0) > 0).then_some(())
        },
    );
    first.kill();
    let second = worker(&list, &cluster.url());
    exits_ok(second, "the second list worker");
    exits_ok(detail_worker, "the detail worker");
    let key = "{bbs-detail}:items";
    let got = scraped_from(&mut cluster.conn_for(key), key);
    assert_exact(&got, &expected(&server.base_url()));
    let claimed: u64 = cluster
        .conn_for(stats)
        .hget(stats, "start_urls/claimed_count")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_each_thread_once(&got, claimed);
    let _ = server.stop().await;
}

/// Spider `x`'s keys, as spider `q` hands it tasks.
fn to_x() -> Handoff {
    Handoff {
        spider: "x".into(),
        start_key: "x:start_urls".into(),
        kind: StartKind::List,
        wake: "x:wake".into(),
        waiting: "x:inflight:waiting".into(),
        task_fields: Vec::new(),
        upstreams: "x:upstreams".into(),
        inbox: "x:requests:inbox".into(),
        control: "x:control".into(),
        dead: "x:dead".into(),
        stats: "x:stats".into(),
    }
}

/// The shards of spider `q` (three, on `redis`, as `worker`), handing
/// tasks to `x`, with the relation recorded that `x` reads; no movers run
/// until a [`ShardedFrontier`] is made of them.
async fn q_handing_to_x(redis: &RedisServer, worker: &str) -> Vec<RedisFrontier> {
    let q_keys: Vec<_> = (0..3)
        .map(|i| shard_keys("q", KeyMode::Plain, &[], None, i, 3))
        .collect();
    let relation = crawlworker::frontier::pipeline::Relation {
        upstream: "q".into(),
        keys: crawlworker::frontier::pipeline::UpstreamKeys::of_shards(
            &q_keys[0],
            &q_keys,
            StartKind::List,
            "x",
        ),
        into: to_x().upstreams,
    };
    let options = crawlworker::frontier::Options {
        handoffs: vec![to_x()],
        relations: vec![relation],
        ..spider().frontier_options(worker)
    };
    let shards = ShardedFrontier::connect_each(&target(redis), options, 3, |i| q_keys[i].clone())
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", redis.url()));
    shards[0]
        .record_relations()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    shards
}

/// Spider `x` on `redis`, as `worker`.
async fn x_as(redis: &RedisServer, worker: &str) -> Frontier {
    let options = crawlworker::frontier::Options {
        keys: crawlworker::frontier::Keys::resolve("x", KeyMode::Plain, None, &[], None),
        ..spider().frontier_options(worker)
    };
    RedisFrontier::connect(&target(redis), options)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", redis.url()))
        .into()
}

fn target(redis: &RedisServer) -> crawlworker::frontier::RedisTarget {
    redis::Client::open(redis.url())
        .unwrap_or_else(|e| panic!("{e}"))
        .into()
}

/// A URL on loopback address 127.0.0.`host`, whose shard of three is
/// [2, 2, 2, 0, 0, 0, 0, 1] for hosts 1 to 8 (see `frontier::shards`).
fn on_host(host: u32, path: &str) -> Request {
    Request::get(&format!("http://127.0.0.{host}:8700{path}"))
}

fn task(request: Request) -> Task {
    Task { to: 0, request }
}

/// The entries of `x`'s start key, sorted.
/// Waits (ten seconds at most) for a mover to deliver the one task left
/// in a hand-off outbox to x's start key.
async fn wait_for_one_delivered(redis: &RedisServer) {
    for _ in 0..100 {
        if !x_start(redis).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(x_start(redis).len(), 1, "delivered by a mover");
}

fn x_start(redis: &RedisServer) -> Vec<String> {
    let mut entries: Vec<String> = redis
        .conn()
        .lrange("x:start_urls", 0, -1)
        .unwrap_or_else(|e| panic!("{e}"));
    entries.sort();
    entries
}

/// A page's tasks reach the other spider's start key once each: those of
/// the page's shard through its dupefilter, those of other shards' hosts
/// through theirs (routed through the shard outboxes), `dont_filter` ones
/// each time. The same tasks from another page are filtered where their
/// hosts are; a hand-off outbox delivered again (a mover that died before
/// trimming it) pushes nothing twice; the deliveries are counted where the
/// other spider's drained reading compares them.
#[tokio::test]
async fn tasks_reach_the_other_spider_once_each_through_their_hosts_shards() {
    let redis = RedisServer::start();
    let shards = q_handing_to_x(&redis, "w").await;
    let f: Frontier = ShardedFrontier::new(shards.clone()).into();
    let start = on_host(4, "/list");
    let entry = serde_json::to_string(&start).unwrap_or_default();
    f.push_start(std::slice::from_ref(&entry)).await.unwrap();
    let claim = StartClaim {
        entry,
        outcome: Ok(start.clone()),
    };
    f.claim_start(&[claim]).await.unwrap();
    let (leased, _) = f.lease(1, 0).await.unwrap();
    assert_eq!(leased.len(), 1, "the start page, on shard 0");
    let mut again = on_host(1, "/again");
    again.dont_filter = true;
    let tasks = vec![
        task(on_host(4, "/t/1")),
        task(on_host(1, "/t/2")),
        task(on_host(8, "/t/3")),
        task(on_host(1, "/t/2")),
        task(again.clone()),
        task(again),
    ];
    let page = PageResult {
        tasks: tasks.clone(),
        ..PageResult::default()
    };
    let (done, _) = f.commit(&leased[0], &page, 0, false.into()).await.unwrap();
    assert!(matches!(done, Committed::Done { .. }), "{done:?}");
    let entry = |path: &str| format!(r#"{{"url":"http://127.0.0.{path}"}}"#);
    let want = vec![
        entry("1:8700/again"),
        entry("1:8700/again"),
        entry("1:8700/t/2"),
        entry("4:8700/t/1"),
        entry("8:8700/t/3"),
    ];
    assert_eq!(x_start(&redis), want, "moved at once by the commit");

    // The same tasks from another page of the crawl: filtered on their
    // hosts' shards, but the dont_filter ones.
    let other = on_host(5, "/list/2");
    let entry2 = serde_json::to_string(&other).unwrap_or_default();
    f.push_start(std::slice::from_ref(&entry2)).await.unwrap();
    let claim = StartClaim {
        entry: entry2,
        outcome: Ok(other),
    };
    f.claim_start(&[claim]).await.unwrap();
    let (leased, _) = f.lease(1, 0).await.unwrap();
    assert_eq!(leased.len(), 1);
    let page = PageResult {
        tasks: tasks[..4].to_vec(),
        ..PageResult::default()
    };
    f.commit(&leased[0], &page, 0, false.into()).await.unwrap();
    assert_eq!(
        x_start(&redis),
        want,
        "each seen before on its host's shard"
    );
    let handed: u64 = (0..3)
        .map(|i| {
            let stats = format!(
                "{}:stats",
                crawlworker::frontier::shards::shard_name("q", i, 3)
            );
            redis
                .conn()
                .hget::<_, _, Option<u64>>(stats, "scheduler/handed_off")
                .unwrap_or_else(|e| panic!("{e}"))
                .unwrap_or(0)
        })
        .sum();
    assert_eq!(handed, 5, "counted where each passed its dupefilter");

    // A mover that delivered and died before trimming: the entries are
    // still in the outbox when the next mover delivers them. (The
    // frontier's own movers end with it, so only this one moves.)
    drop(f);
    let outbox = "q:requests:handoff:x";
    let left: Vec<String> = redis.conn().lrange(outbox, 0, -1).unwrap();
    assert!(left.is_empty(), "trimmed: {left:?}");
    let token_entry = |token: &str| format!(r#"{token}||0|{{"url":"http://127.0.0.4:8700/t/9"}}"#);
    let _: () = redis.conn().rpush(outbox, token_entry("w#late")).unwrap();
    assert_eq!(shards[0].move_handoffs(&to_x()).await.unwrap(), 1);
    let _: () = redis.conn().rpush(outbox, token_entry("w#late")).unwrap();
    assert_eq!(
        shards[0].move_handoffs(&to_x()).await.unwrap(),
        0,
        "skipped by its token"
    );
    assert_eq!(x_start(&redis).len(), 6);
    let delivered: u64 = redis.conn().hget("x:control", "handoffs_in").unwrap();
    assert_eq!(delivered, 6);
}

/// The spider `q` hands work to reads it as its upstream, shard by shard:
/// not drained while a task waits in any shard's hand-off outbox, in an
/// outbox between shards, or in its own start key, and drained once the
/// last is claimed and crawled.
#[tokio::test]
async fn the_other_spider_reads_every_shard_of_its_upstream_before_it_reads_drained() {
    let redis = RedisServer::start();
    let q_shards = q_handing_to_x(&redis, "w").await;
    let q_keys: Vec<_> = (0..3)
        .map(|i| shard_keys("q", KeyMode::Plain, &[], None, i, 3))
        .collect();
    let x = x_as(&redis, "w").await;
    assert!(x.status().await.unwrap().drained(), "nothing anywhere yet");

    let task_entry = r#"t#1||0|{"url":"http://127.0.0.8:8700/t/1"}"#;
    let _: () = redis
        .conn()
        .rpush(q_keys[1].handoff_outbox("x"), task_entry)
        .unwrap();
    let status = x.status().await.unwrap();
    assert!(
        !status.drained(),
        "a task waits in shard 1's hand-off outbox"
    );
    assert_eq!(status.upstreams[0].queued, 1, "{:?}", status.upstreams);
    let _: () = redis.conn().del(q_keys[1].handoff_outbox("x")).unwrap();
    let routed = r#"to:x:t#2||0|{"url":"http://127.0.0.8:8700/t/2"}"#;
    let _: () = redis.conn().rpush(q_keys[0].outbox(1), routed).unwrap();
    assert!(
        !x.status().await.unwrap().drained(),
        "a task on its way to shard 1"
    );
    q_shards[0].move_outbox(1, &q_shards[1]).await.unwrap();
    assert!(
        !x.status().await.unwrap().drained(),
        "in shard 1's hand-off outbox"
    );
    q_shards[1].move_handoffs(&to_x()).await.unwrap();
    let status = x.status().await.unwrap();
    assert_eq!(status.start, 1, "delivered to x's start key");
    assert!(!status.drained());
    let _: () = redis.conn().del("x:start_urls").unwrap();
    assert!(x.status().await.unwrap().drained());
}

/// The spider `q` hands work to reads drained only at the end of a chain
/// in which each of `q`'s pages hands one task on, mostly through another
/// shard, and the next page is pushed to `q` only while that task waits
/// for `x`, so that at every instant some work is left somewhere: however
/// a reader's look at `x` and then at `q`'s shards in turn interleaves
/// with a task moving from shard to shard to `x`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_tasks_through_the_shards_never_reads_drained_before_its_end() {
    let redis = RedisServer::start();
    let q: Frontier = ShardedFrontier::new(q_handing_to_x(&redis, "w").await).into();
    let x = x_as(&redis, "w").await;
    let reader = x_as(&redis, "r").await;
    // Hosts 1, 8, 4: shards 2, 1, 0; each page's task is on the next
    // host, so two tasks in three go through another shard.
    let hosts = [1, 8, 4];
    let claim = |request: Request| StartClaim {
        entry: serde_json::to_string(&request).unwrap_or_default(),
        outcome: Ok(request),
    };
    let first = claim(on_host(hosts[0], "/list/0"));
    q.push_start(std::slice::from_ref(&first.entry))
        .await
        .unwrap();
    q.claim_start(&[first]).await.unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watching = crate::shard_handoff::read_along(reader, done.clone());
    const STEPS: usize = 150;
    for step in 1..=STEPS {
        let (leased, _) = q.lease(1, 0).await.unwrap();
        assert_eq!(leased.len(), 1, "step {step}: q's page is queued");
        let handed = on_host(hosts[step % 3], &format!("/post/{step}"));
        let page = PageResult {
            tasks: vec![task(handed.clone())],
            ..PageResult::default()
        };
        let (committed, _) = q.commit(&leased[0], &page, 0, false.into()).await.unwrap();
        assert!(matches!(committed, Committed::Done { .. }), "{committed:?}");
        let last = step == STEPS;
        // q's next page, pushed while the task waits for x.
        let next = (!last).then(|| claim(on_host(hosts[step % 3], &format!("/list/{step}"))));
        if let Some(next) = &next {
            q.push_start(std::slice::from_ref(&next.entry))
                .await
                .unwrap();
        }
        // x crawls the task; at the last, a drained reading is true from
        // its commit on.
        let entry = format!(r#"{{"url":"{}"}}"#, handed.url);
        let claimed = x
            .claim_start(&[StartClaim {
                entry,
                outcome: Ok(handed),
            }])
            .await
            .unwrap();
        assert_eq!(claimed.enqueued, 1, "step {step}: the task reached x once");
        let (leased, _) = x.lease(1, 0).await.unwrap();
        assert_eq!(leased.len(), 1);
        done.store(last, std::sync::atomic::Ordering::SeqCst);
        x.commit(&leased[0], &PageResult::default(), 0, false.into())
            .await
            .unwrap();
        if let Some(next) = next {
            q.claim_start(&[next]).await.unwrap();
        }
    }
    let readings = watching.await.unwrap_or_else(|e| panic!("{e}"));
    assert!(readings > 50, "the reader read along ({readings} readings)");
    assert!(x.status().await.unwrap().drained());
}

/// The spider that hands tasks on is not drained while one waits in a
/// hand-off outbox (a worker killed between its commit and its move left
/// it there): its workers stay, and their movers deliver it.
#[tokio::test]
async fn a_task_left_in_a_hand_off_outbox_keeps_its_spider_undrained() {
    let redis = RedisServer::start();
    let shards = q_handing_to_x(&redis, "w").await;
    let left = r#"t#1||0|{"url":"http://127.0.0.8:8700/t/1"}"#;
    let outbox = shard_keys("q", KeyMode::Plain, &[], None, 1, 3).handoff_outbox("x");
    let _: () = redis.conn().rpush(outbox, left).unwrap();
    // Read before any mover runs: the task counts as queued.
    let reading = crawlworker::frontier::redis::sharded::read_crawl(&shards)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(reading.status.queued, 1, "{:?}", reading.status);
    assert!(!reading.status.drained());
    // A worker's movers deliver it, after which the spider is drained.
    let q: Frontier = ShardedFrontier::new(shards).into();
    wait_for_one_delivered(&redis).await;
    assert!(q.status().await.unwrap().drained());
}

/// A task left in a hand-off outbox of a spider that has reached its page
/// limit with nothing in flight is on its way all the same (movers
/// deliver whatever the limit says): the spider it hands to is not
/// drained while it waits, and the handing spider's workers, which stop
/// at the limit, first wait for it.
#[tokio::test]
async fn a_task_left_in_a_hand_off_outbox_is_on_its_way_past_the_page_limit() {
    let redis = RedisServer::start();
    let shards = q_handing_to_x(&redis, "w").await;
    let x = x_as(&redis, "xw").await;
    let left = r#"t#1||0|{"url":"http://127.0.0.8:8700/t/1"}"#;
    let outbox = shard_keys("q", KeyMode::Plain, &[], None, 1, 3).handoff_outbox("x");
    let mut conn = redis.conn();
    let _: () = conn.rpush(outbox, left).unwrap();
    for i in 0..3 {
        let control = shard_keys("q", KeyMode::Plain, &[], None, i, 3).control;
        let _: () = conn.hset(control, "max_pages_reached", 1).unwrap();
    }
    let reading = crawlworker::frontier::redis::sharded::read_crawl(&shards)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (
            reading.status.queued,
            reading.status.outboxed,
            reading.status.inflight
        ),
        (1, 1, 0),
        "{:?}",
        reading.status
    );
    let status = x.status().await.unwrap();
    assert!(!status.drained(), "{status:?}");
    let q_read = status.upstreams.iter().find(|u| u.spider == "q");
    assert!(
        q_read.is_some_and(|u| u.page_limit_reached && u.outboxed == 1 && u.producing),
        "{status:?}"
    );
    // Once a mover has delivered it, only x's start key holds it.
    let _q: Frontier = ShardedFrontier::new(shards).into();
    wait_for_one_delivered(&redis).await;
    let status = x.status().await.unwrap();
    assert!(status.producing().next().is_none(), "{status:?}");
}
