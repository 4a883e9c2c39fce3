//! The members-only area under `/members/`: a CSRF-protected login form,
//! sessions that expire after some requests and some time, and pages only
//! a logged-in member sees, for logged-in crawls (`[session]`).
//!
//! - `GET /members/login`: the form (`form#login`), with a hidden `csrf`
//!   input whose value must come back with the `csrf` cookie it sets;
//! - `POST /members/login`: a right CSRF token, user and password start a
//!   session (`member_session` cookie, a 303 to `/members/`); anything else
//!   answers the form again with 403 (a refused login), and while the
//!   rate limit a test sets holds ([`MembersConfig::refuse_next`]), with
//!   429 "Too many login attempts" (and a `Retry-After` if set);
//! - `GET /members/`, `/members/thread/<n>`: with a live session, the index
//!   (with `a.logout`) and [`THREADS`] thread pages; without one, or with
//!   one that expired, a 302 to `/members/login`.
//!
//! It keeps its state (tokens, sessions, counts) in a [`Members`] the
//! server holds; the server counts the logins it accepted
//! ([`Members::logins`]) and which sessions were used after they expired,
//! so a test can check one login per session expiry for a whole cluster.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::pages::escape;

/// Thread pages in the members' area.
pub const THREADS: usize = 40;

/// How sessions behave and who may log in; tests change it at run time.
#[derive(Debug, Clone)]
pub struct MembersConfig {
    /// Accounts: user → password.
    pub accounts: Vec<(String, String)>,
    /// Requests a session answers before it expires.
    pub requests_per_session: u64,
    /// How long a session lives.
    pub session_ttl: Duration,
    /// How long a login's POST takes to answer (to kill a worker mid-login).
    pub login_delay: Duration,
    /// Refuse this many of the next logins, right credentials or not, as
    /// a forum's login rate limit does: 429 and "Too many login attempts".
    pub refuse_next: u64,
    /// The `Retry-After` (seconds) of those refusals, if any.
    pub retry_after: Option<u64>,
    /// The login form's `action` (`/members/login` when `None`): a page
    /// that sends the credentials elsewhere.
    pub form_action: Option<String>,
    /// Answer every login's POST with this status and `Location`, before
    /// reading it (a 307 or 308 asks the browser to send the form again
    /// there).
    pub login_redirect: Option<(u16, String)>,
}

impl Default for MembersConfig {
    fn default() -> Self {
        MembersConfig {
            accounts: vec![("member".into(), "demo-password".into())],
            requests_per_session: 25,
            session_ttl: Duration::from_secs(60),
            login_delay: Duration::ZERO,
            refuse_next: 0,
            retry_after: None,
            form_action: None,
            login_redirect: None,
        }
    }
}

/// One session the server handed out.
#[derive(Debug)]
struct Live {
    started: Instant,
    requests: u64,
    /// A request came with it after it expired.
    seen_expired: bool,
}

#[derive(Debug, Default)]
struct State {
    config: MembersConfig,
    /// CSRF tokens handed out (their cookie and hidden input).
    tokens: Vec<String>,
    sessions: HashMap<String, Live>,
    /// Every session id ever handed out, in order.
    issued: Vec<String>,
    logins: u64,
    refused: u64,
    counter: u64,
}

/// The members' area state of one server.
#[derive(Debug, Default)]
pub struct Members(Mutex<State>);

/// An answer of the members' area.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
}

/// Whether the server must read the body of this request for the area.
pub fn takes_body(method: &str, path: &str) -> bool {
    method == "POST" && path == "/members/login"
}

/// The items a crawl of the area yields: `{"title", "body", "url"}`, in
/// thread order, for pages under `base`.
pub fn expected_items(base: &str) -> Vec<serde_json::Value> {
    (1..=THREADS)
        .map(|n| {
            serde_json::json!({
                "title": thread_title(n),
                "body": thread_body(n),
                "url": format!("{base}/members/thread/{n}"),
            })
        })
        .collect()
}

fn thread_title(n: usize) -> String {
    format!("Members thread {n}")
}

