//! Extraction: one response and the request that fetched it in, items and
//! follow-up requests out. Pure: no network, no Redis, no clock, so every
//! behaviour is tested on saved pages.
//!
//! The rule is the request's named rule, else the first whose `match`
//! pattern matches the URL. The body is decoded ([`charset`]), parsed once,
//! and each of the rule's extract entries ([`fields`]) and follow entries
//! ([`links`]) runs over the same document. The parse and the extraction
//! run within the spider's limits ([`bounded`]): a page past them is
//! extracted as far as it was read, and says so. A binary body
//! ([`content`]) is never read as HTML or JSON: only a rule that takes
//! binary responses (`binary = true`) extracts items from it, from what is
//! known without reading it (URL, status, headers), and only sitemap and
//! feed entries (a gzip file) find links in it; otherwise it is counted.

pub mod attributes;
pub mod bounded;
pub mod charset;
pub mod content;
pub mod dates;
pub mod feeds;
pub mod fields;
pub mod json;
pub mod links;
pub mod page;
pub mod rewrite;
pub mod structured;

use scraper::Html;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::request::{Request, Task};
use crate::spider::selector::Selected;
use crate::spider::xpath::Found;
use crate::spider::{Each, LinkSource, Rule, Spider};
use bounded::{Budget, CutShort};
pub use feeds::Unreadable;
use fields::Scope;

/// A downloaded response, as the extractor needs it.
#[derive(Debug, Clone, Copy)]
pub struct Response<'a> {
    /// The final URL of the page (after redirects).
    pub url: &'a str,
    pub status: u16,
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    /// When it was fetched: what relative dates ("3 hours ago") count
    /// from.
    pub fetched_at: std::time::SystemTime,
}

impl Response<'_> {
    /// The first header named `name`, any case.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One scraped item: its type and its fields in definition order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    #[serde(rename = "item")]
    pub kind: String,
    pub fields: Map<String, Value>,
}

/// An item left out, and why (counted as `item_dropped_count` and
/// `item_dropped_reasons_count/<code>`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dropped {
    pub item: String,
    /// What failed, for people: the field and a preview of its value.
    pub reason: String,
    /// What failed, for the stats.
    pub code: DropReason,
}

/// Why an item was dropped: the label of its
/// `item_dropped_reasons_count/<reason>` stat (CamelCase, as Scrapy's
/// exception names there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum DropReason {
    /// A `required` field had no value.
    MissingRequiredField,
    /// A value was not of its `expect` type, or a required field's value
    /// did not convert to its `type`, or `min`/`max`/`min_length` met a
    /// value they cannot measure.
    WrongType,
    /// `non_empty`: "", [] or {}.
    EmptyField,
    /// `pattern` did not match.
    PatternMismatch,
    /// Outside `min`/`max`.
    OutOfRange,
    /// Outside `min_length`/`max_length`.
    BadLength,
    /// The item type's `transform` returned `null`.
    DroppedByTransform,
    /// A `transform` failed (a jq error, or past its bounds), on the item
    /// or on a required field, or the item's returned no object.
    TransformFailed,
}

impl DropReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::MissingRequiredField => "MissingRequiredField",
            DropReason::WrongType => "WrongType",
            DropReason::EmptyField => "EmptyField",
            DropReason::PatternMismatch => "PatternMismatch",
            DropReason::OutOfRange => "OutOfRange",
            DropReason::BadLength => "BadLength",
            DropReason::DroppedByTransform => "DroppedByTransform",
            DropReason::TransformFailed => "TransformFailed",
        }
    }
}

/// A value a field could not convert to its `type`, or whose `prepare`
/// failed: the field went without it (counted as
/// `extract/unconverted_field_count/<item>.<field>`, never silently null).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unconverted {
    pub item: String,
    /// The field's path in its item (`posts.author`).
    pub field: String,
    /// Why, with the value cut short (`` `Jan. 20…` is not a date``).
    pub reason: String,
}

impl Unconverted {
    /// The label of its stat: `<item>.<field>`.
    pub fn label(&self) -> String {
        format!("{}.{}", self.item, self.field)
    }
}

