//! Spiders: the TOML file as written ([`file::SpiderFile`], every value with
//! its position) and as compiled ([`Spider`]: regexes and selectors built,
//! names resolved to indices, every problem reported at once).
//!
//! A spider says where its start entries come from and how they become
//! requests ([`Start`]), which pages each [`Rule`] handles, the items it
//! extracts ([`ItemDef`]) and the links it follows ([`Follow`]).

pub mod compile;
pub mod extensions;
pub mod file;
pub mod jsonpath;
pub mod limits;
pub mod render;
pub mod selector;
pub mod sending;
pub mod session;
pub mod start;
pub mod structured;
pub mod template;
pub mod transform;
pub mod xpath;

use std::path::{Path, PathBuf};

use regex::Regex;
use serde_json::Value;

pub use crate::reader::diagnostic::{Diagnostic, LoadError};
pub use extensions::DenyExtensions;
pub use jsonpath::{JsonPath, Until};
pub use selector::Selector;
pub use sending::Sending;
pub use structured::JsonLdPath;
pub use template::Template;
pub use transform::Transform;
pub use xpath::XPath;

pub use crate::frontier::keys::{ItemSink, KeyMode, Keys, StartKind};
pub use crate::frontier::Handoff;
use crate::settings::{Overrides, Settings};

/// An `allowed_domains` entry: a host (its subdomains too), on any port
/// or on the one it names (`"127.0.0.1:8731"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedDomain {
    /// Lower-cased, without a trailing dot or an IPv6 address's brackets.
    pub host: String,
    /// The port URLs must use (their scheme's default when they name
    /// none), if the entry names one.
    pub port: Option<u16>,
}

impl AllowedDomain {
    /// Whether `host` (lower-cased, no trailing dot) on `port` is this
    /// domain or below it.
    fn allows(&self, host: &str, port: Option<u16>) -> bool {
        let d = &self.host;
        let host_ok = host == d
            || (host.len() > d.len()
                && host.ends_with(d.as_str())
                && host.as_bytes()[host.len() - d.len() - 1] == b'.');
        host_ok && self.port.is_none_or(|p| port == Some(p))
    }
}

impl std::fmt::Display for AllowedDomain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.port, self.host.contains(':')) {
            (Some(p), true) => write!(f, "[{}]:{p}", self.host),
            (Some(p), false) => write!(f, "{}:{p}", self.host),
            (None, _) => f.write_str(&self.host),
        }
    }
}

/// A validated spider, ready to crawl.
#[derive(Debug, Clone)]
pub struct Spider {
    pub name: String,
    /// The file it was loaded from, for messages.
    pub source: PathBuf,
    /// Hosts (and their subdomains) requests may go to, each on one port
    /// if it names one; empty allows all.
    pub allowed_domains: Vec<AllowedDomain>,
    /// URLs matching any of these are never requested.
    pub deny: Vec<Regex>,
    /// The spider's own `[settings]` layer, for the worker to re-layer.
    pub overrides: Overrides,
    /// Built-in defaults with the spider's layer applied (and, once loaded
    /// for a command, every layer: see `cli::load_spider`).
    pub settings: Settings,
    /// The settings not at their default, each with where its value came
    /// from, for the worker's start line (empty until every layer is
    /// applied).
    pub settings_changed: Vec<String>,
    pub start: Start,
    /// Its Redis key names, resolved from `[keys]` and `[start] key`.
    pub keys: Keys,
    /// Its shards' key names (`[keys] shards`), shard 0's first (the same
    /// as `keys`): one for a spider that is not sharded.
    pub shards: Vec<Keys>,
    /// The spiders its follow entries hand links to (`to_spider`).
    pub handoffs: Vec<Handoff>,
    /// The hand-offs of its whole pipeline (its own, and those of the
    /// spiders it hands to, read from beside it), which its side records
    /// in Redis for the spiders they feed.
    pub relations: Vec<crate::frontier::pipeline::Relation>,
    /// What `check` warns about; the spider works as it is.
    pub warnings: Vec<Diagnostic>,
    pub items: Vec<ItemDef>,
    /// Where its items go (`[items] sink`).
    pub sink: ItemSink,
    /// `[items] type_field`: the key each item's type name is added under
    /// (first), if any.
    pub type_field: Option<String>,
    pub rules: Vec<Rule>,
    /// How requests a scrapy-redis crawl queued map to rules
    /// (`[scrapy_redis]`, read by `crawlworker import-queue`).
    pub scrapy_redis: ScrapyRedis,
    /// `[session]`: one login for the cluster, when the site needs one.
    pub session: Option<std::sync::Arc<session::Session>>,
}

