//! `crawlworker fingerprint` prints what the dupefilter stores for a URL.

use crawlworker_testkit::{crawlworker, stdout};

#[test]
fn prints_fingerprint_and_canonical_form() {
    let out = crawlworker(&["fingerprint", "http://Forum.INVALID/a b?b=2&a=1#frag"]);
    assert!(out.status.success());
    let text = stdout(&out);
    let line = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| panic!("no `{key}` line in:\n{text}"))
    };
    assert_eq!(line("canonical"), "http://forum.invalid/a%20b?a=1&b=2");
    assert_eq!(line("fingerprint").len(), 40);
    let again = crawlworker(&["fingerprint", "http://forum.invalid/a%20b?a=1&b=2"]);
    assert!(
        stdout(&again).contains(&line("fingerprint")),
        "equivalent URLs must share a fingerprint"
    );
    let post = crawlworker(&[
        "fingerprint",
        "http://forum.invalid/a%20b?a=1&b=2",
        "--method",
        "post",
        "--body",
        "x=1",
    ]);
    assert!(
        !stdout(&post).contains(&line("fingerprint")),
        "a POST body changes the fingerprint"
    );
}

#[test]
fn what_is_not_a_url_is_refused() {
    let out = crawlworker(&["fingerprint", "not-a-url"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    let err = crawlworker_testkit::stderr(&out);
    assert!(err.contains("`not-a-url` is not an absolute URL"), "{err}");
}
