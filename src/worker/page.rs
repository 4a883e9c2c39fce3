//! One leased request, from download to commit: fetch it, extract the page,
//! and commit the result in one atomic step. Whatever happens, the request
//! ends committed (done, failed or set aside) or, if the worker dies, its
//! lease expires and another worker takes it.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;

use crate::extract::{self, Response};
use crate::fetch;
use crate::frontier::{Committed, Frontier, Leased, PageResult};
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
    pub client: reqwest::Client,
    pub inflight: Arc<Mutex<HashSet<String>>>,
    pub pages: Arc<AtomicU64>,
}

/// Crawls one leased request; returns the requests its commit leased to
/// replace it (already recorded as in flight).
pub async fn crawl(ctx: Context, leased: Leased) -> Vec<Leased> {
    let result = match &leased.request {
        Ok(request) => download_and_extract(&ctx, request).await,
        Err(dead) => {
            tracing::warn!(key = %ctx.frontier.keys.requests, id = %leased.id, "malformed request set aside in the dead-letter key");
            PageResult {
                dead: Some(dead.clone()),
                stats: vec![("deadletter/count".into(), 1)],
                ..PageResult::default()
            }
        }
    };
    // A commit is retried through Redis outages; it is safe to repeat: a
    // second attempt after a first that went through finds the lease gone.
    // Not the worker's shutdown signal: a page being committed is finished
    // through an outage, whatever happens meanwhile.
    let (_never, keep_trying) = tokio::sync::watch::channel(false);
    let lease_next = usize::from(!*ctx.shutdown.borrow());
    let committed = super::with_redis("commit a page", &keep_trying, || {
        ctx.frontier.commit(&leased.id, &result, lease_next)
    })
    .await;
    let next = match committed {
        Some((Committed::LeaseLost, _)) => {
            tracing::warn!(id = %leased.id, "lease was lost before commit (another worker has the page); results discarded");
            Vec::new()
        }
        Some((Committed::Done { .. }, next)) => next,
        None => Vec::new(),
    };
    if let Ok(mut set) = ctx.inflight.lock() {
        set.remove(&leased.id);
        set.extend(next.iter().map(|l| l.id.clone()));
    }
    ctx.pages.fetch_add(1, Ordering::Relaxed);
    next
}

async fn download_and_extract(ctx: &Context, request: &Request) -> PageResult {
    let mut stats: Vec<(String, i64)> = vec![
        ("downloader/request_count".into(), 1),
        (
            format!("downloader/request_method_count/{}", request.method),
            1,
        ),
    ];
    let fetched = match fetch::fetch(&ctx.client, &ctx.settings, request).await {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(url = %request.url, error = %e, "download failed; recorded in the failed key");
            stats.push(("downloader/exception_count".into(), 1));
            stats.push((format!("downloader/exception_type_count/{}", e.kind()), 1));
            return PageResult {
                stats,
                failed: Some(
                    json!({
                        "url": request.url,
                        "reason": e.to_string(),
                        "kind": e.kind(),
                        "status": null,
                        "time": crate::frontier::now_secs(),
                        "request": request,
                    })
                    .to_string(),
                ),
                ..PageResult::default()
            };
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
    let response = Response {
        url: &fetched.url,
        status: fetched.status,
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
        dead: None,
        failed: None,
    }
}
