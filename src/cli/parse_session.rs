//! `parse` on a `[session]` spider: the page is fetched logged in, as a
//! crawl fetches it. The cluster's live session is used when `--redis`
//! reaches one (no login at all); otherwise `parse` logs in once itself.
//! With `--redis` reaching the cluster, that login counts as one of the
//! cluster's ([`Counted`]): made under its login lock, with an account the
//! workers would choose (neither retired nor resting, within
//! `max_logins_per_hour`), and written into the accounts' history, the one
//! thing `parse` writes to Redis; the site rate-limits an account's logins
//! whoever makes them. Its session is for this one page. What it did is
//! said on standard error and in the output's `session`; never a cookie or
//! a credential.

use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;

use crate::downloader::session::accounts::{Book, Choice};
use crate::downloader::session::login::{self, LoginError};
use crate::downloader::{Fetched, HttpClient};
use crate::frontier::redis_url::RedisUrl;
use crate::frontier::{
    Backend, RedisFrontier, RedisTarget, SessionLock, SessionLogin, SessionRecord,
};
use crate::request::Request;
use crate::spider::session::{Account, SecretText, Session};
use crate::spider::Spider;

/// Which session the page was fetched with.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub(super) enum SessionUsed {
    /// The cluster's live session, read from Redis: no login.
    Cluster { generation: u64, account: String },
    /// A login of `parse`'s own, and why the cluster's was not used;
    /// `counted` when the cluster's account history has it (`--redis`
    /// reached the cluster), against `max_logins_per_hour`.
    Login {
        account: String,
        why: String,
        counted: bool,
    },
}

impl SessionUsed {
    /// What `parse` says about it.
    pub(super) fn said(&self) -> String {
        match self {
            SessionUsed::Cluster {
                generation,
                account,
            } => format!(
                "fetched with the cluster's live session (generation {generation}, account `{account}`); no login"
            ),
            SessionUsed::Login {
                account,
                why,
                counted,
            } => format!(
                "logged in once as account `{account}` for this page ({why}); the cluster's session is left as it is{}",
                if *counted {
                    ", and the login counts against the account's max_logins_per_hour in the cluster"
                } else {
                    ""
                }
            ),
        }
    }
}

/// How often `parse` asks again for the login lock a worker holds.
const LOCK_STEP: Duration = Duration::from_millis(100);

/// `request` fetched with the spider's session when it applies to its
/// URL; `None` (nothing fetched) when the spider has none for it.
pub(super) async fn fetch_logged_in(
    spider: &Spider,
    client: &HttpClient,
    request: &Request,
    redis: Option<&RedisUrl>,
) -> anyhow::Result<Option<(Fetched, SessionUsed)>> {
    let Some(session) = spider
        .session
        .as_deref()
        .filter(|s| s.applies_to(&request.url))
    else {
        return Ok(None);
    };
    let Some(url) = redis else {
        let why = "no --redis given".to_string();
        return own_login(session, client, request, why).await.map(Some);
    };
    let (frontier, record) = match cluster(spider, url).await {
        Ok(f) => f,
        Err(e) => {
            let why = format!("Redis at {url} did not answer: {e}");
            return own_login(session, client, request, why).await.map(Some);
        }
    };
    let why = if record.fresh_after(0) {
        let fetched = with_cookie(client, request, &record.cookie).await?;
        if !crate::downloader::session::logged_out(session, &fetched) {
            let used = SessionUsed::Cluster {
                generation: record.generation,
                account: record.account,
            };
            return Ok(Some((fetched, used)));
        }
        format!(
            "the cluster's session (generation {}) shows itself logged out",
            record.generation
        )
    } else if record.generation == 0 {
        format!("the cluster at {url} has logged in no session yet")
    } else {
        format!(
            "the cluster's session (generation {}) is marked logged out",
            record.generation
        )
    };
    let lock = Counted {
        frontier: &frontier,
        session,
        holder: format!("parse:{}", std::process::id()),
    };
    lock.fetch(client, request, record.generation, why)
        .await
        .map(Some)
}

/// The cluster of `spider` at `url`, and the session it keeps.
async fn cluster(
    spider: &Spider,
    url: &RedisUrl,
) -> anyhow::Result<(RedisFrontier, SessionRecord)> {
    let target = RedisTarget::open(url)?;
    let frontier = RedisFrontier::connect(&target, spider.frontier_options("parse"))
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.said()))?;
    let record = frontier.session().await?;
    Ok((frontier, record))
}

/// A login of `parse`'s own that the cluster cannot count (it is not
/// reached): with the first account of the spider.
async fn own_login(
    session: &Session,
    client: &HttpClient,
    request: &Request,
    why: String,
) -> anyhow::Result<(Fetched, SessionUsed)> {
    let account = session
        .accounts
        .first()
        .context("[session] has no account")?;
    let cookie = log_in(session, client, account).await?;
    let fetched = with_cookie(client, request, &cookie).await?;
    let used = SessionUsed::Login {
        account: account.name.clone(),
        why,
        counted: false,
    };
    Ok((fetched, used))
}

