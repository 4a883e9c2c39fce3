//! The spider file as written: every value with its source position, not
//! yet checked for meaning. [`super::compile`] turns it into a [`super::Spider`].
//!
//! This is where the spider language's keys are defined: each `read_*`
//! function asks for exactly the keys its table accepts.

use serde_json::Value;

use crate::reader::{At, Loc, Node, TableReader};
use crate::settings::Overrides;

/// A whole spider file.
#[derive(Debug)]
pub struct SpiderFile {
    pub loc: Loc,
    pub name: Option<At<String>>,
    pub allowed_domains: Vec<At<String>>,
    pub deny: Vec<At<String>>,
    pub settings: Overrides,
    pub start: StartFile,
    pub keys: KeysFile,
    pub items: Vec<ItemFile>,
    /// `[items] sink = "list" | "stream"`: where items go.
    pub items_sink: Option<At<String>>,
    /// `[items] type_field = "kind"`: the key each item's type name is
    /// added under.
    pub items_type_field: Option<At<String>>,
    pub rules: Vec<RuleFile>,
    /// `[scrapy_redis]`: how the requests a scrapy-redis crawl queued map
    /// to rules (`import-queue`).
    pub scrapy_redis: Option<ScrapyRedisFile>,
    /// `[session]`: the cluster's login.
    pub session: Option<super::compile::session::SessionFile>,
}

/// `[scrapy_redis]`.
#[derive(Debug, Default)]
pub struct ScrapyRedisFile {
    pub loc: Loc,
    /// Callback name → rule name.
    pub callbacks: Vec<(At<String>, At<String>)>,
    /// A CrawlSpider's rules, in the Python spider's order.
    pub crawl_rules: Option<Vec<At<String>>>,
    /// Request classes read as plain requests (module-qualified names).
    pub classes: Option<Vec<At<String>>>,
}

/// `[keys]`: `mode` and key-name templates by kind.
#[derive(Debug, Default)]
pub struct KeysFile {
    pub mode: Option<At<String>>,
    pub hash_tag: Option<At<String>>,
    /// How many shards the spider's frontier is spread over.
    pub shards: Option<At<i64>>,
    pub templates: Vec<(At<String>, At<String>)>,
}

/// `[start]`: where start entries come from and how they become requests.
#[derive(Debug, Default)]
pub struct StartFile {
    pub loc: Loc,
    pub key: Option<At<String>>,
    pub kind: Option<At<String>>,
    pub batch_size: Option<At<i64>>,
    pub url: Option<At<String>>,
    pub method: Option<At<String>>,
    pub body: Option<At<String>>,
    pub headers: Vec<(At<String>, At<String>)>,
    pub priority: Option<At<IntOrTemplate>>,
    pub rule: Option<At<String>>,
    pub dont_filter: Option<At<bool>>,
    pub task_fields: Option<Vec<At<String>>>,
    /// Sitemap and feed URLs to crawl from, once per crawl.
    pub sitemap: Option<Vec<At<String>>>,
    pub feed: Option<Vec<At<String>>>,
}

/// A table of named `{field}` templates (`headers`, `form`), in file order.
pub type Templates = Vec<(At<String>, At<String>)>;

/// A number written as a number, or a `{field}` template giving one.
#[derive(Debug, Clone, PartialEq)]
pub enum IntOrTemplate {
    Int(i64),
    Template(String),
}

/// `[items.<name>]`.
#[derive(Debug)]
pub struct ItemFile {
    pub name: At<String>,
    pub fields: Vec<FieldFile>,
    /// `transform = '…'`: a jq program the finished item goes through.
    pub transform: Option<At<String>>,
    /// `key = ["comment_id"]`: the fields that tell one item from another
    /// (`crawlworker export` upserts rows by them).
    pub key: Option<Vec<At<String>>>,
    /// `table = "comments"`: the table (or file name) `crawlworker export`
    /// writes the items to.
    pub table: Option<At<String>>,
}

