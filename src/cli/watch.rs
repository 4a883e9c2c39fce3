//! `crawlworker stats SPIDER --watch`: a cluster-wide view refreshed every
//! second until Ctrl-C: pages/s and items/s (from the stats hash), queue
//! sizes with their trend, live workers with their own rates and last
//! heartbeat, gone workers, error counts. On a terminal it takes the
//! alternate screen and gives it back on exit; elsewhere it prints one
//! frame after another.
//!
//! Reading and drawing are apart: [`Sample`] is one reading of Redis,
//! [`render`] turns two readings into the text a person sees.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crossterm::{cursor, execute, terminal};

use super::{tools, RedisArgs};
use crate::frontier::{now_secs, Heartbeat, QueueStatus, RedisFrontier};
use crate::stats;
use crate::wording::{count, duration};

/// How often the view is redrawn.
const EVERY: Duration = Duration::from_secs(1);

/// One reading of the cluster.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// When it was read.
    pub at: Option<Instant>,
    pub queues: QueueStatus,
    /// The stats hash.
    pub stats: BTreeMap<String, String>,
    /// Live workers: id → heartbeat, seconds since it.
    pub workers: Vec<(String, Heartbeat, f64)>,
    /// Workers that stopped beating while holding leases: id, pages.
    pub gone: Vec<(String, u64)>,
}

impl Sample {
    fn stat(&self, name: &str) -> u64 {
        self.stats
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }
}

/// Reads one sample.
async fn read(shards: &[RedisFrontier], lease: Duration) -> anyhow::Result<Sample> {
    let frontier = &shards[0];
    let crawl = crate::frontier::redis::sharded::read_crawl(shards).await?;
    let queues = crawl.status;
    let stats = crawl.stats.into_iter().collect();
    let now = now_secs();
    let live_within = Heartbeat::gone_after(lease).as_secs_f64();
    let mut leases: BTreeMap<String, u64> = crawl
        .leases
        .into_values()
        .map(|l| (l.worker, l.count))
        .collect();
    let mut workers = Vec::new();
    let mut gone = Vec::new();
    for (id, beat) in frontier.workers().await? {
        let age = (now - beat.heartbeat).max(0.0);
        let held = leases.remove(&id).unwrap_or(0);
        if age <= live_within {
            workers.push((id, beat, age));
        } else if held > 0 {
            gone.push((id, held));
        }
    }
    gone.extend(leases);
    workers.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Sample {
        at: Some(Instant::now()),
        queues,
        stats,
        workers,
        gone,
    })
}

/// A per-second rate between two readings of a counter.
fn rate(now: u64, before: u64, seconds: f64) -> f64 {
    if seconds <= 0.0 {
        0.0
    } else {
        now.saturating_sub(before) as f64 / seconds
    }
}

/// `↑12`, `↓3` or `·`: how a queue moved since the last reading.
fn trend(now: u64, before: u64) -> String {
    match now.cmp(&before) {
        std::cmp::Ordering::Greater => format!("↑{}", now - before),
        std::cmp::Ordering::Less => format!("↓{}", before - now),
        std::cmp::Ordering::Equal => "·".to_string(),
    }
}

