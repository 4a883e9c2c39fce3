//! The downloader stage: from a leased request to a response the extractor
//! can read, or to an outcome decided here. In order:
//!
//! 1. [`politeness`]: wait for the host's cluster-wide slot (holding no
//!    download slot), then take a download slot and one of the host's; a
//!    request whose host this worker saw slowed down after it was leased
//!    takes a fresh slot at the new pace first, or goes back to the queue
//!    (see [`politeness::Turn::pace`]);
//! 2. [`robots`]: obey robots.txt, fetched once for the cluster and cached
//!    in Redis (a Crawl-delay learnt now, or a slot that passed while
//!    robots.txt was fetched, takes a fresh slot); a robots.txt that could
//!    not be fetched puts the request off like a retry;
//! 3. [`session`]: for a members-only site, the cluster's login session
//!    (its cookie sent, a logged-out response noticed and the request sent
//!    again after one login for the cluster);
//! 4. [`client`]: the HTTP exchange itself (SSRF guard, timeouts, size
//!    limits, decompression, proxies, cookies);
//! 5. [`redirect`] turns a 3xx into a new request, and [`retry`] schedules
//!    a retry (or records a failure) for network errors and retried
//!    statuses;
//! 6. [`render`]: a page whose rule renders it is opened in headless
//!    Chromium, still holding its slots, and its DOM replaces its body
//!    (a render that fails is retried as a download that failed).
//!
//! What it returns ([`Downloaded`]) is either a response to extract or the
//! page's commit, already decided; the stats of the download are counted
//! into the caller's tally either way. It never parses a page.
//!
//! What it keeps per host is bounded whatever the crawl ([`PerHost`]): a
//! host's slots and robots.txt fetch lock exist while a request for it is
//! in progress ([`in_use`]), what its failures said is kept for a lease
//! after the last ([`politeness`]), robots.txt policies and cookies are
//! caches with a size cap, and idle connections close after a short
//! timeout.

pub mod budget;
pub mod cache;
pub mod client;
mod in_use;
mod logged_in;
pub mod politeness;
pub mod redirect;
pub mod render;
pub mod retry;
pub mod robots;
pub mod session;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::downloader::render::Renderer;
pub use client::{FetchError, Fetched, HttpClient};
use politeness::{Pace, Politeness};
use retry::Failure;
use robots::{RobotsGate, Verdict};

use crate::frontier::outage::until_done;
use crate::frontier::{Frontier, HandBack, HostOutcome, PageResult};
use crate::metrics::Metrics;
use crate::request::Request;
use crate::settings::Settings;
use crate::spider::session::SecretText;
use crate::spider::Spider;
use crate::stats::{self, Tally};

/// What gives up a request not yet downloading (waiting for its host's
/// slot): the worker stopping, or the spider paused. Either sends it back
/// to the queue; a download in progress is not cut. And while it waits
/// for one of the worker's own download slots, the worker found holding
/// over twice its fair share of the crawl's leases (`hand_back`, see
/// [`HandBack`]): a peer with a free slot starts it sooner.
#[derive(Debug, Clone)]
pub struct GiveUp {
    pub shutdown: watch::Receiver<bool>,
    pub paused: watch::Receiver<bool>,
    pub hand_back: HandBack,
}

impl GiveUp {
    /// Resolves once the worker stops (or its stop signal is gone) or the
    /// spider is paused.
    async fn wait(mut self) {
        let paused = async {
            // The pause's sender lives as long as the spider's run; without
            // it, only a stop gives a request up.
            if self.paused.wait_for(|paused| *paused).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            _ = self.shutdown.wait_for(|stop| *stop) => {}
            _ = paused => {}
        }
    }
}

/// What a download gave.
#[derive(Debug)]
pub enum Downloaded {
    /// A response for the extractor, and what it says about its host.
    Response { fetched: Fetched, host: HostOutcome },
    /// Nothing to extract: a retry, a failure, a redirect, or robots.txt
    /// said no. The page's commit, without its stats (in the tally).
    Decided(Box<PageResult>),
    /// The download did not start and the request goes back to the queue:
    /// the worker is stopping, or the host was slowed down after the
    /// request was leased (it is leased again at the new pace).
    NotStarted,
}

