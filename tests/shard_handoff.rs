//! Handing requests between the shards of a sharded spider (see
//! `docs/scaling.md`, "Hand-offs between shards"): a shard pushes another
//! shard's requests to its outbox, and a mover takes, delivers and trims
//! them in three script calls. Run on a real redis-server, with the
//! shards' own key names (see `frontier::shards::shard_name`); the promise is that each
//! request handed on is queued on its shard exactly once, `dont_filter`
//! ones included, however a mover dies between its steps.

use std::time::Duration;

use ::redis::Commands;

use crawlworker::frontier::redis::outbox::Delivered;
use crawlworker::frontier::redis::shard_count::HOMES_FIELD;
use crawlworker::frontier::shards::{shard_keys, shard_name};
use crawlworker::frontier::{
    Committed, Frontier, KeyMode, Leased, Options, PageResult, RedisFrontier, RedisTarget,
    ShardedFrontier, StartClaim,
};
use crawlworker::request::Request;
use crawlworker_testkit::{RedisCluster, RedisServer};

// Spider `q` of the frontier contract suite.
use crate::frontier_contract::{queue, spider};

/// The name shard `shard` of spider `q`'s three builds its keys from.
fn name(shard: usize) -> String {
    shard_name("q", shard, 3)
}

/// Shard `shard` (of three) of spider `q`, as `worker`.
async fn shard(redis: &RedisServer, shard: usize, worker: &str) -> RedisFrontier {
    let spider = spider();
    let options = crawlworker::frontier::Options {
        keys: shard_keys("q", KeyMode::Plain, &[], None, shard, 3),
        ..spider.frontier_options(worker)
    };
    let client = ::redis::Client::open(redis.url()).unwrap_or_else(|e| panic!("{e}"));
    RedisFrontier::connect(&client.into(), options)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", redis.url()))
}

/// `n` requests for `/post/<from + i>`, the last `dont_filter` ones of
/// them `dont_filter`.
fn requests(from: u32, n: u32, dont_filter: u32) -> Vec<Request> {
    (from..from + n)
        .map(|i| {
            let mut r = Request::get(&format!("http://127.0.0.1:8700/post/{i}"));
            r.dont_filter = i >= from + n - dont_filter;
            r
        })
        .collect()
}

/// The URLs queued on a shard, leased all at once, sorted.
async fn queued_urls(f: &RedisFrontier) -> Vec<String> {
    let frontier = Frontier::from(f.clone());
    let (leased, _) = frontier
        .lease(1000, 0)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut urls: Vec<String> = leased
        .into_iter()
        .map(|l| l.request.unwrap_or_else(|d| panic!("{d:?}")).url)
        .collect();
    urls.sort();
    urls
}

fn urls(requests: &[Request]) -> Vec<String> {
    let mut urls: Vec<String> = requests.iter().map(|r| r.url.clone()).collect();
    urls.sort();
    urls
}

