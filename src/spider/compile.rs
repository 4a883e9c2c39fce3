//! Turns a [`SpiderFile`] into a [`Spider`]: builds regexes, selectors and
//! templates, resolves names to indices and checks the spider as a whole
//! (rules that can never run, follow targets that do not exist, context
//! fields that no request carries). Every problem is recorded; nothing stops
//! at the first.
//!
//! One [`Compiler`] walks the file; its steps live beside the part of the
//! file they read, in the file's order:
//!
//! - [`values`]: the values every section writes (regexes, CSS, XPath,
//!   templates, names, domains, numbers or templates);
//! - [`start`]: `[start]`, its sitemaps and feeds;
//! - [`keys`]: `[keys]` and `[start] key`, the spider's Redis key names;
//! - [`items`] and [`field_checks`]: `[items]`, each field's source and
//!   the checks of its value;
//! - [`rules`], [`revisit`] and [`follow`]: `[[rules]]`, their extract
//!   entries, revisits and follow entries; [`json`] the JSON API parts of
//!   them, [`rewrite`] their links' canonical forms, [`handoff`] the
//!   spiders `to_spider` hands links to;
//! - [`scrapy_redis`]: `[scrapy_redis]`, the rules requests a
//!   scrapy-redis crawl queued are handled by;
//! - [`graph`]: the spider as a whole (rules nothing reaches, context
//!   fields no request carries).
//!
//! The file's `[settings]` are read and checked by [`crate::settings`] as
//! the file is read; here they are only layered over the defaults.

mod field_checks;
mod follow;
mod graph;
mod handoff;
mod items;
mod json;
mod keys;
mod render;
mod revisit;
mod rewrite;
mod rules;
mod scrapy_redis;
pub(crate) mod session;
mod start;
mod values;

use std::cell::{Cell, RefCell};
use std::path::Path;

use super::file::{read_spider, SpiderFile};
use super::{Handoff, Spider};
use crate::reader::diagnostic::{did_you_mean, syntax_error, LoadError};
use crate::reader::{At, Loc, Reader};
use crate::settings;
use graph::Graph;

/// Parses and validates spider text; `path` names it in messages, and the
/// spiders its `to_spider` entries name are read from beside it.
pub(crate) fn compile(path: &Path, text: &str) -> Result<Spider, LoadError> {
    let mut spider = compile_with(path, text, true)?;
    spider.relations = handoff::pipeline(&spider);
    Ok(spider)
}

/// As [`compile`], with only the spider's own hand-off relations; a spider
/// read only for its keys (a `to_spider` target) does not read its own
/// targets in turn (`resolve_handoffs` false), so a pair handing work both
/// ways does not recurse.
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
        patterns: Cell::new(0),
        regex_memory: Cell::new(0),
    }
    .spider(path, &file);
    let problems = reader.into_problems();
    match spider {
        Some(mut spider) if problems.iter().all(|d| d.warning) => {
            spider.warnings = problems;
            if resolve_handoffs {
                spider.relations = handoff::own_relations(&spider);
            }
            Ok(spider)
        }
        _ => Err(LoadError::Invalid(problems)),
    }
}

struct Compiler<'r> {
    r: &'r Reader<'r>,
    path: &'r Path,
    resolve_handoffs: bool,
    /// The spiders `to_spider` entries name, each once, with where the
    /// first entry naming it is.
    handoffs: RefCell<Vec<(Handoff, Loc)>>,
    /// Regexes compiled so far, against [`super::limits::MAX_PATTERNS`].
    patterns: Cell<usize>,
    /// The memory they take, against [`super::limits::MAX_REGEX_MEMORY`].
    regex_memory: Cell<usize>,
}

impl Compiler<'_> {
    fn problem(&self, loc: &Loc, message: impl Into<String>, hint: impl Into<String>) {
        self.r.problem(loc, message, Some(hint.into()));
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

    /// The whole file, section by section, then the checks of the spider
    /// as a whole; `None` when anything was a problem.
    fn spider(&self, path: &Path, file: &SpiderFile) -> Option<Spider> {
        let name = file.name.as_ref().filter(|n| self.name(n, "spider"));
        let allowed_domains = file
            .allowed_domains
            .iter()
            .filter_map(|d| self.domain(d))
            .collect();
        let deny: Vec<regex::Regex> = file.deny.iter().filter_map(|d| self.regex(d)).collect();

        let item_names = Names::new(file.items.iter().map(|i| i.name.value.as_str()).collect());
        let items: Vec<Option<super::ItemDef>> = file.items.iter().map(|i| self.item(i)).collect();

        let rule_names = self.rule_names(file);
        let rules: Vec<Option<super::Rule>> = file
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
        if let Some((keys, shards)) = keys.as_ref().filter(|_| self.resolve_handoffs) {
            self.check_handoff_slots(keys, shards.len(), &handoffs);
        }
        let (keys, shards) = keys.unzip();
        let scrapy_redis = self.scrapy_redis(file.scrapy_redis.as_ref(), &rule_names);
        let session = self.session(file.session.as_ref());
        let graph = Graph::new(file, &rule_names, start.as_ref());
        self.check_reachable(file, &graph);
        self.check_context(file, &graph);

        let sink = self.sink(file.items_sink.as_ref());
        let type_field = self.type_field(file);
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
            settings_changed: Vec::new(),
            overrides,
            start,
            keys: keys?,
            shards: shards?,
            handoffs: handoffs.into_iter().map(|(h, _)| h).collect(),
            relations: Vec::new(),
            warnings: Vec::new(),
            items,
            sink: sink?,
            type_field: type_field?,
            rules,
            scrapy_redis: scrapy_redis?,
            session: session?.map(std::sync::Arc::new),
        })
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
