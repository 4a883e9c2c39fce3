//! Item fields: the values a field's source yields (CSS, XPath, JSON-LD,
//! `<meta>` properties, the page, the context, a constant; in an HTML
//! element, or in a JSON value: [`Scope`]), then whitespace cleaning, regex
//! capture, URL resolution, the field's `prepare`, type conversion (dates
//! by [`super::dates`]; a value that does not convert is noted on the
//! page, never silently null),
//! and first / all / joined, with defaults and required fields; per
//! element of the field's `each`, and as objects of nested `fields`; then
//! the field's transform and its checks (`expect`, `non_empty`, `pattern`,
//! `min`/`max`, lengths), and the item type's transform.

use std::borrow::Cow;

use scraper::ElementRef;
use serde_json::{Map, Number, Value};

use super::page::Page;
use super::DropReason;
use crate::request::absolute_url;
use crate::spider::limits::{nests_deeper, MAX_VALUE_DEPTH};
use crate::spider::selector::{Selected, Selector};
use crate::spider::xpath::Found;
use crate::spider::{
    Each, Field, FieldChecks, FieldSource, FieldType, ItemDef, PageValue, ValueKind, Whitespace,
};

/// Why an item was dropped: the stat's reason and a message for people.
pub type Drop = (DropReason, String);

/// What an item's fields are read in: the page's HTML (or the `each`
/// element), or its JSON document (or the `each` value).
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    Html(ElementRef<'a>),
    Json(&'a Value),
}

/// The fields of one item, or why it was dropped. `jsonld_types` are the
/// JSON-LD types its `jsonld` fields read (any when empty). The item's
/// `transform` runs last: `null` drops the item.
pub fn item(
    def: &ItemDef,
    scope: Scope<'_>,
    page: &Page<'_>,
    jsonld_types: &[String],
) -> Result<Map<String, Value>, Drop> {
    let out = object(&def.fields, scope, page, jsonld_types)?;
    match &def.transform {
        None => Ok(out),
        Some(t) => transformed_item(&def.name, t, out),
    }
}

/// An item through its type's transform: an object goes on, `null` drops
/// it, anything else (or a failed run) drops it as a failure.
fn transformed_item(
    name: &str,
    t: &crate::spider::Transform,
    item: Map<String, Value>,
) -> Result<Map<String, Value>, Drop> {
    match t.run(&Value::Object(item)) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(Value::Null) => Err((
            DropReason::DroppedByTransform,
            format!("the transform of item `{name}` returned null"),
        )),
        Ok(other) => Err((
            DropReason::TransformFailed,
            format!(
                "the transform of item `{name}` returned {}, not an object",
                shown(&other)
            ),
        )),
        Err(e) => Err((
            DropReason::TransformFailed,
            format!("the transform of item `{name}` failed: {e}"),
        )),
    }
}

/// The object `fields` make in `scope`: an item's, or one element's of a
/// field with `fields = { … }`.
fn object(
    fields: &[Field],
    scope: Scope<'_>,
    page: &Page<'_>,
    jsonld_types: &[String],
) -> Result<Map<String, Value>, Drop> {
    let mut out = Map::with_capacity(fields.len());
    for field in fields {
        let value = match value(field, scope, page, jsonld_types)? {
            Some(v) => v,
            None => match &field.default {
                Some(d) => d.clone(),
                None if field.required => {
                    return Err((
                        DropReason::MissingRequiredField,
                        format!("required field `{}` is missing", field.path),
                    ))
                }
                None => Value::Null,
            },
        };
        if !field.checks.is_empty() {
            check(field, &value)?;
        }
        out.insert(field.name.clone(), value);
    }
    Ok(out)
}

