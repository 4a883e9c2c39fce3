//! Structured data in a page's markup, for fields that need no selector:
//! JSON-LD (`<script type="application/ld+json">`, schema.org's
//! `NewsArticle`, `Product`, …) read with a small dotted path
//! (`jsonld = "author.name"`), and OpenGraph-style `<meta>` properties
//! (`og = "title"` is `<meta property="og:title" content="…">`).
//!
//! A page's metadata is read once, when its first such field asks. Broken
//! JSON-LD blocks are skipped (a page's other blocks still count); the
//! extractor never fails because of them.
//!
//! JSON-LD as pages write it: a block holds one object, an array of them,
//! or an object with an `@graph` array; `@type` is a name or an array of
//! names, with or without a `schema:` / `https://schema.org/` prefix. A path
//! step over an array takes every element, so `author.name` gives the name
//! of each author; a number step (`image.0`) takes one element. A path
//! ending at an object gives its `@value`, `name`, `url`, `contentUrl` or
//! `@id`, the first it has: `author` gives a person's name, `image` an
//! `ImageObject`'s URL.

use scraper::{ElementRef, Node};
use serde_json::Value;

use crate::spider::structured::{og_key, JsonLdPath};

/// A page's structured data, read once.
#[derive(Debug, Default)]
pub struct Metadata {
    /// Every JSON-LD object with its nested objects, depth first in page
    /// order; `top` of them are the blocks' own objects (and `@graph`
    /// members).
    objects: Vec<(Value, bool)>,
    /// `<meta>` properties: (lowercased `property` or `name`, `content`).
    properties: Vec<(String, String)>,
}

impl Metadata {
    /// Reads the page's JSON-LD blocks and `<meta>` properties; `any` is
    /// any node of the page.
    pub fn read(any: ElementRef<'_>) -> Metadata {
        let mut out = Metadata::default();
        for node in any.tree().nodes() {
            let Some(el) = ElementRef::wrap(node) else {
                continue;
            };
            if el.parent().is_none() {
                continue;
            }
            match el.value().name() {
                "script" if is_json_ld(el.value().attr("type")) => {
                    let text: String = el
                        .children()
                        .filter_map(|c| match c.value() {
                            Node::Text(t) => Some(&**t),
                            _ => None,
                        })
                        .collect();
                    if let Some(v) = parse_block(&text) {
                        out.add_block(v);
                    }
                }
                "meta" => {
                    let key = el.value().attr("property").or(el.value().attr("name"));
                    if let (Some(key), Some(content)) = (key, el.value().attr("content")) {
                        out.properties
                            .push((key.trim().to_ascii_lowercase(), content.to_string()));
                    }
                }
                _ => {}
            }
        }
        out
    }

    fn add_block(&mut self, v: Value) {
        match v {
            Value::Array(a) => a.into_iter().for_each(|v| self.add_block(v)),
            Value::Object(mut o) => {
                let graph = o.remove("@graph");
                if !o.keys().all(|k| k == "@context") {
                    self.add_object(Value::Object(o), true);
                }
                if let Some(g) = graph {
                    self.add_block(g);
                }
            }
            _ => {}
        }
    }

    /// Adds an object, then the objects nested in it (a `WebPage`'s
    /// `mainEntity`), so a type is found wherever it is.
    fn add_object(&mut self, v: Value, top: bool) {
        let mut nested = Vec::new();
        collect_nested(&v, &mut nested, true);
        self.objects.push((v, top));
        for n in nested {
            self.objects.push((n, false));
        }
    }

    /// The values of `path` in the first object that has any: among the
    /// objects of one of `types` (anywhere, nested too) when given, else
    /// among the top-level objects.
    pub fn jsonld(&self, types: &[String], path: &JsonLdPath) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|(o, top)| {
                if types.is_empty() {
                    *top
                } else {
                    has_type(o, types)
                }
            })
            .map(|(o, _)| path.values(o))
            .find(|v| !v.is_empty())
            .unwrap_or_default()
    }

    /// The contents of the `<meta>` elements whose `property` (or `name`)
    /// is `og:<name>`, or `name` itself when it has a prefix
    /// (`article:published_time`, `twitter:title`), in page order.
    pub fn og(&self, name: &str) -> Vec<&str> {
        let key = og_key(name);
        self.properties
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The `@type`s of the page's JSON-LD objects, for `parse` to show.
    pub fn types(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (o, _) in &self.objects {
            for t in type_names(o) {
                if !out.iter().any(|x| x == t) {
                    out.push(t.to_string());
                }
            }
        }
        out
    }

    /// The page's `og:`-style properties, for `parse` to show.
    pub fn properties(&self) -> &[(String, String)] {
        &self.properties
    }
}

fn is_json_ld(kind: Option<&str>) -> bool {
    kind.is_some_and(|t| {
        t.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/ld+json"))
    })
}

