//! Session ids in logged URLs. A site that keeps its session in the URL
//! (phpBB's `sid=`, PHP's `PHPSESSID=`, a Java servlet's `;jsessionid=`)
//! puts a live session in every link it serves, and links are logged: a
//! line per page at debug, more at trace. Every log line is written
//! through [`session_ids`], which masks the value of such a parameter
//! (`sid=[secret]`); the request itself is sent as it is.
//!
//! Masked, in a URL's query or path parameters, plain or percent-encoded
//! inside another URL (`?next=%2Ft%3Fsid%3D…`): the names of [`NAMES`],
//! any name containing `sess` (`member_session`, `ASPSESSIONID…`), and
//! the cookie names of a spider's login session, learned as soon as a
//! worker has the session ([`learn_cookie_names`]). Names are matched
//! whatever their case.
//!
//! And the secrets themselves, wherever a line holds them: the values of
//! the cookies a login receives and of the credentials it sends are
//! learnt before they are sent or stored ([`learn_secret`]), and
//! [`log_line`] masks them in every line, whichever library wrote it and
//! whatever `CRAWLWORKER_LOG` lets through: a second barrier behind the
//! log filter's caps on the libraries that print them.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use arc_swap::ArcSwap;
use regex::bytes::{Captures, Regex};

/// Parameters that carry a session id on common web stacks.
pub const NAMES: &[&str] = &["sid", "PHPSESSID", "jsessionid", "sessionid"];

/// What a masked value is replaced with.
pub const MASK: &str = "[secret]";

/// The names masked besides [`NAMES`], and the pattern made of them all.
struct Masker {
    learned: Vec<String>,
    pattern: Regex,
}

/// Secret values shorter than this are not masked by value (they would
/// mask ordinary words); the log filter's caps still hold them back.
pub const MIN_SECRET_LEN: usize = 6;
/// How many secret values are masked at most: the newest (a long crawl
/// logs in again and again; the old sessions are dead).
pub const MAX_SECRETS: usize = 256;

/// The secret values masked, newest last, and the pattern of them all.
#[derive(Default)]
struct Secrets {
    values: Vec<String>,
    pattern: Option<Regex>,
}

static SECRETS: LazyLock<ArcSwap<Secrets>> =
    LazyLock::new(|| ArcSwap::from_pointee(Secrets::default()));

impl Masker {
    fn new(learned: Vec<String>) -> Masker {
        let names: Vec<String> = NAMES
            .iter()
            .map(|n| n.to_string())
            .chain(learned.iter().cloned())
            .map(|n| regex::escape(&n))
            .chain(["[a-z0-9_.-]*sess[a-z0-9_.-]*".to_string()])
            .collect();
        let names = names.join("|");
        // A plain parameter's value ends where the URL's next part (or the
        // log line's text) begins; an encoded one's also at the next `%`.
        let pattern = format!(
            r#"(?i)(?P<plain>[?&;](?:{names})=)[^&#;?\s"'\\<>]*|(?P<encoded>%(?:3F|26|3B)(?:{names})%3D)[^&#;?%\s"'\\<>]*"#
        );
        Masker {
            learned,
            // The names are escaped and the pattern fixed: it compiles.
            pattern: Regex::new(&pattern).unwrap_or_else(|_| Regex::new("$^").expect("regex")),
        }
    }
}

static MASKER: LazyLock<ArcSwap<Masker>> =
    LazyLock::new(|| ArcSwap::from_pointee(Masker::new(Vec::new())));

/// Learning happens rarely (once per session's set of cookie names), and
/// one at a time.
static LEARNING: Mutex<()> = Mutex::new(());

/// A log line as written: the secret values learnt masked, then the
/// session ids in its URLs (borrowed when there is nothing to mask).
pub fn log_line(line: &[u8]) -> Cow<'_, [u8]> {
    let secrets = SECRETS.load();
    match secrets.pattern.as_ref().filter(|p| p.is_match(line)) {
        Some(p) => {
            let masked = p.replace_all(line, MASK.as_bytes()).into_owned();
            Cow::Owned(session_ids(&masked).into_owned())
        }
        None => session_ids(line),
    }
}

/// Masks `value` wherever a log line holds it from now on (also as a
/// form or a URL encodes it): a cookie's value or a credential, learnt
/// before it is sent or stored. Values under [`MIN_SECRET_LEN`]
/// characters are not.
pub fn learn_secret(value: &str) {
    let value = value.trim();
    if value.len() < MIN_SECRET_LEN {
        return;
    }
    let encoded: String = url::form_urlencoded::byte_serialize(value.as_bytes()).collect();
    let forms = [value.to_string(), encoded, value.replace(' ', "%20")];
    let known = SECRETS.load();
    if forms.iter().all(|f| known.values.contains(f)) {
        return;
    }
    let _one = LEARNING.lock().unwrap_or_else(PoisonError::into_inner);
    let mut values = SECRETS.load().values.clone();
    for f in forms {
        if !values.contains(&f) {
            values.push(f);
        }
    }
    let excess = values.len().saturating_sub(MAX_SECRETS);
    values.drain(..excess);
    // Longest first, so a value is masked whole before a part of it.
    let mut sorted: Vec<&String> = values.iter().collect();
    sorted.sort_by_key(|v| std::cmp::Reverse(v.len()));
    let alternatives: Vec<String> = sorted.iter().map(|v| regex::escape(v)).collect();
    let pattern = Regex::new(&alternatives.join("|")).ok();
    SECRETS.store(Arc::new(Secrets { values, pattern }));
}