/// A link a follow entry's `rewrite` changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rewritten {
    /// As found (resolved against the page).
    pub from: String,
    /// As followed; `None` when the rewrite failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Why the rewrite failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Links not followed, by reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Filtered {
    /// Host outside `allowed_domains` (Scrapy's `offsite/filtered`).
    pub offsite: u64,
    /// `mailto:`, `javascript:` and other non-http(s) links, and hrefs that
    /// are not URLs.
    pub scheme: u64,
    /// Links to a fragment of the same page (`#top`).
    pub fragment: u64,
    /// Matched a `deny` pattern, or no `allow` pattern.
    pub denied: u64,
    /// The path ends with an extension the follow entry does not follow
    /// (`deny_extensions`, Scrapy's list by default). Shown when some were.
    #[serde(skip_serializing_if = "is_zero")]
    pub extension: u64,
    /// Deeper than a depth limit.
    pub depth: u64,
    /// Past the last page of a `paginate` limit.
    pub pagination: u64,
    /// The same URL already followed from this page.
    pub duplicate: u64,
    /// A sitemap or feed entry not modified since the source's last visit.
    #[serde(skip_serializing_if = "is_zero")]
    pub not_modified: u64,
    /// A request template named a field neither the JSON element nor the
    /// request's context has (a cursor on the last page).
    #[serde(skip_serializing_if = "is_zero")]
    pub incomplete: u64,
    /// The follow entry's `rewrite` failed (its jq failed, or it made no
    /// http(s) URL).
    #[serde(skip_serializing_if = "is_zero")]
    pub rewrite: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What one page gave.
#[derive(Debug, Clone, Serialize)]
pub struct Extraction {
    /// The rule for the page (which handled it, unless `ignored_status`
    /// kept it out); none: no rule matches its URL.
    pub rule: Option<String>,
    /// The character set the page was read with.
    pub encoding: &'static str,
    pub charset_source: charset::CharsetSource,
    /// Set when the page was not extracted because of its HTTP status (not
    /// 2xx nor in `httperror_allowed_codes`), as Scrapy ignores such pages;
    /// `rule` then names the rule it was for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignored_status: Option<u16>,
    pub items: Vec<Item>,
    pub dropped: Vec<Dropped>,
    /// Values fields could not convert (the fields went without them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unconverted: Vec<Unconverted>,
    pub requests: Vec<Request>,
    /// Links a follow entry's `rewrite` changed: as found, and as followed
    /// (or why not).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rewritten: Vec<Rewritten>,
    /// Set when the body is binary and nothing of the rule reads it (it
    /// does not take binary responses, and has no sitemap or feed entry):
    /// nothing was extracted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binary: Option<content::Binary>,
    /// Set when the rule reads JSON and the response is not JSON; nothing
    /// was extracted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub json_error: Option<String>,
    /// Set when the page is a source that gave nothing, or not all it
    /// holds, because it is too large or malformed: JSON that does not
    /// parse, a sitemap or feed that is not one, is cut off or unpacks past
    /// `download_maxsize`. The page is recorded as failed with this reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<Unreadable>,
    /// Links handed to other spiders (follow entries with `to_spider`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<Task>,
    pub filtered: Filtered,
    /// Set when the page was extracted only in part: its HTML parse or its
    /// extraction stopped at a limit ([`bounded`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_short: Option<CutShort>,
}

/// Runs the spider's rule for this page, within the spider's own limits
/// (its `[settings]` over the defaults).
pub fn extract(spider: &Spider, request: &Request, response: &Response<'_>) -> Extraction {
    extract_within(
        spider,
        request,
        response,
        &Budget::new(&spider.settings, None),
    )
}

/// Runs the spider's rule for this page, within `budget`: the parse stops
/// at its limits, and the extraction between two steps (an item, a follow
/// entry) when its time is up or the worker stopped. A spider whose items
/// run jq programs is extracted on a stack fit for them.
pub fn extract_within(
    spider: &Spider,
    request: &Request,
    response: &Response<'_>,
    budget: &Budget,
) -> Extraction {
    if spider.items_run_jq() {
        crate::spider::transform::with_stack(|| extract_here(spider, request, response, budget))
    } else {
        extract_here(spider, request, response, budget)
    }
}

