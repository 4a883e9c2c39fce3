//! HTML pages of the demo site: one pure function, [`render`], from a
//! request target to a status, a content type and the encoded body.
//!
//! The markup (element names, class names, link shapes) is a contract: the
//! bundled demo spider's selectors are written against it. This module owns
//! no I/O and keeps no state, so tests and benchmarks get pages without a
//! server. Routes:
//!
//! - `/`: the forum index;
//! - `/list/{forum_id}/{page}`: a forum list page (query ignored);
//! - `/post/{id}`: a post;
//! - `/comment/{post_id}/{page}`: a page of a post's comments;
//! - `/news/…`: the news section, rendered by [`super::news`] (its front
//!   is paged by query, `/news/?page=2`);
//! - `/api/…`: the forum as JSON, answered by [`super::api`];
//! - `/js/…`: the same forum as pages built by JavaScript, answered by
//!   [`super::rendered`];
//! - anything else, or a page past either end: 404.
//!
//! Numbers in paths are canonical (no sign, no leading zero), so each page
//! has exactly one URL path.

use std::borrow::Cow;

use super::news;
use super::site::{Charset, Forum, Inline, Post, Site};

/// A rendered response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub status: u16,
    /// The `Content-Type` header value; for forum `00002` it names no
    /// charset, so only the page's `<meta charset>` does.
    pub content_type: String,
    /// The HTML, encoded in the forum's charset.
    pub body: Vec<u8>,
}

/// Renders the page for a request target (`/path?query`). The query and any
/// fragment are ignored for routing, except by the news front's `page`
/// parameter; they may hold anything, including percent-encoded GBK bytes.
pub fn render(site: &Site, path_and_query: &str) -> Page {
    let without_fragment = path_and_query
        .find('#')
        .map_or(path_and_query, |end| &path_and_query[..end]);
    let (path, query) = match without_fragment.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (without_fragment, None),
    };
    if let Some(page) = news::page(path, query) {
        return page;
    }
    if let Some(page) = super::threads::page(path) {
        return page;
    }
    if let Some(page) = super::api::get(site, path, query) {
        return page;
    }
    if let Some(page) = super::rendered::get(site, path) {
        return page;
    }
    match route(site, path) {
        Route::Index => index_page(site),
        Route::List(forum, page) => list_page(site, forum, page),
        Route::Post(forum, post) => post_page(forum, post),
        Route::Comments(forum, post, page) => comment_page(forum, post, page),
        Route::NotFound => not_found(path),
    }
}

/// Formats a number with thousands separators, as the post pages show views:
/// `1234567` → `"1,234,567"`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The `Content-Type` of a forum's pages.
pub fn content_type(forum: &Forum) -> String {
    if forum.charset_in_header {
        format!("text/html; charset={}", forum.charset.header_label())
    } else {
        "text/html".to_owned()
    }
}

/// The `Content-Type` of the index, news and error pages.
pub(super) const UTF8_HTML: &str = "text/html; charset=utf-8";

/// What a path names.
pub(crate) enum Route<'a> {
    Index,
    List(&'a Forum, usize),
    Post(&'a Forum, &'a Post),
    Comments(&'a Forum, &'a Post, usize),
    NotFound,
}

/// What a path of the HTML forum (`/`, `/list/…`, `/post/…`,
/// `/comment/…`) names; [`super::rendered`] routes its shells by it too.
pub(crate) fn route<'a>(site: &'a Site, path: &str) -> Route<'a> {
    let Some(rest) = path.strip_prefix('/') else {
        return Route::NotFound;
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let found = match segments.as_slice() {
        [""] => Some(Route::Index),
        ["list", forum_id, page] => site.forum(forum_id).and_then(|forum| {
            let page = number(page)?;
            forum.page(page)?;
            Some(Route::List(forum, page))
        }),
        ["post", id] => post_with_forum(site, id).map(|(forum, post)| Route::Post(forum, post)),
        ["comment", id, page] => post_with_forum(site, id).and_then(|(forum, post)| {
            let page = number(page)?;
            post.comments_on_page(page)?;
            Some(Route::Comments(forum, post, page))
        }),
        _ => None,
    };
    found.unwrap_or(Route::NotFound)
}

