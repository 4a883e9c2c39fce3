//! The HTTP server tests crawl: the demo site on 127.0.0.1:0 with the
//! fault routes of [`crate::faults`] and a `/robots.txt` a test sets.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use crawlworker_demo::{DemoServer, ServeOptions, Site};

use crate::faults::{FaultState, Faults, Robots};

/// The demo server with fault routes; it derefs to the [`DemoServer`] for
/// its address and hit counts.
#[derive(Debug)]
pub struct FixtureServer {
    server: DemoServer,
    faults: Arc<FaultState>,
}

impl FixtureServer {
    /// Serves `site` with fault routes on a free loopback port.
    pub async fn start(site: impl Into<Arc<Site>>) -> io::Result<FixtureServer> {
        FixtureServer::start_with_latency(site, Duration::ZERO).await
    }

    /// [`FixtureServer::start`], adding `latency` before every response
    /// (so a crawl lasts long enough to kill workers in the middle of it).
    pub async fn start_with_latency(
        site: impl Into<Arc<Site>>,
        latency: Duration,
    ) -> io::Result<FixtureServer> {
        FixtureServer::start_on(site, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), latency).await
    }

    /// [`FixtureServer::start_with_latency`] on a given loopback address,
    /// for tests whose data names the port.
    pub async fn start_on(
        site: impl Into<Arc<Site>>,
        addr: SocketAddr,
        latency: Duration,
    ) -> io::Result<FixtureServer> {
        let faults = Faults::default();
        let state = Arc::clone(&faults.state);
        let options = ServeOptions {
            latency,
            routes: Some(Arc::new(faults)),
            ..ServeOptions::default()
        };
        Ok(FixtureServer {
            server: DemoServer::start_on(site, addr, options).await?,
            faults: state,
        })
    }

    /// Sets what `/robots.txt` answers from now on (at first
    /// [`Robots::Missing`], the site's 404 page).
    pub fn set_robots(&self, robots: Robots) {
        self.faults.set_robots(robots);
    }

    /// Fault responses in progress: hanging or delayed requests and huge,
    /// endless or trickling bodies still being sent. Falls back to 0
    /// shortly after their clients give up.
    pub fn faults_in_progress(&self) -> usize {
        self.faults.in_progress()
    }

    /// Stops the server (fault responses in progress are cut at once) and
    /// waits for it to end.
    pub async fn stop(self) -> io::Result<()> {
        self.server.stop().await
    }
}

/// The most of `arrivals` (in order) that fall in any span of `window`:
/// what a rate limit must bound, as the server sees it.
pub fn peak(arrivals: &[std::time::Instant], window: Duration) -> usize {
    (0..arrivals.len())
        .map(|i| {
            arrivals[i..]
                .iter()
                .take_while(|t| **t - arrivals[i] < window)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Asserts that `arrivals` (in order) kept a pace of `delay` between
/// requests, as the server saw them: each gap at least half of it, and
/// the whole span within [`SEND_JITTER`] of `delay` per gap. The workers
/// space their slots exactly; an arrival also carries its worker's send
/// delay, which a busy machine stretches to tens of milliseconds (it
/// shortens one gap by that, and the span by at most that), while a lost
/// pace sends requests together. `what` names the pace in the message.
pub fn assert_paced(arrivals: &[std::time::Instant], delay: Duration, what: &str) {
    let gaps: Vec<Duration> = arrivals.windows(2).map(|p| p[1] - p[0]).collect();
    let Some((first, last)) = arrivals.first().zip(arrivals.last()) else {
        return;
    };
    let span = *last - *first;
    let least = delay * gaps.len() as u32;
    assert!(
        gaps.iter().all(|g| *g >= delay / 2) && span + SEND_JITTER >= least,
        "{what} not kept: {} requests spanned {span:?} (a pace of {delay:?} spans {least:?}), gaps {gaps:?}",
        arrivals.len()
    );
}

/// How much a busy machine may delay one request's send past its slot
/// (seen: 69 ms on the 2-core machine with the suite and Chromium beside).
pub const SEND_JITTER: Duration = Duration::from_millis(120);

impl Deref for FixtureServer {
    type Target = DemoServer;

    fn deref(&self) -> &DemoServer {
        &self.server
    }
}