fn outbox_len(redis: &RedisServer) -> usize {
    redis
        .conn()
        .llen("q:requests:outbox:1")
        .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn requests_handed_to_another_shard_are_queued_there_once_each() {
    let redis = RedisServer::start();
    let (zero, one) = (shard(&redis, 0, "w0").await, shard(&redis, 1, "w1").await);
    let handed = requests(1, 5, 2);
    assert_eq!(zero.outbox_push(1, &handed).await.unwrap(), 5);
    // A second hand-off of the same pages: the fingerprinted ones are
    // filtered on shard 1, the dont_filter ones are new requests.
    assert_eq!(zero.outbox_push(1, &handed[..3]).await.unwrap(), 3);
    assert_eq!(
        outbox_len(&redis),
        8,
        "pushed to shard 0's outbox for shard 1"
    );
    assert!(
        queued_urls(&one).await.is_empty(),
        "nothing reaches shard 1 unmoved"
    );

    let moved = zero.move_outbox(1, &one).await.unwrap();
    assert_eq!(
        moved,
        Delivered {
            enqueued: 5,
            filtered: 3,
            skipped: 0,
            unreadable: 0
        }
    );
    assert_eq!(outbox_len(&redis), 0, "trimmed once delivered");
    assert_eq!(queued_urls(&one).await, urls(&handed));
    assert!(
        queued_urls(&zero).await.is_empty(),
        "shard 0 queues none of them"
    );
    let stat = |key: &str, field: &str| -> u64 {
        redis
            .conn()
            .hget(key, field)
            .unwrap_or_else(|e| panic!("{e}"))
    };
    assert_eq!(
        stat(
            &format!("{}:stats", name(1)),
            crawlworker::stats::SCHEDULER_ENQUEUED.name
        ),
        5
    );
    assert_eq!(
        stat(
            &format!("{}:stats", name(1)),
            crawlworker::stats::DUPEFILTER_FILTERED.name
        ),
        3
    );
}

#[tokio::test]
async fn a_mover_that_dies_before_trimming_is_repeated_and_nothing_is_queued_twice() {
    let redis = RedisServer::start();
    let (zero, one) = (shard(&redis, 0, "w0").await, shard(&redis, 1, "w1").await);
    let handed = requests(1, 4, 2);
    zero.outbox_push(1, &handed).await.unwrap();

    // Mover A takes and delivers, and dies before it trims.
    let a = zero.mover_token();
    let entries = zero
        .outbox_take(1, &a, Duration::from_millis(300), 100)
        .await
        .unwrap();
    assert_eq!(entries.len(), 4);
    let outbox = "q:requests:outbox:1";
    let first = one.outbox_deliver(outbox, &a, &entries).await.unwrap();
    assert_eq!(first.enqueued, 4);
    // While A's lock lasts, no other mover takes the entries.
    let b = zero.mover_token();
    let busy = zero
        .outbox_take(1, &b, Duration::from_secs(10), 100)
        .await
        .unwrap();
    assert!(busy.is_empty(), "another mover's lock holds: {busy:?}");

    // Once it runs out, the next move delivers the same entries again,
    // and shard 1 queues none of them twice: the two with fingerprints
    // are filtered, the two dont_filter ones skipped by their tokens. A
    // new dont_filter request of the same URL is queued.
    tokio::time::sleep(Duration::from_millis(400)).await;
    zero.outbox_push(1, &requests(10, 1, 1)).await.unwrap();
    let moved = zero.move_outbox(1, &one).await.unwrap();
    assert_eq!(
        moved,
        Delivered {
            enqueued: 1,
            filtered: 2,
            skipped: 2,
            unreadable: 0
        }
    );
    let mut expected = handed.clone();
    expected.extend(requests(10, 1, 1));
    assert_eq!(queued_urls(&one).await, urls(&expected), "each queued once");

    // A's late trim is refused, and removes nothing pushed since.
    zero.outbox_push(1, &requests(20, 2, 0)).await.unwrap();
    assert!(
        !zero.outbox_trim(1, &a, 4).await.unwrap(),
        "A's lock ran out"
    );
    assert_eq!(outbox_len(&redis), 2);
}

#[tokio::test]
async fn an_outbox_entry_crawlworker_did_not_write_is_set_aside() {
    let redis = RedisServer::start();
    let (zero, one) = (shard(&redis, 0, "w0").await, shard(&redis, 1, "w1").await);
    let _: () = redis
        .conn()
        .rpush("q:requests:outbox:1", "not an entry")
        .unwrap_or_else(|e| panic!("{e}"));
    zero.outbox_push(1, &requests(1, 1, 0)).await.unwrap();
    let moved = zero.move_outbox(1, &one).await.unwrap();
    assert_eq!((moved.enqueued, moved.unreadable), (1, 1));
    assert_eq!(outbox_len(&redis), 0);
    let dead: Vec<String> = redis
        .conn()
        .lrange(format!("{}:dead", name(1)), 0, -1)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert!(dead[0].contains("q:requests:outbox:1") && dead[0].contains("not an entry"));
}

/// Shard `shard` of spider `q` in cluster mode, on `cluster`.
async fn cluster_shard(cluster: &RedisCluster, shard: usize) -> RedisFrontier {
    cluster_shard_with(cluster, shard, 0).await
}

/// [`cluster_shard`] with `max_pages`, in its place among the three.
async fn cluster_shard_with(cluster: &RedisCluster, shard: usize, max_pages: u64) -> RedisFrontier {
    let spider = spider();
    let options = crawlworker::frontier::Options {
        keys: shard_keys("q", KeyMode::Cluster, &[], None, shard, 3),
        quota: crawlworker::frontier::Quota {
            max_pages,
            max_pages_per_host: 0,
        },
        ..spider.frontier_options("w")
    };
    let url = cluster.url();
    let nodes: Vec<String> = url
        .trim_start_matches("redis+cluster://")
        .split(',')
        .map(|node| format!("redis://{node}"))
        .collect();
    let target = RedisTarget::cluster(&nodes).unwrap_or_else(|e| panic!("{url}: {e}"));
    RedisFrontier::connect(&target, options)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
        .in_shard(crawlworker::frontier::shards::ShardPlace {
            index: shard,
            count: 3,
        })
}

/// Each step of a move of the page limit touches one shard's slot only,
/// so shards on different masters of a Redis Cluster move their caps of
/// `max_pages` between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_on_two_masters_of_a_cluster_move_their_caps_of_max_pages() {
    let cluster = RedisCluster::start();
    assert_ne!(
        cluster.master_of("{q}:control"),
        cluster.master_of(&format!("{{{}}}:control", name(2))),
        "the test needs shards 0 and 2 of `q` on two masters"
    );
    let (zero, two) = (
        cluster_shard_with(&cluster, 0, 9).await,
        cluster_shard_with(&cluster, 2, 9).await,
    );
    let (token, given) = zero.give_cap(2, 2).await.unwrap();
    assert_eq!(given, 2);
    assert!(two.take_cap(&token, given).await.unwrap());
    assert!(!two.take_cap(&token, given).await.unwrap(), "taken once");
    zero.finish_cap_move(2, &token).await.unwrap();
    let (a, b) = (
        zero.cap_reading().await.unwrap(),
        two.cap_reading().await.unwrap(),
    );
    assert_eq!((a.cap, b.cap), (1, 5));
    assert!(a.unfinished.is_empty());
}

