//! Redis addresses as people see them: the password replaced, so it never
//! reaches a log line or an error message.

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
    use super::redact;

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
    }
}
