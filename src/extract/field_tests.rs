//! Structured fields on small pages written here: `each` (one value per
//! element), nested `fields` (one object per element), `type =
//! "datetime"` and `transform`, on HTML and JSON, with what a miss does to
//! the item.

use serde_json::{json, Value};

use super::{extract, DropReason, Extraction, Response};
use crate::request::Request;
use crate::spider::Spider;

fn spider(items: &str) -> Spider {
    let text = format!(
        "name = \"t\"\n{items}\n[[rules]]\nname = \"page\"\nmatch = ['.']\n[[rules.extract]]\nitem = \"thread\"\n"
    );
    Spider::from_str("t.toml".as_ref(), &text).unwrap_or_else(|e| panic!("{e}"))
}

/// 2024-03-05 02:30:00 UTC.
fn fetched() -> std::time::SystemTime {
    std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_709_605_800)
}

fn run(spider: &Spider, content_type: &str, body: &str) -> Extraction {
    let request = Request::get("http://127.0.0.1:1/t/1");
    let headers = vec![("Content-Type".to_string(), content_type.to_string())];
    let response = Response {
        url: &request.url,
        status: 200,
        headers: &headers,
        body: body.as_bytes(),
        fetched_at: fetched(),
    };
    extract(spider, &request, &response)
}

fn one_item(spider: &Spider, body: &str) -> Value {
    let x = run(spider, "text/html; charset=utf-8", body);
    assert_eq!(x.items.len(), 1, "dropped: {:?}", x.dropped);
    Value::Object(x.items[0].fields.clone())
}

const THREAD: &str = r#"<html><body>
<h1>Borrow <code>checker</code> tips</h1>
<ul class="tags"><li>rust</li><li> ownership </li><li></li><li>lifetimes</li></ul>
<h2>Truth <code>Value</code> Testing</h2><h2>Boolean Operations — <code>and</code>, <code>or</code></h2>
<div class="post"><span class="author">ann</span><div class="body">First   post
 here</div></div>
<div class="post"><span class="author">bob</span><div class="body"><blockquote>ann wrote: <b>First</b> post<blockquote>deeper</blockquote></blockquote>Agreed.</div></div>
<span class="views">1,234 views</span>
</body></html>"#;

#[test]
fn each_gives_one_value_per_element() {
    let s = spider(
        r#"[items.thread]
title = { css = "h1 ::text", join = "" }
tags = { each = "ul.tags li", css = "::text" }
headings = { each = "h2", xpath = ".//text()", join = "" }
xpath_tags = { each = "//ul[@class='tags']/li", xpath = "./text()" }"#,
    );
    let item = one_item(&s, THREAD);
    assert_eq!(item["title"], json!("Borrow checker tips"));
    // The empty <li> has no value and is left out; each value is stripped.
    assert_eq!(item["tags"], json!(["rust", "ownership", "lifetimes"]));
    assert_eq!(
        item["headings"],
        json!(["Truth Value Testing", "Boolean Operations — and, or"])
    );
    assert_eq!(
        item["xpath_tags"],
        json!(["rust", "ownership", "lifetimes"])
    );
}

#[test]
fn fields_give_one_object_per_element_nested_as_the_page_is() {
    let s = spider(
        r#"[items.thread]
posts = { each = "div.post", fields = { author = "span.author::text", text = { css = "div.body ::text", join = " ", whitespace = "normalize" }, quotes = { each = "blockquote", css = " ::text", join = "" } } }"#,
    );
    let item = one_item(&s, THREAD);
    assert_eq!(
        item["posts"],
        json!([
            {"author": "ann", "text": "First post here", "quotes": null},
            {"author": "bob", "text": "ann wrote: First post deeper Agreed.",
             "quotes": ["ann wrote: First postdeeper", "deeper"]},
        ])
    );
}

#[test]
fn a_required_field_inside_an_element_drops_the_item_naming_its_path() {
    let s = spider(
        r#"[items.thread]
posts = { each = "div.post", fields = { author = "span.author::text", score = { css = "span.score::text", required = true } } }"#,
    );
    let x = run(&s, "text/html", THREAD);
    assert!(x.items.is_empty());
    assert_eq!(x.dropped[0].code, DropReason::MissingRequiredField);
    assert!(
        x.dropped[0].reason.contains("posts.score"),
        "{}",
        x.dropped[0].reason
    );
}