/// Each step of a hand-off touches one shard's slot only, so shards on
/// different masters of a Redis Cluster hand requests to each other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_on_two_masters_of_a_cluster_hand_requests_to_each_other() {
    let cluster = RedisCluster::start();
    assert_ne!(
        cluster.master_of("{q}:requests"),
        cluster.master_of(&format!("{{{}}}:requests", name(2))),
        "the test needs shards 0 and 2 of `q` on two masters"
    );
    let (zero, two) = (
        cluster_shard(&cluster, 0).await,
        cluster_shard(&cluster, 2).await,
    );
    let handed = requests(1, 3, 1);
    zero.outbox_push(2, &handed).await.unwrap();
    let moved = zero.move_outbox(2, &two).await.unwrap();
    assert_eq!((moved.enqueued, moved.skipped), (3, 0));
    assert_eq!(queued_urls(&two).await, urls(&handed));
    let left: usize = cluster
        .conn_for("{q}:requests:outbox:2")
        .llen("{q}:requests:outbox:2")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(left, 0);
}

/// Spider `q` over three shards on `redis`, as `worker`.
async fn sharded(redis: &RedisServer, worker: &str) -> Frontier {
    sharded_with(redis, spider().frontier_options(worker)).await
}

/// The same with `options`.
async fn sharded_with(redis: &RedisServer, options: Options) -> Frontier {
    let client = ::redis::Client::open(redis.url()).unwrap_or_else(|e| panic!("{e}"));
    ShardedFrontier::connect(&client.into(), options, 3, |i| {
        shard_keys("q", KeyMode::Plain, &[], None, i, 3)
    })
    .await
    .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", redis.url()))
    .into()
}

