//! The documents stay true: the migration guide's spider loads, and its
//! settings table names every scrapy-redis setting a migrating team asks
//! about.

use crawlworker::spider::Spider;
use crawlworker_testkit::root;

const GUIDE: &str = "docs/migrating-from-scrapy-redis.md";

fn guide() -> String {
    std::fs::read_to_string(root().join(GUIDE)).unwrap()
}

#[test]
fn the_migration_guides_spider_is_valid() {
    let text = guide();
    let blocks: Vec<&str> = text
        .split("```toml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    assert!(!blocks.is_empty(), "{GUIDE} has no TOML example");
    for block in blocks {
        let spider = Spider::from_str(GUIDE.as_ref(), block).unwrap_or_else(|e| panic!("{e}"));
        assert!(spider.warnings.is_empty(), "{:?}", spider.warnings);
    }
}

#[test]
fn the_migration_guide_maps_every_scrapy_redis_setting() {
    let text = guide();
    for setting in [
        "REDIS_URL",
        "REDIS_PARAMS",
        "SCHEDULER_PERSIST",
        "SCHEDULER_FLUSH_ON_START",
        "SCHEDULER_IDLE_BEFORE_CLOSE",
        "SCHEDULER_QUEUE_KEY",
        "SCHEDULER_QUEUE_CLASS",
        "SCHEDULER_DUPEFILTER_KEY",
        "DUPEFILTER_CLASS",
        "SCHEDULER_SERIALIZER",
        "REDIS_START_URLS_KEY",
        "REDIS_START_URLS_AS_SET",
        "REDIS_START_URLS_AS_ZSET",
        "REDIS_START_URLS_BATCH_SIZE",
        "MAX_IDLE_TIME_BEFORE_CLOSE",
        "REDIS_ITEMS_KEY",
        "REDIS_ITEMS_SERIALIZER",
        "STATS_KEY",
        "DEPTH_PRIORITY",
        "DEPTH_LIMIT",
        "CONCURRENT_REQUESTS",
        "DOWNLOAD_DELAY",
        "AUTOTHROTTLE_",
        "RETRY_",
        "ROBOTSTXT_OBEY",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("| `") && l.contains(setting)),
            "{GUIDE}: the settings table does not mention {setting}"
        );
    }
}

#[test]
fn the_grafana_dashboard_is_valid_json_with_queries() {
    let path = root().join("deploy/grafana/dashboards/crawlworker.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels.len() >= 8);
    for panel in panels {
        let targets = panel["targets"].as_array().unwrap();
        assert!(
            targets.iter().all(|t| t["expr"]
                .as_str()
                .is_some_and(|e| e.contains("crawlworker_"))),
            "{panel}"
        );
    }
}
