//! The news example spider, `spiders/news.toml`, on the demo site's news
//! section: `crawlworker parse` over HTTP, the extractor on every page, and
//! a whole crawl of the section simulated in memory, each compared field by
//! field with the model the pages are rendered from.

use std::collections::{BTreeSet, HashSet, VecDeque};

use serde_json::{json, Map, Value};

use crawlworker::extract::{self, Extraction, Filtered, Response};
use crawlworker::request::Request;
use crawlworker::spider::start::StartEntryError;
use crawlworker::spider::{Spider, StartKind};
use crawlworker_demo::{self as demo, Article, News, Site, ARTICLES_PER_FRONT_PAGE};
use crawlworker_testkit::FixtureServer;

use crawlworker_testkit::{crawlworker, root, stderr, stdout};

/// The demo server's default address, for pages rendered without a server.
const ORIGIN: &str = "http://127.0.0.1:8700";

fn news_spider() -> Spider {
    Spider::load(&root().join("spiders/news.toml")).unwrap_or_else(|e| panic!("{e}"))
}

/// The JSON `crawlworker parse` printed, after checking it succeeded.
fn parsed(args: &[&str]) -> Value {
    let out = crawlworker(args);
    assert!(
        out.status.success(),
        "parse {args:?} failed: {}",
        stderr(&out)
    );
    serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", stdout(&out)))
}

/// A follow-up request as `parse` prints it.
fn request(url: String, priority: i64, depth: u32, rule: &str, dont_filter: bool) -> Value {
    let mut request = json!({"url": url, "priority": priority, "depth": depth, "rule": rule});
    if dont_filter {
        request["dont_filter"] = Value::Bool(true);
    }
    request
}

/// The `filtered` counts as `parse` prints them.
fn filtered(offsite: u64, denied: u64, depth: u64) -> Value {
    json!({
        "offsite": offsite,
        "scheme": 0,
        "fragment": 0,
        "denied": denied,
        "depth": depth,
        "pagination": 0,
        "duplicate": 0,
    })
}

/// The article item the spider must scrape from `article`'s page at
/// `origin`, computed from the model alone.
fn expected_fields(article: &Article, origin: &str) -> Map<String, Value> {
    let fields = json!({
        "kind": "article",
        "slug": article.slug,
        "section": article.section,
        "headline": article.headline,
        "summary": article.summary,
        "byline": article.byline,
        "published": article.published,
        "tags": article.tags,
        "image": article.image_path().map(|path| format!("{origin}{path}")),
        "body": article.body_text(),
        "url": format!("{origin}{}", article.path()),
    });
    fields.as_object().cloned().unwrap_or_default()
}

/// The related-article requests an article page gives, at depth `depth`.
fn related_requests(news: &News, article: &Article, origin: &str, depth: u32) -> Vec<Value> {
    news.related(article)
        .map(|other| {
            request(
                format!("{origin}{}", other.path()),
                5,
                depth,
                "article",
                false,
            )
        })
        .collect()
}