/// The view of `now`, with rates and trends since `before`.
pub fn render(spider: &str, redis: &str, now: &Sample, before: &Sample) -> String {
    let seconds = match (now.at, before.at) {
        (Some(a), Some(b)) => a.duration_since(b).as_secs_f64(),
        _ => 0.0,
    };
    let pages = now.stat(stats::DOWNLOADER_RESPONSE_COUNT.name);
    let items = now.stat(stats::ITEM_SCRAPED_COUNT.name);
    let mut o = format!("crawlworker · spider {spider} · {redis}\n\n");
    o += &format!(
        "  pages  {pages:>10}  {:>8.1}/s\n  items  {items:>10}  {:>8.1}/s\n\n",
        rate(
            pages,
            before.stat(stats::DOWNLOADER_RESPONSE_COUNT.name),
            seconds
        ),
        rate(items, before.stat(stats::ITEM_SCRAPED_COUNT.name), seconds),
    );
    o += "queues\n";
    let (q, p) = (&now.queues, &before.queues);
    for (label, n, was) in [
        ("start entries", q.start, p.start),
        ("queued", q.queued, p.queued),
        ("in flight", q.inflight, p.inflight),
        ("delayed", q.delayed, p.delayed),
        ("scheduled", q.scheduled, p.scheduled),
        ("overdue", q.overdue, p.overdue),
        ("failed", q.failed, p.failed),
        ("dead letters", q.dead, p.dead),
    ] {
        o += &format!("  {label:<14} {n:>10}  {}\n", trend(n, was));
    }
    o += &format!(
        "\nerrors\n  retries {}  failed {}  download errors {}  set aside {}\n",
        now.stat(stats::RETRY_COUNT.name),
        now.stat(stats::FAILED_COUNT.name),
        now.stat(stats::DOWNLOADER_EXCEPTION_COUNT.name),
        now.stat(stats::DEADLETTER_COUNT.name),
    );
    o += &format!("\nworkers ({} live", now.workers.len());
    if !now.gone.is_empty() {
        o += &format!(", {} gone", now.gone.len());
    }
    o += ")\n";
    for (id, beat, age) in &now.workers {
        let before = before
            .workers
            .iter()
            .find(|(b, _, _)| b == id)
            .map_or(beat.pages, |(_, b, _)| b.pages);
        o += &format!(
            "  {id}  {} ({:.1}/s)  heartbeat {} ago\n",
            count(beat.pages as usize, "page"),
            rate(beat.pages, before, seconds),
            duration(Duration::from_secs_f64(*age))
        );
    }
    for (id, pages) in &now.gone {
        o += &format!(
            "  {id}  gone: {} waiting for its leases to expire\n",
            count(*pages as usize, "page")
        );
    }
    o += "\nCtrl-C to quit\n";
    o
}

/// Runs the view until Ctrl-C.
pub async fn watch(path: &Path, redis: &RedisArgs) -> anyhow::Result<ExitCode> {
    let (spider, shards) = tools::open_shards(path, redis).await?;
    let shown = spider.settings.redis_url.to_string();
    let lease = spider.settings.lease_timeout;
    let terminal = std::io::stdout().is_terminal();
    let mut out = std::io::stdout();
    if terminal {
        execute!(out, terminal::EnterAlternateScreen, cursor::Hide)?;
    }
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    let mut before = Sample::default();
    let result = loop {
        let now = match read(&shards, lease).await {
            Ok(s) => s,
            Err(e) => break Err(e),
        };
        let frame = render(&spider.name, &shown, &now, &before);
        let drawn = if terminal {
            execute!(
                out,
                cursor::MoveTo(0, 0),
                terminal::Clear(terminal::ClearType::All)
            )
            .and_then(|()| write!(out, "{}", frame.replace('\n', "\r\n")))
            .and_then(|()| out.flush())
        } else {
            super::output::line(&frame)
        };
        if let Err(e) = drawn {
            break Err(e.into());
        }
        before = now;
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = &mut interrupted => break Ok(ExitCode::SUCCESS),
        }
    };
    if terminal {
        execute!(out, cursor::Show, terminal::LeaveAlternateScreen)?;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_trends_come_from_two_readings() {
        let t0 = Instant::now();
        let mut before = Sample {
            at: Some(t0),
            ..Sample::default()
        };
        before
            .stats
            .insert("item_scraped_count".into(), "10".into());
        before.queues.queued = 50;
        let mut now = Sample {
            at: Some(t0 + Duration::from_secs(2)),
            ..Sample::default()
        };
        now.stats.insert("item_scraped_count".into(), "30".into());
        now.queues.queued = 40;
        let text = render("bbs", "redis://127.0.0.1:6379", &now, &before);
        assert!(text.contains("items          30      10.0/s"), "{text}");
        assert!(text.contains("queued                 40  ↓10"), "{text}");
        assert!(text.contains("workers (0 live)"), "{text}");
    }
}
