//! Test support for crawlworker's tests and benchmarks: the real servers
//! they run against and the processes they start. Nothing here is mocked.
//!
//! - [`redis`]: [`RedisServer`], a real `redis-server` on a free loopback
//!   port with its own directory, stopped (and its directory removed) when
//!   dropped; a machine without `redis-server` fails loudly.
//! - [`postgres`]: [`PostgresServer`], a real PostgreSQL server (Debian's
//!   packaged binaries) on a free loopback port in a temporary directory,
//!   run as `nobody` when the tests run as root; it can be stopped and
//!   started again on the same data.
//! - [`redis_cluster`]: [`RedisCluster`], a real 3-master, 3-replica Redis
//!   Cluster on loopback ports that can fail a master over (gracefully, or
//!   by SIGKILL).
//! - [`guard`]: [`KillOnDrop`], a child process killed (SIGKILL) and
//!   reaped when dropped, so a failing test leaves no process behind.
//! - [`fixture`]: [`FixtureServer`], the demo site on 127.0.0.1:0 with the
//!   misbehaving routes of [`faults`] and a configurable `/robots.txt`.
//! - [`process`]: the `crawlworker` binary: one-shot commands and
//!   [`Worker`] processes (for the tests where SIGKILL or SIGTERM is the
//!   point), each logging to a file.
//! - [`podman`]: the worker image (`localhost/crawlworker:latest`), run
//!   with podman on the host's network: one-shot commands and
//!   [`podman::Container`]s, removed when dropped.
//! - [`crawl`]: [`DemoCrawl`], Redis, the demo forum, a spider pointed at
//!   it and its tasks pushed: where most crawl tests start.
//! - [`files`]: the repository root, copies of the shipped spiders pointed
//!   at a fixture server, and temporary directories that remove themselves.
//! - [`terminal`]: a command in a tmux pseudo-terminal, to test what a
//!   person sees.
//! - [`wait`]: poll-until-true with a deadline, instead of sleep-then-assert.

pub mod crawl;
pub mod faults;
pub mod files;
pub mod fixture;
pub mod guard;
pub mod podman;
pub mod postgres;
pub mod process;
pub mod readings;
pub mod redis;
pub mod redis_cluster;
pub mod terminal;
pub mod wait;

pub use crawl::DemoCrawl;
pub use faults::{Robots, DOWNLOADS};
pub use files::{
    fault_spider, files, items_to_stream, loopback_host, proxied_spider, root, spider_for, temp_dir,
};
pub use fixture::{assert_paced, peak, FixtureServer};
pub use guard::KillOnDrop;
pub use postgres::PostgresServer;
pub use process::{
    benchmarking, binary, crawlworker, crawlworker_with_redis, push_urls, stderr, stdout, Worker,
};
pub use redis::RedisServer;
pub use redis_cluster::RedisCluster;
pub use tempfile::TempDir;
pub use terminal::Terminal;
pub use wait::{eventually, eventually_async};