fn post_with_forum<'a>(site: &'a Site, id: &str) -> Option<(&'a Forum, &'a Post)> {
    let post = site.post(number(id)?)?;
    let forum = site.forum(&post.forum_id)?;
    Some((forum, post))
}

/// A canonical decimal number: digits only, no leading zero.
fn number<T: std::str::FromStr>(text: &str) -> Option<T> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    if canonical {
        text.parse().ok()
    } else {
        None
    }
}

fn index_page(site: &Site) -> Page {
    let mut body = format!("<h1>{INDEX_TITLE}</h1>\n<ul class=\"forums\">");
    for forum in &site.forums {
        body.push_str(&format!(
            "<li><a class=\"forum\" href=\"/list/{}/1\">{}</a></li>",
            escape(&forum.id),
            escape(&forum.name)
        ));
    }
    body.push_str("</ul>\n");
    Page {
        status: 200,
        content_type: UTF8_HTML.to_owned(),
        body: document(Charset::Utf8, INDEX_TITLE, false, &body).into_bytes(),
    }
}

fn list_page(site: &Site, forum: &Forum, page: usize) -> Page {
    let mut body = format!(
        "<p class=\"nav\" id=\"top\"><a href=\"/\">首页</a></p>\n<h1 class=\"forum-name\">{}</h1>\n<ul class=\"threads\">\n",
        escape(&forum.name)
    );
    let posts = forum.page(page).unwrap_or_default();
    for post in posts.iter().filter_map(|&id| site.post(id)) {
        body.push_str(&format!(
            "<li class=\"thread\"><a class=\"title\" href=\"{}\">{}</a> <span class=\"author\">{}</span> <span class=\"replies\">{}</span></li>\n",
            escape(&href(forum, &format!("post/{}", post.id))),
            escape(&post.title),
            escape(&post.author),
            post.comments.len()
        ));
    }
    body.push_str("</ul>\n");

    // The GBK forums' next links carry a Chinese query, written raw in the
    // GBK page: the crawler must percent-encode it in GBK, as a browser does.
    let next_query = match forum.charset {
        Charset::Utf8 => "",
        Charset::Gbk => "?order=最新",
    };
    let prev = (page > 1).then(|| href(forum, &format!("list/{}/{}", forum.id, page - 1)));
    let next = (page < forum.page_count()).then(|| {
        href(
            forum,
            &format!("list/{}/{}{next_query}", forum.id, page + 1),
        )
    });
    body.push_str(&pager(prev, page, next));

    // Links a crawler must drop: other schemes, a fragment of this page and
    // an off-site host (the .invalid TLD never resolves).
    body.push_str(concat!(
        "<div class=\"footer\">",
        "<a href=\"#top\">Top</a> ",
        "<a href=\"mailto:admin@demo.invalid\">Contact</a> ",
        "<a href=\"javascript:void(0)\">Login</a> ",
        "<a href=\"http://ads.demo.invalid/click?id=1\">Ad</a>",
        "</div>\n"
    ));

    forum_page(forum, &list_title(forum, page), &body)
}

fn post_page(forum: &Forum, post: &Post) -> Page {
    let mut body = breadcrumb(forum);
    body.push_str(&format!(
        "<div class=\"post\"><h1 class=\"post-title\">{}</h1><div class=\"meta\"><span class=\"author\">{}</span> <time class=\"posted\" datetime=\"{}\">{}</time> <span class=\"views\">{} views</span></div><div class=\"post-body\">",
        escape(&post.title),
        escape(&post.author),
        escape(&post.posted),
        escape(&human_time(&post.posted, forum.charset)),
        thousands(post.views)
    ));
    for (index, paragraph) in post.body_paragraphs.iter().enumerate() {
        if index > 0 {
            body.push('\n');
        }
        body.push_str("<p>");
        for inline in &paragraph.0 {
            match inline {
                Inline::Text(text) => body.push_str(&escape(text)),
                Inline::Bold(text) => body.push_str(&format!("<b>{}</b>", escape(text))),
                Inline::Link { href, text } => body.push_str(&format!(
                    "<a href=\"{}\">{}</a>",
                    escape(href),
                    escape(text)
                )),
                Inline::LineBreak => body.push_str("<br>"),
            }
        }
        body.push_str("</p>");
    }
    body.push_str("</div></div>\n");
    if !post.comments.is_empty() {
        body.push_str(&format!(
            "<p><a class=\"comments\" href=\"{}\">{}</a></p>\n",
            escape(&href(forum, &format!("comment/{}/1", post.id))),
            comments_label(forum, post)
        ));
    }
    forum_page(forum, &post_title(forum, post), &body)
}

