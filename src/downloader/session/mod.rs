//! Logged-in crawls: one login session for the whole cluster (`[session]`).
//!
//! A [`Keeper`] per spider run gives the downloader the session's `Cookie`
//! header for requests to the login page's host, and tells it when a
//! response shows the session is gone. The session itself lives in the
//! frontier (Redis for a cluster, memory for a local crawl): one worker
//! logs in under the login lock and stores the cookies with the next
//! generation number; the others find it there. A worker that sees a
//! logged-out response marks that generation stale (once for the cluster,
//! however many see it) and asks again: one worker logs in, the others
//! wait for its session, and the request is sent again with it.
//!
//! - [`login`]: one login (GET the page, fill the form, submit, check);
//! - [`form`]: the login form read from a page (pure);
//! - [`accounts`]: which account logs in next, rests after a refused
//!   login, retirement, hourly limits;
//! - [`view`]: the session and its accounts as `stats` and the dashboard
//!   show them.
//!
//! Credentials and cookies are [`SecretText`]: never in a log line, an
//! error, a stat or a dead letter; what is logged is the account's name.

pub mod accounts;
pub mod form;
pub mod login;
pub mod view;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Fetched, HttpClient};
use crate::frontier::{Frontier, SessionLock, SessionLogin};
use crate::spider::session::{SecretText, Session};
use crate::stats::{self, Tally};
use accounts::{Book, Choice};
use login::LoginError;

/// How often a worker waiting for another's login asks again.
const WAIT_STEP: Duration = Duration::from_millis(100);
/// How long a local crawl's requests wait when every account is retired
/// (it is stopping: see [`Keeper::refused`]).
const ALL_RETIRED_WAIT: Duration = Duration::from_secs(300);
/// The shortest time a request is put off for when no login may happen.
const MIN_WAIT: Duration = Duration::from_secs(1);

/// What a request to the session's host gets.
#[derive(Debug)]
pub enum Ready {
    /// Send it with this session.
    Session { generation: u64, cookie: SecretText },
    /// No login may happen now (the accounts' hourly logins are used up,
    /// or every account is retired): put the request off this long.
    Wait(Duration),
    /// The login could not be done (the site is down, the form is gone):
    /// retry the request as after a network error.
    Failed(String),
    /// Every account is retired: no login can be made until an operator
    /// fixes the credentials, so the request fails for good now (kept in
    /// the failed key, for `push-urls --from-failed`), and a crawl run
    /// until drained ends.
    NoAccount(String),
}

/// Whether `page` shows `session` logged out: it is, or redirects to, the
/// `logged_out` URL, or has its `css`.
pub fn logged_out(session: &Session, page: &Fetched) -> bool {
    let test = &session.logged_out;
    let Ok(at) = url::Url::parse(&page.url) else {
        return false;
    };
    if test.url_matches(&at) {
        return true;
    }
    let redirected = (300..400).contains(&page.status)
        && page
            .header("location")
            .and_then(|l| at.join(l).ok())
            .is_some_and(|to| test.url_matches(&to));
    redirected || ((200..300).contains(&page.status) && login::shows(page, test))
}

/// One spider run's hold on the cluster's session.
pub struct Keeper {
    config: Arc<Session>,
    frontier: Frontier,
    client: HttpClient,
    /// Who holds the login lock when this worker does.
    holder: String,
    /// The generation and cookie this worker uses.
    current: Mutex<Option<(u64, SecretText)>>,
    /// One task of this worker gets a session at a time; the others find
    /// it in `current` when they get the lock.
    getting: tokio::sync::Mutex<()>,
    /// No account may log in before then (each rests after a refused
    /// login, or has had its logins for the hour, as the cluster's history
    /// said): requests to the site are put off at once, without the login
    /// lock or a Redis round trip each, so they hold the worker's download
    /// slots no longer than other hosts' requests need them.
    no_login_until: Mutex<Option<Instant>>,
    /// This worker has logged that every account is retired.
    said_retired: std::sync::atomic::AtomicBool,
}

