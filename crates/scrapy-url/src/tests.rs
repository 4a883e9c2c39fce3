//! Checks the Rust port against vectors produced by the real Python code
//! (`crates/scrapy-url/gen/gen_vectors.py`), plus named behaviours worth
//! pinning on their own. Every mismatch is collected so one run shows them
//! all.

use encoding_rs::{Encoding, UTF_8};
use serde::Deserialize;

use super::*;

const VECTORS: &str = include_str!("../data/vectors.json");

/// How many mismatches a failure message spells out.
const SHOWN_MISMATCHES: usize = 20;

#[derive(Deserialize)]
struct Vectors {
    cases: Vec<Case>,
    encoded_cases: Vec<EncodedCase>,
}

/// One URL through `safe_url_string`, `canonicalize_url`, `scrapy.Request`
/// and the dupefilter. `None` outputs mean Python raised.
#[derive(Deserialize)]
struct Case {
    url: String,
    method: String,
    body_hex: String,
    safe_url: Option<String>,
    canonical_raw: Option<String>,
    canonical_url: Option<String>,
    request_method: Option<String>,
    fingerprint: Option<String>,
    /// Set when `scrapy.Request` refused the URL.
    expect_error: Option<String>,
    /// Set when the request was built but fingerprinting raised.
    fingerprint_error: Option<String>,
}

#[derive(Deserialize)]
struct EncodedCase {
    url: String,
    encoding_label: String,
    safe_url: Option<String>,
}

/// Collects mismatches as (what, input, expected, actual).
#[derive(Default)]
struct Report {
    checks: usize,
    mismatches: Vec<String>,
}

impl Report {
    fn check(&mut self, what: &str, input: &str, expected: Option<&str>, actual: Option<&str>) {
        self.checks += 1;
        if expected != actual {
            self.mismatches.push(format!(
                "{what}({input:?})\n    expected: {expected:?}\n    actual:   {actual:?}"
            ));
        }
    }

    fn assert_clean(&self, source: &str) {
        if self.mismatches.is_empty() {
            return;
        }
        let shown: Vec<&str> = self
            .mismatches
            .iter()
            .take(SHOWN_MISMATCHES)
            .map(String::as_str)
            .collect();
        panic!(
            "{} of {} checks against {source} failed; first {}:\n  {}",
            self.mismatches.len(),
            self.checks,
            shown.len(),
            shown.join("\n  ")
        );
    }
}

fn check_case(report: &mut Report, case: &Case) {
    let body = match hex::decode(&case.body_hex) {
        Ok(body) => body,
        Err(e) => {
            report
                .mismatches
                .push(format!("bad body_hex in vector for {:?}: {e}", case.url));
            return;
        }
    };
    let safe = try_safe_url_string(&case.url, UTF_8).ok();
    report.check(
        "safe_url_string",
        &case.url,
        case.safe_url.as_deref(),
        safe.as_deref(),
    );
    let canonical_raw = try_canonicalize_url(&case.url).ok();
    report.check(
        "canonicalize_url",
        &case.url,
        case.canonical_raw.as_deref(),
        canonical_raw.as_deref(),
    );
    if let Some(safe_url) = &case.safe_url {
        let canonical = try_canonicalize_url(safe_url).ok();
        report.check(
            "canonicalize_url",
            safe_url,
            case.canonical_url.as_deref(),
            canonical.as_deref(),
        );
    }
    if case.fingerprint_error.is_some() {
        // scrapy-redis raised; ours fingerprints the URL as given. Nothing
        // to compare with.
        return;
    }
    let fingerprint = fingerprint_for(&case.method, &case.url, &body).ok();
    let expected = if case.expect_error.is_some() {
        None
    } else {
        case.fingerprint.as_deref()
    };
    let input = format!("{} {} body={}", case.method, case.url, case.body_hex);
    report.check("fingerprint_for", &input, expected, fingerprint.as_deref());
    if let (Some(method), Some(safe_url), Some(expected)) =
        (&case.request_method, &case.safe_url, expected)
    {
        let direct = request_fingerprint(method, safe_url, &body);
        report.check("request_fingerprint", &input, Some(expected), Some(&direct));
    }
}