impl Downloaded {
    /// What it says about its host, for adaptive back-off.
    fn host_outcome(&self) -> HostOutcome {
        match self {
            Downloaded::Response { host, .. } => *host,
            Downloaded::Decided(page) => page.host,
            Downloaded::NotStarted => HostOutcome::None,
        }
    }
}

/// What a downloader keeps per host right now (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerHost {
    /// Hosts with a request waiting for or holding one of their slots.
    pub slots: usize,
    /// Hosts whose failures or back-off this worker remembers (for a lease
    /// after their last response).
    pub slowed: usize,
    /// Hosts whose robots.txt policy is cached in this worker.
    pub robots_cached: usize,
    /// Hosts whose robots.txt policy a task is fetching or waiting for.
    pub robots_fetching: usize,
    /// Sites whose cookies the jar remembers.
    pub cookie_sites: usize,
}

/// What happens before a download: its slots, or an outcome already.
enum Ready {
    Go(politeness::Slots),
    Done(Downloaded),
}

/// One spider's downloader in this worker; cheap to share behind an `Arc`.
pub struct Downloader {
    spider: Arc<Spider>,
    settings: Arc<Settings>,
    frontier: Frontier,
    client: HttpClient,
    robots: RobotsGate,
    politeness: Politeness,
    /// Where download times go, when metrics are served.
    metrics: Option<Metrics>,
    /// The page cache for developing spiders, when it is on.
    cache: Option<cache::HttpCache>,
    /// The cluster's login session, when the spider has `[session]`.
    session: Option<session::Keeper>,
    /// Headless Chromium, when a rule renders its pages.
    renderer: Option<Renderer>,
}

impl Downloader {
    pub fn new(
        spider: Arc<Spider>,
        settings: Arc<Settings>,
        frontier: Frontier,
        metrics: Option<Metrics>,
        share: Arc<crate::worker::pool::Share>,
    ) -> Result<Downloader, FetchError> {
        let client = match share.budget() {
            Some(budget) => HttpClient::within(&settings, budget)?,
            None => HttpClient::new(&settings)?,
        };
        // Never on a shared crawl (`run` refuses it with the reason).
        let cache = cache::HttpCache::from_settings(&settings).filter(|_| !frontier.is_shared());
        let session = spider
            .session
            .clone()
            .map(|s| session::Keeper::new(s, frontier.clone(), client.clone()));
        let renderer = spider
            .rules
            .iter()
            .any(|r| r.render.is_some())
            .then(|| Renderer::new(settings.clone(), client.clone(), share.budget()));
        Ok(Downloader {
            renderer,
            cache,
            session,
            robots: RobotsGate::new(frontier.clone(), client.clone(), settings.clone()),
            politeness: Politeness::new(&settings, share),
            spider,
            settings,
            frontier,
            client,
            metrics,
        })
    }

    /// The worker's download slots, and the requests waiting for their turn.
    pub fn politeness(&self) -> &Politeness {
        &self.politeness
    }

    /// What it keeps per host right now.
    pub fn per_host(&self) -> PerHost {
        let (robots_cached, robots_fetching) = self.robots.hosts_cached();
        PerHost {
            slots: self.politeness.hosts_in_use(),
            slowed: self.politeness.hosts_remembered(),
            robots_cached,
            robots_fetching,
            cookie_sites: self.client.cookie_sites(),
        }
    }

    /// Downloads `request` after waiting `wait` for its host's slot (it was
    /// reserved with spacing `paced_with`), counting stats into `stats`.
    /// Until the download starts, `give_up` gives it up: a stopping worker
    /// hands such requests back at once, and lets only downloads in
    /// progress use `shutdown_grace`; a paused one lets only those finish.
    /// Also says how many requests were waiting for the host slot it held
    /// when it went straight to one of them, 0 when it did not (see
    /// [`politeness::Turn::waiting_for_slot`]).
    pub async fn download(
        &self,
        request: &Request,
        wait: Duration,
        paced_with: Duration,
        stats: &mut Tally,
        give_up: GiveUp,
    ) -> (Downloaded, usize) {
        if let Some(replayed) = self.replay(request, stats) {
            return (self.rendered(request, replayed, None, stats).await, 0);
        }
        let turn = self.politeness.join(&request.host_key());
        let hand_back = give_up.hand_back.clone();
        let ready = tokio::select! {
            biased;
            _ = give_up.wait() => return (Downloaded::NotStarted, 0),
            ready = self.ready(request, &turn, wait, paced_with, stats, &hand_back) => ready,
        };
        let slots = match ready {
            Ready::Go(slots) => slots,
            Ready::Done(outcome) => return (outcome, 0),
        };
        let downloaded = self.fetch(request, stats).await;
        // Learnt while the slots are held, so the next request for the
        // host knows.
        turn.news(downloaded.host_outcome());
        drop(slots);
        (downloaded, turn.waiting_for_slot())
    }

