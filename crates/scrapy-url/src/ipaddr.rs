//! IP address parsing and printing with the rules of Python 3.11's
//! `ipaddress` module, which w3lib uses to validate bracketed hosts and to
//! normalise IPv6 hosts in `canonicalize_url`.
//!
//! `std::net` is close but not identical: Python accepts an IPv6 zone
//! (`fe80::1%eth0`), rejects IPv4 octets with leading zeros, and prints
//! IPv4-mapped addresses as plain hextets (`::ffff:102:304`, where Rust
//! prints `::ffff:1.2.3.4`).

/// A parsed `ipaddress.ip_address(text)`.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum IpAddress {
    V4,
    V6 { bits: u128, scope: Option<String> },
}

/// `ipaddress.ip_address(text)`: IPv4 first, then IPv6; `None` where Python
/// raises `ValueError`.
pub(super) fn parse(text: &str) -> Option<IpAddress> {
    if parse_ipv4(text).is_some() {
        return Some(IpAddress::V4);
    }
    parse_ipv6_with_scope(text).map(|(bits, scope)| IpAddress::V6 { bits, scope })
}

/// `IPv4Address(text)` as a 32-bit integer.
fn parse_ipv4(text: &str) -> Option<u32> {
    if text.is_empty() || text.contains('/') {
        return None;
    }
    let octets: Vec<&str> = text.split('.').collect();
    if octets.len() != 4 {
        return None;
    }
    octets.iter().try_fold(0u32, |acc, octet| {
        Some((acc << 8) | u32::from(parse_octet(octet)?))
    })
}

fn parse_octet(octet: &str) -> Option<u8> {
    let ascii_digits = !octet.is_empty() && octet.bytes().all(|b| b.is_ascii_digit());
    // Leading zeros are refused, as glibc's inet_pton does (bpo-36384).
    if !ascii_digits || octet.len() > 3 || (octet != "0" && octet.starts_with('0')) {
        return None;
    }
    octet.parse::<u8>().ok()
}

/// `IPv6Address(text)`: the address and its zone (the text after `%`).
fn parse_ipv6_with_scope(text: &str) -> Option<(u128, Option<String>)> {
    if text.contains('/') {
        return None;
    }
    let (addr, scope) = match text.split_once('%') {
        None => (text, None),
        Some((_, scope)) if scope.is_empty() || scope.contains('%') => return None,
        Some((addr, scope)) => (addr, Some(scope.to_owned())),
    };
    Some((parse_ipv6(addr)?, scope))
}

const HEXTETS: usize = 8;

/// `_BaseV6._ip_int_from_string`, step by step.
fn parse_ipv6(text: &str) -> Option<u128> {
    if text.is_empty() {
        return None;
    }
    let mut parts: Vec<String> = text.split(':').map(str::to_owned).collect();
    if parts.len() < 3 {
        return None;
    }
    // An embedded IPv4 address stands for the last two hextets.
    if parts.last().is_some_and(|p| p.contains('.')) {
        let ipv4 = parse_ipv4(&parts.pop()?)?;
        parts.push(format!("{:x}", ipv4 >> 16));
        parts.push(format!("{:x}", ipv4 & 0xffff));
    }
    if parts.len() > HEXTETS + 1 {
        return None;
    }
    let (hi, lo, skipped) = layout(&parts)?;
    let mut bits: u128 = 0;
    for part in &parts[..hi] {
        bits = (bits << 16) | u128::from(parse_hextet(part)?);
    }
    // `::` alone skips all eight hextets; a 128-bit shift would overflow.
    bits = u32::try_from(16 * skipped)
        .ok()
        .and_then(|n| bits.checked_shl(n))
        .unwrap_or(0);
    for part in &parts[parts.len() - lo..] {
        bits = (bits << 16) | u128::from(parse_hextet(part)?);
    }
    Some(bits)
}