fn check_encoded(report: &mut Report, case: &EncodedCase) {
    let Some(encoding) = Encoding::for_label(case.encoding_label.as_bytes()) else {
        report
            .mismatches
            .push(format!("unknown encoding label {:?}", case.encoding_label));
        return;
    };
    let safe = try_safe_url_string(&case.url, encoding).ok();
    let input = format!("{} as {}", case.url, case.encoding_label);
    report.check(
        "safe_url_string",
        &input,
        case.safe_url.as_deref(),
        safe.as_deref(),
    );
}

fn check_vectors(json: &str, source: &str) -> usize {
    let vectors: Vectors = match serde_json::from_str(json) {
        Ok(v) => v,
        Err(e) => panic!("{source} is not valid vector JSON: {e}"),
    };
    let mut report = Report::default();
    for case in &vectors.cases {
        check_case(&mut report, case);
    }
    for case in &vectors.encoded_cases {
        check_encoded(&mut report, case);
    }
    report.assert_clean(source);
    vectors.cases.len() + vectors.encoded_cases.len()
}

#[test]
fn all_python_vectors_match() {
    let count = check_vectors(VECTORS, "crates/scrapy-url/data/vectors.json");
    assert!(
        count > 500,
        "only {count} vectors: was vectors.json truncated?"
    );
}

// Named behaviours, each one a w3lib 2.5.0 rule that is easy to get wrong.

#[test]
fn query_arguments_sorted_by_name_then_value() {
    assert_eq!(
        canonicalize_url("http://h/do?c=3&b=5&b=2&a=50"),
        "http://h/do?a=50&b=2&b=5&c=3"
    );
}

#[test]
fn semicolon_no_longer_separates_query_arguments() {
    // w3lib 2.4 split on ";" too; 2.5.0 only splits on "&".
    assert_eq!(
        canonicalize_url("http://h/?b=2;a=1"),
        "http://h/?b=2%3Ba%3D1"
    );
}

#[test]
fn scheme_and_host_lower_cased_default_port_kept() {
    assert_eq!(
        canonicalize_url("HTTP://WWW.Example.COM:80/Path"),
        "http://www.example.com:80/Path"
    );
}

#[test]
fn idna_host_with_utf8_path_and_query() {
    assert_eq!(
        canonicalize_url("http://例子.测试/路径?q=值"),
        "http://xn--fsqu00a.xn--0zwm56d/%E8%B7%AF%E5%BE%84?q=%E5%80%BC"
    );
}

#[test]
fn safe_url_string_is_what_request_stores() {
    assert_eq!(
        safe_url_string("http://h/a b?c=d e#f g", UTF_8),
        "http://h/a%20b?c=d%20e#f%20g"
    );
}

#[test]
fn fingerprint_ignores_fragment_and_query_order() {
    let a = fingerprint_for("GET", "http://h/p?b=2&a=1#x", b"");
    let b = fingerprint_for("get", "http://H/p?a=1&b=2", b"");
    assert!(a.is_ok());
    assert_eq!(a, b);
    assert_ne!(a, fingerprint_for("POST", "http://h/p?a=1&b=2", b""));
}

#[test]
fn refused_urls_are_errors_not_panics() {
    for url in [
        "http://h:99999/",
        "http://[::1/",
        "http://ex＠mple.com/",
        "",
        "%",
        "http://[v1.例:x]/",
    ] {
        assert!(fingerprint_for("GET", url, b"").is_err(), "{url:?}");
        // The infallible forms fall back to the input where Python raises.
        assert_eq!(safe_url_string(url, UTF_8), url);
        let _ = canonicalize_url(url);
    }
}

#[test]
fn huge_hostile_inputs_do_not_panic() {
    let marks = "\u{301}\u{323}".repeat(5_000);
    let long_label = "例".repeat(10_000);
    let inputs = [
        format!("http://a{marks}.com/"),
        format!("http://{long_label}.com/?q={long_label}"),
        format!("http://[{}]/", ":".repeat(1_000)),
        "%".repeat(10_000),
        format!("http://h/{}", "../".repeat(5_000)),
    ];
    for url in &inputs {
        let _ = fingerprint_for("GET", url, b"");
        let _ = canonicalize_url(url);
        let _ = safe_url_string(url, encoding_rs::GBK);
    }
}
