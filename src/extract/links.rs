//! Following links: find them (CSS, XPath or regex), resolve them against the
//! page's base URL with the page's character set (as a browser does, so a
//! Chinese query on a GBK page is percent-encoded in GBK), drop what must
//! not be crawled (other schemes, fragments, other hosts, denied, with an
//! extension not followed, too deep, past the last page) after the follow
//! entry's `rewrite` ([`super::rewrite`]), and build the follow-up requests
//! with their priority, depth and context.

use std::collections::HashSet;

use scraper::{ElementRef, Html};
use serde_json::Map;

use super::feeds::{self, Dated, Unreadable};
use super::page::Page;
use super::Filtered;
use crate::request::{absolute_link, NotALink, Request};
use crate::spider::selector::Selected;
use crate::spider::xpath::Found as XFound;
use crate::spider::{Follow, IntSource, LinkSource, MetaCarry, Rule, Spider};

/// The `href` of a link element, and of the links inside it (Scrapy's
/// LinkExtractor `restrict_css`).
fn element_links(el: ElementRef<'_>, out: &mut Vec<String>) {
    for node in el.descendants() {
        if let Some(e) = ElementRef::wrap(node) {
            if matches!(e.value().name(), "a" | "area" | "link") {
                out.extend(e.value().attr("href").map(str::to_string));
            }
        }
    }
}

/// Whether `url` is a host's robots.txt.
fn is_robots_txt(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|u| u.path() == "/robots.txt")
}

/// Builds the follow-up requests of one page.
pub struct Follower<'a> {
    spider: &'a Spider,
    page: &'a Page<'a>,
    /// The rule reading the page (a sitemap index's sitemaps go to it).
    rule: &'a Rule,
    filtered: &'a mut Filtered,
    seen: HashSet<String>,
    /// Why a sitemap or feed this page is gave nothing, or not all it
    /// holds.
    pub unreadable: Option<Unreadable>,
    /// Links a follow entry's `rewrite` changed, for `parse` to show.
    pub rewritten: Vec<super::Rewritten>,
}

/// What a found link is, besides a link.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Found {
    Link,
    /// A sitemap or feed entry modified since the source's last visit:
    /// fetched again, past the dupefilter.
    Modified,
    /// A sitemap listed by a sitemap index: read by the same rule.
    Sitemap,
}

impl<'a> Follower<'a> {
    pub fn new(
        spider: &'a Spider,
        page: &'a Page<'a>,
        rule: &'a Rule,
        filtered: &'a mut Filtered,
    ) -> Self {
        Follower {
            spider,
            page,
            rule,
            filtered,
            seen: HashSet::new(),
            unreadable: None,
            rewritten: Vec::new(),
        }
    }

    /// A sitemap's or feed's entries, each skipped if it was not modified
    /// since this source's last visit, and marked to be fetched again if it
    /// was.
    fn dated(&mut self, entries: Vec<Dated>, kind: Found, raw: &mut Vec<(String, Found)>) {
        let visited = self
            .page
            .request
            .revisit
            .as_ref()
            .map(|r| (r.visited_ms / 1000) as i64)
            .filter(|v| *v > 0);
        for entry in entries {
            match (visited, entry.modified) {
                (Some(v), Some(m)) if m <= v => self.filtered.not_modified += 1,
                (Some(_), Some(_)) if kind == Found::Link => raw.push((entry.url, Found::Modified)),
                _ => raw.push((entry.url, kind)),
            }
        }
    }