/// A field's finished value against its checks (see [`FieldChecks`]).
fn check(field: &Field, value: &Value) -> Result<(), Drop> {
    let c: &FieldChecks = &field.checks;
    let name = &field.path;
    if value.is_null() {
        return Ok(());
    }
    if let Some(kind) = c.expect.filter(|k| !k.matches(value)) {
        return Err((
            DropReason::WrongType,
            format!("field `{name}`: {} is not {}", shown(value), a_kind(kind)),
        ));
    }
    let empty = match value {
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    if c.non_empty && empty {
        return Err((DropReason::EmptyField, format!("field `{name}` is empty")));
    }
    if c.min_length.is_some() || c.max_length.is_some() {
        check_length(c, name, value)?;
    }
    let elements = match value {
        Value::Array(a) => a.as_slice(),
        v => std::slice::from_ref(v),
    };
    for v in elements {
        check_element(c, name, v)?;
    }
    Ok(())
}

/// `min_length` and `max_length`: the characters of a string, the
/// elements of a list.
fn check_length(c: &FieldChecks, name: &str, value: &Value) -> Result<(), Drop> {
    let length = match value {
        Value::String(s) => s.chars().count(),
        Value::Array(a) => a.len(),
        other => {
            let shown = shown(other);
            let why = format!("field `{name}`: {shown} has no length (min_length, max_length measure text and lists)");
            return Err((DropReason::WrongType, why));
        }
    };
    if let Some(min) = c.min_length.filter(|m| length < *m) {
        return Err((
            DropReason::BadLength,
            format!("field `{name}`: {} is shorter than {min}", shown(value)),
        ));
    }
    if let Some(max) = c.max_length.filter(|m| length > *m) {
        return Err((
            DropReason::BadLength,
            format!("field `{name}`: {} is longer than {max}", shown(value)),
        ));
    }
    Ok(())
}

/// `pattern`, `min` and `max` on one value (each element of a list).
fn check_element(c: &FieldChecks, name: &str, v: &Value) -> Result<(), Drop> {
    if let Some(re) = &c.pattern {
        let text = match v {
            Value::String(s) => Cow::Borrowed(s.as_str()),
            other => Cow::Owned(other.to_string()),
        };
        if !re.is_match(&text) {
            return Err((
                DropReason::PatternMismatch,
                format!(
                    "field `{name}`: {} does not match `{}`",
                    shown(v),
                    re.as_str()
                ),
            ));
        }
    }
    if c.min.is_some() || c.max.is_some() {
        let Some(n) = v.as_f64() else {
            return Err((
                DropReason::WrongType,
                format!("field `{name}`: {} is not a number (min, max)", shown(v)),
            ));
        };
        if c.min.is_some_and(|m| n < m) || c.max.is_some_and(|m| n > m) {
            let bound = |b: Option<f64>| b.map_or("…".to_string(), |b| b.to_string());
            return Err((
                DropReason::OutOfRange,
                format!(
                    "field `{name}`: {} is outside {}..{}",
                    shown(v),
                    bound(c.min),
                    bound(c.max)
                ),
            ));
        }
    }
    Ok(())
}

fn a_kind(kind: ValueKind) -> &'static str {
    match kind {
        ValueKind::String => "a string",
        ValueKind::Integer => "an integer",
        ValueKind::Number => "a number",
        ValueKind::Boolean => "true or false",
        ValueKind::List => "a list",
        ValueKind::Object => "an object",
    }
}

/// A value as a drop message shows it: its JSON, cut at PREVIEW_CHARS.
fn shown(v: &Value) -> String {
    const PREVIEW_CHARS: usize = 80;
    let json = v.to_string();
    match json.char_indices().nth(PREVIEW_CHARS) {
        Some((cut, _)) => format!("{}… ({} bytes)", &json[..cut], json.len()),
        None => json,
    }
}

/// The finished value of a field; `None` when the page has none. With
/// `each`, one value per element (elements without one left out). A value
/// that cannot be converted to the field's type (or whose `prepare` or
/// transform fails) is noted on the page (counted and warned about) and
/// drops the item only when the field is required; otherwise it counts as
/// missing.
fn value(
    field: &Field,
    scope: Scope<'_>,
    page: &Page<'_>,
    jsonld_types: &[String],
) -> Result<Option<Value>, Drop> {
    let found = match &field.each {
        None => one_value(field, scope, page, jsonld_types)?,
        Some(each) => {
            let mut values = Vec::new();
            for element in elements(each, scope, page) {
                values.extend(one_value(field, element, page, jsonld_types)?);
            }
            (!values.is_empty()).then_some(Value::Array(values))
        }
    };
    let finished = match (&field.transform, found) {
        (Some(t), Some(v)) => match t.run(&v) {
            Ok(Value::Null) => None,
            Ok(v) => Some(v),
            Err(e) => {
                let why = format!("the transform of field `{}` failed: {e}", field.path);
                return unconverted(field, page, DropReason::TransformFailed, why);
            }
        },
        (_, found) => found,
    };
    match finished {
        Some(v) if nests_deeper(&v, MAX_VALUE_DEPTH) => {
            let why = format!(
                "the value of field `{}` nests arrays and objects deeper than {MAX_VALUE_DEPTH}",
                field.path
            );
            unconverted(field, page, DropReason::WrongType, why)
        }
        finished => Ok(finished),
    }
}

