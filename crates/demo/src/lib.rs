//! The demo site crawlworker's examples, tests and benchmarks crawl: a
//! forum with a small news section, as a deterministic site model, its HTML
//! pages and a loopback HTTP server. The README's quick start serves it
//! with the `crawlworker-demo` binary; the crawler itself uses none of it.
//!
//! - [`site`]: the data ([`Site::demo`], [`Site::generate`]) and the demo
//!   crawl's start tasks ([`demo_tasks`]).
//! - [`pages`]: [`render`], a pure function from request target to page, so
//!   tests and benchmarks need no server.
//! - [`news`]: the news section under `/news/` ([`News::demo`], fifteen
//!   articles; a front of three pages, article and tag pages), the site
//!   `spiders/news.toml` crawls from plain start URLs.
//! - [`api`]: the forum as a JSON API under `/api/` (threads with a page
//!   counter, comments with a `next` link, a POST search), for JSON spiders.
//! - [`rendered`]: the same forum under `/js/` as empty shells that a
//!   script fills from JSON (`/js/data/…`) with the HTML pages' markup,
//!   list pages that load their second half on a click or a scroll, a
//!   lazy image, and hostile pages (never idle, navigating away, a
//!   thousand requests), for crawls that render pages in a browser.
//! - [`members`]: a members-only area under `/members/` behind a
//!   CSRF-protected login form, whose sessions expire; the server counts
//!   the logins (for logged-in crawls).
//! - [`chrome`]: the menus, sidebar, style and script a real forum page
//!   carries, added to every HTML page on request ([`Chrome`]), so that
//!   benchmarks parse pages of a real page's weight.
//! - [`expected`]: the items a correct crawl of the forum yields, computed
//!   from the model, so tests compare a crawl against them.
//! - [`server`]: [`serve`] on a caller's listener, and [`DemoServer`], which
//!   binds 127.0.0.1:0 and counts hits (and their arrival times) for tests;
//!   [`Routes`] lets a caller add routes of its own (the test kit's
//!   misbehaving `/fault/` routes).
//!
//! The demo site has three forums, one per case a crawler must handle:
//! `00001` (UTF-8, charset in the header), `00002` (GBK, charset only in
//! `<meta>`) and `00003` (GBK, charset in the header, links relative to
//! `<base href="/">`). GBK list pages link to the next page with a raw
//! Chinese query (`?order=最新`) that must be percent-encoded in GBK.

pub mod api;
pub mod chrome;
pub mod expected;
pub mod members;
pub mod news;
pub mod pages;
pub mod rendered;
pub mod server;
pub mod site;
pub mod threads;

pub use chrome::Chrome;
pub use news::{Article, News, ARTICLES_PER_FRONT_PAGE};
pub use pages::{escape, render, Page};
pub use server::{
    full, serve, Connection, DemoServer, Hits, InProgress, Reply, ResponseBody, Routes,
    ServeOptions,
};
pub use site::{
    demo_crawl_paths, demo_forum_tasks, demo_tasks, Charset, Comment, Forum, ForumTask, Inline,
    Paragraph, Post, PostId, Site, COMMENTS_PER_PAGE, POSTS_PER_LIST_PAGE,
};
