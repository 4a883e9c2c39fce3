//! Extraction throughput on the demo forum's pages with the shipped `bbs`
//! spider: per page kind in MiB/s (criterion's bytes throughput), and over
//! every page of the demo crawl in pages/s. The `_xpath` runs do the same
//! with `bbs-xpath`, the same spider written in XPath, to compare the two
//! selector languages on one parse.
//!
//!     cargo bench --bench extract

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use serde_json::{json, Map, Value};

use crawlworker::extract::{extract, Response};
use crawlworker::request::Request;
use crawlworker::spider::Spider;
use crawlworker_demo::{self as demo, Site};

struct Page {
    request: Request,
    content_type: String,
    body: Vec<u8>,
}

fn page(site: &Site, path: &str, meta: Value) -> Page {
    let p = demo::render(site, path);
    let meta: Map<String, Value> = meta.as_object().cloned().unwrap_or_default();
    Page {
        request: Request {
            meta,
            ..Request::get(&format!("http://127.0.0.1:8700{path}"))
        },
        content_type: p.content_type,
        body: p.body,
    }
}

fn run(spider: &Spider, p: &Page) -> usize {
    let headers = [("Content-Type".to_string(), p.content_type.clone())];
    let x = extract(
        spider,
        &p.request,
        &Response {
            url: &p.request.url,
            status: 200,
            headers: &headers,
            body: &p.body,
            fetched_at: std::time::SystemTime::UNIX_EPOCH,
        },
    );
    x.items.len() + x.requests.len()
}

/// Every page the demo crawl fetches, with the meta its task gives it.
fn crawl_pages(site: &Site) -> Vec<Page> {
    demo::demo_crawl_paths(site)
        .into_iter()
        .map(|(path, task)| {
            let ctx = match path.starts_with("/list/") {
                true => json!({"forum_id": task.forum_id, "max_page": task.max_page}),
                false => json!({"forum_id": task.forum_id}),
            };
            page(site, &path, ctx)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let spider = Spider::load("spiders/bbs.toml".as_ref()).unwrap_or_else(|e| panic!("{e}"));
    let xpath = Spider::load("spiders/bbs-xpath.toml".as_ref()).unwrap_or_else(|e| panic!("{e}"));
    let site = Site::demo();
    let busy = site
        .posts
        .values()
        .find(|p| p.comments.len() >= demo::COMMENTS_PER_PAGE && p.forum_id == "00001")
        .map_or(1001, |p| p.id);
    let kinds = [
        (
            "list_utf8",
            page(
                &site,
                "/list/00001/1",
                json!({"forum_id": "00001", "max_page": 5}),
            ),
        ),
        (
            "list_gbk",
            page(
                &site,
                "/list/00002/1",
                json!({"forum_id": "00002", "max_page": 3}),
            ),
        ),
        (
            "post_utf8",
            page(&site, "/post/1001", json!({"forum_id": "00001"})),
        ),
        (
            "post_gbk",
            page(&site, "/post/1029", json!({"forum_id": "00002"})),
        ),
        (
            "comments",
            page(
                &site,
                &format!("/comment/{busy}/1"),
                json!({"forum_id": "00001"}),
            ),
        ),
    ];
    let mut group = c.benchmark_group("extract_page");
    for (name, p) in &kinds {
        group.throughput(Throughput::Bytes(p.body.len() as u64));
        group.bench_function(*name, |b| b.iter(|| run(&spider, black_box(p))));
        group.bench_function(format!("{name}_xpath"), |b| {
            b.iter(|| run(&xpath, black_box(p)))
        });
    }
    group.finish();

    let pages = crawl_pages(&site);
    let mut group = c.benchmark_group("extract_crawl");
    group.throughput(Throughput::Elements(pages.len() as u64));
    group.bench_function("demo_crawl_pages", |b| {
        b.iter(|| {
            pages
                .iter()
                .map(|p| run(&spider, black_box(p)))
                .sum::<usize>()
        })
    });
    group.bench_function("demo_crawl_pages_xpath", |b| {
        b.iter(|| {
            pages
                .iter()
                .map(|p| run(&xpath, black_box(p)))
                .sum::<usize>()
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
