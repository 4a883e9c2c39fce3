//! crawlworker: a crawler worker whose spiders are TOML files and whose
//! frontier lives in Redis, so that any number of identical processes form
//! one crawl cluster (a scrapy-redis replacement).
//!
//! # Layout, in data-flow order
//!
//! - [`cli`]: the command line, parsed and turned into a run configuration.
//! - [`config`]: the worker configuration file (`config/crawlworker.toml`).
//! - [`settings`]: every worker default in one place, and the layering
//!   built-in < `config/` < spider `[settings]` < environment < command line.
//! - [`spider`]: the spider file as written (`SpiderFile`, with source spans)
//!   and as compiled and validated (`Spider`).
//! - [`request`]: the request that travels between stages (JSON on the wire).
//! - [`frontier`]: the shared crawl in Redis: start entries, the request
//!   queue with leases, the dupefilter, items and stats, each change one
//!   atomic script.
//! - [`fetch`]: the HTTP download of one request.
//! - [`extract`]: pure page-in, items-and-links-out extraction, including
//!   charset decoding.
//! - [`worker`]: the loop that leases, downloads, extracts and commits,
//!   per spider, with shutdown and Redis-outage handling.

pub mod backoff;
pub mod cli;
pub mod config;
pub mod downloader;
pub mod extract;
pub mod frontier;
pub mod reader;
pub mod request;
pub mod settings;
pub mod spider;
pub mod stats;
pub mod worker;
