//! `crawlworker export`: a spider's items from Redis into a team's own
//! store, each exactly once: [`schema`] maps item types to tables,
//! [`sinks`] writes them (PostgreSQL, SQLite, JSON Lines and CSV files, a
//! command), and [`consumer`] is the loop that takes items from Redis,
//! writes them and acknowledges them once the store has committed them;
//! [`stale`] removes the temporary files killed exporters leave, and
//! [`watch`] reads the backlog for `stats` and the metrics.
//! The Redis side of it (keys and scripts) is the frontier's
//! (`crate::frontier::redis::export`).

pub mod consumer;
pub mod schema;
pub mod sinks;
pub mod stale;
pub mod watch;

pub use consumer::{ExportError, Exporter, Options, Stopped, Tally};
pub use schema::Schema;
pub use sinks::{Sink, SinkError, SinkOptions, Store};
pub use watch::{backlog, Gauges};

/// The stream's consumer group when `--group` names none.
pub const DEFAULT_GROUP: &str = "crawlworker-export";
