//! robots.txt for the whole cluster: each host's file is fetched once per
//! `robotstxt_ttl` by one worker (a short Redis lock decides which), cached
//! in Redis for everyone, and kept in each worker's memory until it
//! expires. Its Crawl-delay, when larger than the spider's delay, paces the
//! host for the whole cluster. The policy itself (matching, semantics) is
//! [`policy`]; the record cached in Redis is the frontier's
//! [`RobotsRecord`].
//!
//! A fetch that failed for now (5xx, 429, timeout, a network or proxy
//! error) forbids nothing: it makes the host's requests wait
//! ([`Verdict::Unavailable`]; the downloader puts them back in Redis like
//! retries, see `retry::robots_unavailable`), and it is cached only
//! `robotstxt_failure_ttl`, so that robots.txt is fetched again, once for
//! the cluster, when they come due. A fetch refused for good (the
//! private-network guard) makes them fail at once, with its reason.
//!
//! What a worker keeps is bounded whatever the crawl: the policies in
//! memory are a cache of at most [`LOCAL_CACHE_BYTES`] (estimated), least
//! recently used first out, and an entry past its TTL goes when next asked
//! for; a host whose policy was evicted is read again from Redis (or
//! fetched again), which is what its expiry would have done anyway. The
//! per-host fetch locks exist only while a task waits for or holds one.

pub mod policy;

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::client::FetchError;
use super::client::HttpClient;
use super::in_use::InUse;
use super::retry::Failure;
use crate::frontier::{now_secs, Frontier, RobotsError, RobotsRecord};
use crate::request::Request;
use crate::settings::Settings;
use policy::{Fetched, Robots};

/// How long one worker may hold the right to fetch a host's robots.txt.
const LOCK_TTL: Duration = Duration::from_secs(20);
/// How long a worker waits for another one's fetch before fetching itself.
const WAIT_FOR_OTHERS: Duration = Duration::from_secs(10);
/// robots.txt redirects followed (Google follows five).
const MAX_REDIRECTS: usize = 5;
/// The most memory (estimated, see [`Robots::approx_bytes`]) the policies
/// cached in one spider's worker may take: thousands of typical files
/// (a few KiB each), or 16 of the largest ones `robotxt` reads (500 KiB).
pub const LOCAL_CACHE_BYTES: u64 = 32 * 1024 * 1024;
/// Cache shards: few, so that one shard (an even part of the budget) can
/// still hold the largest file.
const LOCAL_CACHE_SHARDS: usize = 4;

/// What this worker knows of a host's robots.txt.
#[derive(Clone)]
struct Cached {
    robots: Arc<Robots>,
    /// Why the fetch failed, when it did (the policy then disallows all).
    failure: Option<Arc<Failure>>,
    /// When it expires in this worker.
    expires: Instant,
}

/// Weighs a cached policy by the memory it takes (estimated).
#[derive(Debug, Clone, Copy)]
struct ByBytes;

impl quick_cache::Weighter<String, Cached> for ByBytes {
    fn weight(&self, host: &String, cached: &Cached) -> u64 {
        let failure = cached.failure.as_ref().map_or(0, |f| f.reason.len());
        (host.len() + cached.robots.approx_bytes() + failure) as u64
    }
}

