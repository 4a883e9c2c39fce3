//! The connection cap (`connections`) against a real keep-alive HTTP server
//! on 127.0.0.1: many listening ports play many hosts, and the server
//! counts the connections open at each moment from its side of the socket.
//! Nothing here contacts an address off this machine: targets are ports on
//! 127.0.0.1, or 127.0.0.0/8 literals carried by a proxy on 127.0.0.1.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::*;

/// Loopback ports serving HTTP/1.1 with keep-alive, one per "host".
struct Hosts {
    addrs: Vec<SocketAddr>,
    shared: Arc<Shared>,
}

/// What every port's connections share.
struct Shared {
    /// Connections accepted and not yet closed.
    open: AtomicUsize,
    /// The most `open` has been.
    peak: AtomicUsize,
    /// Connections accepted, in all.
    accepted: AtomicUsize,
    /// `/slow` requests that have arrived and wait for `release`.
    waiting: AtomicUsize,
    release: watch::Sender<bool>,
}

impl Hosts {
    /// Starts `n` ports on 127.0.0.1. Each answers `/set` with a cookie,
    /// `/slow` once the test releases it, and anything else with the
    /// request's host and its Cookie header: `<host> cookie=<cookie>`.
    async fn start(n: usize) -> Hosts {
        let shared = Arc::new(Shared {
            open: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            accepted: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            release: watch::channel(false).0,
        });
        let mut addrs = Vec::new();
        for _ in 0..n {
            let listener = TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind a port on 127.0.0.1");
            addrs.push(listener.local_addr().expect("the port's address"));
            let shared = shared.clone();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    shared.accepted.fetch_add(1, Ordering::SeqCst);
                    let now = shared.open.fetch_add(1, Ordering::SeqCst) + 1;
                    shared.peak.fetch_max(now, Ordering::SeqCst);
                    let shared = shared.clone();
                    tokio::spawn(async move {
                        let answer = {
                            let shared = shared.clone();
                            service_fn(move |request| answer(shared.clone(), request))
                        };
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), answer)
                            .await;
                        shared.open.fetch_sub(1, Ordering::SeqCst);
                    });
                }
            });
        }
        Hosts { addrs, shared }
    }

    fn url(&self, host: usize, path: &str) -> String {
        format!("http://{}{path}", self.addrs[host])
    }

    fn open(&self) -> usize {
        self.shared.open.load(Ordering::SeqCst)
    }

    fn peak(&self) -> usize {
        self.shared.peak.load(Ordering::SeqCst)
    }

    fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Waits until at most `limit` connections are open: a closed client
    /// connection reaches the server a moment later. Fails loudly after
    /// ten seconds.
    async fn settle(&self, limit: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.open() > limit {
            assert!(
                Instant::now() < deadline,
                "{} connections still open, expected at most {limit}",
                self.open()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until `n` `/slow` requests are at the server.
    async fn slow_arrived(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.shared.waiting.load(Ordering::SeqCst) < n {
            assert!(Instant::now() < deadline, "the slow requests never arrived");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn release_slow(&self) {
        self.shared.release.send_replace(true);
    }
}

async fn answer(
    shared: Arc<Shared>,
    request: hyper::Request<Incoming>,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    let host = request
        .uri()
        .host()
        .map(str::to_string)
        .or_else(|| {
            let h = request.headers().get(hyper::header::HOST)?;
            h.to_str().ok().map(str::to_string)
        })
        .unwrap_or_default();
    let cookie = request
        .headers()
        .get(hyper::header::COOKIE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let mut response =
        hyper::Response::new(Full::new(Bytes::from(format!("{host} cookie={cookie}"))));
    match request.uri().path() {
        "/set" => {
            response.headers_mut().insert(
                hyper::header::SET_COOKIE,
                hyper::header::HeaderValue::from_static("session=kept; Path=/"),
            );
        }
        "/slow" => {
            let mut released = shared.release.subscribe();
            shared.waiting.fetch_add(1, Ordering::SeqCst);
            let _ = released.wait_for(|r| *r).await;
        }
        _ => {}
    }
    Ok(response)
}

/// Settings for loopback servers with a cap of `cap` connections.
fn capped(cap: u32) -> Settings {
    Settings {
        allow_private_networks: true,
        max_open_connections: cap,
        ..Settings::default()
    }
}

fn downloader(settings: &Settings) -> HttpClient {
    HttpClient::with_env(settings, |_| None).expect("a downloader for these settings")
}

async fn get(d: &HttpClient, url: String) -> String {
    let fetched = d
        .fetch(&Request::new(url.clone()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fetched.status, 200, "{url}");
    String::from_utf8(fetched.body).expect("a text body")
}

fn retired(d: &HttpClient) -> usize {
    d.inner.routes.iter().map(|r| r.connections.retired()).sum()
}

#[tokio::test]
async fn open_connections_stay_under_the_cap_over_many_hosts() {
    const CAP: usize = 8;
    const HOSTS: usize = 48;
    let hosts = Hosts::start(HOSTS).await;
    let d = downloader(&capped(CAP as u32));
    for round in 0..2 {
        for host in 0..HOSTS {
            get(&d, hosts.url(host, "/")).await;
            // One request at a time: the one in flight, and the connection
            // of the last one the client has closed but the server has not
            // yet seen close.
            assert!(
                hosts.peak() <= CAP + 2,
                "round {round}, host {host}: {} connections were open at once",
                hosts.peak()
            );
        }
    }
    // Without the cap all 48 would stay open for the pool's idle timeout.
    hosts.settle(CAP).await;
    assert!(retired(&d) >= 2 * HOSTS / (CAP / 2) - 1, "{d:?}");
    assert!(d.inner.ledger.held() <= CAP, "{d:?}");
}

#[tokio::test]
async fn the_cap_holds_while_slow_responses_keep_old_clients_alive() {
    const CAP: usize = 8;
    const HOSTS: usize = 40;
    let hosts = Arc::new(Hosts::start(HOSTS).await);
    let d = downloader(&capped(CAP as u32));
    // Each slow request holds a clone of the client it started on until
    // its response head arrives, and with it that client's pool: two of
    // them keep two retired generations' idle connections open.
    let mut slow = Vec::new();
    let mut next = 0;
    for _ in 0..2 {
        let url = hosts.url(next, "/slow");
        let d2 = d.clone();
        slow.push(tokio::spawn(async move { get(&d2, url).await }));
        hosts.slow_arrived(slow.len()).await;
        // Fill the rest of that generation's share.
        for host in next + 1..next + CAP / 2 {
            get(&d, hosts.url(host, "/")).await;
        }
        next += CAP / 2;
    }
    assert_eq!(retired(&d), 1, "{d:?}");
    // The two live generations hold the cap: further requests go without
    // keep-alive, each connection closed when its response ends.
    let before = hosts.accepted();
    for _ in 0..3 {
        for host in next..HOSTS {
            get(&d, hosts.url(host, "/")).await;
        }
    }
    assert_eq!(hosts.accepted() - before, 3 * (HOSTS - next), "no reuse");
    // In flight: the two slow requests and one other.
    assert!(
        hosts.peak() <= CAP + 3 + 1,
        "{} connections were open at once",
        hosts.peak()
    );
    hosts.release_slow();
    for task in slow {
        task.await.expect("the slow request");
    }
    // The pinned generation dies with its last request; keep-alive is
    // back.
    get(&d, hosts.url(next, "/")).await;
    let before = hosts.accepted();
    get(&d, hosts.url(next, "/")).await;
    assert_eq!(hosts.accepted(), before, "the connection is reused again");
    hosts.settle(CAP).await;
}

#[tokio::test]
async fn one_host_keeps_one_connection_across_requests() {
    let hosts = Hosts::start(1).await;
    let d = downloader(&capped(8));
    for _ in 0..50 {
        get(&d, hosts.url(0, "/")).await;
    }
    assert_eq!(hosts.accepted(), 1, "the keep-alive connection was reused");
    assert_eq!(retired(&d), 0);
    assert_eq!(hosts.open(), 1);
}

#[tokio::test]
async fn cookies_survive_a_rotation() {
    let hosts = Hosts::start(6).await;
    let d = downloader(&Settings {
        cookies_enabled: true,
        ..capped(2)
    });
    get(&d, hosts.url(0, "/set")).await;
    for host in 1..6 {
        get(&d, hosts.url(host, "/")).await;
    }
    assert!(retired(&d) >= 4, "{d:?}");
    // A new connection from a new client, and the same jar.
    let before = hosts.accepted();
    let body = get(&d, hosts.url(0, "/")).await;
    assert_eq!(hosts.accepted(), before + 1);
    assert!(body.ends_with("cookie=session=kept"), "{body}");
}

#[tokio::test]
async fn a_proxy_survives_a_rotation() {
    let proxy = Hosts::start(1).await;
    let d = downloader(&Settings {
        proxies: vec![format!("http://{}", proxy.addrs[0])],
        ..capped(2)
    });
    // Never contacted: the proxy on 127.0.0.1 answers for them.
    for i in 2..10 {
        let body = get(&d, format!("http://127.0.0.{i}:9/")).await;
        assert!(body.starts_with(&format!("127.0.0.{i} ")), "{body}");
    }
    assert!(retired(&d) >= 6, "{d:?}");
    proxy.settle(2).await;
}

#[tokio::test]
async fn a_cap_of_zero_keeps_no_connection() {
    let hosts = Hosts::start(1).await;
    let d = downloader(&capped(0));
    for _ in 0..3 {
        get(&d, hosts.url(0, "/")).await;
    }
    assert_eq!(hosts.accepted(), 3);
    hosts.settle(0).await;
}
