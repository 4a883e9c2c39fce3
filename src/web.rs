//! The small HTTP servers crawlworker runs beside a crawl (the metrics
//! endpoint, the dashboard): one accept loop, one task per connection,
//! HTTP/1.1, a plain function from request to response, until told to stop.
//!
//! Nothing a client does may cost the crawl beside it: a server holds at
//! most [`MAX_CONNECTIONS`] connections (one more is closed at once, so a
//! flood of idle clients cannot take the file descriptors the crawl's
//! downloads need), a client must send its request headers within
//! [`HEADER_TIMEOUT`], and a connection lasts at most [`CONNECTION_LIFETIME`].
//! A server that shows crawl data to a browser (the dashboard) also checks
//! the `Host` header ([`HostCheck`]) against DNS rebinding: a page on
//! another site whose name resolves to this machine gets no answer.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, HOST, X_CONTENT_TYPE_OPTIONS};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// The most connections one server holds at once.
pub const MAX_CONNECTIONS: usize = 64;
/// How long a client may take to send its request headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a connection may last, however busy (a scrape or a page's
/// polling makes a new one).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(30);

/// The names a server answers to in the `Host` header: loopback names, IP
/// addresses (a server bound to all addresses is reached by any of the
/// machine's), and the machine's own name. Any other name is a page of
/// another site that resolved its name to this machine (DNS rebinding).
#[derive(Debug, Clone, Default)]
pub struct HostCheck {
    /// The machine's name, as a client may call it.
    hostname: Option<String>,
}

impl HostCheck {
    /// The check for this machine.
    pub fn for_this_machine() -> HostCheck {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty());
        HostCheck { hostname }
    }

    /// Whether `host` (a `Host` header: a name or address, with an
    /// optional port) is one this server answers to.
    pub fn allows(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        let name = match host.strip_prefix('[') {
            Some(rest) => rest.split(']').next().unwrap_or(""),
            None => host.rsplit_once(':').map_or(host.as_str(), |(n, _)| n),
        };
        name == "localhost"
            || name.ends_with(".localhost")
            || name.parse::<std::net::IpAddr>().is_ok()
            || self.hostname.as_deref() == Some(name)
    }
}

/// A response: status, content type and body, never cached.
pub fn response(
    status: StatusCode,
    content_type: &'static str,
    body: String,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

/// Serves `respond` on `listener` until `stop` resolves, within the limits
/// above; with `hosts`, a request naming another host is refused (403).
pub async fn serve<F>(
    listener: TcpListener,
    respond: F,
    hosts: Option<HostCheck>,
    stop: impl Future<Output = ()>,
) where
    F: Fn(&Request<Incoming>) -> Response<Full<Bytes>> + Send + Sync + 'static,
{
    let respond =
        Arc::new(
            move |request: &Request<Incoming>| match (&hosts, request.headers().get(HOST)) {
                (Some(check), host)
                    if !host
                        .and_then(|h| h.to_str().ok())
                        .is_some_and(|h| check.allows(h)) =>
                {
                    response(
                        StatusCode::FORBIDDEN,
                        "text/plain; charset=utf-8",
                        "this server answers to localhost, an IP address or this machine's name\n"
                            .into(),
                    )
                }
                _ => respond(request),
            },
        );
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            () = &mut stop => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((stream, _)) = accepted else {
            // Out of file descriptors or the like: do not spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        // Over the cap: closed at once (dropped), holding nothing.
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue;
        };
        let respond = respond.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let response = respond(&request);
                async move { Ok::<_, Infallible>(response) }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_LIFETIME, connection).await;
            drop(slot);
        });
    }
}
