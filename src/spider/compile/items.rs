//! `[items]`: each item type and its fields (where a field's value comes
//! from, its whitespace, its type), and `[items] sink`, where items go.
//! The checks of a field's finished value are [`super::field_checks`]'s.

use super::Compiler;
use crate::frontier::keys::ItemSink;
use crate::reader::{At, Loc};
use crate::spider::file::{FieldFile, ItemFile};
use crate::spider::{
    DateSpec, Field, FieldSource, FieldType, ItemDef, JsonLdPath, PageValue, Transform, Whitespace,
};

impl Compiler<'_> {
    pub(super) fn item(&self, item: &ItemFile) -> Option<ItemDef> {
        self.name(&item.name, "item");
        if item.fields.is_empty() {
            self.problem(
                &item.name.loc,
                format!("item `{}` has no fields", item.name.value),
                "add fields such as `title = \"h1::text\"`",
            );
        }
        let fields: Vec<Option<Field>> = item.fields.iter().map(|f| self.field(f)).collect();
        let transform = item.transform.as_ref().map(|t| self.transform(t));
        let key = self.item_key(item);
        let table = item.table.as_ref().and_then(|t| self.table_name(t));
        Some(ItemDef {
            name: item.name.value.clone(),
            fields: fields.into_iter().collect::<Option<_>>()?,
            transform: transform.map_or(Some(None), |t| t.map(Some))?,
            key,
            table,
        })
    }

    /// `key = [ … ]`: each a top-level field of the item, once.
    fn item_key(&self, item: &ItemFile) -> Vec<String> {
        let Some(key) = &item.key else {
            return Vec::new();
        };
        let names: Vec<&str> = item.fields.iter().map(|f| f.name.value.as_str()).collect();
        let mut out: Vec<String> = Vec::new();
        for k in key {
            if !names.contains(&k.value.as_str()) {
                self.problem(
                    &k.loc,
                    format!(
                        "`{}` in the key of item `{}` is not one of its fields",
                        k.value, item.name.value
                    ),
                    format!("name fields of the item: {}", names.join(", ")),
                );
            } else if out.contains(&k.value) {
                self.problem(
                    &k.loc,
                    format!(
                        "`{}` is twice in the key of item `{}`",
                        k.value, item.name.value
                    ),
                    "name each field once",
                );
            } else {
                out.push(k.value.clone());
            }
        }
        if key.is_empty() {
            self.problem(
                &item.name.loc,
                format!("the key of item `{}` is empty", item.name.value),
                "name the fields that tell one item from another, e.g. `key = [\"comment_id\"]`, or remove `key` (the exporter then keys rows by a hash of the whole item)",
            );
        }
        out
    }

    /// `table = "…"`: a plain SQL name (letters, digits, `_`; not a digit
    /// first), so it needs no quoting in a query and is a file name too.
    fn table_name(&self, t: &At<String>) -> Option<String> {
        let ok = t.value.len() <= 63
            && t.value
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && t.value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            self.problem(
                &t.loc,
                format!("`{}` is not a table name crawlworker writes", t.value),
                "use letters, digits and `_` (not a digit first), at most 63 characters, e.g. `table = \"forum_comments\"`",
            );
            return None;
        }
        Some(t.value.clone())
    }

    fn field(&self, f: &FieldFile) -> Option<Field> {
        let source = self.field_source(f);
        let re = f.re.as_ref().map(|r| self.regex(r));
        let whitespace = self.whitespace(f);
        let kind = self.field_type(f);
        let dates = self.dates(f, kind.flatten());
        let each = self.field_each(f);
        let transform = f.transform.as_ref().map(|t| self.transform(t));
        let prepare = f.prepare.as_ref().map(|t| {
            self.jq(t, "prepare", "write jq over the value as found, e.g. 'ltrimstr(\"Posted \")' or 'sub(\" views$\"; \"\")'")
        });
        let all = f.all.as_ref().is_some_and(|a| a.value) || f.join.is_some();
        let list = (all && f.join.is_none()) || f.each.is_some();
        let checks = self.checks(f, kind.flatten(), list);
        self.check_object_keys(f);
        Some(Field {
            name: f.name.value.clone(),
            path: f.path.clone(),
            source: source?,
            each: each?,
            dates: dates?,
            transform: transform.map_or(Some(None), |t| t.map(Some))?,
            prepare: prepare.map_or(Some(None), |t| t.map(Some))?,
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

    /// Where a field takes its value from: exactly one of its source keys.
    fn field_source(&self, f: &FieldFile) -> Option<FieldSource> {
        let given: Vec<&str> = [
            ("css", f.css.is_some()),
            ("json", f.json.is_some()),
            ("xpath", f.xpath.is_some()),
            ("jsonld", f.jsonld.is_some()),
            ("og", f.og.is_some()),
            ("page", f.page.is_some()),
            ("meta", f.meta.is_some()),
            ("const", f.constant.is_some()),
            ("fields", f.fields.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, set)| set.then_some(k))
        .collect();
        match given.as_slice() {
            [] => {
                self.problem(
                    &f.name.loc,
                    format!(
                        "field `{}` says nowhere to take its value from",
                        f.path
                    ),
                    "add one of css = \"…\", json = \"$.…\", page = \"url\", meta = \"…\", const = … or fields = { … }",
                );
                None
            }
            [_] => self.one_source(f),
            many => {
                self.problem(
                    &f.name.loc,
                    format!(
                        "field `{}` takes its value from both `{}` and `{}`",
                        f.path, many[0], many[1]
                    ),
                    "keep one source per field",
                );
                None
            }
        }
    }

    /// The source of a field that names one.
    fn one_source(&self, f: &FieldFile) -> Option<FieldSource> {
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
            self.page_value(page).map(FieldSource::Page)
        } else if let Some(meta) = &f.meta {
            Some(FieldSource::Meta(meta.value.clone()))
        } else if let Some((loc, nested)) = &f.fields {
            self.object(f, loc, nested)
        } else {
            f.constant
                .as_ref()
                .map(|c| FieldSource::Const(c.value.clone()))
        }
    }

    /// `fields = { … }`: the fields of the object made per element.
    fn object(&self, f: &FieldFile, loc: &Loc, nested: &[FieldFile]) -> Option<FieldSource> {
        if nested.is_empty() {
            self.problem(
                loc,
                format!("`fields` of field `{}` is empty", f.path),
                "name the object's fields: fields = { author = \"span.author::text\" }",
            );
            return None;
        }
        let fields: Vec<Option<Field>> = nested.iter().map(|n| self.field(n)).collect();
        fields
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .map(FieldSource::Object)
    }

    /// `each` on a field: elements by CSS or XPath (a path starting with
    /// `/`, `./` or `(`), or JSON values by JSONPath (`$…`).
    fn field_each(&self, f: &FieldFile) -> Option<Option<crate::spider::Each>> {
        let Some(each) = &f.each else {
            return Some(None);
        };
        let v = each.value.trim_start();
        if v.starts_with('/') || v.starts_with("./") || v.starts_with('(') {
            self.each_of(None, Some(each))
        } else {
            self.each_of(Some(each), None)
        }
    }

    /// The keys that shape text (`join`, `re`, `type`, …) mean nothing on
    /// an object made of `fields`: they go on the fields inside.
    fn check_object_keys(&self, f: &FieldFile) {
        if f.fields.is_none() {
            return;
        }
        let text_keys = [
            ("join", f.join.as_ref().map(|a| &a.loc)),
            ("re", f.re.as_ref().map(|a| &a.loc)),
            ("type", f.kind.as_ref().map(|a| &a.loc)),
            ("whitespace", f.whitespace.as_ref().map(|a| &a.loc)),
            ("url", f.url.as_ref().map(|a| &a.loc)),
            ("all", f.all.as_ref().map(|a| &a.loc)),
            ("prepare", f.prepare.as_ref().map(|a| &a.loc)),
        ];
        for (key, loc) in text_keys {
            if let Some(loc) = loc {
                self.problem(
                    loc,
                    format!(
                        "`{key}` shapes text, and field `{}` makes objects (`fields`)",
                        f.path
                    ),
                    format!("put `{key}` on the fields inside `fields`, where the text is"),
                );
            }
        }
    }

    /// `type = "datetime"`'s `formats` and `timezone`; `Some(None)` for
    /// other types. Both keys belong to datetime fields only.
    fn dates(&self, f: &FieldFile, kind: Option<FieldType>) -> Option<Option<DateSpec>> {
        if kind != Some(FieldType::DateTime) {
            let stray = f
                .formats
                .as_ref()
                .and_then(|v| v.first())
                .map(|a| (&a.loc, "formats"))
                .or(f.timezone.as_ref().map(|a| (&a.loc, "timezone")));
            if let Some((loc, key)) = stray {
                self.problem(
                    loc,
                    format!("`{key}` reads dates, and field `{}` is not a date", f.path),
                    "add type = \"datetime\", or remove it",
                );
                return None;
            }
            return Some(None);
        }
        let mut ok = true;
        let mut formats = Vec::new();
        for at in f.formats.iter().flatten() {
            match crate::extract::dates::check_format(&at.value) {
                Ok(()) => formats.push(at.value.clone()),
                Err(e) => {
                    ok = false;
                    self.problem(
                        &at.loc,
                        format!("`{}` is not a date format: {e}", at.value),
                        "write strftime, e.g. \"%Y-%m-%d %H:%M\", \"%b %d, %Y %I:%M %p\", \"%Y年%m月%d日\"",
                    );
                }
            }
        }
        let zone = match &f.timezone {
            None => Some(chrono_tz::Tz::UTC),
            Some(at) => match at.value.parse::<chrono_tz::Tz>() {
                Ok(tz) => Some(tz),
                Err(_) => {
                    let names = chrono_tz::TZ_VARIANTS.iter().map(|t| t.name());
                    let hint = match crate::reader::diagnostic::did_you_mean(&at.value, names) {
                        Some(near) => format!("did you mean `{near}`?"),
                        None => "use an IANA zone name such as \"Asia/Shanghai\", \"Europe/Berlin\" or \"UTC\"".into(),
                    };
                    self.problem(&at.loc, format!("`{}` is not a time zone", at.value), hint);
                    None
                }
            },
        };
        ok.then_some(())?;
        Some(Some(DateSpec {
            formats,
            zone: zone?,
        }))
    }

    /// `transform = '…'`: a jq program, its errors at their line:column.
    fn transform(&self, at: &At<String>) -> Option<Transform> {
        self.jq(
            at,
            "transform",
            "write jq, e.g. 'gsub(\"[^0-9]\"; \"\") | tonumber' (a field named `transform` is written as a table: transform = { css = \"…\" })",
        )
    }

    /// A jq program (`what` names its key), its errors at their
    /// line:column with `hint`.
    pub(super) fn jq(&self, at: &At<String>, what: &str, hint: &str) -> Option<Transform> {
        Transform::compile(&at.value)
            .map_err(|e| {
                self.problem(
                    &super::json::within(&at.loc, &at.value, e.offset + 1),
                    format!(
                        "{what} `{}` does not compile: {}",
                        crate::wording::cut(&at.value, 80),
                        e.message
                    ),
                    hint,
                )
            })
            .ok()
    }

    /// `page = "url" | "status" | "depth" | "headers"`.
    fn page_value(&self, page: &At<String>) -> Option<PageValue> {
        match page.value.as_str() {
            "url" => Some(PageValue::Url),
            "status" => Some(PageValue::Status),
            "depth" => Some(PageValue::Depth),
            "headers" => Some(PageValue::Headers),
            other => {
                self.problem(
                    &page.loc,
                    format!("`{other}` is not a page value"),
                    "use \"url\", \"status\", \"depth\" or \"headers\"",
                );
                None
            }
        }
    }

    fn jsonld_path(&self, at: &At<String>) -> Option<JsonLdPath> {
        JsonLdPath::parse(&at.value)
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
        Some(crate::spider::structured::og_key(name))
    }

    /// `whitespace`: strip (the default), normalize or keep.
    fn whitespace(&self, f: &FieldFile) -> Option<Whitespace> {
        match f.whitespace.as_ref().map(|w| w.value.as_str()) {
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
        }
    }

    /// `type`: the type values are converted to; `Some(None)` keeps them
    /// as found.
    fn field_type(&self, f: &FieldFile) -> Option<Option<FieldType>> {
        match f.kind.as_ref().map(|k| k.value.as_str()) {
            None => Some(None),
            Some("string") => Some(Some(FieldType::String)),
            Some("int") => Some(Some(FieldType::Int)),
            Some("float") => Some(Some(FieldType::Float)),
            Some("bool") => Some(Some(FieldType::Bool)),
            Some("datetime") => Some(Some(FieldType::DateTime)),
            Some(other) => {
                self.problem(
                    &f.kind.as_ref()?.loc,
                    format!("`{other}` is not a field type"),
                    "use \"string\", \"int\", \"float\", \"bool\" or \"datetime\"",
                );
                None
            }
        }
    }

    /// `[items] type_field`: a key no item type has a field of; `Some(None)`
    /// without one.
    pub(super) fn type_field(
        &self,
        file: &crate::spider::file::SpiderFile,
    ) -> Option<Option<String>> {
        let Some(at) = &file.items_type_field else {
            return Some(None);
        };
        if at.value.trim().is_empty() {
            self.problem(
                &at.loc,
                "`type_field` is empty",
                "name the key each item's type goes under, e.g. `type_field = \"kind\"`",
            );
            return None;
        }
        let clash = file
            .items
            .iter()
            .find(|i| i.fields.iter().any(|f| f.name.value == at.value));
        if let Some(item) = clash {
            self.problem(
                &at.loc,
                format!(
                    "item `{}` has a field `{}`, the key `type_field` adds the item type under",
                    item.name.value, at.value
                ),
                format!(
                    "rename the field, or choose another key for the type (`type_field = \"item_type\"`); `type_field` replaces a `{} = {{ const = \"…\" }}` field",
                    at.value
                ),
            );
            return None;
        }
        Some(Some(at.value.clone()))
    }

    /// `[items] sink`.
    pub(super) fn sink(&self, sink: Option<&At<String>>) -> Option<ItemSink> {
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
}