    /// The page cache's copy of the response, as if it had been fetched
    /// (no politeness wait, no robots.txt: nothing reaches the site).
    fn replay(&self, request: &Request, stats: &mut Tally) -> Option<Downloaded> {
        let cache = self.cache.as_ref()?;
        // A stored page that shows the login session logged out (kept
        // before `[session]` was written, or by an older version) is not
        // replayed: it would send the crawl to the login page.
        let logged_out = |f: &Fetched| {
            self.session
                .as_ref()
                .is_some_and(|k| k.applies_to(&request.url) && k.logged_out(f))
        };
        let Some(fetched) = cache.get(request).filter(|f| !logged_out(f)) else {
            stats.add(stats::HTTPCACHE_MISS, 1);
            return None;
        };
        stats.add(stats::HTTPCACHE_HIT, 1);
        tracing::debug!(url = %request.url, "replayed from the page cache");
        Some(self.judge(request, fetched, stats))
    }

    /// Waits for the host's turn, obeys robots.txt and takes the slots.
    async fn ready(
        &self,
        request: &Request,
        turn: &politeness::Turn<'_>,
        wait: Duration,
        paced_with: Duration,
        stats: &mut Tally,
        hand_back: &HandBack,
    ) -> Ready {
        if !wait.is_zero() {
            self.politeness.wait_turn(wait).await;
        }
        let paced_with = if self.settings.robotstxt_obey {
            match self.obey_robots(request, paced_with, stats).await {
                Ok(paced_with) => paced_with,
                Err(decided) => return Ready::Done(decided),
            }
        } else {
            paced_with
        };
        self.take_slots(request, turn, paced_with, hand_back).await
    }

    /// Asks robots.txt about the request: the spacing its slot now keeps,
    /// or what became of it (forbidden, or robots.txt unavailable).
    async fn obey_robots(
        &self,
        request: &Request,
        paced_with: Duration,
        stats: &mut Tally,
    ) -> Result<Duration, Downloaded> {
        let checking = std::time::Instant::now();
        match self.robots.check(request).await {
            Verdict::Allowed { crawl_delay } => {
                // Leased before this worker knew the host's Crawl-delay,
                // or its slot passed while robots.txt was fetched (the
                // requests that waited for the same fetch would go out
                // together): take a fresh slot that respects both.
                let spacing = crawl_delay.max(paced_with);
                let late = !spacing.is_zero() && checking.elapsed() > spacing / 10;
                if crawl_delay > paced_with || late {
                    let host = request.host_key();
                    let wait =
                        until_done("reserve a politeness slot", &self.frontier.fatal(), || {
                            self.frontier
                                .reserve_slot(&host, crawl_delay, Duration::ZERO, None)
                        })
                        .await;
                    // Without a limit the slot is always reserved.
                    tokio::time::sleep(wait.unwrap_or_default()).await;
                    return Ok(spacing);
                }
                Ok(paced_with)
            }
            Verdict::Forbidden => {
                tracing::debug!(url = %request.url, "forbidden by robots.txt");
                stats.add(stats::ROBOTSTXT_FORBIDDEN, 1);
                Err(Downloaded::Decided(Box::default()))
            }
            Verdict::Unavailable { failure, again_in } => {
                // Not forbidden: "disallowed for now" (RFC 9309
                // 2.3.1.4) waits in Redis until robots.txt is fetched
                // again, or fails where --from-failed finds it.
                Err(Downloaded::Decided(Box::new(retry::robots_unavailable(
                    &self.settings,
                    request,
                    failure,
                    again_in,
                    stats,
                ))))
            }
        }
    }

