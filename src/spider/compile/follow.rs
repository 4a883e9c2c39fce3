//! `[[rules.follow]]`: how a follow entry finds its links (CSS, XPath, a
//! regex, JSONPath, a URL template, a sitemap or a feed), which it keeps
//! (`allow`, `deny`, `deny_extensions`, `depth_limit`, `paginate`), how
//! each is rewritten first ([`super::rewrite`]), where they go (a rule of
//! this spider, or another spider through [`super::handoff`]) and what
//! context they carry. The JSON API keys and how requests are sent are
//! [`super::json`]'s.

use regex::Regex;

use super::json::ApiFollow;
use super::{Compiler, Names};
use crate::spider::file::{FollowFile, PaginateFile};
use crate::spider::{DenyExtensions, Follow, LinkSource, MetaCarry, Paginate};

impl Compiler<'_> {
    pub(super) fn follow(&self, f: &FollowFile, rules: &Names<'_>) -> Option<Follow> {
        let links = self.links(f);
        let api = self.json_follow(f);
        let allow: Vec<Option<Regex>> = f.allow.iter().map(|a| self.regex(a)).collect();
        let deny: Vec<Option<Regex>> = f.deny.iter().map(|a| self.regex(a)).collect();
        let rule = f.rule.as_ref().map(|r| self.lookup(r, rules, "rule"));
        let rewrite = self.rewrite(f.rewrite.as_ref());
        let to_spider = self.to_spider(f, api.as_ref())?;
        let depth_limit = self.depth_limit(f)?;
        let paginate = match &f.paginate {
            Some(p) => Some(self.paginate(p)?),
            None => None,
        };
        let links = links?;
        Some(Follow {
            deny_extensions: self.deny_extensions(f, &links)?,
            links,
            allow: allow.into_iter().collect::<Option<_>>()?,
            deny: deny.into_iter().collect::<Option<_>>()?,
            rule: match rule {
                Some(r) => Some(r?),
                None => None,
            },
            to_spider,
            priority: f.priority.as_ref().map_or(0, |p| p.value),
            dont_filter: f.dont_filter.as_ref().is_some_and(|d| d.value),
            depth_limit,
            meta: meta_carry(f),
            paginate,
            each: api.as_ref()?.each.clone(),
            counter: api.as_ref()?.counter.clone(),
            until: api.as_ref()?.until.clone(),
            sending: api?.sending,
            rewrite: rewrite?,
        })
    }

    /// Where the entry finds its links: exactly one way.
    fn links(&self, f: &FollowFile) -> Option<LinkSource> {
        let flag = |b: &Option<crate::reader::At<bool>>| b.as_ref().is_some_and(|b| b.value);
        let ways = usize::from(f.css.is_some())
            + usize::from(f.xpath.is_some())
            + usize::from(f.re.is_some())
            + usize::from(flag(&f.sitemap))
            + usize::from(flag(&f.feed))
            + usize::from(f.json.is_some())
            + usize::from(f.url.is_some());
        match ways {
            1 => match (&f.css, &f.re, &f.json, &f.url) {
                _ if f.xpath.is_some() => f
                    .xpath
                    .as_ref()
                    .and_then(|x| self.xpath(x))
                    .map(LinkSource::XPath),
                (Some(css), ..) => self.selector(css).map(LinkSource::Css),
                (_, Some(re), ..) => self.regex(re).map(LinkSource::Re),
                (_, _, Some(path), _) => self.jsonpath(path).map(LinkSource::Json),
                (.., Some(url)) => self.follow_url(url).map(LinkSource::Template),
                _ if flag(&f.sitemap) => Some(LinkSource::Sitemap),
                _ => Some(LinkSource::Feed),
            },
            0 => {
                self.problem(
                    &f.loc,
                    "a follow entry has no `css`, `re`, `json`, `url`, `sitemap` or `feed` to find links with",
                    "add e.g. `css = \"a.next::attr(href)\"`, `json = \"$.next\"`, or `sitemap = true` for a sitemap's pages",
                );
                None
            }
            _ => {
                self.problem(
                    &f.loc,
                    "a follow entry has more than one of `css`, `re`, `json`, `url`, `sitemap` and `feed`",
                    "keep one way of finding links per follow entry",
                );
                None
            }
        }
    }

    /// `to_spider`: the index of the spider the links are handed to,
    /// `Some(None)` when they stay in this spider; `None` on a problem.
    fn to_spider(&self, f: &FollowFile, api: Option<&ApiFollow>) -> Option<Option<usize>> {
        if let (Some(_), Some(to)) = (&f.rule, &f.to_spider) {
            self.problem(
                &to.loc,
                "a follow entry has both `rule` and `to_spider`",
                format!(
                    "remove `rule`: spider `{}` handles the pages with its [start] rule",
                    to.value
                ),
            );
        }
        let Some(to) = &f.to_spider else {
            return Some(None);
        };
        let index = self.handoff(to, &f.meta)?;
        if api.is_some_and(|api| !api.sending.is_plain()) {
            self.problem(
                &to.loc,
                "a follow entry with `to_spider` sends plain GET requests: the other spider gets a URL and context, no method, body or headers",
                "remove `method`, `body`, `form` and `headers`, or follow within this spider with `rule`",
            );
            return None;
        }
        Some(Some(index))
    }

    /// `deny_extensions`: the extensions not followed. Without the key,
    /// links found on the page (CSS, XPath, a regex) skip Scrapy's list and
    /// the links of sitemaps, feeds and JSON skip none, as in Scrapy.
    fn deny_extensions(&self, f: &FollowFile, links: &LinkSource) -> Option<DenyExtensions> {
        let on_page = matches!(
            links,
            LinkSource::Css(_) | LinkSource::XPath(_) | LinkSource::Re(_)
        );
        let Some((loc, list)) = &f.deny_extensions else {
            return Some(if on_page {
                DenyExtensions::default()
            } else {
                DenyExtensions::none()
            });
        };
        if !on_page {
            self.problem(
                loc,
                "`deny_extensions` applies to links found with `css`, `xpath` or `re`",
                "remove it: the links of sitemaps, feeds and JSON responses are followed whatever their extension (as in Scrapy); `deny` patterns drop some",
            );
            return None;
        }
        let mut ok = true;
        for e in list {
            let bare = e.value.trim_start_matches('.');
            if bare.is_empty() || bare.contains(['/', '?', '#', ';', '*', ' ']) {
                let what = match e.value.as_str() {
                    "" => "an empty string".to_string(),
                    v => format!("`{v}`"),
                };
                self.problem(
                    &e.loc,
                    format!("{what} is not a file extension"),
                    "write extensions such as \"pdf\" or \"tar.gz\" (a link whose path ends with one is not followed); `deny` patterns skip links by any other part of the URL",
                );
                ok = false;
            }
        }
        ok.then(|| DenyExtensions::new(list.iter().map(|e| e.value.as_str())))
    }

    /// `depth_limit`: `Some(None)` without one; `None` on a problem.
    fn depth_limit(&self, f: &FollowFile) -> Option<Option<u32>> {
        match &f.depth_limit {
            Some(d) if d.value < 0 || d.value > u32::MAX as i64 => {
                self.problem(
                    &d.loc,
                    format!("{} is out of range", d.value),
                    "use a depth of 0 or more",
                );
                None
            }
            Some(d) => Some(Some(d.value as u32)),
            None => Some(None),
        }
    }

    /// `paginate = { page = '…(\d+)', max = … }`.
    fn paginate(&self, p: &PaginateFile) -> Option<Paginate> {
        let page = match &p.page {
            Some(page) => self.regex(page).filter(|re| {
                let ok = re.captures_len() > 1;
                if !ok {
                    self.problem(
                        &page.loc,
                        "the page regex has no capture group",
                        "capture the page number, e.g. '/list/\\d+/(\\d+)'",
                    );
                }
                ok
            }),
            None => {
                self.problem(
                    &p.loc,
                    "`paginate` has no `page` regex",
                    "add `page = '…(\\d+)'` capturing the page number of a link",
                );
                None
            }
        };
        let max = match &p.max {
            Some(m) => self.int_source(m, &None, 1..=i64::MAX),
            None => {
                self.problem(
                    &p.loc,
                    "`paginate` has no `max`",
                    "add `max = 10` or `max = \"{max_page}\"` (a context field)",
                );
                None
            }
        };
        Some(Paginate {
            page: page?,
            max: max?,
        })
    }
}

/// `meta`: the context fields followed requests carry (`"*"`: all).
fn meta_carry(f: &FollowFile) -> MetaCarry {
    if f.meta.iter().any(|m| m.value == "*") {
        MetaCarry::All
    } else {
        MetaCarry::Names(f.meta.iter().map(|m| m.value.clone()).collect())
    }
}
