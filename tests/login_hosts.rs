//! The credentials go only to the login page's host: a login form whose
//! `action` names another host, or a login answered with a 307 or 308 to
//! another host (which would send the form's body again there), is not
//! sent there; the login fails with an error naming both hosts, and the
//! account is neither rested nor retired. A recorder on a second loopback
//! address (127.0.0.2) keeps every byte it receives: nothing arrives. A
//! host listed in `[session] login_hosts` does receive the form.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crawlworker_demo::members::MembersConfig;
use crawlworker_demo::Site;
use crawlworker_testkit::{
    crawlworker_with_redis, push_urls, stderr, stdout, temp_dir, FixtureServer, RedisServer, Worker,
};

use crate::sessions::{env, spider};

const PASSWORD: &str = "demo-password";

/// An HTTP server on 127.0.0.2 that keeps every byte it receives and
/// answers each request with a page that looks logged in.
struct Recorder {
    port: u16,
    received: Arc<Mutex<Vec<u8>>>,
    connections: Arc<Mutex<usize>>,
}

impl Recorder {
    async fn start() -> Recorder {
        let listener = tokio::net::TcpListener::bind("127.0.0.2:0")
            .await
            .expect("bind 127.0.0.2 (a loopback address)");
        let port = listener.local_addr().unwrap().port();
        let received = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(Mutex::new(0));
        let (r, c) = (Arc::clone(&received), Arc::clone(&connections));
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                *c.lock().unwrap() += 1;
                let r = Arc::clone(&r);
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    // One request: read what comes within a moment.
                    while let Ok(Ok(n)) =
                        tokio::time::timeout(Duration::from_millis(300), stream.read(&mut buf))
                            .await
                    {
                        if n == 0 {
                            break;
                        }
                        r.lock().unwrap().extend_from_slice(&buf[..n]);
                    }
                    let body =
                        "<html><body><a class=\"logout\" href=\"/out\">Log out</a></body></html>";
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nSet-Cookie: member_session=stolen; Path=/\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        Recorder {
            port,
            received,
            connections,
        }
    }

    fn base(&self) -> String {
        format!("http://127.0.0.2:{}", self.port)
    }

    fn received(&self) -> String {
        String::from_utf8_lossy(&self.received.lock().unwrap()).into_owned()
    }

    fn connections(&self) -> usize {
        *self.connections.lock().unwrap()
    }
}

fn stats_json(redis: &RedisServer, spider: &std::path::Path) -> Value {
    let out = crawlworker_with_redis(&redis.url(), &["stats", spider.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// Crawls the members' area of `server` with one worker until drained
/// (its one request fails for good: exit code 3); its log and `stats
/// --json`.
fn crawl(server: &FixtureServer, name: &str) -> (String, Value) {
    let redis = RedisServer::start();
    let dir = temp_dir(name);
    let spider = spider(server, dir.path(), "");
    push_urls(&redis.url(), &spider, &[server.url("/members/")]);
    let worker = Worker::spawn(&spider, &redis.url(), &["--until-drained"], &env());
    let (status, log) = worker.wait(Duration::from_secs(120));
    assert_eq!(status.code(), Some(3), "{log}");
    (log, stats_json(&redis, &spider))
}

/// The login failed without blaming the account, and said why.
fn assert_refused_to_send(log: &str, stats: &Value, recorder: &Recorder) {
    let to = format!("would send the credentials to 127.0.0.2:{}", recorder.port);
    assert!(log.contains(&to), "{log}");
    assert!(
        log.contains("nothing was sent") && log.contains("login_hosts"),
        "{log}"
    );
    assert!(!log.contains(PASSWORD), "{log}");
    let count = |name: &str| {
        let v = &stats["stats"][name];
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .unwrap_or(0)
    };
    assert_eq!(count("session/account_retired_count"), 0, "{stats}");
    assert_eq!(count("session/account_rested_count"), 0, "{stats}");
    assert!(count("session/login_failed_count") >= 1, "{stats}");
    for account in stats["session"]["accounts"]
        .as_array()
        .into_iter()
        .flatten()
    {
        assert_eq!(account["state"], "active", "{stats}");
    }
    assert_eq!(recorder.connections(), 0, "{}", recorder.received());
    assert!(!recorder.received().contains(PASSWORD));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_form_whose_action_names_another_host_gets_no_credentials() {
    let recorder = Recorder::start().await;
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(MembersConfig {
        form_action: Some(format!("{}/members/login", recorder.base())),
        ..MembersConfig::default()
    });
    let (log, stats) = crawl(&server, "login-hosts-action");
    assert_refused_to_send(&log, &stats, &recorder);
    assert!(log.contains("the login form of http://127.0.0.1:"), "{log}");
    assert_eq!(server.members().logins(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_redirected_with_its_body_to_another_host_is_not_followed() {
    let recorder = Recorder::start().await;
    for status in [307, 308] {
        let server = FixtureServer::start(Site::demo()).await.unwrap();
        server.members().configure(MembersConfig {
            login_redirect: Some((status, format!("{}/members/login", recorder.base()))),
            ..MembersConfig::default()
        });
        let (log, stats) = crawl(&server, "login-hosts-redirect");
        assert_refused_to_send(&log, &stats, &recorder);
        assert!(
            log.contains(&format!(
                "the login's answer ({status} from http://127.0.0.1:"
            )),
            "{log}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_named_in_login_hosts_receives_the_login_form() {
    let recorder = Recorder::start().await;
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(MembersConfig {
        form_action: Some(format!("{}/members/login", recorder.base())),
        ..MembersConfig::default()
    });
    let dir = temp_dir("login-hosts-allowed");
    let allowed = format!("login_hosts = [\"127.0.0.2:{}\"]", recorder.port);
    let spider = spider(&server, dir.path(), &allowed);
    // `parse` logs in once itself; the form goes to the named host (whose
    // cookie is not the login host's: no session comes of it).
    let out = std::process::Command::new(crawlworker_testkit::binary())
        .args(["parse", spider.to_str().unwrap()])
        .arg(server.url("/members/thread/1"))
        .envs(env())
        .output()
        .unwrap();
    let got = recorder.received();
    assert!(
        got.starts_with("POST /members/login ") && got.contains(&format!("password={PASSWORD}")),
        "{got}\n{}",
        stderr(&out)
    );
}
