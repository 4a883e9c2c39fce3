//! Fault injection for the demo server: routes under `/fault/` that
//! misbehave on purpose, so the downloader's tests (retries, backoff,
//! Retry-After, timeouts, redirect limits, size limits, robots.txt) run
//! against a real HTTP server on 127.0.0.1. Everything is deterministic.
//! They are test support only: the demo binary does not serve them.
//!
//! This module owns what those routes answer and the server-side state they
//! need (per-key counters, the robots.txt setting, the count of fault
//! responses in progress). It owns no sockets: [`Faults`] plugs into the
//! demo server as its [`Routes`], which it asks first for every request.
//!
//! # Routes
//!
//! Pages are small HTML documents (`text/html; charset=utf-8`) unless
//! stated. Query values are form-decoded (`%XX`, and `+` is a space). A
//! malformed number or parameter answers 400 with the reason; an unknown
//! `/fault/…` path answers 404. Fault routes answer any method.
//!
//! Counters (`times=N&key=K`) are kept per path and key: the first N
//! requests for `/fault/status/503` with key `K` fail, whatever other
//! routes or keys do, so parallel tests that use their own key never
//! interfere. Without `key` the key is empty (one counter per path).
//!
//! | Path | Behaviour |
//! |------|-----------|
//! | `/fault/status/{code}?times=N&key=K` | The first N (default 1) requests answer `code` (200–999, e.g. 500, 503, 408, 522); later ones 200. |
//! | `/fault/retry-after/{s}?times=N&key=K` | 429 with `Retry-After: {s}` the first N (default 1) times, then 200. |
//! | `/fault/retry-after-date/{s}?times=N&key=K` | 429 with `Retry-After` as an HTTP-date at least `s` seconds ahead (the current time plus `s`, rounded up to the whole second), then 200. |
//! | `/fault/503-retry-after/{s}?times=N&key=K` | 503 with `Retry-After: {s}` the first N (default 1) times, then 200. |
//! | `/fault/outage/{code}?ms=T&key=K` | A host that is down for a while: `code` (200–999, e.g. 503) to every request for (path, key) until T ms (default 1000) after the first of them, then 200. Other parameters are ignored, so `&page=P` makes distinct URLs sharing one outage. |
//! | `/fault/delay/{ms}` | 200 after `ms` milliseconds; headers and body are sent at once after the pause. |
//! | `/fault/hang` | Never answers. The connection is held until the client closes it or the server stops (then it is closed without an answer). |
//! | `/fault/redirect/{n}?code=C` | `n` > 0: status C (any 3xx, default 302) with the relative `Location: /fault/redirect/{n-1}` (keeping `?code=C` if given); `n` = 0: 200. |
//! | `/fault/redirect-to?url=U&code=C` | Status C (default 302) with `Location: U` exactly as decoded (absolute, off-site or private addresses, anything a header may hold). |
//! | `/fault/loop/a`, `/fault/loop/b` `?code=C` | Status C (default 302) to `/fault/loop/b`, resp. `/fault/loop/a`: a redirect loop. |
//! | `/fault/huge/{bytes}` | 200 with `Content-Length: {bytes}` and a body of exactly that many bytes (HTML-ish filler), streamed in 32 KiB chunks of one static buffer: no per-request allocation of the body. |
//! | `/fault/huge-chunked/{bytes}` | The same without `Content-Length` (chunked transfer encoding). |
//! | `…?delay_ms=T` on huge and huge-chunked | The response starts after T ms. |
//! | `/fault/endless` | 200, chunked, an HTML start then filler chunks for ever, as fast as the client reads, until it disconnects or the server stops. |
//! | `/fault/trickle?bytes_per_sec=N` | 200, chunked, an HTML start at once, then `.` bytes at N per second (1–1,000,000, default 10): one byte every 1/N s up to 1,000 per second, evenly spread over 1 ms ticks above. Never ends. |
//! | `/fault/gzip` | 200 with `Content-Encoding: gzip`: a small page in a valid gzip member (stored deflate blocks, correct CRC-32 and size). |
//! | `/fault/nested/{n}` | 200, a page of `n` (at most 10,000,000) nested `<div>`s holding a link to `/fault/nested-end` and a `<p class="deep">`: HTML whose parse costs n² steps without a depth limit. |
//! | `/fault/nested-json/{n}` | 200, a page (`<h1>Nested JSON</h1>`) whose `<script type="application/json">` holds `n` (at most 10,000,000) nested JSON arrays: a value whose parse recurses once per level (6 KB for 3,000). |
//! | `/fault/attributes/{n}` | 200, a `<p class="before">` then one `<div>` of `n` (at most 1,000,000) distinct attributes, then a `<p class="after">`: a tag whose parse costs n² steps. |
//! | `/fault/file/{name}?type=T` | A downloadable file, typed and filled as a static file server would by the name's extension (any case): `.pdf` `application/pdf` (a PDF start), `.zip` `application/zip`, `.png` `image/png` (a PNG's first bytes), `.py` `text/x-python` (a line of Python), `.html` `text/html` (a small page); any other name `application/octet-stream` with bytes 0–255. `type=T` sends `Content-Type: T` instead, `type=none` no Content-Type at all. Other parameters are ignored (`logo.PNG?x=1` is a PNG). |
//! | `/fault/downloads` | 200, a page linking `/fault/file/report.pdf`, `src.zip`, `logo.PNG?x=1`, `example.py` (the kinds of file Scrapy's link extractor skips) and `notes.html` (one it follows). |
//! | `/fault/links?to=P1,P2,…` | 200 with one `<a href="Pi">` per comma-separated value (escaped), so a spider can be led into fault routes. |
//! | `/fault/sitemap?to=U1+U2+…&lastmod=D&gzip=1` | A sitemap (`<urlset>`) with one `<url><loc>Ui</loc></url>` per space-separated value (`+` in the query; a URL with its own query goes percent-encoded), escaped, each with `<lastmod>D</lastmod>` when given. With `gzip=1` the body is the gzip file itself (`application/x-gzip`, no Content-Encoding), as a `sitemap.xml.gz` is served. |
//! | `/fault/sitemap-index?to=S1+S2+…` | A sitemap index (`<sitemapindex>`) listing the sitemaps Si. |
//! | `/fault/feed/rss?to=U1+…` and `/fault/feed/atom?to=U1+…` | An RSS 2.0 or Atom feed with one entry per Ui, linking to it. |
//! | `…&many=N&prefix=P` on the sitemap and feed routes | N more entries, `P0` to `P{N-1}` (P an absolute URL, percent-encoded): a sitemap too large to list in its URL. |
//! | `…&pad=N`, `…&cut=N` on the sitemap and feed routes | N spaces before the closing tag (a sitemap that unpacks past a limit while its gzip file stays small); the body cut to its first N bytes (before gzip), as a broken download. |
//! | `/fault/changing?every=N&validators=V&key=K` | A page whose content changes every N requests for (path, key) (0: never; default 1): version = (request − 1) ÷ N, shown as `<p class="version">v</p>` (beside a `<p class="stable">` that never changes). Validators V: `etag` (default: `ETag: "v<version>"`), `last-modified` (one hour per version after 2023-11-14), `both` or `none`. A request whose `If-None-Match` or `If-Modified-Since` matches the current version answers 304 with no body (and counts as a request). With `gone_after=G`, requests after the G-th answer 410 Gone. |
//!
//! `/robots.txt` is not a fault route but is configured here: see
//! [`Robots`] and [`crate::FixtureServer::set_robots`]. Its default is the
//! site's ordinary 404 page, as before.
//!
//! Responses that do not finish on their own (hang, delay, and the
//! streaming bodies of huge, endless and trickle) are counted while in
//! progress ([`crate::FixtureServer::faults_in_progress`]), so a test can check
//! that a client gave up on them. When the server stops, connections with
//! such a response in progress are closed at once instead of being drained,
//! so stopping is prompt even while a client holds an endless body without
//! reading it.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{ready, Context, Poll};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http_body_util::BodyExt;
use hyper::body::{Body, Bytes, Frame, SizeHint};
use hyper::header::{
    HeaderValue, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, ETAG, IF_MODIFIED_SINCE,
    IF_NONE_MATCH, LAST_MODIFIED, LOCATION, RETRY_AFTER,
};
use hyper::{Response, StatusCode, Uri};
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};