/// One field of an item; a bare string is short for `{ css = "…" }`.
#[derive(Debug, Default)]
pub struct FieldFile {
    pub loc: Loc,
    pub name: At<String>,
    /// The field's place for messages: `posts.author` inside `posts`.
    pub path: String,
    /// One value (or object) per element this selects.
    pub each: Option<At<String>>,
    /// `fields = { … }`: one object per element, made of these.
    pub fields: Option<(Loc, Vec<FieldFile>)>,
    /// `type = "datetime"`: the strftime formats tried, in order.
    pub formats: Option<Vec<At<String>>>,
    /// `type = "datetime"`: the IANA zone of times written without one.
    pub timezone: Option<At<String>>,
    /// A jq program the extracted value goes through.
    pub transform: Option<At<String>>,
    /// A jq program each value goes through before `type` reads it.
    pub prepare: Option<At<String>>,
    pub css: Option<At<String>>,
    /// A JSONPath over the JSON response (or the `each` element).
    pub json: Option<At<String>>,
    pub xpath: Option<At<String>>,
    /// A path into the page's JSON-LD.
    pub jsonld: Option<At<String>>,
    /// A `<meta>` property, `og:` unless prefixed.
    pub og: Option<At<String>>,
    pub page: Option<At<String>>,
    pub meta: Option<At<String>>,
    pub constant: Option<At<Value>>,
    pub all: Option<At<bool>>,
    pub join: Option<At<String>>,
    pub re: Option<At<String>>,
    pub whitespace: Option<At<String>>,
    pub kind: Option<At<String>>,
    pub default: Option<At<Value>>,
    pub required: Option<At<bool>>,
    pub url: Option<At<bool>>,
    /// Checks of the finished value (see [`super::FieldChecks`]).
    pub expect: Option<At<String>>,
    pub non_empty: Option<At<bool>>,
    pub pattern: Option<At<String>>,
    pub min: Option<At<f64>>,
    pub max: Option<At<f64>>,
    pub min_length: Option<At<i64>>,
    pub max_length: Option<At<i64>>,
}

/// `[[rules]]`.
#[derive(Debug)]
pub struct RuleFile {
    pub loc: Loc,
    pub name: Option<At<String>>,
    pub matches: Vec<At<String>>,
    pub extract: Vec<ExtractFile>,
    pub follow: Vec<FollowFile>,
    pub revisit: Option<RevisitFile>,
    /// What decides that a revisited page changed: "extracted" or "body".
    pub change: Option<At<String>>,
    /// The item fields that count as a change (all when absent).
    pub change_fields: Option<Vec<At<String>>>,
    /// "all" (default) or "changed": push a revisited page's items only
    /// when they changed.
    pub emit: Option<At<String>>,
    /// `binary = true`: the rule takes responses whose body is binary.
    pub binary: Option<At<bool>>,
    /// `render = true`, or a table of how.
    pub render: Option<RenderFile>,
}

/// `render = true` or `render = { wait = "network-idle", … }` (a table
/// renders; `render = false` is as if absent).
#[derive(Debug)]
pub struct RenderFile {
    pub on: bool,
    pub wait: Option<At<String>>,
    pub wait_for: Option<At<String>>,
    pub timeout: Option<At<String>>,
    pub block: Option<Vec<At<String>>>,
    pub scroll: Option<At<i64>>,
}

/// `revisit = "10m"` or `revisit = { min = "5m", max = "6h" }`.
#[derive(Debug)]
pub enum RevisitFile {
    Every(At<String>),
    Adaptive {
        loc: Loc,
        min: Option<At<String>>,
        max: Option<At<String>>,
    },
}

/// `[[rules.extract]]`.
#[derive(Debug)]
pub struct ExtractFile {
    pub loc: Loc,
    pub item: Option<At<String>>,
    /// `each = "css"` or `each = { css = "…" }`.
    pub each: Option<At<String>>,
    /// `each = { xpath = "…" }`.
    pub each_xpath: Option<At<String>>,
    /// The JSON-LD types its `jsonld` fields read.
    pub jsonld_type: Option<Vec<At<String>>>,
}