    /// Takes the host's slots. Slowed down since this request's slot was
    /// reserved: a fresh slot at the new pace, or back to the queue.
    async fn take_slots(
        &self,
        request: &Request,
        turn: &politeness::Turn<'_>,
        mut paced_with: Duration,
        hand_back: &HandBack,
    ) -> Ready {
        let host = request.host_key();
        loop {
            // A slot free now is taken: only a request that would wait
            // for one goes back when the worker is asked to hand back.
            let slots = tokio::select! {
                biased;
                slots = turn.slots() => slots,
                () = hand_back.asked() => {
                    tracing::debug!(url = %request.url, host = %host, "this worker holds over twice its fair share of the crawl's leases: handed back to the queue for a peer to start");
                    return Ready::Done(Downloaded::NotStarted);
                }
            };
            let (spacing, hold) = match turn.pace(paced_with) {
                Pace::Go => return Ready::Go(slots),
                Pace::Repace { spacing, hold } => (spacing, hold),
                Pace::Requeue => {
                    tracing::debug!(url = %request.url, host = %host, "host held by a Retry-After since this request was leased, for longer than its lease: handed back to the queue");
                    return Ready::Done(Downloaded::NotStarted);
                }
            };
            drop(slots);
            let max_wait = self.politeness.max_wait();
            let reserved = until_done("reserve a politeness slot", &self.frontier.fatal(), || {
                self.frontier
                    .reserve_slot(&host, spacing, hold, Some(max_wait))
            })
            .await;
            // Too far for its lease: nothing was reserved, so no slot is
            // left unused in the host's schedule.
            let Some(wait) = reserved else {
                tracing::debug!(url = %request.url, host = %host, "host slowed down since this request was leased, its next slot too far for its lease: handed back to the queue");
                return Ready::Done(Downloaded::NotStarted);
            };
            tracing::debug!(url = %request.url, host = %host, wait_ms = wait.as_millis() as u64, "host slowed down since this request was leased: it waits for a slot at the new pace");
            self.politeness.will_wait();
            self.politeness.wait_turn(wait).await;
            paced_with = spacing;
        }
    }

    /// The HTTP exchange (with the login session, for its host) and what
    /// its response means.
    async fn fetch(&self, request: &Request, stats: &mut Tally) -> Downloaded {
        let keeper = self.session.as_ref().filter(|k| k.applies_to(&request.url));
        let fetched = match keeper {
            Some(keeper) => self
                .fetch_logged_in(keeper, request, stats)
                .await
                .map(|(fetched, cookie)| (fetched, Some(cookie))),
            None => self
                .exchange(request, None, stats)
                .await
                .map(|fetched| (fetched, None)),
        };
        match fetched {
            Ok((fetched, cookie)) => {
                self.store(request, &fetched, stats);
                let judged = self.judge(request, fetched, stats);
                self.rendered(request, judged, cookie, stats).await
            }
            Err(decided) => decided,
        }
    }

    /// A response to extract, rendered first when its rule says so (with
    /// the login session's `cookie` for the page's requests to its host);
    /// a render that fails is retried as a download that failed.
    async fn rendered(
        &self,
        request: &Request,
        downloaded: Downloaded,
        cookie: Option<SecretText>,
        stats: &mut Tally,
    ) -> Downloaded {
        let Downloaded::Response { fetched, host } = downloaded else {
            return downloaded;
        };
        let how = self
            .spider
            .rule_for(request.rule.as_deref(), &request.url)
            .and_then(|rule| rule.render.as_ref());
        let (Some(renderer), Some(how), true) =
            (&self.renderer, how, (200..300).contains(&fetched.status))
        else {
            return Downloaded::Response { fetched, host };
        };
        let session = cookie.and_then(|cookie| {
            let host = url::Url::parse(&fetched.url)
                .ok()?
                .host_str()?
                .to_ascii_lowercase();
            Some(crate::downloader::render::SessionCookie { host, cookie })
        });
        let rendering = renderer.render(request, fetched, how, session, stats).await;
        if let (Some(m), Ok(rendered)) = (&self.metrics, &rendering) {
            m.observe_render(&self.spider.name, rendered.report.elapsed.as_secs_f64());
        }
        match rendering {
            Ok(rendered) => Downloaded::Response {
                fetched: rendered.fetched,
                host,
            },
            Err(e) => {
                tracing::debug!(url = %request.url, error = %e, "render failed");
                self.failed(request, e.kind(), Failure::render(&e), host, stats)
            }
        }
    }