/// `[scrapy_redis]`: the rule each queued scrapy-redis request goes to.
/// A callback not in `callbacks` goes to the rule of its own name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScrapyRedis {
    /// Callback name → rule name.
    pub callbacks: Vec<(String, String)>,
    /// The rule each of a CrawlSpider's `Rule`s (by index) maps to: its
    /// requests name the callback `_callback` and their rule's index.
    pub crawl_rules: Vec<String>,
    /// Request classes read as plain requests, besides Scrapy's own.
    pub classes: Vec<String>,
}

/// `[start]`: the start key and how an entry becomes a request.
#[derive(Debug, Clone)]
pub struct Start {
    /// The Redis type of the start key (its name is in [`Spider::keys`]).
    pub kind: StartKind,
    /// Entries claimed in one step.
    pub batch_size: usize,
    /// URL template for JSON tasks without a `url` key.
    pub url: Option<Template>,
    pub method: Template,
    pub body: Option<Template>,
    pub headers: Vec<(String, Template)>,
    pub priority: IntSource,
    /// The rule for start requests; matched by URL when absent.
    pub rule: Option<usize>,
    /// scrapy-redis sends start requests with `dont_filter`, so pushing a
    /// task again re-scans it.
    pub dont_filter: bool,
    /// Fields every task has, when the spider declares them.
    pub task_fields: Option<Vec<String>>,
    /// Sitemaps and feeds the crawl starts from (`[start] sitemap` and
    /// `feed`), each queued once per crawl with the rule that reads it.
    pub seeds: Vec<crate::request::Request>,
}

/// A whole number given directly or read from the request context.
#[derive(Debug, Clone, PartialEq)]
pub enum IntSource {
    Fixed(i64),
    Template(Template),
}

/// `[items.<name>]`.
#[derive(Debug, Clone)]
pub struct ItemDef {
    pub name: String,
    pub fields: Vec<Field>,
    /// A jq program the finished item goes through; `null` drops it.
    pub transform: Option<Transform>,
    /// `key`: the fields that tell one item of this type from another
    /// (`crawlworker export` upserts rows by them); empty when the spider
    /// names none.
    pub key: Vec<String>,
    /// `table`: where `crawlworker export` writes items of this type, when
    /// the spider names it.
    pub table: Option<String>,
}

/// How a field's value is produced.
#[derive(Debug, Clone)]
pub struct Field {
    pub name: String,
    /// Where the field is in its item (`posts.author`), for messages.
    pub path: String,
    pub source: FieldSource,
    /// One value per element this selects (a JSON array): the rest of the
    /// field applies within each element.
    pub each: Option<Each>,
    /// `type = "datetime"`: how its text is read.
    pub dates: Option<DateSpec>,
    /// A jq program each value goes through before `type` reads it.
    pub prepare: Option<Transform>,
    /// A jq program the extracted value goes through.
    pub transform: Option<Transform>,
    /// Keep every value (a JSON array) instead of the first.
    pub all: bool,
    /// Join all values into one string with this separator.
    pub join: Option<String>,
    /// Keep what the regex captures (group 1, or the whole match).
    pub re: Option<Regex>,
    pub whitespace: Whitespace,
    /// Convert values to this type; none keeps them as found (text from
    /// the page, numbers from `page = "status"`, constants as written).
    pub kind: Option<FieldType>,
    pub default: Option<Value>,
    /// A page without this field drops the item (counted).
    pub required: bool,
    /// Resolve values against the page's base URL.
    pub url: bool,
    /// What the finished value must be, else the item is dropped.
    pub checks: FieldChecks,
}

