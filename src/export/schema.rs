//! The tables a spider's items go to: one per item type, named
//! `<spider>_<type>` (or the item type's `table`), with a column per
//! top-level field, typed from the field's declaration, and keyed by the
//! item type's `key` (or, without one, by a hash of the whole item in the
//! column `_key`). Also which item type an item is: the one it names
//! under `[items] type_field`; without one, items in Redis are plain JSON
//! objects, so an item is matched to the type whose fields it has (and
//! whose constants it carries, e.g. `kind = { const = "post" }`).
//!
//! The stores ([`super::sinks`]) turn a [`Table`] into SQL or files; this
//! module knows nothing of them.

use serde_json::{Map, Value};
use sha1::{Digest, Sha1};

use crate::spider::{Field, FieldSource, FieldType, ItemDef, PageValue, Spider};

/// The column holding the hash of the item, for item types without `key`.
pub const HASH_COLUMN: &str = "_key";

/// A column's type, as each store spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnType {
    Text,
    Integer,
    Float,
    Boolean,
    /// RFC 3339 text (`type = "datetime"`).
    Timestamp,
    /// Lists, objects and values of no fixed type: `jsonb` (PostgreSQL),
    /// JSON text (SQLite, CSV).
    Json,
}

/// One column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub name: String,
    pub ty: ColumnType,
}

/// Where items of one type go.
#[derive(Debug, Clone)]
pub struct Table {
    /// The item type (`[items.<type>]`).
    pub item_type: String,
    /// The table's name (a plain SQL name, also used for file names).
    pub name: String,
    /// The item's fields, in the spider's order, then [`HASH_COLUMN`] for
    /// a type without `key`.
    pub columns: Vec<Column>,
    /// The key columns: the type's `key`, or [`HASH_COLUMN`].
    pub key: Vec<String>,
    /// The fields with a constant value (`const`), which tell types apart.
    consts: Vec<(String, Value)>,
}

impl Table {
    /// Whether rows are keyed by a hash of the item.
    pub fn hashed(&self) -> bool {
        self.key.iter().any(|k| k == HASH_COLUMN)
    }

    /// Whether `name` is a key column.
    pub fn is_key(&self, name: &str) -> bool {
        self.key.iter().any(|k| k == name)
    }
}

/// Every table of a spider.
#[derive(Debug, Clone)]
pub struct Schema {
    pub tables: Vec<Table>,
    /// `[items] type_field`: the key under which each item names its type.
    type_field: Option<String>,
}

/// An item ready for its table.
#[derive(Debug, Clone)]
pub struct Row<'a> {
    pub table: &'a Table,
    /// The item's fields, with [`HASH_COLUMN`] added for a hashed table.
    pub values: Map<String, Value>,
    /// What tells it from the other rows of its table: the key's values.
    pub identity: String,
}

impl Schema {
    /// The tables of `spider`'s item types.
    pub fn of(spider: &Spider) -> Schema {
        let type_field = spider.type_field.clone();
        let tables = spider
            .items
            .iter()
            .map(|def| table(&spider.name, def, type_field.as_deref()))
            .collect();
        Schema { tables, type_field }
    }

