//! A 3xx response becomes the request for its Location, which passes the
//! dupefilter, allowed-domains and deny checks again as a new request, as
//! Scrapy's RedirectMiddleware does; a redirect that cannot be followed
//! (another scheme, a loop, too long a chain) is recorded as failed.

use crate::frontier::{FailedRecord, HostOutcome, PageResult};
use crate::request::{absolute_url, Request};
use crate::settings::Settings;
use crate::spider::Spider;
use crate::stats::{self, Tally};

/// A redirect response, as the downloader saw it.
#[derive(Debug, Clone, Copy)]
pub struct Redirect<'a> {
    /// The URL that answered (after the client's own handling).
    pub response_url: &'a str,
    pub status: u16,
    pub location: &'a str,
}

/// Turns a 3xx response into the request for its Location.
pub fn follow(
    spider: &Spider,
    settings: &Settings,
    request: &Request,
    redirect: Redirect<'_>,
    stats: &mut Tally,
    host: HostOutcome,
) -> PageResult {
    let mut chain = request.redirect_urls.clone();
    chain.push(request.url.clone());
    let target = match target(settings, request, &chain, redirect) {
        Ok(target) => target,
        Err((reason, kind)) => {
            stats.add_in(stats::REDIRECT_FAILED, kind, 1);
            let failed = FailedRecord::new(request, &reason, kind, Some(redirect.status));
            return PageResult {
                failed: Some(failed),
                host,
                ..PageResult::default()
            };
        }
    };
    if !spider.allows_url(&target) {
        tracing::debug!(url = %request.url, %target, "redirect to a host outside allowed_domains dropped");
        stats.add(stats::OFFSITE_FILTERED, 1);
        return PageResult {
            host,
            ..PageResult::default()
        };
    }
    if spider.deny.iter().any(|d| d.is_match(&target)) {
        stats.add(stats::FOLLOW_FILTERED_DENIED, 1);
        return PageResult {
            host,
            ..PageResult::default()
        };
    }
    stats.add(stats::REDIRECT_COUNT, 1);
    PageResult {
        requests: vec![next_request(request, redirect.status, target, chain)],
        host,
        ..PageResult::default()
    }
}

/// The URL a redirect leads to, or why it cannot be followed and the kind
/// of failure (counted as `redirect/failed/<kind>`). `chain` is
/// every URL of the redirects so far, this request's last.
fn target(
    settings: &Settings,
    request: &Request,
    chain: &[String],
    redirect: Redirect<'_>,
) -> Result<String, (String, &'static str)> {
    let Redirect {
        response_url,
        status,
        location,
    } = redirect;
    let base = url::Url::parse(response_url).ok();
    let Ok(target) = absolute_url(base.as_ref(), location, encoding_rs::UTF_8, false) else {
        return Err((
            format!("HTTP {status} to `{location}`, not an http(s) URL"),
            "scheme",
        ));
    };
    if chain.contains(&target) {
        return Err((
            format!("redirect loop: {} leads back to {target}", request.url),
            "loop",
        ));
    }
    if chain.len() > settings.redirect_max_times as usize {
        return Err((
            format!(
                "redirect chain longer than redirect_max_times ({})",
                settings.redirect_max_times
            ),
            "max_reached",
        ));
    }
    Ok(target)
}

/// The request for the redirect's target: 301/302/303 turn a POST into a
/// GET without a body (as browsers and Scrapy do); 307/308 keep the method
/// and body.
fn next_request(request: &Request, status: u16, target: String, chain: Vec<String>) -> Request {
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
    let mut next = Request {
        url: target,
        method,
        body,
        headers,
        // Scrapy's REDIRECT_PRIORITY_ADJUST.
        priority: request.priority.saturating_add(2),
        redirect_urls: chain,
        retry_times: 0,
        ..request.clone()
    };
    // The target is not the page a revisit asked about: no validators of it.
    next.forget_revisit();
    next
}