/// A URL on loopback address 127.0.0.`host`, whose shard of three is
/// [2, 2, 2, 0, 0, 0, 0, 1] for hosts 1 to 8 (see `frontier::shards`).
fn on_host(host: u32, path: &str) -> Request {
    Request::get(&format!("http://127.0.0.{host}:8700{path}"))
}

/// Every request `f` can lease, with their URLs sorted.
async fn lease_all(f: &Frontier) -> (Vec<Leased>, Vec<String>) {
    let mut all = Vec::new();
    loop {
        let (leased, _) = f.lease(1000, 0).await.unwrap_or_else(|e| panic!("{e}"));
        if leased.is_empty() {
            break;
        }
        all.extend(leased);
    }
    let mut urls: Vec<String> = all
        .iter()
        .map(|l| {
            l.request
                .as_ref()
                .unwrap_or_else(|d| panic!("{d:?}"))
                .url
                .clone()
        })
        .collect();
    urls.sort();
    (all, urls)
}

/// A page's commit queues its links on their hosts' shards, each once,
/// `dont_filter` ones included, and a page of more links than one call
/// carries sends each shard's share ahead, filtered where it lands.
#[tokio::test]
async fn a_pages_links_are_queued_once_each_on_their_hosts_shards() {
    let redis = RedisServer::start();
    let f = sharded(&redis, "w").await;
    let start = on_host(4, "/list");
    let entry = serde_json::to_string(&start).unwrap_or_default();
    f.push_start(std::slice::from_ref(&entry)).await.unwrap();
    let claimed = f
        .claim_start(&[StartClaim {
            entry,
            outcome: Ok(start.clone()),
        }])
        .await
        .unwrap();
    assert_eq!(claimed.enqueued, 1);
    let (leased, _) = f.lease(1, 0).await.unwrap();
    assert_eq!(leased.len(), 1);
    let mut again = on_host(8, "/again");
    again.dont_filter = true;
    let links = vec![
        on_host(1, "/a"),
        on_host(8, "/b"),
        on_host(5, "/c"),
        on_host(1, "/a"),
        again.clone(),
        again,
    ];
    let page = PageResult {
        requests: links,
        ..PageResult::default()
    };
    let (done, _) = f.commit(&leased[0], &page, 0, false.into()).await.unwrap();
    assert_eq!(
        done,
        Committed::Done {
            enqueued: 5,
            filtered: 1
        }
    );
    let urls: Vec<String> = [
        "http://127.0.0.1:8700/a",
        "http://127.0.0.5:8700/c",
        "http://127.0.0.8:8700/again",
        "http://127.0.0.8:8700/again",
        "http://127.0.0.8:8700/b",
    ]
    .map(String::from)
    .to_vec();
    let (leased, leased_urls) = lease_all(&f).await;
    assert_eq!(leased_urls, urls);
    let queued_on =
        |key: &str| -> usize { redis.conn().hlen(key).unwrap_or_else(|e| panic!("{e}")) };
    assert_eq!(
        (
            queued_on("q:requests:data"),
            queued_on(&format!("{}:requests:data", name(1))),
            queued_on(&format!("{}:requests:data", name(2)))
        ),
        (1, 3, 1),
        "shard 0: /c (the start page is committed); 1: /b and /again twice; 2: /a"
    );

    // 6,000 links over the three shards (more than a commit carries),
    // half of them seen before: each new one queued once.
    let many: Vec<Request> = (0..6000)
        .map(|i| on_host(1 + i % 8, &format!("/p/{}", i % 3000)))
        .collect();
    let page = PageResult {
        requests: many,
        ..PageResult::default()
    };
    let (done, _) = f.commit(&leased[0], &page, 0, false.into()).await.unwrap();
    let Committed::Done { enqueued, filtered } = done else {
        panic!("lost: {done:?}")
    };
    let distinct: std::collections::HashSet<String> =
        page.requests.iter().map(|r| r.url.clone()).collect();
    // The commit counts what its own moves delivered: a worker's mover
    // at work on an outbox when the commit moves it delivers it instead,
    // so the queue is where the whole count shows.
    assert!(
        enqueued <= distinct.len() as u64 && filtered <= 6000 - distinct.len() as u64,
        "{enqueued} enqueued, {filtered} filtered"
    );
    crawlworker_testkit::eventually_async(
        "every shard's share is queued",
        Duration::from_secs(10),
        || async { (f.status().await.unwrap().queued == distinct.len() as u64).then_some(()) },
    )
    .await;
    let stat = f
        .stat(crawlworker::stats::SCHEDULER_ENQUEUED)
        .await
        .unwrap();
    assert_eq!(stat, 1 + 5 + distinct.len() as u64);
}