/// `[[rules.follow]]`.
#[derive(Debug)]
pub struct FollowFile {
    pub loc: Loc,
    pub css: Option<At<String>>,
    pub xpath: Option<At<String>>,
    pub re: Option<At<String>>,
    pub sitemap: Option<At<bool>>,
    pub feed: Option<At<bool>>,
    pub allow: Vec<At<String>>,
    pub deny: Vec<At<String>>,
    /// The extensions not followed, replacing Scrapy's list.
    pub deny_extensions: Option<(Loc, Vec<At<String>>)>,
    pub rule: Option<At<String>>,
    pub to_spider: Option<At<String>>,
    pub priority: Option<At<i64>>,
    pub dont_filter: Option<At<bool>>,
    pub depth_limit: Option<At<i64>>,
    pub meta: Vec<At<String>>,
    pub paginate: Option<PaginateFile>,
    /// JSON responses: links by JSONPath, or built from a `{field}` URL
    /// template once per `each` element (or once per page).
    pub json: Option<At<String>>,
    pub url: Option<At<String>>,
    pub each: Option<At<String>>,
    /// The context field counting pages (`{page}` is this page's + 1).
    pub counter: Option<At<String>>,
    pub until: Option<UntilFile>,
    /// How the requests are sent: method, a body template or form fields,
    /// extra headers.
    pub method: Option<At<String>>,
    pub body: Option<At<String>>,
    pub form: Option<(Loc, Templates)>,
    pub headers: Templates,
    /// `rewrite = { … }`: each link's canonical form.
    pub rewrite: Option<RewriteFile>,
}

/// `rewrite = { remove_query = ["page"], replace = { '/$' = "" }, jq = '…' }`.
#[derive(Debug)]
pub struct RewriteFile {
    pub loc: Loc,
    pub remove_query: Option<Vec<At<String>>>,
    pub keep_query: Option<Vec<At<String>>>,
    /// Regex → replacement, in file order.
    pub replace: Option<(Loc, Templates)>,
    pub jq: Option<At<String>>,
}

/// `until = { empty = "$.comments", last = "$.total_pages", more = "$.has_more" }`.
#[derive(Debug)]
pub struct UntilFile {
    pub loc: Loc,
    pub empty: Option<At<String>>,
    pub last: Option<At<String>>,
    pub more: Option<At<String>>,
}

/// `paginate = { page = '…(\d+)', max = "{max_page}" }`.
#[derive(Debug)]
pub struct PaginateFile {
    pub loc: Loc,
    pub page: Option<At<String>>,
    pub max: Option<At<IntOrTemplate>>,
}

pub(crate) fn read_spider(root: &TableReader<'_>) -> SpiderFile {
    let name = root.str("name");
    let name = root.require(
        "name",
        name,
        "add `name = \"myspider\"` at the top of the file",
    );
    let allowed_domains = root.str_list("allowed_domains").unwrap_or_default();
    let deny = root.str_list("deny").unwrap_or_default();
    let settings = Overrides::read_section(root);
    let start = root
        .table("start")
        .map(|t| read_start(&t))
        .unwrap_or_default();
    let keys = root
        .table("keys")
        .map(|t| read_keys(&t))
        .unwrap_or_default();
    // `[items]` holds the item types (tables) and, as plain values,
    // `sink` and `type_field`: an item type may still be called `sink`
    // (`[items.sink]`).
    let mut items_sink = None;
    let mut items_type_field = None;
    let items = match root.table("items") {
        Some(t) => {
            let items = t
                .entries()
                .into_iter()
                .filter_map(|(name, node, loc)| {
                    let plain = match name.value.as_str() {
                        "sink" => Some((&mut items_sink, "write `sink = \"list\"` or `sink = \"stream\"`")),
                        "type_field" => Some((&mut items_type_field, "write the key each item's type name goes under, e.g. `type_field = \"kind\"`")),
                        _ => None,
                    };
                    if let Some((slot, hint)) = plain.filter(|_| node.as_table_like().is_none()) {
                        match node.as_str() {
                            Some(s) => *slot = Some(At::new(s.to_string(), loc)),
                            None => t.reader().problem(
                                &loc,
                                format!("expected a string, found {}", node.type_name()),
                                Some(hint.into()),
                            ),
                        }
                        return None;
                    }
                    if node.as_table_like().is_none() {
                        t.reader().problem(
                            &loc,
                            format!(
                                "`{}` is neither an item type (a table) nor `sink` or `type_field`",
                                name.value
                            ),
                            Some("define an item type as `[items.<name>]` with its fields; `sink = \"stream\"` chooses where items go, `type_field = \"kind\"` names each item's type".into()),
                        );
                        return None;
                    }
                    read_item(&t, name, node, loc)
                })
                .collect();
            t.finish();
            items
        }
        None => Vec::new(),
    };
    let rules = root.tables("rules").iter().map(read_rule).collect();
    let scrapy_redis = root.table("scrapy_redis").map(|t| read_scrapy_redis(&t));
    let session = root
        .table("session")
        .map(|t| super::compile::session::read_session(&t));
    SpiderFile {
        loc: root.loc.clone(),
        name,
        allowed_domains,
        deny,
        settings,
        start,
        keys,
        items,
        items_sink,
        items_type_field,
        rules,
        scrapy_redis,
        session,
    }
}

