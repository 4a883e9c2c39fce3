//! Turns a [`SpiderFile`] into a [`Spider`]: builds regexes, selectors and
//! templates, resolves names to indices and checks the spider as a whole
//! (rules that can never run, follow targets that do not exist, context
//! fields that no request carries). Every problem is recorded; nothing stops
//! at the first.

mod json;

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::Path;

use regex::Regex;

use super::file::{
    read_spider, FieldFile, FollowFile, IntOrTemplate, ItemFile, KeysFile, RevisitFile, RuleFile,
    SpiderFile, StartFile,
};
use super::{
    Change, Each, Extract, Field, FieldChecks, FieldSource, FieldType, Follow, Handoff, IntSource,
    ItemDef, LinkSource, MetaCarry, PageValue, Paginate, RevisitRule, Rule, Selector, Spider,
    Start, StartKind, Template, ValueKind, Whitespace, XPath,
};
use crate::frontier::keys::{ItemSink, KeyKind, KeyMode, Keys};
use crate::reader::diagnostic::{did_you_mean, syntax_error, LoadError};
use crate::reader::{At, Loc, Reader};
use crate::settings;

/// Priorities a spider may write: the frontier keeps every request's
/// within these.
const PRIORITIES: std::ops::RangeInclusive<i64> =
    -crate::frontier::MAX_PRIORITY..=crate::frontier::MAX_PRIORITY;

/// The shortest `revisit` a rule may ask for.
const MIN_REVISIT: std::time::Duration = std::time::Duration::from_millis(100);

/// Parses and validates spider text; `path` names it in messages, and the
/// spiders its `to_spider` entries name are read from beside it.
pub(crate) fn compile(path: &Path, text: &str) -> Result<Spider, LoadError> {
    compile_with(path, text, true)
}

/// As [`compile`]; a spider read only for its keys (a `to_spider` target)
/// does not read its own targets in turn (`resolve_handoffs` false), so a
/// pair handing work both ways does not recurse.
fn compile_with(path: &Path, text: &str, resolve_handoffs: bool) -> Result<Spider, LoadError> {
    let doc = toml_edit::Document::parse(text).map_err(|e| syntax_error(path, text, &e))?;
    let reader = Reader::new(path, text);
    let root = reader.root(doc.as_table());
    let file = read_spider(&root);
    root.finish();
    let spider = Compiler {
        r: &reader,
        path,
        resolve_handoffs,
        handoffs: RefCell::default(),
        patterns: std::cell::Cell::new(0),
    }
    .spider(path, &file);
    let problems = reader.into_problems();
    match spider {
        Some(mut spider) if problems.iter().all(|d| d.warning) => {
            spider.warnings = problems;
            Ok(spider)
        }
        _ => Err(LoadError::Invalid(problems)),
    }
}

/// Name of spiders, rules and items: they appear in Redis keys and logs.
fn valid_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

struct Compiler<'r> {
    r: &'r Reader<'r>,
    path: &'r Path,
    resolve_handoffs: bool,
    /// The spiders `to_spider` entries name, each once, with where the
    /// first entry naming it is.
    handoffs: RefCell<Vec<(Handoff, Loc)>>,
    /// Regexes compiled so far, against [`super::limits::MAX_PATTERNS`].
    patterns: std::cell::Cell<usize>,
}