/// Requests a worker handed to an outbox and did not move (it was killed
/// between its commit and its move) are moved by another worker's movers.
#[tokio::test]
async fn an_outbox_a_killed_worker_left_is_moved_by_another_worker() {
    let redis = RedisServer::start();
    let zero = shard(&redis, 0, "killed").await;
    let left = vec![on_host(8, "/left")];
    zero.outbox_push(1, &left).await.unwrap();
    let other = sharded(&redis, "other").await;
    let urls = crawlworker_testkit::eventually_async(
        "another worker's mover delivers the request",
        Duration::from_secs(10),
        || async {
            let (_, urls) = lease_all(&other).await;
            (!urls.is_empty()).then_some(urls)
        },
    )
    .await;
    assert_eq!(urls, ["http://127.0.0.8:8700/left"]);
    assert_eq!(outbox_len(&redis), 0);
}

/// A crawl whose one page in flight hands its one link to another shard,
/// step after step (a forum's chain of list pages), never reads drained
/// before its end, however a reader's look at the shards in turn and the
/// hand-offs interleave: a page committed on a shard after the reader
/// read it may queue its link on a shard the reader read before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_hand_offs_never_reads_drained_before_its_end() {
    let redis = RedisServer::start();
    let f = sharded(&redis, "w").await;
    let reader = sharded(&redis, "r").await;
    // Hosts 1, 8, 4: shards 2, 1, 0, so two hand-offs in three go to a
    // shard the reader reads first.
    let hosts = [1, 8, 4];
    let first = on_host(hosts[0], "/list/0");
    let entry = serde_json::to_string(&first).unwrap_or_default();
    f.push_start(std::slice::from_ref(&entry)).await.unwrap();
    let claimed = f
        .claim_start(&[StartClaim {
            entry,
            outcome: Ok(first),
        }])
        .await
        .unwrap();
    assert_eq!(claimed.enqueued, 1);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watching = read_along(reader, done.clone());
    for step in 1..=300 {
        let (leased, _) = f.lease(1, 0).await.unwrap();
        assert_eq!(leased.len(), 1, "step {step}: the chain's page is queued");
        let next = on_host(hosts[step % 3], &format!("/list/{step}"));
        let last = step == 300;
        // The end is near: a drained reading from here on is true.
        done.store(last, std::sync::atomic::Ordering::SeqCst);
        let page = PageResult {
            requests: if last { Vec::new() } else { vec![next] },
            ..PageResult::default()
        };
        let (committed, _) = f.commit(&leased[0], &page, 0, false.into()).await.unwrap();
        assert!(matches!(committed, Committed::Done { .. }), "{committed:?}");
    }
    let readings = watching.await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        readings > 100,
        "the reader read along ({readings} readings)"
    );
    assert!(f.status().await.unwrap().drained());
}

