//! One login, as a browser does it: GET the login page (following
//! redirects), find the form, fill the account's fields over what the page
//! put there (hidden inputs such as CSRF tokens kept), submit it with its
//! method to its action (following redirects), and check that the page it
//! leads to shows `logged_in`. Cookies set along the way are kept in a jar
//! of this login's own; what the session's requests send is the jar's
//! `Cookie` header for the login page's site.
//!
//! Nothing here is logged with a value: errors say which step failed, on
//! which URL (without its query, where a GET form puts the credentials),
//! never a credential or a cookie.

use reqwest::cookie::{CookieStore, Jar};
use reqwest::header::HeaderValue;

use super::form;
use crate::downloader::{Fetched, HttpClient};
use crate::request::Request;
use crate::spider::session::{Account, SecretText, Session};

/// Redirects followed per step at most.
const MAX_REDIRECTS: usize = 5;

/// Why a login did not give a session.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoginError {
    /// The site refused the account (a wrong password, "too many
    /// attempts"), or the account cannot be filled in: the account rests,
    /// as long as the site's `Retry-After` says (the second field) or the
    /// session's cool-down.
    #[error("{0}")]
    Refused(String, Option<std::time::Duration>),
    /// The site could not be asked (network, a 5xx, no form on the page):
    /// try again later with the same account.
    #[error("{0}")]
    Unavailable(String),
    /// The login page's form, or a redirect keeping its body, would send
    /// the credentials to a host other than the login page's (and not in
    /// `login_hosts`): nothing was sent. The account is not to blame; the
    /// spider (or the site) must change.
    #[error("{0}")]
    Misdirected(String),
}

/// Logs `account` in; the `Cookie` header of the new session.
pub async fn log_in(
    client: &HttpClient,
    session: &Session,
    account: &Account,
) -> Result<SecretText, LoginError> {
    let jar = Jar::default();
    let page = get(client, &jar, session.login_url.as_str()).await?;
    let page_url = url::Url::parse(&page.url).unwrap_or_else(|_| session.login_url.clone());
    let html = String::from_utf8_lossy(&page.body);
    let Some(mut form) = form::find(&html, &page_url, &session.form) else {
        return Err(LoginError::Unavailable(format!(
            "the login page {} (status {}) has no form matching `{}`",
            shown(&page.url),
            page.status,
            session.form.source()
        )));
    };
    if !session.may_receive_credentials(&form.action) {
        return Err(misdirected(
            session,
            &form.action,
            &format!("the login form of {}", shown(&page.url)),
        ));
    }
    for (name, source) in session.fields_of(account) {
        let value = source.read().map_err(|e| {
            LoginError::Refused(
                format!("field `{name}` of account `{}`: {e}", account.name),
                None,
            )
        })?;
        if !matches!(source, crate::spider::session::SecretSource::Literal(_)) {
            crate::redact::learn_secret(value.expose());
        }
        form.set(name, value.expose());
    }
    let done = submit(client, &jar, &form, session).await?;
    if !(200..300).contains(&done.status) || !shows(&done, &session.logged_in) {
        let retry_after = done
            .header("retry-after")
            .and_then(crate::downloader::retry::parse_retry_after);
        return Err(LoginError::Refused(
            format!(
                "account `{}` was not logged in: the page after submitting the form ({}, status {}) does not show `{}`{}",
                account.name,
                shown(&done.url),
                done.status,
                session.logged_in.css.as_ref().map_or("", |c| c.source()),
                retry_after.map_or(String::new(), |d| format!(
                    "; the site asks to wait {} (Retry-After)",
                    crate::wording::duration(d)
                ))
            ),
            retry_after,
        ));
    }
    let cookie = jar
        .cookies(&session.login_url)
        .and_then(|h| h.to_str().ok().map(str::to_string))
        .filter(|c| !c.is_empty());
    cookie.map(SecretText::new).ok_or_else(|| {
        LoginError::Refused(
            format!(
                "account `{}` was logged in but the site set no cookie for {}: nothing to share",
                account.name, session.login_url
            ),
            None,
        )
    })
}

/// Whether the page shows what `detector`'s `css` looks for.
pub fn shows(page: &Fetched, detector: &crate::spider::session::Detector) -> bool {
    let Some(css) = &detector.css else {
        return false;
    };
    let html = scraper::Html::parse_document(&String::from_utf8_lossy(&page.body));
    !css.select(html.root_element()).is_empty()
}

