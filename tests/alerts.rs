//! The shipped alert rules (`deploy/prometheus/alerts.yml`): `promtool
//! check rules` accepts them, their unit tests (`promtool test rules`, on
//! series written out) pass, and a real Prometheus scraping a real worker
//! evaluates them on its series.

use std::time::Duration;

use crawlworker_testkit::redis::free_port;
use crawlworker_testkit::{eventually_async, root, DemoCrawl, KillOnDrop, Worker};

const RULES: &str = "deploy/prometheus/alerts.yml";

fn tool(name: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(name);
    cmd.current_dir(root());
    cmd
}

#[test]
fn promtool_accepts_the_alert_rules() {
    let out = tool("promtool")
        .args(["check", "rules", RULES])
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run promtool ({e}): .ci/run installs it (apt-get install prometheus)")
        });
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The login session's alerts fire on their counters' series, and stay
/// quiet without them (`promtool test rules`).
#[test]
fn the_session_alerts_fire_when_an_account_rests_is_retired_or_logins_wait() {
    promtool_test(
        r#"rule_files: ["RULES"]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'crawlworker_session_accounts_retired_total{spider="members",instance="a"}'
        values: '0 0 1 1 1'
      - series: 'crawlworker_session_logins_deferred_total{spider="members",instance="a"}'
        values: '0+1x40'
      - series: 'crawlworker_session_accounts_retired_total{spider="quiet",instance="a"}'
        values: '0x40'
      - series: 'crawlworker_session_accounts_rested_total{spider="members",instance="a"}'
        values: '0 1 1 1 1'
      - series: 'crawlworker_session_accounts_rested_total{spider="quiet",instance="a"}'
        values: '0x40'
    alert_rule_test:
      - eval_time: 3m
        alertname: CrawlworkerSessionAccountResting
        exp_alerts:
          - exp_labels: {severity: info, spider: members}
            exp_annotations:
              summary: "members: a login account was refused and rests"
              description: "It is tried once more after its rest (crawlworker stats shows how long is left); if it is refused again it is retired. The worker logs name the account and what the site said."
      - eval_time: 4m
        alertname: CrawlworkerSessionAccountRetired
        exp_alerts:
          - exp_labels: {severity: warning, spider: members}
            exp_annotations:
              summary: "members: a login account was refused and retired"
              description: "The workers log in with the spider's other accounts. The worker logs name the account; fix its credentials, then delete <spider>:session so it is used again."
      - eval_time: 35m
        alertname: CrawlworkerSessionLoginsDeferred
        exp_alerts:
          - exp_labels: {severity: warning, spider: members}
            exp_annotations:
              summary: "members: logins wait for max_logins_per_hour"
              description: "Every account had its logins for the hour; requests to the members-only site wait. Add accounts, or find why sessions end so soon (crawlworker stats shows the session's age and logins)."
"#,
    );
}

/// `promtool test rules` on `test`, a unit-test file of the rules whose
/// `rule_files` names them `RULES`: it must pass.
fn promtool_test(test: &str) {
    let dir = crawlworker_testkit::temp_dir("alerts");
    let file = dir.path().join("rules_test.yml");
    let rules = root().join(RULES);
    std::fs::write(&file, test.replace("RULES", &rules.display().to_string())).unwrap();
    let out = tool("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run promtool ({e}): .ci/run installs it (apt-get install prometheus)")
        });
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The export alerts fire when the oldest unacknowledged item has waited
/// over 10 minutes for 5 minutes, and when an exporter has not reached its
/// store for 2 minutes; they stay quiet for an export that keeps up.
#[test]
fn the_export_alerts_fire_when_an_export_lags_or_its_store_is_down() {
    promtool_test(
        r#"rule_files: ["RULES"]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'crawlworker_export_oldest_unacknowledged_seconds{spider="bbs",store="postgres",instance="a"}'
        values: '0+60x30'
      - series: 'crawlworker_export_oldest_unacknowledged_seconds{spider="bbs",store="postgres",instance="b"}'
        values: '0+60x30'
      - series: 'crawlworker_export_oldest_unacknowledged_seconds{spider="quiet",store="jsonl",instance="a"}'
        values: '0 60 0 60 0 60 0 60 0 60 0 60 0 60 0 60 0 60 0 60'
      - series: 'crawlworker_export_store_up{spider="bbs",store="postgres",instance="a"}'
        values: '1 1 0 0 0 0 0 1'
      - series: 'crawlworker_export_store_up{spider="quiet",store="jsonl",instance="a"}'
        values: '1x10'
    alert_rule_test:
      - eval_time: 14m
        alertname: CrawlworkerExportLagging
        exp_alerts: []
      - eval_time: 16m
        alertname: CrawlworkerExportLagging
        exp_alerts:
          - exp_labels: {severity: warning, spider: bbs, store: postgres}
            exp_annotations:
              summary: "bbs: an item has waited 16m 0s to be acknowledged by its postgres store"
              description: "The exporters take items and cannot get them committed. Their logs say why; crawlworker stats shows the backlog. The items wait in Redis, unacknowledged."
      - eval_time: 3m
        alertname: CrawlworkerExportStoreDown
        exp_alerts: []
      - eval_time: 5m
        alertname: CrawlworkerExportStoreDown
        exp_alerts:
          - exp_labels: {severity: critical, spider: bbs, store: postgres, instance: a}
            exp_annotations:
              summary: "bbs: an exporter cannot reach its postgres store"
              description: "a tries again every few seconds; its log names the server and what failed. Nothing is exported meanwhile."
      - eval_time: 8m
        alertname: CrawlworkerExportStoreDown
        exp_alerts: []
"#,
    );
}