/// The requests front page `number` gives when fetched at depth `depth`.
fn front_requests(news: &News, number: usize, origin: &str, depth: u32) -> Vec<Value> {
    let mut out: Vec<Value> = news
        .front_page(number)
        .unwrap_or_default()
        .iter()
        .map(|a| {
            request(
                format!("{origin}{}", a.path()),
                10,
                depth + 1,
                "article",
                false,
            )
        })
        .collect();
    if number < news.front_page_count() && depth < 2 {
        let next = format!("{origin}/news/?page={}", number + 1);
        out.push(request(next, 0, depth + 1, "front", true));
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn parse_front_pages_over_http() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let news = News::demo();
    let origin = server.base_url();

    let out = parsed(&["parse", "spiders/news.toml", &server.url("/news/")]);
    assert_eq!(out["url"], server.url("/news/"));
    assert_eq!(out["status"], 200);
    assert_eq!(out["rule"], "front");
    assert_eq!(
        (&out["encoding"], &out["charset_source"]),
        (&json!("UTF-8"), &json!("header"))
    );
    assert_eq!(out["items"], json!([]));
    assert_eq!(out["dropped"], json!([]));
    let requests = out["requests"].as_array().unwrap();
    assert_eq!(requests.len(), ARTICLES_PER_FRONT_PAGE + 1);
    let first = &news.articles[0];
    assert_eq!(
        requests[0],
        json!({
            "url": server.url("/news/2026/03/council-approves-riverside-bike-lanes.html"),
            "priority": 10,
            "depth": 1,
            "rule": "article",
        })
    );
    assert_eq!(requests[0]["url"], server.url(&first.path()));
    // The query-only href "?page=2" resolved against /news/.
    assert_eq!(
        requests[5],
        json!({
            "url": server.url("/news/?page=2"),
            "priority": 0,
            "depth": 1,
            "rule": "front",
            "dont_filter": true,
        })
    );
    assert_eq!(
        out["requests"],
        Value::Array(front_requests(&news, 1, &origin, 0))
    );
    assert_eq!(out["filtered"], filtered(0, 0, 0));

    // Page 2 as the crawl reaches it (depth 1): the next link is "?page=3".
    let page2 = server.url("/news/?page=2");
    let out = parsed(&["parse", "spiders/news.toml", &page2, "--depth", "1"]);
    assert_eq!(out["rule"], "front");
    assert_eq!(
        out["requests"],
        Value::Array(front_requests(&news, 2, &origin, 1))
    );
    assert_eq!(
        out["requests"][5]["url"],
        server.url("/news/?page=3"),
        "{out}"
    );
    assert_eq!(out["requests"][5]["depth"], 2);
    assert_eq!(out["filtered"], filtered(0, 0, 0));

    // Page 3, the last: articles only.
    let page3 = server.url("/news/?page=3");
    let out = parsed(&["parse", "spiders/news.toml", &page3, "--depth", "2"]);
    assert_eq!(
        out["requests"],
        Value::Array(front_requests(&news, 3, &origin, 2))
    );
    assert_eq!(
        out["requests"].as_array().map(Vec::len),
        Some(ARTICLES_PER_FRONT_PAGE)
    );
    assert_eq!(out["filtered"], filtered(0, 0, 0));

    // Page 2 reached at depth 2: its next page would be at depth 3, past
    // the follow's depth_limit of 2.
    let out = parsed(&["parse", "spiders/news.toml", &page2, "--depth", "2"]);
    assert_eq!(
        out["requests"],
        Value::Array(front_requests(&news, 2, &origin, 2))
    );
    assert_eq!(
        out["requests"].as_array().map(Vec::len),
        Some(ARTICLES_PER_FRONT_PAGE)
    );
    assert_eq!(out["filtered"], filtered(0, 0, 1));

    assert_eq!(server.hits("/news/"), 1);
    assert_eq!(server.hits("/news/?page=2"), 2);
    assert_eq!(server.hits("/news/?page=3"), 1);
    server.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn parse_article_pages_over_http() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let news = News::demo();
    let origin = server.base_url();

    // The newest article: a lead image, two tags.
    let article = &news.articles[0];
    let out = parsed(&["parse", "spiders/news.toml", &server.url(&article.path())]);
    assert_eq!(out["status"], 200);
    assert_eq!(out["rule"], "article");
    assert_eq!(out["dropped"], json!([]));
    let items = out["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["item"], "article");
    let fields = items[0]["fields"].as_object().unwrap();
    let names: Vec<&str> = fields.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "kind",
            "slug",
            "section",
            "headline",
            "summary",
            "byline",
            "published",
            "tags",
            "image",
            "body",
            "url"
        ]
    );
    assert_eq!(fields["kind"], "article");
    assert_eq!(fields["slug"], "council-approves-riverside-bike-lanes");
    assert_eq!(fields["section"], "City");
    assert_eq!(fields["headline"], "Council approves riverside bike lanes");
    assert_eq!(
        fields["summary"],
        "Six kilometres of protected lanes will link the old town to the university by autumn."
    );
    assert_eq!(fields["byline"], "Maya Okafor");
    assert_eq!(fields["published"], "2026-03-20T09:15:00Z");
    assert_eq!(fields["tags"], json!(["transport", "city-hall"]));
    // The relative src "img/….jpg", resolved against the article's URL.
    assert_eq!(
        fields["image"],
        server.url("/news/2026/03/img/council-approves-riverside-bike-lanes.jpg")
    );
    assert_eq!(
        fields["body"],
        concat!(
            "Six kilometres of protected lanes will link the old town to the university by autumn.",
            " Officials said the plan had broad support.\n",
            "Why it matters: it affects thousands of people every day.\n",
            "We will follow the story as it develops. Earlier coverage is in our archive."
        )
    );
    assert_eq!(fields["url"], server.url(&article.path()));
    assert_eq!(*fields, expected_fields(article, &origin));
    // Related articles (bare file names, resolved in the article's
    // directory); the "More on transport" tag link is denied and the share
    // link is off-site.
    assert_eq!(
        out["requests"],
        json!([
            {
                "url": server.url("/news/2026/03/new-tram-line-opens-ahead-of-schedule.html"),
                "priority": 5,
                "depth": 1,
                "rule": "article",
            },
            {
                "url": server.url("/news/2026/03/rents-rise-again-as-shortage-deepens.html"),
                "priority": 5,
                "depth": 1,
                "rule": "article",
            },
        ])
    );
    assert_eq!(out["filtered"], filtered(1, 1, 0));

    // Escaped headline, two authors, no lead image; at depth 1, as the
    // crawl reaches it from the front.
    let article = &news.articles[7];
    assert_eq!(article.image, None);
    let out = parsed(&[
        "parse",
        "spiders/news.toml",
        &server.url(&article.path()),
        "--depth",
        "1",
    ]);
    let fields = &out["items"][0]["fields"];
    assert_eq!(
        fields["headline"],
        "Bakery chain \"Rise\" expands to five towns"
    );
    assert_eq!(fields["image"], Value::Null);
    assert_eq!(fields["tags"], json!(["markets", "food"]));
    assert_eq!(
        *fields.as_object().unwrap(),
        expected_fields(article, &origin)
    );
    assert_eq!(
        out["requests"],
        Value::Array(related_requests(&news, article, &origin, 2))
    );

    // No tags: the field's default, an empty array; no tag link to deny.
    let article = &news.articles[13];
    assert!(article.tags.is_empty());
    let out = parsed(&["parse", "spiders/news.toml", &server.url(&article.path())]);
    let fields = &out["items"][0]["fields"];
    assert_eq!(fields["tags"], json!([]));
    assert_eq!(fields["byline"], "Ana Lima");
    assert_eq!(
        *fields.as_object().unwrap(),
        expected_fields(article, &origin)
    );
    assert_eq!(out["filtered"], filtered(1, 0, 0));

    let two_authors = &news.articles[5];
    let out = parsed(&[
        "parse",
        "spiders/news.toml",
        &server.url(&two_authors.path()),
    ]);
    assert_eq!(
        out["items"][0]["fields"]["byline"],
        "Maya Okafor and Tom Ng"
    );

    server.stop().await.unwrap();
}

