//! The demo forum's data: forums, their list pages, posts and comments.
//!
//! Everything here is built deterministically (no clock, no `rand`): the same
//! call always gives the same site, so tests can compute the exact item set a
//! crawl must produce from the model alone. This module owns no HTML (see
//! [`super::pages`]) and no I/O (see [`super::server`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Posts shown on one forum list page.
pub const POSTS_PER_LIST_PAGE: usize = 4;

/// Comments shown on one comment page of a post.
pub const COMMENTS_PER_PAGE: usize = 5;

/// A post's id, unique across the whole site.
pub type PostId = u64;

/// The id of the first post; later posts count up from it.
const FIRST_POST_ID: PostId = 1001;

/// The newest post's time, 2026-03-04T05:06:07Z, in Unix seconds; every
/// later post (higher id) is older, so page 1 of a forum lists the newest.
const NEWEST_POST_UNIX: i64 = 1_772_600_767;

/// Seconds between consecutive posts, before jitter.
const POST_SPACING_SECS: i64 = 600;

/// The seed of [`Site::demo`].
const DEMO_SEED: u64 = 2026;

/// Comment counts of the demo posts, cycled over them in id order. The length
/// is prime to [`POSTS_PER_LIST_PAGE`], so each list position sees every
/// count; it has posts without comments, posts with exactly one full comment
/// page and posts with three comment pages.
const DEMO_COMMENT_COUNTS: [usize; 17] = [3, 0, 5, 12, 1, 7, 11, 0, 5, 2, 10, 6, 4, 9, 0, 8, 5];

/// The most comments a generated post has.
const MAX_COMMENTS: u64 = 12;

/// How a forum's pages are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Charset {
    Utf8,
    Gbk,
}

impl Charset {
    /// The label used in `<meta charset>`.
    pub fn meta_label(self) -> &'static str {
        match self {
            Charset::Utf8 => "utf-8",
            Charset::Gbk => "gbk",
        }
    }

    /// The label used in the `Content-Type` header, when the forum puts it
    /// there.
    pub fn header_label(self) -> &'static str {
        match self {
            Charset::Utf8 => "utf-8",
            Charset::Gbk => "GBK",
        }
    }

    /// The encoder and decoder for this charset.
    pub fn encoding(self) -> &'static encoding_rs::Encoding {
        match self {
            Charset::Utf8 => encoding_rs::UTF_8,
            Charset::Gbk => encoding_rs::GBK,
        }
    }
}

/// One forum: a name, an encoding and its list pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forum {
    /// Five digits, e.g. `"00001"`; it appears in the list page URLs.
    pub id: String,
    /// Display name (may contain `&` and `<`).
    pub name: String,
    /// Encoding of every page of this forum.
    pub charset: Charset,
    /// Whether `Content-Type` names the charset; when false, only the page's
    /// `<meta charset>` does, so the crawler must sniff it.
    pub charset_in_header: bool,
    /// Whether pages carry `<base href="/">` and hrefs without a leading
    /// slash, so the crawler must resolve links against the base URL.
    pub base_href: bool,
    /// Post ids of each list page, page 1 (newest) first.
    pub pages: Vec<Vec<PostId>>,
}

impl Forum {
    /// Number of list pages.
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Post ids on list page `page` (1-based), or `None` past either end.
    pub fn page(&self, page: usize) -> Option<&[PostId]> {
        let index = page.checked_sub(1)?;
        self.pages.get(index).map(Vec::as_slice)
    }

    /// Every post id of the forum, in list order.
    pub fn post_ids(&self) -> impl Iterator<Item = PostId> + '_ {
        self.pages.iter().flatten().copied()
    }

    /// Post ids on list pages `1..=max_page`: what a crawl bounded by
    /// `max_page` reaches.
    pub fn post_ids_up_to(&self, max_page: usize) -> impl Iterator<Item = PostId> + '_ {
        self.pages.iter().take(max_page).flatten().copied()
    }
}

/// One post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Post {
    pub id: PostId,
    /// The forum that lists this post.
    pub forum_id: String,
    pub title: String,
    pub author: String,
    /// ISO 8601 in UTC, e.g. `"2026-03-04T05:06:07Z"`; the page shows it in
    /// the `datetime` attribute and a human form as the element text.
    pub posted: String,
    pub views: u64,
    /// The body, one entry per `<p>`.
    pub body_paragraphs: Vec<Paragraph>,
    /// Comments in floor order.
    pub comments: Vec<Comment>,
}

