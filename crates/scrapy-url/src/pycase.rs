//! Python 3.11's `str.lower()`, which w3lib applies to hosts.
//!
//! Rust's `to_lowercase` follows the same rules but with the toolchain's
//! Unicode version (newer than Python 3.11's 14.0), so letters added since
//! would be lower-cased here and not in Python; a host that IDNA refuses is
//! kept in Unicode, so that difference would reach the fingerprint. The
//! mapping and the final-sigma properties therefore come from Python itself
//! (see [`super::tables`]).

use super::tables::{CASED, CASE_IGNORABLE, LOWERCASE};
use super::unicode::in_ranges;

const CAPITAL_SIGMA: char = '\u{3a3}';

/// `text.lower()` as Python 3.11 computes it.
pub(super) fn lower(text: &str) -> String {
    if text.is_ascii() {
        return text.to_ascii_lowercase();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    for (i, &c) in chars.iter().enumerate() {
        if c == CAPITAL_SIGMA {
            out.push(if is_final_sigma(&chars, i) {
                '\u{3c2}'
            } else {
                '\u{3c3}'
            });
        } else {
            match LOWERCASE.binary_search_by_key(&c, |&(k, _)| k) {
                Ok(found) => out.push_str(LOWERCASE[found].1),
                Err(_) => out.push(c),
            }
        }
    }
    out
}

/// CPython's `handle_capital_sigma`: a sigma is final when a cased letter
/// precedes it and none follows, case-ignorable characters aside.
fn is_final_sigma(chars: &[char], i: usize) -> bool {
    let is_ignorable = |c: &&char| in_ranges(CASE_IGNORABLE, **c);
    let before = chars[..i].iter().rev().find(|c| !is_ignorable(c));
    let after = chars[i + 1..].iter().find(|c| !is_ignorable(c));
    before.is_some_and(|&c| in_ranges(CASED, c)) && !after.is_some_and(|&c| in_ranges(CASED, c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_lowercase_mappings() {
        assert_eq!(lower("ÉCOLE.Example"), "école.example");
        assert_eq!(lower("İ"), "i\u{307}");
    }

    #[test]
    fn final_sigma_by_context() {
        assert_eq!(lower("ΣΊΣΥΦΟΣ"), "σίσυφος");
        // "." is case-ignorable, so the first sigma is followed by a letter.
        assert_eq!(lower("ΑΣ.ΒΣ'"), "ασ.βς'");
        assert_eq!(lower("Σ"), "σ");
    }

    #[test]
    fn letters_newer_than_python_3_11_stay() {
        // U+1C89 CYRILLIC CAPITAL LETTER TJE was added in Unicode 16.
        assert_eq!(lower("\u{1c89}"), "\u{1c89}");
    }
}
