//! What a fetch of a page that a `revisit` rule schedules means for its
//! schedule: whether the page changed (a 304, else a digest of what the
//! rule compares), when to fetch it next (a fixed interval, or an adaptive
//! one that grows while the page stays the same and shrinks when it
//! changes, as Nutch's AdaptiveFetchSchedule does), the validators to send
//! next time, and which of its items are pushed (`emit = "changed"`: those
//! the last visit did not have, by their `change_fields`).

use std::time::Duration;

use sha1::{Digest, Sha1};

use crate::downloader::client::Fetched;
use crate::frontier::{PageResult, Revisit};
use crate::request::{Request, RevisitState, CONDITIONAL_HEADERS, MAX_ITEM_DIGESTS, MAX_VALIDATOR};
use crate::spider::{Change, RevisitRule, Spider};
use crate::stats::{self, Tally};

/// An unchanged page's next interval is this much longer (Nutch's
/// `db.fetch.schedule.adaptive.inc_rate`, 0.4)...
const GROW: f64 = 1.4;
/// ...and a changed page's this much shorter (its `dec_rate`, 0.2).
const SHRINK: f64 = 0.8;

/// A fetched page's revisit rule, when its rule has one.
pub fn rule_of<'s>(spider: &'s Spider, request: &Request) -> Option<&'s RevisitRule> {
    spider
        .rule_for(request.rule.as_deref(), &request.url)?
        .revisit
        .as_ref()
}

/// Whether a response is a 304 answering this revisit's validators: the
/// page is unchanged and there is nothing to parse.
pub fn not_modified(request: &Request, fetched: &Fetched) -> bool {
    fetched.status == 304
        && request
            .revisit
            .as_ref()
            .is_some_and(|s| s.etag.is_some() || s.last_modified.is_some())
}

/// The SHA-1 of what `change` compares: the body, or the items and links
/// extracted (so a timestamp or an advert on the page does not count).
fn digest(rule: &RevisitRule, result: &PageResult, fetched: &Fetched) -> String {
    let mut hash = Sha1::new();
    match rule.change {
        Change::Body => hash.update(&fetched.body),
        // Only the fields that matter, of every item.
        Change::Extracted if !rule.change_fields.is_empty() => {
            for item in &result.items {
                hash.update(item_digest(rule, item));
                hash.update(b"\n");
            }
        }
        Change::Extracted => {
            for item in &result.items {
                hash.update(serde_json::Value::Object(item.clone()).to_string());
                hash.update(b"\n");
            }
            for url in result
                .requests
                .iter()
                .map(|r| &r.url)
                .chain(result.tasks.iter().map(|t| &t.request.url))
            {
                hash.update(url);
                hash.update(b"\n");
            }
        }
    }
    hex::encode(hash.finalize())
}

/// A short digest (16 hex characters of SHA-1) of what counts in one item:
/// its `change_fields`, or all of it.
fn item_digest(rule: &RevisitRule, item: &serde_json::Map<String, serde_json::Value>) -> String {
    let mut hash = Sha1::new();
    if rule.change_fields.is_empty() {
        hash.update(serde_json::Value::Object(item.clone()).to_string());
    } else {
        for field in &rule.change_fields {
            hash.update(item.get(field).map(|v| v.to_string()).unwrap_or_default());
            hash.update(b"\t");
        }
    }
    let mut hex = hex::encode(hash.finalize());
    hex.truncate(16);
    hex
}

/// `emit = "changed"`: keeps the items the last visit did not have, and
/// returns the digests of this visit's items, to compare the next with.
fn new_items(
    rule: &RevisitRule,
    result: &mut PageResult,
    last: Option<&RevisitState>,
    stats: &mut Tally,
) -> Vec<String> {
    let digests: Vec<String> = result.items.iter().map(|i| item_digest(rule, i)).collect();
    if let Some(last) = last.filter(|s| s.visited_ms > 0) {
        let before = result.items.len();
        let mut seen = digests.iter();
        result
            .items
            .retain(|_| seen.next().is_none_or(|d| !last.items.contains(d)));
        stats.add(
            stats::REVISIT_ITEMS_UNCHANGED,
            (before - result.items.len()) as i64,
        );
    }
    let mut kept = digests;
    kept.truncate(MAX_ITEM_DIGESTS);
    kept
}

