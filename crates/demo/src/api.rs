//! The demo forum's JSON API, for spiders that read JSON: the same forums,
//! posts and comments as the HTML pages, paginated the ways real APIs are.
//! Pure, like [`super::pages`]: a request target (and for a POST its body)
//! in, a [`Page`] out. Routes:
//!
//! - `GET /api/forums/{forum_id}/threads?page=N`: one list page of a forum,
//!   `{"forum", "page", "total_pages", "has_more", "threads": [{"thread_id",
//!   "title", "author", "comments"}]}`; a page counter and `has_more`;
//! - `GET /api/threads/{post_id}/comments?page=N`: a page of a post's
//!   comments ([`API_COMMENTS_PER_PAGE`] each), `{"thread", "page",
//!   "total_pages", "comments": [{"id", "user", "floor", "text"}], "next"}`
//!   where `next` is the next page's path, `null` on the last; a page past
//!   the end has no comments (and `next` null);
//! - `POST /api/search`, form (`author=…&page=N`) or JSON
//!   (`{"author": …, "page": N}`) body: the threads of one author across
//!   the site ([`API_RESULTS_PER_PAGE`] a page), `{"author", "page",
//!   "total_pages", "results": [{"thread_id", "title", "forum"}]}`.
//!
//! `page` defaults to 1; a page that is not a canonical positive number is
//! a 400 with a JSON error. Nothing here changes the HTML pages.

use serde_json::{json, Value};

use super::pages::Page;
use super::site::{Comment, Post, Site};

/// Comments on one page of `/api/threads/{id}/comments` (the HTML pages
/// show 5, so the two paginations differ).
pub const API_COMMENTS_PER_PAGE: usize = 4;

/// Threads on one page of `POST /api/search`.
pub const API_RESULTS_PER_PAGE: usize = 2;

/// The answer to a GET of an `/api/` path, or `None` for other paths.
pub fn get(site: &Site, path: &str, query: Option<&str>) -> Option<Page> {
    let rest = path.strip_prefix("/api/")?;
    let page = match page_param(
        query
            .unwrap_or("")
            .split('&')
            .filter_map(|p| p.split_once('=')),
    ) {
        Ok(page) => page,
        Err(bad) => return Some(bad),
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let found = match segments.as_slice() {
        ["forums", forum_id, "threads"] => threads(site, forum_id, page),
        ["threads", id, "comments"] => id
            .parse()
            .ok()
            .filter(|n: &u64| n.to_string() == *id)
            .and_then(|id| site.post(id))
            .map(|post| comments(post, page)),
        _ => None,
    };
    Some(found.unwrap_or_else(|| error(404, &format!("no API resource at {path}"))))
}

/// Whether a request with this method and path is answered from its body
/// (by [`post`]).
pub fn takes_body(method: &str, path: &str) -> bool {
    method == "POST" && path == "/api/search"
}

/// The answer to a POST of `body` to `path` (see [`takes_body`]).
pub fn post(site: &Site, path: &str, body: &[u8]) -> Page {
    if path != "/api/search" {
        return error(404, &format!("no API resource at {path}"));
    }
    let fields: Vec<(String, String)> = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(o)) => o
            .into_iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                (k, v)
            })
            .collect(),
        Ok(_) => return error(400, "a JSON body must be an object"),
        Err(_) => form_pairs(body),
    };
    let page = match page_param(fields.iter().map(|(k, v)| (k.as_str(), v.as_str()))) {
        Ok(page) => page,
        Err(bad) => return bad,
    };
    let Some((_, author)) = fields.iter().find(|(k, _)| k == "author") else {
        return error(400, "say whose threads: author=…");
    };
    let found = search(site, author);
    let total_pages = found.len().div_ceil(API_RESULTS_PER_PAGE);
    let results: Vec<Value> = found
        .chunks(API_RESULTS_PER_PAGE)
        .nth(page - 1)
        .unwrap_or_default()
        .iter()
        .map(|p| json!({"thread_id": p.id, "title": p.title.trim(), "forum": p.forum_id}))
        .collect();
    ok(json!({
        "author": author,
        "page": page,
        "total_pages": total_pages,
        "results": results,
    }))
}

/// The threads of `author` on `site`, in id order: what a search for them
/// finds, page after page.
pub fn search<'a>(site: &'a Site, author: &str) -> Vec<&'a Post> {
    site.posts
        .values()
        .filter(|p| p.author.trim() == author.trim())
        .collect()
}

fn threads(site: &Site, forum_id: &str, page: usize) -> Option<Page> {
    let forum = site.forum(forum_id)?;
    let total_pages = forum.page_count();
    let threads: Vec<Value> = forum
        .page(page)
        .unwrap_or_default()
        .iter()
        .filter_map(|&id| site.post(id))
        .map(|p| {
            json!({
                "thread_id": p.id,
                "title": p.title.trim(),
                "author": p.author.trim(),
                "comments": p.comments.len(),
            })
        })
        .collect();
    Some(ok(json!({
        "forum": forum.id,
        "page": page,
        "total_pages": total_pages,
        "has_more": page < total_pages,
        "threads": threads,
    })))
}

