//! A request scrapy-redis queued — the dict of Scrapy's
//! `Request.to_dict()`: `url`, `callback`, `errback`, `method`, `headers`,
//! `body`, `cookies`, `meta`, `encoding`, `priority`, `dont_filter`,
//! `flags`, `cb_kwargs` and, for a subclass, `_class` — as a crawlworker
//! [`Request`]:
//!
//! - `callback` names the rule: through `[scrapy_redis] callbacks`, else
//!   the rule of the same name; no callback is Scrapy's `parse`; a
//!   CrawlSpider's `_callback` names its `Rule` by index (meta `rule`),
//!   mapped by `[scrapy_redis] crawl_rules`. A callback that maps to no
//!   rule is refused with its name;
//! - `meta` becomes the context, with Scrapy's own bookkeeping taken out:
//!   `depth`, `retry_times` and `redirect_urls` become the request's
//!   fields, the download's traces (`download_slot`, …) are dropped;
//!   `cb_kwargs` join the context (meta wins a clash);
//! - method, headers, body, priority and `dont_filter` are kept; cookies
//!   are sent as the request's `Cookie` header; `errback`, `flags` and
//!   `encoding` (the URL is already encoded) have no counterpart.
//!
//! Nothing here touches the dupefilter: the fingerprint scrapy-redis
//! recorded when it queued the request is crawlworker's too.

use serde_json::{Map, Value as Json};

use super::pickle::Value;
use crate::request::Request;
use crate::spider::Spider;

/// Scrapy's request classes that are plain HTTP requests.
const PLAIN_CLASSES: &[&str] = &[
    "scrapy.http.request.Request",
    "scrapy.http.request.form.FormRequest",
    "scrapy.http.request.json_request.JsonRequest",
    "scrapy.http.request.rpc.XmlRpcRequest",
];

/// Meta keys Scrapy's middlewares write about a download that happened,
/// which mean nothing to the next one.
const DOWNLOAD_TRACES: &[&str] = &[
    "download_slot",
    "download_latency",
    "redirect_times",
    "redirect_ttl",
    "redirect_reasons",
];

/// Why a queued request is not queued by crawlworker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotMapped {
    #[error("not a Scrapy request ({0})")]
    NotARequest(String),
    #[error("callback `{callback}` maps to no rule: map it in [scrapy_redis] callbacks (`{callback} = \"RULE\"`), or name a rule `{callback}`")]
    Callback { callback: String },
    #[error("a CrawlSpider request for its Rule {index} (callback `_callback`): list the Python spider's rules, in order, in [scrapy_redis] crawl_rules ({listed} listed)")]
    CrawlRule { index: String, listed: usize },
    #[error("a `{0}` request: only Scrapy's plain requests (Request, FormRequest, JsonRequest) are read; list other classes in [scrapy_redis] classes to read them as plain requests")]
    Class(String),
    #[error("`{0}` is not an http(s) URL")]
    Url(String),
    #[error("{0} is not allowed by the spider (allowed_domains or deny)")]
    Offsite(String),
    #[error("its body is not UTF-8 text ({0} bytes); crawlworker requests carry text bodies")]
    Body(usize),
    #[error("its `{field}` cannot be kept: {why}")]
    Field { field: String, why: String },
}

fn field(field: &str, why: impl Into<String>) -> NotMapped {
    NotMapped::Field {
        field: field.to_string(),
        why: why.into(),
    }
}

/// The spider queued requests are mapped for.
pub struct Takeover<'s> {
    pub spider: &'s Spider,
}