/// The next interval: fixed, or the last one grown or shrunk, within
/// `min`..`max`. A first visit (or an unknown change) keeps the last one.
fn next_interval(
    rule: &RevisitRule,
    last: Option<&RevisitState>,
    changed: Option<bool>,
) -> Duration {
    let Some(last) = last.filter(|s| s.interval_ms > 0) else {
        return rule.min;
    };
    let last = Duration::from_millis(last.interval_ms);
    let next = match changed {
        Some(true) => last.mul_f64(SHRINK),
        Some(false) => last.mul_f64(GROW),
        None => last,
    };
    next.clamp(rule.min, rule.max)
}

/// A validator worth keeping: present and bounded.
fn validator(fetched: Option<&Fetched>, name: &str, last: Option<&String>) -> Option<String> {
    match fetched.and_then(|f| f.header(name)) {
        Some(v) if usable_validator(name, v) => Some(v.to_string()),
        // One that cannot be sent back as it came is not sent at all: the
        // digest tells a change instead.
        Some(_) => None,
        None => last.cloned(),
    }
}

/// Whether a validator can be sent back byte for byte and mean something:
/// not empty, not too long, ASCII (a Latin-1 ETag was read as text and
/// would come back mangled), and for Last-Modified an HTTP date.
fn usable_validator(name: &str, v: &str) -> bool {
    !v.trim().is_empty()
        && v.len() <= MAX_VALIDATOR
        && v.bytes().all(|b| (0x20..0x7f).contains(&b))
        && (name != "Last-Modified" || chrono::DateTime::parse_from_rfc2822(v.trim()).is_ok())
}

