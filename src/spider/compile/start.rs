//! `[start]`: the start key's type and batch size, how an entry becomes a
//! request (URL, method, body and headers templates over the task's
//! fields, priority, rule), and the sitemaps and feeds a crawl starts
//! from. The start key's name is [`super::keys`]'s.

use super::values::is_http_token;
use super::{Compiler, Names};
use crate::reader::At;
use crate::request::Request;
use crate::spider::file::{SpiderFile, StartFile};
use crate::spider::{IntSource, Start, StartKind, Template};

/// Priorities a spider may write: the frontier keeps every request's
/// within these.
const PRIORITIES: std::ops::RangeInclusive<i64> =
    -crate::frontier::MAX_PRIORITY..=crate::frontier::MAX_PRIORITY;

impl Compiler<'_> {
    pub(super) fn start(&self, s: &StartFile, rules: &Names<'_>) -> Option<Start> {
        let kind = self.start_kind(s);
        let batch_size = self.batch_size(s);
        let task_fields: Option<Vec<String>> = s
            .task_fields
            .as_ref()
            .map(|f| f.iter().map(|a| a.value.clone()).collect());
        let mut templates_ok = true;
        let mut template = |at: &At<String>| -> Option<Template> {
            let t = self.task_template(at, task_fields.as_deref());
            templates_ok &= t.is_some();
            t
        };
        let url = s.url.as_ref().and_then(&mut template);
        if let (Some(t), Some(at)) = (&url, &s.url) {
            self.check_url_template(t, at);
        }
        let method = match &s.method {
            Some(m) => template(m),
            None => Template::parse("GET").ok(),
        };
        if let (Some(m), Some(at)) = (&method, &s.method) {
            if m.fields().is_empty() && !is_http_token(&at.value) {
                self.problem(
                    &at.loc,
                    format!("`{}` is not an HTTP method", at.value),
                    "use GET, POST, … or a `{field}` template",
                );
            }
        }
        let body = s.body.as_ref().and_then(&mut template);
        for (k, v) in &s.headers {
            self.check_start_header(k, v);
        }
        let headers: Vec<(String, Template)> = s
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.value.clone(), template(v)?)))
            .collect();
        let priority = match &s.priority {
            None => IntSource::Fixed(0),
            Some(p) => self.int_source(p, &task_fields, PRIORITIES)?,
        };
        let rule = match &s.rule {
            Some(r) => Some(self.lookup(r, rules, "rule")?),
            None => None,
        };
        let (kind, batch_size) = (kind?, batch_size?);
        templates_ok.then_some(())?;
        Some(Start {
            kind,
            batch_size,
            url,
            method: method?,
            body,
            headers,
            priority,
            rule,
            dont_filter: s.dont_filter.as_ref().is_none_or(|d| d.value),
            task_fields,
            seeds: Vec::new(),
        })
    }

    /// A `[start] headers` entry: a name and a value an HTTP request can
    /// carry (a CR or LF in the value would fail every task at run time).
    fn check_start_header(&self, name: &At<String>, value: &At<String>) {
        if reqwest::header::HeaderName::from_bytes(name.value.as_bytes()).is_err() {
            self.problem(
                &name.loc,
                format!("`{}` is not an HTTP header name", name.value),
                "use letters, digits and `-`, e.g. `X-Requested-With`",
            );
        }
        if reqwest::header::HeaderValue::from_str(&value.value).is_err() {
            self.problem(
                &value.loc,
                format!(
                    "the `{}` header's value {:?} cannot be sent (a line break or another control character)",
                    name.value, value.value
                ),
                "write the value on one line, without control characters",
            );
        }
    }

    /// `[start] type`: the Redis type of the start key.
    fn start_kind(&self, s: &StartFile) -> Option<StartKind> {
        match s.kind.as_ref().map(|k| k.value.as_str()) {
            None | Some("list") => Some(StartKind::List),
            Some("set") => Some(StartKind::Set),
            Some("zset") => Some(StartKind::Zset),
            Some(other) => {
                self.problem(
                    &s.kind.as_ref().map(|k| k.loc.clone()).unwrap_or_default(),
                    format!("`{other}` is not a start key type"),
                    "use \"list\", \"set\" or \"zset\" (the Redis type of the start key)",
                );
                None
            }
        }
    }

    /// `[start] batch_size`: entries claimed in one step.
    fn batch_size(&self, s: &StartFile) -> Option<usize> {
        match &s.batch_size {
            None => Some(16),
            Some(b) if (1..=10_000).contains(&b.value) => Some(b.value as usize),
            Some(b) => {
                self.problem(
                    &b.loc,
                    format!("{} is out of range", b.value),
                    "use a batch size from 1 to 10000",
                );
                None
            }
        }
    }

    /// A template over a task's fields: each field it uses must be one of
    /// `task_fields`, when the spider declares them.
    fn task_template(&self, at: &At<String>, task_fields: Option<&[String]>) -> Option<Template> {
        let t = self.template(at);
        if let (Some(t), Some(fields)) = (&t, task_fields) {
            for f in t.fields() {
                if !fields.iter().any(|k| k == f) {
                    self.problem(
                        &at.loc,
                        format!(
                            "the template uses `{{{f}}}`, but `task_fields` does not list `{f}`"
                        ),
                        format!(
                            "add \"{f}\" to start.task_fields, or use one of: {}",
                            fields.join(", ")
                        ),
                    );
                }
            }
        }
        t
    }

    fn check_url_template(&self, t: &Template, at: &At<String>) {
        let sample: serde_json::Map<String, serde_json::Value> = t
            .fields()
            .into_iter()
            .map(|f| (f.to_string(), serde_json::Value::from("1")))
            .collect();
        let rendered = t.render(&sample).unwrap_or_default();
        match url::Url::parse(&rendered) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
            _ => self.problem(
                &at.loc,
                format!("`{}` does not make an http(s) URL", at.value),
                "start with http:// or https:// and a host, e.g. \"https://bbs.example.com/list/{forum_id}/1\"",
            ),
        }
    }

    /// The requests of `[start] sitemap` and `feed`: each URL read by the
    /// first rule with a `sitemap = true` (resp. `feed = true`) follow
    /// entry.
    pub(super) fn seeds(&self, file: &SpiderFile) -> Option<Vec<Request>> {
        let mut seeds = Vec::new();
        let mut ok = true;
        for (urls, kind) in [(&file.start.sitemap, "sitemap"), (&file.start.feed, "feed")] {
            let Some(urls) = urls else { continue };
            let reader = file.rules.iter().find(|r| {
                r.follow.iter().any(|f| {
                    let flag = if kind == "sitemap" {
                        &f.sitemap
                    } else {
                        &f.feed
                    };
                    flag.as_ref().is_some_and(|b| b.value)
                })
            });
            for at in urls {
                let Some(rule) = reader.and_then(|r| r.name.as_ref()) else {
                    ok = false;
                    self.problem(
                        &at.loc,
                        format!("no rule reads a {kind}: `[start] {kind}` needs a rule with a `{kind} = true` follow entry"),
                        format!("add a rule that matches the URL, with `[[rules.follow]]` `{kind} = true` and the rule of the pages it lists"),
                    );
                    continue;
                };
                match url::Url::parse(&at.value) {
                    Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
                        seeds.push(Request {
                            rule: Some(rule.value.clone()),
                            dont_filter: true,
                            ..Request::get(&at.value)
                        });
                    }
                    _ => {
                        ok = false;
                        self.problem(
                            &at.loc,
                            format!("`{}` is not an http(s) URL", at.value),
                            format!("write the {kind}'s full address, e.g. \"https://news.example.com/{kind}.xml\""),
                        );
                    }
                }
            }
        }
        ok.then_some(seeds)
    }
}
