//! `[session]` as compiled: how the cluster logs in to a members-only
//! site (the login page, which form, the credentials by where they come
//! from, never by value) and how a page says whether the session holds.
//! What it compiles from, and its checks, are in `compile/session.rs`; the
//! login itself and the session the cluster shares are `crate::downloader::session`'s.
//!
//! Credentials are read when a worker logs in, from the environment or a
//! file; a [`SecretText`] never shows its value (`Debug` and `Display`
//! print a placeholder), so no log line, error or stat can carry it.

use std::path::PathBuf;
use std::time::Duration;

use crate::spider::Selector;

/// `[session]`: one login for the cluster, shared by every worker.
#[derive(Debug, Clone)]
pub struct Session {
    /// The login page, fetched with GET; its form is submitted.
    pub login_url: url::Url,
    /// Which form of the login page (its action, method and hidden
    /// inputs are kept).
    pub form: Selector,
    /// Form fields every account fills (`fields`), by name.
    pub fields: Vec<(String, SecretSource)>,
    /// The accounts logins take turns with; one unnamed account made of
    /// `fields` when `[[session.accounts]]` lists none.
    pub accounts: Vec<Account>,
    /// What the page after a login shows when it worked.
    pub logged_in: Detector,
    /// What a response shows when the session is gone.
    pub logged_out: Detector,
    /// Logins per account per hour at most; beyond, the crawl waits.
    pub max_logins_per_hour: u32,
    /// How long one worker holds the cluster's login lock at most (a
    /// worker killed mid-login locks nobody out for longer).
    pub login_timeout: Duration,
    /// How long an account rests after a refused login, when the site's
    /// answer has no `Retry-After`; then it is tried once more.
    pub login_cooldown: Duration,
    /// Hosts besides the login page's that may receive the credentials
    /// (a form's action, or a 307/308 that keeps the form's body), as
    /// written in `login_hosts`: `host` (at its scheme's default port) or
    /// `host:port`, lowercase.
    pub login_hosts: Vec<String>,
}

/// One account of `[[session.accounts]]`.
#[derive(Debug, Clone)]
pub struct Account {
    /// How it is named in logs and stats (`name`, or `account-<n>`): never
    /// a credential.
    pub name: String,
    /// Its own form fields, over the session's.
    pub fields: Vec<(String, SecretSource)>,
}

/// How a page is recognised.
#[derive(Debug, Clone, Default)]
pub struct Detector {
    /// A URL a response is, or redirects to: a path (`/login`, matched
    /// against the path's start) or a whole URL (matched against its start).
    pub url: Option<String>,
    /// An element the page has.
    pub css: Option<Selector>,
}

/// Where a form field's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// An environment variable, read at login.
    Env(String),
    /// A file's contents (one trailing newline dropped), read at login.
    File(PathBuf),
    /// Written in the spider file: only for fields that are no secret
    /// (`remember = "1"`); `check` refuses it for a password.
    Literal(String),
}

impl SecretSource {
    /// The value, or why it cannot be had (naming the variable or file,
    /// never a value).
    pub fn read(&self) -> Result<SecretText, String> {
        match self {
            SecretSource::Env(var) => std::env::var(var)
                .map(SecretText)
                .map_err(|_| format!("environment variable {var} is not set (or not UTF-8)")),
            SecretSource::File(path) => std::fs::read_to_string(path)
                .map(|s| {
                    let s = s.strip_suffix('\n').unwrap_or(&s);
                    SecretText(s.strip_suffix('\r').unwrap_or(s).to_string())
                })
                .map_err(|e| format!("cannot read {}: {e}", path.display())),
            SecretSource::Literal(v) => Ok(SecretText(v.clone())),
        }
    }

    /// Where it comes from, for messages.
    pub fn describe(&self) -> String {
        match self {
            SecretSource::Env(var) => format!("${var}"),
            SecretSource::File(path) => path.display().to_string(),
            SecretSource::Literal(_) => "the spider file".to_string(),
        }
    }
}

/// A credential or a session cookie: its value is never shown.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretText(String);

impl SecretText {
    pub fn new(value: String) -> SecretText {
        SecretText(value)
    }

    /// The value, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for SecretText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[secret]")
    }
}

impl std::fmt::Display for SecretText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[secret]")
    }
}

/// Field names whose value is a secret: `check` refuses them written in
/// the file.
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["pass", "pwd", "secret", "token", "key", "otp", "pin"]
        .iter()
        .any(|s| n.contains(s))
}

impl Session {
    /// Whether requests to `url` carry the session: those to the login
    /// page's host and port.
    pub fn applies_to(&self, url: &str) -> bool {
        url::Url::parse(url).is_ok_and(|u| {
            u.host_str() == self.login_url.host_str()
                && u.port_or_known_default() == self.login_url.port_or_known_default()
        })
    }

    /// Whether a login form may be sent to `url`: the login page's host
    /// and port, or one of `login_hosts`. Anywhere else, a page's form (or
    /// a redirect that keeps its body) would hand the credentials to
    /// whoever the page names.
    pub fn may_receive_credentials(&self, url: &url::Url) -> bool {
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return false;
        };
        let same = Some(host) == self.login_url.host_str()
            && Some(port) == self.login_url.port_or_known_default();
        let host = host.to_ascii_lowercase();
        let default = url::Url::parse(&format!("{}://x/", url.scheme()))
            .ok()
            .and_then(|u| u.port_or_known_default());
        same || self.login_hosts.iter().any(|allowed| {
            *allowed == format!("{host}:{port}") || (*allowed == host && Some(port) == default)
        })
    }

    /// The form fields of `account`: the session's, then its own.
    pub fn fields_of<'a>(
        &'a self,
        account: &'a Account,
    ) -> impl Iterator<Item = &'a (String, SecretSource)> + 'a {
        self.fields
            .iter()
            .filter(|(n, _)| !account.fields.iter().any(|(m, _)| m == n))
            .chain(account.fields.iter())
    }
}

impl Detector {
    /// Whether `target` (a response's URL, or where it redirects) is the
    /// detector's URL.
    pub fn url_matches(&self, target: &url::Url) -> bool {
        match &self.url {
            Some(u) if u.starts_with('/') => target.path().starts_with(u.as_str()),
            Some(u) => target.as_str().starts_with(u.as_str()),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_shows_its_value() {
        let s = SecretText::new("hunter2".into());
        assert_eq!(format!("{s} {s:?}"), "[secret] [secret]");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn password_like_names_are_secret() {
        for n in ["password", "passwd", "user_pwd", "csrf_token", "api_key"] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in ["username", "remember", "login"] {
            assert!(!is_secret_name(n), "{n}");
        }
    }

    #[test]
    fn a_file_secret_loses_its_trailing_newline() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("pass");
        std::fs::write(&path, "s3cret\n").expect("write");
        let got = SecretSource::File(path).read().expect("read");
        assert_eq!(got.expose(), "s3cret");
        let missing = SecretSource::Env("CRAWLWORKER_TEST_NO_SUCH_VAR".into()).read();
        assert!(missing
            .unwrap_err()
            .contains("CRAWLWORKER_TEST_NO_SUCH_VAR"));
    }
}
