//! The frontier: the crawl a spider shares, behind one contract.
//!
//! [`Backend`] (in [`contract`]) states every promise a spider's run relies
//! on; [`Frontier`] is the handle the worker holds. Two backends keep the
//! contract:
//!
//! - [`redis`]: the cluster's frontier, and the only module that knows
//!   Redis key names and scripts. Every state change is one script, so it
//!   happens whole or not at all: a start entry leaves its key only in the
//!   step that queues its request, a lease is committed only while it is
//!   the worker's (items are pushed exactly once however workers die), an
//!   expired lease returns to the queue.
//! - [`local`]: a local crawl's (`run --local`), in memory, step for step
//!   the same; where it differs on purpose is listed in [`contract`].
//!
//! Beside them, shared by both: the values that cross the contract
//! ([`types`]), the per-host politeness rule ([`politeness`]: slot spacing,
//! jitter, adaptive back-off; [`parking`]: a paced host's backlog waits out
//! of the queue's way), key names ([`keys`]), the JSON records
//! ([`records`]), the dupefilter's modes ([`dupefilter`]), which spiders
//! hand work to which ([`pipeline`]), which shard of a sharded spider a
//! request belongs to and its keys ([`shards`], being built), the one error
//! ([`FrontierError`]) and how callers ride out a Redis outage
//! ([`outage`]), and the signal that a worker holding over its fair share
//! hands back what it cannot start ([`HandBack`]).

pub mod contract;
pub mod dupefilter;
mod error;
mod fairness;
mod hand_back;
pub mod keys;
pub mod local;
pub mod outage;
pub mod parking;
pub mod patience;
pub mod pipeline;
pub mod politeness;
pub mod records;
pub mod redis;
pub mod session;
pub mod shards;
pub mod types;

use std::sync::Arc;

pub use self::redis::sharded::ShardedFrontier;
pub use self::redis::{admin, connection, hosts, pickup, takeover, url as redis_url, wake};
pub use self::redis::{Conn, RedisFrontier, RedisTarget};
pub use contract::Backend;
pub use dupefilter::{bloom_chain, bloom_plan, BloomPlan, Dupefilter};
pub use error::FrontierError;
pub use hand_back::HandBack;
pub use keys::{ItemSink, KeyGroup, KeyKind, KeyMode, Keys, StartKind};
pub use local::LocalFrontier;
pub use patience::Patience;
pub use records::{
    now_secs, DeadLetter, ExportDeadLetter, ExporterLease, FailedRecord, Heartbeat, RobotsError,
    RobotsRecord,
};
pub use session::{SessionLock, SessionLogin, SessionRecord};
pub use types::*;

use error::Result;

/// One spider's frontier, as the worker holds it: either backend (see
/// [`Backend`] for what it promises). Cloning it is cheap.
#[derive(Clone)]
pub struct Frontier(Arc<dyn Backend>);

impl std::ops::Deref for Frontier {
    type Target = dyn Backend;

    fn deref(&self) -> &Self::Target {
        self.0.as_ref()
    }
}

impl From<RedisFrontier> for Frontier {
    fn from(f: RedisFrontier) -> Frontier {
        Frontier(Arc::new(f))
    }
}

impl From<ShardedFrontier> for Frontier {
    fn from(f: ShardedFrontier) -> Frontier {
        Frontier(Arc::new(f))
    }
}

impl From<LocalFrontier> for Frontier {
    fn from(f: LocalFrontier) -> Frontier {
        Frontier(Arc::new(f))
    }
}
