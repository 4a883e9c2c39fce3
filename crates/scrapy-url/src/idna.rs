//! Host name to ASCII, as w3lib 2.5.0's `_idna_bytes` does it: NFKC with the
//! interpreter's Unicode data, then Python's stdlib `idna` codec, which is
//! IDNA 2003 (RFC 3490 ToASCII with RFC 3491 nameprep), not IDNA 2008 or
//! UTS #46.
//!
//! The differences matter for fingerprints: IDNA 2003 maps `ß` to `ss` and
//! drops zero-width joiners, accepts any ASCII in a label (no STD3 rules),
//! and rejects empty or over-long labels. When the codec fails, w3lib keeps
//! the Unicode host as it is; [`to_ascii`] reports that as `None` and leaves
//! the fallback to the caller.

use super::tables::{BIDI_L, BIDI_R_AL, NAMEPREP_B1, NAMEPREP_B2, NAMEPREP_PROHIBITED};
use super::unicode::{in_ranges, nfkc, UnicodeData};

/// RFC 3490 section 5: the ACE prefix.
const ACE_PREFIX: &str = "xn--";

/// w3lib `_idna_bytes(host)`: the ASCII form of `host`, or `None` where
/// Python raises `UnicodeError`.
pub(super) fn to_ascii(host: &str) -> Option<String> {
    if host.is_ascii() {
        return Some(host.to_owned());
    }
    // w3lib's `_nfkc_netloc` strips these delimiters before normalising.
    let cleaned: String = host.chars().filter(|c| !"@:#?".contains(*c)).collect();
    codec_encode(&nfkc(&cleaned, UnicodeData::Current))
}

/// A DNS label must be 1 to 63 bytes long (RFC 3490 ToASCII step 8).
fn valid_label_length(label: &str) -> bool {
    (1..64).contains(&label.len())
}

/// `str.encode("idna")`, CPython's `encodings.idna.Codec.encode`.
fn codec_encode(input: &str) -> Option<String> {
    if input.is_empty() {
        return Some(String::new());
    }
    if input.is_ascii() {
        // Fast path: only length checks, and the last label may be empty
        // (a trailing dot) but not too long.
        let labels: Vec<&str> = input.split('.').collect();
        let (last, init) = labels.split_last()?;
        if init.iter().all(|l| valid_label_length(l)) && last.len() < 64 {
            return Some(input.to_owned());
        }
        return None;
    }
    // RFC 3490 section 3.1: these four characters all separate labels.
    let mut labels: Vec<&str> = input
        .split(['.', '\u{3002}', '\u{ff0e}', '\u{ff61}'])
        .collect();
    let trailing_dot = labels.last().is_some_and(|l| l.is_empty());
    if trailing_dot {
        labels.pop();
    }
    let mut out = String::with_capacity(input.len() * 2);
    for label in labels {
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(&label_to_ascii(label)?);
    }
    if trailing_dot {
        out.push('.');
    }
    Some(out)
}

/// RFC 3490 ToASCII with AllowUnassigned and without UseSTD3ASCIIRules, as
/// CPython's `encodings.idna.ToASCII`.
fn label_to_ascii(label: &str) -> Option<String> {
    if label.is_ascii() {
        return valid_label_length(label).then(|| label.to_owned());
    }
    let prepared = nameprep(label)?;
    if prepared.is_ascii() {
        return valid_label_length(&prepared).then_some(prepared);
    }
    if prepared.starts_with(ACE_PREFIX) {
        return None;
    }
    // Punycode writes at least one byte per character, so a longer label
    // cannot fit in 63 bytes; refusing it early also keeps the encoder's
    // quadratic cost away from huge hostile labels.
    if prepared.chars().count() > 63 - ACE_PREFIX.len() {
        return None;
    }
    // `None` only on arithmetic overflow, i.e. far beyond 63 bytes anyway.
    let encoded = format!("{ACE_PREFIX}{}", ::idna::punycode::encode_str(&prepared)?);
    valid_label_length(&encoded).then_some(encoded)
}

/// RFC 3491 nameprep, as CPython's `encodings.idna.nameprep`.
fn nameprep(label: &str) -> Option<String> {
    let mut mapped = String::with_capacity(label.len());
    for c in label.chars() {
        if NAMEPREP_B1.binary_search(&c).is_ok() {
            continue;
        }
        match NAMEPREP_B2.binary_search_by_key(&c, |&(k, _)| k) {
            Ok(i) => mapped.push_str(NAMEPREP_B2[i].1),
            Err(_) => mapped.push(c),
        }
    }
    let normalized = nfkc(&mapped, UnicodeData::V3_2);
    if normalized
        .chars()
        .any(|c| in_ranges(NAMEPREP_PROHIBITED, c))
    {
        return None;
    }
    bidi_ok(&normalized).then_some(normalized)
}

/// RFC 3454 section 6: a label with right-to-left characters must not hold
/// left-to-right ones, and must start and end with right-to-left ones.
fn bidi_ok(label: &str) -> bool {
    let is_rtl = |c: char| in_ranges(BIDI_R_AL, c);
    if !label.chars().any(is_rtl) {
        return true;
    }
    if label.chars().any(|c| in_ranges(BIDI_L, c)) {
        return false;
    }
    label.chars().next().is_some_and(is_rtl) && label.chars().next_back().is_some_and(is_rtl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unicode_labels_become_punycode() {
        assert_eq!(
            to_ascii("例子.测试").as_deref(),
            Some("xn--fsqu00a.xn--0zwm56d")
        );
        assert_eq!(to_ascii("bücher.de").as_deref(), Some("xn--bcher-kva.de"));
    }

    #[test]
    fn idna_2003_mappings() {
        // ß folds to "ss" and the zero-width joiner vanishes (IDNA 2008 would
        // keep both), fullwidth forms fold to ASCII.
        assert_eq!(to_ascii("straße.de").as_deref(), Some("strasse.de"));
        assert_eq!(to_ascii("a\u{200d}b.例").as_deref(), Some("ab.xn--fsq"));
        assert_eq!(
            to_ascii("ｅｘａｍｐｌｅ。com").as_deref(),
            Some("example.com")
        );
        // No case folding of labels that are ASCII after NFKC: w3lib
        // lower-cases the host before it gets here.
        assert_eq!(
            to_ascii("ＥＸＡＭＰＬＥ。com").as_deref(),
            Some("EXAMPLE.com")
        );
    }

    #[test]
    fn failures_are_none() {
        assert_eq!(to_ascii("a..例"), None, "empty label");
        assert_eq!(
            to_ascii("例\u{e000}子"),
            None,
            "prohibited private use character"
        );
        assert_eq!(to_ascii("\u{ad}.com"), None, "label empty after nameprep");
        assert_eq!(to_ascii("aא.com"), None, "mixed direction label");
        assert_eq!(
            to_ascii(&format!("{}.例", "a".repeat(64))),
            None,
            "long label"
        );
    }
}
