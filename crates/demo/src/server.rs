//! A loopback HTTP/1.1 server for the demo site.
//!
//! [`serve`] runs on a listener the caller binds and stops when the caller's
//! shutdown future resolves (the mini-redis shape), so tests start it on
//! port 0. [`DemoServer`] wraps that for tests and benchmarks: it binds
//! 127.0.0.1:0, counts requests per target, and stops on
//! [`DemoServer::stop`] or when dropped.
//!
//! This module owns sockets and connections only; every page comes from
//! [`render`], which is pure. A caller may add [`Routes`] that are asked
//! first (the test kit's misbehaving `/fault/` routes plug in there; the
//! demo binary adds none), with [`Reply`] for answers that come late or
//! never, and [`Connection`] to mark them in progress so that stopping the
//! server cuts such connections instead of waiting for them.
//!
//! One route of the site never answers: [`rendered::HANG_PATH`], which
//! the JavaScript section's `never-settles` page requests; it is held open
//! on its own connection (other connections go on) until the server stops.
//!
//! Hits are recorded for every request; a [`DemoServer`] also records when
//! each request arrived ([`DemoServer::arrivals`]), so a test can measure
//! the request rate the server saw.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};

use super::api;
use super::members::{self, Members};
use super::pages::{render, Page};
use super::rendered;
use super::site::Site;

/// How long open connections may take to finish their current response
/// after shutdown before they are cut.
const DRAIN_DEADLINE: Duration = Duration::from_secs(5);

/// Pause after a failed `accept` (e.g. out of file descriptors) so the loop
/// does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// The body type of every response. Boxed so that added routes can stream
/// (slow, endless or broken bodies) without changing the service's type.
pub type ResponseBody = BoxBody<Bytes, io::Error>;

/// Routes answered before the site's pages, for any method.
pub trait Routes: Send + Sync + 'static {
    /// The reply for `request`, or `None` to let the site answer it.
    fn route(&self, conn: &Connection, request: &Request<Incoming>) -> Option<Reply>;
}

/// What an added route knows of the connection it answers on.
#[derive(Debug, Clone)]
pub struct Connection {
    /// Responses in progress on this connection: if any when the server
    /// stops, the connection is cut instead of drained.
    open: Arc<AtomicUsize>,
    /// Becomes true when the server stops.
    stop: watch::Receiver<bool>,
}

impl Connection {
    fn new(stop: watch::Receiver<bool>) -> Connection {
        Connection {
            open: Arc::new(AtomicUsize::new(0)),
            stop,
        }
    }

    /// Becomes true when the server stops, so that slow answers end at once.
    pub fn stop(&self) -> watch::Receiver<bool> {
        self.stop.clone()
    }

    /// Counts one response as in progress on this connection, and in
    /// `also` (e.g. a server-wide counter), until the token is dropped.
    pub fn in_progress(&self, also: &Arc<AtomicUsize>) -> InProgress {
        InProgress::new([Arc::clone(&self.open), Arc::clone(also)])
    }

    fn any_open(&self) -> bool {
        self.open.load(Ordering::SeqCst) > 0
    }
}

/// One response counted as in progress (see [`Connection::in_progress`]),
/// until dropped.
#[derive(Debug)]
pub struct InProgress([Arc<AtomicUsize>; 2]);

