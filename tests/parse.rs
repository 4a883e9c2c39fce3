//! `crawlworker parse` against the demo forum served on loopback, and on a
//! saved page.

use serde_json::Value;

use crawlworker_demo::{self as demo, Site};
use crawlworker_testkit::FixtureServer;

use crawlworker_testkit::{crawlworker, stderr, stdout};

fn json(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "parse failed: {}", stderr(out));
    serde_json::from_str(&stdout(out))
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", stdout(out)))
}

fn strs<'a>(v: &'a Value, key: &str) -> Vec<&'a str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x[key].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn parses_each_kind_of_demo_page_over_http() {
    let server = FixtureServer::start(Site::demo()).await.unwrap();
    let site = Site::demo();
    let meta = r#"{"forum_id": "00001", "max_page": 5}"#;
    let out = json(&crawlworker(&[
        "parse",
        "spiders/bbs.toml",
        &server.url("/list/00001/1"),
        "--meta",
        meta,
    ]));
    assert_eq!(out["rule"], "list");
    assert_eq!(out["status"], 200);
    let reqs = strs(&out["requests"], "url");
    assert_eq!(reqs.len(), demo::POSTS_PER_LIST_PAGE + 1);
    assert_eq!(
        reqs.last().copied(),
        Some(server.url("/list/00001/2").as_str())
    );
    assert_eq!(out["requests"][4]["meta"]["max_page"], 5);

    let post = site.forum("00002").unwrap().page(1).unwrap()[0];
    let out = json(&crawlworker(&[
        "parse",
        "spiders/bbs.toml",
        &server.url(&format!("/post/{post}")),
        "--meta",
        r#"{"forum_id": "00002"}"#,
    ]));
    assert_eq!(out["rule"], "post");
    assert_eq!(out["encoding"], "GBK");
    assert_eq!(
        out["items"][0]["fields"]["title"],
        site.post(post).unwrap().title.trim()
    );
    assert_eq!(out["items"][0]["fields"]["forum_id"], "00002");

    let with_comments = site
        .posts
        .values()
        .find(|p| !p.comments.is_empty())
        .unwrap();
    let out = json(&crawlworker(&[
        "parse",
        "spiders/bbs.toml",
        &server.url(&format!("/comment/{}/1", with_comments.id)),
    ]));
    assert_eq!(out["rule"], "comment");
    let ids = strs(
        &out["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["fields"].clone())
            .collect::<Value>(),
        "comment_id",
    )
    .into_iter()
    .map(str::to_string)
    .collect::<Vec<_>>();
    let want: Vec<String> = with_comments
        .comments_on_page(1)
        .unwrap()
        .iter()
        .map(|c| c.id.clone())
        .collect();
    assert_eq!(ids, want);
    assert!(server.hits(&format!("/comment/{}/1", with_comments.id)) >= 1);
    server.stop().await.unwrap();
}

#[test]
fn parses_a_saved_gbk_page_with_its_address() {
    let site = Site::demo();
    let page = demo::render(&site, "/list/00002/1");
    let dir = crawlworker_testkit::temp_dir("parse");
    let file = dir.path().join("list.html");
    std::fs::write(&file, &page.body).unwrap();
    let out = json(&crawlworker(&[
        "parse",
        "spiders/bbs.toml",
        file.to_str().unwrap(),
        "--url",
        "http://127.0.0.1:8700/list/00002/1",
        "--meta",
        r#"{"forum_id": "00002", "max_page": 3}"#,
    ]));
    assert_eq!(
        (out["encoding"].as_str(), out["charset_source"].as_str()),
        (Some("GBK"), Some("meta"))
    );
    let reqs = strs(&out["requests"], "url");
    assert_eq!(
        reqs.last().copied(),
        Some("http://127.0.0.1:8700/list/00002/2?order=%D7%EE%D0%C2")
    );
}

#[test]
fn errors_say_what_to_fix() {
    let out = crawlworker(&[
        "parse",
        "spiders/bbs.toml",
        "http://127.0.0.1:9/x",
        "--meta",
        "{oops",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("--meta is not valid JSON"),
        "{}",
        stderr(&out)
    );
    let out = crawlworker(&[
        "parse",
        "spiders/bbs.toml",
        "http://127.0.0.1:9/x",
        "--rule",
        "lst",
    ]);
    assert!(
        stderr(&out).contains("has no rule `lst`; its rules are: list, post, comment"),
        "{}",
        stderr(&out)
    );
    let out = crawlworker(&[
        "parse",
        "tests/fixtures/spiders/broken/unknown_keys.toml",
        "http://127.0.0.1:9/x",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("did you mean `allowed_domains`?"));
    // Port 9 (discard) is closed on loopback: the failure names the URL.
    let out = crawlworker(&["parse", "spiders/bbs.toml", "http://127.0.0.1:9/list/1/1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("http://127.0.0.1:9/list/1/1") && err.contains("refused"),
        "{err}"
    );
}

/// A crawl kept on one port of a host that runs several services:
/// `allowed_domains` entries may name a port, which links, redirects and
/// start entries must then use; entries without one allow every port.
#[test]
fn a_domain_with_a_port_keeps_the_crawl_on_that_port() {
    let dir = crawlworker_testkit::temp_dir("ports");
    let spider = dir.path().join("ports.toml");
    let write = |domains: &str| {
        std::fs::write(
            &spider,
            format!(
                "name = \"ports\"\nallowed_domains = [{domains}]\n\n[settings]\nallow_private_networks = true\n\n[[rules]]\nname = \"any\"\nmatch = '.'\n\n  [[rules.follow]]\n  css = \"a::attr(href)\"\n"
            ),
        )
        .unwrap();
    };
    let page = dir.path().join("page.html");
    std::fs::write(
        &page,
        r#"<a href="/same">same</a> <a href="http://127.0.0.1:8731/explicit">explicit</a>
<a href="http://127.0.0.1:9200/other-service">other</a> <a href="http://127.0.0.1/default">default port</a>
<a href="http://sub.localhost:8731/sub">subdomain</a>"#,
    )
    .unwrap();
    let parse = || {
        json(&crawlworker(&[
            "parse",
            spider.to_str().unwrap(),
            page.to_str().unwrap(),
            "--url",
            "http://127.0.0.1:8731/",
        ]))
    };

    write(r#""127.0.0.1:8731", "localhost:8731""#);
    let check = crawlworker(&["check", spider.to_str().unwrap()]);
    assert!(check.status.success(), "{}", stderr(&check));
    let out = parse();
    assert_eq!(
        strs(&out["requests"], "url"),
        [
            "http://127.0.0.1:8731/same",
            "http://127.0.0.1:8731/explicit",
            "http://sub.localhost:8731/sub"
        ]
    );
    assert_eq!(out["filtered"]["offsite"], 2, "{out}");

    // Without a port, every port of the host.
    write(r#""127.0.0.1""#);
    let out = parse();
    assert_eq!(out["requests"].as_array().unwrap().len(), 4, "{out}");

    // A port that is not one says how to write it.
    write(r#""127.0.0.1:http""#);
    let check = crawlworker(&["check", spider.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(2));
    assert!(
        stderr(&check).contains("not a port (1 to 65535)")
            && stderr(&check).contains("\"127.0.0.1:8731\""),
        "{}",
        stderr(&check)
    );
}
