//! `[[rules]]`: each rule's name, URL patterns and extract entries (the
//! item, `each`, `jsonld_type`), and whether it does anything at all. Its
//! follow entries are [`super::follow`]'s, its revisits
//! [`super::revisit`]'s.

use regex::Regex;

use super::{Compiler, Names};
use crate::reader::At;
use crate::spider::file::{ExtractFile, ItemFile, RuleFile, SpiderFile};
use crate::spider::selector::Target;
use crate::spider::{limits, Each, Extract, Follow, Rule};

impl Compiler<'_> {
    /// The rules' names in file order ("" for a rule without one), each
    /// problem with them reported once.
    pub(super) fn rule_names<'f>(&self, file: &'f SpiderFile) -> Names<'f> {
        let mut names: Vec<&str> = Vec::new();
        let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
        if file.rules.len() > limits::MAX_RULES {
            self.problem(
                &file.rules[limits::MAX_RULES].loc,
                format!(
                    "the spider has {} rules; at most {} are accepted",
                    file.rules.len(),
                    limits::MAX_RULES
                ),
                "split it into spiders handing links to each other (`to_spider`), or merge rules whose patterns differ little",
            );
        }
        for rule in &file.rules {
            let Some(name) = &rule.name else {
                self.problem(
                    &rule.loc,
                    "a rule has no `name`",
                    "add `name = \"…\"`; follow links and start entries name the rule they lead to",
                );
                names.push("");
                continue;
            };
            if !seen.insert(name.value.as_str()) {
                self.problem(
                    &name.loc,
                    format!("two rules are named `{}`", name.value),
                    "give each rule its own name",
                );
            } else {
                self.name(name, "rule");
            }
            names.push(&name.value);
        }
        Names::new(names)
    }

    pub(super) fn rule(
        &self,
        r: &RuleFile,
        items: &Names<'_>,
        rules: &Names<'_>,
        item_files: &[ItemFile],
    ) -> Option<Rule> {
        let matches: Vec<Option<Regex>> = r.matches.iter().map(|m| self.regex(m)).collect();
        let extract: Vec<Option<Extract>> =
            r.extract.iter().map(|e| self.extract(e, items)).collect();
        let follow: Vec<Option<Follow>> = r.follow.iter().map(|f| self.follow(f, rules)).collect();
        if r.extract.is_empty() && r.follow.is_empty() {
            if let Some(name) = &r.name {
                self.problem(
                    &name.loc,
                    format!(
                        "rule `{}` neither extracts nor follows anything",
                        name.value
                    ),
                    "add `[[rules.extract]]` or `[[rules.follow]]`, or remove the rule",
                );
            }
        }
        let json = self.reads_json(r, item_files);
        let revisit = self.rule_revisit(r, item_files)?;
        let render = self.render(r.render.as_ref());
        if let (Some(Some(_)), Some(true), Some(name)) = (&render, json, &r.name) {
            self.problem(
                &name.loc,
                format!("rule `{}` renders its pages but reads them as JSON", name.value),
                "a rendered page is HTML: read it with CSS or XPath, or drop `render` and read the JSON the page's script fetches",
            );
        }
        if let (Some(Some(_)), Some(true), Some(name)) =
            (&render, r.binary.as_ref().map(|b| b.value), &r.name)
        {
            self.problem(
                &name.loc,
                format!(
                    "rule `{}` renders its pages but takes binary responses",
                    name.value
                ),
                "drop `render` or `binary = true`: Chromium renders HTML pages",
            );
        }
        Some(Rule {
            render: render?,
            revisit,
            name: r.name.as_ref()?.value.clone(),
            matches: matches.into_iter().collect::<Option<_>>()?,
            extract: extract.into_iter().collect::<Option<_>>()?,
            follow: follow.into_iter().collect::<Option<_>>()?,
            json: json?,
            binary: r.binary.as_ref().is_some_and(|b| b.value),
        })
    }

    /// `[[rules.extract]]`: the item it makes, and from what.
    fn extract(&self, e: &ExtractFile, items: &Names<'_>) -> Option<Extract> {
        let Some(item) = &e.item else {
            self.problem(
                &e.loc,
                "an extract entry names no item",
                "add `item = \"…\"` naming one of [items]",
            );
            return None;
        };
        let index = self.lookup(item, items, "item");
        let jsonld_types = self.jsonld_types(e.jsonld_type.as_deref().unwrap_or_default());
        let each = self.each(e)?;
        Some(Extract {
            item: index?,
            each,
            jsonld_types: jsonld_types?,
        })
    }

    /// An extract entry's `each`: elements by CSS or XPath, or JSON values;
    /// `Some(None)` for one item per page.
    fn each(&self, e: &ExtractFile) -> Option<Option<Each>> {
        self.each_of(e.each.as_ref(), e.each_xpath.as_ref())
    }

    /// `each` by CSS (or JSONPath, starting with `$`) or by XPath;
    /// `Some(None)` without one.
    pub(super) fn each_of(
        &self,
        css: Option<&At<String>>,
        xpath: Option<&At<String>>,
    ) -> Option<Option<Each>> {
        match (css, xpath) {
            (Some(each), None) if each.value.starts_with('$') => {
                Some(Some(Each::Json(self.jsonpath(each)?)))
            }
            (Some(each), None) => {
                let sel = self.selector(each)?;
                if *sel.target() != Target::Elements {
                    self.problem(
                        &each.loc,
                        "`each` must select elements, not text or attributes",
                        "remove the `::text` / `::attr(…)` part; fields take values from each element",
                    );
                    return None;
                }
                Some(Some(Each::Css(sel)))
            }
            (None, Some(each)) => {
                let xpath = self.xpath(each)?;
                if !xpath.selects_elements() {
                    self.problem(
                        &each.loc,
                        "`each` must select elements, not text, attributes or a value",
                        "end the path at an element, e.g. `//div[@class='comment']`; fields take values from each element",
                    );
                    return None;
                }
                Some(Some(Each::XPath(xpath)))
            }
            (Some(_), Some(each)) => {
                self.problem(
                    &each.loc,
                    "`each` has both `css` and `xpath`",
                    "keep one of them",
                );
                None
            }
            (None, None) => Some(None),
        }
    }

    /// `jsonld_type = "NewsArticle"` or an array of types.
    fn jsonld_types(&self, types: &[At<String>]) -> Option<Vec<String>> {
        let mut out = Vec::new();
        let mut ok = true;
        for t in types {
            // As pages write it: "schema:NewsArticle", "https://schema.org/NewsArticle".
            let name = t.value.trim();
            let name = name.rsplit(['/', ':', '#']).next().unwrap_or(name);
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                ok = false;
                self.problem(
                    &t.loc,
                    format!("`{}` is not a JSON-LD type name", t.value),
                    "write schema.org type names such as \"NewsArticle\", \"Product\" or [\"NewsArticle\", \"Article\"], without a prefix",
                );
            } else {
                out.push(name.to_string());
            }
        }
        ok.then_some(out)
    }
}
