//! When a rendered page is ready to be taken: its load event, then (by
//! its rule) the network quiet, an element present, scrolls that load
//! more. Each step is noted in the page's [`Steps`], which say what it
//! waited for and how long (shown by `crawlworker parse`, and in the
//! error of a page that timed out).

use std::sync::Arc;
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::network::LoaderId;
use chromiumoxide::cdp::browser_protocol::page::EventLifecycleEvent;
use chromiumoxide::listeners::EventStream;
use chromiumoxide::Page;
use futures_util::StreamExt;

use super::serve::Traffic;
use super::NETWORK_IDLE;
use crate::spider::render::{Render, Wait};

/// Scrolls to the end of the page, then waits two frames (at most a
/// second): an observer's callbacks have run by then.
const SCROLL: &str = "new Promise(done => { \
    window.scrollTo(0, document.documentElement.scrollHeight); \
    requestAnimationFrame(() => requestAnimationFrame(() => done(true))); \
    setTimeout(() => done(true), 1000); })";

/// How long a scroll waits for a request it set off to start, when none
/// has: what a page with nothing more to load costs per scroll.
const SCROLL_GRACE: Duration = Duration::from_secs(1);

/// How often `wait_for` looks for its element.
const POLL: Duration = Duration::from_millis(50);

/// What a render waited for, step by step.
#[derive(Debug, Default, Clone)]
pub struct Steps {
    started: Option<Instant>,
    /// Done steps, each with the time since the render started.
    pub done: Vec<String>,
    /// The step under way.
    pub waiting_for: String,
}

impl Steps {
    pub fn new() -> Steps {
        Steps {
            started: Some(Instant::now()),
            ..Steps::default()
        }
    }

    pub(super) fn begin(&mut self, what: impl Into<String>) {
        self.waiting_for = what.into();
    }

    pub(super) fn end(&mut self) {
        let ms = self.started.map_or(0, |s| s.elapsed().as_millis());
        let what = std::mem::take(&mut self.waiting_for);
        self.done.push(format!("{what} ({ms} ms)"));
    }
}

/// The load event of one navigation, among the tab's lifecycle events:
/// the one of the document `loader` loads. (A tab's `Page.loadEventFired`
/// could be its blank first document's, arriving after the navigation
/// began: a page under load was then taken before its scripts ran their
/// requests, as if it had settled.)
pub struct Loaded {
    pub events: EventStream<EventLifecycleEvent>,
    /// The navigation's loader; `None` (a same-document navigation) takes
    /// the first load event.
    pub loader: Option<LoaderId>,
}

impl Loaded {
    /// Resolves at the navigation's load event; `None` if the tab closed.
    async fn fired(&mut self) -> Option<()> {
        while let Some(event) = self.events.next().await {
            let ours = self.loader.as_ref().is_none_or(|l| *l == event.loader_id);
            if ours && event.name == "load" {
                return Some(());
            }
        }
        None
    }
}

/// Waits until the page is ready by `how`.
pub async fn until_ready(
    page: &Page,
    mut loaded: Loaded,
    traffic: &Arc<Traffic>,
    how: &Render,
    steps: &mut Steps,
) -> Result<(), String> {
    steps.begin("the load event");
    loaded
        .fired()
        .await
        .ok_or("the page closed before it loaded")?;
    steps.end();
    quiet(traffic, how, steps).await;
    if let Some(css) = &how.wait_for {
        steps.begin(format!("an element matching `{css}`"));
        element(page, css).await?;
        steps.end();
    }
    for n in 1..=how.scroll {
        steps.begin(format!("scroll {n} of {}", how.scroll));
        let before = traffic.started();
        page.evaluate(SCROLL).await.map_err(|e| e.to_string())?;
        // What the scroll sets off may start late on a busy machine (an
        // observer's callback, then its fetch): wait for it a while.
        traffic.one_more_than(before, SCROLL_GRACE).await;
        traffic.idle(Instant::now(), NETWORK_IDLE).await;
        steps.end();
    }
    Ok(())
}

/// The network quiet, when the rule waits for it.
async fn quiet(traffic: &Traffic, how: &Render, steps: &mut Steps) {
    if how.wait == Wait::NetworkIdle {
        steps.begin(format!(
            "the network idle, {} ms without a request in flight",
            NETWORK_IDLE.as_millis()
        ));
        traffic.idle(Instant::now(), NETWORK_IDLE).await;
        steps.end();
    }
}

/// Polls until an element matches `css`.
async fn element(page: &Page, css: &str) -> Result<(), String> {
    let quoted = serde_json::to_string(css).map_err(|e| e.to_string())?;
    let script = format!("document.querySelector({quoted}) !== null");
    loop {
        let found = page
            .evaluate(script.as_str())
            .await
            .map_err(|e| e.to_string())?
            .into_value::<bool>()
            .unwrap_or(false);
        if found {
            return Ok(());
        }
        tokio::time::sleep(POLL).await;
    }
}
