//! JSON responses. A rule whose fields, `each` or follow entries use
//! JSONPath reads its response as one JSON document: this module parses
//! it, turns what a field's JSONPath selects into values, and builds the
//! follow-ups of JSON follow entries — links a JSONPath selects, or a `url`
//! template rendered once per `each` element (or once per page) from the
//! element's fields, the page counter and the request's context, until the
//! page says the pagination is over.
//!
//! The checks every link goes through (host, deny, depth, duplicates) and
//! the request it becomes are [`super::links`]'s; this module only finds
//! the links.

use serde_json::{Map, Value};

use super::links::Follower;
use crate::request::Request;
use crate::spider::jsonpath::as_int;
use crate::spider::{Follow, JsonPath, LinkSource};

/// The response text as JSON, or why it is not (with where, as serde_json
/// says it: line and column).
pub fn parse(text: &str) -> Result<Value, String> {
    // A byte-order mark is not JSON, but servers send it.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_json::from_str(text).map_err(|e| format!("the response is not JSON: {e}"))
}

/// The values a field's JSONPath selects in `scope`; `null` counts as
/// missing, and with `all` an array selected whole gives its elements.
pub fn values(path: &JsonPath, scope: &Value, all: bool) -> Vec<Value> {
    let mut out = Vec::new();
    for v in path.query(scope) {
        match v {
            Value::Null => {}
            Value::Array(a) if all => out.extend(a.iter().filter(|x| !x.is_null()).cloned()),
            v => out.push(v.clone()),
        }
    }
    out
}

/// The values an extract entry's `each` selects: one item each.
pub fn scopes<'v>(each: &JsonPath, doc: &'v Value) -> Vec<&'v Value> {
    each.query(doc)
}

/// Adds the requests of a JSON follow entry (`json = "$…"` or a `url`
/// template) to `out`. `doc` is the page's JSON, absent when the rule
/// reads HTML (a `url` template is then rendered once from the context).
pub fn follow(
    follower: &mut Follower<'_>,
    follow: &Follow,
    doc: Option<&Value>,
    out: &mut Vec<Request>,
) {
    let meta = follower.page().request.meta.clone();
    // This page's number and the next one's, when the entry counts pages.
    let counter = follow.counter.as_ref().map(|name| {
        let page = meta.get(name).and_then(as_int).unwrap_or(1);
        (name.clone(), page)
    });
    if let (Some(until), Some(doc)) = (&follow.until, doc) {
        if until.stops(doc, counter.as_ref().map(|c| c.1)) {
            follower.filtered().pagination += 1;
            return;
        }
    }
    let max_page = follower.max_page(follow);
    // (href, the context its request's templates are rendered from)
    let mut found: Vec<(String, Map<String, Value>)> = Vec::new();
    match &follow.links {
        LinkSource::Json(path) => {
            let Some(doc) = doc else { return };
            let context = context(&meta, None, counter.as_ref());
            for v in path.query(doc) {
                match v {
                    Value::String(href) => found.push((href.clone(), context.clone())),
                    Value::Null => {}
                    _ => follower.filtered().scheme += 1,
                }
            }
        }
        LinkSource::Template(url) => {
            let elements: Vec<Option<&Value>> = match (&follow.each, doc) {
                (Some(each), Some(doc)) => each.query(doc).into_iter().map(Some).collect(),
                (None, Some(doc)) => vec![Some(doc)],
                (_, None) => vec![None],
            };
            for element in elements {
                let context = context(&meta, element, counter.as_ref());
                match url.render(&context) {
                    Ok(href) => found.push((href, context)),
                    Err(_) => follower.filtered().incomplete += 1,
                }
            }
        }
        _ => return,
    }
    for (href, context) in found {
        let Some(url) = follower.admit(follow, &href, max_page) else {
            continue;
        };
        let Some(mut request) = follower.request(follow, url, &context) else {
            continue;
        };
        if let Some((name, page)) = &counter {
            request.meta.insert(name.clone(), Value::from(page + 1));
        }
        if follower.first_time(&request) {
            out.push(request);
        }
    }
}

