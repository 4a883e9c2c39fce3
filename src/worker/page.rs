//! One leased request, from download to commit: the downloader gives a
//! response to extract or an outcome it decided (retry later, follow a
//! redirect, give up, robots.txt said no); the extractor turns a response
//! into items and follow-up requests (a large page off the async runtime,
//! every page within the spider's limits: see [`super::offload`]), which
//! are counted in the worker's memory budget until the commit
//! ([`super::output`]); the outcome is committed in one atomic step.
//! Whatever happens, the request ends committed (done, retried, failed or
//! set aside) or, if the worker dies, its lease expires and another worker
//! takes it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::failures::{self, FailureLog};
use crate::downloader::budget::Reservation;
use crate::downloader::{Downloaded, Downloader, Fetched, GiveUp};
use crate::extract::bounded::{Budget, CutShort};
use crate::extract::{self, Response};
use crate::frontier::outage::until_done;
use crate::frontier::{Committed, FailedRecord, Frontier, HostOutcome, Leased, PageResult};
use crate::metrics::Metrics;
use crate::request::Request;
use crate::settings::Settings;
use crate::spider::Spider;
use crate::stats::{self, Tally};
use crate::wording::plural;

/// What a page task needs; cheap to clone.
pub struct Context {
    /// Once set, a commit leases no replacement.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// While set, a request not yet downloading goes back to the queue.
    pub paused: tokio::sync::watch::Receiver<bool>,
    pub spider: Arc<Spider>,
    /// The worker's settings for the spider (its extraction limits).
    pub settings: Arc<Settings>,
    pub frontier: Frontier,
    pub downloader: Arc<Downloader>,
    /// Ids of the requests this worker holds leases on.
    pub inflight: Arc<Mutex<HashSet<String>>>,
    /// What this worker did.
    pub progress: Arc<super::progress::Progress>,
    /// Where it is counted for Prometheus, when metrics are served.
    pub metrics: Option<Metrics>,
    /// The spider's share of the worker's download slots.
    pub share: Arc<super::pool::Share>,
    /// What it says about requests that gave no page.
    pub failures: Arc<FailureLog>,
}

/// Crawls one leased request; returns the requests its commit leased to
/// replace it (already recorded as in flight).
pub async fn crawl(ctx: Context, leased: Leased) -> Vec<Leased> {
    let next = crawl_one(&ctx, leased).await;
    ctx.share.finished();
    next
}

async fn crawl_one(ctx: &Context, leased: Leased) -> Vec<Leased> {
    // The output's charge in the memory budget lives until the commit is
    // done (or the page dropped).
    let (result, _output, host_waiting) = match &leased.request {
        Ok(request) => match process(ctx, request, leased.wait, leased.paced_with).await {
            // No longer finishing: about to be committed.
            Some((result, output, finishing)) => (result, output, finishing.host_waiting()),
            None => {
                hand_back(ctx, &leased.id).await;
                return Vec::new();
            }
        },
        Err(dead) => {
            tracing::warn!(key = %ctx.frontier.keys().requests, id = %leased.id, entry = %super::preview(&dead.entry), reason = %dead.reason, "malformed request set aside in the dead-letter key");
            let dead = PageResult {
                dead: Some(dead.clone()),
                ..PageResult::default()
            };
            (dead, None, 0)
        }
    };
    // A page being committed is finished through an outage, whatever the
    // worker's shutdown says meanwhile. Its replacement is leased in the
    // same step (see pool::Share::commit).
    let queues = !result.requests.is_empty() || !result.tasks.is_empty();
    let commit = ctx
        .share
        .commit(!*ctx.shutdown.borrow(), queues, host_waiting);
    let started = std::time::Instant::now();
    let committed = until_done("commit a page", &ctx.frontier.fatal(), || {
        ctx.frontier
            .commit(&leased, &result, commit.lease_next, commit.patience)
    })
    .await;
    if let (Committed::Done { .. }, next) = &committed {
        ctx.share.leased(commit.lease_next, next.len());
    }
    drop(commit);
    let next = match committed {
        (Committed::LeaseLost, _) => {
            tracing::warn!(id = %leased.id, "lease was lost before commit (another worker has the page); results discarded");
            Vec::new()
        }
        (Committed::Done { enqueued, filtered }, next) => {
            ctx.progress.committed(&result);
            if let Some(m) = &ctx.metrics {
                count_commit(m, &ctx.spider.name, &result, enqueued, filtered, next.len());
                m.observe_redis(&ctx.spider.name, "commit", started.elapsed().as_secs_f64());
            }
            next
        }
    };
    if let Ok(mut set) = ctx.inflight.lock() {
        set.remove(&leased.id);
        set.extend(next.iter().map(|l| l.id.clone()));
    }
    next
}

