//! crawlworker: a crawler worker whose spiders are TOML files and whose
//! frontier lives in Redis, so that any number of identical processes form
//! one crawl cluster (a scrapy-redis replacement).
//! Its own words (lease, news, hand back, slot, …) are defined in `docs/glossary.md`.
//!
//! # Layout, in data-flow order
//!
//! - [`cli`]: the command line, parsed and turned into a run; its
//!   [`cli::InvalidInput`] is what a person must fix (exit code 2).
//! - [`config`] and [`settings`]: the worker configuration file and every
//!   setting, defined once, layered built-in < `config/` < spider
//!   `[settings]` < environment < command line, checked as it is built.
//!   [`reader`] is the tolerant TOML reader both share with spider files.
//! - [`spider`]: the spider file as written (`SpiderFile`, with source
//!   spans) and as compiled and validated (`Spider`, with its Redis keys).
//! - [`request`]: the request that travels between stages (JSON on the
//!   wire); its fingerprint is scrapy-redis's (the `scrapy-url` crate).
//! - [`frontier`]: the crawl a spider shares, behind one contract
//!   ([`frontier::Backend`]) kept by two backends: Redis (the cluster's,
//!   the only code that names keys and runs scripts; each change one
//!   atomic script) and a local crawl's, in memory. Start entries, the
//!   request queue with leases, the dupefilter, items, stats, records and
//!   the per-host politeness rule ([`frontier::politeness`]).
//! - [`downloader`]: from a leased request to a response (politeness,
//!   robots.txt, the HTTP client, redirects, retries, and for rules with
//!   `render` the page rendered in headless Chromium).
//! - [`extract`]: pure page-in, items-and-links-out extraction, including
//!   charset decoding.
//! - back to [`frontier`] for the page's commit; [`worker`] runs that loop
//!   per spider, with shutdown and Redis-outage handling.
//! - after the crawl: [`export`] moves a spider's items from Redis into a
//!   team's own store (PostgreSQL, SQLite, files, a command), each once.
//! - [`scrapy_redis`]: the requests a scrapy-redis crawl queued (pickles),
//!   read as plain data and mapped to requests (`import-queue`).
//! - beside them: [`stats`], every stat name, [`retry_schedule`], the one
//!   retry schedule, [`wording`], how counts read in messages, and
//!   [`redact`], the session ids masked in every log line.
//! - seeing a crawl from outside: [`metrics`] (Prometheus, served on
//!   `--metrics-addr`), [`dashboard`] (a live web page read from Redis),
//!   both served by [`web`]; [`version`] names the build.
//!
//! The demo site (`crates/demo`), the test kit (`crates/testkit`) and the
//! URL library (`crates/scrapy-url`) are crates of their own.

pub mod cli;
pub mod config;
pub mod dashboard;
pub mod downloader;
pub mod export;
pub mod extract;
pub mod frontier;
pub mod metrics;
pub mod reader;
pub mod redact;
pub mod request;
pub mod retry_schedule;
pub mod scrapy_redis;
pub mod settings;
pub mod spider;
pub mod stats;
pub mod version;
pub mod web;
pub mod wording;
pub mod worker;