fn comment_page(forum: &Forum, post: &Post, page: usize) -> Page {
    let mut body = breadcrumb(forum);
    body.push_str(&format!(
        "<h1 class=\"post-title\">{}</h1>\n<div class=\"comments\">\n",
        escape(&post.title)
    ));
    for comment in post.comments_on_page(page).unwrap_or_default() {
        body.push_str(&format!(
            "<div class=\"comment\" data-id=\"{}\"><span class=\"user\">{}</span><span class=\"floor\">#{}</span><p class=\"text\">{}</p></div>\n",
            escape(&comment.id),
            escape(&comment.user),
            comment.floor,
            escape(&comment.text)
        ));
    }
    body.push_str("</div>\n");
    let path = |page: usize| href(forum, &format!("comment/{}/{page}", post.id));
    let prev = (page > 1).then(|| path(page - 1));
    let next = (page < post.comment_page_count()).then(|| path(page + 1));
    body.push_str(&pager(prev, page, next));
    forum_page(forum, &comment_title(post, page), &body)
}

/// The `<title>` of list page `page` of `forum`.
pub(crate) fn list_title(forum: &Forum, page: usize) -> String {
    format!("{} - 第{page}页", forum.name)
}

/// The `<title>` of a post page.
pub(crate) fn post_title(forum: &Forum, post: &Post) -> String {
    format!("{} - {}", post.title, forum.name)
}

/// The `<title>` of comment page `page` of `post`.
pub(crate) fn comment_title(post: &Post, page: usize) -> String {
    format!("评论：{} - 第{page}页", post.title)
}

/// The text of a post page's link to its comments, in the forum's language.
pub(crate) fn comments_label(forum: &Forum, post: &Post) -> String {
    match forum.charset {
        Charset::Utf8 => format!("{} comments", post.comments.len()),
        Charset::Gbk => format!("查看{}条评论", post.comments.len()),
    }
}

/// The index page's `<title>` and heading.
pub(crate) const INDEX_TITLE: &str = "Demo forum 演示论坛";

/// The 404 page for `path`.
pub(crate) fn not_found(path: &str) -> Page {
    let body = format!(
        "<h1>404 Not Found</h1>\n<p>No page at {}</p>\n",
        escape(path)
    );
    Page {
        status: 404,
        content_type: UTF8_HTML.to_owned(),
        body: document(Charset::Utf8, "404 Not Found", false, &body).into_bytes(),
    }
}

/// The home and forum links at the top of post and comment pages.
fn breadcrumb(forum: &Forum) -> String {
    format!(
        "<div class=\"breadcrumb\"><a href=\"/\">首页</a> &gt; <a class=\"forum-link\" href=\"{}\">{}</a></div>\n",
        escape(&href(forum, &format!("list/{}/1", forum.id))),
        escape(&forum.name)
    )
}

fn pager(prev: Option<String>, current: usize, next: Option<String>) -> String {
    let mut out = String::from("<div class=\"pager\">");
    if let Some(prev) = prev {
        out.push_str(&format!(
            "<a class=\"prev\" href=\"{}\">上一页</a> ",
            escape(&prev)
        ));
    }
    out.push_str(&format!("<span class=\"current\">{current}</span>"));
    if let Some(next) = next {
        out.push_str(&format!(
            " <a class=\"next\" href=\"{}\">下一页</a>",
            escape(&next)
        ));
    }
    out.push_str("</div>\n");
    out
}

/// A link to `path` (given without its leading slash) from a page of
/// `forum`: relative to `<base href="/">` on forums that have it,
/// path-absolute elsewhere.
fn href(forum: &Forum, path: &str) -> String {
    if forum.base_href {
        path.to_owned()
    } else {
        format!("/{path}")
    }
}

