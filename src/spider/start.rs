//! Start entries → requests. An entry is a plain URL, a JSON task rendered
//! through the spider's URL template (task fields become the request's
//! context), or scrapy-redis 0.9's own JSON format (`{"url": …, "meta": …,
//! "method": …}`, other keys sent as form data) so that task producers
//! written for scrapy-redis keep working unchanged.

use serde_json::{Map, Value};

use super::{IntSource, Spider, Template};
use crate::fingerprint::safe_url_string;
use crate::request::Request;

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
            Request::new(absolute_http_url(entry)?)
        };
        request.rule = self.start.rule.map(|i| self.rules[i].name.clone());
        request.dont_filter = self.start.dont_filter;
        Ok(request)
    }

    fn task_request(&self, task: Map<String, Value>) -> Result<Request, StartEntryError> {
        let start = &self.start;
        let template = start.url.as_ref().ok_or(StartEntryError::NoTemplate)?;
        let render = |t: &Template, part: &'static str| {
            t.render(&task).map_err(|m| StartEntryError::MissingField { field: m.0, part })
        };
        let url = absolute_http_url(&render(template, "url")?)?;
        let method = render(&start.method, "method")?.trim().to_ascii_uppercase();
        if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase() || b == b'-') {
            return Err(StartEntryError::BadValue { what: "HTTP method", value: method });
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
                raw.trim().parse().map_err(|_| StartEntryError::BadValue { what: "priority", value: raw })?
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
    let raw_url = match task.remove("url") {
        Some(Value::String(u)) => u,
        _ => return Err(StartEntryError::BadUrl { url: String::new() }),
    };
    let mut url = absolute_http_url(&raw_url)?;
    let method = match task.remove("method") {
        Some(Value::String(m)) => m.to_ascii_uppercase(),
        Some(other) => return Err(StartEntryError::BadValue { what: "HTTP method", value: other.to_string() }),
        None => "GET".to_string(),
    };
    let meta = match task.remove("meta") {
        Some(Value::Object(m)) => m,
        Some(Value::Null) | None => Map::new(),
        Some(other) => return Err(StartEntryError::BadValue { what: "meta object", value: other.to_string() }),
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
            headers.push(("Content-Type".to_string(), "application/x-www-form-urlencoded".to_string()));
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