/// Decides a fetched page's revisit (and, with `emit = "changed"`, drops
/// the items of an unchanged one). `fetched` is the response, if there was
/// one; `status` drops a page that is gone.
pub fn decide(
    spider: &Spider,
    request: &Request,
    result: &mut PageResult,
    fetched: Option<&Fetched>,
    stats: &mut Tally,
) {
    let Some(rule) = rule_of(spider, request) else {
        return;
    };
    // A retry's own commit decides.
    if result.retry.is_some() {
        return;
    }
    // The request as first made: no retries, redirects or old validators.
    let mut again = request.clone();
    again.retry_times = 0;
    again.redirect_urls.clear();
    again.forget_revisit();
    let status = fetched.map(|f| f.status);
    if status.is_some_and(|s| spider.settings.revisit_drop_status.contains(&s)) {
        result.revisit = Some(Revisit::Drop { request: again });
        return;
    }
    let last = request.revisit.as_ref();
    let mut items = last.map(|s| s.items.clone()).unwrap_or_default();
    if fetched.is_some_and(|f| f.status == 304 && !not_modified(request, f)) {
        tracing::warn!(url = %request.url, "the server answered 304 Not Modified to a request that sent no validator (a misconfigured server or cache?); the page was not read and counts as an error page, its schedule stays");
    }
    let (changed, digest) = match fetched {
        Some(f) if not_modified(request, f) => (Some(false), last.and_then(|s| s.digest.clone())),
        Some(f) if (200..300).contains(&f.status) => {
            let now = digest(rule, result, f);
            let before = last.and_then(|s| s.digest.as_deref());
            if rule.emit_changed {
                items = new_items(rule, result, last, stats);
            }
            (before.map(|b| b != now), Some(now))
        }
        // A failure or an error page says nothing about the content.
        _ => (None, last.and_then(|s| s.digest.clone())),
    };
    match changed {
        Some(true) => stats.add(stats::REVISIT_CHANGED, 1),
        Some(false) => stats.add(stats::REVISIT_UNCHANGED, 1),
        None => {}
    }
    let interval = next_interval(rule, last, changed);
    let state = RevisitState {
        etag: validator(fetched, "ETag", last.and_then(|s| s.etag.as_ref())),
        last_modified: validator(
            fetched,
            "Last-Modified",
            last.and_then(|s| s.last_modified.as_ref()),
        ),
        digest,
        interval_ms: interval.as_millis() as u64,
        visited_ms: (crate::frontier::now_secs() * 1000.0) as u64,
        items,
    };
    if let Some(etag) = &state.etag {
        again
            .headers
            .push((CONDITIONAL_HEADERS[0].into(), etag.clone()));
    }
    if let Some(date) = &state.last_modified {
        again
            .headers
            .push((CONDITIONAL_HEADERS[1].into(), date.clone()));
    }
    again.revisit = Some(state);
    result.revisit = Some(Revisit::At {
        request: again,
        after: interval,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fetched(status: u16, headers: &[(&str, &str)]) -> Fetched {
        Fetched {
            url: "http://127.0.0.1/p".into(),
            status,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: Vec::new(),
            held: Default::default(),
        }
    }

    #[test]
    fn only_validators_that_can_go_back_as_they_came_are_kept() {
        let kept = |name: &str, v: &str| validator(Some(&fetched(200, &[(name, v)])), name, None);
        assert_eq!(kept("ETag", "\"v1\""), Some("\"v1\"".into()));
        assert_eq!(kept("ETag", ""), None, "empty");
        assert_eq!(
            kept("ETag", "\"caf\u{fffd}\""),
            None,
            "Latin-1 read as text"
        );
        let date = "Wed, 21 Oct 2015 07:28:00 GMT";
        assert_eq!(kept("Last-Modified", date), Some(date.into()));
        assert_eq!(kept("Last-Modified", "not a date"), None);
        // A response without one keeps the last visit's.
        let last = "\"v0\"".to_string();
        assert_eq!(
            validator(Some(&fetched(304, &[])), "ETag", Some(&last)),
            Some(last)
        );
    }

    #[test]
    fn a_304_means_unchanged_only_when_the_request_asked_a_condition() {
        let mut request = Request::new("http://127.0.0.1/p".into());
        let answer = fetched(304, &[]);
        assert!(!not_modified(&request, &answer), "a first visit");
        request.revisit = Some(RevisitState::default());
        assert!(!not_modified(&request, &answer), "no validator was sent");
        request.revisit = Some(RevisitState {
            etag: Some("\"v1\"".into()),
            ..RevisitState::default()
        });
        assert!(not_modified(&request, &answer));
    }

    #[test]
    fn an_adaptive_interval_grows_while_unchanged_and_shrinks_on_change() {
        let rule = RevisitRule {
            min: Duration::from_secs(60),
            max: Duration::from_secs(600),
            change: Change::Extracted,
            change_fields: Vec::new(),
            emit_changed: false,
        };
        let at = |ms| RevisitState {
            interval_ms: ms,
            ..RevisitState::default()
        };
        assert_eq!(next_interval(&rule, None, None), Duration::from_secs(60));
        assert_eq!(
            next_interval(&rule, Some(&at(100_000)), Some(false)),
            Duration::from_secs(140)
        );
        assert_eq!(
            next_interval(&rule, Some(&at(100_000)), Some(true)),
            Duration::from_secs(80)
        );
        assert_eq!(
            next_interval(&rule, Some(&at(500_000)), Some(false)),
            Duration::from_secs(600)
        );
        assert_eq!(
            next_interval(&rule, Some(&at(61_000)), Some(true)),
            Duration::from_secs(60)
        );
        let fixed = RevisitRule {
            max: rule.min,
            ..rule.clone()
        };
        assert_eq!(
            next_interval(&fixed, Some(&at(60_000)), Some(false)),
            Duration::from_secs(60)
        );
    }
}