/// May the request go out?
#[derive(Debug, Clone)]
pub enum Verdict {
    /// Yes, no sooner than the host's Crawl-delay after the previous one.
    Allowed {
        crawl_delay: Duration,
    },
    Forbidden,
    /// robots.txt could not be fetched: the request waits (or, if the
    /// failure is not one that can heal, fails).
    Unavailable {
        /// What the fetch gave, as a download failure of the request.
        failure: Failure,
        /// When robots.txt will be fetched again: the request should not
        /// come back sooner.
        again_in: Duration,
    },
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

/// Why a failed fetch (see [`Robots::is_failure`]) failed, as the failure
/// of the requests that waited for it: retryable unless the fetch was
/// refused for good.
fn failure(host: &str, record: &RobotsRecord) -> Failure {
    let (reason, kind, retryable) = match (&record.error, record.status) {
        (Some(e), _) => (e.reason.clone(), e.kind.clone(), e.retryable),
        (None, Some(status)) => (
            format!("robots.txt of {host} answered HTTP {status}"),
            UNAVAILABLE_KIND.to_string(),
            true,
        ),
        // A record of an older version.
        (None, None) => (
            format!("robots.txt of {host} could not be fetched"),
            UNAVAILABLE_KIND.to_string(),
            true,
        ),
    };
    Failure {
        reason: format!("robots.txt could not be fetched: {reason}"),
        // A refusal keeps its own kind, as when the page itself is refused.
        kind: if retryable {
            UNAVAILABLE_KIND.to_string()
        } else {
            kind
        },
        status: record.status,
        retry_after: None,
        retryable,
    }
}

/// The kind of failure (`retry/reason_count/<kind>`, the failed record's
/// `kind`) of a request that waited for its host's robots.txt.
pub const UNAVAILABLE_KIND: &str = "robotstxt_unavailable";

/// The record of a fetch that got no HTTP answer.
fn error_record(e: &FetchError) -> RobotsRecord {
    RobotsRecord {
        status: None,
        body: String::new(),
        fetched_at: now_secs(),
        error: Some(RobotsError {
            reason: e.to_string(),
            kind: e.kind().to_string(),
            retryable: e.is_retryable(),
        }),
    }
}

/// One worker's view of the cluster's robots.txt files.
pub struct RobotsGate {
    frontier: Frontier,
    client: HttpClient,
    settings: Arc<Settings>,
    /// host -> (policy, when it expires here), at most
    /// [`LOCAL_CACHE_BYTES`] of them.
    local: quick_cache::sync::Cache<String, Cached, ByBytes>,
    /// One fetch at a time per host in this worker (an entry while a task
    /// fetches or waits for the host's policy).
    fetching: InUse<tokio::sync::Mutex<()>>,
}

impl RobotsGate {
    pub fn new(frontier: Frontier, client: HttpClient, settings: Arc<Settings>) -> RobotsGate {
        RobotsGate {
            frontier,
            client,
            settings,
            local: local_cache(LOCAL_CACHE_BYTES),
            fetching: InUse::default(),
        }
    }

    /// Policies cached in this worker, and fetch locks in use: for tests
    /// and diagnostics.
    pub fn hosts_cached(&self) -> (usize, usize) {
        (self.local.len(), self.fetching.len())
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
        let cached = self.policy(&url, &request.host_key()).await;
        if let Some(failure) = &cached.failure {
            return Verdict::Unavailable {
                failure: Failure::clone(failure),
                again_in: cached.expires.saturating_duration_since(Instant::now()),
            };
        }
        let robots = cached.robots;
        let ua = &self.settings.user_agent;
        if robots.allows(ua, &request.url) {
            Verdict::Allowed {
                crawl_delay: robots.crawl_delay(ua).unwrap_or_default(),
            }
        } else {
            Verdict::Forbidden
        }
    }

    fn cached_here(&self, host: &str) -> Option<Cached> {
        let cached = self.local.get(host)?;
        if Instant::now() < cached.expires {
            return Some(cached);
        }
        self.local.remove_if(host, |c| c.expires == cached.expires);
        None
    }

    /// How long a record is used after its fetch: a failure (429, 5xx, any
    /// other status outside 2xx–4xx, no answer) for
    /// `robotstxt_failure_ttl`, a file for `robotstxt_ttl`.
    fn ttl(&self, record: &RobotsRecord) -> Duration {
        if record
            .status
            .is_none_or(|s| s == 429 || !(200..500).contains(&s))
        {
            self.settings.robotstxt_failure_ttl
        } else {
            self.settings.robotstxt_ttl
        }
    }

