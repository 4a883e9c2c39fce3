//! What Redis keeps per host is bounded by recent activity, not by the
//! hosts a crawl has seen: the sweep every worker runs deletes politeness
//! slots in the past, the back-off of hosts left alone, expired robots.txt
//! records with their Crawl-delays, run-out fetch locks and long-gone
//! workers' heartbeats; and nothing it deletes could still have mattered:
//! a swept slot was no slot, and a swept Crawl-delay still spaces its host
//! (through a whole crawl: `robots`).
//!
//! Many hosts on loopback only, as in `per_host`: IPv4 literals in
//! 127.0.0.0/8, every request sent through one HTTP proxy, the fixture
//! server on 127.0.0.1.

use std::time::Duration;

use redis::Commands;

use crawlworker::frontier::{Options, Pacing, RedisFrontier};
use crawlworker::spider::Spider;
use crawlworker::worker::StopRules;
use crawlworker_demo::Site;
use crawlworker_testkit::{
    eventually_async, loopback_host, proxied_spider, push_urls, temp_dir, FixtureServer,
    RedisServer, Robots,
};

use crate::in_process::InProcess;

/// The per-host keys of spider `hosts`.
const PER_HOST: &[&str] = &[
    "hosts:pace",
    "hosts:pace:delay",
    "hosts:pace:backoff",
    "hosts:pace:errors",
    "hosts:robots",
    "hosts:robots:expiry",
    "hosts:robots:locks",
];

fn host(i: usize) -> String {
    loopback_host(2, i)
}

/// The length of a hash or sorted set (0 when it does not exist).
fn len(conn: &mut redis::Connection, key: &str) -> u64 {
    let kind: String = redis::cmd("TYPE").arg(key).query(conn).unwrap();
    match kind.as_str() {
        "hash" => conn.hlen(key).unwrap(),
        "zset" => conn.zcard(key).unwrap(),
        "none" => 0,
        other => panic!("{key} is a {other}"),
    }
}

/// Redis's clock, in ms.
fn redis_now_ms(conn: &mut redis::Connection) -> u64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).unwrap();
    s * 1000 + us / 1000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_crawl_over_many_hosts_redis_forgets_the_hosts_left_alone() {
    const HOSTS: usize = 150;
    /// Every this many hosts answers 429 first: back-off state.
    const SLOW_EVERY: usize = 10;
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.expect("server");
    server.set_robots(Robots::Body("User-agent: *\nCrawl-delay: 0.05\n".into()));
    let dir = temp_dir("redis-hosts");
    // Records expire after 2 s, back-off is forgotten after 10 x 200 ms
    // without news of the host.
    let spider = proxied_spider(
        dir.path(),
        server.addr(),
        "robotstxt_obey = true\nrobotstxt_ttl = \"2s\"\ndownload_delay = 0.05\nadaptive_backoff_max_delay = \"200ms\"\nretry_backoff_base = 0.05\nconcurrent_requests = 8",
    );
    let urls: Vec<String> = (0..HOSTS)
        .map(|i| {
            if i % SLOW_EVERY == 0 {
                format!("http://{}/fault/retry-after/0?key=h{i}", host(i))
            } else {
                format!("http://{}/fault/status/200?key=h{i}", host(i))
            }
        })
        .collect();
    push_urls(&redis.url(), &spider, &urls);

    // A worker that stays up (and idle) after the crawl.
    let worker = InProcess::start(&spider, &redis.url(), &[], StopRules::default()).await;
    let mut most = vec![0; PER_HOST.len()];
    let mut conn = redis.conn();
    eventually_async(
        "every host's page crawled",
        Duration::from_secs(120),
        || {
            for (i, key) in PER_HOST.iter().enumerate() {
                most[i] = most[i].max(len(&mut conn, key));
            }
            let items: u64 = conn.llen("hosts:items").unwrap();
            std::future::ready((items == HOSTS as u64).then_some(()))
        },
    )
    .await;
    // The keys did hold hosts while the crawl went on (robots.txt locks
    // are too short-lived to be seen reliably).
    for (key, most) in PER_HOST.iter().zip(&most).take(6) {
        assert!(*most > 0, "{key} never held a host: {most:?}");
    }
    let slowed: Option<u64> = conn.hget("hosts:stats", "backoff/slowed_count").unwrap();
    assert!(slowed.unwrap_or(0) >= (HOSTS / SLOW_EVERY) as u64);

    // Left alone, every host is forgotten.
    eventually_async(
        "the per-host keys emptied by the sweep",
        Duration::from_secs(60),
        || {
            let left: Vec<(&str, u64)> = PER_HOST
                .iter()
                .map(|key| (*key, len(&mut conn, key)))
                .filter(|(_, n)| *n > 0)
                .collect();
            std::future::ready(left.is_empty().then_some(()))
        },
    )
    .await;
    // The sweep's own state is a few cursors, and the live worker stays.
    assert!(len(&mut conn, "hosts:pace:sweep") <= 5);
    assert_eq!(len(&mut conn, "hosts:workers"), 1);
    let items: u64 = conn.llen("hosts:items").unwrap();
    assert_eq!(items, HOSTS as u64, "each page once");
    worker.stop().await;
    let _ = server.stop().await;
}

