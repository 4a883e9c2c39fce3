//! Which account logs in next: the accounts' login history the cluster
//! shares (stored with the session, written only by the worker holding
//! the login lock); an account whose login is refused rests for a
//! cool-down and is tried once more, and is retired when refused again;
//! at most `max_logins_per_hour` logins per account, so a crawl whose
//! session keeps expiring waits instead of hammering the login form. Pure:
//! the history and the clock in, a choice out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::spider::session::Account;

const HOUR_MS: u64 = 3_600_000;

/// Every account's history, by account name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Book(BTreeMap<String, History>);

/// One account's history.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    /// When it logged in within the last hour (ms since the epoch).
    #[serde(default)]
    pub logins: Vec<u64>,
    /// Its login failed: it is not used again (until the session key is
    /// deleted).
    #[serde(default)]
    pub retired: bool,
    /// Its login was refused since it last logged in: it rests until then
    /// (ms since the epoch), and is retired if refused again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resting_until: Option<u64>,
    /// What the site said when it refused the account's last login (why
    /// it rests, or was retired), as the workers logged it: never a
    /// credential. Cut to [`REASON_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why its last login could not be done (the form gone, the site
    /// down, the form sent elsewhere), until it logs in: what to say when
    /// such failures have spent the hour's logins. Cut to
    /// [`REASON_CHARS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// How much of a refusal's reason the history keeps.
pub const REASON_CHARS: usize = 300;

/// `why`, cut to [`REASON_CHARS`] characters.
fn kept(why: &str) -> String {
    match why.char_indices().nth(REASON_CHARS) {
        Some((at, _)) => format!("{}…", &why[..at]),
        None => why.to_string(),
    }
}

/// What an account may do now, as `stats` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// It may log in (within its hourly logins).
    Active,
    /// Its login was refused; it is tried once more then (ms since the
    /// epoch).
    Resting(u64),
    Retired,
}

/// What a refused login does to its account.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It rests until then (ms since the epoch), then is tried once more.
    Rests(u64),
    /// It was refused after its rest too: it is retired.
    Retired,
}

/// What logs in next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// This account (an index into the spider's accounts).
    Account(usize),
    /// Every account left has had its logins for the hour: wait until
    /// then (ms since the epoch).
    WaitUntil(u64),
    /// Every account is retired.
    NoneLeft,
}

