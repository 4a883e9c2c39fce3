//! Logged-in crawls (`[session]`) of the demo site's members-only area,
//! whose CSRF-protected login starts sessions that expire: three workers
//! crawl it item-exact with one login per session expiry for the whole
//! cluster (counted by the server); a worker killed while it holds the
//! login lock loses nothing and locks nobody out; a refused account is
//! retired and the next one logs in; no password or session cookie shows
//! in any log line, `stats`, metrics, dead letters or failures.

use std::path::{Path, PathBuf};
use std::time::Duration;

use redis::Commands;
use serde_json::Value;

use crawlworker_demo::members::{expected_items, MembersConfig};
use crawlworker_demo::Site;
use crawlworker_testkit::redis::free_port;
use crawlworker_testkit::{
    crawlworker, crawlworker_with_redis, eventually, eventually_async, push_urls, spider_for,
    stderr, stdout, temp_dir, FixtureServer, RedisServer, Worker,
};

use crate::expect::{assert_exact, canonical, scraped_from};

const PASSWORD: &str = "demo-password";

pub(crate) fn env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("FORUM_USER", "member"),
        ("FORUM_PASS", PASSWORD),
        ("CRAWLWORKER_IDLE_RECHECK", "100ms"),
    ]
}

/// Sessions that outlast a crawl of the area.
fn long_sessions() -> MembersConfig {
    MembersConfig {
        requests_per_session: 1000,
        ..MembersConfig::default()
    }
}

fn want(base: &str) -> Vec<String> {
    let mut items: Vec<String> = expected_items(base).iter().map(canonical).collect();
    items.sort();
    items
}