/// Reads `reader`'s status over and over until `done`, failing on a
/// drained reading taken before it; how many readings it took.
pub(crate) fn read_along(
    reader: Frontier,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<u32> {
    tokio::spawn(async move {
        let mut readings = 0u32;
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            let status = reader.status().await.unwrap_or_else(|e| panic!("{e}"));
            let over = done.load(std::sync::atomic::Ordering::SeqCst);
            assert!(
                !status.drained() || over,
                "read drained mid-chain: {status:?}"
            );
            readings += 1;
        }
        readings
    })
}

/// Shard `shard` (of three) of spider `q` with `max_pages`, as `worker`.
async fn capped_shard(redis: &RedisServer, shard: usize, max_pages: u64) -> RedisFrontier {
    let spider = spider();
    let options = crawlworker::frontier::Options {
        keys: shard_keys("q", KeyMode::Plain, &[], None, shard, 3),
        quota: crawlworker::frontier::Quota {
            max_pages,
            max_pages_per_host: 0,
        },
        ..spider.frontier_options("mover")
    };
    let client = ::redis::Client::open(redis.url()).unwrap_or_else(|e| panic!("{e}"));
    RedisFrontier::connect(&client.into(), options)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", redis.url()))
        .in_shard(crawlworker::frontier::shards::ShardPlace {
            index: shard,
            count: 3,
        })
}

/// A move of part of `max_pages` from one shard's cap to another's whose
/// mover died after giving is finished by another worker from its note,
/// once: the caps add up to the limit again, and a second take of the
/// same move adds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_of_the_page_limit_a_dead_mover_left_is_finished_once() {
    let redis = RedisServer::start();
    let shards = [
        capped_shard(&redis, 0, 9).await,
        capped_shard(&redis, 1, 9).await,
        capped_shard(&redis, 2, 9).await,
    ];
    // The dead mover gave 2 of shard 1's cap (3 of 9) to shard 2.
    let (token, given) = shards[1].give_cap(2, 2).await.unwrap();
    assert_eq!(given, 2);
    let caps = |readings: &[crawlworker::frontier::redis::quota::CapReading]| {
        readings.iter().map(|r| r.cap).sum::<i64>()
    };
    let mut readings = Vec::new();
    for s in &shards {
        readings.push(s.cap_reading().await.unwrap());
    }
    assert_eq!(caps(&readings), 7, "2 are in the move");
    assert_eq!(readings[1].unfinished.len(), 1);
    // Its note is a minute old: another worker's keeper finishes it.
    let field = format!("quota_out:2:{token}");
    let old = format!(
        "2|{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            - 60_000
    );
    let _: () = redis
        .conn()
        .hset(format!("{}:control", name(1)), &field, old)
        .unwrap();
    let keeper = sharded_capped(&redis, 9).await;
    crawlworker_testkit::eventually_async(
        "the move is finished",
        Duration::from_secs(10),
        || async {
            let mut sum = 0;
            for s in &shards {
                let r = s.cap_reading().await.ok()?;
                if !r.unfinished.is_empty() {
                    return None;
                }
                sum += r.cap;
            }
            (sum == 9).then_some(())
        },
    )
    .await;
    assert!(!shards[2].take_cap(&token, 2).await.unwrap(), "taken once");
    assert_eq!(shards[2].cap_reading().await.unwrap().cap, 5);
    drop(keeper);
}

/// Spider `q` over three shards with `max_pages` (its keeper running).
async fn sharded_capped(redis: &RedisServer, max_pages: u64) -> Frontier {
    let spider = spider();
    let client = ::redis::Client::open(redis.url()).unwrap_or_else(|e| panic!("{e}"));
    let options = crawlworker::frontier::Options {
        quota: crawlworker::frontier::Quota {
            max_pages,
            max_pages_per_host: 0,
        },
        ..spider.frontier_options("keeper")
    };
    ShardedFrontier::connect(&client.into(), options, 3, |i| {
        shard_keys("q", KeyMode::Plain, &[], None, i, 3)
    })
    .await
    .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", redis.url()))
    .into()
}

