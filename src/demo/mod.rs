//! The bundled demo forum, with a small news section: a deterministic site
//! model, its HTML pages and a loopback HTTP server, used by the README
//! quick start, the integration tests (crawl it, compare the items with the
//! set computed from the model) and the benchmarks (a generated large site).
//!
//! - [`site`]: the data ([`Site::demo`], [`Site::generate`]) and the demo
//!   crawl's start tasks ([`demo_tasks`]).
//! - [`pages`]: [`render`], a pure function from request target to page, so
//!   tests and benchmarks need no server.
//! - [`news`]: the news section under `/news/` ([`News::demo`], fifteen
//!   articles; a front of three pages, article and tag pages), the site
//!   `spiders/news.toml` crawls from plain start URLs.
//! - [`server`]: [`serve`] on a caller's listener, and [`DemoServer`], which
//!   binds 127.0.0.1:0 and counts hits (and their arrival times) for tests.
//! - [`faults`]: misbehaving routes under `/fault/` (error statuses, 429
//!   and Retry-After, delays, hangs, redirect chains and loops, huge,
//!   endless and trickling bodies, gzip, link pages) and the configurable
//!   `/robots.txt` ([`Robots`]), for the downloader's tests. Its module doc
//!   has the route table.
//!
//! The demo site has three forums, one per case a crawler must handle:
//! `00001` (UTF-8, charset in the header), `00002` (GBK, charset only in
//! `<meta>`) and `00003` (GBK, charset in the header, links relative to
//! `<base href="/">`). GBK list pages link to the next page with a raw
//! Chinese query (`?order=最新`) that must be percent-encoded in GBK.
//!
//! Nothing here is used by the crawler itself.

pub mod expected;
pub mod faults;
pub mod news;
pub mod pages;
pub mod server;
pub mod site;

pub use faults::Robots;
pub use news::{Article, News, ARTICLES_PER_FRONT_PAGE};
pub use pages::{render, Page};
pub use server::{serve, serve_counting, serve_with, DemoServer, Hits, ServeOptions};
pub use site::{
    demo_forum_tasks, demo_tasks, Charset, Comment, Forum, ForumTask, Inline, Paragraph, Post,
    PostId, Site, COMMENTS_PER_PAGE, POSTS_PER_LIST_PAGE,
};