/// Counts a committed page for Prometheus: its tally, and what the commit
/// step itself counted in Redis (enqueued, filtered, dead letters,
/// failures, the requests it leased to replace it).
fn count_commit(
    metrics: &Metrics,
    spider: &str,
    result: &PageResult,
    enqueued: u64,
    filtered: u64,
    leased: usize,
) {
    metrics.count(spider, &result.stats);
    let mut commit = Tally::default();
    commit.add(stats::SCHEDULER_ENQUEUED, enqueued as i64);
    commit.add(stats::DUPEFILTER_FILTERED, filtered as i64);
    commit.add(stats::SCHEDULER_DEQUEUED, leased as i64);
    commit.add(stats::DEADLETTER_COUNT, i64::from(result.dead.is_some()));
    metrics.count(spider, &commit);
    if let Some(failed) = &result.failed {
        metrics.failed(spider, &failed.kind);
    }
}

/// The request's download did not start (the worker is stopping, the
/// spider is paused, its host was slowed down after it was leased, or the
/// worker holds over twice its fair share and the request waited for a
/// slot): its
/// lease goes back to the
/// queue now, at its place (if that fails, it expires).
async fn hand_back(ctx: &Context, id: &str) {
    // No longer this worker's before it is back in the queue: once it is,
    // a commit in progress may lease it again and record it as in flight,
    // and removing it after that would leave the new lease unrenewed and,
    // when the worker stops, not handed back.
    if let Ok(mut set) = ctx.inflight.lock() {
        set.remove(id);
    }
    let ids = [id.to_string()];
    if let Err(e) = ctx.frontier.release(&ids).await {
        tracing::debug!(%id, error = %e, "could not hand a request back; its lease expires instead");
    }
}

/// Downloads one request and, if it gave a page, extracts it, with its
/// output's charge in the memory budget; `None` when the download did not
/// start and the request goes back to the queue.
async fn process<'c>(
    ctx: &'c Context,
    request: &Request,
    wait: Duration,
    paced_with: Duration,
) -> Option<(PageResult, Option<Reservation>, super::pool::Finishing<'c>)> {
    let mut stats = Tally::default();
    let give_up = GiveUp {
        shutdown: ctx.shutdown.clone(),
        paused: ctx.paused.clone(),
        hand_back: ctx.frontier.hand_back(),
    };
    let (downloaded, host_waiting) = ctx
        .downloader
        .download(request, wait, paced_with, &mut stats, give_up)
        .await;
    if matches!(downloaded, Downloaded::NotStarted) {
        return None;
    }
    let finishing = ctx.share.finishing(host_waiting);
    let mut output = None;
    let mut result = match downloaded {
        Downloaded::Decided(mut result) => {
            if let Some(failed) = &mut result.failed {
                failed.rule = failures::rule_of(&ctx.spider, request);
                ctx.failures.failed(failed);
            }
            super::revisit::decide(&ctx.spider, request, &mut result, None, &mut stats);
            *result
        }
        Downloaded::Response { fetched, host } => {
            let (mut result, fetched) = if super::revisit::not_modified(request, &fetched) {
                // Unchanged since the last visit: nothing to parse.
                stats.add(stats::REVISIT_NOT_MODIFIED, 1);
                let result = PageResult {
                    host,
                    ..PageResult::default()
                };
                (result, fetched)
            } else {
                // Large pages are parsed a few at a time (the worker's
                // memory budget), small ones at once.
                let _parsing = ctx.share.parsing(fetched.body.len()).await;
                let (spider, settings) = (ctx.spider.clone(), ctx.settings.clone());
                let (request, mut counted) = (request.clone(), std::mem::take(&mut stats));
                let failures = ctx.failures.clone();
                let extracted = super::offload::run(fetched.body.len(), move |stop| {
                    let budget = Budget::new(&settings, Some(stop));
                    let page = Page {
                        spider: &spider,
                        settings: &settings,
                        request: &request,
                        fetched: &fetched,
                        failures: &failures,
                    };
                    let result = extract_page(page, host, &mut counted, &budget);
                    let bytes = super::output::bytes(&result);
                    (result, fetched, counted, bytes)
                })
                .await;
                // The runtime is shutting down: the page goes back to the queue.
                let (result, fetched, counted, bytes) = extracted?;
                // Charged before the parse's permit goes (see
                // downloader::budget).
                output = ctx.share.charge_output(bytes);
                stats = counted;
                (result, fetched)
            };
            super::revisit::decide(
                &ctx.spider,
                request,
                &mut result,
                Some(&fetched),
                &mut stats,
            );
            result
        }
        Downloaded::NotStarted => return None,
    };
    result.stats = stats;
    Some((result, output, finishing))
}

