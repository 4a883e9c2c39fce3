//! What runs beside a spider's loop: lease renewal with the worker's
//! heartbeat (and the cluster's numbers for the metrics), and the sweep of
//! per-host entries that can no longer matter (see
//! [`crate::frontier::Backend::sweep`]).

use std::time::Duration;

use super::{hostname, now_rfc3339, SpiderRun, QUIET_RECHECK};
use crate::frontier::{now_secs, Frontier, Heartbeat, Swept};

/// The tasks beside a spider's loop, stopped with it.
pub(super) struct Background(Vec<tokio::task::JoinHandle<()>>);

impl Background {
    pub fn stop(self) {
        for task in self.0 {
            task.abort();
        }
    }
}

impl SpiderRun {
    /// Starts lease renewal and the heartbeat, the sweep, the pause's
    /// watch and the periodic progress line.
    pub(super) fn spawn_background(&self) -> Background {
        let mut tasks = vec![
            self.spawn_upkeep(),
            self.spawn_sweep(),
            self.spawn_pause_watch(),
        ];
        tasks.extend(super::progress::spawn_log_stats(
            self.spider.name.clone(),
            self.frontier.clone(),
            self.progress.clone(),
            self.settings.log_stats_interval,
        ));
        Background(tasks)
    }

    /// Deletes per-host entries that can no longer matter from Redis, every
    /// [`SWEEP_EVERY`], a budget in proportion to the pages committed.
    fn spawn_sweep(&self) -> tokio::task::JoinHandle<()> {
        let frontier = self.frontier.clone();
        let progress = self.progress.clone();
        let robots_ttl = self.settings.robotstxt_ttl;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SWEEP_EVERY);
            let mut pages = progress.counts().commits;
            // Steps skipped while the spider is idle and the last step
            // found nothing to delete, so an idle worker costs Redis little
            // (one step per SWEEP_IDLE_EVERY).
            let mut skip = 0u32;
            loop {
                tick.tick().await;
                let now = progress.counts().commits;
                let worked = now > pages;
                if !worked && skip > 0 {
                    skip -= 1;
                    continue;
                }
                let budget = sweep_budget(now.saturating_sub(pages));
                pages = now;
                match frontier.sweep(budget, robots_ttl).await {
                    Ok(swept) => {
                        tracing::trace!(?swept, "swept per-host entries");
                        if !worked && swept == Swept::default() {
                            skip = (SWEEP_IDLE_EVERY.as_secs() / SWEEP_EVERY.as_secs().max(1))
                                .saturating_sub(1) as u32;
                        }
                    }
                    // Nothing is lost: the next step goes on from the same place.
                    Err(e) => {
                        tracing::debug!(error = %e, "sweeping per-host entries failed; retrying")
                    }
                }
            }
        })
    }

    /// Renews leases and records the heartbeat, every [`Heartbeat::EVERY`]
    /// (or a third of the lease timeout, when that is shorter).
    fn spawn_upkeep(&self) -> tokio::task::JoinHandle<()> {
        let frontier = self.frontier.clone();
        let inflight = self.inflight.clone();
        let progress = self.progress.clone();
        let metrics = self.metrics.clone();
        let spider = self.spider.name.clone();
        let lease = self.settings.lease_timeout;
        // Leases are renewed well before they expire, and the heartbeat is
        // fresh enough for `stats` to show live numbers.
        let every = (self.settings.lease_timeout / 3)
            .min(Heartbeat::EVERY)
            .max(Duration::from_millis(100));
        let started = now_rfc3339();
        let host = hostname();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let ids: Vec<String> = inflight
                    .lock()
                    .map(|s| s.iter().cloned().collect())
                    .unwrap_or_default();
                match frontier.renew(&ids).await {
                    Ok(lost) if !lost.is_empty() => tracing::warn!(count = lost.len(), "leases lost (expired while Redis was away?); those pages will not be committed by this worker"),
                    Ok(_) => {}
                    Err(e) => tracing::debug!(error = %e, "lease renewal failed; retrying"),
                }
                let beat = Heartbeat {
                    host: host.clone(),
                    pid: std::process::id(),
                    started: started.clone(),
                    pages: progress.counts().pages,
                    heartbeat: now_secs(),
                    version: env!("CARGO_PKG_VERSION").to_string(),
                };
                let _ = frontier.heartbeat(&beat).await;
                // The Bloom chain's next filter, made ahead of need.
                if let Err(e) = frontier.grow_dupefilter().await {
                    tracing::debug!(error = %e, "making room in the dupefilter failed; retrying");
                }
                if let Some(m) = &metrics {
                    m.set_in_flight(&spider, ids.len());
                    if let Some(cluster) = read_cluster(&frontier, lease).await {
                        m.set_cluster(&spider, cluster);
                    }
                }
            }
        })
    }
}

/// How often a worker sweeps stale per-host entries out of Redis…
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// …or this often while the spider is idle and finds nothing to delete…
const SWEEP_IDLE_EVERY: Duration = QUIET_RECHECK;
/// …looking at this many entries of each per-host key when idle…
const SWEEP_BASE: usize = 256;
/// …plus this many per page it committed since the last sweep (a page
/// brings at most one new host, so the sweep outpaces new hosts: the keys
/// hold about twice the hosts of the last stretch of activity at most)…
const SWEEP_PER_PAGE: usize = 2;
/// …but at most this many, so one step stays short.
const SWEEP_MAX: usize = 2048;

/// The sweep's budget after `pages` committed since the last one.
fn sweep_budget(pages: u64) -> usize {
    (SWEEP_BASE + SWEEP_PER_PAGE * pages.min(SWEEP_MAX as u64) as usize).min(SWEEP_MAX)
}

/// The cluster's state for the metrics, read in a few round trips every
/// heartbeat (never per request).
async fn read_cluster(frontier: &Frontier, lease: Duration) -> Option<crate::metrics::Cluster> {
    let queues = frontier.status().await.ok()?;
    let now = now_secs();
    let live_within = Heartbeat::gone_after(lease).as_secs_f64();
    let workers_live = frontier
        .workers()
        .await
        .ok()?
        .iter()
        .filter(|(_, beat)| now - beat.heartbeat <= live_within)
        .count() as u64;
    let leases_expired = frontier.stat(crate::stats::LEASE_EXPIRED).await.ok()?;
    let hosts_backed_off = frontier.hosts_backed_off().await.ok()?;
    Some(crate::metrics::Cluster {
        queues,
        workers_live,
        leases_expired,
        hosts_backed_off,
    })
}
