//! How numbers read in messages for people: `1 page`, `3 pages`. One place,
//! so every command and log line says it the same way.

/// `1 rule`, `3 rules`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `1 entry`, `0 entries`: [`plural`] for words that only add `s`.
pub fn count(n: usize, word: &str) -> String {
    plural(n, word, &format!("{word}s"))
}