/// A login of `parse`'s own that the cluster counts: made under the
/// cluster's login lock, as a worker's is, with the account the workers
/// would choose (neither retired nor resting, within
/// `max_logins_per_hour`), and written into the accounts' history. The
/// session stays `parse`'s; a refusal is not written (the credentials
/// are those of whoever runs `parse`, and a wrong one in their shell
/// must not rest the cluster's account).
struct Counted<'a> {
    frontier: &'a RedisFrontier,
    session: &'a Session,
    holder: String,
}

impl Counted<'_> {
    /// Takes the lock (a session newer than `seen` that a worker made
    /// meanwhile is used instead), logs in, fetches.
    async fn fetch(
        &self,
        client: &HttpClient,
        request: &Request,
        seen: u64,
        why: String,
    ) -> anyhow::Result<(Fetched, SessionUsed)> {
        let ttl = self.session.login_timeout;
        // A worker's login holds the lock until its deadline at most.
        let give_up = std::time::Instant::now() + ttl * 3;
        loop {
            match self.frontier.session_lock(seen, &self.holder, ttl).await? {
                SessionLock::Fresh(r) => {
                    let fetched = with_cookie(client, request, &r.cookie).await?;
                    let used = SessionUsed::Cluster {
                        generation: r.generation,
                        account: r.account,
                    };
                    return Ok((fetched, used));
                }
                SessionLock::Taken => break,
                SessionLock::Busy if std::time::Instant::now() > give_up => bail!(
                    "a worker of the cluster has held the login lock for over {}; parse did not log in",
                    crate::wording::duration(ttl * 3)
                ),
                SessionLock::Busy => tokio::time::sleep(LOCK_STEP).await,
            }
        }
        let (cookie, account) = self.log_in(client).await?;
        let fetched = with_cookie(client, request, &cookie).await?;
        let used = SessionUsed::Login {
            account,
            why,
            counted: true,
        };
        Ok((fetched, used))
    }

    /// Logs in while holding the lock, and frees it with the history.
    async fn log_in(&self, client: &HttpClient) -> anyhow::Result<(SecretText, String)> {
        let record = self.frontier.session().await?;
        let mut book = Book::parse(&record.accounts);
        let now = (crate::frontier::now_secs() * 1000.0) as u64;
        let accounts = &self.session.accounts;
        let max = self.session.max_logins_per_hour;
        let account = match book.choose(accounts, max, &record.account, now) {
            Choice::Account(i) => &accounts[i],
            Choice::WaitUntil(t) => {
                self.free(&book).await;
                let wait = Duration::from_millis(t.saturating_sub(now));
                bail!(
                    "no account of [session] may log in for {} in the cluster (each has had its max_logins_per_hour logins ({max}), or rests after a refused login: crawlworker stats shows them); parse did not log in",
                    crate::wording::duration(wait)
                )
            }
            Choice::NoneLeft => {
                self.free(&book).await;
                bail!("every account of [session] is retired in the cluster (crawlworker stats shows why); parse did not log in")
            }
        };
        book.attempted(&account.name, now);
        // Counted before the form is sent, however long the login takes.
        let note = SessionLogin {
            accounts: book.to_json(),
            keep_lock: true,
            ..SessionLogin::default()
        };
        if let Err(e) = self.frontier.session_store(&self.holder, &note).await {
            bail!("cannot count parse's login in the cluster's account history: {e}; parse did not log in");
        }
        let login = log_in(self.session, client, account).await;
        if login.is_ok() {
            book.logged_in(&account.name);
        }
        self.free(&book).await;
        Ok((login?, account.name.clone()))
    }

    /// Frees the lock, writing the accounts' history; the session is left
    /// as it is.
    async fn free(&self, book: &Book) {
        let history = SessionLogin {
            cookie: None,
            account: String::new(),
            accounts: book.to_json(),
            ..SessionLogin::default()
        };
        if let Err(e) = self.frontier.session_store(&self.holder, &history).await {
            tracing::warn!(error = %e, "could not write parse's login into the cluster's account history; the login lock runs out by itself");
        }
    }
}

/// One login with `account`: its cookie.
async fn log_in(
    session: &Session,
    client: &HttpClient,
    account: &Account,
) -> anyhow::Result<SecretText> {
    match login::log_in(client, session, account).await {
        Ok(cookie) => Ok(cookie),
        Err(LoginError::Refused(why, _))
        | Err(LoginError::Unavailable(why))
        | Err(LoginError::Misdirected(why)) => {
            bail!(
                "parse could not log in with account `{}`: {why}",
                account.name
            )
        }
    }
}

async fn with_cookie(
    client: &HttpClient,
    request: &Request,
    cookie: &SecretText,
) -> anyhow::Result<Fetched> {
    crate::redact::learn_cookie_names(cookie.expose());
    crate::redact::learn_cookie_values(cookie.expose(), false);
    let mut sent = request.clone();
    sent.headers
        .retain(|(k, _)| !k.eq_ignore_ascii_case("cookie"));
    sent.headers
        .push(("Cookie".into(), cookie.expose().to_string()));
    Ok(client.fetch(&sent).await?)
}
