//! HTTP client tests against real HTTP servers on 127.0.0.1: small servers
//! written here for the special responses (echoes, endless or trickling
//! bodies, silence, fake proxies) and the demo forum. Nothing here contacts
//! an address off this machine: the guard tests use addresses the guard
//! must refuse before any connection is attempted.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::settings::Bytes;

/// A loopback server that hands each connection's request head to a
/// handler.
struct TestServer {
    addr: SocketAddr,
    /// Connections accepted so far.
    connections: Arc<AtomicUsize>,
}

impl TestServer {
    async fn start<F, Fut>(handler: F) -> TestServer
    where
        F: Fn(String, TcpStream) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let count = connections.clone();
        let handler = Arc::new(handler);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let handler = handler.clone();
                tokio::spawn(async move {
                    if let Some(head) = read_head(&mut stream).await {
                        handler(head, stream).await;
                    }
                });
            }
        });
        TestServer { addr, connections }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// Reads up to the blank line ending a request head.
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 || head.len() > 64 * 1024 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// Writes a whole response and closes the connection.
async fn respond(mut stream: TcpStream, extra_headers: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n{extra_headers}\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body).await;
    let _ = stream.shutdown().await;
}

/// Answers every request with its own head as the body.
async fn echo_server() -> TestServer {
    TestServer::start(|head, stream| async move { respond(stream, "", head.as_bytes()).await })
        .await
}

/// Settings for tests against loopback servers.
fn open() -> Settings {
    Settings {
        allow_private_networks: true,
        ..Settings::default()
    }
}

fn downloader(settings: &Settings) -> HttpClient {
    HttpClient::with_env(settings, |_| None).unwrap()
}

fn header_line<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

#[tokio::test]
async fn sends_user_agent_default_and_request_headers_and_accept_encoding() {
    let server = echo_server().await;
    let d = downloader(&open());
    let mut request = Request::new(server.url("/form"));
    request.method = "POST".into();
    request.body = "a=1".into();
    request.headers = vec![
        ("Accept-Language".into(), "fr".into()),
        ("X-Test".into(), "yes".into()),
    ];
    let fetched = d.fetch(&request).await.unwrap();
    assert_eq!(fetched.status, 200);
    assert_eq!(fetched.url, server.url("/form"));
    let head = String::from_utf8(fetched.body).unwrap();
    assert!(head.starts_with("POST /form HTTP/1.1\r\n"), "{head}");
    let ua = header_line(&head, "user-agent").unwrap();
    assert_eq!(ua, crate::settings::DEFAULT_USER_AGENT);
    assert!(ua.starts_with("crawlworker/"));
    let encodings: Vec<&str> = header_line(&head, "accept-encoding")
        .unwrap()
        .split(',')
        .map(str::trim)
        .collect();
    for e in ["gzip", "deflate", "br", "zstd"] {
        assert!(encodings.contains(&e), "{e} missing from {encodings:?}");
    }
    assert_eq!(header_line(&head, "accept-language"), Some("fr"));
    assert!(header_line(&head, "accept")
        .unwrap()
        .starts_with("text/html"));
    assert_eq!(header_line(&head, "x-test"), Some("yes"));
    assert_eq!(header_line(&head, "content-length"), Some("3"));
    assert!(header_line(&head, "cookie").is_none());
}

#[tokio::test]
async fn gzip_bodies_are_decoded() {
    // gzip.compress(b"<p>compressed hello</p>" * 50, mtime=0)
    const GZIP: [u8; 54] = [
        31, 139, 8, 0, 0, 0, 0, 0, 2, 3, 179, 41, 176, 75, 206, 207, 45, 40, 74, 45, 46, 78, 77,
        81, 200, 72, 205, 201, 201, 183, 209, 47, 176, 179, 25, 21, 30, 21, 30, 21, 30, 21, 166,
        173, 48, 0, 172, 121, 18, 17, 126, 4, 0, 0,
    ];
    let server = TestServer::start(|_, stream| async move {
        respond(stream, "Content-Encoding: gzip\r\n", &GZIP).await
    })
    .await;
    let fetched = downloader(&open())
        .fetch(&Request::new(server.url("/")))
        .await
        .unwrap();
    assert_eq!(
        fetched.body,
        "<p>compressed hello</p>".repeat(50).as_bytes()
    );
}

