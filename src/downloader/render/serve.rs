//! Every request a rendered page makes is answered by the worker, never
//! by Chromium's own network stack: the page's document is the response
//! the downloader already fetched (through politeness, robots.txt and the
//! login session), and each subrequest (scripts, styles, what the page's
//! scripts fetch) goes through the worker's HTTP client, so the SSRF
//! guard, the proxies, the cookie jar, the spider's headers and user agent
//! and `download_maxsize` apply to it as to any download.
//!
//! What a page may not do is refused here: load the kinds of resource its
//! rule blocks, navigate its main frame away from the page, or make more
//! than `render_max_subrequests` requests. Each refusal is counted
//! ([`Counts`]); the page is taken as it is.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use chromiumoxide::cdp::browser_protocol::fetch::{
    EventRequestPaused, FailRequestParams, FulfillRequestParams, HeaderEntry,
};
use chromiumoxide::cdp::browser_protocol::network::{ErrorReason, ResourceType};
use chromiumoxide::listeners::EventStream;
use chromiumoxide::Page;
use futures_util::StreamExt;
use tokio::sync::watch;

use crate::downloader::{FetchError, Fetched, HttpClient};
use crate::request::Request;
use crate::spider::render::Resource;
use crate::spider::session::SecretText;

/// Request headers Chromium sets that the worker's client sets itself
/// (its user agent, its cookies, its encodings) or that belong to one
/// connection.
const DROPPED_REQUEST_HEADERS: [&str; 7] = [
    "user-agent",
    "cookie",
    "host",
    "accept-encoding",
    "connection",
    "content-length",
    "upgrade-insecure-requests",
];

/// Response headers that described the body as it travelled, not as it
/// is handed to Chromium (decoded, whole).
const DROPPED_RESPONSE_HEADERS: [&str; 4] = [
    "content-encoding",
    "content-length",
    "transfer-encoding",
    "connection",
];

/// What a page's requests came to.
#[derive(Debug, Default)]
pub struct Counts {
    /// Requests answered through the worker's client.
    pub subrequests: AtomicU32,
    /// Requests of a blocked kind (and favicons).
    pub blocked: AtomicU32,
    /// Requests the client refused or that failed (the guard among them).
    pub failed: AtomicU32,
    /// Requests past `render_max_subrequests`.
    pub cut: AtomicU32,
    /// Attempts to navigate the page's main frame elsewhere.
    pub navigations_blocked: AtomicU32,
    /// The first refusal by the SSRF guard, for the report.
    pub refused: std::sync::Mutex<Option<String>>,
}

/// Requests in flight, when that number last changed, and how many ever
/// started: a page is idle once none has been in flight for a while.
pub struct Traffic {
    state: watch::Sender<(usize, Instant, u64)>,
}

impl Traffic {
    pub fn new() -> Traffic {
        Traffic {
            state: watch::Sender::new((0, Instant::now(), 0)),
        }
    }

    fn start(&self) {
        self.state.send_modify(|(n, at, started)| {
            *n += 1;
            *at = Instant::now();
            *started += 1;
        });
    }

    fn end(&self) {
        self.state.send_modify(|(n, at, _)| {
            *n = n.saturating_sub(1);
            *at = Instant::now();
        });
    }

    /// Requests started so far.
    pub fn started(&self) -> u64 {
        self.state.borrow().2
    }

    /// Resolves once more than `before` requests have started, or after
    /// `grace`.
    pub async fn one_more_than(&self, before: u64, grace: Duration) {
        let mut rx = self.state.subscribe();
        let _ = tokio::time::timeout(grace, rx.wait_for(|(_, _, n)| *n > before)).await;
    }

    /// Resolves once no request has been in flight for `quiet`, counted
    /// from `from` at the earliest (a request that starts within `quiet`
    /// of `from` is waited for).
    pub async fn idle(&self, from: Instant, quiet: Duration) {
        let mut rx = self.state.subscribe();
        loop {
            let (n, at, _) = *rx.borrow_and_update();
            if n == 0 {
                let since = at.max(from).elapsed();
                if since >= quiet {
                    return;
                }
                tokio::select! {
                    _ = tokio::time::sleep(quiet - since) => {}
                    _ = rx.changed() => {}
                }
            } else if rx.changed().await.is_err() {
                return;
            }
        }
    }
}