/// A whole page of a forum, encoded in its charset.
fn forum_page(forum: &Forum, title: &str, body: &str) -> Page {
    let html = document(forum.charset, title, forum.base_href, body);
    let body = match forum.charset {
        Charset::Utf8 => html.into_bytes(),
        // The site's GBK texts are all encodable (tested in `site`); any
        // other character would become a numeric character reference.
        Charset::Gbk => encoding_rs::GBK.encode(&html).0.into_owned(),
    };
    Page {
        status: 200,
        content_type: content_type(forum),
        body,
    }
}

fn document(charset: Charset, title: &str, base_href: bool, body: &str) -> String {
    let base = if base_href { "<base href=\"/\">" } else { "" };
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"{}\"><title>{}</title>{base}</head><body>\n{body}</body></html>\n",
        charset.meta_label(),
        escape(title)
    )
}

/// `2026-03-04T05:06:07Z` → `Mar 4, 2026 05:06` (UTF-8 forums) or
/// `2026年3月4日 05:06` (GBK forums); anything unparsable is shown as is.
pub(crate) fn human_time(iso: &str, charset: Charset) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let parts = || -> Option<(&str, usize, u32, &str)> {
        let year = iso.get(0..4)?;
        let month: usize = iso.get(5..7)?.parse().ok()?;
        let day: u32 = iso.get(8..10)?.parse().ok()?;
        let clock = iso.get(11..16)?;
        Some((year, month, day, clock))
    };
    match (parts(), charset) {
        (Some((year, month, day, clock)), Charset::Utf8) => match MONTHS.get(month.wrapping_sub(1))
        {
            Some(name) => format!("{name} {day}, {year} {clock}"),
            None => iso.to_owned(),
        },
        (Some((year, month, day, clock)), Charset::Gbk) => {
            format!("{year}年{month}月{day}日 {clock}")
        }
        (None, _) => iso.to_owned(),
    }
}

