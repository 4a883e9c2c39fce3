//! Requests queued by the real scrapy-redis (PriorityQueue and FifoQueue,
//! `tests/fixtures/scrapy_redis/queue.json`) read and mapped for the
//! shipped forum spider with a `[scrapy_redis]` table.

use serde_json::json;

use crate::scrapy_redis::{convert, Converted, Takeover};
use crate::spider::Spider;

const TABLE: &str = r#"
[scrapy_redis]
callbacks = { parse = "list", parse_list = "list", parse_post = "post", parse_search = "list" }
crawl_rules = ["post", "list"]
"#;

fn spider() -> Spider {
    let text = format!("{}{TABLE}", include_str!("../../../spiders/bbs.toml"));
    Spider::from_str("bbs.toml".as_ref(), &text).unwrap_or_else(|e| panic!("{e}"))
}

/// Every entry of both queues, by the name the generator gave it.
fn entries() -> Vec<(String, String, Vec<u8>)> {
    let f = crate::scrapy_redis::pickle::tests::fixture();
    let mut out = Vec::new();
    for (class, queue) in f["queues"].as_object().unwrap() {
        for e in queue["entries"].as_array().unwrap() {
            out.push((
                class.clone(),
                e["request"].as_str().unwrap().to_string(),
                crate::scrapy_redis::pickle::tests::b64(&e["entry"]),
            ));
        }
    }
    out
}

fn converted(name: &str) -> Vec<Converted> {
    let spider = spider();
    let takeover = Takeover { spider: &spider };
    let found: Vec<Converted> = entries()
        .into_iter()
        .filter(|(_, n, _)| n == name)
        .map(|(_, _, entry)| convert(&entry, &takeover))
        .collect();
    assert_eq!(found.len(), 2, "{name}: one entry per queue class");
    assert_eq!(found[0], found[1], "{name}: both queue classes read alike");
    found
}

fn request(name: &str) -> crate::request::Request {
    match converted(name).remove(0) {
        Converted::Request(r) => *r,
        Converted::Refused { reason, .. } => panic!("{name}: {reason}"),
    }
}

fn refused(name: &str) -> String {
    match converted(name).remove(0) {
        Converted::Refused { reason, .. } => reason,
        Converted::Request(r) => panic!("{name} was read: {r:?}"),
    }
}

const BASE: &str = "http://127.0.0.1:47124";

#[test]
fn a_request_keeps_its_rule_context_depth_and_priority() {
    let r = request("post");
    assert_eq!(r.url, format!("{BASE}/post/1001"));
    assert_eq!(r.rule.as_deref(), Some("post"));
    assert_eq!(
        serde_json::Value::Object(r.meta),
        json!({"forum_id": "00001"})
    );
    assert_eq!((r.depth, r.priority, r.dont_filter), (2, 10, false));
    assert_eq!(r.method, "GET");
    assert!(r.headers.is_empty() && r.body.is_empty());
}

#[test]
fn dont_filter_is_kept() {
    let r = request("list_dont_filter");
    assert!(r.dont_filter);
    assert_eq!(r.rule.as_deref(), Some("list"));
    assert_eq!(
        serde_json::Value::Object(r.meta),
        json!({"forum_id": "00001", "max_page": 5})
    );
    assert_eq!(r.depth, 1);
}

#[test]
fn a_form_request_keeps_its_method_body_and_headers() {
    let r = request("form");
    assert_eq!(
        (r.method.as_str(), r.body.as_str()),
        ("POST", "q=rust+crawler&page=1")
    );
    assert_eq!(
        r.headers,
        vec![(
            "Content-Type".into(),
            "application/x-www-form-urlencoded".into()
        )]
    );
    assert_eq!(r.priority, -5);
    // The fingerprint scrapy-redis recorded for it is this one.
    assert_eq!(
        r.fingerprint(),
        scrapy_url::request_fingerprint(
            "POST",
            &format!("{BASE}/api/search"),
            b"q=rust+crawler&page=1"
        )
    );
}

