//! The demo forum as a section built by JavaScript, under `/js/`, for
//! crawls that render pages in a browser: every page is an empty shell
//! (`<div id="app"></div>` and a script) that `/js/app.js` fills from JSON,
//! building the same elements, classes, nesting and text as the HTML
//! forum's page (see [`super::pages`]), so a spider with rendering reads
//! the same items as `spiders/bbs.toml` reads from the HTML forum. Pure,
//! like [`super::pages`]: a path in, a [`Page`] out. Routes:
//!
//! - shells (`text/html; charset=utf-8`), one per page of the HTML forum,
//!   with the same numbering, `<title>` and 404s: `/js/` (the index),
//!   `/js/list/{forum_id}/{page}`, `/js/post/{id}`,
//!   `/js/comment/{post_id}/{page}`; forum `00003`'s shells carry
//!   `<base href="/js/">` and its links are relative, as the HTML forum's
//!   are against `<base href="/">`;
//! - `/js/app.js` (`application/javascript`): the script that builds them;
//! - data (`application/json`, a JSON `{"error"}` 404 for anything else
//!   under `/js/data/`), every link in it pointing into `/js/`:
//!   - `/js/data/index`: `{"title", "forums": [{"id", "name", "href"}]}`;
//!   - `/js/data/list/{forum_id}/{page}`: `{"home", "forum": {"id",
//!     "name", "href"}, "page", "threads": [{"id", "title", "author",
//!     "replies", "href"}], "more", "prev", "next"}`, with only the first
//!     half (rounded up) of the page's threads; `more` is the URL of the
//!     rest (`null` when there is none), which the page loads on a click
//!     of `button.load-more` or when the end of the list scrolls into
//!     view; `prev`/`next` are the pager's hrefs or `null`;
//!   - `/js/data/list/{forum_id}/{page}/more`: `{"threads": […]}`, the rest;
//!   - `/js/data/post/{id}`: `{"home", "forum", "id", "title", "author",
//!     "avatar", "posted", "posted_text", "views", "body", "comments"}`:
//!     `posted` is ISO 8601, `posted_text` the human form the page shows,
//!     `views` a number, `body` a list of paragraphs, each a list of parts
//!     (`{"type": "text"|"bold", "text"}`, `{"type": "link", "href",
//!     "text"}`, `{"type": "br"}`), `comments` `{"count", "label", "href"}`
//!     or `null` without comments;
//!   - `/js/data/comment/{post_id}/{page}`: `{"home", "forum", "post":
//!     {"id", "title"}, "page", "comments": [{"id", "user", "floor",
//!     "text"}], "prev", "next"}`;
//!   - `/js/data/ping`: `{"pong": true}`, whatever the query;
//! - `/js/avatar/{name}.svg`: a tiny SVG, the post page's lazily loaded
//!   `img.avatar` (its `src` is set when it enters the viewport);
//! - hostile pages, for the renderer's robustness tests (their script is
//!   `/js/hostile.js`): `/js/hostile/never-settles` (writes its
//!   `h1.post-title` at once, then requests [`HANG_PATH`], which the
//!   server never answers, and pings every 100 ms for ever),
//!   `/js/hostile/navigates-away` (writes its heading, then goes to
//!   `/js/hostile/elsewhere`, a plain HTML page, after 50 ms) and
//!   `/js/hostile/many-requests` (fires [`FLOOD_REQUESTS`] pings at once,
//!   writes `<h1 class="post-title">many requests</h1>`, and
//!   `p.answered` once all are answered).
//!
//! Differences from the HTML forum, all outside the spider's selectors:
//! every page is UTF-8 (the GBK forums' texts are the same texts); the
//! content sits in `div#app`; a post has `img.avatar` first in `div.post`;
//! a list page has `button.load-more` and a sentinel after `ul.threads`
//! until the rest is loaded; the GBK forums' next links carry their
//! Chinese query already percent-encoded in GBK, so they resolve to the
//! same URLs as the HTML forum's links (with `/js` in front).

use serde_json::{json, Value};

use super::pages::{self, escape, Page, Route, UTF8_HTML};
use super::site::{Charset, Forum, Inline, Paragraph, Post, PostId, Site};

