//! While the login account of a members-only host rests (its login met the
//! site's rate limit, with a `Retry-After`), the rest of the crawl goes
//! on: a cluster of two workers crawls every page of another host during
//! the rest, and the members-only pages after it, with one refused login
//! and one that worked. The members' host has a backlog meanwhile, put
//! off until the rest ends.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crawlworker_demo::members::MembersConfig;
use crawlworker_demo::Site;
use crawlworker_testkit::{eventually, push_urls, temp_dir, FixtureServer, RedisServer, Worker};
use serde_json::Value;

use crate::expect::scraped_from;

/// How long the site asks the account to wait.
const REST: Duration = Duration::from_secs(6);

/// The members spider with rules for the demo forum's list and post pages
/// too (another host, no login).
fn spider(members: &FixtureServer, dir: &Path) -> PathBuf {
    let path = crate::sessions::spider(members, dir, "");
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace(
        "[items.thread]",
        "[items.post]\ntitle = { css = \"h1.post-title::text\", required = true }\nurl = { page = \"url\" }\n\n[items.thread]",
    ) + "
[[rules]]
name = \"list\"
match = '/list/\\d+/\\d+$'

  [[rules.follow]]
  css = \"ul.threads a.title::attr(href)\"
  rule = \"post\"

[[rules]]
name = \"post\"
match = '/post/\\d+$'

  [[rules.extract]]
  item = \"post\"
";
    std::fs::write(&path, text).unwrap();
    path
}

/// Every list page of the demo forum at `base`, and the URL of every post.
fn forum(base: &str) -> (Vec<String>, Vec<String>) {
    let site = Site::demo();
    let lists = site
        .forums
        .iter()
        .flat_map(|f| (1..=f.page_count()).map(move |p| format!("{base}/list/{}/{p}", f.id)))
        .collect();
    let posts = site
        .forums
        .iter()
        .flat_map(|f| f.post_ids())
        .map(|id| format!("{base}/post/{id}"))
        .collect();
    (lists, posts)
}

/// When the requests to `server` whose target starts with one of
/// `prefixes` arrived.
fn arrivals(server: &FixtureServer, prefixes: &[&str]) -> Vec<Instant> {
    let mut all: Vec<Instant> = prefixes.iter().flat_map(|p| server.arrivals(p)).collect();
    all.sort();
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_hosts_are_crawled_while_a_login_account_rests_and_its_host_after() {
    let members = FixtureServer::start(Site::demo()).await.unwrap();
    members.members().configure(MembersConfig {
        refuse_next: 1,
        retry_after: Some(REST.as_secs()),
        requests_per_session: 1000,
        ..MembersConfig::default()
    });
    let other = FixtureServer::start(Site::demo()).await.unwrap();
    let redis = RedisServer::start();
    let dir = temp_dir("resting-account");
    let spider = spider(&members, dir.path());
    let threads: Vec<String> = (1..=crawlworker_demo::members::THREADS)
        .map(|n| members.url(&format!("/members/thread/{n}")))
        .collect();
    // Start URLs are not deduplicated: each page is pushed once.
    push_urls(&redis.url(), &spider, &threads[..1]);
    let mut env = crate::sessions::env();
    env.push(("CRAWLWORKER_LOG", "info"));
    let workers: Vec<Worker> = (0..2)
        .map(|_| {
            Worker::spawn(
                &spider,
                &redis.url(),
                &["--until-drained", "--concurrency", "2"],
                &env,
            )
        })
        .collect();
    eventually("the account resting", Duration::from_secs(30), || {
        (members.members().refused() == 1).then_some(())
    });
    // During the rest: the other host's pages, and a backlog for the
    // members' host that waits for the rest to end.
    let (lists, posts) = forum(&other.base_url());
    let mut pushed = threads[1..].to_vec();
    pushed.extend(lists.iter().cloned());
    push_urls(&redis.url(), &spider, &pushed);
    let mut logs = String::new();
    for w in workers {
        let (status, log) = w.wait(Duration::from_secs(120));
        assert!(status.success(), "worker failed: {log}");
        logs.push_str(&log);
    }

    // Every page of both hosts, each once.
    let mut got: Vec<String> = scraped_from(&mut redis.conn(), "members:items")
        .iter()
        .map(|i| {
            let item: Value = serde_json::from_str(i).unwrap();
            item["url"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    got.sort();
    let mut want: Vec<String> = threads.iter().chain(&posts).cloned().collect();
    want.sort();
    assert_eq!(got, want, "{logs}");
    let m = members.members();
    assert_eq!((m.refused(), m.logins()), (1, 1), "{logs}");

    // The login page was asked four times: the refused login (GET, POST)
    // and the one after the rest.
    let logins = members.arrivals("/members/login");
    assert_eq!(logins.len(), 4, "{logs}");
    let (refused, rest_over) = (logins[1], logins[3]);
    assert!(rest_over >= refused + REST - Duration::from_millis(500));
    // The other host's pages all came during the rest ...
    let others = arrivals(&other, &["/list/", "/post/"]);
    assert_eq!(others.len(), lists.len() + posts.len(), "{logs}");
    let last_other = *others.last().unwrap();
    assert!(
        last_other < rest_over,
        "the other host's last page came {:?} after the rest ended: {logs}",
        last_other - rest_over
    );
    // ... and the members' pages after it.
    let first_thread = arrivals(&members, &["/members/thread/"])[0];
    assert!(first_thread > rest_over, "{logs}");
    // A worker learns of the rest once: the members' requests it leases
    // meanwhile are put off at once, each without the cluster's login
    // lock (which, taken by every one of them, kept the worker's download
    // slots from the other host's pages).
    let learnt = logs.matches("no account may log in now").count();
    assert!((1..=4).contains(&learnt), "{learnt} times: {logs}");
}
