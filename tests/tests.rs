//! The integration tests, in one binary (as ripgrep does), but for the
//! rendering tests (`tests/rendering/main.rs`, run apart): the test kit
//! (`crates/testkit`) starts the real servers they need; each module covers
//! one command or behaviour and is named after it, and `regression` holds
//! short reproductions of pinned bugs that belong to no such module.

mod expect;
mod export;
mod heartbeats;
mod in_process;

mod alerts;
mod many_spiders;
mod metrics;
mod migration;

mod check;
mod check_agreement;
mod cluster;
mod code_layout;
mod containers;
mod control;
mod dashboard;
mod docs;
mod downloader;
mod dupefilter;
mod engine_dates;
mod failures;
mod fair_leasing;
mod files_and_binary_bodies;
mod fingerprint_cli;
mod frontier;
mod frontier_contract;
mod hostile_pages;
mod idle;
mod item_types;
mod json_api;
mod kubernetes;
mod link_rewrites;
mod local;
mod login_hosts;
mod many_links;
mod memory;
mod news;
mod page_cache;
mod parse;
mod per_host;
mod pickup;
mod poison_pages;
mod progress;
mod redis_cluster;
mod redis_hosts;
mod regression;
mod resting_account;
mod revisit;
mod robots;
mod scripts;
mod sessions;
mod shard_handoff;
mod shard_pipeline;
mod shards;
mod sinks;
mod slow_hosts;
mod sources;
mod spider_keys;
mod split;
mod split_drain;
mod start_entries;
mod structured_fields;
mod takeover;
mod terminal;
mod tools;
mod unconverted_values;
mod unreadable_entries;
mod web_limits;
mod wrong_type_keys;
mod xpath;