/// The hosts of `leased`, sorted.
fn hosts_of(leased: &[Leased]) -> Vec<String> {
    let mut hosts: Vec<String> = leased
        .iter()
        .filter_map(|l| l.request.as_ref().ok())
        .map(|r| r.url.split('/').nth(2).unwrap_or_default().to_string())
        .collect();
    hosts.sort();
    hosts
}

/// A worker's leases held ahead come from its home shard; another shard
/// fills only the download slots its home leaves idle, outside that
/// shard's crew. Its pages there lease replacements on commit only while
/// no worker has that shard for home (a lone worker keeps every shard's
/// work going); once one has, they lease none, and the shard's work stays
/// with its own workers (a worker's pages stay on one shard, sharing its
/// commit calls). Once its home has had nothing for it for a second, the
/// shard where it found work becomes its home, and it joins that shard's
/// crew.
#[tokio::test]
async fn a_worker_holds_ahead_from_home_and_fills_idle_slots_elsewhere() {
    let redis = RedisServer::start();
    let f = sharded(&redis, "w").await;
    let crew_has = |shard: usize, worker: &str| -> bool {
        let crew = shard_keys("q", KeyMode::Plain, &[], None, shard, 3).crew;
        let place: Option<f64> = redis
            .conn()
            .zscore(&crew, worker)
            .unwrap_or_else(|e| panic!("{e}"));
        place.is_some()
    };
    // The first worker's ticket is 1: its home is shard 1, host 8's.
    f.lease(0, 0).await.unwrap();
    assert!(crew_has(1, "w"), "a worker is one of its home's crew");
    let mut requests: Vec<Request> = (1..=3).map(|i| on_host(8, &format!("/{i}"))).collect();
    requests.extend((1..=8).map(|i| on_host(4, &format!("/{i}"))));
    queue(&f, &requests).await;
    // Five slots idle: home fills three, shard 0 (host 4's) two.
    f.slots_idle(5);
    let (leased, _) = f.lease(8, 0).await.unwrap();
    let h8 = "127.0.0.8:8700".to_string();
    let h4 = "127.0.0.4:8700".to_string();
    assert_eq!(
        hosts_of(&leased),
        [&h4, &h4, &h8, &h8, &h8].map(String::clone).to_vec()
    );
    assert!(
        !crew_has(0, "w"),
        "a visitor is not one of the shard's crew"
    );
    let mut visits: Vec<Leased> = leased
        .into_iter()
        .filter(|l| {
            l.request
                .as_ref()
                .is_ok_and(|r| r.url.contains("127.0.0.4"))
        })
        .collect();
    // No worker has shard 0 for home: a visit's commit there leases its
    // replacements, as a home's would, and still does not join its crew.
    let page = PageResult::default();
    let (_, next) = f.commit(&visits[0], &page, 2, false.into()).await.unwrap();
    assert_eq!(hosts_of(&next), vec![h4.clone(), h4.clone()]);
    assert!(!crew_has(0, "w"));
    visits.remove(0);
    visits.extend(next);
    // A worker whose home is shard 0 (the third ticket) joins its crew:
    // the visitor's commits there lease no more, though host 4 has four
    // more queued; its next lease asks home first.
    let control = shard_keys("q", KeyMode::Plain, &[], None, 0, 3).control;
    let _: () = redis
        .conn()
        .hset(&control, HOMES_FIELD, 2)
        .unwrap_or_else(|e| panic!("HSET {control}: {e}"));
    let g = sharded(&redis, "g").await;
    g.lease(0, 0).await.unwrap();
    assert!(crew_has(0, "g"));
    for visit in &visits {
        let (_, next) = f.commit(visit, &page, 2, false.into()).await.unwrap();
        assert!(next.is_empty(), "a visit's commit leased {}", next.len());
    }
    // Home has nothing now: one idle slot, filled from shard 0, which is
    // not yet home...
    f.slots_idle(1);
    let (leased, _) = f.lease(8, 0).await.unwrap();
    assert_eq!(hosts_of(&leased), vec![h4.clone()]);
    assert!(!crew_has(0, "w"));
    // ...until home has had nothing for a second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (leased, _) = f.lease(8, 0).await.unwrap();
    assert_eq!(hosts_of(&leased), vec![h4.clone()]);
    f.lease(0, 0).await.unwrap();
    assert!(crew_has(0, "w"), "shard 0 is the worker's home now");
}

