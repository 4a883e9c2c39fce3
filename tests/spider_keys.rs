//! A spider's Redis keys are all known and all its own: `flush --all`
//! leaves none of them behind, a copy of a spider renamed has its own
//! start key, and `check` and `run` refuse a spider whose keys two kinds
//! would share.

use std::time::Duration;

use redis::Commands;

use crawlworker::frontier::{Heartbeat, KeyGroup, KeyKind, RedisFrontier, Refused, StartClaim};
use crawlworker::spider::Spider;
use crawlworker::worker::StopRules;
use crawlworker_demo::Site;
use crawlworker_testkit::{
    crawlworker, crawlworker_with_redis, eventually, stderr, temp_dir, FixtureServer, RedisServer,
    Robots,
};

use crate::in_process::InProcess;

/// How long a condition may take before a test gives up on it.
const PATIENCE: Duration = Duration::from_secs(20);

/// `flush --all --yes` leaves no key of the spider: every kind of key is
/// made to exist first, so a kind added later without a flush group fails
/// here. (The delayed retries, politeness, back-off and robots keys were
/// once left behind, and retries still showed as waiting after a "full"
/// flush.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_all_leaves_no_key_of_the_spider() {
    let redis = RedisServer::start();
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.set_robots(Robots::Body("User-agent: *\nCrawl-delay: 0.01\n".into()));
    let dir = temp_dir("spider-keys");
    let path = dir.path().join("every.toml");
    std::fs::write(
        &path,
        r#"
name = "every"

[settings]
allow_private_networks = true
robotstxt_obey = true
download_delay = 0.01
retry_backoff_max = "1h"
max_pages_per_host = 1000

[items.page]
url = { page = "url" }

[[rules]]
name = "links"
match = '/fault/links'
  [[rules.follow]]
  css = "a::attr(href)"
  rule = "page"

[[rules]]
name = "hourly"
match = 'key=hourly'
revisit = "1h"
  [[rules.extract]]
  item = "page"

[[rules]]
name = "often"
match = 'key=often'
revisit = "100ms"
  [[rules.extract]]
  item = "page"

[[rules]]
name = "page"
match = '/fault/'
  [[rules.extract]]
  item = "page"
"#,
    )
    .unwrap();
    let push = |paths: &[&str]| {
        let urls: Vec<String> = paths.iter().map(|p| server.url(p)).collect();
        let mut args = vec!["push-urls", path.to_str().unwrap()];
        args.extend(urls.iter().map(String::as_str));
        crawlworker_with_redis(&redis.url(), &args)
    };
    // A page (items, stats), a link (dupefilter), a loop (failed), a
    // 429 whose retry waits an hour (delayed, back-off); robots.txt with a
    // Crawl-delay (robots, its lock, host delay) and a download delay (pace).
    // The 429 is for another host name of the server, so that its hour of
    // back-off holds up none of the others. Pages revisited hourly (the
    // schedule) and every 100 ms (a revisit queued and not fetched yet, once
    // the lease below has put it in the queue).
    let out = push(&[
        "/fault/status/200?key=hourly",
        "/fault/status/200?key=often",
        "/fault/status/200?key=page",
        "/fault/links?to=/fault/status/200%3Fkey%3Dlinked",
        "/fault/loop/a",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let port = server.addr().port();
    let later = format!("http://localhost:{port}/fault/retry-after/3600?times=1&key=later");
    let out = crawlworker_with_redis(&redis.url(), &["push-urls", path.to_str().unwrap(), &later]);
    assert!(out.status.success(), "{}", stderr(&out));
    let worker = InProcess::start(
        &path,
        &redis.url(),
        &[("CRAWLWORKER_IDLE_RECHECK", "100ms")],
        StopRules::default(),
    )
    .await;
    let mut conn = redis.conn();
    eventually("the crawl reaches its waiting retry", PATIENCE, || {
        let delayed: u64 = conn.zcard("every:delayed").unwrap();
        let failed: u64 = conn.llen("every:failed").unwrap();
        let items: u64 = conn.llen("every:items").unwrap();
        (delayed == 1 && failed == 1 && items >= 2).then_some(())
    });
    worker.stop().await;

    // What is left to make: a dead letter, queued and leased requests,
    // start entries, a live worker.
    let bad = crawlworker_with_redis(
        &redis.url(),
        &["push-urls", path.to_str().unwrap(), "not a url"],
    );
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    let _: () = conn.rpush("every:start_urls", "not a url either").unwrap();
    let spider = Spider::load(&path).unwrap();
    let client = redis::Client::open(redis.url()).unwrap();
    let f = RedisFrontier::connect(
        &client.clone().into(),
        spider.frontier_options("regression"),
    )
    .await
    .unwrap();
    claim_all(&spider, &f).await;
    // A host nothing waits for (these are leased, never fetched).
    let other = format!("http://127.0.0.2:{port}");
    let more: Vec<String> = ["/fault/status/200?key=q1", "/fault/status/200?key=q2"]
        .iter()
        .map(|p| format!("{other}{p}"))
        .collect();
    f.push_start(&more, 0.0, None).await.unwrap();
    claim_all(&spider, &f).await;
    // The page revisited every 100 ms is due by now: this lease queues it.
    // Due by Redis's clock, which the lease reads: the sleep is the
    // scenario, not a wait for the system.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (leased, _) = f.lease(1, 0).await.unwrap();
    assert_eq!(leased.len(), 1);
    f.push_start(&[server.url("/fault/status/200?key=start")], 0.0, None)
        .await
        .unwrap();
    // Crawl control: a pause (the pages per host are counted above), and
    // a seed queued once (as `[start] sitemap` does).
    assert!(f.pause().await.unwrap());
    let seed = crawlworker::request::Request::get(&server.url("/fault/sitemap"));
    assert_eq!(f.seed(std::slice::from_ref(&seed)).await.unwrap(), 1);
    assert_eq!(f.seed(&[seed]).await.unwrap(), 0);
    // A robots.txt fetch lock held (storing a record frees its own), and a
    // sweep stopped partway through a large hash of slots to come (its
    // cursor). Before the heartbeat, which is older than the sweep keeps.
    assert!(f
        .robots_lock("127.0.0.3", Duration::from_secs(60))
        .await
        .unwrap());
    let slots: Vec<(String, u64)> = (0..600)
        .map(|i| (format!("127.0.1.{i}"), 4_000_000_000_000))
        .collect();
    let _: () = conn.hset_multiple("every:pace", &slots).unwrap();
    f.sweep(1, Duration::from_secs(3600)).await.unwrap();
    f.heartbeat(&Heartbeat {
        host: "h".into(),
        pid: 1,
        started: "2026-11-23T00:00:00Z".into(),
        pages: 0,
        heartbeat: 0.0,
        version: String::new(),
    })
    .await
    .unwrap();

    // A login session stored, gone stale, and a worker logging in again.
    use crawlworker::frontier::{Backend, SessionLogin};
    let minute = Duration::from_secs(60);
    Backend::session_lock(&f, 0, "h", minute).await.unwrap();
    let login = SessionLogin {
        cookie: Some(crawlworker::spider::session::SecretText::new(
            "sid=1".into(),
        )),
        ..SessionLogin::default()
    };
    assert!(Backend::session_store(&f, "h", &login).await.unwrap());
    assert!(Backend::session_stale(&f, 1).await.unwrap());
    Backend::session_lock(&f, 1, "h", minute).await.unwrap();
    let keys = &spider.keys;
    // A spider handing this one work said so (its workers write this).
    let _: () = conn.hset(&keys.upstreams, "upstream", "{}").unwrap();
    // The item stream belongs to the stream sink, which this spider (on
    // the list sink) never writes: made by hand.
    let _: String = redis::cmd("XADD")
        .arg(&keys.item_stream)
        .arg(&["*", "item", "{}"])
        .query(&mut conn)
        .unwrap();
    // A scrapy-redis queue set aside is made only by `import-queue`, from
    // a queue scrapy-redis left: made by hand.
    let _: () = conn.rpush(&keys.scrapy_queue, b"\x80\x05N.").unwrap();
    // A worker is noted as waiting for work only while it waits (its stop
    // forgets it): made by hand.
    let _: () = conn.hset(&keys.waiting, "a-worker", 1).unwrap();
    // A shard's inbox is written only by requests another shard of a
    // sharded spider hands it: made by hand.
    let _: () = conn.zadd(&keys.inbox, "w#1", 7).unwrap();
    // Requests are parked only while their host's next slot is out of
    // reach (half a lease away): made by hand.
    let _: () = conn
        .zadd(&keys.parked, "slow.example 0000000000000001 1", 0)
        .unwrap();
    let _: () = conn.zadd(&keys.parked_hosts, "slow.example", 1).unwrap();
    // Exporters' leases, what they hold and set aside are written only by
    // `crawlworker export`: made by hand.
    let _: () = conn.hset(&keys.exporters, "an-exporter", "{}").unwrap();
    let _: () = conn
        .rpush(format!("{}:exporting:an-exporter", keys.items), "{}")
        .unwrap();
    let _: () = conn.rpush(&keys.items_dead, "{}").unwrap();
    let missing: Vec<&str> = KeyKind::ALL
        .iter()
        .filter(|k| k.group() != KeyGroup::Channel)
        .map(|k| keys.get(*k))
        .filter(|key| !conn.exists::<_, bool>(*key).unwrap())
        .collect();
    assert!(missing.is_empty(), "the test did not make {missing:?}");

    let out = crawlworker_with_redis(
        &redis.url(),
        &["flush", path.to_str().unwrap(), "--all", "--yes"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(redis.keys(), Vec::<String>::new(), "flush --all left keys");
    server.stop().await.unwrap();
}

/// Claims every start entry into the queue, as a worker would.
async fn claim_all(spider: &Spider, f: &RedisFrontier) {
    let (_, entries) = f.lease(0, 10).await.unwrap();
    let claims: Vec<StartClaim> = entries
        .into_iter()
        .map(|entry| StartClaim {
            outcome: spider.start_request(&entry).map_err(Refused::from),
            entry,
        })
        .collect();
    f.claim_start(&claims).await.unwrap();
}

/// A copy of a spider, renamed, has its own start key: shipped spiders use
/// the `{name}` default (`spiders/bbs.toml` once named `bbs:start_urls`,
/// so a copy renamed `bigbbs` pushed into the original's queue and its
/// `flush --all` deleted it), and `check` warns about a start key without
/// the spider's name.
#[test]
fn a_copy_of_a_spider_has_its_own_start_key() {
    let redis = RedisServer::start();
    let dir = temp_dir("spider-keys");
    let text = std::fs::read_to_string(crawlworker_testkit::root().join("spiders/bbs.toml"))
        .unwrap()
        .replace("name = \"bbs\"", "name = \"bigbbs\"");
    let copy = dir.path().join("bigbbs.toml");
    std::fs::write(&copy, &text).unwrap();
    let copy = copy.to_str().unwrap();
    let task = r#"{"forum_id": "00001", "max_page": 1}"#;
    for spider in ["spiders/bbs.toml", copy] {
        let out = crawlworker_with_redis(&redis.url(), &["push-urls", spider, task]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let out = crawlworker_with_redis(&redis.url(), &["flush", copy, "--all", "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut conn = redis.conn();
    assert_eq!(
        conn.llen::<_, u64>("bbs:start_urls").unwrap(),
        1,
        "the original keeps its task"
    );
    assert_eq!(conn.llen::<_, u64>("bigbbs:start_urls").unwrap(), 0);

    let named = dir.path().join("named.toml");
    std::fs::write(
        &named,
        text.replace("[start]\n", "[start]\nkey = \"bbs:start_urls\"\n"),
    )
    .unwrap();
    let out = crawlworker(&["check", named.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "a warning is not an error: {}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("warning: start.key: the start key `bbs:start_urls` does not contain the spider's name `bigbbs`"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("help: leave `key` out to use the default `bigbbs:start_urls`"),
        "{}",
        stderr(&out)
    );
}

/// `check` and `run` refuse a spider naming a key that another kind of key
/// is or writes to, such as the dupefilter's bloom and expiring modes
/// (`<dupefilter>:<n>`): two kinds would share it.
#[test]
fn check_refuses_two_kinds_sharing_a_key() {
    let dir = temp_dir("spider-keys");
    let path = dir.path().join("shared.toml");
    let text = std::fs::read_to_string(crawlworker_testkit::root().join("spiders/bbs.toml"))
        .unwrap()
        + "\n[keys]\nitems = \"{name}:dupefilter:2\"\n";
    std::fs::write(&path, &text).unwrap();
    let line = text.lines().count();
    for command in ["check", "run"] {
        let out = crawlworker_with_redis("redis://127.0.0.1:1", &[command, path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{command}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!("shared.toml:{line}:"))
                && err.contains("the `items` key `bbs:dupefilter:2`")
                && err.contains("`dupefilter`"),
            "{command}: {err}"
        );
    }
    // The keys of two kinds named the same are refused too.
    std::fs::write(
        &path,
        text.replace("{name}:dupefilter:2", "{name}:start_urls"),
    )
    .unwrap();
    let out = crawlworker(&["check", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the `start_urls` and `items` keys would both be `bbs:start_urls`"),
        "{}",
        stderr(&out)
    );
}

/// `[keys] shards`: shard 0's keys are the spider's own, its hash tag
/// included, and the other shards' are each in a slot of their own.
#[test]
fn a_spiders_shards_start_with_its_own_keys() {
    let spider = |keys: &str| {
        let text = format!(
            "name = \"bbs-detail\"\n[keys]\n{keys}\n[start]\nurl = \"http://127.0.0.1:8700/{{n}}\"\n[[rules]]\nname = \"r\"\nmatch = '/'\n  [[rules.follow]]\n  css = \"a::attr(href)\"\n"
        );
        Spider::from_str("bbs-detail.toml".as_ref(), &text).unwrap_or_else(|e| panic!("{e}"))
    };
    let tagged = spider("mode = \"cluster\"\nhash_tag = \"bbs\"");
    assert_eq!(tagged.shards, vec![tagged.keys.clone()]);
    assert_eq!(tagged.shards[0].requests, "{bbs}bbs-detail:requests");
    let sharded = spider("mode = \"cluster\"\nshards = 3");
    assert_eq!(sharded.shards.len(), 3);
    assert_eq!(sharded.shards[0], sharded.keys);
    let tags: std::collections::HashSet<&str> = sharded
        .shards
        .iter()
        .map(|k| crawlworker::frontier::connection::hash_tag(&k.requests))
        .collect();
    assert_eq!(tags.len(), 3, "{tags:?}");
}
