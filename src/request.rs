//! The request that travels from the frontier to the downloader and back:
//! what to fetch, how urgently, how deep it is and the context (`meta`) it
//! carries. It is JSON on the wire, never a code-executing format.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::fingerprint;

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
    /// A GET request for `url` (brought into safe form) with no context.
    pub fn get(url: &str) -> Request {
        Request::new(fingerprint::safe_url_string(url, encoding_rs::UTF_8))
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
        }
    }

    /// The scrapy-redis compatible dupefilter fingerprint.
    pub fn fingerprint(&self) -> String {
        fingerprint::request_fingerprint(&self.method, &self.url, self.body.as_bytes())
    }
}