const SPIDER: &str = r#"
name = "q"
[items.x]
n = { meta = "n" }
[[rules]]
name = "list"
match = '/list/'
  [[rules.extract]]
  item = "x"
"#;

/// A frontier whose back-off is forgotten after 1 s of quiet (10 x 100 ms).
async fn frontier(redis: &RedisServer) -> RedisFrontier {
    let spider = Spider::from_str("q.toml".as_ref(), SPIDER).unwrap_or_else(|e| panic!("{e}"));
    let client = redis::Client::open(redis.url()).unwrap();
    let options = Options {
        pacing: Pacing {
            backoff_max: Duration::from_millis(100),
            ..Pacing::default()
        },
        ..spider.frontier_options("sweeper")
    };
    let f = RedisFrontier::connect(&client.into(), options)
        .await
        .unwrap();
    assert_eq!(f.backoff_forgotten_after(), Duration::from_secs(1));
    f
}

fn hash(conn: &mut redis::Connection, key: &str) -> Vec<String> {
    let mut fields: Vec<String> = conn.hkeys(key).unwrap();
    fields.sort();
    fields
}

#[tokio::test]
async fn the_sweep_deletes_only_what_can_no_longer_matter() {
    let redis = RedisServer::start();
    let f = frontier(&redis).await;
    let mut c = redis.conn();
    let now = redis_now_ms(&mut c);
    let secs = now as f64 / 1000.0;
    let record = |fetched_at: f64| {
        format!(
            r#"{{"status":200,"body":"User-agent: *\nCrawl-delay: 1\n","fetched_at":{fetched_at}}}"#
        )
    };
    let heartbeat = |at: f64| {
        format!(
            r#"{{"host":"h","pid":1,"started":"2026-01-01T00:00:00Z","pages":0,"heartbeat":{at},"version":"0"}}"#
        )
    };
    let () = redis::pipe()
        // Slots: one to come, one past, one past of a host with back-off,
        // and back-off written with no slot (as older versions did).
        .hset("q:pace", "future", now + 60_000)
        .hset("q:pace", "past", now - 1)
        .hset("q:pace", "backed-off", now - 1)
        .hset("q:pace:backoff", "backed-off", 500)
        .hset("q:pace:errors", "backed-off", 300)
        .hset("q:pace:backoff", "no-slot", 500)
        .hset("q:pace:errors", "errors-only", 50)
        // robots.txt: fresh, expired (with its Crawl-delay), and records
        // without an expiry: an old one, a recent one, an unreadable one.
        .hset("q:robots", "fresh", record(secs))
        .zadd("q:robots:expiry", "fresh", now + 60_000)
        .hset("q:pace:delay", "fresh", 1000)
        .hset("q:robots", "expired", record(secs - 10.0))
        .zadd("q:robots:expiry", "expired", now - 1)
        .hset("q:pace:delay", "expired", 1000)
        .hset("q:robots", "old", record(secs - 7200.0))
        .hset("q:pace:delay", "old", 1000)
        .hset("q:robots", "recent", record(secs))
        .hset("q:robots", "unreadable", "not json")
        // Locks: one held, one run out.
        .zadd("q:robots:locks", "held", now + 20_000)
        .zadd("q:robots:locks", "run-out", now - 1)
        // Heartbeats: a live worker, one gone two hours ago.
        .hset("q:workers", "live", heartbeat(secs))
        .hset("q:workers", "gone", heartbeat(secs - 7200.0))
        .query(&mut c)
        .unwrap();

    let ttl = Duration::from_secs(3600);
    let first = f.sweep(1000, ttl).await.unwrap();
    assert_eq!(first.slots, 1, "{first:?}");
    assert_eq!(first.locks, 1, "{first:?}");
    assert_eq!(first.workers, 1, "{first:?}");
    // Records with no expiry get one on the first pass, and go on the next
    // if it has passed.
    f.sweep(1000, ttl).await.unwrap();
    // The slot to come stays; the past one, with no back-off, is gone; a
    // host with back-off keeps its slot (its last news) until left alone
    // for a while, and back-off with no slot gets one, now.
    assert_eq!(
        hash(&mut c, "q:pace"),
        ["backed-off", "errors-only", "future", "no-slot"]
    );
    assert_eq!(hash(&mut c, "q:pace:backoff"), ["backed-off", "no-slot"]);
    assert_eq!(hash(&mut c, "q:robots"), ["fresh", "recent"]);
    assert_eq!(hash(&mut c, "q:pace:delay"), ["fresh"]);
    let expiry: Vec<String> = c.zrange("q:robots:expiry", 0, -1).unwrap();
    assert_eq!(expiry, ["fresh", "recent"]);
    let recent: f64 = c.zscore("q:robots:expiry", "recent").unwrap();
    assert!(
        (recent - (now + 3_600_000) as f64).abs() < 5_000.0,
        "{recent}"
    );
    let locks: Vec<String> = c.zrange("q:robots:locks", 0, -1).unwrap();
    assert_eq!(locks, ["held"]);
    assert_eq!(hash(&mut c, "q:workers"), ["live"]);

    // Left alone past the back-off's quiet time, the hosts' back-off goes
    // with their slots; the slot to come stays. The quiet time (1 s) passes
    // by Redis's clock, which the sweep reads: the sleep is the scenario.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    f.sweep(1000, ttl).await.unwrap();
    assert_eq!(hash(&mut c, "q:pace"), ["future"]);
    assert!(hash(&mut c, "q:pace:backoff").is_empty());
    assert!(hash(&mut c, "q:pace:errors").is_empty());
}

