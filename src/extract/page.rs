//! The page being extracted: its response and request, the base URL links
//! and URL fields are resolved against (`<base href>` or the response URL),
//! and its character set (which link queries are encoded in). Shared by
//! [`super::fields`] and [`super::links`]. What only some spiders need (the
//! document order XPath sorts by, the structured data) is computed on first
//! use, once per page.

use std::cell::{OnceCell, RefCell};

use scraper::{ElementRef, Html};

use super::structured::Metadata;
use super::Response;
use crate::request::Request;
use crate::spider::xpath::Order;

/// The page being extracted, for fields that read it.
pub struct Page<'a> {
    pub response: &'a Response<'a>,
    pub request: &'a Request,
    /// The base URL links and URL fields are resolved against.
    pub base: Option<url::Url>,
    /// The page's character set, which link queries are encoded in.
    pub encoding: &'static encoding_rs::Encoding,
    /// The document order of the page's nodes, for XPath.
    order: OnceCell<Order>,
    /// The page's JSON-LD and `<meta>` properties.
    metadata: OnceCell<Metadata>,
    /// Values the item being read could not convert: its field's path and
    /// why (the extractor names the item).
    unconverted: RefCell<Vec<(String, String)>>,
}

impl<'a> Page<'a> {
    pub fn new(
        response: &'a Response<'a>,
        request: &'a Request,
        doc: &Html,
        encoding: &'static encoding_rs::Encoding,
    ) -> Page<'a> {
        Page {
            response,
            request,
            base: base_url(doc, response.url),
            encoding,
            order: OnceCell::new(),
            metadata: OnceCell::new(),
            unconverted: RefCell::new(Vec::new()),
        }
    }

    /// Notes that the field at `path` could not convert a value, and why.
    pub fn unconverted(&self, path: &str, why: String) {
        self.unconverted.borrow_mut().push((path.to_string(), why));
    }

    /// The values noted since the last call.
    pub fn take_unconverted(&self) -> Vec<(String, String)> {
        std::mem::take(&mut *self.unconverted.borrow_mut())
    }

    /// The document order of the page `any` is a node of.
    pub fn xpath_order(&self, any: ElementRef<'_>) -> &Order {
        self.order.get_or_init(|| Order::new(any.tree()))
    }

    /// The structured data of the page `any` is a node of.
    pub fn metadata(&self, any: ElementRef<'_>) -> &Metadata {
        self.metadata.get_or_init(|| Metadata::read(any))
    }
}

/// The page's base URL: `<base href>` resolved against the response URL,
/// else the response URL.
///
/// The `<base>` is the first element named `base` with an `href`, in the
/// order the parser created the elements and among those in the tree: what
/// `doc.select("base[href]")` finds, without running the selector engine
/// over every element of every page.
pub fn base_url(doc: &Html, page_url: &str) -> Option<url::Url> {
    let page = url::Url::parse(page_url).ok()?;
    let base = doc
        .tree
        .nodes()
        .filter_map(ElementRef::wrap)
        .filter(|e| e.value().name() == "base" && e.parent().is_some())
        .find_map(|e| e.value().attr("href"))
        .and_then(|href| page.join(href.trim()).ok());
    Some(base.unwrap_or(page))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(html: &str) -> Option<String> {
        base_url(&Html::parse_document(html), "http://h/dir/page").map(String::from)
    }

    #[test]
    fn first_base_with_an_href_wins() {
        let html = r#"<head><base target="_blank"><base href="/a/"></head>
            <body><base href="/b/"></body>"#;
        assert_eq!(base(html).as_deref(), Some("http://h/a/"));
    }

    #[test]
    fn a_base_in_the_body_counts_and_none_means_the_page() {
        assert_eq!(
            base(r#"<p>x</p><base href=" sub/ ">"#).as_deref(),
            Some("http://h/dir/sub/")
        );
        assert_eq!(base("<p>x</p>").as_deref(), Some("http://h/dir/page"));
    }
}
