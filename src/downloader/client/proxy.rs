//! Proxies: the validated proxy URL (whose credentials are never shown),
//! how requests are spread over a spider's proxies, and the proxies the
//! environment configures (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`).
//!
//! This module never connects anywhere; `fetch` builds one HTTP client per
//! proxy and asks [`Rotation`] which one a request uses.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use crate::settings::ProxyMode;

/// Proxy schemes the HTTP client speaks.
const SCHEMES: &[&str] = &["http", "https", "socks4", "socks4a", "socks5", "socks5h"];

/// Environment variables that configure proxies (read by the HTTP client
/// itself; listed here to trust their hosts and hide their credentials).
const ENV_VARS: &[&str] = &[
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "ALL_PROXY",
    "all_proxy",
];

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
    pub(super) fn secret_url(&self) -> &str {
        self.url.as_str()
    }

    /// The proxy's host name (or IP literal, bracketed for IPv6).
    pub fn host(&self) -> &str {
        self.url.host_str().unwrap_or_default()
    }

    /// Strings that must never appear in logs: the password, or a lone user
    /// name (often a token), raw and percent-decoded.
    fn secrets(&self) -> Vec<String> {
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

/// Picks the proxy of each request.
#[derive(Debug)]
pub struct Rotation {
    mode: ProxyMode,
    /// Requests routed so far (round robin).
    next: AtomicUsize,
}

impl Rotation {
    pub fn new(mode: ProxyMode) -> Rotation {
        Rotation {
            mode,
            next: AtomicUsize::new(0),
        }
    }

    pub fn mode(&self) -> ProxyMode {
        self.mode
    }

    /// The index, below `count` (at least 1), of the proxy for a request to
    /// `host`.
    pub fn pick(&self, host: &str, count: usize) -> usize {
        match self.mode {
            ProxyMode::RoundRobin => self.next.fetch_add(1, Ordering::Relaxed) % count,
            ProxyMode::Sticky => {
                (fnv1a(host.to_ascii_lowercase().as_bytes()) % count as u64) as usize
            }
        }
    }
}

/// FNV-1a, 64 bits: stable across processes, versions and machines, unlike
/// the standard library's hasher.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// What the environment's proxy variables mean for the guard and the logs.
#[derive(Debug, Default)]
pub struct EnvProxies {
    /// Hosts of the proxies set (trusted by the guard).
    pub hosts: Vec<String>,
    /// Credentials to hide.
    pub secrets: Vec<String>,
}

impl EnvProxies {
    /// Reads the proxy variables through `lookup` (`std::env::var` in
    /// production). Values the HTTP client may read without a scheme
    /// (`proxy:3128`) are taken as http.
    pub fn read(lookup: impl Fn(&str) -> Option<String>) -> EnvProxies {
        let mut env = EnvProxies::default();
        for var in ENV_VARS {
            let Some(raw) = lookup(var).filter(|v| !v.trim().is_empty()) else {
                continue;
            };
            let raw = raw.trim();
            let with_scheme = if raw.contains("://") {
                raw.to_string()
            } else {
                format!("http://{raw}")
            };
            match ProxyUrl::parse(&with_scheme) {
                Ok(p) => {
                    env.hosts.push(p.host().to_string());
                    env.secrets.extend(p.secrets());
                }
                // The client will fail on it too; at least keep it out of logs.
                Err(_) => env.secrets.push(raw.to_string()),
            }
        }
        env
    }

    pub fn any(&self) -> bool {
        !self.hosts.is_empty() || !self.secrets.is_empty()
    }
}

/// Removes proxy credentials from text taken from elsewhere (error
/// messages of the HTTP stack).
#[derive(Debug, Default, Clone)]
pub struct Scrubber {
    secrets: Vec<String>,
}

impl Scrubber {
    pub fn new(proxies: &[ProxyUrl], env: &EnvProxies) -> Scrubber {
        let mut secrets: Vec<String> = proxies
            .iter()
            .flat_map(ProxyUrl::secrets)
            .chain(env.secrets.iter().cloned())
            .collect();
        // Longest first, so a secret containing another is hidden whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Scrubber { secrets }
    }

    pub fn scrub(&self, text: String) -> String {
        self.secrets.iter().fold(text, |t, s| {
            if t.contains(s.as_str()) {
                t.replace(s.as_str(), "***")
            } else {
                t
            }
        })
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

    #[test]
    fn modes_parse_and_pick() {
        assert_eq!("sticky".parse(), Ok(ProxyMode::Sticky));
        assert_eq!("round_robin".parse(), Ok(ProxyMode::RoundRobin));
        assert!("random"
            .parse::<ProxyMode>()
            .unwrap_err()
            .contains("round_robin"));

        let rr = Rotation::new(ProxyMode::RoundRobin);
        let picks: Vec<usize> = (0..5).map(|_| rr.pick("a.test", 3)).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1]);

        let sticky = Rotation::new(ProxyMode::Sticky);
        let first: Vec<usize> = (0..20)
            .map(|i| sticky.pick(&format!("h{i}.test"), 3))
            .collect();
        let again: Vec<usize> = (0..20)
            .map(|i| sticky.pick(&format!("H{i}.TEST"), 3))
            .collect();
        assert_eq!(first, again);
        assert!((0..3).all(|p| first.contains(&p)), "{first:?}");
        // Pinned: the same host maps to the same proxy on every machine.
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn env_proxies_are_trusted_and_hidden() {
        let env = EnvProxies::read(|k| match k {
            "HTTPS_PROXY" => Some("http://me:pw@corp-proxy.test:8080".into()),
            "http_proxy" => Some("10.0.0.5:3128".into()),
            _ => None,
        });
        assert_eq!(env.hosts, ["10.0.0.5", "corp-proxy.test"]);
        assert!(env.any());
        let scrub = Scrubber::new(&[], &env);
        assert_eq!(scrub.scrub("auth pw failed".into()), "auth *** failed");
        assert!(!EnvProxies::read(|_| None).any());
    }
}