#[tokio::test]
async fn the_guard_refuses_private_addresses_without_connecting() {
    let server = echo_server().await;
    let port = server.addr.port();
    let d = downloader(&Settings::default());
    let cases = [
        (format!("http://127.0.0.1:{port}/"), "127.0.0.1", "loopback"),
        (format!("http://localhost:{port}/"), "", "loopback"),
        (
            "http://169.254.169.254/latest/meta-data/".to_string(),
            "169.254.169.254",
            "link-local",
        ),
        (format!("http://[::1]:{port}/"), "::1", "loopback"),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/"),
            "::ffff:127.0.0.1",
            "loopback",
        ),
        ("http://10.0.0.1/".to_string(), "10.0.0.1", "private"),
        ("https://192.168.0.1/".to_string(), "192.168.0.1", "private"),
        ("http://0x7f.1:9/".to_string(), "127.0.0.1", "loopback"),
    ];
    for (url, addr, why) in cases {
        let err = d.fetch(&Request::new(url.clone())).await.unwrap_err();
        assert_eq!(err.kind(), "ForbiddenAddress", "{url}: {err}");
        assert!(!err.is_retryable());
        let FetchError::ForbiddenAddress { refused, .. } = &err else {
            unreachable!()
        };
        if addr.is_empty() {
            assert!(refused.resolved && refused.addr.is_loopback(), "{err}");
            assert_eq!(refused.host, "localhost");
        } else {
            assert_eq!(refused.addr.to_string(), addr, "{url}");
        }
        let text = err.to_string();
        assert!(
            text.contains(why) && text.contains("allow_private_networks"),
            "{text}"
        );
    }
    assert_eq!(server.connections(), 0, "nothing reached the server");
}

#[tokio::test]
async fn private_networks_are_fetched_when_allowed() {
    let server = echo_server().await;
    let d = downloader(&open());
    for host in ["127.0.0.1", "localhost"] {
        let url = format!("http://{host}:{}/ok", server.addr.port());
        assert_eq!(d.fetch(&Request::new(url)).await.unwrap().status, 200);
    }
    let demo = crawlworker_demo::DemoServer::start(crawlworker_demo::Site::demo())
        .await
        .unwrap();
    let fetched = d.fetch(&Request::new(demo.base_url())).await.unwrap();
    assert_eq!(fetched.status, 200);
    assert!(!fetched.body.is_empty());
    demo.stop().await.unwrap();
}

#[tokio::test]
async fn other_schemes_bad_urls_and_methods_are_refused() {
    let d = downloader(&Settings::default());
    let kind = |url: &str, method: &str| {
        let mut r = Request::new(url.to_string());
        r.method = method.to_string();
        let d = d.clone();
        async move { d.fetch(&r).await.unwrap_err() }
    };
    let err = kind("file:///etc/passwd", "GET").await;
    assert_eq!(err.kind(), "UnsupportedScheme");
    assert!(err.to_string().contains("file:///etc/passwd"), "{err}");
    assert_eq!(kind("not a url", "GET").await.kind(), "InvalidURL");
    let err = kind("http://example.invalid/", "GE T").await;
    assert_eq!(err.kind(), "InvalidMethod");
    assert!(err.to_string().contains("http://example.invalid/"), "{err}");
}

#[tokio::test]
async fn a_closed_port_is_a_retryable_connection_refusal() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/");
    let err = downloader(&open())
        .fetch(&Request::new(url.clone()))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "ConnectionRefusedError", "{err}");
    assert!(err.is_retryable());
    assert!(err.to_string().contains(&url), "{err}");
}

#[tokio::test]
async fn a_silent_server_times_out() {
    let server = TestServer::start(|_, stream| async move {
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(stream);
    })
    .await;
    let d = downloader(&Settings {
        download_timeout: Duration::from_millis(300),
        ..open()
    });
    let started = Instant::now();
    let err = d.fetch(&Request::new(server.url("/"))).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(err.kind(), "TimeoutError", "{err}");
    assert!(err.is_retryable());
    let text = err.to_string();
    assert!(
        text.contains("download_timeout") && text.contains("300ms"),
        "{text}"
    );
}