use crawlworker_demo::{escape, full, Connection, InProgress, Reply, ResponseBody, Routes};

/// The path prefix of every fault route.
const PREFIX: &str = "/fault/";

/// Size of one chunk of the huge and endless bodies.
const CHUNK: usize = 32 * 1024;

/// The filler every huge and endless body is cut from: static, so a 20 MB
/// body costs no 20 MB allocation.
static FILLER: [u8; CHUNK] = filler();

/// What trickle sends after its start, up to 1,000 bytes a tick.
static DOTS: [u8; 1000] = [b'.'; 1000];

/// The start of the endless and trickle bodies: a valid HTML document
/// start, so a client sees a page that never ends.
const HTML_START: &str = "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>never ends</title></head><body>\n<p>";

const HTML: &str = "text/html; charset=utf-8";
const XML: &str = "application/xml; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

/// Trickle's default rate, in bytes per second.
const DEFAULT_TRICKLE_RATE: u64 = 10;
/// Trickle's highest rate; above 1,000 bytes/s it sends in 1 ms ticks.
const MAX_TRICKLE_RATE: u64 = 1_000_000;
/// Trickle's finest tick.
const MAX_TICKS_PER_SEC: u64 = 1_000;

const fn filler() -> [u8; CHUNK] {
    let line = b"<p>filler filler filler filler filler filler filler filler.</p>\n";
    let mut out = [0; CHUNK];
    let mut i = 0;
    while i < CHUNK {
        out[i] = line[i % line.len()];
        i += 1;
    }
    out
}

/// What `/robots.txt` answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Robots {
    /// 404 with the site's ordinary not-found page, as a site without
    /// robots.txt (the default).
    #[default]
    Missing,
    /// 200 with this text as `text/plain; charset=utf-8`.
    Body(String),
    /// This status (e.g. 503, 401, 500) with a one-line text body. A status
    /// outside 200–999 answers 500.
    Status(u16),
    /// What the inner one answers, after a pause (a slow or, past the
    /// client's timeout, a timing-out robots.txt); an inner
    /// [`Robots::Missing`] answers at once.
    Slow(Duration, Box<Robots>),
}

/// Fault state shared by all connections of one server.
#[derive(Debug, Default)]
pub(crate) struct FaultState {
    /// Requests seen per (path, key), for the routes that fail the first N
    /// times.
    counters: Mutex<HashMap<(String, String), u64>>,
    /// What `/robots.txt` answers; tests change it while the server runs.
    robots: Mutex<Robots>,
    /// Fault responses in progress on all connections.
    in_progress: Arc<AtomicUsize>,
    /// When the first request per (path, key) of the outage route came.
    outages: Mutex<HashMap<(String, String), Instant>>,
}

impl FaultState {
    pub(crate) fn set_robots(&self, robots: Robots) {
        *self.robots.lock().unwrap_or_else(PoisonError::into_inner) = robots;
    }

    pub(crate) fn in_progress(&self) -> usize {
        self.in_progress.load(Ordering::SeqCst)
    }

    /// Counts one more request for (`path`, `key`) and returns its number,
    /// starting at 1.
    fn count(&self, path: &str, key: &str) -> u64 {
        let mut counters = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
        let n = counters
            .entry((path.to_owned(), key.to_owned()))
            .or_insert(0);
        *n += 1;
        *n
    }

    /// How long ago the first request for (`path`, `key`) came (zero for
    /// this one if it is the first).
    fn since_first(&self, path: &str, key: &str) -> Duration {
        let mut outages = self.outages.lock().unwrap_or_else(PoisonError::into_inner);
        outages
            .entry((path.to_owned(), key.to_owned()))
            .or_insert_with(Instant::now)
            .elapsed()
    }

    /// What `/robots.txt` answers now.
    fn robots(&self) -> Robots {
        self.robots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The `/robots.txt` response of `robots` (without its pause, if slow),
    /// or `None` for the site's 404 page.
    fn robots_response(robots: Robots) -> Option<Response<ResponseBody>> {
        match robots {
            Robots::Slow(_, inner) => FaultState::robots_response(*inner),
            Robots::Missing => None,
            Robots::Body(text) => Some(response(StatusCode::OK, TEXT, Bytes::from(text))),
            Robots::Status(code) => {
                let status = StatusCode::from_u16(code)
                    .ok()
                    .filter(|status| status.as_u16() >= 200)
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let text = format!("robots.txt: {status}\n");
                Some(response(status, TEXT, Bytes::from(text)))
            }
        }
    }
}

/// Fault state of one connection.
#[derive(Debug)]
struct ConnectionFaults {
    server: Arc<FaultState>,
    conn: Connection,
}

impl ConnectionFaults {
    /// Counts a fault response as in progress, on its connection and the
    /// server, until dropped.
    fn in_progress(&self) -> InProgress {
        self.conn.in_progress(&self.server.in_progress)
    }

