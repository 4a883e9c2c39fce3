//! A split pipeline finishes as one crawl: with `--until-drained`, a
//! spider that others hand work to (`to_spider`, directly or through a
//! chain) stops only once they are drained too, read in the same step as
//! its own queues. The shipped pair (`bbs-list` → `bbs-detail`) gives
//! exactly `bbs.toml`'s items run by one worker from one directory, or by
//! two workers started in either order, or when a list worker is killed
//! mid-scan and another takes over; so does a three-stage chain, and a
//! cycle. A worker started alone says what it waits for, `stats` and the
//! dashboard show the spiders upstream, a worker running several spiders
//! exits only once all read drained, and a relation nobody renews is
//! forgotten.

use crate::expect::Dashboard;
use std::path::{Path, PathBuf};
use std::time::Duration;

use redis::Commands;

use crawlworker::frontier::pipeline::{UpstreamKeys, UpstreamRecord};
use crawlworker::frontier::{now_secs, Backend, RedisFrontier};
use crawlworker::spider::Spider;
use crawlworker_demo::{demo_tasks, Site};
use crawlworker_testkit::{
    crawlworker_with_redis, eventually, eventually_async, fault_spider, push_urls, root,
    spider_for, stderr, stdout, temp_dir, FixtureServer, RedisCluster, RedisServer, TempDir,
    Worker,
};

use crate::dashboard::chromium;
use crate::expect::{assert_exact, expected, scraped_from, stats_json};

/// Leases that expire fast (a killed worker's come back within a second),
/// and an idle worker that looks again every 100 ms.
const FAST: &[(&str, &str)] = &[
    ("CRAWLWORKER_LEASE_TIMEOUT", "1s"),
    ("CRAWLWORKER_IDLE_RECHECK", "100ms"),
];

/// Redis, the demo forum and a directory of spiders, the first of which
/// the demo's tasks are pushed to (with `push-urls`, as a user does).
struct Pipeline {
    redis: RedisServer,
    server: FixtureServer,
    dir: TempDir,
}

impl Pipeline {
    /// The shipped pair, pointed at a demo forum answering after
    /// `latency`.
    async fn pair(latency: Duration) -> Pipeline {
        let p = Pipeline::empty(latency).await;
        spider_for("bbs-list", &p.server.base_url(), p.dir.path());
        spider_for("bbs-detail", &p.server.base_url(), p.dir.path());
        p.push_tasks();
        p
    }

    async fn empty(latency: Duration) -> Pipeline {
        let server = FixtureServer::start_with_latency(Site::demo(), latency)
            .await
            .unwrap_or_else(|e| panic!("cannot start the fixture server: {e}"));
        Pipeline {
            redis: RedisServer::start(),
            server,
            dir: temp_dir("split-drain"),
        }
    }

    /// The spider file `name` in the directory.
    fn spider(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.toml"))
    }

    fn push_tasks(&self) {
        push_urls(&self.redis.url(), &self.spider("bbs-list"), &demo_tasks());
    }

    /// `crawlworker run PATH --until-drained` (no `--idle-exit`), logging
    /// at info level.
    fn worker(&self, path: &Path) -> Worker {
        self.worker_with(path, &[])
    }

    /// [`Pipeline::worker`] with more settings.
    fn worker_with(&self, path: &Path, settings: &[(&str, &str)]) -> Worker {
        let env: Vec<(&str, &str)> = FAST
            .iter()
            .chain(settings)
            .copied()
            .chain([("CRAWLWORKER_LOG", "info")])
            .collect();
        Worker::spawn(path, &self.redis.url(), &["--until-drained"], &env)
    }

    /// Every item of the spiders `names`, canonical and sorted.
    fn items(&self, names: &[&str]) -> Vec<String> {
        let mut conn = self.redis.conn();
        let mut all: Vec<String> = names
            .iter()
            .flat_map(|n| scraped_from(&mut conn, &format!("{n}:items")))
            .collect();
        all.sort();
        all
    }

    /// Nothing is left anywhere: no start entry, queued or leased request
    /// of any of `names`.
    fn assert_nothing_left(&self, names: &[&str]) {
        let mut conn = self.redis.conn();
        for n in names {
            let start: u64 = conn.llen(format!("{n}:start_urls")).unwrap();
            let queued: u64 = conn.zcard(format!("{n}:requests")).unwrap();
            let leased: u64 = conn.zcard(format!("{n}:inflight")).unwrap();
            assert_eq!((start, queued, leased), (0, 0, 0), "{n} has work left");
        }
    }

