//! All integration tests, in one binary (as ripgrep does): the test kit
//! (`crates/testkit`) starts the real servers they need; each module covers one command or promise.

mod expect;
mod in_process;

mod alerts;
mod many_spiders;
mod metrics;
mod migration;

mod check;
mod check_agreement;
mod cluster;
mod control;
mod dashboard;
mod docs;
mod downloader;
mod dupefilter;
mod fingerprint_cli;
mod frontier;
mod frontier_contract;
mod idle;
mod json_api;
mod local;
mod news;
mod parse;
mod per_host;
mod pickup;
mod progress;
mod redis_cluster;
mod redis_hosts;
mod regression;
mod revisit;
mod sinks;
mod sources;
mod split;
mod terminal;
mod tools;
mod xpath;
