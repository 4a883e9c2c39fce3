//! One leased request, from download to commit: wait for its host's
//! politeness slot (holding no download slot), check robots.txt, download,
//! then decide — retry later, follow a redirect, give up, or extract — and
//! commit the outcome in one atomic step. Whatever happens, the request ends
//! committed (done, retried, failed or set aside) or, if the worker dies,
//! its lease expires and another worker takes it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;

use super::outcome;
use super::retry::until_done;
use super::robots::{RobotsGate, Verdict};
use crate::extract::{self, Response};
use crate::fetch;
use crate::frontier::{Committed, Frontier, HostOutcome, Leased, PageResult};
use crate::request::Request;
use crate::settings::Settings;
use crate::spider::Spider;

/// What a page task needs; cheap to clone.
pub struct Context {
    /// Once set, a commit leases no replacement.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    pub spider: Arc<Spider>,
    pub settings: Arc<Settings>,
    pub frontier: Frontier,
    pub client: fetch::Downloader,
    pub robots: Arc<RobotsGate>,
    /// Download slots of this worker (`concurrent_requests`).
    pub downloads: Arc<Semaphore>,
    /// Per-host download slots of this worker (`concurrent_requests_per_domain`).
    pub hosts: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
    /// Pages waiting for their politeness slot (counted by the spawner).
    pub waiting: Arc<std::sync::atomic::AtomicUsize>,
    pub inflight: Arc<Mutex<HashSet<String>>>,
    pub pages: Arc<AtomicU64>,
}

impl Context {
    fn host_slots(&self, host: &str) -> Arc<Semaphore> {
        let per_host = self.settings.concurrent_requests_per_domain.max(1) as usize;
        match self.hosts.lock() {
            Ok(mut map) => map
                .entry(host.to_string())
                .or_insert_with(|| Arc::new(Semaphore::new(per_host)))
                .clone(),
            Err(_) => Arc::new(Semaphore::new(per_host)),
        }
    }
}

/// Crawls one leased request; returns the requests its commit leased to
/// replace it (already recorded as in flight).
pub async fn crawl(ctx: Context, leased: Leased) -> Vec<Leased> {
    let result = match &leased.request {
        Ok(request) => {
            // The host's turn, for the whole cluster. Waiting holds no
            // download slot; the lease is renewed meanwhile.
            if !leased.wait.is_zero() {
                tokio::time::sleep(leased.wait).await;
                ctx.waiting.fetch_sub(1, Ordering::Relaxed);
            }
            process(&ctx, request, leased.paced_with).await
        }
        Err(dead) => {
            tracing::warn!(key = %ctx.frontier.keys.requests, id = %leased.id, "malformed request set aside in the dead-letter key");
            PageResult {
                dead: Some(dead.clone()),
                stats: vec![("deadletter/count".into(), 1)],
                ..PageResult::default()
            }
        }
    };
    // A page being committed is finished through an outage, whatever the
    // worker's shutdown says meanwhile.
    let lease_next = usize::from(!*ctx.shutdown.borrow());
    let committed = until_done("commit a page", || {
        ctx.frontier.commit(&leased.id, &result, lease_next)
    })
    .await;
    let next = match committed {
        (Committed::LeaseLost, _) => {
            tracing::warn!(id = %leased.id, "lease was lost before commit (another worker has the page); results discarded");
            Vec::new()
        }
        (Committed::Done { .. }, next) => next,
    };
    if let Ok(mut set) = ctx.inflight.lock() {
        set.remove(&leased.id);
        set.extend(next.iter().map(|l| l.id.clone()));
    }
    ctx.pages.fetch_add(1, Ordering::Relaxed);
    next
}

