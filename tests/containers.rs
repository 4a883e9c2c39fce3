//! The worker image (`Dockerfile`, built by `scripts/container-image`) run
//! with podman as users run it with Docker, every container on the host's
//! network and every address on loopback: the binary answers inside it as
//! a non-root user, with every library it needs and the CA certificates;
//! a worker container runs with a read-only root filesystem, is healthy
//! within its start period, unhealthy once Redis is gone, and serves its
//! metrics; and three worker containers of `deploy/docker-compose.yml`
//! (with `deploy/docker-compose.host.yml`, run by podman-compose) crawl
//! the demo forum exactly while one is killed and one stopped. The image
//! with Chromium renders the demo's JavaScript forum as its non-root user.
//!
//! podman, podman-compose and the image come from `scripts/test`; without
//! them these tests fail, saying what to run. (podman runs a health check
//! when asked, as here: without systemd it keeps no timer for the
//! interval, and says so on its standard error.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use redis::Commands;

use crawlworker_testkit::podman::{self, Container};
use crawlworker_testkit::redis::free_port;
use crawlworker_testkit::{
    eventually, eventually_async, root, spider_for, stderr, stdout, temp_dir, KillOnDrop,
    RedisServer,
};

use crate::alerts::query;
use crate::expect::{assert_exact, expected, scraped};

/// The image's user (Dockerfile: `useradd --uid 10001`).
const USER_ID: &str = "10001";
/// The HEALTHCHECK's `--start-period`.
const START_PERIOD: Duration = Duration::from_secs(20);
/// How long a condition may take before a test gives up on it.
const PATIENCE: Duration = Duration::from_secs(60);

/// `podman run --rm --network host OPTIONS… IMAGE ARGS…`, to its end.
fn run_once(options: &[&str], args: &[&str]) -> Output {
    // No health check: podman would try to start its timer, and log that
    // it cannot without systemd.
    let mut argv = vec!["run", "--rm", "--network", "host", "--no-healthcheck"];
    argv.extend(options);
    argv.push(podman::image());
    argv.extend(args);
    podman::run(&argv)
}

/// [`run_once`] of a command other than crawlworker.
fn shell(program: &str, args: &[&str]) -> Output {
    run_once(&["--entrypoint", program], args)
}

fn said(out: &Output) -> String {
    format!("{}{}", stdout(out), stderr(out))
}

#[test]
fn the_image_runs_crawlworker_as_its_non_root_user() {
    let version = run_once(&[], &["--version"]);
    assert!(version.status.success(), "{}", said(&version));
    let host = Command::new(podman::release_binary("crawlworker"))
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("cannot run target/release/crawlworker: {e}"));
    assert_eq!(stdout(&version), stdout(&host), "the image's --version");

    let check = run_once(&[], &["check", "spiders/bbs.toml"]);
    assert!(check.status.success(), "{}", said(&check));
    let id = shell("id", &["-u"]);
    assert_eq!(stdout(&id).trim(), USER_ID, "{}", said(&id));
    let name = shell("id", &["-un"]);
    assert_eq!(stdout(&name).trim(), "crawlworker", "{}", said(&name));

    // Nothing answers on this port: the health check says so, exit 1.
    let addr = format!("CRAWLWORKER_METRICS_ADDR=127.0.0.1:{}", free_port());
    let health = run_once(&["-e", &addr], &["health"]);
    assert_eq!(health.status.code(), Some(1), "{}", said(&health));
    assert!(
        said(&health).contains("no worker answers at"),
        "{}",
        said(&health)
    );
}

#[test]
fn the_image_holds_every_library_the_binary_needs_and_the_ca_certificates() {
    let ldd = shell("ldd", &["/usr/local/bin/crawlworker"]);
    assert!(ldd.status.success(), "{}", said(&ldd));
    assert!(!stdout(&ldd).contains("not found"), "{}", stdout(&ldd));
    let certificates = shell(
        "grep",
        &[
            "-c",
            "BEGIN CERTIFICATE",
            "/etc/ssl/certs/ca-certificates.crt",
        ],
    );
    let count: usize = stdout(&certificates).trim().parse().unwrap_or(0);
    assert!(count > 100, "CA certificates: {}", said(&certificates));
    // The bundle alone: not the openssl that made it.
    let packages = shell("dpkg-query", &["-W", "-f", "${Package}\\n"]);
    let packages = stdout(&packages);
    for absent in ["openssl", "libssl3", "ca-certificates"] {
        assert!(
            !packages.lines().any(|p| p == absent),
            "{absent} is in the image:\n{packages}"
        );
    }
}