/// A field's value it could not keep, for `why`: noted on the page (counted
/// and warned about); the item is dropped for `code` only when the field is
/// required, else the field is missing.
fn unconverted(
    field: &Field,
    page: &Page<'_>,
    code: DropReason,
    why: String,
) -> Result<Option<Value>, Drop> {
    page.unconverted(&field.path, why.clone());
    match field.required {
        true => Err((code, why)),
        false => Ok(None),
    }
}

/// What `each` selects within `scope`: elements of the page, or values of
/// the JSON document.
fn elements<'a>(each: &Each, scope: Scope<'a>, page: &'a Page<'_>) -> Vec<Scope<'a>> {
    let mut out = Vec::new();
    match (each, scope) {
        (Each::Css(sel), Scope::Html(el)) => sel.each(el, |s| {
            if let Selected::Element(e) = s {
                out.push(Scope::Html(e));
            }
        }),
        (Each::XPath(xpath), Scope::Html(el)) => xpath.each(el, page.xpath_order(el), |f| {
            if let Found::Element(e) = f {
                out.push(Scope::Html(e));
            }
        }),
        (Each::Json(path), Scope::Json(v)) => {
            out.extend(super::json::scopes(path, v).into_iter().map(Scope::Json))
        }
        // A spider never mixes HTML and JSON (`check` refuses it).
        (Each::Json(_), Scope::Html(_)) | (Each::Css(_) | Each::XPath(_), Scope::Json(_)) => {}
    }
    out
}

/// A field's value in one scope (the item's, or one `each` element):
/// an object of `fields`, or its source's values cleaned, converted and
/// taken first, all or joined.
fn one_value(
    field: &Field,
    scope: Scope<'_>,
    page: &Page<'_>,
    jsonld_types: &[String],
) -> Result<Option<Value>, Drop> {
    if let FieldSource::Object(fields) = &field.source {
        return object(fields, scope, page, jsonld_types).map(|o| Some(Value::Object(o)));
    }
    // A joined field is cleaned as one text, so the whitespace between text
    // nodes ("in <a>our archive</a>.") separates words as on the page.
    let raw = match (&field.join, &field.source, scope) {
        (Some(sep), FieldSource::Css(sel), Scope::Html(scope)) => match joined_css(sel, scope, sep)
        {
            Some(joined) => vec![Value::String(joined)],
            None => return Ok(None),
        },
        (Some(sep), _, _) => {
            let raw = source_values(field, scope, page, jsonld_types);
            if raw.is_empty() {
                return Ok(None);
            }
            vec![Value::String(join(raw.iter().map(text), sep))]
        }
        (None, _, _) => source_values(field, scope, page, jsonld_types),
    };
    let mut values = Vec::new();
    for v in raw {
        let Value::String(s) = v else {
            values.push(v);
            continue;
        };
        for s in capture(field, clean(s, field.whitespace)) {
            if s.is_empty() {
                continue;
            }
            if !field.url {
                values.push(Value::String(s));
            } else if let Ok(u) = absolute_url(page.base.as_ref(), &s, page.encoding, true) {
                values.push(Value::String(u));
            }
        }
    }
    let all = field.all && field.join.is_none();
    let mut typed = Vec::with_capacity(values.len());
    let mut failed = Vec::new();
    for v in values {
        let converted = match prepared(field, v) {
            Ok(Some(v)) => typed_value(field, v, page),
            Ok(None) => continue,
            Err(e) => Err(e),
        };
        match converted {
            Ok(v) => typed.push(v),
            Err((code, bad)) if field.required => {
                page.unconverted(&field.path, bad.clone());
                return Err((code, format!("field `{}`: {bad}", field.path)));
            }
            Err((_, bad)) => failed.push(bad),
        }
    }
    // A list goes without each value that failed; a single value is
    // missing only when none converted (the first that did is the value).
    let noted = match all {
        true => failed.len(),
        false => usize::from(typed.is_empty()).min(failed.len()),
    };
    for bad in failed.into_iter().take(noted) {
        page.unconverted(&field.path, bad);
    }
    Ok(if all {
        (!typed.is_empty()).then_some(Value::Array(typed))
    } else {
        typed.into_iter().next()
    })
}