impl Takeover<'_> {
    /// The crawlworker request a queued scrapy-redis request is.
    pub fn request(&self, v: &Value) -> Result<Request, NotMapped> {
        if !matches!(v, Value::Dict(_)) {
            return Err(NotMapped::NotARequest(format!("a {}", v.type_name())));
        }
        self.check_class(v)?;
        let mut request = Request::new(self.url(v)?);
        request.method = method(v)?;
        request.body = body(v)?;
        request.headers = headers(v.get("headers"))?;
        if let Some(cookie) = cookie_header(v.get("cookies"))? {
            request.headers.push(("Cookie".to_string(), cookie));
        }
        request.rule = Some(self.rule(v)?);
        self.context(v, &mut request)?;
        request.priority = match v.get("priority") {
            Some(Value::Int(p)) => (*p).clamp(
                -crate::frontier::MAX_PRIORITY,
                crate::frontier::MAX_PRIORITY,
            ),
            Some(Value::None) | None => 0,
            Some(other) => return Err(field("priority", format!("a {}", other.type_name()))),
        };
        request.dont_filter = matches!(v.get("dont_filter"), Some(Value::Bool(true)));
        Ok(request)
    }

    fn check_class(&self, v: &Value) -> Result<(), NotMapped> {
        let class = match v.get("_class") {
            None | Some(Value::None) => return Ok(()),
            Some(c) => c.as_text().ok_or_else(|| field("_class", "not text"))?,
        };
        let extra = &self.spider.scrapy_redis.classes;
        if PLAIN_CLASSES.contains(&class) || extra.iter().any(|c| c == class) {
            return Ok(());
        }
        Err(NotMapped::Class(
            crate::wording::cut(class, 200).into_owned(),
        ))
    }

    /// The URL, in safe form, where the spider may go.
    fn url(&self, v: &Value) -> Result<String, NotMapped> {
        let url = v
            .get("url")
            .and_then(Value::as_text)
            .ok_or_else(|| NotMapped::NotARequest("no `url`".into()))?;
        let cut = || crate::wording::cut(url, 200).into_owned();
        let parsed = url::Url::parse(url).map_err(|_| NotMapped::Url(cut()))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            return Err(NotMapped::Url(cut()));
        }
        let safe = scrapy_url::safe_url_string(url, encoding_rs::UTF_8);
        if !self.spider.allows_url(&safe) || self.spider.deny.iter().any(|d| d.is_match(&safe)) {
            return Err(NotMapped::Offsite(cut()));
        }
        Ok(safe)
    }

    /// The rule the callback names.
    fn rule(&self, v: &Value) -> Result<String, NotMapped> {
        let callback = match v.get("callback") {
            None | Some(Value::None) => "parse",
            Some(c) => c.as_text().ok_or_else(|| field("callback", "not text"))?,
        };
        let map = &self.spider.scrapy_redis;
        if let Some((_, rule)) = map.callbacks.iter().find(|(c, _)| c == callback) {
            return Ok(rule.clone());
        }
        if callback == "_callback" {
            return self.crawl_rule(v);
        }
        match self.spider.rule_index(callback) {
            Some(i) => Ok(self.spider.rules[i].name.clone()),
            None => Err(NotMapped::Callback {
                callback: crate::wording::cut(callback, 100).into_owned(),
            }),
        }
    }

    /// A CrawlSpider request's rule, by its `Rule`'s index.
    fn crawl_rule(&self, v: &Value) -> Result<String, NotMapped> {
        let rules = &self.spider.scrapy_redis.crawl_rules;
        let index = v.get("meta").and_then(|m| m.get("rule"));
        let found = match index {
            Some(Value::Int(i)) => usize::try_from(*i).ok().and_then(|i| rules.get(i)),
            _ => None,
        };
        found.cloned().ok_or_else(|| NotMapped::CrawlRule {
            index: index.map_or("(none)".into(), |i| shown(i).to_string()),
            listed: rules.len(),
        })
    }

    /// `meta` and `cb_kwargs` as the context, Scrapy's bookkeeping taken
    /// into the request's own fields.
    fn context(&self, v: &Value, request: &mut Request) -> Result<(), NotMapped> {
        let mut meta = object(v.get("meta"), "meta")?;
        if matches!(
            v.get("callback").and_then(Value::as_text),
            Some("_callback")
        ) {
            meta.remove("rule");
        }
        for key in DOWNLOAD_TRACES {
            meta.remove(*key);
        }
        request.depth = take_count(&mut meta, "depth")?;
        request.retry_times = take_count(&mut meta, "retry_times")?;
        if let Some(urls) = meta.remove("redirect_urls") {
            request.redirect_urls = serde_json::from_value(urls)
                .map_err(|_| field("meta", "redirect_urls is not a list of URLs"))?;
        }
        for (k, value) in object(v.get("cb_kwargs"), "cb_kwargs")? {
            meta.entry(k).or_insert(value);
        }
        request.meta = meta;
        Ok(())
    }
}