/// A visitor killed while noted as waiting on a shard it does not live on
/// is forgotten there once its note is a lease old, as a crew member is
/// when its place ends: the shard's new work is not handed to it. (Within
/// that lease one hand-off may go to it; those leases come back after the
/// lease timeout, as any killed worker's do.)
#[tokio::test]
async fn a_killed_visitors_waiting_note_is_forgotten_after_a_lease() {
    const LEASE: Duration = Duration::from_millis(800);
    let redis = RedisServer::start();
    let zero = shard_keys("q", KeyMode::Plain, &[], None, 0, 3);
    let with_lease = |worker: &str| Options {
        lease: LEASE,
        ..spider().frontier_options(worker)
    };
    // w's home is shard 1 (the first ticket); g's is shard 0 (the third).
    let w = sharded_with(&redis, with_lease("w")).await;
    w.lease(0, 0).await.unwrap();
    let _: () = redis
        .conn()
        .hset(&zero.control, HOMES_FIELD, 2)
        .unwrap_or_else(|e| panic!("HSET: {e}"));
    let g = sharded_with(&redis, with_lease("g")).await;
    // g holds a page of host 4 (shard 0).
    queue(&g, &[on_host(4, "/seed")]).await;
    let (leased, _) = g.lease(1, 0).await.unwrap();
    assert_eq!(hosts_of(&leased), vec!["127.0.0.4:8700".to_string()]);
    // w takes handed leases once its wake channel is subscribed; with
    // nothing anywhere, its lease notes it waiting on every shard.
    let listening = w.wake();
    let wake = zero.worker_wake("w");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let counts: Vec<(String, u64)> = ::redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&wake)
            .query(&mut redis.conn())
            .unwrap_or_else(|e| panic!("PUBSUB NUMSUB: {e}"));
        if counts.iter().any(|(_, n)| *n > 0) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "w never subscribed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    w.slots_idle(4);
    assert!(w.lease(4, 0).await.unwrap().0.is_empty());
    let noted: Option<String> = redis
        .conn()
        .hget(&zero.waiting, "w")
        .unwrap_or_else(|e| panic!("HGET: {e}"));
    assert!(
        noted.is_some_and(|n| n.contains("|h@")),
        "w not noted on shard 0 for a lease"
    );
    // Killed: no clean stop, its notes stay, a lease long.
    drop((listening, w));
    tokio::time::sleep(LEASE + Duration::from_millis(100)).await;
    // g commits its page with new links to three more of shard 0's
    // hosts (one each, so that none waits for its host's pace) and leases
    // none itself: nobody it could hand them to is waiting.
    let links: Vec<Request> = (5..=7).map(|h| on_host(h, "/1")).collect();
    let page = PageResult {
        requests: links.clone(),
        ..PageResult::default()
    };
    g.commit(&leased[0], &page, 0, false.into()).await.unwrap();
    let status = g.status().await.unwrap();
    assert_eq!((status.queued, status.inflight), (3, 0), "{status:?}");
    let noted: Option<String> = redis
        .conn()
        .hget(&zero.waiting, "w")
        .unwrap_or_else(|e| panic!("HGET: {e}"));
    assert_eq!(noted, None, "a dead visitor's note outlived its lease");
    let (again, _) = g.lease(3, 0).await.unwrap();
    let mut urls: Vec<String> = again
        .iter()
        .filter_map(|l| l.request.as_ref().ok())
        .map(|r| r.url.clone())
        .collect();
    urls.sort();
    let mut expected: Vec<String> = links.iter().map(|r| r.url.clone()).collect();
    expected.sort();
    assert_eq!(urls, expected);
}