#[test]
fn each_and_fields_read_json_documents() {
    let s = spider(
        r#"[items.thread]
title = { json = "$.title" }
tags = { each = "$.tags[*]", json = "$.name" }
posts = { each = "$.posts[*]", fields = { author = { json = "$.user.name" }, likes = { json = "$.likes", type = "int" } } }"#,
    );
    let body = r#"{"title": "T", "tags": [{"name": "a"}, {"name": "b"}],
        "posts": [{"user": {"name": "ann"}, "likes": "3"}, {"user": {"name": "bob"}, "likes": 5}]}"#;
    let x = run(&s, "application/json", body);
    assert_eq!(x.items.len(), 1, "{x:?}");
    assert_eq!(
        Value::Object(x.items[0].fields.clone()),
        json!({"title": "T", "tags": ["a", "b"],
               "posts": [{"author": "ann", "likes": 3}, {"author": "bob", "likes": 5}]})
    );
}

#[test]
fn dates_are_read_against_the_fetch_time_and_a_miss_counts_as_missing() {
    let s = spider(
        r#"[items.thread]
posted = { css = "span.date::text", type = "datetime", formats = ["%Y-%m-%d %H:%M", "%b %d, %Y %I:%M %p"], timezone = "Asia/Shanghai" }
replies = { each = "li", css = "::text", type = "datetime", timezone = "Asia/Shanghai" }
bad = { css = "span.bad::text", type = "datetime", default = "unknown" }"#,
    );
    let body = r#"<span class="date">Mar 1, 2024 2:02 PM</span><span class="bad">someday</span>
        <ul><li>3 hours ago</li><li>昨天 14:02</li><li>前天</li><li>2024年3月1日</li><li>whenever</li></ul>"#;
    let item = one_item(&s, body);
    assert_eq!(item["posted"], json!("2024-03-01T14:02:00+08:00"));
    assert_eq!(
        item["replies"],
        json!([
            "2024-03-05T07:30:00+08:00",
            "2024-03-04T14:02:00+08:00",
            "2024-03-03T00:00:00+08:00",
            "2024-03-01T00:00:00+08:00"
        ])
    );
    assert_eq!(item["bad"], json!("unknown"));

    let required = spider(
        r#"[items.thread]
posted = { css = "span.bad::text", type = "datetime", required = true }"#,
    );
    let x = run(&required, "text/html", body);
    assert_eq!(x.dropped[0].code, DropReason::WrongType);
}

#[test]
fn field_transforms_shape_values_and_item_transforms_filter_items() {
    let s = spider(
        r#"[items.thread]
transform = 'if .views < 1000 then null else . + {popular: true} end'
views = { css = "span.views::text", transform = 'gsub("[^0-9]"; "") | tonumber' }
tags = { each = "ul.tags li", css = "::text", transform = 'map(ascii_upcase)' }"#,
    );
    let item = one_item(&s, THREAD);
    assert_eq!(
        item,
        json!({"views": 1234, "tags": ["RUST", "OWNERSHIP", "LIFETIMES"], "popular": true})
    );
    let x = run(&s, "text/html", "<span class=views>12 views</span>");
    assert!(x.items.is_empty());
    assert_eq!(x.dropped[0].code, DropReason::DroppedByTransform);
}

#[test]
fn a_failing_transform_drops_the_item_with_its_reason() {
    let s = spider(
        r#"[items.thread]
transform = '.views | error("no")'
views = { css = "span.views::text" }"#,
    );
    let x = run(&s, "text/html", THREAD);
    assert_eq!(x.dropped[0].code, DropReason::TransformFailed);
    let looping = spider(
        r#"[items.thread]
transform = 'last(repeat(.))'
views = { css = "span.views::text" }"#,
    );
    let x = run(&looping, "text/html", THREAD);
    assert_eq!(x.dropped[0].code, DropReason::TransformFailed);
    let reason = &x.dropped[0].reason;
    assert!(
        reason.contains("steps") || reason.contains("ran longer"),
        "{reason}"
    );
}