fn method(v: &Value) -> Result<String, NotMapped> {
    match v.get("method") {
        None | Some(Value::None) => Ok("GET".into()),
        Some(m) => {
            let m = m.as_text().unwrap_or_default().trim().to_ascii_uppercase();
            if m.is_empty() || !m.bytes().all(|b| b.is_ascii_uppercase() || b == b'-') {
                return Err(field("method", "not an HTTP method"));
            }
            Ok(m)
        }
    }
}

fn body(v: &Value) -> Result<String, NotMapped> {
    match v.get("body") {
        None | Some(Value::None) => Ok(String::new()),
        Some(Value::Str(s)) => Ok(s.clone()),
        Some(Value::Bytes(b)) => String::from_utf8(b.clone()).map_err(|_| NotMapped::Body(b.len())),
        Some(other) => Err(field("body", format!("a {}", other.type_name()))),
    }
}

/// Scrapy's headers: names to a list of values (bytes), each value a
/// header of its own.
fn headers(h: Option<&Value>) -> Result<Vec<(String, String)>, NotMapped> {
    let pairs = match h {
        None | Some(Value::None) => return Ok(Vec::new()),
        Some(Value::Dict(pairs)) => pairs,
        Some(other) => return Err(field("headers", format!("a {}", other.type_name()))),
    };
    let mut out = Vec::new();
    for (name, values) in pairs {
        let name = header_text(name).ok_or_else(|| field("headers", "a name that is not text"))?;
        // Refused here, with its reason, rather than queued to fail as an
        // invalid request at every try.
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(field(
                "headers",
                format!(
                    "{:?} is not an HTTP header name (a line break, a space or another character a name cannot hold)",
                    crate::wording::cut(&name, 100)
                ),
            ));
        }
        let values = match values {
            Value::List(vs) | Value::Tuple(vs) => vs.iter().collect(),
            single => vec![single],
        };
        for value in values {
            let value = header_text(value)
                .ok_or_else(|| field("headers", format!("{name} has a value that is not text")))?;
            // The value is not shown: it may be a credential.
            if reqwest::header::HeaderValue::from_str(&value).is_err() {
                return Err(field(
                    "headers",
                    format!("{name} has a value with a line break (CR or LF) or another control character, which HTTP cannot send"),
                ));
            }
            out.push((name.clone(), value));
        }
    }
    Ok(out)
}