/// Renders `path_and_query` and extracts it with `spider` as the crawl
/// would, for `request`.
fn extract_page(spider: &Spider, site: &Site, request: &Request) -> (u16, Extraction) {
    let target = request
        .url
        .strip_prefix(ORIGIN)
        .unwrap_or_else(|| panic!("{} is not on the demo site", request.url));
    let page = demo::render(site, target);
    let headers = vec![("Content-Type".to_owned(), page.content_type.clone())];
    let response = Response {
        url: &request.url,
        status: page.status,
        headers: &headers,
        body: &page.body,
        fetched_at: std::time::SystemTime::UNIX_EPOCH,
    };
    (page.status, extract::extract(spider, request, &response))
}

#[test]
fn extractor_gives_every_article_item_from_the_model() {
    let (spider, site, news) = (news_spider(), Site::demo(), News::demo());
    for article in &news.articles {
        let request = Request::get(&format!("{ORIGIN}{}", article.path()));
        let (status, x) = extract_page(&spider, &site, &request);
        assert_eq!(status, 200);
        assert_eq!(x.rule.as_deref(), Some("article"));
        assert!(x.dropped.is_empty(), "{:?}", x.dropped);
        assert_eq!(x.items.len(), 1);
        assert_eq!(x.items[0].kind, "article");
        assert_eq!(
            x.items[0].fields,
            expected_fields(article, ORIGIN),
            "{}",
            article.slug
        );
        let requests: Vec<Value> = x
            .requests
            .iter()
            .map(|r| serde_json::to_value(r).unwrap())
            .collect();
        assert_eq!(requests, related_requests(&news, article, ORIGIN, 1));
        let tag_links = u64::from(!article.tags.is_empty());
        assert_eq!(
            x.filtered,
            Filtered {
                offsite: 1,
                denied: tag_links,
                ..Filtered::default()
            }
        );
    }
}

#[test]
fn extractor_leaves_tag_pages_alone_and_drops_headless_articles() {
    let (spider, site) = (news_spider(), Site::demo());
    // No rule matches a tag page: nothing is extracted or followed.
    let request = Request::get(&format!("{ORIGIN}/news/tag/transport"));
    let (status, x) = extract_page(&spider, &site, &request);
    assert_eq!(status, 200);
    assert_eq!(x.rule, None);
    assert!(x.items.is_empty() && x.requests.is_empty());

    // A 404 page is not extracted at all (Scrapy's HttpError handling).
    let request = Request {
        rule: Some("article".to_owned()),
        ..Request::get(&format!("{ORIGIN}/news/2026/03/no-such-story.html"))
    };
    let (status, x) = extract_page(&spider, &site, &request);
    assert_eq!(status, 404);
    assert_eq!(x.ignored_status, Some(404));
    assert!(x.items.is_empty() && x.dropped.is_empty());

    // A 200 page without a headline (a tag page, handled as an article
    // because the request names the rule) drops the item, with the reason.
    let request = Request {
        rule: Some("article".to_owned()),
        ..Request::get(&format!("{ORIGIN}/news/tag/transport"))
    };
    let (status, x) = extract_page(&spider, &site, &request);
    assert_eq!(status, 200);
    assert!(x.items.is_empty());
    assert_eq!(x.dropped.len(), 1);
    assert_eq!(x.dropped[0].item, "article");
    assert_eq!(x.dropped[0].reason, "required field `slug` is missing");
}

