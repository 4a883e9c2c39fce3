//! `check` and `run` accept exactly the same spider files, and what they
//! accept can run: every shipped spider is mutated in a fixed,
//! deterministic way (numbers made negative, zero or huge, strings emptied
//! or broken, types swapped, keys removed or unknown ones added, every
//! setting given out-of-range values, priorities out of range) and each
//! mutant goes through the check path (`Spider::load`, what `crawlworker
//! check` calls) and the run path's validation (`load_spider` with the
//! settings layered, then the HTTP client `run` builds), in process. Both
//! must agree, and an accepted mutant must be usable: no zero concurrency
//! that hangs the worker, no timeout that fails every request, durations
//! and priorities within what the worker's arithmetic holds. A few mutants
//! also go through the real binary: `crawlworker check` and `crawlworker
//! run --until-drained` against a test Redis with an empty start key.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crawlworker::config::Config;
use crawlworker::downloader::HttpClient;
use crawlworker::settings::{Overrides, Settings, MAX_DURATION};
use crawlworker::spider::Spider;
use crawlworker_testkit::{binary, files, root, KillOnDrop, RedisServer};
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, Value};

/// A mutant spider: what was changed, and its text.
struct Mutant {
    what: String,
    text: String,
}

/// What to do to the `target`-th value of a document (values counted
/// depth first, in file order, tables' values and array elements alike).
enum Op {
    Replace(Value),
    /// Remove the key (values in tables only).
    Remove,
}

/// Applies `op` to the `target`-th value; returns the value's path and
/// what it was, or `None` when there are fewer values (or it cannot be
/// removed).
fn mutate(doc: &mut DocumentMut, target: usize, op: &Op) -> Option<(String, Value)> {
    let mut seen = 0;
    walk_table(doc.as_table_mut(), "", target, &mut seen, op)
}

fn walk_table(
    t: &mut Table,
    path: &str,
    target: usize,
    seen: &mut usize,
    op: &Op,
) -> Option<(String, Value)> {
    let keys: Vec<String> = t.iter().map(|(k, _)| k.to_string()).collect();
    for k in keys {
        let here = format!("{path}.{k}");
        let item = t.get_mut(&k)?;
        match item {
            Item::Value(v) => {
                if *seen == target {
                    *seen += 1;
                    let old = v.clone();
                    match op {
                        Op::Replace(new) => *v = new.clone(),
                        Op::Remove => {
                            t.remove(&k);
                        }
                    }
                    return Some((here, old));
                }
                *seen += 1;
                if let Some(found) = walk_value(v, &here, target, seen, op) {
                    return Some(found);
                }
            }
            Item::Table(inner) => {
                if let Some(found) = walk_table(inner, &here, target, seen, op) {
                    return Some(found);
                }
            }
            Item::ArrayOfTables(a) => {
                for (i, inner) in a.iter_mut().enumerate() {
                    if let Some(found) =
                        walk_table(inner, &format!("{here}[{i}]"), target, seen, op)
                    {
                        return Some(found);
                    }
                }
            }
            Item::None => {}
        }
    }
    None
}

/// The values inside an inline table or array (`v` itself is counted by
/// the caller); removal applies to inline tables' keys.
fn walk_value(
    v: &mut Value,
    path: &str,
    target: usize,
    seen: &mut usize,
    op: &Op,
) -> Option<(String, Value)> {
    match v {
        Value::InlineTable(t) => {
            let keys: Vec<String> = t.iter().map(|(k, _)| k.to_string()).collect();
            for k in keys {
                let here = format!("{path}.{k}");
                if *seen == target {
                    *seen += 1;
                    let old = t.get(&k)?.clone();
                    match op {
                        Op::Replace(new) => {
                            t.insert(&k, new.clone());
                        }
                        Op::Remove => {
                            t.remove(&k);
                        }
                    }
                    return Some((here, old));
                }
                *seen += 1;
                if let Some(found) = walk_value(t.get_mut(&k)?, &here, target, seen, op) {
                    return Some(found);
                }
            }
            None
        }
        Value::Array(a) => {
            for i in 0..a.len() {
                let here = format!("{path}[{i}]");
                if *seen == target {
                    *seen += 1;
                    let old = a.get(i)?.clone();
                    match op {
                        Op::Replace(new) => {
                            a.replace(i, new.clone());
                        }
                        Op::Remove => {
                            a.remove(i);
                        }
                    }
                    return Some((here, old));
                }
                *seen += 1;
                if let Some(found) = walk_value(a.get_mut(i)?, &here, target, seen, op) {
                    return Some(found);
                }
            }
            None
        }
        _ => None,
    }
}

