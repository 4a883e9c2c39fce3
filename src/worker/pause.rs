//! The pause as one worker sees it. `crawlworker pause` sets the spider's
//! pause in the frontier (no worker leases from then on) and says so on
//! the spider's wake channel; this task reads the pause again on every
//! such message, and every [`RECHECK`] in case a message was missed, and
//! keeps the worker's own view of it ([`SpiderRun::paused`]).
//!
//! The rest of the worker acts on that view: a request waiting for its
//! host's politeness slot (leased ahead, not downloading yet) gives up and
//! goes back to the queue at once, as on a stop (see
//! [`crate::downloader::GiveUp`]); downloads in progress finish and
//! commit; the spider's loop leases nothing until the pause ends. It does
//! not decide what is leased: the lease and commit steps read the pause in
//! the frontier themselves, so a worker that has not heard yet still
//! leases nothing.

use std::time::Duration;

use tokio::sync::watch;

use super::SpiderRun;
use crate::frontier::Heartbeat;

/// How often the pause is read without a message saying it changed: a
/// safety net for a wake-up subscription that was down.
const RECHECK: Duration = Heartbeat::EVERY;

impl SpiderRun {
    /// Keeps [`SpiderRun::paused`] up to date, saying when it changes.
    pub(super) fn spawn_pause_watch(&self) -> tokio::task::JoinHandle<()> {
        let frontier = self.frontier.clone();
        let paused = self.paused.clone();
        let downloader = self.downloader.clone();
        let inflight = self.inflight.clone();
        let spider = self.spider.name.clone();
        tokio::spawn(async move {
            let wake = frontier.wake();
            loop {
                match frontier.paused().await {
                    Ok(now) => {
                        if paused.send_if_modified(|was| std::mem::replace(was, now) != now) {
                            let waiting = downloader.politeness().waiting();
                            let held = inflight.lock().map_or(0, |s| s.len());
                            say(&spider, now, waiting, held);
                        }
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "cannot read whether the spider is paused; retrying")
                    }
                }
                wake.control(RECHECK).await;
            }
        })
    }

    /// Whether this worker knows the spider is paused.
    pub(super) fn paused(&self) -> watch::Receiver<bool> {
        self.paused.subscribe()
    }
}

/// Logs a pause (with what happens to the requests this worker holds) or
/// its end.
fn say(spider: &str, paused: bool, waiting: usize, held: usize) {
    if paused {
        let downloading = held.saturating_sub(waiting);
        tracing::info!(
            spider,
            "paused (crawlworker pause): {} not yet downloading go back to the queue, {} in progress finish{}; nothing is leased until crawlworker resume",
            crate::wording::count(waiting, "request"),
            crate::wording::count(downloading, "download"),
            if downloading > 0 { " and commit" } else { "" },
        );
    } else {
        tracing::info!(spider, "resumed (crawlworker resume): leasing again");
    }
}