    fn stop(&self) -> watch::Receiver<bool> {
        self.conn.stop()
    }
}

/// The fault routes and `/robots.txt`, as the demo server's [`Routes`].
#[derive(Debug, Default)]
pub struct Faults {
    pub(crate) state: Arc<FaultState>,
}

impl Routes for Faults {
    fn route(
        &self,
        conn: &Connection,
        request: &hyper::Request<hyper::body::Incoming>,
    ) -> Option<Reply> {
        let uri = request.uri();
        let faults = ConnectionFaults {
            server: Arc::clone(&self.state),
            conn: conn.clone(),
        };
        if uri.path() == "/robots.txt" {
            let robots = self.state.robots();
            let delay = match &robots {
                Robots::Slow(delay, _) => *delay,
                _ => Duration::ZERO,
            };
            let response = FaultState::robots_response(robots)?;
            return Some(if delay.is_zero() {
                Reply::Now(response)
            } else {
                Reply::After {
                    delay,
                    response,
                    in_progress: faults.in_progress(),
                    stop: faults.stop(),
                }
            });
        }
        route(&faults, uri, request.headers())
    }
}

/// Why a streaming fault body ends early: the server is stopping.
fn stopping() -> io::Error {
    io::Error::other("fixture server stopping")
}

/// The reply for a `/fault/…` request, or `None` for any other path.
fn route(conn: &ConnectionFaults, uri: &Uri, headers: &hyper::HeaderMap) -> Option<Reply> {
    let path = uri.path();
    let rest = path.strip_prefix(PREFIX)?;
    let query = Query::parse(uri.query().unwrap_or(""));
    let segments: Vec<&str> = rest.split('/').collect();
    Some(match dispatch(conn, path, &segments, &query, headers) {
        Ok(Some(reply)) => reply,
        Ok(None) => Reply::Now(page(
            StatusCode::NOT_FOUND,
            "404 Not Found",
            &format!(
                "<p>No fault route at {}; see the crawlworker::demo::faults docs.</p>",
                escape(path)
            ),
        )),
        Err(reason) => Reply::Now(page(
            StatusCode::BAD_REQUEST,
            "400 Bad Request",
            &format!("<p>{}</p>", escape(&reason)),
        )),
    })
}

/// `response` at once, or after the query's `delay_ms`.
fn delayed(
    conn: &ConnectionFaults,
    query: &Query,
    response: Response<ResponseBody>,
) -> Result<Reply, String> {
    Ok(match query.get("delay_ms") {
        None => Reply::Now(response),
        Some(ms) => Reply::After {
            delay: Duration::from_millis(number::<u64>("delay_ms", ms)?),
            response,
            in_progress: conn.in_progress(),
            stop: conn.stop(),
        },
    })
}

/// Answers a fault route: `Ok(None)` for an unknown one, `Err(reason)` for
/// bad parameters.
fn dispatch(
    conn: &ConnectionFaults,
    path: &str,
    segments: &[&str],
    query: &Query,
    headers: &hyper::HeaderMap,
) -> Result<Option<Reply>, String> {
    let reply = match segments {
        ["status", code] => {
            let status = status_param("status code", code, |s| s.as_u16() >= 200)?;
            fail_first(conn, path, query, |body| response_page(status, body))?
        }
        ["outage", code] => {
            let status = status_param("status code", code, |s| s.as_u16() >= 200)?;
            let ms = match query.get("ms") {
                Some(ms) => number::<u64>("ms", ms)?,
                None => 1000,
            };
            let key = query.get("key").unwrap_or("");
            let since = conn.server.since_first(path, key);
            Reply::Now(if since < Duration::from_millis(ms) {
                response_page(
                    status,
                    &format!(
                        "<p>Down for {ms} ms from the first request for key “{}”.</p>",
                        escape(key)
                    ),
                )
            } else {
                page(StatusCode::OK, "Recovered", "<p>The outage is over.</p>")
            })
        }
        ["retry-after", seconds] => {
            let seconds = number::<u64>("seconds", seconds)?;
            fail_first(conn, path, query, |body| {
                with_header(
                    response_page(StatusCode::TOO_MANY_REQUESTS, body),
                    RETRY_AFTER,
                    HeaderValue::from(seconds),
                )
            })?
        }
        ["retry-after-date", seconds] => {
            let seconds = number::<u64>("seconds", seconds)?;
            fail_first(conn, path, query, |body| {
                let date = http_date_after(SystemTime::now(), seconds);
                let value =
                    HeaderValue::from_str(&date).unwrap_or_else(|_| HeaderValue::from_static("0"));
                with_header(
                    response_page(StatusCode::TOO_MANY_REQUESTS, body),
                    RETRY_AFTER,
                    value,
                )
            })?
        }
        ["503-retry-after", seconds] => {
            let seconds = number::<u64>("seconds", seconds)?;
            fail_first(conn, path, query, |body| {
                with_header(
                    response_page(StatusCode::SERVICE_UNAVAILABLE, body),
                    RETRY_AFTER,
                    HeaderValue::from(seconds),
                )
            })?
        }
        ["delay", ms] => {
            let ms = number::<u64>("milliseconds", ms)?;
            Reply::After {
                delay: Duration::from_millis(ms),
                response: page(
                    StatusCode::OK,
                    "Delayed",
                    &format!("<p>Answered after {ms} ms.</p>"),
                ),
                in_progress: conn.in_progress(),
                stop: conn.stop(),
            }
        }
        ["hang"] => Reply::Never {
            in_progress: conn.in_progress(),
            stop: conn.stop(),
        },
        ["redirect", n] => {
            let n = number::<u64>("redirect count", n)?;
            let code = redirect_code(query)?;
            if n == 0 {
                Reply::Now(page(
                    StatusCode::OK,
                    "End of the redirects",
                    "<p>Arrived.</p>",
                ))
            } else {
                let mut location = format!("{PREFIX}redirect/{}", n - 1);
                if let Some(code) = query.get("code") {
                    let _ = write!(location, "?code={code}");
                }
                redirect(code.unwrap_or(StatusCode::FOUND), &location)?
            }
        }
        ["redirect-to"] => {
            let code = redirect_code(query)?;
            let url = query.get("url").ok_or("missing url parameter")?;
            redirect(code.unwrap_or(StatusCode::FOUND), url)?
        }
        ["loop", side @ ("a" | "b")] => {
            let code = redirect_code(query)?;
            let other = if *side == "a" { "b" } else { "a" };
            let mut location = format!("{PREFIX}loop/{other}");
            if let Some(code) = query.get("code") {
                let _ = write!(location, "?code={code}");
            }
            redirect(code.unwrap_or(StatusCode::FOUND), &location)?
        }
        ["huge", bytes] => {
            let bytes = number::<u64>("byte count", bytes)?;
            let body = FaultBody::new(
                conn,
                Source::Sized {
                    remaining: bytes,
                    exact: true,
                },
            );
            let response = with_header(streaming(body), CONTENT_LENGTH, HeaderValue::from(bytes));
            delayed(conn, query, response)?
        }
        ["huge-chunked", bytes] => {
            let bytes = number::<u64>("byte count", bytes)?;
            let body = FaultBody::new(
                conn,
                Source::Sized {
                    remaining: bytes,
                    exact: false,
                },
            );
            delayed(conn, query, streaming(body))?
        }
        ["endless"] => {
            let body = FaultBody::new(
                conn,
                Source::Endless {
                    start: Some(Bytes::from_static(HTML_START.as_bytes())),
                },
            );
            Reply::Now(streaming(body))
        }
        ["trickle"] => {
            let rate = match query.get("bytes_per_sec") {
                Some(rate) => number::<u64>("bytes_per_sec", rate)?,
                None => DEFAULT_TRICKLE_RATE,
            };
            if !(1..=MAX_TRICKLE_RATE).contains(&rate) {
                return Err(format!(
                    "bytes_per_sec must be 1 to {MAX_TRICKLE_RATE}, not {rate}"
                ));
            }
            Reply::Now(streaming(FaultBody::new(conn, Source::trickle(rate))))
        }
        ["gzip"] => {
            let html = document("Gzip", "<p>This page was sent gzip-encoded.</p>");
            let mut response = response(
                StatusCode::OK,
                HTML,
                Bytes::from(gzip_stored(html.as_bytes())),
            );
            response
                .headers_mut()
                .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            Reply::Now(response)
        }
        ["nested", n] => {
            let n = number::<usize>("nesting", n)?;
            if n > 10_000_000 {
                return Err(format!("nesting must be at most 10000000, not {n}"));
            }
            let body = format!(
                "{}<p class=\"deep\"><a href=\"{PREFIX}nested-end\">end</a></p>{}",
                "<div>".repeat(n),
                "</div>".repeat(n)
            );
            Reply::Now(page(StatusCode::OK, "Nested", &body))
        }
        ["nested-json", n] => {
            let n = number::<usize>("nesting", n)?;
            if n > 10_000_000 {
                return Err(format!("nesting must be at most 10000000, not {n}"));
            }
            let body = format!(
                "<h1>Nested JSON</h1><script type=\"application/json\">{}{}</script>",
                "[".repeat(n),
                "]".repeat(n)
            );
            Reply::Now(page(StatusCode::OK, "Nested JSON", &body))
        }
        ["attributes", n] => {
            let n = number::<usize>("attributes", n)?;
            if n > 1_000_000 {
                return Err(format!("attributes must be at most 1000000, not {n}"));
            }
            let mut body = String::from("<p class=\"before\">before</p><div");
            for i in 0..n {
                let _ = write!(body, " a{i}");
            }
            body.push_str(">inside</div><p class=\"after\">after</p>");
            Reply::Now(page(StatusCode::OK, "Attributes", &body))
        }
        ["file", name] => file(name, query.get("type"))?,
        ["downloads"] => {
            let mut list = String::from("<ul>\n");
            for to in DOWNLOADS {
                let _ = writeln!(list, "<li><a href=\"{PREFIX}file/{to}\">{to}</a></li>");
            }
            list.push_str("</ul>");
            Reply::Now(page(StatusCode::OK, "Downloads", &list))
        }
        ["links"] => {
            let mut list = String::from("<ul>\n");
            for to in query
                .get("to")
                .unwrap_or("")
                .split(',')
                .filter(|to| !to.is_empty())
            {
                let to = escape(to);
                let _ = writeln!(list, "<li><a href=\"{to}\">{to}</a></li>");
            }
            list.push_str("</ul>");
            Reply::Now(page(StatusCode::OK, "Links", &list))
        }
        ["changing"] => changing(conn, path, query, headers)?,
        ["sitemap"] => {
            let lastmod = query
                .get("lastmod")
                .map(|d| format!("<lastmod>{}</lastmod>", escape(d)))
                .unwrap_or_default();
            let body = xml_list(
                query,
                "<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">",
                |u| format!("<url><loc>{u}</loc>{lastmod}</url>"),
                "</urlset>",
            );
            Reply::Now(if query.get("gzip") == Some("1") {
                response(
                    StatusCode::OK,
                    "application/x-gzip",
                    Bytes::from(gzip_compressed(body.as_bytes())),
                )
            } else {
                response(StatusCode::OK, XML, Bytes::from(body))
            })
        }
        ["sitemap-index"] => {
            let body = xml_list(
                query,
                "<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">",
                |u| format!("<sitemap><loc>{u}</loc></sitemap>"),
                "</sitemapindex>",
            );
            Reply::Now(response(StatusCode::OK, XML, Bytes::from(body)))
        }
        ["feed", "rss"] => {
            let body = xml_list(
                query,
                "<rss version=\"2.0\"><channel><title>Feed</title><link>http://127.0.0.1/</link><description>d</description>",
                |u| format!("<item><title>{u}</title><link>{u}</link><guid>{u}</guid></item>"),
                "</channel></rss>",
            );
            Reply::Now(response(
                StatusCode::OK,
                "application/rss+xml",
                Bytes::from(body),
            ))
        }
        ["feed", "atom"] => {
            let body = xml_list(
                query,
                "<feed xmlns=\"http://www.w3.org/2005/Atom\"><title>Feed</title><id>urn:feed</id><updated>2024-05-01T00:00:00Z</updated>",
                |u| format!("<entry><title>{u}</title><id>{u}</id><updated>2024-05-01T00:00:00Z</updated><link rel=\"alternate\" href=\"{u}\"/></entry>"),
                "</feed>",
            );
            Reply::Now(response(
                StatusCode::OK,
                "application/atom+xml",
                Bytes::from(body),
            ))
        }
        _ => return Ok(None),
    };
    Ok(Some(reply))
}

/// What `/fault/downloads` links to under `/fault/file/`: the four kinds
/// of file Scrapy's link extractor skips, then a page it follows.
pub const DOWNLOADS: [&str; 5] = [
    "report.pdf",
    "src.zip",
    "logo.PNG?x=1",
    "example.py",
    "notes.html",
];

/// `/fault/file/{name}`: a file typed and filled by its extension, or
/// typed as `type` says (`none`: no Content-Type).
fn file(name: &str, content_type: Option<&str>) -> Result<Reply, String> {
    let extension = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    let (typed, body): (&str, Bytes) = match extension.as_deref() {
        Some("pdf") => (
            "application/pdf",
            Bytes::from_static(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n"),
        ),
        Some("zip") => (
            "application/zip",
            Bytes::from_static(b"PK\x03\x04\x14\0\0\0\x08\0<html>not a page</html>"),
        ),
        Some("png") => (
            "image/png",
            Bytes::from_static(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01"),
        ),
        Some("py") => ("text/x-python", Bytes::from_static(b"print('hello')\n")),
        Some("html") => (
            HTML,
            Bytes::from(document("A file", "<p>A page among the files.</p>")),
        ),
        _ => (
            "application/octet-stream",
            Bytes::from((0..=255u8).collect::<Vec<u8>>()),
        ),
    };
    let mut response = Response::new(full(body));
    match content_type {
        Some("none") => {}
        Some(t) => {
            let value =
                HeaderValue::from_str(t).map_err(|_| format!("not a Content-Type value: {t:?}"))?;
            response.headers_mut().insert(CONTENT_TYPE, value);
        }
        None => {
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(typed));
        }
    }
    Ok(Reply::Now(response))
}

/// An XML document: `head`, one `entry` per space-separated (escaped)
/// value of `to`, `tail`.
fn xml_list(query: &Query, head: &str, entry: impl Fn(&str) -> String, tail: &str) -> String {
    let mut body = format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{head}\n");
    for to in query.get("to").unwrap_or("").split_whitespace() {
        body.push_str(&entry(&escape(to)));
        body.push('\n');
    }
    // Many generated entries: `prefix` followed by 0, 1, … (a sitemap too
    // large to list in a URL).
    if let (Some(n), Some(prefix)) = (
        query.get("many").and_then(|n| n.parse::<usize>().ok()),
        query.get("prefix"),
    ) {
        for i in 0..n {
            body.push_str(&entry(&escape(&format!("{prefix}{i}"))));
            body.push('\n');
        }
    }
    // Room before the end (a sitemap that unpacks past the limit), and an
    // end cut off (a truncated download).
    if let Some(pad) = query.get("pad").and_then(|n| n.parse::<usize>().ok()) {
        body.push_str(&" ".repeat(pad));
    }
    body.push_str(tail);
    if let Some(cut) = query.get("cut").and_then(|n| n.parse::<usize>().ok()) {
        body.truncate(cut.min(body.len()));
    }
    body
}

/// `/fault/changing`: a page whose version moves on every N requests, with
/// the validators asked for, answering conditional requests.
fn changing(
    conn: &ConnectionFaults,
    path: &str,
    query: &Query,
    headers: &hyper::HeaderMap,
) -> Result<Reply, String> {
    let every = match query.get("every") {
        Some(n) => number::<u64>("every", n)?,
        None => 1,
    };
    let validators = query.get("validators").unwrap_or("etag");
    let (etag, modified) = match validators {
        "etag" => (true, false),
        "last-modified" => (false, true),
        "both" => (true, true),
        "none" => (false, false),
        other => {
            return Err(format!(
                "validators must be etag, last-modified, both or none, not {other:?}"
            ))
        }
    };
    let n = conn.server.count(path, query.get("key").unwrap_or(""));
    if let Some(gone) = query.get("gone_after") {
        if n > number::<u64>("gone_after", gone)? {
            return Ok(Reply::Now(response_page(StatusCode::GONE, "<p>Gone.</p>")));
        }
    }
    let version = (n - 1).checked_div(every).unwrap_or(0);
    let tag = format!("\"v{version}\"");
    let date = http_date(1_700_000_000 + version * 3_600);
    let sent = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let unchanged = (etag && sent(IF_NONE_MATCH) == Some(tag.as_str()))
        || (modified && sent(IF_MODIFIED_SINCE) == Some(date.as_str()));
    let mut response = if unchanged {
        response(StatusCode::NOT_MODIFIED, HTML, Bytes::new())
    } else {
        page(
            StatusCode::OK,
            &format!("Version {version}"),
            &format!("<p class=\"version\">{version}</p><p class=\"stable\">unchanged</p>"),
        )
    };
    for (on, name, value) in [(etag, ETAG, &tag), (modified, LAST_MODIFIED, &date)] {
        if on {
            let value = HeaderValue::from_str(value).map_err(|e| e.to_string())?;
            response.headers_mut().insert(name, value);
        }
    }
    Ok(Reply::Now(response))
}

/// The first `times` requests for (path, key) get `fail(body)`, with a body
/// saying which failure this is, later ones a 200 page.
fn fail_first(
    conn: &ConnectionFaults,
    path: &str,
    query: &Query,
    fail: impl FnOnce(&str) -> Response<ResponseBody>,
) -> Result<Reply, String> {
    let times = match query.get("times") {
        Some(times) => number::<u64>("times", times)?,
        None => 1,
    };
    let key = query.get("key").unwrap_or("");
    let n = conn.server.count(path, key);
    Ok(Reply::Now(if n <= times {
        fail(&format!(
            "<p>Request {n} for key “{}”: failure {n} of {times}.</p>",
            escape(key)
        ))
    } else {
        page(
            StatusCode::OK,
            "Recovered",
            &format!(
                "<p>Request {n} for key “{}”: the first {times} failed, this one succeeds.</p>",
                escape(key)
            ),
        )
    }))
}

fn redirect(status: StatusCode, location: &str) -> Result<Reply, String> {
    let value = HeaderValue::from_str(location)
        .map_err(|_| format!("not a valid Location header value: {location:?}"))?;
    let body = format!("<p>Moved to <a href=\"{0}\">{0}</a>.</p>", escape(location));
    Ok(Reply::Now(with_header(
        page(status, &status.to_string(), &body),
        LOCATION,
        value,
    )))
}

/// The `code` parameter of redirect routes, if given: any 3xx.
fn redirect_code(query: &Query) -> Result<Option<StatusCode>, String> {
    query
        .get("code")
        .map(|code| status_param("redirect code", code, StatusCode::is_redirection))
        .transpose()
}

fn status_param(
    what: &str,
    text: &str,
    allowed: impl Fn(&StatusCode) -> bool,
) -> Result<StatusCode, String> {
    let code = number::<u16>(what, text)?;
    StatusCode::from_u16(code)
        .ok()
        .filter(allowed)
        .ok_or_else(|| format!("{what} {code} is not allowed here"))
}

fn number<T: std::str::FromStr>(what: &str, text: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{what} must be a non-negative integer, not {text:?}"))
}

/// Query parameters, form-decoded; the first of repeated names wins.
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(query: &str) -> Query {
        Query(
            url::form_urlencoded::parse(query.as_bytes())
                .map(|(name, value)| (name.into_owned(), value.into_owned()))
                .collect(),
        )
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, value)| value.as_str())
    }
}

