//! Riding out Redis outages (not to be confused with retrying a download,
//! which is the downloader's): an operation that fails because Redis is
//! unreachable is retried with exponential backoff (capped, with jitter),
//! logged once per outage, until it succeeds or the worker shuts down.
//! Errors that are not outages (a wrong key type, a script error) are
//! logged with the operation and key and also retried, slowly, since they
//! need a person and crashing would help nobody.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;

use super::FrontierError;
use crate::backoff::Backoff;

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

/// Runs `op` until it succeeds; `None` when the worker shut down first.
pub async fn with_redis<T, F, Fut>(
    what: &str,
    shutdown: &watch::Receiver<bool>,
    mut op: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, FrontierError>>,
{
    let mut backoff = Backoff::REDIS.attempts();
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
            Err(e) => {
                failures += 1;
                let wait = if e.is_outage() {
                    backoff.next_delay()
                } else {
                    Duration::from_secs(5)
                };
                if failures == 1 || failures.is_multiple_of(20) {
                    if e.is_outage() {
                        tracing::warn!(error = %e, "cannot {what}: Redis is unreachable; pausing and retrying (nothing is lost)");
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
/// the lease gone and writes nothing.
pub async fn until_done<T, F, Fut>(what: &str, op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, FrontierError>>,
{
    // The sender must live: a closed channel would read as "shut down".
    let (_keep, never) = watch::channel(false);
    match with_redis(what, &never, op).await {
        Some(v) => v,
        None => unreachable!("the shutdown channel of until_done never fires"),
    }
}