/// What a JSON follow entry's templates are rendered from: the request's
/// context, then the fields of the element (an element that is not an
/// object is `{value}`), then the next page number of the counter.
fn context(
    meta: &Map<String, Value>,
    element: Option<&Value>,
    counter: Option<&(String, i64)>,
) -> Map<String, Value> {
    let mut out = meta.clone();
    match element {
        Some(Value::Object(fields)) => {
            out.extend(fields.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        Some(v) => {
            out.insert("value".into(), v.clone());
        }
        None => {}
    }
    if let Some((name, page)) = counter {
        out.insert(name.clone(), Value::from(page + 1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_skip_nulls_and_spread_arrays_for_all() {
        let doc = json!({"tags": ["a", null, "b"], "n": 3, "none": null});
        let p = |s: &str| JsonPath::parse(s).unwrap();
        assert_eq!(
            values(&p("$.tags"), &doc, true),
            vec![json!("a"), json!("b")]
        );
        assert_eq!(
            values(&p("$.tags"), &doc, false),
            vec![json!(["a", null, "b"])]
        );
        assert_eq!(values(&p("$.n"), &doc, false), vec![json!(3)]);
        assert!(values(&p("$.none"), &doc, false).is_empty());
        assert!(values(&p("$.missing"), &doc, false).is_empty());
    }

    #[test]
    fn context_layers_meta_element_and_counter() {
        let meta = json!({"thread": 7, "page": 2});
        let meta = meta.as_object().unwrap();
        let el = json!({"id": "c1", "thread": 8});
        let ctx = context(meta, Some(&el), Some(&("page".to_string(), 2)));
        assert_eq!(
            Value::Object(ctx),
            json!({"thread": 8, "page": 3, "id": "c1"})
        );
        let ctx = context(meta, Some(&json!(5)), None);
        assert_eq!(ctx["value"], 5);
    }

    const API: &str = r#"
name = "api"
allowed_domains = ["h"]

[items.row]
id = { json = "$.id", type = "int", required = true }
tags = { json = "$.tags", all = true }
name = { json = "$.name", re = '^(\w+)', default = "?" }

[[rules]]
name = "feed"
match = '/feed'

  [[rules.extract]]
  item = "row"
  each = "$.rows[*]"

  [[rules.follow]]                  # a cursor: stops where it is missing
  url = "/feed?cursor={next_cursor}"
  rule = "feed"

  [[rules.follow]]                  # a counter, until a page is empty
  url = "/feed?page={page}"
  counter = "page"
  until = { empty = "$.rows" }
  rule = "feed"

  [[rules.follow]]                  # a JSON body per id
  each = "$.rows[*].id"
  url = "/detail"
  method = "POST"
  body = '{{"id": {value}}}'
  rule = "feed"
"#;

    fn run(meta: Value, body: &str) -> super::super::Extraction {
        let spider = crate::spider::Spider::from_str("api.toml".as_ref(), API)
            .unwrap_or_else(|e| panic!("{e}"));
        let request = Request {
            meta: meta.as_object().cloned().unwrap_or_default(),
            ..Request::get("http://h/feed")
        };
        let response = super::super::Response {
            url: &request.url,
            status: 200,
            headers: &[],
            body: body.as_bytes(),
            fetched_at: std::time::SystemTime::UNIX_EPOCH,
        };
        super::super::extract(&spider, &request, &response)
    }

    #[test]
    fn a_json_page_gives_items_cursor_counter_and_posts() {
        let x = run(
            json!({"page": 3}),
            r#"{"rows": [{"id": "7", "tags": ["a", "b"], "name": "ann lee"}, {"id": 8}, {"name": "no id"}],
                "next_cursor": "c2"}"#,
        );
        let items: Vec<Value> = x
            .items
            .iter()
            .map(|i| Value::Object(i.fields.clone()))
            .collect();
        assert_eq!(
            items,
            vec![
                json!({"id": 7, "tags": ["a", "b"], "name": "ann"}),
                json!({"id": 8, "tags": null, "name": "?"}),
            ]
        );
        assert_eq!(x.dropped.len(), 1, "the row without an id");
        let sent: Vec<(&str, &str, &str)> = x
            .requests
            .iter()
            .map(|r| (r.method.as_str(), r.url.as_str(), r.body.as_str()))
            .collect();
        assert_eq!(
            sent,
            vec![
                ("GET", "http://h/feed?cursor=c2", ""),
                ("GET", "http://h/feed?page=4", ""),
                ("POST", "http://h/detail", r#"{"id": 7}"#),
                ("POST", "http://h/detail", r#"{"id": 8}"#),
            ]
        );
        assert_eq!(x.requests[1].meta["page"], 4);
        assert_eq!(
            x.requests[2].headers,
            vec![("Content-Type".into(), "application/json".into())]
        );

        // The last page: no cursor, no rows.
        let x = run(json!({}), r#"{"rows": []}"#);
        assert!(x.requests.is_empty(), "{:?}", x.requests);
        assert_eq!((x.filtered.incomplete, x.filtered.pagination), (1, 1));
        let x = run(json!({}), "not json");
        assert!(x.json_error.is_some() && x.items.is_empty());
    }

    #[test]
    fn parse_names_what_is_wrong() {
        assert_eq!(parse("\u{feff}{\"a\": 1}").unwrap(), json!({"a": 1}));
        let e = parse("<html>").unwrap_err();
        assert!(e.starts_with("the response is not JSON: "), "{e}");
    }
}
