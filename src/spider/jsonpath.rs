//! JSONPath (RFC 9535) in the spider language: the compiled query behind
//! `json = "$.title"` fields, `each = "$.comments[*]"` and JSON follow
//! entries, and the `until` conditions that end an API's pagination.
//!
//! Queries are parsed once, when the spider is compiled, by
//! `serde_json_path` (a complete RFC 9535 implementation, checked against
//! the JSONPath compliance test suite). This module only wraps it: what a
//! query is and what it finds. Reading JSON responses is
//! [`crate::extract::json`]'s job.

use serde_json::Value;

/// A parsed JSONPath query and the text it was written as.
#[derive(Debug, Clone)]
pub struct JsonPath {
    source: String,
    path: serde_json_path::JsonPath,
}

/// Why a JSONPath does not parse: the 1-based character where the parser
/// stopped, and what it expected there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPathError {
    pub position: usize,
    pub message: String,
}

impl JsonPath {
    pub fn parse(source: &str) -> Result<JsonPath, JsonPathError> {
        // The parser recurses once per bracket: refused before it runs.
        if let Err(message) = super::limits::check_selector(source, "JSONPath") {
            return Err(JsonPathError {
                position: 1,
                message,
            });
        }
        match serde_json_path::JsonPath::parse(source) {
            Ok(path) => Ok(JsonPath {
                source: source.to_string(),
                path,
            }),
            Err(e) => Err(JsonPathError {
                position: e.position().max(1),
                message: e.message().to_string(),
            }),
        }
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The nodes the query selects in `value` (its `$`), in document order.
    pub fn query<'v>(&self, value: &'v Value) -> Vec<&'v Value> {
        self.path.query(value).all()
    }
}

/// When a JSON follow entry stops: any condition that holds ends it (the
/// page's follow-up is not requested, counted as past the last page).
#[derive(Debug, Clone, Default)]
pub struct Until {
    /// Stop when this selects nothing, or only `null`, `[]`, `{}` or `""`
    /// (`empty = "$.comments"`: a page past the end lists no comments).
    pub empty: Option<JsonPath>,
    /// Stop when the page counter has reached this number
    /// (`last = "$.total_pages"`).
    pub last: Option<JsonPath>,
    /// Go on only while this is `true` (`more = "$.has_more"`).
    pub more: Option<JsonPath>,
}

impl Until {
    /// Whether the page `doc`, page number `page` of its counter (if the
    /// entry counts pages), says the pagination is over.
    pub fn stops(&self, doc: &Value, page: Option<i64>) -> bool {
        let empty = self.empty.as_ref().is_some_and(|p| {
            p.query(doc).iter().all(|v| match v {
                Value::Null => true,
                Value::Array(a) => a.is_empty(),
                Value::Object(o) => o.is_empty(),
                Value::String(s) => s.is_empty(),
                _ => false,
            })
        });
        let last = self.last.as_ref().is_some_and(|p| {
            let last = p.query(doc).first().and_then(|v| as_int(v));
            match (page, last) {
                (Some(page), Some(last)) => page >= last,
                // No number to compare with: the API gave no total, so
                // there is nothing to count up to.
                _ => true,
            }
        });
        let more = self
            .more
            .as_ref()
            .is_some_and(|p| !matches!(p.query(doc).first(), Some(Value::Bool(true))));
        empty || last || more
    }
}

/// A whole number from a JSON number or a numeric string.
pub fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn queries_in_document_order() {
        let p = JsonPath::parse("$.comments[*].id").unwrap();
        let doc = json!({"comments": [{"id": "a"}, {"id": "b"}, {"x": 1}]});
        assert_eq!(p.query(&doc), vec![&json!("a"), &json!("b")]);
        assert_eq!(p.source(), "$.comments[*].id");
    }

    #[test]
    fn a_broken_query_says_where() {
        let e = JsonPath::parse("$.comments[?@.x==]").unwrap_err();
        assert!(e.position > 1 && e.position <= 18, "{e:?}");
        assert!(!e.message.is_empty());
        assert!(JsonPath::parse("comments").is_err(), "RFC 9535 needs `$`");
    }

    #[test]
    fn until_conditions() {
        let p = |s: &str| Some(JsonPath::parse(s).unwrap());
        let empty = Until {
            empty: p("$.comments"),
            ..Until::default()
        };
        assert!(empty.stops(&json!({"comments": []}), None));
        assert!(empty.stops(&json!({}), None));
        assert!(!empty.stops(&json!({"comments": [1]}), None));
        let last = Until {
            last: p("$.total_pages"),
            ..Until::default()
        };
        assert!(!last.stops(&json!({"total_pages": 3}), Some(2)));
        assert!(last.stops(&json!({"total_pages": "3"}), Some(3)));
        assert!(last.stops(&json!({}), Some(1)));
        let more = Until {
            more: p("$.has_more"),
            ..Until::default()
        };
        assert!(!more.stops(&json!({"has_more": true}), None));
        assert!(more.stops(&json!({"has_more": false}), None));
        assert!(more.stops(&json!({}), None));
    }
}
