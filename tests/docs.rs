//! The documents stay true: the book's tables of settings, Redis keys and
//! stats are the ones the code generates, every link between the README,
//! BENCHMARKS.md and the book (`docs/`) leads somewhere, the book's table
//! of contents lists every chapter, the README opens with the two commands
//! the project promises, the migration guide's spider loads, and its
//! settings table names every scrapy-redis setting a migrating team asks
//! about.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crawlworker::spider::Spider;
use crawlworker_testkit::root;

const GUIDE: &str = "docs/migrating-from-scrapy-redis.md";

fn guide() -> String {
    read(&root().join(GUIDE))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

#[test]
fn the_migration_guides_spider_is_valid() {
    let text = guide();
    let blocks: Vec<&str> = text
        .split("```toml\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    assert!(!blocks.is_empty(), "{GUIDE} has no TOML example");
    for block in blocks {
        let spider = Spider::from_str(GUIDE.as_ref(), block).unwrap_or_else(|e| panic!("{e}"));
        assert!(spider.warnings.is_empty(), "{:?}", spider.warnings);
    }
}

#[test]
fn the_migration_guide_maps_every_scrapy_redis_setting() {
    let text = guide();
    for setting in [
        "REDIS_URL",
        "REDIS_PARAMS",
        "SCHEDULER_PERSIST",
        "SCHEDULER_FLUSH_ON_START",
        "SCHEDULER_IDLE_BEFORE_CLOSE",
        "SCHEDULER_QUEUE_KEY",
        "SCHEDULER_QUEUE_CLASS",
        "SCHEDULER_DUPEFILTER_KEY",
        "DUPEFILTER_CLASS",
        "SCHEDULER_SERIALIZER",
        "REDIS_START_URLS_KEY",
        "REDIS_START_URLS_AS_SET",
        "REDIS_START_URLS_AS_ZSET",
        "REDIS_START_URLS_BATCH_SIZE",
        "MAX_IDLE_TIME_BEFORE_CLOSE",
        "REDIS_ITEMS_KEY",
        "REDIS_ITEMS_SERIALIZER",
        "STATS_KEY",
        "DEPTH_PRIORITY",
        "DEPTH_LIMIT",
        "CONCURRENT_REQUESTS",
        "DOWNLOAD_DELAY",
        "AUTOTHROTTLE_",
        "RETRY_",
        "ROBOTSTXT_OBEY",
        "LinkExtractor",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("| `") && l.contains(setting)),
            "{GUIDE}: the settings table does not mention {setting}"
        );
    }
}

