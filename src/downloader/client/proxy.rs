//! Proxies in use: how requests are spread over a spider's proxies, the
//! proxies the environment configures (`HTTP_PROXY`, `HTTPS_PROXY`,
//! `ALL_PROXY`), and keeping every proxy's credentials out of messages.
//! What a proxy setting accepts (a valid [`ProxyUrl`], a [`ProxyMode`]) is
//! the settings' ([`crate::settings::proxy`]).
//!
//! This module never connects anywhere; `fetch` builds one HTTP client per
//! proxy and asks [`Rotation`] which one a request uses.

use std::sync::atomic::{AtomicUsize, Ordering};

pub use crate::settings::proxy::{redact, BadProxy, ProxyMode, ProxyUrl};

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