    /// The row of the item `json` (as it was in Redis), or why it has
    /// none: it is not a JSON object, fits no item type, or lacks a key
    /// field.
    pub fn row(&self, json: &str) -> Result<Row<'_>, String> {
        let values = match serde_json::from_str::<Value>(json) {
            Ok(Value::Object(map)) => map,
            Ok(other) => {
                return Err(format!(
                    "the item is not a JSON object but {}",
                    kind(&other)
                ))
            }
            Err(e) => return Err(format!("the item is not JSON: {e}")),
        };
        let table = self.table_for(&values)?;
        row(table, values, json)
    }

    /// The item type an item is: the one it names under `[items]
    /// type_field`; else the only one there is; else the one whose fields
    /// are the item's and whose constants it carries; else the one whose
    /// fields hold most of the item's.
    fn table_for(&self, item: &Map<String, Value>) -> Result<&Table, String> {
        if let Some(field) = &self.type_field {
            let named = item.get(field).and_then(Value::as_str);
            return self
                .tables
                .iter()
                .find(|t| Some(t.item_type.as_str()) == named)
                .ok_or_else(|| {
                    format!(
                        "the item's `{field}` ({}) names none of the spider's item types ({})",
                        item.get(field)
                            .map_or("missing".to_string(), Value::to_string),
                        self.tables
                            .iter()
                            .map(|t| t.item_type.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                });
        }
        if let [only] = self.tables.as_slice() {
            return Ok(only);
        }
        let consts_agree = |t: &&Table| {
            t.consts
                .iter()
                .all(|(name, v)| item.get(name).is_none_or(|got| got == v))
        };
        let exact: Vec<&Table> = self
            .tables
            .iter()
            .filter(consts_agree)
            .filter(|t| {
                t.columns.iter().filter(|c| c.name != HASH_COLUMN).count() == item.len()
                    && item.keys().all(|k| t.columns.iter().any(|c| &c.name == k))
            })
            .collect();
        if let [one] = exact.as_slice() {
            return Ok(one);
        }
        let shared = |t: &Table| {
            item.keys()
                .filter(|k| t.columns.iter().any(|c| &c.name == *k))
                .count()
        };
        let mut best: Vec<(&Table, usize)> = self
            .tables
            .iter()
            .filter(consts_agree)
            .map(|t| (t, shared(t)))
            .filter(|(_, n)| *n > 0)
            .collect();
        best.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        match best.as_slice() {
            [(t, _)] => Ok(t),
            [(t, a), (_, b), ..] if a > b => Ok(t),
            _ => Err(format!(
                "the item fits none of the spider's item types, or several alike ({}): its fields are {}; name each item's type with `[items] type_field = \"kind\"`, or give each type a constant field that tells it apart (`kind = {{ const = \"post\" }}`)",
                self.tables.iter().map(|t| t.item_type.as_str()).collect::<Vec<_>>().join(", "),
                item.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
            )),
        }
    }
}

/// The row of `values` in `table`: its identity from the key fields (each
/// present, not null), or from the hash of the item as it was in Redis.
fn row<'a>(
    table: &'a Table,
    mut values: Map<String, Value>,
    json: &str,
) -> Result<Row<'a>, String> {
    if table.hashed() {
        let hash = hex::encode(Sha1::digest(json.as_bytes()));
        values.insert(HASH_COLUMN.to_string(), Value::String(hash.clone()));
        return Ok(Row {
            table,
            values,
            identity: hash,
        });
    }
    let mut identity = String::new();
    for k in &table.key {
        match values.get(k) {
            None | Some(Value::Null) => {
                return Err(format!(
                    "key field `{k}` of item type `{}` is missing or null",
                    table.item_type
                ))
            }
            Some(v) => {
                identity.push_str(&v.to_string());
                identity.push('\u{1f}');
            }
        }
    }
    Ok(Row {
        table,
        values,
        identity,
    })
}

/// The table of item type `def` of spider `spider`; with `[items]
/// type_field`, its first column holds the type's name.
fn table(spider: &str, def: &ItemDef, type_field: Option<&str>) -> Table {
    let name = def
        .table
        .clone()
        .unwrap_or_else(|| plain_name(&format!("{spider}_{}", def.name)));
    let named = type_field.map(|field| Column {
        name: field.to_string(),
        ty: ColumnType::Text,
    });
    let mut columns: Vec<Column> = named
        .into_iter()
        .chain(def.fields.iter().map(|f| Column {
            name: f.name.clone(),
            ty: column_type(f),
        }))
        .collect();
    let key = if def.key.is_empty() {
        columns.push(Column {
            name: HASH_COLUMN.to_string(),
            ty: ColumnType::Text,
        });
        vec![HASH_COLUMN.to_string()]
    } else {
        def.key.clone()
    };
    let consts = def
        .fields
        .iter()
        .filter_map(|f| match &f.source {
            FieldSource::Const(v) if f.transform.is_none() => Some((f.name.clone(), v.clone())),
            _ => None,
        })
        .collect();
    Table {
        item_type: def.name.clone(),
        name,
        columns,
        key,
        consts,
    }
}