fn response(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<ResponseBody> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn with_header(
    mut response: Response<ResponseBody>,
    name: hyper::header::HeaderName,
    value: HeaderValue,
) -> Response<ResponseBody> {
    response.headers_mut().insert(name, value);
    response
}

/// A page titled after its status, e.g. "503 Service Unavailable".
fn response_page(status: StatusCode, body: &str) -> Response<ResponseBody> {
    page(status, &status.to_string(), body)
}

fn page(status: StatusCode, title: &str, body: &str) -> Response<ResponseBody> {
    response(status, HTML, Bytes::from(document(title, body)))
}

fn document(title: &str, body: &str) -> String {
    let title = escape(title);
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{title}</title></head><body>\n<h1>{title}</h1>\n{body}\n</body></html>\n"
    )
}

fn streaming(body: FaultBody) -> Response<ResponseBody> {
    let mut response = Response::new(body.boxed());
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(HTML));
    response
}

/// The streaming bodies of huge, endless and trickle.
struct FaultBody {
    source: Source,
    /// Checked on every frame, so a body started after shutdown ends.
    stop: watch::Receiver<bool>,
    _in_progress: InProgress,
}

enum Source {
    /// Filler until `remaining` bytes are sent; `exact` announces the size.
    Sized { remaining: u64, exact: bool },
    /// `start`, then filler for ever.
    Endless { start: Option<Bytes> },
    /// `start`, then `rate` dots a second, one tick each `period`.
    Trickle {
        start: Option<Bytes>,
        sleep: Pin<Box<Sleep>>,
        period: Duration,
        rate: u64,
        /// Ticks sent so far.
        tick: u64,
    },
}