/// A worker container on a read-only root filesystem (as Docker's
/// `--read-only`, without podman's tmpfs on /tmp) reaches `healthy` within
/// its start period and serves its metrics; once its Redis is gone the
/// health check fails, saying why, and after its retries podman calls it
/// `unhealthy`. (podman runs a health check when asked, here: without
/// systemd it has no timer for the interval.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_worker_container_is_healthy_in_its_start_period_and_unhealthy_without_redis() {
    let redis = RedisServer::start();
    let metrics = format!("127.0.0.1:{}", free_port());
    let started = Instant::now();
    let worker = Container::start(
        "health",
        &[
            "--read-only",
            "--read-only-tmpfs=false",
            "-e",
            &format!("CRAWLWORKER_REDIS_URL={}", redis.url()),
            "-e",
            &format!("CRAWLWORKER_METRICS_ADDR={metrics}"),
            // The cluster counts a worker gone after its lease time at
            // most: so does the health check (15 s by default).
            "-e",
            "CRAWLWORKER_LEASE_TIMEOUT=3s",
        ],
        &["run", "spiders/bbs.toml"],
    );
    eventually("the worker container is healthy", START_PERIOD, || {
        worker.check_health().then_some(())
    });
    let healthy_after = started.elapsed();
    assert_eq!(worker.health(), "healthy");
    eprintln!(
        "healthy {:.1} s after `podman run`",
        healthy_after.as_secs_f64()
    );

    let text = eventually_async("the container's metrics", PATIENCE, || async {
        reqwest::get(format!("http://{metrics}/metrics"))
            .await
            .ok()?
            .text()
            .await
            .ok()
    })
    .await;
    assert!(text.contains("crawlworker_build_info"), "{text}");

    drop(redis);
    eventually("podman calls the container unhealthy", PATIENCE, || {
        worker.check_health();
        (worker.health() == "unhealthy").then_some(())
    });
    let log = worker.inspect("{{json .State.Healthcheck.Log}}");
    assert!(log.contains("has not reached Redis for"), "{log}");
    assert_eq!(
        worker.inspect("{{.State.Running}}"),
        "true",
        "{}",
        worker.logs()
    );
    assert!(
        !worker.logs().contains("Read-only file system"),
        "{}",
        worker.logs()
    );
}

/// `podman-compose` with the compose file and its host-network override.
struct Compose {
    redis: String,
    spiders: PathBuf,
}

impl Compose {
    fn run(&self, args: &[&str]) -> Output {
        // podman-compose from PyPI (scripts/test installs it): Debian's
        // 1.0.3 puts a service with `network_mode: host` on a bridge
        // network too, which podman refuses. No pod: a worker is a
        // container as with Docker.
        Command::new("python3")
            .args(["-m", "podman_compose", "--in-pod", "false"])
            .current_dir(root())
            .env("CONTAINERS_CONF", root().join("deploy/podman/containers.conf"))
            .env("CRAWLWORKER_REDIS_URL", &self.redis)
            .env("CRAWLWORKER_SPIDERS", &self.spiders)
            .args(["-f", "deploy/docker-compose.yml", "-f", "deploy/docker-compose.host.yml"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run python3 -m podman_compose ({e}): scripts/test installs it (pip install podman-compose)")
            })
    }

    /// `run -d --no-deps --name NAME -e K=V… worker`: a worker container
    /// of the compose file's service.
    fn worker(&self, env: &[String]) -> Container {
        let name = Container::unique_name("replica");
        let mut args = vec!["run", "-d", "-T", "--no-deps", "--name", name.as_str()];
        for e in env {
            args.extend(["-e", e.as_str()]);
        }
        args.push("worker");
        let out = self.run(&args);
        let container = Container::named(&name);
        assert!(out.status.success(), "podman-compose run: {}", said(&out));
        container
    }
}

