//! `[items]`: each item type and its fields (where a field's value comes
//! from, its whitespace, its type), and `[items] sink`, where items go.
//! The checks of a field's finished value are [`super::field_checks`]'s.

use super::Compiler;
use crate::frontier::keys::ItemSink;
use crate::reader::At;
use crate::spider::file::{FieldFile, ItemFile};
use crate::spider::{Field, FieldSource, FieldType, ItemDef, JsonLdPath, PageValue, Whitespace};

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
        Some(ItemDef {
            name: item.name.value.clone(),
            fields: fields.into_iter().collect::<Option<_>>()?,
        })
    }

    fn field(&self, f: &FieldFile) -> Option<Field> {
        let source = self.field_source(f);
        let re = f.re.as_ref().map(|r| self.regex(r));
        let whitespace = self.whitespace(f);
        let kind = self.field_type(f);
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
                        f.name.value
                    ),
                    "add one of css = \"…\", json = \"$.…\", page = \"url\", meta = \"…\" or const = …",
                );
                None
            }
            [_] => self.one_source(f),
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
        } else {
            f.constant
                .as_ref()
                .map(|c| FieldSource::Const(c.value.clone()))
        }
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
            Some(other) => {
                self.problem(
                    &f.kind.as_ref()?.loc,
                    format!("`{other}` is not a field type"),
                    "use \"string\", \"int\", \"float\" or \"bool\"",
                );
                None
            }
        }
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
