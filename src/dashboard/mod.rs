//! `crawlworker dashboard`: one self-contained web page (no CDN, nothing to
//! build) with live charts of one or more spiders, read from Redis.
//!
//! The process samples every spider's stats hash and queues every
//! [`SAMPLE_EVERY`] and keeps the last hour in memory, so the charts have a
//! history from the moment it starts; the page (`page.html`, served as is)
//! asks `/api/state` for everything every two seconds and draws SVG
//! charts itself. It only reads Redis.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde::Serialize;
use tokio::net::TcpListener;

use crate::web::response;

use crate::downloader::session::view::SessionView;
use crate::frontier::{now_secs, Backend, FailedRecord, Heartbeat, QueueStatus, RedisFrontier};
use crate::spider::session::Session;
use crate::stats;

/// How often each spider is read.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(2);

/// How much history is kept: an hour.
const HISTORY: usize = 3600 / 2;

/// Recent failures shown.
const RECENT_FAILURES: usize = 20;

/// The page, served as it is.
const PAGE: &str = include_str!("page.html");

/// One point of a spider's history.
#[derive(Debug, Clone, Copy, Serialize)]
struct Point {
    /// Seconds since the epoch.
    t: f64,
    pages_per_s: f64,
    items_per_s: f64,
    queued: u64,
    start: u64,
    inflight: u64,
}

/// A live worker as the page shows it.
#[derive(Debug, Clone, Serialize)]
struct Worker {
    id: String,
    host: String,
    pages: u64,
    seen_seconds_ago: f64,
}

/// What the page gets for one spider.
#[derive(Debug, Clone, Default, Serialize)]
struct SpiderState {
    name: String,
    pages: u64,
    items: u64,
    failed_count: u64,
    retries: u64,
    queues: QueueStatus,
    workers: Vec<Worker>,
    /// Status code → responses.
    statuses: BTreeMap<String, u64>,
    recent_failures: Vec<FailedRecord>,
    /// The login session and each account's state, for a spider with
    /// `[session]` (as `crawlworker stats` shows them).
    session: Option<SessionView>,
    history: VecDeque<Point>,
    /// Why the last reading failed, if it did.
    error: Option<String>,
}

/// Everything the page shows.
#[derive(Debug, Clone, Default, Serialize)]
struct State {
    spiders: Vec<SpiderState>,
    updated: f64,
}

/// One spider the dashboard reads.
pub struct Watched {
    pub name: String,
    /// Its shards' frontiers, shard 0's first (one for a spider that is
    /// not sharded): the page shows them summed, as one crawl.
    pub shards: Vec<RedisFrontier>,
    pub lease: Duration,
    /// Its `[session]`, if it logs in: the page shows its accounts.
    pub session: Option<Arc<Session>>,
}

/// Reads the spiders every [`SAMPLE_EVERY`] and serves the page on
/// `listener` until `stop` resolves.
pub async fn serve(listener: TcpListener, spiders: Vec<Watched>, stop: impl Future<Output = ()>) {
    let state = Arc::new(Mutex::new(State {
        spiders: spiders
            .iter()
            .map(|s| SpiderState {
                name: s.name.clone(),
                ..SpiderState::default()
            })
            .collect(),
        updated: 0.0,
    }));
    let sampler = tokio::spawn(sample(spiders, state.clone()));
    let hosts = Some(crate::web::HostCheck::for_this_machine());
    crate::web::serve(
        listener,
        move |request| respond(&state, request),
        hosts,
        stop,
    )
    .await;
    sampler.abort();
}

/// What the page may do: run its own inline script and style, and read
/// this server's state; nothing from elsewhere, in no frame.
const PAGE_POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn respond(state: &Mutex<State>, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    match (request.method(), request.uri().path()) {
        (&Method::GET, "/") => {
            let mut page = response(StatusCode::OK, "text/html; charset=utf-8", PAGE.to_string());
            page.headers_mut().insert(
                hyper::header::CONTENT_SECURITY_POLICY,
                hyper::header::HeaderValue::from_static(PAGE_POLICY),
            );
            page
        }
        (&Method::GET, "/api/state") => {
            let state = state.lock().unwrap_or_else(PoisonError::into_inner);
            response(
                StatusCode::OK,
                "application/json",
                serde_json::to_string(&*state).unwrap_or_default(),
            )
        }
        _ => response(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found\n".to_string(),
        ),
    }
}

