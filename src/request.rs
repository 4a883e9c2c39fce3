//! The request that travels from the frontier to the downloader and back:
//! what to fetch, how urgently, how deep it is and the context (`meta`) it
//! carries. It is JSON on the wire, never a code-executing format.

use encoding_rs::Encoding;
use scrapy_url::safe_url_string;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One request to crawl.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Absolute http(s) URL, already in w3lib's safe form.
    pub url: String,
    #[serde(default = "default_method", skip_serializing_if = "is_get")]
    pub method: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub body: String,
    /// Higher is fetched first.
    #[serde(default)]
    pub priority: i64,
    /// Links followed from a start request; start requests have depth 0.
    #[serde(default)]
    pub depth: u32,
    /// The rule that handles the response; matched by URL when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Context carried from the task or the page that linked here.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub meta: Map<String, Value>,
    /// Skip the dupefilter (list pages an incremental crawl re-scans).
    #[serde(default, skip_serializing_if = "is_false")]
    pub dont_filter: bool,
    /// Retries so far (Scrapy's `retry_times` meta key).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retry_times: u32,
    /// The URLs that redirected here, oldest first (Scrapy's
    /// `redirect_urls`); their count is the redirect chain's length.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redirect_urls: Vec<String>,
    /// What the last visit of a page a `revisit` rule schedules learnt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revisit: Option<RevisitState>,
}

/// What a scheduled page's last visit learnt, carried in the request that
/// fetches it again: its validators (sent as `If-None-Match` and
/// `If-Modified-Since`, so an unchanged page can answer 304), a digest of
/// its content (to tell a change when the server gives no validators) and
/// the interval it was scheduled with (which an adaptive `revisit` moves).
/// Bounded: validators over [`MAX_VALIDATOR`] bytes are not kept.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RevisitState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// SHA-1 (hex) of what the rule compares (`change`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The interval the page was last scheduled with, in ms.
    #[serde(default)]
    pub interval_ms: u64,
    /// When it was last fetched (ms since the epoch, the worker's clock):
    /// a sitemap's or feed's entries modified before then are skipped.
    #[serde(default)]
    pub visited_ms: u64,
    /// With `emit = "changed"`: short digests of the items the last visit
    /// extracted (at most [`MAX_ITEM_DIGESTS`]); an item found again is
    /// not pushed again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<String>,
}

/// The most item digests a revisit keeps (16 hex characters each).
pub const MAX_ITEM_DIGESTS: usize = 1000;

/// The longest validator (ETag, Last-Modified) a revisit keeps.
pub const MAX_VALIDATOR: usize = 256;

/// The request headers a revisit adds to make itself conditional.
pub const CONDITIONAL_HEADERS: [&str; 2] = ["If-None-Match", "If-Modified-Since"];