/// A field's schema beyond `required`, checked on its finished value
/// (after conversion and default). A missing value (null) is `required`'s
/// business and passes these. An item whose value fails one is dropped,
/// counted by reason (`item_dropped_reasons_count/<reason>`) and logged.
#[derive(Debug, Clone, Default)]
pub struct FieldChecks {
    /// `expect`: the JSON type of the whole value.
    pub expect: Option<ValueKind>,
    /// `non_empty`: not "", [] or {}.
    pub non_empty: bool,
    /// `pattern`: matched (anywhere: anchor with `^…$`) by the value, or
    /// by each element of a list; numbers and booleans as their JSON text.
    pub pattern: Option<Regex>,
    /// `min` / `max`: bounds of a number, or of each number of a list.
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// `min_length` / `max_length`: characters of a string, elements of a
    /// list.
    pub min_length: Option<usize>,
    pub max_length: Option<usize>,
}

impl FieldChecks {
    pub fn is_empty(&self) -> bool {
        self.expect.is_none()
            && !self.non_empty
            && self.pattern.is_none()
            && self.min.is_none()
            && self.max.is_none()
            && self.min_length.is_none()
            && self.max_length.is_none()
    }
}

/// A JSON value's type, as `expect` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    String,
    Integer,
    /// Any number, whole or not.
    Number,
    Boolean,
    List,
    Object,
}

impl ValueKind {
    pub const NAMES: &'static [(&'static str, ValueKind)] = &[
        ("string", ValueKind::String),
        ("integer", ValueKind::Integer),
        ("number", ValueKind::Number),
        ("boolean", ValueKind::Boolean),
        ("list", ValueKind::List),
        ("object", ValueKind::Object),
    ];

    pub fn name(self) -> &'static str {
        ValueKind::NAMES
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("", |(n, _)| n)
    }

    /// Whether `v` is of this type.
    pub fn matches(self, v: &Value) -> bool {
        match self {
            ValueKind::String => v.is_string(),
            ValueKind::Integer => v.is_i64() || v.is_u64(),
            ValueKind::Number => v.is_number(),
            ValueKind::Boolean => v.is_boolean(),
            ValueKind::List => v.is_array(),
            ValueKind::Object => v.is_object(),
        }
    }
}

/// How a `type = "datetime"` field reads a date: its strftime formats,
/// then the relative forms pages write ("3 hours ago", "昨天 14:02"),
/// resolved against the response's fetch time; in `zone` when the text
/// names none.
#[derive(Debug, Clone)]
pub struct DateSpec {
    pub formats: Vec<String>,
    pub zone: chrono_tz::Tz,
}

#[derive(Debug, Clone)]
pub enum FieldSource {
    Css(Selector),
    /// A JSONPath over the JSON response, or over the `each` element.
    Json(JsonPath),
    XPath(XPath),
    /// A path into the page's JSON-LD (`jsonld = "author.name"`).
    JsonLd(JsonLdPath),
    /// A `<meta>` property (`og = "title"` is `og:title`).
    Og(String),
    Page(PageValue),
    Meta(String),
    Const(Value),
    /// `fields = { … }`: an object made of these fields, read within the
    /// element (or the item's scope without `each`).
    Object(Vec<Field>),
}

/// Facts about the response itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageValue {
    Url,
    Status,
    Depth,
    /// The response headers, as an object (names in lower case).
    Headers,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whitespace {
    /// Trim both ends (the default).
    Strip,
    /// Trim and collapse inner runs of whitespace to one space.
    Normalize,
    /// As found on the page.
    Keep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    String,
    Int,
    Float,
    Bool,
    /// RFC 3339 text, read as the field's [`DateSpec`] says.
    DateTime,
}

