//! What a benchmark reads of a Redis server's own accounting: `INFO`
//! numbers, its CPU, the script calls it ran and a key's memory.

/// A number of `INFO section`, 0 when absent.
pub fn info_number(conn: &mut redis::Connection, section: &str, field: &str) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg(section)
        .query(conn)
        .unwrap_or_else(|e| panic!("INFO {section}: {e}"));
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Seconds of CPU the server has used (user and system).
pub fn redis_cpu(conn: &mut redis::Connection) -> f64 {
    info_number(conn, "cpu", "used_cpu_user") + info_number(conn, "cpu", "used_cpu_sys")
}

/// Starts a measurement: clears the server's command counts (`CONFIG
/// RESETSTAT`, for [`script_calls`]) and returns its CPU so far (for
/// [`redis_cpu`] at the end to be taken from).
pub fn start_counting(conn: &mut redis::Connection) -> f64 {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(conn)
        .unwrap_or_else(|e| panic!("CONFIG RESETSTAT: {e}"));
    redis_cpu(conn)
}

/// Script calls (EVAL, EVALSHA, FCALL) since the last `CONFIG RESETSTAT`.
pub fn script_calls(conn: &mut redis::Connection) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(conn)
        .unwrap_or_else(|e| panic!("INFO commandstats: {e}"));
    info.lines()
        .filter(|l| {
            ["cmdstat_evalsha:", "cmdstat_eval:", "cmdstat_fcall:"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<f64>()
                .ok()
        })
        .sum()
}

/// `MEMORY USAGE` of `key` counted whole (`SAMPLES 0`), 0 when absent.
pub fn memory_usage(conn: &mut redis::Connection, key: &str) -> f64 {
    redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query::<Option<f64>>(conn)
        .ok()
        .flatten()
        .unwrap_or(0.0)
}
