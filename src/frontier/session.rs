//! The login session a spider's crawl shares (`[session]`), as the
//! frontier stores it: its cookies (a secret), its generation (each login
//! makes the next), when it was made, whether a worker saw it logged out,
//! and the accounts' login history. Both backends keep it with the same
//! three steps (see [`super::Backend::session_lock`]): take the login lock
//! unless the session is fresh, store a login (only while the lock is the
//! caller's), mark a generation stale (once). What a login is and when to
//! do one is `crate::downloader::session`'s.

use crate::spider::session::SecretText;

/// The session as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRecord {
    /// 0 before the first login; each login adds one.
    pub generation: u64,
    /// The `Cookie` header the session's requests carry.
    pub cookie: SecretText,
    /// The account it was made with (a name, never a credential).
    pub account: String,
    /// When it was made (ms since the epoch).
    pub created_ms: u64,
    /// A worker saw a response showing it logged out.
    pub stale: bool,
    /// Logins so far, for the whole crawl.
    pub logins: u64,
    /// The accounts' login history (JSON, written by the lock holder).
    pub accounts: String,
}

impl SessionRecord {
    /// Whether it is a session newer than generation `seen` that nobody
    /// saw logged out.
    pub fn fresh_after(&self, seen: u64) -> bool {
        self.generation > seen && !self.stale && !self.cookie.is_empty()
    }

    /// The record from its stored fields (unknown ones ignored).
    pub fn from_fields(fields: &[(String, String)]) -> SessionRecord {
        let mut r = SessionRecord::default();
        for (k, v) in fields {
            match k.as_str() {
                "generation" => r.generation = v.parse().unwrap_or(0),
                "cookie" => r.cookie = SecretText::new(v.clone()),
                "account" => r.account = v.clone(),
                "created_ms" => r.created_ms = v.parse().unwrap_or(0),
                "stale" => r.stale = v == "1",
                "logins" => r.logins = v.parse().unwrap_or(0),
                "accounts" => r.accounts = v.clone(),
                _ => {}
            }
        }
        r
    }
}

/// What asking for the login lock gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionLock {
    /// A session newer than the one the caller saw, not stale: use it.
    Fresh(SessionRecord),
    /// The lock is the caller's until its deadline: log in, then
    /// [`super::Backend::session_store`].
    Taken,
    /// Another worker is logging in: wait, and ask again.
    Busy,
}

/// What a login that held the lock gave.
#[derive(Debug, Clone, Default)]
pub struct SessionLogin {
    /// The new session's `Cookie` header; `None` when the login failed
    /// (the lock is freed, the accounts' history kept).
    pub cookie: Option<SecretText>,
    pub account: String,
    /// The accounts' login history after this attempt (JSON).
    pub accounts: String,
    /// The generation the login replaces (the session's when it began):
    /// a login that outlived the lock's deadline is still kept while no
    /// newer session was stored.
    pub seen: u64,
    /// Only write the history, keeping the lock: an attempt counted
    /// before its form is sent.
    pub keep_lock: bool,
}