/// Where the section lives: every link its pages write starts here.
pub const ROOT: &str = "/js/";

/// The request `/js/hostile/never-settles` makes that the server never
/// answers: the server holds it open until it stops (see
/// [`holds_open`]); [`get`] alone answers it 404.
pub const HANG_PATH: &str = "/js/hostile/hang";

/// The pings `/js/hostile/many-requests` fires at once.
pub const FLOOD_REQUESTS: usize = 1000;

/// The hostile pages: path segment and heading.
pub const HOSTILE_PAGES: [(&str, &str); 3] = [
    ("never-settles", "never settles"),
    ("navigates-away", "navigates away"),
    ("many-requests", "many requests"),
];

/// The script that builds the forum's pages.
const APP_JS: &str = include_str!("rendered/app.js");

/// The hostile pages' script.
const HOSTILE_JS: &str = include_str!("rendered/hostile.js");

const JAVASCRIPT: &str = "application/javascript";
const JSON: &str = "application/json";

/// List threads tall enough that the first half fills the viewport, so the
/// rest loads only on a click or a scroll, as on an infinite-scroll site.
const SHELL_STYLE: &str =
    "li.thread{display:block;min-height:60vh}img.avatar{width:32px;height:32px}";

/// Whether the server must hold a request for `path` open without
/// answering ([`HANG_PATH`]).
pub fn holds_open(path: &str) -> bool {
    path == HANG_PATH
}

/// The answer to a GET of a path under `/js/` (the query is not read), or
/// `None` for other paths.
pub fn get(site: &Site, path: &str) -> Option<Page> {
    let rest = path.strip_prefix(ROOT)?;
    let segments: Vec<&str> = rest.split('/').collect();
    let page = match segments.as_slice() {
        ["app.js"] => script(APP_JS),
        ["hostile.js"] => script(HOSTILE_JS),
        ["data", data @ ..] => data_response(site, data),
        ["avatar", file] => avatar(file).unwrap_or_else(|| pages::not_found(path)),
        ["hostile", name] => hostile_page(name).unwrap_or_else(|| pages::not_found(path)),
        _ => shell(site, path, &format!("/{rest}")),
    };
    Some(page)
}

/// The shell of the page the HTML forum serves at `html_path`, or its 404.
fn shell(site: &Site, path: &str, html_path: &str) -> Page {
    match pages::route(site, html_path) {
        Route::Index => shell_page(pages::INDEX_TITLE, false, "/js/app.js"),
        Route::List(forum, page) => shell_page(
            &pages::list_title(forum, page),
            forum.base_href,
            "/js/app.js",
        ),
        Route::Post(forum, post) => shell_page(
            &pages::post_title(forum, post),
            forum.base_href,
            "/js/app.js",
        ),
        Route::Comments(forum, post, page) => shell_page(
            &pages::comment_title(post, page),
            forum.base_href,
            "/js/app.js",
        ),
        Route::NotFound => pages::not_found(path),
    }
}

/// An empty page: a title, an empty `div#app` and `script`.
fn shell_page(title: &str, base_href: bool, script: &str) -> Page {
    let base = if base_href {
        format!("<base href=\"{ROOT}\">")
    } else {
        String::new()
    };
    let html = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{}</title>{base}<style>{SHELL_STYLE}</style></head><body>\n<div id=\"app\"></div>\n<script src=\"{script}\"></script>\n</body></html>\n",
        escape(title)
    );
    page(200, UTF8_HTML, html.into_bytes())
}

/// A hostile page's shell, or the page `navigates-away` goes to.
fn hostile_page(name: &str) -> Option<Page> {
    if name == "elsewhere" {
        let html = "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>elsewhere</title></head><body>\n<h1 class=\"post-title\">elsewhere</h1>\n<p>Where /js/hostile/navigates-away goes.</p>\n</body></html>\n";
        return Some(page(200, UTF8_HTML, html.as_bytes().to_vec()));
    }
    let (_, heading) = HOSTILE_PAGES.iter().find(|(page, _)| *page == name)?;
    Some(shell_page(heading, false, "/js/hostile.js"))
}

