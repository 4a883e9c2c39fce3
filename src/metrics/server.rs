//! The metrics endpoint: `GET /metrics` (Prometheus / OpenMetrics text) and
//! `GET /healthz` (`ok`, for a container health check; 503 with the reason
//! when a spider has lost its Redis, see [`super::health`]), on the address
//! of `--metrics-addr`, until the worker stops.

use std::future::Future;
use std::net::SocketAddr;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use tokio::net::TcpListener;

use super::Metrics;
use crate::web::response;

/// Binds `addr` (an error names it) and serves until `stop` resolves.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot serve metrics on {addr}: {e}")))
}

/// Serves `metrics` on `listener` until `stop` resolves. Any `Host` is
/// answered: Prometheus scrapes by whatever name its service discovery
/// gives, and the metrics hold counts, not crawl data.
pub async fn serve(listener: TcpListener, metrics: Metrics, stop: impl Future<Output = ()>) {
    crate::web::serve(
        listener,
        move |request| respond(&metrics, request),
        None,
        stop,
    )
    .await;
}

fn respond(metrics: &Metrics, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    match (request.method(), request.uri().path()) {
        (&Method::GET, "/metrics") => response(
            StatusCode::OK,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode(),
        ),
        (&Method::GET, "/healthz") => match metrics.health().problem() {
            None => response(StatusCode::OK, "text/plain; charset=utf-8", "ok\n".into()),
            Some(problem) => response(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8",
                format!("{problem}\n"),
            ),
        },
        _ => response(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found: try /metrics or /healthz\n".into(),
        ),
    }
}
