//! `push-urls`, `flush` and `stats` through the binary, against a real
//! Redis, including their errors.

use std::io::Write;
use std::process::{Command, Stdio};

use redis::Commands;
use serde_json::Value;

use crawlworker_testkit::{
    crawlworker, crawlworker_with_redis, root, stderr, stdout, temp_dir, KillOnDrop, RedisServer,
    TempDir,
};

/// A file holding `text`, in a directory removed with the returned guard.
fn temp_file(name: &str, text: &str) -> (std::path::PathBuf, TempDir) {
    let dir = temp_dir("tools");
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    (p, dir)
}

#[test]
fn push_urls_validates_each_entry_and_names_bad_lines() {
    let redis = RedisServer::start();
    let (file, _dir) = temp_file(
        "tasks.txt",
        "{\"forum_id\": \"00001\", \"max_page\": 5}\n# a comment\n\n{\"forum_id\": \"00002\"\nnot a url\n{\"max_page\": 1}\n{\"forum_id\": \"00003\", \"max_page\": 2}\n",
    );
    let out = crawlworker_with_redis(
        &redis.url(),
        &[
            "push-urls",
            "spiders/bbs.toml",
            "--file",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "invalid entries give exit code 2"
    );
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "{}:4: not pushed: the entry is not valid JSON",
            file.display()
        )),
        "{err}"
    );
    assert!(
        err.contains(":5: not pushed: `not a url` is not an absolute http(s) URL"),
        "{err}"
    );
    assert!(
        err.contains(":6: not pushed: the task lacks field `forum_id` used by start.url"),
        "{err}"
    );
    assert!(
        err.contains("pushed 2 entries to bbs:start_urls (list); 3 invalid entries not pushed"),
        "{err}"
    );
    let pushed: Vec<String> = redis.conn().lrange("bbs:start_urls", 0, -1).unwrap();
    assert_eq!(
        pushed,
        vec![
            r#"{"forum_id": "00001", "max_page": 5}"#,
            r#"{"forum_id": "00003", "max_page": 2}"#
        ]
    );
}