fn read_scrapy_redis(t: &TableReader<'_>) -> ScrapyRedisFile {
    let callbacks = t.table("callbacks").map_or_else(Vec::new, |c| {
        let pairs = c
            .entries()
            .into_iter()
            .filter_map(|(name, node, loc)| match node.as_str() {
                Some(rule) => Some((name, At::new(rule.to_string(), loc))),
                None => {
                    c.reader().problem(
                        &loc,
                        format!("expected a rule name, found {}", node.type_name()),
                        Some("map each callback to a rule: `parse_post = \"post\"`".into()),
                    );
                    None
                }
            })
            .collect();
        c.finish();
        pairs
    });
    let file = ScrapyRedisFile {
        loc: t.loc.clone(),
        callbacks,
        crawl_rules: t.str_list("crawl_rules"),
        classes: t.str_list("classes"),
    };
    t.finish();
    file
}

fn read_keys(t: &TableReader<'_>) -> KeysFile {
    let mut keys = KeysFile::default();
    for (name, node, loc) in t.entries() {
        if name.value == "shards" {
            match node.as_integer() {
                Some(n) => keys.shards = Some(At::new(n, loc)),
                None => t.reader().problem(
                    &loc,
                    format!("expected a whole number, found {}", node.type_name()),
                    Some("write the number of shards, e.g. `shards = 3`".into()),
                ),
            }
            continue;
        }
        match node.as_str() {
            Some(v) if name.value == "mode" => keys.mode = Some(At::new(v.to_string(), loc)),
            Some(v) if name.value == "hash_tag" => {
                keys.hash_tag = Some(At::new(v.to_string(), loc))
            }
            Some(v) => keys.templates.push((name, At::new(v.to_string(), loc))),
            None => t.reader().problem(
                &loc,
                format!("expected a string, found {}", node.type_name()),
                Some("write a key name template such as \"{name}:requests\"".into()),
            ),
        }
    }
    keys
}

fn read_start(t: &TableReader<'_>) -> StartFile {
    let headers = templates(t, "headers").map_or_else(Vec::new, |(_, h)| h);
    let start = StartFile {
        loc: t.loc.clone(),
        key: t.str("key"),
        kind: t.str("type"),
        batch_size: t.int("batch_size"),
        url: t.str("url"),
        method: t.str("method"),
        body: t.str("body"),
        headers,
        priority: int_or_template(t, "priority"),
        rule: t.str("rule"),
        dont_filter: t.bool("dont_filter"),
        task_fields: t.str_list("task_fields"),
        sitemap: t.str_list("sitemap"),
        feed: t.str_list("feed"),
    };
    t.finish();
    start
}

/// A table of string templates (`headers`, `form`) and where it is.
fn templates(t: &TableReader<'_>, key: &'static str) -> Option<(Loc, Templates)> {
    let h = t.table(key)?;
    let entries = h
        .entries()
        .into_iter()
        .filter_map(|(name, node, loc)| match node.as_str() {
            Some(v) => Some((name, At::new(v.to_string(), loc))),
            None => {
                h.reader().problem(
                    &loc,
                    format!("expected a string, found {}", node.type_name()),
                    Some(format!(
                        "{key} values are strings; `{{field}}` inserts a context field"
                    )),
                );
                None
            }
        })
        .collect();
    h.finish();
    Some((h.loc.clone(), entries))
}

fn int_or_template(t: &TableReader<'_>, key: &'static str) -> Option<At<IntOrTemplate>> {
    let (node, loc) = t.node(key)?;
    if let Some(i) = node.as_integer() {
        return Some(At::new(IntOrTemplate::Int(i), loc));
    }
    if let Some(s) = node.as_str() {
        return Some(At::new(IntOrTemplate::Template(s.to_string()), loc));
    }
    t.reader().problem(
        &loc,
        format!(
            "expected an integer or a \"{{field}}\" template, found {}",
            node.type_name()
        ),
        None,
    );
    None
}