impl Compiler<'_> {
    fn problem(&self, loc: &Loc, message: impl Into<String>, hint: impl Into<String>) {
        self.r.problem(loc, message, Some(hint.into()));
    }

    fn regex(&self, at: &At<String>) -> Option<Regex> {
        if self.patterns.get() >= super::limits::MAX_PATTERNS {
            if self.patterns.get() == super::limits::MAX_PATTERNS {
                self.problem(
                    &at.loc,
                    format!(
                        "the spider has more than {} regexes (`deny`, `match`, `allow`, `re`, …)",
                        super::limits::MAX_PATTERNS
                    ),
                    "merge patterns into one with `|`, or filter URLs before they reach Redis",
                );
            }
            self.patterns.set(self.patterns.get() + 1);
            return None;
        }
        self.patterns.set(self.patterns.get() + 1);
        super::limits::regex(&at.value)
            .map_err(|e| {
                let detail = e.to_string();
                let last = detail.lines().last().unwrap_or("").trim().to_string();
                self.problem(
                    &at.loc,
                    format!("`{}` is not a valid regex: {last}", crate::wording::cut(&at.value, 200)),
                    "regexes use Rust syntax (Python's `re` without look-around or backreferences); escape a literal `.` or `?` with `\\`",
                )
            })
            .ok()
    }

    fn selector(&self, at: &At<String>) -> Option<Selector> {
        // CSS never starts with `$`; a JSONPath always does.
        if at.value.trim_start().starts_with('$') {
            self.problem(
                &at.loc,
                format!("`{}` is a JSONPath, not a CSS selector", at.value),
                format!(
                    "write it as {{ json = \"{}\" }} (for a JSON response)",
                    at.value
                ),
            );
            return None;
        }
        Selector::parse(&at.value)
            .map_err(|e| {
                self.problem(
                    &at.loc,
                    e,
                    "write CSS with Scrapy's pseudo-elements, e.g. `h1::text`, `div.body ::text`, `a::attr(href)`",
                )
            })
            .ok()
    }

    fn xpath(&self, at: &At<String>) -> Option<XPath> {
        XPath::parse(&at.value)
            .map_err(|e| {
                self.problem(
                    &at.loc,
                    e,
                    "write XPath 1.0 as in Scrapy, e.g. `//h1/text()`, `//a[contains(@class, 'next')]/@href`, `normalize-space(//div[@id='body'])`",
                )
            })
            .ok()
    }

    fn template(&self, at: &At<String>) -> Option<Template> {
        Template::parse(&at.value)
            .map_err(|e| {
                self.problem(
                    &at.loc,
                    format!("`{}` is not a valid template: {e}", at.value),
                    "write `{field}` to insert a task field, `{{` for a literal brace",
                )
            })
            .ok()
    }

    fn name(&self, at: &At<String>, what: &str) -> bool {
        let ok = valid_name(&at.value);
        if !ok {
            self.problem(
                &at.loc,
                format!("`{}` is not a valid {what} name", at.value),
                "use letters, digits, `_`, `-` and `.`, starting with a letter or digit",
            );
        }
        ok
    }

    /// Finds `name` in `names`, reporting a miss with a suggestion.
    fn lookup(&self, at: &At<String>, names: &Names<'_>, what: &str) -> Option<usize> {
        let found = names.position(&at.value);
        if found.is_none() {
            let hint = match did_you_mean(&at.value, names.iter().copied()) {
                Some(near) => format!("did you mean `{near}`?"),
                None if names.is_empty() => format!("this spider defines no {what}s"),
                None => format!("{what}s defined: {}", names.join(", ")),
            };
            self.problem(&at.loc, format!("no {what} is named `{}`", at.value), hint);
        }
        found
    }

    fn spider(&self, path: &Path, file: &SpiderFile) -> Option<Spider> {
        let name = file.name.as_ref().filter(|n| self.name(n, "spider"));
        let allowed_domains = file
            .allowed_domains
            .iter()
            .filter_map(|d| self.domain(d))
            .collect();
        let deny: Vec<Regex> = file.deny.iter().filter_map(|d| self.regex(d)).collect();

        let item_names = Names::new(file.items.iter().map(|i| i.name.value.as_str()).collect());
        let items: Vec<Option<ItemDef>> = file.items.iter().map(|i| self.item(i)).collect();

        let rule_names = self.rule_names(file);
        let rules: Vec<Option<Rule>> = file
            .rules
            .iter()
            .map(|r| self.rule(r, &item_names, &rule_names, &file.items))
            .collect();
        if file.rules.is_empty() {
            self.problem(
                &file.loc,
                "the spider has no rules, so it would extract nothing",
                "add a `[[rules]]` table with `name`, `match` and `extract` or `follow`",
            );
        }
        let spider_name = name.map(|n| n.value.clone()).unwrap_or_default();
        let start = self.start(&file.start, &rule_names);
        let keys = self.keys(&file.keys, &file.start, &spider_name);
        let handoffs: Vec<(Handoff, Loc)> = self.handoffs.take();
        if let Some(keys) = keys.as_ref().filter(|_| self.resolve_handoffs) {
            self.check_handoff_slots(keys, &handoffs);
        }
        let graph = Graph::new(file, &rule_names, start.as_ref());
        self.check_reachable(file, &graph);
        self.check_context(file, &graph);

        let sink = self.sink(file.items_sink.as_ref());
        let items = items.into_iter().collect::<Option<Vec<_>>>()?;
        let rules = rules.into_iter().collect::<Option<Vec<_>>>()?;
        let overrides = file.settings.clone();
        let seeds = self.seeds(file);
        let mut start = start?;
        start.seeds = seeds?;
        Some(Spider {
            name: name?.value.clone(),
            source: path.to_path_buf(),
            allowed_domains,
            deny,
            settings: settings::layered(&[&overrides]),
            overrides,
            start,
            keys: keys?,
            handoffs: handoffs.into_iter().map(|(h, _)| h).collect(),
            warnings: Vec::new(),
            items,
            sink: sink?,
            rules,
        })
    }

    /// `[items] sink`.
    fn sink(&self, sink: Option<&At<String>>) -> Option<ItemSink> {
        match sink.map(|s| s.value.as_str()) {
            None | Some("list") => Some(ItemSink::List),
            Some("stream") => Some(ItemSink::Stream),
            Some(other) => {
                self.problem(
                    &sink?.loc,
                    format!("`{other}` is not an item sink"),
                    "use \"list\" (RPUSH to <name>:items, as scrapy-redis: the default) or \"stream\" (XADD to <name>:items:stream, for consumer groups)",
                );
                None
            }
        }
    }

    /// The requests of `[start] sitemap` and `feed`: each URL read by the
    /// first rule with a `sitemap = true` (resp. `feed = true`) follow
    /// entry.
    fn seeds(&self, file: &SpiderFile) -> Option<Vec<crate::request::Request>> {
        let mut seeds = Vec::new();
        let mut ok = true;
        for (urls, kind) in [(&file.start.sitemap, "sitemap"), (&file.start.feed, "feed")] {
            let Some(urls) = urls else { continue };
            let reader = file.rules.iter().find(|r| {
                r.follow.iter().any(|f| {
                    let flag = if kind == "sitemap" {
                        &f.sitemap
                    } else {
                        &f.feed
                    };
                    flag.as_ref().is_some_and(|b| b.value)
                })
            });
            for at in urls {
                let Some(rule) = reader.and_then(|r| r.name.as_ref()) else {
                    ok = false;
                    self.problem(
                        &at.loc,
                        format!("no rule reads a {kind}: `[start] {kind}` needs a rule with a `{kind} = true` follow entry"),
                        format!("add a rule that matches the URL, with `[[rules.follow]]` `{kind} = true` and the rule of the pages it lists"),
                    );
                    continue;
                };
                match url::Url::parse(&at.value) {
                    Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
                        seeds.push(crate::request::Request {
                            rule: Some(rule.value.clone()),
                            dont_filter: true,
                            ..crate::request::Request::get(&at.value)
                        });
                    }
                    _ => {
                        ok = false;
                        self.problem(
                            &at.loc,
                            format!("`{}` is not an http(s) URL", at.value),
                            format!("write the {kind}'s full address, e.g. \"https://news.example.com/{kind}.xml\""),
                        );
                    }
                }
            }
        }
        ok.then_some(seeds)
    }

    /// Resolves the spider's key names from `[keys]` and `[start] key`.
    fn keys(&self, k: &KeysFile, start: &StartFile, spider: &str) -> Option<Keys> {
        let mode = match k.mode.as_ref().map(|m| m.value.as_str()) {
            None | Some("plain") => KeyMode::Plain,
            Some("cluster") => KeyMode::Cluster,
            Some(other) => {
                self.problem(
                    &k.mode.as_ref().map(|m| m.loc.clone()).unwrap_or_default(),
                    format!("`{other}` is not a key mode"),
                    "use \"plain\" (default) or \"cluster\" (Redis Cluster hash tags)",
                );
                KeyMode::Plain
            }
        };
        let kinds: Vec<&str> = KeyKind::ALL
            .iter()
            .filter(|k| **k != KeyKind::Start)
            .map(|k| k.name())
            .collect();
        let mut templates = Vec::new();
        // Where each kind was renamed, to point at a clash.
        let mut written: Vec<(KeyKind, &Loc)> = Vec::new();
        let mut ok = true;
        for (kind, template) in &k.templates {
            match KeyKind::parse(&kind.value) {
                Some(KeyKind::Start) => {
                    ok = false;
                    self.problem(
                        &kind.loc,
                        "the start key is not named in `[keys]`",
                        "name it in the `[start]` table: key = \"…\"",
                    );
                }
                None => {
                    ok = false;
                    let hint = match did_you_mean(&kind.value, kinds.iter().copied()) {
                        Some(near) => format!("did you mean `{near}`?"),
                        None => format!("key kinds: mode, {}", kinds.join(", ")),
                    };
                    self.problem(
                        &kind.loc,
                        format!("unknown key kind `{}`", kind.value),
                        hint,
                    );
                }
                Some(_) if mode == KeyMode::Cluster && !template.value.contains("{name}") => {
                    ok = false;
                    self.problem(
                        &template.loc,
                        "in cluster mode a key template must contain `{name}` (it becomes the hash tag)",
                        "write e.g. \"{name}:requests\"",
                    );
                }
                Some(parsed) => {
                    templates.push((parsed, template.value.clone()));
                    written.push((parsed, &template.loc));
                }
            }
        }
        let tag = match (&k.hash_tag, mode) {
            (Some(t), KeyMode::Cluster) if !valid_name(&t.value) => {
                ok = false;
                self.problem(
                    &t.loc,
                    format!("`{}` is not a usable hash tag", t.value),
                    "use letters, digits, `_`, `-` and `.` (e.g. the name of the spider this one works with)",
                );
                None
            }
            (Some(t), KeyMode::Cluster) => Some(t.value.as_str()),
            (Some(t), KeyMode::Plain) => {
                self.r.warning(
                    &t.loc,
                    "`hash_tag` only matters in cluster mode",
                    Some("add `mode = \"cluster\"`, or remove `hash_tag`".into()),
                );
                None
            }
            (None, _) => None,
        };
        let tagged = Keys::tagged_name(spider, mode, tag);
        if let (KeyMode::Cluster, Some(key)) = (mode, &start.key) {
            if !key.value.contains(&tagged) {
                ok = false;
                self.problem(
                    &key.loc,
                    format!("in cluster mode the start key must contain the hash tag `{tagged}`"),
                    format!("write e.g. key = \"{tagged}:start_urls\", so every key of the spider is in one slot"),
                );
            }
        }
        if let Some(key) = &start.key {
            written.push((KeyKind::Start, &key.loc));
            // A copy of a spider under a new name would share its start key.
            if !key.value.contains(spider) {
                self.r.warning(
                    &key.loc,
                    format!(
                        "the start key `{}` does not contain the spider's name `{spider}`; a copy of this spider under another name would share it (and `flush --all` of one would delete the other's entries)",
                        key.value
                    ),
                    Some(format!(
                        "leave `key` out to use the default `{}`",
                        KeyKind::Start.template().replace("{name}", &tagged)
                    )),
                );
            }
        }
        let keys = Keys::resolve(
            spider,
            mode,
            tag,
            &templates,
            start.key.as_ref().map(|k| k.value.as_str()),
        );
        // Two kinds sharing a key would mix what they hold (and `flush`
        // of one would delete the other).
        let all: Vec<(KeyKind, &str)> = keys.all().collect();
        for (i, (kind, key)) in all.iter().enumerate() {
            if let Some((other, _)) = all[..i].iter().find(|(_, k)| k == key) {
                ok = false;
                let loc = written
                    .iter()
                    .find(|(k, _)| k == kind || k == other)
                    .map(|(_, l)| (*l).clone())
                    .unwrap_or_else(|| k.mode.as_ref().map(|m| m.loc.clone()).unwrap_or_default());
                self.problem(
                    &loc,
                    format!(
                        "the `{}` and `{}` keys would both be `{key}`",
                        other.name(),
                        kind.name()
                    ),
                    "give every kind its own key name",
                );
            }
        }
        // The dupefilter's bloom and expiring modes also write
        // `<dupefilter>:<n>` and `<dupefilter>:<n>:piece:<p>`.
        let below = format!("{}:", keys.dupefilter);
        for (kind, key) in &all {
            let derived = key.strip_prefix(&below).is_some_and(|rest| {
                rest.starts_with(|c: char| c.is_ascii_digit()) || rest.starts_with("piece:")
            });
            if derived {
                ok = false;
                let loc = written
                    .iter()
                    .find(|(k, _)| k == kind || *k == KeyKind::Dupefilter)
                    .map(|(_, l)| (*l).clone())
                    .unwrap_or_else(|| k.mode.as_ref().map(|m| m.loc.clone()).unwrap_or_default());
                self.problem(
                    &loc,
                    format!(
                        "the `{}` key `{key}` is one the `dupefilter` key's own keys may take (`{below}<n>`, in the bloom and expiring modes)",
                        kind.name()
                    ),
                    "give every kind its own key name, not one below another's",
                );
            }
        }
        ok.then_some(keys)
    }

    fn domain(&self, at: &At<String>) -> Option<String> {
        let d = at.value.trim().trim_end_matches('.').to_ascii_lowercase();
        let bad = if d.is_empty() {
            Some("an empty domain")
        } else if d.contains("://") || d.contains('/') {
            Some("a URL, not a domain")
        } else if d.contains(':') && !d.starts_with('[') {
            Some("a domain with a port (ports are not compared)")
        } else {
            None
        };
        match bad {
            Some(what) => {
                self.problem(
                    &at.loc,
                    format!("`{}` is {what}", at.value),
                    "write just the host, e.g. \"bbs.example.com\"; its subdomains are allowed too",
                );
                None
            }
            None => Some(d),
        }
    }

    fn rule_names<'f>(&self, file: &'f SpiderFile) -> Names<'f> {
        let mut names: Vec<&str> = Vec::new();
        let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
        if file.rules.len() > super::limits::MAX_RULES {
            self.problem(
                &file.rules[super::limits::MAX_RULES].loc,
                format!(
                    "the spider has {} rules; at most {} are accepted",
                    file.rules.len(),
                    super::limits::MAX_RULES
                ),
                "split it into spiders handing links to each other (`to_spider`), or merge rules whose patterns differ little",
            );
        }
        for rule in &file.rules {
            let Some(name) = &rule.name else {
                self.problem(
                    &rule.loc,
                    "a rule has no `name`",
                    "add `name = \"…\"`; follow links and start entries name the rule they lead to",
                );
                names.push("");
                continue;
            };
            if !seen.insert(name.value.as_str()) {
                self.problem(
                    &name.loc,
                    format!("two rules are named `{}`", name.value),
                    "give each rule its own name",
                );
            } else {
                self.name(name, "rule");
            }
            names.push(&name.value);
        }
        Names::new(names)
    }

    fn start(&self, s: &StartFile, rules: &Names<'_>) -> Option<Start> {
        let mut ok = true;
        let kind = match s.kind.as_ref().map(|k| k.value.as_str()) {
            None | Some("list") => StartKind::List,
            Some("set") => StartKind::Set,
            Some("zset") => StartKind::Zset,
            Some(other) => {
                ok = false;
                self.problem(
                    &s.kind.as_ref().map(|k| k.loc.clone()).unwrap_or_default(),
                    format!("`{other}` is not a start key type"),
                    "use \"list\", \"set\" or \"zset\" (the Redis type of the start key)",
                );
                StartKind::List
            }
        };
        let batch_size = match &s.batch_size {
            None => 16,
            Some(b) if (1..=10_000).contains(&b.value) => b.value as usize,
            Some(b) => {
                ok = false;
                self.problem(
                    &b.loc,
                    format!("{} is out of range", b.value),
                    "use a batch size from 1 to 10000",
                );
                16
            }
        };
        let task_fields: Option<Vec<String>> = s
            .task_fields
            .as_ref()
            .map(|f| f.iter().map(|a| a.value.clone()).collect());
        let mut templates_ok = true;
        let mut template = |at: &At<String>| -> Option<Template> {
            let t = self.template(at);
            templates_ok &= t.is_some();
            if let (Some(t), Some(fields)) = (&t, &task_fields) {
                for f in t.fields() {
                    if !fields.iter().any(|k| k == f) {
                        self.problem(
                            &at.loc,
                            format!("the template uses `{{{f}}}`, but `task_fields` does not list `{f}`"),
                            format!("add \"{f}\" to start.task_fields, or use one of: {}", fields.join(", ")),
                        );
                    }
                }
            }
            t
        };
        let url = s.url.as_ref().and_then(&mut template);
        if let (Some(t), Some(at)) = (&url, &s.url) {
            self.check_url_template(t, at);
        }
        let method = match &s.method {
            Some(m) => template(m),
            None => Template::parse("GET").ok(),
        };
        if let (Some(m), Some(at)) = (&method, &s.method) {
            if m.fields().is_empty() && !is_http_token(&at.value) {
                self.problem(
                    &at.loc,
                    format!("`{}` is not an HTTP method", at.value),
                    "use GET, POST, … or a `{field}` template",
                );
            }
        }
        let body = s.body.as_ref().and_then(&mut template);
        let headers: Vec<(String, Template)> = s
            .headers
            .iter()
            .filter_map(|(k, v)| Some((k.value.clone(), template(v)?)))
            .collect();
        let priority = match &s.priority {
            None => IntSource::Fixed(0),
            Some(p) => self.int_source(p, &task_fields, PRIORITIES)?,
        };
        let rule = match &s.rule {
            Some(r) => Some(self.lookup(r, rules, "rule")?),
            None => None,
        };
        (ok && templates_ok).then_some(())?;
        Some(Start {
            kind,
            batch_size,
            url,
            method: method?,
            body,
            headers,
            priority,
            rule,
            dont_filter: s.dont_filter.as_ref().is_none_or(|d| d.value),
            task_fields,
            seeds: Vec::new(),
        })
    }

    fn check_url_template(&self, t: &Template, at: &At<String>) {
        let sample: serde_json::Map<String, serde_json::Value> = t
            .fields()
            .into_iter()
            .map(|f| (f.to_string(), serde_json::Value::from("1")))
            .collect();
        let rendered = t.render(&sample).unwrap_or_default();
        match url::Url::parse(&rendered) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
            _ => self.problem(
                &at.loc,
                format!("`{}` does not make an http(s) URL", at.value),
                "start with http:// or https:// and a host, e.g. \"https://bbs.example.com/list/{forum_id}/1\"",
            ),
        }
    }

    /// A number written directly (within `range`) or as a template.
    fn int_source(
        &self,
        at: &At<IntOrTemplate>,
        known: &Option<Vec<String>>,
        range: std::ops::RangeInclusive<i64>,
    ) -> Option<IntSource> {
        match &at.value {
            IntOrTemplate::Int(i) if !range.contains(i) => {
                self.problem(
                    &at.loc,
                    format!("{i} is out of range"),
                    format!(
                        "use a whole number from {} to {}",
                        range.start(),
                        range.end()
                    ),
                );
                None
            }
            IntOrTemplate::Int(i) => Some(IntSource::Fixed(*i)),
            IntOrTemplate::Template(s) => {
                let t = self.template(&At::new(s.clone(), at.loc.clone()))?;
                if t.fields().is_empty() {
                    self.problem(
                        &at.loc,
                        format!("\"{s}\" is a string, not a number"),
                        "write a number without quotes, or a \"{field}\" template",
                    );
                    return None;
                }
                if let Some(fields) = known {
                    for f in t.fields() {
                        if !fields.iter().any(|k| k == f) {
                            self.problem(
                                &at.loc,
                                format!("`{{{f}}}` is not a task field"),
                                format!("task_fields lists: {}", fields.join(", ")),
                            );
                        }
                    }
                }
                Some(IntSource::Template(t))
            }
        }
    }

    fn item(&self, item: &ItemFile) -> Option<ItemDef> {
        self.name(&item.name, "item");
        if item.fields.is_empty() {
            self.problem(
                &item.name.loc,
                format!("item `{}` has no fields", item.name.value),
                "add fields such as `title = \"h1::text\"`",
            );
        }
        let fields: Vec<Option<Field>> = item.fields.iter().map(|f| self.field(f)).collect();
        Some(ItemDef {
            name: item.name.value.clone(),
            fields: fields.into_iter().collect::<Option<_>>()?,
        })
    }

    fn field(&self, f: &FieldFile) -> Option<Field> {
        let given: Vec<&str> = [
            ("css", f.css.is_some()),
            ("json", f.json.is_some()),
            ("xpath", f.xpath.is_some()),
            ("jsonld", f.jsonld.is_some()),
            ("og", f.og.is_some()),
            ("page", f.page.is_some()),
            ("meta", f.meta.is_some()),
            ("const", f.constant.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, set)| set.then_some(k))
        .collect();
        let source = match given.as_slice() {
            [] => {
                self.problem(
                    &f.name.loc,
                    format!(
                        "field `{}` says nowhere to take its value from",
                        f.name.value
                    ),
                    "add one of css = \"…\", json = \"$.…\", page = \"url\", meta = \"…\" or const = …",
                );
                None
            }
            [_] => {
                if let Some(css) = &f.css {
                    self.selector(css).map(FieldSource::Css)
                } else if let Some(path) = &f.json {
                    self.jsonpath(path).map(FieldSource::Json)
                } else if let Some(xpath) = &f.xpath {
                    self.xpath(xpath).map(FieldSource::XPath)
                } else if let Some(path) = &f.jsonld {
                    self.jsonld_path(path).map(FieldSource::JsonLd)
                } else if let Some(og) = &f.og {
                    self.og(og).map(FieldSource::Og)
                } else if let Some(page) = &f.page {
                    match page.value.as_str() {
                        "url" => Some(FieldSource::Page(PageValue::Url)),
                        "status" => Some(FieldSource::Page(PageValue::Status)),
                        "depth" => Some(FieldSource::Page(PageValue::Depth)),
                        other => {
                            self.problem(
                                &page.loc,
                                format!("`{other}` is not a page value"),
                                "use \"url\", \"status\" or \"depth\"",
                            );
                            None
                        }
                    }
                } else if let Some(meta) = &f.meta {
                    Some(FieldSource::Meta(meta.value.clone()))
                } else {
                    f.constant
                        .as_ref()
                        .map(|c| FieldSource::Const(c.value.clone()))
                }
            }
            many => {
                self.problem(
                    &f.name.loc,
                    format!(
                        "field `{}` takes its value from both `{}` and `{}`",
                        f.name.value, many[0], many[1]
                    ),
                    "keep one source per field",
                );
                None
            }
        };
        let re = f.re.as_ref().map(|r| self.regex(r));
        let whitespace = match f.whitespace.as_ref().map(|w| w.value.as_str()) {
            None | Some("strip") => Some(Whitespace::Strip),
            Some("normalize") => Some(Whitespace::Normalize),
            Some("keep") => Some(Whitespace::Keep),
            Some(other) => {
                self.problem(
                    &f.whitespace.as_ref()?.loc,
                    format!("`{other}` is not a whitespace mode"),
                    "use \"strip\" (default), \"normalize\" or \"keep\"",
                );
                None
            }
        };
        let kind = match f.kind.as_ref().map(|k| k.value.as_str()) {
            None => Some(None),
            Some("string") => Some(Some(FieldType::String)),
            Some("int") => Some(Some(FieldType::Int)),
            Some("float") => Some(Some(FieldType::Float)),
            Some("bool") => Some(Some(FieldType::Bool)),
            Some(other) => {
                self.problem(
                    &f.kind.as_ref()?.loc,
                    format!("`{other}` is not a field type"),
                    "use \"string\", \"int\", \"float\" or \"bool\"",
                );
                None
            }
        };
        let all = f.all.as_ref().is_some_and(|a| a.value) || f.join.is_some();
        let checks = self.checks(f, kind.flatten(), all && f.join.is_none());
        Some(Field {
            name: f.name.value.clone(),
            source: source?,
            all,
            join: f.join.as_ref().map(|j| j.value.clone()),
            re: match re {
                Some(r) => Some(r?),
                None => None,
            },
            whitespace: whitespace?,
            kind: kind?,
            default: f.default.as_ref().map(|d| d.value.clone()),
            required: f.required.as_ref().is_some_and(|r| r.value),
            url: f.url.as_ref().is_some_and(|u| u.value),
            checks: checks?,
        })
    }

    /// A field's checks (`expect`, `non_empty`, `pattern`, `min`/`max`,
    /// `min_length`/`max_length`). `kind` and `list` say what the field
    /// makes, so a check that could never pass is refused here rather than
    /// dropping every item at crawl time.
    fn checks(&self, f: &FieldFile, kind: Option<FieldType>, list: bool) -> Option<FieldChecks> {
        let mut ok = true;
        let expect = match &f.expect {
            None => None,
            Some(e) => match ValueKind::NAMES.iter().find(|(n, _)| *n == e.value) {
                Some((_, k)) => Some(*k),
                None => {
                    self.problem(
                        &e.loc,
                        format!("`{}` is not a value type", e.value),
                        "use \"string\", \"integer\", \"number\", \"boolean\", \"list\" or \"object\"",
                    );
                    ok = false;
                    None
                }
            },
        };
        // What the field is sure to make, when `type`, `all` or its source
        // say (CSS selections and URLs are text until converted).
        let text_source = f.css.is_some() || f.page.as_ref().is_some_and(|p| p.value == "url");
        let made = if list {
            Some(ValueKind::List)
        } else {
            match kind {
                Some(FieldType::String) => Some(ValueKind::String),
                Some(FieldType::Int) => Some(ValueKind::Integer),
                Some(FieldType::Float) => Some(ValueKind::Number),
                Some(FieldType::Bool) => Some(ValueKind::Boolean),
                None if text_source => Some(ValueKind::String),
                None => None,
            }
        };
        if let (Some(want), Some(made), Some(at)) = (expect, made, &f.expect) {
            let fits = want == made || (want == ValueKind::Number && made == ValueKind::Integer);
            if !fits {
                self.problem(
                    &at.loc,
                    format!(
                        "field `{}` makes {} values, so `expect = \"{}\"` would drop every item",
                        f.name.value,
                        made.name(),
                        want.name()
                    ),
                    "make `expect` agree with `type` (and `all = true`, which makes a list)",
                );
                ok = false;
            }
        }
        let pattern = match &f.pattern {
            Some(p) => {
                let re = self.regex(p);
                ok &= re.is_some();
                re
            }
            None => None,
        };
        if let (Some(min), Some(max)) = (&f.min, &f.max) {
            if min.value > max.value {
                self.problem(
                    &max.loc,
                    format!("max {} is below min {}", max.value, min.value),
                    "no value could pass: swap them",
                );
                ok = false;
            }
        }
        if let (Some(min), Some(max)) = (&f.min_length, &f.max_length) {
            if min.value > max.value {
                self.problem(
                    &max.loc,
                    format!("max_length {} is below min_length {}", max.value, min.value),
                    "no value could pass: swap them",
                );
                ok = false;
            }
        }
        let bound = f.min.as_ref().or(f.max.as_ref());
        let textual = matches!(made, Some(ValueKind::String | ValueKind::Boolean))
            || matches!(
                expect,
                Some(ValueKind::String | ValueKind::Boolean | ValueKind::Object)
            );
        if let Some(at) = bound.filter(|_| textual) {
            self.problem(
                &at.loc,
                format!(
                    "min and max bound numbers, and field `{}` makes no numbers",
                    f.name.value
                ),
                "bound a text's length with min_length / max_length, or convert it with type = \"int\" or \"float\"",
            );
            ok = false;
        }
        let length = |n: &Option<At<i64>>| n.as_ref().map(|n| n.value as usize);
        ok.then(|| FieldChecks {
            expect,
            non_empty: f.non_empty.as_ref().is_some_and(|n| n.value),
            pattern,
            min: f.min.as_ref().map(|m| m.value),
            max: f.max.as_ref().map(|m| m.value),
            min_length: length(&f.min_length),
            max_length: length(&f.max_length),
        })
    }

    fn jsonld_path(&self, at: &At<String>) -> Option<super::JsonLdPath> {
        super::JsonLdPath::parse(&at.value)
            .map_err(|e| {
                self.problem(
                    &at.loc,
                    e,
                    "name a property of the page's JSON-LD object, e.g. \"headline\", \"author.name\", \"image.0.url\"; say which object with `jsonld_type` in the extract entry",
                )
            })
            .ok()
    }

    fn og(&self, at: &At<String>) -> Option<String> {
        let name = at.value.trim();
        let ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '-' | '.'));
        if !ok {
            self.problem(
                &at.loc,
                format!("`{}` is not a <meta> property name", at.value),
                "write the property without `og:` (\"title\", \"image\"), or with its own prefix (\"article:published_time\", \"twitter:title\")",
            );
            return None;
        }
        Some(crate::extract::structured::og_key(name))
    }

    /// `jsonld_type = "NewsArticle"` or an array of types.
    fn jsonld_types(&self, types: &[At<String>]) -> Option<Vec<String>> {
        let mut out = Vec::new();
        let mut ok = true;
        for t in types {
            // As pages write it: "schema:NewsArticle", "https://schema.org/NewsArticle".
            let name = t.value.trim();
            let name = name.rsplit(['/', ':', '#']).next().unwrap_or(name);
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                ok = false;
                self.problem(
                    &t.loc,
                    format!("`{}` is not a JSON-LD type name", t.value),
                    "write schema.org type names such as \"NewsArticle\", \"Product\" or [\"NewsArticle\", \"Article\"], without a prefix",
                );
            } else {
                out.push(name.to_string());
            }
        }
        ok.then_some(out)
    }

    fn rule(
        &self,
        r: &RuleFile,
        items: &Names<'_>,
        rules: &Names<'_>,
        item_files: &[ItemFile],
    ) -> Option<Rule> {
        let matches: Vec<Option<Regex>> = r.matches.iter().map(|m| self.regex(m)).collect();
        let extract: Vec<Option<Extract>> = r
            .extract
            .iter()
            .map(|e| {
                let Some(item) = &e.item else {
                    self.problem(&e.loc, "an extract entry names no item", "add `item = \"…\"` naming one of [items]");
                    return None;
                };
                let index = self.lookup(item, items, "item");
                let jsonld_types = self.jsonld_types(e.jsonld_type.as_deref().unwrap_or_default());
                let each = match (&e.each, &e.each_xpath) {
                    (Some(each), None) if each.value.starts_with('$') => {
                        Some(Each::Json(self.jsonpath(each)?))
                    }
                    (Some(each), None) => {
                        let sel = self.selector(each)?;
                        if *sel.target() != super::selector::Target::Elements {
                            self.problem(&each.loc, "`each` must select elements, not text or attributes", "remove the `::text` / `::attr(…)` part; fields take values from each element");
                            return None;
                        }
                        Some(Each::Css(sel))
                    }
                    (None, Some(each)) => {
                        let xpath = self.xpath(each)?;
                        if !xpath.selects_elements() {
                            self.problem(&each.loc, "`each` must select elements, not text, attributes or a value", "end the path at an element, e.g. `//div[@class='comment']`; fields take values from each element");
                            return None;
                        }
                        Some(Each::XPath(xpath))
                    }
                    (Some(_), Some(each)) => {
                        self.problem(&each.loc, "`each` has both `css` and `xpath`", "keep one of them");
                        return None;
                    }
                    (None, None) => None,
                };
                Some(Extract { item: index?, each, jsonld_types: jsonld_types? })
            })
            .collect();
        let follow: Vec<Option<Follow>> = r.follow.iter().map(|f| self.follow(f, rules)).collect();
        if r.extract.is_empty() && r.follow.is_empty() {
            if let Some(name) = &r.name {
                self.problem(
                    &name.loc,
                    format!(
                        "rule `{}` neither extracts nor follows anything",
                        name.value
                    ),
                    "add `[[rules.extract]]` or `[[rules.follow]]`, or remove the rule",
                );
            }
        }
        let json = self.reads_json(r, item_files);
        let revisit = match &r.revisit {
            Some(file) => Some(self.revisit(file, r, item_files)?),
            None => {
                let fields = r.change_fields.iter().flatten().take(1);
                for at in [&r.change, &r.emit].into_iter().flatten().chain(fields) {
                    self.problem(
                        &at.loc,
                        "`change`, `change_fields` and `emit` apply to pages a rule revisits, and this rule has no `revisit`",
                        "add `revisit = \"10m\"` (or { min = \"5m\", max = \"6h\" }), or remove the key",
                    );
                }
                None
            }
        };
        Some(Rule {
            revisit,
            name: r.name.as_ref()?.value.clone(),
            matches: matches.into_iter().collect::<Option<_>>()?,
            extract: extract.into_iter().collect::<Option<_>>()?,
            follow: follow.into_iter().collect::<Option<_>>()?,
            json: json?,
        })
    }

    /// A duration of `revisit`, at least [`MIN_REVISIT`].
    fn revisit_interval(&self, at: &At<String>) -> Option<std::time::Duration> {
        match settings::parse_duration(&at.value) {
            Ok(every) if every >= MIN_REVISIT => Some(every),
            Ok(_) => {
                self.problem(
                    &at.loc,
                    format!("`{}` is too short to revisit a page", at.value),
                    "the shortest is \"100ms\"; a list page is typically revisited every few minutes (\"5m\"), a feed every hour (\"1h\")",
                );
                None
            }
            Err(e) => {
                self.problem(
                    &at.loc,
                    e,
                    "write how often to fetch the page again, e.g. \"10m\", \"1h 30m\" or \"1d\"",
                );
                None
            }
        }
    }

    fn revisit(
        &self,
        file: &RevisitFile,
        r: &RuleFile,
        item_files: &[ItemFile],
    ) -> Option<RevisitRule> {
        let (min, max) = match file {
            RevisitFile::Every(at) => {
                let every = self.revisit_interval(at);
                (every, every)
            }
            RevisitFile::Adaptive { loc, min, max } => {
                let (Some(min), Some(max)) = (min, max) else {
                    self.problem(
                        loc,
                        "an adaptive revisit needs both `min` and `max`",
                        "write revisit = { min = \"5m\", max = \"6h\" }, or revisit = \"10m\" for a fixed interval",
                    );
                    return None;
                };
                let (lo, hi) = (self.revisit_interval(min), self.revisit_interval(max));
                match (lo, hi) {
                    (Some(l), Some(h)) if l > h => {
                        self.problem(
                            &max.loc,
                            format!("`max = \"{}\"` is shorter than `min = \"{}\"`", max.value, min.value),
                            "the interval moves between min (pages that change) and max (pages that do not): make max the longer",
                        );
                        (None, None)
                    }
                    _ => (lo, hi),
                }
            }
        };
        let change = match r.change.as_ref().map(|c| (c, c.value.as_str())) {
            None | Some((_, "extracted")) => Some(Change::Extracted),
            Some((_, "body")) => Some(Change::Body),
            Some((at, other)) => {
                self.problem(
                    &at.loc,
                    format!("`change = \"{other}\"` is not a way to compare pages"),
                    "use \"extracted\" (the items and links the rule extracts: the default) or \"body\" (the response body, byte for byte)",
                );
                None
            }
        };
        let emit_changed = match r.emit.as_ref().map(|e| (e, e.value.as_str())) {
            None | Some((_, "all")) => Some(false),
            Some((_, "changed")) => Some(true),
            Some((at, other)) => {
                self.problem(
                    &at.loc,
                    format!("`emit = \"{other}\"` is not an emit mode"),
                    "use \"all\" (push every visit's items: the default) or \"changed\" (only the items the last visit did not have)",
                );
                None
            }
        };
        // The fields named must be fields of the items this rule extracts.
        let known: Vec<&str> = r
            .extract
            .iter()
            .filter_map(|e| e.item.as_ref())
            .filter_map(|i| item_files.iter().find(|d| d.name.value == i.value))
            .flat_map(|d| d.fields.iter().map(|f| f.name.value.as_str()))
            .collect();
        let mut fields_ok = true;
        for f in r.change_fields.iter().flatten() {
            if !known.contains(&f.value.as_str()) {
                fields_ok = false;
                self.problem(
                    &f.loc,
                    format!(
                        "`{}` is not a field of the items this rule extracts",
                        f.value
                    ),
                    format!("name fields of its items: {}", known.join(", ")),
                );
            }
        }
        if !fields_ok {
            return None;
        }
        Some(RevisitRule {
            min: min?,
            max: max?,
            change_fields: r
                .change_fields
                .iter()
                .flatten()
                .map(|f| f.value.clone())
                .collect(),
            change: change?,
            emit_changed: emit_changed?,
        })
    }

    fn follow(&self, f: &FollowFile, rules: &Names<'_>) -> Option<Follow> {
        let flag = |b: &Option<At<bool>>| b.as_ref().is_some_and(|b| b.value);
        let ways = usize::from(f.css.is_some())
            + usize::from(f.xpath.is_some())
            + usize::from(f.re.is_some())
            + usize::from(flag(&f.sitemap))
            + usize::from(flag(&f.feed))
            + usize::from(f.json.is_some())
            + usize::from(f.url.is_some());
        let links = match ways {
            1 => match (&f.css, &f.re, &f.json, &f.url) {
                _ if f.xpath.is_some() => f
                    .xpath
                    .as_ref()
                    .and_then(|x| self.xpath(x))
                    .map(LinkSource::XPath),
                (Some(css), ..) => self.selector(css).map(LinkSource::Css),
                (_, Some(re), ..) => self.regex(re).map(LinkSource::Re),
                (_, _, Some(path), _) => self.jsonpath(path).map(LinkSource::Json),
                (.., Some(url)) => self.follow_url(url).map(LinkSource::Template),
                _ if flag(&f.sitemap) => Some(LinkSource::Sitemap),
                _ => Some(LinkSource::Feed),
            },
            0 => {
                self.problem(
                    &f.loc,
                    "a follow entry has no `css`, `re`, `json`, `url`, `sitemap` or `feed` to find links with",
                    "add e.g. `css = \"a.next::attr(href)\"`, `json = \"$.next\"`, or `sitemap = true` for a sitemap's pages",
                );
                None
            }
            _ => {
                self.problem(
                    &f.loc,
                    "a follow entry has more than one of `css`, `re`, `json`, `url`, `sitemap` and `feed`",
                    "keep one way of finding links per follow entry",
                );
                None
            }
        };
        let api = self.json_follow(f);
        let allow: Vec<Option<Regex>> = f.allow.iter().map(|a| self.regex(a)).collect();
        let deny: Vec<Option<Regex>> = f.deny.iter().map(|a| self.regex(a)).collect();
        let rule = f.rule.as_ref().map(|r| self.lookup(r, rules, "rule"));
        if let (Some(_), Some(to)) = (&f.rule, &f.to_spider) {
            self.problem(
                &to.loc,
                "a follow entry has both `rule` and `to_spider`",
                format!(
                    "remove `rule`: spider `{}` handles the pages with its [start] rule",
                    to.value
                ),
            );
        }
        let to_spider = match &f.to_spider {
            Some(to) => Some(self.handoff(to, &f.meta)?),
            None => None,
        };
        if let (Some(to), Some(api)) = (&f.to_spider, &api) {
            if !api.sending.is_plain() {
                self.problem(
                    &to.loc,
                    "a follow entry with `to_spider` sends plain GET requests: the other spider gets a URL and context, no method, body or headers",
                    "remove `method`, `body`, `form` and `headers`, or follow within this spider with `rule`",
                );
                return None;
            }
        }
        let depth_limit = match &f.depth_limit {
            Some(d) if d.value < 0 || d.value > u32::MAX as i64 => {
                self.problem(
                    &d.loc,
                    format!("{} is out of range", d.value),
                    "use a depth of 0 or more",
                );
                return None;
            }
            Some(d) => Some(d.value as u32),
            None => None,
        };
        let meta = if f.meta.iter().any(|m| m.value == "*") {
            MetaCarry::All
        } else {
            MetaCarry::Names(f.meta.iter().map(|m| m.value.clone()).collect())
        };
        let paginate = match &f.paginate {
            Some(p) => {
                let page = match &p.page {
                    Some(page) => self.regex(page).filter(|re| {
                        let ok = re.captures_len() > 1;
                        if !ok {
                            self.problem(
                                &page.loc,
                                "the page regex has no capture group",
                                "capture the page number, e.g. '/list/\\d+/(\\d+)'",
                            );
                        }
                        ok
                    }),
                    None => {
                        self.problem(
                            &p.loc,
                            "`paginate` has no `page` regex",
                            "add `page = '…(\\d+)'` capturing the page number of a link",
                        );
                        None
                    }
                };
                let max = match &p.max {
                    Some(m) => self.int_source(m, &None, 1..=i64::MAX),
                    None => {
                        self.problem(
                            &p.loc,
                            "`paginate` has no `max`",
                            "add `max = 10` or `max = \"{max_page}\"` (a context field)",
                        );
                        None
                    }
                };
                Some(Paginate {
                    page: page?,
                    max: max?,
                })
            }
            None => None,
        };
        Some(Follow {
            links: links?,
            allow: allow.into_iter().collect::<Option<_>>()?,
            deny: deny.into_iter().collect::<Option<_>>()?,
            rule: match rule {
                Some(r) => Some(r?),
                None => None,
            },
            to_spider,
            priority: f.priority.as_ref().map_or(0, |p| p.value),
            dont_filter: f.dont_filter.as_ref().is_some_and(|d| d.value),
            depth_limit,
            meta,
            paginate,
            each: api.as_ref()?.each.clone(),
            counter: api.as_ref()?.counter.clone(),
            until: api.as_ref()?.until.clone(),
            sending: api?.sending,
        })
    }

    /// The index of the spider a `to_spider` entry hands its links to, read
    /// from `<name>.toml` beside this file: its start key, the key's type,
    /// its wake channel, and the task fields it requires (which `meta` must
    /// carry, or it would refuse every task).
    fn handoff(&self, to: &At<String>, meta: &[At<String>]) -> Option<usize> {
        if !self.name(to, "spider") {
            return None;
        }
        if let Some(i) = self
            .handoffs
            .borrow()
            .iter()
            .position(|(h, _)| h.spider == to.value)
        {
            return Some(i);
        }
        let target = if self.resolve_handoffs {
            self.target_spider(to)?
        } else {
            // Only this spider's keys are wanted; its targets are not read.
            Handoff {
                spider: to.value.clone(),
                start_key: String::new(),
                kind: StartKind::List,
                wake: String::new(),
                task_fields: Vec::new(),
            }
        };
        let carried = |f: &String| meta.iter().any(|m| m.value == *f || m.value == "*");
        let missing: Vec<&String> = target.task_fields.iter().filter(|f| !carried(f)).collect();
        if !missing.is_empty() {
            let names: Vec<String> = missing.iter().map(|f| format!("\"{f}\"")).collect();
            self.problem(
                &to.loc,
                format!(
                    "spider `{}` requires the task fields {} (its `task_fields`), which this entry does not pass",
                    to.value,
                    names.join(", ")
                ),
                format!("carry them: meta = [{}]", names.join(", ")),
            );
            return None;
        }
        let mut handoffs = self.handoffs.borrow_mut();
        handoffs.push((target, to.loc.clone()));
        Some(handoffs.len() - 1)
    }

    /// Reads the spider `to` names from beside this file.
    fn target_spider(&self, to: &At<String>) -> Option<Handoff> {
        let path = self.path.with_file_name(format!("{}.toml", to.value));
        let fail = |why: String| {
            self.problem(
                &to.loc,
                format!(
                    "spider `{}` is read from {} for its start key, but {why}",
                    to.value,
                    path.display()
                ),
                format!(
                    "put the `{}` spider file beside this one (and run `crawlworker check` on it)",
                    to.value
                ),
            );
            None
        };
        if path == self.path {
            return fail("that is this spider: follow within it with `rule`".into());
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => return fail(format!("it cannot be read ({e})")),
        };
        let spider = match compile_with(&path, &text, false) {
            Ok(spider) => spider,
            Err(e) => {
                let first = e
                    .diagnostics()
                    .iter()
                    .find(|d| !d.warning)
                    .map(|d| d.to_string());
                return fail(format!(
                    "it has problems: {}",
                    first.unwrap_or_else(|| e.to_string())
                ));
            }
        };
        if spider.name != to.value {
            return fail(format!("the spider there is named `{}`", spider.name));
        }
        Some(Handoff {
            spider: spider.name,
            start_key: spider.keys.start_urls,
            kind: spider.start.kind,
            wake: spider.keys.wake,
            task_fields: spider.start.task_fields.unwrap_or_default(),
        })
    }

    /// In cluster mode a page's commit writes the other spider's start key
    /// too, so it must be in this spider's slot.
    fn check_handoff_slots(&self, keys: &Keys, handoffs: &[(Handoff, Loc)]) {
        use crate::frontier::connection::hash_tag;
        let tag = hash_tag(&keys.requests);
        if tag == keys.requests {
            return; // plain keys: a single Redis, any key goes
        }
        for (h, loc) in handoffs {
            if hash_tag(&h.start_key) != tag {
                self.problem(
                    loc,
                    format!(
                        "on a Redis Cluster this spider's keys are in the slot of {{{tag}}} but `{}`'s start key `{}` is not, so one commit could not write both",
                        h.spider, h.start_key
                    ),
                    format!("give both spiders the same tag: `[keys] mode = \"cluster\"` and `hash_tag = \"{tag}\"` in each"),
                );
            }
        }
    }

    /// Rules no request can ever reach.
    fn check_reachable(&self, file: &SpiderFile, g: &Graph) {
        let shadows = Shadows::new(file);
        for (i, rule) in file.rules.iter().enumerate() {
            let Some(name) = &rule.name else { continue };
            if g.targeted[i] {
                continue;
            }
            if rule.matches.is_empty() {
                self.problem(
                    &name.loc,
                    format!("rule `{}` is never used: it has no `match` and nothing names it", name.value),
                    "add `match = '…'` (a URL regex), or name it with `rule = \"…\"` in a follow entry or in [start]",
                );
                continue;
            }
            let earlier = shadows.earlier(i, rule).map(|e| &file.rules[e]);
            if let Some(e) = earlier {
                let other = e.name.as_ref().map_or("", |n| n.value.as_str());
                self.problem(
                    &name.loc,
                    format!("rule `{}` is never used: rule `{other}` above matches the same URLs first", name.value),
                    "the first matching rule wins: make one pattern more specific, or name this rule in a follow entry",
                );
            }
        }
    }

    /// Context fields read where no request carries them.
    fn check_context(&self, file: &SpiderFile, g: &Graph) {
        for (src, rule) in file.rules.iter().enumerate() {
            let rule_name = rule.name.as_ref().map_or("", |n| n.value.as_str());
            if let Known::Set(have) = &g.known[src] {
                // A JSON entry passes on fields of the JSON too.
                for f in rule.follow.iter().filter(|f| !reads_json_fields(f)) {
                    for m in f.meta.iter().filter(|m| m.value != "*") {
                        if !have.contains(&m.value) {
                            self.problem(
                                &m.loc,
                                format!("rule `{rule_name}` passes on `{}`, but no request reaching `{rule_name}` carries it", m.value),
                                context_hint(have),
                            );
                        }
                    }
                    if let Some(IntOrTemplate::Template(t)) = f
                        .paginate
                        .as_ref()
                        .and_then(|p| p.max.as_ref())
                        .map(|m| &m.value)
                    {
                        if let Ok(t) = Template::parse(t) {
                            for field in t.fields().into_iter().filter(|x| !have.contains(*x)) {
                                let loc = f
                                    .paginate
                                    .as_ref()
                                    .and_then(|p| p.max.as_ref())
                                    .map(|m| m.loc.clone())
                                    .unwrap_or_default();
                                self.problem(&loc, format!("`paginate.max` reads `{field}`, but no request reaching `{rule_name}` carries it"), context_hint(have));
                            }
                        }
                    }
                }
                for e in &rule.extract {
                    let item = e
                        .item
                        .as_ref()
                        .and_then(|i| file.items.iter().find(|it| it.name.value == i.value));
                    for field in item.map(|i| i.fields.as_slice()).unwrap_or_default() {
                        if let Some(meta) = &field.meta {
                            if !have.contains(&meta.value) {
                                self.problem(
                                    &meta.loc,
                                    format!("item field `{}` reads `{}`, but no request reaching rule `{rule_name}` carries it", field.name.value, meta.value),
                                    format!("pass it on with `meta = [\"{}\"]` in the follow entries that lead to `{rule_name}`; {}", meta.value, context_hint(have)),
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

fn context_hint(have: &BTreeSet<String>) -> String {
    if have.is_empty() {
        "requests reaching it carry no context fields".to_string()
    } else {
        format!(
            "requests reaching it carry: {}",
            have.iter().cloned().collect::<Vec<_>>().join(", ")
        )
    }
}

/// Whether a follow entry reads its `meta` names (and templates) from the
/// page's JSON as well as from the request's context.
fn reads_json_fields(f: &FollowFile) -> bool {
    f.url.is_some() || f.json.is_some()
}

fn is_http_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_uppercase() || b == b'-')
}

/// What is known about the context of the requests reaching a rule.
#[derive(Debug, Clone, PartialEq)]
enum Known {
    /// Could carry anything (tasks are not declared, or reached by matching).
    Any,
    Set(BTreeSet<String>),
}

impl Known {
    fn meet(self, other: Known) -> Known {
        match (self, other) {
            (Known::Any, k) | (k, Known::Any) => k,
            (Known::Set(a), Known::Set(b)) => Known::Set(a.intersection(&b).cloned().collect()),
        }
    }
}

/// The names of a spider's rules or items in file order, with an index:
/// every reference is looked up in constant time.
struct Names<'f> {
    list: Vec<&'f str>,
    /// Each name's first position.
    first: std::collections::HashMap<&'f str, usize>,
}

impl<'f> Names<'f> {
    fn new(list: Vec<&'f str>) -> Names<'f> {
        let mut first = std::collections::HashMap::with_capacity(list.len());
        for (i, n) in list.iter().enumerate() {
            first.entry(*n).or_insert(i);
        }
        Names { list, first }
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.first.get(name).copied()
    }
}

impl<'f> std::ops::Deref for Names<'f> {
    type Target = [&'f str];
    fn deref(&self) -> &[&'f str] {
        &self.list
    }
}

/// Which earlier rule matches every URL a rule matches, found through an
/// index of the rules by pattern instead of comparing every pair.
struct Shadows<'f> {
    /// Each `match` pattern, with the rules that have it, in file order.
    by_pattern: std::collections::HashMap<&'f str, Vec<usize>>,
    /// Each rule's patterns.
    sets: Vec<std::collections::HashSet<&'f str>>,
}

impl<'f> Shadows<'f> {
    fn new(file: &'f SpiderFile) -> Shadows<'f> {
        let mut by_pattern: std::collections::HashMap<&str, Vec<usize>> = Default::default();
        let mut sets = Vec::with_capacity(file.rules.len());
        for (i, rule) in file.rules.iter().enumerate() {
            let set: std::collections::HashSet<&str> =
                rule.matches.iter().map(|m| m.value.as_str()).collect();
            for m in &set {
                by_pattern.entry(m).or_default().push(i);
            }
            sets.push(set);
        }
        Shadows { by_pattern, sets }
    }

    /// The first rule before `i` whose patterns include all of `rule`'s:
    /// only rules sharing its rarest pattern are candidates.
    fn earlier(&self, i: usize, rule: &RuleFile) -> Option<usize> {
        let rarest = rule
            .matches
            .iter()
            .filter_map(|m| self.by_pattern.get(m.value.as_str()))
            .min_by_key(|rules| rules.len())?;
        rarest
            .iter()
            .take_while(|&&e| e < i)
            .copied()
            .find(|&e| self.sets[i].is_subset(&self.sets[e]))
    }
}

/// The rule graph: which rules requests are sent to, and what context they
/// carry there (a greatest fixed point over the follow edges).
struct Graph {
    targeted: Vec<bool>,
    known: Vec<Known>,
}

impl Graph {
    fn new(file: &SpiderFile, rules: &Names<'_>, start: Option<&Start>) -> Graph {
        let n = file.rules.len();
        let index = |at: &Option<At<String>>| at.as_ref().and_then(|a| rules.position(&a.value));
        let start_rule = index(&file.start.rule);
        let mut targeted = vec![false; n];
        if let Some(s) = start_rule {
            targeted[s] = true;
        }
        // (from rule, to rule, carried names or all, whether the names
        // are read from the JSON as well)
        let mut edges: Vec<(usize, usize, Option<BTreeSet<String>>, bool)> = Vec::new();
        let mut by_matching = file.start.rule.is_none();
        for (src, rule) in file.rules.iter().enumerate() {
            for f in &rule.follow {
                let carry = (!f.meta.iter().any(|m| m.value == "*")).then(|| {
                    f.meta
                        .iter()
                        .chain(&f.counter)
                        .map(|m| m.value.clone())
                        .collect()
                });
                match index(&f.rule) {
                    Some(dst) => {
                        targeted[dst] = true;
                        edges.push((src, dst, carry, reads_json_fields(f)));
                    }
                    None => by_matching |= f.rule.is_none(),
                }
            }
        }
        let task = match start.and_then(|s| s.task_fields.as_ref()) {
            Some(f) => Known::Set(f.iter().cloned().collect()),
            None => Known::Any,
        };
        // Each rule's incoming and outgoing edges, so that a rule is
        // recomputed only when a rule leading to it changed (a worklist):
        // no pass over all rules per change, nothing quadratic.
        let mut incoming: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut outgoing: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (e, (src, dst, _, _)) in edges.iter().enumerate() {
            incoming[*dst].push(e);
            outgoing[*src].push(*dst);
        }
        let mut known = vec![Known::Any; n];
        let mut queued = vec![true; n];
        let mut work: std::collections::VecDeque<usize> = (0..n).collect();
        while let Some(dst) = work.pop_front() {
            queued[dst] = false;
            {
                let open = by_matching && !file.rules[dst].matches.is_empty();
                let mut k: Option<Known> = open.then_some(Known::Any);
                if start_rule == Some(dst) {
                    k = Some(k.map_or(task.clone(), |k| k.meet(task.clone())));
                }
                for (src, _, carry, json) in incoming[dst].iter().map(|&e| &edges[e]) {
                    let provided = match (carry, &known[*src]) {
                        // The JSON may hold any of the names.
                        (Some(names), _) if *json => Known::Set(names.clone()),
                        (None, from) => from.clone(),
                        (Some(names), Known::Any) => Known::Set(names.clone()),
                        (Some(names), Known::Set(have)) => {
                            Known::Set(names.intersection(have).cloned().collect())
                        }
                    };
                    k = Some(k.map_or(provided.clone(), |k| k.meet(provided)));
                }
                // A request reached by URL matching may carry anything.
                let next = if open {
                    Known::Any
                } else {
                    k.unwrap_or(Known::Any)
                };
                if next != known[dst] {
                    known[dst] = next;
                    for &to in &outgoing[dst] {
                        if !queued[to] {
                            queued[to] = true;
                            work.push_back(to);
                        }
                    }
                }
            }
        }
        Graph { targeted, known }
    }
}