fn thread_body(n: usize) -> String {
    format!("Only members read post {n}.")
}

/// The value of cookie `name` in a `Cookie` header.
fn cookie<'a>(header: Option<&'a str>, name: &str) -> Option<&'a str> {
    header?.split(';').find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

impl Members {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes how sessions behave from now on.
    pub fn configure(&self, config: MembersConfig) {
        self.state().config = config;
    }

    /// How long a login's answer waits.
    pub fn login_delay(&self) -> Duration {
        self.state().config.login_delay
    }

    /// Logins accepted so far.
    pub fn logins(&self) -> u64 {
        self.state().logins
    }

    /// Logins refused so far.
    pub fn refused(&self) -> u64 {
        self.state().refused
    }

    /// Sessions a request came with after they expired.
    pub fn expired_seen(&self) -> u64 {
        self.state()
            .sessions
            .values()
            .filter(|s| s.seen_expired)
            .count() as u64
    }

    /// Every session cookie value handed out (for tests that make sure
    /// none leaks into a log).
    pub fn issued_sessions(&self) -> Vec<String> {
        self.state().issued.clone()
    }

    /// Every CSRF token handed out (a login form's, and its cookie's), for
    /// tests that make sure none leaks into a log.
    pub fn issued_tokens(&self) -> Vec<String> {
        self.state().tokens.clone()
    }

    /// The answer to a GET of `path` with the `Cookie` header `cookies`.
    pub fn get(&self, path: &str, cookies: Option<&str>) -> Answer {
        if path == "/members/login" {
            return self.login_form(200, "");
        }
        if !self.session_holds(cookie(cookies, "member_session")) {
            return Answer {
                status: 302,
                headers: vec![("location", "/members/login".into())],
                body: String::new(),
            };
        }
        page(path)
    }

    /// The answer to a POST of the form `body` to the login.
    pub fn post_login(&self, body: &[u8], cookies: Option<&str>) -> Answer {
        let form: HashMap<String, String> = url_decoded(body);
        let mut s = self.state();
        if let Some((status, location)) = s.config.login_redirect.clone() {
            return Answer {
                status,
                headers: vec![("location", location)],
                body: String::new(),
            };
        }
        let token_ok = match (cookie(cookies, "csrf"), form.get("csrf")) {
            (Some(c), Some(f)) => c == f && s.tokens.iter().any(|t| t == c),
            _ => false,
        };
        let user_ok = s
            .config
            .accounts
            .iter()
            .any(|(u, p)| form.get("username") == Some(u) && form.get("password") == Some(p));
        if token_ok && s.config.refuse_next > 0 {
            s.config.refuse_next -= 1;
            s.refused += 1;
            let retry_after = s.config.retry_after;
            drop(s);
            let mut answer = self.login_form(429, "Too many login attempts. Try again later.");
            if let Some(secs) = retry_after {
                answer.headers.push(("retry-after", secs.to_string()));
            }
            return answer;
        }
        if !(token_ok && user_ok) {
            s.refused += 1;
            drop(s);
            let why = if token_ok {
                "Wrong user or password."
            } else {
                "The form expired (CSRF check failed)."
            };
            return self.login_form(403, why);
        }
        s.logins += 1;
        s.counter += 1;
        let id = token(s.counter, "s");
        s.issued.push(id.clone());
        s.sessions.insert(
            id.clone(),
            Live {
                started: Instant::now(),
                requests: 0,
                seen_expired: false,
            },
        );
        Answer {
            status: 303,
            headers: vec![
                ("location", "/members/".into()),
                (
                    "set-cookie",
                    format!("member_session={id}; Path=/; HttpOnly"),
                ),
            ],
            body: String::new(),
        }
    }

    /// Counts a request with session `id`: whether it is alive.
    fn session_holds(&self, id: Option<&str>) -> bool {
        let mut s = self.state();
        let (max, ttl) = (s.config.requests_per_session, s.config.session_ttl);
        let Some(live) = id.and_then(|id| s.sessions.get_mut(id)) else {
            return false;
        };
        live.requests += 1;
        let alive = live.requests <= max && live.started.elapsed() < ttl;
        if !alive {
            live.seen_expired = true;
        }
        alive
    }

