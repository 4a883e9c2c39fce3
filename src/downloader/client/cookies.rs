//! The spider's cookie jar (`cookies_enabled`), bounded in the sites it
//! remembers: one [`reqwest::cookie::Jar`] per site, at most
//! [`MAX_SITES`] of them, the least recently used forgotten first. A crawl
//! over a million hosts that each set a cookie keeps the cookies of the
//! most recent few thousand, not of every host it has seen; a site whose
//! jar was forgotten gets a fresh one, as a new visitor would.
//!
//! A site is the last two labels of the host name (`forum.example.com` and
//! `www.example.com` share `example.com`), or the whole host for an IP
//! address or a one-label name. That grouping only decides where cookies
//! are stored: which of them a request sends is still decided by the jar's
//! own rules (RFC 6265 domain and path matching), and every cookie a host
//! may receive was set by a host of the same site. A cookie whose Domain
//! is a single label (`Domain=com`) is no longer shared across sites,
//! which is what browsers do too.
//!
//! The jar owns no I/O; the HTTP client calls it for every exchange.

use std::sync::Arc;

use reqwest::cookie::{CookieStore, Jar};
use reqwest::header::HeaderValue;

/// Sites whose cookies one spider's worker remembers. A site's jar with a
/// session cookie or two takes a few KiB.
pub const MAX_SITES: usize = 4096;

/// Cookies by site, the most recently used kept.
pub struct CookieJar {
    sites: quick_cache::sync::Cache<String, Arc<Jar>>,
}

impl Default for CookieJar {
    fn default() -> Self {
        CookieJar::with_capacity(MAX_SITES)
    }
}

impl CookieJar {
    /// A jar that remembers the cookies of at most `sites` sites.
    pub fn with_capacity(sites: usize) -> CookieJar {
        CookieJar {
            sites: quick_cache::sync::Cache::new(sites),
        }
    }

    /// Sites with cookies remembered right now.
    pub fn sites(&self) -> usize {
        self.sites.len()
    }
}

impl std::fmt::Debug for CookieJar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CookieJar")
            .field("sites", &self.sites.len())
            .finish()
    }
}

/// The site `url`'s cookies are stored under (see the module doc).
fn site(url: &url::Url) -> Option<String> {
    let host = match url.host()? {
        url::Host::Domain(name) => name.trim_end_matches('.').to_ascii_lowercase(),
        ip => return Some(ip.to_string()),
    };
    let mut labels = host.rsplitn(3, '.');
    let last = labels.next()?;
    Some(match labels.next() {
        Some(second) => format!("{second}.{last}"),
        None => last.to_string(),
    })
}

impl CookieStore for CookieJar {
    fn set_cookies(&self, headers: &mut dyn Iterator<Item = &HeaderValue>, url: &url::Url) {
        let mut headers = headers.peekable();
        if headers.peek().is_none() {
            return;
        }
        let Some(site) = site(url) else {
            return;
        };
        let Ok(jar) = self
            .sites
            .get_or_insert_with(&site, || Ok::<_, std::convert::Infallible>(Arc::default()));
        jar.set_cookies(&mut headers, url);
    }

    fn cookies(&self, url: &url::Url) -> Option<HeaderValue> {
        self.sites.get(&site(url)?)?.cookies(url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> url::Url {
        url::Url::parse(s).expect("url")
    }

    fn set(jar: &CookieJar, at: &str, cookie: &'static str) {
        let header = HeaderValue::from_static(cookie);
        jar.set_cookies(&mut std::iter::once(&header), &url(at));
    }

    fn sent(jar: &CookieJar, to: &str) -> Option<String> {
        jar.cookies(&url(to))
            .map(|v| v.to_str().unwrap_or_default().to_string())
    }

    #[test]
    fn sites_group_hosts_by_their_last_two_labels() {
        assert_eq!(
            site(&url("http://forum.Example.com./a")).as_deref(),
            Some("example.com")
        );
        assert_eq!(
            site(&url("http://localhost:8080/")).as_deref(),
            Some("localhost")
        );
        assert_eq!(
            site(&url("http://127.0.0.1:80/")).as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(site(&url("http://[::1]/")).as_deref(), Some("[::1]"));
    }

    #[test]
    fn cookies_follow_the_jar_rules_within_a_site() {
        let jar = CookieJar::default();
        set(
            &jar,
            "http://www.example.com/",
            "wide=1; Domain=example.com; Path=/",
        );
        set(&jar, "http://www.example.com/", "narrow=2; Path=/");
        assert_eq!(
            sent(&jar, "http://forum.example.com/x").as_deref(),
            Some("wide=1")
        );
        let www = sent(&jar, "http://www.example.com/").unwrap_or_default();
        assert!(www.contains("wide=1") && www.contains("narrow=2"), "{www}");
        assert_eq!(sent(&jar, "http://other.test/"), None);
        // A hostile single-label Domain is not shared with other sites.
        set(&jar, "http://a.com/", "super=1; Domain=com");
        assert_eq!(sent(&jar, "http://b.com/"), None);
    }

    #[test]
    fn the_jar_remembers_a_bounded_number_of_sites() {
        let jar = CookieJar::with_capacity(100);
        for i in 0..10_000 {
            let header = HeaderValue::from_str(&format!("id={i}")).expect("header");
            let at = url(&format!("http://h{i}.test{i}/"));
            jar.set_cookies(&mut std::iter::once(&header), &at);
        }
        assert!(jar.sites() <= 100, "{} sites", jar.sites());
        // The most recent site is still there.
        assert_eq!(
            sent(&jar, "http://h9999.test9999/").as_deref(),
            Some("id=9999")
        );
    }

    #[test]
    fn a_response_without_cookies_stores_nothing() {
        let jar = CookieJar::default();
        jar.set_cookies(&mut std::iter::empty(), &url("http://a.test/"));
        assert_eq!(jar.sites(), 0);
    }
}