impl Post {
    /// Number of comment pages; 0 when the post has no comments.
    pub fn comment_page_count(&self) -> usize {
        self.comments.len().div_ceil(COMMENTS_PER_PAGE)
    }

    /// Comments on comment page `page` (1-based), or `None` past either end.
    pub fn comments_on_page(&self, page: usize) -> Option<&[Comment]> {
        let index = page.checked_sub(1)?;
        self.comments.chunks(COMMENTS_PER_PAGE).nth(index)
    }

    /// Every text node inside `div.post-body` in document order, including
    /// the `"\n"` nodes between paragraphs: what `div.post-body ::text`
    /// yields. A spider that joins them with `" "` and normalises whitespace
    /// gets `body_text_nodes().join(" ")` with runs of whitespace collapsed
    /// to one space and the ends trimmed.
    pub fn body_text_nodes(&self) -> Vec<&str> {
        let mut nodes = Vec::new();
        for (index, paragraph) in self.body_paragraphs.iter().enumerate() {
            if index > 0 {
                nodes.push("\n");
            }
            nodes.extend(paragraph.text_nodes());
        }
        nodes
    }

    /// The text of the whole body exactly as an HTML parser sees it inside
    /// `div.post-body`: each paragraph's [`Paragraph::text`], joined by the
    /// `"\n"` text node that separates the `<p>` elements.
    pub fn body_text(&self) -> String {
        let texts: Vec<String> = self.body_paragraphs.iter().map(Paragraph::text).collect();
        texts.join("\n")
    }
}

/// One paragraph of a post body: text with some inline markup, so that a
/// paragraph's own text differs from the text of all its descendants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paragraph(pub Vec<Inline>);

impl Paragraph {
    /// The `<p>`'s descendant text nodes in document order (a `<br>` has
    /// none): what a `p ::text` selector yields.
    pub fn text_nodes(&self) -> impl Iterator<Item = &str> + '_ {
        self.0.iter().filter_map(|inline| match inline {
            Inline::Text(text) | Inline::Bold(text) => Some(text.as_str()),
            Inline::Link { text, .. } => Some(text.as_str()),
            Inline::LineBreak => None,
        })
    }

    /// All descendant text of the `<p>`: [`Paragraph::text_nodes`]
    /// concatenated, no separator added.
    pub fn text(&self) -> String {
        self.text_nodes().collect()
    }

    /// Only the text nodes that are direct children of the `<p>`.
    pub fn direct_text(&self) -> String {
        self.0
            .iter()
            .filter_map(|inline| match inline {
                Inline::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// A piece of a paragraph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inline {
    /// A plain text node.
    Text(String),
    /// `<b>text</b>`.
    Bold(String),
    /// `<a href="…">text</a>`; always off-site (`*.demo.invalid`), so a
    /// crawl that follows it by mistake never reaches more of the forum.
    Link { href: String, text: String },
    /// `<br>`, which adds no text.
    LineBreak,
}

/// One comment of a post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    /// `"c<post id>-<floor>"`, e.g. `"c1001-3"`; unique across the site.
    pub id: String,
    pub user: String,
    pub text: String,
    /// 1 for the first comment.
    pub floor: u32,
}

/// A start task of the demo crawl, as pushed to `<spider>:start_urls`: crawl
/// forum `forum_id` from list page 1 up to list page `max_page`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForumTask {
    pub forum_id: String,
    pub max_page: usize,
}

/// The start tasks of the demo crawl. Forum `00001` has 7 list pages but is
/// crawled to page 5 only, so pages 6 and 7 (and their posts) must not be
/// reached: they test the pagination stop condition.
pub fn demo_forum_tasks() -> Vec<ForumTask> {
    [("00001", 5), ("00002", 3), ("00003", 2)]
        .into_iter()
        .map(|(forum_id, max_page)| ForumTask {
            forum_id: forum_id.to_owned(),
            max_page,
        })
        .collect()
}

