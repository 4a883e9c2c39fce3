//! The web dashboard in a real headless browser (Debian's
//! chromium): during a crawl the page renders charts with data. The test
//! reads the DOM the page's script built and looks at a screenshot.

use crate::expect::Dashboard;
use std::process::Command;
use std::time::Duration;

use crawlworker_testkit::{eventually_async, temp_dir, DemoCrawl, Worker};

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
    let dom = chromium(profile.path())
        .args(["--dump-dom", &page])
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run chromium ({e}): .ci/run installs it (apt-get install chromium)")
        });
    let dom = String::from_utf8_lossy(&dom.stdout).into_owned();
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
