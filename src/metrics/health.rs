//! Whether the worker is healthy, for `/healthz`: each running spider
//! reached its Redis recently. A worker whose Redis is gone stays up and
//! retries, answering every scrape; a container's health check and a
//! Kubernetes liveness probe must still see that it does no work.
//!
//! A spider is watched from the moment its heartbeat task starts until
//! that task ends ([`RedisWatch`] is dropped), so a stopped spider is not
//! held against the worker.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The spiders' last contact with Redis; cheap to share.
#[derive(Debug, Clone, Default)]
pub struct Health(Arc<Mutex<HashMap<String, Contact>>>);

#[derive(Debug, Clone, Copy)]
struct Contact {
    /// When the spider last reached Redis (or began, before it first did).
    last: Instant,
    /// How long without Redis makes the worker unhealthy: as long as the
    /// cluster waits for a heartbeat before it counts a worker gone.
    limit: Duration,
}

impl Health {
    /// Starts watching `spider`, unhealthy once `limit` passes without a
    /// [`RedisWatch::reached`]; forgotten when the returned watch drops.
    pub fn watch(&self, spider: &str, limit: Duration) -> RedisWatch {
        let contact = Contact {
            last: Instant::now(),
            limit,
        };
        self.spiders().insert(spider.to_string(), contact);
        RedisWatch {
            health: self.clone(),
            spider: spider.to_string(),
        }
    }

    /// Why the worker is unhealthy (each spider that has not reached
    /// Redis within its limit), or `None` when it is healthy.
    pub fn problem(&self) -> Option<String> {
        let now = Instant::now();
        let mut late: Vec<String> = self
            .spiders()
            .iter()
            .filter_map(|(spider, c)| {
                let since = now.saturating_duration_since(c.last);
                (since > c.limit).then(|| {
                    format!(
                        "spider `{spider}` has not reached Redis for {} s (unhealthy after {} s)",
                        since.as_secs(),
                        c.limit.as_secs_f64()
                    )
                })
            })
            .collect();
        late.sort();
        (!late.is_empty()).then(|| late.join("\n"))
    }

    fn spiders(&self) -> std::sync::MutexGuard<'_, HashMap<String, Contact>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One spider's watch; the spider is forgotten when it drops.
#[derive(Debug)]
pub struct RedisWatch {
    health: Health,
    spider: String,
}

impl RedisWatch {
    /// The spider has just reached Redis.
    pub fn reached(&self) {
        if let Some(c) = self.health.spiders().get_mut(&self.spider) {
            c.last = Instant::now();
        }
    }
}

impl Drop for RedisWatch {
    fn drop(&mut self) {
        self.health.spiders().remove(&self.spider);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spider_is_late_after_its_limit_and_forgotten_when_its_watch_drops() {
        let health = Health::default();
        let watch = health.watch("bbs", Duration::from_millis(20));
        assert_eq!(health.problem(), None);
        std::thread::sleep(Duration::from_millis(40));
        let problem = health.problem().expect("late after its limit");
        assert!(
            problem.contains("spider `bbs` has not reached Redis"),
            "{problem}"
        );
        watch.reached();
        assert_eq!(health.problem(), None);
        std::thread::sleep(Duration::from_millis(40));
        assert!(health.problem().is_some());
        drop(watch);
        assert_eq!(health.problem(), None);
    }
}
