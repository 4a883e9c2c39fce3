//! The values every section of a spider file writes: regexes (counted
//! against the spider's limit), CSS selectors, XPaths, `{field}`
//! templates, names, allowed domains and numbers given directly or as
//! templates. Each is built here, or reported where it is written; which
//! key may hold which value is the sections' business.

use regex::Regex;

use super::Compiler;
use crate::reader::At;
use crate::spider::file::IntOrTemplate;
use crate::spider::{limits, AllowedDomain, IntSource, Selector, Template, XPath};

/// Name of spiders, rules and items: they appear in Redis keys and logs.
pub(super) fn valid_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// An HTTP method as written in capitals (`GET`, `POST`, `M-SEARCH`).
pub(super) fn is_http_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_uppercase() || b == b'-')
}

impl Compiler<'_> {
    pub(super) fn regex(&self, at: &At<String>) -> Option<Regex> {
        if !self.regex_within_limits(at) {
            return None;
        }
        limits::regex(&at.value)
            .map_err(|e| {
                let detail = e.to_string();
                let last = detail.lines().last().unwrap_or("").trim().to_string();
                self.problem(
                    &at.loc,
                    format!("`{}` is not a valid regex: {last}", crate::wording::cut(&at.value, 200)),
                    "regexes use Rust syntax (Python's `re` without look-around or backreferences); escape a literal `.` or `?` with `\\`",
                )
            })
            .ok()
    }

    /// Whether one more regex fits the spider's limits: how many it may
    /// hold, and how much memory they may take together (measured before
    /// it is compiled for use). Each limit is reported once, where it is
    /// passed; past either, no more regexes are compiled, so a hostile file
    /// fails fast.
    fn regex_within_limits(&self, at: &At<String>) -> bool {
        let n = self.patterns.get();
        self.patterns.set(n + 1);
        if n >= limits::MAX_PATTERNS {
            if n == limits::MAX_PATTERNS {
                self.problem(
                    &at.loc,
                    format!(
                        "the spider has more than {} regexes (`deny`, `match`, `allow`, `re`, …)",
                        limits::MAX_PATTERNS
                    ),
                    "merge patterns into one with `|`, or filter URLs before they reach Redis",
                );
            }
            return false;
        }
        if self.regex_memory.get() > limits::MAX_REGEX_MEMORY {
            return false;
        }
        let this = limits::regex_memory(&at.value);
        let memory = self.regex_memory.get() + this;
        self.regex_memory.set(memory);
        if memory > limits::MAX_REGEX_MEMORY {
            self.problem(
                &at.loc,
                format!(
                    "the spider's regexes take {} MiB compiled, more than the {} MiB a spider may (this one {} KiB)",
                    memory >> 20,
                    limits::MAX_REGEX_MEMORY >> 20,
                    this >> 10
                ),
                "merge patterns into one with `|` (an alternation costs far less than its parts apart), prefer `\\d` or `[a-z]` to Unicode classes such as `\\w`, or filter URLs before they reach Redis",
            );
            return false;
        }
        true
    }

    pub(super) fn selector(&self, at: &At<String>) -> Option<Selector> {
        // CSS never starts with `$`; a JSONPath always does.
        if at.value.trim_start().starts_with('$') {
            self.problem(
                &at.loc,
                format!("`{}` is a JSONPath, not a CSS selector", at.value),
                format!(
                    "write it as {{ json = \"{}\" }} (for a JSON response)",
                    at.value
                ),
            );
            return None;
        }
        Selector::parse(&at.value)
            .map_err(|e| {
                self.problem(
                    &at.loc,
                    e,
                    "write CSS with Scrapy's pseudo-elements, e.g. `h1::text`, `div.body ::text`, `a::attr(href)`",
                )
            })
            .ok()
    }

    pub(super) fn xpath(&self, at: &At<String>) -> Option<XPath> {
        XPath::parse(&at.value)
            .map_err(|e| {
                self.problem(
                    &at.loc,
                    e,
                    "write XPath 1.0 as in Scrapy, e.g. `//h1/text()`, `//a[contains(@class, 'next')]/@href`, `normalize-space(//div[@id='body'])`",
                )
            })
            .ok()
    }

    pub(super) fn template(&self, at: &At<String>) -> Option<Template> {
        Template::parse(&at.value)
            .map_err(|e| {
                self.problem(
                    &at.loc,
                    format!("`{}` is not a valid template: {e}", at.value),
                    "write `{field}` to insert a task field, `{{` for a literal brace",
                )
            })
            .ok()
    }

    pub(super) fn name(&self, at: &At<String>, what: &str) -> bool {
        let ok = valid_name(&at.value);
        if !ok {
            self.problem(
                &at.loc,
                format!("`{}` is not a valid {what} name", at.value),
                "use letters, digits, `_`, `-` and `.`, starting with a letter or digit",
            );
        }
        ok
    }

    /// An `allowed_domains` entry: a host, lower-cased, without a trailing
    /// dot, and the port it may name (`"127.0.0.1:8731"`, `"[::1]:80"`).
    pub(super) fn domain(&self, at: &At<String>) -> Option<AllowedDomain> {
        match parse_domain(&at.value) {
            Ok(d) => Some(d),
            Err(what) => {
                self.problem(
                    &at.loc,
                    format!("`{}` is {what}", at.value),
                    "write the host, e.g. \"bbs.example.com\" (its subdomains are allowed too), or the host and one port, e.g. \"127.0.0.1:8731\"",
                );
                None
            }
        }
    }

    /// A number written directly (within `range`) or as a template.
    pub(super) fn int_source(
        &self,
        at: &At<IntOrTemplate>,
        known: &Option<Vec<String>>,
        range: std::ops::RangeInclusive<i64>,
    ) -> Option<IntSource> {
        match &at.value {
            IntOrTemplate::Int(i) if !range.contains(i) => {
                self.problem(
                    &at.loc,
                    format!("{i} is out of range"),
                    format!(
                        "use a whole number from {} to {}",
                        range.start(),
                        range.end()
                    ),
                );
                None
            }
            IntOrTemplate::Int(i) => Some(IntSource::Fixed(*i)),
            IntOrTemplate::Template(s) => {
                let t = self.template(&At::new(s.clone(), at.loc.clone()))?;
                if t.fields().is_empty() {
                    self.problem(
                        &at.loc,
                        format!("\"{s}\" is a string, not a number"),
                        "write a number without quotes, or a \"{field}\" template",
                    );
                    return None;
                }
                if let Some(fields) = known {
                    for f in t.fields() {
                        if !fields.iter().any(|k| k == f) {
                            self.problem(
                                &at.loc,
                                format!("`{{{f}}}` is not a task field"),
                                format!("task_fields lists: {}", fields.join(", ")),
                            );
                        }
                    }
                }
                Some(IntSource::Template(t))
            }
        }
    }
}

