//! How big a spider file and what it contains may be: the file itself, the
//! number of rules and patterns, the length and nesting of selectors and
//! the size of compiled regexes.
//!
//! Each limit is far above what a real spider needs and low enough that a
//! hostile or generated file fails fast with a clear message instead of
//! overflowing a parser's stack (the CSS, JSONPath and XPath parsers
//! recurse once per bracket) or taking gigabytes of memory. Nesting is
//! measured here, before any parser sees the text.

/// Largest spider file read, in bytes.
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// Most `[[rules]]` in one spider.
pub const MAX_RULES: usize = 1000;

/// Most regexes (`deny`, `match`, `allow`, `re`, …) in one spider: each
/// compiled regex costs a few KiB, and every link is matched against its
/// rule's lists.
pub const MAX_PATTERNS: usize = 10_000;

/// Longest CSS selector or JSONPath, in characters (XPath has its own, the
/// same: [`crate::spider::xpath`]).
pub const MAX_SELECTOR_LEN: usize = 4096;

/// Deepest nesting of brackets and parentheses in a CSS selector or a
/// JSONPath.
pub const MAX_NESTING: usize = 32;

/// Most memory one compiled regex may take (the `regex` crate's
/// `size_limit`, and its lazy DFA's cache).
pub const MAX_REGEX_BYTES: usize = 1 << 20;

/// Deepest nesting of groups and repetitions in a regex.
pub const MAX_REGEX_NESTING: u32 = 64;

/// Most memory all of a spider's compiled regexes may take together (each
/// within [`MAX_REGEX_BYTES`]): 10,000 patterns of 1 MiB would need 10 GB
/// (a 139 KB spider of `\w{20}#` patterns did), while a plain pattern
/// such as `/post/(\d+)$` takes about 40 KiB, so some 6,000 of them fit.
pub const MAX_REGEX_MEMORY: usize = 256 << 20;

/// Deepest nesting of arrays and objects in a field's value (after its
/// transform), and in what a transform reads with `fromjson` or returns:
/// an item holding it, its nested `fields` around it, stays within the 128
/// levels serde_json reads (the exporter, `crawlworker items`), and jq's
/// recursion on a value within it fits a transform's stack. A JSON page
/// itself is read within those 128.
pub const MAX_VALUE_DEPTH: usize = 64;

/// Whether `v` nests arrays and objects deeper than `max` (`[]` is one
/// deep), found without recursion.
pub fn nests_deeper(v: &serde_json::Value, max: usize) -> bool {
    use serde_json::Value;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(o) => Box::new(o.values()),
            _ => continue,
        };
        if depth + 1 > max {
            return true;
        }
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    false
}

/// The deepest nesting of `(` and `[` in `text` (closing brackets without
/// an opening one count as nothing), measured without recursion.
pub fn nesting(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for c in text.chars() {
        match c {
            '(' | '[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Refuses a selector of language `what` (`CSS selector`, `JSONPath`)
/// that is longer or nests deeper than the limits, before it is parsed.
pub fn check_selector(text: &str, what: &str) -> Result<(), String> {
    let depth = nesting(text);
    if depth > MAX_NESTING {
        return Err(format!(
            "the {what} nests brackets and parentheses {depth} deep; at most {MAX_NESTING} are accepted"
        ));
    }
    let len = text.chars().count();
    if len > MAX_SELECTOR_LEN {
        return Err(format!(
            "the {what} is {len} characters long; at most {MAX_SELECTOR_LEN} are accepted"
        ));
    }
    Ok(())
}

/// Compiles a regex within [`MAX_REGEX_BYTES`] and [`MAX_REGEX_NESTING`].
pub fn regex(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(pattern)
        .size_limit(MAX_REGEX_BYTES)
        .dfa_size_limit(MAX_REGEX_BYTES)
        .nest_limit(MAX_REGEX_NESTING)
        .build()
}

/// The memory a regex takes once compiled (its engines, not the caches a
/// search fills, which [`MAX_REGEX_BYTES`] bounds), measured on the
/// engine the `regex` crate builds on, with the same limits. A pattern it
/// cannot build counts as the most one may take.
pub fn regex_memory(pattern: &str) -> usize {
    use regex_automata::meta;
    let config = meta::Config::new()
        .nfa_size_limit(Some(MAX_REGEX_BYTES))
        .dfa_size_limit(Some(MAX_REGEX_BYTES))
        .hybrid_cache_capacity(MAX_REGEX_BYTES);
    let syntax = regex_automata::util::syntax::Config::new().nest_limit(MAX_REGEX_NESTING);
    meta::Builder::new()
        .configure(config)
        .syntax(syntax)
        .build(pattern)
        .map_or(MAX_REGEX_BYTES, |r| r.memory_usage())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_counts_the_deepest_bracket() {
        assert_eq!(nesting("a"), 0);
        assert_eq!(nesting("a:not(.b):not(.c)"), 1);
        assert_eq!(nesting("$[?(@.a[0])]"), 3);
        assert_eq!(nesting("))(("), 2);
    }

    #[test]
    fn deep_or_long_selectors_are_refused_before_parsing() {
        let deep = format!("{}a{}", ":not(".repeat(3000), ")".repeat(3000));
        let e = check_selector(&deep, "CSS selector").unwrap_err();
        assert!(e.contains("3000 deep") && e.contains("at most 32"), "{e}");
        let long = "a ".repeat(MAX_SELECTOR_LEN / 2 + 1);
        let e = check_selector(&long, "CSS selector").unwrap_err();
        assert!(e.contains("at most 4096"), "{e}");
        assert!(check_selector("div.post > a::attr(href)", "CSS selector").is_ok());
    }

    #[test]
    fn a_regex_s_memory_is_measured() {
        let small = regex_memory(r"/post/(\d+)$");
        let large = regex_memory(r"\w{20}#");
        assert!(small < 64 << 10, "{small}");
        assert!(large > 16 * small, "{small} {large}");
    }

    #[test]
    fn huge_regexes_are_refused() {
        assert!(regex(r"\w{1000}\w{1000}").is_err());
        assert!(regex(&format!("{}a{}", "(".repeat(100), ")".repeat(100))).is_err());
        assert!(regex(r"/post/(\d+)$").is_ok());
    }
}
