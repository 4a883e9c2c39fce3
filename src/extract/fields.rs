//! Item fields: the values a field's source yields, then whitespace
//! cleaning, regex capture, URL resolution, type conversion, and first /
//! all / joined, with defaults and required fields.

use scraper::ElementRef;
use serde_json::{Map, Number, Value};

use super::page::Page;
use crate::request::absolute_url;
use crate::spider::{Field, FieldSource, FieldType, ItemDef, PageValue, Whitespace};

/// The fields of one item, or why it was dropped.
pub fn item(
    def: &ItemDef,
    scope: ElementRef<'_>,
    page: &Page<'_>,
) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for field in &def.fields {
        let value = match value(field, scope, page)? {
            Some(v) => v,
            None => match &field.default {
                Some(d) => d.clone(),
                None if field.required => {
                    return Err(format!("required field `{}` is missing", field.name))
                }
                None => Value::Null,
            },
        };
        out.insert(field.name.clone(), value);
    }
    Ok(out)
}

/// The finished value of a field; `None` when the page has none. A value
/// that cannot be converted to the field's type is an error only when the
/// field is required; otherwise it counts as missing.
fn value(field: &Field, scope: ElementRef<'_>, page: &Page<'_>) -> Result<Option<Value>, String> {
    let mut raw = source_values(field, scope, page);
    // A joined field is cleaned as one text, so the whitespace between text
    // nodes ("in <a>our archive</a>.") separates words as on the page.
    if let Some(sep) = &field.join {
        if raw.is_empty() {
            return Ok(None);
        }
        let joined = raw.iter().map(as_text).collect::<Vec<_>>().join(sep);
        raw = vec![Value::String(joined)];
    }
    let mut values = Vec::new();
    for v in raw {
        let Value::String(s) = v else {
            values.push(v);
            continue;
        };
        for s in capture(field, clean(&s, field.whitespace)) {
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

fn source_values(field: &Field, scope: ElementRef<'_>, page: &Page<'_>) -> Vec<Value> {
    match &field.source {
        FieldSource::Css(sel) => sel.strings(scope).into_iter().map(Value::String).collect(),
        FieldSource::Page(PageValue::Url) => vec![Value::String(page.response.url.to_string())],
        FieldSource::Page(PageValue::Status) => vec![Value::from(page.response.status)],
        FieldSource::Page(PageValue::Depth) => vec![Value::from(page.request.depth)],
        FieldSource::Meta(name) => match page.request.meta.get(name) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) if field.all => a.clone(),
            Some(v) => vec![v.clone()],
        },
        FieldSource::Const(v) => vec![v.clone()],
    }
}

fn clean(s: &str, mode: Whitespace) -> String {
    match mode {
        Whitespace::Keep => s.to_string(),
        Whitespace::Strip => s.trim().to_string(),
        Whitespace::Normalize => s.split_whitespace().collect::<Vec<_>>().join(" "),
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

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Converts one value; the error shows the value that did not fit.
fn convert(v: Value, kind: FieldType) -> Result<Value, String> {
    let text = match &v {
        Value::String(s) => s.trim().to_string(),
        other => other.to_string(),
    };
    let bad = || {
        format!(
            "`{text}` is not {}",
            match kind {
                FieldType::Int => "a whole number",
                FieldType::Float => "a number",
                FieldType::Bool => "true or false",
                FieldType::String => "text",
            }
        )
    };
    match kind {
        FieldType::String => Ok(match v {
            Value::String(_) => v,
            other => Value::String(other.to_string()),
        }),
        FieldType::Int => {
            // Pages write thousands separators: "1,234", "1 234", "1_234".
            let digits: String = text
                .chars()
                .filter(|c| !matches!(c, ',' | '_' | ' ' | '\u{a0}'))
                .collect();
            digits.parse::<i64>().map(Value::from).map_err(|_| bad())
        }
        FieldType::Float => {
            let digits: String = text
                .chars()
                .filter(|c| !matches!(c, ',' | '_' | ' ' | '\u{a0}'))
                .collect();
            digits
                .parse::<f64>()
                .ok()
                .and_then(Number::from_f64)
                .map(Value::Number)
                .ok_or_else(bad)
        }
        FieldType::Bool => match text.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => Ok(Value::Bool(true)),
            "false" | "no" | "off" | "0" => Ok(Value::Bool(false)),
            _ => Err(bad()),
        },
    }
}