/// One value through the field's `prepare` (before `type` reads it):
/// `None` when it gives `null` or nothing, the failure otherwise.
fn prepared(field: &Field, v: Value) -> Result<Option<Value>, Drop> {
    let Some(prepare) = &field.prepare else {
        return Ok(Some(v));
    };
    match prepare.run(&v) {
        Ok(Value::Null) => Ok(None),
        Ok(v) => Ok(Some(v)),
        Err(e) => Err((
            DropReason::TransformFailed,
            format!("`prepare` failed on {}: {e}", shown(&v)),
        )),
    }
}

/// One value converted to the field's `type` (dates by the field's
/// formats and zone), or why it does not convert.
fn typed_value(field: &Field, v: Value, page: &Page<'_>) -> Result<Value, Drop> {
    let converted = match (field.kind, &field.dates) {
        (Some(FieldType::DateTime), Some(spec)) => {
            super::dates::convert(&v, spec, page.response.fetched_at)
        }
        (Some(kind), _) => convert(v, kind),
        (None, _) => Ok(v),
    };
    converted.map_err(|bad| (DropReason::WrongType, bad))
}

/// A value as joined text: a string as it is, anything else as JSON.
fn text(v: &Value) -> Cow<'_, str> {
    match v {
        Value::String(s) => Cow::Borrowed(s),
        other => Cow::Owned(other.to_string()),
    }
}

/// `parts` with `sep` between them, in a string allocated once at its
/// size.
fn join<'a>(parts: impl Iterator<Item = Cow<'a, str>> + Clone, sep: &str) -> String {
    let (n, len) = parts
        .clone()
        .fold((0usize, 0usize), |(n, len), p| (n + 1, len + p.len()));
    let mut joined = String::with_capacity(len + sep.len() * n.saturating_sub(1));
    for (i, p) in parts.enumerate() {
        if i > 0 {
            joined.push_str(sep);
        }
        joined.push_str(&p);
    }
    joined
}

/// What a CSS field with `join` selects, joined: text is borrowed from the
/// page until it is copied once into the result, so a field that joins a
/// whole page's text costs about that text once, not a value per text node
/// as well (measured: 30 MB pages, docs/memory.md).
fn joined_css(sel: &Selector, scope: ElementRef<'_>, sep: &str) -> Option<String> {
    let mut parts: Vec<Cow<'_, str>> = Vec::new();
    sel.each(scope, |s| {
        parts.push(match s {
            Selected::Element(e) => Cow::Owned(e.html()),
            Selected::Text(t) => Cow::Borrowed(t),
        })
    });
    (!parts.is_empty()).then(|| join(parts.iter().map(|p| Cow::Borrowed(&**p)), sep))
}

fn source_values(
    field: &Field,
    scope: Scope<'_>,
    page: &Page<'_>,
    jsonld_types: &[String],
) -> Vec<Value> {
    match (&field.source, scope) {
        (FieldSource::Json(path), Scope::Json(value)) => {
            super::json::values(path, value, field.all)
        }
        // A spider never mixes HTML and JSON sources (`check` refuses it).
        (FieldSource::Json(_), Scope::Html(_))
        | (
            FieldSource::Css(_)
            | FieldSource::XPath(_)
            | FieldSource::JsonLd(_)
            | FieldSource::Og(_),
            Scope::Json(_),
        ) => Vec::new(),
        (FieldSource::Css(sel), Scope::Html(scope)) => {
            let mut values = Vec::new();
            sel.each(scope, |s| {
                values.push(Value::String(match s {
                    Selected::Element(e) => e.html(),
                    Selected::Text(t) => t.to_owned(),
                }))
            });
            values
        }
        (FieldSource::XPath(xpath), Scope::Html(scope)) => {
            let mut values = Vec::new();
            xpath.each(scope, page.xpath_order(scope), |f| {
                values.push(Value::String(f.into_string()))
            });
            values
        }
        (FieldSource::JsonLd(path), Scope::Html(scope)) => {
            page.metadata(scope).jsonld(jsonld_types, path)
        }
        (FieldSource::Og(name), Scope::Html(scope)) => page
            .metadata(scope)
            .og(name)
            .into_iter()
            .map(|v| Value::String(v.to_owned()))
            .collect(),
        (FieldSource::Page(PageValue::Url), _) => {
            vec![Value::String(page.response.url.to_string())]
        }
        (FieldSource::Page(PageValue::Status), _) => vec![Value::from(page.response.status)],
        (FieldSource::Page(PageValue::Depth), _) => vec![Value::from(page.request.depth)],
        (FieldSource::Page(PageValue::Headers), _) => vec![headers(page.response.headers)],
        (FieldSource::Meta(name), _) => match page.request.meta.get(name) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) if field.all => a.clone(),
            Some(v) => vec![v.clone()],
        },
        (FieldSource::Const(v), _) => vec![v.clone()],
        // Made by `one_value`, never read as a source.
        (FieldSource::Object(_), _) => Vec::new(),
    }
}

