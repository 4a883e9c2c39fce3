//! NFKC normalisation exactly as CPython 3.11's `unicodedata` computes it,
//! both with the interpreter's own Unicode data (used by w3lib on hosts) and
//! as `unicodedata.ucd_3_2_0` (used by the stdlib `idna` codec's nameprep).
//!
//! This is a port of CPython's `nfd_nfkd` and `nfc_nfkc` (Modules/
//! unicodedata.c) over the tables in [`super::tables`]. Porting the
//! algorithm rather than using a generic normaliser keeps CPython's
//! particular behaviours: the 3.2 variant decomposes with 3.2 data but sorts
//! and composes with current data, and composition follows CPython's own
//! blocking rules. Only NFKC is provided; nothing else here needs NFC/NFD.

use super::tables::{COMBINING_CLASS, COMPOSITIONS, NFKD, NFKD_3_2_OVERRIDES};

/// Which Unicode database the decomposition step reads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum UnicodeData {
    /// `unicodedata` itself: Unicode 14.0 on Python 3.11.
    Current,
    /// `unicodedata.ucd_3_2_0`, which IDNA 2003 nameprep prescribes.
    V3_2,
}

// Hangul syllables are (de)composed arithmetically (Unicode ch. 3.12).
const S_BASE: u32 = 0xAC00;
const L_BASE: u32 = 0x1100;
const V_BASE: u32 = 0x1161;
const T_BASE: u32 = 0x11A7;
const L_COUNT: u32 = 19;
const V_COUNT: u32 = 21;
const T_COUNT: u32 = 28;
const N_COUNT: u32 = V_COUNT * T_COUNT;
const S_COUNT: u32 = L_COUNT * N_COUNT;

/// Unicode NFKC of `text`, computed as CPython's
/// `unicodedata[.ucd_3_2_0].normalize("NFKC", text)`.
pub(super) fn nfkc(text: &str, data: UnicodeData) -> String {
    // ASCII is invariant under every normalisation form.
    if text.is_ascii() {
        return text.to_owned();
    }
    let mut decomposed = nfkd(text, data);
    canonical_sort(&mut decomposed);
    compose(&decomposed)
}

/// Whether `c` falls in one of the sorted, disjoint inclusive `ranges` of a
/// generated table.
pub(super) fn in_ranges(ranges: &[(char, char)], c: char) -> bool {
    let i = ranges.partition_point(|&(_, end)| end < c);
    ranges.get(i).is_some_and(|&(start, _)| start <= c)
}

/// Full compatibility decomposition, not yet canonically ordered.
fn nfkd(text: &str, data: UnicodeData) -> Vec<char> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        if let Some(jamo) = decompose_hangul(c) {
            out.extend(jamo.into_iter().flatten());
        } else if let Some(d) = decomposition(c, data) {
            out.extend(d.chars());
        } else {
            out.push(c);
        }
    }
    out
}

fn decompose_hangul(c: char) -> Option<[Option<char>; 3]> {
    let s_index = u32::from(c).checked_sub(S_BASE).filter(|&i| i < S_COUNT)?;
    let l = char::from_u32(L_BASE + s_index / N_COUNT);
    let v = char::from_u32(V_BASE + (s_index % N_COUNT) / T_COUNT);
    let t_index = s_index % T_COUNT;
    let t = if t_index == 0 {
        None
    } else {
        char::from_u32(T_BASE + t_index)
    };
    Some([l, v, t])
}

fn decomposition(c: char, data: UnicodeData) -> Option<&'static str> {
    if data == UnicodeData::V3_2 {
        if let Ok(i) = NFKD_3_2_OVERRIDES.binary_search_by_key(&c, |&(k, _)| k) {
            return Some(NFKD_3_2_OVERRIDES[i].1);
        }
    }
    NFKD.binary_search_by_key(&c, |&(k, _)| k)
        .ok()
        .map(|i| NFKD[i].1)
}

/// Canonical combining class (always the current data, as in CPython).
fn combining_class(c: char) -> u8 {
    let i = COMBINING_CLASS.partition_point(|&(_, end, _)| end < c);
    match COMBINING_CLASS.get(i) {
        Some(&(start, _, class)) if start <= c => class,
        _ => 0,
    }
}

