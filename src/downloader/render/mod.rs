//! Rendering: the pages of a rule with `render` go through headless
//! Chromium between their download and their extraction, and what is
//! extracted is the DOM the page's scripts built.
//!
//! A page is downloaded as any other (its politeness slot, robots.txt,
//! the login session, retries, redirects); then, still holding its slots,
//! it is opened in a tab of the worker's Chromium ([`browser`]), which
//! gets the downloaded response as its document and every other request
//! answered by the worker ([`serve`]); once ready by its rule
//! ([`settle`]) the tab's DOM is serialized and replaces the body. A page
//! that does not get ready within its rule's `timeout`, or whose browser
//! dies under it, fails as a download does: retried, then recorded as
//! failed. Nothing about a rendered page is kept in the browser between
//! pages: each gets a new tab, closed after it.
//!
//! At most `render_pages` pages render at once in a worker; each counts
//! `render_page_memory` against the worker's memory budget meanwhile.

mod browser;
mod processes;
mod serve;
mod settle;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::emulation::SetFocusEmulationEnabledParams;
use chromiumoxide::cdp::browser_protocol::fetch::EventRequestPaused;
use chromiumoxide::cdp::browser_protocol::page::{EventLifecycleEvent, NavigateParams};
use chromiumoxide::Page;
use tokio::sync::Semaphore;

pub use browser::executable;
pub use serve::SessionCookie;
pub use settle::Steps;

use super::budget::Budget;
use super::{Fetched, HttpClient};
use crate::extract::charset;
use crate::request::Request;
use crate::settings::Settings;
use crate::spider::render::Render;
use crate::stats::{self, Tally};

/// How long no request may be in flight before a page's network counts
/// as idle (`wait = "network-idle"`).
pub const NETWORK_IDLE: Duration = Duration::from_millis(500);

/// How long closing a tab may take before its browser is restarted.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// A rendered page, and how its render went.
#[derive(Debug)]
pub struct Rendered {
    /// The response with the rendered DOM as its body.
    pub fetched: Fetched,
    pub report: Report,
}

/// How a render went, for `crawlworker parse` and the stats.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// What it waited for, in order, each with the time it was done.
    pub waited: Vec<String>,
    pub subrequests: u32,
    pub blocked: u32,
    pub failed: u32,
    pub cut: u32,
    pub navigations_blocked: u32,
    /// The first subrequest the SSRF guard refused, why.
    pub refused: Option<String>,
    pub elapsed: Duration,
}

/// Why a page could not be rendered.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RenderError {
    #[error("cannot render {url}: {detail}")]
    Launch { url: String, detail: String },
    #[error("Chromium failed while rendering {url}: {detail}; it is restarted for the next page")]
    Browser { url: String, detail: String },
    #[error("rendering {url} timed out after {} (its rule's render timeout) while waiting for {waiting}", humantime::format_duration(*.after))]
    Timeout {
        url: String,
        after: Duration,
        waiting: String,
    },
}

impl RenderError {
    /// A short name for stats (`downloader/exception_type_count/<kind>`).
    pub fn kind(&self) -> &'static str {
        match self {
            RenderError::Launch { .. } => "RenderLaunchError",
            RenderError::Browser { .. } => "RenderBrowserError",
            RenderError::Timeout { .. } => "RenderTimeout",
        }
    }
}

/// One spider's renderer in this worker.
pub struct Renderer {
    settings: Arc<Settings>,
    client: HttpClient,
    browser: browser::Keeper,
    pages: Semaphore,
    budget: Option<Arc<Budget>>,
}

impl Renderer {
    pub fn new(
        settings: Arc<Settings>,
        client: HttpClient,
        budget: Option<Arc<Budget>>,
    ) -> Renderer {
        Renderer {
            browser: browser::Keeper::new(settings.clone()),
            pages: Semaphore::new(settings.render_pages.max(1) as usize),
            settings,
            client,
            budget,
        }
    }

    /// Renders `fetched`, the response to `request`, as its rule says.
    pub async fn render(
        &self,
        request: &Request,
        fetched: Fetched,
        how: &Render,
        session: Option<SessionCookie>,
        stats: &mut Tally,
    ) -> Result<Rendered, RenderError> {
        let started = Instant::now();
        let Ok(_turn) = self.pages.acquire().await else {
            return Err(self.browser_error(request, "the renderer is closed"));
        };
        let _memory = self
            .budget
            .as_ref()
            .map(|b| b.charge(self.settings.render_page_memory.0));
        let (instance, start) =
            self.browser
                .instance()
                .await
                .map_err(|detail| RenderError::Launch {
                    url: request.url.clone(),
                    detail,
                })?;
        if let browser::Start::Restarted(why) = start {
            tracing::info!(url = %request.url, reason = why, "Chromium restarted");
            stats.add(stats::RENDER_BROWSER_RESTARTS, 1);
        }
        let page = instance
            .new_page()
            .await
            .map_err(|e| self.browser_failed(&instance, request, e))?;
        let tab = Tab::new(self, &fetched, how, session);
        let mut steps = Steps::new();
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(how.timeout, tab.render(&page, &request.url, how, &mut steps)) => outcome,
            () = instance.gone() => Ok(Err("Chromium exited (killed, or crashed)".to_string())),
        };
        tab.stop();
        close(&instance, page).await;
        instance.served();
        let report = tab.report(steps.done.clone(), started.elapsed());
        count(stats, &report);
        let html = match outcome {
            Ok(Ok(html)) => html,
            Ok(Err(e)) => return Err(self.browser_failed(&instance, request, e)),
            Err(_) => {
                return Err(RenderError::Timeout {
                    url: request.url.clone(),
                    after: how.timeout,
                    waiting: steps.waiting_for,
                })
            }
        };
        stats.add(stats::RENDER_PAGE_COUNT, 1);
        Ok(Rendered {
            fetched: with_body(fetched, html),
            report,
        })
    }

    fn browser_error(&self, request: &Request, detail: &str) -> RenderError {
        RenderError::Browser {
            url: request.url.clone(),
            detail: detail.to_string(),
        }
    }

    /// A failed call: the browser is restarted before the next page.
    fn browser_failed(
        &self,
        instance: &browser::Instance,
        request: &Request,
        detail: String,
    ) -> RenderError {
        instance.mark_dead();
        self.browser_error(request, &detail)
    }
}