    /// Empties Redis of the crawl, for another run on the same spiders.
    fn forget_the_crawl(&self) {
        let _: () = redis::cmd("FLUSHALL")
            .query(&mut self.redis.conn())
            .unwrap();
    }
}

/// Waits for `worker` to exit, which it must do with success; its log.
fn exits_ok(worker: Worker, what: &str) -> String {
    let (status, log) = worker.wait(Duration::from_secs(90));
    assert!(status.success(), "{what} failed: {status}\n{log}");
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_running_the_pair_from_one_directory_gives_every_item() {
    let p = Pipeline::pair(Duration::from_millis(10)).await;
    let log = exits_ok(p.worker(p.dir.path()), "the worker");
    assert_exact(&p.items(&["bbs-detail"]), &expected(&p.server.base_url()));
    p.assert_nothing_left(&["bbs-list", "bbs-detail"]);
    assert!(
        log.contains("spider `bbs-detail` stopped (the crawl is drained)"),
        "{log}"
    );
    let _ = p.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detail_worker_started_alone_waits_for_the_list_scan_and_says_so() {
    let p = Pipeline::pair(Duration::from_millis(10)).await;
    let detail = p.worker(&p.spider("bbs-detail"));
    eventually(
        "the detail worker says what it waits for",
        Duration::from_secs(30),
        || {
            detail
                .log()
                .contains("waiting for the spiders that hand this one work")
                .then_some(())
        },
    );
    let log = detail.log();
    assert!(
        log.contains("`bbs-list` (3 start entries, no live worker)"),
        "{log}"
    );
    // `stats` shows the spider upstream, still producing.
    let json = stats_json(&p.redis.url(), p.spider("bbs-detail").to_str().unwrap());
    let upstream = &json["queues"]["upstreams"][0];
    assert_eq!(upstream["spider"], "bbs-list", "{json:#}");
    assert_eq!(upstream["producing"], true, "{json:#}");
    assert_eq!(upstream["start"], 3, "{json:#}");
    let out = crawlworker_with_redis(
        &p.redis.url(),
        &["stats", p.spider("bbs-detail").to_str().unwrap()],
    );
    assert!(
        stdout(&out).contains("upstreams (spiders that hand work to this one)\n  bbs-list       producing  3 start entries, no live worker"),
        "{}",
        stdout(&out)
    );

    let list = p.worker(&p.spider("bbs-list"));
    exits_ok(list, "the list worker");
    exits_ok(detail, "the detail worker");
    assert_exact(&p.items(&["bbs-detail"]), &expected(&p.server.base_url()));
    p.assert_nothing_left(&["bbs-list", "bbs-detail"]);
    let json = stats_json(&p.redis.url(), p.spider("bbs-detail").to_str().unwrap());
    assert_eq!(
        json["queues"]["upstreams"][0]["producing"], false,
        "{json:#}"
    );
    let _ = p.server.stop().await;
}

/// The list scan is slow (a page every 300 ms): the detail worker, started
/// once it has handed work over, runs out of work many times before the
/// scan ends, and waits each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_worker_started_first_and_a_detail_worker_after_give_every_item() {
    let p = Pipeline::pair(Duration::from_millis(10)).await;
    let slow = [
        ("CRAWLWORKER_DOWNLOAD_DELAY", "300ms"),
        ("CRAWLWORKER_RANDOMIZE_DOWNLOAD_DELAY", "false"),
    ];
    let list = p.worker_with(&p.spider("bbs-list"), &slow);
    // The detail worker starts once the list scan has handed work over.
    let mut conn = p.redis.conn();
    eventually(
        "the list spider hands threads over",
        Duration::from_secs(30),
        || (conn.llen::<_, u64>("bbs-detail:start_urls").ok()? > 0).then_some(()),
    );
    let detail = p.worker(&p.spider("bbs-detail"));
    exits_ok(list, "the list worker");
    exits_ok(detail, "the detail worker");
    assert_exact(&p.items(&["bbs-detail"]), &expected(&p.server.base_url()));
    p.assert_nothing_left(&["bbs-list", "bbs-detail"]);
    let _ = p.server.stop().await;
}

/// A list worker killed with SIGKILL in the middle of its scan leaves its
/// leases in flight: the detail worker waits for them, another list worker
/// takes them over once they expire, and the crawl ends with every item,
/// each thread handed over once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_worker_killed_mid_scan_and_replaced_changes_nothing() {
    let p = Pipeline::pair(Duration::from_millis(150)).await;
    let detail = p.worker(&p.spider("bbs-detail"));
    let first = p.worker(&p.spider("bbs-list"));
    let mut conn = p.redis.conn();
    eventually(
        "the list scan is under way",
        Duration::from_secs(30),
        || {
            let handed: Option<u64> = conn.hget("bbs-list:stats", "scheduler/handed_off").ok()?;
            let leased: u64 = conn.zcard("bbs-list:inflight").ok()?;
            (handed.unwrap_or(0) > 0 && leased > 0).then_some(())
        },
    );
    first.kill();
    let second = p.worker(&p.spider("bbs-list"));
    exits_ok(second, "the second list worker");
    exits_ok(detail, "the detail worker");
    let got = p.items(&["bbs-detail"]);
    assert_exact(&got, &expected(&p.server.base_url()));
    p.assert_nothing_left(&["bbs-list", "bbs-detail"]);
    let posts = got
        .iter()
        .filter(|i| i.contains(r#""kind":"post""#))
        .count();
    let handed: u64 = conn.hget("bbs-list:stats", "scheduler/handed_off").unwrap();
    assert_eq!(handed as usize, posts, "each thread handed over once");
    let _ = p.server.stop().await;
}

/// On a Redis Cluster the pair shares a hash tag, so one status script
/// reads both spiders' queues in one step on their node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pair_on_a_redis_cluster_gives_every_item() {
    let cluster = RedisCluster::start();
    let server = FixtureServer::start_with_latency(Site::demo(), Duration::from_millis(10))
        .await
        .unwrap();
    let dir = temp_dir("split-drain-cluster");
    for name in ["bbs-list", "bbs-detail"] {
        let path = spider_for(name, &server.base_url(), dir.path());
        let text = std::fs::read_to_string(&path).unwrap();
        let text = format!("{text}\n[keys]\nmode = \"cluster\"\nhash_tag = \"bbs\"\n");
        std::fs::write(&path, text).unwrap();
    }
    push_urls(
        &cluster.url(),
        &dir.path().join("bbs-list.toml"),
        &demo_tasks(),
    );
    let env: Vec<(&str, &str)> = FAST.to_vec();
    let worker = Worker::spawn(dir.path(), &cluster.url(), &["--until-drained"], &env);
    let (status, log) = worker.wait(Duration::from_secs(90));
    assert!(status.success(), "{log}");
    let key = "{bbs}bbs-detail:items";
    let got = scraped_from(&mut cluster.conn_for(key), key);
    assert_exact(&got, &expected(&server.base_url()));
    let _ = server.stop().await;
}

/// The sections of the shipped detail spider, to build others from: the
/// file's head (name, settings, `[start]`), its two item types and its two
/// rules.
struct DetailParts {
    head: String,
    post_item: String,
    comment_item: String,
    post_rule: String,
    comment_rule: String,
}

impl DetailParts {
    fn read(p: &Pipeline) -> DetailParts {
        let text = std::fs::read_to_string(root().join("spiders/bbs-detail.toml"))
            .unwrap()
            .replace("http://127.0.0.1:8700", &p.server.base_url());
        let cut = |from: &str, to: &str| -> String {
            let start = text.find(from).unwrap_or_else(|| panic!("no `{from}`"));
            let end = text[start + from.len()..]
                .find(to)
                .map_or(text.len(), |e| start + from.len() + e);
            text[start..end].to_string()
        };
        DetailParts {
            head: text[..text.find("[items.post]").unwrap()].to_string(),
            post_item: cut("[items.post]", "[items.comment]"),
            comment_item: cut("[items.comment]", "[[rules]]"),
            post_rule: cut("[[rules]]\nname = \"post\"", "[[rules]]"),
            comment_rule: text[text.find("[[rules]]\nname = \"comment\"").unwrap()..].to_string(),
        }
    }
}

/// Replaces `from` in `text`, which must hold it.
fn replaced(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "no `{from}` in:\n{text}");
    text.replacen(from, to, 1)
}