#[test]
fn a_value_that_does_not_convert_is_noted_with_its_item_and_field() {
    let s = spider(
        r#"[items.thread]
title = { css = "h1 ::text", join = "" }
views = { css = "span.views::text", type = "int" }
posted = { css = "h1::text", type = "datetime" }"#,
    );
    let x = run(&s, "text/html", THREAD);
    assert_eq!(x.items.len(), 1, "{:?}", x.dropped);
    assert_eq!(x.items[0].fields["views"], Value::Null);
    let noted: Vec<(String, String)> = x
        .unconverted
        .iter()
        .map(|u| (u.label(), u.reason.clone()))
        .collect();
    assert_eq!(
        noted,
        [
            (
                "thread.views".to_string(),
                "`1,234 views` is not a whole number".to_string()
            ),
            (
                "thread.posted".to_string(),
                "`Borrow` is not a date".to_string()
            ),
        ]
    );
}

#[test]
fn prepare_tidies_a_value_before_type_reads_it() {
    let s = spider(
        r#"[items.thread]
views = { css = "span.views::text", prepare = 'sub(" views$"; "")', type = "int" }
posted = { css = "p::text", prepare = 'ltrimstr("Posted ")', type = "datetime" }
broken = { css = "p::text", prepare = 'error("no")', type = "int" }
gone = { css = "p::text", prepare = 'null', type = "int" }"#,
    );
    let x = run(
        &s,
        "text/html",
        r#"<p>Posted Nov 28, 2026 at 5:01 PM</p><span class="views">1,234 views</span>"#,
    );
    assert_eq!(x.items.len(), 1, "{:?}", x.dropped);
    let item = &x.items[0].fields;
    assert_eq!(item["views"], json!(1234));
    assert_eq!(item["posted"], json!("2026-11-28T17:01:00Z"));
    // A failing `prepare` is noted; a `null` one is a missing value.
    assert_eq!(item["broken"], Value::Null);
    assert_eq!(item["gone"], Value::Null);
    let noted: Vec<String> = x.unconverted.iter().map(|u| u.label()).collect();
    assert_eq!(noted, ["thread.broken"]);
    assert!(x.unconverted[0].reason.contains("`prepare` failed"));
}

/// `[[…]]` nesting `n` arrays.
fn nested(n: usize) -> String {
    format!("{}{}", "[".repeat(n), "]".repeat(n))
}

#[test]
fn a_value_nested_too_deep_is_a_missing_field_with_its_reason() {
    // 3,000 arrays in a page's `<script>` once aborted every worker that
    // read it with `fromjson`.
    let s = spider(
        r#"[items.thread]
title = { css = "h1 ::text", join = "" }
data = { css = "script::text", transform = 'fromjson' }"#,
    );
    let page = format!("<h1>Tips</h1><script>{}</script>", nested(3000));
    let x = run(&s, "text/html", &page);
    assert_eq!(x.items.len(), 1, "{:?}", x.dropped);
    assert_eq!(x.items[0].fields["title"], json!("Tips"));
    assert_eq!(x.items[0].fields["data"], Value::Null);
    assert_eq!(x.unconverted.len(), 1, "{:?}", x.unconverted);
    assert_eq!(x.unconverted[0].label(), "thread.data");
    let reason = &x.unconverted[0].reason;
    assert!(reason.contains("deeper than 64"), "{reason}");

    // A JSON page within serde_json's 128 levels, whose field takes a value
    // too deep for an item to hold.
    let s = spider(
        r#"[items.thread]
title = { json = "$.title" }
data = { json = "$.data" }"#,
    );
    let body = format!(r#"{{"title": "Tips", "data": {}}}"#, nested(100));
    let x = run(&s, "application/json", &body);
    assert_eq!(x.items.len(), 1, "{:?}", x.dropped);
    assert_eq!(x.items[0].fields["data"], Value::Null);
    assert!(x.unconverted[0].reason.contains("deeper than 64"));
}
