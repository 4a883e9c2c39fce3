//! `type = "datetime"` with no `formats` on saved pages of forum engines
//! and frameworks (`tests/fixtures/engines/`, each noting where it comes
//! from): every date reads as the instant the page's `data-expected`
//! says, through `crawlworker parse`.

use serde_json::Value;

use crawlworker_testkit::{crawlworker, stderr, stdout, temp_dir};

/// The page, the elements carrying a date (each an item), and the date
/// field read inside each (a TOML inline table's keys).
const ENGINES: &[(&str, &str, &str)] = &[
    // Rendered by Django's template engine: `title="Jan. 20, 2025, 10:39 a.m."`.
    (
        "django.html",
        "[title][data-expected]",
        r#"css = "::attr(title)""#,
    ),
    ("phpbb.html", "time[data-expected]", r#"css = "::text""#),
    ("xenforo.html", "time.u-dt", r#"css = "::attr(title)""#),
    (
        "vbulletin.html",
        "li.postcontainer",
        r#"css = "span.date ::text", join = "", whitespace = "normalize""#,
    ),
    (
        "discuz.html",
        "div[id^=post_]",
        r#"css = "em[id^=authorposton]::text", re = '发表于\s*(.+)'"#,
    ),
    (
        "discourse.html",
        "span.relative-date",
        r#"css = "::attr(data-time)""#,
    ),
];

fn spider(each: &str, created: &str) -> String {
    format!(
        r#"name = "engine"

[items.post]
created = {{ {created}, type = "datetime", timezone = "UTC", required = true }}
expected = "::attr(data-expected)"

[[rules]]
name = "topic"
match = ['/t/']

  [[rules.extract]]
  item = "post"
  each = "{each}"
"#
    )
}

#[test]
fn engines_default_dates_read_as_their_instants_without_formats() {
    let dir = temp_dir("engine-dates");
    for (page, each, created) in ENGINES {
        let path = dir.path().join(page.replace(".html", ".toml"));
        std::fs::write(&path, spider(each, created)).unwrap();
        let fixture = format!("tests/fixtures/engines/{page}");
        let out = crawlworker(&[
            "parse",
            path.to_str().unwrap(),
            &fixture,
            "--url",
            "http://forum.test/t/42",
        ]);
        assert!(out.status.success(), "{page}: {}", stderr(&out));
        let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
        let items = v["items"].as_array().unwrap();
        assert!(items.len() >= 2, "{page}: {v}");
        assert_eq!(v["dropped"], Value::Array(Vec::new()), "{page}: {v}");
        for item in items {
            let f = &item["fields"];
            assert!(f["expected"].is_string(), "{page}: {f}");
            assert_eq!(f["created"], f["expected"], "{page}: {f}");
        }
    }
}