fn read_item(
    items: &TableReader<'_>,
    name: At<String>,
    node: Node<'_>,
    loc: Loc,
) -> Option<ItemFile> {
    let table = items.as_table(node, loc)?;
    let (mut transform, mut key, mut table_name) = (None, None, None);
    let fields = table
        .entries()
        .into_iter()
        .filter_map(|(fname, fnode, floc)| {
            // `transform = '…'` and `table = '…'` are the item's, as is
            // `key = [ … ]`; a field of one of these names is written as a
            // table (`transform = { css = "…" }`).
            match (fname.value.as_str(), fnode.as_str()) {
                ("transform", Some(program)) => {
                    transform = Some(At::new(program.to_string(), floc));
                    return None;
                }
                ("table", Some(name)) => {
                    table_name = Some(At::new(name.to_string(), floc));
                    return None;
                }
                ("key", None) if fnode.as_table_like().is_none() => {
                    key = table.str_list("key");
                    return None;
                }
                _ => {}
            }
            read_field(&table, "", fname, fnode, floc, 0)
        })
        .collect();
    table.finish();
    Some(ItemFile {
        name,
        fields,
        transform,
        key,
        table: table_name,
    })
}

/// How deep `fields` may nest: deeper than any page's structure a spider
/// describes, shallow enough that a hostile file cannot exhaust the stack.
const MAX_FIELD_DEPTH: usize = 8;

fn read_field(
    item: &TableReader<'_>,
    parent: &str,
    name: At<String>,
    node: Node<'_>,
    loc: Loc,
    depth: usize,
) -> Option<FieldFile> {
    let path = if parent.is_empty() {
        name.value.clone()
    } else {
        format!("{parent}.{}", name.value)
    };
    if let Some(css) = node.as_str() {
        return Some(FieldFile {
            css: Some(At::new(css.to_string(), loc.clone())),
            loc,
            name,
            path,
            ..FieldFile::default()
        });
    }
    let t = item.as_table(node, loc.clone())?;
    let fields = read_nested(&t, &path, depth);
    let json = |key: &'static str| {
        t.node(key)
            .map(|(n, l)| At::new(n.to_json().unwrap_or(Value::Null), l))
    };
    let field = FieldFile {
        loc,
        name,
        path,
        each: t.str("each"),
        fields,
        formats: t.str_list("formats"),
        timezone: t.str("timezone"),
        transform: t.str("transform"),
        prepare: t.str("prepare"),
        css: t.str("css"),
        json: t.str("json"),
        xpath: t.str("xpath"),
        jsonld: t.str("jsonld"),
        og: t.str("og"),
        page: t.str("page"),
        meta: t.str("meta"),
        constant: json("const"),
        all: t.bool("all"),
        join: t.str("join"),
        re: t.str("re"),
        whitespace: t.str("whitespace"),
        kind: t.str("type"),
        default: json("default"),
        required: t.bool("required"),
        url: t.bool("url"),
        expect: t.str("expect"),
        non_empty: t.bool("non_empty"),
        pattern: t.str("pattern"),
        min: t.float("min"),
        max: t.float("max"),
        min_length: t.int_in("min_length", 0, u32::MAX.into()),
        max_length: t.int_in("max_length", 0, u32::MAX.into()),
    };
    t.finish();
    Some(field)
}

/// A field's `fields = { … }`: the fields of the object it makes per
/// element, read as an item's are.
fn read_nested(t: &TableReader<'_>, path: &str, depth: usize) -> Option<(Loc, Vec<FieldFile>)> {
    let nested = t.table("fields")?;
    if depth + 1 >= MAX_FIELD_DEPTH {
        t.reader().problem(
            &nested.loc,
            format!("`fields` nests more than {MAX_FIELD_DEPTH} levels deep"),
            Some("flatten the innermost levels into one field, or split the item".into()),
        );
        nested.entries();
        return None;
    }
    let fields = nested
        .entries()
        .into_iter()
        .filter_map(|(name, node, loc)| read_field(&nested, path, name, node, loc, depth + 1))
        .collect();
    nested.finish();
    Some((nested.loc.clone(), fields))
}

