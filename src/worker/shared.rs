//! What the spiders of one worker process share: its id, its download
//! slots ([`Pool`]), its metrics, and its Redis connections. Spiders on the
//! same Redis address share one [`RedisTarget`], so a worker running
//! hundreds of spiders holds one command connection and one wake-up
//! subscription per Redis, not two connections per spider.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::pool::Pool;
use crate::frontier::redis_url::RedisUrl;
use crate::frontier::RedisTarget;
use crate::metrics::Metrics;

#[derive(Clone)]
pub struct Shared {
    /// This worker's id, as `stats` shows it.
    pub worker: String,
    pub pool: Arc<Pool>,
    pub metrics: Option<Metrics>,
    /// By Redis address.
    redis: Arc<Mutex<HashMap<String, RedisTarget>>>,
}

impl Shared {
    pub fn new(worker: String, slots: usize, metrics: Option<Metrics>) -> Shared {
        Shared {
            worker,
            pool: Pool::new(slots),
            metrics,
            redis: Arc::default(),
        }
    }

    /// The same, with a memory budget of `bytes` for the response bodies
    /// of all its spiders' downloads (`download_memory_budget`; 0: none).
    pub fn with_memory_budget(mut self, bytes: u64) -> Shared {
        self.pool = Pool::with_budget(self.pool.total(), bytes);
        self
    }

    /// The Redis at `url`, shared with this worker's other spiders there.
    pub fn redis(&self, url: &RedisUrl) -> redis::RedisResult<RedisTarget> {
        let mut known = self
            .redis
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(target) = known.get(url.as_str()) {
            return Ok(target.clone());
        }
        let target = RedisTarget::open(url)?;
        known.insert(url.as_str().to_string(), target.clone());
        Ok(target)
    }
}
