//! The end of a spider's run: pages in flight finish within the grace
//! period (or stop at once after a fatal error) and the leases of the
//! rest go back to the queue; the finish is recorded in the stats; the
//! worker says what it did and, on a drained crawl that never had work,
//! where the work may have gone.

use std::time::Duration;

use tokio::task::JoinSet;

use super::{RunSummary, SpiderRun, StopReason};
use crate::frontier::Leased;

impl SpiderRun {
    /// Stops the pages still in flight: at once when Redis failed for good
    /// (pages cannot be committed; a commit that failed wrote nothing), or
    /// within the grace period on a stop.
    pub(super) async fn stop_pages(
        &self,
        tasks: &mut JoinSet<Vec<Leased>>,
        fatal: bool,
        reason: StopReason,
    ) {
        if fatal {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
            self.hand_back().await;
        } else if reason == StopReason::Shutdown {
            self.drain(tasks).await;
        }
    }

    /// Lets pages in flight finish within the grace period, then hands the
    /// leases of the unfinished ones (and of any request leased meanwhile)
    /// back to the queue at once.
    pub(super) async fn drain(&self, tasks: &mut JoinSet<Vec<Leased>>) {
        let grace = self.settings.shutdown_grace;
        if !tasks.is_empty() {
            tracing::info!(
                pages = tasks.len(),
                "stopping: letting downloads in progress finish (up to {}); requests not yet started go back to the queue",
                crate::wording::duration(grace)
            );
        }
        let finished =
            tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
        if finished.is_err() {
            tasks.abort_all();
            while tasks.join_next().await.is_some() {}
        }
        self.hand_back().await;
    }

    /// Hands the leases of the pages not finished back to the queue.
    pub(super) async fn hand_back(&self) {
        let left = self.inflight_ids();
        if !left.is_empty() {
            match self.frontier.release(&left).await {
                Ok(n) => {
                    tracing::info!(handed_back = n, "unfinished pages handed back to the queue")
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not hand pages back; their leases expire and other workers take them")
                }
            }
        }
    }

    /// Hands back the leases other workers' commits handed this one and
    /// it never started (see `frontier::redis::handed`).
    pub(super) async fn hand_back_handed(&self) {
        let handed: Vec<String> = self
            .frontier
            .take_handed()
            .into_iter()
            .map(|l| l.id)
            .collect();
        if handed.is_empty() {
            return;
        }
        match self.frontier.release(&handed).await {
            Ok(n) => tracing::debug!(
                handed_back = n,
                "leases handed to this worker and not started handed back to the queue"
            ),
            Err(e) => {
                tracing::warn!(error = %e, "could not hand back the leases other workers handed this one; they expire and go back to the queue")
            }
        }
    }

    /// Records the finish in the stats and takes this worker off the
    /// list of live workers.
    pub(super) async fn record_stop(&self, reason: StopReason) {
        let _ = self.frontier.unregister().await;
        if let Err(e) = self.frontier.record_finish(reason.finish_reason()).await {
            tracing::warn!(error = %e, "could not record finish_time in the stats");
        }
    }

    /// Says what this worker did and the crawl's stats; returns the
    /// summary.
    pub(super) async fn report(&self, reason: StopReason, elapsed: Duration) -> RunSummary {
        let name = self.spider.name.clone();
        let counts = self.progress.counts();
        // The one summary of this spider's run in this worker (a whole
        // line, written at once: workers may share one standard error).
        // Its own target, so that it can be shown alone
        // (CRAWLWORKER_LOG=warn,crawlworker::summary=info).
        tracing::info!(target: "crawlworker::summary", spider = %name, "spider `{name}` stopped ({reason}) after {:.1} s: {}", elapsed.as_secs_f64(), counts.describe());
        if reason == StopReason::Drained && counts.commits == 0 && self.frontier.is_shared() {
            self.warn_if_never_any_work().await;
        }
        if let Ok(mut stats) = self.frontier.stats().await {
            stats.sort();
            let lines: Vec<String> = stats.iter().map(|(k, v)| format!("  {k}: {v}")).collect();
            let whose = if self.frontier.is_shared() {
                "cluster stats"
            } else {
                "stats"
            };
            // No field after the message: in text it would be glued to
            // the last stat's value. The spider is named in the first line.
            tracing::info!("{whose} of spider `{name}`:\n{}", lines.join("\n"));
        }
        RunSummary {
            spider: name,
            counts,
            reason,
            elapsed,
        }
    }

    /// Nothing anywhere, ever: most often entries pushed to another key (a
    /// spider name or [keys] that does not match).
    async fn warn_if_never_any_work(&self) {
        let mut ever = 0;
        for stat in [
            crate::stats::RESPONSE_RECEIVED_COUNT,
            crate::stats::START_URLS_CLAIMED,
        ] {
            ever += self.frontier.stat(stat).await.unwrap_or(1);
        }
        if ever == 0 {
            tracing::warn!(
                spider = %self.spider.name,
                "nothing to crawl: the start key {} ({}) is empty and nothing is queued. Push start entries with `crawlworker push-urls SPIDER ENTRY…`, or check that the producer pushes to this key (the spider's name and [keys] name it)",
                self.frontier.keys().start_urls,
                self.spider.start.kind.as_str()
            );
        }
    }
}