/// What replaces a value, by the value's current type.
fn replacements(v: &Value) -> Vec<(&'static str, Value)> {
    let mut out: Vec<(&'static str, Value)> = vec![
        ("an empty table", Value::InlineTable(InlineTable::new())),
        ("an empty array", Value::Array(Array::new())),
    ];
    match v {
        Value::Integer(_) | Value::Float(_) => out.extend([
            ("-1", Value::from(-1)),
            ("0", Value::from(0)),
            ("i64::MAX", Value::from(i64::MAX)),
            ("i64::MIN", Value::from(i64::MIN)),
            ("1e308", Value::from(1e308)),
            ("-0.5", Value::from(-0.5)),
            ("nan", Value::from(f64::NAN)),
            ("inf", Value::from(f64::INFINITY)),
            ("a string", Value::from("NaN")),
            ("true", Value::from(true)),
        ]),
        Value::String(_) => out.extend([
            ("empty", Value::from("")),
            ("spaces", Value::from("   ")),
            ("`(`", Value::from("(")),
            ("`[[`", Value::from("[[")),
            ("`{`", Value::from("{")),
            ("`$$`", Value::from("$$")),
            ("`::`", Value::from("::")),
            ("`//`", Value::from("//")),
            ("`-1`", Value::from("-1")),
            ("`{nope}`", Value::from("{nope}")),
            ("a NUL", Value::from("a\u{0}b")),
            ("an integer", Value::from(1)),
            ("a float", Value::from(1.5)),
            ("false", Value::from(false)),
        ]),
        Value::Boolean(_) => out.extend([("a string", Value::from("true")), ("1", Value::from(1))]),
        Value::Array(_) => out.extend([
            ("a string", Value::from("x")),
            (
                "an array of integers",
                Value::Array(Array::from_iter([1, 2])),
            ),
            ("an array with \"\"", Value::Array(Array::from_iter([""]))),
        ]),
        Value::InlineTable(_) => out.extend([
            ("a string", Value::from("x")),
            ("an integer", Value::from(3)),
        ]),
        Value::Datetime(_) => {}
    }
    out
}

/// Values every setting is tried with.
fn setting_values() -> Vec<(&'static str, Value)> {
    vec![
        ("-1", Value::from(-1)),
        ("0", Value::from(0)),
        ("i64::MAX", Value::from(i64::MAX)),
        ("1e308", Value::from(1e308)),
        ("nan", Value::from(f64::NAN)),
        ("\"NaN\"", Value::from("NaN")),
        ("\"\"", Value::from("")),
        (
            "\"18446744073709551615\"",
            Value::from("18446744073709551615"),
        ),
        ("[]", Value::Array(Array::new())),
    ]
}

/// Every mutant of one spider text; `with_settings` adds the settings
/// family (the same for every spider, so tried on one).
fn mutants(text: &str, with_settings: bool) -> Vec<Mutant> {
    let doc: DocumentMut = text.parse().expect("a shipped spider is valid TOML");
    let mut out = Vec::new();
    for target in 0.. {
        let mut removed = doc.clone();
        let Some((path, old)) = mutate(&mut removed, target, &Op::Remove) else {
            break;
        };
        out.push(Mutant {
            what: format!("{path} removed"),
            text: removed.to_string(),
        });
        // One replacement per value, in rotation: every kind is tried on
        // many values while the test stays within a minute (a debug build
        // loads a spider in about 20 ms, twice per mutant).
        let all = replacements(&old);
        let pick = (target * 7 + text.len()) % all.len();
        if let Some((name, new)) = all.into_iter().nth(pick) {
            let mut changed = doc.clone();
            mutate(&mut changed, target, &Op::Replace(new));
            out.push(Mutant {
                what: format!("{path} = {name}"),
                text: changed.to_string(),
            });
        }
    }
    let with = |f: &dyn Fn(&mut DocumentMut), what: String| {
        let mut d = doc.clone();
        f(&mut d);
        Mutant {
            what,
            text: d.to_string(),
        }
    };
    out.push(with(
        &|d| d["nope"] = toml_edit::value(1),
        "unknown key".into(),
    ));
    out.push(with(
        &|d| d["rules"][0]["nope"] = toml_edit::value(1),
        "unknown rule key".into(),
    ));
    out.push(with(
        &|d| d["rules"] = Item::ArrayOfTables(Default::default()),
        "no rules".into(),
    ));
    out.push(with(
        &|d| d["rules"][0]["follow"][0]["priority"] = toml_edit::value(i64::MAX),
        "follow priority i64::MAX".into(),
    ));
    out.push(with(
        &|d| d["start"]["priority"] = toml_edit::value(-1_000_000_000_000i64),
        "start priority far out of range".into(),
    ));
    if with_settings {
        for s in crawlworker::settings::catalogue() {
            for (name, v) in setting_values() {
                out.push(with(
                    &|d| {
                        if d.get("settings").is_none() {
                            d["settings"] = toml_edit::table();
                        }
                        d["settings"][s.name] = Item::Value(v.clone());
                    },
                    format!("settings.{} = {name}", s.name),
                ));
            }
        }
    }
    out
}

