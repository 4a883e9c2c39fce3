//! The login form of a page, read as a browser would submit it: its
//! action (resolved against the page), its method, and every input it
//! would send (hidden ones, such as CSRF tokens, included), before the
//! configured fields fill in theirs. Pure: HTML in, form out.

use scraper::{ElementRef, Html};

use crate::spider::Selector;

/// A form ready to be filled and submitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Form {
    pub action: url::Url,
    /// `GET` or `POST`.
    pub method: String,
    /// Name → value, in document order, as the browser would send them.
    pub fields: Vec<(String, String)>,
}

impl Form {
    /// Sets `name` to `value`, replacing what the page put there.
    pub fn set(&mut self, name: &str, value: &str) {
        match self.fields.iter_mut().find(|(n, _)| n == name) {
            Some(field) => field.1 = value.to_string(),
            None => self.fields.push((name.to_string(), value.to_string())),
        }
    }
}

/// The first element `selector` finds in `html` (a page at `page`), read
/// as a form; `None` when there is none.
pub fn find(html: &str, page: &url::Url, selector: &Selector) -> Option<Form> {
    let doc = Html::parse_document(html);
    let el = selector
        .select(doc.root_element())
        .into_iter()
        .find_map(|s| match s {
            crate::spider::selector::Selected::Element(e) => Some(e),
            crate::spider::selector::Selected::Text(_) => None,
        })?;
    let action = match el.value().attr("action").map(str::trim) {
        Some(a) if !a.is_empty() => page.join(a).ok()?,
        _ => page.clone(),
    };
    let method = match el.value().attr("method") {
        Some(m) if m.eq_ignore_ascii_case("post") => "POST",
        _ => "GET",
    };
    Some(Form {
        action,
        method: method.to_string(),
        fields: inputs(el),
    })
}

/// What the form's controls send: inputs (checked boxes only; no buttons
/// or files), text areas, and each select's chosen option.
fn inputs(form: ElementRef<'_>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for node in form.descendants() {
        let Some(el) = ElementRef::wrap(node) else {
            continue;
        };
        let v = el.value();
        let Some(name) = v.attr("name") else {
            continue;
        };
        let value = match v.name() {
            "input" => {
                let kind = v.attr("type").unwrap_or("text").to_ascii_lowercase();
                match kind.as_str() {
                    "submit" | "button" | "image" | "file" | "reset" => continue,
                    "checkbox" | "radio" if v.attr("checked").is_none() => continue,
                    "checkbox" | "radio" => v.attr("value").unwrap_or("on").to_string(),
                    _ => v.attr("value").unwrap_or_default().to_string(),
                }
            }
            "textarea" => el.text().collect(),
            "select" => chosen(el),
            _ => continue,
        };
        out.push((name.to_string(), value));
    }
    out
}

/// A select's selected option, else its first.
fn chosen(select: ElementRef<'_>) -> String {
    let options: Vec<ElementRef<'_>> = select
        .descendants()
        .filter_map(ElementRef::wrap)
        .filter(|e| e.value().name() == "option")
        .collect();
    let pick = options
        .iter()
        .find(|o| o.value().attr("selected").is_some())
        .or(options.first());
    pick.map(|o| {
        o.value()
            .attr("value")
            .map_or_else(|| o.text().collect(), str::to_string)
    })
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<html><body>
      <form id="search" action="/search"><input name="q"></form>
      <form id="login" action="/members/login?next=%2F" method="post">
        <input type="hidden" name="csrf" value="t0k3n">
        <input name="username"><input type="password" name="password">
        <input type="checkbox" name="remember" checked>
        <input type="checkbox" name="spam">
        <select name="lang"><option value="en">English</option><option value="zh" selected>中文</option></select>
        <textarea name="note">hi</textarea>
        <input type="submit" name="go" value="Log in">
      </form></body></html>"#;

    #[test]
    fn the_chosen_form_keeps_its_action_method_and_hidden_inputs() {
        let page = url::Url::parse("http://forum.test/members/login").expect("url");
        let sel = Selector::parse("form#login").expect("selector");
        let mut form = find(PAGE, &page, &sel).expect("form");
        assert_eq!(
            form.action.as_str(),
            "http://forum.test/members/login?next=%2F"
        );
        assert_eq!(form.method, "POST");
        form.set("username", "alice");
        let fields: Vec<(&str, &str)> = form
            .fields
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            fields,
            [
                ("csrf", "t0k3n"),
                ("username", "alice"),
                ("password", ""),
                ("remember", "on"),
                ("lang", "zh"),
                ("note", "hi"),
            ]
        );
        let none = Selector::parse("form#nope").expect("selector");
        assert!(find(PAGE, &page, &none).is_none());
    }
}
