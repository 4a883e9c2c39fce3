//! Percent-encoding and query-string primitives with w3lib 2.5.0's exact
//! semantics: `_quote`, `_unquote`, `_unquote_plus`, `_parse_qsl` and
//! `_urlencode` from `w3lib/_url.py`, plus the safe-character sets that
//! `safe_url_string` and `canonicalize_url` pass to them.
//!
//! Everything here works on bytes, as w3lib does, so that percent-escapes of
//! non-UTF-8 bytes (a GBK query, `%FF`) survive a decode/encode round trip.
//! It does not know about URL structure; see [`super::split`] for that.

/// A set of bytes that quoting leaves as they are. RFC 3986 "unreserved"
/// characters are always in it, because w3lib's `_quote_table` adds them to
/// whatever `safe` argument it gets.
pub(super) struct SafeSet([bool; 256]);

impl SafeSet {
    /// Unreserved characters plus `extra`, built at compile time.
    const fn with(extra: &[u8]) -> SafeSet {
        let mut table = [false; 256];
        let mut b = 0;
        while b < 256 {
            let c = b as u8;
            table[b] = c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~');
            b += 1;
        }
        let mut i = 0;
        while i < extra.len() {
            table[extra[i] as usize] = true;
            i += 1;
        }
        SafeSet(table)
    }

    fn contains(&self, byte: u8) -> bool {
        self.0[byte as usize]
    }
}

/// Only the unreserved characters: what `_urlencode` keeps in query keys and
/// values (it quotes with `safe=b""`).
pub(super) const UNRESERVED: SafeSet = SafeSet::with(b"");

/// w3lib `_USERINFO_SAFEST_CHARS`: unreserved and sub-delimiters minus
/// `:;=`. `%` is absent, so a literal `%` in a user name becomes `%25`
/// (the user info is unquoted first).
pub(super) const USERINFO_SAFEST: SafeSet = SafeSet::with(b"!$&'()*+,");

/// w3lib `_PATH_SAFEST_CHARS` (also its `_QUERY_SAFEST_CHARS` and
/// `_FRAGMENT_SAFEST_CHARS`): reserved characters minus `#[]|`, plus `%` so
/// that existing escapes are kept as they are.
pub(super) const PATH_SAFEST: SafeSet = SafeSet::with(b":/?@!$&'()*+,;=%");

/// w3lib `_SPECIAL_QUERY_SAFEST_CHARS`: like [`PATH_SAFEST`] but without `'`,
/// which the URL standard percent-encodes in queries of special schemes.
pub(super) const SPECIAL_QUERY_SAFEST: SafeSet = SafeSet::with(b":/?@!$&()*+,;=%");

/// w3lib `_PATH_SAFE_CHARS`, used when `canonicalize_url` re-quotes the
/// path: all reserved characters except `#`, plus `|` and `%`. Note it keeps
/// `[`, `]` and `|` literal although `safe_url_string` escapes them.
pub(super) const PATH_SAFE: SafeSet = SafeSet::with(b":/?[]@!$&'()*+,;=|%");

const UPPER_HEX: &[u8; 16] = b"0123456789ABCDEF";

/// w3lib `_quote_into`: every byte not in `safe` becomes `%XX` (upper-case
/// hex); with `plus`, a space becomes `+` instead.
pub(super) fn quote_into(data: &[u8], out: &mut String, safe: &SafeSet, plus: bool) {
    for &byte in data {
        if safe.contains(byte) {
            out.push(char::from(byte));
        } else if plus && byte == b' ' {
            out.push('+');
        } else {
            out.push('%');
            out.push(char::from(UPPER_HEX[usize::from(byte >> 4)]));
            out.push(char::from(UPPER_HEX[usize::from(byte & 0x0f)]));
        }
    }
}

/// w3lib `_quote`, returning a new string.
pub(super) fn quote(data: &[u8], safe: &SafeSet) -> String {
    let mut out = String::with_capacity(data.len());
    quote_into(data, &mut out, safe, false);
    out
}

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// Shared body of `_unquote` and `_unquote_plus`: a `%` followed by two hex
/// digits becomes that byte; anything else (`%zz`, a trailing `%4`) is kept
/// literally.
fn unquote_impl(data: &[u8], plus: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        let byte = data[i];
        if byte == b'%' {
            let high = data.get(i + 1).copied().and_then(hex_value);
            let low = data.get(i + 2).copied().and_then(hex_value);
            if let (Some(high), Some(low)) = (high, low) {
                out.push((high << 4) | low);
                i += 3;
                continue;
            }
        }
        out.push(if plus && byte == b'+' { b' ' } else { byte });
        i += 1;
    }
    out
}

/// w3lib `_unquote` (bytes in, bytes out, no UTF-8 decoding).
pub(super) fn unquote(data: &[u8]) -> Vec<u8> {
    unquote_impl(data, false)
}

/// w3lib `_unquote_plus`: like [`unquote`], and `+` becomes a space.
fn unquote_plus(data: &[u8]) -> Vec<u8> {
    unquote_impl(data, true)
}

/// A query argument as raw bytes: (name, value).
pub(super) type QueryPair = (Vec<u8>, Vec<u8>);

/// w3lib `_parse_qsl(qs, keep_blank_values=True, separator=b"&")`.
///
/// Only `&` separates arguments: since w3lib 2.5.0 a `;` is an ordinary
/// character (it ends up as `%3B`). Empty fields (`a=1&&b=2`) are dropped;
/// a field without `=` gets an empty value.
pub(super) fn parse_qsl(query: &str) -> Vec<QueryPair> {
    query
        .as_bytes()
        .split(|&b| b == b'&')
        .filter(|field| !field.is_empty())
        .map(|field| {
            let (key, value) = match field.iter().position(|&b| b == b'=') {
                Some(eq) => (&field[..eq], &field[eq + 1..]),
                None => (field, &field[field.len()..]),
            };
            (unquote_plus(key), unquote_plus(value))
        })
        .collect()
}

/// w3lib `_urlencode(pairs, b"&")`: `key=value` joined by `&`, each side
/// quoted with only unreserved characters safe and spaces as `+`.
pub(super) fn urlencode(pairs: &[QueryPair]) -> String {
    let mut out = String::new();
    for (i, (key, value)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        quote_into(key, &mut out, &UNRESERVED, true);
        out.push('=');
        quote_into(value, &mut out, &UNRESERVED, true);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unquote_keeps_invalid_and_truncated_escapes() {
        assert_eq!(unquote(b"%41%zz%4"), b"A%zz%4");
        assert_eq!(unquote(b"%"), b"%");
        assert_eq!(unquote(b"%c3%A9"), "é".as_bytes());
    }

    #[test]
    fn parse_qsl_splits_on_ampersand_only() {
        let pairs = parse_qsl("b=2;c=3&&a&=x&d=+%2B");
        let expected: Vec<QueryPair> = vec![
            (b"b".to_vec(), b"2;c=3".to_vec()),
            (b"a".to_vec(), b"".to_vec()),
            (b"".to_vec(), b"x".to_vec()),
            (b"d".to_vec(), b" +".to_vec()),
        ];
        assert_eq!(pairs, expected);
    }

    #[test]
    fn urlencode_quotes_everything_but_unreserved() {
        let pairs = vec![(b"a b".to_vec(), b"x=y;z~".to_vec())];
        assert_eq!(urlencode(&pairs), "a+b=x%3Dy%3Bz~");
    }
}