impl Book {
    /// The stored history (an unreadable or empty one starts afresh).
    pub fn parse(json: &str) -> Book {
        serde_json::from_str(json).unwrap_or_default()
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The account with the fewest logins in the last hour, below the
    /// limit and not retired (the first such in file order on a tie, after
    /// `last` so accounts take turns).
    pub fn choose(&mut self, accounts: &[Account], max: u32, last: &str, now: u64) -> Choice {
        for h in self.0.values_mut() {
            h.logins.retain(|t| now.saturating_sub(*t) < HOUR_MS);
        }
        let n = accounts.len();
        let start = accounts
            .iter()
            .position(|a| a.name == last)
            .map_or(0, |i| (i + 1) % n.max(1));
        let mut best: Option<(usize, usize)> = None;
        let mut earliest_free: Option<u64> = None;
        for i in (0..n).map(|k| (start + k) % n) {
            let h = self.0.get(&accounts[i].name).cloned().unwrap_or_default();
            if h.retired {
                continue;
            }
            if let Some(until) = h.resting_until.filter(|t| *t > now) {
                earliest_free = Some(earliest_free.map_or(until, |e| e.min(until)));
                continue;
            }
            if h.logins.len() >= max as usize {
                let free = h.logins.iter().min().map_or(now, |t| t + HOUR_MS);
                earliest_free = Some(earliest_free.map_or(free, |e| e.min(free)));
                continue;
            }
            if best.is_none_or(|(_, used)| h.logins.len() < used) {
                best = Some((i, h.logins.len()));
            }
        }
        match (best, earliest_free) {
            (Some((i, _)), _) => Choice::Account(i),
            (None, Some(t)) => Choice::WaitUntil(t),
            (None, None) => Choice::NoneLeft,
        }
    }

    /// Records a login attempt by `account`.
    pub fn attempted(&mut self, account: &str, now: u64) {
        self.0
            .entry(account.to_string())
            .or_default()
            .logins
            .push(now);
    }

    /// Retires `account`, because of `why`.
    pub fn retire(&mut self, account: &str, why: &str) {
        let h = self.0.entry(account.to_string()).or_default();
        h.retired = true;
        h.reason = Some(kept(why));
    }

    /// `account`'s login was refused at `now`, the site saying `why`: it
    /// rests for `rest` if this is its first refusal since it last logged
    /// in, else it is retired.
    pub fn refused(&mut self, account: &str, now: u64, rest: u64, why: &str) -> Refusal {
        let h = self.0.entry(account.to_string()).or_default();
        h.reason = Some(kept(why));
        if h.resting_until.is_some() {
            h.resting_until = None;
            h.retired = true;
            return Refusal::Retired;
        }
        let until = now.saturating_add(rest);
        h.resting_until = Some(until);
        Refusal::Rests(until)
    }

    /// `account` logged in: a rest it had is over.
    pub fn logged_in(&mut self, account: &str) {
        if let Some(h) = self.0.get_mut(account) {
            h.resting_until = None;
            h.reason = None;
            h.failure = None;
        }
    }

    /// `account`'s login could not be done, because of `why`.
    pub fn failed(&mut self, account: &str, why: &str) {
        self.0.entry(account.to_string()).or_default().failure = Some(kept(why));
    }

    /// Why the most recent login that could not be done failed.
    pub fn last_failure(&self) -> Option<&str> {
        self.0
            .values()
            .filter(|h| h.failure.is_some())
            .max_by_key(|h| h.logins.iter().max().copied().unwrap_or(0))
            .and_then(|h| h.failure.as_deref())
    }

    /// Why `account` rests or was retired: what the site said when it
    /// refused its last login.
    pub fn reason(&self, account: &str) -> Option<&str> {
        self.0.get(account)?.reason.as_deref()
    }

    /// What `account` may do at `now`.
    pub fn state(&self, account: &str, now: u64) -> State {
        match self.0.get(account) {
            Some(h) if h.retired => State::Retired,
            Some(History {
                resting_until: Some(t),
                ..
            }) if *t > now => State::Resting(*t),
            _ => State::Active,
        }
    }

    /// The account resting longest at `now`, and until when.
    pub fn resting(&self, now: u64) -> Option<(&str, u64)> {
        self.0
            .iter()
            .filter_map(|(name, h)| match h.resting_until {
                Some(t) if t > now && !h.retired => Some((name.as_str(), t)),
                _ => None,
            })
            .max_by_key(|(_, t)| *t)
    }

    /// The accounts' names with a history, in name order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// How many accounts are retired.
    pub fn retired(&self) -> usize {
        self.0.values().filter(|h| h.retired).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accounts(names: &[&str]) -> Vec<Account> {
        names
            .iter()
            .map(|n| Account {
                name: n.to_string(),
                fields: Vec::new(),
            })
            .collect()
    }

    #[test]
    fn accounts_take_turns_within_their_hourly_logins() {
        let list = accounts(&["a", "b"]);
        let mut book = Book::default();
        let now = 10 * HOUR_MS;
        assert_eq!(book.choose(&list, 2, "", now), Choice::Account(0));
        book.attempted("a", now);
        assert_eq!(book.choose(&list, 2, "a", now), Choice::Account(1));
        book.attempted("b", now + 1);
        book.attempted("a", now + 2);
        book.attempted("b", now + 3);
        // Both had their two logins this hour: wait for the first to age.
        assert_eq!(
            book.choose(&list, 2, "b", now + 4),
            Choice::WaitUntil(now + HOUR_MS)
        );
        assert_eq!(
            book.choose(&list, 2, "b", now + HOUR_MS),
            Choice::Account(0)
        );
    }

    #[test]
    fn a_refused_account_rests_is_tried_once_more_then_retires() {
        let list = accounts(&["a"]);
        let mut book = Book::default();
        let now = 10 * HOUR_MS;
        assert_eq!(
            book.refused("a", now, 60_000, "status 429"),
            Refusal::Rests(now + 60_000)
        );
        assert_eq!(book.state("a", now + 1), State::Resting(now + 60_000));
        assert_eq!(book.reason("a"), Some("status 429"));
        assert_eq!(
            book.choose(&list, 5, "", now + 1),
            Choice::WaitUntil(now + 60_000)
        );
        // After its rest it may log in once more.
        assert_eq!(book.choose(&list, 5, "", now + 60_000), Choice::Account(0));
        let back = Book::parse(&book.to_json());
        assert_eq!(back, book);
        assert_eq!(
            book.refused("a", now + 60_000, 60_000, "status 403"),
            Refusal::Retired
        );
        assert_eq!(book.state("a", now + 60_001), State::Retired);
        assert_eq!(book.reason("a"), Some("status 403"));
        assert_eq!(
            book.choose(&list, 5, "", now + HOUR_MS * 2),
            Choice::NoneLeft
        );
        // A login in between ends the rest: the next refusal rests again.
        let mut book = Book::default();
        book.refused("a", now, 1000, "status 429");
        book.logged_in("a");
        assert_eq!(book.reason("a"), None);
        assert_eq!(book.refused("a", now, 1000, ""), Refusal::Rests(now + 1000));
    }

    #[test]
    fn a_retired_account_is_skipped_and_none_left_says_so() {
        let list = accounts(&["a", "b"]);
        let mut book = Book::default();
        book.retire("a", "status 403");
        assert_eq!(book.choose(&list, 5, "", 0), Choice::Account(1));
        book.retire("b", &"x".repeat(REASON_CHARS + 10));
        assert_eq!(
            book.reason("b").map(|r| r.chars().count()),
            Some(REASON_CHARS + 1)
        );
        assert_eq!(book.choose(&list, 5, "", 0), Choice::NoneLeft);
        let back = Book::parse(&book.to_json());
        assert_eq!(back.retired(), 2);
    }
}