/// Every page the demo crawl fetches (robots.txt aside), with the task that
/// reaches it: each task's list pages up to its `max_page`, their posts
/// and every comment page.
pub fn demo_crawl_paths(site: &Site) -> Vec<(String, ForumTask)> {
    let mut paths = Vec::new();
    for task in demo_forum_tasks() {
        for n in 1..=task.max_page {
            paths.push((format!("/list/{}/{n}", task.forum_id), task.clone()));
        }
        for post in site.posts_in_task(&task) {
            paths.push((format!("/post/{}", post.id), task.clone()));
            for n in 1..=post.comment_page_count() {
                paths.push((format!("/comment/{}/{n}", post.id), task.clone()));
            }
        }
    }
    paths
}

/// [`demo_forum_tasks`] as the JSON strings pushed to Redis, e.g.
/// `{"forum_id":"00001","max_page":5}`.
pub fn demo_tasks() -> Vec<String> {
    demo_forum_tasks()
        .iter()
        .map(|task| {
            serde_json::json!({"forum_id": task.forum_id, "max_page": task.max_page}).to_string()
        })
        .collect()
}

/// The whole site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// Forums in id order.
    pub forums: Vec<Forum>,
    /// Every post, by id.
    pub posts: BTreeMap<PostId, Post>,
}

impl Site {
    /// The fixed small demo site:
    ///
    /// - `00001`: UTF-8, charset in the header, English and Chinese titles,
    ///   7 list pages;
    /// - `00002`: GBK, charset only in `<meta>`, Chinese, 3 list pages;
    /// - `00003`: GBK, charset in the header, Chinese, `<base href="/">`,
    ///   2 list pages.
    ///
    /// Post ids run from 1001 in list order; posts have 0 to 12 comments.
    pub fn demo() -> Site {
        let forums = [
            ("Rust 编程 & Tokio 讨论区", Kind::Utf8, 7),
            ("灌水乐园 & 闲聊", Kind::GbkMeta, 3),
            ("二手交易 <闲置>", Kind::GbkBase, 2),
        ];
        let specs = forums
            .into_iter()
            .map(|(name, kind, pages)| ForumSpec {
                name: name.to_owned(),
                kind,
                pages,
            })
            .collect();
        build(specs, DEMO_SEED, CommentCounts::DemoCycle)
    }

    /// A bigger site of the same shapes for benchmarks: `forums` forums of
    /// `pages_per_forum` full list pages each, cycling through the three
    /// kinds of [`Site::demo`]'s forums. The same arguments always give the
    /// same site.
    pub fn generate(forums: usize, pages_per_forum: usize, seed: u64) -> Site {
        let kinds = [Kind::Utf8, Kind::GbkMeta, Kind::GbkBase];
        let specs = (0..forums)
            .map(|index| {
                let kind = kinds[index % kinds.len()];
                let pool = match kind {
                    Kind::Utf8 => GENERATED_FORUM_NAMES_MIXED,
                    Kind::GbkMeta | Kind::GbkBase => GENERATED_FORUM_NAMES_ZH,
                };
                ForumSpec {
                    name: format!("{} {}", pool[index % pool.len()], index + 1),
                    kind,
                    pages: pages_per_forum,
                }
            })
            .collect();
        build(specs, seed, CommentCounts::Hashed)
    }

    /// The forum with this id.
    pub fn forum(&self, id: &str) -> Option<&Forum> {
        self.forums.iter().find(|forum| forum.id == id)
    }

    /// The post with this id.
    pub fn post(&self, id: PostId) -> Option<&Post> {
        self.posts.get(&id)
    }

    /// The posts of a forum, in list order.
    pub fn posts_of<'a>(&'a self, forum: &'a Forum) -> impl Iterator<Item = &'a Post> + 'a {
        forum.post_ids().filter_map(|id| self.post(id))
    }

    /// The posts a crawl of `task` reaches (list pages `1..=max_page`), in
    /// list order; empty when the forum does not exist.
    pub fn posts_in_task<'a>(&'a self, task: &ForumTask) -> Vec<&'a Post> {
        match self.forum(&task.forum_id) {
            Some(forum) => forum
                .post_ids_up_to(task.max_page)
                .filter_map(|id| self.post(id))
                .collect(),
            None => Vec::new(),
        }
    }
}

/// The three kinds of forum the demo exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// UTF-8 with the charset in the header.
    Utf8,
    /// GBK with the charset only in `<meta>`.
    GbkMeta,
    /// GBK with the charset in the header and a `<base href>`.
    GbkBase,
}

/// What [`build`] needs to know about one forum.
struct ForumSpec {
    name: String,
    kind: Kind,
    pages: usize,
}