/// Checks robots.txt, downloads and handles one request.
async fn process(ctx: &Context, request: &Request, paced_with: Duration) -> PageResult {
    let settings = &ctx.settings;
    let host = request.host_key();
    if settings.robotstxt_obey {
        match ctx.robots.check(request).await {
            Verdict::Allowed { crawl_delay } => {
                // Leased before this worker knew the host's Crawl-delay:
                // take a slot that respects it.
                if crawl_delay > paced_with {
                    let wait = until_done("reserve a politeness slot", || {
                        ctx.frontier.reserve_slot(&host)
                    })
                    .await;
                    tokio::time::sleep(wait).await;
                }
            }
            Verdict::Forbidden => {
                tracing::debug!(url = %request.url, "forbidden by robots.txt");
                return PageResult {
                    stats: vec![("robotstxt/forbidden".into(), 1)],
                    ..PageResult::default()
                };
            }
        }
    }
    let host_slots = ctx.host_slots(&host);
    let _host_slot = host_slots.acquire().await;
    let _download_slot = ctx.downloads.acquire().await;
    let mut stats: Vec<(String, i64)> = vec![
        ("downloader/request_count".into(), 1),
        (
            format!("downloader/request_method_count/{}", request.method),
            1,
        ),
    ];
    let fetched = match ctx.client.fetch(request).await {
        Ok(f) => f,
        Err(e) => {
            stats.push(("downloader/exception_count".into(), 1));
            stats.push((format!("downloader/exception_type_count/{}", e.kind()), 1));
            let failure = outcome::Failure {
                reason: e.to_string(),
                kind: e.kind().to_string(),
                status: None,
                retry_after: None,
                retryable: outcome::retryable_error(&e),
            };
            return outcome::retry_or_fail(settings, request, failure, stats, HostOutcome::None);
        }
    };
    stats.push(("downloader/response_count".into(), 1));
    stats.push((
        format!("downloader/response_status_count/{}", fetched.status),
        1,
    ));
    stats.push((
        "downloader/response_bytes".into(),
        fetched.body.len() as i64,
    ));
    stats.push(("response_received_count".into(), 1));
    let status = fetched.status;
    let header = |name: &str| {
        fetched
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    };
    let retry_after = header("retry-after").and_then(outcome::parse_retry_after);
    let host_outcome = if !settings.adaptive_backoff {
        HostOutcome::None
    } else if status == 429 || status == 503 {
        HostOutcome::Slow {
            wait: retry_after
                .unwrap_or_default()
                .min(settings.adaptive_backoff_max_delay),
        }
    } else if (200..400).contains(&status) {
        HostOutcome::Ok
    } else {
        HostOutcome::None
    };

    if settings.redirect_enabled && matches!(status, 301 | 302 | 303 | 307 | 308) {
        if let Some(location) = header("location") {
            return outcome::redirect(
                &ctx.spider,
                settings,
                request,
                &fetched.url,
                status,
                location,
                stats,
                host_outcome,
            );
        }
    }
    if settings.retry_enabled && settings.retry_http_codes.contains(&status) {
        let failure = outcome::Failure {
            reason: format!("HTTP {status}"),
            kind: status.to_string(),
            status: Some(status),
            retry_after,
            retryable: true,
        };
        return outcome::retry_or_fail(settings, request, failure, stats, host_outcome);
    }

    let response = Response {
        url: &fetched.url,
        status,
        headers: &fetched.headers,
        body: &fetched.body,
    };
    let x = extract::extract(&ctx.spider, request, &response);
    if let Some(status) = x.ignored_status {
        stats.push(("httperror/response_ignored_count".into(), 1));
        stats.push((
            format!("httperror/response_ignored_status_count/{status}"),
            1,
        ));
    }
    if !x.items.is_empty() {
        stats.push(("item_scraped_count".into(), x.items.len() as i64));
    }
    if !x.dropped.is_empty() {
        stats.push(("item_dropped_count".into(), x.dropped.len() as i64));
        stats.push((
            "item_dropped_reasons_count/MissingRequiredField".into(),
            x.dropped.len() as i64,
        ));
        for d in &x.dropped {
            tracing::debug!(url = %request.url, item = %d.item, reason = %d.reason, "item dropped");
        }
    }
    let f = &x.filtered;
    for (name, n) in [
        ("offsite/filtered", f.offsite),
        ("follow/filtered/scheme", f.scheme),
        ("follow/filtered/fragment", f.fragment),
        ("follow/filtered/denied", f.denied),
        ("follow/filtered/depth", f.depth),
        ("follow/filtered/pagination", f.pagination),
    ] {
        if n > 0 {
            stats.push((name.into(), n as i64));
        }
    }
    PageResult {
        items: x
            .items
            .iter()
            .filter_map(|i| serde_json::to_string(&i.fields).ok())
            .collect(),
        requests: x.requests,
        stats,
        host: host_outcome,
        ..PageResult::default()
    }
}
