//! When a download did not give a page: retry it later (exponential backoff
//! with jitter, at least the server's Retry-After, waiting in Redis rather
//! than in the worker), or give up and record it as failed (in the failed
//! key, where `push-urls --from-failed` can bring it back).

use std::time::{Duration, SystemTime};

use super::client::FetchError;
use crate::frontier::{FailedRecord, HostOutcome, PageResult, Retry};
use crate::request::Request;
use crate::retry_schedule::RetrySchedule;
use crate::settings::Settings;
use crate::stats::{self, Tally};

/// A download that did not give a page.
#[derive(Debug, Clone)]
pub struct Failure {
    /// For people: what happened.
    pub reason: String,
    /// For stats: `retry/reason_count/<kind>`.
    pub kind: String,
    pub status: Option<u16>,
    /// What the server asked for (429/503 Retry-After).
    pub retry_after: Option<Duration>,
    /// Whether trying again can help.
    pub retryable: bool,
}

impl Failure {
    /// A download that failed on the network (or was refused).
    pub fn error(e: &FetchError) -> Failure {
        Failure {
            reason: e.to_string(),
            kind: e.kind().to_string(),
            status: None,
            retry_after: None,
            // DNS and connection failures, resets, timeouts: not a refused
            // address or an oversized response.
            retryable: e.is_retryable(),
        }
    }

    /// A page that could not be rendered: retried unless Chromium cannot
    /// start at all (it would fail every try).
    pub fn render(e: &crate::downloader::render::RenderError) -> Failure {
        Failure {
            reason: e.to_string(),
            kind: e.kind().to_string(),
            status: None,
            retry_after: None,
            retryable: !matches!(e, crate::downloader::render::RenderError::Launch { .. }),
        }
    }

    /// A response whose status is retried.
    pub fn status(status: u16, retry_after: Option<Duration>) -> Failure {
        Failure {
            reason: format!("HTTP {status}"),
            kind: status.to_string(),
            status: Some(status),
            retry_after,
            retryable: true,
        }
    }
}

/// `Retry-After` as seconds or an HTTP date.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(SystemTime::now()).unwrap_or_default())
}

/// The wait before retry number `n` (1 for the first): base × 2^(n-1),
/// randomised 0.5×–1.5×, at least `retry_after`, at most the maximum.
pub fn delay(settings: &Settings, n: u32, retry_after: Option<Duration>) -> Duration {
    let schedule = RetrySchedule {
        base: settings.retry_backoff_base,
        max: settings.retry_backoff_max,
        spread: 0.5,
    };
    schedule
        .delay(n)
        .max(retry_after.unwrap_or_default())
        .min(settings.retry_backoff_max)
}

/// Schedules a retry, or records the request as failed for good.
pub fn retry_or_fail(
    settings: &Settings,
    request: &Request,
    failure: Failure,
    stats: &mut Tally,
    host: HostOutcome,
) -> PageResult {
    let can_retry = settings.retry_enabled && failure.retryable;
    if can_retry && request.retry_times < settings.retry_times {
        let n = request.retry_times + 1;
        let delay = delay(settings, n, failure.retry_after);
        tracing::info!(url = %request.url, reason = %failure.reason, attempt = n, "retrying in {}", crate::wording::duration(delay));
        stats.add(stats::RETRY_COUNT, 1);
        stats.add_in(stats::RETRY_REASON, &failure.kind, 1);
        // Scrapy's RETRY_PRIORITY_ADJUST.
        let retried = Request {
            retry_times: n,
            priority: request.priority.saturating_sub(1),
            ..request.clone()
        };
        return PageResult {
            retry: Some(Retry {
                request: retried,
                delay,
            }),
            host,
            ..PageResult::default()
        };
    }
    let reason = if can_retry {
        stats.add(stats::RETRY_MAX_REACHED, 1);
        format!(
            "{} (gave up after {} retries)",
            failure.reason, request.retry_times
        )
    } else {
        failure.reason.clone()
    };
    // The worker says so (see worker::failures), where it knows where
    // failures are kept.
    PageResult {
        failed: Some(FailedRecord::new(
            request,
            &reason,
            &failure.kind,
            failure.status,
        )),
        host,
        ..PageResult::default()
    }
}

/// A request whose host's robots.txt could not be fetched: it waits like a
/// retry, no sooner than `again_in` (when robots.txt is fetched again), and
/// fails after `retry_times` waits; one refused for good (or with retries
/// off) fails at once. Either way it is not counted as forbidden.
pub fn robots_unavailable(
    settings: &Settings,
    request: &Request,
    mut failure: Failure,
    again_in: Duration,
    stats: &mut Tally,
) -> PageResult {
    failure.retry_after = Some(failure.retry_after.unwrap_or_default().max(again_in));
    let result = retry_or_fail(settings, request, failure, stats, HostOutcome::None);
    if result.failed.is_some() {
        stats.add(stats::ROBOTSTXT_UNAVAILABLE_FAILED, 1);
    } else {
        stats.add(stats::ROBOTSTXT_UNAVAILABLE, 1);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_honours_retry_after() {
        let s = Settings::default();
        for _ in 0..50 {
            let first = delay(&s, 1, None);
            assert!(
                first >= Duration::from_millis(500) && first <= Duration::from_millis(1500),
                "{first:?}"
            );
            let third = delay(&s, 3, None);
            assert!(
                third >= Duration::from_secs(2) && third <= Duration::from_secs(6),
                "{third:?}"
            );
        }
        assert_eq!(
            delay(&s, 1, Some(Duration::from_secs(30))),
            Duration::from_secs(30)
        );
        assert_eq!(
            delay(&s, 1, Some(Duration::from_secs(3600))),
            s.retry_backoff_max
        );
        assert_eq!(delay(&s, 40, None), s.retry_backoff_max);
    }

    /// A task's priority comes from outside (a JSON start entry): at the
    /// end of the range, a retry keeps it rather than overflowing.
    #[test]
    fn a_retry_at_the_lowest_priority_keeps_it() {
        let request = Request {
            priority: i64::MIN,
            ..Request::get("http://127.0.0.1/")
        };
        let failure = Failure {
            reason: "HTTP 503".into(),
            kind: "503".into(),
            status: Some(503),
            retry_after: None,
            retryable: true,
        };
        let result = retry_or_fail(
            &Settings::default(),
            &request,
            failure,
            &mut Tally::default(),
            HostOutcome::None,
        );
        let retry = result.retry.expect("retried");
        assert_eq!(retry.request.priority, i64::MIN);
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        assert_eq!(parse_retry_after(" 120 "), Some(Duration::from_secs(120)));
        let soon = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(60));
        let d = parse_retry_after(&soon).unwrap();
        assert!(
            d > Duration::from_secs(55) && d <= Duration::from_secs(60),
            "{d:?}"
        );
        assert_eq!(parse_retry_after("soon"), None);
    }
}