/// A three-stage chain: `bbs-list` hands threads to `bbs-detail`, which
/// keeps the posts and hands each comment thread on to `bbs-comments`.
fn write_chain(p: &Pipeline) {
    spider_for("bbs-list", &p.server.base_url(), p.dir.path());
    let d = DetailParts::read(p);
    let post_rule = replaced(
        &d.post_rule,
        "rule = \"comment\"\n  priority = 20",
        "to_spider = \"bbs-comments\"",
    );
    let detail = format!("{}{}{post_rule}", d.head, d.post_item);
    std::fs::write(p.spider("bbs-detail"), detail).unwrap();
    let head = replaced(&d.head, "name = \"bbs-detail\"", "name = \"bbs-comments\"");
    let head = replaced(&head, "rule = \"post\"", "rule = \"comment\"");
    let comments = format!("{head}{}{}", d.comment_item, d.comment_rule);
    std::fs::write(p.spider("bbs-comments"), comments).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_stage_chain_finishes_as_one_crawl() {
    let p = Pipeline::empty(Duration::from_millis(10)).await;
    write_chain(&p);
    let stages = ["bbs-list", "bbs-detail", "bbs-comments"];
    let expected = expected(&p.server.base_url());

    // One worker for the three, from their directory.
    p.push_tasks();
    exits_ok(p.worker(p.dir.path()), "the worker");
    assert_exact(&p.items(&stages), &expected);
    p.assert_nothing_left(&stages);

    // One worker per stage, the last stage first: it knows of the first
    // stage before the middle one ever ran.
    p.forget_the_crawl();
    p.push_tasks();
    let comments = p.worker(&p.spider("bbs-comments"));
    eventually(
        "the last stage waits for the first, through the middle one",
        Duration::from_secs(30),
        || {
            let log = comments.log();
            log.contains("`bbs-list` (3 start entries, no live worker, through `bbs-detail`)")
                .then_some(())
        },
    );
    let detail = p.worker(&p.spider("bbs-detail"));
    let list = p.worker(&p.spider("bbs-list"));
    for (w, what) in [(list, "list"), (detail, "detail"), (comments, "comments")] {
        exits_ok(w, what);
    }
    assert_exact(&p.items(&stages), &expected);
    p.assert_nothing_left(&stages);
    let _ = p.server.stop().await;
}

/// A cycle: `bbs-detail` hands each post's forum link back to `bbs-list`,
/// which scans that forum again (its dupefilter hands no thread twice).
/// Each spider is the other's upstream; both are drained when both read
/// empty at once, which is when the last hand-off either way is crawled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_of_two_spiders_finishes_when_both_are_drained_at_once() {
    let p = Pipeline::empty(Duration::from_millis(10)).await;
    let list = spider_for("bbs-list", &p.server.base_url(), p.dir.path());
    let text = std::fs::read_to_string(&list).unwrap();
    let text = replaced(
        &text,
        "to_spider = \"bbs-detail\"\n  meta = [\"forum_id\"]",
        "to_spider = \"bbs-detail\"\n  meta = [\"forum_id\", \"max_page\"]",
    );
    std::fs::write(&list, text).unwrap();
    let d = DetailParts::read(&p);
    let head = replaced(
        &d.head,
        "task_fields = [\"forum_id\"]",
        "task_fields = [\"forum_id\", \"max_page\"]",
    );
    let back = "\n  [[rules.follow]]\n  css = \"a.forum-link::attr(href)\"\n  to_spider = \"bbs-list\"\n  meta = [\"forum_id\", \"max_page\"]\n\n";
    let post_rule = format!("{}{back}", d.post_rule.trim_end());
    let detail = format!(
        "{head}{}{}{post_rule}{}",
        d.post_item, d.comment_item, d.comment_rule
    );
    std::fs::write(p.spider("bbs-detail"), detail).unwrap();
    let out = crawlworker_testkit::crawlworker(&["check", p.dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    p.push_tasks();

    let detail = p.worker(&p.spider("bbs-detail"));
    let list = p.worker(&p.spider("bbs-list"));
    exits_ok(list, "the list worker");
    exits_ok(detail, "the detail worker");
    assert_exact(&p.items(&["bbs-detail"]), &expected(&p.server.base_url()));
    p.assert_nothing_left(&["bbs-list", "bbs-detail"]);
    // Each of the three forums was handed back once, and scanned again.
    let mut conn = p.redis.conn();
    let back: u64 = conn
        .hget("bbs-detail:stats", "scheduler/handed_off")
        .unwrap();
    assert_eq!(back, 3);
    assert_eq!(p.server.hits("/list/00001/1"), 2);
    let _ = p.server.stop().await;
}

/// A worker running two spiders: `early` is drained and stops while
/// `late` is paused; an entry pushed to `early` afterwards is crawled
/// before the worker exits, since a spider that stopped early is looked
/// at again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_running_several_spiders_exits_only_when_all_read_drained() {
    let p = Pipeline::empty(Duration::ZERO).await;
    let settings = "allow_private_networks = true\nrobotstxt_obey = false";
    let early = fault_spider(p.dir.path(), "early", settings, "");
    let late = fault_spider(p.dir.path(), "late", settings, "");
    let url = |n: u32| format!("{}/fault/delay/1?n={n}", p.server.base_url());
    let redis = p.redis.url();
    let pause = crawlworker_with_redis(&redis, &["pause", late.to_str().unwrap()]);
    assert!(pause.status.success(), "{}", stderr(&pause));
    push_urls(&redis, &late, &[url(0)]);
    push_urls(&redis, &early, &[url(1)]);

    let worker = p.worker(p.dir.path());
    eventually("`early` stops drained", Duration::from_secs(30), || {
        worker
            .log()
            .contains("spider `early` stopped (the crawl is drained)")
            .then_some(())
    });
    push_urls(&redis, &early, &[url(2)]);
    let resume = crawlworker_with_redis(&redis, &["resume", late.to_str().unwrap()]);
    assert!(resume.status.success(), "{}", stderr(&resume));
    let log = exits_ok(worker, "the worker");
    assert!(log.contains("the spider has work again"), "{log}");
    let mut conn = p.redis.conn();
    assert_eq!(conn.llen::<_, u64>("early:items").unwrap(), 2, "{log}");
    assert_eq!(conn.llen::<_, u64>("late:items").unwrap(), 1, "{log}");
    let _ = p.server.stop().await;
}

/// The dashboard shows a spider's upstreams, read as `stats` reads them,
/// in a table of its page (rendered by a real browser).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_the_spiders_upstream() {
    let p = Pipeline::pair(Duration::ZERO).await;
    let dashboard = Dashboard::spawn(&p.spider("bbs-detail"), &p.redis.url());
    let listen = &dashboard.listen;
    eventually_async(
        "the dashboard shows bbs-list",
        Duration::from_secs(30),
        || async {
            let state = dashboard.state().await?;
            let upstream = &state["spiders"][0]["queues"]["upstreams"][0];
            (upstream["spider"] == "bbs-list" && upstream["producing"] == true).then_some(())
        },
    )
    .await;
    let profile = temp_dir("chromium");
    let dom = chromium(profile.path())
        .args(["--dump-dom", &format!("http://{listen}/")])
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run chromium ({e}): .ci/run installs it (apt-get install chromium)")
        });
    let dom = String::from_utf8_lossy(&dom.stdout);
    let table = dom
        .split("<table id=\"upstreams-bbs-detail\">")
        .nth(1)
        .unwrap_or_else(|| panic!("no table of upstreams:\n{dom}"));
    assert!(
        table.contains("<td>bbs-list</td><td>producing</td><td class=\"num\">3</td>"),
        "{table}"
    );
    let _ = p.server.stop().await;
}

