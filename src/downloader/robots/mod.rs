//! robots.txt for the whole cluster: each host's file is fetched once per
//! `robotstxt_ttl` by one worker (a short Redis lock decides which), cached
//! in Redis for everyone, and kept in each worker's memory until it
//! expires. A failed fetch (5xx, network) disallows the host and is retried
//! after a minute; its Crawl-delay, when larger than the spider's delay,
//! paces the host for the whole cluster. The policy itself (matching,
//! semantics) is [`policy`]; the record cached in Redis is the frontier's
//! [`RobotsRecord`].

pub mod policy;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::client::HttpClient;
use crate::frontier::{now_secs, Frontier, RobotsRecord};
use crate::request::Request;
use crate::settings::Settings;
use policy::{Fetched, Robots};

/// How long a failed robots.txt fetch disallows the host before the next try.
const FAILURE_TTL: Duration = Duration::from_secs(60);
/// How long one worker may hold the right to fetch a host's robots.txt.
const LOCK_TTL: Duration = Duration::from_secs(20);
/// How long a worker waits for another one's fetch before fetching itself.
const WAIT_FOR_OTHERS: Duration = Duration::from_secs(10);
/// robots.txt redirects followed (Google follows five).
const MAX_REDIRECTS: usize = 5;

/// May the request go out?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Yes, no sooner than the host's Crawl-delay after the previous one.
    Allowed {
        crawl_delay: Duration,
    },
    Forbidden,
}

/// The policy a fetch's record gives.
fn fetched(record: &RobotsRecord) -> Fetched {
    match record.status {
        Some(status) => Fetched::Status {
            status,
            body: record.body.as_bytes().to_vec(),
        },
        None => Fetched::NetworkError,
    }
}

/// One worker's view of the cluster's robots.txt files.
pub struct RobotsGate {
    frontier: Frontier,
    client: HttpClient,
    settings: Arc<Settings>,
    /// host -> (policy, when it expires here).
    local: Mutex<HashMap<String, (Arc<Robots>, Instant)>>,
    /// One fetch at a time per host in this worker.
    fetching: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl RobotsGate {
    pub fn new(frontier: Frontier, client: HttpClient, settings: Arc<Settings>) -> RobotsGate {
        RobotsGate {
            frontier,
            client,
            settings,
            local: Mutex::new(HashMap::new()),
            fetching: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `request` may be fetched.
    pub async fn check(&self, request: &Request) -> Verdict {
        let allowed = Verdict::Allowed {
            crawl_delay: Duration::ZERO,
        };
        let Ok(url) = url::Url::parse(&request.url) else {
            return allowed;
        };
        if url.path() == "/robots.txt" {
            return allowed;
        }
        let robots = self.policy(&url, &request.host_key()).await;
        let ua = &self.settings.user_agent;
        if robots.allows(ua, &request.url) {
            Verdict::Allowed {
                crawl_delay: robots.crawl_delay(ua).unwrap_or_default(),
            }
        } else {
            Verdict::Forbidden
        }
    }

    fn cached_here(&self, host: &str) -> Option<Arc<Robots>> {
        let local = self.local.lock().ok()?;
        let (robots, expires) = local.get(host)?;
        (Instant::now() < *expires).then(|| robots.clone())
    }

    fn keep_here(&self, host: &str, robots: Arc<Robots>, record: &RobotsRecord) -> Arc<Robots> {
        let ttl = if robots.is_failure() {
            FAILURE_TTL
        } else {
            self.settings.robotstxt_ttl
        };
        let age = Duration::from_secs_f64((now_secs() - record.fetched_at).max(0.0));
        let expires = Instant::now() + ttl.saturating_sub(age);
        if let Ok(mut local) = self.local.lock() {
            local.insert(host.to_string(), (robots.clone(), expires));
        }
        robots
    }

    async fn policy(&self, url: &url::Url, host: &str) -> Arc<Robots> {
        if let Some(r) = self.cached_here(host) {
            return r;
        }
        let gate = {
            let mut f = match self.fetching.lock() {
                Ok(f) => f,
                Err(p) => p.into_inner(),
            };
            f.entry(host.to_string()).or_default().clone()
        };
        let _one_at_a_time = gate.lock().await;
        if let Some(r) = self.cached_here(host) {
            return r;
        }
        let started = Instant::now();
        loop {
            if let Some(record) = self.cached_in_redis(host).await {
                let robots = Arc::new(Robots::from_fetch(&fetched(&record)));
                return self.keep_here(host, robots, &record);
            }
            let mine = self
                .frontier
                .robots_lock(host, LOCK_TTL)
                .await
                .unwrap_or(true);
            if mine || started.elapsed() > WAIT_FOR_OTHERS {
                let record = self.download(url).await;
                let robots = Arc::new(Robots::from_fetch(&fetched(&record)));
                let delay = robots
                    .crawl_delay(&self.settings.user_agent)
                    .unwrap_or_default();
                if let Err(e) = self.frontier.robots_store(host, &record, delay).await {
                    tracing::warn!(%host, error = %e, "cannot cache robots.txt in Redis; other workers will fetch it too");
                }
                return self.keep_here(host, robots, &record);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The cached record, if it is still fresh.
    async fn cached_in_redis(&self, host: &str) -> Option<RobotsRecord> {
        let record = self.frontier.robots_cached(host).await.ok()??;
        let ttl = if record.status.is_none_or(|s| s >= 500) {
            FAILURE_TTL
        } else {
            self.settings.robotstxt_ttl
        };
        (now_secs() - record.fetched_at < ttl.as_secs_f64()).then_some(record)
    }

    /// Fetches `<origin>/robots.txt`, following a few redirects.
    async fn download(&self, url: &url::Url) -> RobotsRecord {
        let mut target = match url.join("/robots.txt") {
            Ok(u) => u.to_string(),
            Err(_) => {
                return RobotsRecord {
                    status: None,
                    body: String::new(),
                    fetched_at: now_secs(),
                }
            }
        };
        for _ in 0..=MAX_REDIRECTS {
            match self.client.fetch(&Request::get(&target)).await {
                Ok(r) if (300..400).contains(&r.status) => {
                    let location = r
                        .headers
                        .iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case("location"))
                        .map(|(_, v)| v.clone());
                    match location.and_then(|l| url::Url::parse(&r.url).ok()?.join(&l).ok()) {
                        Some(next) => target = next.to_string(),
                        None => {
                            return RobotsRecord {
                                status: Some(r.status),
                                body: String::new(),
                                fetched_at: now_secs(),
                            }
                        }
                    }
                }
                Ok(r) => {
                    tracing::debug!(url = %target, status = r.status, "robots.txt fetched");
                    return RobotsRecord {
                        status: Some(r.status),
                        body: String::from_utf8_lossy(&r.body).into_owned(),
                        fetched_at: now_secs(),
                    };
                }
                Err(e) => {
                    tracing::warn!(url = %target, error = %e, "robots.txt fetch failed; the host is disallowed until a retry in {FAILURE_TTL:?}");
                    return RobotsRecord {
                        status: None,
                        body: String::new(),
                        fetched_at: now_secs(),
                    };
                }
            }
        }
        // Too many redirects: treated like a missing file.
        RobotsRecord {
            status: Some(404),
            body: String::new(),
            fetched_at: now_secs(),
        }
    }
}