    /// A download (or its render) that failed, counted by `kind`: retried
    /// later, or recorded as failed.
    fn failed(
        &self,
        request: &Request,
        kind: &str,
        failure: Failure,
        host: HostOutcome,
        stats: &mut Tally,
    ) -> Downloaded {
        stats.add(stats::DOWNLOADER_EXCEPTION_COUNT, 1);
        stats.add_in(stats::DOWNLOADER_EXCEPTION_TYPE, kind, 1);
        Downloaded::Decided(Box::new(retry::retry_or_fail(
            &self.settings,
            request,
            failure,
            stats,
            host,
        )))
    }

    /// One exchange; a network failure is already the page's outcome. The
    /// session's cookie goes on a copy of the request sent once, never on
    /// the request that is retried or recorded.
    async fn exchange(
        &self,
        request: &Request,
        cookie: Option<&SecretText>,
        stats: &mut Tally,
    ) -> Result<Fetched, Downloaded> {
        stats.add(stats::DOWNLOADER_REQUEST_COUNT, 1);
        stats.add_in(stats::DOWNLOADER_REQUEST_METHOD, &request.method, 1);
        let started = std::time::Instant::now();
        let fetched = match cookie {
            Some(cookie) => {
                let mut sent = request.clone();
                sent.headers
                    .retain(|(k, _)| !k.eq_ignore_ascii_case("cookie"));
                sent.headers
                    .push(("Cookie".into(), cookie.expose().to_string()));
                self.client.fetch(&sent).await
            }
            None => self.client.fetch(request).await,
        };
        if let Some(m) = &self.metrics {
            m.observe_download(&self.spider.name, started.elapsed().as_secs_f64());
        }
        fetched.map_err(|e| {
            self.failed(
                request,
                e.kind(),
                Failure::error(&e),
                HostOutcome::None,
                stats,
            )
        })
    }

    /// Keeps the response in the page cache, when it is on. A response
    /// that would be retried is not kept: replayed, it would fail every
    /// retry.
    fn store(&self, request: &Request, fetched: &Fetched, stats: &mut Tally) {
        let retried = self.settings.retry_http_codes.contains(&fetched.status);
        let logged_out = self
            .session
            .as_ref()
            .is_some_and(|k| k.applies_to(&request.url) && k.logged_out(fetched));
        if let Some(cache) = self.cache.as_ref().filter(|_| !retried && !logged_out) {
            cache.put(request, fetched);
            stats.add(stats::HTTPCACHE_STORE, 1);
        }
    }

    /// What a response means: a redirect to follow, a retry, or a page.
    fn judge(&self, request: &Request, fetched: Fetched, stats: &mut Tally) -> Downloaded {
        let settings = &self.settings;
        stats.add(stats::DOWNLOADER_RESPONSE_COUNT, 1);
        stats.add_in(stats::DOWNLOADER_RESPONSE_STATUS, fetched.status, 1);
        stats.add(stats::DOWNLOADER_RESPONSE_BYTES, fetched.body.len() as i64);
        stats.add(stats::RESPONSE_RECEIVED_COUNT, 1);
        let status = fetched.status;
        let retry_after = fetched
            .header("retry-after")
            .and_then(retry::parse_retry_after);
        let host = if !settings.adaptive_backoff {
            HostOutcome::None
        } else if status == 429 || (retry_after.is_some() && (500..600).contains(&status)) {
            // The server said how busy it is: strict, for the whole cluster.
            HostOutcome::Slow {
                wait: retry_after
                    .unwrap_or_default()
                    .min(settings.adaptive_backoff_max_delay),
            }
        } else if (500..600).contains(&status) {
            // Sporadic ones cost nothing; a host failing most requests
            // backs off (in proportion to its recent error share).
            HostOutcome::Error
        } else if (200..400).contains(&status) {
            HostOutcome::Ok
        } else {
            HostOutcome::None
        };

        if settings.redirect_enabled && matches!(status, 301 | 302 | 303 | 307 | 308) {
            if let Some(location) = fetched.header("location") {
                let target = redirect::Redirect {
                    response_url: &fetched.url,
                    status,
                    location,
                };
                return Downloaded::Decided(Box::new(redirect::follow(
                    &self.spider,
                    settings,
                    request,
                    target,
                    stats,
                    host,
                )));
            }
        }
        if settings.retry_enabled && settings.retry_http_codes.contains(&status) {
            let failure = Failure::status(status, retry_after);
            return Downloaded::Decided(Box::new(retry::retry_or_fail(
                settings, request, failure, stats, host,
            )));
        }
        Downloaded::Response { fetched, host }
    }
}