/// Where comment counts come from.
#[derive(Clone, Copy)]
enum CommentCounts {
    /// [`DEMO_COMMENT_COUNTS`], cycled: the demo's mix is guaranteed.
    DemoCycle,
    /// A hash of the seed and the post id, 0 to [`MAX_COMMENTS`].
    Hashed,
}

/// Builds a site: forum ids count from `00001`, post ids from
/// [`FIRST_POST_ID`] in list order across forums.
fn build(specs: Vec<ForumSpec>, seed: u64, counts: CommentCounts) -> Site {
    let mut forums = Vec::with_capacity(specs.len());
    let mut posts = BTreeMap::new();
    let mut next_id = FIRST_POST_ID;
    for (index, spec) in specs.into_iter().enumerate() {
        let (charset, charset_in_header, base_href) = match spec.kind {
            Kind::Utf8 => (Charset::Utf8, true, false),
            Kind::GbkMeta => (Charset::Gbk, false, false),
            Kind::GbkBase => (Charset::Gbk, true, true),
        };
        let id = format!("{:05}", index + 1);
        let mut pages = Vec::with_capacity(spec.pages);
        for _ in 0..spec.pages {
            let mut page = Vec::with_capacity(POSTS_PER_LIST_PAGE);
            for _ in 0..POSTS_PER_LIST_PAGE {
                let post = make_post(next_id, &id, charset, seed, counts);
                posts.insert(next_id, post);
                page.push(next_id);
                next_id += 1;
            }
            pages.push(page);
        }
        forums.push(Forum {
            id,
            name: spec.name,
            charset,
            charset_in_header,
            base_href,
            pages,
        });
    }
    Site { forums, posts }
}

/// Builds one post from its id alone (plus the seed), so posts do not depend
/// on one another.
fn make_post(
    id: PostId,
    forum_id: &str,
    charset: Charset,
    seed: u64,
    counts: CommentCounts,
) -> Post {
    let words = match charset {
        Charset::Utf8 => &MIXED,
        Charset::Gbk => &CHINESE,
    };
    let n = id - FIRST_POST_ID;
    let mut rng = SplitMix::new(seed, id);

    // With 12 first halves and 8 second halves, `q = n / 12` is recovered
    // from `(5q + n % 12) % 8` for q < 8: titles are unique for the first 96
    // posts, and neighbours differ in both halves.
    let first = words.title_first;
    let second = words.title_second;
    let title = format!(
        "{}{}{}",
        pick_at(first, n),
        words.title_joiner,
        pick_at(second, n / first.len() as u64 + n)
    );

    let jitter = rng.below(POST_SPACING_SECS as u64) as i64;
    let posted_unix = NEWEST_POST_UNIX - n as i64 * POST_SPACING_SECS - jitter;
    let magnitude = rng.below(7) as u32;
    let views = rng.below(10u64.pow(magnitude + 1));
    let author = rng.pick(words.users).to_owned();

    let paragraph_count = 1 + rng.below(3) as usize;
    let body_paragraphs = (0..paragraph_count)
        .map(|index| make_paragraph(index, words, &mut rng))
        .collect();

    let comment_count = match counts {
        CommentCounts::DemoCycle => DEMO_COMMENT_COUNTS[n as usize % DEMO_COMMENT_COUNTS.len()],
        CommentCounts::Hashed => rng.below(MAX_COMMENTS + 1) as usize,
    };
    let comments = (1..=comment_count)
        .map(|floor| {
            let user = rng.pick(words.users).to_owned();
            let (first, second) = rng.pick_two(words.comments);
            let text = format!("{first}{}{second}", words.sentence_joiner);
            Comment {
                id: format!("c{id}-{floor}"),
                user,
                text,
                floor: floor as u32,
            }
        })
        .collect();

    Post {
        id,
        forum_id: forum_id.to_owned(),
        title,
        author,
        posted: iso8601(posted_unix),
        views,
        body_paragraphs,
        comments,
    }
}