/// Why the credentials are not sent to `to`, which `what` names.
fn misdirected(session: &Session, to: &url::Url, what: &str) -> LoginError {
    let host = |u: &url::Url| {
        format!(
            "{}:{}",
            u.host_str().unwrap_or(""),
            u.port_or_known_default().unwrap_or(0)
        )
    };
    LoginError::Misdirected(format!(
        "{what} would send the credentials to {}, not to the login page's host {}: nothing was sent. If {} is the site's own login host, add it to [session] login_hosts",
        host(to),
        host(&session.login_url),
        to.host_str().unwrap_or("that host")
    ))
}

async fn get(client: &HttpClient, jar: &Jar, url: &str) -> Result<Fetched, LoginError> {
    follow(client, jar, Request::get(url), None).await
}

async fn submit(
    client: &HttpClient,
    jar: &Jar,
    form: &form::Form,
    session: &Session,
) -> Result<Fetched, LoginError> {
    let encoded = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.fields.iter())
        .finish();
    let request = if form.method == "POST" {
        let mut r = Request::new(form.action.to_string());
        r.method = "POST".into();
        r.body = encoded;
        r.headers.push((
            "Content-Type".into(),
            "application/x-www-form-urlencoded".into(),
        ));
        r
    } else {
        let mut action = form.action.clone();
        action.set_query(Some(&encoded));
        Request::new(action.to_string())
    };
    follow(client, jar, request, Some(session)).await
}

/// Sends `request` with the jar's cookies, following redirects (a 301,
/// 302 or 303 becomes a GET), keeping the cookies each response sets. A
/// 307 or 308 keeps the method and body: when the body is a login form
/// (`form_of` is its session), only to a host that may receive it.
async fn follow(
    client: &HttpClient,
    jar: &Jar,
    mut request: Request,
    form_of: Option<&Session>,
) -> Result<Fetched, LoginError> {
    for _ in 0..=MAX_REDIRECTS {
        let url = url::Url::parse(&request.url).map_err(|e| {
            LoginError::Unavailable(format!("login: bad URL {}: {e}", shown(&request.url)))
        })?;
        let mut sent = request.clone();
        if let Some(cookie) = jar
            .cookies(&url)
            .and_then(|h| h.to_str().ok().map(str::to_string))
        {
            sent.headers.push(("Cookie".into(), cookie));
        }
        // The form's body holds the password: a failure names the URL only.
        let fetched = client.fetch(&sent).await.map_err(|e| {
            let why = e.to_string().replace(&request.url, &shown(&request.url));
            LoginError::Unavailable(format!("login: {why}"))
        })?;
        let set: Vec<HeaderValue> = fetched
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("set-cookie"))
            .filter_map(|(_, v)| {
                // Masked in every log line before the jar (whose library
                // logs what it stores) sees it.
                crate::redact::learn_cookie_values(v, true);
                HeaderValue::from_str(v).ok()
            })
            .collect();
        jar.set_cookies(&mut set.iter(), &url);
        if (500..600).contains(&fetched.status) {
            return Err(LoginError::Unavailable(format!(
                "login: {} answered {}",
                shown(&fetched.url),
                fetched.status
            )));
        }
        let location = fetched.header("location").map(str::to_string);
        match (fetched.status, location) {
            (301 | 302 | 303 | 307 | 308, Some(loc)) => {
                let next = url.join(&loc).map_err(|e| {
                    LoginError::Unavailable(format!(
                        "login: bad redirect from {}: {e}",
                        shown(url.as_str())
                    ))
                })?;
                if matches!(fetched.status, 301..=303) {
                    request = Request::get(next.as_str());
                    continue;
                }
                if let Some(session) = form_of.filter(|_| !request.body.is_empty()) {
                    if !session.may_receive_credentials(&next) {
                        let what = format!(
                            "the login's answer ({} from {})",
                            fetched.status,
                            shown(url.as_str())
                        );
                        return Err(misdirected(session, &next, &what));
                    }
                }
                request.url = next.to_string();
            }
            _ => return Ok(fetched),
        }
    }
    Err(LoginError::Unavailable(format!(
        "login: more than {MAX_REDIRECTS} redirects from {}",
        shown(&request.url)
    )))
}

/// A URL of the login as messages show it: without its query, where a
/// form sent with GET puts the credentials.
fn shown(url: &str) -> String {
    match url.split_once('?') {
        Some((before, _)) => format!("{before}?…"),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_urls_are_shown_without_their_query() {
        assert_eq!(
            shown("http://f.test/login?user=a&password=hunter2"),
            "http://f.test/login?…"
        );
        assert_eq!(shown("http://f.test/login"), "http://f.test/login");
    }
}