#[tokio::test]
async fn a_trickling_body_times_out() {
    let server = TestServer::start(|_, mut stream| async move {
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n";
        if stream.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        for _ in 0..600 {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if stream.write_all(b"x").await.is_err() {
                return;
            }
        }
    })
    .await;
    let d = downloader(&Settings {
        download_timeout: Duration::from_millis(500),
        ..open()
    });
    let started = Instant::now();
    let err = d.fetch(&Request::new(server.url("/"))).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(err.kind(), "TimeoutError", "{err}");
}

/// A server whose body never ends: `Content-Length` announces `length`, or
/// with `None` the body is endless chunked data.
async fn endless_server(length: Option<u64>) -> TestServer {
    TestServer::start(move |_, mut stream| async move {
        let head = match length {
            Some(n) => format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n"),
            None => "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_string(),
        };
        if stream.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        let chunk = format!("{:x}\r\n{}\r\n", 4096, "y".repeat(4096));
        // Bounded, so a failing test still ends.
        for _ in 0..100_000 {
            let sent = if length.is_some() {
                stream.write_all(&[b'y'; 4096]).await
            } else {
                stream.write_all(chunk.as_bytes()).await
            };
            if sent.is_err() {
                return;
            }
        }
    })
    .await
}

#[tokio::test]
async fn a_body_over_maxsize_fails_with_or_without_content_length() {
    let settings = Settings {
        download_maxsize: Bytes(64 * 1024),
        ..open()
    };
    let d = downloader(&settings);

    let announced = endless_server(Some(10 << 30)).await;
    let err = d
        .fetch(&Request::new(announced.url("/")))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "ResponseTooLarge");
    assert!(!err.is_retryable());
    assert!(
        matches!(err, FetchError::TooLarge { size, announced: true, .. } if size == 10 << 30),
        "{err}"
    );
    assert!(
        err.to_string().contains("Content-Length is 10737418240"),
        "{err}"
    );

    let endless = endless_server(None).await;
    let err = d.fetch(&Request::new(endless.url("/"))).await.unwrap_err();
    let FetchError::TooLarge {
        size, announced, ..
    } = err
    else {
        panic!("{err}")
    };
    assert!(!announced);
    assert!(size > 64 * 1024 && size <= 64 * 1024 + 16 * 1024, "{size}");
}

/// Collects what `tracing` writes, for the current thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_body_over_warnsize_is_logged_once_and_kept() {
    let server = TestServer::start(|head, stream| async move {
        let chunked = head.contains("/chunked");
        if !chunked {
            return respond(stream, "", &[b'z'; 5000]).await;
        }
        let mut stream = stream;
        let mut out =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
        for _ in 0..5 {
            out.extend_from_slice(format!("{:x}\r\n{}\r\n", 1000, "z".repeat(1000)).as_bytes());
        }
        out.extend_from_slice(b"0\r\n\r\n");
        let _ = stream.write_all(&out).await;
    })
    .await;
    let captured = Captured::default();
    let sink = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let d = downloader(&Settings {
        download_warnsize: Bytes(1000),
        download_maxsize: Bytes(10_000),
        ..open()
    });
    for path in ["/sized", "/chunked"] {
        let fetched = d.fetch(&Request::new(server.url(path))).await.unwrap();
        assert_eq!(fetched.body.len(), 5000);
    }
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("download_warnsize"))
        .collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert!(lines[0].contains(&server.url("/sized")) && lines[0].contains("size=5000"));
    assert!(lines[1].contains(&server.url("/chunked")));
}

/// Sets a cookie on `/set`; echoes the request head elsewhere.
async fn cookie_server() -> TestServer {
    TestServer::start(|head, stream| async move {
        if head.starts_with("GET /set ") {
            respond(stream, "Set-Cookie: session=abc123; Path=/\r\n", b"set").await
        } else {
            respond(stream, "", head.as_bytes()).await
        }
    })
    .await
}