/// Paragraph `index` of a body. The first always has `<b>` (so direct text
/// differs from descendant text), the second a link, the third a `<br>`.
fn make_paragraph(index: usize, words: &Words, rng: &mut SplitMix) -> Paragraph {
    let join = words.sentence_joiner;
    let (before, after) = rng.pick_two(words.sentences);
    let inlines = match index % 3 {
        0 => vec![
            Inline::Text(format!("{before}{join}")),
            Inline::Bold(rng.pick(words.bold).to_owned()),
            Inline::Text(format!("{join}{after}")),
        ],
        1 => vec![
            Inline::Text(format!("{before}{join}")),
            Inline::Link {
                href: format!(
                    "https://wiki.demo.invalid/page/{}?ref=demo&lang=zh",
                    rng.below(100)
                ),
                text: rng.pick(words.link_texts).to_owned(),
            },
            Inline::Text(format!("{join}{after}")),
        ],
        _ => vec![
            Inline::Text(before.to_owned()),
            Inline::LineBreak,
            Inline::Text(after.to_owned()),
        ],
    };
    Paragraph(inlines)
}

fn pick_at(items: &[&'static str], n: u64) -> &'static str {
    items[(n % items.len() as u64) as usize]
}

/// Formats Unix seconds as `YYYY-MM-DDTHH:MM:SSZ`.
fn iso8601(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// SplitMix64: a tiny, good-enough deterministic generator (no `rand`).
struct SplitMix(u64);

impl SplitMix {
    fn new(seed: u64, id: PostId) -> SplitMix {
        let mut rng = SplitMix(seed ^ id.wrapping_mul(0xD6E8_FEB8_6659_FD93));
        rng.next();
        rng
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }

    fn pick(&mut self, items: &[&'static str]) -> &'static str {
        let index = self.below(items.len() as u64);
        pick_at(items, index)
    }

    /// Two different items (`items` has at least two).
    fn pick_two(&mut self, items: &[&'static str]) -> (&'static str, &'static str) {
        let len = items.len() as u64;
        let first = self.below(len);
        let second = first + 1 + self.below(len - 1);
        (pick_at(items, first), pick_at(items, second))
    }
}

/// The vocabulary of one kind of forum. Texts have no leading or trailing
/// whitespace and no doubled spaces, so trimming or whitespace normalisation
/// in a spider does not change them; some contain `&`, `<` and `>`, which
/// the pages must escape. The Chinese words are all encodable in GBK.
struct Words {
    title_first: &'static [&'static str],
    title_joiner: &'static str,
    title_second: &'static [&'static str],
    users: &'static [&'static str],
    sentences: &'static [&'static str],
    sentence_joiner: &'static str,
    bold: &'static [&'static str],
    link_texts: &'static [&'static str],
    comments: &'static [&'static str],
}

/// English and Chinese, for the UTF-8 forums.
const MIXED: Words = Words {
    title_first: &[
        "Tokio & async I/O",
        "Vec<u8> vs String",
        "Lifetimes explained",
        "Serde tips",
        "Cargo workspaces",
        "Error handling",
        "Redis pipelines",
        "Unsafe code review",
        "Borrow checker",
        "Trait objects",
        "Macro hygiene",
        "Zero-cost abstractions",
    ],
    title_joiner: " ",
    title_second: &[
        "入门教程",
        "求助",
        "经验分享",
        "踩坑记录",
        "性能对比",
        "讨论",
        "问题汇总",
        "最佳实践",
    ],
    users: &[
        "ferris",
        "老王",
        "Tom & Jerry",
        "小明",
        "async_fn",
        "<guest>",
        "张三",
        "crab_lover",
    ],
    sentences: &[
        "I have been using Tokio for a while.",
        "Here is what I found after a week of testing.",
        "The build got 30% faster.",
        "用了一段时间，感觉还不错。",
        "Benchmarks are at the end of the post.",
        "Any feedback is welcome & appreciated.",
        "Note that a < b holds for all inputs here.",
        "踩了不少坑，记录一下。",
    ],
    sentence_joiner: " ",
    bold: &["Important:", "重要", "TL;DR"],
    link_texts: &["the docs", "文档", "this issue"],
    comments: &[
        "+1, same here.",
        "Did you try cargo clean?",
        "1 < 2 && 3 > 2, obviously.",
        "谢谢分享！",
        "学到了。",
        "Which version of Tokio?",
        "我也遇到过这个问题。",
        "Works for me & my team.",
        "Please post the full error.",
        "顶一下。",
    ],
};