/// A name as a plain SQL name: lower case, `_` for anything but letters
/// and digits, at most 63 bytes (PostgreSQL's limit).
fn plain_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out.truncate(63);
    out
}

/// A field's column type: its `type`; else what its source gives (text
/// from a page, a constant's own type); JSON for lists, objects, and
/// values a JSONPath, JSON-LD or a transform may give in any shape.
fn column_type(f: &Field) -> ColumnType {
    let list = f.each.is_some() || (f.all && f.join.is_none());
    if list || f.transform.is_some() {
        return ColumnType::Json;
    }
    match f.kind {
        Some(FieldType::Int) => return ColumnType::Integer,
        Some(FieldType::Float) => return ColumnType::Float,
        Some(FieldType::Bool) => return ColumnType::Boolean,
        Some(FieldType::DateTime) => return ColumnType::Timestamp,
        Some(FieldType::String) => return ColumnType::Text,
        None => {}
    }
    match &f.source {
        FieldSource::Json(_) | FieldSource::JsonLd(_) | FieldSource::Object(_) => ColumnType::Json,
        FieldSource::Page(PageValue::Status | PageValue::Depth) => ColumnType::Integer,
        FieldSource::Page(PageValue::Headers) => ColumnType::Json,
        FieldSource::Const(v) => match v {
            Value::String(_) => ColumnType::Text,
            Value::Bool(_) => ColumnType::Boolean,
            Value::Number(n) if n.is_f64() => ColumnType::Float,
            Value::Number(_) => ColumnType::Integer,
            _ => ColumnType::Json,
        },
        _ => ColumnType::Text,
    }
}

/// A JSON value's kind, for messages.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bbs() -> Schema {
        let spider = Spider::load(std::path::Path::new("spiders/bbs.toml")).unwrap();
        Schema::of(&spider)
    }

    #[test]
    fn each_item_type_is_a_table_typed_from_its_fields_and_keyed() {
        let schema = bbs();
        let post = &schema.tables[0];
        assert_eq!(post.name, "bbs_post");
        assert_eq!(post.key, ["post_id"]);
        let ty = |t: &Table, n: &str| t.columns.iter().find(|c| c.name == n).unwrap().ty;
        assert_eq!(ty(post, "post_id"), ColumnType::Integer);
        assert_eq!(ty(post, "title"), ColumnType::Text);
        assert_eq!(ty(post, "kind"), ColumnType::Text);
        assert_eq!(schema.tables[1].name, "bbs_comment");
    }

    #[test]
    fn an_item_goes_to_the_type_it_names() {
        let schema = bbs();
        let comment = r#"{"kind":"comment","comment_id":"c1","post_id":1,"forum_id":"1","user":"u","floor":2,"text":"t"}"#;
        let row = schema.row(comment).unwrap();
        assert_eq!(row.table.item_type, "comment");
        assert_eq!(row.identity, "\"c1\"\u{1f}");
        let e = schema.row(r#"{"nothing":"alike"}"#).unwrap_err();
        assert!(e.contains("names none"), "{e}");
        let e = schema.row(r#"{"kind":"thread","x":1}"#).unwrap_err();
        assert!(e.contains("names none") && e.contains("\"thread\""), "{e}");
        let e = schema
            .row(r#"{"kind":"comment","comment_id":null,"post_id":1,"forum_id":"1","user":"u","floor":2,"text":"t"}"#)
            .unwrap_err();
        assert!(e.contains("key field `comment_id`"), "{e}");
        assert!(schema.row("[1]").unwrap_err().contains("not a JSON object"));
    }

    #[test]
    fn names_become_plain_sql_names() {
        assert_eq!(plain_name("bbs-detail_Post"), "bbs_detail_post");
        assert_eq!(plain_name("9news_x"), "_9news_x");
    }
}