#[tokio::test]
async fn cookies_are_kept_only_when_enabled() {
    let server = cookie_server().await;
    for enabled in [true, false] {
        let d = downloader(&Settings {
            cookies_enabled: enabled,
            ..open()
        });
        d.fetch(&Request::new(server.url("/set"))).await.unwrap();
        // A clone shares the jar.
        let echoed = d
            .clone()
            .fetch(&Request::new(server.url("/page")))
            .await
            .unwrap();
        let head = String::from_utf8(echoed.body).unwrap();
        let cookie = header_line(&head, "cookie");
        if enabled {
            assert_eq!(cookie, Some("session=abc123"), "{head}");
        } else {
            assert_eq!(cookie, None, "{head}");
        }
    }
}

/// A fake HTTP proxy: answers any request with its name, the request line
/// it received and the Proxy-Authorization it was given.
async fn fake_proxy(name: &'static str) -> TestServer {
    TestServer::start(move |head, stream| async move {
        let line = head.lines().next().unwrap_or_default().to_string();
        let auth = header_line(&head, "proxy-authorization")
            .unwrap_or("-")
            .to_string();
        respond(stream, "", format!("{name}\n{line}\n{auth}").as_bytes()).await
    })
    .await
}

/// The proxy name, request line and proxy authorization of a response.
async fn via(d: &HttpClient, url: &str) -> (String, String, String) {
    let body = d.fetch(&Request::new(url.to_string())).await.unwrap().body;
    let text = String::from_utf8(body).unwrap();
    let mut parts = text.splitn(3, '\n').map(str::to_string);
    (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    )
}

#[tokio::test]
async fn proxies_rotate_round_robin_and_carry_credentials() {
    let (a, b) = (fake_proxy("proxy-a").await, fake_proxy("proxy-b").await);
    let settings = Settings {
        proxies: vec![
            format!("http://{}", a.addr),
            format!("http://alice:hunter2@{}", b.addr),
        ],
        ..open()
    };
    let d = downloader(&settings);
    let mut names = Vec::new();
    for _ in 0..2 {
        for host in ["one.test", "two.test"] {
            let (name, line, auth) = via(&d, &format!("http://{host}/page?x=1")).await;
            // A proxy is sent the absolute URL.
            assert_eq!(line, format!("GET http://{host}/page?x=1 HTTP/1.1"));
            let expected_auth = if name == "proxy-b" {
                "Basic YWxpY2U6aHVudGVyMg==" // alice:hunter2
            } else {
                "-"
            };
            assert_eq!(auth, expected_auth);
            names.push(name);
        }
    }
    assert_eq!(names, ["proxy-a", "proxy-b", "proxy-a", "proxy-b"]);
    let shown = format!("{d:?}");
    assert!(
        shown.contains("alice:***@127.0.0.1") && !shown.contains("hunter2"),
        "{shown}"
    );
}

#[tokio::test]
async fn sticky_proxies_keep_each_host_on_one_proxy() {
    let (a, b) = (fake_proxy("proxy-a").await, fake_proxy("proxy-b").await);
    let settings = Settings {
        proxies: vec![format!("http://{}", a.addr), format!("http://{}", b.addr)],
        proxy_mode: crate::settings::ProxyMode::Sticky,
        ..open()
    };
    let d = downloader(&settings);
    let mut first = Vec::new();
    for i in 0..12 {
        first.push(via(&d, &format!("http://site{i}.test/")).await.0);
    }
    for (i, proxy) in first.iter().enumerate() {
        let again = via(&d, &format!("http://site{i}.test/other")).await.0;
        assert_eq!(&again, proxy, "site{i}.test changed proxy");
    }
    assert!(first.iter().any(|n| n == "proxy-a") && first.iter().any(|n| n == "proxy-b"));
}

#[tokio::test]
async fn the_guard_checks_targets_behind_a_proxy_but_trusts_the_proxy() {
    let proxy = fake_proxy("proxy").await;
    // The proxy is on loopback, by name: trusted all the same.
    let settings = Settings {
        proxies: vec![format!(
            "http://user:hunter2@localhost:{}",
            proxy.addr.port()
        )],
        ..Settings::default()
    };
    let d = downloader(&settings);
    for target in [
        "http://localhost/",
        "http://10.0.0.1/",
        "http://169.254.169.254/",
    ] {
        let err = d.fetch(&Request::new(target.into())).await.unwrap_err();
        assert_eq!(err.kind(), "ForbiddenAddress", "{target}: {err}");
    }
    assert_eq!(proxy.connections(), 0);
}