/// Comment page `page` of `post` in the API's paging (empty past the end).
pub fn comments_on_api_page(post: &Post, page: usize) -> &[Comment] {
    post.comments
        .chunks(API_COMMENTS_PER_PAGE)
        .nth(page - 1)
        .unwrap_or_default()
}

/// The number of API comment pages of `post` (0 without comments).
pub fn api_comment_pages(post: &Post) -> usize {
    post.comments.len().div_ceil(API_COMMENTS_PER_PAGE)
}

fn comments(post: &Post, page: usize) -> Page {
    let total_pages = api_comment_pages(post);
    let comments: Vec<Value> = comments_on_api_page(post, page)
        .iter()
        .map(|c| json!({"id": c.id, "user": c.user.trim(), "floor": c.floor, "text": c.text}))
        .collect();
    let next = (page < total_pages)
        .then(|| format!("/api/threads/{}/comments?page={}", post.id, page + 1));
    ok(json!({
        "thread": post.id,
        "page": page,
        "total_pages": total_pages,
        "comments": comments,
        "next": next,
    }))
}

/// The `page` parameter: 1 when absent, else a canonical positive number.
fn page_param<'a>(mut pairs: impl Iterator<Item = (&'a str, &'a str)>) -> Result<usize, Page> {
    match pairs.find(|(k, _)| *k == "page") {
        None => Ok(1),
        Some((_, v)) => v
            .parse::<usize>()
            .ok()
            .filter(|n| *n >= 1 && n.to_string() == v)
            .ok_or_else(|| error(400, &format!("page must be a number from 1, not `{v}`"))),
    }
}

/// `application/x-www-form-urlencoded` pairs: `+` is a space, `%XX` a byte.
fn form_pairs(body: &[u8]) -> Vec<(String, String)> {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    fn decode(s: &str) -> String {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            let escaped = match bytes.get(i..i + 3) {
                Some([b'%', hi, lo]) => hex(*hi).zip(hex(*lo)).map(|(h, l)| h * 16 + l),
                _ => None,
            };
            match (escaped, bytes[i]) {
                (Some(b), _) => {
                    out.push(b);
                    i += 3;
                    continue;
                }
                (None, b'+') => out.push(b' '),
                (None, b) => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    String::from_utf8_lossy(body)
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn ok(value: Value) -> Page {
    Page {
        status: 200,
        content_type: "application/json".to_owned(),
        body: value.to_string().into_bytes(),
    }
}

fn error(status: u16, message: &str) -> Page {
    Page {
        status,
        content_type: "application/json".to_owned(),
        body: json!({ "error": message }).to_string().into_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(page: &Page) -> Value {
        serde_json::from_slice(&page.body).unwrap()
    }

    #[test]
    fn comments_paginate_with_next_and_total() {
        let site = Site::demo();
        let post = site
            .posts
            .values()
            .find(|p| p.comments.len() == 10)
            .unwrap();
        let path = format!("/api/threads/{}/comments", post.id);
        let first = get(&site, &path, None).unwrap();
        assert_eq!(first.content_type, "application/json");
        let v = body(&first);
        assert_eq!(
            (v["page"].as_u64(), v["total_pages"].as_u64()),
            (Some(1), Some(3))
        );
        assert_eq!(v["comments"].as_array().unwrap().len(), 4);
        assert_eq!(v["next"], format!("{path}?page=2"));
        let last = body(&get(&site, &path, Some("page=3")).unwrap());
        assert_eq!(last["comments"].as_array().unwrap().len(), 2);
        assert_eq!(last["next"], Value::Null);
        let past = body(&get(&site, &path, Some("page=4")).unwrap());
        assert_eq!(past["comments"], json!([]));
        assert_eq!(get(&site, &path, Some("page=0")).unwrap().status, 400);
        assert_eq!(
            get(&site, "/api/threads/1/comments", None).unwrap().status,
            404
        );
        assert!(get(&site, "/list/00001/1", None).is_none());
    }

    #[test]
    fn threads_say_whether_there_are_more() {
        let site = Site::demo();
        let v = body(&get(&site, "/api/forums/00003/threads", Some("page=2")).unwrap());
        assert_eq!(v["has_more"], false);
        assert_eq!(v["total_pages"], 2);
        let v = body(&get(&site, "/api/forums/00003/threads", Some("page=1")).unwrap());
        assert_eq!(v["has_more"], true);
        assert_eq!(v["threads"][0]["thread_id"], site.forums[2].pages[0][0]);
    }

    #[test]
    fn search_reads_a_form_or_a_json_body() {
        let site = Site::demo();
        let author = site
            .posts
            .values()
            .next()
            .unwrap()
            .author
            .trim()
            .to_string();
        let want = search(&site, &author).len();
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("author", &author)
            .append_pair("page", "1")
            .finish();
        let a = body(&post(&site, "/api/search", form.as_bytes()));
        let b = body(&post(
            &site,
            "/api/search",
            json!({"author": author, "page": 1}).to_string().as_bytes(),
        ));
        assert_eq!(a, b);
        assert_eq!(a["total_pages"], want.div_ceil(API_RESULTS_PER_PAGE));
        assert_eq!(post(&site, "/api/search", b"page=1").status, 400);
        assert!(takes_body("POST", "/api/search") && !takes_body("GET", "/api/search"));
    }
}
