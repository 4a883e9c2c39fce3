//! `{field}` templates: URL templates of start tasks and pagination limits,
//! rendered from a request's context (`meta`). `{{` and `}}` write braces.

use serde_json::{Map, Value};

/// A parsed template.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    source: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Field(String),
}

impl Template {
    /// Parses `source`; the error says what is wrong in words.
    pub fn parse(source: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut text = String::new();
        let mut chars = source.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    text.push('}');
                }
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(c) if c.is_alphanumeric() || c == '_' || c == '-' => name.push(c),
                            Some(c) => {
                                return Err(format!(
                                    "`{c}` cannot appear in a field name inside `{{…}}`"
                                ))
                            }
                            None => return Err("a `{` is never closed".into()),
                        }
                    }
                    if name.is_empty() {
                        return Err("`{}` names no field".into());
                    }
                    if !text.is_empty() {
                        parts.push(Part::Text(std::mem::take(&mut text)));
                    }
                    parts.push(Part::Field(name));
                }
                '}' => return Err("a `}` has no matching `{` (write `}}` for a brace)".into()),
                c => text.push(c),
            }
        }
        if !text.is_empty() {
            parts.push(Part::Text(text));
        }
        Ok(Template {
            source: source.to_string(),
            parts,
        })
    }

    /// The fields the template reads, in order of first use.
    pub fn fields(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for p in &self.parts {
            if let Part::Field(f) = p {
                if !out.contains(&f.as_str()) {
                    out.push(f);
                }
            }
        }
        out
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Renders with the values of `context`; the error names the first
    /// missing field.
    pub fn render(&self, context: &Map<String, Value>) -> Result<String, MissingField> {
        let mut out = String::new();
        for p in &self.parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Field(f) => match context.get(f) {
                    Some(Value::String(s)) => out.push_str(s),
                    Some(Value::Null) | None => return Err(MissingField(f.clone())),
                    Some(v) => out.push_str(&v.to_string()),
                },
            }
        }
        Ok(out)
    }
}

/// A template named a field the context does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{0}` is missing")]
pub struct MissingField(pub String);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_fields_and_escapes() {
        let t = Template::parse("http://h/list/{forum_id}/{page}?x={{y}}").unwrap();
        assert_eq!(t.fields(), vec!["forum_id", "page"]);
        let ctx = json!({"forum_id": "00001", "page": 3});
        assert_eq!(
            t.render(ctx.as_object().unwrap()).unwrap(),
            "http://h/list/00001/3?x={y}"
        );
        let err = t
            .render(json!({"page": 1}).as_object().unwrap())
            .unwrap_err();
        assert_eq!(err, MissingField("forum_id".into()));
    }

    #[test]
    fn rejects_broken_templates() {
        assert!(Template::parse("http://h/{id").is_err());
        assert!(Template::parse("http://h/{}").is_err());
        assert!(Template::parse("http://h/}").is_err());
        assert!(Template::parse("http://h/{a b}").is_err());
    }
}