/// What `crawlworker check` does with a file.
fn check_path(path: &Path) -> Result<Spider, String> {
    Spider::load(path).map_err(|e| e.to_string())
}

/// What `crawlworker run` does with a file before it needs Redis: the
/// spider with its settings layered, and the HTTP client built from them.
/// The client depends only on the settings, and most mutants keep them:
/// each distinct settings value builds one (`clients` remembers).
fn run_path(
    path: &Path,
    clients: &mut std::collections::HashMap<String, Result<(), String>>,
) -> Result<Settings, String> {
    let spider = crawlworker::cli::load_spider(&Config::default(), path, &Overrides::default())
        .map_err(|e| e.to_string())?;
    clients
        .entry(format!("{:?}", spider.settings))
        .or_insert_with(|| {
            HttpClient::new(&spider.settings)
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .clone()?;
    Ok(spider.settings)
}

/// Why an accepted spider could not do its job, if it could not.
fn unusable(spider: &Spider, s: &Settings) -> Option<String> {
    let durations = [
        ("download_delay", s.download_delay),
        ("dupefilter_ttl", s.dupefilter_ttl),
        ("retry_backoff_base", s.retry_backoff_base),
        ("retry_backoff_max", s.retry_backoff_max),
        ("robotstxt_ttl", s.robotstxt_ttl),
        ("adaptive_backoff_max_delay", s.adaptive_backoff_max_delay),
        ("download_timeout", s.download_timeout),
        ("connect_timeout", s.connect_timeout),
        ("lease_timeout", s.lease_timeout),
        ("commit_wait", s.commit_wait),
        ("idle_recheck", s.idle_recheck),
        ("log_stats_interval", s.log_stats_interval),
        ("shutdown_grace", s.shutdown_grace),
    ];
    let max_priority = crawlworker::frontier::MAX_PRIORITY;
    let priorities_ok = spider
        .rules
        .iter()
        .flat_map(|r| &r.follow)
        .all(|f| f.priority.abs() <= max_priority)
        && match &spider.start.priority {
            crawlworker::spider::IntSource::Fixed(p) => p.abs() <= max_priority,
            crawlworker::spider::IntSource::Template(_) => true,
        };
    if s.concurrent_requests == 0 || s.concurrent_requests_per_domain == 0 {
        Some("zero concurrency: the worker would never download".into())
    } else if s.download_timeout < Duration::from_millis(100)
        || s.connect_timeout < Duration::from_millis(100)
    {
        Some("a timeout under 100ms fails every request".into())
    } else if s.lease_timeout < Duration::from_millis(100) {
        Some("a lease under 100ms expires while the page downloads".into())
    } else if let Some((name, _)) = durations.iter().find(|(_, d)| *d > MAX_DURATION) {
        Some(format!("{name} is longer than {MAX_DURATION:?}"))
    } else if s.depth_priority.abs() > max_priority || !priorities_ok {
        Some("a priority outside the frontier's range".into())
    } else if !(s.max_requests_per_second.is_finite() && s.max_requests_per_second >= 0.0) {
        Some("max_requests_per_second is not a number of 0 or more".into())
    } else if spider.rules.is_empty() {
        Some("no rules".into())
    } else {
        None
    }
}

/// `check` and `run` accept exactly the same files, with the mutants above
/// (25 invalid spiders once passed `check`, then were refused by `run`,
/// failed every request or hung the worker).
#[test]
fn check_and_run_accept_the_same_spider_files() {
    let started = Instant::now();
    let dir = crawlworker_testkit::temp_dir("agreement");
    let shipped = files(&root().join("spiders"), "toml");
    assert!(shipped.len() >= 5, "the shipped spiders are missing");
    let (mut tried, mut accepted) = (0, 0);
    let mut disagreements = Vec::new();
    let mut meaningless = Vec::new();
    let mut samples: Vec<(PathBuf, bool)> = Vec::new();
    let mut clients = std::collections::HashMap::new();
    for (n, original) in shipped.iter().enumerate() {
        let text = std::fs::read_to_string(original).expect("read a shipped spider");
        let name = original.file_name().expect("a file name");
        // Beside the others, so `to_spider` targets resolve.
        let here = dir.path().join(format!("s{n}"));
        std::fs::create_dir_all(&here).expect("make a directory");
        for other in &shipped {
            std::fs::copy(other, here.join(other.file_name().expect("a file name")))
                .expect("copy a spider");
        }
        let path = here.join(name);
        for m in mutants(&text, n == 0) {
            std::fs::write(&path, &m.text).expect("write a mutant");
            tried += 1;
            let check = check_path(&path);
            let run = run_path(&path, &mut clients);
            let label = format!("{} with {}", name.to_string_lossy(), m.what);
            match (&check, &run) {
                (Ok(spider), Ok(settings)) => {
                    accepted += 1;
                    if let Some(why) = unusable(spider, settings) {
                        meaningless.push(format!("{label}: accepted, but {why}"));
                    }
                }
                (Err(_), Err(_)) => {}
                (Ok(_), Err(e)) => {
                    disagreements.push(format!("{label}: check accepts it, run refuses: {e}"))
                }
                (Err(e), Ok(_)) => {
                    disagreements.push(format!("{label}: run accepts it, check refuses: {e}"))
                }
            }
            // A few of each kind through the real binary, from the
            // first spider (it needs no other server to drain).
            if n == 0
                && samples
                    .iter()
                    .filter(|(_, ok)| *ok == check.is_ok())
                    .count()
                    < 3
            {
                let keep = here.join(format!("sample{}.toml", samples.len()));
                std::fs::write(&keep, &m.text).expect("keep a sample");
                samples.push((keep, check.is_ok()));
            }
        }
        std::fs::write(&path, &text).expect("restore the spider");
    }
    assert!(
        disagreements.is_empty() && meaningless.is_empty(),
        "{} of {tried} mutants:\n{}\n{}",
        disagreements.len() + meaningless.len(),
        disagreements.join("\n"),
        meaningless.join("\n")
    );
    // The family must exercise both outcomes, or it tests nothing.
    assert!(
        accepted > 50 && tried - accepted > 300,
        "{accepted} of {tried} accepted"
    );
    let in_process = started.elapsed();

    let redis = RedisServer::start();
    for (sample, ok) in &samples {
        let check = Command::new(binary())
            .arg("check")
            .arg(sample)
            .output()
            .expect("run crawlworker check");
        assert_eq!(
            check.status.success(),
            *ok,
            "{}: the binary's check disagrees with Spider::load\n{}",
            sample.display(),
            String::from_utf8_lossy(&check.stderr)
        );
        let run = run_until_drained(sample, &redis.url());
        assert_eq!(
            run.0,
            *ok,
            "{}: `check` says {}, `run --until-drained` {} on an empty start key:\n{}",
            sample.display(),
            if *ok { "ok" } else { "invalid" },
            if run.0 { "succeeded" } else { "failed" },
            run.1
        );
    }
    assert!(
        samples.iter().any(|(_, ok)| *ok) && samples.iter().any(|(_, ok)| !*ok),
        "the binary saw only one outcome"
    );
    eprintln!(
        "{tried} mutants, {accepted} accepted, in {in_process:?} in process; {} through the binary",
        samples.len()
    );
}

/// `crawlworker run SPIDER --until-drained` on an empty start key: whether
/// it exited 0, and what it said. A run that does not end within 60 s
/// fails the test (a hung worker is what this catches).
fn run_until_drained(spider: &Path, redis: &str) -> (bool, String) {
    let mut child = KillOnDrop::spawn(
        Command::new(binary())
            .arg("run")
            .arg(spider)
            .args(["--redis", redis, "--until-drained"])
            .env("CRAWLWORKER_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped()),
    )
    .expect("start crawlworker run");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("wait for crawlworker run") {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            return (status.success(), err);
        }
        if Instant::now() > deadline {
            child.kill_now();
            panic!(
                "{}: run --until-drained did not end within 60 s",
                spider.display()
            );
        }
        // How often the exit is polled, not a wait for an effect.
        std::thread::sleep(Duration::from_millis(50));
    }
}