#[test]
fn push_urls_reads_stdin_and_respects_max_queue() {
    let redis = RedisServer::start();
    let mut child = KillOnDrop::spawn(
        Command::new(env!("CARGO_BIN_EXE_crawlworker"))
            .args(["push-urls", "spiders/news.toml", "--max-queue", "2"])
            .current_dir(root())
            .env("REDIS_URL", redis.url())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .unwrap();
    let urls = "http://127.0.0.1:8700/news/\nhttp://127.0.0.1:8700/news/?page=2\nhttp://127.0.0.1:8700/news/?page=3\n";
    child
        .stdin
        .take()
        .unwrap()
        .write_all(urls.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("pushed 2 entries to news:start_urls (set); 1 left over"),
        "{}",
        stderr(&out)
    );
    // The leftover is printed, so a producer can push it later.
    assert_eq!(stdout(&out), "http://127.0.0.1:8700/news/?page=3\n");
    assert_eq!(redis.conn().scard::<_, u64>("news:start_urls").unwrap(), 2);
}

#[test]
fn push_urls_reports_an_unreachable_redis() {
    let out = crawlworker_with_redis(
        "redis://:hunter2@127.0.0.1:9",
        &[
            "push-urls",
            "spiders/bbs.toml",
            r#"{"forum_id": "00001", "max_page": 1}"#,
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("cannot reach Redis at redis://:***@127.0.0.1:9"),
        "{err}"
    );
    assert!(
        err.contains("start redis-server there, or give the address with --redis or REDIS_URL"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "the password leaked: {err}");
}

#[test]
fn flush_deletes_what_is_asked_and_asks_first() {
    let redis = RedisServer::start();
    let mut conn = redis.conn();
    let _: () = conn.rpush("bbs:items", &["{}", "{}", "{}"]).unwrap();
    let _: () = conn.sadd("bbs:dupefilter", &["a", "b"]).unwrap();
    let url = "http://127.0.0.1:8700/post/1001";
    let fp = crawlworker::request::Request::get(url).fingerprint();
    let _: () = conn.sadd("bbs:dupefilter", &fp).unwrap();
    let _: () = conn.hset("bbs:stats", "item_scraped_count", 3).unwrap();

    // Not on a terminal and no --yes: refuse (a usage error), delete nothing.
    let out = crawlworker_with_redis(&redis.url(), &["flush", "spiders/bbs.toml", "--items"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("pass --yes to confirm"),
        "{}",
        stderr(&out)
    );
    assert_eq!(conn.llen::<_, u64>("bbs:items").unwrap(), 3);

    let out = crawlworker_with_redis(
        &redis.url(),
        &["flush", "spiders/bbs.toml", "--items", "--stats", "--yes"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "deleted bbs:items (3 entries)\ndeleted bbs:stats (1 entry)\n"
    );
    assert!(!conn.exists::<_, bool>("bbs:items").unwrap());
    assert_eq!(conn.scard::<_, u64>("bbs:dupefilter").unwrap(), 3);

    let out = crawlworker_with_redis(
        &redis.url(),
        &["flush", "spiders/bbs.toml", "--fingerprint", url],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains(&format!("removed fingerprint {fp}")),
        "{}",
        stdout(&out)
    );
    assert_eq!(conn.scard::<_, u64>("bbs:dupefilter").unwrap(), 2);
    let out = crawlworker_with_redis(
        &redis.url(),
        &["flush", "spiders/bbs.toml", "--fingerprint", url],
    );
    assert!(
        stdout(&out).contains("was not in bbs:dupefilter"),
        "{}",
        stdout(&out)
    );

    let out = crawlworker_with_redis(&redis.url(), &["flush", "spiders/bbs.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("say what to delete"),
        "{}",
        stderr(&out)
    );

    let out = crawlworker_with_redis(
        &redis.url(),
        &["flush", "spiders/bbs.toml", "--all", "--yes"],
    );
    assert!(out.status.success());
    assert!(
        stdout(&out).contains("deleted bbs:dupefilter (2 entries)"),
        "{}",
        stdout(&out)
    );
    assert!(!conn.exists::<_, bool>("bbs:dupefilter").unwrap());
    // Keys that do not exist are not "deleted".
    let out = crawlworker_with_redis(
        &redis.url(),
        &["flush", "spiders/bbs.toml", "--items", "--yes"],
    );
    assert_eq!(
        stdout(&out),
        "nothing to delete: none of those keys exists\n"
    );
}

#[test]
fn stats_shows_queues_workers_and_the_stats_hash() {
    let redis = RedisServer::start();
    let mut conn = redis.conn();
    let _: () = conn.rpush("bbs:start_urls", &["a", "b"]).unwrap();
    let _: () = conn.rpush("bbs:items", "{}").unwrap();
    let _: () = conn.hset("bbs:stats", "item_scraped_count", 1).unwrap();
    let now = crawlworker::frontier::now_secs();
    let live = format!(
        r#"{{"host": "h1", "pid": 7, "started": "2026-11-22T00:00:00Z", "pages": 12, "heartbeat": {now}}}"#
    );
    let gone = r#"{"host": "h2", "pid": 8, "started": "2026-11-21T00:00:00Z", "pages": 3, "heartbeat": 1000}"#;
    let _: () = conn.hset("bbs:workers", "h1:7:aa", &live).unwrap();
    let _: () = conn.hset("bbs:workers", "h2:8:bb", gone).unwrap();

    let out = crawlworker_with_redis(&redis.url(), &["stats", "spiders/bbs.toml", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["queues"]["start"], 2);
    assert_eq!(v["queues"]["items"], 1);
    assert_eq!(v["queues"]["queued"], 0);
    assert_eq!(v["stats"]["item_scraped_count"], 1);
    assert_eq!(v["keys"]["requests"], "bbs:requests");
    let workers = v["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 1, "only the live worker: {workers:?}");
    assert_eq!(
        (workers[0]["id"].as_str(), workers[0]["pages"].as_u64()),
        (Some("h1:7:aa"), Some(12))
    );

    let out = crawlworker_with_redis(&redis.url(), &["stats", "spiders/bbs.toml"]);
    let text = stdout(&out);
    assert!(
        text.contains("start entries           2  bbs:start_urls"),
        "{text}"
    );
    assert!(text.contains("workers (1 live)"), "{text}");
    assert!(text.contains("item_scraped_count"), "{text}");

    let out = crawlworker_with_redis(
        &redis.url(),
        &["stats", "tests/fixtures/spiders/broken/unknown_keys.toml"],
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn items_prints_json_lines_and_pop_hands_each_item_to_one_consumer() {
    let redis = RedisServer::start();
    let mut conn = redis.conn();
    let items: Vec<String> = (0..5).map(|i| format!(r#"{{"n": {i}}}"#)).collect();
    let _: () = conn.rpush("bbs:items", &items).unwrap();
    let out = crawlworker_with_redis(&redis.url(), &["items", "spiders/bbs.toml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), items.join("\n") + "\n");
    let out = crawlworker_with_redis(
        &redis.url(),
        &["items", "spiders/bbs.toml", "-n", "2", "--pop"],
    );
    assert_eq!(stdout(&out), format!("{}\n{}\n", items[0], items[1]));
    assert_eq!(
        conn.llen::<_, u64>("bbs:items").unwrap(),
        3,
        "popped items are gone"
    );
    let out = crawlworker_with_redis(&redis.url(), &["items", "spiders/bbs.toml", "--pop"]);
    assert_eq!(stdout(&out).lines().count(), 3);
    assert_eq!(conn.llen::<_, u64>("bbs:items").unwrap(), 0);
}

/// `crawlworker items … | head -1`: output to a closed pipe ends the
/// command quietly with exit code 0, and items popped but never written
/// go back.
#[test]
fn a_closed_pipe_ends_output_quietly() {
    use std::io::BufRead;
    let redis = RedisServer::start();
    let mut conn = redis.conn();
    let item = format!(r#"{{"text": "{}"}}"#, "x".repeat(200));
    let items = vec![item; 5000];
    let _: () = conn.rpush("bbs:items", &items).unwrap();
    let mut child = KillOnDrop::spawn(
        Command::new(crawlworker_testkit::process::binary())
            .args([
                "items",
                "spiders/bbs.toml",
                "--pop",
                "--redis",
                &redis.url(),
            ])
            .current_dir(root())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with(r#"{"text""#));
    // The reader goes away (its end of the pipe closes here).
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    let left: u64 = conn.llen("bbs:items").unwrap();
    assert!(
        left > 0 && left < 5000,
        "undelivered items are put back: {left} left"
    );
}

#[test]
fn the_command_line_refuses_what_it_would_silently_change() {
    let redis = RedisServer::start();
    let out = crawlworker_with_redis(
        &redis.url(),
        &["run", "spiders/bbs.toml", "--concurrency", "0"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--concurrency"), "{}", stderr(&out));
    let task = r#"{"forum_id": "00001", "max_page": 1}"#;
    let out = crawlworker_with_redis(
        &redis.url(),
        &["push-urls", "spiders/bbs.toml", "--priority", "5", task],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "--priority scores entries of a zset start key, but bbs:start_urls is a list"
        ),
        "{}",
        stderr(&out)
    );
    // One duration syntax everywhere: bare seconds are accepted …
    let out = crawlworker_with_redis(
        &redis.url(),
        &["run", "spiders/bbs.toml", "--idle-exit", "0.2"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // … and a bad one says how to write it, without parser internals.
    let out = crawlworker_with_redis(
        &redis.url(),
        &["run", "spiders/bbs.toml", "--idle-exit", "soon"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out)
            .contains("`soon` is not a duration: write seconds (1.5) or a number with a unit"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn help_describes_every_argument_and_completions_are_printed() {
    use clap::CommandFactory;
    let mut cli = crawlworker::cli::Cli::command();
    cli.build();
    for sub in cli.get_subcommands() {
        assert!(
            sub.get_about().is_some(),
            "`{}` has no help",
            sub.get_name()
        );
        for arg in sub.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            assert!(
                arg.get_help().is_some(),
                "`{} {id}` has no help text",
                sub.get_name()
            );
        }
    }
    let out = crawlworker(&["--version"]);
    let version = stdout(&out);
    assert!(
        version.starts_with("crawlworker 0.") && version.contains('('),
        "--version names the revision: {version}"
    );
    let out = crawlworker(&["completions", "bash"]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("push-urls"), "{}", stdout(&out));
    let out = crawlworker(&["check", "spiders"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("spiders/bbs.toml: ok")
            && stdout(&out).contains("spiders/news.toml: ok")
    );
    let out = crawlworker(&["settings", "--config", "config/crawlworker.toml"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "--config is only where it applies"
    );
}

/// A worker pointed at a Redis that does not answer says so at once, with
/// what to check, and keeps trying (quietly) until stopped.
#[test]
fn a_worker_says_when_redis_is_unreachable() {
    let worker = crawlworker_testkit::Worker::spawn(
        std::path::Path::new("spiders/bbs.toml"),
        "redis://127.0.0.1:9",
        &[],
        &[],
    );
    let log = crawlworker_testkit::eventually(
        "the worker reports the unreachable Redis",
        std::time::Duration::from_secs(20),
        || {
            let log = worker.log();
            log.contains("cannot reach Redis").then_some(log)
        },
    );
    assert!(
        log.contains("cannot reach Redis at redis://127.0.0.1:9")
            && log.contains("Is redis-server running there?"),
        "{log}"
    );
    worker.terminate();
    let (status, _) = worker.wait(std::time::Duration::from_secs(10));
    assert!(
        status.success(),
        "a stop while waiting for Redis is graceful"
    );
}

/// `crawlworker settings SPIDER` prints every value a worker would run the
/// spider with and where it came from: the spider's `[settings]` beat the
/// configuration file, the environment beats both, a flag beats all, and
/// each line says what it overrode. A worker logs the values not at their
/// default when it starts.
#[test]
fn settings_of_a_spider_say_where_each_value_came_from() {
    let (config, dir) = temp_file(
        "crawlworker.toml",
        "[settings]\ndownload_delay = 5\nretry_times = 4\n",
    );
    let spider = crawlworker_testkit::spider_for("bbs", "http://127.0.0.1:9", dir.path());
    let settings = |env: &[(&str, &str)], more: &[&str]| {
        let mut cmd = Command::new(crawlworker_testkit::binary());
        cmd.current_dir(root())
            .env_remove("CRAWLWORKER_DOWNLOAD_DELAY")
            .env_remove("CRAWLWORKER_CONFIG")
            .arg("settings")
            .arg(&spider)
            .arg("--config")
            .arg(&config)
            .args(more);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    };
    let line = |text: &str, name: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let spider_file = spider.display().to_string();
    let config_file = config.display().to_string();

    let text = settings(&[], &[]);
    assert_eq!(
        line(&text, "download_delay"),
        format!("download_delay 0 spider {spider_file} (over config file {config_file}: 5s)")
    );
    assert_eq!(
        line(&text, "retry_times"),
        format!("retry_times 4 config file {config_file}")
    );
    assert_eq!(line(&text, "retry_enabled"), "retry_enabled true default");

    let text = settings(
        &[("CRAWLWORKER_DOWNLOAD_DELAY", "0.2")],
        &["--concurrency", "4"],
    );
    assert_eq!(
        line(&text, "download_delay"),
        format!(
            "download_delay 200ms environment CRAWLWORKER_DOWNLOAD_DELAY (over config file {config_file}: 5s, spider {spider_file}: 0)"
        )
    );
    assert_eq!(
        line(&text, "concurrent_requests"),
        format!("concurrent_requests 4 flag --concurrency (over spider {spider_file}: 16)")
    );

    let json = settings(&[], &["--json"]);
    let delay: Value = json
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| v["setting"] == "download_delay")
        .unwrap();
    assert_eq!(delay["from"], format!("spider {spider_file}"));
    assert_eq!(delay["over"][0]["value"], "5s");

    // The worker's start line: what is not at its default, and from where
    // (a crawl of a closed port, with nothing to wait for: it ends at once).
    let out = Command::new(crawlworker_testkit::binary())
        .current_dir(root())
        .env("CRAWLWORKER_LOG", "info")
        .env_remove("CRAWLWORKER_DOWNLOAD_DELAY")
        .env("CRAWLWORKER_RETRY_ENABLED", "false")
        .env("CRAWLWORKER_ROBOTSTXT_OBEY", "false")
        .args(["run", "--local", "--config"])
        .arg(&config)
        .arg(&spider)
        .args(["--start", "{\"forum_id\": \"00001\", \"max_page\": 1}"])
        .output()
        .unwrap();
    let log = stderr(&out);
    assert!(
        log.contains(&format!(
            "settings not at their default: retry_enabled = false (environment CRAWLWORKER_RETRY_ENABLED), retry_times = 4 (config file {config_file}), allow_private_networks = true (spider {spider_file})"
        )),
        "{log}"
    );
}
