//! `crawlworker check`: the shipped spiders pass; every broken fixture
//! spider fails with exactly the text in its `.expected` file.

use crawlworker_testkit::{crawlworker, files, root, stderr, stdout};

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
