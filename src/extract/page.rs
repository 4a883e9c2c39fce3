//! The page being extracted: its response and request, the base URL links
//! and URL fields are resolved against (`<base href>` or the response URL),
//! and its character set (which link queries are encoded in). Shared by
//! [`super::fields`] and [`super::links`].

use scraper::{ElementRef, Html};

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