/// The session's cookie, sent with the page's requests to its host.
pub struct SessionCookie {
    pub host: String,
    pub cookie: SecretText,
}

/// What answers one page's requests.
pub struct Server {
    pub client: HttpClient,
    /// The page as downloaded: the answer to its navigation.
    pub document: Fetched,
    pub block: Vec<Resource>,
    pub max_subrequests: u32,
    pub session: Option<SessionCookie>,
    pub traffic: Arc<Traffic>,
    pub counts: Arc<Counts>,
}

/// What becomes of one paused request.
enum Answer {
    Document,
    Block,
    Navigation,
    Cut,
    Fetch,
}

impl Server {
    /// Answers the page's requests until its tab is closed.
    pub async fn run(self: Arc<Self>, page: Page, mut events: EventStream<EventRequestPaused>) {
        let mut main_frame = None;
        while let Some(event) = events.next().await {
            let answer = self.answer(&event, &mut main_frame);
            let server = self.clone();
            let page = page.clone();
            // Each on its own: a slow subrequest holds back no other.
            tokio::spawn(async move { server.reply(&page, &event, answer).await });
        }
    }

    /// Decides what to do with `event`; the first document request is the
    /// page's own navigation and fixes its main frame.
    fn answer(&self, event: &EventRequestPaused, main_frame: &mut Option<String>) -> Answer {
        let frame = event.frame_id.as_ref().to_string();
        if event.resource_type == ResourceType::Document {
            match main_frame {
                None => {
                    *main_frame = Some(frame);
                    return Answer::Document;
                }
                Some(main) if *main == frame => return Answer::Navigation,
                // An iframe's document: a subrequest like any other.
                Some(_) => {}
            }
        }
        let blocked = self
            .block
            .iter()
            .any(|r| r.devtools_name() == event.resource_type.as_ref());
        if blocked || is_favicon(event) {
            return Answer::Block;
        }
        let n = self.counts.subrequests.load(Ordering::Relaxed)
            + self.counts.failed.load(Ordering::Relaxed);
        if n >= self.max_subrequests {
            return Answer::Cut;
        }
        self.counts.subrequests.fetch_add(1, Ordering::Relaxed);
        Answer::Fetch
    }

    async fn reply(&self, page: &Page, event: &EventRequestPaused, answer: Answer) {
        let id = event.request_id.clone();
        let sent = match answer {
            Answer::Document => fulfill(page, id, &self.document).await,
            Answer::Block => {
                fail(page, id, ErrorReason::BlockedByClient, &self.counts.blocked).await
            }
            Answer::Navigation => {
                tracing::debug!(url = %event.request.url, from = %self.document.url, "a rendered page tried to navigate away: blocked");
                self.counts
                    .navigations_blocked
                    .fetch_add(1, Ordering::Relaxed);
                stay(page, id).await
            }
            Answer::Cut => fail(page, id, ErrorReason::BlockedByClient, &self.counts.cut).await,
            Answer::Fetch => {
                self.traffic.start();
                let sent = self.fetch(page, event).await;
                self.traffic.end();
                sent
            }
        };
        // A tab closed meanwhile: nothing waits for the answer any more.
        if let Err(e) = sent {
            tracing::trace!(url = %event.request.url, error = %e, "answer to a rendered page's request not delivered");
        }
    }

    /// A subrequest through the worker's client.
    async fn fetch(&self, page: &Page, event: &EventRequestPaused) -> Result<(), String> {
        let request = self.subrequest(event);
        match self.client.fetch(&request).await {
            Ok(fetched) => fulfill(page, event.request_id.clone(), &fetched).await,
            Err(e) => {
                tracing::debug!(page = %self.document.url, error = %e, "a rendered page's request failed");
                if let FetchError::ForbiddenAddress { .. } = e {
                    let mut first = self
                        .counts
                        .refused
                        .lock()
                        .unwrap_or_else(|p| p.into_inner());
                    first.get_or_insert_with(|| e.to_string());
                }
                let reason = error_reason(&e);
                self.counts.subrequests.fetch_sub(1, Ordering::Relaxed);
                fail(page, event.request_id.clone(), reason, &self.counts.failed).await
            }
        }
    }