/// Chinese only, for the GBK forums.
const CHINESE: Words = Words {
    title_first: &[
        "周末去哪儿玩",
        "老家的年夜饭",
        "第一次养猫",
        "通勤路上的见闻",
        "推荐几本好书",
        "装修心得",
        "考研经验",
        "跑步打卡",
        "手机选购",
        "租房避坑",
        "自制咖啡",
        "旧相机出售",
    ],
    title_joiner: "",
    title_second: &[
        "？",
        "——求建议",
        "（长文）",
        "，大家怎么看",
        "&更多",
        "<转帖>",
        "【原创】",
        "分享",
    ],
    users: &[
        "老王",
        "小明",
        "张三",
        "李四",
        "王五<管理员>",
        "猫&狗",
        "路人甲",
        "一只咸鱼",
    ],
    sentences: &[
        "今天天气不错，出去走了走。",
        "说说我的经历，仅供参考。",
        "价格大概在三百元左右。",
        "有兴趣的朋友可以私信我。",
        "欢迎大家一起讨论&交流。",
        "注意：数量<10的不包邮。",
        "图片稍后补上。",
        "以上纯属个人观点。",
    ],
    sentence_joiner: "",
    bold: &["重点：", "注意", "更新"],
    link_texts: &["详情见这里", "原帖链接", "百科"],
    comments: &[
        "楼主说得对。",
        "顶一下！",
        "谢谢分享，学到了。",
        "价格还能再便宜点吗？",
        "已私信。",
        "我也想知道&同问。",
        "沙发！",
        "数量<5的话就算了。",
        "支持一下。",
        "路过看看。",
    ],
};

const GENERATED_FORUM_NAMES_MIXED: &[&str] =
    &["Rust & 系统编程", "Web <前端> 开发", "Databases 数据库"];
