//! How numbers read in messages for people: `1 page`, `3 pages`, `1.2s`,
//! and how much of a huge input a message shows ([`cut`]). One place, so
//! every command and log line says it the same way.

use std::borrow::Cow;

/// `1 rule`, `3 rules`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `1 entry`, `0 entries`: [`plural`] for words that only add `s`.
pub fn count(n: usize, word: &str) -> String {
    plural(n, word, &format!("{word}s"))
}

/// A duration as people read it: `250ms`, `1.2s`, `3m 20s`.
pub fn duration(d: std::time::Duration) -> String {
    if d < std::time::Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d < std::time::Duration::from_secs(60) {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        humantime::format_duration(std::time::Duration::from_secs(d.as_secs())).to_string()
    }
}

/// `s` cut to at most `max` bytes (at a character boundary), followed by
/// `…` and its full length when it was longer: what a log line, a message
/// or a record shows of input that may be huge (a 5 MB start entry).
pub fn cut(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}… ({} bytes in all)", &s[..end], s.len()))
}

/// Bytes as people read them: UTF-8 text as it is, every byte that is not
/// part of it as `\xNN` (`caf\xe9` for a Latin-1 `café`), for messages
/// and records about entries that are not UTF-8 text (in those, control
/// characters are shown as `\xNN` too). Cut it with [`cut`].
pub fn escaped(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        // Control characters too: such bytes go to log lines.
        for c in chunk.valid().chars() {
            if c.is_ascii_control() {
                out.push_str(&format!("\\x{:02x}", c as u32));
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn counts_and_durations_read_naturally() {
        assert_eq!(count(1, "entry"), "1 entry");
        assert_eq!(plural(2, "entry", "entries"), "2 entries");
        assert_eq!(duration(Duration::from_millis(92)), "92ms");
        assert_eq!(duration(Duration::from_millis(1234)), "1.2s");
        assert_eq!(duration(Duration::from_secs(200)), "3m 20s");
    }

    #[test]
    fn cut_keeps_short_text_and_cuts_long_text_at_a_character() {
        assert_eq!(cut("short", 10), "short");
        let long = "é".repeat(1000);
        let shown = cut(&long, 101);
        assert!(shown.starts_with(&"é".repeat(50)), "{shown}");
        assert!(shown.ends_with("… (2000 bytes in all)"), "{shown}");
        assert!(shown.len() < 130);
    }

    #[test]
    fn escaped_shows_text_as_it_is_and_other_bytes_as_hex() {
        assert_eq!(escaped(b"cafe"), "cafe");
        assert_eq!(escaped(b"caf\xe9"), r"caf\xe9");
        assert_eq!(escaped(b"\xc3\xa9\xff"), r"é\xff");
        assert_eq!(escaped(b"\xff\xfe ok \xc3"), r"\xff\xfe ok \xc3");
        assert_eq!(escaped(b"x\0\n\xff"), r"x\x00\x0a\xff");
    }
}