    /// The response body as a sitemap or feed: unpacked if gzip, within
    /// `download_maxsize`.
    fn xml(&self) -> Result<std::borrow::Cow<'a, [u8]>, Unreadable> {
        let limit = match self.spider.settings.download_maxsize.0 {
            0 => u64::MAX,
            n => n,
        };
        feeds::unpack(self.page.response.body, limit)
    }

    /// Adds the requests of one follow entry to `out`.
    pub fn follow(&mut self, follow: &Follow, doc: &Html, text: &str, out: &mut Vec<Request>) {
        let mut raw = Vec::new();
        match &follow.links {
            LinkSource::Css(sel) => {
                let mut hrefs = Vec::new();
                sel.each(doc.root_element(), |s| match s {
                    Selected::Text(t) => hrefs.push(t.to_owned()),
                    Selected::Element(e) => element_links(e, &mut hrefs),
                });
                raw.extend(hrefs.into_iter().map(|h| (h, Found::Link)));
            }
            LinkSource::XPath(xpath) => {
                let root = doc.root_element();
                let mut hrefs = Vec::new();
                xpath.each(root, self.page.xpath_order(root), |f| match f {
                    XFound::Text(t) => hrefs.push(t.to_owned()),
                    XFound::Value(v) => hrefs.push(v),
                    XFound::Element(e) => element_links(e, &mut hrefs),
                });
                raw.extend(hrefs.into_iter().map(|h| (h, Found::Link)));
            }
            LinkSource::Re(re) => {
                for caps in re.captures_iter(text) {
                    raw.extend(
                        caps.get(1)
                            .or_else(|| caps.get(0))
                            .map(|m| (m.as_str().to_string(), Found::Link)),
                    );
                }
            }
            // A robots.txt lists sitemaps on `Sitemap:` lines (as Scrapy's
            // SitemapSpider reads it).
            LinkSource::Sitemap if is_robots_txt(self.page.response.url) => {
                let robots = robotxt::Robots::parse(self.page.response.body, "*");
                raw.extend(
                    robots
                        .sitemaps()
                        .iter()
                        .map(|u| (u.to_string(), Found::Sitemap)),
                );
            }
            LinkSource::Sitemap => {
                let (sitemap, error) = match self.xml() {
                    Ok(xml) => feeds::sitemap(&xml),
                    Err(e) => (feeds::Sitemap::default(), Some(e)),
                };
                self.unreadable = self.unreadable.take().or(error);
                self.dated(sitemap.sitemaps, Found::Sitemap, &mut raw);
                self.dated(sitemap.pages, Found::Link, &mut raw);
            }
            LinkSource::Feed => match self.xml().and_then(|xml| feeds::feed(&xml)) {
                Ok(entries) => self.dated(entries, Found::Link, &mut raw),
                Err(e) => self.unreadable = self.unreadable.take().or(Some(e)),
            },
            // Read from the JSON document by `super::json::follow`.
            LinkSource::Json(_) | LinkSource::Template(_) => {}
        }
        let max_page = self.max_page(follow);
        for (href, found) in raw {
            let Some(url) = self.admit(follow, &href, max_page) else {
                continue;
            };
            let Some(mut request) = self.request(follow, url, &self.page.request.meta) else {
                continue;
            };
            match found {
                Found::Link => {}
                Found::Modified => request.dont_filter = true,
                Found::Sitemap => request.rule = Some(self.rule.name.clone()),
            }
            if self.first_time(&request) {
                out.push(request);
            }
        }
    }

    /// The last page of the entry's `paginate` limit, if it has one.
    pub(super) fn max_page(&self, follow: &Follow) -> Option<i64> {
        follow.paginate.as_ref().and_then(|p| match &p.max {
            IntSource::Fixed(n) => Some(*n),
            IntSource::Template(t) => t
                .render(&self.page.request.meta)
                .ok()
                .and_then(|s| s.trim().parse::<i64>().ok()),
        })
    }

    /// The URL of a found link when it is one to follow: resolved, on an
    /// allowed host, not denied, not ending with a denied extension, not
    /// too deep, not past the last page (each refusal counted).
    pub(super) fn admit(
        &mut self,
        follow: &Follow,
        href: &str,
        max_page: Option<i64>,
    ) -> Option<String> {
        let depth = self.page.request.depth + 1;
        let link = self.resolve(href)?;
        let (url, parsed) = match &follow.rewrite {
            Some(rewrite) => self.rewritten(rewrite, link)?,
            None => link,
        };
        if !self.allowed(follow, &url, parsed.as_ref()) {
            return None;
        }
        if parsed.is_some_and(|u| follow.deny_extensions.denies(&u)) {
            self.filtered.extension += 1;
            return None;
        }
        let limit = self.spider.settings.depth_limit;
        if (limit > 0 && depth > limit) || follow.depth_limit.is_some_and(|l| depth > l) {
            self.filtered.depth += 1;
            return None;
        }
        if let (Some(p), Some(max)) = (&follow.paginate, max_page) {
            let page_no = p
                .page
                .captures(&url)
                .and_then(|c| c.get(1))
                .and_then(|m| m.as_str().parse::<i64>().ok());
            if page_no.is_some_and(|n| n > max) {
                self.filtered.pagination += 1;
                return None;
            }
        }
        Some(url)
    }

    /// A resolved link (its URL and that URL parsed) through the follow
    /// entry's `rewrite`, noted and parsed again when it changed; `None`
    /// (counted) when the rewrite failed.
    fn rewritten(
        &mut self,
        rewrite: &crate::spider::Rewrite,
        (url, parsed): (String, Option<url::Url>),
    ) -> Option<(String, Option<url::Url>)> {
        let done = super::rewrite::apply(rewrite, &url);
        if done.as_ref().is_ok_and(|to| *to == url) {
            return Some((url, parsed));
        }
        let (to, error) = match done {
            Ok(to) => (Some(to), None),
            Err(e) => {
                self.filtered.rewrite += 1;
                (None, Some(e))
            }
        };
        self.rewritten.push(super::Rewritten {
            from: url,
            to: to.clone(),
            error,
        });
        to.map(|to| {
            let parsed = url::Url::parse(&to).ok();
            (to, parsed)
        })
    }

    /// Whether this page has not yet asked for the same request (the same
    /// URL, or for a POST the same URL and body); a repeat is counted.
    pub(super) fn first_time(&mut self, request: &Request) -> bool {
        let key = if request.method == "GET" && request.body.is_empty() {
            request.url.clone()
        } else {
            format!("{} {}\n{}", request.method, request.url, request.body)
        };
        let first = self.seen.insert(key);
        if !first {
            self.filtered.duplicate += 1;
        }
        first
    }

    /// The parent page's filtered counts, for follow entries read elsewhere.
    pub(super) fn filtered(&mut self) -> &mut Filtered {
        self.filtered
    }

    /// The page being read.
    pub(super) fn page(&self) -> &Page<'a> {
        self.page
    }

    /// The absolute, safe URL of a link, or `None` (counted) when it is not
    /// one to crawl.
    fn resolve(&mut self, href: &str) -> Option<(String, Option<url::Url>)> {
        match absolute_link(self.page.base.as_ref(), href, self.page.encoding, false) {
            Ok(link) => Some(link),
            Err(NotALink::Fragment) => {
                self.filtered.fragment += 1;
                None
            }
            Err(NotALink::Scheme) => {
                self.filtered.scheme += 1;
                None
            }
        }
    }

    /// Whether `url` (parsed: `parsed`) is on an allowed host and port
    /// and not denied by a pattern (each refusal counted).
    fn allowed(&mut self, follow: &Follow, url: &str, parsed: Option<&url::Url>) -> bool {
        if !parsed.is_some_and(|u| self.spider.allows(u)) {
            self.filtered.offsite += 1;
            return false;
        }
        let denied = self
            .spider
            .deny
            .iter()
            .chain(&follow.deny)
            .any(|d| d.is_match(url))
            || (!follow.allow.is_empty() && !follow.allow.iter().any(|a| a.is_match(url)));
        if denied {
            self.filtered.denied += 1;
        }
        !denied
    }

    /// The follow-up request for `url`: its priority, depth, rule and
    /// context (the `meta` names, from `context`), sent as the entry says
    /// with its templates rendered from `context`; `None` (counted) when a
    /// template field is missing.
    pub(super) fn request(
        &mut self,
        follow: &Follow,
        url: String,
        context: &Map<String, serde_json::Value>,
    ) -> Option<Request> {
        let depth = self.page.request.depth + 1;
        // Named fields come from the context (for a JSON entry that
        // includes the element's fields); `*` passes the page's context on.
        let meta: Map<String, serde_json::Value> = match &follow.meta {
            MetaCarry::All => self.page.request.meta.clone(),
            MetaCarry::Names(names) => names
                .iter()
                .filter_map(|n| context.get(n).map(|v| (n.clone(), v.clone())))
                .collect(),
        };
        let mut request = Request {
            priority: follow.priority - i64::from(depth) * self.spider.settings.depth_priority,
            depth,
            rule: follow.rule.map(|i| self.spider.rules[i].name.clone()),
            meta,
            dont_filter: follow.dont_filter,
            ..Request::new(url)
        };
        if follow.sending.apply(&mut request, context).is_err() {
            self.filtered.incomplete += 1;
            return None;
        }
        Some(request)
    }
}
