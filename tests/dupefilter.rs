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
        // Two filters of one piece each.
        (
            "bloom",
            "dupefilter = \"bloom\"\ndupefilter_capacity = 50\ndupefilter_error_rate = 0.000001",
            3,
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
            // 93 entries: a second filter (of 100) followed the first (of 50).
            let filters = if settings.contains("= 50\n") { 2 } else { 1 };
            assert_eq!(s["dupefilter"]["filters"], filters, "{s}");
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
/// 1,000 chains three filters (of 1,000, 2,000 and 4,000 entries); one of
/// capacity 1,000,000 is one filter in
/// 28 pieces.
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
            assert_eq!(info.filters, if name == "bloom" { 3 } else { 1 });
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
