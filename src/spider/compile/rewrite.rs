//! `rewrite = { … }` on a follow entry: which query parameters a link
//! keeps (`keep_query`) or loses (`remove_query`), regexes replacing
//! parts of it (`replace`), and a jq program (`jq`). Each mistake is
//! reported at its line and column with a fix; applying a rewrite is
//! `crate::extract::rewrite`'s.

use std::sync::LazyLock;

use regex::Regex;

use super::Compiler;
use crate::reader::At;
use crate::spider::file::RewriteFile;
use crate::spider::{QueryParam, QueryRule, Rewrite};

impl Compiler<'_> {
    /// `Some(None)` without a rewrite; `None` on a problem.
    pub(super) fn rewrite(&self, r: Option<&RewriteFile>) -> Option<Option<Rewrite>> {
        let Some(r) = r else {
            return Some(None);
        };
        let nothing = r.remove_query.is_none()
            && r.keep_query.is_none()
            && r.replace.as_ref().is_none_or(|(_, pairs)| pairs.is_empty())
            && r.jq.is_none();
        if nothing {
            self.problem(
                &r.loc,
                "`rewrite` says nothing to do",
                "add `remove_query = [\"page\"]`, `keep_query = [\"id\"]`, `replace = { '/$' = \"\" }` or `jq = '…'`, or remove it",
            );
            return None;
        }
        let query = self.query_rule(r);
        let replace: Vec<Option<(Regex, String)>> = r
            .replace
            .iter()
            .flat_map(|(_, pairs)| pairs)
            .map(|(pattern, with)| self.replacement(pattern, with))
            .collect();
        let jq = r.jq.as_ref().map(|j| {
            self.jq(j, "rewrite jq", "write jq from the URL (a string) to the URL to follow, e.g. 'sub(\"/page-[0-9]+$\"; \"\")'")
        });
        Some(Some(Rewrite {
            query: query?,
            replace: replace.into_iter().collect::<Option<_>>()?,
            jq: jq.map_or(Some(None), |t| t.map(Some))?,
        }))
    }

    /// `keep_query` or `remove_query`, not both.
    fn query_rule(&self, r: &RewriteFile) -> Option<QueryRule> {
        match (&r.keep_query, &r.remove_query) {
            (None, None) => Some(QueryRule::All),
            (Some(keep), None) => self.query_params(keep).map(QueryRule::Keep),
            (None, Some(remove)) => self.query_params(remove).map(QueryRule::Remove),
            (Some(keep), Some(_)) => {
                let loc = keep.first().map_or(&r.loc, |k| &k.loc);
                self.problem(
                    loc,
                    "`rewrite` has both `keep_query` and `remove_query`",
                    "keep one: `keep_query` lists the parameters that stay, `remove_query` those that go",
                );
                None
            }
        }
    }

    /// Query parameters: `page`, `utm_*`, `page=1`.
    fn query_params(&self, list: &[At<String>]) -> Option<Vec<QueryParam>> {
        let mut ok = true;
        let mut params = Vec::with_capacity(list.len());
        for at in list {
            let (name, value) = match at.value.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (at.value.as_str(), None),
            };
            let (name, prefix) = match name.strip_suffix('*') {
                Some(n) => (n, true),
                None => (name, false),
            };
            let bad = (name.is_empty() && !prefix)
                || name.contains(['&', '#', '?', '*', ' '])
                || (prefix && value.is_some());
            if bad {
                ok = false;
                self.problem(
                    &at.loc,
                    format!("`{}` is not a query parameter", at.value),
                    "name a parameter (`page`), a parameter with its value (`page=1`), or a name prefix (`utm_*`)",
                );
                continue;
            }
            params.push(QueryParam {
                name: name.to_string(),
                prefix,
                value,
            });
        }
        ok.then_some(params)
    }

    /// One `replace` pair: the regex, and a replacement whose `$1` or
    /// `${name}` name groups the regex has.
    fn replacement(&self, pattern: &At<String>, with: &At<String>) -> Option<(Regex, String)> {
        let re = self.regex(pattern)?;
        static GROUP: LazyLock<Option<Regex>> =
            LazyLock::new(|| Regex::new(r"\$(?:\$|\{(\w+)\}|(\w+))").ok());
        let Some(group) = GROUP.as_ref() else {
            return Some((re, with.value.clone()));
        };
        for caps in group.captures_iter(&with.value) {
            let Some(name) = caps.get(1).or(caps.get(2)).map(|m| m.as_str()) else {
                continue;
            };
            let known = match name.parse::<usize>() {
                Ok(n) => n < re.captures_len(),
                Err(_) => re.capture_names().flatten().any(|n| n == name),
            };
            if !known {
                self.problem(
                    &with.loc,
                    format!("the replacement `{}` names group `{name}`, which `{}` does not have", with.value, pattern.value),
                    format!("capture it in the regex with (…), or write `$$` for a literal `$`; this regex has {} group(s)", re.captures_len() - 1),
                );
                return None;
            }
        }
        Some((re, with.value.clone()))
    }
}
