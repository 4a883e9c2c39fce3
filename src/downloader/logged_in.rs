//! Requests to a members-only site: each goes out with the cluster's
//! login session (see [`crate::downloader::session`]); a response showing the session
//! logged out is not a page: the session is marked stale, one worker of
//! the cluster logs in again, and the same request is sent again with the
//! new session, within the same lease (so it is committed once, and a
//! worker killed meanwhile leaves it to expire back to the queue).

use std::time::Duration;

use super::retry::{self, Failure};
use super::{Downloaded, Downloader, Fetched};
use crate::downloader::session::{Keeper, Ready};
use crate::frontier::{HostOutcome, PageResult, Retry};
use crate::request::Request;
use crate::spider::session::SecretText;
use crate::stats::{self, Tally};

/// Times a request is sent with a new session after showing the session
/// logged out, before it is retried as a failure.
const MAX_SESSION_TRIES: u32 = 3;

impl Downloader {
    /// Sends `request` with the session until a response does not show it
    /// logged out; anything else is the page's outcome already.
    pub(super) async fn fetch_logged_in(
        &self,
        keeper: &Keeper,
        request: &Request,
        stats: &mut Tally,
    ) -> Result<(Fetched, SecretText), Downloaded> {
        let mut ready = keeper.ready(0, stats).await;
        for _ in 0..MAX_SESSION_TRIES {
            let (generation, cookie) = match ready {
                Ready::Session { generation, cookie } => (generation, cookie),
                Ready::Wait(delay) => return Err(put_off(request, delay)),
                Ready::Failed(why) => return Err(self.login_failed(request, why, stats)),
                Ready::NoAccount(why) => return Err(self.no_account(request, why, stats)),
            };
            let fetched = self.exchange(request, Some(&cookie), stats).await?;
            stats.add(stats::SESSION_REQUEST_COUNT, 1);
            if !keeper.logged_out(&fetched) {
                return Ok((fetched, cookie));
            }
            tracing::debug!(url = %request.url, generation, "the response shows the session logged out; sent again with a new session");
            ready = keeper.logged_out_seen(generation, stats).await;
        }
        let why = format!(
            "{} still shows the session logged out after {MAX_SESSION_TRIES} logins (check [session] logged_in and logged_out)",
            request.url
        );
        Err(self.login_failed(request, why, stats))
    }

    /// The request is retried later, as after a network error.
    fn login_failed(&self, request: &Request, why: String, stats: &mut Tally) -> Downloaded {
        self.without_session(request, why, "SessionLoginError", true, stats)
    }

    /// The request fails for good: no account can log in.
    fn no_account(&self, request: &Request, why: String, stats: &mut Tally) -> Downloaded {
        self.without_session(request, why, "SessionNoAccount", false, stats)
    }

    /// The request had no login session to go with (`why`): a failure of
    /// `kind`, retried later if `retryable`, as any failure is.
    fn without_session(
        &self,
        request: &Request,
        why: String,
        kind: &str,
        retryable: bool,
        stats: &mut Tally,
    ) -> Downloaded {
        let failure = Failure {
            reason: format!("no login session: {why}"),
            kind: kind.into(),
            status: None,
            retry_after: None,
            retryable,
        };
        Downloaded::Decided(Box::new(retry::retry_or_fail(
            &self.settings,
            request,
            failure,
            stats,
            HostOutcome::None,
        )))
    }
}

/// The request waits `delay` in the frontier, as it is (not a retry: no
/// login could be made, through no fault of the request).
fn put_off(request: &Request, delay: Duration) -> Downloaded {
    Downloaded::Decided(Box::new(PageResult {
        retry: Some(Retry {
            request: request.clone(),
            delay,
        }),
        ..PageResult::default()
    }))
}
