//! Compiling the JSON API parts of a spider: JSONPath queries (a broken one
//! is reported at the character where it breaks), follow entries that
//! build requests from JSON (`url` templates, `each`, `counter`, `until`),
//! how follow requests are sent (`method`, `body`, `form`, `headers`), and
//! whether a rule reads its responses as JSON or as HTML (never both).

use super::values::is_http_token;
use super::Compiler;
use crate::reader::{At, Loc};
use crate::spider::file::{FieldFile, FollowFile, ItemFile, RuleFile};
use crate::spider::sending::{Body, Sending};
use crate::spider::{JsonPath, Template, Until};

const JSONPATH_HINT: &str = "JSONPath is RFC 9535: `$.title`, `$.comments[*].id`, `$.posts[?@.views > 100].id`, `$['key with spaces']`";

/// The JSON and sending parts of a follow entry, compiled.
pub(super) struct ApiFollow {
    pub each: Option<JsonPath>,
    pub counter: Option<String>,
    pub until: Option<Until>,
    pub sending: Sending,
}

/// The place of character `position` (1-based) of a string value written
/// at `loc`, when the value is written as is between quotes (no escapes);
/// else the value's own place.
pub(super) fn within(loc: &Loc, value: &str, position: usize) -> Loc {
    if loc.span.len() != value.len() + 2 {
        return loc.clone();
    }
    let mut offset = position.saturating_sub(1).min(value.len());
    while !value.is_char_boundary(offset) {
        offset -= 1;
    }
    let start = loc.span.start + 1 + offset;
    Loc {
        span: start..start + 1,
        path: loc.path.clone(),
    }
}