#[test]
fn start_entries_are_plain_urls_in_a_set() {
    let spider = news_spider();
    assert_eq!(spider.name, "news");
    assert_eq!(spider.keys.start_urls, "news:start_urls");
    assert_eq!(spider.start.kind, StartKind::Set);
    assert!(spider.start.url.is_none());
    assert_eq!(spider.start.rule, None);
    assert!(spider.settings.robotstxt_obey);
    assert!(spider.settings.allow_private_networks);

    let front = spider.start_request("http://127.0.0.1:8700/news/").unwrap();
    assert_eq!(
        front,
        Request {
            dont_filter: true,
            ..Request::get("http://127.0.0.1:8700/news/")
        }
    );
    // The rule comes from the URL.
    let rule = |r: &Request| {
        spider
            .rule_for(r.rule.as_deref(), &r.url)
            .map(|r| r.name.clone())
    };
    assert_eq!(rule(&front).as_deref(), Some("front"));
    let article = News::demo().articles[0].path();
    let direct = spider
        .start_request(&format!("http://127.0.0.1:8700{article}"))
        .unwrap();
    assert_eq!(rule(&direct).as_deref(), Some("article"));
    let page2 = spider
        .start_request("http://127.0.0.1:8700/news/?page=2")
        .unwrap();
    assert_eq!(rule(&page2).as_deref(), Some("front"));

    // A task needs a URL template, which this spider does not have.
    assert_eq!(
        spider.start_request(r#"{"section": "city"}"#),
        Err(StartEntryError::NoTemplate)
    );
}

/// Crawls the news section in memory as a cluster would, from the one start
/// URL: dupefilter on URLs unless `dont_filter`, highest priority first.
/// Every article is scraped exactly once, every front page fetched once,
/// no tag page fetched.
#[test]
fn a_crawl_from_the_front_scrapes_every_article_once() {
    let (spider, site, news) = (news_spider(), Site::demo(), News::demo());
    let start = spider.start_request(&format!("{ORIGIN}/news/")).unwrap();
    let mut queue = VecDeque::from([start]);
    let mut seen: HashSet<String> = HashSet::new();
    let mut fetched: Vec<String> = Vec::new();
    let mut items: Vec<Map<String, Value>> = Vec::new();
    while !queue.is_empty() {
        // Highest priority first; FIFO among equals.
        let best = (0..queue.len())
            .max_by_key(|&i| (queue[i].priority, std::cmp::Reverse(i)))
            .unwrap();
        let request = queue.remove(best).unwrap();
        let (status, x) = extract_page(&spider, &site, &request);
        assert_eq!(status, 200, "{}", request.url);
        fetched.push(request.url.clone());
        items.extend(x.items.into_iter().map(|item| item.fields));
        for next in x.requests {
            if next.dont_filter || seen.insert(next.url.clone()) {
                queue.push_back(next);
            }
        }
    }
    let fronts: Vec<&str> = fetched
        .iter()
        .filter(|u| u.contains("/news/?") || u.ends_with("/news/"))
        .map(String::as_str)
        .collect();
    let front_urls = [
        format!("{ORIGIN}/news/"),
        format!("{ORIGIN}/news/?page=2"),
        format!("{ORIGIN}/news/?page=3"),
    ];
    assert_eq!(fronts, front_urls);
    assert!(fetched.iter().all(|u| !u.contains("/news/tag/")));
    assert_eq!(fetched.len(), 3 + news.articles.len());
    let unique: BTreeSet<&String> = fetched.iter().collect();
    assert_eq!(unique.len(), fetched.len(), "nothing fetched twice");
    // The front's articles come before the next front page (priority 10).
    assert_eq!(
        fetched[1..=ARTICLES_PER_FRONT_PAGE],
        news.articles[..ARTICLES_PER_FRONT_PAGE]
            .iter()
            .map(|a| format!("{ORIGIN}{}", a.path()))
            .collect::<Vec<_>>()
    );

    let mut scraped: Vec<Map<String, Value>> = items;
    scraped.sort_by_key(|fields| fields["slug"].as_str().map(str::to_owned));
    let mut expected: Vec<Map<String, Value>> = news
        .articles
        .iter()
        .map(|a| expected_fields(a, ORIGIN))
        .collect();
    expected.sort_by_key(|fields| fields["slug"].as_str().map(str::to_owned));
    assert_eq!(scraped, expected);
}