impl InProgress {
    fn new(counters: [Arc<AtomicUsize>; 2]) -> InProgress {
        for counter in &counters {
            counter.fetch_add(1, Ordering::SeqCst);
        }
        InProgress(counters)
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        for counter in &self.0 {
            counter.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// How the server answers one request.
pub enum Reply {
    /// Answer now.
    Now(Response<ResponseBody>),
    /// Answer after a pause; if the server stops first, close the
    /// connection without answering.
    After {
        delay: Duration,
        response: Response<ResponseBody>,
        in_progress: InProgress,
        stop: watch::Receiver<bool>,
    },
    /// Never answer; close the connection without answering when the
    /// server stops.
    Never {
        in_progress: InProgress,
        stop: watch::Receiver<bool>,
    },
}

impl Reply {
    /// The response, or an error (which makes hyper close the connection
    /// without answering) when the server stops first.
    async fn resolve(self) -> io::Result<Response<ResponseBody>> {
        match self {
            Reply::Now(response) => Ok(response),
            Reply::After {
                delay,
                response,
                in_progress,
                mut stop,
            } => {
                tokio::select! {
                    () = tokio::time::sleep(delay) => {
                        drop(in_progress);
                        Ok(response)
                    }
                    // Err: the server is gone; stop as well.
                    _ = stop.wait_for(|stop| *stop) => Err(stopping()),
                }
            }
            Reply::Never {
                in_progress,
                mut stop,
            } => {
                let _in_progress = in_progress;
                // Err: the server is gone; stop as well.
                let _ = stop.wait_for(|stop| *stop).await;
                Err(stopping())
            }
        }
    }
}

fn stopping() -> io::Error {
    io::Error::other("demo server stopping")
}

/// Request counts per request target (path and query as received) and,
/// if made with [`Hits::with_arrivals`], the arrival time of every request.
/// Clones share the counts.
#[derive(Debug, Clone, Default)]
pub struct Hits(Arc<Mutex<Counts>>);

#[derive(Debug, Default)]
struct Counts {
    by_target: HashMap<Arc<str>, u64>,
    /// Every request's arrival time and target, in arrival order. `None`
    /// unless asked for: a long-running server would grow it for ever.
    arrivals: Option<Vec<(Instant, Arc<str>)>>,
    /// The bodies of the requests whose body the API read (POSTs), by
    /// target, in arrival order; kept with the arrivals only.
    bodies: HashMap<Arc<str>, Vec<Vec<u8>>>,
}

impl Hits {
    /// Counts that also record each request's arrival time, for
    /// [`Hits::times`]. [`DemoServer`] uses these.
    pub fn with_arrivals() -> Hits {
        Hits(Arc::new(Mutex::new(Counts {
            by_target: HashMap::new(),
            arrivals: Some(Vec::new()),
            bodies: HashMap::new(),
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn record(&self, target: &str) {
        let now = Instant::now();
        let mut counts = self.lock();
        let target = match counts.by_target.get_key_value(target) {
            Some((known, _)) => Arc::clone(known),
            None => Arc::from(target),
        };
        if let Some(arrivals) = &mut counts.arrivals {
            arrivals.push((now, Arc::clone(&target)));
        }
        *counts.by_target.entry(target).or_insert(0) += 1;
    }

    /// [`Hits::record`], keeping the request's body too (with arrivals).
    fn record_with_body(&self, target: &str, body: &[u8]) {
        self.record(target);
        let mut counts = self.lock();
        if counts.arrivals.is_some() {
            counts
                .bodies
                .entry(Arc::from(target))
                .or_default()
                .push(body.to_vec());
        }
    }

    /// The bodies of the requests to `target` whose body the server read
    /// (`POST /api/search`), in arrival order. Always empty unless made
    /// with [`Hits::with_arrivals`].
    pub fn bodies(&self, target: &str) -> Vec<Vec<u8>> {
        self.lock().bodies.get(target).cloned().unwrap_or_default()
    }

    /// Requests received for this exact target, e.g.
    /// `/list/00002/2?order=%D7%EE%D0%C2`.
    pub fn get(&self, target: &str) -> u64 {
        self.lock().by_target.get(target).copied().unwrap_or(0)
    }

    /// A copy of all counts.
    pub fn snapshot(&self) -> HashMap<String, u64> {
        self.lock()
            .by_target
            .iter()
            .map(|(target, &n)| (target.to_string(), n))
            .collect()
    }

    /// Requests received in all.
    pub fn total(&self) -> u64 {
        self.lock().by_target.values().sum()
    }

    /// When the requests whose target (path and query) starts with `prefix`
    /// arrived, in arrival order (`""` for all). Always empty unless made
    /// with [`Hits::with_arrivals`].
    pub fn times(&self, prefix: &str) -> Vec<Instant> {
        self.lock()
            .arrivals
            .iter()
            .flatten()
            .filter(|(_, target)| target.starts_with(prefix))
            .map(|&(at, _)| at)
            .collect()
    }
}

/// Serves `site` on `listener` until `shutdown` resolves: one task per
/// connection, HTTP/1.1 keep-alive, every request recorded in `hits`. On
/// shutdown it stops accepting, lets open connections finish the response
/// in progress (idle ones, and those with a slow answer of an added route
/// in progress, close at once), cuts whatever is left after a few seconds,
/// and returns.
///
/// Errors on single connections or accepts are logged and do not stop the
/// server.
pub async fn serve(
    listener: TcpListener,
    site: Arc<Site>,
    hits: Hits,
    options: ServeOptions,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let app = App {
        site,
        hits,
        options,
        members: Arc::default(),
        held_open: Arc::default(),
    };
    serve_app(listener, Arc::new(app), shutdown).await
}

async fn serve_app(
    listener: TcpListener,
    app: Arc<App>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(connection(stream, peer, Arc::clone(&app), stop_rx.clone()));
                }
                Err(error) => {
                    tracing::warn!(%error, "demo server: accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            // Reap finished connections so the set does not grow forever.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    // Every receiver sees this, including connections still being set up.
    stop_tx.send_replace(true);
    let drained = tokio::time::timeout(DRAIN_DEADLINE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = connections.len(),
            "demo server: connections still open after the drain deadline; cutting them"
        );
        connections.shutdown().await;
    }
    Ok(())
}

/// What every connection shares.
struct App {
    site: Arc<Site>,
    hits: Hits,
    options: ServeOptions,
    /// The members-only area's sessions and logins.
    members: Arc<Members>,
    /// Requests held open without an answer ([`rendered::HANG_PATH`]).
    held_open: Arc<AtomicUsize>,
}

/// How the server behaves beyond serving the pages.
#[derive(Clone, Default)]
pub struct ServeOptions {
    /// Added before every response, so a crawl lasts long enough for tests
    /// to kill workers mid-crawl (and the quick start to show progress).
    pub latency: Duration,
    /// Asked before the site's pages (none for the demo binary).
    pub routes: Option<Arc<dyn Routes>>,
    /// Added to every HTML page of the site (none by default).
    pub chrome: crate::Chrome,
}

/// Serves one connection until the client closes it or shutdown is
/// announced on `stop`.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Arc<App>,
    mut stop: watch::Receiver<bool>,
) {
    let conn_state = Connection::new(stop.clone());
    let service = service_fn({
        let conn_state = conn_state.clone();
        move |request: Request<Incoming>| {
            let (method, path) = (request.method().as_str(), request.uri().path());
            let with_body = api::takes_body(method, path) || members::takes_body(method, path);
            let reply = (!with_body).then(|| respond(&app, &conn_state, &request));
            let app = Arc::clone(&app);
            async move {
                let latency = app.options.latency;
                if !latency.is_zero() {
                    tokio::time::sleep(latency).await;
                }
                match reply {
                    // Err (a slow answer cut short by shutdown) makes hyper
                    // close the connection without an answer.
                    Some(reply) => reply.resolve().await,
                    None => Ok(respond_with_body(&app, request).await),
                }
            }
        }
    });
    let conn = http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let mut stopping = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!(%peer, %error, "demo server: connection ended with an error");
                }
                return;
            }
            // Err means the server is gone: stop as well.
            _ = stop.wait_for(|stop| *stop), if !stopping => {
                if conn_state.any_open() {
                    // A hanging, delayed or endless response would hold the
                    // drain until its deadline: cut the connection instead.
                    tracing::debug!(%peer, "demo server: cutting a connection with a slow answer in progress");
                    return;
                }
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Answers one request. The request body is not read (the API's POSTs
/// are answered by `respond_with_body`).
fn respond(app: &App, conn: &Connection, request: &Request<Incoming>) -> Reply {
    let uri = request.uri();
    let target = uri
        .path_and_query()
        .map_or_else(|| uri.path(), |pq| pq.as_str());
    app.hits.record(target);

    if let Some(routes) = &app.options.routes {
        if let Some(reply) = routes.route(conn, request) {
            return reply;
        }
    }

    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = Response::new(full(Bytes::from_static(b"method not allowed\n")));
        *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Reply::Now(response);
    }
    if rendered::holds_open(request.uri().path()) {
        return Reply::Never {
            in_progress: conn.in_progress(&app.held_open),
            stop: conn.stop(),
        };
    }
    if request.uri().path().starts_with("/members/") {
        let cookies = request
            .headers()
            .get(hyper::header::COOKIE)
            .and_then(|v| v.to_str().ok());
        return Reply::Now(members_response(
            app.members.get(request.uri().path(), cookies),
        ));
    }
    let mut page = render(&app.site, target);
    if page.content_type.starts_with("text/html") {
        page.body = app.options.chrome.dress(page.body);
    }
    Reply::Now(page_response(page))
}

fn members_response(answer: members::Answer) -> Response<ResponseBody> {
    let mut response = Response::new(full(Bytes::from(answer.body)));
    *response.status_mut() =
        StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    for (name, value) in answer.headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

/// Answers a request of the JSON API that reads its body (a POST search):
/// the body, at most [`MAX_REQUEST_BODY`] bytes, is recorded with the hit.
async fn respond_with_body(app: &App, request: Request<Incoming>) -> Response<ResponseBody> {
    let path = request.uri().path().to_string();
    let cookies = request
        .headers()
        .get(hyper::header::COOKIE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = http_body_util::Limited::new(request.into_body(), MAX_REQUEST_BODY)
        .collect()
        .await
        .map(|b| b.to_bytes());
    let Ok(body) = body else {
        app.hits.record(&path);
        let mut response =
            Response::new(full(Bytes::from_static(b"request body too large or cut\n")));
        *response.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
        return response;
    };
    if members::takes_body("POST", &path) {
        // The body holds a password: counted, not kept.
        app.hits.record(&path);
        let delay = app.members.login_delay();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        return members_response(app.members.post_login(&body, cookies.as_deref()));
    }
    app.hits.record_with_body(&path, &body);
    page_response(api::post(&app.site, &path, &body))
}

/// The largest request body the demo API reads.
const MAX_REQUEST_BODY: usize = 64 * 1024;

fn page_response(page: Page) -> Response<ResponseBody> {
    let mut response = Response::new(full(Bytes::from(page.body)));
    *response.status_mut() =
        StatusCode::from_u16(page.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = HeaderValue::from_str(&page.content_type)
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
    response.headers_mut().insert(CONTENT_TYPE, content_type);
    response
}

/// A whole body at once.
pub fn full(bytes: Bytes) -> ResponseBody {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

/// The demo server running on 127.0.0.1 on a free port, for tests,
/// benchmarks and the quick start. Dropping it stops the server too, but
/// only [`DemoServer::stop`] waits for it.
#[derive(Debug)]
pub struct DemoServer {
    /// Where it listens.
    addr: SocketAddr,
    /// Requests received per target, so tests can check nothing was fetched
    /// twice, and their arrival times, so tests can measure the rate.
    hits: Hits,
    /// Sending (or dropping) it starts the shutdown.
    shutdown: Option<oneshot::Sender<()>>,
    /// The task running the server (`serve_app`).
    task: Option<JoinHandle<io::Result<()>>>,
    /// The members-only area, for its login counts.
    members: Arc<Members>,
}

impl DemoServer {
    /// Binds 127.0.0.1 on a free port and starts serving `site`. Must be
    /// called inside a Tokio runtime.
    pub async fn start(site: impl Into<Arc<Site>>) -> io::Result<DemoServer> {
        DemoServer::start_with(site, ServeOptions::default()).await
    }

    /// [`DemoServer::start`] with [`ServeOptions`].
    pub async fn start_with(
        site: impl Into<Arc<Site>>,
        options: ServeOptions,
    ) -> io::Result<DemoServer> {
        DemoServer::start_on(site, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), options).await
    }

    /// [`DemoServer::start_with`] on a given loopback address (for tests
    /// whose data names the port).
    pub async fn start_on(
        site: impl Into<Arc<Site>>,
        addr: SocketAddr,
        options: ServeOptions,
    ) -> io::Result<DemoServer> {
        if !addr.ip().is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the demo server only listens on loopback, not {addr}"),
            ));
        }
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let hits = Hits::with_arrivals();
        let members = Arc::<Members>::default();
        let app = App {
            site: site.into(),
            hits: hits.clone(),
            options,
            members: Arc::clone(&members),
            held_open: Arc::default(),
        };
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_app(listener, Arc::new(app), async move {
            // A dropped sender means the handle is gone: stop as well.
            let _ = shutdown_rx.await;
        }));
        tracing::debug!(%addr, "demo server listening");
        Ok(DemoServer {
            addr,
            hits,
            shutdown: Some(shutdown_tx),
            task: Some(task),
            members,
        })
    }

    /// The members-only area: its settings and login counts.
    pub fn members(&self) -> &Members {
        &self.members
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The absolute URL of a path such as `/list/00001/1`.
    pub fn url(&self, path_and_query: &str) -> String {
        format!("{}{path_and_query}", self.base_url())
    }

    /// Requests received for this exact target (path and query as sent by
    /// the client, e.g. `/list/00002/2?order=%D7%EE%D0%C2`).
    pub fn hits(&self, path_and_query: &str) -> u64 {
        self.hits.get(path_and_query)
    }

    /// All request counts, by target.
    pub fn hit_counts(&self) -> HashMap<String, u64> {
        self.hits.snapshot()
    }

    /// Requests received in all.
    pub fn total_hits(&self) -> u64 {
        self.hits.total()
    }

    /// The bodies of the POSTs to `path` the API read, in arrival order.
    pub fn bodies(&self, path: &str) -> Vec<Vec<u8>> {
        self.hits.bodies(path)
    }

    /// When the requests whose target (path and query) starts with
    /// `prefix` arrived, in arrival order (`""` for all): the rate the
    /// server saw, e.g. for politeness tests.
    pub fn arrivals(&self, prefix: &str) -> Vec<Instant> {
        self.hits.times(prefix)
    }

    /// Stops accepting, lets open connections finish (those with a slow
    /// answer of an added route in progress are cut at once), and waits for
    /// the server to end.
    pub async fn stop(mut self) -> io::Result<()> {
        if let Some(shutdown) = self.shutdown.take() {
            // Err: the server already ended; the join below reports how.
            let _ = shutdown.send(());
        }
        match self.task.take() {
            Some(task) => task.await.map_err(io::Error::other)?,
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    use super::*;

    /// One parsed HTTP/1.1 response.
    struct RawResponse {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    }

    impl RawResponse {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        }
    }

    async fn send(stream: &mut BufReader<TcpStream>, method: &str, target: &str, close: bool) {
        let connection = if close { "close" } else { "keep-alive" };
        let request = format!(
            "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: {connection}\r\n\r\n"
        );
        stream
            .get_mut()
            .write_all(request.as_bytes())
            .await
            .expect("write request");
    }

    /// Reads one response framed by Content-Length.
    async fn read_response(stream: &mut BufReader<TcpStream>, head_only: bool) -> RawResponse {
        let mut status_line = String::new();
        stream
            .read_line(&mut status_line)
            .await
            .expect("status line");
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status code");
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            stream.read_line(&mut line).await.expect("header line");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').expect("header");
            headers.push((name.to_owned(), value.trim().to_owned()));
        }
        let mut response = RawResponse {
            status,
            headers,
            body: Vec::new(),
        };
        if !head_only {
            let length: usize = response
                .header("content-length")
                .and_then(|l| l.parse().ok())
                .expect("content-length");
            response.body = vec![0; length];
            stream.read_exact(&mut response.body).await.expect("body");
        }
        response
    }

    async fn connect(server: &DemoServer) -> BufReader<TcpStream> {
        BufReader::new(TcpStream::connect(server.addr()).await.expect("connect"))
    }

    #[tokio::test]
    async fn serves_pages_with_keep_alive_and_counts_hits() {
        let site = Site::demo();
        let expected_list = render(&site, "/list/00001/1");
        let server = DemoServer::start(site).await.expect("start");
        assert!(server.addr().ip().is_loopback());
        assert_eq!(
            server.base_url(),
            format!("http://127.0.0.1:{}", server.addr().port())
        );

        let mut stream = connect(&server).await;
        send(&mut stream, "GET", "/list/00001/1", false).await;
        let list = read_response(&mut stream, false).await;
        assert_eq!(list.status, 200);
        assert_eq!(
            list.header("content-type"),
            Some("text/html; charset=utf-8")
        );
        assert_eq!(list.body, expected_list.body);

        // Same connection, GBK forum with the charset only in <meta>, and
        // the GBK-encoded query a browser would send.
        let target = "/list/00002/2?order=%D7%EE%D0%C2";
        send(&mut stream, "GET", target, false).await;
        let gbk = read_response(&mut stream, false).await;
        assert_eq!(gbk.status, 200);
        assert_eq!(gbk.header("content-type"), Some("text/html"));
        let (text, _, malformed) = encoding_rs::GBK.decode(&gbk.body);
        assert!(!malformed);
        assert!(text.contains("<meta charset=\"gbk\">"));
        assert!(text.contains("下一页"));

        send(&mut stream, "GET", "/list/00003/1", false).await;
        let based = read_response(&mut stream, false).await;
        assert_eq!(based.header("content-type"), Some("text/html; charset=GBK"));

        send(&mut stream, "GET", "/no/such/page", true).await;
        let missing = read_response(&mut stream, false).await;
        assert_eq!(missing.status, 404);
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).await.expect("server closes");
        assert!(rest.is_empty());

        assert_eq!(server.hits("/list/00001/1"), 1);
        assert_eq!(server.hits(target), 1);
        assert_eq!(
            server.hits("/list/00002/2"),
            0,
            "the query is part of the key"
        );
        assert_eq!(server.hits("/no/such/page"), 1);
        assert_eq!(server.total_hits(), 4);
        assert!(server.hit_counts().values().all(|&n| n == 1));
        server.stop().await.expect("stop");
    }

    #[tokio::test]
    async fn head_and_other_methods() {
        let server = DemoServer::start(Site::demo()).await.expect("start");
        let mut stream = connect(&server).await;
        send(&mut stream, "HEAD", "/post/1001", false).await;
        let head = read_response(&mut stream, true).await;
        assert_eq!(head.status, 200);
        send(&mut stream, "POST", "/post/1001", true).await;
        let post = read_response(&mut stream, false).await;
        assert_eq!(post.status, 405);
        assert_eq!(post.header("allow"), Some("GET, HEAD"));
        assert_eq!(server.hits("/post/1001"), 2);
        server.stop().await.expect("stop");
    }

    #[tokio::test]
    async fn stop_closes_idle_keep_alive_connections_and_the_port() {
        let server = DemoServer::start(Site::demo()).await.expect("start");
        let addr = server.addr();
        let mut idle = connect(&server).await;
        send(&mut idle, "GET", "/", false).await;
        assert_eq!(read_response(&mut idle, false).await.status, 200);

        tokio::time::timeout(Duration::from_secs(2), server.stop())
            .await
            .expect("stop does not wait for idle connections")
            .expect("stop");
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(2), idle.read_to_end(&mut rest)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "idle connection closed"
        );
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "no longer listening"
        );
    }

    #[tokio::test]
    async fn the_hang_route_is_held_open_without_blocking_others() {
        let server = DemoServer::start(Site::demo()).await.expect("start");
        let mut held = connect(&server).await;
        send(&mut held, "GET", rendered::HANG_PATH, false).await;
        let mut other = connect(&server).await;
        send(&mut other, "GET", "/js/data/ping?n=1", false).await;
        let ping = tokio::time::timeout(Duration::from_secs(2), read_response(&mut other, false))
            .await
            .expect("other requests are answered");
        assert_eq!(ping.status, 200);
        assert_eq!(ping.header("content-type"), Some("application/json"));
        let mut byte = [0u8; 1];
        let waited =
            tokio::time::timeout(Duration::from_millis(300), held.get_mut().read(&mut byte)).await;
        assert!(waited.is_err(), "no answer to {}", rendered::HANG_PATH);
        assert_eq!(server.hits(rendered::HANG_PATH), 1);

        tokio::time::timeout(Duration::from_secs(2), server.stop())
            .await
            .expect("stop cuts the held request at once")
            .expect("stop");
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(2), held.read_to_end(&mut rest)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "held connection closed"
        );
    }

    #[tokio::test]
    async fn serve_returns_when_shutdown_resolves() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind");
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(
            listener,
            Arc::new(Site::demo()),
            Hits::default(),
            ServeOptions::default(),
            async move {
                let _ = rx.await;
            },
        ));
        tx.send(()).expect("server running");
        let result = tokio::time::timeout(Duration::from_secs(2), task).await;
        assert!(matches!(result, Ok(Ok(Ok(())))));
    }
}