impl Keeper {
    pub fn new(config: Arc<Session>, frontier: Frontier, client: HttpClient) -> Keeper {
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let holder = format!("{}:{nonce:08x}", frontier.worker());
        Keeper {
            config,
            frontier,
            client,
            holder,
            current: Mutex::new(None),
            getting: tokio::sync::Mutex::new(()),
            no_login_until: Mutex::new(None),
            said_retired: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether requests to `url` carry the session.
    pub fn applies_to(&self, url: &str) -> bool {
        self.config.applies_to(url)
    }

    /// Whether `page` shows the session logged out (see [`logged_out`]).
    pub fn logged_out(&self, page: &Fetched) -> bool {
        logged_out(&self.config, page)
    }

    fn current(&self) -> Option<(u64, SecretText)> {
        self.current.lock().ok().and_then(|c| c.clone())
    }

    fn set_current(&self, generation: u64, cookie: SecretText) {
        // A site may put the same session in its URLs: logs mask it.
        crate::redact::learn_cookie_names(cookie.expose());
        crate::redact::learn_cookie_values(cookie.expose(), false);
        if let Ok(mut c) = self.current.lock() {
            *c = Some((generation, cookie));
        }
    }

    /// A session newer than generation `seen` (0: any): this worker's, the
    /// cluster's, or a new login.
    pub async fn ready(&self, seen: u64, stats: &mut Tally) -> Ready {
        if let Some(ready) = self.known(seen) {
            return ready;
        }
        let _one = self.getting.lock().await;
        // Another task may have learnt it while this one waited.
        if let Some(ready) = self.known(seen) {
            return ready;
        }
        self.get(seen, stats).await
    }

    /// What this worker knows already: a session newer than `seen`, or
    /// that no login may happen yet.
    fn known(&self, seen: u64) -> Option<Ready> {
        if let Some((generation, cookie)) = self.current().filter(|(g, _)| *g > seen) {
            return Some(Ready::Session { generation, cookie });
        }
        let until = self.no_login_until.lock().ok().and_then(|u| *u)?;
        let left = until.checked_duration_since(Instant::now())?;
        Some(Ready::Wait(left.max(MIN_WAIT)))
    }

    fn set_no_login_until(&self, wait: Duration) {
        if let Ok(mut u) = self.no_login_until.lock() {
            *u = Some(Instant::now() + wait);
        }
    }

    /// The session of generation `generation` showed itself logged out:
    /// marks it stale for the cluster (once), then gets a newer one.
    pub async fn logged_out_seen(&self, generation: u64, stats: &mut Tally) -> Ready {
        stats.add(stats::SESSION_LOGGED_OUT, 1);
        match self.frontier.session_stale(generation).await {
            Ok(true) => {
                tracing::info!(
                    spider_session = generation,
                    "the login session is logged out; one worker logs in again for the cluster"
                )
            }
            Ok(false) => {}
            Err(e) => return Ready::Failed(format!("cannot mark the login session stale: {e}")),
        }
        self.ready(generation, stats).await
    }

    /// Asks the frontier until a fresh session is there or this worker
    /// holds the lock (then logs in).
    async fn get(&self, seen: u64, stats: &mut Tally) -> Ready {
        let ttl = self.config.login_timeout;
        // Another worker's login takes at most its lock's deadline; one
        // that died leaves the lock to run out, and then this one takes it.
        let give_up = std::time::Instant::now() + ttl * 3;
        loop {
            match self.frontier.session_lock(seen, &self.holder, ttl).await {
                Ok(SessionLock::Fresh(record)) => {
                    self.set_current(record.generation, record.cookie.clone());
                    return Ready::Session {
                        generation: record.generation,
                        cookie: record.cookie,
                    };
                }
                Ok(SessionLock::Taken) => match self.log_in(stats).await {
                    Some(ready) => return ready,
                    None => continue,
                },
                Ok(SessionLock::Busy) => {}
                Err(e) => return Ready::Failed(format!("cannot take the login lock: {e}")),
            }
            if std::time::Instant::now() > give_up {
                return Ready::Failed("another worker's login is taking too long".into());
            }
            tokio::time::sleep(WAIT_STEP).await;
        }
    }

    /// Logs in while holding the lock; `None` when the account chosen was
    /// retired and another may be tried at once.
    async fn log_in(&self, stats: &mut Tally) -> Option<Ready> {
        let record = match self.frontier.session().await {
            Ok(r) => r,
            Err(e) => return Some(Ready::Failed(format!("cannot read the login session: {e}"))),
        };
        let mut book = Book::parse(&record.accounts);
        let now = (crate::frontier::now_secs() * 1000.0) as u64;
        let accounts = &self.config.accounts;
        let i = match book.choose(
            accounts,
            self.config.max_logins_per_hour,
            &record.account,
            now,
        ) {
            Choice::Account(i) => i,
            Choice::WaitUntil(t) => {
                self.free_lock(&book).await;
                let wait = Duration::from_millis(t.saturating_sub(now)).max(MIN_WAIT);
                self.set_no_login_until(wait);
                match book.resting(now) {
                    Some((account, _)) => tracing::info!(
                        account,
                        "no account may log in now ({account} rests after a refused login); requests to the site wait {}, other sites' go on",
                        crate::wording::duration(wait)
                    ),
                    None => {
                        stats.add(stats::SESSION_LOGIN_DEFERRED, 1);
                        // Logins that failed spend the hour's too: say why.
                        let failed = book.last_failure().map_or(String::new(), |why| {
                            format!(" (the last login could not be done: {why})")
                        });
                        tracing::warn!(
                            max_logins_per_hour = self.config.max_logins_per_hour,
                            "every account has had its logins for this hour{failed}; requests to the site wait {}",
                            crate::wording::duration(wait)
                        );
                    }
                }
                return Some(Ready::Wait(wait));
            }
            // A local crawl stopped when its last account was refused.
            Choice::NoneLeft if !self.frontier.is_shared() => {
                return Some(Ready::Wait(ALL_RETIRED_WAIT));
            }
            Choice::NoneLeft => {
                self.free_lock(&book).await;
                let why = "every account of [session] is retired (each was refused, rested, and refused again)";
                // Once per worker; each request's failure says it too.
                if !self
                    .said_retired
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    tracing::error!(accounts = accounts.len(), "{why}; requests to the site fail for good (kept in the failed key). Fix the credentials, delete the session key (DEL <name>:session), then queue them again with crawlworker push-urls --from-failed");
                }
                return Some(Ready::NoAccount(why.to_string()));
            }
        };
        let account = &accounts[i];
        book.attempted(&account.name, now);
        // The attempt counts against max_logins_per_hour before its form is
        // sent, whatever becomes of the login (a late one included).
        let note = SessionLogin {
            accounts: book.to_json(),
            keep_lock: true,
            ..SessionLogin::default()
        };
        match self.frontier.session_store(&self.holder, &note).await {
            Ok(true) => {}
            // The lock ran out already: another worker may log in.
            Ok(false) => return None,
            Err(e) => {
                return Some(Ready::Failed(format!(
                    "cannot count the login in the accounts' history: {e}"
                )))
            }
        }
        let started = Instant::now();
        let login = login::log_in(&self.client, &self.config, account).await;
        let took = started.elapsed();
        if took > self.config.login_timeout {
            tracing::warn!(
                account = %account.name,
                "a login took {}, longer than login_timeout ({}): other workers may have logged in meanwhile; raise login_timeout",
                crate::wording::duration(took),
                crate::wording::duration(self.config.login_timeout)
            );
        }
        self.after_login(account.name.clone(), record.generation, login, book, stats)
            .await
    }

    async fn after_login(
        &self,
        account: String,
        generation: u64,
        login: Result<SecretText, LoginError>,
        mut book: Book,
        stats: &mut Tally,
    ) -> Option<Ready> {
        match login {
            Ok(cookie) => {
                book.logged_in(&account);
                let stored = SessionLogin {
                    cookie: Some(cookie.clone()),
                    account: account.clone(),
                    accounts: book.to_json(),
                    seen: generation,
                    keep_lock: false,
                };
                match self.frontier.session_store(&self.holder, &stored).await {
                    Ok(true) => {
                        stats.add(stats::SESSION_LOGIN_COUNT, 1);
                        let whom = if self.frontier.is_shared() {
                            "logged in for the cluster"
                        } else {
                            "logged in"
                        };
                        tracing::info!(account = %account, generation = generation + 1, "{whom}");
                        self.set_current(generation + 1, cookie.clone());
                        Some(Ready::Session {
                            generation: generation + 1,
                            cookie,
                        })
                    }
                    // The lock ran out first and another worker stored a
                    // newer session meanwhile: that one is used.
                    Ok(false) => {
                        tracing::warn!(account = %account, "a login outlived login_timeout and another worker's newer session was stored meanwhile; this one is not used");
                        None
                    }
                    Err(e) => Some(Ready::Failed(format!(
                        "cannot store the login session: {e}"
                    ))),
                }
            }
            Err(LoginError::Refused(why, retry_after)) => {
                stats.add(stats::SESSION_LOGIN_FAILED, 1);
                self.refused(&account, &why, retry_after, &mut book, stats);
                self.free_lock(&book).await;
                None
            }
            Err(LoginError::Unavailable(why)) => {
                stats.add(stats::SESSION_LOGIN_FAILED, 1);
                tracing::warn!(account = %account, "login could not be done: {why}");
                book.failed(&account, &why);
                self.free_lock(&book).await;
                Some(Ready::Failed(why))
            }
            // Not the account's fault: it is not rested or retired.
            Err(LoginError::Misdirected(why)) => {
                stats.add(stats::SESSION_LOGIN_FAILED, 1);
                tracing::error!(account = %account, "login not done: {why}");
                book.failed(&account, &why);
                self.free_lock(&book).await;
                Some(Ready::Failed(why))
            }
        }
    }

    /// A refused login: in a cluster the account rests (the site's
    /// `Retry-After`, else `login_cooldown`) and is tried once more, and is
    /// retired when refused after its rest; a local crawl, with a person
    /// waiting for it, retires it at once and stops when none is left.
    fn refused(
        &self,
        account: &str,
        why: &str,
        retry_after: Option<Duration>,
        book: &mut Book,
        stats: &mut Tally,
    ) {
        let now = (crate::frontier::now_secs() * 1000.0) as u64;
        if !self.frontier.is_shared() {
            stats.add(stats::SESSION_ACCOUNT_RETIRED, 1);
            book.retire(account, why);
            tracing::error!(account, "login refused, account retired: {why}");
            let left = self
                .config
                .accounts
                .iter()
                .any(|a| book.state(&a.name, now) != accounts::State::Retired);
            if !left {
                self.frontier.fatal().stop(format!(
                    "the login of account `{account}` was refused, and [session] has no other account: {why}. Fix the credentials (or wait out the site's lock) and run again"
                ));
            }
            return;
        }
        let rest = retry_after.unwrap_or(self.config.login_cooldown);
        match book.refused(account, now, rest.as_millis() as u64, why) {
            accounts::Refusal::Rests(_) => {
                stats.add(stats::SESSION_ACCOUNT_RESTED, 1);
                tracing::warn!(
                    account,
                    "login refused: {why}; account `{account}` rests {} (login_cooldown, or the site's Retry-After), then is tried once more",
                    crate::wording::duration(rest)
                );
            }
            accounts::Refusal::Retired => {
                stats.add(stats::SESSION_ACCOUNT_RETIRED, 1);
                tracing::error!(
                    account,
                    "login refused again after its rest, account retired: {why}"
                );
            }
        }
    }

    /// Frees the lock without a session, keeping the accounts' history.
    async fn free_lock(&self, book: &Book) {
        let failed = SessionLogin {
            accounts: book.to_json(),
            ..SessionLogin::default()
        };
        if let Err(e) = self.frontier.session_store(&self.holder, &failed).await {
            tracing::debug!(error = %e, "could not free the login lock; it runs out instead");
        }
    }
}