fn extract_here(
    spider: &Spider,
    request: &Request,
    response: &Response<'_>,
    budget: &Budget,
) -> Extraction {
    let content_type = response.header("content-type");
    let binary = content::binary(content_type, response.body);
    let decoded = match binary {
        None => charset::decode(response.body, content_type),
        Some(_) => charset::Decoded::binary(),
    };
    let mut out = Extraction::empty(&decoded);
    let rule = spider.rule_for(request.rule.as_deref(), response.url);
    // Named even when the status keeps the page from it: the log and the
    // failed key say which rule the page was for.
    out.rule = rule.map(|r| r.name.clone());
    // Scrapy's HttpErrorMiddleware: only 2xx pages reach the spider, unless
    // the spider allows the status.
    let status = response.status;
    if !(200..300).contains(&status) && !spider.settings.httperror_allowed_codes.contains(&status) {
        out.ignored_status = Some(status);
        return out;
    }
    let Some(rule) = rule else {
        return out;
    };
    let items = binary.is_none() || rule.binary;
    if !items && !rule.follow.iter().any(reads_bytes) {
        out.binary = binary;
        return out;
    }
    let Some((html, json)) = read_document(rule, binary.is_some(), &decoded, budget, &mut out)
    else {
        return out;
    };
    let mut page = page::Page::new(response, request, &html, decoded.encoding);
    if json.is_some() {
        page.base = url::Url::parse(response.url).ok();
    }
    let doc = Document {
        html: &html,
        json: json.as_ref(),
        text: &decoded.text,
        page: &page,
    };
    let ran = if items {
        extract_items(spider, rule, &doc, budget, &mut out)
    } else {
        Ok(())
    };
    if let Err(cut) = ran.and_then(|()| follow_links(spider, rule, &doc, budget, &mut out)) {
        out.cut_short = Some(cut);
    }
    out
}

/// Whether a follow entry reads the body's bytes rather than its text (a
/// sitemap or feed, which may be a gzip file).
fn reads_bytes(follow: &crate::spider::Follow) -> bool {
    matches!(follow.links, LinkSource::Sitemap | LinkSource::Feed)
}

/// Whether the rule reads the page's HTML: not a rule that only reads
/// sitemaps or feeds (a 30 MB sitemap parsed as HTML would cost ten times
/// its size for nothing, and stop at `extract_max_nodes`).
fn reads_html(rule: &Rule) -> bool {
    !rule.extract.is_empty() || !rule.follow.iter().all(reads_bytes)
}

/// The page as the rule reads it: its HTML parse, or for a JSON rule its
/// JSON document (and an empty parse, for the follow entries that read the
/// text, a sitemap or a feed); a binary body is neither, an empty parse.
/// `None` when nothing more is to be done: the JSON did not parse, or the
/// parse ran out of time or was stopped (recorded in `out`).
fn read_document(
    rule: &Rule,
    binary: bool,
    decoded: &charset::Decoded<'_>,
    budget: &Budget,
    out: &mut Extraction,
) -> Option<(Html, Option<Value>)> {
    if binary || !reads_html(rule) {
        // An empty page (not `Html::new_document()`: items need its root).
        return Some((Html::parse_document(""), None));
    }
    if rule.json {
        return match json::parse(&decoded.text) {
            Ok(v) => Some((Html::new_document(), Some(v))),
            Err(e) => {
                out.unreadable = Some(Unreadable::new("not_json", e.clone()));
                out.json_error = Some(e);
                None
            }
        };
    }
    let parsed = bounded::parse_document(&decoded.text, budget);
    out.cut_short = parsed.cut_short;
    if matches!(out.cut_short, Some(CutShort::Time | CutShort::Stopped)) {
        return None;
    }
    Some((parsed.html, None))
}

impl Extraction {
    /// Nothing extracted yet from a page read as `decoded` says.
    fn empty(decoded: &charset::Decoded<'_>) -> Extraction {
        Extraction {
            rule: None,
            encoding: decoded.encoding.name(),
            charset_source: decoded.source,
            ignored_status: None,
            binary: None,
            json_error: None,
            unreadable: None,
            items: Vec::new(),
            dropped: Vec::new(),
            unconverted: Vec::new(),
            requests: Vec::new(),
            rewritten: Vec::new(),
            tasks: Vec::new(),
            filtered: Filtered::default(),
            cut_short: None,
        }
    }
}

/// A page as its rule reads it.
struct Document<'d> {
    /// The HTML parse (empty for a rule that reads JSON).
    html: &'d Html,
    /// The JSON document, for a rule that reads JSON.
    json: Option<&'d Value>,
    /// The decoded text, for the follow entries that read it.
    text: &'d str,
    page: &'d page::Page<'d>,
}