/// A downloaded page and what its extraction needs.
struct Page<'a> {
    spider: &'a Spider,
    settings: &'a Settings,
    request: &'a Request,
    fetched: &'a Fetched,
    failures: &'a FailureLog,
}

/// The items and follow-up requests of a downloaded page, as far as the
/// budget lets the extraction go; a page ignored for its status is
/// recorded as failed.
fn extract_page(
    page: Page<'_>,
    host: HostOutcome,
    stats: &mut Tally,
    budget: &Budget,
) -> PageResult {
    let Page {
        spider,
        settings,
        request,
        fetched,
        failures,
    } = page;
    let response = Response {
        url: &fetched.url,
        status: fetched.status,
        headers: &fetched.headers,
        body: &fetched.body,
        fetched_at: fetched.fetched_at,
    };
    let x = extract::extract_within(spider, request, &response, budget);
    tracing::debug!(
        url = %request.url,
        "fetched {} {} {} ({}, {}, {})",
        fetched.status,
        request.method,
        request.url,
        x.rule
            .as_deref()
            .map_or("no rule".to_string(), |r| format!("rule {r}")),
        plural(x.items.len(), "item", "items"),
        plural(x.requests.len(), "link", "links"),
    );
    let failed = x
        .unreadable
        .as_ref()
        .map(|u| unreadable(request, fetched.status, x.rule.as_deref(), u, stats));
    if let Some(cut) = x.cut_short {
        stats.add(stats::EXTRACT_CUT_SHORT, 1);
        stats.add_in(stats::EXTRACT_CUT_SHORT_REASON, cut.as_str(), 1);
        tracing::warn!(
            url = %request.url,
            "page extracted only in part: {}; its {} and {} are committed, the rest of the page is not read",
            cut_short_cause(cut, settings),
            plural(x.items.len(), "item", "items"),
            plural(x.requests.len(), "link", "links"),
        );
    }
    if let Some(binary) = &x.binary {
        stats.add(stats::EXTRACT_BINARY_IGNORED, 1);
        log_binary(&spider.name, &request.url, x.rule.as_deref(), binary);
    }
    let ignored = x.ignored_status.map(|status| {
        stats.add(stats::HTTPERROR_RESPONSE_IGNORED_COUNT, 1);
        stats.add_in(stats::HTTPERROR_RESPONSE_IGNORED_STATUS, status, 1);
        failures.ignored(request, status, x.rule.as_deref());
        ignored_record(request, status, x.rule.clone())
    });
    stats.add(stats::ITEM_SCRAPED_COUNT, x.items.len() as i64);
    stats.add(stats::ITEM_DROPPED_COUNT, x.dropped.len() as i64);
    for d in &x.dropped {
        stats.add_in(stats::ITEM_DROPPED_REASONS, d.code.as_str(), 1);
        log_drop(&spider.name, &request.url, d);
    }
    stats.add(stats::EXTRACT_UNCONVERTED, x.unconverted.len() as i64);
    for u in &x.unconverted {
        stats.add_in(stats::EXTRACT_UNCONVERTED_FIELD, u.label(), 1);
        log_unconverted(&spider.name, &request.url, u);
    }
    let f = &x.filtered;
    for (stat, n) in [
        (stats::OFFSITE_FILTERED, f.offsite),
        (stats::FOLLOW_FILTERED_SCHEME, f.scheme),
        (stats::FOLLOW_FILTERED_FRAGMENT, f.fragment),
        (stats::FOLLOW_FILTERED_DENIED, f.denied),
        (stats::FOLLOW_FILTERED_EXTENSION, f.extension),
        (stats::FOLLOW_FILTERED_DEPTH, f.depth),
        (stats::FOLLOW_FILTERED_PAGINATION, f.pagination),
        (stats::FOLLOW_FILTERED_NOT_MODIFIED, f.not_modified),
        (stats::FOLLOW_FILTERED_REWRITE, f.rewrite),
    ] {
        stats.add(stat, n as i64);
    }
    PageResult {
        items: x.items.into_iter().map(|i| i.fields).collect(),
        requests: x.requests,
        tasks: x.tasks,
        // An ignored status is never extracted, so never unreadable too.
        failed: failed.or(ignored),
        host,
        ..PageResult::default()
    }
}