    /// The request as the worker sends it: Chromium's method, body and
    /// headers but the worker's user agent and cookies.
    fn subrequest(&self, event: &EventRequestPaused) -> Request {
        let sent = &event.request;
        let mut request = Request::new(sent.url.clone());
        request.method = sent.method.clone();
        request.headers = headers_of(sent.headers.inner());
        request.body = post_body(sent.post_data_entries.as_deref());
        if let Some(session) = &self.session {
            let host = url::Url::parse(&sent.url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_ascii_lowercase));
            if host.as_deref() == Some(session.host.as_str()) {
                request
                    .headers
                    .push(("Cookie".into(), session.cookie.expose().to_string()));
            }
        }
        request
    }
}

/// Chromium's request headers, without those the worker sets itself.
fn headers_of(headers: &serde_json::Value) -> Vec<(String, String)> {
    let Some(map) = headers.as_object() else {
        return Vec::new();
    };
    map.iter()
        .filter(|(k, _)| {
            let k = k.to_ascii_lowercase();
            !DROPPED_REQUEST_HEADERS.contains(&k.as_str()) && !k.starts_with("sec-")
        })
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect()
}

/// A POST's body, as text (forms and JSON; the worker's requests carry
/// text bodies).
fn post_body(
    entries: Option<&[chromiumoxide::cdp::browser_protocol::network::PostDataEntry]>,
) -> String {
    let engine = base64::engine::general_purpose::STANDARD;
    let bytes: Vec<u8> = entries
        .unwrap_or_default()
        .iter()
        .filter_map(|e| e.bytes.as_ref())
        .filter_map(|b| engine.decode(AsRef::<str>::as_ref(b)).ok())
        .flatten()
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn is_favicon(event: &EventRequestPaused) -> bool {
    event.resource_type == ResourceType::Other && event.request.url.ends_with("/favicon.ico")
}

/// How a failed download is shown to the page.
fn error_reason(e: &FetchError) -> ErrorReason {
    match e {
        FetchError::ForbiddenAddress { .. } => ErrorReason::AccessDenied,
        FetchError::Dns { .. } => ErrorReason::NameNotResolved,
        FetchError::Timeout { .. } => ErrorReason::TimedOut,
        FetchError::Connect { refused: true, .. } => ErrorReason::ConnectionRefused,
        FetchError::Connect { .. } => ErrorReason::ConnectionFailed,
        FetchError::TooLarge { .. } | FetchError::OverBudget { .. } => ErrorReason::BlockedByClient,
        _ => ErrorReason::Failed,
    }
}

/// Hands `fetched` to Chromium as the answer to request `id`.
async fn fulfill(
    page: &Page,
    id: chromiumoxide::cdp::browser_protocol::fetch::RequestId,
    fetched: &Fetched,
) -> Result<(), String> {
    let headers: Vec<HeaderEntry> = fetched
        .headers
        .iter()
        .filter(|(k, _)| !DROPPED_RESPONSE_HEADERS.contains(&k.to_ascii_lowercase().as_str()))
        .map(|(k, v)| HeaderEntry::new(k.clone(), v.clone()))
        .collect();
    let body = base64::engine::general_purpose::STANDARD.encode(&fetched.body);
    let params = FulfillRequestParams::builder()
        .request_id(id)
        .response_code(i64::from(fetched.status))
        .response_headers(headers)
        .body(body)
        .build()
        .map_err(|e| e.to_string())?;
    page.execute(params)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Answers a navigation with 204 No Content: the browser stays on the
/// page it has (failing it would show an error page instead).
async fn stay(
    page: &Page,
    id: chromiumoxide::cdp::browser_protocol::fetch::RequestId,
) -> Result<(), String> {
    page.execute(FulfillRequestParams::new(id, 204))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Fails request `id` with `reason`, counting it in `count`.
async fn fail(
    page: &Page,
    id: chromiumoxide::cdp::browser_protocol::fetch::RequestId,
    reason: ErrorReason,
    count: &AtomicU32,
) -> Result<(), String> {
    count.fetch_add(1, Ordering::Relaxed);
    page.execute(FailRequestParams::new(id, reason))
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}