/// A header name or value: text, or bytes read as UTF-8, else Latin-1
/// (what HTTP headers were before UTF-8).
fn header_text(v: &Value) -> Option<String> {
    match v {
        Value::Str(s) => Some(s.clone()),
        Value::Bytes(b) => Some(
            std::str::from_utf8(b)
                .map(str::to_string)
                .unwrap_or_else(|_| b.iter().map(|c| char::from(*c)).collect()),
        ),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

/// Scrapy's `cookies` (a dict of names to values, or a list of dicts with
/// `name` and `value`) as one `Cookie` header.
fn cookie_header(c: Option<&Value>) -> Result<Option<String>, NotMapped> {
    let pairs: Vec<(String, String)> = match c {
        None | Some(Value::None) => Vec::new(),
        Some(Value::Dict(pairs)) => pairs
            .iter()
            .map(|(k, v)| Some((header_text(k)?, cookie_value(v)?)))
            .collect::<Option<_>>()
            .ok_or_else(|| field("cookies", "a name or value that is not text"))?,
        Some(Value::List(list)) => list
            .iter()
            .map(|c| Some((header_text(c.get("name")?)?, cookie_value(c.get("value")?)?)))
            .collect::<Option<_>>()
            .ok_or_else(|| field("cookies", "a cookie without a text name and value"))?,
        Some(other) => return Err(field("cookies", format!("a {}", other.type_name()))),
    };
    let joined: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    Ok((!joined.is_empty()).then(|| joined.join("; ")))
}

fn cookie_value(v: &Value) -> Option<String> {
    match v {
        Value::Float(f) => Some(f.to_string()),
        Value::Bool(b) => Some(if *b { "True" } else { "False" }.to_string()),
        other => header_text(other),
    }
}

/// A dict field (`meta`, `cb_kwargs`) as a JSON object.
fn object(v: Option<&Value>, name: &str) -> Result<Map<String, Json>, NotMapped> {
    match v {
        None | Some(Value::None) => Ok(Map::new()),
        Some(d @ Value::Dict(_)) => match to_json(d).map_err(|why| field(name, why))? {
            Json::Object(map) => Ok(map),
            _ => Ok(Map::new()),
        },
        Some(other) => Err(field(name, format!("a {}", other.type_name()))),
    }
}

/// Removes a count Scrapy keeps in meta (`depth`, `retry_times`).
fn take_count(meta: &mut Map<String, Json>, key: &str) -> Result<u32, NotMapped> {
    match meta.remove(key) {
        None | Some(Json::Null) => Ok(0),
        Some(n) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| field("meta", format!("{key} is not a whole number"))),
    }
}

/// A value as the context holds it. JSON has no bytes, tuples or sets:
/// bytes that are UTF-8 become text, tuples and sets lists; dict keys
/// become text as Python's `json.dumps` writes them.
pub fn to_json(v: &Value) -> Result<Json, String> {
    Ok(match v {
        Value::None => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Json::Number)
            .ok_or_else(|| format!("{f} is not a number JSON can hold"))?,
        Value::Str(s) => Json::String(s.clone()),
        Value::Bytes(b) => Json::String(
            String::from_utf8(b.clone())
                .map_err(|_| "it holds bytes that are not UTF-8 text".to_string())?,
        ),
        Value::List(items) | Value::Tuple(items) | Value::Set(items) => {
            Json::Array(items.iter().map(to_json).collect::<Result<_, _>>()?)
        }
        Value::Dict(pairs) => {
            let mut map = Map::new();
            for (k, value) in pairs {
                map.insert(key_text(k)?, to_json(value)?);
            }
            Json::Object(map)
        }
    })
}

/// A dict key as `json.dumps` writes it.
fn key_text(k: &Value) -> Result<String, String> {
    Ok(match k {
        Value::Str(s) => s.clone(),
        Value::Bytes(_) => k
            .as_text()
            .ok_or("a key of bytes that are not UTF-8 text")?
            .to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::None => "null".to_string(),
        other => return Err(format!("a {} as a dict key", other.type_name())),
    })
}

/// A value as a person reads it in a dead letter: JSON, whatever it
/// holds (bytes shown as text, with `\xNN` for what is not UTF-8).
pub fn shown(v: &Value) -> Json {
    match v {
        Value::Bytes(b) => Json::String(crate::wording::escaped(b).into_owned()),
        Value::Float(f) if !f.is_finite() => Json::String(f.to_string()),
        Value::List(items) | Value::Tuple(items) | Value::Set(items) => {
            Json::Array(items.iter().map(shown).collect())
        }
        Value::Dict(pairs) => Json::Object(
            pairs
                .iter()
                .map(|(k, v)| {
                    let key = key_text(k).unwrap_or_else(|_| shown(k).to_string());
                    (key, shown(v))
                })
                .collect(),
        ),
        other => to_json(other).unwrap_or(Json::Null),
    }
}

#[cfg(test)]
mod tests;
