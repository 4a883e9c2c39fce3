//! URL splitting and joining as w3lib 2.5.0 does it: `_strip`, `_urlsplit`
//! (w3lib's own reimplementation, which differs from `urllib.parse` in
//! places), `_split_params` and `_urlunsplit`/`_urlunparse`.
//!
//! This layer only cuts the URL into parts and validates the authority the
//! way w3lib does; it never percent-encodes (that is [`super::safe_url`]).
//! Every place where Python raises `ValueError` returns an
//! [`UrlErrorKind`] instead.

use std::borrow::Cow;

use super::ipaddr::{self, IpAddress};
use super::pycase;
use super::unicode::{nfkc, UnicodeData};
use super::UrlErrorKind;

/// The schemes the URL living standard calls special (w3lib
/// `_SPECIAL_SCHEMES`): `\` acts as `/` in them and their queries escape `'`.
pub(super) const SPECIAL_SCHEMES: [&str; 6] = ["ftp", "file", "http", "https", "ws", "wss"];

/// `urllib.parse.uses_netloc` of Python 3.11: schemes whose URLs get `//`
/// when rebuilt even without a host.
const USES_NETLOC: [&str; 25] = [
    "ftp", "http", "gopher", "nntp", "telnet", "imap", "wais", "file", "mms", "https", "shttp",
    "snews", "prospero", "rtsp", "rtsps", "rtspu", "rsync", "svn", "svn+ssh", "sftp", "nfs", "git",
    "git+ssh", "ws", "wss",
];

/// `urllib.parse.uses_params` of Python 3.11 (its empty entry means
/// scheme-less URLs too): schemes whose last path segment may carry
/// `;params`.
const USES_PARAMS: [&str; 16] = [
    "", "ftp", "hdl", "prospero", "http", "imap", "https", "shttp", "rtsp", "rtsps", "rtspu",
    "sip", "sips", "mms", "sftp", "tel",
];

pub(super) fn is_special(scheme: &str) -> bool {
    SPECIAL_SCHEMES.contains(&scheme)
}

/// A URL cut as w3lib's `_SplitResult`. The `netloc` is kept verbatim;
/// the user info, host and port are also given apart.
#[derive(Debug, Default)]
pub(super) struct SplitUrl {
    pub scheme: String,
    pub netloc: String,
    pub path: String,
    pub query: String,
    pub fragment: String,
    /// `None` when the netloc has no `@`.
    pub username: Option<String>,
    /// `None` when there is no `:` in the user info.
    pub password: Option<String>,
    /// Lower-cased up to any `%` (an IPv6 zone keeps its case); without the
    /// brackets of an IPv6 host. Empty when there is no host.
    pub hostname: String,
    /// `None` when absent or empty (`host:`).
    pub port: Option<u16>,
}

/// C0 controls and space: what WHATWG "strip leading and trailing C0
/// control or space" removes.
fn is_c0_or_space(c: char) -> bool {
    c <= ' '
}

fn is_tab_or_newline(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r')
}

/// w3lib `_strip`: trims C0 controls and spaces at both ends and removes
/// every tab and newline inside, as browsers do.
pub(super) fn strip(url: &str) -> String {
    url.trim_matches(is_c0_or_space)
        .chars()
        .filter(|&c| !is_tab_or_newline(c))
        .collect()
}

/// The scheme at the start of `url` (w3lib `_SCHEME_RE`,
/// `^[a-zA-Z][a-zA-Z0-9+\-.]*:`), and the rest after the colon.
fn split_scheme(url: &str) -> Option<(&str, &str)> {
    let end = url.find(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))?;
    let first = url.as_bytes().first()?;
    if end == 0 || !first.is_ascii_alphabetic() || url.as_bytes()[end] != b':' {
        return None;
    }
    Some((&url[..end], &url[end + 1..]))
}