/// `[[rules]]`: the pages a rule handles and what it does with them.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    /// URL regexes; the first rule with a match handles the page.
    pub matches: Vec<Regex>,
    pub extract: Vec<Extract>,
    pub follow: Vec<Follow>,
    /// The rule reads its responses as JSON (its fields, `each` or follow
    /// entries use JSONPath), not as HTML.
    pub json: bool,
    /// Fetch the pages this rule handles again (`revisit`).
    pub revisit: Option<RevisitRule>,
    /// The rule takes responses whose body is binary (`binary = true`):
    /// its items are extracted from them, with nothing read as HTML.
    pub binary: bool,
    /// Render the rule's pages in headless Chromium before extracting them.
    pub render: Option<render::Render>,
}

/// How a rule revisits its pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisitRule {
    /// The shortest interval, and the first; equal to `max` for a fixed
    /// `revisit = "10m"`.
    pub min: std::time::Duration,
    /// The longest interval an unchanged page grows to.
    pub max: std::time::Duration,
    /// What decides that a page changed.
    pub change: Change,
    /// With `Change::Extracted`: the item fields that count (a view
    /// counter left out); empty for all fields and the links too.
    pub change_fields: Vec<String>,
    /// Push a revisited page's items only when they changed.
    pub emit_changed: bool,
}

/// What a revisit compares to tell that a page changed, when the server
/// did not answer 304.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// The items and links extracted (a list page's changing timestamp or
    /// ad does not count).
    Extracted,
    /// The response body, byte for byte.
    Body,
}

/// One item type extracted by a rule.
#[derive(Debug, Clone)]
pub struct Extract {
    /// Index into [`Spider::items`].
    pub item: usize,
    /// One item per node matching this, fields relative to it.
    pub each: Option<Each>,
    /// The JSON-LD types (`jsonld_type`) its `jsonld` fields read; any
    /// when empty.
    pub jsonld_types: Vec<String>,
}

/// What `each` selects: HTML elements by CSS (`each = "div.comment"`) or
/// XPath (`each = { xpath = "//div[@class='comment']" }`), or JSON values
/// (a JSONPath always starts with `$`, which a CSS selector never does).
#[derive(Debug, Clone)]
pub enum Each {
    Css(Selector),
    XPath(XPath),
    Json(JsonPath),
}

/// Where a follow rule finds its links.
#[derive(Debug, Clone)]
pub enum LinkSource {
    Css(Selector),
    XPath(XPath),
    /// Over the decoded page text; group 1 (or the whole match) is the link.
    Re(Regex),
    /// A sitemap's pages (its sitemaps, for an index, go to the rule that
    /// read it).
    Sitemap,
    /// An RSS, Atom or JSON feed's entries.
    Feed,
    /// The strings a JSONPath selects in a JSON response.
    Json(JsonPath),
    /// A `{field}` URL template, rendered once per `each` element of a
    /// JSON response (or once per page) from the element's fields, the
    /// page counter and the request's context.
    Template(Template),
}

/// Which context a followed request carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaCarry {
    Names(Vec<String>),
    All,
}

