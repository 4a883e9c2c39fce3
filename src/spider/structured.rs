//! The structured-data queries of the spider language, for fields that
//! need no selector: a compiled `jsonld` path (`jsonld = "author.name"`:
//! property names and array indices, and what it reaches in a JSON-LD
//! object), and the `<meta>` property an `og` field names (`og = "title"`
//! is `og:title`). Finding a page's JSON-LD objects and `<meta>`
//! properties is [`crate::extract::structured`]'s job.

use serde_json::Value;

/// A compiled `jsonld` path: property names and array indices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonLdPath {
    source: String,
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

impl JsonLdPath {
    /// `headline`, `author.name`, `image.0.url`, `offers.price`.
    pub fn parse(source: &str) -> Result<JsonLdPath, String> {
        let text = source.trim();
        if text.is_empty() {
            return Err("the JSON-LD path is empty".into());
        }
        let mut steps = Vec::new();
        for part in text.split('.') {
            let part = part.trim();
            if part.is_empty() {
                return Err(format!(
                    "`{text}` has an empty step; write property names separated by single dots, e.g. \"author.name\""
                ));
            }
            if part.contains(['[', ']', '*', '$', ' ']) {
                return Err(format!(
                    "`{text}` is not a JSON-LD path: write property names and array indices separated by dots, e.g. \"author.0.name\""
                ));
            }
            steps.push(match part.parse::<usize>() {
                Ok(i) => Step::Index(i),
                Err(_) => Step::Key(part.to_string()),
            });
        }
        Ok(JsonLdPath {
            source: source.to_string(),
            steps,
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The values the path reaches from `object`, in order.
    pub fn values(&self, object: &Value) -> Vec<Value> {
        let mut at: Vec<&Value> = vec![object];
        for step in &self.steps {
            let mut next = Vec::new();
            for v in at {
                match (step, v) {
                    (Step::Index(i), Value::Array(a)) => next.extend(a.get(*i)),
                    (Step::Key(k), Value::Object(o)) => next.extend(o.get(k.as_str())),
                    // A property over an array: of every element.
                    (Step::Key(k), Value::Array(a)) => {
                        next.extend(a.iter().filter_map(|e| e.get(k.as_str())))
                    }
                    // `image.0` on a single image: the image itself.
                    (Step::Index(0), v) => next.push(v),
                    _ => {}
                }
            }
            at = next;
        }
        let mut out = Vec::new();
        for v in at {
            match v {
                Value::Array(a) => out.extend(a.iter().filter_map(leaf)),
                v => out.extend(leaf(v)),
            }
        }
        out
    }
}

/// What a path ending at `v` gives: a scalar as it is, an object by its
/// most telling property.
fn leaf(v: &Value) -> Option<Value> {
    match v {
        Value::Null => None,
        Value::Object(o) => ["@value", "name", "url", "contentUrl", "@id"]
            .iter()
            .find_map(|k| o.get(*k).filter(|v| v.is_string() || v.is_number()))
            .cloned(),
        Value::Array(_) => None,
        v => Some(v.clone()),
    }
}

/// The `<meta>` key `og = "name"` reads.
pub fn og_key(name: &str) -> String {
    let name = name.trim().to_ascii_lowercase();
    if name.contains(':') {
        name
    } else {
        format!("og:{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_checked() {
        assert!(JsonLdPath::parse("author..name").is_err());
        assert!(JsonLdPath::parse("$.author[0]").is_err());
        assert!(JsonLdPath::parse(" ").is_err());
        assert!(JsonLdPath::parse("@graph.0.@type").is_ok());
    }
}