/// The items of each of the rule's extract entries, or where the budget
/// cut the extraction short.
fn extract_items(
    spider: &Spider,
    rule: &Rule,
    doc: &Document<'_>,
    budget: &Budget,
    out: &mut Extraction,
) -> Result<(), CutShort> {
    for ex in &rule.extract {
        spent(budget)?;
        let def = &spider.items[ex.item];
        for scope in scopes(ex.each.as_ref(), doc) {
            spent(budget)?;
            match fields::item(def, scope, doc.page, &ex.jsonld_types) {
                Ok(fields) => out.items.push(Item {
                    kind: def.name.clone(),
                    fields: typed(spider.type_field.as_deref(), &def.name, fields),
                }),
                Err((code, reason)) => out.dropped.push(Dropped {
                    item: def.name.clone(),
                    reason,
                    code,
                }),
            }
            for (field, reason) in doc.page.take_unconverted() {
                out.unconverted.push(Unconverted {
                    item: def.name.clone(),
                    field,
                    reason,
                });
            }
        }
    }
    Ok(())
}

/// An item's fields with its type name first under `type_field`, when the
/// spider names one.
fn typed(type_field: Option<&str>, name: &str, fields: Map<String, Value>) -> Map<String, Value> {
    let Some(key) = type_field else {
        return fields;
    };
    let mut out = Map::with_capacity(fields.len() + 1);
    out.insert(key.to_string(), Value::String(name.to_string()));
    // An item transform may have made the key itself: the type wins.
    out.extend(fields.into_iter().filter(|(k, _)| k != key));
    out
}

/// What one item is extracted from each: the nodes or JSON values `each`
/// selects, or the whole document.
fn scopes<'d>(each: Option<&Each>, doc: &Document<'d>) -> Vec<Scope<'d>> {
    match (each, doc.json) {
        (Some(Each::Css(each)), _) => {
            let mut scopes = Vec::new();
            each.each(doc.html.root_element(), |s| {
                if let Selected::Element(e) = s {
                    scopes.push(Scope::Html(e));
                }
            });
            scopes
        }
        (Some(Each::XPath(each)), _) => {
            let root = doc.html.root_element();
            let mut scopes = Vec::new();
            each.each(root, doc.page.xpath_order(root), |f| {
                if let Found::Element(e) = f {
                    scopes.push(Scope::Html(e));
                }
            });
            scopes
        }
        (Some(Each::Json(each)), Some(v)) => {
            json::scopes(each, v).into_iter().map(Scope::Json).collect()
        }
        (Some(Each::Json(_)), None) => Vec::new(),
        (None, Some(v)) => vec![Scope::Json(v)],
        (None, None) => vec![Scope::Html(doc.html.root_element())],
    }
}

/// The requests (and the tasks for other spiders) of each of the rule's
/// follow entries, or where the budget cut the extraction short.
fn follow_links(
    spider: &Spider,
    rule: &Rule,
    doc: &Document<'_>,
    budget: &Budget,
    out: &mut Extraction,
) -> Result<(), CutShort> {
    let mut follower = links::Follower::new(spider, doc.page, rule, &mut out.filtered);
    let ran = follow_each(
        rule,
        doc,
        budget,
        &mut follower,
        &mut out.requests,
        &mut out.tasks,
    );
    let unreadable = follower.unreadable.take();
    out.rewritten = std::mem::take(&mut follower.rewritten);
    out.unreadable = out.unreadable.take().or(unreadable);
    ran
}

/// Runs each follow entry of the rule with `follower`, into `requests` and
/// (handed to other spiders) `tasks`.
fn follow_each(
    rule: &Rule,
    doc: &Document<'_>,
    budget: &Budget,
    follower: &mut links::Follower<'_>,
    requests: &mut Vec<Request>,
    tasks: &mut Vec<Task>,
) -> Result<(), CutShort> {
    for follow in &rule.follow {
        spent(budget)?;
        let mut found = Vec::new();
        match follow.links {
            LinkSource::Json(_) | LinkSource::Template(_) => {
                json::follow(follower, follow, doc.json, &mut found)
            }
            _ => follower.follow(follow, doc.html, doc.text, &mut found),
        }
        match follow.to_spider {
            None => requests.extend(found),
            Some(to) => tasks.extend(found.into_iter().map(|request| Task { to, request })),
        }
    }
    Ok(())
}

/// Whether the budget is spent: its time is up or the worker stopped.
fn spent(budget: &Budget) -> Result<(), CutShort> {
    match budget.spent() {
        Some(cut) => Err(cut),
        None => Ok(()),
    }
}

#[cfg(test)]
mod field_tests;
#[cfg(test)]
mod tests;