/// A source that gave nothing, or not all it holds (too large, malformed):
/// counted, logged with its URL and rule, and recorded as failed with its
/// reason (the links read before a sitemap broke off are committed).
fn unreadable(
    request: &Request,
    status: u16,
    rule: Option<&str>,
    u: &extract::Unreadable,
    stats: &mut Tally,
) -> FailedRecord {
    stats.add(stats::EXTRACT_UNREADABLE, 1);
    stats.add_in(stats::EXTRACT_UNREADABLE_KIND, u.kind, 1);
    tracing::warn!(url = %request.url, rule = rule.unwrap_or(""), kind = u.kind, "{}; the page is recorded as failed", u.reason);
    FailedRecord::new(
        request,
        &u.reason,
        &format!("unreadable/{}", u.kind),
        Some(status),
    )
}

/// The failed record of a response ignored for its status: its kind is
/// the status, as for a status whose retries ran out.
fn ignored_record(request: &Request, status: u16, rule: Option<String>) -> FailedRecord {
    let reason = format!(
        "HTTP {status}, not handled (only 2xx and httperror_allowed_codes reach the rules)"
    );
    FailedRecord {
        rule,
        ..FailedRecord::new(request, &reason, &status.to_string(), Some(status))
    }
}

/// Why a page was cut short, for people.
fn cut_short_cause(cut: CutShort, settings: &Settings) -> String {
    match cut {
        CutShort::Depth => format!(
            "its HTML nests deeper than extract_max_depth ({} elements)",
            settings.extract_max_depth
        ),
        CutShort::Nodes => format!(
            "its HTML has more than extract_max_nodes ({}) nodes",
            settings.extract_max_nodes
        ),
        CutShort::Attributes => format!(
            "an element of its HTML has more than {} attributes (it is read up to that tag)",
            crate::extract::attributes::MAX_ATTRIBUTES
        ),
        CutShort::Time => format!(
            "its extraction took longer than extract_timeout ({})",
            crate::wording::duration(settings.extract_timeout)
        ),
        CutShort::Stopped => "the worker is stopping".to_string(),
    }
}

/// Logs a binary response left unread: the first of each spider in this
/// process as a warning (a site serving its pages with a wrong type says
/// so), the rest at debug level; all are counted.
fn log_binary(
    spider: &str,
    url: &str,
    rule: Option<&str>,
    binary: &crate::extract::content::Binary,
) {
    static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let first = SEEN.lock().is_ok_and(|mut seen| {
        let new = !seen.iter().any(|s| s == spider);
        if new {
            seen.push(spider.to_string());
        }
        new
    });
    let rule = rule.unwrap_or("");
    if first {
        tracing::warn!(
            spider,
            url,
            rule,
            "response not extracted: {}; a binary body is not read as a page (a rule takes such responses with `binary = true`); further ones are logged at debug level and counted in {}",
            binary.reason,
            stats::EXTRACT_BINARY_IGNORED.name
        );
    } else {
        tracing::debug!(spider, url, rule, reason = %binary.reason, "binary response not extracted");
    }
}

/// Logs a dropped item: the first drop of each item type and reason in
/// this process as a warning (a spider whose pages changed shape says so
/// without flooding the log), the rest at debug level; all are counted.
fn log_drop(spider: &str, url: &str, d: &crate::extract::Dropped) {
    static SEEN: std::sync::Mutex<Vec<(String, String, crate::extract::DropReason)>> =
        std::sync::Mutex::new(Vec::new());
    let first = SEEN.lock().is_ok_and(|mut seen| {
        let key = (spider.to_string(), d.item.clone(), d.code);
        let new = !seen.contains(&key);
        if new {
            seen.push(key);
        }
        new
    });
    if first {
        tracing::warn!(
            spider,
            url,
            item = %d.item,
            "item dropped: {}; further such drops are logged at debug level and counted in item_dropped_reasons_count/{}",
            d.reason,
            d.code.as_str()
        );
    } else {
        tracing::debug!(spider, url, item = %d.item, reason = %d.reason, "item dropped");
    }
}

/// Logs a value a field could not convert: the first of each item type
/// and field in this process as a warning with the value (cut short), the
/// rest at debug level; all are counted.
fn log_unconverted(spider: &str, url: &str, u: &crate::extract::Unconverted) {
    static SEEN: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());
    let first = SEEN.lock().is_ok_and(|mut seen| {
        let key = (spider.to_string(), u.label());
        let new = !seen.contains(&key);
        if new {
            seen.push(key);
        }
        new
    });
    if first {
        tracing::warn!(
            spider,
            url,
            item = %u.item,
            field = %u.field,
            "field `{}` of item `{}` went without a value: {}; further ones are logged at debug level and counted in {}/{}",
            u.field,
            u.item,
            u.reason,
            stats::EXTRACT_UNCONVERTED_FIELD.prefix,
            u.label()
        );
    } else {
        tracing::debug!(spider, url, item = %u.item, field = %u.field, reason = %u.reason, "value not converted");
    }
}
