//! A tolerant reader over the parsed TOML document: it hands out typed
//! values with their source position and, instead of stopping at the first
//! problem, records every one (wrong type, missing field, unknown key with a
//! "did you mean") so `crawlworker check` reports them all at once.
//!
//! The keys a table accepts are exactly the keys its reader asks for, so the
//! list of known keys lives in one place: the code that reads them.
//!
//! Shared by every TOML file crawlworker reads: spider files
//! ([`crate::spider`]) and the worker configuration ([`crate::config`]),
//! whose `[settings]` tables [`crate::settings`] reads through it.
//! [`diagnostic`] turns what it records into messages with file,
//! line:column, field and a fix.

pub mod diagnostic;

use std::cell::RefCell;
use std::ops::Range;
use std::path::Path;

use toml_edit::{Item, TableLike, Value};

use diagnostic::{did_you_mean, Diagnostic, SourceMap};

/// Most entries one array or table of a file may have: a spider or
/// configuration file is written by hand, and every entry costs memory and
/// checking time.
pub const MAX_ENTRIES: usize = 10_000;

/// Where a value was written: its byte span and field path.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Loc {
    pub span: Range<usize>,
    pub path: String,
}

/// A value read from the file, with where it was written.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct At<T> {
    pub value: T,
    pub loc: Loc,
}

impl<T> At<T> {
    pub fn new(value: T, loc: Loc) -> Self {
        At { value, loc }
    }
}

/// Collects the problems of one file.
pub(crate) struct Reader<'s> {
    map: SourceMap<'s>,
    problems: RefCell<Vec<Diagnostic>>,
}

impl<'s> Reader<'s> {
    pub(crate) fn new(file: &'s Path, text: &'s str) -> Self {
        Reader {
            map: SourceMap::new(file, text),
            problems: RefCell::new(Vec::new()),
        }
    }

    pub(crate) fn problem(&self, loc: &Loc, message: impl Into<String>, hint: Option<String>) {
        let d = self
            .map
            .diagnostic(&loc.span, &loc.path, message.into(), hint);
        self.problems.borrow_mut().push(d);
    }

    /// Records something worth fixing that does not stop the file loading.
    pub(crate) fn warning(&self, loc: &Loc, message: impl Into<String>, hint: Option<String>) {
        let mut d = self
            .map
            .diagnostic(&loc.span, &loc.path, message.into(), hint);
        d.warning = true;
        self.problems.borrow_mut().push(d);
    }

    /// Every problem and warning, in file order.
    pub(crate) fn into_problems(self) -> Vec<Diagnostic> {
        let mut problems = self.problems.into_inner();
        problems.sort_by_key(|d| (d.line, d.column));
        problems
    }

    pub(crate) fn root<'d>(&'d self, table: &'d dyn TableLike) -> TableReader<'d> {
        TableReader {
            reader: self,
            table,
            loc: Loc::default(),
            asked: RefCell::new(Vec::new()),
            open: std::cell::Cell::new(false),
        }
    }
}

