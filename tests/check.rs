//! `crawlworker check`: the shipped spiders pass; every broken fixture
//! spider fails with exactly the text in its `.expected` file; spider
//! files built to hurt it (selectors nested thousands deep, a deny list of
//! millions of patterns) are refused quickly, in little memory, with a
//! message. That `check` and `run` accept the same files: `check_agreement`.

use std::time::Duration;

use crawlworker_testkit::{crawlworker, files, root, stderr, stdout, temp_dir, KillOnDrop};

#[test]
fn shipped_spiders_are_valid() {
    let spiders = files(&root().join("spiders"), "toml");
    assert!(spiders.len() >= 2, "expected at least two example spiders");
    let args: Vec<String> = std::iter::once("check".to_string())
        .chain(
            spiders
                .iter()
                .map(|p| p.strip_prefix(root()).unwrap().display().to_string()),
        )
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = crawlworker(&args);
    assert!(out.status.success(), "check failed:\n{}", stderr(&out));
    assert_eq!(
        stdout(&out).lines().count(),
        spiders.len(),
        "{}",
        stdout(&out)
    );
}

#[test]
fn broken_spiders_fail_with_their_expected_messages() {
    let dir = root().join("tests/fixtures/spiders/broken");
    let spiders = files(&dir, "toml");
    assert!(spiders.len() >= 8, "the broken fixtures are missing");
    let mut failures = Vec::new();
    for spider in &spiders {
        let rel = spider.strip_prefix(root()).unwrap().display().to_string();
        let expected_path = spider.with_extension("expected");
        let expected = std::fs::read_to_string(&expected_path)
            .unwrap_or_else(|e| panic!("{} has no expected file: {e}", expected_path.display()));
        let out = crawlworker(&["check", &rel]);
        if out.status.code() != Some(2) {
            failures.push(format!(
                "{rel}: exit code {:?}, expected 2",
                out.status.code()
            ));
        }
        if stderr(&out).trim_end() != expected.trim_end() {
            failures.push(format!(
                "{rel}: message differs\n--- expected\n{}\n--- actual\n{}",
                expected.trim_end(),
                stderr(&out).trim_end()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_missing_file_is_named() {
    let out = crawlworker(&["check", "spiders/nope.toml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("cannot read spider file spiders/nope.toml"),
        "{}",
        stderr(&out)
    );
}

/// Selectors nested thousands deep are refused with a message naming the
/// limit: nesting is measured before any parser sees the text, for CSS,
/// JSONPath and XPath alike. (CSS with 3000 nested `:not(` once made
/// `check` abort with a stack overflow: exit 134, no message.)
#[test]
fn check_refuses_deeply_nested_selectors_with_a_message() {
    let dir = temp_dir("nesting");
    let deep = [
        (
            "css",
            format!("{}a{}", ":not(".repeat(3000), ")".repeat(3000)),
        ),
        (
            "json",
            format!("${}", "[?(@.a".repeat(2000) + &")]".repeat(2000)),
        ),
        (
            "xpath",
            format!("{}1{}", "(".repeat(1500), ")".repeat(1500)),
        ),
    ];
    for (lang, selector) in deep {
        let path = dir.path().join(format!("deep-{lang}.toml"));
        std::fs::write(
            &path,
            format!(
                "name = \"deep\"\n[items.i]\nf = {{ {lang} = \"{selector}\" }}\n\n[[rules]]\nname = \"r\"\nmatch = 'x'\n  [[rules.extract]]\n  item = \"i\"\n"
            ),
        )
        .unwrap();
        let out = crawlworker(&["check", path.to_str().unwrap()]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{lang}: {err}");
        assert!(
            err.contains(&format!("deep-{lang}.toml:3:"))
                && err.contains("items.i.f")
                && (err.contains("deep; at most 32") || err.contains("deeper than 64")),
            "{lang}: {err}"
        );
        // The message names the limit, not the 15 KB selector.
        assert!(err.len() < 2000, "{lang}: a {} byte message", err.len());
    }
}

/// A huge `deny` list fails fast and small: a file over the size limit is
/// refused before it is read, one under it with too many patterns after
/// parsing, and neither takes long or much memory. (A 50 MB file with 4.2M
/// patterns once took 72 s and 13.5 GB in `check`.)
#[test]
fn check_on_a_huge_deny_list_fails_fast() {
    let dir = temp_dir("huge");
    let spider = |patterns: usize, pattern: &str| {
        let mut s = String::from("name = \"huge\"\ndeny = [\n");
        for i in 0..patterns {
            s.push_str(&format!("'{pattern}{i}',\n"));
        }
        s.push_str("]\n[[rules]]\nname = \"r\"\nmatch = 'x'\n  [[rules.follow]]\n  css = \"a::attr(href)\"\n");
        s
    };
    for (name, patterns, pattern, says, within) in [
        (
            "big.toml",
            4_200_000,
            "/p",
            "a spider file may have at most 4194304",
            10,
        ),
        (
            "many.toml",
            300_000,
            "/p",
            "more than the 10000 a list or table may have",
            10,
        ),
        // 2,500 patterns inside every count limit (34 KB), each compiling
        // to 1 MiB: 3 GB before the spider's regexes were bounded together;
        // now about 240 are compiled (slowly in a debug build) before it is
        // refused.
        (
            "regexes.toml",
            2_500,
            "\\w{20}#",
            "more than the 256 MiB a spider may",
            90,
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, spider(patterns, pattern)).unwrap();
        let started = std::time::Instant::now();
        let mut child = KillOnDrop::spawn(
            std::process::Command::new(crawlworker_testkit::binary())
                .args(["check", path.to_str().unwrap()])
                .stderr(std::process::Stdio::piped()),
        )
        .unwrap();
        // Its peak memory, read while it runs.
        let mut peak_kib = 0u64;
        let status = loop {
            if let Ok(s) = std::fs::read_to_string(format!("/proc/{}/status", child.id())) {
                if let Some(kib) = s
                    .lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
                {
                    peak_kib = peak_kib.max(kib);
                }
            }
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(
                started.elapsed() < Duration::from_secs(within),
                "{name}: check still running after {within} s"
            );
            // How often its memory is sampled, not a wait for an effect.
            std::thread::sleep(Duration::from_millis(5));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
        assert!(
            peak_kib < 1024 * 1024,
            "{name}: check peaked at {peak_kib} KiB"
        );
    }
}

/// `check` names a sharded spider's shards by the hash tag their keys
/// carry on a Redis Cluster, and the slot each is in: one in each third of
/// the slots, so a cluster of three evenly split masters serves one each.
#[test]
fn check_shows_which_cluster_slot_each_shard_is_in() {
    let dir = temp_dir("check-shards");
    let path = dir.path().join("bbs.toml");
    let text = std::fs::read_to_string(root().join("spiders/bbs.toml")).unwrap();
    std::fs::write(&path, format!("{text}\n[keys]\nshards = 3\n")).unwrap();
    let out = crawlworker(&["check", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let line = stdout(&out);
    let slots: Vec<usize> = line
        .split(" slot ")
        .skip(1)
        .map(|s| {
            let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().unwrap()
        })
        .collect();
    assert!(
        line.contains("3 shards, on a Redis Cluster: {bbs} slot "),
        "{line}"
    );
    let mut thirds: Vec<usize> = slots.iter().map(|s| s * 3 / 16384).collect();
    thirds.sort();
    assert_eq!(thirds, [0, 1, 2], "{line}");
}
