//! The extractor on the demo forum's pages, with the shipped `bbs` spider:
//! every field checked against the site model it was rendered from.

use serde_json::{json, Map, Value};

use super::{extract, Extraction, Response};
use crate::request::Request;
use crate::spider::Spider;
use crawlworker_demo::{self as demo, Site};

const HOST: &str = "http://127.0.0.1:8700";

fn bbs() -> Spider {
    Spider::from_str(
        "spiders/bbs.toml".as_ref(),
        include_str!("../../spiders/bbs.toml"),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn meta(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

/// Renders `path` from the demo site and extracts it as the crawl would.
fn page(
    spider: &Spider,
    site: &Site,
    path: &str,
    rule: Option<&str>,
    context: Value,
) -> Extraction {
    let page = demo::render(site, path);
    let headers = vec![("Content-Type".to_string(), page.content_type.clone())];
    let request = Request {
        rule: rule.map(str::to_string),
        meta: meta(context),
        ..Request::get(&format!("{HOST}{path}"))
    };
    let response = Response {
        url: &request.url,
        status: page.status,
        headers: &headers,
        body: &page.body,
        fetched_at: std::time::SystemTime::UNIX_EPOCH,
    };
    extract(spider, &request, &response)
}

fn urls(x: &Extraction) -> Vec<&str> {
    x.requests.iter().map(|r| r.url.as_str()).collect()
}

#[test]
fn list_page_follows_posts_and_next_page_with_context() {
    let (spider, site) = (bbs(), Site::demo());
    let x = page(
        &spider,
        &site,
        "/list/00001/1",
        Some("list"),
        json!({"forum_id": "00001", "max_page": 5}),
    );
    assert_eq!(x.rule.as_deref(), Some("list"));
    assert_eq!(
        (x.encoding, x.charset_source),
        ("UTF-8", super::charset::CharsetSource::Header)
    );
    assert!(x.items.is_empty());
    let forum = site.forum("00001").unwrap();
    let mut expected: Vec<String> = forum
        .page(1)
        .unwrap()
        .iter()
        .map(|id| format!("{HOST}/post/{id}"))
        .collect();
    expected.push(format!("{HOST}/list/00001/2"));
    assert_eq!(urls(&x), expected);
    for post in &x.requests[..4] {
        assert_eq!(
            (post.priority, post.depth, post.rule.as_deref()),
            (10, 1, Some("post"))
        );
        assert_eq!(post.meta, meta(json!({"forum_id": "00001"})));
        assert!(!post.dont_filter);
    }
    let next = &x.requests[4];
    assert_eq!(
        (
            next.priority,
            next.depth,
            next.rule.as_deref(),
            next.dont_filter
        ),
        (0, 1, Some("list"), true)
    );
    assert_eq!(next.meta, meta(json!({"forum_id": "00001", "max_page": 5})));
}

#[test]
fn pagination_stops_at_the_tasks_max_page() {
    let (spider, site) = (bbs(), Site::demo());
    let x = page(
        &spider,
        &site,
        "/list/00001/5",
        Some("list"),
        json!({"forum_id": "00001", "max_page": 5}),
    );
    assert_eq!(x.requests.len(), 4, "{:?}", urls(&x));
    assert!(x.requests.iter().all(|r| r.url.contains("/post/")));
    assert_eq!(x.filtered.pagination, 1);
    let x = page(
        &spider,
        &site,
        "/list/00001/5",
        Some("list"),
        json!({"forum_id": "00001", "max_page": 7}),
    );
    assert_eq!(x.requests.len(), 5);
}

#[test]
fn gbk_list_page_with_meta_charset_encodes_its_chinese_query_in_gbk() {
    let (spider, site) = (bbs(), Site::demo());
    let x = page(
        &spider,
        &site,
        "/list/00002/1",
        Some("list"),
        json!({"forum_id": "00002", "max_page": 3}),
    );
    assert_eq!(
        (x.encoding, x.charset_source),
        ("GBK", super::charset::CharsetSource::Meta)
    );
    // 最新 in GBK is D7EE D0C2; a browser (and Scrapy) send it so.
    assert_eq!(
        urls(&x).last().copied(),
        Some(format!("{HOST}/list/00002/2?order=%D7%EE%D0%C2").as_str())
    );
    let posts = site.forum("00002").unwrap().page(1).unwrap();
    assert_eq!(
        &urls(&x)[..posts.len()],
        posts
            .iter()
            .map(|id| format!("{HOST}/post/{id}"))
            .collect::<Vec<_>>()
    );
}

#[test]
fn base_href_is_honoured() {
    let (spider, site) = (bbs(), Site::demo());
    let x = page(
        &spider,
        &site,
        "/list/00003/1",
        Some("list"),
        json!({"forum_id": "00003", "max_page": 2}),
    );
    let forum = site.forum("00003").unwrap();
    assert!(forum.base_href);
    let mut expected: Vec<String> = forum
        .page(1)
        .unwrap()
        .iter()
        .map(|id| format!("{HOST}/post/{id}"))
        .collect();
    expected.push(format!("{HOST}/list/00003/2?order=%D7%EE%D0%C2"));
    assert_eq!(urls(&x), expected);
}

fn expected_post(post: &demo::Post) -> Value {
    demo::expected::post_item(post, HOST)
}

#[test]
fn post_pages_give_every_field() {
    let (spider, site) = (bbs(), Site::demo());
    for forum in ["00001", "00002", "00003"] {
        let forum = site.forum(forum).unwrap();
        let id = forum.page(1).unwrap()[0];
        let post = site.post(id).unwrap();
        let x = page(
            &spider,
            &site,
            &format!("/post/{id}"),
            Some("post"),
            json!({"forum_id": forum.id}),
        );
        assert_eq!(x.dropped, vec![]);
        assert_eq!(x.items.len(), 1);
        assert_eq!(x.items[0].kind, "post");
        let got = Value::Object(x.items[0].fields.clone());
        let want = expected_post(post);
        for (k, v) in want.as_object().unwrap() {
            assert_eq!(&got[k], v, "post {id} field `{k}`");
        }
        assert_eq!(
            got.as_object().unwrap().len(),
            want.as_object().unwrap().len()
        );
        if post.comments.is_empty() {
            assert!(x.requests.is_empty());
        } else {
            assert_eq!(urls(&x), [format!("{HOST}/comment/{id}/1")]);
            assert_eq!(
                (x.requests[0].priority, x.requests[0].rule.as_deref()),
                (20, Some("comment"))
            );
        }
    }
}

#[test]
fn comment_pages_give_one_item_per_comment() {
    let (spider, site) = (bbs(), Site::demo());
    let post = site
        .posts
        .values()
        .find(|p| p.comments.len() > demo::COMMENTS_PER_PAGE && p.forum_id == "00002")
        .expect("the demo has a GBK post with two comment pages");
    let x = page(
        &spider,
        &site,
        &format!("/comment/{}/1", post.id),
        None,
        json!({"forum_id": "00002"}),
    );
    assert_eq!(x.rule.as_deref(), Some("comment"));
    let expected: Vec<Value> = post
        .comments_on_page(1)
        .unwrap()
        .iter()
        .map(|c| demo::expected::comment_item(post, c))
        .collect();
    let got: Vec<Value> = x
        .items
        .iter()
        .map(|i| Value::Object(i.fields.clone()))
        .collect();
    assert_eq!(got, expected);
    assert_eq!(urls(&x), [format!("{HOST}/comment/{}/2", post.id)]);
}

#[test]
fn a_page_missing_required_fields_drops_the_item_and_says_why() {
    let (spider, site) = (bbs(), Site::demo());
    // The forum index is a 200 page with none of a post's fields.
    let x = page(
        &spider,
        &site,
        "/",
        Some("post"),
        json!({"forum_id": "00001"}),
    );
    assert!(x.items.is_empty());
    assert_eq!(x.dropped.len(), 1);
    assert_eq!(x.dropped[0].reason, "required field `post_id` is missing");
    // No context: the required forum_id is missing too, still no crash.
    let x = page(&spider, &site, "/post/1001", Some("post"), json!({}));
    assert_eq!(x.dropped[0].reason, "required field `forum_id` is missing");
}

#[test]
fn error_pages_are_ignored_unless_allowed() {
    let (mut spider, site) = (bbs(), Site::demo());
    let x = page(
        &spider,
        &site,
        "/post/999999",
        Some("post"),
        json!({"forum_id": "00001"}),
    );
    assert_eq!(x.ignored_status, Some(404));
    // The rule it was for is named; it extracted nothing.
    assert_eq!(
        (x.rule.as_deref(), x.items.len(), x.dropped.len()),
        (Some("post"), 0, 0)
    );
    spider.settings.httperror_allowed_codes = vec![404];
    let x = page(
        &spider,
        &site,
        "/post/999999",
        Some("post"),
        json!({"forum_id": "00001"}),
    );
    assert_eq!((x.ignored_status, x.dropped.len()), (None, 1));
}

#[test]
fn joined_text_keeps_the_pages_word_spacing() {
    let spider = Spider::from_str(
        "j.toml".as_ref(),
        r#"
name = "j"
[items.p]
text = { css = "p ::text", join = "", whitespace = "normalize" }
spaced = { css = "p ::text", join = "|" }
stripped = { css = "p ::text", join = "" }
links = { css = "a", join = "+" }
img = { css = "img::attr(src)", url = true }
[[rules]]
name = "p"
match = '.'
  [[rules.extract]]
  item = "p"
"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let html =
        "<meta charset=gbk><p>in <a>our\n archive</a>.</p><p> Next </p><a>x</a><img src='i/图.png?q=图#f'>";
    let body = encoding_rs::GBK.encode(html).0;
    let request = Request::get("http://127.0.0.1:8700/a/b");
    let x = extract(
        &spider,
        &request,
        &Response {
            url: &request.url,
            status: 200,
            headers: &[],
            body: &body,
            fetched_at: std::time::SystemTime::UNIX_EPOCH,
        },
    );
    let f = &x.items[0].fields;
    assert_eq!(f["text"], "in our archive. Next");
    assert_eq!(f["spaced"], "in |our\n archive|.| Next");
    assert_eq!(f["stripped"], "in our\n archive. Next");
    assert_eq!(f["links"], "<a>our\n archive</a>+<a>x</a>");
    // Resolved like a link: UTF-8 path, GBK query, fragment kept.
    assert_eq!(
        f["img"],
        "http://127.0.0.1:8700/a/i/%E5%9B%BE.png?q=%CD%BC#f"
    );
}

#[test]
fn unmatched_pages_give_nothing() {
    let (spider, site) = (bbs(), Site::demo());
    let x = page(&spider, &site, "/", None, json!({}));
    assert_eq!(x.rule, None);
    assert!(x.items.is_empty() && x.requests.is_empty());
}

const LINKS_SPIDER: &str = r#"
name = "links"
allowed_domains = ["127.0.0.1"]
deny = ['/post/1002$']

[settings]
depth_priority = 1
depth_limit = 3

[[rules]]
name = "any"
match = '.'

  [[rules.follow]]
  css = "a::attr(href)"
  priority = 5
  meta = ["*"]
"#;

#[test]
fn every_kind_of_unwanted_link_is_dropped_and_counted() {
    let spider =
        Spider::from_str("links.toml".as_ref(), LINKS_SPIDER).unwrap_or_else(|e| panic!("{e}"));
    let site = Site::demo();
    let x = page(&spider, &site, "/list/00001/2", None, json!({"task": 1}));
    // mailto: and javascript: links; #top; the off-site ad.
    assert_eq!(
        (x.filtered.scheme, x.filtered.fragment, x.filtered.offsite),
        (2, 1, 1),
        "{:?}",
        x.filtered
    );
    assert!(x.filtered.denied == 0);
    assert!(x
        .requests
        .iter()
        .all(|r| r.url.starts_with(HOST) && !r.url.contains('#')));
    // DEPTH_PRIORITY: priority 5 − depth 1 × 1.
    assert!(x.requests.iter().all(|r| r.priority == 4 && r.depth == 1));
    assert!(x
        .requests
        .iter()
        .all(|r| r.meta == meta(json!({"task": 1}))));
    // Past the depth limit nothing is followed.
    let deep = Request {
        depth: 3,
        ..Request::get(&format!("{HOST}/list/00001/2"))
    };
    let body = demo::render(&site, "/list/00001/2").body;
    let x = extract(
        &spider,
        &deep,
        &Response {
            url: &deep.url,
            status: 200,
            headers: &[],
            body: &body,
            fetched_at: std::time::SystemTime::UNIX_EPOCH,
        },
    );
    assert!(x.requests.is_empty());
    assert!(x.filtered.depth > 0);
}

#[test]
fn denied_links_are_counted() {
    let spider =
        Spider::from_str("links.toml".as_ref(), LINKS_SPIDER).unwrap_or_else(|e| panic!("{e}"));
    let site = Site::demo();
    let x = page(&spider, &site, "/list/00001/1", None, json!({}));
    assert_eq!(x.filtered.denied, 1);
    assert!(!urls(&x).iter().any(|u| u.ends_with("/post/1002")));
}

const CHECKED: &str = r##"
name = "c"
[items.x]
id = { css = "#id::text", type = "int", min = 1, max = 100 }
date = { css = "#date::text", pattern = '^\d{4}-\d\d-\d\d$' }
title = { css = "h1::text", non_empty = true, max_length = 10, default = "" }
tags = { css = "a.tag::text", all = true, expect = "list", min_length = 2, pattern = '^[a-z]+$' }
source = { meta = "source", expect = "string" }
[[rules]]
name = "r"
match = '.'
  [[rules.extract]]
  item = "x"
"##;

/// The item of `body` under the `CHECKED` spider, or why it was dropped.
fn checked(body: &str, context: Value) -> Result<Map<String, Value>, (super::DropReason, String)> {
    let spider = Spider::from_str("c.toml".as_ref(), CHECKED).unwrap_or_else(|e| panic!("{e}"));
    let request = Request {
        meta: meta(context),
        ..Request::get("http://127.0.0.1:8700/x")
    };
    let headers = vec![("Content-Type".to_string(), "text/html".to_string())];
    let html = format!("<html><body>{body}</body></html>");
    let response = Response {
        url: &request.url,
        status: 200,
        headers: &headers,
        body: html.as_bytes(),
        fetched_at: std::time::SystemTime::UNIX_EPOCH,
    };
    let x = extract(&spider, &request, &response);
    match (x.items.first(), x.dropped.first()) {
        (Some(item), None) => Ok(item.fields.clone()),
        (None, Some(d)) => Err((d.code, d.reason.clone())),
        other => panic!("{other:?}"),
    }
}

#[test]
fn field_checks_drop_items_with_a_reason_and_pass_missing_values() {
    use super::DropReason::*;
    let good = r#"<p id="id">7</p><p id="date">2024-05-01</p><h1>Hello</h1><a class="tag">a</a><a class="tag">b</a>"#;
    let item = checked(good, json!({"source": "feed"})).unwrap();
    assert_eq!(item["id"], 7);
    assert_eq!(item["tags"], json!(["a", "b"]));
    // Missing values pass the checks (that is `required`'s business).
    let item = checked(r#"<h1>Hi</h1>"#, json!({})).unwrap();
    assert_eq!(item["id"], Value::Null);
    let cases: &[(&str, Value, super::DropReason, &str)] = &[
        (
            r#"<p id="id">0</p><h1>x</h1>"#,
            json!({}),
            OutOfRange,
            "field `id`: 0 is outside 1..100",
        ),
        (
            r#"<p id="id">1,000</p><h1>x</h1>"#,
            json!({}),
            OutOfRange,
            "field `id`: 1000 is outside 1..100",
        ),
        (
            r#"<p id="date">01/05/2024</p><h1>x</h1>"#,
            json!({}),
            PatternMismatch,
            r#"field `date`: "01/05/2024" does not match `^\d{4}-\d\d-\d\d$`"#,
        ),
        (
            r#"<p>no title</p>"#,
            json!({}),
            EmptyField,
            "field `title` is empty",
        ),
        (
            r#"<h1>A much longer title</h1>"#,
            json!({}),
            BadLength,
            r#"field `title`: "A much longer title" is longer than 10"#,
        ),
        (
            r#"<h1>x</h1><a class="tag">a</a>"#,
            json!({}),
            BadLength,
            r#"field `tags`: ["a"] is shorter than 2"#,
        ),
        (
            r#"<h1>x</h1><a class="tag">a</a><a class="tag">B</a>"#,
            json!({}),
            PatternMismatch,
            r#"field `tags`: "B" does not match `^[a-z]+$`"#,
        ),
        (
            r#"<h1>x</h1>"#,
            json!({"source": 5}),
            WrongType,
            "field `source`: 5 is not a string",
        ),
    ];
    for (body, context, code, reason) in cases {
        assert_eq!(
            checked(body, context.clone()),
            Err((*code, reason.to_string())),
            "{body}"
        );
    }
    // A long value is shown cut short.
    let long = "y".repeat(500);
    let Err((_, reason)) = checked(&format!("<h1>{long}</h1>"), json!({})) else {
        panic!("a long title passed")
    };
    assert!(
        reason.len() < 160 && reason.contains("… (502 bytes)"),
        "{reason}"
    );
}

/// Follows every link; items read the page and facts about the response.
const FILES_SPIDER: &str = r#"
name = "files"
[items.page]
url = { page = "url" }
status = { page = "status" }
headers = { page = "headers" }
text = "body ::text"
[[rules]]
name = "any"
match = '.'
  [[rules.extract]]
  item = "page"
  [[rules.follow]]
  css = "a::attr(href)"
"#;

fn files_spider(edit: impl FnOnce(&str) -> String) -> Spider {
    Spider::from_str("files.toml".as_ref(), &edit(FILES_SPIDER)).unwrap_or_else(|e| panic!("{e}"))
}

/// Extracts `body`, served with `headers`, as the rule `any` would.
fn served(spider: &Spider, headers: &[(&str, &str)], body: &[u8]) -> Extraction {
    let request = Request::get(&format!("{HOST}/files/"));
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let response = Response {
        url: &request.url,
        status: 200,
        headers: &headers,
        body,
        fetched_at: std::time::SystemTime::UNIX_EPOCH,
    };
    extract(spider, &request, &response)
}

const HTML: (&str, &str) = ("content-type", "text/html; charset=utf-8");
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01";

#[test]
fn links_ending_with_scrapys_ignored_extensions_are_skipped_and_counted() {
    let links = br#"<a href="/doc/report.pdf">pdf</a> <a href="dist/src.zip">zip</a>
        <a href="/img/logo.PNG?x=1">png</a> <a href="/dl/example.py">py</a>
        <a href="/doc/page.html">page</a> <a href="/view?file=a.pdf">viewer</a>"#;
    let x = served(&files_spider(str::to_string), &[HTML], links);
    assert_eq!(
        urls(&x),
        [
            "http://127.0.0.1:8700/doc/page.html",
            "http://127.0.0.1:8700/view?file=a.pdf"
        ]
    );
    assert_eq!(x.filtered.extension, 4);

    let everything = files_spider(|s| {
        s.replace(
            "css = \"a::attr(href)\"",
            "css = \"a::attr(href)\"\n  deny_extensions = []",
        )
    });
    let x = served(&everything, &[HTML], links);
    assert_eq!((x.requests.len(), x.filtered.extension), (6, 0));

    let own = files_spider(|s| {
        s.replace(
            "css = \"a::attr(href)\"",
            "css = \"a::attr(href)\"\n  deny_extensions = [\".HTML\", \"py\"]",
        )
    });
    let x = served(&own, &[HTML], links);
    assert_eq!((x.requests.len(), x.filtered.extension), (4, 2));
    assert!(urls(&x).iter().any(|u| u.ends_with("report.pdf")));
}

#[test]
fn sitemap_links_keep_their_extensions_even_in_a_gzip_file() {
    use std::io::Write;
    let spider = files_spider(|s| s.replace("css = \"a::attr(href)\"", "sitemap = true"));
    let xml = br#"<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
        <url><loc>http://127.0.0.1:8700/files/manual.pdf</loc></url></urlset>"#;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(xml).unwrap();
    let gz = gz.finish().unwrap();
    let x = served(&spider, &[("content-type", "application/x-gzip")], &gz);
    assert_eq!(urls(&x), ["http://127.0.0.1:8700/files/manual.pdf"]);
    // Read by its sitemap entry, so not left unread.
    assert_eq!((x.binary, x.items.len()), (None, 0));
}

#[test]
fn a_rule_that_only_reads_sitemaps_does_not_parse_them_as_html() {
    // Ten nodes at most: a sitemap of fifty entries parsed as HTML would
    // be cut short (and cost ten times its size in memory for nothing).
    let spider = files_spider(|s| {
        s.replace("  [[rules.extract]]\n  item = \"page\"\n", "")
            .replace("css = \"a::attr(href)\"", "sitemap = true")
            .replace(
                "name = \"files\"",
                "name = \"files\"\n[settings]\nextract_max_nodes = 10",
            )
    });
    let mut xml = String::from(r#"<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">"#);
    for i in 0..50 {
        xml.push_str(&format!(
            "<url><loc>http://127.0.0.1:8700/p/{i}</loc></url>"
        ));
    }
    xml.push_str("</urlset>");
    let x = served(
        &spider,
        &[("content-type", "application/xml")],
        xml.as_bytes(),
    );
    assert_eq!(x.requests.len(), 50);
    assert_eq!(x.cut_short, None);
}

#[test]
fn a_binary_body_is_not_read_as_a_page() {
    let spider = files_spider(str::to_string);
    let html_links = b"<html><body>text <a href=\"/next.html\">next</a></body></html>";
    type Headers<'a> = &'a [(&'a str, &'a str)];
    let cases: [(Headers<'_>, &[u8], &str); 4] = [
        (
            &[("content-type", "image/png")],
            html_links,
            "Content-Type is image/png",
        ),
        (
            &[("content-type", "application/octet-stream")],
            PNG,
            "only application/octet-stream",
        ),
        (&[], PNG, "no Content-Type"),
        (
            &[("content-type", "application/pdf")],
            b"%PDF-1.7\n",
            "application/pdf",
        ),
    ];
    for (headers, body, why) in cases {
        let x = served(&spider, headers, body);
        assert!(
            (x.items.is_empty() && x.requests.is_empty()),
            "{why}: {x:?}"
        );
        let binary = x
            .binary
            .unwrap_or_else(|| panic!("{why}: not marked binary"));
        assert!(binary.reason.contains(why), "{}", binary.reason);
        assert_eq!(x.rule.as_deref(), Some("any"));
    }
    // The same bytes of HTML, as a page, and an octet-stream that is text.
    for headers in [&[HTML][..], &[("content-type", "application/octet-stream")]] {
        let x = served(&spider, headers, html_links);
        assert_eq!((x.items.len(), x.requests.len(), &x.binary), (1, 1, &None));
    }
}

#[test]
fn a_rule_with_binary_true_takes_binary_responses_as_items() {
    let spider = files_spider(|s| s.replace("match = '.'", "match = '.'\nbinary = true"));
    let headers = [
        ("content-type", "image/png"),
        ("set-cookie", "session=secret"),
        ("Link", "</a>; rel=a"),
        ("link", "</b>; rel=b"),
    ];
    let x = served(&spider, &headers, PNG);
    assert_eq!(x.binary, None);
    assert!(x.requests.is_empty());
    assert_eq!(
        Value::Object(x.items[0].fields.clone()),
        json!({
            "url": "http://127.0.0.1:8700/files/",
            "status": 200,
            "headers": {"content-type": "image/png", "link": "</a>; rel=a, </b>; rel=b"},
            "text": null,
        })
    );
    // Its HTML pages are extracted as before.
    let x = served(&spider, &[HTML], b"<p>hello <a href=\"/b\">b</a></p>");
    assert_eq!(
        (x.items[0].fields["text"].as_str(), x.requests.len()),
        (Some("hello"), 1)
    );
}