/// The response headers as an item value: an object of lower-case names,
/// a repeated header's values joined with ", " (as HTTP folds them).
/// `Set-Cookie` is left out: a session cookie has no place in an item.
fn headers(headers: &[(String, String)]) -> Value {
    let mut object = Map::new();
    for (name, value) in headers {
        let name = name.to_ascii_lowercase();
        if name == "set-cookie" {
            continue;
        }
        match object.get_mut(&name) {
            Some(Value::String(folded)) => {
                folded.push_str(", ");
                folded.push_str(value);
            }
            _ => {
                object.insert(name, Value::String(value.clone()));
            }
        }
    }
    Value::Object(object)
}

fn clean(s: String, mode: Whitespace) -> String {
    match mode {
        Whitespace::Keep => s,
        Whitespace::Strip => {
            // In place: a field may hold a whole page's text.
            let mut s = s;
            s.truncate(s.trim_end().len());
            let start = s.len() - s.trim_start().len();
            s.drain(..start);
            s
        }
        Whitespace::Normalize => {
            let mut out = String::with_capacity(s.len());
            for word in s.split_whitespace() {
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push_str(word);
            }
            out
        }
    }
}

/// parsel's `.re()`: every match; the groups when the regex has some, the
/// whole match otherwise.
fn capture(field: &Field, s: String) -> Vec<String> {
    let Some(re) = &field.re else {
        return vec![s];
    };
    let mut out = Vec::new();
    for caps in re.captures_iter(&s) {
        if caps.len() == 1 {
            out.extend(caps.get(0).map(|m| m.as_str().to_string()));
        } else {
            out.extend(
                caps.iter()
                    .skip(1)
                    .flatten()
                    .map(|m| m.as_str().to_string()),
            );
        }
        if !field.all {
            break;
        }
    }
    out
}

/// Converts one value; the error shows the value that did not fit.
fn convert(v: Value, kind: FieldType) -> Result<Value, String> {
    let text: Cow<'_, str> = match (&v, kind) {
        (Value::String(_), FieldType::String) => return Ok(v),
        (other, FieldType::String) => return Ok(Value::String(other.to_string())),
        (Value::String(s), _) => Cow::Borrowed(s.trim()),
        (other, _) => Cow::Owned(other.to_string()),
    };
    let converted = match kind {
        // Read with the field's formats by `one_value`.
        FieldType::String | FieldType::DateTime => None,
        FieldType::Int => without_separators(&text)
            .parse::<i64>()
            .ok()
            .map(Value::from),
        FieldType::Float => without_separators(&text)
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number),
        FieldType::Bool => match text.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => Some(Value::Bool(true)),
            "false" | "no" | "off" | "0" => Some(Value::Bool(false)),
            _ => None,
        },
    };
    converted.ok_or_else(|| {
        format!(
            "`{}` is not {}",
            crate::wording::cut(&text, 80),
            match kind {
                FieldType::Int => "a whole number",
                FieldType::Float => "a number",
                FieldType::Bool => "true or false",
                FieldType::String => "text",
                FieldType::DateTime => "a date",
            }
        )
    })
}

/// `text` without the thousands separators pages write: "1,234", "1 234",
/// "1_234" (copied only when it has some).
fn without_separators(text: &str) -> Cow<'_, str> {
    let separator = |c: char| matches!(c, ',' | '_' | ' ' | '\u{a0}');
    if text.contains(separator) {
        Cow::Owned(text.chars().filter(|c| !separator(*c)).collect())
    } else {
        Cow::Borrowed(text)
    }
}