/// `[[rules.follow]]`.
#[derive(Debug, Clone)]
pub struct Follow {
    pub links: LinkSource,
    /// Keep only links matching one of these (all when empty).
    pub allow: Vec<Regex>,
    pub deny: Vec<Regex>,
    /// Links whose path ends with one of these are not followed (Scrapy's
    /// list unless the entry gives its own; none for the sources Scrapy's
    /// link extractor does not read: sitemaps, feeds, JSON).
    pub deny_extensions: DenyExtensions,
    /// The rule for followed requests; matched by URL when absent.
    pub rule: Option<usize>,
    /// Hand the links to another spider (index into [`Spider::handoffs`])
    /// as tasks on its start key, instead of queueing them here.
    pub to_spider: Option<usize>,
    pub priority: i64,
    pub dont_filter: bool,
    /// Deepest request this follow creates.
    pub depth_limit: Option<u32>,
    pub meta: MetaCarry,
    pub paginate: Option<Paginate>,
    /// JSON responses: one request per value this selects (with
    /// `LinkSource::Template`).
    pub each: Option<JsonPath>,
    /// The context field that counts pages: the request is for page
    /// (this page's number, 1 when the request has none) + 1, and
    /// carries the new number on.
    pub counter: Option<String>,
    /// When a JSON page's follow-ups stop (the end of an API's pages).
    pub until: Option<Until>,
    /// Method, body and headers of the requests.
    pub sending: Sending,
    /// How each link is rewritten before it is checked and followed.
    pub rewrite: Option<Rewrite>,
}

/// `rewrite = { … }` on a follow entry: a link's canonical form, made
/// before `allow`, `deny` and the dupefilter see it. Applied in this
/// order: the query's parameters, then `replace`, then `jq`.
#[derive(Debug, Clone)]
pub struct Rewrite {
    pub query: QueryRule,
    /// Regexes over the whole URL and what replaces their matches (`$1`
    /// for a group), in file order.
    pub replace: Vec<(Regex, String)>,
    /// A jq program from the URL (a string) to the URL followed.
    pub jq: Option<Transform>,
}

/// Which query parameters a rewritten link keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryRule {
    /// All of them.
    All,
    /// `keep_query`: only these (none for an empty list).
    Keep(Vec<QueryParam>),
    /// `remove_query`: all but these.
    Remove(Vec<QueryParam>),
}

/// A query parameter by name (`page`), name prefix (`utm_*`), or name
/// and value (`page=1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryParam {
    pub name: String,
    /// The name ends with `*`: any parameter starting with `name`.
    pub prefix: bool,
    /// Only with this value (as written in the URL, decoded).
    pub value: Option<String>,
}

/// Stop following pages past a limit.
#[derive(Debug, Clone)]
pub struct Paginate {
    /// Group 1 is the page number of a link.
    pub page: Regex,
    pub max: IntSource,
}

impl Spider {
    /// Reads and validates a spider file.
    pub fn load(path: &Path) -> Result<Spider, LoadError> {
        let read = |source| LoadError::Read {
            what: "spider file",
            path: path.to_path_buf(),
            source,
        };
        // Refused before it is read: a spider is a few KiB.
        let size = std::fs::metadata(path).map_err(read)?.len();
        if size > limits::MAX_FILE_BYTES {
            return Err(LoadError::Read {
                what: "spider file",
                path: path.to_path_buf(),
                source: std::io::Error::other(format!(
                    "it is {size} bytes; a spider file may have at most {} (split it, or keep long URL lists in Redis)",
                    limits::MAX_FILE_BYTES
                )),
            });
        }
        let text = std::fs::read_to_string(path).map_err(read)?;
        Spider::from_str(path, &text)
    }

    /// Validates a spider given as text; `path` names it in messages.
    pub fn from_str(path: &Path, text: &str) -> Result<Spider, LoadError> {
        compile::compile(path, text)
    }

    pub fn item(&self, name: &str) -> Option<&ItemDef> {
        self.items.iter().find(|i| i.name == name)
    }

    pub fn rule_index(&self, name: &str) -> Option<usize> {
        self.rules.iter().position(|r| r.name == name)
    }

    /// Whether its items run jq programs (a field's `prepare` or
    /// `transform`, an item type's `transform`): a page's extraction then
    /// runs on a stack fit for them ([`transform::with_stack`]), mapped
    /// once rather than for each run.
    pub fn items_run_jq(&self) -> bool {
        fn runs(f: &Field) -> bool {
            f.prepare.is_some()
                || f.transform.is_some()
                || matches!(&f.source, FieldSource::Object(fields) if fields.iter().any(runs))
        }
        self.items
            .iter()
            .any(|i| i.transform.is_some() || i.fields.iter().any(runs))
    }