impl Source {
    fn trickle(rate: u64) -> Source {
        let ticks = u32::try_from(ticks_per_sec(rate)).unwrap_or(1_000);
        let period = Duration::from_secs(1) / ticks;
        Source::Trickle {
            start: Some(Bytes::from_static(HTML_START.as_bytes())),
            sleep: Box::pin(tokio::time::sleep_until(Instant::now() + period)),
            period,
            rate,
            tick: 0,
        }
    }
}

/// Trickle's ticks per second at `rate` bytes per second: one byte a tick
/// up to 1,000 bytes a second, 1 ms ticks above.
fn ticks_per_sec(rate: u64) -> u64 {
    rate.clamp(1, MAX_TICKS_PER_SEC)
}

/// Bytes trickle sends in tick `tick` (counted from 0): those due by its
/// end minus those due by its start, so every second carries exactly
/// `rate`.
fn trickle_bytes(rate: u64, tick: u64) -> u64 {
    let ticks = ticks_per_sec(rate);
    let due = |t: u64| t / ticks * rate + t % ticks * rate / ticks;
    due(tick + 1) - due(tick)
}

impl FaultBody {
    fn new(conn: &ConnectionFaults, source: Source) -> FaultBody {
        FaultBody {
            source,
            stop: conn.stop(),
            _in_progress: conn.in_progress(),
        }
    }
}

impl Body for FaultBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        if *this.stop.borrow() {
            return Poll::Ready(Some(Err(stopping())));
        }
        let data = match &mut this.source {
            Source::Sized { remaining, .. } => {
                if *remaining == 0 {
                    return Poll::Ready(None);
                }
                let n = usize::try_from(*remaining).map_or(CHUNK, |r| r.min(CHUNK));
                *remaining -= n as u64;
                Bytes::from_static(&FILLER[..n])
            }
            Source::Endless { start } => {
                start.take().unwrap_or_else(|| Bytes::from_static(&FILLER))
            }
            Source::Trickle {
                start,
                sleep,
                period,
                rate,
                tick,
            } => match start.take() {
                Some(start) => start,
                None => {
                    ready!(sleep.as_mut().poll(cx));
                    let next = sleep.deadline() + *period;
                    sleep.as_mut().reset(next);
                    let n = trickle_bytes(*rate, *tick);
                    *tick += 1;
                    let n = usize::try_from(n).map_or(DOTS.len(), |n| n.min(DOTS.len()));
                    Bytes::from_static(&DOTS[..n])
                }
            },
        };
        Poll::Ready(Some(Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        // Not for the chunked form: hyper would send an empty body with
        // `Content-Length: 0` instead of chunked encoding.
        matches!(
            self.source,
            Source::Sized {
                remaining: 0,
                exact: true
            }
        )
    }

    fn size_hint(&self) -> SizeHint {
        match self.source {
            Source::Sized {
                remaining,
                exact: true,
            } => SizeHint::with_exact(remaining),
            _ => SizeHint::default(),
        }
    }
}

/// `now + seconds` as an HTTP-date (`Sun, 06 Nov 1994 08:49:37 GMT`),
/// rounded up to the whole second so it is never less than `seconds`
/// ahead.
fn http_date_after(now: SystemTime, seconds: u64) -> String {
    let since_epoch = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let round_up = u64::from(since_epoch.subsec_nanos() > 0);
    http_date(since_epoch.as_secs() + round_up + seconds)
}

/// Seconds since the Unix epoch as an HTTP-date (RFC 9110 IMF-fixdate).
fn http_date(secs: u64) -> String {
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86_400;
    let in_day = secs % 86_400;
    // Howard Hinnant's civil_from_days, for days since 1970-01-01 (a
    // Thursday) with a non-negative count.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    // Indices are below 7 and 12 by construction.
    let weekday = WEEKDAYS[(days % 7) as usize];
    let month = MONTHS[(month - 1) as usize];
    format!(
        "{weekday}, {day:02} {month} {year:04} {:02}:{:02}:{:02} GMT",
        in_day / 3_600,
        in_day % 3_600 / 60,
        in_day % 60
    )
}

/// `data` gzip-compressed, as a `sitemap.xml.gz` is (a run of spaces packs
/// a thousandfold: a sitemap that unpacks past any limit stays small).
fn gzip_compressed(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    let _ = gz.write_all(data);
    gz.finish().unwrap_or_default()
}

