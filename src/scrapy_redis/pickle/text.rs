//! The arguments pickles write as text or as raw integers: protocol 0's
//! lines (`I42`, `L42L`, `F1.5`, a quoted `S'…'` with Python's escapes,
//! `V…` in raw-unicode-escape) and LONG1/LONG4's two's complement bytes.
//! Pure functions of bytes; the machine says where a failure is.

use super::Value;

fn ascii(line: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(line)
        .ok()
        .filter(|s| s.is_ascii())
        .ok_or_else(|| "a number that is not ASCII text".to_string())
}

/// INT's line: a whole number, or `00`/`01`, protocol 0's False and True.
pub fn int_line(line: &[u8]) -> Result<Value, String> {
    match line {
        b"00" => Ok(Value::Bool(false)),
        b"01" => Ok(Value::Bool(true)),
        _ => ascii(line)?
            .trim()
            .parse()
            .map(Value::Int)
            .map_err(|_| "an INT that is no integer within 64 bits".to_string()),
    }
}

/// LONG's line: a whole number, with Python 2's `L` after it or not.
pub fn long_line(line: &[u8]) -> Result<i64, String> {
    let text = ascii(line)?.trim();
    text.strip_suffix('L')
        .unwrap_or(text)
        .parse()
        .map_err(|_| "a LONG that is no integer within 64 bits".to_string())
}

/// FLOAT's line, as Python's `repr` writes it (`1.5`, `inf`, `nan`).
pub fn float_line(line: &[u8]) -> Result<f64, String> {
    ascii(line)?
        .trim()
        .parse()
        .map_err(|_| "a FLOAT that is no number".to_string())
}

/// PUT's and GET's line: a memo index.
pub fn decimal(line: &[u8]) -> Result<u32, String> {
    ascii(line)?
        .trim()
        .parse()
        .map_err(|_| "a memo index that is no small whole number".to_string())
}

/// A little-endian two's complement integer, if it fits in 64 bits.
pub fn twos_complement(bytes: &[u8]) -> Option<i64> {
    let Some(last) = bytes.last() else {
        return Some(0);
    };
    let fill: u8 = if last & 0x80 != 0 { 0xff } else { 0 };
    // Bytes past the eighth must only repeat the sign.
    if bytes.len() > 8 {
        let (low, high) = bytes.split_at(8);
        if high.iter().any(|b| *b != fill) || (low[7] & 0x80 != 0) != (fill != 0) {
            return None;
        }
        return twos_complement(low);
    }
    let mut eight = [fill; 8];
    eight[..bytes.len()].copy_from_slice(bytes);
    Some(i64::from_le_bytes(eight))
}

/// A Python 2 `str` (STRING, BINSTRING, SHORT_BINSTRING): Python 3 reads
/// it as text; bytes that are not UTF-8 stay bytes.
pub fn old_str(bytes: Vec<u8>) -> Value {
    match String::from_utf8(bytes) {
        Ok(s) => Value::Str(s),
        Err(e) => Value::Bytes(e.into_bytes()),
    }
}

/// STRING's line: a quoted literal with Python's backslash escapes
/// (`\n`, `\x41`, `\101`, `\'`, …).
pub fn string_literal(line: &[u8]) -> Result<Vec<u8>, String> {
    let quoted =
        matches!(line, [q, .., e] if q == e && (*q == b'\'' || *q == b'"')) && line.len() >= 2;
    if !quoted {
        return Err("a STRING argument that is not quoted".to_string());
    }
    let body = &line[1..line.len() - 1];
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        if body[i] != b'\\' || i + 1 == body.len() {
            out.push(body[i]);
            i += 1;
            continue;
        }
        let (byte, used) = escape(&body[i + 1..]);
        out.extend(byte);
        i += 1 + used;
    }
    Ok(out)
}

/// One escape after a backslash: the bytes it stands for and how many
/// bytes of `rest` it used. An unknown escape keeps its backslash.
fn escape(rest: &[u8]) -> (Vec<u8>, usize) {
    let simple = match rest[0] {
        b'\n' => Some(None),
        b'\\' => Some(Some(b'\\')),
        b'\'' => Some(Some(b'\'')),
        b'"' => Some(Some(b'"')),
        b'a' => Some(Some(0x07)),
        b'b' => Some(Some(0x08)),
        b'f' => Some(Some(0x0c)),
        b'n' => Some(Some(b'\n')),
        b'r' => Some(Some(b'\r')),
        b't' => Some(Some(b'\t')),
        b'v' => Some(Some(0x0b)),
        _ => None,
    };
    if let Some(byte) = simple {
        return (byte.into_iter().collect(), 1);
    }
    if rest[0] == b'x' {
        if let Some(n) = rest.get(1..3).and_then(hex) {
            return (vec![n as u8], 3);
        }
    }
    let octal = rest
        .iter()
        .take(3)
        .take_while(|b| (b'0'..=b'7').contains(b));
    let digits = octal.count();
    if digits > 0 {
        let n = rest[..digits]
            .iter()
            .fold(0u32, |n, d| n * 8 + u32::from(d - b'0'));
        return (vec![n as u8], digits);
    }
    (vec![b'\\'], 0)
}

fn hex(digits: &[u8]) -> Option<u32> {
    u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// UNICODE's line in raw-unicode-escape: every byte is the code point of
/// its value, except `\uXXXX` and `\UXXXXXXXX` (after an odd run of
/// backslashes) for any other.
pub fn raw_unicode_escape(line: &[u8]) -> Result<String, String> {
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    let mut backslashes = 0usize;
    while i < line.len() {
        let b = line[i];
        let width = match line.get(i + 1) {
            Some(b'u') if b == b'\\' && backslashes.is_multiple_of(2) => 4,
            Some(b'U') if b == b'\\' && backslashes.is_multiple_of(2) => 8,
            _ => 0,
        };
        if width == 0 {
            backslashes = if b == b'\\' { backslashes + 1 } else { 0 };
            out.push(char::from(b));
            i += 1;
            continue;
        }
        let code = line
            .get(i + 2..i + 2 + width)
            .and_then(hex)
            .and_then(char::from_u32)
            .ok_or_else(|| "a UNICODE argument with a broken \\u escape".to_string())?;
        out.push(code);
        backslashes = 0;
        i += 2 + width;
    }
    Ok(out)
}