    /// The rule for a request: its named rule, else the first whose pattern
    /// matches the URL.
    pub fn rule_for(&self, rule: Option<&str>, url: &str) -> Option<&Rule> {
        if let Some(name) = rule {
            if let Some(r) = self.rules.iter().find(|r| r.name == name) {
                return Some(r);
            }
        }
        self.rules
            .iter()
            .find(|r| r.matches.iter().any(|m| m.is_match(url)))
    }

    /// What this spider's frontier needs, for worker `worker`.
    pub fn frontier_options(&self, worker: &str) -> crate::frontier::Options {
        crate::frontier::Options {
            keys: self.keys.clone(),
            start_kind: self.start.kind,
            worker: worker.to_string(),
            lease: self.settings.lease_timeout,
            pacing: pacing(&self.settings),
            dupefilter: dupefilter(&self.settings),
            handoffs: self.handoffs.clone(),
            relations: self.relations.clone(),
            quota: crate::frontier::Quota {
                max_pages: u64::from(self.settings.max_pages),
                max_pages_per_host: u64::from(self.settings.max_pages_per_host),
            },
            sink: crate::frontier::SinkOptions {
                sink: self.sink,
                max_backlog: u64::from(self.settings.items_stream_max_backlog),
            },
            commit_wait: self.settings.commit_wait,
            max_lease_expiries: self.settings.max_lease_expiries,
        }
    }

    /// Whether `url` may be requested (see [`Spider::allows`]).
    pub fn allows_url(&self, url: &str) -> bool {
        self.allowed_domains.is_empty() || url::Url::parse(url).is_ok_and(|u| self.allows(&u))
    }

    /// Whether `url`'s host is one of the allowed domains or below one,
    /// on the domain's port if it names one.
    pub fn allows(&self, url: &url::Url) -> bool {
        if self.allowed_domains.is_empty() {
            return true;
        }
        let Some(host) = url.host_str() else {
            return false;
        };
        let host = host
            .trim_matches(['[', ']'])
            .trim_end_matches('.')
            .to_ascii_lowercase();
        let port = url.port_or_known_default();
        self.allowed_domains.iter().any(|d| d.allows(&host, port))
    }
}

/// The politeness the frontier's scripts apply: the larger of
/// `download_delay` and the interval `max_requests_per_second` implies.
fn pacing(s: &Settings) -> crate::frontier::Pacing {
    let rate = if s.max_requests_per_second > 0.0 {
        std::time::Duration::from_secs_f64(1.0 / s.max_requests_per_second)
    } else {
        std::time::Duration::ZERO
    };
    let delay = s.download_delay;
    // With both set, randomisation must not go below the rate's interval.
    let (interval, jitter) = if rate > delay {
        (rate, false)
    } else {
        (delay, s.randomize_download_delay)
    };
    crate::frontier::Pacing {
        interval,
        jitter,
        backoff_max: s.adaptive_backoff_max_delay,
    }
}

/// The dupefilter the settings ask for.
fn dupefilter(s: &Settings) -> crate::frontier::Dupefilter {
    use crate::frontier::Dupefilter;
    use crate::settings::DupefilterMode;
    match s.dupefilter {
        DupefilterMode::Exact => Dupefilter::Exact,
        DupefilterMode::Compact => Dupefilter::Compact,
        DupefilterMode::Bloom => Dupefilter::Bloom {
            capacity: s.dupefilter_capacity.0,
            error_rate: s.dupefilter_error_rate.0,
        },
        DupefilterMode::Expiring => Dupefilter::Expiring {
            ttl: s.dupefilter_ttl,
            refresh: s.dupefilter_refresh,
        },
    }
}
