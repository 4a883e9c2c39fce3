//! What the proxy settings accept: `proxies`, each a [`ProxyUrl`] that
//! parses and uses a scheme the HTTP client speaks (its credentials never
//! shown), and `proxy_mode`, a [`ProxyMode`]. Checked wherever a settings
//! layer is read, so a spider with an unusable proxy is refused at load.
//! Using the proxies (the rotation, the environment's proxies) is the
//! downloader's.

use std::fmt;

use super::values::{read_text, SettingValue};
use crate::reader::TableReader;

/// Proxy schemes the HTTP client speaks.
const SCHEMES: &[&str] = &["http", "https", "socks4", "socks4a", "socks5", "socks5h"];

/// A proxy URL that parsed and uses a supported scheme. Its `Display` and
/// `Debug` hide the password (`http://user:***@host:port`).
#[derive(Clone)]
pub struct ProxyUrl {
    url: url::Url,
    shown: String,
}

/// Why a proxy URL was refused; the message shows the URL redacted.
#[derive(Debug, Clone, thiserror::Error)]
#[error("proxy {proxy} is not usable: {problem}")]
pub struct BadProxy {
    pub proxy: String,
    pub problem: String,
}

impl ProxyUrl {
    /// Validates one entry of the `proxies` setting.
    pub fn parse(raw: &str) -> Result<ProxyUrl, BadProxy> {
        let bad = |problem: String| BadProxy {
            proxy: redact(raw),
            problem,
        };
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(bad("the URL is empty".into()));
        }
        // `user:pass@host:port` would parse with `user` as its scheme.
        if !raw.contains("://") {
            return Err(bad("it has no scheme; write it as http://host:port".into()));
        }
        let url = url::Url::parse(raw).map_err(|e| bad(format!("not a valid URL ({e})")))?;
        if !SCHEMES.contains(&url.scheme()) {
            return Err(bad(format!(
                "scheme `{}` is not supported (use one of {})",
                url.scheme(),
                SCHEMES.join(", ")
            )));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(bad("it names no host".into()));
        }
        if url.password().is_some() && url.username().is_empty() {
            return Err(bad("it has a password but no user name".into()));
        }
        let shown = shown(&url);
        Ok(ProxyUrl { url, shown })
    }

    /// The full URL, credentials included: for the HTTP client only.
    pub(crate) fn secret_url(&self) -> &str {
        self.url.as_str()
    }

    /// The proxy's host name (or IP literal, bracketed for IPv6).
    pub fn host(&self) -> &str {
        self.url.host_str().unwrap_or_default()
    }

    /// Strings that must never appear in logs: the password, or a lone user
    /// name (often a token), raw and percent-decoded.
    pub(crate) fn secrets(&self) -> Vec<String> {
        let hidden = match self.url.password() {
            Some(p) => p,
            None => self.url.username(),
        };
        let decoded = percent_encoding::percent_decode_str(hidden)
            .decode_utf8_lossy()
            .into_owned();
        [hidden.to_string(), decoded]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect()
    }
}

impl fmt::Display for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProxyUrl({})", self.shown)
    }
}

/// `scheme://user:***@host:port` from a parsed URL (the path is dropped).
fn shown(url: &url::Url) -> String {
    let userinfo = match (url.username(), url.password()) {
        ("", None) => String::new(),
        (user, Some(_)) if !user.is_empty() => format!("{user}:***@"),
        _ => "***@".to_string(),
    };
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    format!(
        "{}://{userinfo}{}{port}",
        url.scheme(),
        url.host_str().unwrap_or_default()
    )
}