/// One page in its tab: what answers its requests, and their traffic.
struct Tab {
    server: Arc<serve::Server>,
    serving: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Tab {
    fn new(
        renderer: &Renderer,
        fetched: &Fetched,
        how: &Render,
        session: Option<SessionCookie>,
    ) -> Tab {
        Tab {
            server: Arc::new(serve::Server {
                client: renderer.client.clone(),
                document: fetched.clone(),
                block: how.block.clone(),
                max_subrequests: renderer.settings.render_max_subrequests,
                session,
                traffic: Arc::new(serve::Traffic::new()),
                counts: Arc::new(serve::Counts::default()),
            }),
            serving: std::sync::Mutex::new(None),
        }
    }

    /// Opens the page, waits until it is ready, and gives its DOM.
    async fn render(
        &self,
        page: &Page,
        url: &str,
        how: &Render,
        steps: &mut Steps,
    ) -> Result<String, String> {
        let err = |e: chromiumoxide::error::CdpError| e.to_string();
        // Every tab behaves as the focused one (frames, observers, timers
        // run as in front), as Playwright does.
        page.execute(SetFocusEmulationEnabledParams::new(true))
            .await
            .map_err(err)?;
        let paused = page
            .event_listener::<EventRequestPaused>()
            .await
            .map_err(err)?;
        let lifecycle = page
            .event_listener::<EventLifecycleEvent>()
            .await
            .map_err(err)?;
        let serving = tokio::spawn(self.server.clone().run(page.clone(), paused));
        *self.serving.lock().unwrap_or_else(|p| p.into_inner()) = Some(serving);
        steps.begin("the page's document");
        let navigated = page.execute(NavigateParams::new(url)).await.map_err(err)?;
        if let Some(error) = navigated.result.error_text.as_ref() {
            return Err(format!("its navigation failed: {error}"));
        }
        steps.end();
        let loaded = settle::Loaded {
            events: lifecycle,
            loader: navigated.result.loader_id.clone(),
        };
        settle::until_ready(page, loaded, &self.server.traffic, how, steps).await?;
        page.evaluate("document.documentElement.outerHTML")
            .await
            .map_err(err)?
            .into_value::<String>()
            .map_err(|e| format!("its DOM could not be read: {e}"))
    }

    /// Stops answering the page's requests.
    fn stop(&self) {
        if let Some(serving) = self
            .serving
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            serving.abort();
        }
    }

    fn report(&self, waited: Vec<String>, elapsed: Duration) -> Report {
        let c = &self.server.counts;
        Report {
            waited,
            subrequests: c.subrequests.load(Ordering::Relaxed),
            blocked: c.blocked.load(Ordering::Relaxed),
            failed: c.failed.load(Ordering::Relaxed),
            cut: c.cut.load(Ordering::Relaxed),
            navigations_blocked: c.navigations_blocked.load(Ordering::Relaxed),
            refused: c.refused.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            elapsed,
        }
    }
}

/// Closes a tab; one that does not close has its browser restarted.
async fn close(instance: &browser::Instance, page: Page) {
    if instance.is_dead() {
        return;
    }
    match tokio::time::timeout(CLOSE_TIMEOUT, page.close()).await {
        Ok(Ok(())) => {}
        _ => instance.mark_dead(),
    }
}

/// Counts a render's report into the page's stats.
fn count(stats: &mut Tally, report: &Report) {
    stats.add(
        stats::RENDER_MILLISECONDS,
        report.elapsed.as_millis() as i64,
    );
    stats.add(stats::RENDER_SUBREQUEST_COUNT, report.subrequests.into());
    stats.add(stats::RENDER_BLOCKED_COUNT, report.blocked.into());
    stats.add(stats::RENDER_SUBREQUEST_FAILED_COUNT, report.failed.into());
    stats.add(stats::RENDER_SUBREQUESTS_CUT, report.cut.into());
    stats.add(
        stats::RENDER_NAVIGATION_BLOCKED_COUNT,
        report.navigations_blocked.into(),
    );
}

/// The response with the rendered DOM for its body, in the page's own
/// encoding (characters it cannot hold as HTML character references), so
/// that its links are resolved as the browser resolved them: a GBK page's
/// query strings are percent-encoded in GBK.
fn with_body(mut fetched: Fetched, html: String) -> Fetched {
    let encoding = charset::decode(&fetched.body, fetched.header("content-type")).encoding;
    let (bytes, _, _) = encoding.encode(&html);
    fetched.body = bytes.into_owned();
    fetched
}
