//! An idle worker does not poll Redis for work that comes due by the clock
//! (an idle worker costs about 2 Redis commands a second at most): the
//! lease tells it when the next retry, lease expiry or
//! politeness slot is due, and it sleeps until then or until a wake-up.
//! These workers look for unannounced work only every 30 s
//! (`idle_recheck`), so a fetch within a few seconds of the due time is
//! the due time's doing. What an idle worker costs is measured by
//! `cargo bench --bench pickup`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crawlworker_demo::Site;
use crawlworker_testkit::{
    eventually, push_urls, temp_dir, FixtureServer, RedisServer, TempDir, Worker,
};

use crate::heartbeats;

/// Far longer than any wait below: only a known due time explains a fetch
/// within [`SLACK`] of it.
const RECHECK: &str = "30s";
const SLACK: Duration = Duration::from_secs(8);

struct Env {
    redis: RedisServer,
    server: FixtureServer,
    spider: PathBuf,
    _dir: TempDir,
}

impl Env {
    async fn new(settings: &str) -> Env {
        let redis = RedisServer::start();
        let server = FixtureServer::start(Site::demo()).await.unwrap();
        let dir = temp_dir("idle");
        let spider = dir.path().join("idle.toml");
        let text = format!(
            r#"
name = "idle"
allowed_domains = ["127.0.0.1"]

[settings]
allow_private_networks = true
robotstxt_obey = false
{settings}

[items.page]
url = {{ page = "url" }}

[[rules]]
name = "page"
match = '/'

  [[rules.extract]]
  item = "page"
"#
        );
        std::fs::write(&spider, text).unwrap();
        Env {
            redis,
            server,
            spider,
            _dir: dir,
        }
    }

    fn push(&self, paths: &[&str]) {
        let urls: Vec<String> = paths.iter().map(|p| self.server.url(p)).collect();
        push_urls(&self.redis.url(), &self.spider, &urls);
    }

    fn worker(&self, lease: &str) -> Worker {
        Worker::spawn(
            &self.spider,
            &self.redis.url(),
            &[],
            &[
                ("CRAWLWORKER_IDLE_RECHECK", RECHECK),
                ("CRAWLWORKER_LEASE_TIMEOUT", lease),
                ("CRAWLWORKER_LOG", "info"),
            ],
        )
    }

    /// Waits until `path` has been fetched `n` times; the arrivals.
    fn arrivals(&self, path: &str, n: usize, limit: Duration, workers: &[&Worker]) -> Vec<Instant> {
        let started = Instant::now();
        loop {
            let arrivals = self.server.arrivals(path);
            if arrivals.len() >= n {
                return arrivals;
            }
            assert!(
                started.elapsed() < limit,
                "{path} fetched {} of {n} times within {limit:?} (idle_recheck is {RECHECK}); logs:\n{}",
                arrivals.len(),
                workers
                    .iter()
                    .map(|w| w.log())
                    .collect::<Vec<_>>()
                    .join("\n---\n")
            );
            // How often it is polled, not a wait for an effect.
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_wakes_when_a_retry_comes_due() {
    // A back-off of 6 s ± 50 % capped at 3 s: exactly 3 s.
    let env = Env::new("retry_backoff_base = \"6s\"\nretry_backoff_max = \"3s\"").await;
    let w = env.worker("30s");
    let flaky = "/fault/status/503?times=1&key=retry";
    env.push(&[flaky]);
    let arrivals = env.arrivals(flaky, 2, Duration::from_secs(3) + SLACK, &[&w]);
    let gap = arrivals[1] - arrivals[0];
    assert!(
        gap >= Duration::from_millis(2900),
        "retried after {gap:?}, before its back-off"
    );
    assert!(
        gap < Duration::from_secs(3) + SLACK,
        "retried after {gap:?}: the idle worker did not wake when the retry came due"
    );
    w.kill();
    env.server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_takes_over_a_killed_workers_lease_when_it_expires() {
    let env = Env::new("download_timeout = \"60s\"").await;
    let stuck = "/fault/hang";
    env.push(&[stuck]);
    let a = env.worker("2s");
    env.arrivals(stuck, 1, SLACK, &[&a]);
    // B finds nothing to lease: it learns when A's lease runs out (A
    // renews it meanwhile), and sleeps.
    let b = env.worker("2s");
    let mut conn = env.redis.conn();
    eventually("the second worker registered", SLACK, || {
        let n: u64 = redis::cmd("HLEN")
            .arg("idle:workers")
            .query(&mut conn)
            .unwrap_or(0);
        (n >= 2).then_some(())
    });
    // B's first beat comes as it starts, beside its first lease; its next,
    // a third of its lease later, finds it idle. A's beat after that comes
    // with a renewal of its lease: what B learned of the lease's end is
    // out of date, as it must be for this test.
    let first = heartbeats::heartbeats(&mut conn, "idle")[&b.child.id()];
    let again = heartbeats::wait_beaten_after(&mut conn, "idle", b.child.id(), first);
    heartbeats::wait_beaten_after(&mut conn, "idle", a.child.id(), again);
    let killed = Instant::now();
    a.kill();
    let arrivals = env.arrivals(stuck, 2, Duration::from_secs(2) + SLACK, &[&b]);
    assert!(
        arrivals[1] - killed < Duration::from_secs(2) + SLACK,
        "fetched again {:?} after the kill",
        arrivals[1] - killed
    );
    b.kill();
    env.server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_wakes_when_a_hosts_politeness_slot_comes() {
    // The second page's slot is 5 s after the first, beyond the 1 s a
    // lease may wait for (half the lease, at least 1 s): it stays queued,
    // and the worker, idle, wakes for it.
    let env = Env::new("download_delay = \"5s\"\nrandomize_download_delay = false").await;
    let w = env.worker("2s");
    env.push(&["/fault/status/200?key=one"]);
    env.arrivals("/fault/status/200", 1, SLACK, &[&w]);
    env.push(&["/fault/status/200?key=two"]);
    let arrivals = env.arrivals(
        "/fault/status/200",
        2,
        Duration::from_secs(5) + SLACK,
        &[&w],
    );
    let gap = arrivals[1] - arrivals[0];
    assert!(
        gap >= Duration::from_millis(4900),
        "second page after {gap:?}"
    );
    assert!(
        gap < Duration::from_secs(5) + SLACK,
        "second page after {gap:?}: the idle worker did not wake for its slot"
    );
    w.kill();
    env.server.stop().await.unwrap();
}
