//! The floor of the stages of a worker's CPU per page: what the parts it is
//! built on cost alone, to set beside its profile by stage
//! (`scripts/bench/worker_profile.sh`):
//!
//! - `floors/html5ever_parse`: every page of the demo crawl parsed into a
//!   DOM (`scraper::Html::parse_document`), nothing selected; per page.
//! - `floors/bounded_parse`: the same pages through the worker's own parse
//!   (`extract::bounded::parse_document` within the default limits: fed
//!   in slices, the tree measured between them), for what the bounds add.
//! - `floors/http_get_loopback`: one GET of a demo list page with a plain
//!   `reqwest::Client` over a kept-alive connection on 127.0.0.1, client and
//!   server on one thread, so the time is the CPU of both sides (the server
//!   only writes a prepared response) and of the loopback in the kernel.
//! - `floors/http_get_loopback_worker_client`: the same GET with the
//!   worker's own client (`HttpClient`: redirects, cookies, decompression,
//!   the SSRF guard, the memory budget), for what its layers add.
//! - `floors/fcall_noop`: one `FCALL` from the redis crate, on a
//!   multiplexed connection as the worker's, with the arguments of the
//!   median commit call of a recorded crawl of the generated forum (134
//!   arguments, 26 of them keys, 4,183 bytes; about five pages), to a
//!   function that returns at once: the client's building, sending and
//!   reading (the client thread's CPU; Redis's is its own).
//!
//! The GET and the call are timed by the thread's CPU time, not the
//! clock: what they cost, not how long they wait.
//!
//!     cargo bench --bench floors        # needs redis-server
//!
//! The worker's own stages cost more than these by what crawlworker adds:
//! the difference is what can be cut.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crawlworker::downloader::client::HttpClient;
use crawlworker::extract::bounded::{self, Budget};
use crawlworker::request::Request;
use crawlworker::settings::Settings;
use crawlworker_demo::{self as demo, Site};
use crawlworker_testkit::RedisServer;

/// The CPU time this thread has run (`CLOCK_THREAD_CPUTIME_ID`, user and
/// kernel): with client and server on the thread, what a GET costs both;
/// with Redis in its own process, what a call costs the client alone.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to write.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } == 0;
    assert!(ok, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Criterion's timing of `iters` runs of `f`, by this thread's CPU time.
fn cpu_of<T>(iters: u64, mut f: impl FnMut() -> T) -> Duration {
    let start = thread_cpu();
    for _ in 0..iters {
        black_box(f());
    }
    thread_cpu() - start
}

/// Every page the demo crawl fetches.
fn crawl_bodies(site: &Site) -> Vec<Vec<u8>> {
    demo::demo_crawl_paths(site)
        .iter()
        .map(|(path, _)| demo::render(site, path).body)
        .collect()
}

fn html5ever_parse(c: &mut Criterion, site: &Site) {
    let bodies = crawl_bodies(site);
    let mut group = c.benchmark_group("floors");
    group.throughput(Throughput::Elements(bodies.len() as u64));
    group.bench_function("html5ever_parse", |b| {
        b.iter(|| {
            for body in &bodies {
                let text = String::from_utf8_lossy(body);
                black_box(scraper::Html::parse_document(&text));
            }
        })
    });
    let budget = Budget::new(&Settings::default(), None);
    group.bench_function("bounded_parse", |b| {
        b.iter(|| {
            for body in &bodies {
                let text = String::from_utf8_lossy(body);
                black_box(bounded::parse_document(&text, &budget));
            }
        })
    });
    group.finish();
}

/// A server on 127.0.0.1 answering every request on a connection with
/// `response`, until the connection closes.
async fn serve(listener: tokio::net::TcpListener, response: Vec<u8>) {
    while let Ok((mut stream, _)) = listener.accept().await {
        let response = response.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            let mut seen = Vec::new();
            loop {
                let n = match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                seen.extend_from_slice(&buf[..n]);
                while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                    seen.drain(..end + 4);
                    if stream.write_all(&response).await.is_err() {
                        return;
                    }
                }
            }
        });
    }
}

fn http_get_loopback(c: &mut Criterion, site: &Site) {
    let page = demo::render(site, "/list/00001/1");
    let mut response = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {}\r\n\r\n",
        page.content_type,
        page.body.len()
    )
    .into_bytes();
    response.extend_from_slice(&page.body);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let (client, url) = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port on 127.0.0.1");
        let url = format!(
            "http://{}/list/00001/1",
            listener.local_addr().expect("its address")
        );
        tokio::spawn(serve(listener, response));
        (reqwest::Client::new(), url)
    });
    let get = || async {
        let r = client.get(&url).send().await.expect("the loopback server");
        r.bytes().await.expect("its body").len()
    };
    rt.block_on(get());
    // The worker's own client (redirects, cookies, decompression, the
    // SSRF guard, the memory budget) on the same server.
    let settings = Settings {
        allow_private_networks: true,
        ..Settings::default()
    };
    let worker_client = HttpClient::new(&settings).expect("the worker's HTTP client");
    let request = Request::get(&url);
    let fetch = || async {
        let f = worker_client
            .fetch(&request)
            .await
            .expect("the loopback server");
        f.body.len()
    };
    rt.block_on(fetch());
    let mut group = c.benchmark_group("floors");
    group.throughput(Throughput::Elements(1));
    group.bench_function("http_get_loopback", |b| {
        b.iter_custom(|iters| cpu_of(iters, || rt.block_on(get())))
    });
    group.bench_function("http_get_loopback_worker_client", |b| {
        b.iter_custom(|iters| cpu_of(iters, || rt.block_on(fetch())))
    });
    group.finish();
}

const NOOP_LIBRARY: &str =
    "#!lua name=floors\nredis.register_function('floors_noop', function(keys, args) return 1 end)";

fn fcall_noop(c: &mut Criterion) {
    let redis = RedisServer::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut conn = rt.block_on(async {
        let client = redis::Client::open(redis.url()).expect("the redis url");
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("a connection to the benchmark's redis-server");
        let _: String = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg(NOOP_LIBRARY)
            .query_async(&mut conn)
            .await
            .expect("FUNCTION LOAD");
        conn
    });
    // 26 keys of one hash tag, then 108 arguments making up the rest of
    // 4,183 bytes.
    let keys: Vec<String> = (0..26).map(|i| format!("{{bbs}}:key:{i:02}")).collect();
    let key_bytes: usize = keys.iter().map(String::len).sum();
    let each = (4183 - key_bytes) / 108;
    let args: Vec<String> = (0..108).map(|i| format!("{i:0each$}")).collect();
    let mut call = || {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg("floors_noop").arg(keys.len()).arg(&keys).arg(&args);
        rt.block_on(cmd.query_async::<i64>(&mut conn))
            .expect("FCALL floors_noop")
    };
    call();
    let mut group = c.benchmark_group("floors");
    group.throughput(Throughput::Elements(1));
    group.bench_function("fcall_noop", |b| {
        b.iter_custom(|iters| cpu_of(iters, &mut call))
    });
    group.finish();
}

fn bench(c: &mut Criterion) {
    let site = Site::demo();
    html5ever_parse(c, &site);
    http_get_loopback(c, &site);
    fcall_noop(c);
}

criterion_group!(benches, bench);
criterion_main!(benches);
