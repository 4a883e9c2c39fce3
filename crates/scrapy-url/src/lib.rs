//! scrapy-url: Scrapy's URL handling and scrapy-redis's request
//! fingerprints in Rust, byte-identical to scrapy-redis 0.9.1 (with w3lib
//! 2.5.0 and Python 3.11), so a dupefilter set filled by a scrapy-redis
//! cluster stays valid when a Rust crawler (crawlworker) takes over.
//!
//! Public API, in the order a URL meets it:
//!
//! - [`safe_url_string`]: w3lib's `safe_url_string(url, encoding)`, applied
//!   by Scrapy's `Request` constructor (UTF-8) and link extractor (the
//!   page's encoding).
//! - [`canonicalize_url`]: w3lib's `canonicalize_url(url)`.
//! - [`request_fingerprint`]: scrapy-redis's fingerprint of a request whose
//!   URL is already safe; [`fingerprint_for`] starts from the raw URL.
//!
//! Each infallible function has a `try_` twin returning [`UrlError`] where
//! Python raises; the infallible ones return their input unchanged then.
//! None of them panics on any input.
//!
//! Layout: `split` cuts URLs as w3lib's `_urlsplit` does, `percent` holds
//! the quoting primitives, `safe_url` and `canonicalize` are the two w3lib
//! functions, `dupefilter` the scrapy-redis fingerprint. Beneath them,
//! `codec` encodes queries as Python's codecs do (with the generated
//! `codec_tables`), `idna` turns hosts into ASCII as Python's IDNA 2003
//! codec does (with `unicode` for NFKC and the generated `tables`), and
//! `ipaddr` and `pycase` mirror Python's `ipaddress` and `str.lower`. The
//! crate knows no Redis, no HTTP and no request type.
//!
//! The test vectors in `data/vectors.json` come from the real Python
//! packages (`gen/gen_vectors.py`); `tests.rs` checks every one of them
//! (`cargo test -p scrapy-url`). The README says how to regenerate them and
//! the generated tables.

mod canonicalize;
mod codec;
mod codec_tables;
mod dupefilter;
mod idna;
mod ipaddr;
mod percent;
mod pycase;
mod safe_url;
mod split;
mod tables;
mod unicode;

#[cfg(test)]
mod tests;

pub use canonicalize::{canonicalize_url, try_canonicalize_url};
pub use dupefilter::{fingerprint_for, request_fingerprint};
pub use safe_url::{safe_url_string, try_safe_url_string};

/// Why a URL was refused where w3lib or Scrapy would raise `ValueError`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} in URL {url:?}")]
pub struct UrlError {
    /// The URL as it was given.
    pub url: String,
    /// What was wrong with it.
    pub kind: UrlErrorKind,
}

impl UrlError {
    fn new(url: &str, kind: UrlErrorKind) -> Self {
        UrlError {
            url: url.to_owned(),
            kind,
        }
    }
}

/// The kinds of URL Python refuses, so callers can branch (a link extractor
/// skips the link; a start URL is reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UrlErrorKind {
    /// Unbalanced brackets in the authority, text around a bracketed host,
    /// or a bracketed host that is not an IPv6 address or IPvFuture literal
    /// (a bracketed IPv4 address included).
    #[error("invalid bracketed (IPv6) host")]
    InvalidBracketedHost,
    /// A non-ASCII authority whose NFKC form contains a URL delimiter that
    /// was not there before (e.g. a fullwidth `＠`).
    #[error("host with characters that NFKC normalisation turns into URL delimiters")]
    NormalisedDelimiter,
    /// A port that is not ASCII digits or is above 65535.
    #[error("invalid port (not ASCII digits, or above 65535)")]
    InvalidPort,
    /// A query or fragment character the encoding cannot represent, or a
    /// non-ASCII IPv6 zone.
    #[error("characters the target encoding cannot represent")]
    Unencodable,
    /// The safe URL has no `://` and is neither `about:` nor `data:`, so
    /// Scrapy refuses to build a `Request` for it.
    #[error("missing scheme (Scrapy refuses such a request)")]
    MissingScheme,
}
