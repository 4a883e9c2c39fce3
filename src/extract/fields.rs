//! Item fields: the values a field's source yields (CSS, XPath, JSON-LD,
//! `<meta>` properties, the page, the context, a constant; in an HTML
//! element, or in a JSON value: [`Scope`]), then whitespace cleaning, regex
//! capture, URL resolution, type conversion, and first / all / joined, with
//! defaults and required fields; then the field's checks (`expect`,
//! `non_empty`, `pattern`, `min`/`max`, lengths).

use std::borrow::Cow;

use scraper::ElementRef;
use serde_json::{Map, Number, Value};

use super::page::Page;
use super::DropReason;
use crate::request::absolute_url;
use crate::spider::selector::Selected;
use crate::spider::{
    Field, FieldChecks, FieldSource, FieldType, ItemDef, PageValue, ValueKind, Whitespace,
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
/// JSON-LD types its `jsonld` fields read (any when empty).
pub fn item(
    def: &ItemDef,
    scope: Scope<'_>,
    page: &Page<'_>,
    jsonld_types: &[String],
) -> Result<Map<String, Value>, Drop> {
    let mut out = Map::with_capacity(def.fields.len());
    for field in &def.fields {
        let value = match value(field, scope, page, jsonld_types)
            .map_err(|m| (DropReason::WrongType, m))?
        {
            Some(v) => v,
            None => match &field.default {
                Some(d) => d.clone(),
                None if field.required => {
                    return Err((
                        DropReason::MissingRequiredField,
                        format!("required field `{}` is missing", field.name),
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
    let name = &field.name;
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

/// The finished value of a field; `None` when the page has none. A value
/// that cannot be converted to the field's type is an error only when the
/// field is required; otherwise it counts as missing.
fn value(
    field: &Field,
    scope: Scope<'_>,
    page: &Page<'_>,
    jsonld_types: &[String],
) -> Result<Option<Value>, String> {
    let mut raw = source_values(field, scope, page, jsonld_types);
    // A joined field is cleaned as one text, so the whitespace between text
    // nodes ("in <a>our archive</a>.") separates words as on the page.
    if let Some(sep) = &field.join {
        if raw.is_empty() {
            return Ok(None);
        }
        let mut joined = String::new();
        for (i, v) in raw.iter().enumerate() {
            if i > 0 {
                joined.push_str(sep);
            }
            match v {
                Value::String(s) => joined.push_str(s),
                other => joined.push_str(&other.to_string()),
            }
        }
        raw = vec![Value::String(joined)];
    }
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
    let mut typed = Vec::with_capacity(values.len());
    for v in values {
        let converted = match field.kind {
            Some(kind) => convert(v, kind),
            None => Ok(v),
        };
        match converted {
            Ok(v) => typed.push(v),
            Err(bad) if field.required => {
                return Err(format!("field `{}`: {bad}", field.name));
            }
            Err(_) => {}
        }
    }
    Ok(if field.all && field.join.is_none() {
        (!typed.is_empty()).then_some(Value::Array(typed))
    } else {
        typed.into_iter().next()
    })
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
        Whitespace::Strip if s.trim().len() == s.len() => s,
        Whitespace::Strip => s.trim().to_string(),
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
        FieldType::String => None,
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
            "`{text}` is not {}",
            match kind {
                FieldType::Int => "a whole number",
                FieldType::Float => "a number",
                FieldType::Bool => "true or false",
                FieldType::String => "text",
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
