//! The dupefilter's modes, each through a real crawl of the demo
//! forum: the exact expected items, the mode and entries `stats` reports,
//! `flush --fingerprint` where the mode can forget, and an `expiring`
//! filter that lets a page be crawled again once its TTL has passed.

use std::time::Duration;

use serde_json::Value;

use crawlworker::worker::StopRules;
use crawlworker_testkit::{crawlworker_with_redis, eventually, stderr, stdout, DemoCrawl};

use crate::expect::{assert_exact, expected, scraped, stats_json};
use crate::in_process::InProcess;

/// The demo crawl with `settings` added to the spider.
async fn crawl_with(settings: &str) -> DemoCrawl {
    let crawl = DemoCrawl::start(Duration::ZERO).await;
    let text = std::fs::read_to_string(&crawl.spider)
        .unwrap()
        .replace("[settings]\n", &format!("[settings]\n{settings}\n"));
    std::fs::write(&crawl.spider, text).unwrap();
    crawl
}

async fn drain(crawl: &DemoCrawl) {
    let rules = StopRules {
        until_drained: true,
        ..StopRules::default()
    };
    InProcess::start(&crawl.spider, &crawl.redis.url(), &[], rules)
        .await
        .wait(Duration::from_secs(60))
        .await;
}

fn stats(crawl: &DemoCrawl) -> Value {
    stats_json(&crawl.redis.url(), crawl.spider_arg())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_crawls_the_demo_forum_exactly() {
    for (mode, settings, keys) in [
        ("exact", "dupefilter = \"exact\"", 2),
        ("compact", "dupefilter = \"compact\"", 2),
        // A capacity of 50 is raised to 19,351, the least for which a
        // millionth holds: one filter of 18 pieces of 4 KiB.
        (
            "bloom",
            "dupefilter = \"bloom\"\ndupefilter_capacity = 50\ndupefilter_error_rate = 0.000001",
            19,
        ),
        // One filter of 3.6 MB, in 28 pieces of 128 KiB.
        (
            "bloom",
            "dupefilter = \"bloom\"\ndupefilter_capacity = 1000000\ndupefilter_error_rate = 0.000001",
            29,
        ),
        (
            "expiring",
            "dupefilter = \"expiring\"\ndupefilter_ttl = \"1h\"",
            2,
        ),
    ] {
        // A Bloom filter skips a URL at about its error rate (a millionth
        // here, so the exact items hold in practice).
        let crawl = crawl_with(settings).await;
        drain(&crawl).await;
        eprintln!("mode {mode}");
        assert_exact(&scraped(&crawl.redis), &expected(&crawl.server.base_url()));
        let twice: Vec<_> = crawl
            .server
            .hit_counts()
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .collect();
        assert!(twice.is_empty(), "{mode}: fetched twice: {twice:?}");
        let s = stats(&crawl);
        assert_eq!(s["dupefilter"]["mode"], mode, "{s}");
        // The forum's 93 filtered requests (list pages skip the filter).
        assert_eq!(s["dupefilter"]["entries"], 93, "{mode}: {s}");
        assert!(s["dupefilter"]["bytes"].as_u64().unwrap() > 0, "{s}");
        if mode == "bloom" {
            // 93 entries fit the first filter (50 is raised to 19,351 at a
            // millionth; the chain's growth is tested with mark_seen).
            assert_eq!(s["dupefilter"]["filters"], 1, "{s}");
        }
        let dupefilter_keys = || -> Vec<String> {
            crawl
                .redis
                .keys()
                .into_iter()
                .filter(|k| k.starts_with("bbs:dupefilter"))
                .collect()
        };
        // The filter's keys (with its meta hash, and an expiring filter's
        // one time bucket).
        assert_eq!(dupefilter_keys().len(), keys, "{mode}: {:?}", dupefilter_keys());

        // Forgetting one URL, where the mode can.
        let url = crawl.server.url("/post/1001");
        let out = crawlworker_with_redis(
            &crawl.redis.url(),
            &["flush", crawl.spider_arg(), "--fingerprint", &url],
        );
        if mode == "bloom" {
            assert_eq!(out.status.code(), Some(2), "{mode}");
            assert!(
                stderr(&out).contains("cannot forget one URL"),
                "{}",
                stderr(&out)
            );
        } else {
            assert!(
                stdout(&out).contains("removed fingerprint"),
                "{mode}: {}{}",
                stdout(&out),
                stderr(&out)
            );
            assert_eq!(stats(&crawl)["dupefilter"]["entries"], 92, "{mode}");
        }
        // `flush --dupefilter` leaves nothing of any mode behind.
        let out = crawlworker_with_redis(
            &crawl.redis.url(),
            &["flush", crawl.spider_arg(), "--dupefilter", "--yes"],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let left = dupefilter_keys();
        assert!(left.is_empty(), "{mode}: {left:?}");
        crawl.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiring_filter_lets_a_page_be_crawled_again_after_its_ttl() {
    let crawl = crawl_with(
        "dupefilter = \"expiring\"\ndupefilter_ttl = \"6s\"\ndupefilter_refresh = false",
    )
    .await;
    drain(&crawl).await;
    assert_eq!(crawl.server.hits("/post/1001"), 1);
    // Within the TTL the same task finds every post already seen (6 s:
    // two drains of one forum take well under that, even on a busy machine).
    let task = r#"{"forum_id": "00001", "max_page": 1}"#;
    let out = crawlworker_with_redis(&crawl.redis.url(), &["push-urls", crawl.spider_arg(), task]);
    assert!(out.status.success(), "{}", stderr(&out));
    drain(&crawl).await;
    assert_eq!(
        crawl.server.hits("/post/1001"),
        1,
        "remembered within the TTL"
    );
    // Once the TTL has passed, the filter has forgotten them.
    eventually(
        "the fingerprints are forgotten",
        Duration::from_secs(30),
        || (stats(&crawl)["dupefilter"]["entries"] == 0).then_some(()),
    );
    let out = crawlworker_with_redis(&crawl.redis.url(), &["push-urls", crawl.spider_arg(), task]);
    assert!(out.status.success(), "{}", stderr(&out));
    drain(&crawl).await;
    assert_eq!(
        crawl.server.hits("/post/1001"),
        2,
        "crawled again after the TTL"
    );
    crawl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spider_whose_mode_changed_is_refused() {
    let crawl = crawl_with("dupefilter = \"exact\"").await;
    drain(&crawl).await;
    let text = std::fs::read_to_string(&crawl.spider)
        .unwrap()
        .replace("dupefilter = \"exact\"", "dupefilter = \"compact\"");
    std::fs::write(&crawl.spider, text).unwrap();
    let out = crawlworker_with_redis(
        &crawl.redis.url(),
        &["run", crawl.spider_arg(), "--until-drained"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out)
            .contains("was made in mode `exact`, but the spider's dupefilter setting is `compact`"),
        "{}",
        stderr(&out)
    );
    crawl.stop().await;
}

/// The frontier of a small spider `name` with dupefilter `mode`, the
/// filter prepared.
async fn frontier_with(
    client: &redis::Client,
    name: &str,
    mode: crawlworker::frontier::Dupefilter,
) -> crawlworker::frontier::RedisFrontier {
    use crawlworker::frontier::{Options, RedisFrontier};
    let spider = crawlworker::spider::Spider::from_str(
        "m.toml".as_ref(),
        &format!(
            "name = \"{name}\"\n[start]\nurl = \"http://127.0.0.1/{{n}}\"\n\
             [items.x]\nn = {{ meta = \"n\" }}\n\
             [[rules]]\nname = \"all\"\nmatch = '/'\n[[rules.extract]]\nitem = \"x\"\n"
        ),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut f = RedisFrontier::connect(
        &client.clone().into(),
        Options {
            dupefilter: mode,
            ..spider.frontier_options("w")
        },
    )
    .await
    .unwrap();
    f.prepare_dupefilter().await.unwrap();
    f
}

/// Every mode remembers what it was given and only that: 5,000 added
/// fingerprints are all found, 5,000 others are not (a Bloom filter may
/// say "seen" for about error rate × 5,000 of them: a millionth here),
/// and forgetting works where the mode can. A Bloom filter of capacity
/// 1,000 at a millionth is sized for 19,351 entries, the least for which
/// that rate holds (one filter); one of capacity 1,000,000 is one filter
/// in 28 pieces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_finds_what_it_was_given_and_only_that() {
    use crawlworker::frontier::Dupefilter;
    let redis = crawlworker_testkit::RedisServer::start();
    let client = redis::Client::open(redis.url()).unwrap();
    let fp =
        |i: u32| crawlworker::request::Request::get(&format!("http://127.0.0.1/{i}")).fingerprint();
    let added: Vec<String> = (0..5000).map(fp).collect();
    let others: Vec<String> = (5000..10000).map(fp).collect();
    let added: Vec<&str> = added.iter().map(String::as_str).collect();
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    for (name, mode) in [
        ("exact", Dupefilter::Exact),
        ("compact", Dupefilter::Compact),
        (
            "bloom",
            Dupefilter::Bloom {
                capacity: 1000,
                error_rate: 1e-6,
            },
        ),
        (
            "pieces",
            Dupefilter::Bloom {
                capacity: 1_000_000,
                error_rate: 1e-6,
            },
        ),
        (
            "expiring",
            Dupefilter::Expiring {
                ttl: Duration::from_secs(3600),
                refresh: true,
            },
        ),
    ] {
        let f = frontier_with(&client, name, mode).await;
        assert_eq!(f.mark_seen(&added).await.unwrap(), 5000, "{name}");
        assert_eq!(f.mark_seen(&added[..100]).await.unwrap(), 0, "{name}");
        assert_eq!(f.count_seen(&added).await.unwrap(), 5000, "{name}");
        assert_eq!(f.count_seen(&others).await.unwrap(), 0, "{name}");
        let info = f.dupefilter_info().await.unwrap();
        assert_eq!((info.mode.as_str(), info.entries), (mode.mode(), 5000));
        if mode.mode() == "bloom" {
            // 1,000 at a millionth is raised to 19,351 (least_capacity).
            assert_eq!(info.filters, 1);
            assert_eq!(f.forget_fingerprint(added[0]).await.unwrap(), None);
        } else {
            assert_eq!(f.forget_fingerprint(added[0]).await.unwrap(), Some(true));
            assert_eq!(f.forget_fingerprint(added[0]).await.unwrap(), Some(false));
            assert_eq!(f.count_seen(&added).await.unwrap(), 4999, "{name}");
            assert_eq!(f.dupefilter_info().await.unwrap().entries, 4999);
        }
    }
}

/// A Bloom chain grows as a scalable Bloom filter: a full filter of 40,000
/// entries (18 pieces of 4 KiB) is followed by one of 80,000 at half the
/// error rate (20 pieces of 8 KiB). Every added fingerprint is still
/// found, never-added ones are taken for seen at under twice the error
/// rate, and flushing the dupefilter deletes every piece of both filters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_bloom_filter_is_followed_by_a_larger_tighter_one() {
    use crawlworker::frontier::{bloom_chain, Dupefilter, KeyGroup};
    let redis = crawlworker_testkit::RedisServer::start();
    let client = redis::Client::open(redis.url()).unwrap();
    let fp = |i: u32| {
        crawlworker::request::Request::get(&format!("http://127.0.0.1/c/{i}")).fingerprint()
    };
    let added: Vec<String> = (0..60_000).map(fp).collect();
    let others: Vec<String> = (60_000..80_000).map(fp).collect();
    let added: Vec<&str> = added.iter().map(String::as_str).collect();
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    let mode = Dupefilter::Bloom {
        capacity: 40_000,
        error_rate: 0.001,
    };
    let chain = bloom_chain(40_000, 0.001);
    assert_eq!((chain[0].pieces, chain[1].pieces), (18, 20));
    let f = frontier_with(&client, "chain", mode).await;
    for batch in added.chunks(5000) {
        f.mark_seen(batch).await.unwrap();
    }
    let info = f.dupefilter_info().await.unwrap();
    assert_eq!(
        (info.filters, info.capacity, info.newest_entries),
        (2, 80_000, info.entries - 40_000),
        "{info:?}"
    );
    // False positives while adding count as seen: a few at most.
    assert!(info.entries > 59_900, "{info:?}");
    let mut seen = 0;
    for batch in added.chunks(5000) {
        seen += f.count_seen(batch).await.unwrap();
    }
    assert_eq!(seen, 60_000);
    let mut wrong = 0;
    for batch in others.chunks(5000) {
        wrong += f.count_seen(batch).await.unwrap();
    }
    // About 0.001 of 20,000 (the full filter's rate; the newer one is a
    // quarter full), and never 2 x 0.001 (40) with room for chance.
    assert!(
        wrong < 60,
        "{wrong} of 20,000 never-added fingerprints taken for seen"
    );
    let keys = |redis: &crawlworker_testkit::RedisServer| {
        redis
            .keys()
            .into_iter()
            .filter(|k| k.starts_with("chain:dupefilter"))
            .count()
    };
    // Two filters of 18 and 20 pieces, and the meta hash.
    assert_eq!(keys(&redis), 39);
    f.flush(&[KeyGroup::Dupefilter]).await.unwrap();
    assert_eq!(keys(&redis), 0);
}

/// Redis's used memory, from `INFO memory`.
fn used_memory(redis: &crawlworker_testkit::RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(&mut redis.conn())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(u64::MAX)
}

/// A Bloom filter too large for the Redis it would live in is refused
/// before anything is allocated: an error for its spider, with the sizes,
/// never an out-of-memory Redis for every other spider (a filter made
/// inside a script passed maxmemory before Redis could refuse it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bloom_filter_too_large_for_redis_is_refused_and_other_spiders_go_on() {
    use crawlworker::frontier::admin::DupefilterMismatch;
    use crawlworker::frontier::{Dupefilter, RedisFrontier};
    let redis = crawlworker_testkit::RedisServer::start_with(&["--maxmemory", "64mb"]);
    let client = redis::Client::open(redis.url()).unwrap();
    let spider = crawlworker::spider::Spider::from_str(
        "huge.toml".as_ref(),
        "name = \"huge\"\n[start]\nurl = \"http://127.0.0.1/{n}\"\n[items.x]\nn = { meta = \"n\" }\n\
         [[rules]]\nname = \"all\"\nmatch = '/'\n[[rules.extract]]\nitem = \"x\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let huge = Dupefilter::Bloom {
        capacity: 1_000_000_000,
        error_rate: 0.001,
    };
    let mut f = RedisFrontier::connect(
        &client.clone().into(),
        crawlworker::frontier::Options {
            dupefilter: huge,
            ..spider.frontier_options("w")
        },
    )
    .await
    .unwrap();
    match f.prepare_dupefilter().await {
        Err(e @ DupefilterMismatch::NoRoom { .. }) => {
            let message = e.to_string();
            assert!(
                message.contains("huge:dupefilter") && message.contains("maxmemory"),
                "{message}"
            );
        }
        other => panic!("a 1.7 GB filter in a 64 MB Redis was not refused: {other:?}"),
    }
    assert!(used_memory(&redis) < 16 << 20, "something was allocated");
    // The same Redis serves every other spider as before.
    let other = frontier_with(&client, "other", Dupefilter::Exact).await;
    assert_eq!(other.mark_seen(&["a1", "b2"]).await.unwrap(), 2);
    // And a worker started with that spider says why it cannot run.
    let dir = crawlworker_testkit::temp_dir("huge");
    let path = dir.path().join("huge.toml");
    std::fs::write(
        &path,
        "name = \"huge\"\n[start]\nurl = \"http://127.0.0.1/{n}\"\n[settings]\ndupefilter = \"bloom\"\n\
         dupefilter_capacity = 1000000000\n[items.x]\nn = { meta = \"n\" }\n\
         [[rules]]\nname = \"all\"\nmatch = '/'\n[[rules.extract]]\nitem = \"x\"\n",
    )
    .unwrap();
    let out = crawlworker_with_redis(
        &redis.url(),
        &["run", &path.display().to_string(), "--until-drained"],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("the Bloom dupefilter huge:dupefilter cannot be made"),
        "{}",
        stderr(&out)
    );
    assert!(used_memory(&redis) < 16 << 20, "something was allocated");
}

/// A chain whose next filter does not fit in Redis's memory does not grow:
/// the workers say why, nothing is allocated, and `stats` says the newest
/// filter holds more than it was sized for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bloom_chain_that_cannot_grow_says_so_and_allocates_nothing() {
    use crawlworker::frontier::admin::Grown;
    use crawlworker::frontier::Dupefilter;
    let redis = crawlworker_testkit::RedisServer::start_with(&["--maxmemory", "12mb"]);
    let client = redis::Client::open(redis.url()).unwrap();
    // The first filter (3.6 MB) fits; the second (twice the entries at
    // half the error rate, 7.9 MB) does not: 90 % of 12 MB may be used.
    let mode = Dupefilter::Bloom {
        capacity: 2_000_000,
        error_rate: 0.001,
    };
    let f = frontier_with(&client, "big", mode).await;
    let before = used_memory(&redis);
    // Half full: the next filter is wanted.
    let _: () = redis::cmd("HSET")
        .arg("big:dupefilter:meta")
        .arg("count:1")
        .arg(1_000_000)
        .query(&mut redis.conn())
        .unwrap();
    match f.grow_dupefilter().await.unwrap() {
        Grown::Refused { ready: 1, reason } => {
            assert!(
                reason.contains("filter 2") && reason.contains("maxmemory"),
                "{reason}"
            )
        }
        other => panic!("the second filter was not refused: {other:?}"),
    }
    assert!(
        used_memory(&redis) < before + (1 << 20),
        "something was allocated"
    );
    // Overfilled: entries still go to the first filter, and stats says so.
    let _: () = redis::cmd("HSET")
        .arg("big:dupefilter:meta")
        .arg("count:1")
        .arg(2_000_001)
        .query(&mut redis.conn())
        .unwrap();
    assert_eq!(
        f.mark_seen(&["0123456789abcdef0123456789abcdef01234567"])
            .await
            .unwrap(),
        1
    );
    let info = f.dupefilter_info().await.unwrap();
    assert_eq!((info.filters, info.newest_entries), (1, 2_000_002));
}

/// A Bloom chain grows by doubling however small its first filter, so a
/// lookup reads a filter per doubling of the entries (not one per
/// `capacity` entries, which made a page of new links quadratic), and the
/// chain's false-positive rate stays under twice the error rate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_bloom_chain_grows_by_doubling_and_keeps_its_error_rate() {
    use crawlworker::frontier::Dupefilter;
    let redis = crawlworker_testkit::RedisServer::start();
    let client = redis::Client::open(redis.url()).unwrap();
    let fp = |i: u32| {
        crawlworker::request::Request::get(&format!("http://127.0.0.1/s/{i}")).fingerprint()
    };
    let added: Vec<String> = (0..20_000).map(fp).collect();
    let others: Vec<String> = (20_000..40_000).map(fp).collect();
    let added: Vec<&str> = added.iter().map(String::as_str).collect();
    let others: Vec<&str> = others.iter().map(String::as_str).collect();
    let mode = Dupefilter::Bloom {
        capacity: 1,
        error_rate: 0.001,
    };
    let f = frontier_with(&client, "tiny", mode).await;
    let mut new = 0;
    for batch in added.chunks(2000) {
        new += f.mark_seen(batch).await.unwrap();
    }
    let info = f.dupefilter_info().await.unwrap();
    assert!(info.filters <= 16, "{info:?}");
    // Once added, never-added fingerprints are taken for seen at about
    // twice the error rate at most (40 expected of 20,000; these give 48,
    // within the sampling's spread; the repeating chain gave 2.1-2.65 times
    // that), and about as many while the chain fills.
    let false_positives = f.count_seen(&others).await.unwrap();
    assert!(false_positives <= 50, "{false_positives} of 20,000");
    assert!(new >= 20_000 - 60, "{new}");
}