fn script(source: &'static str) -> Page {
    page(200, JAVASCRIPT, source.as_bytes().to_vec())
}

/// An answer under `/js/data/`: always JSON, a 404 for unknown paths.
fn data_response(site: &Site, segments: &[&str]) -> Page {
    match data(site, segments) {
        Some(value) => page(200, JSON, value.to_string().into_bytes()),
        None => {
            let message = format!("no data at {ROOT}data/{}", segments.join("/"));
            page(
                404,
                JSON,
                json!({ "error": message }).to_string().into_bytes(),
            )
        }
    }
}

/// The data under `/js/data/{segments}`, routed as the HTML forum routes
/// the same page.
fn data(site: &Site, segments: &[&str]) -> Option<Value> {
    match segments {
        ["index"] => Some(index_data(site)),
        ["ping"] => Some(json!({ "pong": true })),
        ["list", forum_id, page, "more"] => match html_route(site, &["list", forum_id, page]) {
            Route::List(forum, page) => Some(more_data(site, forum, page)),
            _ => None,
        },
        _ => match html_route(site, segments) {
            Route::List(forum, page) => Some(list_data(site, forum, page)),
            Route::Post(forum, post) => Some(post_data(forum, post)),
            Route::Comments(forum, post, page) => Some(comment_data(forum, post, page)),
            Route::Index | Route::NotFound => None,
        },
    }
}

/// What the HTML forum's path of these segments names.
fn html_route<'a>(site: &'a Site, segments: &[&str]) -> Route<'a> {
    pages::route(site, &format!("/{}", segments.join("/")))
}

fn index_data(site: &Site) -> Value {
    let forums: Vec<Value> = site
        .forums
        .iter()
        .map(|forum| {
            json!({
                "id": forum.id,
                "name": forum.name,
                "href": format!("{ROOT}list/{}/1", forum.id),
            })
        })
        .collect();
    json!({ "title": pages::INDEX_TITLE, "forums": forums })
}

/// The threads a list page shows at first: the first half, rounded up.
pub fn shown_at_first(threads: usize) -> usize {
    threads.div_ceil(2)
}

fn list_data(site: &Site, forum: &Forum, page: usize) -> Value {
    let ids = forum.page(page).unwrap_or_default();
    let shown = shown_at_first(ids.len());
    let more = (shown < ids.len()).then(|| format!("{ROOT}data/list/{}/{page}/more", forum.id));
    let prev = (page > 1).then(|| link(forum, &format!("list/{}/{}", forum.id, page - 1)));
    let next = (page < forum.page_count()).then(|| {
        let query = next_list_query(forum.charset);
        link(forum, &format!("list/{}/{}{query}", forum.id, page + 1))
    });
    json!({
        "home": ROOT,
        "forum": forum_data(forum),
        "page": page,
        "threads": threads_data(site, forum, &ids[..shown]),
        "more": more,
        "prev": prev,
        "next": next,
    })
}

fn more_data(site: &Site, forum: &Forum, page: usize) -> Value {
    let ids = forum.page(page).unwrap_or_default();
    let shown = shown_at_first(ids.len());
    json!({ "threads": threads_data(site, forum, &ids[shown..]) })
}

fn threads_data(site: &Site, forum: &Forum, ids: &[PostId]) -> Vec<Value> {
    ids.iter()
        .filter_map(|&id| site.post(id))
        .map(|post| {
            json!({
                "id": post.id,
                "title": post.title,
                "author": post.author,
                "replies": post.comments.len(),
                "href": link(forum, &format!("post/{}", post.id)),
            })
        })
        .collect()
}

fn post_data(forum: &Forum, post: &Post) -> Value {
    let comments = (!post.comments.is_empty()).then(|| {
        json!({
            "count": post.comments.len(),
            "label": pages::comments_label(forum, post),
            "href": link(forum, &format!("comment/{}/1", post.id)),
        })
    });
    json!({
        "home": ROOT,
        "forum": forum_data(forum),
        "id": post.id,
        "title": post.title,
        "author": post.author,
        "avatar": avatar_path(&post.author),
        "posted": post.posted,
        "posted_text": pages::human_time(&post.posted, forum.charset),
        "views": post.views,
        "body": post.body_paragraphs.iter().map(paragraph_data).collect::<Vec<_>>(),
        "comments": comments,
    })
}

