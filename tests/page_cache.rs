//! The page cache for developing spiders (`--http-cache DIR`): `parse` and
//! `run --local` replay what an earlier run stored, and the site sees no
//! request for it (the demo server counts every request it gets); a crawl
//! on Redis refuses the cache.

use crawlworker_demo::Site;
use crawlworker_testkit::{crawlworker, stderr, stdout, temp_dir, FixtureServer, RedisServer};

#[tokio::test(flavor = "multi_thread")]
async fn parse_with_a_page_cache_replays_the_page_without_asking_the_site() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("page-cache");
    let cache = dir.path().join("cache");
    let url = server.url("/news/");
    let parse = || {
        let out = crawlworker(&[
            "parse",
            "spiders/news.toml",
            &url,
            "--http-cache",
            cache.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "parse failed: {}", stderr(&out));
        stdout(&out)
    };
    let first = parse();
    assert_eq!(server.total_hits(), 1, "{:?}", server.hit_counts());
    let second = parse();
    assert_eq!(
        server.total_hits(),
        1,
        "the second parse asked the site: {:?}",
        server.hit_counts()
    );
    assert_eq!(first, second);
    assert!(first.contains("\"status\": 200"), "{first}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_crawl_with_a_page_cache_is_replayed_whole_by_the_next() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("page-cache");
    let cache = dir.path().join("cache");
    let crawl = |out: &str| {
        let output = dir.path().join(out);
        let o = crawlworker(&[
            "run",
            "spiders/news.toml",
            "--local",
            "--start",
            &server.url("/news/"),
            "--http-cache",
            cache.to_str().unwrap(),
            "-o",
            output.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "run --local failed: {}", stderr(&o));
        let mut items: Vec<String> = std::fs::read_to_string(&output)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        items.sort();
        items
    };
    let first = crawl("first.jsonl");
    let fetched = server.total_hits();
    assert!(fetched > 3 && !first.is_empty(), "{fetched} requests");
    let second = crawl("second.jsonl");
    assert_eq!(
        server.total_hits(),
        fetched,
        "the replayed crawl asked the site: {:?}",
        server.hit_counts()
    );
    assert_eq!(first, second);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_crawl_on_redis_refuses_the_page_cache_and_says_why() {
    let redis = RedisServer::start();
    let dir = temp_dir("page-cache");
    let out = std::process::Command::new(crawlworker_testkit::binary())
        .args(["run", "spiders/news.toml", "--idle-exit", "1s"])
        .env("CRAWLWORKER_REDIS_URL", redis.url())
        .env(
            "CRAWLWORKER_HTTPCACHE_DIR",
            dir.path().join("cache").to_str().unwrap(),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("httpcache_dir") && err.contains("not for crawls on Redis"),
        "{err}"
    );
}