/// w3lib `_urlsplit(url)`.
pub(super) fn urlsplit(url: &str) -> Result<SplitUrl, UrlErrorKind> {
    if url.is_empty() {
        return Ok(SplitUrl::default());
    }
    // Links rarely hold tabs or newlines: copy only those that do.
    let url: Cow<'_, str> = if url.contains(is_tab_or_newline) {
        Cow::Owned(url.chars().filter(|&c| !is_tab_or_newline(c)).collect())
    } else {
        Cow::Borrowed(url)
    };
    let url = url.trim_start_matches(is_c0_or_space);

    let (scheme, rest) = match split_scheme(url) {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
        None => (String::new(), url),
    };
    let rest = if is_special(&scheme) {
        backslashes_to_slashes(rest)
    } else {
        Cow::Borrowed(rest)
    };

    let (netloc, rest, brackets) = split_authority(&rest)?;
    check_netloc_normalisation(netloc)?;

    // `?` and `#` are looked up in the whole remainder, as w3lib does: a
    // `?` after the `#` leaves the query empty.
    let (before_hash, fragment) = match rest.find('#') {
        Some(h) => (&rest[..h], &rest[h + 1..]),
        None => (rest, ""),
    };
    let (path, query) = match rest.find('?') {
        Some(q) if q < before_hash.len() => (&before_hash[..q], &before_hash[q + 1..]),
        _ => (before_hash, ""),
    };

    let mut split = SplitUrl {
        scheme,
        netloc: netloc.to_owned(),
        path: path.to_owned(),
        query: query.to_owned(),
        fragment: fragment.to_owned(),
        ..SplitUrl::default()
    };
    fill_userinfo_host_port(&mut split, brackets)?;
    Ok(split)
}

/// In a special-scheme URL, `\` before the query or fragment means `/`.
fn backslashes_to_slashes(rest: &str) -> Cow<'_, str> {
    let cut = rest.find(['?', '#']).unwrap_or(rest.len());
    if !rest[..cut].contains('\\') {
        return Cow::Borrowed(rest);
    }
    let mut out = rest[..cut].replace('\\', "/");
    out.push_str(&rest[cut..]);
    Cow::Owned(out)
}

/// Cuts `//authority` off the front of `rest`. Returns the netloc (empty
/// without `//`), what follows it, and whether the netloc holds a bracketed
/// host.
fn split_authority(rest: &str) -> Result<(&str, &str, bool), UrlErrorKind> {
    let Some(after_slashes) = rest.strip_prefix("//") else {
        return Ok(("", rest, false));
    };
    let end = after_slashes
        .find(['/', '?', '#'])
        .unwrap_or(after_slashes.len());
    let netloc = &after_slashes[..end];
    // Brackets only count inside the authority; w3lib looks at the first
    // `[` and the first `]` only.
    let open = netloc.contains('[');
    let close = netloc.contains(']');
    if open != close {
        return Err(UrlErrorKind::InvalidBracketedHost);
    }
    if open {
        check_bracketed_netloc(netloc)?;
    }
    Ok((netloc, &after_slashes[end..], open))
}

/// w3lib `_checknetloc`: refuses a non-ASCII netloc whose NFKC form gains
/// a URL delimiter (e.g. a fullwidth `＠` or `／`), since the host would then
/// resolve differently from how it was split.
fn check_netloc_normalisation(netloc: &str) -> Result<(), UrlErrorKind> {
    if netloc.is_ascii() {
        return Ok(());
    }
    let cleaned: String = netloc.chars().filter(|c| !"@:#?".contains(*c)).collect();
    let normalized = nfkc(&cleaned, UnicodeData::Current);
    if cleaned != normalized && normalized.contains(['/', '?', '#', '@', ':', '\\']) {
        return Err(UrlErrorKind::NormalisedDelimiter);
    }
    Ok(())
}

