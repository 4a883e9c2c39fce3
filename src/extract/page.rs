//! The page being extracted: its response and request, the base URL links
//! and URL fields are resolved against (`<base href>` or the response URL),
//! and its character set (which link queries are encoded in). Shared by
//! [`super::fields`] and [`super::links`].

use std::sync::LazyLock;

use scraper::Html;

use super::Response;
use crate::request::Request;

/// The page being extracted, for fields that read it.
pub struct Page<'a> {
    pub response: &'a Response<'a>,
    pub request: &'a Request,
    /// The base URL links and URL fields are resolved against.
    pub base: Option<url::Url>,
    /// The page's character set, which link queries are encoded in.
    pub encoding: &'static encoding_rs::Encoding,
}

/// The page's base URL: `<base href>` resolved against the response URL,
/// else the response URL.
pub fn base_url(doc: &Html, page_url: &str) -> Option<url::Url> {
    static BASE: LazyLock<Option<scraper::Selector>> =
        LazyLock::new(|| scraper::Selector::parse("base[href]").ok());
    let page = url::Url::parse(page_url).ok()?;
    let base = BASE
        .as_ref()
        .and_then(|sel| doc.select(sel).next())
        .and_then(|b| b.value().attr("href"))
        .and_then(|href| page.join(href.trim()).ok());
    Some(base.unwrap_or(page))
}