/// `data` as a gzip member of stored (uncompressed) deflate blocks: valid
/// gzip without a compressor.
fn gzip_stored(data: &[u8]) -> Vec<u8> {
    // Magic, deflate, no flags, no mtime, no extra flags, unknown OS.
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    let mut blocks = data.chunks(usize::from(u16::MAX)).peekable();
    if data.is_empty() {
        out.extend([1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        // BFINAL on the last block, BTYPE 00 (stored).
        out.push(u8::from(blocks.peek().is_none()));
        let len = u16::try_from(block.len()).unwrap_or(u16::MAX);
        out.extend(len.to_le_bytes());
        out.extend((!len).to_le_bytes());
        out.extend(block);
    }
    out.extend(crc32(data).to_le_bytes());
    // ISIZE is the length modulo 2^32.
    out.extend((data.len() as u32).to_le_bytes());
    out
}

/// CRC-32 (IEEE, as gzip uses), bit by bit: the pages are small.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use std::time::Instant as StdInstant;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;
    use crate::FixtureServer;
    use crawlworker_demo::{render, Site};

    /// Long enough for anything here on a loaded machine, short enough
    /// that a bug fails fast.
    const PATIENCE: Duration = Duration::from_secs(5);

    /// A client that shows redirects instead of following them.
    fn client() -> reqwest::Client {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(PATIENCE)
            .build()
            .expect("client")
    }

    async fn start() -> FixtureServer {
        FixtureServer::start(Site::demo()).await.expect("start")
    }

    async fn get(server: &FixtureServer, path: &str) -> reqwest::Response {
        client()
            .get(server.url(path))
            .send()
            .await
            .unwrap_or_else(|error| panic!("GET {path}: {error}"))
    }

    fn header<'a>(response: &'a reqwest::Response, name: &str) -> Option<&'a str> {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().expect("ASCII header"))
    }

    /// Statuses of `n` requests for `path`, in order.
    async fn statuses(server: &FixtureServer, path: &str, n: usize) -> Vec<u16> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(get(server, path).await.status().as_u16());
        }
        out
    }

    /// Waits until `server` has exactly `n` fault responses in progress.
    async fn faults_in_progress(server: &FixtureServer, n: usize) {
        tokio::time::timeout(PATIENCE, async {
            while server.faults_in_progress() != n {
                // How often it is polled, not a wait for an effect.
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{} faults in progress, not {n}",
                server.faults_in_progress()
            )
        });
    }

    /// Waits until no fault response is in progress on `server`: they end
    /// once their clients are gone.
    async fn settled(server: &FixtureServer) {
        faults_in_progress(server, 0).await;
    }

    /// Stops `server`, failing if that is not prompt.
    async fn stop_promptly(server: FixtureServer) {
        let started = StdInstant::now();
        tokio::time::timeout(Duration::from_secs(2), server.stop())
            .await
            .expect("server stops promptly")
            .expect("stop");
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn outage_fails_everything_for_a_while_per_path_and_key() {
        let server = start().await;
        assert_eq!(
            statuses(&server, "/fault/outage/503?ms=60000&key=a&page=1", 2).await,
            [503, 503]
        );
        assert_eq!(
            statuses(&server, "/fault/outage/503?ms=60000&key=a&page=2", 1).await,
            [503],
            "the same outage, another page"
        );
        assert_eq!(
            statuses(&server, "/fault/outage/503?ms=0&key=b", 1).await,
            [200],
            "another key, over at once"
        );
        assert_eq!(
            statuses(&server, "/fault/outage/500?ms=200&key=c", 1).await,
            [500]
        );
        // The outage lasts 200 ms by the server's clock: the time passing
        // is what is tested.
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(
            statuses(&server, "/fault/outage/500?ms=200&key=c", 1).await,
            [200]
        );
    }

    #[tokio::test]
    async fn status_fails_the_first_n_times_per_path_and_key() {
        let server = start().await;
        assert_eq!(
            statuses(&server, "/fault/status/503?times=2&key=a", 4).await,
            [503, 503, 200, 200]
        );
        // Another key, and another path with the same key, count apart.
        assert_eq!(
            statuses(&server, "/fault/status/503?times=2&key=b", 3).await,
            [503, 503, 200]
        );
        assert_eq!(
            statuses(&server, "/fault/status/500?key=a", 2).await,
            [500, 200],
            "times defaults to 1"
        );
        for code in [408, 522, 524, 404] {
            let path = format!("/fault/status/{code}?times=1&key=codes");
            assert_eq!(statuses(&server, &path, 2).await, [code, 200]);
        }
        assert_eq!(
            statuses(&server, "/fault/status/503?times=0", 1).await,
            [200]
        );

        let failing = get(&server, "/fault/status/502?key=page").await;
        assert_eq!(header(&failing, "content-type"), Some(HTML));
        let text = failing.text().await.expect("body");
        assert!(text.starts_with("<!DOCTYPE html>"), "{text}");
        assert!(text.contains("502 Bad Gateway"), "{text}");

        // Any method; the counter is per path and key, not per query.
        let post = client()
            .post(server.url("/fault/status/503?times=1&key=post"))
            .send()
            .await
            .expect("POST");
        assert_eq!(post.status(), 503);
        assert_eq!(
            statuses(&server, "/fault/status/503?key=post&times=1", 1).await,
            [200]
        );
        server.stop().await.expect("stop");
    }

    #[tokio::test]
    async fn changing_pages_move_on_answer_conditional_requests_and_go_away() {
        let server = start().await;
        let path = "/fault/changing?every=2&validators=both&key=c&gone_after=5";
        let first = get(&server, path).await;
        assert_eq!(header(&first, "etag"), Some("\"v0\""));
        let date = header(&first, "last-modified").unwrap().to_string();
        assert_eq!(date, "Tue, 14 Nov 2023 22:13:20 GMT");
        assert!(first
            .text()
            .await
            .unwrap()
            .contains("<p class=\"version\">0</p>"));
        // The second request: still version 0, so a matching ETag is 304.
        let conditional = |name: &'static str, value: String| {
            let url = server.url(path);
            async move { client().get(url).header(name, value).send().await.unwrap() }
        };
        let same = conditional("if-none-match", "\"v0\"".into()).await;
        assert_eq!(same.status(), 304);
        assert!(same.text().await.unwrap().is_empty());
        // The third: version 1, so the old date no longer matches.
        let moved = conditional("if-modified-since", date).await;
        assert_eq!(moved.status(), 200);
        assert_eq!(header(&moved, "etag"), Some("\"v1\""));
        assert_eq!(get(&server, path).await.status(), 200);
        assert_eq!(get(&server, path).await.status(), 200);
        assert_eq!(get(&server, path).await.status(), 410);
        stop_promptly(server).await;
    }

    #[tokio::test]
    async fn bad_parameters_are_400_and_unknown_routes_404() {
        let server = start().await;
        for path in [
            "/fault/status/abc",
            "/fault/status/99",
            "/fault/status/1000",
            "/fault/status/503?times=-1",
            "/fault/delay/soon",
            "/fault/redirect/2?code=200",
            "/fault/redirect-to",
            "/fault/redirect-to?url=a%0Ab",
            "/fault/huge/-5",
            "/fault/trickle?bytes_per_sec=0",
            "/fault/trickle?bytes_per_sec=1000001",
        ] {
            let response = get(&server, path).await;
            assert_eq!(response.status(), 400, "{path}");
            assert_eq!(header(&response, "content-type"), Some(HTML));
        }
        for path in ["/fault/", "/fault/nope", "/fault/loop/c", "/fault/hang/1"] {
            assert_eq!(get(&server, path).await.status(), 404, "{path}");
        }
        server.stop().await.expect("stop");
    }

    #[tokio::test]
    async fn retry_after_in_seconds_and_as_a_date() {
        let server = start().await;
        for _ in 0..2 {
            let limited = get(&server, "/fault/retry-after/7?times=2&key=s").await;
            assert_eq!(limited.status(), 429);
            assert_eq!(header(&limited, "retry-after"), Some("7"));
        }
        let ok = get(&server, "/fault/retry-after/7?times=2&key=s").await;
        assert_eq!(ok.status(), 200);
        assert_eq!(header(&ok, "retry-after"), None);

        let unavailable = get(&server, "/fault/503-retry-after/3?key=u").await;
        assert_eq!(unavailable.status(), 503);
        assert_eq!(header(&unavailable, "retry-after"), Some("3"));
        assert_eq!(
            get(&server, "/fault/503-retry-after/3?key=u")
                .await
                .status(),
            200
        );

        let before = SystemTime::now();
        let dated = get(&server, "/fault/retry-after-date/30").await;
        let after = SystemTime::now();
        assert_eq!(dated.status(), 429);
        let date = header(&dated, "retry-after")
            .expect("Retry-After")
            .to_owned();
        let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).expect("after 1970").as_secs();
        let candidates: Vec<String> = (secs(before) + 30..=secs(after) + 31)
            .map(http_date)
            .collect();
        assert!(candidates.contains(&date), "{date} not in {candidates:?}");
        assert_eq!(
            get(&server, "/fault/retry-after-date/30").await.status(),
            200
        );
        server.stop().await.expect("stop");
    }

    #[test]
    fn http_dates() {
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(http_date(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(http_date(1_709_208_000), "Thu, 29 Feb 2024 12:00:00 GMT");
        assert_eq!(http_date(4_102_444_799), "Thu, 31 Dec 2099 23:59:59 GMT");
        // 2100 is not a leap year.
        assert_eq!(http_date(4_107_542_399), "Sun, 28 Feb 2100 23:59:59 GMT");
        assert_eq!(http_date(4_107_542_400), "Mon, 01 Mar 2100 00:00:00 GMT");
        let at = |secs, nanos| UNIX_EPOCH + Duration::new(secs, nanos);
        assert_eq!(
            http_date_after(at(784_111_777, 0), 3),
            http_date(784_111_780)
        );
        assert_eq!(
            http_date_after(at(784_111_777, 1), 3),
            http_date(784_111_781)
        );
    }

    #[tokio::test]
    async fn delay_answers_after_the_pause() {
        let server = start().await;
        let started = StdInstant::now();
        let response = get(&server, "/fault/delay/150").await;
        assert!(started.elapsed() >= Duration::from_millis(150));
        assert_eq!(response.status(), 200);
        assert!(response.text().await.expect("body").contains("150 ms"));

        // A client that gives up first leaves nothing behind.
        let error = client()
            .get(server.url("/fault/delay/60000"))
            .timeout(Duration::from_millis(100))
            .send()
            .await
            .expect_err("times out");
        assert!(error.is_timeout(), "{error}");
        settled(&server).await;
        stop_promptly(server).await;
    }

    #[tokio::test]
    async fn hang_never_answers_and_does_not_hold_the_server() {
        let server = start().await;
        let error = client()
            .get(server.url("/fault/hang"))
            .timeout(Duration::from_millis(150))
            .send()
            .await
            .expect_err("no answer");
        assert!(error.is_timeout(), "{error}");
        settled(&server).await;
        assert_eq!(get(&server, "/").await.status(), 200, "still serving");
        assert_eq!(server.hits("/fault/hang"), 1);

        // A hang in progress when the server stops: the connection is
        // closed without an answer, at once.
        let hanging = tokio::spawn(client().get(server.url("/fault/hang")).send());
        faults_in_progress(&server, 1).await;
        stop_promptly(server).await;
        let result = tokio::time::timeout(PATIENCE, hanging)
            .await
            .expect("client sees the close")
            .expect("join");
        assert!(result.is_err(), "no answer: {result:?}");
    }

    /// `/fault/redirect-to` for `url`, form-encoded as a test author would.
    fn redirect_to(url: &str, code: Option<u16>) -> String {
        let url: String = url::form_urlencoded::byte_serialize(url.as_bytes()).collect();
        match code {
            Some(code) => format!("/fault/redirect-to?code={code}&url={url}"),
            None => format!("/fault/redirect-to?url={url}"),
        }
    }

    #[tokio::test]
    async fn redirect_chains_targets_and_loops() {
        let server = start().await;
        for n in (1..=3).rev() {
            let response = get(&server, &format!("/fault/redirect/{n}")).await;
            assert_eq!(response.status(), 302);
            let next = format!("/fault/redirect/{}", n - 1);
            assert_eq!(header(&response, "location"), Some(next.as_str()));
        }
        assert_eq!(get(&server, "/fault/redirect/0").await.status(), 200);

        let moved = get(&server, "/fault/redirect/2?code=301").await;
        assert_eq!(moved.status(), 301);
        assert_eq!(
            header(&moved, "location"),
            Some("/fault/redirect/1?code=301")
        );
        let kept = get(&server, "/fault/redirect/1?code=308").await;
        assert_eq!(kept.status(), 308);

        // A client that follows ends at the last hop.
        let followed = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client")
            .get(server.url("/fault/redirect/5"))
            .send()
            .await
            .expect("GET");
        assert_eq!(followed.status(), 200);
        assert_eq!(followed.url().path(), "/fault/redirect/0");

        // The target is the decoded `url` parameter, byte for byte: here
        // an off-site private address whose own escapes must survive.
        let target = "http://10.0.0.1:8080/x%20y?q=1&r=%C3%A9";
        let off_site = get(&server, &redirect_to(target, None)).await;
        assert_eq!(off_site.status(), 302);
        assert_eq!(header(&off_site, "location"), Some(target));
        let metadata = "http://169.254.169.254/latest/";
        let temporary = get(&server, &redirect_to(metadata, Some(307))).await;
        assert_eq!(temporary.status(), 307);
        assert_eq!(header(&temporary, "location"), Some(metadata));
        // Raw non-ASCII is sent as is (obs-text), not refused.
        let raw = get(&server, &redirect_to("http://例え.jp/ä ö", None)).await;
        assert_eq!(raw.status(), 302);
        assert_eq!(
            raw.headers().get("location").map(HeaderValue::as_bytes),
            Some("http://例え.jp/ä ö".as_bytes())
        );

        let a = get(&server, "/fault/loop/a").await;
        assert_eq!(a.status(), 302);
        assert_eq!(header(&a, "location"), Some("/fault/loop/b"));
        let b = get(&server, "/fault/loop/b?code=301").await;
        assert_eq!(b.status(), 301);
        assert_eq!(header(&b, "location"), Some("/fault/loop/a?code=301"));
        let looped = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client")
            .get(server.url("/fault/loop/a"))
            .send()
            .await
            .expect_err("too many redirects");
        assert!(looped.is_redirect(), "{looped}");
        assert!(server.hits("/fault/loop/a") > 3);
        server.stop().await.expect("stop");
    }

    /// Reads the whole body in chunks, counting bytes without keeping them.
    async fn count_body(mut response: reqwest::Response) -> u64 {
        let mut n = 0;
        while let Some(chunk) = response.chunk().await.expect("chunk") {
            n += chunk.len() as u64;
        }
        n
    }

    #[tokio::test]
    async fn huge_bodies_have_exactly_the_size_asked_for() {
        let server = start().await;
        for size in [0, 1, 100_000, 20_000_000] {
            let response = get(&server, &format!("/fault/huge/{size}")).await;
            assert_eq!(response.status(), 200);
            assert_eq!(response.content_length(), Some(size));
            assert_eq!(header(&response, "content-type"), Some(HTML));
            assert_eq!(count_body(response).await, size, "huge/{size}");

            let response = get(&server, &format!("/fault/huge-chunked/{size}")).await;
            assert_eq!(response.status(), 200);
            assert_eq!(header(&response, "content-length"), None);
            assert_eq!(header(&response, "transfer-encoding"), Some("chunked"));
            assert_eq!(count_body(response).await, size, "huge-chunked/{size}");
        }
        let small = get(&server, "/fault/huge/20").await;
        assert_eq!(small.text().await.expect("body"), "<p>filler filler fil");
        settled(&server).await;
        server.stop().await.expect("stop");
    }

    #[tokio::test]
    async fn endless_body_keeps_coming_until_the_client_leaves() {
        let server = start().await;
        let mut response = get(&server, "/fault/endless").await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.content_length(), None);
        let first = response.chunk().await.expect("chunk").expect("data");
        assert!(first.starts_with(b"<!DOCTYPE html>"));
        let mut received = first.len();
        let deadline = StdInstant::now() + Duration::from_millis(300);
        while received < 4 << 20 && StdInstant::now() < deadline {
            received += response
                .chunk()
                .await
                .expect("chunk")
                .expect("never ends")
                .len();
        }
        assert!(received > 1 << 20, "only {received} bytes");
        drop(response);
        settled(&server).await;
        assert_eq!(get(&server, "/").await.status(), 200, "still serving");
        stop_promptly(server).await;
    }

    #[tokio::test]
    async fn trickle_sends_a_page_start_then_bytes_at_the_rate() {
        let server = start().await;
        let sent = StdInstant::now();
        let mut response = get(&server, "/fault/trickle?bytes_per_sec=200").await;
        assert_eq!(response.status(), 200);
        let started = StdInstant::now();
        let mut body = Vec::new();
        while started.elapsed() < Duration::from_millis(300) {
            // A byte is due every 5 ms; a busy machine (the suite beside
            // it) has held one back for over 100 ms, and a stalled
            // trickle holds it for ever.
            let chunk = tokio::time::timeout(Duration::from_secs(1), response.chunk())
                .await
                .expect("a byte every 5 ms")
                .expect("chunk")
                .expect("never ends");
            body.extend_from_slice(&chunk);
        }
        let elapsed = sent.elapsed();
        let dots = body.len() - HTML_START.len();
        assert!(body.starts_with(HTML_START.as_bytes()));
        assert!(body[HTML_START.len()..].iter().all(|&b| b == b'.'));
        // 60 due in the 300 ms read; never more than the rate allows since
        // the request left.
        let most = (elapsed.as_secs_f64() * 200.0) as usize + 1;
        assert!(
            (20..=most).contains(&dots),
            "{dots} bytes in {elapsed:?}, at most {most}"
        );
        drop(response);
        settled(&server).await;

        // Above 1,000 bytes/s the bytes come in 1 ms ticks.
        let mut fast = get(&server, "/fault/trickle?bytes_per_sec=100000").await;
        let mut received = 0;
        let started = StdInstant::now();
        while started.elapsed() < Duration::from_millis(200) {
            received += fast.chunk().await.expect("chunk").expect("data").len();
        }
        assert!(received > 5_000, "{received} bytes in 200 ms");
        drop(fast);
        settled(&server).await;
        stop_promptly(server).await;
    }

    #[test]
    fn trickle_rate_is_exact_over_every_second() {
        for rate in [1, 7, 999, 1_000, 1_001, 2_500, 999_999, MAX_TRICKLE_RATE] {
            let ticks = ticks_per_sec(rate);
            for second in [0, 1, 86_400] {
                let per_tick: Vec<u64> = (second * ticks..(second + 1) * ticks)
                    .map(|tick| trickle_bytes(rate, tick))
                    .collect();
                assert_eq!(per_tick.iter().sum::<u64>(), rate, "{rate}/s");
                assert!(per_tick.iter().all(|&n| n <= DOTS.len() as u64));
                if rate <= 1_000 {
                    assert!(per_tick.iter().all(|&n| n == 1), "a byte a tick");
                }
            }
        }
    }

    #[tokio::test]
    async fn stop_cuts_faults_in_progress_at_once() {
        let server = start().await;
        // An endless body the client does not read, a trickle, a hang and
        // a long delay, all open when the server stops.
        let endless = get(&server, "/fault/endless").await;
        let trickle = get(&server, "/fault/trickle?bytes_per_sec=1").await;
        let huge = get(&server, "/fault/huge/50000000").await;
        let hang = tokio::spawn(client().get(server.url("/fault/hang")).send());
        let delay = tokio::spawn(client().get(server.url("/fault/delay/60000")).send());
        faults_in_progress(&server, 5).await;
        stop_promptly(server).await;
        for response in [endless, trickle, huge] {
            let rest = tokio::time::timeout(PATIENCE, response.bytes())
                .await
                .expect("body ends");
            assert!(rest.is_err(), "cut, not completed");
        }
        for request in [hang, delay] {
            let result = tokio::time::timeout(PATIENCE, request)
                .await
                .expect("client sees the close")
                .expect("join");
            assert!(result.is_err(), "no answer: {result:?}");
        }
    }

    #[tokio::test]
    async fn gzip_page_decodes() {
        let server = start().await;
        let decoded = reqwest::Client::builder()
            .no_proxy()
            .build()
            .expect("client")
            .get(server.url("/fault/gzip"))
            .send()
            .await
            .expect("GET");
        assert_eq!(decoded.status(), 200);
        let text = decoded.text().await.expect("gunzipped");
        assert!(text.contains("sent gzip-encoded"), "{text}");

        let raw = reqwest::Client::builder()
            .no_proxy()
            .no_gzip()
            .build()
            .expect("client")
            .get(server.url("/fault/gzip"))
            .send()
            .await
            .expect("GET");
        assert_eq!(header(&raw, "content-encoding"), Some("gzip"));
        assert_eq!(header(&raw, "content-type"), Some(HTML));
        let bytes = raw.bytes().await.expect("body");
        assert_eq!(bytes[..3], [0x1f, 0x8b, 8]);
        assert_eq!(bytes.len(), text.len() + 10 + 5 + 8);
        server.stop().await.expect("stop");
    }

    #[test]
    fn crc32_and_stored_gzip() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(
            gzip_stored(b""),
            [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 1, 0, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        // Two blocks past 64 KiB; only the last is final.
        let data = vec![b'x'; 70_000];
        let gz = gzip_stored(&data);
        assert_eq!(gz.len(), 10 + 2 * 5 + 70_000 + 8);
        assert_eq!(gz[10], 0);
        assert_eq!(gz[10..15], [0, 0xff, 0xff, 0, 0]);
        assert_eq!(gz[10 + 5 + 65_535], 1);
        assert_eq!(gz[gz.len() - 4..], 70_000u32.to_le_bytes());
    }

    #[tokio::test]
    async fn links_page_points_where_asked() {
        let server = start().await;
        let response = get(
            &server,
            "/fault/links?to=/fault/status/503,/fault/redirect/2%3Fcode%3D301,,/a%26b",
        )
        .await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "content-type"), Some(HTML));
        let text = response.text().await.expect("body");
        let document = scraper::Html::parse_document(&text);
        let selector = scraper::Selector::parse("a[href]").expect("selector");
        let hrefs: Vec<&str> = document
            .select(&selector)
            .filter_map(|a| a.value().attr("href"))
            .collect();
        assert_eq!(
            hrefs,
            ["/fault/status/503", "/fault/redirect/2?code=301", "/a&b"]
        );
        let empty = get(&server, "/fault/links")
            .await
            .text()
            .await
            .expect("body");
        assert!(!empty.contains("<a "));
        server.stop().await.expect("stop");
    }

    #[tokio::test]
    async fn files_are_typed_by_extension_unless_told() {
        let server = start().await;
        for (path, want) in [
            ("/fault/file/report.pdf", Some("application/pdf")),
            ("/fault/file/logo.PNG?x=1", Some("image/png")),
            ("/fault/file/example.py", Some("text/x-python")),
            ("/fault/file/notes.html", Some(HTML)),
            ("/fault/file/blob", Some("application/octet-stream")),
            ("/fault/file/photo?type=image/png", Some("image/png")),
            ("/fault/file/raw?type=none", None),
        ] {
            let response = get(&server, path).await;
            assert_eq!(response.status(), 200, "{path}");
            assert_eq!(header(&response, "content-type"), want, "{path}");
        }
        let png = get(&server, "/fault/file/raw?type=none").await;
        assert_eq!(png.bytes().await.expect("body").len(), 256);
        let text = get(&server, "/fault/downloads")
            .await
            .text()
            .await
            .expect("body");
        for to in DOWNLOADS {
            let href = format!("href=\"/fault/file/{}\"", escape(to));
            assert!(text.contains(&href), "{href} in {text}");
        }
        server.stop().await.expect("stop");
    }

    #[tokio::test]
    async fn robots_txt_is_configurable_and_counted() {
        let site = Site::demo();
        let missing = render(&site, "/robots.txt");
        let server = FixtureServer::start(site).await.expect("start");
        let response = get(&server, "/robots.txt").await;
        assert_eq!(response.status(), 404);
        assert_eq!(
            response.bytes().await.expect("body"),
            missing.body,
            "unchanged by default"
        );

        let rules = "User-agent: *\nDisallow: /fault/\nCrawl-delay: 1\n";
        server.set_robots(Robots::Body(rules.to_owned()));
        let response = get(&server, "/robots.txt").await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "content-type"), Some(TEXT));
        assert_eq!(response.text().await.expect("body"), rules);

        server.set_robots(Robots::Status(503));
        assert_eq!(get(&server, "/robots.txt").await.status(), 503);
        server.set_robots(Robots::Status(42));
        assert_eq!(get(&server, "/robots.txt").await.status(), 500);
        server.set_robots(Robots::Status(101));
        assert_eq!(get(&server, "/robots.txt").await.status(), 500);

        server.set_robots(Robots::Missing);
        assert_eq!(get(&server, "/robots.txt").await.status(), 404);
        assert_eq!(server.hits("/robots.txt"), 6);
        server.stop().await.expect("stop");
    }

    #[tokio::test]
    async fn arrival_times_are_recorded_per_request() {
        let server = start().await;
        let before = StdInstant::now();
        for _ in 0..3 {
            get(&server, "/fault/status/200?times=0").await;
            // Spaces the requests, so their recorded times must be too.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        get(&server, "/list/00001/1").await;
        let after = StdInstant::now();

        let fault = server.arrivals("/fault/status/");
        assert_eq!(fault.len(), 3);
        assert!(fault
            .windows(2)
            .all(|w| w[1] - w[0] >= Duration::from_millis(20)));
        assert!(fault.iter().all(|&t| before <= t && t <= after));
        let all = server.arrivals("");
        assert_eq!(all.len(), 4);
        assert!(all.windows(2).all(|w| w[0] <= w[1]), "in arrival order");
        assert!(server.arrivals("/post/").is_empty());
        assert_eq!(server.hits("/fault/status/200?times=0"), 3);
        assert_eq!(server.total_hits(), 4);
        server.stop().await.expect("stop");
    }

    #[tokio::test]
    async fn raw_tcp_hang_then_close_frees_the_fault() {
        let server = start().await;
        let mut stream = TcpStream::connect(server.addr()).await.expect("connect");
        stream
            .write_all(b"GET /fault/hang HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .expect("write");
        faults_in_progress(&server, 1).await;
        let mut buf = [0; 64];
        let read = tokio::time::timeout(Duration::from_millis(100), stream.read(&mut buf)).await;
        assert!(read.is_err(), "nothing answered");
        drop(stream);
        settled(&server).await;
        stop_promptly(server).await;
    }
}