#[test]
fn the_grafana_dashboard_is_valid_json_with_queries() {
    let path = root().join("deploy/grafana/dashboards/crawlworker.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels.len() >= 8);
    for panel in panels {
        let targets = panel["targets"].as_array().unwrap();
        assert!(
            targets.iter().all(|t| t["expr"]
                .as_str()
                .is_some_and(|e| e.contains("crawlworker_"))),
            "{panel}"
        );
    }
}

/// The region of `chapter` between `<!-- generated: NAME -->` and
/// `<!-- end generated -->` holds `table`, generated from the code. With
/// `CRAWLWORKER_BLESS=1` a stale region is rewritten instead (the test
/// still fails, once: run it again).
fn generated_table_is_current(chapter: &str, name: &str, table: &str) {
    let path = root().join(chapter);
    let text = read(&path);
    let open = format!("<!-- generated: {name} -->\n");
    let close = "<!-- end generated -->";
    let start = text.find(&open).unwrap_or_else(|| {
        panic!(
            "{chapter} has no `{}` line: put it before the {name} table, and `{close}` after it",
            open.trim_end()
        )
    }) + open.len();
    let end = start
        + text[start..]
            .find(close)
            .unwrap_or_else(|| panic!("{chapter}: no `{close}` after `{}`", open.trim_end()));
    if text[start..end] == *table {
        return;
    }
    if std::env::var_os("CRAWLWORKER_BLESS").is_some() {
        let updated = format!("{}{table}{}", &text[..start], &text[end..]);
        std::fs::write(&path, updated)
            .unwrap_or_else(|e| panic!("cannot rewrite {}: {e}", path.display()));
        panic!("{chapter}'s {name} table was stale and is rewritten: run the tests again");
    }
    panic!(
        "{chapter}'s {name} table is stale (the code changed); rewrite it with \
         `CRAWLWORKER_BLESS=1 cargo test --test tests docs::`, or paste:\n{table}"
    );
}

#[test]
fn the_settings_chapter_lists_every_setting() {
    generated_table_is_current(
        "docs/settings.md",
        "settings",
        &crawlworker::settings::markdown_table(),
    );
}

#[test]
fn the_keys_chapter_lists_every_redis_key() {
    generated_table_is_current(
        "docs/keys.md",
        "keys",
        &crawlworker::frontier::keys::markdown_table(),
    );
}

#[test]
fn the_stats_chapter_lists_every_stat() {
    generated_table_is_current(
        "docs/stats.md",
        "stats",
        &crawlworker::stats::markdown_table(),
    );
}

/// The book says its table is what `crawlworker settings --markdown`
/// prints.
#[test]
fn crawlworker_settings_prints_the_chapters_table() {
    assert_eq!(
        crawlworker::cli::settings_table(true),
        crawlworker::settings::markdown_table()
    );
}

/// The README, BENCHMARKS.md and every chapter of the book.
fn documents() -> Vec<PathBuf> {
    let docs = root().join("docs");
    let mut out: Vec<PathBuf> = std::fs::read_dir(&docs)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", docs.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    out.sort();
    out.push(root().join("README.md"));
    out.push(root().join("BENCHMARKS.md"));
    out
}

/// The lines of a Markdown text outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// The anchors of a Markdown text's headings, as GitHub makes them:
/// lower case, punctuation but `-` and `_` dropped, spaces as `-`, and
/// `-1`, `-2`, … after a repeated one.
fn anchors(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for line in prose(text) {
        let Some(title) = line.trim_start_matches('#').strip_prefix(' ') else {
            continue;
        };
        if !line.starts_with('#') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        let n = seen.entry(slug.clone()).or_insert(0);
        out.push(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    out
}

/// The relative links of a Markdown text (code spans and blocks left out).
fn relative_links(text: &str) -> Vec<String> {
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").expect("the link pattern compiles");
    let code = regex::Regex::new(r"`[^`]*`").expect("the code span pattern compiles");
    let mut out = Vec::new();
    for line in prose(text) {
        let line = code.replace_all(line, "");
        for c in link.captures_iter(&line) {
            let target = &c[1];
            if !target.contains("://") && !target.starts_with("mailto:") {
                out.push(target.to_string());
            }
        }
    }
    out
}

#[test]
fn every_link_in_the_docs_leads_somewhere() {
    let mut broken = Vec::new();
    for doc in documents() {
        let text = read(&doc);
        for target in relative_links(&text) {
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap_or(Path::new(".")).join(file)
            };
            let name = doc.strip_prefix(root()).unwrap_or(&doc).display();
            if !path.exists() {
                broken.push(format!("{name}: {target} (no such file)"));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if path.extension().is_some_and(|x| x == "md")
                && !anchors(&read(&path)).iter().any(|a| a == anchor)
            {
                broken.push(format!("{name}: {target} (no such heading)"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// mdBook builds the chapters `docs/SUMMARY.md` links; a chapter missing
/// from it would be left out of the book.
#[test]
fn the_books_summary_lists_every_chapter() {
    let summary = read(&root().join("docs/SUMMARY.md"));
    let listed = relative_links(&summary);
    for doc in documents() {
        let Some(name) = doc
            .strip_prefix(root().join("docs"))
            .ok()
            .and_then(|p| p.to_str())
        else {
            continue;
        };
        if name != "SUMMARY.md" {
            assert!(
                listed.iter().any(|l| l == name),
                "docs/SUMMARY.md does not list the chapter {name}"
            );
        }
    }
}

/// The README is a front door: it opens with the command that runs a real
/// crawl on a fresh machine and the one that runs the tests, and CI runs
/// that same test command.
#[test]
fn the_readme_opens_with_the_crawl_and_the_test_command() {
    let readme = read(&root().join("README.md"));
    let commands: Vec<&str> = readme
        .lines()
        .take(20)
        .filter_map(|l| l.strip_prefix("    "))
        .map(|l| l.split(" #").next().unwrap_or(l).trim())
        .collect();
    assert_eq!(commands, ["./scripts/quickstart", "./scripts/test"]);
    let lines = readme.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines: the reference belongs in the book (docs/)"
    );
    let ci = read(&root().join(".ci/run"));
    assert!(
        ci.lines().any(|l| l.trim() == "./scripts/test"),
        ".ci/run does not run the README's test command, ./scripts/test"
    );
}

/// The production build (`scripts/build-pgo`, docs/running.md) is made by
/// CI, which fails when the trained build parses the demo pages
/// differently from the instrumented one: a change that breaks the
/// build users deploy does not go unseen.
#[test]
fn ci_makes_the_production_build_and_it_checks_itself() {
    let ci = read(&root().join(".ci/run"));
    assert!(
        ci.lines().any(|l| l.trim() == "./scripts/build-pgo"),
        ".ci/run does not run ./scripts/build-pgo"
    );
    let script = read(&root().join("scripts/build-pgo"));
    for step in [
        "-Cprofile-generate=",
        "-Cprofile-use=",
        "diff \"$work/parse.instrumented\"",
    ] {
        assert!(script.contains(step), "scripts/build-pgo has no `{step}`");
    }
}

/// The test command runs every test binary of every crate even when one
/// fails (cargo stops at the first failing binary otherwise, and the rest
/// of the suite, the other crates and the doc tests never run, with
/// nothing saying so), and says what it installs before it does.
#[test]
fn the_test_command_runs_the_whole_suite_past_a_failure() {
    let script = read(&root().join("scripts/test"));
    let run = script
        .lines()
        .find(|l| l.trim_start().starts_with("cargo test"))
        .unwrap_or_else(|| panic!("scripts/test runs no `cargo test`"));
    for flag in ["--locked", "--no-fail-fast"] {
        assert!(
            run.split_whitespace().any(|w| w == flag),
            "scripts/test runs `{run}`, without {flag}"
        );
    }
    assert!(
        script.contains("echo \"scripts/test: installing ${missing[*]}"),
        "scripts/test does not say what it installs"
    );
}

/// The quickstart's last words are true: a Redis it started still holds
/// the crawl when it says the items stay in Redis (it is not one of the
/// processes the script stops on exit), and it says how to stop it; its
/// workers show their summaries.
#[test]
fn the_quickstart_leaves_its_redis_running_and_says_so() {
    let script = read(&root().join("scripts/quickstart"));
    let at = script
        .find("redis-server --port")
        .unwrap_or_else(|| panic!("scripts/quickstart starts no redis-server"));
    // The command and what follows it, up to its wait for the ping.
    let start = &script[at..];
    let start = &start[..start.find("for _ in").unwrap_or(start.len())];
    assert!(start.contains("--daemonize yes"), "{start}");
    assert!(
        !start.contains("pids+="),
        "the Redis is stopped on exit: {start}"
    );
    assert!(script.contains("The items stay in Redis"));
    assert!(script.contains("shutdown nosave"), "no word on stopping it");
    assert!(script.contains("crawlworker::summary=info"));
}
