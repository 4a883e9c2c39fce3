//! The items the shipped `spiders/bbs.toml` must scrape from the demo forum,
//! computed from the site model: what the crawl tests compare against,
//! field by field and as a whole set.

use serde_json::{json, Value};

use super::site::{Comment, ForumTask, Post, Site};

fn normalized(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The `post` item of `post`, served at `base` (e.g. `http://127.0.0.1:8700`).
pub fn post_item(post: &Post, base: &str) -> Value {
    json!({
        "kind": "post",
        "post_id": post.id,
        "forum_id": post.forum_id,
        "title": post.title.trim(),
        "author": post.author.trim(),
        "posted": post.posted,
        "views": post.views,
        "body": normalized(&post.body_text()),
        "url": format!("{base}/post/{}", post.id),
    })
}

/// The `comment` item of one comment of `post`.
pub fn comment_item(post: &Post, comment: &Comment) -> Value {
    json!({
        "kind": "comment",
        "comment_id": comment.id,
        "post_id": post.id,
        "forum_id": post.forum_id,
        "user": comment.user.trim(),
        "floor": comment.floor,
        "text": normalized(&comment.text),
    })
}

/// Every item a complete crawl of `tasks` yields, as JSON text, sorted (a
/// multiset: a duplicate would show twice).
pub fn bbs_items(site: &Site, tasks: &[ForumTask], base: &str) -> Vec<String> {
    let mut out = Vec::new();
    for task in tasks {
        for post in site.posts_in_task(task) {
            out.push(post_item(post, base).to_string());
            for c in &post.comments {
                out.push(comment_item(post, c).to_string());
            }
        }
    }
    out.sort();
    out
}