/// How many parts come before and after a `::`, and how many zero hextets
/// the `::` stands for; `None` for a misplaced or repeated `::`.
fn layout(parts: &[String]) -> Option<(usize, usize, usize)> {
    let n = parts.len();
    let inner_empty: Vec<usize> = (1..n - 1).filter(|&i| parts[i].is_empty()).collect();
    let first_empty = parts[0].is_empty();
    let last_empty = parts[n - 1].is_empty();
    match inner_empty.as_slice() {
        [] => {
            if n != HEXTETS || first_empty || last_empty {
                return None;
            }
            Some((n, 0, 0))
        }
        [skip] => {
            let mut hi = *skip;
            let mut lo = n - skip - 1;
            if first_empty {
                hi -= 1;
                if hi != 0 {
                    return None; // a leading ':' must be part of '::'
                }
            }
            if last_empty {
                lo -= 1;
                if lo != 0 {
                    return None; // a trailing ':' must be part of '::'
                }
            }
            let skipped = HEXTETS.checked_sub(hi + lo).filter(|&s| s >= 1)?;
            Some((hi, lo, skipped))
        }
        _ => None,
    }
}

fn parse_hextet(part: &str) -> Option<u16> {
    if part.is_empty() || part.len() > 4 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u16::from_str_radix(part, 16).ok()
}

/// `str(IPv6Address)`: lower-case hextets without leading zeros, the
/// longest run of two or more zero hextets (the first one on a tie) as `::`,
/// then `%zone` if any.
pub(super) fn ipv6_to_string(bits: u128, scope: Option<&str>) -> String {
    let hextets: Vec<String> = (0..HEXTETS)
        .map(|i| format!("{:x}", (bits >> (16 * (HEXTETS - 1 - i))) & 0xffff))
        .collect();
    let (run_start, run_len) = longest_zero_run(&hextets);
    let mut text = if run_len > 1 {
        let head = hextets[..run_start].join(":");
        let tail = hextets[run_start + run_len..].join(":");
        format!("{head}::{tail}")
    } else {
        hextets.join(":")
    };
    if let Some(scope) = scope {
        text.push('%');
        text.push_str(scope);
    }
    text
}

fn longest_zero_run(hextets: &[String]) -> (usize, usize) {
    let (mut best_start, mut best_len) = (0, 0);
    let (mut start, mut len) = (0, 0);
    for (i, hextet) in hextets.iter().enumerate() {
        if hextet == "0" {
            if len == 0 {
                start = i;
            }
            len += 1;
            if len > best_len {
                (best_start, best_len) = (start, len);
            }
        } else {
            len = 0;
        }
    }
    (best_start, best_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(text: &str) -> Option<String> {
        match parse(text)? {
            IpAddress::V4 => Some("v4".to_owned()),
            IpAddress::V6 { bits, scope } => Some(ipv6_to_string(bits, scope.as_deref())),
        }
    }

    #[test]
    fn python_ipv6_formatting() {
        assert_eq!(roundtrip("::0:1").as_deref(), Some("::1"));
        assert_eq!(roundtrip("::").as_deref(), Some("::"));
        assert_eq!(
            roundtrip("2001:DB8:0:0:1:0:0:1").as_deref(),
            Some("2001:db8::1:0:0:1")
        );
        assert_eq!(
            roundtrip("::ffff:1.2.3.4").as_deref(),
            Some("::ffff:102:304")
        );
        assert_eq!(roundtrip("1:0:0:0:0:0:0:0").as_deref(), Some("1::"));
        assert_eq!(
            roundtrip("1:2:3:4:5:6:7:0").as_deref(),
            Some("1:2:3:4:5:6:7:0")
        );
        assert_eq!(roundtrip("fe80::1%eth0").as_deref(), Some("fe80::1%eth0"));
    }

    #[test]
    fn python_rejections() {
        for bad in [
            "",
            ":",
            "1::2::3",
            "::1%",
            "1:2:3:4:5:6:7:8:9",
            "::01.2.3.4",
            "12345::",
            ":1::",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        assert_eq!(parse("1.2.3.4"), Some(IpAddress::V4));
        assert_eq!(parse("01.2.3.4"), None);
    }
}