    fn login_form(&self, status: u16, message: &str) -> Answer {
        let mut s = self.state();
        s.counter += 1;
        let t = token(s.counter, "t");
        s.tokens.push(t.clone());
        let action = escape(s.config.form_action.as_deref().unwrap_or("/members/login"));
        let body = format!(
            "<!DOCTYPE html><html><head><title>Log in</title></head><body>\
             <p class=\"error\">{}</p>\
             <form id=\"search\" action=\"/search\"><input name=\"q\"></form>\
             <form id=\"login\" action=\"{action}\" method=\"post\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{t}\">\
             <input name=\"username\"><input type=\"password\" name=\"password\">\
             <input type=\"checkbox\" name=\"remember\" value=\"1\" checked>\
             <button type=\"submit\">Log in</button></form></body></html>",
            escape(message)
        );
        Answer {
            status,
            headers: vec![("set-cookie", format!("csrf={t}; Path=/members"))],
            body,
        }
    }
}

/// A page of the area for a member.
fn page(path: &str) -> Answer {
    let logout = "<a class=\"logout\" href=\"/members/logout\">Log out</a>";
    let body = if path == "/members/" {
        let links: String = (1..=THREADS)
            .map(|n| {
                format!(
                    "<li><a href=\"/members/thread/{n}\">{}</a></li>",
                    thread_title(n)
                )
            })
            .collect();
        format!("<!DOCTYPE html><html><body>{logout}<h1>Members</h1><ul class=\"threads\">{links}</ul></body></html>")
    } else if let Some(n) = path
        .strip_prefix("/members/thread/")
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| (1..=THREADS).contains(n))
    {
        format!(
            "<!DOCTYPE html><html><body>{logout}<h1>{}</h1><div class=\"body\">{}</div></body></html>",
            thread_title(n),
            thread_body(n)
        )
    } else {
        return Answer {
            status: 404,
            headers: Vec::new(),
            body: "<html><body>not found</body></html>".into(),
        };
    };
    Answer {
        status: 200,
        headers: Vec::new(),
        body,
    }
}

/// An unguessable-looking token (not cryptographic: a demo).
fn token(counter: u64, kind: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut x = counter
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(nanos);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    format!("{kind}{x:016x}")
}

/// `application/x-www-form-urlencoded` pairs.
fn url_decoded(body: &[u8]) -> HashMap<String, String> {
    let text = String::from_utf8_lossy(body);
    text.split('&')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            Some((decode(k)?, decode(v)?))
        })
        .collect()
}

fn decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_cookie(a: &Answer) -> String {
        let v = &a
            .headers
            .iter()
            .find(|(k, _)| *k == "set-cookie")
            .unwrap()
            .1;
        v.split(';').next().unwrap().to_string()
    }

    #[test]
    fn a_login_needs_the_csrf_token_and_its_session_expires() {
        let m = Members::default();
        m.configure(MembersConfig {
            requests_per_session: 2,
            ..MembersConfig::default()
        });
        assert_eq!(m.get("/members/", None).status, 302);
        let form = m.get("/members/login", None);
        let csrf = set_cookie(&form);
        let t = csrf.trim_start_matches("csrf=");
        let body = format!("csrf={t}&username=member&password=demo-password");
        // Without the cookie the token is refused.
        assert_eq!(m.post_login(body.as_bytes(), None).status, 403);
        let ok = m.post_login(body.as_bytes(), Some(&csrf));
        assert_eq!(ok.status, 303);
        let session = set_cookie(&ok);
        assert_eq!(m.get("/members/thread/3", Some(&session)).status, 200);
        assert_eq!(m.get("/members/", Some(&session)).status, 200);
        assert_eq!(m.get("/members/", Some(&session)).status, 302);
        assert_eq!((m.logins(), m.refused(), m.expired_seen()), (1, 1, 1));
        let wrong = format!("csrf={t}&username=member&password=nope");
        assert_eq!(m.post_login(wrong.as_bytes(), Some(&csrf)).status, 403);
    }
}
