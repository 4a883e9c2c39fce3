//! `crawlworker export`: a demo crawl's items reach the store exactly once
//! (row count = items, no key twice, every value equal to the item's),
//! through two exporters of which one is SIGKILLed mid-batch, then
//! `--until-drained`; the same into SQLite from a stream, into JSON Lines
//! files, and through a command that fails every third batch; a database
//! stopped for 20 s mid-export is waited for; a row the database refuses
//! is dead-lettered with its message while the batch goes on; a command
//! over its time limit is killed and run again, then dead-lettered; the
//! exporter's metrics count its items and show its backlog and a store
//! that is down; a killed exporter's temporary file is removed once its
//! items are taken back. Real servers: redis-server, PostgreSQL (Debian's
//! binaries, started by the test kit), the demo forum on 127.0.0.1.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use redis::Commands;
use serde_json::Value;

use crawlworker_testkit::{eventually, eventually_async, files, DemoCrawl, PostgresServer, Worker};

use crate::expect::{assert_exact, canonical, expected};

/// Settings that make the crawl's recovery fast enough for a test.
const FAST: &[(&str, &str)] = &[
    ("CRAWLWORKER_LEASE_TIMEOUT", "1s"),
    ("CRAWLWORKER_IDLE_RECHECK", "100ms"),
];

/// Three workers crawling until drained.
fn workers(crawl: &DemoCrawl) -> Vec<Worker> {
    let args = ["--until-drained", "--concurrency", "3"];
    (0..3)
        .map(|_| Worker::spawn(&crawl.spider, &crawl.redis.url(), &args, FAST))
        .collect()
}

/// `crawlworker export` of the crawl's spider to `to`, with a short
/// lease and small batches.
fn exporter(crawl: &DemoCrawl, to: &str, extra: &[&str]) -> Worker {
    let url = crawl.redis.url();
    let mut args = vec![
        "export",
        crawl.spider_arg(),
        "--redis",
        &url,
        "--to",
        to,
        "--create",
        "--claim-after",
        "1s",
        "--batch",
        "20",
    ];
    args.extend_from_slice(extra);
    Worker::command(&args, &[("CRAWLWORKER_LOG", "info")])
}

/// The exporter ids registered in the spider's lease hash.
fn exporter_ids(conn: &mut redis::Connection) -> BTreeSet<String> {
    conn.hkeys("bbs:items:exporters").unwrap_or_default()
}

/// The id of an exporter that registers after those in `known`.
fn new_exporter_id(conn: &mut redis::Connection, known: &BTreeSet<String>) -> String {
    eventually("the exporter registers", Duration::from_secs(20), || {
        exporter_ids(conn)
            .into_iter()
            .find(|id| !known.contains(id))
    })
}

/// Waits for `n` items no exporter has taken (list sink).
fn backlog(conn: &mut redis::Connection, n: u64) {
    eventually("a backlog of items", Duration::from_secs(30), || {
        (conn.llen::<_, u64>("bbs:items").unwrap() >= n).then_some(())
    });
}

/// Freezes the exporter at moments until it is caught holding items it
/// has not acknowledged (`held` says whether it does), then SIGKILLs it
/// there: mid-batch.
fn kill_mid_batch(exporter: Worker, mut held: impl FnMut() -> bool) {
    for attempt in 0..400 {
        exporter.signal("STOP");
        if held() {
            exporter.kill();
            return;
        }
        exporter.signal("CONT");
        // A varying pause, so the freezes fall on different moments.
        std::thread::sleep(Duration::from_millis(3 + attempt % 7));
    }
    panic!(
        "the exporter was never caught holding a batch; its log:\n{}",
        exporter.log()
    );
}

/// Waits for every process to exit successfully.
fn all_succeed(processes: Vec<Worker>, what: &str) {
    for p in processes {
        let (status, log) = p.wait(Duration::from_secs(90));
        assert!(status.success(), "{what} failed:\n{log}");
    }
}

/// Rows of `query` (one JSON text column) from PostgreSQL, canonical.
async fn pg_rows(url: &str, query: &str) -> Vec<String> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
    tokio::spawn(connection);
    client
        .query(query, &[])
        .await
        .unwrap_or_else(|e| panic!("{query}: {e}"))
        .iter()
        .map(|r| canonical(&serde_json::from_str(r.get::<_, &str>(0)).unwrap()))
        .collect()
}

