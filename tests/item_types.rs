//! `[items] type_field`: each item says which type it is under the key
//! the spider names, first; off by default; refused when an item type
//! has a field of that name.

use serde_json::Value;

use crawlworker_testkit::{crawlworker, stderr, stdout, temp_dir};

const PAGE: &str = r#"<html><body><h1>A thread</h1>
<div class="comment" data-id="c1"><p>First</p></div>
<div class="comment" data-id="c2"><p>Second</p></div></body></html>"#;

fn spider(items: &str) -> String {
    format!(
        r#"name = "typed"
{items}
[items.thread]
title = "h1::text"

[items.comment]
comment_id = "::attr(data-id)"
text = "p::text"

[[rules]]
name = "thread"
match = '/t/'
  [[rules.extract]]
  item = "thread"
  [[rules.extract]]
  item = "comment"
  each = "div.comment"
"#
    )
}

/// Each item's fields, in their order, as `parse` prints them.
fn parsed(spider_text: &str) -> Vec<Vec<(String, Value)>> {
    let dir = temp_dir("item-types");
    let path = dir.path().join("typed.toml");
    let page = dir.path().join("thread.html");
    std::fs::write(&path, spider_text).unwrap();
    std::fs::write(&page, PAGE).unwrap();
    let out = crawlworker(&[
        "parse",
        path.to_str().unwrap(),
        page.to_str().unwrap(),
        "--url",
        "http://forum.test/t/1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let fields = i["fields"].as_object().unwrap();
            fields.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        })
        .collect()
}

#[test]
fn type_field_puts_each_items_type_first_and_is_off_by_default() {
    let typed = parsed(&spider("[items]\ntype_field = \"kind\"\n"));
    let kinds: Vec<(&str, &Value)> = typed.iter().map(|f| (f[0].0.as_str(), &f[0].1)).collect();
    assert_eq!(
        kinds,
        [
            ("kind", &Value::from("thread")),
            ("kind", &Value::from("comment")),
            ("kind", &Value::from("comment")),
        ]
    );
    assert_eq!(typed[1][1], ("comment_id".to_string(), Value::from("c1")));

    let plain = parsed(&spider(""));
    assert_eq!(plain.len(), 3);
    assert!(
        plain.iter().all(|f| f.iter().all(|(k, _)| k != "kind")),
        "{plain:?}"
    );
    assert_eq!(plain[0], [("title".to_string(), Value::from("A thread"))]);
}

#[test]
fn check_refuses_a_type_field_an_item_type_has_as_a_field() {
    let dir = temp_dir("item-types-clash");
    let path = dir.path().join("typed.toml");
    std::fs::write(&path, spider("[items]\ntype_field = \"title\"\n")).unwrap();
    let out = crawlworker(&["check", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("typed.toml:3:14: items.type_field: item `thread` has a field `title`"),
        "{err}"
    );
    assert!(err.contains("help: rename the field"), "{err}");
}
