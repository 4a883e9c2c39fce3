//! Entries that are not UTF-8 text, written by producers other than
//! crawlworker (Latin-1 bytes, say): in a start key of any type, in the
//! request records and queue, in a `push-urls --file` and in the failed
//! key. Each is set aside in the dead-letter key (shown escaped, logged
//! once) or refused alone, a lease whose record cannot be read is freed,
//! and the crawl goes on.

use std::time::Duration;

use redis::Commands;

use crawlworker_demo::Site;
use crawlworker_testkit::{
    crawlworker_with_redis, fault_spider, stderr, temp_dir, FixtureServer, RedisServer, Worker,
};

/// A spider named `name` in `dir` with a start key of `kind` (list, set or
/// zset) that scrapes one item, the page's URL, from every `/fault/` page.
fn utf8_spider(dir: &std::path::Path, name: &str, kind: &str) -> std::path::PathBuf {
    let start = format!("[start]\ntype = \"{kind}\"");
    fault_spider(dir, name, "allow_private_networks = true", &start)
}

/// The dead letters of `key`, parsed.
fn dead_letters(conn: &mut redis::Connection, key: &str) -> Vec<serde_json::Value> {
    let dead: Vec<String> = conn.lrange(key, 0, -1).unwrap();
    dead.iter()
        .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("dead letter {d}: {e}")))
        .collect()
}

/// A start entry that is not UTF-8 (a Latin-1 `caf\xe9`) is set aside,
/// shown escaped, and the crawl goes on, in a start key of each type. (It
/// once made every lease fail, "Cannot convert from UTF-8": nothing was
/// crawled and `--until-drained` never exited.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_utf8_start_entry_is_dead_lettered_and_the_crawl_goes_on() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let dir = temp_dir("unreadable");
    let bad: &[u8] = b"caf\xe9";
    for kind in ["list", "set", "zset"] {
        let redis = RedisServer::start();
        let name = format!("utf8{kind}");
        let spider = utf8_spider(dir.path(), &name, kind);
        let start = format!("{name}:start_urls");
        let good = |i: usize| server.url(&format!("/fault/status/200?key={kind}{i}"));
        let mut conn = redis.conn();
        let mut cmd = match kind {
            "list" => redis::cmd("RPUSH"),
            "set" => redis::cmd("SADD"),
            _ => redis::cmd("ZADD"),
        };
        cmd.arg(&start);
        for (i, entry) in [good(1).into_bytes(), bad.to_vec(), good(2).into_bytes()]
            .iter()
            .enumerate()
        {
            if kind == "zset" {
                cmd.arg(i);
            }
            cmd.arg(entry.as_slice());
        }
        cmd.query::<()>(&mut conn).unwrap();

        let worker = Worker::spawn(&spider, &redis.url(), &["--until-drained"], &[]);
        let (status, log) = worker.wait(Duration::from_secs(40));
        assert!(status.success(), "{kind}: {log}");
        let items: u64 = conn.llen(format!("{name}:items")).unwrap();
        assert_eq!(items, 2, "{kind}: both good entries are crawled: {log}");
        let dead = dead_letters(&mut conn, &format!("{name}:dead"));
        assert_eq!(dead.len(), 1, "{kind}: {dead:?}");
        assert_eq!(dead[0]["key"], start.as_str(), "{kind}");
        assert_eq!(dead[0]["entry"], r"caf\xe9", "{kind}");
        assert_eq!(dead[0]["bytes"], 4, "{kind}");
        assert!(
            dead[0]["reason"].as_str().unwrap().contains("UTF-8"),
            "{kind}: {dead:?}"
        );
        let count: Option<u64> = conn
            .hget(format!("{name}:stats"), "deadletter/count")
            .unwrap();
        assert_eq!(count, Some(1), "{kind}");
        let left: u64 = conn.exists(&start).unwrap();
        assert_eq!(left, 0, "{kind}: the start key is emptied");
        assert_eq!(
            log.matches(r"caf\xe9").count(),
            1,
            "{kind}: logged once, escaped: {log}"
        );
        assert!(log.contains(&start), "{kind}: the log names the key: {log}");
    }

    // A start key of nothing but such entries (more than one look's worth)
    // drains, all set aside, and is not called empty.
    let redis = RedisServer::start();
    let spider = utf8_spider(dir.path(), "utf8only", "list");
    let mut conn = redis.conn();
    for i in 0..40u8 {
        conn.rpush::<_, _, ()>("utf8only:start_urls", [b'x', i, 0xff].as_slice())
            .unwrap();
    }
    let worker = Worker::spawn(&spider, &redis.url(), &["--until-drained"], &[]);
    let (status, log) = worker.wait(Duration::from_secs(40));
    assert!(status.success(), "{log}");
    assert_eq!(dead_letters(&mut conn, "utf8only:dead").len(), 40);
    assert!(!log.contains("nothing to crawl"), "{log}");
    server.stop().await.unwrap();
}

