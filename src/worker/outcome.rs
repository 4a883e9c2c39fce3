//! What to do with a response or error that is not a page to extract:
//! retry it later (exponential backoff with jitter, at least the server's
//! Retry-After, waiting in Redis rather than in the worker), give up and
//! record it in the failed key, or follow a redirect as a new request that
//! passes the dupefilter, allowed-domains and deny checks again, as Scrapy's
//! RedirectMiddleware does.

use std::time::{Duration, SystemTime};

use serde_json::json;

use crate::fetch::FetchError;
use crate::frontier::{HostOutcome, PageResult, Retry};
use crate::request::{absolute_url, Request};
use crate::settings::Settings;
use crate::spider::Spider;

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

/// Network errors worth retrying: DNS and connection failures, resets,
/// timeouts (not a refused address or an oversized response).
pub fn retryable_error(e: &FetchError) -> bool {
    e.is_retryable()
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
pub fn backoff(settings: &Settings, n: u32, retry_after: Option<Duration>) -> Duration {
    let base =
        settings.retry_backoff_base.as_secs_f64() * 2f64.powi(n.saturating_sub(1).min(30) as i32);
    let jittered = Duration::from_secs_f64(base * (0.5 + fastrand::f64()));
    jittered
        .max(retry_after.unwrap_or_default())
        .min(settings.retry_backoff_max)
}

/// Schedules a retry, or records the request as failed for good.
pub fn retry_or_fail(
    settings: &Settings,
    request: &Request,
    failure: Failure,
    mut stats: Vec<(String, i64)>,
    host: HostOutcome,
) -> PageResult {
    let can_retry = settings.retry_enabled && failure.retryable;
    if can_retry && request.retry_times < settings.retry_times {
        let n = request.retry_times + 1;
        let delay = backoff(settings, n, failure.retry_after);
        tracing::info!(url = %request.url, reason = %failure.reason, attempt = n, "retrying in {delay:?}");
        stats.push(("retry/count".into(), 1));
        stats.push((format!("retry/reason_count/{}", failure.kind), 1));
        // Scrapy's RETRY_PRIORITY_ADJUST.
        let retried = Request {
            retry_times: n,
            priority: request.priority - 1,
            ..request.clone()
        };
        return PageResult {
            stats,
            retry: Some(Retry {
                request: retried,
                delay,
            }),
            host,
            ..PageResult::default()
        };
    }
    let reason = if can_retry {
        stats.push(("retry/max_reached".into(), 1));
        format!(
            "{} (gave up after {} retries)",
            failure.reason, request.retry_times
        )
    } else {
        failure.reason.clone()
    };
    tracing::warn!(url = %request.url, %reason, "request failed; recorded in the failed key (re-queue with push-urls --from-failed)");
    stats.push(("failed/count".into(), 1));
    PageResult {
        stats,
        failed: Some(failed_record(
            request,
            &reason,
            &failure.kind,
            failure.status,
        )),
        host,
        ..PageResult::default()
    }
}

/// Turns a 3xx response into the request for its Location.
#[allow(clippy::too_many_arguments)]
pub fn redirect(
    spider: &Spider,
    settings: &Settings,
    request: &Request,
    response_url: &str,
    status: u16,
    location: &str,
    mut stats: Vec<(String, i64)>,
    host: HostOutcome,
) -> PageResult {
    let fail = |reason: String, kind: &str, stats: Vec<(String, i64)>| {
        tracing::warn!(url = %request.url, %reason, "redirect not followed; recorded in the failed key");
        let mut stats = stats;
        stats.push((format!("redirect/failed/{kind}"), 1));
        PageResult {
            stats,
            failed: Some(failed_record(request, &reason, kind, Some(status))),
            host,
            ..PageResult::default()
        }
    };
    let base = url::Url::parse(response_url).ok();
    let Ok(target) = absolute_url(base.as_ref(), location, encoding_rs::UTF_8, false) else {
        return fail(
            format!("HTTP {status} to `{location}`, not an http(s) URL"),
            "scheme",
            stats,
        );
    };
    let mut chain = request.redirect_urls.clone();
    chain.push(request.url.clone());
    if chain.contains(&target) {
        return fail(
            format!("redirect loop: {} leads back to {target}", request.url),
            "loop",
            stats,
        );
    }
    if chain.len() > settings.redirect_max_times as usize {
        return fail(
            format!(
                "redirect chain longer than redirect_max_times ({})",
                settings.redirect_max_times
            ),
            "max_reached",
            stats,
        );
    }
    let target_host = url::Url::parse(&target)
        .ok()
        .and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_string()))
        .unwrap_or_default();
    if !spider.allows_host(&target_host) {
        tracing::debug!(url = %request.url, %target, "redirect to a host outside allowed_domains dropped");
        stats.push(("offsite/filtered".into(), 1));
        return PageResult {
            stats,
            host,
            ..PageResult::default()
        };
    }
    if spider.deny.iter().any(|d| d.is_match(&target)) {
        stats.push(("follow/filtered/denied".into(), 1));
        return PageResult {
            stats,
            host,
            ..PageResult::default()
        };
    }
    // 301/302/303 turn a POST into a GET without a body (as browsers and
    // Scrapy do); 307/308 keep the method and body.
    let becomes_get = matches!(status, 301..=303) && request.method != "HEAD";
    let (method, body, headers) = if becomes_get {
        let headers = request
            .headers
            .iter()
            .filter(|(k, _)| {
                !k.eq_ignore_ascii_case("content-type") && !k.eq_ignore_ascii_case("content-length")
            })
            .cloned()
            .collect();
        ("GET".to_string(), String::new(), headers)
    } else {
        (
            request.method.clone(),
            request.body.clone(),
            request.headers.clone(),
        )
    };
    stats.push(("redirect/count".into(), 1));
    let next = Request {
        url: target,
        method,
        body,
        headers,
        // Scrapy's REDIRECT_PRIORITY_ADJUST.
        priority: request.priority + 2,
        redirect_urls: chain,
        retry_times: 0,
        ..request.clone()
    };
    PageResult {
        requests: vec![next],
        stats,
        host,
        ..PageResult::default()
    }
}

/// The failed-key record of a request that failed for good.
fn failed_record(request: &Request, reason: &str, kind: &str, status: Option<u16>) -> String {
    json!({
        "url": request.url,
        "reason": reason,
        "kind": kind,
        "status": status,
        "retry_times": request.retry_times,
        "time": crate::frontier::now_secs(),
        "request": request,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_honours_retry_after() {
        let s = Settings::default();
        for _ in 0..50 {
            let first = backoff(&s, 1, None);
            assert!(
                first >= Duration::from_millis(500) && first <= Duration::from_millis(1500),
                "{first:?}"
            );
            let third = backoff(&s, 3, None);
            assert!(
                third >= Duration::from_secs(2) && third <= Duration::from_secs(6),
                "{third:?}"
            );
        }
        assert_eq!(
            backoff(&s, 1, Some(Duration::from_secs(30))),
            Duration::from_secs(30)
        );
        assert_eq!(
            backoff(&s, 1, Some(Duration::from_secs(3600))),
            s.retry_backoff_max
        );
        assert_eq!(backoff(&s, 40, None), s.retry_backoff_max);
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
