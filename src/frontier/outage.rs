//! Riding out Redis outages (not to be confused with retrying a download,
//! which is the downloader's): an operation that fails because Redis is
//! unreachable is retried with exponential backoff (capped, with jitter),
//! logged once per outage, until it succeeds or the worker shuts down.
//! Errors that will not heal (a key of the wrong type, a refused password,
//! a missing ACL permission: [`FrontierError::is_fatal`]) stop the worker:
//! the first is recorded in the spider's [`Fatal`] and the spider's loop
//! ends on it with its message, handing its leases back. Other errors (a script
//! error) are logged with the operation and key and retried, slowly.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::FrontierError;
use crate::retry_schedule::RetrySchedule;

/// Where the first fatal Redis error of a spider's run is kept (one per
/// frontier, shared by its clones): every step of the run that meets such
/// an error records it here and gives up, and the spider's loop, waiting
/// on [`Fatal::raised`], ends with its message.
#[derive(Clone, Default)]
pub struct Fatal(Arc<watch::Sender<Option<Arc<str>>>>);

impl Fatal {
    /// Records a fatal error (the first one wins) and logs it.
    fn raise(&self, what: &str, e: &FrontierError) {
        let error = e.to_string();
        let message = format!(
            "cannot {what}: {}. This will not heal by retrying: {}",
            error.trim_end_matches('.'),
            e.remedy()
        );
        self.0.send_if_modified(|slot| {
            if slot.is_some() {
                return false;
            }
            tracing::error!("{message}; stopping the spider");
            *slot = Some(message.into());
            true
        });
    }

    /// Stops the spider for a reason that is not Redis's (a local crawl
    /// whose login was refused): logged, and the first one wins.
    pub fn stop(&self, message: String) {
        self.0.send_if_modified(|slot| {
            if slot.is_some() {
                return false;
            }
            tracing::error!("{message}; stopping the spider");
            *slot = Some(message.into());
            true
        });
    }

    /// The fatal error that stops the spider, if one happened.
    pub fn get(&self) -> Option<Arc<str>> {
        self.0.borrow().clone()
    }

    /// Resolves once a fatal error happened (never, if none does).
    pub async fn raised(&self) {
        let mut rx = self.0.subscribe();
        if rx.wait_for(|f| f.is_some()).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Sleeps for `d`; returns true if the worker is shutting down.
pub async fn sleep_or_shutdown(d: Duration, shutdown: &watch::Receiver<bool>) -> bool {
    let mut shutdown = shutdown.clone();
    if *shutdown.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => *shutdown.borrow(),
        _ = shutdown.changed() => true,
    }
}

/// Runs `op` until it succeeds; `None` when the worker shut down first,
/// or when `op` failed in a way retrying cannot mend (then `fatal` says
/// why).
pub async fn with_redis<T, F, Fut>(
    what: &str,
    shutdown: &watch::Receiver<bool>,
    fatal: &Fatal,
    mut op: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, FrontierError>>,
{
    let mut backoff = RetrySchedule::REDIS.attempts();
    let mut failures = 0u32;
    loop {
        match op().await {
            Ok(v) => {
                if failures > 0 {
                    tracing::info!(
                        "Redis is back; {what} succeeded after {failures} failed attempts"
                    );
                }
                return Some(v);
            }
            Err(e) if e.is_fatal() => {
                fatal.raise(what, &e);
                return None;
            }
            Err(e) => {
                failures += 1;
                let wait = if e.is_outage() {
                    backoff.next_delay()
                } else {
                    Duration::from_secs(5)
                };
                if failures == 1 || failures.is_multiple_of(20) {
                    if e.is_outage() {
                        tracing::warn!(error = %e, "cannot {what}: {}; pausing and retrying (nothing is lost)", e.outage());
                    } else {
                        tracing::error!(error = %e, "cannot {what}; retrying in {}", crate::wording::duration(wait));
                    }
                }
                if sleep_or_shutdown(wait, shutdown).await {
                    return None;
                }
            }
        }
    }
}

/// Runs `op` until it succeeds, whatever the worker's shutdown says: for
/// steps that must finish once started (a page's commit). Safe because
/// those steps are idempotent: a repeat after one that went through finds
/// the lease gone and writes nothing. After a fatal error (see [`Fatal`])
/// it never returns: the step wrote nothing (the scripts check before they
/// write), and the spider's loop, ending on the error, aborts the task and
/// hands its lease back (or the lease expires).
pub async fn until_done<T, F, Fut>(what: &str, fatal: &Fatal, op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, FrontierError>>,
{
    // The sender must live: a closed channel would read as "shut down".
    let (_keep, never) = watch::channel(false);
    match with_redis(what, &never, fatal, op).await {
        Some(v) => v,
        None => std::future::pending().await,
    }
}