/// See [`Request::host_key`].
pub fn host_key(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host.to_ascii_lowercase()
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn default_method() -> String {
    "GET".to_string()
}

fn is_get(m: &str) -> bool {
    m == "GET"
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Request {
    /// Drops what a revisit carries (its state and conditional headers),
    /// for a request that is not that revisit (a redirect's target).
    pub fn forget_revisit(&mut self) {
        self.revisit = None;
        self.headers.retain(|(k, _)| {
            !CONDITIONAL_HEADERS
                .iter()
                .any(|c| k.eq_ignore_ascii_case(c))
        });
    }

    /// A GET request for `url` (brought into safe form) with no context.
    pub fn get(url: &str) -> Request {
        Request::new(safe_url_string(url, encoding_rs::UTF_8))
    }

    /// A GET request for a URL already in safe form, with no context.
    pub fn new(url: String) -> Request {
        Request {
            url,
            method: default_method(),
            headers: Vec::new(),
            body: String::new(),
            priority: 0,
            depth: 0,
            rule: None,
            meta: Map::new(),
            dont_filter: false,
            retry_times: 0,
            redirect_urls: Vec::new(),
            revisit: None,
        }
    }

    /// The host a politeness slot is kept for: the URL's authority without
    /// user info, lower-cased (`bbs.example.com`, `127.0.0.1:8700`). The
    /// frontier's scripts derive the same key from the stored request
    /// (`host_of` in `redis/scripts/lib/politeness.lua`); keep the two in
    /// step.
    pub fn host_key(&self) -> String {
        host_key(&self.url)
    }

    /// The scrapy-redis compatible dupefilter fingerprint.
    pub fn fingerprint(&self) -> String {
        scrapy_url::request_fingerprint(&self.method, &self.url, self.body.as_bytes())
    }
}

/// A link handed to another spider (a follow entry's `to_spider`): the
/// request this spider would have queued, and the spider that gets it as a
/// task (an index into `Spider::handoffs`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Task {
    pub to: usize,
    pub request: Request,
}

impl Task {
    /// The task as the other spider's start key holds it: scrapy-redis's
    /// JSON form, `{"url": …, "meta": {…}}`, which any spider (crawlworker's
    /// or scrapy-redis's) reads, and which an operator can push by hand to
    /// re-trigger the work.
    pub fn entry(&self) -> String {
        let mut task = Map::new();
        task.insert("url".into(), Value::String(self.request.url.clone()));
        if !self.request.meta.is_empty() {
            task.insert("meta".into(), Value::Object(self.request.meta.clone()));
        }
        Value::Object(task).to_string()
    }
}

/// Why a link is not a URL to request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotALink {
    /// Empty, or only a fragment of the same page (`#top`).
    Fragment,
    /// Not http(s) (`mailto:`, `javascript:`, …), or not a URL at all.
    Scheme,
}

/// Resolves `href` as a browser does: against `base`, with the query
/// percent-encoded in the page's `encoding`, then brought into w3lib's safe
/// form. The fragment is kept only when `keep_fragment` is set.
pub fn absolute_url(
    base: Option<&url::Url>,
    href: &str,
    encoding: &'static Encoding,
    keep_fragment: bool,
) -> Result<String, NotALink> {
    absolute_link(base, href, encoding, keep_fragment).map(|(url, _)| url)
}

/// [`absolute_url`], and that URL parsed (`None` when its safe form does
/// not parse): the resolution's own parse when the safe form left the URL
/// as it was, as it nearly always does, so a link is parsed once.
pub fn absolute_link(
    base: Option<&url::Url>,
    href: &str,
    encoding: &'static Encoding,
    keep_fragment: bool,
) -> Result<(String, Option<url::Url>), NotALink> {
    // HTML strips ASCII whitespace around attribute URLs.
    let href = href.trim_matches(|c: char| c.is_ascii_whitespace());
    if href.is_empty() || href.starts_with('#') {
        return Err(NotALink::Fragment);
    }
    let encoding = encoding.output_encoding();
    let encode: &dyn Fn(&str) -> std::borrow::Cow<'_, [u8]> = &|s| encoding.encode(s).0;
    let joined = url::Url::options()
        .base_url(base)
        .encoding_override(Some(encode))
        .parse(href);
    match joined {
        Ok(mut u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
            if !keep_fragment {
                u.set_fragment(None);
            }
            let safe = safe_url_string(u.as_str(), encoding_rs::UTF_8);
            let parsed = match safe == u.as_str() {
                true => Some(u),
                false => url::Url::parse(&safe).ok(),
            };
            Ok((safe, parsed))
        }
        _ => Err(NotALink::Scheme),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_that_is_not_the_revisit_forgets_its_validators() {
        let mut r = Request::get("http://127.0.0.1/list/1");
        r.headers = vec![
            ("if-none-match".into(), "\"v1\"".into()),
            ("Accept".into(), "text/html".into()),
            (
                "If-Modified-Since".into(),
                "Tue, 14 Nov 2023 22:13:20 GMT".into(),
            ),
        ];
        r.revisit = Some(RevisitState {
            etag: Some("\"v1\"".into()),
            ..RevisitState::default()
        });
        r.forget_revisit();
        assert_eq!(r.revisit, None);
        assert_eq!(r.headers, vec![("Accept".into(), "text/html".into())]);
    }
}