/// w3lib `_check_bracketed_netloc`: the `[` must open the host part and only
/// `:port` may follow the `]`.
fn check_bracketed_netloc(netloc: &str) -> Result<(), UrlErrorKind> {
    let host_and_port = rpartition_at(netloc).1;
    let host = match host_and_port.split_once('[') {
        Some((before, _)) if !before.is_empty() => return Err(UrlErrorKind::InvalidBracketedHost),
        Some((_, bracketed)) => {
            let (host, after) = bracketed.split_once(']').unwrap_or((bracketed, ""));
            if !after.is_empty() && !after.starts_with(':') {
                return Err(UrlErrorKind::InvalidBracketedHost);
            }
            host
        }
        // The brackets were in the user info: the host is then checked as
        // if it were bracketed, and a plain name fails.
        None => host_and_port.split(':').next().unwrap_or(""),
    };
    check_bracketed_host(host)
}

/// w3lib `_check_bracketed_host`: an IPvFuture literal or an IPv6 address.
fn check_bracketed_host(host: &str) -> Result<(), UrlErrorKind> {
    if host.starts_with(['v', 'V']) {
        return if is_ipv_future(host) {
            Ok(())
        } else {
            Err(UrlErrorKind::InvalidBracketedHost)
        };
    }
    match ipaddr::parse(host) {
        Some(IpAddress::V6 { .. }) => Ok(()),
        // A bracketed IPv4 address is refused as well.
        Some(IpAddress::V4) | None => Err(UrlErrorKind::InvalidBracketedHost),
    }
}

/// `\Av[a-fA-F0-9]+\..+\Z` (lower-case `v` only, as w3lib's regex).
fn is_ipv_future(host: &str) -> bool {
    let Some(rest) = host.strip_prefix('v') else {
        return false;
    };
    let digits = rest.bytes().take_while(u8::is_ascii_hexdigit).count();
    digits > 0
        && rest[digits..]
            .strip_prefix('.')
            .is_some_and(|tail| !tail.is_empty())
}

/// Python's `text.rpartition("@")`: (before, after, found).
fn rpartition_at(text: &str) -> (&str, &str, bool) {
    match text.rfind('@') {
        Some(i) => (&text[..i], &text[i + 1..], true),
        None => ("", text, false),
    }
}

/// The tail of `_urlsplit` and `_SplitResult.__post_init__`: user info,
/// host and port out of the netloc, with w3lib's port validation.
fn fill_userinfo_host_port(split: &mut SplitUrl, brackets: bool) -> Result<(), UrlErrorKind> {
    let netloc = split.netloc.clone();
    let (userinfo, hostinfo, has_userinfo) = rpartition_at(&netloc);
    if has_userinfo {
        let (user, password) = match userinfo.split_once(':') {
            Some((user, password)) => (user, Some(password.to_owned())),
            None => (userinfo, None),
        };
        split.username = Some(user.to_owned());
        split.password = password;
    }
    let (hostname, port) = if brackets {
        let bracketed = hostinfo.split_once('[').map_or("", |(_, b)| b);
        let (host, after) = bracketed.split_once(']').unwrap_or((bracketed, ""));
        (host, after.split_once(':').map_or("", |(_, p)| p))
    } else {
        hostinfo.split_once(':').unwrap_or((hostinfo, ""))
    };
    split.hostname = lowercase_host(hostname);
    split.port = parse_port(port)?;
    Ok(())
}

/// Lower-cases the host up to its first `%`: an IPv6 zone keeps its case.
fn lowercase_host(hostname: &str) -> String {
    match hostname.split_once('%') {
        Some((host, zone)) => format!("{}%{zone}", pycase::lower(host)),
        None => pycase::lower(hostname),
    }
}

/// `int(port)` after w3lib's check that it is ASCII digits within 0–65535;
/// an empty port counts as none.
fn parse_port(port: &str) -> Result<Option<u16>, UrlErrorKind> {
    if port.is_empty() {
        return Ok(None);
    }
    if !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(UrlErrorKind::InvalidPort);
    }
    // Leading zeros are fine for `int()`; strip them so huge-looking but
    // small numbers ("000080") still parse.
    let significant = port.trim_start_matches('0');
    if significant.is_empty() {
        return Ok(Some(0));
    }
    significant
        .parse::<u16>()
        .map(Some)
        .map_err(|_| UrlErrorKind::InvalidPort)
}