#[test]
fn a_json_request_is_a_plain_post() {
    let r = request("json");
    assert_eq!(r.method, "POST");
    assert_eq!(r.body, r#"{"q": "redis"}"#);
    assert!(r
        .headers
        .contains(&("Content-Type".into(), "application/json".into())));
}

#[test]
fn cookies_become_the_cookie_header_and_cb_kwargs_the_context() {
    let r = request("cookies");
    assert!(r
        .headers
        .contains(&("Cookie".into(), "session=abc123; lang=en".into())));
    assert!(r
        .headers
        .contains(&("Referer".into(), format!("{BASE}/list/00001/1"))));
    // download_slot is a trace of the last download; retry_times the
    // request's own field.
    assert_eq!(
        serde_json::Value::Object(r.meta),
        json!({"forum_id": "00001", "page": 2})
    );
    assert_eq!(r.retry_times, 1);
}

#[test]
fn no_callback_is_scrapys_parse() {
    let r = request("no_callback");
    assert_eq!(r.rule.as_deref(), Some("list"));
    assert!(r.dont_filter);
}

#[test]
fn a_crawl_spider_request_names_its_rule_by_index() {
    let r = request("crawl_rule");
    assert_eq!(r.rule.as_deref(), Some("post"));
    assert_eq!(
        serde_json::Value::Object(r.meta),
        json!({"link_text": "A title"})
    );
}

#[test]
fn a_url_scrapy_encoded_stays_as_it_is() {
    let r = request("gbk_query");
    assert_eq!(r.url, format!("{BASE}/list/00002/2?order=%D7%EE%D0%C2"));
}

#[test]
fn a_callback_that_maps_to_no_rule_is_refused_with_its_name() {
    let reason = refused("unmapped_callback");
    assert!(reason.contains("`parse_user`"), "{reason}");
    assert!(reason.contains("[scrapy_redis] callbacks"), "{reason}");
}

#[test]
fn an_object_in_meta_is_refused_unread() {
    let reason = refused("item_in_meta");
    assert!(reason.contains("STACK_GLOBAL"), "{reason}");
    assert!(reason.contains("PostItem"), "{reason}");
}

#[test]
fn without_a_crawl_rules_table_a_crawl_spider_request_is_refused() {
    let spider = Spider::from_str(
        "bbs.toml".as_ref(),
        include_str!("../../../spiders/bbs.toml"),
    )
    .unwrap();
    let takeover = Takeover { spider: &spider };
    let (_, _, entry) = entries()
        .into_iter()
        .find(|(_, n, _)| n == "crawl_rule")
        .unwrap();
    match convert(&entry, &takeover) {
        Converted::Refused { reason, shown } => {
            assert!(reason.contains("crawl_rules"), "{reason}");
            assert!(shown.contains("/post/1003"), "{shown}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn headers_with_line_breaks_are_refused_with_their_reason() {
    use crate::scrapy_redis::pickle::Value;
    let text = |s: &str| Value::Str(s.to_string());
    let with = |name: &str, value: &str| {
        Value::Dict(vec![(
            text(name),
            Value::List(vec![Value::Bytes(value.as_bytes().to_vec())]),
        )])
    };
    let ok = super::headers(Some(&with("Referer", "http://f.test/a"))).unwrap();
    assert_eq!(ok, [("Referer".to_string(), "http://f.test/a".to_string())]);
    for (name, value, said) in [
        (
            "X-Token",
            "s3cret\r\nInjected: 1",
            "X-Token has a value with a line break",
        ),
        (
            "X-Token",
            "s3cret\nmore",
            "X-Token has a value with a line break",
        ),
        ("Bad\r\nName", "v", "is not an HTTP header name"),
    ] {
        let err = super::headers(Some(&with(name, value)))
            .unwrap_err()
            .to_string();
        assert!(err.contains(said), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
    }
}
