//! Start entries → requests. An entry is a plain URL, a JSON task rendered
//! through the spider's URL template (task fields become the request's
//! context), or scrapy-redis 0.9's own JSON format (`{"url": …, "meta": …,
//! "method": …}`, other keys sent as form data) so that task producers
//! written for scrapy-redis keep working unchanged.

use serde_json::{Map, Value};

use super::{IntSource, Spider, Template};
use crate::request::Request;
use scrapy_url::safe_url_string;

/// Why a start entry cannot become a request. The entry is set aside, never
/// retried as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartEntryError {
    #[error("the entry is empty")]
    Empty,
    #[error("the entry is not valid JSON: {0}")]
    Json(String),
    #[error("a JSON entry must be an object, not {0}")]
    NotObject(&'static str),
    #[error("the task has no `url` and the spider has no start.url template to build one")]
    NoTemplate,
    #[error("the task lacks field `{field}` used by start.{part}")]
    MissingField { field: String, part: &'static str },
    #[error("`{url}` is not an absolute http(s) URL")]
    BadUrl { url: String },
    #[error("`{value}` is not a valid {what}")]
    BadValue { what: &'static str, value: String },
    #[error("the task lacks `{field}`, which start.task_fields says every task has")]
    MissingTaskField { field: String },
    #[error("{host} is not in allowed_domains ({allowed})")]
    Offsite { host: String, allowed: String },
}

impl From<StartEntryError> for crate::frontier::Refused {
    fn from(e: StartEntryError) -> Self {
        crate::frontier::Refused {
            reason: e.to_string(),
            stat: e.is_offsite().then_some(&crate::stats::OFFSITE_FILTERED),
        }
    }
}

impl StartEntryError {
    /// Whether the entry was refused for its host (counted as
    /// `offsite/filtered`, as a link to another host would be).
    pub fn is_offsite(&self) -> bool {
        matches!(self, StartEntryError::Offsite { .. })
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An absolute http(s) URL in w3lib's safe form, or an error naming it.
pub fn absolute_http_url(raw: &str) -> Result<String, StartEntryError> {
    let safe = safe_url_string(raw.trim(), encoding_rs::UTF_8);
    match url::Url::parse(&safe) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(safe),
        _ => Err(StartEntryError::BadUrl {
            url: raw.trim().to_string(),
        }),
    }
}

impl Spider {
    /// The request a start entry stands for.
    pub fn start_request(&self, entry: &str) -> Result<Request, StartEntryError> {
        let entry = entry.trim();
        if entry.is_empty() {
            return Err(StartEntryError::Empty);
        }
        let mut request = if entry.starts_with('{') || entry.starts_with('[') {
            let value: Value =
                serde_json::from_str(entry).map_err(|e| StartEntryError::Json(e.to_string()))?;
            let Value::Object(task) = value else {
                return Err(StartEntryError::NotObject(json_kind(&value)));
            };
            if task.get("url").is_some_and(Value::is_string) {
                scrapy_redis_request(task)?
            } else {
                self.task_request(task)?
            }
        } else {
            Request {
                headers: self.fixed_start_headers(),
                ..Request::new(absolute_http_url(entry)?)
            }
        };
        // The checks every later stage relies on: the context the spider
        // declares (a task without `max_page` would crawl every page), and
        // the hosts it may go to.
        if let Some(fields) = &self.start.task_fields {
            if let Some(field) = fields.iter().find(|f| !request.meta.contains_key(*f)) {
                return Err(StartEntryError::MissingTaskField {
                    field: field.clone(),
                });
            }
        }
        if !self.allows_url(&request.url) {
            return Err(self.offsite(&request.url));
        }
        request.rule = self.start.rule.map(|i| self.rules[i].name.clone());
        request.dont_filter = self.start.dont_filter;
        Ok(request)
    }

    /// The `[start] headers` a plain URL entry is sent with: those that use
    /// no task field (a URL has none to fill them with).
    fn fixed_start_headers(&self) -> Vec<(String, String)> {
        let none = Map::new();
        self.start
            .headers
            .iter()
            .filter(|(_, v)| v.fields().is_empty())
            .filter_map(|(k, v)| Some((k.clone(), v.render(&none).ok()?)))
            .collect()
    }

    /// The refusal of a start URL outside `allowed_domains`: its host, and
    /// its port when an entry names one (then the port decides).
    fn offsite(&self, url: &str) -> StartEntryError {
        let ports = self.allowed_domains.iter().any(|d| d.port.is_some());
        let host = url::Url::parse(url)
            .ok()
            .and_then(|u| {
                let host = u.host_str()?.to_string();
                Some(match u.port_or_known_default() {
                    Some(p) if ports => format!("{host}:{p}"),
                    _ => host,
                })
            })
            .unwrap_or_default();
        let allowed = self.allowed_domains.iter().map(ToString::to_string);
        StartEntryError::Offsite {
            host,
            allowed: allowed.collect::<Vec<_>>().join(", "),
        }
    }

    fn task_request(&self, task: Map<String, Value>) -> Result<Request, StartEntryError> {
        let start = &self.start;
        let template = start.url.as_ref().ok_or(StartEntryError::NoTemplate)?;
        let render = |t: &Template, part: &'static str| {
            t.render(&task)
                .map_err(|m| StartEntryError::MissingField { field: m.0, part })
        };
        let url = absolute_http_url(&render(template, "url")?)?;
        let method = render(&start.method, "method")?.trim().to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase() || b == b'-') {
            return Err(StartEntryError::BadValue {
                what: "HTTP method",
                value: method,
            });
        }
        let body = match &start.body {
            Some(b) => render(b, "body")?,
            None => String::new(),
        };
        let headers = start
            .headers
            .iter()
            .map(|(k, v)| Ok((k.clone(), render(v, "headers")?)))
            .collect::<Result<Vec<_>, StartEntryError>>()?;
        let priority = match &start.priority {
            IntSource::Fixed(p) => *p,
            IntSource::Template(t) => {
                let raw = render(t, "priority")?;
                raw.trim().parse().map_err(|_| StartEntryError::BadValue {
                    what: "priority",
                    value: raw,
                })?
            }
        };
        Ok(Request {
            method,
            headers,
            body,
            priority,
            meta: task,
            ..Request::new(url)
        })
    }
}

/// scrapy-redis 0.9 `make_request_from_data`: `url`, optional `method` and
/// `meta`; every other key is form data (the query of a GET, the
/// form-encoded body of a POST), as Scrapy's `FormRequest` sends it.
fn scrapy_redis_request(mut task: Map<String, Value>) -> Result<Request, StartEntryError> {
    let raw_url = match task.shift_remove("url") {
        Some(Value::String(u)) => u,
        _ => return Err(StartEntryError::BadUrl { url: String::new() }),
    };
    let mut url = absolute_http_url(&raw_url)?;
    let method = match task.shift_remove("method") {
        Some(Value::String(m)) => m.to_ascii_uppercase(),
        Some(other) => {
            return Err(StartEntryError::BadValue {
                what: "HTTP method",
                value: other.to_string(),
            })
        }
        None => "GET".to_string(),
    };
    let meta = match task.shift_remove("meta") {
        Some(Value::Object(m)) => m,
        Some(Value::Null) | None => Map::new(),
        Some(other) => {
            return Err(StartEntryError::BadValue {
                what: "meta object",
                value: other.to_string(),
            })
        }
    };
    let mut headers = Vec::new();
    let mut body = String::new();
    if !task.is_empty() {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in &task {
            let values = match v {
                Value::Array(a) => a.iter().collect(),
                v => vec![v],
            };
            for v in values {
                match v {
                    Value::String(s) => form.append_pair(k, s),
                    other => form.append_pair(k, &other.to_string()),
                };
            }
        }
        let query = form.finish();
        if method == "POST" {
            headers.push((
                "Content-Type".to_string(),
                "application/x-www-form-urlencoded".to_string(),
            ));
            body = query;
        } else if let Ok(mut u) = url::Url::parse(&url) {
            u.set_query(Some(&query));
            url = u.to_string();
        }
    }
    Ok(Request {
        method,
        headers,
        body,
        meta,
        ..Request::new(url)
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn bbs() -> Spider {
        Spider::from_str(
            "spiders/bbs.toml".as_ref(),
            include_str!("../../spiders/bbs.toml"),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn json_task_renders_the_url_template_and_becomes_context() {
        let r = bbs()
            .start_request(r#"{"forum_id": "00001", "max_page": 5}"#)
            .unwrap();
        assert_eq!(r.url, "http://127.0.0.1:8700/list/00001/1");
        assert_eq!((r.method.as_str(), r.depth, r.priority), ("GET", 0, 0));
        assert_eq!(r.rule.as_deref(), Some("list"));
        assert!(
            r.dont_filter,
            "start requests skip the dupefilter, as in scrapy-redis"
        );
        assert_eq!(
            Value::Object(r.meta),
            json!({"forum_id": "00001", "max_page": 5})
        );
    }

    /// bbs without `task_fields`: entries need not carry a task.
    fn open() -> Spider {
        let text = include_str!("../../spiders/bbs.toml");
        let start = text.find("task_fields").unwrap_or(text.len());
        let end = start + text[start..].find('\n').unwrap_or(0);
        let text = format!("{}{}", &text[..start], &text[end..]);
        Spider::from_str("open.toml".as_ref(), &text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn plain_urls_are_made_safe() {
        let r = open()
            .start_request("  http://127.0.0.1:8700/list/00001/1?q=a b ")
            .unwrap();
        assert_eq!(r.url, "http://127.0.0.1:8700/list/00001/1?q=a%20b");
        assert!(r.meta.is_empty());
    }

    #[test]
    fn scrapy_redis_json_format_is_accepted() {
        let spider = open();
        let get = spider
            .start_request(r#"{"url": "http://127.0.0.1:8700/search", "meta": {"forum_id": "7"}, "q": "a b", "page": 2}"#)
            .unwrap();
        assert_eq!(get.url, "http://127.0.0.1:8700/search?q=a+b&page=2");
        assert_eq!(Value::Object(get.meta), json!({"forum_id": "7"}));
        let post = spider
            .start_request(r#"{"url": "http://127.0.0.1:8700/search", "method": "post", "q": "x"}"#)
            .unwrap();
        assert_eq!((post.method.as_str(), post.body.as_str()), ("POST", "q=x"));
        assert!(post.headers.contains(&(
            "Content-Type".into(),
            "application/x-www-form-urlencoded".into()
        )));
    }

    #[test]
    fn bad_entries_say_what_is_wrong() {
        let spider = bbs();
        assert_eq!(spider.start_request("   "), Err(StartEntryError::Empty));
        assert!(matches!(
            spider.start_request("{not json"),
            Err(StartEntryError::Json(_))
        ));
        assert_eq!(
            spider.start_request("[1]"),
            Err(StartEntryError::NotObject("an array"))
        );
        assert_eq!(
            spider.start_request(r#"{"max_page": 5}"#),
            Err(StartEntryError::MissingField {
                field: "forum_id".into(),
                part: "url"
            })
        );
        assert!(matches!(
            spider.start_request("ftp://127.0.0.1/x"),
            Err(StartEntryError::BadUrl { .. })
        ));
        assert!(matches!(
            spider.start_request("not a url"),
            Err(StartEntryError::BadUrl { .. })
        ));
        // The task fields the spider declares, whatever the entry's form.
        for (entry, field) in [
            (r#"{"forum_id": "00001"}"#, "max_page"),
            ("http://127.0.0.1:8700/list/00001/1", "forum_id"),
            (
                r#"{"url": "http://127.0.0.1:8700/list/00001/1", "meta": {"forum_id": "00001"}}"#,
                "max_page",
            ),
        ] {
            assert_eq!(
                spider.start_request(entry),
                Err(StartEntryError::MissingTaskField {
                    field: field.into()
                }),
                "{entry}"
            );
        }
        assert_eq!(
            spider
                .start_request(r#"{"forum_id": "00001", "max_page": 1, "x": 1}"#)
                .map(|_| ()),
            Ok(())
        );
        assert!(matches!(
            spider.start_request("http://localhost:8700/list/00001/1"),
            Err(StartEntryError::MissingTaskField { .. })
        ));
        assert!(matches!(
            open().start_request("http://localhost:8700/list/00001/1"),
            Err(StartEntryError::Offsite { .. })
        ));
    }

    #[test]
    fn templates_give_method_body_headers_and_priority() {
        let text = r#"
name = "api"
[start]
url = "http://127.0.0.1:8700/api/{id}"
method = "{verb}"
body = '{{"id": "{id}"}}'
headers = { X-Id = "{id}" }
priority = "{prio}"
[items.x]
id = { meta = "id" }
[[rules]]
name = "api"
match = '/api/'
  [[rules.extract]]
  item = "x"
"#;
        let spider = Spider::from_str("api.toml".as_ref(), text).unwrap_or_else(|e| panic!("{e}"));
        let r = spider
            .start_request(r#"{"id": 7, "verb": "put", "prio": "3"}"#)
            .unwrap();
        assert_eq!(
            (
                r.url.as_str(),
                r.method.as_str(),
                r.body.as_str(),
                r.priority
            ),
            ("http://127.0.0.1:8700/api/7", "PUT", r#"{"id": "7"}"#, 3)
        );
        assert_eq!(r.headers, vec![("X-Id".to_string(), "7".to_string())]);
        assert!(matches!(
            spider.start_request(r#"{"id": 7, "verb": "get", "prio": "high"}"#),
            Err(StartEntryError::BadValue {
                what: "priority",
                ..
            })
        ));
    }

    #[test]
    fn plain_url_entries_get_the_headers_that_need_no_task() {
        let text = r#"
name = "api"
[start]
headers = { X-Id = "{id}", Authorization = "Bearer t" }
[items.x]
id = { meta = "id" }
[[rules]]
name = "api"
match = '/api/'
  [[rules.extract]]
  item = "x"
"#;
        let spider = Spider::from_str("api.toml".as_ref(), text).unwrap_or_else(|e| panic!("{e}"));
        let r = spider.start_request("http://127.0.0.1:8700/api/7").unwrap();
        assert_eq!(
            r.headers,
            vec![("Authorization".to_string(), "Bearer t".to_string())]
        );
    }
}