    fn keep_here(&self, host: &str, record: &RobotsRecord) -> Cached {
        let robots = Arc::new(Robots::from_fetch(&fetched(record)));
        let ttl = if robots.is_failure() {
            self.settings.robotstxt_failure_ttl
        } else {
            self.settings.robotstxt_ttl
        };
        let age = Duration::from_secs_f64((now_secs() - record.fetched_at).max(0.0));
        let cached = Cached {
            failure: robots.is_failure().then(|| Arc::new(failure(host, record))),
            robots,
            expires: Instant::now() + ttl.saturating_sub(age),
        };
        self.local.insert(host.to_string(), cached.clone());
        cached
    }

    async fn policy(&self, url: &url::Url, host: &str) -> Cached {
        if let Some(r) = self.cached_here(host) {
            return r;
        }
        let gate = self.fetching.hold(host, tokio::sync::Mutex::default);
        let _one_at_a_time = gate.lock().await;
        if let Some(r) = self.cached_here(host) {
            return r;
        }
        let started = Instant::now();
        loop {
            if let Some(record) = self.cached_in_redis(host).await {
                return self.keep_here(host, &record);
            }
            let mine = self
                .frontier
                .robots_lock(host, LOCK_TTL)
                .await
                .unwrap_or(true);
            if mine || started.elapsed() > WAIT_FOR_OTHERS {
                let record = self.download(url).await;
                let cached = self.keep_here(host, &record);
                let delay = cached
                    .robots
                    .crawl_delay(&self.settings.user_agent)
                    .unwrap_or_default();
                let ttl = self.ttl(&record);
                if let Some(f) = &cached.failure {
                    if f.retryable {
                        tracing::warn!(%host, reason = %f.reason, "the host's requests wait; robots.txt is fetched again in {}", crate::wording::duration(ttl));
                    } else {
                        let kept = if self.frontier.is_shared() {
                            "recorded in the failed key"
                        } else {
                            "listed when the local crawl ends"
                        };
                        tracing::warn!(%host, reason = %f.reason, "the host's requests fail ({kept})");
                    }
                }
                if let Err(e) = self.frontier.robots_store(host, &record, delay, ttl).await {
                    tracing::warn!(%host, error = %e, "cannot cache robots.txt in Redis; other workers will fetch it too");
                }
                return cached;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The cached record, if it is still fresh.
    async fn cached_in_redis(&self, host: &str) -> Option<RobotsRecord> {
        let record = self.frontier.robots_cached(host).await.ok()??;
        let ttl = self.ttl(&record);
        (now_secs() - record.fetched_at < ttl.as_secs_f64()).then_some(record)
    }

    /// Fetches `<origin>/robots.txt`, following a few redirects.
    async fn download(&self, url: &url::Url) -> RobotsRecord {
        let mut target = match url.join("/robots.txt") {
            Ok(u) => u.to_string(),
            Err(e) => {
                return error_record(&FetchError::InvalidUrl {
                    url: url.to_string(),
                    problem: e.to_string(),
                })
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
                                error: None,
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
                        error: None,
                    };
                }
                Err(e) => return error_record(&e),
            }
        }
        // Too many redirects: treated like a missing file.
        RobotsRecord {
            status: Some(404),
            body: String::new(),
            fetched_at: now_secs(),
            error: None,
        }
    }
}

/// A cache of policies weighing at most `bytes` (estimated).
fn local_cache(bytes: u64) -> quick_cache::sync::Cache<String, Cached, ByBytes> {
    let options = quick_cache::OptionsBuilder::new()
        // A guess for the index's first allocation: small files.
        .estimated_items_capacity(usize::try_from(bytes / 4096).unwrap_or(1024))
        .weight_capacity(bytes)
        .shards(LOCAL_CACHE_SHARDS)
        .build();
    match options {
        Ok(options) => quick_cache::sync::Cache::with_options(
            options,
            ByBytes,
            Default::default(),
            Default::default(),
        ),
        // Every field is set above, so this is not reached; an item count
        // bound is the safe fallback.
        Err(_) => quick_cache::sync::Cache::with_weighter(1024, bytes, ByBytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached(robots: Arc<Robots>, expires: Instant) -> Cached {
        Cached {
            robots,
            failure: None,
            expires,
        }
    }

    fn policy(body: &str) -> Arc<Robots> {
        Arc::new(Robots::from_fetch(&Fetched::Status {
            status: 200,
            body: body.as_bytes().to_vec(),
        }))
    }

    fn record(status: Option<u16>, error: Option<RobotsError>) -> RobotsRecord {
        RobotsRecord {
            status,
            body: String::new(),
            fetched_at: 0.0,
            error,
        }
    }

    #[test]
    fn a_failed_fetch_names_robots_txt_and_its_error_and_only_a_refusal_is_final() {
        let f = failure("a.test", &record(Some(503), None));
        assert_eq!(
            f.reason,
            "robots.txt could not be fetched: robots.txt of a.test answered HTTP 503"
        );
        assert_eq!(
            (f.kind.as_str(), f.status, f.retryable),
            (UNAVAILABLE_KIND, Some(503), true)
        );

        let timeout = RobotsError {
            reason: "GET http://a.test/robots.txt timed out after 1s".into(),
            kind: "TimeoutError".into(),
            retryable: true,
        };
        let f = failure("a.test", &record(None, Some(timeout)));
        assert!(f.reason.ends_with("timed out after 1s"), "{}", f.reason);
        assert_eq!((f.kind.as_str(), f.retryable), (UNAVAILABLE_KIND, true));

        let refused = RobotsError {
            reason: "refused to fetch http://127.0.0.1/robots.txt: loopback".into(),
            kind: "ForbiddenAddress".into(),
            retryable: false,
        };
        let f = failure("127.0.0.1", &record(None, Some(refused)));
        assert_eq!((f.kind.as_str(), f.retryable), ("ForbiddenAddress", false));

        // A record written by an older version says less, and is retried.
        let f = failure("a.test", &record(None, None));
        assert!(f.retryable && f.reason.contains("a.test"), "{}", f.reason);
    }

    #[test]
    fn a_record_without_an_error_reads_as_before() {
        let old = r#"{"status":null,"body":"","fetched_at":1.5}"#;
        let r: RobotsRecord = serde_json::from_str(old).unwrap();
        assert_eq!(
            r,
            RobotsRecord {
                fetched_at: 1.5,
                ..record(None, None)
            }
        );
        let json = serde_json::to_string(&record(Some(200), None)).unwrap();
        assert!(!json.contains("error"), "{json}");
    }

    #[test]
    fn the_local_cache_stays_within_its_budget_over_many_hosts() {
        let budget = 256 * 1024;
        let cache = local_cache(budget);
        let expires = Instant::now() + Duration::from_secs(3600);
        let body = "User-agent: *\nDisallow: /private/\n".repeat(20);
        for i in 0..20_000 {
            cache.insert(format!("h{i}.test"), cached(policy(&body), expires));
        }
        assert!(cache.weight() <= budget, "{} > {budget}", cache.weight());
        let each = policy(&body).approx_bytes() as u64;
        assert!(
            (cache.len() as u64) <= budget / each,
            "{} entries of {each} bytes",
            cache.len()
        );
        assert!(!cache.is_empty(), "recent policies are kept");
    }

    #[test]
    fn the_largest_file_fits_in_the_cache() {
        let cache = local_cache(LOCAL_CACHE_BYTES);
        let huge = "Disallow: /x\n".repeat(robotxt::BYTE_LIMIT / 13 + 1);
        let expires = Instant::now() + Duration::from_secs(3600);
        cache.insert("big.test".into(), cached(policy(&huge), expires));
        assert!(cache.get("big.test").is_some());
    }
}