/// w3lib `_split_params(scheme, path)`: `;params` of the last segment.
pub(super) fn split_params<'a>(scheme: &str, path: &'a str) -> (&'a str, &'a str) {
    if USES_PARAMS.contains(&scheme) {
        let last_segment = path.rfind('/').map_or(0, |i| i + 1);
        if let Some(semi) = path[last_segment..].find(';') {
            let semi = last_segment + semi;
            return (&path[..semi], &path[semi + 1..]);
        }
    }
    (path, "")
}

/// w3lib `_urlunsplit`.
pub(super) fn urlunsplit(
    scheme: &str,
    netloc: &str,
    path: &str,
    query: &str,
    fragment: &str,
) -> String {
    let mut out = String::with_capacity(
        scheme.len() + netloc.len() + path.len() + query.len() + fragment.len() + 5,
    );
    if !scheme.is_empty() {
        out.push_str(scheme);
        out.push(':');
    }
    if !netloc.is_empty() {
        out.push_str("//");
        out.push_str(netloc);
        if !path.is_empty() && !path.starts_with('/') {
            out.push('/');
        }
    } else if path.starts_with("//")
        || (!scheme.is_empty()
            && USES_NETLOC.contains(&scheme)
            && (path.is_empty() || path.starts_with('/')))
    {
        out.push_str("//");
    }
    out.push_str(path);
    if !query.is_empty() {
        out.push('?');
        out.push_str(query);
    }
    if !fragment.is_empty() {
        out.push('#');
        out.push_str(fragment);
    }
    out
}

/// w3lib `_urlunparse`: [`urlunsplit`] with `;params` put back on the path.
pub(super) fn urlunparse(
    scheme: &str,
    netloc: &str,
    path: &str,
    params: &str,
    query: &str,
    fragment: &str,
) -> String {
    if params.is_empty() {
        return urlunsplit(scheme, netloc, path, query, fragment);
    }
    urlunsplit(scheme, netloc, &format!("{path};{params}"), query, fragment)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_like_w3lib() {
        let s = urlsplit("HTTP://User:P@ss@Example.COM:0080/a;b?c=d#e?f").unwrap();
        assert_eq!(s.scheme, "http");
        assert_eq!(s.netloc, "User:P@ss@Example.COM:0080");
        assert_eq!(s.username.as_deref(), Some("User"));
        assert_eq!(s.password.as_deref(), Some("P@ss"));
        assert_eq!(s.hostname, "example.com");
        assert_eq!(s.port, Some(80));
        assert_eq!(
            (s.path.as_str(), s.query.as_str(), s.fragment.as_str()),
            ("/a;b", "c=d", "e?f")
        );
    }

    #[test]
    fn question_mark_after_hash_is_not_a_query() {
        let s = urlsplit("http://h/p#f?q").unwrap();
        assert_eq!(
            (s.path.as_str(), s.query.as_str(), s.fragment.as_str()),
            ("/p", "", "f?q")
        );
    }

    #[test]
    fn backslash_ends_the_authority_of_special_schemes_only() {
        assert_eq!(
            urlsplit("http://evil.com\\@good.com/").unwrap().hostname,
            "evil.com"
        );
        assert_eq!(
            urlsplit("foo://evil.com\\@good.com/").unwrap().hostname,
            "good.com"
        );
    }

    #[test]
    fn invalid_authorities() {
        assert_eq!(
            urlsplit("http://h:99999/").unwrap_err(),
            UrlErrorKind::InvalidPort
        );
        assert_eq!(
            urlsplit("http://h:8a/").unwrap_err(),
            UrlErrorKind::InvalidPort
        );
        assert_eq!(
            urlsplit("http://[::1/").unwrap_err(),
            UrlErrorKind::InvalidBracketedHost
        );
        assert_eq!(
            urlsplit("http://[1.2.3.4]/").unwrap_err(),
            UrlErrorKind::InvalidBracketedHost
        );
        assert_eq!(
            urlsplit("http://a＠b/").unwrap_err(),
            UrlErrorKind::NormalisedDelimiter
        );
    }
}
