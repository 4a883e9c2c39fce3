//! The login session as people see it: its age, uses and logins, and each
//! account's state (active, resting with the time left and why, retired).
//! One reading for `crawlworker stats` (text and `--json`) and the
//! dashboard, made from the stored session and the stats hash. Never a
//! cookie or a credential: accounts by name, refusals by what the site
//! said.

use serde::Serialize;

use super::accounts::{Book, State};
use crate::frontier::SessionRecord;
use crate::spider::session::Session;

/// The login session, shown.
#[derive(Debug, Clone, Serialize)]
pub struct SessionView {
    /// 0 before the first login.
    pub generation: u64,
    /// The account it was made with.
    pub account: String,
    /// Seconds since it was made.
    pub age_seconds: Option<f64>,
    /// A worker saw it logged out; a new login is under way.
    pub stale: bool,
    /// Requests sent with a session, in all.
    pub uses: u64,
    /// Logins, in all.
    pub logins: u64,
    /// Accounts retired (their logins were refused).
    pub accounts_retired: usize,
    /// Each account's state, in the spider's order.
    pub accounts: Vec<AccountView>,
}

/// One account of `[session]`, shown: its name, never a credential.
#[derive(Debug, Clone, Serialize)]
pub struct AccountView {
    pub name: String,
    /// `active`, `resting` (after a refused login) or `retired`.
    pub state: &'static str,
    /// For a resting account: seconds until it is tried once more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rests_for_seconds: Option<f64>,
    /// For a resting or retired account: what the site said when it
    /// refused its last login.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Rounds seconds to a tenth.
fn round(s: f64) -> f64 {
    (s * 10.0).round() / 10.0
}

impl SessionView {
    /// The session `record` of a spider with `config`, at `now` (seconds
    /// since the epoch); `uses` is the stats hash's
    /// `session/request_count`.
    pub fn of(config: &Session, record: SessionRecord, uses: u64, now: f64) -> SessionView {
        let book = Book::parse(&record.accounts);
        let now_ms = (now * 1000.0) as u64;
        let accounts = config
            .accounts
            .iter()
            .map(|a| account(&book, &a.name, now_ms))
            .collect();
        SessionView {
            generation: record.generation,
            account: record.account,
            age_seconds: (record.created_ms > 0)
                .then(|| round((now - record.created_ms as f64 / 1000.0).max(0.0))),
            stale: record.stale,
            uses,
            logins: record.logins,
            accounts_retired: book.retired(),
            accounts,
        }
    }
}

fn account(book: &Book, name: &str, now_ms: u64) -> AccountView {
    let (state, rests_for_seconds) = match book.state(name, now_ms) {
        State::Active => ("active", None),
        State::Resting(until) => (
            "resting",
            Some(round(until.saturating_sub(now_ms) as f64 / 1000.0)),
        ),
        State::Retired => ("retired", None),
    };
    AccountView {
        name: name.to_string(),
        state,
        rests_for_seconds,
        // An active account's last refusal is history, not news.
        reason: (state != "active")
            .then(|| book.reason(name).map(str::to_string))
            .flatten(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `[session]` with these accounts.
    fn session_of(names: &[&str]) -> Session {
        let mut text = String::from(
            "name = \"s\"\n[session]\nlogin_url = \"http://f.test/login\"\nform = \"form\"\nlogged_in = { css = \"a.logout\" }\nlogged_out = { url = \"/login\" }\n",
        );
        for n in names {
            text += &format!(
                "[[session.accounts]]\nname = \"{n}\"\nfields = {{ password = {{ env = \"P\" }} }}\n"
            );
        }
        text += "[items.i]\nt = \"h1::text\"\n[[rules]]\nname = \"r\"\nmatch = '/'\n[[rules.extract]]\nitem = \"i\"\n";
        let spider = crate::spider::Spider::from_str(std::path::Path::new("s.toml"), &text)
            .unwrap_or_else(|e| panic!("{e:?}"));
        (*spider.session.expect("a [session]")).clone()
    }

    #[test]
    fn accounts_show_their_state_time_left_and_why() {
        let mut book = Book::default();
        let now_ms = 1_000_000_000;
        book.refused("old", now_ms - 1000, 61_000, "status 429");
        book.retire("gone", "status 403");
        book.refused("back", now_ms - 5000, 1000, "status 429");
        let config = session_of(&["old", "gone", "back"]);
        let record = SessionRecord {
            accounts: book.to_json(),
            ..SessionRecord::default()
        };
        let view = SessionView::of(&config, record, 7, now_ms as f64 / 1000.0);
        let shown: Vec<_> = view
            .accounts
            .iter()
            .map(|a| {
                (
                    a.name.as_str(),
                    a.state,
                    a.rests_for_seconds,
                    a.reason.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("old", "resting", Some(60.0), Some("status 429")),
                ("gone", "retired", None, Some("status 403")),
                // Its rest is over: it may log in, and is tried once more.
                ("back", "active", None, None),
            ]
        );
        assert_eq!((view.uses, view.accounts_retired), (7, 1));
    }
}