#[tokio::test]
async fn proxy_failures_name_the_proxy_without_its_password() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let settings = Settings {
        proxies: vec![format!("http://alice:hunter2@127.0.0.1:{port}")],
        ..open()
    };
    let d = downloader(&settings);
    let err = d
        .fetch(&Request::new("http://target.test/".into()))
        .await
        .unwrap_err();
    let text = format!("{err} {err:?}");
    assert!(!text.contains("hunter2"), "{text}");
    assert!(
        err.to_string()
            .contains(&format!("via proxy http://alice:***@127.0.0.1:{port}")),
        "{err}"
    );
    assert!(err.is_retryable(), "{err}");
}

#[test]
fn bad_settings_are_refused_at_construction() {
    let err = |s: Settings| HttpClient::with_env(&s, |_| None).unwrap_err();
    let e = err(Settings {
        proxies: vec!["ftp://alice:hunter2@proxy.test".into()],
        ..Settings::default()
    });
    let text = format!("{e} {e:?}");
    assert!(
        text.contains("ftp://alice:***@proxy.test") && !text.contains("hunter2"),
        "{text}"
    );
    // proxy_mode, headers and the user agent are checked earlier, when the
    // settings are built (see `settings::tests`).
}

#[test]
fn environment_proxies_turn_on_the_target_check() {
    let with = |env: Option<&'static str>| {
        HttpClient::with_env(&Settings::default(), move |k| {
            (k == "HTTPS_PROXY")
                .then(|| env.map(String::from))
                .flatten()
        })
        .unwrap()
    };
    assert!(
        with(Some("http://u:pw@proxy.test:8080"))
            .inner
            .policy
            .check_names
    );
    assert!(!with(None).inner.policy.check_names);
    let open = HttpClient::with_env(&open(), |_| Some("http://proxy.test:1".into())).unwrap();
    assert!(!open.inner.policy.check_names);
}

/// The ALPN protocols offered in the TLS ClientHello of an https fetch (the
/// hello is read in the clear, then the connection is dropped).
async fn alpn_offered(settings: Settings) -> Vec<String> {
    let (tx, rx) = tokio::sync::oneshot::channel::<Vec<u8>>();
    let tx = Arc::new(Mutex::new(Some(tx)));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut hello = Vec::new();
        let mut buf = [0u8; 4096];
        // A TLS record: 5 header bytes, the last two its length.
        while hello.len() < 5
            || hello.len() < 5 + usize::from(u16::from_be_bytes([hello[3], hello[4]]))
        {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => hello.extend_from_slice(&buf[..n]),
            }
        }
        if let Some(tx) = tx.lock().unwrap().take() {
            let _ = tx.send(hello);
        }
    });
    let d = downloader(&settings);
    let err = d
        .fetch(&Request::new(format!("https://{addr}/")))
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err}");
    let hello = rx.await.unwrap();
    // The ALPN extension (type 16): list length, then length-prefixed names.
    let at = (0..hello.len().saturating_sub(6))
        .find(|&i| {
            hello[i..i + 2] == [0, 16] && {
                let ext = usize::from(u16::from_be_bytes([hello[i + 2], hello[i + 3]]));
                let list = usize::from(u16::from_be_bytes([hello[i + 4], hello[i + 5]]));
                ext == list + 2 && list > 0
            }
        })
        .expect("an ALPN extension");
    let list = usize::from(u16::from_be_bytes([hello[at + 4], hello[at + 5]]));
    let mut names = Vec::new();
    let mut p = at + 6;
    while p < at + 6 + list {
        let n = usize::from(hello[p]);
        names.push(String::from_utf8_lossy(&hello[p + 1..p + 1 + n]).into_owned());
        p += 1 + n;
    }
    names
}

#[tokio::test]
async fn https_offers_http2_by_alpn_only_when_enabled() {
    assert_eq!(alpn_offered(open()).await, ["h2", "http/1.1"]);
    let http1 = Settings {
        http2: false,
        ..open()
    };
    assert_eq!(alpn_offered(http1).await, ["http/1.1"]);
}