/// Hides the credentials of any proxy-like string, even one that does not
/// parse: everything between the scheme and the last `@` is masked, except
/// a user name followed by a password.
pub fn redact(raw: &str) -> String {
    let (scheme, rest) = match raw.find("://") {
        Some(i) => raw.split_at(i + 3),
        None => ("", raw),
    };
    let Some(at) = rest.rfind('@') else {
        return raw.to_string();
    };
    let (userinfo, host) = (&rest[..at], &rest[at + 1..]);
    let user = userinfo
        .split_once(':')
        .map(|(user, _)| user)
        .filter(|u| !u.is_empty() && !u.contains(['/', '?', '#']));
    match user {
        Some(user) => format!("{scheme}{user}:***@{host}"),
        None => format!("{scheme}***@{host}"),
    }
}

/// How requests are spread over a spider's proxies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProxyMode {
    /// Each request takes the next proxy.
    #[default]
    RoundRobin,
    /// Each host always goes through the same proxy (a stable hash of the
    /// host, the same in every worker of the cluster).
    Sticky,
}

impl std::str::FromStr for ProxyMode {
    type Err = String;

    fn from_str(s: &str) -> Result<ProxyMode, String> {
        match s.trim() {
            "round_robin" => Ok(ProxyMode::RoundRobin),
            "sticky" => Ok(ProxyMode::Sticky),
            other => Err(format!(
                "`{other}` is not a proxy mode; use \"round_robin\" or \"sticky\""
            )),
        }
    }
}

impl SettingValue for ProxyMode {
    const EXPECTED: &'static str = "\"round_robin\" or \"sticky\"";
    fn read(t: &TableReader<'_>, key: &'static str) -> Option<Self> {
        read_text(t, key, "use \"round_robin\" or \"sticky\"", str::parse)
    }
    fn parse_str(s: &str) -> Result<Self, String> {
        s.parse()
    }
    fn show(&self) -> String {
        match self {
            ProxyMode::RoundRobin => "\"round_robin\"",
            ProxyMode::Sticky => "\"sticky\"",
        }
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_urls_show_no_password() {
        let p = ProxyUrl::parse("http://alice:s3cr%40t@proxy.test:3128").unwrap();
        assert_eq!(p.to_string(), "http://alice:***@proxy.test:3128");
        assert_eq!(
            format!("{p:?}"),
            "ProxyUrl(http://alice:***@proxy.test:3128)"
        );
        assert_eq!(p.host(), "proxy.test");
        assert!(p.secret_url().contains("s3cr%40t"));
        let token = ProxyUrl::parse("socks5h://tok3n@[::1]:1080").unwrap();
        assert_eq!(token.to_string(), "socks5h://***@[::1]:1080");
        assert_eq!(token.host(), "[::1]");
        let plain = ProxyUrl::parse("https://proxy.test").unwrap();
        assert_eq!(plain.to_string(), "https://proxy.test");
    }

    #[test]
    fn bad_proxy_urls_are_refused_with_the_url_redacted() {
        for (raw, problem) in [
            ("ftp://bob:hunter2@proxy.test:21", "scheme `ftp`"),
            ("bob:hunter2@proxy.test:3128", "no scheme"),
            ("http://bob:hunter2@", "host"),
            ("http://bob:hunter2@proxy.test:99999", "not a valid URL"),
            ("http://:hunter2@proxy.test:3128", "no user name"),
            ("   ", "empty"),
        ] {
            let err = ProxyUrl::parse(raw).unwrap_err();
            let text = format!("{err} {err:?}");
            assert!(!text.contains("hunter2"), "{text}");
            assert!(text.contains(problem), "{raw}: {text}");
        }
    }

    #[test]
    fn redaction_copes_with_anything() {
        assert_eq!(redact("http://u:p@h:1/x"), "http://u:***@h:1/x");
        assert_eq!(redact("http://u:p/a@ss@h:1"), "http://u:***@h:1");
        assert_eq!(redact("u:p@h:1"), "u:***@h:1");
        assert_eq!(redact("http://token@h"), "http://***@h");
        assert_eq!(redact("http://:p@h"), "http://***@h");
        assert_eq!(redact("http://h:1"), "http://h:1");
    }
}
