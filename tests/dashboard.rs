//! The web dashboard in a real headless browser (Debian's
//! chromium): during a crawl the page renders charts with data, and for a
//! logged-in crawl each login account's state (active, resting with the
//! time left and why, retired). The tests read the DOM the page's script
//! built and look at a screenshot.

use crate::expect::Dashboard;
use std::process::Command;
use std::time::Duration;

use crawlworker_demo::members::MembersConfig;
use crawlworker_demo::Site;
use crawlworker_testkit::{
    eventually_async, push_urls, temp_dir, DemoCrawl, FixtureServer, RedisServer, Worker,
};

/// Headless Chromium with the flags a closed network needs.
pub fn chromium(profile: &std::path::Path) -> Command {
    let mut cmd = Command::new("chromium");
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--virtual-time-budget=8000",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    cmd
}

/// The page at `page` as the browser built it, once its script ran.
fn dump_dom(profile: &std::path::Path, page: &str) -> String {
    let out = chromium(profile)
        .args(["--dump-dom", page])
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run chromium ({e}): .ci/run installs it (apt-get install chromium)")
        });
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The HTML of the element with id `id` (up to its closing `</tag>`).
fn element<'a>(dom: &'a str, tag: &str, id: &str) -> Option<&'a str> {
    let start = dom.find(&format!("id=\"{id}\""))?;
    let len = dom[start..].find(&format!("</{tag}>"))?;
    Some(&dom[start..start + len])
}

/// The number shown in the element with id `id`.
fn figure(dom: &str, id: &str) -> Option<u64> {
    let start = dom.find(&format!("id=\"{id}\">"))? + id.len() + 6;
    let text: String = dom[start..].chars().take_while(|c| *c != '<').collect();
    text.replace(',', "").trim().parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_draws_charts_with_data_in_a_real_browser() {
    let crawl = DemoCrawl::start(Duration::from_millis(100)).await;
    let (redis, spider, dir) = (&crawl.redis, &crawl.spider, &crawl.dir);
    let _worker = Worker::spawn(spider, &redis.url(), &["--concurrency", "2"], &[]);
    let mut dashboard = Dashboard::spawn(spider, &redis.url());
    let listen = dashboard.listen.clone();
    // Wait for a history of a few readings during the crawl.
    eventually_async(
        "the dashboard has a history",
        Duration::from_secs(30),
        || async {
            let state = dashboard.state().await?;
            let s = &state["spiders"][0];
            (s["history"].as_array()?.len() >= 3 && s["pages"].as_u64()? > 0).then_some(())
        },
    )
    .await;

    let page = format!("http://{listen}/");
    let profile = temp_dir("chromium");
    let dom = dump_dom(profile.path(), &page);
    assert!(
        figure(&dom, "pages-bbs").is_some_and(|n| n > 0),
        "no page count:\n{dom}"
    );
    assert!(figure(&dom, "workers-bbs") == Some(1), "{dom}");
    // The rate chart has a line with points.
    let chart = dom
        .split("<svg id=\"rate-bbs\"")
        .nth(1)
        .unwrap_or_else(|| panic!("no rate chart:\n{dom}"));
    let points = chart
        .split("points=\"")
        .nth(1)
        .and_then(|p| p.split('"').next())
        .unwrap_or("");
    assert!(
        points.split(' ').count() >= 3,
        "the chart has no line: {points}"
    );
    assert!(
        dom.contains("<td>200</td>"),
        "the status codes table: {dom}"
    );

    // A screenshot that is not blank: many colours, a good share not white.
    let shot = dir.path().join("dashboard.png");
    let out = chromium(profile.path())
        .arg(format!("--screenshot={}", shot.display()))
        .args(["--window-size=1280,900", &page])
        .output()
        .unwrap();
    assert!(
        shot.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let bytes = &buf[..info.buffer_size()];
    let step = info.color_type.samples();
    let pixels: Vec<&[u8]> = bytes.chunks(step).collect();
    let colours: std::collections::HashSet<&[u8]> = pixels.iter().copied().collect();
    let inked = pixels
        .iter()
        .filter(|p| p[..3].iter().any(|c| *c < 200))
        .count();
    assert!(
        colours.len() > 20,
        "a blank screenshot ({} colours)",
        colours.len()
    );
    assert!(
        inked * 50 > pixels.len(),
        "almost nothing drawn ({inked} of {})",
        pixels.len()
    );
    dashboard.process.kill_now();
    crawl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_each_login_accounts_state_in_a_real_browser() {
    // The first account's login meets the site's rate limit: it rests for
    // the site's Retry-After (ten minutes), and the second logs in.
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    server.members().configure(MembersConfig {
        refuse_next: 1,
        retry_after: Some(600),
        requests_per_session: 1000,
        ..MembersConfig::default()
    });
    let redis = RedisServer::start();
    let dir = temp_dir("dashboard-accounts");
    let spider = crate::sessions::spider(&server, dir.path(), "");
    crate::sessions::with_accounts(&spider, &[("old", "FORUM_PASS"), ("new", "FORUM_PASS")]);
    push_urls(&redis.url(), &spider, &[server.url("/members/")]);
    let worker = Worker::spawn(
        &spider,
        &redis.url(),
        &["--until-drained"],
        &crate::sessions::env(),
    );
    let (status, log) = worker.wait(Duration::from_secs(120));
    assert!(status.success(), "{log}");
    assert_eq!(
        (server.members().refused(), server.members().logins()),
        (1, 1)
    );

    let mut dashboard = Dashboard::spawn(&spider, &redis.url());
    let listen = dashboard.listen.clone();
    eventually_async(
        "the dashboard reads the accounts",
        Duration::from_secs(30),
        || async {
            let state = dashboard.state().await?;
            (state["spiders"][0]["session"]["accounts"][0]["state"] == "resting").then_some(())
        },
    )
    .await;
    let profile = temp_dir("chromium-accounts");
    let dom = dump_dom(profile.path(), &format!("http://{listen}/"));
    let old = element(&dom, "tr", "account-members-old")
        .unwrap_or_else(|| panic!("no row for account old:\n{dom}"));
    assert!(old.contains(">resting<"), "{old}");
    // The time left (of the ten minutes of the site's Retry-After) and
    // why: what the site answered.
    assert!(old.contains(" min "), "{old}");
    assert!(
        old.contains("status 429") && old.contains("Retry-After"),
        "{old}"
    );
    let new = element(&dom, "tr", "account-members-new")
        .unwrap_or_else(|| panic!("no row for account new:\n{dom}"));
    assert!(new.contains(">active<"), "{new}");
    let table = element(&dom, "table", "accounts-members").unwrap_or_default();
    assert!(table.contains("session of new"), "{table}");
    dashboard.process.kill_now();
}