/// Escapes text for HTML text and double-quoted attribute values.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.contains(['&', '<', '>', '"', '\'']) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashSet, VecDeque};

    use scraper::{ElementRef, Html, Selector};
    use url::Url;

    use super::*;
    use crate::site::{demo_forum_tasks, PostId, COMMENTS_PER_PAGE, POSTS_PER_LIST_PAGE};

    const ORIGIN: &str = "http://127.0.0.1:8000/";

    /// A fetched page as a crawler sees it: decoded, parsed, with its base URL.
    struct Fetched {
        page: Page,
        html: Html,
        text: String,
        base: Url,
    }

    impl Fetched {
        fn all(&self, css: &str) -> Vec<ElementRef<'_>> {
            let selector = Selector::parse(css).expect("test selector");
            self.html.select(&selector).collect()
        }

        fn one_text(&self, css: &str) -> String {
            let found = self.all(css);
            assert_eq!(found.len(), 1, "{css} on {}", self.base);
            found[0].text().collect()
        }

        fn href(&self, css: &str) -> Option<Url> {
            let found = self.all(css);
            assert!(found.len() <= 1, "{css} more than once");
            let href = found.first()?.value().attr("href").expect("href");
            Some(self.resolve(href))
        }

        /// Resolves like a browser: against `<base>`, query encoded in the
        /// page's charset.
        fn resolve(&self, href: &str) -> Url {
            fn gbk(s: &str) -> Cow<'_, [u8]> {
                encoding_rs::GBK.encode(s).0
            }
            let encoding = encoding_rs::Encoding::for_label(charset_of(&self.page).as_bytes())
                .expect("charset");
            let encode: url::EncodingOverride<'_> = (encoding == encoding_rs::GBK).then_some(&gbk);
            Url::options()
                .base_url(Some(&self.base))
                .encoding_override(encode)
                .parse(href)
                .expect("resolvable href")
        }
    }

    /// The charset from the header, else from `<meta charset>`, as the
    /// crawler must find it.
    fn charset_of(page: &Page) -> String {
        if let Some((_, label)) = page.content_type.split_once("charset=") {
            return label.to_owned();
        }
        let head = String::from_utf8_lossy(&page.body[..page.body.len().min(1024)]).into_owned();
        let start = head.find("<meta charset=\"").expect("meta charset") + "<meta charset=\"".len();
        head[start..]
            .split('"')
            .next()
            .expect("closing quote")
            .to_owned()
    }

    fn fetch(site: &Site, url: &Url) -> Fetched {
        let target = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        };
        let page = render(site, &target);
        let encoding =
            encoding_rs::Encoding::for_label(charset_of(&page).as_bytes()).expect("known charset");
        let (text, _, malformed) = encoding.decode(&page.body);
        assert!(!malformed, "{url} does not decode as {}", encoding.name());
        let text = text.into_owned();
        let html = Html::parse_document(&text);
        let base_selector = Selector::parse("base[href]").expect("selector");
        let base = match html.select(&base_selector).next() {
            Some(base) => url
                .join(base.value().attr("href").expect("href"))
                .expect("base"),
            None => url.clone(),
        };
        Fetched {
            page,
            html,
            text,
            base,
        }
    }

    fn url(path: &str) -> Url {
        Url::parse(ORIGIN)
            .and_then(|o| o.join(path))
            .expect("test url")
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1234), "1,234");
        assert_eq!(thousands(123_456), "123,456");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn content_types_and_meta_follow_the_forum() {
        let site = Site::demo();
        let cases = [
            ("/list/00001/1", "text/html; charset=utf-8", "utf-8"),
            ("/list/00002/1", "text/html", "gbk"),
            ("/list/00003/1", "text/html; charset=GBK", "gbk"),
            ("/post/1001", "text/html; charset=utf-8", "utf-8"),
            ("/post/1029", "text/html", "gbk"),
            ("/post/1041", "text/html; charset=GBK", "gbk"),
            ("/", "text/html; charset=utf-8", "utf-8"),
        ];
        for (path, content_type, meta) in cases {
            let page = render(&site, path);
            assert_eq!(page.status, 200, "{path}");
            assert_eq!(page.content_type, content_type, "{path}");
            let prefix = format!("<!DOCTYPE html><html><head><meta charset=\"{meta}\"><title>");
            assert!(page.body.starts_with(prefix.as_bytes()), "{path}");
        }
    }

    #[test]
    fn gbk_pages_round_trip_to_the_original_chinese() {
        let site = Site::demo();
        for forum_id in ["00002", "00003"] {
            let forum = site.forum(forum_id).expect("forum");
            let list = render(&site, &format!("/list/{forum_id}/1"));
            // Not valid UTF-8: really GBK bytes on the wire.
            assert!(std::str::from_utf8(&list.body).is_err());
            let (text, malformed) = encoding_rs::GBK.decode_without_bom_handling(&list.body);
            assert!(!malformed);
            assert!(
                !text.contains("&#"),
                "unmappable characters became references"
            );
            assert!(text.contains(&*escape(&forum.name)));
            assert!(text.contains("下一页"));
            assert!(text.contains("?order=最新"));
            for post in site.posts_of(forum) {
                let page = render(&site, &format!("/post/{}", post.id));
                let (text, malformed) = encoding_rs::GBK.decode_without_bom_handling(&page.body);
                assert!(!malformed);
                assert!(text.contains(&*escape(&post.title)));
                assert!(text.contains(&*escape(&post.author)));
                for comment in &post.comments {
                    let page_number = (comment.floor as usize - 1) / COMMENTS_PER_PAGE + 1;
                    let page = render(&site, &format!("/comment/{}/{page_number}", post.id));
                    let (text, malformed) =
                        encoding_rs::GBK.decode_without_bom_handling(&page.body);
                    assert!(!malformed);
                    assert!(text.contains(&*escape(&comment.text)));
                }
            }
        }
    }

    #[test]
    fn texts_are_escaped_and_parse_back_to_the_model() {
        let site = Site::demo();
        let mut saw_escape = false;
        for post in site.posts.values() {
            let fetched = fetch(&site, &url(&format!("/post/{}", post.id)));
            saw_escape |= fetched.text.contains("&amp;") && fetched.text.contains("&lt;");
            assert_eq!(fetched.one_text("h1.post-title"), post.title);
            assert_eq!(fetched.one_text(".meta .author"), post.author);
            let posted = fetched.all("time.posted");
            assert_eq!(
                posted[0].value().attr("datetime"),
                Some(post.posted.as_str())
            );
            assert_eq!(
                fetched.one_text("span.views"),
                format!("{} views", thousands(post.views))
            );
            assert_eq!(fetched.one_text("div.post-body"), post.body_text());
            let body = fetched.all("div.post-body");
            let nodes: Vec<&str> = body[0].text().collect();
            assert_eq!(nodes, post.body_text_nodes());
            let paragraphs = fetched.all("div.post-body > p");
            assert_eq!(paragraphs.len(), post.body_paragraphs.len());
            for (element, paragraph) in paragraphs.iter().zip(&post.body_paragraphs) {
                assert_eq!(element.text().collect::<String>(), paragraph.text());
                let direct: String = element
                    .children()
                    .filter_map(|child| child.value().as_text().map(|t| t.to_string()))
                    .collect();
                assert_eq!(direct, paragraph.direct_text());
            }
        }
        assert!(saw_escape);
    }

    #[test]
    fn human_times() {
        assert_eq!(
            human_time("2026-03-04T05:06:07Z", Charset::Utf8),
            "Mar 4, 2026 05:06"
        );
        assert_eq!(
            human_time("2026-03-04T05:06:07Z", Charset::Gbk),
            "2026年3月4日 05:06"
        );
        assert_eq!(human_time("garbage", Charset::Gbk), "garbage");
        assert_eq!(
            human_time("2026-13-04T05:06:07Z", Charset::Utf8),
            "2026-13-04T05:06:07Z"
        );
    }

    #[test]
    fn every_list_link_resolves_to_an_existing_post_of_that_forum() {
        let site = Site::demo();
        for forum in &site.forums {
            for page in 1..=forum.page_count() {
                let fetched = fetch(&site, &url(&format!("/list/{}/{page}", forum.id)));
                assert_eq!(fetched.page.status, 200);
                assert_eq!(fetched.one_text("h1.forum-name"), forum.name);
                let threads = fetched.all("ul.threads > li.thread");
                assert_eq!(threads.len(), POSTS_PER_LIST_PAGE);
                let links = fetched.all("li.thread a.title");
                let mut ids = Vec::new();
                for link in &links {
                    let target = fetched.resolve(link.value().attr("href").expect("href"));
                    let id: PostId = target
                        .path()
                        .strip_prefix("/post/")
                        .and_then(|id| id.parse().ok())
                        .expect("post link");
                    let post = site.post(id).expect("linked post exists");
                    assert_eq!(post.forum_id, forum.id);
                    assert_eq!(link.text().collect::<String>(), post.title);
                    assert_eq!(fetch(&site, &target).page.status, 200);
                    ids.push(id);
                }
                assert_eq!(Some(ids.as_slice()), forum.page(page));
                let replies: Vec<String> = fetched
                    .all("li.thread span.replies")
                    .iter()
                    .map(|e| e.text().collect())
                    .collect();
                let expected: Vec<String> = ids
                    .iter()
                    .filter_map(|id| site.post(*id))
                    .map(|p| p.comments.len().to_string())
                    .collect();
                assert_eq!(replies, expected);
            }
        }
    }

    #[test]
    fn pager_on_first_middle_and_last_list_pages() {
        let site = Site::demo();
        let first = fetch(&site, &url("/list/00001/1"));
        assert!(first.href("div.pager a.prev").is_none());
        assert_eq!(first.one_text("div.pager span.current"), "1");
        assert_eq!(first.href("div.pager a.next"), Some(url("/list/00001/2")));
        assert_eq!(first.one_text("a.next"), "下一页");

        let middle = fetch(&site, &url("/list/00001/4"));
        assert_eq!(middle.href("a.prev"), Some(url("/list/00001/3")));
        assert_eq!(middle.one_text("span.current"), "4");
        assert_eq!(middle.href("a.next"), Some(url("/list/00001/5")));

        let last = fetch(&site, &url("/list/00001/7"));
        assert_eq!(last.href("a.prev"), Some(url("/list/00001/6")));
        assert!(last.href("a.next").is_none());

        // GBK forum: the Chinese query is percent-encoded in GBK.
        let gbk = fetch(&site, &url("/list/00002/2"));
        assert_eq!(
            gbk.href("a.next"),
            Some(url("/list/00002/3?order=%D7%EE%D0%C2"))
        );
        assert_eq!(gbk.href("a.prev"), Some(url("/list/00002/1")));
        assert!(fetch(&site, &url("/list/00002/3")).href("a.next").is_none());

        // Base-href forum: hrefs have no leading slash and resolve via <base>.
        let based = fetch(&site, &url("/list/00003/1"));
        let raw = based.all("a.next")[0]
            .value()
            .attr("href")
            .map(str::to_owned);
        assert_eq!(raw.as_deref(), Some("list/00003/2?order=最新"));
        assert_eq!(
            based.href("a.next"),
            Some(url("/list/00003/2?order=%D7%EE%D0%C2"))
        );
        assert_eq!(based.base, url("/"));
    }

    #[test]
    fn noise_links_are_on_every_list_page() {
        let site = Site::demo();
        for forum in &site.forums {
            for page in 1..=forum.page_count() {
                let fetched = fetch(&site, &url(&format!("/list/{}/{page}", forum.id)));
                let hrefs: Vec<&str> = fetched
                    .all("a[href]")
                    .iter()
                    .filter_map(|a| a.value().attr("href"))
                    .collect();
                for noise in [
                    "mailto:admin@demo.invalid",
                    "javascript:void(0)",
                    "#top",
                    "http://ads.demo.invalid/click?id=1",
                ] {
                    assert!(hrefs.contains(&noise), "{noise} on {}", fetched.base);
                }
            }
        }
    }

    #[test]
    fn comment_pages_and_their_pager() {
        let site = Site::demo();
        let post = site
            .posts
            .values()
            .find(|p| p.comments.len() > 2 * COMMENTS_PER_PAGE)
            .expect("a post with three comment pages");
        let first = fetch(&site, &url(&format!("/post/{}", post.id)));
        let comments_url = first.href("a.comments").expect("comments link");
        assert_eq!(comments_url, url(&format!("/comment/{}/1", post.id)));
        let page1 = fetch(&site, &comments_url);
        assert_eq!(page1.one_text("h1.post-title"), post.title);
        assert!(page1.href("a.prev").is_none());
        let page2_url = page1.href("a.next").expect("next");
        assert_eq!(page2_url, url(&format!("/comment/{}/2", post.id)));
        let page3 = fetch(&site, &url(&format!("/comment/{}/3", post.id)));
        assert!(page3.href("a.next").is_none());
        assert_eq!(page3.one_text("span.current"), "3");
        let on_page3: Vec<String> = page3
            .all("div.comments > div.comment")
            .iter()
            .filter_map(|c| c.value().attr("data-id").map(str::to_owned))
            .collect();
        let expected: Vec<String> = post.comments[2 * COMMENTS_PER_PAGE..]
            .iter()
            .map(|c| c.id.clone())
            .collect();
        assert_eq!(on_page3, expected);

        let silent = site
            .posts
            .values()
            .find(|p| p.comments.is_empty())
            .expect("a post without comments");
        let page = fetch(&site, &url(&format!("/post/{}", silent.id)));
        assert!(page.all("a.comments").is_empty());
        assert_eq!(
            render(&site, &format!("/comment/{}/1", silent.id)).status,
            404
        );
    }

    #[test]
    fn unknown_and_non_canonical_paths_are_404() {
        let site = Site::demo();
        let long_post = site
            .posts
            .values()
            .find(|p| p.comment_page_count() == 1)
            .expect("post");
        let beyond = format!("/comment/{}/2", long_post.id);
        for path in [
            "",
            "?",
            "/nope",
            "/list",
            "/list/00001",
            "/list/00001/0",
            "/list/00001/8",
            "/list/00001/01",
            "/list/00001/+1",
            "/list/00001/1/",
            "/list/99999/1",
            "/list/1/1",
            "/post/1",
            "/post/01001",
            "/post/1001/",
            "/post/99999999999999999999999999",
            "/post/%31001",
            "/comment/1001/0",
            beyond.as_str(),
            "/post/<script>",
            "//post/1001",
        ] {
            let page = render(&site, path);
            assert_eq!(page.status, 404, "{path:?}");
            assert_eq!(page.content_type, "text/html; charset=utf-8");
            assert!(!String::from_utf8_lossy(&page.body).contains("<script>"));
        }
        // Queries never matter, even raw or percent-encoded GBK bytes.
        assert_eq!(
            render(&site, "/list/00002/2?order=%D7%EE%D0%C2").status,
            200
        );
        assert_eq!(render(&site, "/list/00002/2?order=最新&x=%FF%").status, 200);
        assert_eq!(render(&site, "/?a=b").status, 200);
    }

    #[test]
    fn index_lists_every_forum() {
        let site = Site::demo();
        let fetched = fetch(&site, &url("/"));
        let forums: Vec<(String, Option<Url>)> = fetched
            .all("ul.forums a.forum")
            .iter()
            .map(|a| {
                (
                    a.text().collect(),
                    a.value().attr("href").map(|h| fetched.resolve(h)),
                )
            })
            .collect();
        let expected: Vec<(String, Option<Url>)> = site
            .forums
            .iter()
            .map(|f| (f.name.clone(), Some(url(&format!("/list/{}/1", f.id)))))
            .collect();
        assert_eq!(forums, expected);
    }

    /// Crawls the demo like the demo spider will (follow `a.title`, `a.next`
    /// up to `max_page`, `a.comments`, comment `a.next`) and checks it
    /// reaches exactly the posts and comments the model predicts, fetching
    /// every URL once.
    #[test]
    fn a_crawl_of_the_demo_tasks_reaches_exactly_the_model() {
        enum Kind {
            List(usize),
            Post,
            Comments,
        }
        let site = Site::demo();
        let mut queue: VecDeque<(Url, Kind)> = demo_forum_tasks()
            .into_iter()
            .map(|t| {
                (
                    url(&format!("/list/{}/1", t.forum_id)),
                    Kind::List(t.max_page),
                )
            })
            .collect();
        let mut seen: HashSet<Url> = queue.iter().map(|(u, _)| u.clone()).collect();
        let mut posts = BTreeSet::new();
        let mut comments = BTreeSet::new();
        let mut push = |queue: &mut VecDeque<(Url, Kind)>, target: Url, kind: Kind| {
            assert!(seen.insert(target.clone()), "{target} reached twice");
            queue.push_back((target, kind));
        };
        while let Some((target, kind)) = queue.pop_front() {
            let fetched = fetch(&site, &target);
            assert_eq!(fetched.page.status, 200, "{target}");
            match kind {
                Kind::List(max_page) => {
                    for link in fetched.all("a.title") {
                        let href = link.value().attr("href").expect("href");
                        push(&mut queue, fetched.resolve(href), Kind::Post);
                    }
                    let current: usize = fetched
                        .one_text("span.current")
                        .parse()
                        .expect("page number");
                    if let Some(next) = fetched.href("a.next").filter(|_| current < max_page) {
                        push(&mut queue, next, Kind::List(max_page));
                    }
                }
                Kind::Post => {
                    let id: PostId = target.path()["/post/".len()..].parse().expect("post id");
                    posts.insert(id);
                    if let Some(next) = fetched.href("a.comments") {
                        push(&mut queue, next, Kind::Comments);
                    }
                }
                Kind::Comments => {
                    for comment in fetched.all("div.comment") {
                        let id = comment.value().attr("data-id").expect("data-id").to_owned();
                        assert!(comments.insert(id));
                    }
                    if let Some(next) = fetched.href("a.next") {
                        push(&mut queue, next, Kind::Comments);
                    }
                }
            }
        }
        let expected_posts: Vec<&Post> = demo_forum_tasks()
            .iter()
            .flat_map(|task| site.posts_in_task(task))
            .collect();
        let expected_ids: BTreeSet<PostId> = expected_posts.iter().map(|p| p.id).collect();
        let expected_comments: BTreeSet<String> = expected_posts
            .iter()
            .flat_map(|p| p.comments.iter().map(|c| c.id.clone()))
            .collect();
        assert_eq!(posts, expected_ids);
        assert_eq!(comments, expected_comments);
        assert_eq!(posts.len(), 40);
        assert_eq!(
            comments.len(),
            203,
            "demo comment total changed: update the docs"
        );
    }
}