/// Reads every spider forever, keeping the last hour.
async fn sample(spiders: Vec<Watched>, state: Arc<Mutex<State>>) {
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    // (time, pages, items) of the previous reading, per spider.
    let mut previous: Vec<Option<(f64, u64, u64)>> = vec![None; spiders.len()];
    loop {
        tick.tick().await;
        for (i, spider) in spiders.iter().enumerate() {
            let reading = read(spider).await;
            let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
            let shown = &mut state.spiders[i];
            match reading {
                Ok(now) => {
                    let t = now_secs();
                    let rate = |n: u64, was: u64, dt: f64| {
                        if dt > 0.0 {
                            n.saturating_sub(was) as f64 / dt
                        } else {
                            0.0
                        }
                    };
                    let (pages_per_s, items_per_s) = match previous[i] {
                        Some((t0, p, it)) => {
                            (rate(now.pages, p, t - t0), rate(now.items, it, t - t0))
                        }
                        None => (0.0, 0.0),
                    };
                    previous[i] = Some((t, now.pages, now.items));
                    let mut history = std::mem::take(&mut shown.history);
                    history.push_back(Point {
                        t,
                        pages_per_s,
                        items_per_s,
                        queued: now.queues.queued,
                        start: now.queues.start,
                        inflight: now.queues.inflight,
                    });
                    while history.len() > HISTORY {
                        history.pop_front();
                    }
                    *shown = SpiderState { history, ..now };
                }
                Err(e) => shown.error = Some(e.to_string()),
            }
            state.updated = now_secs();
        }
    }
}

/// One reading of a spider.
async fn read(spider: &Watched) -> anyhow::Result<SpiderState> {
    let f = &spider.shards[0];
    let crawl = crate::frontier::redis::sharded::read_crawl(&spider.shards).await?;
    let queues = crawl.status;
    let hash: BTreeMap<String, String> = crawl.stats.into_iter().collect();
    let number = |k: &str| hash.get(k).and_then(|v| v.parse().ok()).unwrap_or(0u64);
    let prefix = format!("{}/", stats::DOWNLOADER_RESPONSE_STATUS.prefix);
    let statuses = hash
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.to_string(), v.parse().ok()?)))
        .collect();
    let now = now_secs();
    let live_within = Heartbeat::gone_after(spider.lease).as_secs_f64();
    let workers = f
        .workers()
        .await?
        .into_iter()
        .filter(|(_, b)| now - b.heartbeat <= live_within)
        .map(|(id, b)| Worker {
            id,
            host: b.host,
            pages: b.pages,
            seen_seconds_ago: ((now - b.heartbeat).max(0.0) * 10.0).round() / 10.0,
        })
        .collect();
    let mut failures = Vec::new();
    for shard in &spider.shards {
        failures.extend(shard.recent_failures(RECENT_FAILURES).await?);
    }
    let recent_failures =
        crate::frontier::redis::sharded::newest(failures, RECENT_FAILURES, |r| r.time)
            .into_iter()
            .rev()
            .collect();
    let session = match &spider.session {
        Some(config) => {
            let uses = number(stats::SESSION_REQUEST_COUNT.name);
            Some(SessionView::of(config, f.session().await?, uses, now))
        }
        None => None,
    };
    Ok(SpiderState {
        name: spider.name.clone(),
        pages: number(stats::DOWNLOADER_RESPONSE_COUNT.name),
        items: number(stats::ITEM_SCRAPED_COUNT.name),
        failed_count: queues.failed,
        retries: number(stats::RETRY_COUNT.name),
        queues,
        workers,
        statuses,
        recent_failures,
        session,
        history: VecDeque::new(),
        error: None,
    })
}