/// A request record (`<name>:requests:data`) or queue member that is not
/// UTF-8 is set aside, its lease freed, and the crawl drains. (Such a record
/// once left its lease held for ever, with no log line: the reply could not
/// be read, so nobody committed it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_utf8_request_record_is_dead_lettered_and_its_lease_freed() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let redis = RedisServer::start();
    let dir = temp_dir("unreadable");
    let spider = utf8_spider(dir.path(), "utf8req", "list");
    let mut conn = redis.conn();
    conn.rpush::<_, _, ()>(
        "utf8req:start_urls",
        server.url("/fault/status/200?key=good"),
    )
    .unwrap();
    // As another tool would write it: a queue member and its record, one a
    // JSON request with a Latin-1 byte, one not even JSON.
    let url = server.url("/fault/status/200?key=caf");
    let mut json = format!(r#"{{"url":"{url}"#).into_bytes();
    json.extend_from_slice(b"\xe9\"}");
    for (id, record) in [("bad1", json), ("bad2", b"caf\xe9".to_vec())] {
        conn.zadd::<_, _, _, ()>("utf8req:requests", id, 0).unwrap();
        conn.hset::<_, _, _, ()>("utf8req:requests:data", id, record)
            .unwrap();
    }
    // Queue members whose id is not UTF-8 text: one with a good request
    // (it cannot be committed by its id), one without any.
    let good = format!(r#"{{"url":"{}"}}"#, server.url("/fault/status/200?key=id"));
    conn.zadd::<_, _, _, ()>("utf8req:requests", b"id\xff".as_slice(), 0)
        .unwrap();
    conn.hset::<_, _, _, ()>("utf8req:requests:data", b"id\xff".as_slice(), good)
        .unwrap();
    conn.zadd::<_, _, _, ()>("utf8req:requests", b"gone\xff".as_slice(), 0)
        .unwrap();

    let worker = Worker::spawn(&spider, &redis.url(), &["--until-drained"], &[]);
    let (status, log) = worker.wait(Duration::from_secs(40));
    assert!(status.success(), "{log}");
    let items: u64 = conn.llen("utf8req:items").unwrap();
    assert_eq!(items, 1, "{log}");
    let dead = dead_letters(&mut conn, "utf8req:dead");
    assert_eq!(dead.len(), 4, "{dead:?}");
    let entries: Vec<&str> = dead.iter().map(|d| d["entry"].as_str().unwrap()).collect();
    assert!(entries.contains(&r"caf\xe9"), "{entries:?}");
    assert!(entries.contains(&r"id\xff"), "{entries:?}");
    assert!(entries.contains(&r"gone\xff"), "{entries:?}");
    assert!(
        entries.iter().any(|e| e.ends_with(r#"caf\xe9"}"#)),
        "{entries:?}"
    );
    for d in &dead {
        assert_eq!(d["key"], "utf8req:requests", "{d}");
        if d["entry"] != r"gone\xff" {
            assert!(d["reason"].as_str().unwrap().contains("UTF-8"), "{d}");
        }
    }
    let count: Option<u64> = conn.hget("utf8req:stats", "deadletter/count").unwrap();
    assert_eq!(count, Some(4));
    for key in [
        "utf8req:inflight",
        "utf8req:requests",
        "utf8req:requests:data",
    ] {
        let left: u64 = conn.exists(key).unwrap();
        assert_eq!(left, 0, "{key} is empty: {log}");
    }
    // The owners hash keeps only its note (field `~`), no lease.
    let owners: Vec<String> = conn.hkeys("utf8req:inflight:owners").unwrap();
    assert!(owners.iter().all(|f| f == "~"), "{owners:?}: {log}");
    assert_eq!(
        log.matches(r"caf\xe9").count(),
        2,
        "each logged once: {log}"
    );
    assert_eq!(log.matches(r"id\xff").count(), 1, "logged once: {log}");
    server.stop().await.unwrap();
}

/// `push-urls --file` with one Latin-1 line refuses only that line, with
/// its line number and its bytes escaped, and pushes the others (the whole
/// file was once refused: "stream did not contain valid UTF-8").
#[test]
fn push_urls_rejects_only_the_non_utf8_line() {
    let redis = RedisServer::start();
    let dir = temp_dir("unreadable");
    let spider = utf8_spider(dir.path(), "utf8push", "list");
    let file = dir.path().join("entries.txt");
    let mut text = b"http://127.0.0.1:9/one\n".to_vec();
    text.extend_from_slice(b"http://127.0.0.1:9/caf\xe9\r\n");
    text.extend_from_slice(b"http://127.0.0.1:9/two\n");
    std::fs::write(&file, text).unwrap();
    let out = crawlworker_with_redis(
        &redis.url(),
        &[
            "push-urls",
            spider.to_str().unwrap(),
            "--file",
            file.to_str().unwrap(),
        ],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(r"entries.txt:2: not pushed: not UTF-8 text: http://127.0.0.1:9/caf\xe9"),
        "{err}"
    );
    assert!(err.contains("pushed 2 entries"), "{err}");
    assert!(err.contains("1 invalid entry not pushed"), "{err}");
    let pushed: Vec<String> = redis.conn().lrange("utf8push:start_urls", 0, -1).unwrap();
    assert_eq!(
        pushed,
        ["http://127.0.0.1:9/one", "http://127.0.0.1:9/two"],
        "{err}"
    );

    // `--from-failed` read the failed list as text, so one such entry
    // there refused them all: it is left there, the others go back.
    let mut conn = redis.conn();
    let failed = crawlworker::frontier::FailedRecord::new(
        &crawlworker::request::Request::get("http://127.0.0.1:9/failed"),
        "HTTP 503",
        "status",
        Some(503),
    );
    conn.rpush::<_, _, ()>("utf8push:failed", b"caf\xe9".as_slice())
        .unwrap();
    conn.rpush::<_, _, ()>("utf8push:failed", serde_json::to_string(&failed).unwrap())
        .unwrap();
    let out = crawlworker_with_redis(
        &redis.url(),
        &["push-urls", spider.to_str().unwrap(), "--from-failed"],
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(r"not re-queued (not a failed-request record): caf\xe9"),
        "{err}"
    );
    assert!(err.contains("re-queued 1 failed request"), "{err}");
    let queued: u64 = conn.zcard("utf8push:requests").unwrap();
    assert_eq!(queued, 1, "{err}");
    let left: u64 = conn.llen("utf8push:failed").unwrap();
    assert_eq!(left, 1, "{err}");
}
