//! Waiting for a condition instead of sleeping and hoping: poll until it
//! holds, and fail with a message when a generous deadline passes. The
//! deadline only bounds a broken run; a passing one takes as long as the
//! condition needs.

use std::time::{Duration, Instant};

/// How often a condition is polled.
const POLL: Duration = Duration::from_millis(20);

/// Polls `check` until it returns `Some`, for at most `limit`; panics with
/// `what` when it never does.
pub fn eventually<T>(what: &str, limit: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            return v;
        }
        if start.elapsed() > limit {
            panic!("{what}: not within {limit:?}");
        }
        std::thread::sleep(POLL);
    }
}

/// [`eventually`] for async conditions (inside a Tokio runtime).
pub async fn eventually_async<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if start.elapsed() > limit {
            panic!("{what}: not within {limit:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}
