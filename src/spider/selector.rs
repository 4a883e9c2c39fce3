//! CSS selectors with Scrapy/parsel's pseudo-elements, compiled once:
//!
//! - `h1::text`: the text nodes that are direct children of each `h1`;
//! - `div ::text` (note the space): every text node inside each `div`,
//!   its own and its descendants', in document order;
//! - `a::attr(href)`: the attribute's value;
//! - no pseudo-element: the elements themselves (their outer HTML as a
//!   value; their links when following).
//!
//! An empty CSS part (`::text`, `::attr(data-id)`) means the element the
//! selector is applied to, as with `each` nodes.

use scraper::{ElementRef, Node};

/// A compiled selector.
#[derive(Debug, Clone)]
pub struct Selector {
    source: String,
    css: Option<scraper::Selector>,
    target: Target,
}

/// What a selector yields from each matched element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Elements,
    /// Text nodes: direct children only, or all descendants.
    Text {
        descendants: bool,
    },
    Attr(String),
}

/// One value a selector found, borrowed from the document.
#[derive(Debug, Clone, Copy)]
pub enum Selected<'a> {
    Element(ElementRef<'a>),
    Text(&'a str),
}

impl Selector {
    /// Compiles `source`; the error explains what is wrong.
    pub fn parse(source: &str) -> Result<Selector, String> {
        let trimmed = source.trim();
        super::limits::check_selector(trimmed, "CSS selector")?;
        let (css, target) = split_pseudo(trimmed)?;
        let css_text = css.trim();
        let css = if css_text.is_empty() {
            None
        } else {
            Some(scraper::Selector::parse(css_text).map_err(|e| {
                format!("`{css_text}` is not a valid CSS selector: {}", describe(&e))
            })?)
        };
        Ok(Selector {
            source: source.to_string(),
            css,
            target,
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Calls `found` with everything the selector yields within `scope`
    /// (the scope itself included, as parsel's `descendant-or-self` does),
    /// in document order. Nothing is copied: pages have many selectors and
    /// most of what they yield is read once.
    pub fn each<'a>(&self, scope: ElementRef<'a>, mut found: impl FnMut(Selected<'a>)) {
        match &self.css {
            Some(css) => {
                for el in scope.select(css) {
                    self.yield_from(el, &mut found);
                }
            }
            None => self.yield_from(scope, &mut found),
        }
    }

    /// What the target yields from one matched element.
    fn yield_from<'a>(&self, el: ElementRef<'a>, found: &mut impl FnMut(Selected<'a>)) {
        let text = |node: &'a Node| match node {
            Node::Text(t) => Some(Selected::Text(t)),
            _ => None,
        };
        match &self.target {
            Target::Elements => found(Selected::Element(el)),
            Target::Attr(name) => {
                if let Some(v) = el.value().attr(name) {
                    found(Selected::Text(v));
                }
            }
            Target::Text { descendants: true } => el
                .descendants()
                .filter_map(|n| text(n.value()))
                .for_each(found),
            Target::Text { descendants: false } => el
                .children()
                .filter_map(|n| text(n.value()))
                .for_each(found),
        }
    }

    /// Everything the selector yields within `scope`, in document order.
    pub fn select<'a>(&self, scope: ElementRef<'a>) -> Vec<Selected<'a>> {
        let mut out = Vec::new();
        self.each(scope, |s| out.push(s));
        out
    }

    /// The yielded values as strings (elements as their outer HTML).
    pub fn strings(&self, scope: ElementRef<'_>) -> Vec<String> {
        let mut out = Vec::new();
        self.each(scope, |s| {
            out.push(match s {
                Selected::Element(e) => e.html(),
                Selected::Text(t) => t.to_owned(),
            })
        });
        out
    }
}

/// Splits a trailing `::text` / `::attr(name)` off the CSS part. A space
/// (or nothing) before the pseudo-element means "any descendant".
fn split_pseudo(s: &str) -> Result<(&str, Target), String> {
    let Some(at) = s.rfind("::") else {
        return Ok((s, Target::Elements));
    };
    let (css, pseudo) = (&s[..at], &s[at + 2..]);
    let descendant = css.is_empty() || css.ends_with(char::is_whitespace) || css.ends_with('*');
    if pseudo == "text" {
        let css = css.trim_end();
        // `div *::text` and `div ::text` both mean every text node in `div`.
        let css = css.strip_suffix('*').map_or(css, str::trim_end);
        let descendants = descendant && !css.is_empty();
        return Ok((css, Target::Text { descendants }));
    }
    if let Some(name) = pseudo
        .strip_prefix("attr(")
        .and_then(|r| r.strip_suffix(')'))
    {
        let name = name.trim();
        if name.is_empty() {
            return Err("`::attr()` needs an attribute name, e.g. `a::attr(href)`".into());
        }
        if descendant && !css.trim().is_empty() {
            return Err(format!(
                "`{s}` has a space before `::attr`; write `{}::attr({name})`",
                css.trim_end()
            ));
        }
        return Ok((css, Target::Attr(name.to_string())));
    }
    Err(format!(
        "unknown pseudo-element `::{pseudo}`; use `::text` or `::attr(name)`"
    ))
}

fn describe(e: &scraper::error::SelectorErrorKind<'_>) -> String {
    let s = e.to_string();
    // The selectors crate refuses `:has()` inside `:has()` (as browsers do)
    // with an internal error.
    if s.contains("InvalidState") || s.contains("report this to the developer") {
        return "the selector is not supported (e.g. `:has()` inside `:has()`, which CSS forbids); write it another way, e.g. `div:has(a)` or `div:has(p a)`".to_string();
    }
    if s.is_empty() {
        format!("{e:?}")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scraper::Html;

    fn texts(sel: &str, html: &str) -> Vec<String> {
        let doc = Html::parse_document(html);
        Selector::parse(sel).unwrap().strings(doc.root_element())
    }

    #[test]
    fn parsel_text_semantics() {
        let html = "<div class=x>a<b>b</b>c</div>";
        assert_eq!(texts("div::text", html), ["a", "c"]);
        assert_eq!(texts("div ::text", html), ["a", "b", "c"]);
        assert_eq!(texts("div *::text", html), ["a", "b", "c"]);
        assert_eq!(texts("div.x b::text", html), ["b"]);
    }

    #[test]
    fn a_nested_has_is_refused_in_words() {
        let e = Selector::parse("div:has(:has(a))")
            .err()
            .unwrap_or_default();
        assert!(e.contains(":has()` inside `:has()"), "{e}");
        assert!(!e.contains("report this to the developer"), "{e}");
    }

    #[test]
    fn attributes_and_elements() {
        let html = r#"<p><a href="/1">one</a><a>none</a><a href="/2">two</a></p>"#;
        assert_eq!(texts("a::attr(href)", html), ["/1", "/2"]);
        assert_eq!(texts("p a", html).len(), 3);
    }

    #[test]
    fn scope_itself_with_empty_css() {
        let doc = Html::parse_document(r#"<div data-id="c1">hi<span>x</span></div>"#);
        let div = doc
            .select(&scraper::Selector::parse("div").unwrap())
            .next()
            .unwrap();
        assert_eq!(
            Selector::parse("::attr(data-id)").unwrap().strings(div),
            ["c1"]
        );
        assert_eq!(Selector::parse("::text").unwrap().strings(div), ["hi"]);
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(Selector::parse("div[")
            .unwrap_err()
            .contains("not a valid CSS selector"));
        assert!(Selector::parse("a::href")
            .unwrap_err()
            .contains("unknown pseudo-element"));
        assert!(Selector::parse("a ::attr(href)")
            .unwrap_err()
            .contains("space before"));
    }
}
