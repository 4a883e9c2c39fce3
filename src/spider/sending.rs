//! How a follow entry's requests are sent: the HTTP method, a body from a
//! template (`body`) or from form fields (`form`, form-encoded as Scrapy's
//! `FormRequest` sends them), and extra headers, all rendered from the
//! context of each link (the request's context, and for JSON follow
//! entries the fields of the JSON element).
//!
//! The method and body are part of the request's fingerprint, so two POSTs
//! to one URL with different bodies are two requests, and the same POST
//! twice is one (as in Scrapy).

use serde_json::{Map, Value};

use super::template::{MissingField, Template};
use crate::request::Request;

/// The method, body and headers of a follow entry's requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Sending {
    /// Upper-case, e.g. `GET`, `POST`.
    pub method: String,
    pub body: Option<Body>,
    pub headers: Vec<(String, Template)>,
}

/// Where a request body comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// `body = '…'`, sent as rendered.
    Raw(Template),
    /// `form = { q = "{query}" }`: each value rendered, then form-encoded.
    Form(Vec<(String, Template)>),
}

const CONTENT_TYPE: &str = "Content-Type";

impl Default for Sending {
    fn default() -> Self {
        Sending {
            method: "GET".to_string(),
            body: None,
            headers: Vec::new(),
        }
    }
}

impl Sending {
    /// A plain GET without a body or headers: what links on a page are.
    pub fn is_plain(&self) -> bool {
        *self == Sending::default()
    }

    /// The templates this reads, for `check`.
    pub fn templates(&self) -> Vec<&Template> {
        let mut out: Vec<&Template> = self.headers.iter().map(|(_, t)| t).collect();
        match &self.body {
            Some(Body::Raw(t)) => out.push(t),
            Some(Body::Form(fields)) => out.extend(fields.iter().map(|(_, t)| t)),
            None => {}
        }
        out
    }

    /// Sets `request`'s method, body and headers, rendered from `context`.
    /// A form body gets the form content type, a body that is JSON gets
    /// `application/json`, unless a `Content-Type` header is given.
    pub fn apply(
        &self,
        request: &mut Request,
        context: &Map<String, Value>,
    ) -> Result<(), MissingField> {
        if self.is_plain() {
            return Ok(());
        }
        let mut headers = Vec::with_capacity(self.headers.len() + 1);
        for (name, value) in &self.headers {
            headers.push((name.clone(), value.render(context)?));
        }
        let (body, content_type) = match &self.body {
            None => (String::new(), None),
            Some(Body::Raw(t)) => {
                let body = t.render(context)?;
                let json = serde_json::from_str::<Value>(&body)
                    .is_ok_and(|v| v.is_object() || v.is_array());
                (body, json.then_some("application/json"))
            }
            Some(Body::Form(fields)) => {
                let mut form = url::form_urlencoded::Serializer::new(String::new());
                for (name, value) in fields {
                    form.append_pair(name, &value.render(context)?);
                }
                (form.finish(), Some("application/x-www-form-urlencoded"))
            }
        };
        if let Some(ct) = content_type {
            if !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case(CONTENT_TYPE))
            {
                headers.push((CONTENT_TYPE.to_string(), ct.to_string()));
            }
        }
        request.method = self.method.clone();
        request.body = body;
        request.headers = headers;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: &str) -> Template {
        Template::parse(s).unwrap()
    }

    #[test]
    fn a_form_is_encoded_and_typed() {
        let s = Sending {
            method: "POST".into(),
            body: Some(Body::Form(vec![
                ("q".into(), t("{query}")),
                ("page".into(), t("{page}")),
            ])),
            headers: vec![("X-Forum".into(), t("{forum}"))],
        };
        let mut r = Request::get("http://127.0.0.1/api/search");
        let ctx = json!({"query": "rust & 东京", "page": 2, "forum": "00001"});
        s.apply(&mut r, ctx.as_object().unwrap()).unwrap();
        assert_eq!(r.method, "POST");
        assert_eq!(r.body, "q=rust+%26+%E4%B8%9C%E4%BA%AC&page=2");
        assert_eq!(
            r.headers,
            vec![
                ("X-Forum".to_string(), "00001".to_string()),
                (
                    "Content-Type".to_string(),
                    "application/x-www-form-urlencoded".to_string()
                )
            ]
        );
    }

    #[test]
    fn a_json_body_is_labelled_and_a_missing_field_named() {
        let s = Sending {
            method: "POST".into(),
            body: Some(Body::Raw(t(r#"{{"thread": {id}, "page": {page}}}"#))),
            headers: Vec::new(),
        };
        let mut r = Request::get("http://127.0.0.1/api");
        s.apply(&mut r, json!({"id": 7, "page": 1}).as_object().unwrap())
            .unwrap();
        assert_eq!(r.body, r#"{"thread": 7, "page": 1}"#);
        assert_eq!(r.headers[0].1, "application/json");
        let err = s
            .apply(&mut r, json!({"id": 7}).as_object().unwrap())
            .unwrap_err();
        assert_eq!(err, MissingField("page".into()));
        assert!(Sending::default().is_plain());
    }
}
