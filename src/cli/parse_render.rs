//! `crawlworker parse` of a page whose rule renders it: the page is opened
//! in headless Chromium as a worker would (its requests answered through
//! the spider's HTTP client and guard), and the output says what the
//! render waited for and what became of the page's requests.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::downloader::render::{Renderer, Report};
use crate::downloader::{Fetched, HttpClient};
use crate::request::Request;
use crate::spider::Spider;
use crate::stats::Tally;

/// The page rendered when its rule says so, with the render's report.
pub(super) async fn rendered(
    spider: &Spider,
    request: &Request,
    fetched: Fetched,
) -> anyhow::Result<(Fetched, Option<Value>)> {
    let how = spider
        .rule_for(request.rule.as_deref(), &request.url)
        .and_then(|rule| rule.render.as_ref());
    let Some(how) = how.filter(|_| (200..300).contains(&fetched.status)) else {
        return Ok((fetched, None));
    };
    let settings = Arc::new(spider.settings.clone());
    let client = HttpClient::new(&settings)?;
    let renderer = Renderer::new(settings, client, None);
    let mut stats = Tally::default();
    let rendered = renderer
        .render(request, fetched, how, None, &mut stats)
        .await?;
    Ok((rendered.fetched, Some(shown(&rendered.report))))
}

/// The report as `parse` prints it.
fn shown(report: &Report) -> Value {
    json!({
        "waited_for": report.waited,
        "milliseconds": report.elapsed.as_millis() as u64,
        "subrequests": report.subrequests,
        "blocked": report.blocked,
        "failed": report.failed,
        "cut": report.cut,
        "navigations_blocked": report.navigations_blocked,
        "refused": report.refused,
    })
}
