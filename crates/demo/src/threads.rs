//! The demo site's discussion threads under `/threads/`: pages shaped as
//! forum threads are, for spiders with per-element and nested fields,
//! dates and transforms. Each thread page has a title with markup inside,
//! a tag list whose tags carry markup too, and posts, each with an author,
//! a date written the way its forum writes it (absolute in several
//! formats, or relative in English or Chinese: "3 hours ago", "昨天
//! 14:02"), a view count with thousands separators and a body with quoted
//! replies nested inside each other.
//!
//! - `/threads/`: the index, a link per thread (`a.thread`), and beside
//!   it the link a forum engine bookmarks (`a.unread`: the last page read
//!   and an anchor, `/threads/<n>?page=2#unread`);
//! - `/threads/<n>` (1 to [`THREADS`]): a thread page, with a pager linking
//!   back to its first page as `?page=1` (`div.pager a`); the query is
//!   not read, so every such URL is the same page;
//! - anything else under `/threads/`: not handled here (404).
//!
//! The markup is a contract the tests' spiders are written against;
//! [`Thread::all`] is what they must extract. This module owns no I/O.

use super::pages::{escape, Page, UTF8_HTML};

/// Thread pages.
pub const THREADS: usize = 3;

/// Where the threads live.
const ROOT: &str = "/threads/";

/// One post of a thread, as the page shows it and as a spider reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Post {
    pub author: &'static str,
    /// The date as the page writes it.
    pub date: &'static str,
    /// The date a spider reads (RFC 3339, UTC+8), when it is absolute.
    pub posted: Option<&'static str>,
    pub views: u64,
    /// The body's own text, whitespace normalized (quotes left out).
    pub text: &'static str,
    /// The quoted replies, outermost first, each its whole text.
    pub quotes: &'static [&'static str],
}

/// One thread page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    pub title: &'static str,
    pub tags: &'static [&'static str],
    pub posts: &'static [Post],
}

const THREAD_DATA: [Thread; THREADS] = [
    Thread {
        title: "Crawling forums politely",
        tags: &["rust", "crawling tips"],
        posts: &[
            Post {
                author: "alice",
                date: "2024-03-01 14:02",
                posted: Some("2024-03-01T14:02:00+08:00"),
                views: 1234,
                text: "Start slow.",
                quotes: &[],
            },
            Post {
                author: "bob",
                date: "Mar 1, 2024 2:05 PM",
                posted: Some("2024-03-01T14:05:00+08:00"),
                views: 56,
                text: "Agreed.",
                quotes: &["Start slow."],
            },
        ],
    },
    Thread {
        title: "日期的写法",
        tags: &["中文"],
        posts: &[Post {
            author: "carol",
            date: "2024年3月2日",
            posted: Some("2024-03-02T00:00:00+08:00"),
            views: 1_000_000,
            text: "Both quoted.",
            quotes: &["outer reply inner reply", "inner reply"],
        }],
    },
    Thread {
        title: "Fresh news",
        tags: &[],
        posts: &[
            Post {
                author: "dave",
                date: "3 hours ago",
                posted: None,
                views: 7,
                text: "Just in.",
                quotes: &[],
            },
            Post {
                author: "erin",
                date: "昨天 14:02",
                posted: None,
                views: 8,
                text: "Late.",
                quotes: &[],
            },
        ],
    },
];

impl Thread {
    /// Every thread, in the order of their numbers (from 1).
    pub fn all() -> &'static [Thread] {
        &THREAD_DATA
    }
}

/// The page for `path`, if it is one of the threads' pages.
pub fn page(path: &str) -> Option<Page> {
    let rest = path.strip_prefix(ROOT)?;
    let html = if rest.is_empty() {
        index()
    } else {
        let n: usize = rest.parse().ok()?;
        thread_page(n, THREAD_DATA.get(n.checked_sub(1)?)?)
    };
    Some(Page {
        status: 200,
        content_type: UTF8_HTML.to_owned(),
        body: html.into_bytes(),
    })
}

fn index() -> String {
    let mut links = String::new();
    for (i, t) in THREAD_DATA.iter().enumerate() {
        links.push_str(&format!(
            "<li><a class=\"thread\" href=\"{ROOT}{n}\">{}</a> <a class=\"unread\" href=\"{ROOT}{n}?page=2#unread\">new</a></li>",
            escape(t.title),
            n = i + 1,
        ));
    }
    format!("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Threads</title></head><body><ul>{links}</ul></body></html>")
}

fn thread_page(n: usize, t: &Thread) -> String {
    // The title's last word in bold, a tag's last word in italics: the
    // text of one element comes in pieces.
    let title = match t.title.rsplit_once(' ') {
        Some((head, last)) => format!("{} <b>{}</b>", escape(head), escape(last)),
        None => escape(t.title).into_owned(),
    };
    let tags: String = t
        .tags
        .iter()
        .map(|tag| match tag.rsplit_once(' ') {
            Some((head, last)) => format!("<li>{} <em>{}</em></li>", escape(head), escape(last)),
            None => format!("<li>{}</li>", escape(tag)),
        })
        .collect();
    let posts: String = t.posts.iter().map(post).collect();
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{}</title></head><body><h1>{title}</h1><ul class=\"tags\">{tags}</ul>{posts}<div class=\"pager\"><a href=\"{ROOT}{n}?page=1\">1</a></div></body></html>",
        escape(t.title)
    )
}

fn post(p: &Post) -> String {
    // Quotes nest: the first holds the second. Each quote's own words
    // are its whole text less the next one's.
    let mut quoted = String::new();
    for (i, q) in p.quotes.iter().enumerate().rev() {
        let own = match p.quotes.get(i + 1) {
            Some(inner) => q.strip_suffix(inner).unwrap_or(q).trim_end(),
            None => q,
        };
        quoted = format!("<blockquote>{} {quoted}</blockquote>", escape(own));
    }
    format!(
        "<div class=\"post\"><span class=\"author\">{}</span> <span class=\"date\">{}</span> <span class=\"views\">{} views</span><div class=\"body\">{quoted}<p>{}</p></div></div>",
        escape(p.author),
        escape(p.date),
        super::pages::thousands(p.views),
        escape(p.text)
    )
}