/// Orders each run of non-starters by combining class, keeping the order
/// of equal classes, which is what CPython's insertion sort in `nfd_nfkd`
/// produces (a stable sort avoids its quadratic worst case on long runs).
fn canonical_sort(chars: &mut [char]) {
    let mut i = 0;
    while i < chars.len() {
        if combining_class(chars[i]) == 0 {
            i += 1;
            continue;
        }
        let run = chars[i..]
            .iter()
            .take_while(|&&c| combining_class(c) != 0)
            .count();
        chars[i..i + run].sort_by_key(|&c| combining_class(c));
        i += run;
    }
}

fn is_composition_first(c: char) -> bool {
    let i = COMPOSITIONS.partition_point(|&(first, _, _)| first < c);
    COMPOSITIONS.get(i).is_some_and(|&(first, _, _)| first == c)
}

fn compose_pair(first: char, second: char) -> Option<char> {
    COMPOSITIONS
        .binary_search_by(|&(a, b, _)| (a, b).cmp(&(first, second)))
        .ok()
        .map(|i| COMPOSITIONS[i].2)
}

/// Composes L+V(+T) jamo starting at `i` into a syllable; returns it and how
/// many characters it used. CPython only needs this forward direction,
/// because its input is always fully decomposed.
fn compose_hangul(chars: &[char], i: usize) -> Option<(char, usize)> {
    let l = u32::from(*chars.get(i)?)
        .checked_sub(L_BASE)
        .filter(|&x| x < L_COUNT)?;
    let v = u32::from(*chars.get(i + 1)?)
        .checked_sub(V_BASE)
        .filter(|&x| x < V_COUNT)?;
    let mut code = S_BASE + (l * V_COUNT + v) * T_COUNT;
    let mut used = 2;
    if let Some(t) = chars.get(i + 2).map(|&t| u32::from(t)) {
        // T_BASE itself is not a trailing consonant, hence the strict `<`.
        if T_BASE < t && t < T_BASE + T_COUNT {
            code += t - T_BASE;
            used = 3;
        }
    }
    char::from_u32(code).map(|c| (c, used))
}

/// CPython's `nfc_nfkc` composition loop over canonically ordered input.
fn compose(chars: &[char]) -> String {
    let mut skipped = vec![false; chars.len()];
    let mut out = String::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        if skipped[i] {
            i += 1;
            continue;
        }
        if let Some((syllable, used)) = compose_hangul(chars, i) {
            out.push(syllable);
            i += used;
            continue;
        }
        let mut current = chars[i];
        if is_composition_first(current) {
            current = compose_following(chars, i, current, &mut skipped);
        }
        out.push(current);
        i += 1;
    }
    out
}

/// Combines the starter `base` at `start` with every later character that
/// is not blocked from it, marking the consumed ones in `skipped`.
fn compose_following(chars: &[char], start: usize, mut base: char, skipped: &mut [bool]) -> char {
    // Combining class of the last character left uncombined since `start`;
    // zero while nothing sits between the base and the candidate.
    let mut blocking_class = 0u8;
    for (i1, &candidate) in chars.iter().enumerate().skip(start + 1) {
        let class = combining_class(candidate);
        if blocking_class != 0 {
            if class == 0 {
                break;
            }
            if blocking_class >= class {
                continue; // blocked by an earlier mark of the same or higher class
            }
        }
        match compose_pair(base, candidate) {
            Some(composite) => {
                base = composite;
                skipped[i1] = true;
                if !is_composition_first(base) {
                    break;
                }
            }
            None => {
                if class == 0 {
                    break;
                }
                blocking_class = class;
            }
        }
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compatibility_characters_fold() {
        assert_eq!(
            nfkc("ｅｘａｍｐｌｅ．ｃｏｍ", UnicodeData::Current),
            "example.com"
        );
        assert_eq!(nfkc("ﬁ①", UnicodeData::Current), "fi1");
        assert_eq!(nfkc("＠", UnicodeData::Current), "@");
    }

    #[test]
    fn canonical_composition_and_hangul() {
        assert_eq!(nfkc("e\u{301}", UnicodeData::Current), "é");
        assert_eq!(nfkc("a\u{323}\u{302}", UnicodeData::Current), "\u{1ead}");
        assert_eq!(nfkc("\u{1100}\u{1161}\u{11a8}", UnicodeData::Current), "각");
        assert_eq!(nfkc("각", UnicodeData::Current), "각");
    }

    #[test]
    fn unicode_3_2_leaves_later_characters_alone() {
        // U+1D2C MODIFIER LETTER CAPITAL A was added in Unicode 4.0.
        assert_eq!(nfkc("\u{1d2c}", UnicodeData::Current), "A");
        assert_eq!(nfkc("\u{1d2c}", UnicodeData::V3_2), "\u{1d2c}");
    }
}