/// One instant-query result of Prometheus's HTTP API, as (labels, value).
pub(crate) async fn query(prometheus: &str, expr: &str) -> Option<Vec<(serde_json::Value, f64)>> {
    let url = format!("http://{prometheus}/api/v1/query");
    let text = reqwest::Client::new()
        .get(url)
        .query(&[("query", expr)])
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let body: serde_json::Value = serde_json::from_str(&text).ok()?;
    let results = body["data"]["result"].as_array()?;
    Some(
        results
            .iter()
            .filter_map(|r| {
                let value = r["value"][1].as_str()?.parse().ok()?;
                Some((r["metric"].clone(), value))
            })
            .collect(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_scrapes_a_worker_and_evaluates_the_rules() {
    let crawl = DemoCrawl::start(Duration::from_millis(10)).await;
    let (redis, spider, dir) = (&crawl.redis, &crawl.spider, &crawl.dir);
    let metrics = format!("127.0.0.1:{}", free_port());
    let _worker = Worker::spawn(
        spider,
        &redis.url(),
        &["--metrics-addr", &metrics],
        &[("CRAWLWORKER_IDLE_RECHECK", "100ms")],
    );

    let web = format!("127.0.0.1:{}", free_port());
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: crawlworker\n    static_configs:\n      - targets: ['{metrics}']\n",
            root().join(RULES).display()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    // Stopped when the test ends, however it ends.
    let _prometheus = KillOnDrop::spawn(
        tool("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={web}"))
            .stdout(std::process::Stdio::null())
            .stderr(log),
    )
    .unwrap_or_else(|e| {
        panic!("cannot run prometheus ({e}): .ci/run installs it (apt-get install prometheus)")
    });
    let patience = Duration::from_secs(60);
    let log_path = dir.path().join("prometheus.log");
    let why = || std::fs::read_to_string(&log_path).unwrap_or_default();

    // It scrapes the worker and reads every item the crawl scraped.
    eventually_async("Prometheus reads the finished crawl", patience, || async {
        let up = query(&web, "up{job=\"crawlworker\"}").await?;
        let items = query(&web, "sum(crawlworker_items_scraped_total)").await?;
        (up.first().map(|r| r.1) == Some(1.0) && items.first().map(|r| r.1) == Some(243.0))
            .then_some(())
    })
    .await;
    // The rules run on those series: one live worker is fewer than the
    // three the rule expects, so that alert is pending (its `for:` has not
    // passed); a healthy crawl raises no error-rate alert.
    let alerts = eventually_async("the rules are evaluated", patience, || async {
        let alerts = query(&web, "ALERTS").await?;
        alerts
            .iter()
            .any(|(labels, _)| labels["alertname"] == "CrawlworkerTooFewWorkers")
            .then_some(alerts)
    })
    .await;
    let named: Vec<String> = alerts
        .iter()
        .map(|(l, _)| format!("{}={}", l["alertname"], l["alertstate"]))
        .collect();
    assert!(
        alerts
            .iter()
            .any(|(l, _)| l["alertname"] == "CrawlworkerTooFewWorkers"
                && l["spider"] == "bbs"
                && l["alertstate"] == "pending"),
        "{named:?}\n{}",
        why()
    );
    assert!(
        !alerts
            .iter()
            .any(|(l, _)| l["alertname"] == "CrawlworkerErrorRate"),
        "{named:?}"
    );
    crawl.stop().await;
}