/// Every row of the demo's two tables, as items.
async fn pg_items(url: &str) -> Vec<String> {
    let mut rows = pg_rows(url, "SELECT row_to_json(t)::text FROM bbs_post t").await;
    rows.extend(pg_rows(url, "SELECT row_to_json(t)::text FROM bbs_comment t").await);
    rows.sort();
    rows
}

fn stat(conn: &mut redis::Connection, name: &str) -> u64 {
    conn.hget::<_, _, Option<u64>>("bbs:stats", name)
        .unwrap()
        .unwrap_or(0)
}

fn dead_letters(conn: &mut redis::Connection) -> Vec<Value> {
    let raw: Vec<String> = conn.lrange("bbs:items:dead", 0, -1).unwrap();
    raw.iter()
        .map(|s| serde_json::from_str(s).unwrap())
        .collect()
}

/// The acceptance run: a crawl by three workers, exported by two exporters
/// of which the second is SIGKILLed mid-batch twice (each time replaced),
/// then the first runs until drained: each item is one row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_gets_every_item_once_though_an_exporter_is_killed_mid_batch_twice() {
    let pg = PostgresServer::start();
    let crawl = DemoCrawl::start(Duration::from_millis(40)).await;
    let mut conn = crawl.redis.conn();
    let crawling = workers(&crawl);
    let mut known = BTreeSet::new();
    let mut first = None;
    for round in 0..2 {
        // A backlog, so the exporter is busy when it is frozen.
        backlog(&mut conn, 40);
        let second = exporter(&crawl, &pg.url(), &[]);
        let id = new_exporter_id(&mut conn, &known);
        known.insert(id.clone());
        if round == 1 {
            // The two share the work from here on.
            first = Some(exporter(&crawl, &pg.url(), &["--until-drained"]));
        }
        let list = format!("bbs:items:exporting:{id}");
        let mut c = crawl.redis.conn();
        kill_mid_batch(second, || c.llen::<_, u64>(&list).unwrap() > 0);
    }
    all_succeed(crawling, "a worker");
    all_succeed(first.into_iter().collect(), "the exporter");

    let want = expected(&crawl.server.base_url());
    let got = pg_items(&pg.url()).await;
    assert_eq!(got.len(), want.len(), "row count = items");
    assert_exact(&got, &want);
    assert!(
        stat(&mut conn, "export/taken_back_count") > 0,
        "a killed exporter's batch was taken back"
    );
    assert!(dead_letters(&mut conn).is_empty());
    let left: Vec<String> = conn.keys("bbs:items:exporting:*").unwrap();
    assert!(left.is_empty(), "no exporter holds items: {left:?}");
    let report = crate::expect::stats_json(&crawl.redis.url(), crawl.spider_arg());
    assert_eq!(
        report["stats"]["export/item_count"].as_u64(),
        Some(want.len() as u64)
    );
    assert_eq!(report["export"]["waiting"], 0, "{report}");
    assert_eq!(report["export"]["unacked"], 0, "{report}");
    crawl.stop().await;
}

/// The bbs spider of `crawl` sending its items to a stream.
fn to_stream(crawl: &DemoCrawl) {
    crawlworker_testkit::items_to_stream(&crawl.spider);
}