/// A paragraph as its parts, in order.
fn paragraph_data(paragraph: &Paragraph) -> Value {
    let parts: Vec<Value> = paragraph
        .0
        .iter()
        .map(|inline| match inline {
            Inline::Text(text) => json!({ "type": "text", "text": text }),
            Inline::Bold(text) => json!({ "type": "bold", "text": text }),
            Inline::Link { href, text } => json!({ "type": "link", "href": href, "text": text }),
            Inline::LineBreak => json!({ "type": "br" }),
        })
        .collect();
    Value::Array(parts)
}

fn comment_data(forum: &Forum, post: &Post, page: usize) -> Value {
    let comments: Vec<Value> = post
        .comments_on_page(page)
        .unwrap_or_default()
        .iter()
        .map(|c| json!({ "id": c.id, "user": c.user, "floor": c.floor, "text": c.text }))
        .collect();
    let path = |page: usize| link(forum, &format!("comment/{}/{page}", post.id));
    json!({
        "home": ROOT,
        "forum": forum_data(forum),
        "post": { "id": post.id, "title": post.title },
        "page": page,
        "comments": comments,
        "prev": (page > 1).then(|| path(page - 1)),
        "next": (page < post.comment_page_count()).then(|| path(page + 1)),
    })
}

/// A forum as the breadcrumb shows it.
fn forum_data(forum: &Forum) -> Value {
    json!({
        "id": forum.id,
        "name": forum.name,
        "href": link(forum, &format!("list/{}/1", forum.id)),
    })
}

/// A link from a page of `forum` to `path` (no leading slash) in the
/// section: relative to `<base href="/js/">` on forums with a base, under
/// [`ROOT`] elsewhere.
fn link(forum: &Forum, path: &str) -> String {
    if forum.base_href {
        path.to_owned()
    } else {
        format!("{ROOT}{path}")
    }
}

/// The query of a list page's next link: none on UTF-8 forums; on GBK
/// forums the HTML forum's `?order=最新`, percent-encoded in GBK as a
/// browser sends it from the GBK page, so both links name the same URL.
fn next_list_query(charset: Charset) -> String {
    match charset {
        Charset::Utf8 => String::new(),
        Charset::Gbk => {
            let (bytes, _, _) = encoding_rs::GBK.encode("最新");
            format!("?order={}", percent_encode(&bytes))
        }
    }
}

/// The avatar of a user: `/js/avatar/{name}.svg`, the name percent-encoded.
fn avatar_path(user: &str) -> String {
    format!("{ROOT}avatar/{}.svg", percent_encode(user.as_bytes()))
}

/// Percent-encodes every byte but the unreserved ASCII ones.
fn percent_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for &byte in bytes {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A round avatar whose colour comes from the name, for `{name}.svg`.
fn avatar(file: &str) -> Option<Page> {
    let name = file.strip_suffix(".svg").filter(|name| !name.is_empty())?;
    let colour = fnv1a(name.as_bytes()) & 0x00ff_ffff;
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"32\" height=\"32\" viewBox=\"0 0 32 32\"><circle cx=\"16\" cy=\"16\" r=\"16\" fill=\"#{colour:06x}\"/></svg>\n"
    );
    Some(page(200, "image/svg+xml", svg.into_bytes()))
}

/// 32-bit FNV-1a: a stable hash for the avatars' colours.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |hash, &byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