/// A relation nobody said again for an hour (the upstream's file no
/// longer hands work on, its workers are long gone) holds nobody back:
/// `status` ignores it and the sweep deletes it; a fresh one counts.
#[tokio::test]
async fn a_relation_nobody_renews_is_forgotten() {
    let p = Pipeline::pair(Duration::ZERO).await;
    let detail = Spider::load(&p.spider("bbs-detail")).unwrap();
    let client = redis::Client::open(p.redis.url()).unwrap();
    let f = RedisFrontier::connect(&client.into(), detail.frontier_options("test"))
        .await
        .unwrap();
    assert_eq!(f.status().await.unwrap().producing().count(), 1);
    assert!(!f.status().await.unwrap().drained(), "bbs-list has tasks");

    let list = Spider::load(&p.spider("bbs-list")).unwrap();
    let stale = UpstreamRecord {
        keys: UpstreamKeys::of(&list.keys, list.start.kind),
        seen: now_secs() - 2.0 * 3600.0,
    };
    let mut conn = p.redis.conn();
    let _: () = conn
        .hset(
            "bbs-detail:upstreams",
            "bbs-list",
            serde_json::to_string(&stale).unwrap(),
        )
        .unwrap();
    let status = f.status().await.unwrap();
    assert!(status.upstreams.is_empty(), "{status:?}");
    assert!(status.drained());
    let swept = Backend::sweep(&f, 256, Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(swept.upstreams, 1);
    assert!(!conn
        .hexists::<_, _, bool>("bbs-detail:upstreams", "bbs-list")
        .unwrap());
    let _ = p.server.stop().await;
}
