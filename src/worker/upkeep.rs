//! What runs beside a spider's loop: lease renewal with the worker's
//! heartbeat (and the cluster's numbers for the metrics), and the sweep of
//! per-host entries that can no longer matter (see
//! [`crate::frontier::Backend::sweep`]).

use std::collections::HashSet;
use std::time::{Duration, Instant};

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
    /// [`SWEEP_EVERY`] between the crew's workers, a budget in proportion
    /// to the pages committed.
    fn spawn_sweep(&self) -> tokio::task::JoinHandle<()> {
        let frontier = self.frontier.clone();
        let progress = self.progress.clone();
        let robots_ttl = self.settings.robotstxt_ttl;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SWEEP_EVERY);
            let mut pages = progress.counts().commits;
            let mut turns = SweepTurns::default();
            loop {
                tick.tick().await;
                let now = progress.counts().commits;
                let worked = now > pages;
                if turns.wait(worked) {
                    continue;
                }
                let budget = sweep_budget(now.saturating_sub(pages));
                pages = now;
                match frontier.sweep(budget, robots_ttl).await {
                    Ok(swept) => {
                        tracing::trace!(?swept, "swept per-host entries");
                        turns.swept(&swept, worked);
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
        // `/healthz` fails once this spider's heartbeats have failed for as
        // long as the cluster waits before it counts the worker gone.
        let watch = metrics
            .as_ref()
            .map(|m| m.health().watch(&spider, Heartbeat::gone_after(lease)));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            let mut lost_leases = LostLeases::default();
            let mut renewed = Instant::now();
            loop {
                tick.tick().await;
                let held = || inflight.lock().map(|s| s.clone()).unwrap_or_default();
                let ids: Vec<String> = held().into_iter().collect();
                match frontier.renew(&ids).await {
                    Ok(lost) => {
                        let lost = lost_leases.confirm(lost, &held());
                        if lost > 0 {
                            tracing::warn!(
                                count = lost,
                                "{}",
                                lost_leases_said(lost, renewed.elapsed(), lease)
                            );
                        }
                        renewed = Instant::now();
                    }
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
                if frontier.heartbeat(&beat).await.is_ok() {
                    if let Some(w) = &watch {
                        w.reached();
                    }
                }
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

/// When a worker's next sweep step is due. The workers of a crew take
/// turns: with W of them each steps every W ticks (its first turn at a
/// random tick among them, so they do not all step together), so the
/// crew sweeps about once a second whatever its size, rather than W times
/// (each step examines hundreds of entries; the budget, in proportion to
/// the pages committed since the worker's last step, keeps the work the
/// same). While the spider is idle and its last step found nothing to
/// delete, a step comes only once per [`SWEEP_IDLE_EVERY`].
#[derive(Debug, Default)]
struct SweepTurns {
    /// Ticks to skip before the next step.
    skip: u64,
    /// Ticks to skip only while idle.
    idle_skip: u64,
    /// Whether this worker has taken its place among the crew's turns.
    placed: bool,
}

impl SweepTurns {
    /// Whether to skip this tick; `worked`: pages were committed since
    /// the last step.
    fn wait(&mut self, worked: bool) -> bool {
        if self.skip > 0 {
            self.skip -= 1;
            return true;
        }
        if !worked && self.idle_skip > 0 {
            self.idle_skip -= 1;
            return true;
        }
        false
    }

    /// After a step that deleted `swept`.
    fn swept(&mut self, swept: &Swept, worked: bool) {
        let crew = swept.crew.max(1);
        self.skip = if self.placed || crew == 1 {
            crew - 1
        } else {
            fastrand::u64(0..crew)
        };
        self.placed = crew > 1;
        self.idle_skip = if !worked && swept.is_empty() {
            (SWEEP_IDLE_EVERY.as_secs() / SWEEP_EVERY.as_secs().max(1)).saturating_sub(1)
        } else {
            0
        };
    }
}

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

/// Which leases the renewals say this worker lost. A page committed or
/// handed back while its id was being renewed reads as lost once: it is
/// no longer held by then, or by the next renewal. A lease is lost when
/// two renewals in a row miss it while this worker still holds it; each is
/// said once.
#[derive(Debug, Default)]
struct LostLeases {
    /// Missed by the last renewal, still held.
    missed: HashSet<String>,
    /// Lost and said.
    said: HashSet<String>,
}

impl LostLeases {
    /// `missed`: the ids the renewal says this worker does not hold;
    /// `held`: the ids it holds now. Returns how many leases are newly lost.
    fn confirm(&mut self, missed: Vec<String>, held: &HashSet<String>) -> usize {
        let missed: HashSet<String> = missed.into_iter().filter(|id| held.contains(id)).collect();
        let lost: Vec<String> = missed
            .iter()
            .filter(|id| self.missed.contains(*id) && !self.said.contains(*id))
            .cloned()
            .collect();
        self.said.retain(|id| held.contains(id));
        self.said.extend(lost.iter().cloned());
        self.missed = missed;
        lost.len()
    }
}

/// What lost leases mean: this worker did not renew them in time (Redis
/// away, or the worker stalled) and they went back to the queue (or, for
/// a request whose lease had expired `max_lease_expiries` times, to the
/// dead letters).
fn lost_leases_said(lost: usize, since_renewal: Duration, lease: Duration) -> String {
    format!(
        "{} expired before this worker renewed {} (the previous renewal was {} ago, lease_timeout {}): back in the queue for any worker (or set aside in the dead letters once a request's lease has expired max_lease_expiries times), {} not be committed by this one",
        crate::wording::count(lost, "lease"),
        if lost == 1 { "it" } else { "them" },
        crate::wording::duration(since_renewal),
        crate::wording::duration(lease),
        if lost == 1 { "its page will" } else { "their pages will" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[&str]) -> HashSet<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_page_committed_during_the_renewal_is_no_lost_lease() {
        let mut l = LostLeases::default();
        // Committed between reading the ids and the renewal: no longer held.
        assert_eq!(l.confirm(vec!["a".into()], &set(&["b"])), 0);
        // Committed in Redis, its task not yet told: held for one renewal.
        assert_eq!(l.confirm(vec!["c".into()], &set(&["b", "c"])), 0);
        assert_eq!(l.confirm(Vec::new(), &set(&["b"])), 0);
        // Missed twice while held: lost, said once.
        assert_eq!(l.confirm(vec!["b".into()], &set(&["b"])), 0);
        assert_eq!(l.confirm(vec!["b".into()], &set(&["b"])), 1);
        assert_eq!(l.confirm(vec!["b".into()], &set(&["b"])), 0);
        assert!(
            lost_leases_said(1, Duration::from_secs(12), Duration::from_secs(30)).starts_with(
                "1 lease expired before this worker renewed it (the previous renewal was"
            )
        );
    }

    /// The ticks a worker steps on, over `ticks` ticks, with a crew of
    /// `crew` and pages committed on every tick.
    fn steps(turns: &mut SweepTurns, crew: u64, ticks: u64) -> Vec<u64> {
        let swept = Swept {
            crew,
            ..Swept::default()
        };
        (0..ticks)
            .filter(|_| {
                let step = !turns.wait(true);
                if step {
                    turns.swept(&swept, true);
                }
                step
            })
            .collect()
    }

    #[test]
    fn a_crews_workers_take_turns_to_sweep() {
        // Alone: every tick.
        assert_eq!(steps(&mut SweepTurns::default(), 1, 4), [0, 1, 2, 3]);
        // One of four: every fourth tick, after a first turn somewhere in
        // the first four.
        let mut turns = SweepTurns::default();
        let taken = steps(&mut turns, 4, 41);
        assert_eq!(taken[0], 0);
        assert!((1..=4).contains(&taken[1]), "{taken:?}");
        assert!(
            taken.windows(2).skip(1).all(|w| w[1] - w[0] == 4),
            "{taken:?}"
        );
        // Idle with nothing to delete: once per idle period.
        let mut idle = SweepTurns::default();
        idle.swept(&Swept::default(), false);
        let period = SWEEP_IDLE_EVERY.as_secs() / SWEEP_EVERY.as_secs();
        let waited = (0..period * 2).take_while(|_| idle.wait(false)).count() as u64;
        assert_eq!(waited, period - 1);
    }
}
