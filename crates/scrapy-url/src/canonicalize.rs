//! w3lib 2.5.0's `canonicalize_url(url)` with its default arguments
//! (`keep_blank_values=True`, `keep_fragments=False`, `encoding=None`,
//! `query_separator="&"`): the URL form that scrapy-redis fingerprints.
//!
//! Steps, in w3lib's order: make the URL safe (UTF-8), split `;params` off
//! the last path segment, sort the query arguments by raw bytes and
//! re-encode them, re-quote the path (normalising escapes but keeping
//! `%2F`, `%3B`, `%3F` and `%25` encoded), resolve dot segments, drop the
//! fragment, lower-case the host and normalise an IPv6 host.

use encoding_rs::UTF_8;

use super::ipaddr::{self, IpAddress};
use super::percent::{parse_qsl, quote, unquote, urlencode, PATH_SAFE};
use super::pycase;
use super::safe_url::safe_url_split;
use super::split::{split_params, urlunparse};
use super::UrlError;

/// Exactly w3lib 2.5.0's `canonicalize_url(url)` with default arguments.
///
/// The input need not be safe already (it is made safe with UTF-8 first).
/// Where Python raises `ValueError` (see [`super::UrlErrorKind`]) this
/// returns `url` unchanged; [`try_canonicalize_url`] reports it instead.
#[must_use]
pub fn canonicalize_url(url: &str) -> String {
    try_canonicalize_url(url).unwrap_or_else(|_| url.to_owned())
}

/// [`canonicalize_url`], reporting where Python would raise.
///
/// # Errors
///
/// Where w3lib raises `ValueError`: any [`super::UrlErrorKind`] but
/// `MissingScheme`, and `Unencodable` only for a non-ASCII IPv6 zone (UTF-8
/// encodes everything else).
pub fn try_canonicalize_url(url: &str) -> Result<String, UrlError> {
    // w3lib retries with UTF-8 on UnicodeEncodeError; with the default
    // encoding (UTF-8 already) that retry cannot change the outcome.
    let parts = safe_url_split(url, UTF_8).map_err(|kind| UrlError::new(url, kind))?;
    let (path, params) = split_params(&parts.scheme, &parts.path);
    let query = canonical_query(&parts.query);
    let mut path = if path.is_empty() {
        "/".to_owned()
    } else {
        quote(&unquote_path(path), &PATH_SAFE)
    };
    // Only a hierarchical path has dot segments to resolve; an opaque one
    // ("mailto:a/../b") is left alone, as browsers do.
    if path.starts_with('/') {
        path = remove_dot_segments(&path);
    }
    let netloc = normalize_ipv6_host(&lowercase_host(&parts.netloc));
    Ok(urlunparse(
        &parts.scheme,
        &netloc,
        &path,
        params,
        &query,
        "",
    ))
}

/// Query arguments sorted by (name, value) as raw bytes, then encoded with
/// only unreserved characters left as they are and spaces as `+`. Blank
/// values are kept; empty `&&` fields vanish.
fn canonical_query(query: &str) -> String {
    if query.is_empty() {
        return String::new();
    }
    let mut pairs = parse_qsl(query);
    pairs.sort();
    urlencode(&pairs)
}

/// w3lib `_unquotepath`: decode every escape except those of `/`, `;`, `?`
/// and `%` itself, which would change how the path splits if decoded.
fn unquote_path(path: &str) -> Vec<u8> {
    if !path.contains('%') {
        return path.as_bytes().to_vec();
    }
    // Chained replacements, in w3lib's order and with str.replace's
    // left-to-right, non-overlapping semantics.
    let protected = path
        .replace("%25", "%2525")
        .replace("%2f", "%252F")
        .replace("%2F", "%252F")
        .replace("%3b", "%253B")
        .replace("%3B", "%253B")
        .replace("%3f", "%253F")
        .replace("%3F", "%253F");
    unquote(protected.as_bytes())
}

/// w3lib `_remove_dot_segments` (RFC 3986 section 5.2.4) for a path that
/// starts with `/`.
fn remove_dot_segments(path: &str) -> String {
    // Every segment follows a "/", so a path without "/." has none.
    if !path.contains("/.") {
        return path.to_owned();
    }
    let Some(rest) = path.strip_prefix('/') else {
        return path.to_owned();
    };
    let segments: Vec<&str> = rest.split('/').collect();
    let Some((last, init)) = segments.split_last() else {
        return path.to_owned();
    };
    let mut output: Vec<&str> = Vec::with_capacity(segments.len());
    for &segment in init {
        match segment {
            ".." => {
                output.pop();
            }
            "." => {}
            _ => output.push(segment),
        }
    }
    // A trailing dot segment leaves the path ending in "/".
    match *last {
        ".." => {
            output.pop();
            output.push("");
        }
        "." => output.push(""),
        _ => output.push(last),
    }
    format!("/{}", output.join("/"))
}

/// Lower-cases the host and port part of `netloc` (not the user info) and
/// drops one trailing `:`.
fn lowercase_host(netloc: &str) -> String {
    let split_at = netloc.rfind('@').map_or(0, |i| i + 1);
    let (userinfo, host) = netloc.split_at(split_at);
    let host = pycase::lower(host);
    let host = host.strip_suffix(':').unwrap_or(&host);
    format!("{userinfo}{host}")
}

/// w3lib `_normalize_ipv6_host`: rewrites a bracketed IPv6 address in
/// Python's compressed form (`[::0:1]` becomes `[::1]`).
fn normalize_ipv6_host(netloc: &str) -> String {
    let Some(open) = netloc.find('[') else {
        return netloc.to_owned();
    };
    let Some(close) = netloc[open..].find(']').map(|i| open + i) else {
        return netloc.to_owned();
    };
    match ipaddr::parse(&netloc[open + 1..close]) {
        Some(IpAddress::V6 { bits, scope }) => format!(
            "{}[{}]{}",
            &netloc[..open],
            ipaddr::ipv6_to_string(bits, scope.as_deref()),
            &netloc[close + 1..]
        ),
        _ => netloc.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_query_and_keeps_blank_values() {
        assert_eq!(
            canonicalize_url("http://www.example.com/do?c=3&b=5&b=2&a=50&z"),
            "http://www.example.com/do?a=50&b=2&b=5&c=3&z="
        );
    }

    #[test]
    fn semicolon_is_not_a_query_separator() {
        assert_eq!(
            canonicalize_url("http://h/?b=1;a=2&a=1"),
            "http://h/?a=1&b=1%3Ba%3D2"
        );
    }

    #[test]
    fn path_escapes_normalised_but_delimiters_kept() {
        assert_eq!(
            canonicalize_url("http://h/%7e%41%2f%3b%3F%25zz%5B"),
            "http://h/~A%2F%3B%3F%25zz["
        );
    }

    #[test]
    fn dot_segments_fragment_and_ipv6() {
        assert_eq!(
            canonicalize_url("http://[::0:1]/a/../b/./c/.#frag"),
            "http://[::1]/b/c/"
        );
    }

    #[test]
    fn userinfo_keeps_case_host_does_not() {
        assert_eq!(
            canonicalize_url("http://UsEr@ExAmple.COM"),
            "http://UsEr@example.com/"
        );
    }
}
