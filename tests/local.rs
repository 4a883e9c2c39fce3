//! `crawlworker run --local`: a whole crawl in one process,
//! without Redis, finds what a cluster finds. The demo forum is crawled by
//! three workers sharing a real Redis, then locally; both must give the
//! expected items, fetch the same requests once each, and fill the
//! dupefilter with the same fingerprints.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use redis::Commands;

use crawlworker::request::Request;
use crawlworker_demo::{demo_tasks, Site};
use crawlworker_testkit::{
    assert_paced, binary, spider_for, stderr, stdout, temp_dir, DemoCrawl, FixtureServer,
    KillOnDrop, Worker,
};

use crate::expect::{assert_exact, canonical, expected, scraped};

/// The items of a JSON Lines text, canonical and sorted.
fn lines_as_items(text: &str) -> Vec<String> {
    let mut items: Vec<String> = text
        .lines()
        .map(|l| {
            canonical(
                &serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")),
            )
        })
        .collect();
    items.sort();
    items
}

/// Requests the server answered, by path, leaving robots.txt out.
fn pages(hits: &std::collections::HashMap<String, u64>) -> BTreeMap<String, u64> {
    hits.iter()
        .filter(|(path, _)| !path.starts_with("/robots.txt"))
        .map(|(p, n)| (p.clone(), *n))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_crawl_finds_what_a_three_worker_cluster_finds() {
    let crawl = DemoCrawl::start(Duration::from_millis(2)).await;
    let base = crawl.server.base_url();

    // The cluster: three workers on one Redis, until the crawl is drained.
    // One on a single thread as told (`--threads 1`), one on two told so
    // by the environment, one as by default (one thread).
    let url = crawl.redis.url();
    let workers = vec![
        Worker::spawn(
            &crawl.spider,
            &url,
            &["--until-drained", "--threads", "1"],
            &[],
        ),
        Worker::spawn(
            &crawl.spider,
            &url,
            &["--until-drained"],
            &[("CRAWLWORKER_THREADS", "2")],
        ),
        Worker::spawn(&crawl.spider, &url, &["--until-drained"], &[]),
    ];
    for w in workers {
        let (status, log) = w.wait(Duration::from_secs(120));
        assert!(status.success(), "cluster worker: {log}");
    }
    let cluster_items = scraped(&crawl.redis);
    assert_exact(&cluster_items, &expected(&base));
    let cluster_pages = pages(&crawl.server.hit_counts());
    let cluster_fps: BTreeSet<String> = crawl.redis.conn().smembers("bbs:dupefilter").unwrap();

    // The same crawl, locally: the tasks from standard input, the items to
    // a file.
    let out_path = crawl.dir.path().join("items.jsonl");
    let mut child = KillOnDrop::spawn(
        Command::new(binary())
            .args([
                "run",
                crawl.spider_arg(),
                "--local",
                "--start-file",
                "-",
                "-o",
            ])
            .arg(&out_path)
            // No Redis anywhere: a local crawl must not need one.
            .env("CRAWLWORKER_REDIS_URL", "redis://127.0.0.1:1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .expect("cannot run crawlworker");
    {
        let mut stdin = child.stdin.take().expect("stdin");
        for task in demo_tasks() {
            writeln!(stdin, "{task}").unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "local crawl: {}", stderr(&out));
    assert!(
        stdout(&out).is_empty(),
        "items go to the file, not stdout: {}",
        stdout(&out)
    );
    let local_items = lines_as_items(&std::fs::read_to_string(&out_path).unwrap());
    assert_exact(&local_items, &expected(&base));
    assert_eq!(local_items, cluster_items);

    // Every page fetched once by each crawl, and no other.
    let both = pages(&crawl.server.hit_counts());
    assert_eq!(
        both.keys().collect::<Vec<_>>(),
        cluster_pages.keys().collect::<Vec<_>>(),
        "the local crawl fetched pages the cluster did not"
    );
    for (path, n) in &both {
        assert_eq!(*n, 2 * cluster_pages[path], "{path}");
    }
    // The dupefilter holds the fingerprints of the pages both fetched
    // (the start tasks' first pages are fetched with dont_filter).
    let fetched_fps: BTreeSet<String> = cluster_pages
        .keys()
        .map(|p| Request::get(&format!("{base}{p}")).fingerprint())
        .collect();
    assert!(
        cluster_fps.is_subset(&fetched_fps),
        "fingerprints of pages nobody fetched"
    );
    let text = stderr(&out);
    let enqueued = |text: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix("scheduler/enqueued/memory: "))
            .map(str::to_string)
    };
    let cluster: BTreeMap<String, String> = crawl.redis.conn().hgetall("bbs:stats").unwrap();
    assert_eq!(
        enqueued(&text),
        cluster.get("scheduler/enqueued/redis").cloned(),
        "{text}"
    );
    // A local crawl has no Redis: no stat, no message says it has.
    assert!(
        !text.contains("/redis:") && !text.contains("failed key"),
        "{text}"
    );
    crawl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_crawl_writes_items_to_standard_output_and_needs_start_entries() {
    let crawl = DemoCrawl::start(Duration::ZERO).await;
    let task = demo_tasks().into_iter().next().unwrap();
    let out = Command::new(binary())
        .args(["run", crawl.spider_arg(), "--local", "--start", &task])
        .env("CRAWLWORKER_REDIS_URL", "redis://127.0.0.1:1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let items = lines_as_items(&stdout(&out));
    assert!(!items.is_empty(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the crawl is drained"),
        "{}",
        stderr(&out)
    );

    let none = Command::new(binary())
        .args(["run", crawl.spider_arg(), "--local"])
        .output()
        .unwrap();
    assert!(!none.status.success());
    assert!(
        stderr(&none).contains("nothing to crawl: give start entries with --start"),
        "{}",
        stderr(&none)
    );
    let two = Command::new(binary())
        .args(["run", crawl.spider_arg(), crawl.spider_arg(), "--local"])
        .output()
        .unwrap();
    assert!(!two.status.success());
    assert!(
        stderr(&two).contains("--local crawls one spider"),
        "{}",
        stderr(&two)
    );
    crawl.stop().await;
}

/// A file that cannot grow (here `ulimit -f`, as a full disk) stops the
/// crawl with a message, not a SIGXFSZ death, and the file ends with a
/// whole line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_crawl_that_cannot_write_its_items_says_so_and_leaves_whole_lines() {
    let crawl = DemoCrawl::start(Duration::ZERO).await;
    let dir = temp_dir("local-full");
    let items = dir.path().join("items.jsonl");
    let task = demo_tasks().into_iter().next().unwrap();
    // 8 blocks of 512 or 1024 bytes: a few items, then the limit.
    let script = r#"ulimit -f 8 && exec "$0" run "$1" --local --start "$2" -o "$3""#;
    let out = Command::new("bash")
        .args(["-c", script])
        .arg(binary())
        .args([crawl.spider_arg(), &task, items.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", stderr(&out));
    assert!(
        out.status.code().is_some(),
        "killed by a signal: {:?}",
        out.status
    );
    let err = stderr(&out);
    assert!(err.contains("cannot write items to"), "{err}");
    let text = std::fs::read_to_string(&items).unwrap();
    assert!(
        !text.is_empty() && text.ends_with('\n'),
        "a cut line: {text:?}"
    );
    for line in text.lines() {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
    crawl.stop().await;
}

/// A scheduler can tell a crawl that fetched nothing usable: a local crawl
/// whose requests all failed for good exits with code 3 and says how many;
/// one where some did exits 0, or 3 with --fail-on-failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_crawl_whose_requests_failed_exits_with_code_3() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("local");
    let spider = spider_for("bbs", &server.base_url(), dir.path());
    let spider = spider.to_str().unwrap();
    // Forums the demo site does not have: their list pages are 404s.
    let gone = [
        r#"{"forum_id": "99998", "max_page": 1}"#,
        r#"{"forum_id": "99999", "max_page": 1}"#,
    ];
    let good = r#"{"forum_id": "00001", "max_page": 1}"#;
    let local = |starts: &[&str], more: &[&str]| {
        let mut cmd = Command::new(binary());
        cmd.args(["run", spider, "--local", "-o", "-"]).args(more);
        for s in starts {
            cmd.args(["--start", s]);
        }
        cmd.output().unwrap()
    };

    let out = local(&gone, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("spider `bbs`: every request failed for good (2 requests); exit code 3"),
        "{}",
        stderr(&out)
    );

    let some = local(&[gone[0], good], &[]);
    assert!(some.status.success(), "{}", stderr(&some));
    assert!(!stdout(&some).is_empty(), "no items: {}", stderr(&some));
    let strict = local(&[gone[0], good], &["--fail-on-failure"]);
    assert_eq!(strict.status.code(), Some(3), "{}", stderr(&strict));
    assert!(
        stderr(&strict).contains("spider `bbs`: 1 request failed for good (--fail-on-failure)"),
        "{}",
        stderr(&strict)
    );
    let _ = server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_crawl_retries_in_its_own_queue_and_keeps_each_hosts_pace() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("local");
    let spider = dir.path().join("faults.toml");
    std::fs::write(
        &spider,
        r#"
name = "faults"
allowed_domains = ["127.0.0.1"]

[settings]
allow_private_networks = true
robotstxt_obey = false
retry_backoff_base = 0.05
download_delay = "300ms"
randomize_download_delay = false

[items.page]
url = { page = "url" }
status = { page = "status" }

[[rules]]
name = "page"
match = '/fault/'

  [[rules.extract]]
  item = "page"
"#,
    )
    .unwrap();
    let flaky = "/fault/status/503?times=1&key=local";
    let paths = [flaky, "/fault/status/200?key=b", "/fault/status/200?key=c"];
    let mut args = vec![
        "run".to_string(),
        spider.display().to_string(),
        "--local".to_string(),
    ];
    for p in paths {
        args.extend(["--start".to_string(), server.url(p)]);
    }
    let out = Command::new(binary()).args(&args).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let items = lines_as_items(&stdout(&out));
    assert_eq!(items.len(), 3, "{items:?}\n{}", stderr(&out));
    assert!(
        items.iter().all(|i| i.contains(r#""status":200"#)),
        "{items:?}"
    );
    assert_eq!(server.hits(flaky), 2, "one 503, then the retry");
    let arrivals = server.arrivals("/fault/");
    assert_eq!(arrivals.len(), 4);
    assert_paced(
        &arrivals,
        Duration::from_millis(300),
        "one host's 300 ms download_delay",
    );
    assert!(stderr(&out).contains("retry/count: 1"), "{}", stderr(&out));
    server.stop().await.unwrap();
}

/// A worker's page count counts pages, as the stats do: a request the
/// network refused and retried twice is three attempts and no page. The
/// crawl's start and finish times carry milliseconds, so that
/// `elapsed_time_seconds` is the crawl's length, not up to a second more.
#[test]
fn a_refused_request_is_no_page_and_times_carry_milliseconds() {
    let dir = temp_dir("local");
    let spider = dir.path().join("refused.toml");
    std::fs::write(
        &spider,
        r#"
name = "refused"
allowed_domains = ["127.0.0.1"]

[settings]
allow_private_networks = true
robotstxt_obey = false
retry_backoff_base = 0.01

[items.page]
url = { page = "url" }

[[rules]]
name = "page"
match = '.'

  [[rules.extract]]
  item = "page"
"#,
    )
    .unwrap();
    // A port nothing listens on: every attempt is refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/gone");
    let started = std::time::Instant::now();
    let out = Command::new(binary())
        .args(["run", spider.to_str().unwrap(), "--local", "-o", "-"])
        .args(["--start", &url])
        .output()
        .unwrap();
    let took = started.elapsed().as_secs_f64();
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(
        text.contains("after") && text.contains(": 0 pages, 0 items, 2 retries, 1 failed"),
        "{text}"
    );
    let stat = |name: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{name}: ")))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no {name}:\n{text}"))
    };
    for time in ["start_time", "finish_time"] {
        let t = stat(time);
        assert!(
            t.len() == "2026-01-01T00:00:00.000Z".len() && t.contains('.'),
            "{time} {t}"
        );
    }
    let elapsed: f64 = stat("elapsed_time_seconds").parse().unwrap();
    assert!(
        elapsed <= took,
        "elapsed {elapsed} s, the command took {took} s"
    );
}
