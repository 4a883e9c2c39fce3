//! The setting most crawl tests start from: a real Redis, the demo site on
//! a fixture server, a copy of `spiders/bbs.toml` pointed at it, and the
//! demo's tasks pushed through `crawlworker push-urls`.

use std::path::PathBuf;
use std::time::Duration;

use crawlworker_demo::{demo_tasks, Site};

use crate::{crawlworker_with_redis, spider_for, stderr, temp_dir, FixtureServer, RedisServer};

/// A demo crawl ready to run: start workers on [`DemoCrawl::spider`].
pub struct DemoCrawl {
    pub redis: RedisServer,
    pub server: FixtureServer,
    /// The spider copy.
    pub spider: PathBuf,
    /// Holds the spider copy and anything else a test writes; removed at
    /// the end.
    pub dir: tempfile::TempDir,
}

impl DemoCrawl {
    /// Redis, the demo forum answering after `latency`, the spider, and the
    /// demo tasks pushed.
    pub async fn start(latency: Duration) -> DemoCrawl {
        DemoCrawl::start_on(RedisServer::start(), latency).await
    }

    /// [`DemoCrawl::start`] on a Redis the test started itself (with
    /// other settings).
    pub async fn start_on(redis: RedisServer, latency: Duration) -> DemoCrawl {
        let server = FixtureServer::start_with_latency(Site::demo(), latency)
            .await
            .unwrap_or_else(|e| panic!("cannot start the fixture server: {e}"));
        let dir = temp_dir("crawl");
        let spider = spider_for("bbs", &server.base_url(), dir.path());
        let mut args = vec!["push-urls".to_string(), spider.display().to_string()];
        args.extend(demo_tasks());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = crawlworker_with_redis(&redis.url(), &args);
        assert!(out.status.success(), "push-urls: {}", stderr(&out));
        DemoCrawl {
            redis,
            server,
            spider,
            dir,
        }
    }

    /// The spider file's path, as an argument.
    pub fn spider_arg(&self) -> &str {
        self.spider
            .to_str()
            .unwrap_or_else(|| panic!("{} is not UTF-8", self.spider.display()))
    }

    /// Stops the fixture server.
    pub async fn stop(self) {
        let _ = self.server.stop().await;
    }
}