/// The demo forum, `target/release/crawlworker-demo serve`, on loopback.
fn demo_forum(latency: &str) -> (KillOnDrop, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let server = KillOnDrop::spawn(
        Command::new(podman::release_binary("crawlworker-demo"))
            .args(["serve", "--listen", &addr, "--latency", latency])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .unwrap_or_else(|e| panic!("cannot start crawlworker-demo: {e}"));
    eventually("the demo forum listens", PATIENCE, || {
        std::net::TcpStream::connect(&addr).ok()
    });
    (server, format!("http://{addr}"))
}

/// The spider copy in `dir`, which the image's user must be able to read.
fn readable_spider(base: &str, dir: &Path) -> PathBuf {
    readable_copy("bbs", base, dir)
}

/// The shipped spider `name` copied into `dir` for `base`, readable by
/// the image's user.
fn readable_copy(name: &str, base: &str, dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let spider = spider_for(name, base, dir);
    for (path, mode) in [(dir, 0o755), (spider.as_path(), 0o644)] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .unwrap_or_else(|e| panic!("cannot chmod {}: {e}", path.display()));
    }
    spider
}

/// Prometheus (the host's) scraping `targets` every second.
fn prometheus(dir: &Path, targets: &[String]) -> (KillOnDrop, String) {
    let web = format!("127.0.0.1:{}", free_port());
    let config = dir.join("prometheus.yml");
    let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: crawlworker\n    static_configs:\n      - targets: [{}]\n",
            root().join("deploy/prometheus/alerts.yml").display(),
            targets.join(", ")
        ),
    )
    .unwrap_or_else(|e| panic!("cannot write {}: {e}", config.display()));
    let server = KillOnDrop::spawn(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .unwrap_or_else(|e| panic!("cannot run prometheus ({e}): scripts/test installs it"));
    (server, web)
}

/// Whether the crawl is over: nothing to start, queued or leased.
fn drained(conn: &mut redis::Connection) -> bool {
    let start: u64 = conn.llen("bbs:start_urls").unwrap_or(1);
    let queued: u64 = conn.zcard("bbs:requests").unwrap_or(1);
    let leased: u64 = conn.zcard("bbs:inflight").unwrap_or(1);
    start + queued + leased == 0
}

fn items(conn: &mut redis::Connection) -> u64 {
    conn.llen("bbs:items").unwrap_or(0)
}