const GENERATED_FORUM_NAMES_ZH: &[&str] = &["灌水乐园", "二手交易 <闲置>", "旅游&摄影", "美食天地"];

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn newest_post_time_is_the_documented_one() {
        assert_eq!(iso8601(NEWEST_POST_UNIX), "2026-03-04T05:06:07Z");
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn demo_has_the_documented_shape() {
        let site = Site::demo();
        let shape: Vec<_> = site
            .forums
            .iter()
            .map(|f| {
                (
                    f.id.as_str(),
                    f.charset,
                    f.charset_in_header,
                    f.base_href,
                    f.page_count(),
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                ("00001", Charset::Utf8, true, false, 7),
                ("00002", Charset::Gbk, false, false, 3),
                ("00003", Charset::Gbk, true, true, 2),
            ]
        );
        for forum in &site.forums {
            assert!(forum
                .pages
                .iter()
                .all(|page| page.len() == POSTS_PER_LIST_PAGE));
            for post in site.posts_of(forum) {
                assert_eq!(post.forum_id, forum.id);
            }
        }
        let listed: Vec<PostId> = site.forums.iter().flat_map(Forum::post_ids).collect();
        let unique: HashSet<PostId> = listed.iter().copied().collect();
        assert_eq!(listed.len(), unique.len(), "post ids must be unique");
        assert_eq!(listed.len(), site.posts.len());
        assert_eq!(listed.first(), Some(&1001));
        assert_eq!(listed.last(), Some(&1048));
    }

    #[test]
    fn demo_comment_counts_are_varied_and_bounded() {
        let site = Site::demo();
        let crawled: Vec<&Post> = demo_forum_tasks()
            .iter()
            .flat_map(|task| site.posts_in_task(task))
            .collect();
        let counts: Vec<usize> = crawled.iter().map(|post| post.comments.len()).collect();
        assert!(counts.contains(&0));
        assert!(counts.contains(&5));
        assert!(counts.iter().any(|&n| n >= 11));
        assert!(site.posts.values().all(|post| post.comments.len() <= 12));
        for post in site.posts.values() {
            for (index, comment) in post.comments.iter().enumerate() {
                assert_eq!(comment.floor as usize, index + 1);
                assert_eq!(comment.id, format!("c{}-{}", post.id, index + 1));
            }
        }
    }

    #[test]
    fn demo_titles_are_unique_and_mix_languages() {
        let site = Site::demo();
        let titles: HashSet<&str> = site.posts.values().map(|p| p.title.as_str()).collect();
        assert_eq!(titles.len(), site.posts.len());
        let forum1 = site
            .forum("00001")
            .map(|f| site.posts_of(f).collect::<Vec<_>>());
        let forum1 = forum1.unwrap_or_default();
        assert!(forum1
            .iter()
            .all(|p| !p.title.is_ascii() && p.title.chars().any(|c| c.is_ascii_alphabetic())));
        assert!(site.posts.values().any(|p| p.title.contains('&')));
        assert!(site.posts.values().any(|p| p.title.contains('<')));
    }

    #[test]
    fn gbk_forum_texts_are_encodable_in_gbk() {
        let site = Site::demo();
        let generated = Site::generate(6, 40, 7);
        for site in [&site, &generated] {
            for forum in site.forums.iter().filter(|f| f.charset == Charset::Gbk) {
                let mut texts = vec![forum.name.clone()];
                for post in site.posts_of(forum) {
                    texts.extend([post.title.clone(), post.author.clone(), post.body_text()]);
                    for comment in &post.comments {
                        texts.extend([comment.user.clone(), comment.text.clone()]);
                    }
                }
                for text in texts {
                    let (_, _, unmappable) = encoding_rs::GBK.encode(&text);
                    assert!(!unmappable, "not encodable in GBK: {text}");
                }
            }
        }
    }

    #[test]
    fn paragraphs_have_markup_that_hides_text_from_direct_text() {
        let site = Site::demo();
        for post in site.posts.values() {
            let first = &post.body_paragraphs[0];
            assert_ne!(first.text(), first.direct_text());
        }
    }

    /// The numbers the integration tests and the README rely on.
    #[test]
    fn demo_counts_are_pinned() {
        let site = Site::demo();
        let per_forum: Vec<(usize, usize)> = site
            .forums
            .iter()
            .map(|f| {
                let posts: Vec<&Post> = site.posts_of(f).collect();
                (posts.len(), posts.iter().map(|p| p.comments.len()).sum())
            })
            .collect();
        assert_eq!(per_forum, [(28, 144), (12, 60), (8, 47)]);
        let crawled: Vec<&Post> = demo_forum_tasks()
            .iter()
            .flat_map(|task| site.posts_in_task(task))
            .collect();
        let comments: usize = crawled.iter().map(|p| p.comments.len()).sum();
        let comment_pages: usize = crawled.iter().map(|p| p.comment_page_count()).sum();
        assert_eq!((crawled.len(), comments, comment_pages), (40, 203, 53));
    }

    #[test]
    fn demo_tasks_are_the_documented_json() {
        assert_eq!(
            demo_tasks(),
            [
                r#"{"forum_id":"00001","max_page":5}"#,
                r#"{"forum_id":"00002","max_page":3}"#,
                r#"{"forum_id":"00003","max_page":2}"#,
            ]
        );
        let site = Site::demo();
        let reached: usize = demo_forum_tasks()
            .iter()
            .map(|t| site.posts_in_task(t).len())
            .sum();
        assert_eq!(reached, (5 + 3 + 2) * POSTS_PER_LIST_PAGE);
    }

    #[test]
    fn generate_is_deterministic_and_has_the_same_shapes() {
        let a = Site::generate(4, 10, 42);
        assert_eq!(a, Site::generate(4, 10, 42));
        assert_ne!(a, Site::generate(4, 10, 43));
        assert_eq!(a.forums.len(), 4);
        assert_eq!(a.posts.len(), 4 * 10 * POSTS_PER_LIST_PAGE);
        let kinds: Vec<_> = a
            .forums
            .iter()
            .map(|f| (f.charset, f.charset_in_header, f.base_href))
            .collect();
        assert_eq!(
            kinds,
            [
                (Charset::Utf8, true, false),
                (Charset::Gbk, false, false),
                (Charset::Gbk, true, true),
                (Charset::Utf8, true, false),
            ]
        );
        assert!(a
            .posts
            .values()
            .all(|p| p.comments.len() <= MAX_COMMENTS as usize));
        assert!(a.posts.values().any(|p| p.comments.is_empty()));
        assert!(a
            .posts
            .values()
            .any(|p| p.comments.len() > COMMENTS_PER_PAGE * 2));
    }

    #[test]
    fn comment_pages_split_by_five() {
        let site = Site::demo();
        for post in site.posts.values() {
            let pages = post.comment_page_count();
            assert_eq!(pages, post.comments.len().div_ceil(5));
            assert!(post.comments_on_page(0).is_none());
            assert!(post.comments_on_page(pages + 1).is_none());
            let total: usize = (1..=pages)
                .filter_map(|p| post.comments_on_page(p))
                .map(<[_]>::len)
                .sum();
            assert_eq!(total, post.comments.len());
        }
    }
}