/// A TOML node: a full item, a value inside an array, or a table inside an
/// array of tables.
#[derive(Clone, Copy)]
pub(crate) enum Node<'d> {
    Item(&'d Item),
    Value(&'d Value),
    Table(&'d toml_edit::Table),
}

impl<'d> Node<'d> {
    fn span(&self) -> Option<Range<usize>> {
        match self {
            Node::Item(i) => i.span(),
            Node::Value(v) => v.span(),
            Node::Table(t) => t.span(),
        }
    }

    fn value(&self) -> Option<&'d Value> {
        match self {
            Node::Item(i) => i.as_value(),
            Node::Value(v) => Some(v),
            Node::Table(_) => None,
        }
    }

    pub(crate) fn type_name(&self) -> &'static str {
        match (self, self.value()) {
            (_, Some(Value::String(_))) => "a string",
            (_, Some(Value::Integer(_))) => "an integer",
            (_, Some(Value::Float(_))) => "a float",
            (_, Some(Value::Boolean(_))) => "a boolean",
            (_, Some(Value::Datetime(_))) => "a date-time",
            (_, Some(Value::Array(_))) => "an array",
            (_, Some(Value::InlineTable(_))) => "a table",
            (Node::Item(Item::ArrayOfTables(_)), None) => "an array of tables",
            _ => "a table",
        }
    }

    pub(crate) fn as_str(&self) -> Option<&'d str> {
        self.value().and_then(Value::as_str)
    }

    pub(crate) fn as_integer(&self) -> Option<i64> {
        self.value().and_then(Value::as_integer)
    }

    pub(crate) fn as_float(&self) -> Option<f64> {
        self.value().and_then(Value::as_float)
    }

    pub(crate) fn as_bool(&self) -> Option<bool> {
        self.value().and_then(Value::as_bool)
    }

    pub(crate) fn as_table_like(&self) -> Option<&'d dyn TableLike> {
        match self {
            Node::Item(i) => i.as_table_like(),
            Node::Value(v) => v.as_inline_table().map(|t| t as &dyn TableLike),
            Node::Table(t) => Some(*t as &dyn TableLike),
        }
    }

    /// The elements of an array or array of tables.
    fn elements(&self) -> Option<Vec<Node<'d>>> {
        match self {
            Node::Item(Item::ArrayOfTables(a)) => Some(a.iter().map(Node::Table).collect()),
            _ => self
                .value()
                .and_then(Value::as_array)
                .map(|a| a.iter().map(Node::Value).collect()),
        }
    }

    /// The node as a plain JSON value (for defaults and constants).
    pub(crate) fn to_json(self) -> Option<serde_json::Value> {
        use serde_json::Value as J;
        if let Some(t) = self.as_table_like() {
            let mut map = serde_json::Map::new();
            for (k, item) in t.iter() {
                map.insert(k.to_string(), Node::Item(item).to_json()?);
            }
            return Some(J::Object(map));
        }
        if let Some(elements) = self.elements() {
            return elements
                .into_iter()
                .map(Node::to_json)
                .collect::<Option<Vec<_>>>()
                .map(J::Array);
        }
        Some(match self.value()? {
            Value::String(s) => J::String(s.value().clone()),
            Value::Integer(i) => J::from(*i.value()),
            Value::Float(f) => serde_json::Number::from_f64(*f.value()).map_or(J::Null, J::Number),
            Value::Boolean(b) => J::Bool(*b.value()),
            Value::Datetime(d) => J::String(d.value().to_string()),
            Value::Array(_) | Value::InlineTable(_) => return None,
        })
    }
}

/// Reads the keys of one table. Every key asked for is a key the table
/// knows; `finish` reports the keys nobody asked for.
pub(crate) struct TableReader<'d> {
    reader: &'d Reader<'d>,
    table: &'d dyn TableLike,
    pub(crate) loc: Loc,
    asked: RefCell<Vec<&'static str>>,
    /// Set when the keys are the user's own names: every key is known.
    open: std::cell::Cell<bool>,
}

impl<'d> TableReader<'d> {
    pub(crate) fn reader(&self) -> &'d Reader<'d> {
        self.reader
    }