/// SQLite rows of `table`, each as a JSON object (`json_object` of every
/// column), canonical.
fn sqlite_rows(db: &Path, table: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let columns: Vec<String> = conn
        .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let pairs: Vec<String> = columns.iter().map(|c| format!("'{c}', \"{c}\"")).collect();
    let sql = format!("SELECT json_object({}) FROM \"{table}\"", pairs.join(", "));
    let mut stmt = conn.prepare(&sql).unwrap();
    let rows: Vec<String> = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(|r| canonical(&serde_json::from_str(&r.unwrap()).unwrap()))
        .collect();
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_gets_every_item_of_a_stream_once_though_an_exporter_is_killed_mid_batch() {
    let crawl = DemoCrawl::start(Duration::from_millis(40)).await;
    to_stream(&crawl);
    let db = crawl.dir.path().join("bbs.db");
    let to = format!("sqlite:{}", db.display());
    let mut conn = crawl.redis.conn();
    let crawling = workers(&crawl);
    eventually("a backlog of items", Duration::from_secs(30), || {
        (redis::cmd("XLEN")
            .arg("bbs:items:stream")
            .query::<u64>(&mut conn)
            .unwrap()
            >= 40)
            .then_some(())
    });
    let second = exporter(&crawl, &to, &[]);
    let id = new_exporter_id(&mut conn, &BTreeSet::new());
    let first = exporter(&crawl, &to, &["--until-drained"]);
    let mut c = crawl.redis.conn();
    kill_mid_batch(second, || {
        let pending: Vec<redis::Value> = redis::cmd("XPENDING")
            .arg(&["bbs:items:stream", "crawlworker-export", "-", "+", "1", &id])
            .query(&mut c)
            .unwrap_or_default();
        !pending.is_empty()
    });
    all_succeed(crawling, "a worker");
    all_succeed(vec![first], "the exporter");

    let mut got = sqlite_rows(&db, "bbs_post");
    got.extend(sqlite_rows(&db, "bbs_comment"));
    got.sort();
    assert_exact(&got, &expected(&crawl.server.base_url()));
    assert!(dead_letters(&mut conn).is_empty());
    crawl.stop().await;
}

/// Every item in the JSON Lines files of `dir` (not the hidden temporary
/// ones), canonical and sorted.
fn jsonl_items(dir: &Path) -> Vec<String> {
    let mut items: Vec<String> = files(dir, "jsonl")
        .iter()
        .filter(|p| !p.file_name().unwrap().to_str().unwrap().starts_with('.'))
        .flat_map(|p| {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| canonical(&serde_json::from_str(l).unwrap()))
                .collect::<Vec<_>>()
        })
        .collect();
    items.sort();
    items
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jsonl_files_hold_every_item_once_though_an_exporter_is_killed_or_stopped_holding_a_file() {
    let crawl = DemoCrawl::start(Duration::from_millis(40)).await;
    let out = crawl.dir.path().join("out");
    let to = format!("jsonl:{}", out.display());
    let mut conn = crawl.redis.conn();
    let crawling = workers(&crawl);
    let rotate = ["--rotate-every", "300ms"];
    backlog(&mut conn, 40);
    let second = exporter(&crawl, &to, &rotate);
    let id = new_exporter_id(&mut conn, &BTreeSet::new());
    let first = exporter(&crawl, &to, &["--until-drained", rotate[0], rotate[1]]);
    let mut known = BTreeSet::from([id.clone()]);
    known.insert(new_exporter_id(&mut conn, &known));
    let list = format!("bbs:items:exporting:{id}");
    let mut c = crawl.redis.conn();
    kill_mid_batch(second, || c.llen::<_, u64>(&list).unwrap() > 0);
    // SIGTERM: the file it holds is closed, acknowledged and renamed.
    let third = exporter(&crawl, &to, &rotate);
    let id = new_exporter_id(&mut conn, &known);
    let list = format!("bbs:items:exporting:{id}");
    eventually("the exporter holds items", Duration::from_secs(20), || {
        (c.llen::<_, u64>(&list).unwrap() > 0).then_some(())
    });
    third.terminate();
    all_succeed(vec![third], "the exporter stopped by SIGTERM");
    assert_eq!(c.llen::<_, u64>(&list).unwrap(), 0, "it left nothing held");
    all_succeed(crawling, "a worker");
    all_succeed(vec![first], "the exporter");

    assert_exact(&jsonl_items(&out), &expected(&crawl.server.base_url()));
    let tables: BTreeSet<String> = files(&out, "jsonl")
        .iter()
        .map(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .split('-')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        tables,
        BTreeSet::from(["bbs_comment".to_string(), "bbs_post".to_string()])
    );
    crawl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_failing_every_third_batch_gets_every_item_once() {
    let crawl = DemoCrawl::start(Duration::from_millis(10)).await;
    let dir = crawl.dir.path();
    let script = dir.join("load.sh");
    // Every third run fails before writing anything; the others append
    // their standard input whole.
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nset -e\nn=$(cat {d}/runs 2>/dev/null || echo 0)\nn=$((n + 1))\necho $n > {d}/runs\nif [ $((n % 3)) -eq 0 ]; then echo \"run $n fails on purpose\" >&2; exit 1; fi\ncat >> {d}/loaded-$CRAWLWORKER_TABLE.jsonl\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let to = format!("exec:sh {}", script.display());
    let crawling = workers(&crawl);
    let one = exporter(
        &crawl,
        &to,
        &["--until-drained", "--exec-retry-wait", "20ms"],
    );
    all_succeed(crawling, "a worker");
    all_succeed(vec![one], "the exporter");

    let mut got: Vec<String> = ["bbs_post", "bbs_comment"]
        .iter()
        .flat_map(|t| {
            std::fs::read_to_string(dir.join(format!("loaded-{t}.jsonl")))
                .unwrap()
                .lines()
                .map(|l| canonical(&serde_json::from_str(l).unwrap()))
                .collect::<Vec<_>>()
        })
        .collect();
    got.sort();
    assert_exact(&got, &expected(&crawl.server.base_url()));
    let runs: u64 = std::fs::read_to_string(dir.join("runs"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(runs >= 3, "the command ran {runs} times");
    assert!(dead_letters(&mut crawl.redis.conn()).is_empty());
    crawl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exporter_waits_for_a_stopped_database_and_loses_or_doubles_nothing() {
    let mut pg = PostgresServer::start();
    let crawl = DemoCrawl::start(Duration::from_millis(40)).await;
    let mut conn = crawl.redis.conn();
    // The address, with a password, from the environment only.
    let to = pg.url().replace("postgres@", "postgres:sekrit@");
    let url = crawl.redis.url();
    let args = [
        "export",
        crawl.spider_arg(),
        "--redis",
        &url,
        "--create",
        "--claim-after",
        "1s",
        "--batch",
        "20",
        "--until-drained",
    ];
    let one = Worker::command(
        &args,
        &[("CRAWLWORKER_LOG", "info"), ("CRAWLWORKER_EXPORT_TO", &to)],
    );
    let crawling = workers(&crawl);
    eventually("items are exported", Duration::from_secs(30), || {
        (stat(&mut conn, "export/item_count") >= 40).then_some(())
    });
    pg.stop();
    let exported = stat(&mut conn, "export/item_count");
    std::thread::sleep(Duration::from_secs(20));
    assert!(
        !one.child.is_stopped(),
        "the exporter waits for the database"
    );
    assert_eq!(
        stat(&mut conn, "export/item_count"),
        exported,
        "nothing is acknowledged while the database is down"
    );
    pg.start_again();
    all_succeed(crawling, "a worker");
    let log = one.log();
    all_succeed(vec![one], "the exporter");

    assert_exact(
        &pg_items(&pg.url()).await,
        &expected(&crawl.server.base_url()),
    );
    let port = format!("PostgreSQL at 127.0.0.1:{}", pg.port());
    assert!(
        log.contains(&port) && (log.contains("trying again") || log.contains("written again")),
        "the outage is reported with the server:\n{log}"
    );
    assert!(
        !log.contains("sekrit"),
        "the password is never logged:\n{log}"
    );
    crawl.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_the_database_refuses_is_dead_lettered_with_its_message_and_the_batch_goes_on() {
    let pg = PostgresServer::start();
    let redis = crawlworker_testkit::RedisServer::start();
    let dir = crawlworker_testkit::temp_dir("export");
    let spider = crawlworker_testkit::spider_for("bbs", "http://127.0.0.1:9/", dir.path());
    let good = |id: u64| {
        format!(
            r#"{{"kind":"post","post_id":{id},"forum_id":"1","title":"t{id}","author":null,"posted":"p","views":1,"body":"b","url":"u"}}"#
        )
    };
    let bad = r#"{"kind":"post","post_id":3,"forum_id":"1","title":"t","author":null,"posted":"p","views":"many","body":"b","url":"u"}"#;
    let mut conn = redis.conn();
    let _: () = conn
        .rpush("bbs:items", &[good(1), bad.to_string(), good(2), good(1)])
        .unwrap();
    let out = crawlworker_testkit::crawlworker_with_redis(
        &redis.url(),
        &[
            "export",
            spider.to_str().unwrap(),
            "--to",
            &pg.url(),
            "--create",
            "--until-drained",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        crawlworker_testkit::stderr(&out)
    );

    let ids: BTreeMap<i64, String> =
        pg_rows(&pg.url(), "SELECT row_to_json(t)::text FROM bbs_post t")
            .await
            .iter()
            .map(|r| {
                let v: Value = serde_json::from_str(r).unwrap();
                (
                    v["post_id"].as_i64().unwrap(),
                    v["title"].as_str().unwrap().to_string(),
                )
            })
            .collect();
    assert_eq!(
        ids,
        BTreeMap::from([(1, "t1".to_string()), (2, "t2".to_string())])
    );
    let dead = dead_letters(&mut conn);
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0]["item"], bad);
    let reason = dead[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("bbs_post") && reason.contains("many"),
        "{reason}"
    );
    assert_eq!(stat(&mut conn, "export/refused_count"), 1);
}

#[test]
fn a_password_on_the_command_line_is_refused_before_anything_runs() {
    let out = crawlworker_testkit::crawlworker(&[
        "export",
        "spiders/bbs.toml",
        "--to",
        "postgres://app:hunter2@127.0.0.1:1/db",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = crawlworker_testkit::stderr(&out);
    assert!(
        err.contains("PGPASSWORD") && !err.contains("hunter2"),
        "{err}"
    );
}

/// A post of the bbs spider, as its items list holds it.
fn post(id: u64) -> String {
    format!(
        r#"{{"kind":"post","post_id":{id},"forum_id":"1","title":"t{id}","author":null,"posted":"p","views":1,"body":"b","url":"u"}}"#
    )
}

/// `crawlworker export` of `spider` on `redis` to `to`, with a short
/// lease: a process to stop, kill or wait for.
fn export_process(redis: &str, spider: &Path, to: &str, extra: &[&str]) -> Worker {
    let spider = spider.display().to_string();
    let mut args = vec![
        "export",
        &spider,
        "--redis",
        redis,
        "--to",
        to,
        "--create",
        "--claim-after",
        "1s",
    ];
    args.extend_from_slice(extra);
    Worker::command(&args, &[("CRAWLWORKER_LOG", "info")])
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
fn process_gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'))
    })
}

#[test]
fn a_command_over_its_time_limit_is_killed_with_what_it_started_then_run_again_or_dead_lettered() {
    let redis = crawlworker_testkit::RedisServer::start();
    let dir = crawlworker_testkit::temp_dir("export");
    let d = dir.path();
    let spider = crawlworker_testkit::spider_for("bbs", "http://127.0.0.1:9/", d);
    let mut conn = redis.conn();
    let items: Vec<String> = (1..=3).map(post).collect();
    let _: () = conn.rpush("bbs:items", &items).unwrap();
    // The first run starts a sleeper and waits for it; the next loads.
    let script = d.join("load.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nn=$(cat {d}/runs 2>/dev/null || echo 0)\nn=$((n + 1))\necho $n > {d}/runs\nif [ $n -eq 1 ]; then echo 'run 1 hangs' >&2; sleep 60 & echo $! > {d}/sleeper; wait; fi\ncat >> {d}/loaded.jsonl\n",
            d = d.display()
        ),
    )
    .unwrap();
    let to = format!("exec:sh {}", script.display());
    let limits = ["--exec-timeout", "1s", "--exec-retry-wait", "20ms"];
    let mut args = vec!["--until-drained"];
    args.extend_from_slice(&limits);
    let (status, log) =
        export_process(&redis.url(), &spider, &to, &args).wait(Duration::from_secs(30));
    assert!(status.success(), "{log}");

    let loaded: Vec<String> = std::fs::read_to_string(d.join("loaded.jsonl"))
        .unwrap()
        .lines()
        .map(|l| canonical(&serde_json::from_str(l).unwrap()))
        .collect();
    let mut want: Vec<String> = items
        .iter()
        .map(|i| canonical(&serde_json::from_str(i).unwrap()))
        .collect();
    want.sort();
    assert_exact(&loaded, &want);
    assert_eq!(std::fs::read_to_string(d.join("runs")).unwrap().trim(), "2");
    assert!(
        log.contains("ran over --exec-timeout (1s) and was killed") && log.contains("run 1 hangs"),
        "{log}"
    );
    let sleeper: u32 = std::fs::read_to_string(d.join("sleeper"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    eventually(
        "the hung command's child is killed too",
        Duration::from_secs(5),
        || process_gone(sleeper).then_some(()),
    );
    assert!(dead_letters(&mut conn).is_empty());

    // A command that always hangs: its items are dead-lettered after its
    // retries, with the reason.
    let _: () = conn.rpush("bbs:items", &[post(4), post(5)]).unwrap();
    let hangs = d.join("hangs.sh");
    std::fs::write(
        &hangs,
        "#!/bin/sh\necho 'stuck on the database' >&2\nsleep 60\n",
    )
    .unwrap();
    let to = format!("exec:sh {}", hangs.display());
    args.extend_from_slice(&["--exec-retries", "1"]);
    let (status, log) =
        export_process(&redis.url(), &spider, &to, &args).wait(Duration::from_secs(30));
    assert!(status.success(), "{log}");
    let dead = dead_letters(&mut conn);
    assert_eq!(dead.len(), 2, "{dead:?}");
    let reason = dead[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("ran over --exec-timeout (1s) and was killed on the last of 2 tries")
            && reason.contains("stuck on the database"),
        "{reason}"
    );
    assert_eq!(stat(&mut conn, "export/refused_count"), 2);
}

/// Samples of a scrape of `addr`'s `/metrics`: series → value.
async fn scrape(addr: &str) -> Option<BTreeMap<String, f64>> {
    let text = reqwest::get(format!("http://{addr}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    Some(
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (series, value) = l.rsplit_once(' ')?;
                Some((series.to_string(), value.parse().ok()?))
            })
            .collect(),
    )
}

/// The value of the export series `name` of the bbs spider into
/// PostgreSQL (0 when absent).
fn sample(samples: &BTreeMap<String, f64>, name: &str) -> f64 {
    let series = format!("crawlworker_{name}{{spider=\"bbs\",store=\"postgres\"}}");
    samples.get(&series).copied().unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exporters_metrics_count_its_items_and_show_the_backlog_and_a_store_that_is_down() {
    let mut pg = PostgresServer::start();
    let redis = crawlworker_testkit::RedisServer::start();
    let dir = crawlworker_testkit::temp_dir("export");
    let spider = crawlworker_testkit::spider_for("bbs", "http://127.0.0.1:9/", dir.path());
    let mut conn = redis.conn();
    let mut items: Vec<String> = (1..=10).map(post).collect();
    items.push(post(99).replace("\"views\":1", "\"views\":\"many\""));
    let _: () = conn.rpush("bbs:items", &items).unwrap();
    let addr = format!("127.0.0.1:{}", crawlworker_testkit::redis::free_port());
    let one = export_process(&redis.url(), &spider, &pg.url(), &["--metrics-addr", &addr]);
    let patience = Duration::from_secs(30);
    let shows = |what: &'static str, want: &'static [(&'static str, f64)]| {
        let addr = addr.clone();
        async move {
            eventually_async(what, patience, || async {
                let samples = scrape(&addr).await?;
                want.iter()
                    .all(|(name, v)| sample(&samples, name) == *v)
                    .then_some(samples)
            })
            .await
        }
    };

    // Its counts, and the backlog it read.
    shows(
        "the items exported and refused",
        &[
            ("export_items_total", 10.0),
            ("export_items_refused_total", 1.0),
            ("export_backlog_items", 0.0),
            ("export_unacknowledged_items", 0.0),
            ("export_exporters_live", 1.0),
            ("export_store_up", 1.0),
        ],
    )
    .await;

    // The items of an exporter that is gone, taken back.
    let _: () = conn
        .hset(
            "bbs:items:exporters",
            "gone",
            r#"{"until_ms":1,"since_ms":0}"#,
        )
        .unwrap();
    let _: () = conn
        .rpush("bbs:items:exporting:gone", &[post(11), post(12)])
        .unwrap();
    shows(
        "the items of a gone exporter taken back",
        &[
            ("export_items_taken_back_total", 2.0),
            ("export_items_total", 12.0),
        ],
    )
    .await;

    // The database stops: the store is down, and an item waits longer and
    // longer.
    pg.stop();
    let _: () = conn.rpush("bbs:items", post(13)).unwrap();
    let down = eventually_async("the store is down and an item waits", patience, || async {
        let samples = scrape(&addr).await?;
        (sample(&samples, "export_store_up") == 0.0
            && sample(&samples, "export_unacknowledged_items") == 1.0
            && sample(&samples, "export_oldest_unacknowledged_seconds") >= 2.0)
            .then_some(samples)
    })
    .await;
    assert_eq!(sample(&down, "export_items_total"), 12.0);
    let health = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .unwrap();
    assert_eq!(
        health.status(),
        200,
        "Redis answers: the exporter is healthy"
    );

    pg.start_again();
    shows(
        "the item is exported once the database is back",
        &[
            ("export_items_total", 13.0),
            ("export_store_up", 1.0),
            ("export_unacknowledged_items", 0.0),
            ("export_oldest_unacknowledged_seconds", 0.0),
        ],
    )
    .await;
    one.terminate();
    let (status, log) = one.wait(Duration::from_secs(30));
    assert!(status.success(), "{log}");
    assert_eq!(stat(&mut conn, "export/item_count"), 13);
    assert_eq!(stat(&mut conn, "export/taken_back_count"), 2);
}

/// The hidden temporary files of table `bbs_post` in `dir`.
fn post_temp_files(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.starts_with(".bbs_post-") && name.ends_with(".tmp")
        })
        .collect()
}

/// An exporter holding a file of every item is SIGKILLed; the next one
/// started on the directory takes its items back, removes its temporary
/// file once they are, and writes each item once. Files of other tables,
/// and names no exporter writes, are left alone.
fn a_killed_exporters_temporary_file_is_removed_once_its_items_are_taken_back(stream: bool) {
    let redis = crawlworker_testkit::RedisServer::start();
    let dir = crawlworker_testkit::temp_dir("export");
    let spider = crawlworker_testkit::spider_for("bbs", "http://127.0.0.1:9/", dir.path());
    let mut conn = redis.conn();
    let items: Vec<String> = (1..=30).map(post).collect();
    if stream {
        crawlworker_testkit::items_to_stream(&spider);
        for item in &items {
            let _: String = redis::cmd("XADD")
                .arg(&["bbs:items:stream", "*", "item", item])
                .query(&mut conn)
                .unwrap();
        }
    } else {
        let _: () = conn.rpush("bbs:items", &items).unwrap();
    }
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let foreign = [
        out.join(".other_table-1718000000000-0123456789ab-1.jsonl.tmp"),
        out.join(".notes.tmp"),
    ];
    for f in &foreign {
        std::fs::write(f, "{}\n").unwrap();
    }
    let to = format!("jsonl:{}", out.display());
    let hold = ["--rotate-every", "1h", "--batch", "5"];

    let killed = export_process(&redis.url(), &spider, &to, &hold);
    let id = new_exporter_id(&mut conn, &BTreeSet::new());
    eventually(
        "the exporter holds every item in its file",
        Duration::from_secs(20),
        || {
            let held: u64 = if stream {
                let summary: Vec<redis::Value> = redis::cmd("XPENDING")
                    .arg(&[
                        "bbs:items:stream",
                        "crawlworker-export",
                        "-",
                        "+",
                        "100",
                        &id,
                    ])
                    .query(&mut conn)
                    .unwrap_or_default();
                summary.len() as u64
            } else {
                conn.llen(format!("bbs:items:exporting:{id}")).unwrap()
            };
            (held == 30 && post_temp_files(&out).len() == 1).then_some(())
        },
    );
    killed.kill();
    let left = post_temp_files(&out);

    let next = export_process(
        &redis.url(),
        &spider,
        &to,
        &["--until-drained", hold[0], hold[1]],
    );
    let (status, log) = next.wait(Duration::from_secs(60));
    assert!(status.success(), "{log}");
    assert!(
        !left[0].exists(),
        "{} is removed:\n{log}",
        left[0].display()
    );
    assert!(
        log.contains("a temporary file of an exporter that is gone"),
        "{log}"
    );
    assert!(post_temp_files(&out).is_empty(), "{log}");
    let mut want: Vec<String> = items
        .iter()
        .map(|i| canonical(&serde_json::from_str(i).unwrap()))
        .collect();
    want.sort();
    assert_exact(&jsonl_items(&out), &want);
    for f in &foreign {
        assert!(f.exists(), "{} is left alone", f.display());
    }
}

#[test]
fn a_killed_exporters_temporary_file_is_removed_once_its_list_items_are_taken_back() {
    a_killed_exporters_temporary_file_is_removed_once_its_items_are_taken_back(false);
}

#[test]
fn a_killed_exporters_temporary_file_is_removed_once_its_stream_entries_are_claimed() {
    a_killed_exporters_temporary_file_is_removed_once_its_items_are_taken_back(true);
}