/// Masks the values of the cookies of `cookie` (a `Cookie` header,
/// `a=1; b=2`, or a `Set-Cookie` header, whose attributes are no secret)
/// from now on: see [`learn_secret`].
pub fn learn_cookie_values(cookie: &str, set_cookie: bool) {
    let pairs: Vec<&str> = if set_cookie {
        cookie.split(';').take(1).collect()
    } else {
        cookie.split(';').collect()
    };
    for kv in pairs {
        if let Some((_, v)) = kv.split_once('=') {
            learn_secret(v.trim().trim_matches('"'));
        }
    }
}

/// `line` with the values of session parameters masked (borrowed when
/// there are none).
pub fn session_ids(line: &[u8]) -> Cow<'_, [u8]> {
    let masker = MASKER.load();
    if !masker.pattern.is_match(line) {
        return Cow::Borrowed(line);
    }
    let masked = masker.pattern.replace_all(line, |c: &Captures| {
        let name = c.name("plain").or_else(|| c.name("encoded"));
        let mut out = name.map_or(Vec::new(), |m| m.as_bytes().to_vec());
        out.extend_from_slice(MASK.as_bytes());
        out
    });
    Cow::Owned(masked.into_owned())
}

/// Masks from now on the parameters named as the cookies of `cookie`, a
/// login session's `Cookie` header (`a=1; b=2`): a site may put the same
/// session in its URLs. Only names are read.
pub fn learn_cookie_names(cookie: &str) {
    let names: Vec<&str> = cookie
        .split(';')
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.trim()))
        .filter(|k| !k.is_empty())
        .collect();
    let known = MASKER.load();
    let new: Vec<&str> = names
        .into_iter()
        .filter(|n| !known.learned.iter().any(|k| k.eq_ignore_ascii_case(n)))
        .collect();
    if new.is_empty() {
        return;
    }
    let _one = LEARNING.lock().unwrap_or_else(PoisonError::into_inner);
    let mut learned = MASKER.load().learned.clone();
    for n in new {
        if !learned.iter().any(|k| k.eq_ignore_ascii_case(n)) {
            learned.push(n.to_string());
        }
    }
    MASKER.store(Arc::new(Masker::new(learned)));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(line: &str) -> String {
        String::from_utf8(session_ids(line.as_bytes()).into_owned()).unwrap()
    }

    #[test]
    fn session_parameters_in_urls_are_masked_and_the_rest_is_kept() {
        assert_eq!(
            masked("fetched 200 GET http://f.test/viewtopic.php?t=3&sid=0123abcd&start=20 (rule topic)"),
            "fetched 200 GET http://f.test/viewtopic.php?t=3&sid=[secret]&start=20 (rule topic)"
        );
        assert_eq!(
            masked(r#"{"url":"http://f.test/a?PHPSESSID=XyZ","n":1}"#),
            r#"{"url":"http://f.test/a?PHPSESSID=[secret]","n":1}"#
        );
        assert_eq!(
            masked("http://f.test/shop;jsessionid=A1B2?item=4#top"),
            "http://f.test/shop;jsessionid=[secret]?item=4#top"
        );
        assert_eq!(
            masked("http://f.test/a?SessionID=1&member_session=s-9 and more"),
            "http://f.test/a?SessionID=[secret]&member_session=[secret] and more"
        );
        assert_eq!(
            masked("http://f.test/login?next=%2Fpost%3Fsid%3Dabc%26p%3D2"),
            "http://f.test/login?next=%2Fpost%3Fsid%3D[secret]%26p%3D2"
        );
        // Names that only look alike are not masked.
        let kept = "http://f.test/a?side=left&xsid=1&user=sid=2";
        assert_eq!(masked(kept), kept);
        assert!(matches!(session_ids(kept.as_bytes()), Cow::Borrowed(_)));
    }

    #[test]
    fn learnt_secret_values_are_masked_wherever_a_line_holds_them() {
        let line = |s: &str| String::from_utf8(log_line(s.as_bytes()).into_owned()).unwrap();
        let said = "DEBUG cookie_store: inserting Set-Cookie: forum_s=v4lue-0f9e; Path=/";
        assert_eq!(line(said), said);
        learn_cookie_values("forum_s=v4lue-0f9e; Path=/; HttpOnly", true);
        assert_eq!(
            line(said),
            "DEBUG cookie_store: inserting Set-Cookie: forum_s=[secret]; Path=/"
        );
        learn_secret("pa ss&w0rd");
        assert_eq!(
            line(r#"TRACE write: b"user=m&password=pa+ss%26w0rd&csrf=1" and pa ss&w0rd"#),
            r#"TRACE write: b"user=m&password=[secret]&csrf=1" and [secret]"#
        );
        // Short values mask nothing (they would mask words).
        learn_secret("abc");
        assert_eq!(line("abc abcd"), "abc abcd");
    }

    #[test]
    fn a_login_sessions_cookie_names_are_masked_once_learned() {
        let url = "http://f.test/t?forum_token=abc&page=2";
        assert_eq!(masked(url), url);
        learn_cookie_names("Forum_Token=abc; lang=en");
        assert_eq!(masked(url), "http://f.test/t?forum_token=[secret]&page=2");
        assert_eq!(
            masked("http://f.test/?lang=en"),
            "http://f.test/?lang=[secret]"
        );
    }
}
