//! Redis addresses: checked when the settings are built ([`RedisUrl`]), and
//! shown as people see them, the password replaced, so it never reaches a
//! log line or an error message.

use std::fmt;

/// A Redis address that Redis's client accepts (`redis://`, `rediss://`,
/// `unix://`). Its `Display` hides the password; [`RedisUrl::as_str`] is
/// for connecting only.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl(String);

impl RedisUrl {
    /// Checks `url`; the error never shows the password.
    pub fn parse(url: &str) -> Result<RedisUrl, String> {
        let url = url.trim();
        match redis::IntoConnectionInfo::into_connection_info(url) {
            Ok(_) => Ok(RedisUrl(url.to_string())),
            Err(e) => Err(format!(
                "`{}` is not a Redis address ({e}); write e.g. redis://127.0.0.1:6379 or rediss://:PASSWORD@HOST:6380",
                redact(url)
            )),
        }
    }

    /// `redis://127.0.0.1:6379`, the default.
    pub fn local() -> RedisUrl {
        RedisUrl("redis://127.0.0.1:6379".to_string())
    }

    /// The address with its password, to connect with.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A client for it.
    pub fn client(&self) -> redis::RedisResult<redis::Client> {
        redis::Client::open(self.0.as_str())
    }
}

impl fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact(&self.0))
    }
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RedisUrl({})", redact(&self.0))
    }
}

/// `url` with any password replaced by `***`.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            if u.password().is_some() {
                let _ = u.set_password(Some("***"));
            }
            u.to_string()
        }
        // Not a URL we can parse: show only its scheme, it may hold a secret.
        Err(_) => match url.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://(unparsable address)"),
            None => "(unparsable Redis address)".to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact("redis://:s3cret@127.0.0.1:6379/0"),
            "redis://:***@127.0.0.1:6379/0"
        );
        assert_eq!(
            redact("rediss://user:pw@127.0.0.1:6380"),
            "rediss://user:***@127.0.0.1:6380"
        );
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert!(!redact("redis://:pw@[bad").contains("pw"));
        let url = RedisUrl::parse("redis://:s3cret@127.0.0.1:6379").unwrap();
        assert_eq!(url.to_string(), "redis://:***@127.0.0.1:6379");
        assert!(!format!("{url:?}").contains("s3cret"));
    }

    #[test]
    fn bad_addresses_are_refused_without_their_password() {
        let e = RedisUrl::parse("http://:s3cret@127.0.0.1:6379").unwrap_err();
        assert!(
            e.contains("not a Redis address") && !e.contains("s3cret"),
            "{e}"
        );
    }
}