/// A block's JSON, as pages write it: inside an HTML comment or CDATA
/// section at times, with raw line breaks inside strings at times.
fn parse_block(text: &str) -> Option<Value> {
    let mut t = text.trim();
    for (open, close) in [
        ("<!--", "-->"),
        ("/*<![CDATA[*/", "/*]]>*/"),
        ("<![CDATA[", "]]>"),
    ] {
        if let Some(inner) = t.strip_prefix(open) {
            t = inner.strip_suffix(close).unwrap_or(inner).trim();
        }
    }
    serde_json::from_str(t).ok().or_else(|| {
        let flat: String = t
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        serde_json::from_str(&flat).ok()
    })
}

/// The objects nested in `v` (not `v` itself), depth first.
fn collect_nested(v: &Value, out: &mut Vec<Value>, root: bool) {
    match v {
        Value::Object(o) => {
            if !root && o.contains_key("@type") {
                out.push(v.clone());
            }
            for child in o.values() {
                collect_nested(child, out, false);
            }
        }
        Value::Array(a) => a.iter().for_each(|c| collect_nested(c, out, false)),
        _ => {}
    }
}

/// The names in an object's `@type`, without a vocabulary prefix.
fn type_names(o: &Value) -> Vec<&str> {
    fn short(s: &str) -> &str {
        s.rsplit(['/', ':', '#']).next().unwrap_or(s).trim()
    }
    match o.get("@type") {
        Some(Value::String(s)) => vec![short(s)],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).map(short).collect(),
        _ => Vec::new(),
    }
}

fn has_type(o: &Value, types: &[String]) -> bool {
    type_names(o)
        .iter()
        .any(|t| types.iter().any(|want| want.eq_ignore_ascii_case(t)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use scraper::Html;
    use serde_json::json;

    fn meta(html: &str) -> Metadata {
        Metadata::read(Html::parse_document(html).root_element())
    }

    fn get(m: &Metadata, types: &[&str], path: &str) -> Vec<Value> {
        let types: Vec<String> = types.iter().map(|t| t.to_string()).collect();
        m.jsonld(&types, &JsonLdPath::parse(path).unwrap())
    }

    const GRAPH: &str = r#"<html><head>
        <script type="application/ld+json">{"@context": "https://schema.org", "@graph": [
          {"@type": "WebSite", "name": "The Gazette", "url": "https://g.example/"},
          {"@type": ["NewsArticle", "Article"], "headline": "Bridge opens",
           "author": [{"@type": "Person", "name": "Maya Okafor"}, {"@type": "Person", "name": "Tom Ng"}],
           "image": {"@type": "ImageObject", "url": "https://g.example/a.jpg"},
           "datePublished": "2026-03-20T09:15:00Z", "wordCount": 512}
        ]}</script>
        <script type="application/ld+json">{ broken </script>
        <meta property="og:title" content="Bridge opens">
        <meta property="article:tag" content="city"><meta property="article:tag" content="transport">
        <meta name="twitter:title" content="Bridge opens (Twitter)">
        </head><body></body></html>"#;

    #[test]
    fn graph_types_arrays_and_nested_names() {
        let m = meta(GRAPH);
        assert_eq!(
            get(&m, &["NewsArticle"], "headline"),
            [json!("Bridge opens")]
        );
        assert_eq!(
            get(&m, &["Article"], "author.name"),
            [json!("Maya Okafor"), json!("Tom Ng")]
        );
        // An object at the end of the path: its name, or its url.
        assert_eq!(
            get(&m, &["NewsArticle"], "author"),
            get(&m, &["NewsArticle"], "author.name")
        );
        assert_eq!(
            get(&m, &["NewsArticle"], "image"),
            [json!("https://g.example/a.jpg")]
        );
        assert_eq!(
            get(&m, &["NewsArticle"], "author.1.name"),
            [json!("Tom Ng")]
        );
        assert_eq!(get(&m, &["NewsArticle"], "wordCount"), [json!(512)]);
        // Without a type: the first top-level object that has the path.
        assert_eq!(get(&m, &[], "name"), [json!("The Gazette")]);
        assert_eq!(get(&m, &[], "headline"), [json!("Bridge opens")]);
        // A type no object has, and a person found nested.
        assert!(get(&m, &["Product"], "name").is_empty());
        assert_eq!(get(&m, &["Person"], "name"), [json!("Maya Okafor")]);
        assert_eq!(
            m.types(),
            ["WebSite", "NewsArticle", "Article", "Person", "ImageObject"]
        );
    }

    #[test]
    fn meta_properties_with_and_without_prefix() {
        let m = meta(GRAPH);
        assert_eq!(m.og("title"), ["Bridge opens"]);
        assert_eq!(m.og("article:tag"), ["city", "transport"]);
        assert_eq!(m.og("twitter:title"), ["Bridge opens (Twitter)"]);
        assert!(m.og("image").is_empty());
    }

    #[test]
    fn blocks_as_pages_write_them() {
        let m = meta(
            "<script type='application/ld+json; charset=utf-8'><!--\n[{\"@type\": \"schema:Product\", \"name\": \"Lamp\n  (red)\",\
             \"offers\": {\"@type\": \"Offer\", \"price\": \"19.90\"}}]\n--></script>",
        );
        assert_eq!(get(&m, &["Product"], "name"), [json!("Lamp   (red)")]);
        assert_eq!(get(&m, &["product"], "offers.price"), [json!("19.90")]);
    }
}