impl Compiler<'_> {
    pub(super) fn jsonpath(&self, at: &At<String>) -> Option<JsonPath> {
        match JsonPath::parse(&at.value) {
            Ok(path) => Some(path),
            Err(e) => {
                let hint = if at.value.trim_start().starts_with('$') {
                    JSONPATH_HINT.to_string()
                } else {
                    format!(
                        "a JSONPath starts at the document's root, `$`: e.g. \"$.{}\"",
                        at.value.trim_start_matches('.')
                    )
                };
                self.problem(
                    &within(&at.loc, &at.value, e.position),
                    format!(
                        "`{}` is not a valid JSONPath: {}",
                        crate::wording::cut(&at.value, 200),
                        e.message.trim_end_matches('.')
                    ),
                    hint,
                );
                None
            }
        }
    }

    /// A follow entry's `url` template: relative URLs are resolved against
    /// the response's.
    pub(super) fn follow_url(&self, at: &At<String>) -> Option<Template> {
        let t = self.template(at)?;
        let sample: serde_json::Map<String, serde_json::Value> = t
            .fields()
            .into_iter()
            .map(|f| (f.to_string(), serde_json::Value::from("1")))
            .collect();
        let rendered = t.render(&sample).unwrap_or_default();
        let joined = url::Url::parse("http://example.com/a/").and_then(|b| b.join(&rendered));
        match joined {
            Ok(u) if matches!(u.scheme(), "http" | "https") => Some(t),
            _ => {
                self.problem(
                    &at.loc,
                    format!("`{}` does not make an http(s) URL", at.value),
                    "write an http(s) URL or a path, e.g. \"/api/threads/{id}/comments?page=1\"",
                );
                None
            }
        }
    }

    /// `each`, `counter`, `until` and the sending keys of a follow entry.
    pub(super) fn json_follow(&self, f: &FollowFile) -> Option<ApiFollow> {
        let each = self.follow_each(f);
        let until = self.until(f);
        let counter = self.counter(f);
        let sending = self.sending(f);
        Some(ApiFollow {
            each: each?,
            counter: counter?,
            until: until?,
            sending: sending?,
        })
    }

    /// A follow entry's `each`: `Some(None)` without one; `None` on a
    /// problem.
    fn follow_each(&self, f: &FollowFile) -> Option<Option<JsonPath>> {
        match &f.each {
            Some(at) if f.url.is_none() => {
                self.problem(
                    &at.loc,
                    "`each` in a follow entry goes with a `url` template, rendered once per element",
                    "add url = \"/api/threads/{id}/comments?page=1\" ({id} is a field of each element), or select the links with json = \"$…\" instead",
                );
                None
            }
            Some(at) => self.jsonpath(at).map(Some),
            None => Some(None),
        }
    }

    /// `until`: when a JSON page's follow-ups stop. `Some(None)` without
    /// one; `None` on a problem.
    fn until(&self, f: &FollowFile) -> Option<Option<Until>> {
        let Some(u) = &f.until else {
            return Some(None);
        };
        if f.url.is_none() && f.json.is_none() {
            self.problem(
                &u.loc,
                "`until` reads a JSON page, and this entry takes its links from elsewhere",
                "use it with `json = \"$…\"` or a `url` template, in a rule that reads JSON",
            );
            return None;
        }
        let conditions = [&u.empty, &u.last, &u.more];
        if conditions.iter().all(|c| c.is_none()) {
            self.problem(
                &u.loc,
                "`until` names no condition",
                "write until = { empty = \"$.comments\" }, { last = \"$.total_pages\" } or { more = \"$.has_more\" }",
            );
            return None;
        }
        let mut ok = true;
        let mut path = |at: &Option<At<String>>| match at {
            Some(at) => {
                let p = self.jsonpath(at);
                ok &= p.is_some();
                p
            }
            None => None,
        };
        let until = Until {
            empty: path(&u.empty),
            last: path(&u.last),
            more: path(&u.more),
        };
        if let (Some(last), None) = (&u.last, &f.counter) {
            ok = false;
            self.problem(
                &last.loc,
                "`until.last` compares the page counter with the last page, and this entry has no `counter`",
                "add counter = \"page\" (the context field holding the page number)",
            );
        }
        ok.then_some(Some(until))
    }

    /// `counter`: the context field counting pages. `Some(None)` without
    /// one; `None` on a problem.
    fn counter(&self, f: &FollowFile) -> Option<Option<String>> {
        let Some(c) = &f.counter else {
            return Some(None);
        };
        if f.until.is_none() {
            self.problem(
                &c.loc,
                "a page counter without `until` would count pages for ever",
                "add until = { empty = \"$.comments\" } (stop at a page without comments) or { last = \"$.total_pages\" }",
            );
            return None;
        }
        if f.url.is_none() {
            self.problem(
                &c.loc,
                "`counter` puts the next page number into a `url` template, and this entry has none",
                format!("add url = \"…?page={{{}}}\"", c.value),
            );
            return None;
        }
        self.name(c, "context field").then(|| Some(c.value.clone()))
    }

    /// How a follow entry's requests are sent.
    fn sending(&self, f: &FollowFile) -> Option<Sending> {
        let mut ok = true;
        let mut template = |at: &At<String>| {
            let t = self.template(at);
            ok &= t.is_some();
            t
        };
        let body = match (&f.body, &f.form) {
            (Some(body), Some((loc, _))) => {
                self.problem(
                    loc,
                    "a follow entry has both `body` and `form`",
                    format!(
                        "keep one: `form` sends form fields encoded, `body` sends `{}` as written",
                        body.value
                    ),
                );
                return None;
            }
            (Some(b), None) => template(b).map(Body::Raw),
            (None, Some((_, fields))) => Some(Body::Form(
                fields
                    .iter()
                    .filter_map(|(k, v)| Some((k.value.clone(), template(v)?)))
                    .collect(),
            )),
            (None, None) => None,
        };
        let headers: Vec<(String, Template)> = f
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.value.clone(), template(v)?)))
            .collect();
        let method = match &f.method {
            Some(m) if !is_http_token(&m.value) => {
                self.problem(
                    &m.loc,
                    format!("`{}` is not an HTTP method", m.value),
                    "write it in capitals: GET, POST, PUT, …",
                );
                return None;
            }
            Some(m) => m.value.clone(),
            // A form is posted, as Scrapy's FormRequest does.
            None if f.form.is_some() => "POST".to_string(),
            None => "GET".to_string(),
        };
        if let (Some(_), "GET" | "HEAD") = (&body, method.as_str()) {
            let loc = f
                .body
                .as_ref()
                .map(|b| b.loc.clone())
                .or_else(|| f.method.as_ref().map(|m| m.loc.clone()))
                .unwrap_or_else(|| f.loc.clone());
            self.problem(
                &loc,
                format!("a {method} request has no body"),
                "add method = \"POST\"",
            );
            return None;
        }
        ok.then_some(Sending {
            method,
            body: Some(body).flatten(),
            headers,
        })
    }

    /// Whether rule `r` reads its responses as JSON; a rule that would read
    /// them as both JSON and HTML is a problem (None).
    pub(super) fn reads_json(&self, r: &RuleFile, items: &[ItemFile]) -> Option<bool> {
        let mut json: Option<&Loc> = None;
        let mut html: Option<&Loc> = None;
        for e in &r.extract {
            if let Some(each) = &e.each_xpath {
                html = html.or(Some(&each.loc));
            }
            if let Some(each) = &e.each {
                if each.value.starts_with('$') {
                    json = json.or(Some(&each.loc));
                } else {
                    html = html.or(Some(&each.loc));
                }
            }
            let item = e
                .item
                .as_ref()
                .and_then(|i| items.iter().find(|d| d.name.value == i.value));
            for field in item.map(|i| i.fields.as_slice()).unwrap_or_default() {
                field_reads(field, &mut json, &mut html);
            }
        }
        for f in &r.follow {
            let uses_json = [&f.json, &f.each]
                .into_iter()
                .flatten()
                .map(|a| &a.loc)
                .chain(f.until.as_ref().map(|u| &u.loc))
                .next();
            json = json.or(uses_json);
            html = html.or([&f.css, &f.xpath]
                .into_iter()
                .flatten()
                .map(|c| &c.loc)
                .next());
        }
        match (json, html) {
            (Some(j), Some(h)) => {
                let name = r.name.as_ref().map_or("", |n| n.value.as_str());
                self.problem(
                    j,
                    format!(
                        "rule `{name}` reads its pages as JSON here, and as HTML at `{}`; a response is one or the other",
                        h.path
                    ),
                    "use JSONPath (`json = \"$…\"`) throughout this rule, or split it into a JSON rule and an HTML rule",
                );
                None
            }
            (j, _) => Some(j.is_some()),
        }
    }
}

/// Where a field (and the fields inside it) first reads JSON and HTML.
fn field_reads<'f>(field: &'f FieldFile, json: &mut Option<&'f Loc>, html: &mut Option<&'f Loc>) {
    if let Some(at) = &field.json {
        *json = json.or(Some(&at.loc));
    }
    if let Some(each) = &field.each {
        if each.value.starts_with('$') {
            *json = json.or(Some(&each.loc));
        } else {
            *html = html.or(Some(&each.loc));
        }
    }
    for at in [&field.css, &field.xpath, &field.jsonld, &field.og]
        .into_iter()
        .flatten()
    {
        *html = html.or(Some(&at.loc));
    }
    for nested in field.fields.iter().flat_map(|(_, f)| f) {
        field_reads(nested, json, html);
    }
}