    fn child_path(&self, key: &str) -> String {
        if self.loc.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.loc.path)
        }
    }

    /// The node under `key` and where it is, marking the key as known.
    pub(crate) fn get(&self, key: &'static str) -> Option<(Node<'d>, Loc)> {
        self.asked.borrow_mut().push(key);
        let (k, item) = self.table.get_key_value(key)?;
        let node = Node::Item(item);
        let span = node
            .span()
            .or_else(|| k.span())
            .unwrap_or_else(|| self.loc.span.clone());
        Some((
            node,
            Loc {
                span,
                path: self.child_path(key),
            },
        ))
    }

    fn wrong_type(&self, loc: &Loc, expected: &str, node: Node<'_>) {
        let example = match expected {
            "a string" => "\"…\"",
            "an integer" => "16",
            "a number" => "1.5",
            "true or false" => "true",
            "a table" => "{ key = \"value\" }",
            "an array of strings" => "[\"a\", \"b\"]",
            _ => "…",
        };
        let key = loc.path.rsplit(['.', '[']).next().unwrap_or("");
        let hint = if key.ends_with(']') || key.is_empty() {
            format!("write {expected} here, e.g. {example}")
        } else {
            format!("write {expected} here, e.g. `{key} = {example}`")
        };
        self.reader.problem(
            loc,
            format!("expected {expected}, found {}", node.type_name()),
            Some(hint),
        );
    }

    pub(crate) fn str(&self, key: &'static str) -> Option<At<String>> {
        let (node, loc) = self.get(key)?;
        match node.as_str() {
            Some(s) => Some(At::new(s.to_string(), loc)),
            None => {
                self.wrong_type(&loc, "a string", node);
                None
            }
        }
    }

    pub(crate) fn bool(&self, key: &'static str) -> Option<At<bool>> {
        let (node, loc) = self.get(key)?;
        match node.as_bool() {
            Some(b) => Some(At::new(b, loc)),
            None => {
                self.wrong_type(&loc, "true or false", node);
                None
            }
        }
    }

    pub(crate) fn int(&self, key: &'static str) -> Option<At<i64>> {
        let (node, loc) = self.get(key)?;
        match node.as_integer() {
            Some(i) => Some(At::new(i, loc)),
            None => {
                self.wrong_type(&loc, "an integer", node);
                None
            }
        }
    }

    /// A whole number that must fit `lo..=hi`.
    pub(crate) fn int_in(&self, key: &'static str, lo: i64, hi: i64) -> Option<At<i64>> {
        let v = self.int(key)?;
        if v.value < lo || v.value > hi {
            self.reader.problem(
                &v.loc,
                format!("{} is out of range", v.value),
                Some(format!("use a whole number from {lo} to {hi}")),
            );
            return None;
        }
        Some(v)
    }

    /// A number; integers are accepted where a float is expected.
    pub(crate) fn float(&self, key: &'static str) -> Option<At<f64>> {
        let (node, loc) = self.get(key)?;
        match node
            .as_float()
            .or_else(|| node.as_integer().map(|i| i as f64))
        {
            Some(f) => Some(At::new(f, loc)),
            None => {
                self.wrong_type(&loc, "a number", node);
                None
            }
        }
    }

    /// A list of strings; a single string is accepted as a list of one.
    pub(crate) fn str_list(&self, key: &'static str) -> Option<Vec<At<String>>> {
        let (node, loc) = self.get(key)?;
        if let Some(s) = node.as_str() {
            return Some(vec![At::new(s.to_string(), loc)]);
        }
        let Some(elements) = node.elements() else {
            self.wrong_type(&loc, "an array of strings", node);
            return None;
        };
        if self.too_many(&loc, elements.len()) {
            return None;
        }
        let mut out = Vec::new();
        for (i, e) in elements.into_iter().enumerate() {
            let eloc = Loc {
                span: e.span().unwrap_or_else(|| loc.span.clone()),
                path: format!("{}[{i}]", loc.path),
            };
            match e.as_str() {
                Some(s) => out.push(At::new(s.to_string(), eloc)),
                None => self.wrong_type(&eloc, "a string", e),
            }
        }
        Some(out)
    }

    /// The node under `key` as raw TOML, for values of several shapes.
    pub(crate) fn node(&self, key: &'static str) -> Option<(Node<'d>, Loc)> {
        self.get(key)
    }

    pub(crate) fn table(&self, key: &'static str) -> Option<TableReader<'d>> {
        let (node, loc) = self.get(key)?;
        self.as_table(node, loc)
    }

    pub(crate) fn as_table(&self, node: Node<'d>, loc: Loc) -> Option<TableReader<'d>> {
        match node.as_table_like() {
            Some(table) => Some(TableReader {
                reader: self.reader,
                table,
                loc,
                asked: RefCell::new(Vec::new()),
                open: std::cell::Cell::new(false),
            }),
            None => {
                self.wrong_type(&loc, "a table", node);
                None
            }
        }
    }

    /// An array of tables (`[[rules]]` or `rules = [{…}]`); a single table is
    /// accepted as an array of one.
    pub(crate) fn tables(&self, key: &'static str) -> Vec<TableReader<'d>> {
        let Some((node, loc)) = self.get(key) else {
            return Vec::new();
        };
        if node.as_table_like().is_some() {
            return self.as_table(node, loc).into_iter().collect();
        }
        let Some(elements) = node.elements() else {
            self.wrong_type(&loc, "an array of tables", node);
            return Vec::new();
        };
        if self.too_many(&loc, elements.len()) {
            return Vec::new();
        }
        elements
            .into_iter()
            .enumerate()
            .filter_map(|(i, e)| {
                let eloc = Loc {
                    span: e.span().unwrap_or_else(|| loc.span.clone()),
                    path: format!("{}[{i}]", loc.path),
                };
                self.as_table(e, eloc)
            })
            .collect()
    }

    /// Every entry of a table whose keys are names chosen by the user (item
    /// fields, headers); all keys count as known.
    pub(crate) fn entries(&self) -> Vec<(At<String>, Node<'d>, Loc)> {
        self.open.set(true);
        if self.too_many(&self.loc, self.table.len()) {
            return Vec::new();
        }
        self.table
            .iter()
            .map(|(k, item)| {
                let node = Node::Item(item);
                let key_span = self
                    .table
                    .key(k)
                    .and_then(|key| key.span())
                    .or_else(|| node.span())
                    .unwrap_or_else(|| self.loc.span.clone());
                let path = self.child_path(k);
                let value_loc = Loc {
                    span: node.span().unwrap_or_else(|| key_span.clone()),
                    path: path.clone(),
                };
                (
                    At::new(
                        k.to_string(),
                        Loc {
                            span: key_span,
                            path,
                        },
                    ),
                    node,
                    value_loc,
                )
            })
            .collect()
    }

    /// Records a list or table of more than [`MAX_ENTRIES`] entries.
    fn too_many(&self, loc: &Loc, n: usize) -> bool {
        if n <= MAX_ENTRIES {
            return false;
        }
        self.reader.problem(
            loc,
            format!("{n} entries are more than the {MAX_ENTRIES} a list or table may have"),
            Some("keep long lists (URLs, patterns) in Redis or merge patterns with `|`".into()),
        );
        true
    }

    /// Records that a required key is missing.
    pub(crate) fn require<T>(&self, key: &'static str, value: Option<T>, hint: &str) -> Option<T> {
        if value.is_none() && self.table.get(key).is_none() {
            self.reader.problem(
                &self.loc,
                format!("missing required field `{key}`"),
                Some(hint.to_string()),
            );
        }
        value
    }

    /// Reports every key of the table that no reader asked for.
    pub(crate) fn finish(&self) {
        if self.open.get() {
            return;
        }
        let asked = self.asked.borrow();
        for (k, _) in self.table.iter() {
            if asked.contains(&k) {
                continue;
            }
            let span = self
                .table
                .key(k)
                .and_then(|key| key.span())
                .unwrap_or_else(|| self.loc.span.clone());
            let loc = Loc {
                span,
                path: if self.loc.path.is_empty() {
                    k.to_string()
                } else {
                    format!("{}.{k}", self.loc.path)
                },
            };
            let hint = match did_you_mean(k, asked.iter().copied()) {
                Some(near) => format!("did you mean `{near}`?"),
                None => format!("known keys here: {}", asked.join(", ")),
            };
            self.reader
                .problem(&loc, format!("unknown key `{k}`"), Some(hint));
        }
    }
}
