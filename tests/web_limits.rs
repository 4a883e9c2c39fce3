//! The web servers beside a crawl (metrics, dashboard) cannot cost the
//! crawl: idle or half-sent connections are closed after the header
//! timeout, a server holds a bounded number of connections (the rest are
//! closed at once, keeping no file descriptor), responses say `nosniff`,
//! and the dashboard answers only to this machine's names (a page of
//! another site whose name resolves here — DNS rebinding — is refused).

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crawlworker::web::{response, serve, HostCheck, HEADER_TIMEOUT, MAX_CONNECTIONS};
use hyper::StatusCode;
use tokio::net::TcpListener;

/// Serves "ok" on a free loopback port with `hosts`; returns the address
/// and what stops it.
async fn server(
    hosts: Option<HostCheck>,
) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve(
        listener,
        |_| response(StatusCode::OK, "text/plain", "ok\n".into()),
        hosts,
        async move {
            let _ = stopped.await;
        },
    ));
    (addr, stop)
}

/// Whether the server closed `stream` (a read gives end of file or an
/// error) within `wait`.
fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 16];
    !matches!(stream.read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_and_their_number_is_bounded() {
    let (addr, _stop) = server(None).await;
    let started = Instant::now();
    let opened = tokio::task::spawn_blocking(move || {
        (0..MAX_CONNECTIONS + 100)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    let results = tokio::task::spawn_blocking(move || {
        let mut opened = opened;
        // Those over the cap are closed at once; the others once they have
        // sent no header for the timeout.
        let count = |opened: &mut Vec<TcpStream>, wait: Duration| {
            let mut n = 0;
            for s in opened.iter_mut() {
                n += usize::from(closed_within(s, wait));
            }
            n
        };
        // A short look at each (all within a second or two, well before
        // the header timeout).
        let at_once = count(&mut opened, Duration::from_millis(10));
        let later = count(&mut opened, HEADER_TIMEOUT + Duration::from_secs(3));
        (at_once, later)
    })
    .await
    .unwrap();
    assert!(
        results.0 >= 100,
        "{results:?}: the connections over the cap were kept"
    );
    assert_eq!(
        results.1,
        MAX_CONNECTIONS + 100,
        "{results:?}: idle connections were kept"
    );
    assert!(started.elapsed() < HEADER_TIMEOUT * 3);
    // Served as before once the idle clients are gone.
    let body = reqwest::get(format!("http://{addr}/")).await.unwrap();
    assert_eq!(
        body.headers()["x-content-type-options"],
        "nosniff",
        "{:?}",
        body.headers()
    );
    assert_eq!(body.text().await.unwrap(), "ok\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_checks_hosts_refuses_other_sites_names() {
    let (addr, _stop) = server(Some(HostCheck::for_this_machine())).await;
    let client = reqwest::Client::new();
    let get = |host: &str| {
        client
            .get(format!("http://{addr}/"))
            .header("Host", host)
            .send()
    };
    for host in [
        format!("127.0.0.1:{}", addr.port()),
        format!("localhost:{}", addr.port()),
        "[::1]".to_string(),
        "10.1.2.3:9410".to_string(),
    ] {
        assert_eq!(get(&host).await.unwrap().status(), 200, "{host}");
    }
    for host in ["evil.example", "evil.example:80", "localhost.evil.example"] {
        assert_eq!(get(host).await.unwrap().status(), 403, "{host}");
    }
    let check = HostCheck::for_this_machine();
    assert!(check.allows("app.localhost:8080"));
    assert!(!check.allows(""));
}