fn read_rule(t: &TableReader<'_>) -> RuleFile {
    let extract = t
        .tables("extract")
        .iter()
        .map(|e| {
            let (each, each_xpath) = read_each(e);
            let x = ExtractFile {
                loc: e.loc.clone(),
                item: e.str("item"),
                each,
                each_xpath,
                jsonld_type: e.str_list("jsonld_type"),
            };
            e.finish();
            x
        })
        .collect();
    let follow = t.tables("follow").iter().map(read_follow).collect();
    let rule = RuleFile {
        loc: t.loc.clone(),
        name: t.str("name"),
        matches: t.str_list("match").unwrap_or_default(),
        extract,
        follow,
        revisit: read_revisit(t),
        change: t.str("change"),
        change_fields: t.str_list("change_fields"),
        emit: t.str("emit"),
        binary: t.bool("binary"),
        render: read_render(t),
    };
    t.finish();
    rule
}

fn read_render(t: &TableReader<'_>) -> Option<RenderFile> {
    let (node, loc) = t.node("render")?;
    if let Some(on) = node.as_bool() {
        return Some(RenderFile {
            on,
            wait: None,
            wait_for: None,
            timeout: None,
            block: None,
            scroll: None,
        });
    }
    let table = t.as_table(node, loc)?;
    let render = RenderFile {
        on: true,
        wait: table.str("wait"),
        wait_for: table.str("wait_for"),
        timeout: table.str("timeout"),
        block: table.str_list("block"),
        scroll: table.int("scroll"),
    };
    table.finish();
    Some(render)
}

/// `each = "div.comment"` (CSS), or a table with `css` or `xpath`.
fn read_each(e: &TableReader<'_>) -> (Option<At<String>>, Option<At<String>>) {
    let Some((node, loc)) = e.node("each") else {
        return (None, None);
    };
    if let Some(css) = node.as_str() {
        return (Some(At::new(css.to_string(), loc)), None);
    }
    let Some(t) = e.as_table(node, loc) else {
        return (None, None);
    };
    let found = (t.str("css"), t.str("xpath"));
    t.finish();
    found
}

fn read_revisit(t: &TableReader<'_>) -> Option<RevisitFile> {
    let (node, loc) = t.node("revisit")?;
    if let Some(s) = node.as_str() {
        return Some(RevisitFile::Every(At::new(s.to_string(), loc)));
    }
    let table = t.as_table(node, loc.clone())?;
    let revisit = RevisitFile::Adaptive {
        loc,
        min: table.str("min"),
        max: table.str("max"),
    };
    table.finish();
    Some(revisit)
}

fn read_follow(t: &TableReader<'_>) -> FollowFile {
    let paginate = t.table("paginate").map(|p| {
        let x = PaginateFile {
            loc: p.loc.clone(),
            page: p.str("page"),
            max: int_or_template(&p, "max"),
        };
        p.finish();
        x
    });
    let follow = FollowFile {
        loc: t.loc.clone(),
        css: t.str("css"),
        xpath: t.str("xpath"),
        re: t.str("re"),
        sitemap: t.bool("sitemap"),
        feed: t.bool("feed"),
        allow: t.str_list("allow").unwrap_or_default(),
        deny: t.str_list("deny").unwrap_or_default(),
        deny_extensions: t
            .node("deny_extensions")
            .map(|(_, loc)| loc)
            .zip(t.str_list("deny_extensions")),
        rule: t.str("rule"),
        to_spider: t.str("to_spider"),
        priority: t.int_in(
            "priority",
            -crate::frontier::MAX_PRIORITY,
            crate::frontier::MAX_PRIORITY,
        ),
        dont_filter: t.bool("dont_filter"),
        depth_limit: t.int("depth_limit"),
        meta: t.str_list("meta").unwrap_or_default(),
        paginate,
        json: t.str("json"),
        url: t.str("url"),
        each: t.str("each"),
        counter: t.str("counter"),
        until: t.table("until").map(|u| {
            let x = UntilFile {
                loc: u.loc.clone(),
                empty: u.str("empty"),
                last: u.str("last"),
                more: u.str("more"),
            };
            u.finish();
            x
        }),
        method: t.str("method"),
        body: t.str("body"),
        form: templates(t, "form"),
        headers: templates(t, "headers").map_or_else(Vec::new, |(_, h)| h),
        rewrite: t.table("rewrite").map(|r| {
            let x = RewriteFile {
                loc: r.loc.clone(),
                remove_query: r.str_list("remove_query"),
                keep_query: r.str_list("keep_query"),
                replace: templates(&r, "replace"),
                jq: r.str("jq"),
            };
            r.finish();
            x
        }),
    };
    t.finish();
    follow
}