#[tokio::test]
async fn a_sweep_says_how_many_workers_take_turns_at_it() {
    let redis = RedisServer::start();
    let f = frontier(&redis).await;
    let ttl = Duration::from_secs(3600);
    // Nobody has leased: nobody shares the sweeping.
    assert_eq!(f.sweep(10, ttl).await.unwrap().crew, 0);
    // Two workers that leased (finding nothing) within a lease are the crew.
    let spider = Spider::from_str("q.toml".as_ref(), SPIDER).unwrap_or_else(|e| panic!("{e}"));
    let client = redis::Client::open(redis.url()).unwrap();
    for worker in ["w1", "w2"] {
        let w = RedisFrontier::connect(&client.clone().into(), spider.frontier_options(worker))
            .await
            .unwrap();
        w.lease(1, 0).await.unwrap();
    }
    assert_eq!(f.sweep(10, ttl).await.unwrap().crew, 2);
}

#[tokio::test]
async fn a_swept_slot_was_no_slot_and_a_swept_crawl_delay_still_holds() {
    let redis = RedisServer::start();
    let f = frontier(&redis).await;
    let mut c = redis.conn();
    // A host whose Crawl-delay (1 s) a worker has read, but whose record,
    // and Crawl-delay with it, the sweep has deleted.
    let first = f
        .reserve_slot("h", Duration::from_secs(1), Duration::ZERO, None)
        .await
        .unwrap()
        .expect("no limit");
    assert_eq!(first, Duration::ZERO);
    let swept = f.sweep(1000, Duration::from_secs(3600)).await.unwrap();
    assert_eq!(swept.slots, 0, "a slot to come is kept");
    let second = f
        .reserve_slot("h", Duration::from_secs(1), Duration::ZERO, None)
        .await
        .unwrap()
        .expect("no limit");
    assert!(second >= Duration::from_millis(900), "{second:?}");
    // Once the slot has passed, deleting it changes nothing: the next
    // request goes at once, as it would have with the entry. The slot
    // passes by Redis's clock: the sleep is the scenario.
    tokio::time::sleep(second + Duration::from_millis(1100)).await;
    let swept = f.sweep(1000, Duration::from_secs(3600)).await.unwrap();
    assert_eq!(swept.slots, 1);
    assert_eq!(len(&mut c, "q:pace"), 0);
    let third = f
        .reserve_slot("h", Duration::ZERO, Duration::ZERO, None)
        .await
        .unwrap()
        .expect("no limit");
    assert_eq!(third, Duration::ZERO);
    // No interval: nothing written.
    assert_eq!(len(&mut c, "q:pace"), 0);
}

#[tokio::test]
async fn a_slot_held_by_a_retry_after_spaces_the_requests_from_its_end() {
    let redis = RedisServer::start();
    let f = frontier(&redis).await;
    let mut c = redis.conn();
    let (second, hold) = (Duration::from_secs(1), Duration::from_millis(500));
    let limit = Some(Duration::from_millis(1600));
    let reserve = |host: &'static str, spacing| f.reserve_slot(host, spacing, hold, limit);
    // Requests held back by a Retry-After (500 ms) their worker heard
    // before the cluster did: the first goes when it ends, the next a
    // spacing later, not all together when it ends.
    let first = reserve("h", second).await.unwrap().expect("reserved");
    let next = reserve("h", second).await.unwrap().expect("reserved");
    assert!(
        first >= Duration::from_millis(450) && first <= hold,
        "{first:?}"
    );
    assert!(
        next >= first + Duration::from_millis(950),
        "{first:?} {next:?}"
    );
    // A third slot would be over the limit: none is reserved, so the
    // request handed back leaves no unused slot in the host's schedule.
    let pace: Vec<u64> = c.hvals("q:pace").unwrap();
    assert_eq!(reserve("h", second).await.unwrap(), None);
    assert_eq!(c.hvals::<_, Vec<u64>>("q:pace").unwrap(), pace);
    // Without a spacing, the hold alone.
    let alone = reserve("other", Duration::ZERO).await.unwrap();
    assert_eq!(alone, Some(hold));
}
