//! The workers' heartbeats in a spider's workers hash (`<spider>:workers`),
//! read as markers: a worker that has beaten after a moment has run past
//! it, so a test that then asserts something did not happen knows every
//! worker had its chance to do it. What the heartbeats mean to `stats` is
//! tested with the commands that show them (`tools`, `cluster`).

use std::collections::BTreeMap;
use std::time::Duration;

use crawlworker::frontier::Heartbeat;
use crawlworker_testkit::eventually;

/// Now, as heartbeats count time: seconds since the epoch.
pub fn now() -> f64 {
    crawlworker::frontier::now_secs()
}

/// Each worker's last heartbeat in `<spider>:workers`, by pid.
pub fn heartbeats(conn: &mut redis::Connection, spider: &str) -> BTreeMap<u32, f64> {
    let key = format!("{spider}:workers");
    let raw: BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(&key)
        .query(conn)
        .unwrap_or_else(|e| panic!("HGETALL {key}: {e}"));
    raw.values()
        .map(|json| {
            let beat: Heartbeat = serde_json::from_str(json)
                .unwrap_or_else(|e| panic!("a heartbeat in {key} is not one: {e}: {json}"));
            (beat.pid, beat.heartbeat)
        })
        .collect()
}

/// Waits until `workers` workers of `spider` have each beaten at or after
/// `moment` (seconds since the epoch). Workers beat every third of their
/// lease, at most every 5 s.
pub fn wait_all_beaten_after(
    conn: &mut redis::Connection,
    spider: &str,
    workers: usize,
    moment: f64,
) {
    let what = format!("{workers} workers of {spider} beat after {moment:.3}");
    eventually(&what, Duration::from_secs(30), || {
        let beats = heartbeats(conn, spider);
        (beats.len() >= workers && beats.values().all(|&at| at >= moment)).then_some(())
    });
}

/// Waits until worker `pid` of `spider` has beaten after `moment`; when.
pub fn wait_beaten_after(conn: &mut redis::Connection, spider: &str, pid: u32, moment: f64) -> f64 {
    let what = format!("worker {pid} of {spider} beats after {moment:.3}");
    eventually(&what, Duration::from_secs(30), || {
        heartbeats(conn, spider)
            .get(&pid)
            .copied()
            .filter(|&at| at > moment)
    })
}