/// Three worker containers of the compose file (read-only, as it says)
/// crawl the demo forum (on the host, behind 300 ms of latency) from one
/// Redis; Prometheus scrapes all three. One is killed (`podman kill -s KILL`) and one stopped
/// (`podman stop`) mid-crawl: the items are exactly the expected ones,
/// none lost, none twice, and the stopped one exits on its own well
/// within `shutdown_grace`, holding no lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_compose_workers_crawl_exactly_while_one_is_killed_and_one_stopped() {
    let redis = RedisServer::start();
    let (_demo, base) = demo_forum("300ms");
    let dir = temp_dir("containers");
    let spiders = dir.path().join("spiders");
    readable_spider(&base, &spiders);
    let compose = Compose {
        redis: redis.url(),
        spiders,
    };
    let started = Instant::now();
    let ports: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let workers: Vec<Container> = ports
        .iter()
        .map(|addr| {
            compose.worker(&[
                format!("CRAWLWORKER_METRICS_ADDR={addr}"),
                "CRAWLWORKER_LEASE_TIMEOUT=5s".to_string(),
                "CRAWLWORKER_CONCURRENT_REQUESTS_PER_DOMAIN=4".to_string(),
            ])
        })
        .collect();
    // The compose file's `read_only: true`.
    assert_eq!(workers[2].inspect("{{.HostConfig.ReadonlyRootfs}}"), "true");
    let (_prometheus, web) = prometheus(dir.path(), &ports);
    eventually_async("Prometheus scrapes all three workers", PATIENCE, || async {
        let up = query(&web, "up{job=\"crawlworker\"} == 1").await?;
        (up.len() == 3).then_some(())
    })
    .await;
    let up_after = started.elapsed();

    // The demo tasks, pushed as the compose file's header says.
    let mut push = vec![
        "run",
        "--rm",
        "-T",
        "--no-deps",
        "worker",
        "push-urls",
        "spiders/bbs.toml",
    ];
    let tasks = crawlworker_demo::demo_tasks();
    push.extend(tasks.iter().map(String::as_str));
    let pushed = compose.run(&push);
    let mut conn = redis.conn();
    let crawl_started = Instant::now();
    assert!(
        items(&mut conn) > 0 || !drained(&mut conn),
        "push-urls: {}",
        said(&pushed)
    );

    eventually("a third of the items", PATIENCE, || {
        (items(&mut conn) >= 80).then_some(())
    });
    workers[0].kill();
    eventually("two thirds of the items", PATIENCE, || {
        (items(&mut conn) >= 160).then_some(())
    });
    let stopping = workers[1].stop(Duration::from_secs(45));
    let grace = Duration::from_secs(30);
    assert!(stopping < grace, "podman stop took {stopping:?}");
    assert_eq!(
        workers[1].inspect("{{.State.ExitCode}}"),
        "0",
        "{}",
        workers[1].logs()
    );
    let log = workers[1].logs();
    assert!(
        log.contains("spider `bbs` stopped (asked to stop)"),
        "{log}"
    );
    let owners: std::collections::HashMap<String, String> =
        conn.hgetall("bbs:inflight:owners").unwrap_or_default();
    let id = worker_id(&log);
    assert!(
        !owners.values().any(|owner| owner.contains(&id)),
        "the stopped worker {id} still holds leases: {owners:?}"
    );

    eventually("the crawl drains", PATIENCE, || {
        drained(&mut conn).then_some(())
    });
    let crawl_took = crawl_started.elapsed();
    assert_exact(&scraped(&redis), &expected(&base));
    eprintln!(
        "3 workers up and scraped {:.1} s after the first `run`; the crawl: {} items in {:.1} s, one worker killed, one stopped in {:.1} s",
        up_after.as_secs_f64(),
        items(&mut conn),
        crawl_took.as_secs_f64(),
        stopping.as_secs_f64()
    );
    drop(workers);
}

/// The worker id a worker's JSON log names (`"worker":"host:1:…"`).
fn worker_id(log: &str) -> String {
    log.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find_map(|v| {
            v.pointer("/span/worker")
                .or_else(|| v.pointer("/fields/worker"))
                .and_then(|w| w.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| panic!("no worker id in the log:\n{log}"))
}

/// The image with Chromium renders the demo's JavaScript forum as its
/// non-root user: a local crawl of one forum in the container gives the
/// HTML forum's items.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chromium_image_renders_the_javascript_forum() {
    let image = podman::chromium_image();
    let (_server, base) = demo_forum("0ms");
    let dir = temp_dir("containers");
    let spider = readable_copy("bbs-rendered", &base, dir.path());
    let mount = format!("{}:/spiders:ro", dir.path().display());
    let task = crawlworker_demo::ForumTask {
        forum_id: "00003".into(),
        max_page: 2,
    };
    let start = serde_json::json!({"forum_id": task.forum_id, "max_page": task.max_page});
    let name = spider.file_name().unwrap().to_string_lossy();
    let out = podman::run(&[
        "run",
        "--rm",
        "--network",
        "host",
        "--no-healthcheck",
        "-v",
        &mount,
        image,
        "run",
        &format!("/spiders/{name}"),
        "--local",
        "--start",
        &start.to_string(),
        "-o",
        "-",
    ]);
    assert!(out.status.success(), "{}", said(&out));
    let mut items: Vec<String> = stdout(&out)
        .lines()
        .map(|l| crate::expect::canonical(&serde_json::from_str(l).unwrap()))
        .map(|l| l.replace("/js/post/", "/post/"))
        .collect();
    items.sort();
    assert_exact(&items, &crate::expect::expected_for(&[task], &base));
    assert!(said(&out).contains("render/page_count"), "{}", said(&out));
}