/// The members spider pointed at `server`, with `extra` appended to its
/// `[session]` table.
pub(crate) fn spider(server: &FixtureServer, dir: &Path, extra: &str) -> PathBuf {
    let path = spider_for("members", &server.base_url(), dir);
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace(
        "logged_out = { url = \"/members/login\" }",
        &format!("logged_out = {{ url = \"/members/login\" }}\n{extra}"),
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Gives the spider at `path` these accounts: (name, the environment
/// variable of its password), each with the user `FORUM_USER`.
pub(crate) fn with_accounts(path: &Path, accounts: &[(&str, &str)]) {
    let tables: String = accounts
        .iter()
        .map(|(name, pass)| format!("\n[[session.accounts]]\nname = \"{name}\"\nfields = {{ username = {{ env = \"FORUM_USER\" }}, password = {{ env = \"{pass}\" }} }}\n"))
        .collect();
    // The accounts go after the whole [session] table.
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.replace("[items.thread]", &format!("{tables}\n[items.thread]"));
    std::fs::write(path, text).unwrap();
}

fn start(redis: &RedisServer, spider: &Path, server: &FixtureServer) {
    push_urls(&redis.url(), spider, &[server.url("/members/")]);
}

fn wait_all(workers: Vec<Worker>) -> String {
    let mut logs = String::new();
    for w in workers {
        let (status, log) = w.wait(Duration::from_secs(120));
        assert!(status.success(), "worker failed: {log}");
        logs.push_str(&log);
    }
    logs
}

fn items(redis: &RedisServer) -> Vec<String> {
    scraped_from(&mut redis.conn(), "members:items")
}

fn stats_json(redis: &RedisServer, spider: &Path) -> Value {
    let out = crawlworker_with_redis(&redis.url(), &["stats", spider.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

fn stat(stats: &Value, name: &str) -> u64 {
    stats["stats"][name]
        .as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| stats["stats"][name].as_u64())
        .unwrap_or(0)
}

/// Everything a person or a program reads about the crawl: the workers'
/// logs, `stats` (text and JSON), the dead letters and failures, and the
/// metrics text scraped during the crawl.
fn assert_no_secret(secrets: &[String], seen: &[(&str, &str)]) {
    for (what, text) in seen {
        for secret in secrets {
            assert!(
                !text.contains(secret.as_str()),
                "a secret shows in {what}: {}",
                &text[text.find(secret.as_str()).unwrap().saturating_sub(200)..]
                    .chars()
                    .take(400)
                    .collect::<String>()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_share_one_login_per_session_expiry_and_nothing_secret_shows() {
    let server = FixtureServer::start_with_latency(Site::demo(), Duration::from_millis(20))
        .await
        .unwrap();
    server.members().configure(MembersConfig {
        requests_per_session: 12,
        ..MembersConfig::default()
    });
    let redis = RedisServer::start();
    let dir = temp_dir("sessions");
    let spider = spider(&server, dir.path(), "");
    start(&redis, &spider, &server);
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    let env = env();
    let traced = [("CRAWLWORKER_LOG", "trace")];
    let with = |more: &[(&'static str, &'static str)]| -> Vec<(&str, &str)> {
        env.iter().chain(more).copied().collect()
    };
    let workers = vec![
        Worker::spawn(
            &spider,
            &redis.url(),
            &["--until-drained", "-vv"],
            &with(&[]),
        ),
        Worker::spawn(
            &spider,
            &redis.url(),
            &["--until-drained", "--log-format", "json"],
            &with(&traced),
        ),
        Worker::spawn(
            &spider,
            &redis.url(),
            &["--idle-exit", "3s", "--metrics-addr", &metrics_addr],
            &with(&traced),
        ),
    ];
    let metrics = eventually_async("metrics of the crawl", Duration::from_secs(60), || async {
        let text = reqwest::get(format!("http://{metrics_addr}/metrics"))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.contains("spider=\"members\"").then_some(text)
    })
    .await;
    let logs = wait_all(workers);
    let base = server.base_url();
    assert_exact(&items(&redis), &want(&base));

    // One login per session that expired, for the whole cluster, plus the
    // session alive at the end.
    let members = server.members();
    let (logins, expired) = (members.logins(), members.expired_seen());
    assert!(expired >= 2, "the sessions did not expire: {expired}");
    assert_eq!(
        logins,
        expired + 1,
        "{logins} logins for {expired} expiries"
    );
    assert_eq!(members.refused(), 0);
    let stats = stats_json(&redis, &spider);
    assert_eq!(stat(&stats, "session/login_count"), logins, "{stats}");
    assert!(
        stat(&stats, "session/logged_out_count") >= expired,
        "{stats}"
    );
    // A page that showed the session logged out was fetched again, and
    // counted once.
    assert_eq!(stat(&stats, "item_scraped_count"), 40, "{stats}");

    // `stats` shows the session: its age, uses and logins.
    let text = crawlworker_with_redis(&redis.url(), &["stats", spider.to_str().unwrap()]);
    let text = stdout(&text);
    assert!(
        text.contains("session:") && text.contains("logins"),
        "{text}"
    );
    assert!(
        stats["session"]["logins"].as_u64() == Some(logins),
        "{stats}"
    );

    let mut conn = redis.conn();
    let dead: Vec<String> = conn.lrange("members:dead", 0, -1).unwrap();
    let failed: Vec<String> = conn.lrange("members:failed", 0, -1).unwrap();
    let mut secrets = vec![PASSWORD.to_string()];
    secrets.extend(members.issued_sessions());
    assert!(secrets.len() > 2);
    assert_no_secret(
        &secrets,
        &[
            ("the workers' logs", &logs),
            ("stats", &text),
            ("stats --json", &stats.to_string()),
            ("the dead letters", &dead.join("\n")),
            ("the failures", &failed.join("\n")),
            ("the metrics", &metrics),
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_holding_the_login_lock_loses_nothing_and_locks_nobody_out() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(MembersConfig {
        login_delay: Duration::from_secs(30),
        ..MembersConfig::default()
    });
    let redis = RedisServer::start();
    let dir = temp_dir("sessions-kill");
    let spider = spider(&server, dir.path(), "login_timeout = \"2s\"");
    start(&redis, &spider, &server);
    let mut env = env();
    env.push(("CRAWLWORKER_LEASE_TIMEOUT", "2s"));
    let first = Worker::spawn(&spider, &redis.url(), &["--until-drained"], &env);
    // The login's POST reached the server, which holds its answer: the
    // worker holds the login lock now.
    eventually("the first login under way", Duration::from_secs(30), || {
        (server.hits("/members/login") >= 2).then_some(())
    });
    let lock: Option<String> = redis.conn().get("members:session:lock").unwrap();
    assert!(lock.is_some(), "no worker holds the login lock");
    first.kill();
    server.members().configure(long_sessions());
    let others: Vec<Worker> = (0..2)
        .map(|_| Worker::spawn(&spider, &redis.url(), &["--until-drained"], &env))
        .collect();
    wait_all(others);
    assert_exact(&items(&redis), &want(&server.base_url()));
    // The killed login never answered; one more made the crawl's session.
    assert_eq!(server.members().logins(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_account_rests_and_is_counted_and_the_next_one_logs_in() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(long_sessions());
    let redis = RedisServer::start();
    let dir = temp_dir("sessions-accounts");
    let path = spider(&server, dir.path(), "");
    with_accounts(&path, &[("old", "OLD_PASS"), ("new", "FORUM_PASS")]);
    start(&redis, &path, &server);
    let mut env = env();
    env.push(("OLD_PASS", "expired-password"));
    let worker = Worker::spawn(&path, &redis.url(), &["--until-drained"], &env);
    let log = wait_all(vec![worker]);
    assert_exact(&items(&redis), &want(&server.base_url()));
    assert_eq!(
        (server.members().refused(), server.members().logins()),
        (1, 1)
    );
    let stats = stats_json(&redis, &path);
    assert_eq!(stat(&stats, "session/account_rested_count"), 1, "{stats}");
    assert_eq!(stat(&stats, "session/account_retired_count"), 0, "{stats}");
    assert_eq!(stat(&stats, "session/login_failed_count"), 1, "{stats}");
    assert_eq!(stats["session"]["accounts"][0]["name"], "old", "{stats}");
    assert_eq!(
        stats["session"]["accounts"][0]["state"], "resting",
        "{stats}"
    );
    assert_eq!(
        stats["session"]["accounts"][1]["state"], "active",
        "{stats}"
    );
    // Why it rests: what the site answered, never the password.
    let why = stats["session"]["accounts"][0]["reason"]
        .as_str()
        .unwrap_or("");
    assert!(why.contains("status 403"), "{stats}");
    assert!(
        stats["session"]["accounts"][1].get("reason").is_none(),
        "{stats}"
    );
    assert!(log.contains("account `old` rests 15m"), "{log}");
    assert!(
        !log.contains("expired-password") && !log.contains(PASSWORD),
        "{log}"
    );
}

#[test]
fn check_refuses_a_password_written_in_the_spider_file() {
    let dir = temp_dir("sessions-check");
    let path = dir.path().join("members.toml");
    let text = std::fs::read_to_string("spiders/members.toml")
        .unwrap()
        .replace(
            "password = { env = \"FORUM_PASS\" }",
            "password = \"hunter2\"",
        );
    std::fs::write(&path, text).unwrap();
    let out = crawlworker(&["check", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        err.contains("members.toml:") && err.contains("`password` is a credential"),
        "{err}"
    );
    assert!(err.contains("env") && err.contains("file"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_crawl_logs_in_and_again_once_per_session_expiry() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(MembersConfig {
        requests_per_session: 9,
        ..MembersConfig::default()
    });
    let dir = temp_dir("sessions-local");
    let spider = spider(&server, dir.path(), "");
    let output = dir.path().join("items.jsonl");
    let out = std::process::Command::new(crawlworker_testkit::binary())
        .args(["run", spider.to_str().unwrap(), "--local", "--start"])
        .arg(server.url("/members/"))
        .arg("-o")
        .arg(&output)
        .envs(env())
        .env("CRAWLWORKER_LOG", "trace")
        .output()
        .unwrap();
    let log = stderr(&out);
    assert!(out.status.success(), "{log}");
    let mut got: Vec<String> = std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .map(|l| canonical(&serde_json::from_str(l).unwrap()))
        .collect();
    got.sort();
    assert_exact(&got, &want(&server.base_url()));
    let members = server.members();
    assert!(members.expired_seen() >= 3, "{}", members.expired_seen());
    assert_eq!(members.logins(), members.expired_seen() + 1);
    let mut secrets = vec![PASSWORD.to_string()];
    secrets.extend(members.issued_sessions());
    assert_no_secret(&secrets, &[("the local crawl's log", &log)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logins_beyond_the_hourly_limit_make_the_crawl_wait_not_hammer_the_form() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(MembersConfig {
        requests_per_session: 5,
        ..MembersConfig::default()
    });
    let redis = RedisServer::start();
    let dir = temp_dir("sessions-hourly");
    let spider = spider(&server, dir.path(), "max_logins_per_hour = 2");
    start(&redis, &spider, &server);
    let worker = Worker::spawn(&spider, &redis.url(), &["--idle-exit", "2s"], &env());
    let log = wait_all(vec![worker]);
    // Two sessions of five requests, then the requests wait for the hour.
    assert_eq!(server.members().logins(), 2, "{log}");
    assert_eq!(
        server.hits("/members/login"),
        4,
        "{:?}",
        server.hit_counts()
    );
    let stats = stats_json(&redis, &spider);
    assert!(stat(&stats, "session/login_deferred_count") >= 1, "{stats}");
    assert_eq!(stat(&stats, "failed/count"), 0, "{stats}");
    let waiting: u64 = redis.conn().zcard("members:delayed").unwrap();
    assert!(waiting >= 1, "no request waits: {stats}");
    assert!(
        log.contains("every account has had its logins for this hour"),
        "{log}"
    );
}

/// What a user may ask of the log: every target at trace, the crates
/// that handle cookies and connections named on purpose.
const EVERY_TARGET_AT_TRACE: &str = "trace,cookie_store=trace,cookie_store::cookie_store=trace,reqwest=trace,reqwest::connect::verbose=trace,hyper=trace,hyper_util=trace,html5ever=trace,selectors=trace";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_logged_in_crawl_logged_at_trace_for_every_target_prints_no_secret() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(MembersConfig {
        requests_per_session: 15,
        ..MembersConfig::default()
    });
    let dir = temp_dir("sessions-trace");
    let spider = spider(&server, dir.path(), "");
    let mut logs = Vec::new();
    for format in ["text", "json"] {
        let out = std::process::Command::new(crawlworker_testkit::binary())
            .args([
                "run",
                spider.to_str().unwrap(),
                "--local",
                "--log-format",
                format,
            ])
            .arg("--start")
            .arg(server.url("/members/"))
            .arg("-o")
            .arg(dir.path().join(format!("items-{format}.jsonl")))
            .envs(env())
            .env("CRAWLWORKER_LOG", EVERY_TARGET_AT_TRACE)
            .output()
            .unwrap();
        let log = stderr(&out);
        assert!(out.status.success(), "{log}");
        // The filter took: the libraries' own trace lines are there.
        assert!(log.contains("hyper_util::client"), "{log}");
        logs.push(log);
    }
    let members = server.members();
    assert!(members.logins() >= 4, "{}", members.logins());
    let mut secrets = vec![PASSWORD.to_string()];
    secrets.extend(members.issued_sessions());
    secrets.extend(members.issued_tokens());
    assert_no_secret(
        &secrets,
        &[("the text log", &logs[0]), ("the JSON log", &logs[1])],
    );
}

/// Filters that turn on a library's debug output beside crawlworker's:
/// the cookie jar's, and the HTTP client's at trace.
const LIBRARY_FILTERS: &[&str] = &[
    "info,cookie_store=debug",
    "debug,reqwest=trace",
    "info,cookie_store::cookie_store=trace,reqwest::connect::verbose=trace",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_cookie_or_password_shows_whatever_libraries_the_log_filter_names() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(MembersConfig {
        requests_per_session: 15,
        ..MembersConfig::default()
    });
    let dir = temp_dir("sessions-library-filters");
    let spider = spider(&server, dir.path(), "");
    for filter in LIBRARY_FILTERS {
        let out = std::process::Command::new(crawlworker_testkit::binary())
            .args(["run", spider.to_str().unwrap(), "--local", "--start"])
            .arg(server.url("/members/"))
            .arg("-o")
            .arg(dir.path().join("items.jsonl"))
            .envs(env())
            .env("CRAWLWORKER_LOG", filter)
            .output()
            .unwrap();
        let log = stderr(&out);
        assert!(out.status.success(), "{filter}: {log}");
        let members = server.members();
        let mut secrets = vec![PASSWORD.to_string()];
        secrets.extend(members.issued_sessions());
        secrets.extend(members.issued_tokens());
        assert_no_secret(&secrets, &[(filter, &log)]);
    }
    assert!(server.members().logins() >= 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_ids_in_urls_are_masked_in_a_trace_log_and_sent_as_they_are() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(long_sessions());
    let dir = temp_dir("sessions-url-ids");
    let spider = spider(&server, dir.path(), "");
    // phpBB's `sid`, PHP's session, and a name of the spider's session
    // cookies (`csrf`, learnt at its login).
    let targets = [
        "/members/thread/1?sid=0f1e2d3c4b5a69788796a5b4c3d2e1f0",
        "/members/thread/2?PHPSESSID=phpsess7d1c2b3a&view=print",
        "/members/thread/3?page=1&csrf=tokenvalue5e4d3c2b",
    ];
    let secrets = [
        "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
        "phpsess7d1c2b3a",
        "tokenvalue5e4d3c2b",
    ];
    let mut cmd = std::process::Command::new(crawlworker_testkit::binary());
    cmd.args(["run", spider.to_str().unwrap(), "--local"]);
    for t in &targets {
        cmd.arg("--start").arg(server.url(t));
    }
    let out = cmd
        .arg("-o")
        .arg(dir.path().join("items.jsonl"))
        .envs(env())
        .env("CRAWLWORKER_LOG", EVERY_TARGET_AT_TRACE)
        .output()
        .unwrap();
    let log = stderr(&out);
    assert!(out.status.success(), "{log}");
    // The pages were logged, their session ids masked ...
    for shown in [
        "?sid=[secret]",
        "?PHPSESSID=[secret]&view=print",
        "&csrf=[secret]",
    ] {
        assert!(log.contains(shown), "{shown} is not in the log:\n{log}");
    }
    let secrets: Vec<String> = secrets.iter().map(|s| s.to_string()).collect();
    assert_no_secret(&secrets, &[("the trace log", &log)]);
    // ... and requested as they are.
    for t in &targets {
        assert_eq!(server.hits(t), 1, "{t}: {:?}", server.hit_counts());
    }
}

/// `crawlworker parse` of a members-only page, with `args` after the URL.
fn parse_members(spider: &Path, url: &str, args: &[&str]) -> (Value, String) {
    let out = std::process::Command::new(crawlworker_testkit::binary())
        .args(["parse", spider.to_str().unwrap(), url])
        .args(args)
        .envs(env())
        .output()
        .unwrap();
    let log = stderr(&out);
    assert!(out.status.success(), "{log}");
    (serde_json::from_str(&stdout(&out)).unwrap(), log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parse_uses_the_clusters_live_session_or_logs_in_once_itself() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(long_sessions());
    let redis = RedisServer::start();
    let dir = temp_dir("sessions-parse");
    let spider = spider(&server, dir.path(), "");
    start(&redis, &spider, &server);
    wait_all(vec![Worker::spawn(
        &spider,
        &redis.url(),
        &["--until-drained"],
        &env(),
    )]);
    let members = server.members();
    assert_eq!(members.logins(), 1);
    let page = server.url("/members/thread/3");
    let title = |v: &Value| v["items"][0]["fields"]["title"].clone();

    // The cluster's live session: items, and no login at all.
    let form_hits = server.hits("/members/login");
    let (v, log) = parse_members(&spider, &page, &["--redis", &redis.url()]);
    assert_eq!(title(&v), "Members thread 3", "{v}");
    assert_eq!(v["session"]["source"], "cluster", "{v}");
    assert_eq!(v["session"]["generation"], 1, "{v}");
    assert_eq!(
        (members.logins(), server.hits("/members/login")),
        (1, form_hits)
    );
    assert!(
        log.contains("fetched with the cluster's live session"),
        "{log}"
    );

    // Without Redis: one login of its own, said so.
    let (v, log) = parse_members(&spider, &page, &[]);
    assert_eq!(title(&v), "Members thread 3", "{v}");
    assert_eq!(v["session"]["source"], "login", "{v}");
    assert_eq!(v["session"]["why"], "no --redis given", "{v}");
    assert_eq!(v["session"]["counted"], false, "{v}");
    assert_eq!(members.logins(), 2);
    assert!(
        log.contains("logged in once as account `account-1`"),
        "{log}"
    );

    // A Redis with no session yet: one login, counted in the cluster's
    // account history, the session left as it was (none).
    let empty = RedisServer::start();
    let (v, _) = parse_members(&spider, &page, &["--redis", &empty.url()]);
    assert_eq!(v["session"]["counted"], true, "{v}");
    assert_eq!(v["session"]["source"], "login", "{v}");
    assert!(
        v["session"]["why"]
            .as_str()
            .unwrap()
            .contains("has logged in no session yet"),
        "{v}"
    );
    assert_eq!(members.logins(), 3);
    let keys: Vec<String> = empty.conn().keys("*").unwrap();
    assert_eq!(keys, ["members:session"], "parse wrote to Redis: {keys:?}");
    let fields: Vec<String> = empty.conn().hkeys("members:session").unwrap();
    assert_eq!(fields, ["accounts"], "parse wrote more than its login");
    let mut secrets = vec![PASSWORD.to_string()];
    secrets.extend(members.issued_sessions());
    assert_no_secret(
        &secrets,
        &[("parse's output", &v.to_string()), ("parse's log", &log)],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parse_logging_in_itself_counts_against_the_clusters_hourly_logins() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(long_sessions());
    let redis = RedisServer::start();
    let dir = temp_dir("sessions-parse-budget");
    let spider = spider(&server, dir.path(), "max_logins_per_hour = 2");
    let page = server.url("/members/thread/3");
    // No session in the cluster yet: parse logs in itself, and the
    // cluster counts each login.
    for n in 1..=2 {
        let (v, log) = parse_members(&spider, &page, &["--redis", &redis.url()]);
        assert_eq!(v["session"]["source"], "login", "{v}");
        assert_eq!(v["session"]["counted"], true, "{v}");
        assert_eq!(server.members().logins(), n);
        assert!(
            log.contains("counts against the account's max_logins_per_hour"),
            "{log}"
        );
    }
    // The account has had its two logins of the hour: parse does not log
    // in a third time, and says why.
    let form_hits = server.hits("/members/login");
    let out = std::process::Command::new(crawlworker_testkit::binary())
        .args([
            "parse",
            spider.to_str().unwrap(),
            &page,
            "--redis",
            &redis.url(),
        ])
        .envs(env())
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("max_logins_per_hour") && err.contains("parse did not log in"),
        "{err}"
    );
    assert_eq!(server.hits("/members/login"), form_hits);
    // Nor does the crawl: its requests wait for the hour to pass.
    start(&redis, &spider, &server);
    let worker = Worker::spawn(&spider, &redis.url(), &["--idle-exit", "2s"], &env());
    let log = wait_all(vec![worker]);
    assert_eq!(server.members().logins(), 2, "{log}");
    assert_eq!(server.hits("/members/login"), form_hits, "{log}");
    let stats = stats_json(&redis, &spider);
    assert!(stat(&stats, "session/login_deferred_count") >= 1, "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_login_rests_for_the_sites_retry_after_then_logs_in_again() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(MembersConfig {
        refuse_next: 1,
        retry_after: Some(3),
        ..long_sessions()
    });
    let redis = RedisServer::start();
    let dir = temp_dir("sessions-rested");
    // The site's Retry-After, not the hour of login_cooldown, sets the rest.
    let spider = spider(&server, dir.path(), "login_cooldown = \"1h\"");
    start(&redis, &spider, &server);
    let worker = Worker::spawn(&spider, &redis.url(), &["--until-drained"], &env());
    // While it rests, `stats` says so.
    let resting = eventually_async("the account resting", Duration::from_secs(30), || async {
        let stats = stats_json(&redis, &spider);
        (stats["session"]["accounts"][0]["state"] == "resting").then_some(stats)
    })
    .await;
    let left = resting["session"]["accounts"][0]["rests_for_seconds"]
        .as_f64()
        .unwrap();
    assert!(left > 0.0 && left <= 3.0, "{resting}");
    let why = resting["session"]["accounts"][0]["reason"]
        .as_str()
        .unwrap_or("");
    assert!(
        why.contains("status 429") && why.contains("Retry-After"),
        "{resting}"
    );
    let log = wait_all(vec![worker]);
    assert_exact(&items(&redis), &want(&server.base_url()));
    let members = server.members();
    assert_eq!((members.refused(), members.logins()), (1, 1), "{log}");
    let stats = stats_json(&redis, &spider);
    assert_eq!(stat(&stats, "session/account_rested_count"), 1, "{stats}");
    assert_eq!(stat(&stats, "session/account_retired_count"), 0, "{stats}");
    assert_eq!(
        stats["session"]["accounts"][0]["state"], "active",
        "{stats}"
    );
    assert!(log.contains("account `account-1` rests 3.0s"), "{log}");
    assert!(!log.contains(PASSWORD), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_crawl_whose_login_is_refused_exits_at_once_naming_the_account() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("sessions-local-refused");
    let spider = spider(&server, dir.path(), "");
    let started = std::time::Instant::now();
    let out = std::process::Command::new(crawlworker_testkit::binary())
        .args(["run", spider.to_str().unwrap(), "--local", "--start"])
        .arg(server.url("/members/"))
        .envs(env())
        .env("FORUM_PASS", "wrong-password")
        .output()
        .unwrap();
    let took = started.elapsed();
    let log = stderr(&out);
    assert!(!out.status.success(), "{log}");
    assert!(took < Duration::from_secs(10), "took {took:?}: {log}");
    assert!(
        log.contains("the login of account `account-1` was refused") && log.contains("status 403"),
        "{log}"
    );
    assert!(!log.contains("wrong-password"), "{log}");
    assert_eq!(server.members().refused(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_slower_than_login_timeout_is_kept_and_every_form_counts() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(MembersConfig {
        login_delay: Duration::from_secs(5),
        ..long_sessions()
    });
    let redis = RedisServer::start();
    let dir = temp_dir("sessions-slow-login");
    let spider = spider(&server, dir.path(), "login_timeout = \"1s\"");
    // Work for every worker at once: each needs the session.
    let urls: Vec<String> = (1..=40)
        .map(|n| server.url(&format!("/members/thread/{n}")))
        .collect();
    push_urls(&redis.url(), &spider, &urls);
    let workers: Vec<Worker> = (0..3)
        .map(|_| Worker::spawn(&spider, &redis.url(), &["--until-drained"], &env()))
        .collect();
    let log = wait_all(workers);
    assert_exact(&items(&redis), &want(&server.base_url()));
    // Every form sent is in the accounts' history, and within the hour's
    // budget (10): the first late login was kept, not done again forever.
    let logins = server.members().logins();
    assert!((1..=10).contains(&logins), "{logins} logins: {log}");
    let history: String = redis.conn().hget("members:session", "accounts").unwrap();
    let history: Value = serde_json::from_str(&history).unwrap();
    let counted = history["account-1"]["logins"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(counted as u64, logins, "{history}");
    assert!(log.contains("longer than login_timeout"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logins_spent_on_a_changed_login_form_say_what_failed() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(long_sessions());
    let redis = RedisServer::start();
    let dir = temp_dir("sessions-changed-form");
    // The site renamed its form: the spider's selector finds none.
    let path = spider(&server, dir.path(), "max_logins_per_hour = 1");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("form = \"form#login\"", "form = \"form#signin\"");
    std::fs::write(&path, text).unwrap();
    start(&redis, &path, &server);
    let worker = Worker::spawn(&path, &redis.url(), &["--idle-exit", "2s"], &env());
    let log = wait_all(vec![worker]);
    assert_eq!(server.members().logins(), 0);
    let spent = log
        .lines()
        .find(|l| l.contains("every account has had its logins for this hour"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        spent.contains("the last login could not be done")
            && spent.contains("has no form matching `form#signin`"),
        "{spent}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_account_retired_fails_the_sites_requests_and_each_worker_says_so() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(long_sessions());
    let redis = RedisServer::start();
    let dir = temp_dir("sessions-all-retired");
    let path = spider(&server, dir.path(), "login_cooldown = \"1s\"");
    let urls: Vec<String> = (1..=40)
        .map(|n| server.url(&format!("/members/thread/{n}")))
        .collect();
    push_urls(&redis.url(), &path, &urls);
    let mut env = env();
    env.push(("FORUM_PASS", "wrong-password"));
    let workers: Vec<Worker> = (0..2)
        .map(|_| Worker::spawn(&path, &redis.url(), &["--until-drained"], &env))
        .collect();
    for w in workers {
        // The crawl drains: every request failed for good (exit code 3).
        let (status, log) = w.wait(Duration::from_secs(60));
        assert_eq!(status.code(), Some(3), "{log}");
        assert!(
            log.contains("every account of [session] is retired"),
            "a worker is silent: {log}"
        );
        assert!(!log.contains("wrong-password"), "{log}");
    }
    // Refused once, rested, refused again: retired, no more tries.
    assert_eq!(server.members().refused(), 2);
    let failed: usize = redis.conn().llen("members:failed").unwrap();
    assert_eq!(failed, 40);
    let stats = stats_json(&redis, &path);
    assert_eq!(stat(&stats, "session/account_retired_count"), 1, "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_cache_never_replays_a_logged_out_page_to_a_logged_in_crawl() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(long_sessions());
    let dir = temp_dir("sessions-page-cache");
    let cache = dir.path().join("cache");
    let with_session = spider(&server, dir.path(), "");
    // The same spider before its [session] was written: the thread page
    // answers a redirect to the login page, which the cache keeps.
    let text = std::fs::read_to_string(&with_session).unwrap();
    let (head, rest) = text.split_once("[session]").unwrap();
    let (_, tail) = rest.split_once("[items.thread]").unwrap();
    let without = dir.path().join("without.toml");
    std::fs::write(&without, format!("{head}[items.thread]{tail}")).unwrap();
    let page = server.url("/members/thread/3");
    let run = |spider: &Path, out: &str| {
        let output = dir.path().join(out);
        let o = std::process::Command::new(crawlworker_testkit::binary())
            .args(["run", spider.to_str().unwrap(), "--local", "--start", &page])
            .arg("--http-cache")
            .arg(&cache)
            .arg("-o")
            .arg(&output)
            .envs(env())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        std::fs::read_to_string(&output).unwrap_or_default()
    };
    assert_eq!(run(&without, "without.jsonl"), "");
    let items = run(&with_session, "with.jsonl");
    assert!(items.contains("Members thread 3"), "{items}");
    assert_eq!(server.members().logins(), 1);
    // The logged-in page replaces the logged-out one: a third run replays
    // it, and logs in no more.
    let items = run(&with_session, "again.jsonl");
    assert!(items.contains("Members thread 3"), "{items}");
    assert_eq!(server.members().logins(), 1);
}