fn page(status: u16, content_type: &str, body: Vec<u8>) -> Page {
    Page {
        status,
        content_type: content_type.to_owned(),
        body,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pages::render;
    use crate::site::COMMENTS_PER_PAGE;

    fn json_of(page: &Page) -> Value {
        assert_eq!(page.content_type, JSON);
        serde_json::from_slice(&page.body).expect("JSON body")
    }

    fn data_at(site: &Site, path: &str) -> Value {
        let page = render(site, path);
        assert_eq!(page.status, 200, "{path}");
        json_of(&page)
    }

    /// Every page path of the HTML forum.
    fn html_paths(site: &Site) -> Vec<String> {
        let mut paths = vec!["/".to_owned()];
        for forum in &site.forums {
            for page in 1..=forum.page_count() {
                paths.push(format!("/list/{}/{page}", forum.id));
            }
        }
        for post in site.posts.values() {
            paths.push(format!("/post/{}", post.id));
            for page in 1..=post.comment_page_count() {
                paths.push(format!("/comment/{}/{page}", post.id));
            }
        }
        paths
    }

    fn title_of(html: &str) -> &str {
        let start = html.find("<title>").expect("<title>") + "<title>".len();
        let end = html[start..].find("</title>").expect("</title>");
        &html[start..start + end]
    }

    /// A link of a page of forum `forum_id` of the demo, resolved to a
    /// path as a browser does: against the shell's `<base href="/js/">` on
    /// forums with a base, else against the page's own URL.
    fn resolve(forum_id: &str, href: &str) -> String {
        let site = Site::demo();
        let forum = site.forum(forum_id).expect("forum");
        if forum.base_href {
            assert!(!href.starts_with('/'), "{href} is relative on {forum_id}");
            format!("{ROOT}{href}")
        } else {
            assert!(href.starts_with(ROOT), "{href} is under {ROOT}");
            href.to_owned()
        }
    }

    /// A page's HTML, decoded as the HTML forum encoded it.
    fn decoded(page: &Page) -> String {
        match std::str::from_utf8(&page.body) {
            Ok(text) => text.to_owned(),
            Err(_) => encoding_rs::GBK.decode(&page.body).0.into_owned(),
        }
    }

    fn text(value: &Value) -> &str {
        value.as_str().expect("a string")
    }

    #[test]
    fn every_html_page_has_a_shell_with_its_title() {
        let site = Site::demo();
        for html_path in html_paths(&site) {
            let path = format!("/js{html_path}");
            let shell = render(&site, &path);
            let html_page = render(&site, &html_path);
            assert_eq!(shell.status, 200, "{path}");
            assert_eq!(shell.content_type, "text/html; charset=utf-8");
            let shell_html = String::from_utf8(shell.body).expect("UTF-8");
            let html_text = decoded(&html_page);
            assert_eq!(title_of(&shell_html), title_of(&html_text), "{path}");
            assert!(shell_html.contains("<div id=\"app\"></div>"));
            assert!(shell_html.contains("<script src=\"/js/app.js\"></script>"));
            let based = html_text.contains("<base href=\"/\">");
            assert_eq!(shell_html.contains("<base href=\"/js/\">"), based, "{path}");
        }
    }

    #[test]
    fn shells_404_where_the_html_forum_does() {
        let site = Site::demo();
        let one_page = site
            .posts
            .values()
            .find(|p| p.comment_page_count() == 1)
            .expect("post");
        let beyond = format!("/comment/{}/2", one_page.id);
        for html_path in [
            "/list",
            "/list/00001",
            "/list/00001/0",
            "/list/00001/8",
            "/list/00001/01",
            "/list/00001/1/",
            "/list/99999/1",
            "/post/1",
            "/post/01001",
            "/post/1001/",
            "/post/99999999999999999999999999",
            "/comment/1001/0",
            "/comment/1002/1",
            beyond.as_str(),
            "/post/<script>",
            "/nope",
        ] {
            let path = format!("/js{html_path}");
            assert_eq!(render(&site, html_path).status, 404, "{html_path}");
            let page = render(&site, &path);
            assert_eq!(page.status, 404, "{path}");
            assert_eq!(page.content_type, "text/html; charset=utf-8");
            assert!(!String::from_utf8_lossy(&page.body).contains("<script>"));
        }
        assert_eq!(render(&site, "/js").status, 404);
        assert_eq!(render(&site, "/js/hostile/hang").status, 404);
        assert!(get(&site, "/list/00001/1").is_none());
    }

    #[test]
    fn data_404s_are_json_where_the_html_forum_404s() {
        let site = Site::demo();
        for path in [
            "/js/data/",
            "/js/data/nope",
            "/js/data/list/00001/8",
            "/js/data/list/00001/8/more",
            "/js/data/list/00001/1/less",
            "/js/data/list/99999/1",
            "/js/data/post/1",
            "/js/data/post/01001",
            "/js/data/comment/1002/1",
            "/js/data/comment/1001/0",
        ] {
            let page = render(&site, path);
            assert_eq!(page.status, 404, "{path}");
            assert!(json_of(&page)["error"].is_string());
        }
        assert_eq!(data_at(&site, "/js/data/ping?n=7"), json!({ "pong": true }));
    }

    #[test]
    fn scripts_and_avatars_have_their_types() {
        let site = Site::demo();
        for path in ["/js/app.js", "/js/hostile.js"] {
            let page = render(&site, path);
            assert_eq!((page.status, page.content_type.as_str()), (200, JAVASCRIPT));
            assert!(
                page.body.is_ascii(),
                "{path} is ASCII, whatever the charset"
            );
        }
        let post = site.post(1001).expect("post");
        let avatar = text(&data_at(&site, "/js/data/post/1001")["avatar"]).to_owned();
        assert_eq!(avatar, avatar_path(&post.author));
        let page = render(&site, &avatar);
        assert_eq!(
            (page.status, page.content_type.as_str()),
            (200, "image/svg+xml")
        );
        assert!(page.body.starts_with(b"<svg "));
        assert_eq!(avatar_path("<guest>"), "/js/avatar/%3Cguest%3E.svg");
        assert_eq!(render(&site, "/js/avatar/.svg").status, 404);
        assert_eq!(render(&site, "/js/avatar/x.png").status, 404);
    }

    #[test]
    fn index_data_lists_every_forum() {
        let site = Site::demo();
        let index = data_at(&site, "/js/data/index");
        let forums: Vec<(&str, &str)> = index["forums"]
            .as_array()
            .expect("forums")
            .iter()
            .map(|f| (text(&f["name"]), text(&f["href"])))
            .collect();
        let hrefs: Vec<String> = site
            .forums
            .iter()
            .map(|f| format!("/js/list/{}/1", f.id))
            .collect();
        let expected: Vec<(&str, &str)> = site
            .forums
            .iter()
            .zip(&hrefs)
            .map(|(f, href)| (f.name.as_str(), href.as_str()))
            .collect();
        assert_eq!(forums, expected);
    }

    #[test]
    fn list_data_shows_half_at_first_and_the_rest_on_more() {
        let site = Site::demo();
        for forum in &site.forums {
            for page in 1..=forum.page_count() {
                let path = format!("/js/data/list/{}/{page}", forum.id);
                let first = data_at(&site, &path);
                assert_eq!(text(&first["forum"]["name"]), forum.name);
                assert_eq!(first["page"], page);
                let more = text(&first["more"]).to_owned();
                assert_eq!(more, format!("{path}/more"));
                let rest = data_at(&site, &more);
                let shown = first["threads"].as_array().expect("threads");
                let later = rest["threads"].as_array().expect("threads");
                let ids = forum.page(page).expect("page");
                assert_eq!(shown.len(), shown_at_first(ids.len()));
                let all: Vec<&Value> = shown.iter().chain(later).collect();
                assert_eq!(all.len(), ids.len());
                for (thread, &id) in all.into_iter().zip(ids) {
                    let post = site.post(id).expect("post");
                    assert_eq!(thread["id"], id);
                    assert_eq!(text(&thread["title"]), post.title);
                    assert_eq!(text(&thread["author"]), post.author);
                    assert_eq!(thread["replies"], post.comments.len());
                    let target = resolve(&forum.id, text(&thread["href"]));
                    assert_eq!(target, format!("/js/post/{id}"));
                    assert_eq!(render(&site, &target).status, 200);
                }
            }
        }
    }

    #[test]
    fn list_pagers_link_where_the_html_forum_does() {
        let site = Site::demo();
        let next = |forum: &str, page: usize| {
            let data = data_at(&site, &format!("/js/data/list/{forum}/{page}"));
            data["next"].as_str().map(|href| resolve(forum, href))
        };
        let prev = |forum: &str, page: usize| {
            let data = data_at(&site, &format!("/js/data/list/{forum}/{page}"));
            data["prev"].as_str().map(|href| resolve(forum, href))
        };
        assert_eq!(next("00001", 1).as_deref(), Some("/js/list/00001/2"));
        assert_eq!(prev("00001", 1), None);
        assert_eq!(prev("00001", 4).as_deref(), Some("/js/list/00001/3"));
        assert_eq!(next("00001", 7), None);
        // The HTML forum's GBK link, `?order=最新` in a GBK page, is sent
        // as `?order=%D7%EE%D0%C2`: the same URL here.
        assert_eq!(
            next("00002", 2).as_deref(),
            Some("/js/list/00002/3?order=%D7%EE%D0%C2")
        );
        assert_eq!(next("00002", 3), None);
        assert_eq!(
            next("00003", 1).as_deref(),
            Some("/js/list/00003/2?order=%D7%EE%D0%C2")
        );
        assert_eq!(prev("00003", 2).as_deref(), Some("/js/list/00003/1"));
        assert_eq!(
            render(&site, "/js/list/00002/3?order=%D7%EE%D0%C2").status,
            200
        );
    }

    #[test]
    fn post_data_carries_what_the_post_page_shows() {
        let site = Site::demo();
        for post in site.posts.values() {
            let forum = site.forum(&post.forum_id).expect("forum");
            let data = data_at(&site, &format!("/js/data/post/{}", post.id));
            assert_eq!(data["id"], post.id);
            assert_eq!(text(&data["title"]), post.title);
            assert_eq!(text(&data["author"]), post.author);
            assert_eq!(text(&data["posted"]), post.posted);
            assert_eq!(
                text(&data["posted_text"]),
                pages::human_time(&post.posted, forum.charset)
            );
            assert_eq!(data["views"], post.views);
            assert_eq!(text(&data["forum"]["name"]), forum.name);
            assert_eq!(
                resolve(&forum.id, text(&data["forum"]["href"])),
                format!("/js/list/{}/1", forum.id)
            );
            assert_eq!(body_from_data(&data["body"]), post.body_text_nodes());
            let texts: Vec<String> = data["body"]
                .as_array()
                .expect("paragraphs")
                .iter()
                .map(paragraph_text)
                .collect();
            let expected: Vec<String> = post.body_paragraphs.iter().map(Paragraph::text).collect();
            assert_eq!(texts, expected);
            match post.comments.len() {
                0 => assert!(data["comments"].is_null()),
                count => {
                    assert_eq!(data["comments"]["count"], count);
                    assert_eq!(
                        text(&data["comments"]["label"]),
                        pages::comments_label(forum, post)
                    );
                    assert_eq!(
                        resolve(&forum.id, text(&data["comments"]["href"])),
                        format!("/js/comment/{}/1", post.id)
                    );
                }
            }
        }
    }

    /// The text nodes `div.post-body ::text` yields from the page app.js
    /// builds from `body`: each paragraph's parts, a `"\n"` between
    /// paragraphs.
    fn body_from_data(body: &Value) -> Vec<&str> {
        let mut nodes = Vec::new();
        for (index, paragraph) in body.as_array().expect("paragraphs").iter().enumerate() {
            if index > 0 {
                nodes.push("\n");
            }
            for part in paragraph.as_array().expect("parts") {
                match text(&part["type"]) {
                    "text" | "bold" | "link" => nodes.push(text(&part["text"])),
                    "br" => {}
                    other => panic!("unknown part {other}"),
                }
            }
        }
        nodes
    }

    fn paragraph_text(paragraph: &Value) -> String {
        paragraph
            .as_array()
            .expect("parts")
            .iter()
            .filter_map(|part| part["text"].as_str())
            .collect()
    }

    #[test]
    fn body_parts_keep_their_markup() {
        let site = Site::demo();
        let post = site
            .posts
            .values()
            .find(|p| p.body_paragraphs.len() == 3)
            .expect("a post with three paragraphs");
        let data = data_at(&site, &format!("/js/data/post/{}", post.id));
        let types: Vec<Vec<&str>> = data["body"]
            .as_array()
            .expect("paragraphs")
            .iter()
            .map(|p| {
                p.as_array()
                    .expect("parts")
                    .iter()
                    .map(|part| text(&part["type"]))
                    .collect()
            })
            .collect();
        assert_eq!(
            types,
            [
                vec!["text", "bold", "text"],
                vec!["text", "link", "text"],
                vec!["text", "br", "text"]
            ]
        );
        let Inline::Link { href, .. } = &post.body_paragraphs[1].0[1] else {
            panic!("a link");
        };
        assert_eq!(text(&data["body"][1][1]["href"]), href);
    }

    #[test]
    fn comment_data_carries_every_comment_once_with_its_pager() {
        let site = Site::demo();
        for post in site.posts.values() {
            let forum = site.forum(&post.forum_id).expect("forum");
            let mut ids = Vec::new();
            let mut path =
                (post.comment_page_count() > 0).then(|| format!("/js/comment/{}/1", post.id));
            let mut page = 0;
            while let Some(shell) = path.take() {
                page += 1;
                assert_eq!(render(&site, &shell).status, 200, "{shell}");
                let data_path = shell.replacen(ROOT, "/js/data/", 1);
                let data = data_at(&site, &data_path);
                assert_eq!(data["page"], page);
                assert_eq!(text(&data["post"]["title"]), post.title);
                let on_page = post.comments_on_page(page).expect("page");
                let comments = data["comments"].as_array().expect("comments");
                assert_eq!(comments.len(), on_page.len());
                assert!(comments.len() <= COMMENTS_PER_PAGE);
                for (c, model) in comments.iter().zip(on_page) {
                    assert_eq!(text(&c["user"]), model.user);
                    assert_eq!(text(&c["text"]), model.text);
                    assert_eq!(c["floor"], model.floor);
                    ids.push(text(&c["id"]).to_owned());
                }
                let prev = data["prev"].as_str().map(|h| resolve(&forum.id, h));
                let expected_prev =
                    (page > 1).then(|| format!("/js/comment/{}/{}", post.id, page - 1));
                assert_eq!(prev, expected_prev);
                path = data["next"].as_str().map(|h| resolve(&forum.id, h));
            }
            assert_eq!(page, post.comment_page_count());
            let expected: Vec<&str> = post.comments.iter().map(|c| c.id.as_str()).collect();
            assert_eq!(ids, expected, "post {}", post.id);
        }
    }

    #[test]
    fn hostile_pages_are_shells_of_their_own_script() {
        let site = Site::demo();
        for (name, heading) in HOSTILE_PAGES {
            let page = render(&site, &format!("/js/hostile/{name}"));
            assert_eq!(page.status, 200);
            let html = String::from_utf8(page.body).expect("UTF-8");
            assert!(html.contains("<script src=\"/js/hostile.js\"></script>"));
            assert_eq!(title_of(&html), heading);
            assert!(
                HOSTILE_JS.contains(&format!("'{name}'")),
                "{name} in hostile.js"
            );
        }
        let elsewhere = render(&site, "/js/hostile/elsewhere");
        assert_eq!(elsewhere.status, 200);
        assert!(!String::from_utf8_lossy(&elsewhere.body).contains("<script"));
        assert_eq!(render(&site, "/js/hostile/nope").status, 404);
        assert!(holds_open(HANG_PATH) && !holds_open("/js/hostile/never-settles"));
        assert!(HOSTILE_JS.contains(&format!("const FLOOD_REQUESTS = {FLOOD_REQUESTS};")));
        assert!(HOSTILE_JS.contains(HANG_PATH));
    }

    #[test]
    fn percent_encoding_and_gbk_query() {
        assert_eq!(percent_encode(b"aZ0-._~ /&"), "aZ0-._~%20%2F%26");
        assert_eq!(percent_encode("老王".as_bytes()), "%E8%80%81%E7%8E%8B");
        assert_eq!(next_list_query(Charset::Gbk), "?order=%D7%EE%D0%C2");
        assert_eq!(next_list_query(Charset::Utf8), "");
    }
}
