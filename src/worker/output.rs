//! What a page's output (its items, links and tasks for other spiders)
//! is counted for in the worker's memory budget, from its extraction until
//! its commit: an estimate made by one walk over it, without copying it.
//! The charge itself, and why it never waits, are
//! `downloader::budget`'s; the page task holds it (`worker::page`).

use serde_json::{Map, Value};

use crate::frontier::PageResult;
use crate::request::Request;

/// What each JSON value is counted for beyond its text: serde_json's
/// `Value` (32 bytes) and its place in its array or object, and the
/// punctuation of its JSON.
const PER_VALUE: u64 = 32;

/// What each follow-up request is counted for beyond its strings: the
/// `Request` itself (about 250 bytes) and its record for the commit.
const PER_REQUEST: u64 = 512;

/// How many times its size the output is counted for: once as values,
/// once more as the JSON and the script arguments the commit encodes
/// them into (docs/memory.md).
const COPIES: u64 = 2;

/// The bytes a page's output holds until its commit, estimated.
pub fn bytes(result: &PageResult) -> u64 {
    let items: u64 = result.items.iter().map(map_bytes).sum();
    let requests: u64 = result.requests.iter().map(request_bytes).sum();
    let tasks: u64 = result.tasks.iter().map(|t| request_bytes(&t.request)).sum();
    COPIES * (items + requests + tasks)
}

fn value_bytes(v: &Value) -> u64 {
    PER_VALUE
        + match v {
            Value::String(s) => s.len() as u64,
            Value::Array(a) => a.iter().map(value_bytes).sum(),
            Value::Object(o) => map_bytes(o),
            Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        }
}

fn map_bytes(m: &Map<String, Value>) -> u64 {
    m.iter().map(|(k, v)| k.len() as u64 + value_bytes(v)).sum()
}

fn request_bytes(r: &Request) -> u64 {
    let strings = r.url.len()
        + r.body.len()
        + r.headers
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum::<usize>()
        + r.redirect_urls.iter().map(String::len).sum::<usize>()
        + r.rule.as_ref().map_or(0, String::len);
    PER_REQUEST + strings as u64 + map_bytes(&r.meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Task;

    #[test]
    fn an_output_counts_its_text_and_each_value_and_request() {
        assert_eq!(bytes(&PageResult::default()), 0);
        let text = "x".repeat(1_000_000);
        let mut item = Map::new();
        item.insert("text".into(), Value::String(text));
        item.insert("tags".into(), serde_json::json!(["a", "b"]));
        let request = Request::get("https://example.com/next");
        let result = PageResult {
            items: vec![item],
            requests: vec![request.clone()],
            tasks: vec![Task { to: 0, request }],
            ..PageResult::default()
        };
        let items = 4 + 32 + 1_000_000 + 4 + 32 * 3 + 2;
        let requests = 2 * (512 + "https://example.com/next".len() as u64);
        assert_eq!(bytes(&result), COPIES * (items + requests));
    }
}