/// Reads an `allowed_domains` entry; the error says what it is instead.
fn parse_domain(raw: &str) -> Result<AllowedDomain, String> {
    let d = raw.trim().to_ascii_lowercase();
    if d.is_empty() {
        return Err("an empty domain".into());
    }
    if d.contains("://") || d.contains('/') {
        return Err("a URL, not a domain".into());
    }
    let (host, port) = if let Some(rest) = d.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or("an IPv6 address without its closing `]`")?;
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err("not a host or a host:port".into()),
            },
        }
    } else {
        match d.split_once(':') {
            Some((_, rest)) if rest.contains(':') => {
                return Err("an IPv6 address without brackets (write it as \"[::1]\")".into())
            }
            Some((host, port)) => (host, Some(port)),
            None => (d.as_str(), None),
        }
    };
    let host = host.trim_end_matches('.');
    if host.is_empty() {
        return Err("a port without a host".into());
    }
    let port = match port {
        Some(p) => Some(
            p.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("a host with `{p}`, which is not a port (1 to 65535)"))?,
        ),
        None => None,
    };
    Ok(AllowedDomain {
        host: host.to_string(),
        port,
    })
}

#[cfg(test)]
mod domain_tests {
    use super::*;

    #[test]
    fn a_domain_may_name_one_port() {
        let ok = |raw: &str| parse_domain(raw).unwrap();
        assert_eq!(
            ok("Example.COM."),
            AllowedDomain {
                host: "example.com".into(),
                port: None
            }
        );
        assert_eq!(
            ok("127.0.0.1:8731"),
            AllowedDomain {
                host: "127.0.0.1".into(),
                port: Some(8731)
            }
        );
        assert_eq!(
            ok("[::1]:80"),
            AllowedDomain {
                host: "::1".into(),
                port: Some(80)
            }
        );
        assert_eq!(
            ok("[::1]"),
            AllowedDomain {
                host: "::1".into(),
                port: None
            }
        );
        assert_eq!(ok("127.0.0.1:8731").to_string(), "127.0.0.1:8731");
        assert_eq!(ok("[::1]:80").to_string(), "[::1]:80");
        for (raw, what) in [
            ("", "an empty domain"),
            ("http://a.com", "a URL"),
            ("a.com:http", "not a port"),
            ("a.com:0", "not a port"),
            ("a.com:70000", "not a port"),
            (":80", "a port without a host"),
            ("::1", "without brackets"),
        ] {
            let e = parse_domain(raw).unwrap_err();
            assert!(e.contains(what), "{raw}: {e}");
        }
    }
}
