//! `parse` on a `[session]` spider: the page is fetched logged in, as a
//! crawl fetches it. The cluster's live session is used when `--redis`
//! reaches one (no login at all); otherwise `parse` logs in once itself,
//! with an account the cluster has neither retired nor rests. It never writes
//! to Redis: its own login is for this one page. What it did is said on
//! standard error and in the output's `session`; never a cookie or a
//! credential.

use anyhow::bail;
use serde::Serialize;

use crate::downloader::session::accounts::{Book, Choice};
use crate::downloader::session::login::{self, LoginError};
use crate::downloader::{Fetched, HttpClient};
use crate::frontier::redis_url::RedisUrl;
use crate::frontier::{Backend, RedisFrontier, RedisTarget, SessionRecord};
use crate::request::Request;
use crate::spider::session::{SecretText, Session};
use crate::spider::Spider;

/// Which session the page was fetched with.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub(super) enum SessionUsed {
    /// The cluster's live session, read from Redis: no login.
    Cluster { generation: u64, account: String },
    /// A login of `parse`'s own, and why the cluster's was not used.
    Login { account: String, why: String },
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
            SessionUsed::Login { account, why } => format!(
                "logged in once as account `{account}` for this page ({why}); the cluster's session is left as it is"
            ),
        }
    }
}

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
    let (record, why) = match redis {
        None => (None, "no --redis given".to_string()),
        Some(url) => match cluster_session(spider, url).await {
            Ok(r) if r.fresh_after(0) => {
                let used = SessionUsed::Cluster {
                    generation: r.generation,
                    account: r.account.clone(),
                };
                let fetched = with_cookie(client, request, &r.cookie).await?;
                if !crate::downloader::session::logged_out(session, &fetched) {
                    return Ok(Some((fetched, used)));
                }
                let why = format!(
                    "the cluster's session (generation {}) shows itself logged out",
                    r.generation
                );
                (Some(r), why)
            }
            Ok(r) if r.generation == 0 => (
                Some(r),
                format!("the cluster at {url} has logged in no session yet"),
            ),
            Ok(r) => {
                let why = format!(
                    "the cluster's session (generation {}) is marked logged out",
                    r.generation
                );
                (Some(r), why)
            }
            Err(e) => (None, format!("Redis at {url} did not answer: {e}")),
        },
    };
    let (cookie, account) = log_in(session, client, record.as_ref()).await?;
    let fetched = with_cookie(client, request, &cookie).await?;
    Ok(Some((fetched, SessionUsed::Login { account, why })))
}

/// The session the cluster of `spider` keeps at `url`.
async fn cluster_session(spider: &Spider, url: &RedisUrl) -> anyhow::Result<SessionRecord> {
    let target = RedisTarget::open(url)?;
    let frontier = RedisFrontier::connect(&target, spider.frontier_options("parse"))
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.said()))?;
    Ok(frontier.session().await?)
}

/// One login, with the first account the cluster's history (when read)
/// has neither retired nor resting; its cookie and the account's name.
async fn log_in(
    session: &Session,
    client: &HttpClient,
    record: Option<&SessionRecord>,
) -> anyhow::Result<(SecretText, String)> {
    let mut book = Book::parse(record.map_or("", |r| r.accounts.as_str()));
    let now = (crate::frontier::now_secs() * 1000.0) as u64;
    let account = match book.choose(&session.accounts, u32::MAX, "", now) {
        Choice::Account(i) => &session.accounts[i],
        Choice::WaitUntil(_) | Choice::NoneLeft => bail!(
            "every account of [session] is retired or resting in the cluster (crawlworker stats shows them); parse logs in with none of them"
        ),
    };
    match login::log_in(client, session, account).await {
        Ok(cookie) => Ok((cookie, account.name.clone())),
        Err(LoginError::Refused(why, _)) | Err(LoginError::Unavailable(why)) => {
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
    let mut sent = request.clone();
    sent.headers
        .retain(|(k, _)| !k.eq_ignore_ascii_case("cookie"));
    sent.headers
        .push(("Cookie".into(), cookie.expose().to_string()));
    Ok(client.fetch(&sent).await?)
}
